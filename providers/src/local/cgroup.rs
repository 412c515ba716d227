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
//! The calls block (release waits, bounded, for the processes to go): call
//! them from a blocking thread in async code.

mod sys;

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// The sizes a cgroup bounds are the provider-neutral ones; named here too
// because a cgroup is where a local computer's sizes are written and read.
use crate::sizing::MIB;
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

#[derive(Clone, Debug, PartialEq)]
struct Dir {
    path: PathBuf,
    rel: String,
    hid: u32,
    controllers: Vec<&'static str>,
}

/// One computer's cgroup (v2: one directory; v1: one per hierarchy).
#[derive(Clone, Debug, PartialEq)]
pub struct ComputerCgroup {
    id: String,
    version: Version,
    dirs: Vec<Dir>,
}

impl ComputerCgroup {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// The directories a process joins by writing its pid into each one's
    /// `cgroup.procs` (what `computerd sandbox --cgroup DIR` is given).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.path.clone()).collect()
    }

    /// The `cgroup.procs` files of [`ComputerCgroup::dirs`].
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|d| d.path.join("cgroup.procs"))
            .collect()
    }

    /// Move process `pid` (all its threads) into the cgroup.
    pub fn join(&self, pid: u32) -> Result<()> {
        for f in self.procs_files() {
            write_file(&f, &pid.to_string())?;
        }
        Ok(())
    }

    /// Whether swap is bounded too (v1 without swap accounting cannot).
    pub fn swap_bounded(&self) -> bool {
        match self.version {
            Version::V2 => self
                .dir_with("memory")
                .is_some_and(|d| d.path.join("memory.swap.max").exists()),
            Version::V1 => self
                .dir_with("memory")
                .is_some_and(|d| d.path.join("memory.memsw.limit_in_bytes").exists()),
        }
    }

    fn dir_with(&self, controller: &str) -> Option<&Dir> {
        self.dirs
            .iter()
            .find(|d| d.controllers.contains(&controller))
    }

    fn need_dir(&self, controller: &str) -> Result<&Dir> {
        self.dir_with(controller).ok_or_else(|| {
            ProviderError::failed(format!(
                "computer {}'s cgroup has no {controller} directory",
                self.id
            ))
        })
    }

    /// Hold the cgroup to other limits (a spare's, made with the
    /// defaults, gets its computer's).
    pub fn set_limits(&self, l: &Limits) -> Result<()> {
        self.write_limits(l)
    }

    fn write_limits(&self, l: &Limits) -> Result<()> {
        let pids = self.need_dir("pids")?;
        write_file(&pids.path.join("pids.max"), &l.pids.to_string())?;
        let mem = self.need_dir("memory")?;
        let cpu = self.need_dir("cpu")?;
        match self.version {
            Version::V2 => {
                write_file(
                    &cpu.path.join("cpu.max"),
                    &format!("{} {CPU_PERIOD_US}", l.quota_us()),
                )?;
                write_file(&mem.path.join("memory.max"), &l.memory_bytes().to_string())?;
                let swap = mem.path.join("memory.swap.max");
                if swap.exists() {
                    write_file(&swap, "0")?;
                }
            }
            Version::V1 => {
                write_file(
                    &cpu.path.join("cpu.cfs_period_us"),
                    &CPU_PERIOD_US.to_string(),
                )?;
                write_file(
                    &cpu.path.join("cpu.cfs_quota_us"),
                    &l.quota_us().to_string(),
                )?;
                // Memory first: memory+swap may never be set below memory.
                let bytes = l.memory_bytes().to_string();
                write_file(&mem.path.join("memory.limit_in_bytes"), &bytes)?;
                let memsw = mem.path.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    write_file(&memsw, &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// The limits as the kernel enforces them, read from the cgroup's files.
    /// A bound that reads as unlimited (`max`) is an error: it is not held.
    pub fn read_back(&self) -> Result<Limits> {
        let pids = read_limit(&self.need_dir("pids")?.path.join("pids.max"))?;
        let mem = self.need_dir("memory")?;
        let cpu = self.need_dir("cpu")?;
        let (quota, period, memory) = match self.version {
            Version::V2 => {
                let path = cpu.path.join("cpu.max");
                let text = read_text(&path)?;
                let mut it = text.split_whitespace();
                let quota = parse_limit(&path, it.next().unwrap_or(""))?;
                let period = parse_limit(&path, it.next().unwrap_or(""))?;
                let memory = read_limit(&mem.path.join("memory.max"))?;
                let swap = mem.path.join("memory.swap.max");
                if swap.exists() {
                    let s = read_limit(&swap)?;
                    if s != 0 {
                        return Err(unbounded(&swap, &s.to_string()));
                    }
                }
                (quota, period, memory)
            }
            Version::V1 => {
                let quota_path = cpu.path.join("cpu.cfs_quota_us");
                let q = read_text(&quota_path)?;
                if q.trim().starts_with('-') {
                    return Err(unbounded(&quota_path, q.trim()));
                }
                let quota = parse_limit(&quota_path, q.trim())?;
                let period = read_limit(&cpu.path.join("cpu.cfs_period_us"))?;
                let memory = read_limit(&mem.path.join("memory.limit_in_bytes"))?;
                let memsw = mem.path.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    let s = read_limit(&memsw)?;
                    if s != memory {
                        return Err(ProviderError::failed(format!(
                            "{} reads {s}, not the memory limit {memory}: swap is not bounded",
                            memsw.display()
                        )));
                    }
                }
                (quota, period, memory)
            }
        };
        if period == 0 {
            return Err(ProviderError::failed(format!(
                "computer {}'s CPU period reads 0",
                self.id
            )));
        }
        // The v1 memory files read "bytes rounded down to a page" of a huge
        // number when unlimited.
        if memory >= (1u64 << 62) {
            return Err(ProviderError::failed(format!(
                "computer {}'s memory limit reads {memory}: memory is not bounded",
                self.id
            )));
        }
        Ok(Limits {
            cpus: quota as f64 / period as f64,
            memory_mb: memory / MIB,
            pids,
        })
    }

    /// What is in use now.
    pub fn usage(&self) -> Result<Usage> {
        let pids = read_limit(&self.need_dir("pids")?.path.join("pids.current"))?;
        let mem = self.need_dir("memory")?;
        let file = match self.version {
            Version::V2 => "memory.current",
            Version::V1 => "memory.usage_in_bytes",
        };
        Ok(Usage {
            pids,
            memory_bytes: read_limit(&mem.path.join(file))?,
        })
    }

    /// Every process in the cgroup (in any of its directories).
    pub fn pids(&self) -> Vec<i32> {
        let mut all = BTreeSet::new();
        for f in self.procs_files() {
            all.extend(read_pids(&f));
        }
        all.into_iter().collect()
    }

    /// Kill everything in it, and wait (at most `within`) until it is empty.
    /// v2 writes `cgroup.kill` (the kernel kills forks racing it too); where
    /// that is missing, and on v1, each round freezes the cgroup (where a
    /// freezer is), kills every process listed, thaws, and looks again: with
    /// `pids.max` bounding it a fork bomb cannot outrun the rounds.
    pub fn kill(&self, within: Duration) -> Result<()> {
        self.kill_with(within, true)
    }

    /// [`ComputerCgroup::kill`], with v2's `cgroup.kill` used or not (a
    /// kernel before 5.14 has none; a test takes the freezing path).
    fn kill_with(&self, within: Duration, use_kill_file: bool) -> Result<()> {
        let until = Instant::now() + within;
        loop {
            if self.pids().is_empty() {
                return Ok(());
            }
            if Instant::now() >= until {
                let left = self.pids();
                if left.is_empty() {
                    return Ok(());
                }
                return Err(ProviderError::failed(format!(
                    "computer {}'s cgroup still holds {} processes {} after it was killed",
                    self.id,
                    left.len(),
                    crate::types::human_ms(within.as_millis() as u64)
                )));
            }
            if self.version == Version::V2 && use_kill_file {
                let kill = self.dirs[0].path.join("cgroup.kill");
                if kill.exists() {
                    write_file(&kill, "1")?;
                    std::thread::sleep(POLL);
                    continue;
                }
            }
            let frozen = self.freeze(true);
            for d in &self.dirs {
                for pid in read_pids(&d.path.join("cgroup.procs")) {
                    kill_member(pid, |text| d.holds(self.version, text));
                }
            }
            if frozen {
                self.freeze(false);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Freeze (or thaw) the cgroup; whether a freezer was there to do it.
    /// A freeze waits briefly for the kernel to say it took.
    fn freeze(&self, on: bool) -> bool {
        let (file, value, state_file, frozen_word) = match self.version {
            Version::V2 => (
                self.dirs[0].path.join("cgroup.freeze"),
                if on { "1" } else { "0" },
                self.dirs[0].path.join("cgroup.events"),
                "frozen 1",
            ),
            Version::V1 => {
                let Some(d) = self.dir_with("freezer") else {
                    return false;
                };
                (
                    d.path.join("freezer.state"),
                    if on { "FROZEN" } else { "THAWED" },
                    d.path.join("freezer.state"),
                    "FROZEN",
                )
            }
        };
        if !file.exists() || write_file(&file, value).is_err() {
            return false;
        }
        if on {
            let until = Instant::now() + FREEZE_WAIT;
            while Instant::now() < until {
                let text = fs::read_to_string(&state_file).unwrap_or_default();
                if text.lines().any(|l| l.trim() == frozen_word) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        true
    }

    /// Remove its directories, deepest first, waiting (at most `within`) for
    /// the kernel to let them go.
    pub fn remove(&self, within: Duration) -> Result<()> {
        let until = Instant::now() + within;
        for d in &self.dirs {
            let mut order = Vec::new();
            post_order(&d.path, &mut order);
            for p in order {
                loop {
                    match fs::remove_dir(&p) {
                        Ok(()) => break,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                        Err(e)
                            if Instant::now() < until && e.raw_os_error() == Some(libc::EBUSY) =>
                        {
                            std::thread::sleep(POLL);
                        }
                        Err(e) => {
                            return Err(ProviderError::failed(format!(
                                "cannot remove the cgroup {}: {e}",
                                p.display()
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Kill everything in it and remove it ([`KILL_WAIT`], [`REMOVE_WAIT`]).
    pub fn release(&self) -> Result<()> {
        self.kill(KILL_WAIT)?;
        self.remove(REMOVE_WAIT)
    }
}

impl Dir {
    /// Whether a /proc/<pid>/cgroup text puts the process in this directory.
    fn holds(&self, version: Version, text: &str) -> bool {
        parse_self_cgroup(text).iter().any(|m| {
            let here = m.path == self.rel || m.path.starts_with(&format!("{}/", self.rel));
            match version {
                Version::V2 => m.hid == 0 && here,
                Version::V1 => m.hid == self.hid && here,
            }
        })
    }
}

/// SIGKILL `pid` if it is still in the cgroup: the pid is pinned with a
/// pidfd before its cgroup is read, so a pid freed and taken by a host
/// process in between is never signalled. Gone is success.
fn kill_member(pid: i32, is_member: impl Fn(&str) -> bool) {
    let fd = match sys::pidfd_open(pid) {
        Ok(fd) => Some(fd),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
        Err(_) => None,
    };
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return;
    };
    if !is_member(&text) {
        return;
    }
    match fd {
        Some(fd) => {
            use std::os::fd::AsFd;
            let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
        }
        // A kernel before pidfds (5.3): the cgroup was read just now.
        None => {
            let _ = sys::kill(pid, libc::SIGKILL);
        }
    }
}

fn post_order(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                post_order(&e.path(), out);
            }
        }
    }
    out.push(dir.to_path_buf());
}

fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs.iter().rev() {
        let _ = fs::remove_dir(d);
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

fn write_file(path: &Path, text: &str) -> Result<()> {
    let r = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    r.map_err(|e| {
        ProviderError::failed(format!("cannot write {text:?} to {}: {e}", path.display()))
    })
}

fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map_err(|e| ProviderError::failed(format!("cannot read {}: {e}", path.display())))
}

fn unbounded(path: &Path, value: &str) -> ProviderError {
    ProviderError::failed(format!(
        "{} reads {value:?}: that bound is not held",
        path.display()
    ))
}

fn parse_limit(path: &Path, value: &str) -> Result<u64> {
    if value == "max" {
        return Err(unbounded(path, value));
    }
    value.parse::<u64>().map_err(|_| {
        ProviderError::failed(format!("{} reads {value:?}, not a number", path.display()))
    })
}

fn read_limit(path: &Path) -> Result<u64> {
    parse_limit(path, read_text(path)?.trim())
}

fn read_pids(path: &Path) -> Vec<i32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[derive(Clone, Debug, PartialEq)]
struct Mount {
    /// The path of the filesystem mounted there (a cgroup when the mount
    /// shows a subtree).
    root: String,
    point: PathBuf,
    fstype: String,
    superopts: Vec<String>,
}

/// /proc/self/mountinfo: `id parent dev root point opts [optional...] -
/// fstype source superopts`.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        if f.len() < 5 || f.len() < sep + 4 {
            continue;
        }
        out.push(Mount {
            root: unescape(f[3]),
            point: PathBuf::from(unescape(f[4])),
            fstype: f[sep + 1].to_string(),
            superopts: f[sep + 3].split(',').map(str::to_string).collect(),
        });
    }
    out
}

/// Mount paths escape space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Clone, Debug, PartialEq)]
struct Membership {
    hid: u32,
    controllers: Vec<String>,
    path: String,
}

/// /proc/<pid>/cgroup: `hid:controllers:path` (v2: `0::path`).
fn parse_self_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let hid = it.next()?.parse().ok()?;
            let ctl = it.next()?;
            let path = it.next()?.to_string();
            Some(Membership {
                hid,
                controllers: ctl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// `own` (a cgroup path) on disk under `m`, or None where it is outside it.
fn on_disk(m: &Mount, own: &str) -> Option<PathBuf> {
    let rest = if m.root == "/" {
        own
    } else {
        let r = own.strip_prefix(m.root.as_str())?;
        if !(r.is_empty() || r.starts_with('/')) {
            return None;
        }
        r
    };
    let rest = rest.trim_start_matches('/');
    if rest.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rest.is_empty() {
        m.point.clone()
    } else {
        m.point.join(rest)
    })
}

fn join_rel(a: &str, b: &str) -> String {
    if a == "/" || a.is_empty() {
        format!("/{b}")
    } else {
        format!("{}/{b}", a.trim_end_matches('/'))
    }
}

fn words(list: &[&str]) -> String {
    list.join(", ")
}

fn mkdir_ok(p: &Path) -> std::result::Result<(), String> {
    match fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make {}: {e}", p.display())),
    }
}

fn controllers_of(dir: &Path) -> std::result::Result<Vec<String>, String> {
    let p = dir.join("cgroup.controllers");
    fs::read_to_string(&p)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .map_err(|e| format!("cannot read {}: {e}", p.display()))
}

fn missing_of(have: &[String]) -> Vec<&'static str> {
    V2_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !have.iter().any(|h| h == c))
        .collect()
}

/// Enable our controllers for `dir`'s children (those not yet enabled).
fn enable(dir: &Path) -> std::result::Result<(), String> {
    let p = dir.join("cgroup.subtree_control");
    let on: Vec<String> = fs::read_to_string(&p)
        .map_err(|e| format!("cannot read {}: {e}", p.display()))?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let add: Vec<String> = missing_of(&on).iter().map(|c| format!("+{c}")).collect();
    if add.is_empty() {
        return Ok(());
    }
    write_file(&p, &add.join(" ")).map_err(|e| e.message)
}

/// Move every process of cgroup `own` into its child `leaf`, so that `own`
/// may hand controllers to children. Processes forked meanwhile are caught
/// by the next round; a few rounds are enough for a server at start.
fn move_into_leaf(own: &Path, leaf: &Path) -> std::result::Result<usize, String> {
    mkdir_ok(leaf)?;
    let mut moved = BTreeSet::new();
    for _ in 0..20 {
        let pids = read_pids(&own.join("cgroup.procs"));
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            match write_file(&leaf.join("cgroup.procs"), &pid.to_string()) {
                Ok(()) => {
                    moved.insert(pid);
                }
                // A process that ended meanwhile.
                Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => {}
                Err(e) => return Err(e.message),
            }
        }
    }
    Ok(moved.len())
}

fn detect_v2(
    mounts: &[Mount],
    own: &[Membership],
    root: bool,
    group: &str,
) -> std::result::Result<(Hier, String), String> {
    let m = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .ok_or("no cgroup v2 hierarchy is mounted")?;
    let me = own
        .iter()
        .find(|x| x.hid == 0 && x.controllers.is_empty())
        .ok_or("this process is in no cgroup v2 group")?;
    // A server moved into the leaf by an earlier detection (in this process
    // or another in the same cgroup) is already where it should be: its
    // parent is the cgroup to use.
    let own_path = match me.path.strip_suffix(&format!("/{SERVER_LEAF}")) {
        Some("") => "/".to_string(),
        Some(parent) => parent.to_string(),
        None => me.path.clone(),
    };
    let me = &Membership {
        hid: 0,
        controllers: Vec::new(),
        path: own_path,
    };
    let own_dir = on_disk(m, &me.path).ok_or_else(|| {
        format!(
            "the server's cgroup {} is outside the cgroup v2 mount at {}",
            me.path,
            m.point.display()
        )
    })?;
    let top = m.point.clone();
    let mut why_not_own = String::new();
    if own_dir != top {
        let have = controllers_of(&own_dir)?;
        let missing = missing_of(&have);
        if missing.is_empty() {
            let leaf = own_dir.join(SERVER_LEAF);
            let base = own_dir.join(group);
            let done = move_into_leaf(&own_dir, &leaf)
                .and_then(|n| enable(&own_dir).map(|()| n))
                .and_then(|n| mkdir_ok(&base).map(|()| n))
                .and_then(|n| enable(&base).map(|()| n));
            match done {
                Ok(n) => {
                    let layout = format!(
                        "cgroup v2, under the server's own cgroup {}: computers in {}, the server's processes in {} ({}; cgroup v2 lets a cgroup hand controllers to children only while it holds no process)",
                        me.path,
                        base.display(),
                        leaf.display(),
                        if n == 0 {
                            "already there".to_string()
                        } else {
                            format!("{n} moved there")
                        }
                    );
                    return Ok((
                        Hier {
                            controllers: V2_CONTROLLERS.to_vec(),
                            hid: 0,
                            base,
                            rel: join_rel(&me.path, group),
                        },
                        layout,
                    ));
                }
                Err(e) if root => why_not_own = format!(" (the server's own cgroup: {e})"),
                Err(e) => return Err(e),
            }
        } else if !root {
            return Err(format!(
                "the server's cgroup {} offers no {} controller to its children, and an unprivileged server may use no other cgroup",
                me.path,
                words(&missing)
            ));
        } else {
            why_not_own = format!(
                " (the server's own cgroup {} offers no {} controller)",
                me.path,
                words(&missing)
            );
        }
    }
    let have = controllers_of(&top)?;
    let missing = missing_of(&have);
    if !missing.is_empty() {
        return Err(format!(
            "the cgroup v2 hierarchy at {} offers no {} controller (a host that mounts cgroup v1 too binds them there)",
            top.display(),
            words(&missing)
        ));
    }
    let base = top.join(group);
    enable(&top)?;
    mkdir_ok(&base)?;
    enable(&base)?;
    let layout = format!(
        "cgroup v2, in {} at the hierarchy's top{why_not_own}",
        base.display()
    );
    Ok((
        Hier {
            controllers: V2_CONTROLLERS.to_vec(),
            hid: 0,
            base,
            rel: join_rel(&m.root, group),
        },
        layout,
    ))
}

fn detect_v1(
    mounts: &[Mount],
    own: &[Membership],
    group: &str,
) -> std::result::Result<Vec<Hier>, String> {
    let mut hiers: Vec<(PathBuf, Hier)> = Vec::new();
    for c in V1_CONTROLLERS.iter().copied().chain(["freezer"]) {
        let required = c != "freezer";
        let Some(m) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.superopts.iter().any(|o| o == c))
        else {
            if required {
                return Err(format!("no cgroup v1 hierarchy carries the {c} controller"));
            }
            continue;
        };
        if let Some((_, h)) = hiers.iter_mut().find(|(p, _)| *p == m.point) {
            h.controllers.push(c);
            continue;
        }
        let Some(me) = own
            .iter()
            .find(|x| x.hid != 0 && x.controllers.iter().any(|x| x == c))
        else {
            if required {
                return Err(format!("this process is in no cgroup v1 {c} group"));
            }
            continue;
        };
        let Some(dir) = on_disk(m, &me.path) else {
            if required {
                return Err(format!(
                    "the server's {c} cgroup {} is outside the mount at {}",
                    me.path,
                    m.point.display()
                ));
            }
            continue;
        };
        hiers.push((
            m.point.clone(),
            Hier {
                controllers: vec![c],
                hid: me.hid,
                base: dir.join(group),
                rel: join_rel(&me.path, group),
            },
        ));
    }
    let mut made = Vec::new();
    let mut usable = Vec::new();
    for (_, h) in hiers {
        let existed = h.base.is_dir();
        match mkdir_ok(&h.base) {
            Ok(()) => {
                if !existed {
                    made.push(h.base.clone());
                }
                usable.push(h);
            }
            // The freezer only helps a kill; without it a kill goes in rounds.
            Err(_) if h.controllers == ["freezer"] => {}
            Err(e) => {
                remove_dirs(&made);
                return Err(e);
            }
        }
    }
    Ok(usable)
}

#[cfg(test)]
mod tests;
