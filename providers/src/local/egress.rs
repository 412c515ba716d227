//! A local computer whose network is an allowlist: the computer keeps no
//! route (as with none) and its one way out is `computerd egress`, started
//! here on the host side, outside the computer: as a uid of its own (a
//! root server), in a cgroup of its own with small bounds, its socket's
//! directory bound read-only into the computer at /run/egress, where init
//! hands it each connection made to 127.0.0.1:3128. It ends with the computer (it watches the
//! computer's first process, and its deadline is the computer's latest),
//! is ended by release, and a sweep removes one left behind. The network
//! is read back from the proxy's own argv, not assumed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use computerd::launch::{EgressArgs, Program, Time, UserSpec};
use computerd::protocol::egress::Allowlist;
use serde::{Deserialize, Serialize};

use super::lifecycle::{computerd_env, log_words};
use super::state::{Meta, Process};
use super::{LocalProvider, cgroup};
use crate::types::{ErrorCode, ProviderError, Result, Sizes};

/// Where init finds the proxy's socket inside the computer.
pub const SOCKET_INSIDE: &str = "/run/egress/egress.sock";
/// The proxy's own bounds: half a CPU, 256 MiB, 64 processes.
pub const CPUS: f64 = 0.5;
pub const MEMORY_MB: u64 = 256;
pub const PIDS: u64 = 64;
/// How long the proxy has to make its socket.
const READY_WAIT: Duration = Duration::from_secs(10);
/// The proxy's uid when a root server has no uid of its own to give it.
const NOBODY: u32 = 65534;

/// What the server knows of a computer's proxy (in meta.json).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressMeta {
    /// The list as given to the proxy, normalized.
    pub allow: Vec<String>,
    pub process: Option<Process>,
    /// The uid it runs as, when a root server gave it one.
    pub uid: Option<u32>,
    /// Whether the uid was allocated for it alone.
    pub own_uid: bool,
}

/// The name a computer's proxy holds its cgroup and uid by.
pub fn owner_of(id: &str) -> String {
    format!("{id}-egress")
}

/// The computer a proxy's cgroup or uid owner belongs to (itself when it
/// is a computer's own).
pub fn computer_of(owner: &str) -> &str {
    owner.strip_suffix("-egress").unwrap_or(owner)
}

/// The proxy's socket directory on the host.
pub fn dir_of(computer_dir: &Path) -> PathBuf {
    computer_dir.join("egress")
}

impl LocalProvider {
    /// Start the computer's proxy, once its first process runs (`pid`),
    /// and wait for its socket.
    pub(super) async fn start_egress(
        &self,
        meta: &mut Meta,
        dir: &Path,
        list: &Allowlist,
        pid: u32,
    ) -> Result<()> {
        let id = meta.id.clone();
        let mut em = EgressMeta {
            allow: list.entries(),
            ..EgressMeta::default()
        };
        let user = if self.root {
            match &self.uids {
                Some(a) => {
                    let uid = a.allocate(&owner_of(&id))?;
                    em.own_uid = true;
                    Some((uid, uid))
                }
                None => Some((NOBODY, NOBODY)),
            }
        } else {
            None
        };
        em.uid = user.map(|u| u.0);
        // Recorded now, so a failure below gives the uid back.
        meta.egress = Some(em.clone());
        let cg = match &self.cgroups {
            Ok(c) => {
                let limits = cgroup::Limits::from_sizes(
                    &Sizes {
                        cpus: Some(CPUS),
                        memory_mb: Some(MEMORY_MB),
                        disk_mb: None,
                        pids: Some(PIDS),
                    },
                    &self.host,
                )?;
                let (c, owner) = (c.clone(), owner_of(&id));
                Some(
                    tokio::task::spawn_blocking(move || c.create(&owner, &limits))
                        .await
                        .map_err(|e| {
                            ProviderError::failed(format!(
                                "making the egress proxy's cgroup failed: {e}"
                            ))
                        })??,
                )
            }
            Err(_) => None,
        };
        let edir = dir_of(dir);
        let socket = edir.join("egress.sock");
        let until = Time::from_unix_ms(meta.max_deadline_ms).ok_or_else(|| {
            ProviderError::invalid("maxDeadline", "the deadline is not a time computerd holds")
        })?;
        let mut args = EgressArgs::new(list.entries(), until, &socket);
        args.user = user.map(|(uid, gid)| UserSpec { uid, gid });
        args.client_gid = self.root.then(|| meta.user.map_or(0, |u| u.1));
        args.with_pid = Some(pid as i32);
        args.resolvers = self.opts.egress_resolvers.clone();
        args.cgroups = cg.as_ref().map(|c| c.dirs()).unwrap_or_default();
        let log = std::fs::File::create(dir.join("egress.log")).map_err(|e| {
            ProviderError::failed(format!("could not make the egress proxy's log: {e}"))
        })?;
        let mut cmd =
            tokio::process::Command::from(Program::at(&self.opts.computerd).command(args));
        cmd.current_dir("/").stdin(Stdio::null());
        computerd_env(&mut cmd, log)?;
        cmd.env("COMPUTERD_LOG", "info");
        let mut child = cmd
            .spawn()
            .map_err(|e| ProviderError::failed(format!("could not start the egress proxy: {e}")))?;
        em.process = child.id().and_then(|p| Process::of(p as i32));
        meta.egress = Some(em);
        let waited = tokio::time::Instant::now() + READY_WAIT;
        let ready = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Err(ProviderError::refused(format!(
                    "the egress proxy could not start ({status}): {}",
                    log_words(&dir.join("egress.log"))
                )));
            }
            if tokio::net::UnixStream::connect(&socket).await.is_ok() {
                break Ok(());
            }
            if tokio::time::Instant::now() >= waited {
                break Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the egress proxy did not listen within {} s: {}",
                        READY_WAIT.as_secs(),
                        log_words(&dir.join("egress.log"))
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        self.children.lock().await.insert(owner_of(&id), child);
        ready
    }

    /// End the computer's proxy, its cgroup and its uid. Gone is fine.
    pub(super) async fn end_egress(&self, meta: &Meta) -> Result<()> {
        let Some(em) = meta.egress.clone() else {
            return Ok(());
        };
        let owner = owner_of(&meta.id);
        let child = self.children.lock().await.remove(&owner);
        if let Some(p) = &em.process {
            p.signal(libc::SIGTERM);
            let until = tokio::time::Instant::now() + Duration::from_secs(2);
            while p.alive() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            p.signal(libc::SIGKILL);
        }
        if let Some(mut c) = child {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
        self.release_cgroup(&owner, "the egress proxy's").await?;
        if em.own_uid
            && let (Some(a), Some(uid)) = (&self.uids, em.uid)
        {
            a.release(uid)?;
        }
        Ok(())
    }

    /// The list the running proxy holds, read from its argv; refused when
    /// it is not running or holds another list than the computer's.
    pub(super) fn read_egress(&self, meta: &Meta) -> Result<Vec<String>> {
        let other = |why: String| {
            ProviderError::refused(format!(
                "the local computer {} has network allow, but its egress proxy {why}: it reaches nothing; make another computer",
                meta.id
            ))
        };
        let Some(em) = &meta.egress else {
            return Err(other("was never started".into()));
        };
        let Some(p) = em.process.as_ref().filter(|p| p.alive()) else {
            return Err(other("is not running".into()));
        };
        let argv = std::fs::read(format!("/proc/{}/cmdline", p.pid))
            .map_err(|e| other(format!("cannot be read ({e})")))?;
        let args: Vec<String> = argv
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a == "egress") {
            return Err(other("is another program".into()));
        }
        let held: Vec<&str> = args
            .iter()
            .filter_map(|a| a.strip_prefix("--allow="))
            .collect();
        let list = Allowlist::parse(&held).map_err(|e| other(format!("holds a bad list ({e})")))?;
        if list.entries() != em.allow {
            return Err(other(format!(
                "holds another list ({}) than the computer's ({})",
                list.entries().join(", "),
                em.allow.join(", ")
            )));
        }
        Ok(list.entries())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_owned_by_its_computer() {
        assert_eq!(owner_of("local-00ff"), "local-00ff-egress");
        assert_eq!(computer_of("local-00ff-egress"), "local-00ff");
        assert_eq!(computer_of("local-00ff"), "local-00ff");
    }
}
