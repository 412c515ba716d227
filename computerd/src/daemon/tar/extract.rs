//! The extraction of a push, on its own thread: every entry reached from the
//! push's directory one name at a time, never through a symlink.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::sys::time::TimeSpec;
use nix::unistd::UnlinkatFlags;
use tar::EntryType;

use crate::daemon::sys::{errno_of, path_error};
use crate::daemon::walk::{self, Stuck};
use crate::protocol::RpcError;

use super::push::{ChannelReader, MetaBound};
use super::{COPY_BYTES, MADE_DIR_MODE};

/// The extraction, on its own thread.
pub(super) struct Extractor {
    /// The push's directory, opened once (O_PATH).
    root: OwnedFd,
    /// Directories that get their mode at the end, by their names from the root.
    dir_modes: BTreeMap<Vec<OsString>, u32>,
    entries: u64,
    abandoned: Arc<AtomicBool>,
}

type Entry<'a> = tar::Entry<'a, MetaBound<ChannelReader>>;

impl Extractor {
    pub(super) fn new(root: OwnedFd, abandoned: Arc<AtomicBool>) -> Extractor {
        Extractor {
            root,
            dir_modes: BTreeMap::new(),
            entries: 0,
            abandoned,
        }
    }

    pub(super) fn run(mut self, reader: ChannelReader) -> Result<u64, RpcError> {
        let mut archive = tar::Archive::new(MetaBound::new(reader));
        let outcome = self.extract_all(&mut archive);
        // After a failure too: the entries before it stay, with their modes.
        self.apply_dir_modes();
        outcome.map(|()| self.entries)
    }

    fn extract_all(
        &mut self,
        archive: &mut tar::Archive<MetaBound<ChannelReader>>,
    ) -> Result<(), RpcError> {
        let entries = archive.entries().map_err(|e| self.archive_error(&e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.archive_error(&e))?;
            self.extract(&mut entry)?;
        }
        Ok(())
    }

    fn archive_error(&self, e: &io::Error) -> RpcError {
        if self.abandoned.load(Ordering::SeqCst) {
            RpcError::aborted("tar.push was abandoned before its archive ended")
        } else {
            RpcError::invalid(format!("tar.push: the archive could not be read: {e}"))
        }
    }

    fn extract(&mut self, entry: &mut Entry<'_>) -> Result<(), RpcError> {
        // path_bytes: the GNU long name or PAX path when there is one.
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        if kind == EntryType::XGlobalHeader {
            // Global PAX records describe the archive, not a file.
            return Ok(());
        }
        let parts = entry_parts(&raw, &shown)?;
        let mode = entry
            .header()
            .mode()
            .map_err(|e| RpcError::invalid(format!("tar.push entry {shown}: its mode cannot be read: {e}")))?
            // Never setuid or setgid; the sticky bit may stay.
            & 0o1777;
        let refuse = |what: &str| {
            RpcError::invalid(format!(
                "tar.push entry {shown}: it is {what}; tar.push extracts files, directories and symlinks only"
            ))
        };
        match kind {
            EntryType::Directory => self.directory(&parts, mode, &shown)?,
            // Old archives mark a directory with a trailing slash only.
            EntryType::Regular if raw.ends_with(b"/") => self.directory(&parts, mode, &shown)?,
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mtime = entry.header().mtime().ok();
                self.file(&parts, mode, mtime, entry, &shown)?;
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                if target.is_empty() {
                    return Err(RpcError::invalid(format!(
                        "tar.push entry {shown}: a symlink without a target"
                    )));
                }
                self.symlink(&parts, &target, &shown)?;
            }
            EntryType::Link => return Err(refuse("a hard link")),
            EntryType::Char | EntryType::Block => return Err(refuse("a device")),
            EntryType::Fifo => return Err(refuse("a pipe (FIFO)")),
            other => {
                let what = format!("of entry type {:?}", char::from(other.as_byte()));
                return Err(refuse(&what));
            }
        }
        self.entries += 1;
        Ok(())
    }

    fn directory(&mut self, parts: &[OsString], mode: u32, shown: &str) -> Result<(), RpcError> {
        // The root itself ("./") keeps its mode: it may be a shared directory
        // such as /tmp, which an archive's idea of its mode must not change.
        let Some(name) = parts.last() else {
            return Ok(());
        };
        let parent = self.parent(parts, shown)?;
        let (fd, found) = match open_dir(&parent, name) {
            Ok(fd) => (fd, true),
            Err(e) => {
                match e {
                    Errno::ENOENT => {}
                    // A symlink or a file at the directory's own name is
                    // replaced, never followed (unlink never removes a directory).
                    Errno::ELOOP | Errno::ENOTDIR => {
                        match nix::unistd::unlinkat(
                            &parent,
                            name.as_os_str(),
                            UnlinkatFlags::NoRemoveDir,
                        ) {
                            Ok(()) | Err(Errno::ENOENT) => {}
                            Err(e) => return Err(entry_error(shown, e)),
                        }
                    }
                    e => return Err(entry_error(shown, e)),
                }
                match nix::sys::stat::mkdirat(
                    &parent,
                    name.as_os_str(),
                    Mode::from_bits_truncate(0o700),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(entry_error(shown, e)),
                }
                let fd = open_dir(&parent, name).map_err(|e| way_error(shown, parts, e))?;
                (fd, false)
            }
        };
        // Owner access until the archive ends, so the entries after it go in.
        match nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode | 0o700)) {
            Ok(()) => {}
            // A directory found there and owned by someone else keeps its mode.
            Err(Errno::EPERM) if found => {}
            Err(e) => return Err(entry_error(shown, e)),
        }
        self.dir_modes.insert(parts.to_vec(), mode);
        Ok(())
    }

    fn file(
        &mut self,
        parts: &[OsString],
        mode: u32,
        mtime: Option<u64>,
        entry: &mut Entry<'_>,
        shown: &str,
    ) -> Result<(), RpcError> {
        let Some(name) = parts.last() else {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: a file cannot take the name of the directory itself"
            )));
        };
        let parent = self.parent(parts, shown)?;
        // Written beside its name and renamed over it: the name never holds
        // half a file, and a symlink there is replaced, never followed.
        let (tmp, fd) = create_temp(&parent, name).map_err(|e| entry_error(shown, e))?;
        let placed = self
            .write_file(fd, mode, mtime, entry, shown)
            .and_then(|()| {
                nix::fcntl::renameat(&parent, tmp.as_os_str(), &parent, name.as_os_str())
                    .map_err(|e| entry_error(shown, e))
            });
        if placed.is_err() {
            let _ = nix::unistd::unlinkat(&parent, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        placed
    }

    fn write_file(
        &self,
        fd: OwnedFd,
        mode: u32,
        mtime: Option<u64>,
        entry: &mut Entry<'_>,
        shown: &str,
    ) -> Result<(), RpcError> {
        let mut file = File::from(fd);
        let mut buf = vec![0u8; COPY_BYTES];
        let mut copied = 0u64;
        loop {
            let n = match entry.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.archive_error(&e)),
            };
            file.write_all(&buf[..n])
                .map_err(|e| entry_error(shown, errno_of(&e)))?;
            copied += n as u64;
        }
        // The tar crate reads an entry's data as a plain `take`: an archive
        // that ends inside it looks like a short entry, not an error.
        if copied < entry.size() {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: the archive ended {copied} bytes into its {} bytes",
                entry.size()
            )));
        }
        nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(mode))
            .map_err(|e| entry_error(shown, e))?;
        if let Some(mtime) = mtime.and_then(|m| i64::try_from(m).ok()) {
            // The archive's time, as tar gives it; the access time is left alone.
            nix::sys::stat::futimens(&file, &TimeSpec::UTIME_OMIT, &TimeSpec::new(mtime, 0))
                .map_err(|e| entry_error(shown, e))?;
        }
        Ok(())
    }

    fn symlink(&mut self, parts: &[OsString], target: &[u8], shown: &str) -> Result<(), RpcError> {
        let Some(name) = parts.last() else {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: a symlink cannot take the name of the directory itself"
            )));
        };
        let parent = self.parent(parts, shown)?;
        // Made beside its name and renamed over it, so whatever is there (a
        // symlink included) is replaced, never followed.
        let mut made = None;
        for _ in 0..TEMP_TRIES {
            let tmp = temp_name(name);
            match nix::unistd::symlinkat(OsStr::from_bytes(target), &parent, tmp.as_os_str()) {
                Ok(()) => {
                    made = Some(tmp);
                    break;
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(entry_error(shown, e)),
            }
        }
        let Some(tmp) = made else {
            return Err(entry_error(shown, Errno::EEXIST));
        };
        if let Err(e) = nix::fcntl::renameat(&parent, tmp.as_os_str(), &parent, name.as_os_str()) {
            let _ = nix::unistd::unlinkat(&parent, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(entry_error(shown, e));
        }
        Ok(())
    }

    /// The directory an entry goes in, reached from the root one name at a
    /// time, never through a symlink. A missing one is made 0700, and gets
    /// 0755 at the end unless an entry of its own says otherwise.
    fn parent(&mut self, parts: &[OsString], shown: &str) -> Result<OwnedFd, RpcError> {
        let dirs = parts.split_last().map_or(&[][..], |(_, dirs)| dirs);
        let dir_modes = &mut self.dir_modes;
        walk::mkdirs_beneath(self.root.as_fd(), dirs, 0o700, OFlag::O_PATH, &mut |i| {
            dir_modes
                .entry(parts[..=i].to_vec())
                .or_insert(MADE_DIR_MODE);
        })
        .map_err(|stuck| match stuck {
            Stuck {
                making: true,
                errno,
                ..
            } => entry_error(shown, errno),
            Stuck { at, errno, .. } => way_error(shown, &parts[..=at], errno),
        })
    }

    /// Give every directory its mode, deepest first: each is reached through
    /// its parents, which still have owner access. Best effort: the entries
    /// are in place, and a directory gone or changed since is left alone.
    fn apply_dir_modes(&mut self) {
        let mut dirs: Vec<(Vec<OsString>, u32)> =
            std::mem::take(&mut self.dir_modes).into_iter().collect();
        dirs.sort_by_key(|(parts, _)| std::cmp::Reverse(parts.len()));
        for (parts, mode) in dirs {
            let set = self
                .reach(&parts)
                .and_then(|fd| nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode)));
            if let Err(e) = set {
                let shown = parts
                    .iter()
                    .map(|p| p.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                tracing::warn!("tar.push: directory {shown} could not get mode {mode:o}: {e}");
            }
        }
    }

    /// A directory below the root, opened for fchmod.
    fn reach(&self, parts: &[OsString]) -> Result<OwnedFd, Errno> {
        walk::open_dir_beneath(self.root.as_fd(), parts, OFlag::O_RDONLY).map_err(|s| s.errno)
    }
}

/// How many temporary names a file or symlink tries before giving up.
const TEMP_TRIES: usize = 16;

/// Create a temporary file beside `name`: O_EXCL and O_NOFOLLOW, so nothing
/// already there (a symlink planted under a guessed name) is ever opened.
fn create_temp(parent: &OwnedFd, name: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    for _ in 0..TEMP_TRIES {
        let tmp = temp_name(name);
        match nix::fcntl::openat(
            parent,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EEXIST)
}

/// `.<name>.computerd-<16 hex digits>`, within NAME_MAX (255 bytes).
fn temp_name(name: &OsStr) -> OsString {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let random = std::collections::hash_map::RandomState::new()
        .hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
    let keep = &name.as_bytes()[..name.len().min(200)];
    let mut tmp = OsString::from(".");
    tmp.push(OsStr::from_bytes(keep));
    tmp.push(format!(".computerd-{random:016x}"));
    tmp
}

/// An entry's names below the root. Absolute names and `..` parts are
/// denied: an entry never leaves the directory, whatever its name says.
fn entry_parts(raw: &[u8], shown: &str) -> Result<Vec<OsString>, RpcError> {
    if raw.starts_with(b"/") {
        return Err(RpcError::denied(format!(
            "tar.push entry {shown}: it is an absolute path; entries must be relative to the directory"
        )));
    }
    let mut parts = Vec::new();
    for part in raw.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                return Err(RpcError::denied(format!(
                    "tar.push entry {shown}: it has a .. part; entries must stay inside the directory"
                )));
            }
            part => parts.push(OsStr::from_bytes(part).to_os_string()),
        }
    }
    Ok(parts)
}

/// A directory opened so fchmod works on it (O_PATH descriptors refuse it).
fn open_dir(at: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    walk::dir_at(at, name, OFlag::O_RDONLY)
}

fn entry_error(shown: &str, e: Errno) -> RpcError {
    path_error("tar.push", &format!("entry {shown}"), e)
}

/// Something on an entry's way that is not a directory: denied, whatever it is.
fn way_error(shown: &str, way: &[OsString], e: Errno) -> RpcError {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            let way = way
                .iter()
                .map(|p| p.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            RpcError::denied(format!(
                "tar.push entry {shown}: {way} is a symlink or a file, and an entry may not pass through either"
            ))
        }
        e => entry_error(shown, e),
    }
}

#[cfg(test)]
mod tests {
    use crate::daemon::tar::testing::*;
    use crate::protocol::ErrorKind;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use tar::{EntryType, Header};

    #[test]
    fn push_denies_dotdot_and_absolute_entries_and_keeps_those_before() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("t");
        for bad in ["../x", "a/../../x", "/abs", "ok/../../x"] {
            let ar = archive(&[
                raw_entry("before", EntryType::Regular, 0o644, b"1", None),
                raw_entry(bad, EntryType::Regular, 0o644, b"evil", None),
                raw_entry("after", EntryType::Regular, 0o644, b"2", None),
            ]);
            let err = push_all(&target, &ar, 512 * 1024).unwrap_err();
            assert_eq!(
                err.kind(),
                Some(ErrorKind::Denied),
                "{bad}: {}",
                err.message
            );
            assert_eq!(names(&target), vec!["before"], "{bad}");
            assert_eq!(names(top.path()), vec!["t"], "{bad}");
        }
        assert!(!Path::new("/abs").exists());
    }

    #[test]
    fn push_denies_an_entry_under_a_symlink_and_leaves_no_temporary_file() {
        let outside = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let ar = archive(&[
            raw_entry(
                "l",
                EntryType::Symlink,
                0o777,
                b"",
                Some(&s(outside.path())),
            ),
            raw_entry("l/f", EntryType::Regular, 0o644, b"evil", None),
        ]);
        let err = push_all(dst.path(), &ar, 300).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Denied), "{}", err.message);
        assert!(err.message.contains("l/f"), "{}", err.message);
        assert_eq!(names(outside.path()), Vec::<String>::new());
        assert_eq!(names(dst.path()), vec!["l"]);
        assert_eq!(
            std::fs::read_link(dst.path().join("l")).unwrap(),
            outside.path()
        );

        // A file on the way is denied too.
        let ar = archive(&[
            raw_entry("file", EntryType::Regular, 0o644, b"x", None),
            raw_entry("file/g", EntryType::Regular, 0o644, b"y", None),
        ]);
        assert_eq!(
            push_all(dst.path(), &ar, 512 * 1024).unwrap_err().kind(),
            Some(ErrorKind::Denied)
        );
        assert_eq!(names(dst.path()), vec!["file", "l"]);
    }

    #[test]
    fn push_replaces_a_symlink_at_an_entry_name_without_following_it() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"safe").unwrap();
        let dst = tempfile::tempdir().unwrap();
        symlink(&victim, dst.path().join("f")).unwrap();
        symlink(outside.path(), dst.path().join("d")).unwrap();
        symlink(&victim, dst.path().join("s")).unwrap();
        let ar = archive(&[
            raw_entry("f", EntryType::Regular, 0o600, b"new", None),
            raw_entry("d/", EntryType::Directory, 0o755, b"", None),
            raw_entry("d/inside", EntryType::Regular, 0o644, b"in", None),
            raw_entry("s", EntryType::Symlink, 0o777, b"", Some("f")),
        ]);
        assert_eq!(push_all(dst.path(), &ar, 512 * 1024).unwrap(), 4);
        assert_eq!(std::fs::read(&victim).unwrap(), b"safe");
        assert_eq!(names(outside.path()), vec!["victim"]);
        assert_eq!(std::fs::read(dst.path().join("f")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(dst.path().join("d"))
                .unwrap()
                .is_dir()
        );
        assert_eq!(
            std::fs::read_link(dst.path().join("s")).unwrap(),
            Path::new("f")
        );
        assert_eq!(names(dst.path()), vec!["d", "f", "s"]);
    }

    #[test]
    fn push_refuses_hard_links_devices_and_pipes_as_invalid() {
        for (kind, what) in [
            (EntryType::Link, "hard link"),
            (EntryType::Char, "device"),
            (EntryType::Block, "device"),
            (EntryType::Fifo, "pipe"),
        ] {
            let dst = tempfile::tempdir().unwrap();
            let ar = archive(&[
                raw_entry("ok", EntryType::Regular, 0o644, b"1", None),
                raw_entry("bad", kind, 0o644, b"", Some("ok")),
            ]);
            let err = push_all(dst.path(), &ar, 512 * 1024).unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::Invalid));
            assert!(err.message.contains(what), "{}", err.message);
            assert_eq!(names(dst.path()), vec!["ok"]);
        }
    }

    #[test]
    fn push_of_an_archive_cut_short_fails_and_leaves_no_half_file() {
        let dst = tempfile::tempdir().unwrap();
        let ar = archive(&[
            raw_entry("whole", EntryType::Regular, 0o644, b"w", None),
            raw_entry("half", EntryType::Regular, 0o644, &vec![7u8; 5000], None),
        ]);
        let err = push_all(dst.path(), &ar[..3000], 1000).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid), "{}", err.message);
        assert!(err.message.contains("half"), "{}", err.message);
        assert_eq!(names(dst.path()), vec!["whole"]);
    }

    #[test]
    fn push_gives_directories_their_modes_at_the_end() {
        let dst = tempfile::tempdir().unwrap();
        chmod(dst.path(), 0o751);
        std::fs::create_dir(dst.path().join("found")).unwrap();
        chmod(&dst.path().join("found"), 0o700);
        let ar = archive(&[
            raw_entry("./", EntryType::Directory, 0o700, b"", None),
            raw_entry("ro/", EntryType::Directory, 0o555, b"", None),
            raw_entry("ro/f", EntryType::Regular, 0o444, b"f", None),
            raw_entry("ro/inner/", EntryType::Directory, 0o500, b"", None),
            raw_entry("ro/inner/g", EntryType::Regular, 0o4755, b"g", None),
            raw_entry("found/", EntryType::Directory, 0o2711, b"", None),
            raw_entry("implied/by/h", EntryType::Regular, 0o640, b"h", None),
        ]);
        // Every entry counts, the root's own too.
        assert_eq!(push_all(dst.path(), &ar, 512 * 1024).unwrap(), 7);
        let d = dst.path();
        assert_eq!(
            [
                d,
                &d.join("ro"),
                &d.join("ro/f"),
                &d.join("ro/inner"),
                &d.join("ro/inner/g"),
                &d.join("found"),
                &d.join("implied"),
                &d.join("implied/by"),
                &d.join("implied/by/h")
            ]
            .map(mode_of),
            // The root keeps its mode; setuid and setgid bits are dropped.
            [
                0o751, 0o555, 0o444, 0o500, 0o755, 0o711, 0o755, 0o755, 0o640
            ]
        );
        assert_eq!(std::fs::read(d.join("ro/inner/g")).unwrap(), b"g");
    }

    #[test]
    fn push_reads_gnu_long_names_and_pax_paths() {
        let dst = tempfile::tempdir().unwrap();
        let long = format!("deep/{}", "x".repeat(180));
        let mut builder = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(4);
        builder.append_data(&mut h, &long, &b"long"[..]).unwrap();
        let mut gnu = builder.into_inner().unwrap();
        gnu.truncate(gnu.len() - 1024);

        let pax_path = format!("pax/{}", "p".repeat(200));
        let record = |k: &str, v: &str| {
            let body = format!(" {k}={v}\n");
            let mut n = body.len() + 1;
            while format!("{n}{body}").len() != n {
                n += 1;
            }
            format!("{n}{body}")
        };
        let pax = record("path", &pax_path);
        let ar = archive(&[
            gnu,
            raw_entry(
                "PaxHeader/x",
                EntryType::XGlobalHeader,
                0o644,
                record("comment", "hi").as_bytes(),
                None,
            ),
            raw_entry(
                "PaxHeader/x",
                EntryType::XHeader,
                0o644,
                pax.as_bytes(),
                None,
            ),
            raw_entry("truncated-name", EntryType::Regular, 0o600, b"pax", None),
        ]);
        assert_eq!(push_all(dst.path(), &ar, 333).unwrap(), 2);
        assert_eq!(std::fs::read(dst.path().join(&long)).unwrap(), b"long");
        assert_eq!(std::fs::read(dst.path().join(&pax_path)).unwrap(), b"pax");
        assert_eq!(names(dst.path()), vec!["deep", "pax"]);
    }
}
