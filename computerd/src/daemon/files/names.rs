//! files.mkdir, files.move and files.remove: what changes names, not bytes.

use std::ffi::{OsStr, OsString};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, RenameFlags};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;

use crate::daemon::sys::path_error;
use crate::daemon::walk::{Listing, Step, Tree};
use crate::protocol::{
    Empty, FilesMkdirParams, FilesMoveParams, FilesRemoveParams, RpcError, clean_path,
};

use super::{DIR_MODE, check_mode, is_type, join};

pub fn mkdir(p: FilesMkdirParams) -> Result<Empty, RpcError> {
    const OP: &str = "files.mkdir";
    let path = clean_path("path", &p.path)?;
    let mode = check_mode(OP, p.mode.unwrap_or(DIR_MODE))?;
    if p.parents.unwrap_or(false) {
        make_dirs(OP, &path, mode)?;
        return Ok(Empty {});
    }
    match nix::unistd::mkdir(path.as_str(), Mode::from_bits_truncate(mode)) {
        Ok(()) => exact_dir_mode(OP, &path, mode)?,
        Err(Errno::EEXIST) => {
            return Err(RpcError::exists(format!(
                "{OP} {path}: something is already there; pass parents: true to accept a directory that exists"
            )));
        }
        Err(e) => return Err(path_error(OP, &path, e)),
    }
    Ok(Empty {})
}

pub fn move_(p: FilesMoveParams) -> Result<Empty, RpcError> {
    const OP: &str = "files.move";
    let from = clean_path("from", &p.from)?;
    let to = clean_path("to", &p.to)?;
    if from == "/" {
        return Err(RpcError::denied(format!("{OP}: / cannot be moved")).with_field("from"));
    }
    if to == "/" {
        return Err(
            RpcError::denied(format!("{OP}: nothing can be moved onto /")).with_field("to"),
        );
    }
    if to.starts_with(&format!("{from}/")) {
        return Err(RpcError::invalid_field(
            "to",
            format!("{OP} {from} to {to}: a directory cannot be moved into itself"),
        ));
    }
    let overwrite = p.overwrite.unwrap_or(false);
    if overwrite {
        nix::fcntl::renameat(AT_FDCWD, from.as_str(), AT_FDCWD, to.as_str())
            .map_err(|e| move_error(&from, &to, overwrite, e))?;
        return Ok(Empty {});
    }
    // RENAME_NOREPLACE checks and renames in one step, so nothing that
    // appears at `to` in between is ever replaced.
    match nix::fcntl::renameat2(
        AT_FDCWD,
        from.as_str(),
        AT_FDCWD,
        to.as_str(),
        RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(Empty {}),
        // EINVAL: this filesystem has no RENAME_NOREPLACE (ENOSYS: the kernel).
        Err(Errno::EINVAL | Errno::ENOSYS) => link_and_unlink(&from, &to),
        Err(e) => Err(move_error(&from, &to, overwrite, e)),
    }
}

pub fn remove(p: FilesRemoveParams) -> Result<Empty, RpcError> {
    const OP: &str = "files.remove";
    let path = clean_path("path", &p.path)?;
    if path == "/" {
        return Err(RpcError::denied(format!("{OP}: / cannot be removed")).with_field("path"));
    }
    let st = nix::sys::stat::lstat(path.as_str()).map_err(|e| path_error(OP, &path, e))?;
    if !is_type(&st, libc::S_IFDIR) {
        // unlink never follows a symlink: the link goes, its target stays.
        nix::unistd::unlinkat(AT_FDCWD, path.as_str(), UnlinkatFlags::NoRemoveDir)
            .map_err(|e| path_error(OP, &path, e))?;
        return Ok(Empty {});
    }
    if p.recursive.unwrap_or(false) {
        remove_contents(&path)?;
    }
    match nix::unistd::unlinkat(AT_FDCWD, path.as_str(), UnlinkatFlags::RemoveDir) {
        Ok(()) => Ok(Empty {}),
        Err(Errno::ENOTEMPTY | Errno::EEXIST) => Err(RpcError::is_dir(format!(
            "{OP} {path}: the directory is not empty; pass recursive: true to remove it with everything in it"
        ))),
        Err(e) => Err(path_error(OP, &path, e)),
    }
}

/// mkdir -p: make `path` and every missing directory above it. Parents made
/// get 0755 and `path` itself `mode`, exactly; a directory already there is
/// fine and keeps its mode. Something else on the way is not_dir.
pub(crate) fn make_dirs(op: &str, path: &str, mode: u32) -> Result<(), RpcError> {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut prefix = String::with_capacity(path.len());
    for (i, part) in parts.iter().enumerate() {
        prefix.push('/');
        prefix.push_str(part);
        let last = i + 1 == parts.len();
        let m = if last { mode } else { DIR_MODE };
        match nix::unistd::mkdir(prefix.as_str(), Mode::from_bits_truncate(m)) {
            Ok(()) => exact_dir_mode(op, &prefix, m)?,
            Err(e) => {
                // Some filesystems answer EACCES or EROFS before EEXIST: a
                // directory there is fine whatever mkdir said. stat follows a
                // symlink, as mkdir -p does.
                match nix::sys::stat::stat(prefix.as_str()) {
                    Ok(st) if is_type(&st, libc::S_IFDIR) => {}
                    Ok(_) if e == Errno::EEXIST => {
                        return Err(RpcError::not_dir(format!(
                            "{op} {path}: {prefix} is in the way and is not a directory"
                        )));
                    }
                    _ => return Err(path_error(op, &prefix, e)),
                }
            }
        }
    }
    Ok(())
}

/// mkdir's mode passes through the umask; set exactly what was asked. By
/// name, like the rest of files.* (an O_RDONLY descriptor would need read
/// permission, which the mode asked for may not give). A setgid bit
/// inherited from the parent stays.
fn exact_dir_mode(op: &str, path: &str, mode: u32) -> Result<(), RpcError> {
    let st = nix::sys::stat::lstat(path).map_err(|e| path_error(op, path, e))?;
    let want = mode | (st.st_mode & libc::S_ISGID);
    if is_type(&st, libc::S_IFDIR) && st.st_mode & 0o7777 != want {
        nix::sys::stat::fchmodat(
            AT_FDCWD,
            path,
            Mode::from_bits_truncate(want),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| path_error(op, path, e))?;
    }
    Ok(())
}

/// files.move without overwrite where the filesystem has no RENAME_NOREPLACE:
/// link (which never replaces) and then unlink the old name.
fn link_and_unlink(from: &str, to: &str) -> Result<Empty, RpcError> {
    const OP: &str = "files.move";
    let st = nix::sys::stat::lstat(from).map_err(|e| path_error(OP, from, e))?;
    if is_type(&st, libc::S_IFDIR) {
        return Err(RpcError::unsupported(format!(
            "{OP} {from} to {to}: this filesystem cannot rename without replacing, and a directory cannot be \
             linked instead; pass overwrite: true if replacing whatever is at {to} is acceptable"
        )));
    }
    // No AT_SYMLINK_FOLLOW: a symlink is linked itself, not its target.
    nix::unistd::linkat(AT_FDCWD, from, AT_FDCWD, to, AtFlags::empty())
        .map_err(|e| move_error(from, to, false, e))?;
    if let Err(e) = nix::unistd::unlinkat(AT_FDCWD, from, UnlinkatFlags::NoRemoveDir) {
        // Undo, so a failed move leaves one name rather than two.
        let _ = nix::unistd::unlinkat(AT_FDCWD, to, UnlinkatFlags::NoRemoveDir);
        return Err(path_error(OP, from, e));
    }
    Ok(Empty {})
}

fn move_error(from: &str, to: &str, overwrite: bool, e: Errno) -> RpcError {
    const OP: &str = "files.move";
    match e {
        Errno::EEXIST if !overwrite => RpcError::exists(format!(
            "{OP} {from} to {to}: {to} already exists; pass overwrite: true to replace it"
        )),
        Errno::EEXIST | Errno::ENOTEMPTY => RpcError::is_dir(format!(
            "{OP} {from} to {to}: {to} is a directory that is not empty"
        )),
        Errno::EXDEV => RpcError::unsupported(format!(
            "{OP} {from} to {to}: they are on different filesystems, which a rename cannot cross; \
             copy with tar.pull and tar.push, then remove {from}"
        )),
        e => path_error(OP, &format!("{from} to {to}"), e),
    }
}

/// Empty the directory at `path`, walking it by descriptor: each directory is
/// entered with openat(O_NOFOLLOW|O_DIRECTORY) from its parent's descriptor and
/// each name removed with unlinkat, so a symlink (even one swapped in for a
/// directory during the walk) is removed and never followed.
fn remove_contents(path: &str) -> Result<(), RpcError> {
    const OP: &str = "files.remove";
    // Each directory's path and its name in its parent.
    let top = Listing::open_at(AT_FDCWD, OsStr::new(path)).map_err(|e| path_error(OP, path, e))?;
    // An explicit stack, not recursion: a tree can be deeper than a thread's stack.
    let mut tree = Tree::new(top, (path.to_string(), OsString::new()));
    while let Some(step) = tree.step() {
        let (listing, (dir_path, _), name) = match step {
            Step::Name(listing, data, name) => (listing, data, name),
            Step::Left(_, (done_path, done_name), Some(parent)) => {
                match nix::unistd::unlinkat(
                    &parent.dir,
                    done_name.as_os_str(),
                    UnlinkatFlags::RemoveDir,
                ) {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(path_error(OP, &done_path, e)),
                }
                continue;
            }
            Step::Left(_, _, None) => continue,
        };
        let child = join(dir_path, &name);
        // Linux's unlink answers EISDIR for a directory: only then is it entered.
        match nix::unistd::unlinkat(&listing.dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(Errno::EISDIR) => {
                let next =
                    Listing::open_at(&listing.dir, &name).map_err(|e| path_error(OP, &child, e))?;
                tree.push(next, (child, name));
            }
            Err(e) => return Err(path_error(OP, &child, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::files::testing::*;
    use crate::protocol::ErrorKind;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    #[test]
    fn mkdir_sets_the_mode_and_handles_existing_and_parents() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        let mk = |path: &Path, parents, mode| {
            mkdir(FilesMkdirParams {
                path: s(path),
                parents,
                mode,
            })
        };
        mk(&d, None, None).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(kind(mk(&d, None, None)), ErrorKind::Exists);
        mk(&d, Some(true), None).unwrap();
        let deep = dir.path().join("p/q/r");
        assert_eq!(kind(mk(&deep, None, None)), ErrorKind::NotFound);
        mk(&deep, Some(true), Some(0o1777)).unwrap();
        assert_eq!(
            std::fs::metadata(&deep).unwrap().permissions().mode() & 0o7777,
            0o1777
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("p"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o755
        );
        // A mode without owner read is set exactly too.
        let wx = dir.path().join("wx");
        mk(&wx, None, Some(0o311)).unwrap();
        assert_eq!(
            std::fs::metadata(&wx).unwrap().permissions().mode() & 0o7777,
            0o311
        );
        std::fs::write(dir.path().join("file"), b"").unwrap();
        assert_eq!(
            kind(mk(&dir.path().join("file/sub"), Some(true), None)),
            ErrorKind::NotDir
        );
        assert_eq!(
            kind(mk(&dir.path().join("m"), None, Some(0o17777))),
            ErrorKind::Invalid
        );
        mk(Path::new("/"), Some(true), None).unwrap();
        assert_eq!(kind(mk(Path::new("/"), None, None)), ErrorKind::Exists);
    }

    #[test]
    fn move_without_overwrite_onto_an_existing_file_is_exists_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"A").unwrap();
        std::fs::write(&b, b"B").unwrap();
        let mv = |from: &Path, to: &Path, overwrite| {
            move_(FilesMoveParams {
                from: s(from),
                to: s(to),
                overwrite,
            })
        };
        let err = mv(&a, &b, None).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Exists));
        assert!(err.message.contains("overwrite"), "{}", err.message);
        assert_eq!(
            (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()),
            (b"A".to_vec(), b"B".to_vec())
        );

        mv(&a, &b, Some(true)).unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"A");
        assert!(!a.exists());
        let c = dir.path().join("c");
        mv(&b, &c, None).unwrap();
        assert_eq!(std::fs::read(&c).unwrap(), b"A");
        assert_eq!(kind(mv(&b, &c, None)), ErrorKind::NotFound);
    }

    #[test]
    fn move_refuses_the_root_and_a_directory_into_itself() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        let mv = |from: &str, to: &str| {
            move_(FilesMoveParams {
                from: from.into(),
                to: to.into(),
                overwrite: Some(true),
            })
        };
        assert_eq!(kind(mv("/", &s(&dir.path().join("x")))), ErrorKind::Denied);
        assert_eq!(kind(mv(&s(&d), "/")), ErrorKind::Denied);
        assert_eq!(kind(mv(&s(&d), &s(&d.join("inner")))), ErrorKind::Invalid);
        assert!(d.is_dir());
    }

    #[test]
    fn link_and_unlink_moves_a_file_and_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"A").unwrap();
        std::fs::write(&b, b"B").unwrap();
        assert_eq!(kind(link_and_unlink(&s(&a), &s(&b))), ErrorKind::Exists);
        assert_eq!(std::fs::read(&a).unwrap(), b"A");
        link_and_unlink(&s(&a), &s(&c)).unwrap();
        assert!(!a.exists());
        assert_eq!(std::fs::read(&c).unwrap(), b"A");
        assert_eq!(
            kind(link_and_unlink(&s(dir.path()), &s(&dir.path().join("z")))),
            ErrorKind::Unsupported
        );
    }

    #[test]
    fn remove_refuses_a_non_empty_directory_without_recursive_and_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f"), b"").unwrap();
        let rm = |path: &str, recursive| {
            remove(FilesRemoveParams {
                path: path.into(),
                recursive,
            })
        };
        let err = rm(&s(&d), None).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::IsDir));
        assert!(err.message.contains("recursive"), "{}", err.message);
        assert!(d.join("f").exists());
        assert_eq!(kind(rm("/", Some(true))), ErrorKind::Denied);
        assert_eq!(kind(rm("/../", Some(true))), ErrorKind::Denied);
        assert_eq!(
            kind(rm(&s(&dir.path().join("none")), None)),
            ErrorKind::NotFound
        );
        rm(&s(&d.join("f")), None).unwrap();
        rm(&s(&d), None).unwrap();
        assert!(!d.exists());
    }

    #[test]
    fn recursive_remove_never_follows_a_symlink() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"keep").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
        std::fs::write(d.join("sub/deeper/f"), b"").unwrap();
        symlink(outside.path(), d.join("sub/link")).unwrap();
        symlink(outside.path().join("keep"), d.join("filelink")).unwrap();
        remove(FilesRemoveParams {
            path: s(&d),
            recursive: Some(true),
        })
        .unwrap();
        assert!(!d.exists());
        assert_eq!(std::fs::read(outside.path().join("keep")).unwrap(), b"keep");

        // A symlink to a directory given as the path: the link goes, not the directory.
        let link = dir.path().join("l");
        symlink(outside.path(), &link).unwrap();
        remove(FilesRemoveParams {
            path: s(&link),
            recursive: Some(true),
        })
        .unwrap();
        assert!(std::fs::symlink_metadata(&link).is_err());
        assert!(outside.path().join("keep").exists());
    }
}
