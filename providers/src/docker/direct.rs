//! A computer's direct directory on this host: `<cache>/direct/<name>`,
//! bound read-only into the computer at [`super::plan::DIRECT_MOUNT`],
//! where this process listens for the daemon's bridge ([`super::stream`]).
//!
//! `<cache>/direct` is 0700 (this process's alone, inside the checked
//! cache); each computer's directory is 0711, so the computer's user (any
//! uid, remapped or not) may reach a socket in it but not list it, and
//! holds nothing but this process's sockets for the few milliseconds each
//! connection takes to open. The computer sees it read-only: it can write
//! nothing to this host through it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::plan::is_computer_name;
use crate::types::{ProviderError, Result};

/// A directory with no computer is left this long before the sweep
/// removes it: a create of another process may be about to make it.
pub const SWEEP_AFTER: Duration = Duration::from_secs(120);

/// `<cache>/direct`.
pub fn root(cache: &Path) -> PathBuf {
    cache.join("direct")
}

/// `<cache>/direct/<name>`.
pub fn dir_of(cache: &Path, name: &str) -> PathBuf {
    root(cache).join(name)
}

/// Make a new computer's directory (its name is new: one there already
/// is refused). The cache itself is checked by the daemon's copy first.
pub fn make(cache: &Path, name: &str) -> Result<PathBuf> {
    let failed = |what: &Path, e: std::io::Error| {
        ProviderError::failed(format!("could not make {}: {e}", what.display()))
    };
    let root = root(cache);
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(&root, e)),
    }
    let meta = std::fs::symlink_metadata(&root).map_err(|e| failed(&root, e))?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(ProviderError::invalid(
            "cache_dir",
            format!(
                "{} must be a directory of this process's user (uid {me}) with mode 0700; it is {} of uid {} with mode {:04o}",
                root.display(),
                if meta.is_dir() {
                    "a directory"
                } else {
                    "not a directory"
                },
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    let dir = root.join(name);
    std::fs::DirBuilder::new()
        .mode(0o711)
        .create(&dir)
        .map_err(|e| failed(&dir, e))?;
    // The umask may have narrowed it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| failed(&dir, e))?;
    Ok(dir)
}

/// Remove a computer's directory (missing is fine).
pub fn remove(cache: &Path, name: &str) {
    if !is_computer_name(name) {
        return;
    }
    let dir = dir_of(cache, name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(
            computer = name,
            "could not remove its direct directory {}: {e}",
            dir.display()
        ),
    }
}

/// Remove the directories of computers that are not in `live` and were
/// made more than [`SWEEP_AFTER`] ago; their names.
pub fn sweep(cache: &Path, live: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root(cache)) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !is_computer_name(&name) || live.contains(&name) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= SWEEP_AFTER);
        if old {
            remove(cache, &name);
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computers_directory_is_0711_inside_a_0700_root_and_is_removed_by_name_only() {
        let cache = tempfile::tempdir().unwrap();
        let name = "computer-0123456789ab";
        let dir = make(cache.path(), name).unwrap();
        assert_eq!(dir, cache.path().join("direct").join(name));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&root(cache.path())), 0o700);
        assert_eq!(mode(&dir), 0o711);
        // A name already there is refused (a name is made once).
        assert!(make(cache.path(), name).is_err());
        // Not one of ours by name: left alone.
        let other = root(cache.path()).join("keep");
        std::fs::create_dir(&other).unwrap();
        remove(cache.path(), "keep");
        assert!(other.exists());
        // A young directory with no computer is kept; a live one always.
        assert!(sweep(cache.path(), &[]).is_empty());
        let old = SystemTime::now() - SWEEP_AFTER - Duration::from_secs(1);
        let f = std::fs::File::open(&dir).unwrap();
        f.set_modified(old).unwrap();
        assert!(sweep(cache.path(), &[name.to_string()]).is_empty());
        assert_eq!(sweep(cache.path(), &[]), vec![name.to_string()]);
        assert!(!dir.exists() && other.exists());
    }

    #[test]
    fn a_root_another_user_may_read_is_refused() {
        let cache = tempfile::tempdir().unwrap();
        let r = root(cache.path());
        std::fs::create_dir(&r).unwrap();
        std::fs::set_permissions(&r, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = make(cache.path(), "computer-0123456789ab").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("cache_dir"));
        assert!(e.message.contains("mode 0755"), "{}", e.message);
    }
}
