//! The receipts journal: one JSON line per write in `receipts.jsonl` of the
//! server's state directory, so what a computer used outlives the server
//! that counted it (a restart, `computer-mcp receipts`).
//!
//! A server writes a whole line for a computer when it makes or finds it,
//! every [`super::FLUSH_EVERY`] while it is used, and at its release; the
//! last whole line of a computer is its receipt. `computer-mcp cp` writes
//! an `added` line with the bytes it carried, summed on top. Appends take a
//! shared lock and a compaction an exclusive one; past [`MAX_BYTES`] the
//! file is rewritten with a line or two per computer, the newest
//! [`MAX_COMPUTERS`] only, so it stays bounded.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

/// Past this size the journal is compacted.
pub const MAX_BYTES: u64 = 4 << 20;
/// The most computers a compacted journal keeps (the newest).
pub const MAX_COMPUTERS: usize = 4000;

/// One line: a computer's receipt as a server read it, or (`added`) the
/// bytes a `cp` carried.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub provider: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub handle: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created_at: String,
    /// When the line was written.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// The computer's size (for a cost estimated after it is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default)]
    pub tool_calls: u64,
    #[serde(default)]
    pub bytes_pushed: u64,
    #[serde(default)]
    pub bytes_pulled: u64,
    /// Bytes added by a `cp` (only the byte counts are meant).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub added: bool,
}

/// What the journal holds of one computer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    /// Its last whole line, if a server wrote one.
    pub last: Option<Line>,
    /// Bytes `cp` carried, on top of the server's counts.
    pub added_pushed: u64,
    pub added_pulled: u64,
    /// Its place in the file (newest last), for ordering.
    pub order: usize,
}

impl Kept {
    /// Bytes pushed and pulled in all.
    pub fn bytes(&self) -> (u64, u64) {
        let (p, q) = self
            .last
            .as_ref()
            .map_or((0, 0), |l| (l.bytes_pushed, l.bytes_pulled));
        (p + self.added_pushed, q + self.added_pulled)
    }
}

/// The journal file of a state directory.
#[derive(Clone, Debug)]
pub struct Journal {
    path: PathBuf,
}

/// A computer's key in the journal.
pub type Key = (String, String);

impl Journal {
    /// The journal in `state_dir` (made on the first write).
    pub fn in_dir(state_dir: &Path) -> Journal {
        Journal {
            path: state_dir.join("receipts.jsonl"),
        }
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `lines` in one write; compact when the file has grown past
    /// [`MAX_BYTES`].
    pub fn append(&self, lines: &[Line]) -> Result<(), String> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for l in lines {
            text.push_str(&serde_json::to_string(l).map_err(|e| e.to_string())?);
            text.push('\n');
        }
        let size = self.locked(FlockArg::LockShared, |f| {
            let mut f: &File = f;
            f.write_all(text.as_bytes())
                .map_err(|e| self.words("writing", &e))?;
            Ok(f.metadata().map(|m| m.len()).unwrap_or(0))
        })?;
        if size > MAX_BYTES {
            self.compact()?;
        }
        Ok(())
    }

    /// Every computer the journal holds.
    pub fn read(&self) -> Result<HashMap<Key, Kept>, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
            Err(e) => return Err(self.words("reading", &e)),
        };
        Ok(fold(&text))
    }

    /// Rewrite the file with one whole line (and one `added` line) per
    /// computer, the newest [`MAX_COMPUTERS`].
    pub fn compact(&self) -> Result<(), String> {
        self.locked(FlockArg::LockExclusive, |_| {
            let text =
                std::fs::read_to_string(&self.path).map_err(|e| self.words("reading", &e))?;
            let tmp = self.path.with_extension("jsonl.tmp");
            std::fs::write(&tmp, compacted(&text)).map_err(|e| self.words("compacting", &e))?;
            std::fs::rename(&tmp, &self.path).map_err(|e| self.words("compacting", &e))
        })
    }

    /// Run `f` on the file under a lock of `how`, reopening when a
    /// compaction replaced the file while the lock was awaited.
    fn locked<T>(
        &self,
        how: FlockArg,
        f: impl Fn(&File) -> Result<T, String>,
    ) -> Result<T, String> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| self.words("making the folder of", &e))?;
        }
        for _ in 0..8 {
            let file = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&self.path)
                .map_err(|e| self.words("opening", &e))?;
            let lock = Flock::lock(file, how).map_err(|(_, e)| self.words("locking", &e.into()))?;
            let same = match (lock.metadata(), std::fs::metadata(&self.path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if same {
                return f(&lock);
            }
        }
        Err(format!(
            "the receipts journal {} kept being replaced while it was written",
            self.path.display()
        ))
    }

    fn words(&self, what: &str, e: &std::io::Error) -> String {
        format!("{what} the receipts journal {}: {e}", self.path.display())
    }
}

/// The journal's lines folded per computer (a line that does not parse, a
/// torn last line for one, is skipped).
pub fn fold(text: &str) -> HashMap<Key, Kept> {
    let mut all: HashMap<Key, Kept> = HashMap::new();
    for (n, raw) in text.lines().enumerate() {
        let Ok(line) = serde_json::from_str::<Line>(raw) else {
            continue;
        };
        let kept = all
            .entry((line.provider.clone(), line.id.clone()))
            .or_default();
        kept.order = n;
        if line.added {
            kept.added_pushed += line.bytes_pushed;
            kept.added_pulled += line.bytes_pulled;
        } else {
            kept.last = Some(line);
        }
    }
    all
}

/// The text of a compacted journal.
fn compacted(text: &str) -> String {
    let mut kept: Vec<(Key, Kept)> = fold(text).into_iter().collect();
    kept.sort_by_key(|(_, k)| k.order);
    let skip = kept.len().saturating_sub(MAX_COMPUTERS);
    let mut out = String::new();
    for ((provider, id), k) in kept.into_iter().skip(skip) {
        let at = k.last.as_ref().map(|l| l.at.clone()).unwrap_or_default();
        let mut lines: Vec<Line> = k.last.into_iter().collect();
        if k.added_pushed + k.added_pulled > 0 {
            lines.push(Line {
                provider,
                id,
                at,
                bytes_pushed: k.added_pushed,
                bytes_pulled: k.added_pulled,
                added: true,
                ..Line::default()
            });
        }
        for l in lines {
            if let Ok(s) = serde_json::to_string(&l) {
                out.push_str(&s);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, calls: u64, pushed: u64) -> Line {
        Line {
            provider: "local".into(),
            id: id.into(),
            at: "2026-12-07T00:00:00Z".into(),
            tool_calls: calls,
            bytes_pushed: pushed,
            ..Line::default()
        }
    }

    #[test]
    fn the_last_whole_line_wins_and_cp_bytes_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::in_dir(dir.path());
        assert!(j.read().unwrap().is_empty());
        let added = Line {
            added: true,
            ..line("a", 0, 100)
        };
        j.append(&[line("a", 1, 10), line("b", 5, 0)]).unwrap();
        j.append(&[added.clone(), added, line("a", 3, 20)]).unwrap();
        let all = j.read().unwrap();
        let a = &all[&("local".to_string(), "a".to_string())];
        assert_eq!(a.last.as_ref().unwrap().tool_calls, 3);
        assert_eq!(a.bytes(), (220, 0));
        assert_eq!(
            all[&("local".to_string(), "b".to_string())]
                .last
                .as_ref()
                .unwrap()
                .tool_calls,
            5
        );
    }

    #[test]
    fn a_compacted_journal_keeps_each_computers_receipt_and_no_more_computers_than_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::in_dir(dir.path());
        let mut lines = Vec::new();
        for n in 0..MAX_COMPUTERS + 10 {
            lines.push(line(&format!("c{n}"), 1, 0));
            lines.push(line(&format!("c{n}"), 2, 7));
        }
        lines.push(Line {
            added: true,
            ..line(&format!("c{}", MAX_COMPUTERS + 9), 0, 5)
        });
        j.append(&lines).unwrap();
        let before = j.read().unwrap();
        j.compact().unwrap();
        let after = j.read().unwrap();
        assert_eq!(after.len(), MAX_COMPUTERS);
        assert!(!after.contains_key(&("local".to_string(), "c0".to_string())));
        let newest = ("local".to_string(), format!("c{}", MAX_COMPUTERS + 9));
        assert_eq!(after[&newest].bytes(), (12, 0));
        assert_eq!(after[&newest].last, before[&newest].last);
        let size = std::fs::metadata(j.path()).unwrap().len();
        assert!(size < MAX_BYTES, "{size}");
    }

    #[test]
    fn a_torn_line_is_skipped() {
        let all = fold(
            "{\"provider\":\"local\",\"id\":\"a\",\"at\":\"x\",\"tool_calls\":2}\n{\"provider\":\"lo",
        );
        assert_eq!(all.len(), 1);
    }
}
