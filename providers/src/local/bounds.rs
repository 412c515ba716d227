//! A local computer's bounds: the limits a spec gets, its cgroup made,
//! frozen and thawed, and released with whatever else bounds it.

use super::*;

impl LocalProvider {
    /// The limits a spec gets: its sizes checked against this machine, the
    /// defaults for the rest; None where no cgroup can be made, which
    /// refuses an explicit size naming what is missing.
    pub(super) fn limits_for(&self, spec: &ComputerSpec) -> Result<Option<cgroup::Limits>> {
        match &self.cgroups {
            Ok(_) => cgroup::Limits::from_sizes(&spec.sizes, &self.host).map(Some),
            Err(why) => {
                // pids is still bounded, by RLIMIT_NPROC (Prepared::max_procs).
                if let Some(n) = spec.sizes.pids
                    && !(cgroup::MIN_PIDS..=cgroup::MAX_PIDS).contains(&n)
                {
                    return Err(ProviderError::invalid(
                        "pids",
                        format!(
                            "pids {n} is out of range: from {} to {}",
                            cgroup::MIN_PIDS,
                            cgroup::MAX_PIDS
                        ),
                    ));
                }
                for (field, set) in [
                    ("cpus", spec.sizes.cpus.is_some()),
                    ("memoryMb", spec.sizes.memory_mb.is_some()),
                ] {
                    if set {
                        return Err(ProviderError::unsupported(format!(
                            "this host cannot bound a local computer's {field}: {why}; leave {field} out"
                        ))
                        .with_field(field));
                    }
                }
                Ok(None)
            }
        }
    }

    /// The computer's cgroup, made with its limits (blocking file writes,
    /// off the runtime's threads).
    pub(super) async fn make_cgroup(
        &self,
        id: &str,
        limits: cgroup::Limits,
    ) -> Result<Option<cgroup::ComputerCgroup>> {
        let Ok(cgroups) = &self.cgroups else {
            return Ok(None);
        };
        let cgroups = cgroups.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || cgroups.create(&id, &limits))
            .await
            .map_err(|e| {
                ProviderError::failed(format!("making the computer's cgroup failed: {e}"))
            })?
            .map(Some)
    }

    /// Freeze (`on`) or thaw the computer's cgroup: pause and resume.
    pub(super) async fn freeze(&self, meta: &Meta, on: bool) -> Result<()> {
        let cgroups = match (&self.cgroups, meta.limits.is_some()) {
            (Ok(c), true) => c.clone(),
            _ => {
                return Err(ProviderError::unsupported(format!(
                    "the local computer {} has no cgroup of its own (this server runs without cgroups), so it cannot be paused",
                    meta.id
                )));
            }
        };
        let id = meta.id.clone();
        tokio::task::spawn_blocking(move || cgroups.open(&id)?.pause(on))
            .await
            .map_err(|e| ProviderError::failed(format!("pausing failed: {e}")))?
    }

    /// Kill whatever is left in the cgroup `id` (`whose`: "the computer's")
    /// and remove it; none is fine, as is a host with no cgroups.
    pub(super) async fn release_cgroup(&self, id: &str, whose: &str) -> Result<()> {
        let Ok(cgroups) = &self.cgroups else {
            return Ok(());
        };
        let cgroups = cgroups.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || match cgroups.open(&id) {
            Ok(cg) => cg.release(),
            Err(e) if e.code == ErrorCode::NotFound => Ok(()),
            Err(e) => Err(e),
        })
        .await
        .map_err(|e| ProviderError::failed(format!("releasing {whose} cgroup failed: {e}")))?
    }

    /// Kill whatever is left in the computer's cgroup and remove it, and
    /// give back its uid. Nothing of the computer survives this, whatever
    /// it forked.
    pub(super) async fn release_bounds(&self, meta: &Meta) -> Result<()> {
        self.end_egress(meta).await?;
        if meta.limits.is_some() {
            self.release_cgroup(&meta.id, "the computer's").await?;
        }
        // Nothing of the computer runs now: its ACL entries come out, and
        // what it made in the shares goes to each share's owner.
        if let Some((uid, _)) = meta.user {
            for g in &meta.granted {
                crate::share::acl::revoke(g, uid, crate::share::owner_of(g)).map_err(|e| {
                    ProviderError::failed(format!(
                        "could not take the computer's ACL entry out of the share {}: {e}",
                        g.display()
                    ))
                })?;
            }
        }
        if meta.own_uid
            && let (Some(a), Some((uid, _))) = (&self.uids, meta.user)
        {
            a.release(uid)?;
        }
        Ok(())
    }
}
