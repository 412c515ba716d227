//! A uid per computer, for a root server: no host account, no running
//! process and no other computer shares it (and so neither does a file a
//! host user owns, nor a host user's `RLIMIT_NPROC` count). The gid is the
//! same number.
//!
//! The range is [`FIRST_UID`]`..`[`FIRST_UID`]`+`[`UID_COUNT`]
//! (1879048192 to 1879113727, `0x70000000..=0x7000ffff`): systemd's table of
//! uid ranges (`UIDS-GIDS.md`) leaves 1879048192..=2147352575 unused, above
//! the container ranges systemd-nspawn picks from (524288..=1879048191) and
//! below its "foreign" range; it is far above login and system accounts
//! (below 65536) and above where `useradd` hands out subordinate ranges
//! (100000 onwards, 65536 a user); and it stays below 2^31, which tools
//! that keep a uid in a signed 32-bit number mishandle. Whatever a host
//! does put there is skipped all the same: every uid and gid in
//! /etc/passwd and /etc/group, every range in /etc/subuid and /etc/subgid,
//! and every uid some running process has as its real uid.
//!
//! The running processes are asked of the kernel for the one uid about to
//! be used, not read from /proc: `getpriority(PRIO_USER, uid)` answers
//! `ESRCH` at once when the kernel keeps no account for the uid (its
//! per-user table is a hash), and only when it does, looks at the threads
//! in the kernel. Walking `/proc/<pid>/task/<tid>/status` instead cost a
//! create one open per thread on the host (about 14,000 at 500 computers
//! alive) and grew with every computer. What the kernel call does not see,
//! a host process with only an effective or saved uid, or only a gid, in
//! this range, would need a set-uid file owned by an id of the range or a
//! host that hands out ids from it without writing them in the files
//! above; the range is reserved for this server for that reason, and the
//! computers of every server on the host hold their uid as their real one,
//! so two servers with different state directories still never share one.
//!
//! A uid is held by a file `<state>/uids/<uid>` made with `O_EXCL` and
//! holding the computer's id, so two computers made at once, by one server
//! or by two sharing a state directory, never get the same one; it is given
//! back with [`UidAllocator::release`].

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::types::{ErrorCode, ProviderError, Result};

pub const FIRST_UID: u32 = 0x7000_0000;
pub const UID_COUNT: u32 = 0x1_0000;

/// The default range: [`FIRST_UID`] and the [`UID_COUNT`] - 1 after it.
pub fn default_range() -> RangeInclusive<u32> {
    FIRST_UID..=FIRST_UID + (UID_COUNT - 1)
}

/// Where the host's accounts and processes are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFiles {
    pub passwd: PathBuf,
    pub group: PathBuf,
    pub subuid: PathBuf,
    pub subgid: PathBuf,
}

impl Default for HostFiles {
    fn default() -> Self {
        HostFiles {
            passwd: "/etc/passwd".into(),
            group: "/etc/group".into(),
            subuid: "/etc/subuid".into(),
            subgid: "/etc/subgid".into(),
        }
    }
}

/// Hands out uids from a range, each held by a file in a directory.
#[derive(Clone, Debug)]
pub struct UidAllocator {
    dir: PathBuf,
    range: RangeInclusive<u32>,
    host: HostFiles,
    /// Where the next search starts: after the last uid handed out.
    next: Arc<AtomicU32>,
}

impl UidAllocator {
    /// The default range and host files, holding uids in `<state_dir>/uids`.
    pub fn new(state_dir: &Path) -> Result<UidAllocator> {
        UidAllocator::with(
            state_dir.join("uids"),
            default_range(),
            HostFiles::default(),
        )
    }

    /// Holding uids in `dir` (made if missing, 0700), from `range`.
    pub fn with(dir: PathBuf, range: RangeInclusive<u32>, host: HostFiles) -> Result<UidAllocator> {
        if range.is_empty() || *range.start() == 0 {
            return Err(ProviderError::invalid(
                "uids",
                format!(
                    "the uid range {}..={} must be non-empty and above 0",
                    range.start(),
                    range.end()
                ),
            ));
        }
        fs::create_dir_all(&dir)
            .and_then(|()| fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)))
            .map_err(|e| ProviderError::failed(format!("cannot make {}: {e}", dir.display())))?;
        let next = Arc::new(AtomicU32::new(*range.start()));
        Ok(UidAllocator {
            dir,
            range,
            host,
            next,
        })
    }

    pub fn range(&self) -> RangeInclusive<u32> {
        self.range.clone()
    }

    /// A uid no host account, running process or other computer has, held
    /// for `owner` (a computer id) until [`UidAllocator::release`].
    pub fn allocate(&self, owner: &str) -> Result<u32> {
        let used = Used::read(&self.host)?;
        // From where the last one was found, round the range once: the
        // uids held before it are not tried again one by one.
        let (start, end) = (*self.range.start(), *self.range.end());
        let from = self.next.load(Ordering::Relaxed).clamp(start, end);
        for uid in (from..=end).chain(start..from) {
            if used.has(uid) {
                continue;
            }
            let path = self.dir.join(uid.to_string());
            let made = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            let mut f = match made {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(ProviderError::failed(format!(
                        "cannot hold uid {uid} at {}: {e}",
                        path.display()
                    )));
                }
            };
            // Asked only of a uid no computer holds: a held one's processes
            // would make the kernel look at every thread.
            let runs = runs_as(uid);
            if !matches!(runs, Ok(false)) {
                let _ = fs::remove_file(&path);
                runs?;
                continue;
            }
            if let Err(e) = f.write_all(format!("{owner}\n").as_bytes()) {
                let _ = fs::remove_file(&path);
                return Err(ProviderError::failed(format!(
                    "cannot hold uid {uid} at {}: {e}",
                    path.display()
                )));
            }
            self.next.store(uid.saturating_add(1), Ordering::Relaxed);
            return Ok(uid);
        }
        Err(ProviderError::new(
            ErrorCode::Limit,
            format!(
                "every uid of {}..={} is taken by a host account, a running process or another computer; release a computer first",
                self.range.start(),
                self.range.end()
            ),
        ))
    }

    /// Give `uid` back; one not held is fine.
    pub fn release(&self, uid: u32) -> Result<()> {
        let path = self.dir.join(uid.to_string());
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ProviderError::failed(format!(
                "cannot give uid {uid} back ({}): {e}",
                path.display()
            ))),
        }
    }

    /// Every uid held, with its owner (for a sweep: those whose computer is
    /// gone are released).
    pub fn held(&self) -> Vec<(u32, String)> {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<(u32, String)> = rd
            .flatten()
            .filter_map(|e| {
                let uid = e.file_name().to_str()?.parse::<u32>().ok()?;
                let owner = fs::read_to_string(e.path()).unwrap_or_default();
                Some((uid, owner.trim().to_string()))
            })
            .collect();
        out.sort();
        out
    }
}

/// The ids the host uses, as read once for one allocation.
struct Used {
    ids: BTreeSet<u32>,
    ranges: Vec<(u64, u64)>,
}

impl Used {
    fn read(host: &HostFiles) -> Result<Used> {
        let mut ids = BTreeSet::new();
        // name:password:uid:gid:... and name:password:gid:members
        for (path, fields) in [(&host.passwd, &[2usize, 3][..]), (&host.group, &[2][..])] {
            for line in read_optional(path)?.lines() {
                let f: Vec<&str> = line.split(':').collect();
                for &i in fields {
                    if let Some(n) = f.get(i).and_then(|v| v.trim().parse().ok()) {
                        ids.insert(n);
                    }
                }
            }
        }
        // owner:start:count
        let mut ranges = Vec::new();
        for path in [&host.subuid, &host.subgid] {
            for line in read_optional(path)?.lines() {
                let f: Vec<&str> = line.split(':').collect();
                if let (Some(Ok(start)), Some(Ok(count))) = (
                    f.get(1).map(|v| v.trim().parse::<u64>()),
                    f.get(2).map(|v| v.trim().parse::<u64>()),
                ) && count > 0
                {
                    ranges.push((start, start + count - 1));
                }
            }
        }
        Ok(Used { ids, ranges })
    }

    fn has(&self, id: u32) -> bool {
        self.ids.contains(&id)
            || self
                .ranges
                .iter()
                .any(|&(a, b)| (a..=b).contains(&u64::from(id)))
    }
}

/// Whether some process on the host (in this pid namespace) has `uid` as
/// its real uid: `getpriority(PRIO_USER, uid)` finds one or says `ESRCH`.
fn runs_as(uid: u32) -> Result<bool> {
    // The answer is a nice value, -1 among them: only errno tells.
    nix::errno::Errno::clear();
    // SAFETY: getpriority takes two integers and a uid by value and reads
    // no memory of ours.
    let rc = unsafe { libc::getpriority(libc::PRIO_USER, uid) };
    match nix::errno::Errno::last() {
        _ if rc != -1 => Ok(true),
        nix::errno::Errno::UnknownErrno => Ok(true),
        nix::errno::Errno::ESRCH => Ok(false),
        e => Err(ProviderError::failed(format!(
            "cannot ask the kernel whether uid {uid} runs a process: {e}"
        ))),
    }
}

/// A host file that may be missing (a host without /etc/subuid).
fn read_optional(path: &Path) -> Result<String> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(ProviderError::failed(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests;
