//! The ledger: the phones this provider made, in a JSON file under the
//! server's state directory, so a restarted server finds them again. The
//! phone harness keeps no labels on a session: the ledger keeps each
//! phone's labels, image and deadline, and list, attach, connect, release
//! and the janitor see only the phones it names.
//!
//! A create writes `pending-<key>` before its POST and replaces it by the
//! session's id once known; a released phone stays, marked released,
//! until the service no longer knows it. Each change is a whole new file
//! moved into place, so a crash leaves the old ledger or the new one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use computer_phone::install::Folder;
use serde::{Deserialize, Serialize};

use crate::types::{Labels, ProviderError, Result};

/// A ledger name for a create whose session is not known yet.
pub fn pending(key: &str) -> String {
    format!("pending-{key}")
}

/// One phone, as the ledger keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The Idempotency-Key of the POST that made it.
    pub key: String,
    pub labels: Labels,
    pub image: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub deadline: String,
    /// The deadline in ms since the epoch, for the janitor.
    pub deadline_ms: i64,
    /// Released (DELETE sent), kept until the service no longer knows it.
    #[serde(default)]
    pub released: bool,
    /// The host folders shared with it: its files, where apps.install
    /// finds APKs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Folder>,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    phones: BTreeMap<String, Entry>,
}

/// The ledger file.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    /// One change at a time in this process.
    lock: Mutex<()>,
}

impl Ledger {
    pub fn new(path: PathBuf) -> Ledger {
        Ledger {
            path,
            lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn words(&self, what: &str, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::failed(format!(
            "the phone harness ledger {} could not be {what}: {e}",
            self.path.display()
        ))
        .with_field("ledger")
    }

    fn read(&self) -> Result<File> {
        match std::fs::read(&self.path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| self.words("read", e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
            Err(e) => Err(self.words("read", e)),
        }
    }

    fn write(&self, file: &File) -> Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| self.words("written", e))?;
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let body = serde_json::to_vec_pretty(file).map_err(|e| self.words("written", e))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| self.words("written", e))?;
        f.write_all(&body)
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                self.words("written", e)
            })
    }

    /// Every entry, by name (a session id, or `pending-<key>`).
    pub fn all(&self) -> Result<BTreeMap<String, Entry>> {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self.read()?.phones)
    }

    pub fn get(&self, name: &str) -> Result<Option<Entry>> {
        Ok(self.all()?.remove(name))
    }

    /// Change the entries with `f`, in one write.
    pub fn update(&self, f: impl FnOnce(&mut BTreeMap<String, Entry>)) -> Result<()> {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read()?;
        f(&mut file.phones);
        self.write(&file)
    }

    pub fn put(&self, name: &str, entry: &Entry) -> Result<()> {
        self.update(|m| {
            m.insert(name.to_string(), entry.clone());
        })
    }

    pub fn remove(&self, name: &str) -> Result<()> {
        self.update(|m| {
            m.remove(name);
        })
    }

    /// `old` becomes `new`, in one write.
    pub fn rename(&self, old: &str, new: &str, entry: &Entry) -> Result<()> {
        self.update(|m| {
            m.remove(old);
            m.insert(new.to_string(), entry.clone());
        })
    }

    pub fn mark_released(&self, id: &str) -> Result<()> {
        self.update(|m| {
            if let Some(e) = m.get_mut(id) {
                e.released = true;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> Entry {
        Entry {
            key: key.into(),
            labels: Labels::from([("a".into(), "b".into())]),
            image: "android".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            deadline: "2026-01-01T00:10:00Z".into(),
            deadline_ms: 1,
            released: false,
            files: Vec::new(),
        }
    }

    #[test]
    fn entries_survive_a_new_ledger_over_the_same_file_and_change_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/phone-harness/ledger.json");
        let l = Ledger::new(path.clone());
        assert!(l.all().unwrap().is_empty());
        l.put(&pending("k1"), &entry("k1")).unwrap();
        l.rename(&pending("k1"), "s-1", &entry("k1")).unwrap();
        l.mark_released("s-1").unwrap();
        let again = Ledger::new(path.clone());
        let all = again.all().unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["s-1"]);
        assert!(all["s-1"].released);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        again.remove("s-1").unwrap();
        assert!(l.all().unwrap().is_empty());
    }

    #[test]
    fn an_unreadable_ledger_is_named_not_taken_for_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        std::fs::write(&path, "{not json").unwrap();
        let e = Ledger::new(path).all().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("ledger"));
    }
}
