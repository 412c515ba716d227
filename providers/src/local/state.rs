//! A local computer's state on disk, and the process that is the computer.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::types::{Labels, NetworkKind};

/// What the server knows of one local computer, in `meta.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub id: String,
    pub labels: Labels,
    pub created_ms: i64,
    pub deadline_ms: i64,
    pub max_deadline_ms: i64,
    pub network: NetworkKind,
    pub work_dir: String,
    /// The computer's first process on the host (the sandbox's forwarder),
    /// while it runs.
    pub process: Option<Process>,
    /// The uid (and gid) programs run as.
    #[serde(default)]
    pub user: Option<(u32, u32)>,
    /// Whether the uid was allocated for this computer alone (released
    /// with it).
    #[serde(default)]
    pub own_uid: bool,
    /// The limits its cgroup holds it to, as read back; None: no cgroup.
    #[serde(default)]
    pub limits: Option<super::cgroup::Limits>,
    /// Its egress proxy, for an allowlist.
    #[serde(default)]
    pub egress: Option<super::egress::EgressMeta>,
    /// Read-write shares its uid was given an ACL entry on (taken out, and
    /// what it made there given to the share's owner, at release).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted: Vec<std::path::PathBuf>,
}

/// A process named by its pid and its start time, so a reused pid is never
/// taken for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    pub pid: i32,
    pub start_ticks: u64,
}

fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // Field 22 of stat is starttime; `rest` begins at field 3 (state).
    if f.first().is_some_and(|s| *s == "Z" || *s == "X") {
        return None;
    }
    f.get(19)?.parse().ok()
}

impl Process {
    pub fn of(pid: i32) -> Option<Process> {
        start_ticks(pid).map(|start_ticks| Process { pid, start_ticks })
    }

    /// Still the same process, and not a zombie.
    pub fn alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks)
    }

    /// Signal it if it is still the same process; "no such process" is fine.
    pub fn signal(&self, sig: i32) {
        if self.alive() {
            // SAFETY: kill takes integers only.
            unsafe {
                libc::kill(self.pid, sig);
            }
        }
    }
}

pub fn read_meta(path: &Path) -> io::Result<Meta> {
    let text = std::fs::read(path)?;
    serde_json::from_slice(&text).map_err(io::Error::other)
}

/// Write beside and rename, so a reader never sees half a file.
pub fn write_meta(path: &Path, meta: &Meta) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec_pretty(meta).map_err(io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

pub fn make_private(dir: &Path) -> io::Result<()> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

pub use computerd::now_ms;

pub fn format_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = Process::of(std::process::id() as i32).unwrap();
        assert!(me.alive());
        let other = Process {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!other.alive());
    }

    #[test]
    fn times_format_as_rfc3339() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_ms(1_500), "1970-01-01T00:00:01.5Z");
    }
}
