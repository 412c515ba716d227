//! A `computerd spare` made ahead of the next computer, in a fresh cgroup
//! with the default limits, so that the kernel's wait for a first move
//! into a cgroup is paid off a create's path; a create hands it its
//! sandbox's arguments on its stdin.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use computerd::launch::{Program, SpareArgs};

use super::lifecycle::{Launch, Prepared, computerd_env, random_id};
use super::state::{self, Meta};
use super::{Isolation, LocalProvider, cgroup};
use crate::types::{ComputerSpec, ProviderError, Result};

/// A `computerd spare` made ahead of the next computer: already in a fresh
/// cgroup (so the kernel's wait for a first move into one is paid off the
/// call's path), waiting on its stdin for its sandbox's arguments.
pub(super) struct Spare {
    pub(super) id: String,
    pub(super) child: tokio::process::Child,
    pub(super) cgroup: cgroup::ComputerCgroup,
    /// Its stderr until it is a computer's (renamed to daemon.log then).
    pub(super) log: PathBuf,
}

impl LocalProvider {
    /// The spare, if one is ready and still waiting.
    pub(super) fn take_spare(&self) -> Option<Spare> {
        let mut spare = self
            .spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        match spare.child.try_wait() {
            Ok(None) => Some(spare),
            _ => {
                // It ended (a sweep, a kill): its cgroup goes too.
                let _ = spare.cgroup.release();
                let _ = std::fs::remove_file(&spare.log);
                None
            }
        }
    }

    /// Make the next spare in the background, unless one is ready or being
    /// made (only where computers get cgroups).
    pub(super) fn refill(&self) {
        use std::sync::atomic::Ordering;
        let (Ok(cgroups), Isolation::Namespaces) = (&self.cgroups, self.opts.isolation) else {
            return;
        };
        if self
            .spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
            || self.refilling.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let (cgroups, host) = (cgroups.clone(), self.host);
        let (computerd, state) = (self.opts.computerd.clone(), self.opts.state_dir.clone());
        let (slot, refilling) = (Arc::clone(&self.spare), Arc::clone(&self.refilling));
        tokio::spawn(async move {
            match make_spare(cgroups, host, &computerd, &state).await {
                Ok(spare) => {
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.is_none() {
                        *slot = Some(spare);
                    }
                }
                Err(e) => tracing::debug!("no spare sandbox: {}", e.message),
            }
            refilling.store(false, Ordering::Release);
        });
    }

    /// Hand a spare its sandbox: the computer starts from there, its
    /// cgroups joined long before.
    pub(super) async fn start_spare(
        &self,
        mut spare: Spare,
        dir: &Path,
        meta: &Meta,
        spec: &ComputerSpec,
        prep: &Prepared,
    ) -> Result<tokio::process::Child> {
        use tokio::io::AsyncWriteExt;
        let Launch::Sandbox(sandbox) = self.command_of(dir, meta, spec, prep)? else {
            return Err(ProviderError::failed("a spare is a sandbox's"));
        };
        // Its log becomes the computer's.
        let _ = std::fs::rename(&spare.log, dir.join("daemon.log"));
        let go = SpareArgs::go(&sandbox);
        let mut stdin = spare
            .child
            .stdin
            .take()
            .ok_or_else(|| ProviderError::failed("the spare sandbox has no stdin"))?;
        let sent = async {
            stdin.write_all(&go).await?;
            stdin.shutdown().await
        }
        .await;
        drop(stdin);
        if let Err(e) = sent {
            let _ = spare.child.start_kill();
            let _ = spare.child.wait().await;
            return Err(ProviderError::failed(format!(
                "the spare sandbox did not take its arguments: {e}"
            )));
        }
        Ok(spare.child)
    }
}

/// A spare: a fresh cgroup with the default limits and `computerd spare`
/// in it, its log under `<state>/spares`.
async fn make_spare(
    cgroups: cgroup::Cgroups,
    host: cgroup::Host,
    computerd: &Path,
    state: &Path,
) -> Result<Spare> {
    let id = random_id()?;
    let limits = cgroup::Limits::from_sizes(&Default::default(), &host)?;
    let cg = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || cgroups.create(&id, &limits))
            .await
            .map_err(|e| ProviderError::failed(format!("making a spare's cgroup failed: {e}")))??
    };
    let made = async {
        let dir = state.join("spares");
        std::fs::create_dir_all(&dir)
            .and_then(|()| state::make_private(&dir))
            .map_err(|e| ProviderError::failed(format!("could not make {}: {e}", dir.display())))?;
        let log_path = dir.join(format!("{id}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| ProviderError::failed(format!("could not make a spare's log: {e}")))?;
        let mut cmd = tokio::process::Command::from(
            Program::at(computerd).command(SpareArgs { cgroups: cg.dirs() }),
        );
        cmd.current_dir("/").stdin(Stdio::piped());
        computerd_env(&mut cmd, log)?;
        let child = cmd.spawn().map_err(|e| {
            ProviderError::failed(format!("could not start a spare computerd: {e}"))
        })?;
        Ok::<_, ProviderError>((child, log_path))
    }
    .await;
    match made {
        Ok((child, log)) => Ok(Spare {
            id,
            child,
            cgroup: cg,
            log,
        }),
        Err(e) => {
            let _ = cg.release();
            Err(e)
        }
    }
}
