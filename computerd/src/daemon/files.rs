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
//!
//! `content` reads and writes bytes, `list` walks, `names` makes, moves and
//! removes; stat and what they share are here.

mod content;
mod list;
mod names;

pub use content::{read, write};
pub use list::list;
pub(crate) use names::make_dirs;
pub use names::{mkdir, move_, remove};

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat as RawStat, Mode};

use crate::daemon::sys::path_error;
use crate::protocol::{FileStat, FileType, FilesStatParams, RpcError, clean_path};

/// A directory's mode when the caller gives none, and that of parents made on the way.
const DIR_MODE: u32 = 0o755;

/// Open `path` by name to read it and describe what was opened. O_NONBLOCK:
/// a FIFO opened for reading would otherwise wait for a writer before fstat
/// could tell what it is.
pub(crate) fn open_to_read(op: &str, path: &str) -> Result<(OwnedFd, RawStat), RpcError> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| path_error(op, path, e))?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| path_error(op, path, e))?;
    Ok((fd, st))
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

/// What the tests of every files.* module share.
#[cfg(test)]
mod testing {
    use super::read;
    use crate::protocol::ErrorKind;
    use crate::protocol::{Bytes64, FilesReadParams, FilesWriteParams, RpcError};
    use std::path::Path;

    pub(crate) fn s(p: &Path) -> String {
        p.to_str().unwrap().to_string()
    }

    pub(crate) fn write_p(path: &Path, data: &[u8]) -> FilesWriteParams {
        FilesWriteParams {
            path: s(path),
            data: Bytes64(data.to_vec()),
            ..Default::default()
        }
    }

    pub(crate) fn read_all(path: &Path) -> Vec<u8> {
        read(FilesReadParams {
            path: s(path),
            offset: None,
            length: None,
        })
        .unwrap()
        .data
        .0
    }

    pub(crate) fn kind<T: std::fmt::Debug>(r: Result<T, RpcError>) -> ErrorKind {
        r.unwrap_err().kind().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::files::testing::*;
    use crate::protocol::ErrorKind;
    use crate::protocol::{FileType, FilesMoveParams, FilesReadParams};
    use std::os::unix::fs::{PermissionsExt, symlink};

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
}
