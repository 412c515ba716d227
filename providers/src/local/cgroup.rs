//! A cgroup per local computer: its processes, memory and CPU bounded from
//! before its first program runs, read back as enforced, and everything in
//! it killed on release, whatever it forked.
//!
//! What the host gives is found once ([`Cgroups::detect`]), in this order:
//!
//! - **cgroup v2** with the `cpu`, `memory` and `pids` controllers. Under the
//!   server's own cgroup when that cgroup offers them (a delegated subtree, a
//!   systemd unit with `Delegate=yes`): cgroup v2 lets a cgroup hand
//!   controllers to children only while it holds no process ("no internal
//!   processes"), so the server's processes are moved into a leaf beside the
//!   computers' group, and whatever bounds the server still bounds them:
//!
//!   ```text
//!   <own>/computer-mcp-server/   the server (moved here once, at detection)
//!   <own>/computer-mcp/<id>/     one computer
//!   ```
//!
//!   Where the server's own cgroup is the root (a container's cgroup
//!   namespace) the root is exempt from that rule and `/computer-mcp` is made
//!   there; where the own cgroup lacks a controller, a root server uses
//!   `/computer-mcp` under the hierarchy's root.
//! - **cgroup v1** with separate `pids`, `memory` and `cpu` hierarchies (and
//!   `freezer` where mounted, to stop a fork bomb while it is killed). Each
//!   computer's groups are made under the server's own cgroup in each
//!   hierarchy, `<mount>/<own path>/computer-mcp/<id>`, so a bound on the
//!   server (a memory cgroup around it) still bounds its computers.
//! - **none**, with the reason in words (no controllers, an unprivileged
//!   server without delegation).
//!
//! `computer-mcp` above stands for the group a server passes in: one per
//! state directory ([`group_for`]: `computer-mcp-<hash>`), so a sweep sees
//! only its own computers' cgroups.
//!
//! Detection is `detect`'s; one computer's cgroup (limits written and
//! read back, kill, freeze, remove) is [`ComputerCgroup`], in `computer`.
//! Sizes are [`crate::sizing`]'s, named here too.
//!
//! The calls block (release waits, bounded, for the processes to go): call
//! them from a blocking thread in async code.

mod computer;
mod detect;
mod sys;

pub use computer::ComputerCgroup;
use computer::{Dir, read_pids, remove_dirs};
use detect::{detect_v1, detect_v2, enable, mkdir_ok, parse_mountinfo, parse_self_cgroup};

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

// The sizes a cgroup bounds are the provider-neutral ones; named here too
// because a cgroup is where a local computer's sizes are written and read.
pub use crate::sizing::{
    CPU_PERIOD_US, DEFAULT_CPUS, DEFAULT_MEMORY_MB, DEFAULT_PIDS, Host, Limits, MAX_PIDS, MIN_CPUS,
    MIN_MEMORY_MB, MIN_PIDS,
};
use crate::types::{ProviderError, Result};

/// The group computers' cgroups are made in (see [`group_for`]).
pub const GROUP: &str = "computer-mcp";
/// The v2 leaf a server's processes are moved into, beside the groups.
pub const SERVER_LEAF: &str = "computer-mcp-server";
/// How long a release waits for a cgroup's processes to go, and then for
/// its directories to be removable.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
pub const REMOVE_WAIT: Duration = Duration::from_secs(2);

/// How long one round of a kill waits for a freeze to take.
const FREEZE_WAIT: Duration = Duration::from_millis(200);
const POLL: Duration = Duration::from_millis(10);

/// The group for the computers of one state directory:
/// `computer-mcp-<16 hex digits>` of a stable hash (FNV-1a) of its path, so
/// that servers with different state directories on one host never take
/// each other's computers for leftovers in a sweep.
pub fn group_for(state_dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in state_dir.as_os_str().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{GROUP}-{h:016x}")
}

/// What a computer's cgroup holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Processes and threads (`pids.current`).
    pub pids: u64,
    /// Memory charged, in bytes (`memory.current` / `memory.usage_in_bytes`).
    pub memory_bytes: u64,
    /// The most memory charged at once since it was made (`memory.peak`,
    /// kernel 5.19 and later / `memory.max_usage_in_bytes`).
    pub peak_memory_bytes: Option<u64>,
    /// CPU time its processes have used, in nanoseconds (`cpu.stat`'s
    /// usage_usec / `cpuacct.usage`, where cpuacct is mounted).
    pub cpu_ns: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// What detection reads: the mount table, the server's own cgroups, and
/// whether it is root. [`Sources::read`] takes them from /proc; a test gives
/// a fake cgroupfs tree instead.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The text of /proc/self/mountinfo.
    pub mountinfo: String,
    /// The text of /proc/self/cgroup.
    pub self_cgroup: String,
    /// The server runs as root (euid 0).
    pub root: bool,
}

impl Sources {
    pub fn read() -> Result<Sources> {
        let read = |p: &str| {
            fs::read_to_string(p)
                .map_err(|e| ProviderError::failed(format!("cannot read {p}: {e}")))
        };
        Ok(Sources {
            mountinfo: read("/proc/self/mountinfo")?,
            self_cgroup: read("/proc/self/cgroup")?,
            root: nix::unistd::geteuid().is_root(),
        })
    }
}

/// One hierarchy computers' cgroups are made in.
#[derive(Clone, Debug, PartialEq)]
struct Hier {
    /// The controllers of ours it carries (v1), or all of them (v2).
    controllers: Vec<&'static str>,
    /// Its id in /proc/<pid>/cgroup (0 for v2).
    hid: u32,
    /// `<mount>/<own path>/computer-mcp`: where computers' cgroups go.
    base: PathBuf,
    /// The same as /proc/<pid>/cgroup shows it: `<own path>/computer-mcp`.
    rel: String,
}

/// Where this host's computers' cgroups are made, found once.
#[derive(Clone, Debug)]
pub struct Cgroups {
    version: Version,
    hiers: Vec<Hier>,
    layout: String,
}

const V2_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];
const V1_CONTROLLERS: [&str; 3] = ["pids", "memory", "cpu"];

impl Cgroups {
    /// What this host gives, from /proc, with computers in `group`
    /// ([`GROUP`] for a server; a test names its own). An `Unsupported`
    /// error says in words why no cgroup can be made.
    pub fn detect(group: &str) -> Result<Cgroups> {
        #[cfg(target_os = "linux")]
        {
            Cgroups::detect_from(&Sources::read()?, group)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = group;
            Err(ProviderError::unsupported("cgroups are Linux only"))
        }
    }

    /// As [`Cgroups::detect`], from given sources. It may write: a v2
    /// server's processes are moved into a leaf and controllers enabled for
    /// the computers' group; the group is made (v1: in each hierarchy).
    pub fn detect_from(src: &Sources, group: &str) -> Result<Cgroups> {
        check_name("group", group)?;
        let mounts = parse_mountinfo(&src.mountinfo);
        let own = parse_self_cgroup(&src.self_cgroup);
        let v2 = match detect_v2(&mounts, &own, src.root, group) {
            Ok((hier, layout)) => {
                return Ok(Cgroups {
                    version: Version::V2,
                    hiers: vec![hier],
                    layout,
                });
            }
            Err(why) => why,
        };
        let v1 = match detect_v1(&mounts, &own, group) {
            Ok(hiers) => {
                let names: Vec<String> = hiers
                    .iter()
                    .map(|h| format!("{} at {}", h.controllers.join(","), h.base.display()))
                    .collect();
                let layout = format!(
                    "cgroup v1, under the server's own cgroup in each hierarchy: {} (cgroup v2 not used: {v2})",
                    names.join("; ")
                );
                return Ok(Cgroups {
                    version: Version::V1,
                    hiers,
                    layout,
                });
            }
            Err(why) => why,
        };
        Err(ProviderError::unsupported(format!(
            "no cgroup can be made for computers: cgroup v2: {v2}; cgroup v1: {v1}"
        )))
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// Which layout was chosen and why, in words (for a log line or a note).
    pub fn layout(&self) -> &str {
        &self.layout
    }

    /// Whether processes can be frozen while they are killed (v2 always; v1
    /// where the freezer hierarchy is mounted).
    pub fn can_freeze(&self) -> bool {
        self.version == Version::V2
            || self
                .hiers
                .iter()
                .any(|h| h.controllers.contains(&"freezer"))
    }

    /// The same layout without the v1 freezer: a release then kills in
    /// rounds until the cgroup is empty (for a host whose freezer must not
    /// be used, and to test that path). No change on v2.
    pub fn without_freezer(mut self) -> Cgroups {
        for h in &mut self.hiers {
            h.controllers.retain(|c| *c != "freezer");
        }
        self.hiers.retain(|h| !h.controllers.is_empty());
        self
    }

    /// Make computer `id`'s cgroup with `limits` written. Nothing is left
    /// behind on failure. An empty leftover of the same id is reused; one
    /// with processes is refused.
    /// Start the kernel's wait that the first move of a process into a
    /// cgroup pays (an RCU grace period behind the global
    /// `cgroup_threadgroup_rwsem`, about 12 ms here, where each later move
    /// costs microseconds), so that it runs beside the rest of a creation
    /// instead of inside the sandbox's join: this process is moved into the
    /// cgroup it is already in, which changes nothing. Blocking; call it
    /// off the runtime's threads and do not wait for it.
    pub fn warm(&self) {
        let Some(h) = self.hiers.first() else { return };
        let Some(mount) = h
            .base
            .to_str()
            .and_then(|b| b.strip_suffix(h.rel.as_str()))
            .map(PathBuf::from)
        else {
            return;
        };
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(path) = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let hid: u32 = f.next()?.parse().ok()?;
            let _ = f.next()?;
            (hid == h.hid)
                .then(|| f.next().map(str::to_string))
                .flatten()
        }) else {
            return;
        };
        let procs = mount
            .join(path.trim_start_matches('/'))
            .join("cgroup.procs");
        let _ = fs::write(procs, std::process::id().to_string());
    }

    pub fn create(&self, id: &str, limits: &Limits) -> Result<ComputerCgroup> {
        check_name("id", id)?;
        if !limits.cpus.is_finite() || limits.cpus <= 0.0 {
            return Err(ProviderError::invalid("cpus", "cpus must be above 0"));
        }
        let cg = self.computer(id);
        let mut made: Vec<PathBuf> = Vec::new();
        for d in &cg.dirs {
            let mut mkdir = fs::create_dir(&d.path);
            if matches!(&mkdir, Err(e) if e.kind() == io::ErrorKind::NotFound) {
                // The group was removed from under this server (by a server
                // of an earlier version ending beside it, or by hand).
                if let Err(why) = self.remake_group() {
                    remove_dirs(&made);
                    return Err(ProviderError::failed(format!(
                        "cannot make the cgroup {}: the group that holds this state directory's computers is gone and cannot be made again: {why}",
                        d.path.display()
                    )));
                }
                tracing::warn!(
                    "the cgroup group {} of this state directory's computers was removed by another process; made it again",
                    d.path.parent().unwrap_or(&d.path).display()
                );
                mkdir = fs::create_dir(&d.path);
            }
            match mkdir {
                Ok(()) => made.push(d.path.clone()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if !read_pids(&d.path.join("cgroup.procs")).is_empty() {
                        remove_dirs(&made);
                        return Err(ProviderError::new(
                            crate::types::ErrorCode::Failed,
                            format!(
                                "a cgroup for computer {id} already exists at {} and holds processes",
                                d.path.display()
                            ),
                        ));
                    }
                }
                Err(e) => {
                    remove_dirs(&made);
                    return Err(ProviderError::failed(format!(
                        "cannot make the cgroup {}: {e}",
                        d.path.display()
                    )));
                }
            }
        }
        if let Err(e) = cg.write_limits(limits) {
            remove_dirs(&made);
            return Err(e);
        }
        Ok(cg)
    }

    /// Computer `id`'s cgroup as it is on disk (to release one a previous
    /// server made): the directories that exist.
    pub fn open(&self, id: &str) -> Result<ComputerCgroup> {
        check_name("id", id)?;
        let mut cg = self.computer(id);
        cg.dirs.retain(|d| d.path.is_dir());
        if cg.dirs.is_empty() {
            return Err(ProviderError::not_found(format!(
                "no cgroup for computer {id}"
            )));
        }
        Ok(cg)
    }

    /// The ids of every computer cgroup in the group (for a sweep: those
    /// whose computer no longer exists are released with
    /// `open(id)?.release()`).
    pub fn list_existing(&self) -> Vec<String> {
        let mut ids = BTreeSet::new();
        for h in &self.hiers {
            let Ok(rd) = fs::read_dir(&h.base) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() && check_name("id", &name).is_ok() {
                    ids.insert(name);
                }
            }
        }
        ids.into_iter().collect()
    }

    /// The group's directories, one a hierarchy.
    pub fn group_dirs(&self) -> Vec<PathBuf> {
        self.hiers.iter().map(|h| h.base.clone()).collect()
    }

    /// Make the computers' group again as detection made it (v2: with our
    /// controllers enabled for its children).
    fn remake_group(&self) -> std::result::Result<(), String> {
        for h in &self.hiers {
            mkdir_ok(&h.base)?;
            if self.version == Version::V2 {
                enable(&h.base)?;
            }
        }
        Ok(())
    }

    /// Remove the computers' group itself where it is empty (a test's own
    /// group, say); a group still holding a computer stays.
    pub fn remove_group(&self) {
        for h in &self.hiers {
            let _ = fs::remove_dir(&h.base);
        }
    }

    fn computer(&self, id: &str) -> ComputerCgroup {
        ComputerCgroup {
            id: id.to_string(),
            version: self.version,
            dirs: self
                .hiers
                .iter()
                .map(|h| Dir {
                    path: h.base.join(id),
                    rel: format!("{}/{id}", h.rel),
                    hid: h.hid,
                    controllers: h.controllers.clone(),
                })
                .collect(),
        }
    }
}

/// A computer id or group name: one path component of `[A-Za-z0-9._-]`.
fn check_name(field: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ProviderError::invalid(
            field,
            format!(
                "{field} {name:?} must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
