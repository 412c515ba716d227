//! A computer's sizes, the same for every provider whose computers are
//! bounded by this host's kernel (local's cgroups, Docker's limits): the
//! defaults a spec's sizes fall back to, the least and most it may ask,
//! the CPU quota's period, and what this host has to check them against.

use std::fs;

use crate::types::{ProviderError, Result, Sizes};

/// The seed's Docker sizes: what a computer gets when the spec names none.
pub const DEFAULT_CPUS: f64 = 2.0;
pub const DEFAULT_MEMORY_MB: u64 = 4096;
pub const DEFAULT_PIDS: u64 = 1024;
/// The least and most a spec may ask for.
pub const MIN_CPUS: f64 = 0.25;
pub const MIN_MEMORY_MB: u64 = 64;
pub const MIN_PIDS: u64 = 16;
pub const MAX_PIDS: u64 = 32768;
/// The CPU quota's period: 100 ms, the kernel's default.
pub const CPU_PERIOD_US: u64 = 100_000;
pub(crate) const MIB: u64 = 1024 * 1024;

/// What the host has, to check a computer's sizes against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Host {
    /// The CPUs this server may run on.
    pub cpus: f64,
    /// `MemTotal`, in MiB.
    pub memory_mb: u64,
}

impl Host {
    /// This machine: the CPUs the server may use, and `MemTotal` from
    /// /proc/meminfo.
    pub fn read() -> Result<Host> {
        let meminfo = fs::read_to_string("/proc/meminfo")
            .map_err(|e| ProviderError::failed(format!("cannot read /proc/meminfo: {e}")))?;
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Host::from_meminfo(&meminfo, cpus)
    }

    /// From the text of /proc/meminfo and a CPU count.
    pub fn from_meminfo(meminfo: &str, cpus: usize) -> Result<Host> {
        let kb = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| ProviderError::failed("/proc/meminfo has no MemTotal line"))?;
        Ok(Host {
            cpus: cpus as f64,
            memory_mb: kb / 1024,
        })
    }
}

/// A computer's bounds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// A CPU quota: 1.5 is 150 ms of CPU time every 100 ms.
    pub cpus: f64,
    /// Memory, in MiB; swap is bounded the same (no swap beyond memory).
    pub memory_mb: u64,
    /// Processes and threads at once.
    pub pids: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpus: DEFAULT_CPUS,
            memory_mb: DEFAULT_MEMORY_MB,
            pids: DEFAULT_PIDS,
        }
    }
}

impl std::fmt::Display for Limits {
    /// As a note or `computer_info` says it: `cpus 2, memoryMb 4096, pids
    /// 1024`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpus {}, memoryMb {}, pids {}",
            self.cpus, self.memory_mb, self.pids
        )
    }
}

impl Limits {
    /// The limits a spec's sizes ask for: each size given is checked; each
    /// one left out is the default, lowered to what the host has (a host
    /// with one CPU gives 1, not a refusal). `diskMb` is not a cgroup's.
    pub fn from_sizes(sizes: &Sizes, host: &Host) -> Result<Limits> {
        let d = Limits::default();
        let limits = Limits {
            cpus: sizes.cpus.unwrap_or(d.cpus.min(host.cpus).max(MIN_CPUS)),
            memory_mb: sizes
                .memory_mb
                .unwrap_or(d.memory_mb.min(host.memory_mb).max(MIN_MEMORY_MB)),
            pids: sizes.pids.unwrap_or(d.pids),
        };
        limits.check(host)?;
        Ok(limits)
    }

    /// Refuse a size out of range, in words naming the field and the limit.
    pub fn check(&self, host: &Host) -> Result<()> {
        if !self.cpus.is_finite() {
            return Err(ProviderError::invalid("cpus", "cpus must be a number"));
        }
        if self.cpus < MIN_CPUS {
            return Err(ProviderError::invalid(
                "cpus",
                format!("cpus {} is under the least, {MIN_CPUS}", self.cpus),
            ));
        }
        if self.cpus > host.cpus {
            return Err(ProviderError::invalid(
                "cpus",
                format!("cpus {} is over this host's {} CPUs", self.cpus, host.cpus),
            ));
        }
        if self.memory_mb < MIN_MEMORY_MB {
            return Err(ProviderError::invalid(
                "memoryMb",
                format!(
                    "memoryMb {} is under the least, {MIN_MEMORY_MB} MiB",
                    self.memory_mb
                ),
            ));
        }
        if self.memory_mb > host.memory_mb {
            return Err(ProviderError::invalid(
                "memoryMb",
                format!(
                    "memoryMb {} is over this host's memory, {} MiB",
                    self.memory_mb, host.memory_mb
                ),
            ));
        }
        if self.pids < MIN_PIDS {
            return Err(ProviderError::invalid(
                "pids",
                format!("pids {} is under the least, {MIN_PIDS}", self.pids),
            ));
        }
        if self.pids > MAX_PIDS {
            return Err(ProviderError::invalid(
                "pids",
                format!("pids {} is over the most, {MAX_PIDS}", self.pids),
            ));
        }
        Ok(())
    }

    /// The CPU quota per [`CPU_PERIOD_US`], in microseconds (the kernel's
    /// least is 1000).
    pub fn quota_us(&self) -> u64 {
        ((self.cpus * CPU_PERIOD_US as f64).round() as u64).max(1000)
    }

    pub fn memory_bytes(&self) -> u64 {
        self.memory_mb.saturating_mul(MIB)
    }
}

impl Limits {
    /// A computer's /work (and a sandbox's /tmp): half of its memory, so a
    /// full /work fails writes with ENOSPC before the OOM killer would take
    /// init (tmpfs pages count as the computer's memory).
    pub fn work_size_mib(&self) -> u64 {
        (self.memory_mb / 2).max(1)
    }
}

/// A bound as a computer's ref shows it.
impl From<Limits> for crate::types::SizesReadBack {
    fn from(l: Limits) -> Self {
        Self {
            cpus: l.cpus,
            memory_mb: l.memory_mb,
            pids: l.pids,
        }
    }
}

#[cfg(test)]
mod tests;
