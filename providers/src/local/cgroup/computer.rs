//! One computer's cgroup: its limits written and read back, its usage, and
//! everything in it killed (frozen first where the host can) and removed.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::detect::parse_self_cgroup;
use super::{FREEZE_WAIT, KILL_WAIT, Limits, POLL, REMOVE_WAIT, Usage, Version, sys};
use crate::sizing::{CPU_PERIOD_US, MIB};
use crate::types::{ProviderError, Result};

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Dir {
    pub(super) path: PathBuf,
    pub(super) rel: String,
    pub(super) hid: u32,
    pub(super) controllers: Vec<&'static str>,
}

/// One computer's cgroup (v2: one directory; v1: one per hierarchy).
#[derive(Clone, Debug, PartialEq)]
pub struct ComputerCgroup {
    pub(super) id: String,
    pub(super) version: Version,
    pub(super) dirs: Vec<Dir>,
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

    pub(super) fn write_limits(&self, l: &Limits) -> Result<()> {
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
        let (peak, cpu_ns) = match self.version {
            Version::V2 => (
                read_limit(&mem.path.join("memory.peak")).ok(),
                self.dir_with("cpu").and_then(|d| {
                    let stat = read_text(&d.path.join("cpu.stat")).ok()?;
                    let usec = stat
                        .lines()
                        .find_map(|l| l.strip_prefix("usage_usec "))?
                        .trim()
                        .parse::<u64>()
                        .ok()?;
                    Some(usec.saturating_mul(1000))
                }),
            ),
            Version::V1 => (
                read_limit(&mem.path.join("memory.max_usage_in_bytes")).ok(),
                self.dir_with("cpuacct")
                    .and_then(|d| read_limit(&d.path.join("cpuacct.usage")).ok()),
            ),
        };
        Ok(Usage {
            pids,
            memory_bytes: read_limit(&mem.path.join(file))?,
            peak_memory_bytes: peak,
            cpu_ns,
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
    pub(super) fn kill_with(&self, within: Duration, use_kill_file: bool) -> Result<()> {
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

    /// Pause (freeze) every process in it, or let them run on (thaw): a
    /// paused computer. A freeze the kernel does not report done within
    /// the freeze wait is undone and refused.
    pub fn pause(&self, on: bool) -> Result<()> {
        if !self.freeze(on) {
            return Err(ProviderError::unsupported(
                "this host gives no cgroup freezer (cgroup v2, or v1 with the freezer mounted), so a local computer cannot be paused",
            ));
        }
        if on && !self.frozen() {
            self.freeze(false);
            return Err(ProviderError::failed(
                "the computer's programs did not freeze in time; it runs on",
            ));
        }
        Ok(())
    }

    /// Whether the kernel reports it frozen.
    pub fn frozen(&self) -> bool {
        let (file, word) = match self.version {
            Version::V2 => (self.dirs[0].path.join("cgroup.events"), "frozen 1"),
            Version::V1 => match self.dir_with("freezer") {
                Some(d) => (d.path.join("freezer.state"), "FROZEN"),
                None => return false,
            },
        };
        fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .any(|l| l.trim() == word)
    }

    /// Kill everything in it and remove it ([`KILL_WAIT`], [`REMOVE_WAIT`]).
    pub fn release(&self) -> Result<()> {
        self.kill(KILL_WAIT)?;
        self.remove(REMOVE_WAIT)
    }
}

impl Dir {
    /// Whether a /proc/<pid>/cgroup text puts the process in this directory.
    pub(super) fn holds(&self, version: Version, text: &str) -> bool {
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
pub(super) fn kill_member(pid: i32, is_member: impl Fn(&str) -> bool) {
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

pub(super) fn post_order(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                post_order(&e.path(), out);
            }
        }
    }
    out.push(dir.to_path_buf());
}

pub(super) fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
}

pub(super) fn write_file(path: &Path, text: &str) -> Result<()> {
    let r = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    r.map_err(|e| {
        ProviderError::failed(format!("cannot write {text:?} to {}: {e}", path.display()))
    })
}

pub(super) fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map_err(|e| ProviderError::failed(format!("cannot read {}: {e}", path.display())))
}

pub(super) fn unbounded(path: &Path, value: &str) -> ProviderError {
    ProviderError::failed(format!(
        "{} reads {value:?}: that bound is not held",
        path.display()
    ))
}

pub(super) fn parse_limit(path: &Path, value: &str) -> Result<u64> {
    if value == "max" {
        return Err(unbounded(path, value));
    }
    value.parse::<u64>().map_err(|_| {
        ProviderError::failed(format!("{} reads {value:?}, not a number", path.display()))
    })
}

pub(super) fn read_limit(path: &Path) -> Result<u64> {
    parse_limit(path, read_text(path)?.trim())
}

pub(super) fn read_pids(path: &Path) -> Vec<i32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}
