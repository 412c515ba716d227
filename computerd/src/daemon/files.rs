//! files.*: read, write, stat, list, mkdir, move and remove by absolute path.
//!
//! These act on the path the caller chose and resolve it by name, following a
//! symlink on the way, as any program in the computer would: the container is
//! the boundary, not this module (a write held inside one directory against a
//! concurrent actor is a tar push). What they do promise: read and write open
//! first and check the descriptor they got (so a FIFO or device swapped in
//! never makes them wait or write into it), and list and recursive remove walk
//! below the path by descriptor, never entering or following a symlink.
//!
//! Every function blocks; the caller runs it on a blocking thread.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{FileStat as RawStat, Mode};
use nix::unistd::UnlinkatFlags;

use super::sys::{path_error, retry};
use super::walk::{Listing, Step, Tree};
use crate::protocol::{
    Bytes64, Empty, FileStat, FileType, FilesListParams, FilesListResult, FilesMkdirParams,
    FilesMoveParams, FilesReadParams, FilesReadResult, FilesRemoveParams, FilesStatParams,
    FilesWriteParams, FilesWriteResult, ListEntry, RpcError, clean_path, limits,
};

/// A new file's mode (before the umask), as the spec promises.
const NEW_FILE_MODE: u32 = 0o644;
/// A directory's mode when the caller gives none, and that of parents made on the way.
const DIR_MODE: u32 = 0o755;
/// What a files.list reply spends besides its entries: the envelope, the id
/// and `{"entries":[],"truncated":false}`, with room to spare.
const LIST_REPLY_OVERHEAD: u64 = 512;

pub fn read(p: FilesReadParams) -> Result<FilesReadResult, RpcError> {
    const OP: &str = "files.read";
    let path = clean_path("path", &p.path)?;
    let offset = p.offset.unwrap_or(0);
    let length = p.length.unwrap_or(limits::MAX_CHUNK_BYTES);
    if length > limits::MAX_CHUNK_BYTES {
        return Err(RpcError::over_limit(
            "length",
            length,
            limits::MAX_CHUNK_BYTES,
        ));
    }
    let start = file_offset(offset, length)?;

    // O_NONBLOCK: a FIFO opened for reading would otherwise wait for a writer
    // before fstat could tell us what it is.
    let fd = nix::fcntl::open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| path_error(OP, &path, e))?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| path_error(OP, &path, e))?;
    regular_only(OP, &path, &st)?;
    let size = stat_size(&st);

    // Read up to `length` whatever the size says: files in /proc report 0 and
    // still have bytes, and a file that grew since fstat may give more.
    let want = usize::try_from(length).unwrap_or(usize::MAX);
    let mut data = vec![0u8; want];
    let mut got = 0usize;
    while got < want {
        let at = start.saturating_add(i64::try_from(got).unwrap_or(i64::MAX));
        let n = retry(|| nix::sys::uio::pread(&fd, &mut data[got..], at))
            .map_err(|e| path_error(OP, &path, e))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    data.truncate(got);
    let eof = offset.saturating_add(got as u64) >= size;
    Ok(FilesReadResult {
        data: Bytes64(data),
        eof,
        size,
    })
}

pub fn write(p: FilesWriteParams) -> Result<FilesWriteResult, RpcError> {
    const OP: &str = "files.write";
    let path = clean_path("path", &p.path)?;
    let len = p.data.len() as u64;
    if len > limits::MAX_WRITE_BYTES {
        return Err(RpcError::over_limit("data", len, limits::MAX_WRITE_BYTES));
    }
    let append = p.append.unwrap_or(false);
    if append && p.offset.is_some() {
        return Err(RpcError::invalid_field(
            "append",
            "files.write takes offset or append, not both: offset writes at a position, append at the end",
        ));
    }
    let mode = p.mode.map(|m| check_mode(OP, m)).transpose()?;
    let at = p.offset.map(|o| file_offset(o, len)).transpose()?;
    if p.parents.unwrap_or(false)
        && let Some(parent) = parent_of(&path)
    {
        make_dirs(OP, parent, DIR_MODE)?;
    }

    let mut flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    if append {
        flags |= OFlag::O_APPEND;
    } else if at.is_none() {
        flags |= OFlag::O_TRUNC;
    }
    // Plain O_CREAT (no O_EXCL) also makes the target of a dangling symlink.
    // O_NONBLOCK: a FIFO with no reader fails with ENXIO at once instead of
    // waiting for one; a FIFO with a reader is refused by the fstat below.
    let fd = nix::fcntl::open(
        path.as_str(),
        flags,
        Mode::from_bits_truncate(NEW_FILE_MODE),
    )
    .map_err(|e| match e {
        Errno::ENXIO => RpcError::invalid(format!(
            "{OP} {path}: it is a FIFO, socket or device; files.write writes regular files only"
        )),
        e => path_error(OP, &path, e),
    })?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| path_error(OP, &path, e))?;
    regular_only(OP, &path, &st)?;

    let data = p.data.0;
    let mut done = 0usize;
    while done < data.len() {
        let n = match at {
            Some(at) => {
                let pos = at.saturating_add(i64::try_from(done).unwrap_or(i64::MAX));
                retry(|| nix::sys::uio::pwrite(&fd, &data[done..], pos))
            }
            None => retry(|| nix::unistd::write(&fd, &data[done..])),
        }
        .map_err(|e| path_error(OP, &path, e))?;
        if n == 0 {
            return Err(RpcError::limit(format!(
                "{OP} {path}: the file took no more bytes after {done} of {}",
                data.len()
            )));
        }
        done += n;
    }
    // The mode comes last, so a read-only mode can be given with the last
    // chunk of a file written in several calls.
    if let Some(mode) = mode {
        nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode))
            .map_err(|e| path_error(OP, &path, e))?;
    }
    let st = nix::sys::stat::fstat(&fd).map_err(|e| path_error(OP, &path, e))?;
    Ok(FilesWriteResult {
        size: stat_size(&st),
    })
}

pub fn stat(p: FilesStatParams) -> Result<FileStat, RpcError> {
    const OP: &str = "files.stat";
    let path = clean_path("path", &p.path)?;
    let st = if p.follow.unwrap_or(false) {
        nix::sys::stat::stat(path.as_str())
    } else {
        nix::sys::stat::lstat(path.as_str())
    }
    .map_err(|e| path_error(OP, &path, e))?;
    let target = if is_type(&st, libc::S_IFLNK) {
        nix::fcntl::readlink(path.as_str()).ok().map(|t| lossy(&t))
    } else {
        None
    };
    Ok(file_stat(&st, target))
}

pub fn list(p: FilesListParams) -> Result<FilesListResult, RpcError> {
    const OP: &str = "files.list";
    let path = clean_path("path", &p.path)?;
    let depth = p.depth.unwrap_or(1);
    if depth == 0 {
        return Err(RpcError::invalid_field(
            "depth",
            format!("depth must be 1 to {}", limits::MAX_LIST_DEPTH),
        ));
    }
    if depth > limits::MAX_LIST_DEPTH {
        return Err(RpcError::over_limit(
            "depth",
            depth.into(),
            limits::MAX_LIST_DEPTH.into(),
        ));
    }
    let offset = p.offset.unwrap_or(0);

    let fd = nix::fcntl::open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ENOTDIR => RpcError::not_dir(format!(
            "{OP} {path}: it is not a directory; files.stat describes a single file"
        )),
        e => path_error(OP, &path, e),
    })?;
    let mut walk = Walk::new(fd, &path, depth)?;

    let mut skipped = 0u64;
    let mut entries = Vec::new();
    let mut bytes = LIST_REPLY_OVERHEAD;
    let mut truncated = false;
    while let Some(entry) = walk.next(skipped >= offset)? {
        let Some(entry) = entry else {
            skipped += 1;
            continue;
        };
        // The entry's JSON and the comma before it.
        let size = serde_json::to_vec(&entry).map_or(8192, |v| v.len() as u64) + 1;
        if entries.len() >= limits::MAX_LIST_ENTRIES
            || (bytes + size > limits::MAX_LIST_REPLY_BYTES && !entries.is_empty())
        {
            truncated = true;
            break;
        }
        bytes += size;
        entries.push(entry);
    }
    Ok(FilesListResult { entries, truncated })
}

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

/// A files.list walk: pre-order, each directory's names sorted by bytes,
/// symlinks listed and never entered, subdirectories opened from their
/// parent's descriptor.
struct Walk {
    /// Each directory's path, and how deep its entries are: 1 for the listed
    /// directory's own.
    tree: Tree<(String, u32)>,
    depth: u32,
}

impl Walk {
    fn new(fd: OwnedFd, path: &str, depth: u32) -> Result<Walk, RpcError> {
        let top = Listing::read(fd).map_err(|e| path_error("files.list", path, e))?;
        Ok(Walk {
            tree: Tree::new(top, (path.to_string(), 1)),
            depth,
        })
    }

    /// The next entry of the walk: None at its end, Some(None) for an entry
    /// walked past without being described (paging skips those).
    fn next(&mut self, describe: bool) -> Result<Option<Option<ListEntry>>, RpcError> {
        const OP: &str = "files.list";
        loop {
            let (top, (dir_path, level), name) = match self.tree.step() {
                None => return Ok(None),
                Some(Step::Left(..)) => continue,
                Some(Step::Name(top, data, name)) => (top, data, name),
            };
            let level = *level;
            let path = join(dir_path, &name);
            let st = match nix::sys::stat::fstatat(
                &top.dir,
                name.as_os_str(),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(st) => st,
                // Gone since readdir, or in a directory we may read but not
                // search: there is nothing to describe.
                Err(Errno::ENOENT | Errno::EACCES) => continue,
                Err(e) => return Err(path_error(OP, &path, e)),
            };
            let entry = describe.then(|| {
                let target = is_type(&st, libc::S_IFLNK)
                    .then(|| nix::fcntl::readlinkat(&top.dir, name.as_os_str()).ok())
                    .flatten()
                    .map(|t| lossy(&t));
                ListEntry {
                    path: path.clone(),
                    stat: file_stat(&st, target),
                }
            });
            if is_type(&st, libc::S_IFDIR) && level < self.depth {
                match Listing::open_at(&top.dir, &name) {
                    Ok(listing) => self.tree.push(listing, (path, level + 1)),
                    // Listed but not entered: unreadable, gone, or swapped for
                    // a symlink or a file since fstatat.
                    Err(
                        Errno::EACCES
                        | Errno::EPERM
                        | Errno::ENOENT
                        | Errno::ELOOP
                        | Errno::ENOTDIR,
                    ) => {}
                    Err(e) => return Err(path_error(OP, &path, e)),
                }
            }
            return Ok(Some(entry));
        }
    }
}

/// The file offset `offset` as off_t, when `offset + len` stays within it.
fn file_offset(offset: u64, len: u64) -> Result<i64, RpcError> {
    match offset
        .checked_add(len)
        .and_then(|end| i64::try_from(end).ok())
    {
        Some(_) => Ok(offset as i64),
        None => Err(RpcError::invalid_field(
            "offset",
            format!("offset {offset} is past the largest file offset"),
        )),
    }
}

fn check_mode(op: &str, mode: u32) -> Result<u32, RpcError> {
    if mode > 0o7777 {
        return Err(RpcError::invalid_field(
            "mode",
            format!(
                "{op}: mode {mode:#o} has bits above 0o7777; give permission bits only, such as 420 (0o644)"
            ),
        ));
    }
    Ok(mode)
}

/// files.read and files.write work on regular files only; this is checked on
/// the descriptor, after the open, so nothing swapped in between slips by.
fn regular_only(op: &str, path: &str, st: &RawStat) -> Result<(), RpcError> {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(()),
        libc::S_IFDIR => Err(RpcError::is_dir(format!(
            "{op} {path}: it is a directory; files.list shows what it holds"
        ))),
        _ => Err(RpcError::invalid(format!(
            "{op} {path}: it is not a regular file (a FIFO, socket or device); {op} works on regular files only"
        ))),
    }
}

fn is_type(st: &RawStat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

fn stat_size(st: &RawStat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

fn file_stat(st: &RawStat, target: Option<String>) -> FileStat {
    let file_type = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileType::File,
        libc::S_IFDIR => FileType::Dir,
        libc::S_IFLNK => FileType::Symlink,
        _ => FileType::Other,
    };
    let mtime_ms = st
        .st_mtime
        .saturating_mul(1000)
        .saturating_add(st.st_mtime_nsec / 1_000_000);
    FileStat {
        file_type,
        size: stat_size(st),
        mode: st.st_mode & 0o7777,
        mtime_ms,
        uid: st.st_uid,
        gid: st.st_gid,
        target,
    }
}

/// The directory a cleaned absolute path is in; None for `/` and its children's parent `/`.
fn parent_of(path: &str) -> Option<&str> {
    match path.rsplit_once('/') {
        Some((parent, _)) if !parent.is_empty() => Some(parent),
        _ => None,
    }
}

fn join(dir: &str, name: &OsStr) -> String {
    let name = String::from_utf8_lossy(name.as_bytes());
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn lossy(s: &OsStr) -> String {
    String::from_utf8_lossy(s.as_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorKind;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;
    use std::time::Duration;

    fn s(p: &Path) -> String {
        p.to_str().unwrap().to_string()
    }

    fn write_p(path: &Path, data: &[u8]) -> FilesWriteParams {
        FilesWriteParams {
            path: s(path),
            data: Bytes64(data.to_vec()),
            ..Default::default()
        }
    }

    fn read_all(path: &Path) -> Vec<u8> {
        read(FilesReadParams {
            path: s(path),
            offset: None,
            length: None,
        })
        .unwrap()
        .data
        .0
    }

    fn kind<T: std::fmt::Debug>(r: Result<T, RpcError>) -> ErrorKind {
        r.unwrap_err().kind().unwrap()
    }

    /// Run `f` on a thread and fail the test if it takes more than 5 s.
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the call hung")
    }

    #[test]
    fn read_of_a_fifo_is_invalid_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let path = s(&fifo);
        let err = within_5s(move || {
            read(FilesReadParams {
                path,
                offset: None,
                length: None,
            })
        })
        .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid));
        assert!(
            err.message.contains("not a regular file"),
            "{}",
            err.message
        );
        // Writing to a FIFO nobody reads fails at once too.
        let p = write_p(&fifo, b"x");
        assert_eq!(kind(within_5s(move || write(p))), ErrorKind::Invalid);
    }

    #[test]
    fn read_of_a_directory_is_is_dir() {
        let dir = tempfile::tempdir().unwrap();
        let r = read(FilesReadParams {
            path: s(dir.path()),
            offset: None,
            length: None,
        });
        assert_eq!(kind(r), ErrorKind::IsDir);
        assert_eq!(kind(write(write_p(dir.path(), b"x"))), ErrorKind::IsDir);
    }

    #[test]
    fn read_and_write_round_trip_with_offset_append_mode_and_parents() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a/b/c.txt");
        // Missing parents without parents: not_found.
        assert_eq!(kind(write(write_p(&f, b"x"))), ErrorKind::NotFound);

        let r = write(FilesWriteParams {
            parents: Some(true),
            ..write_p(&f, b"hello world")
        })
        .unwrap();
        assert_eq!(r.size, 11);
        assert_eq!(
            std::fs::metadata(dir.path().join("a/b"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o755
        );
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o644
        );

        let r = write(FilesWriteParams {
            offset: Some(6),
            ..write_p(&f, b"WORLD")
        })
        .unwrap();
        assert_eq!(r.size, 11);
        assert_eq!(read_all(&f), b"hello WORLD");
        let r = write(FilesWriteParams {
            append: Some(true),
            ..write_p(&f, b"!")
        })
        .unwrap();
        assert_eq!(r.size, 12);
        // Offset past the end leaves a hole of zeros.
        let r = write(FilesWriteParams {
            offset: Some(14),
            ..write_p(&f, b"z")
        })
        .unwrap();
        assert_eq!(r.size, 15);
        assert_eq!(read_all(&f), b"hello WORLD!\0\0z");

        let part = read(FilesReadParams {
            path: s(&f),
            offset: Some(6),
            length: Some(5),
        })
        .unwrap();
        assert_eq!(
            part,
            FilesReadResult {
                data: Bytes64(b"WORLD".to_vec()),
                eof: false,
                size: 15
            }
        );
        let tail = read(FilesReadParams {
            path: s(&f),
            offset: Some(12),
            length: Some(100),
        })
        .unwrap();
        assert_eq!(
            tail,
            FilesReadResult {
                data: Bytes64(b"\0\0z".to_vec()),
                eof: true,
                size: 15
            }
        );
        let past = read(FilesReadParams {
            path: s(&f),
            offset: Some(100),
            length: None,
        })
        .unwrap();
        assert_eq!(
            past,
            FilesReadResult {
                data: Bytes64(vec![]),
                eof: true,
                size: 15
            }
        );

        // Replace (no offset, no append) truncates; mode is set after the write.
        let r = write(FilesWriteParams {
            mode: Some(0o400),
            ..write_p(&f, b"new")
        })
        .unwrap();
        assert_eq!(r.size, 3);
        assert_eq!(read_all(&f), b"new");
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o400
        );

        let both = FilesWriteParams {
            offset: Some(0),
            append: Some(true),
            ..write_p(&f, b"x")
        };
        let err = write(both).unwrap_err();
        assert_eq!(err.data.as_ref().unwrap().field.as_deref(), Some("append"));
        let bad_mode = FilesWriteParams {
            mode: Some(0o10000),
            ..write_p(&f, b"x")
        };
        let err = write(bad_mode).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid));
        assert_eq!(err.data.as_ref().unwrap().field.as_deref(), Some("mode"));
        let big = write_p(&f, &vec![0u8; limits::MAX_WRITE_BYTES as usize + 1]);
        assert_eq!(kind(write(big)), ErrorKind::Limit);
        assert_eq!(read_all(&f), b"new");
    }

    #[test]
    fn write_through_a_dangling_symlink_creates_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        let link = dir.path().join("link");
        symlink(&target, &link).unwrap();
        let r = write(write_p(&link, b"via link")).unwrap();
        assert_eq!(r.size, 8);
        assert_eq!(std::fs::read(&target).unwrap(), b"via link");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn read_length_over_512_kib_is_limit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let err = read(FilesReadParams {
            path: s(&f),
            offset: None,
            length: Some(512 * 1024 + 1),
        })
        .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Limit));
        assert!(
            err.message.contains("length") && err.message.contains("524288"),
            "{}",
            err.message
        );
        // The default length reads up to 512 KiB.
        std::fs::write(&f, vec![7u8; 600 * 1024]).unwrap();
        let r = read(FilesReadParams {
            path: s(&f),
            offset: None,
            length: None,
        })
        .unwrap();
        assert_eq!(
            (r.data.len(), r.eof, r.size),
            (512 * 1024, false, 600 * 1024)
        );
    }

    #[test]
    fn paths_must_be_absolute() {
        let err = read(FilesReadParams {
            path: "rel/x".into(),
            offset: None,
            length: None,
        })
        .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid));
        assert_eq!(err.data.as_ref().unwrap().field.as_deref(), Some("path"));
        let err = move_(FilesMoveParams {
            from: "/tmp".into(),
            to: "x".into(),
            overwrite: None,
        })
        .unwrap_err();
        assert_eq!(err.data.as_ref().unwrap().field.as_deref(), Some("to"));
    }

    #[test]
    fn stat_reports_symlinks_unless_follow() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4751)).unwrap();
        let link = dir.path().join("l");
        symlink("f", &link).unwrap();
        let st = stat(FilesStatParams {
            path: s(&link),
            follow: None,
        })
        .unwrap();
        assert_eq!(
            (st.file_type, st.target.as_deref()),
            (FileType::Symlink, Some("f"))
        );
        let st = stat(FilesStatParams {
            path: s(&link),
            follow: Some(true),
        })
        .unwrap();
        let meta = std::fs::metadata(&f).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            st,
            FileStat {
                file_type: FileType::File,
                size: 5,
                mode: 0o4751,
                mtime_ms: meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000,
                uid: meta.uid(),
                gid: meta.gid(),
                target: None,
            }
        );
        let st = stat(FilesStatParams {
            path: s(dir.path()),
            follow: None,
        })
        .unwrap();
        assert_eq!(st.file_type, FileType::Dir);
        assert_eq!(
            kind(stat(FilesStatParams {
                path: s(&dir.path().join("no")),
                follow: None
            })),
            ErrorKind::NotFound
        );
    }

    /// a/ (x, y/ (deep/ (z)), b -> y (a symlink to a directory), c.txt
    fn tree(root: &Path) {
        std::fs::create_dir_all(root.join("a/y/deep")).unwrap();
        std::fs::write(root.join("a/x"), b"x").unwrap();
        std::fs::write(root.join("a/y/deep/z"), b"z").unwrap();
        symlink("a/y", root.join("b")).unwrap();
        std::fs::write(root.join("c.txt"), b"c").unwrap();
    }

    fn list_paths(root: &Path, depth: Option<u32>, offset: Option<u64>) -> (Vec<String>, bool) {
        let r = list(FilesListParams {
            path: s(root),
            depth,
            offset,
        })
        .unwrap();
        let base = s(root);
        let paths = r
            .entries
            .iter()
            .map(|e| e.path.strip_prefix(&base).unwrap().to_string())
            .collect();
        (paths, r.truncated)
    }

    #[test]
    fn list_walks_by_name_with_depth_and_paging_and_never_enters_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        assert_eq!(
            list_paths(dir.path(), None, None),
            (vec!["/a".into(), "/b".into(), "/c.txt".into()], false)
        );
        let all: Vec<String> = [
            "/a",
            "/a/x",
            "/a/y",
            "/a/y/deep",
            "/a/y/deep/z",
            "/b",
            "/c.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(list_paths(dir.path(), Some(16), None), (all.clone(), false));
        assert_eq!(
            list_paths(dir.path(), Some(2), None).0,
            vec!["/a", "/a/x", "/a/y", "/b", "/c.txt"]
        );
        assert_eq!(
            list_paths(dir.path(), Some(16), Some(3)),
            (all[3..].to_vec(), false)
        );
        assert_eq!(list_paths(dir.path(), Some(16), Some(99)), (vec![], false));

        let r = list(FilesListParams {
            path: s(dir.path()),
            depth: None,
            offset: None,
        })
        .unwrap();
        let b = &r.entries[1];
        assert_eq!(
            (b.stat.file_type, b.stat.target.as_deref()),
            (FileType::Symlink, Some("a/y"))
        );
        assert_eq!(
            (r.entries[2].stat.file_type, r.entries[2].stat.size),
            (FileType::File, 1)
        );
        assert_eq!(r.entries[0].stat.file_type, FileType::Dir);
    }

    #[test]
    fn list_pages_at_1000_entries() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..1005 {
            std::fs::write(dir.path().join(format!("f{i:04}")), b"").unwrap();
        }
        let (first, truncated) = list_paths(dir.path(), None, None);
        assert_eq!((first.len(), truncated), (1000, true));
        assert_eq!(
            (first[0].as_str(), first[999].as_str()),
            ("/f0000", "/f0999")
        );
        let (rest, truncated) = list_paths(dir.path(), None, Some(1000));
        assert_eq!(
            (rest, truncated),
            (
                ["/f1000", "/f1001", "/f1002", "/f1003", "/f1004"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                false
            )
        );
    }

    #[test]
    fn list_refuses_files_missing_paths_and_bad_depths() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"").unwrap();
        let l = |path: &Path, depth| {
            list(FilesListParams {
                path: s(path),
                depth,
                offset: None,
            })
        };
        assert_eq!(kind(l(&f, None)), ErrorKind::NotDir);
        assert_eq!(kind(l(&dir.path().join("none"), None)), ErrorKind::NotFound);
        let err = l(dir.path(), Some(0)).unwrap_err();
        assert_eq!(
            (err.kind(), err.data.unwrap().field),
            (Some(ErrorKind::Invalid), Some("depth".into()))
        );
        let err = l(dir.path(), Some(17)).unwrap_err();
        assert_eq!(
            (err.kind(), err.data.unwrap().field),
            (Some(ErrorKind::Limit), Some("depth".into()))
        );
    }

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
