//! files.read and files.write: bytes of one regular file, opened first and
//! checked on the descriptor.

use crate::daemon::check;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat as RawStat, Mode};

use crate::daemon::sys::{path_error, retry};
use crate::protocol::{
    Bytes64, FilesReadParams, FilesReadResult, FilesWriteParams, FilesWriteResult, RpcError,
    clean_path, limits,
};

use super::{DIR_MODE, check_mode, names::make_dirs, open_to_read, parent_of, stat_size};

/// A new file's mode (before the umask), as the spec promises.
const NEW_FILE_MODE: u32 = 0o644;

pub fn read(p: FilesReadParams) -> Result<FilesReadResult, RpcError> {
    const OP: &str = "files.read";
    let path = clean_path("path", &p.path)?;
    let offset = p.offset.unwrap_or(0);
    let length = check::at_most(
        "length",
        p.length.unwrap_or(limits::MAX_CHUNK_BYTES),
        limits::MAX_CHUNK_BYTES,
    )?;
    let start = file_offset(offset, length)?;

    let (fd, st) = open_to_read(OP, &path)?;
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

    // The mtime of the file a whole write replaces, read before the open
    // truncates it; kept only if the open found that same file.
    let replaced = (!append && at.is_none())
        .then(|| nix::sys::stat::stat(path.as_str()).ok())
        .flatten();
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
    if let Some(old) = replaced.filter(|o| (o.st_dev, o.st_ino) == (st.st_dev, st.st_ino)) {
        newer_second(&fd, old.st_mtime).map_err(|e| path_error(OP, &path, e))?;
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

/// A file rewritten within the second of its last change would keep its
/// mtime's whole second, and often its size: Python then takes its cached
/// bytecode for current (a .pyc records the source's mtime in seconds and
/// its size), as can any tool that compares whole seconds. So a whole
/// write of a file whose mtime was in this same second waits for the next
/// second (at most one; only such rewrites ever wait) and sets the mtime to
/// then: later than before, never in the future, as make wants.
fn newer_second(fd: &impl std::os::fd::AsFd, old: i64) -> nix::Result<()> {
    use nix::sys::time::TimeSpec;
    for _ in 0..3 {
        if nix::sys::stat::fstat(fd)?.st_mtime != old {
            return Ok(());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        if now.as_secs() as i64 <= old {
            // File times come from a coarse clock, a tick behind: wake a
            // little past the second.
            let to_next = 1_000_000_000 - u64::from(now.subsec_nanos());
            std::thread::sleep(std::time::Duration::from_nanos(to_next + 20_000_000));
        }
        nix::sys::stat::futimens(fd, &TimeSpec::UTIME_OMIT, &TimeSpec::UTIME_NOW)?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::files::testing::*;
    use crate::protocol::ErrorKind;
    use std::os::unix::fs::{PermissionsExt, symlink};

    use std::time::Duration;

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

        // A part, a tail asked past the end, and a start past the end.
        for (offset, length, data, eof) in [
            (6, Some(5), &b"WORLD"[..], false),
            (12, Some(100), &b"\0\0z"[..], true),
            (100, None, &b""[..], true),
        ] {
            let r = read(FilesReadParams {
                path: s(&f),
                offset: Some(offset),
                length,
            })
            .unwrap();
            let want = FilesReadResult {
                data: Bytes64(data.to_vec()),
                eof,
                size: 15,
            };
            assert_eq!(r, want, "offset {offset}");
        }

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
    fn a_rewrite_of_the_same_size_always_moves_the_mtime_to_a_later_second() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("calc.py");
        write(write_p(&f, b"return a - b\n")).unwrap();
        let mut last = std::fs::metadata(&f).unwrap().mtime();
        // In quick succession, as a model's write_file then edit_file: each
        // in a later whole second than the one before, never in the future.
        for text in [b"return a + b\n", b"return a * b\n", b"return a / b\n"] {
            write(write_p(&f, text)).unwrap();
            let m = std::fs::metadata(&f).unwrap();
            assert!(m.mtime() > last, "{} then {}", last, m.mtime());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            assert!(m.mtime() <= now, "{} is in the future of {now}", m.mtime());
            assert_eq!(read_all(&f), text);
            last = m.mtime();
        }
        // Writes at an offset or appends change the mtime as the kernel does.
        let before = std::fs::metadata(&f).unwrap().mtime();
        write(FilesWriteParams {
            append: Some(true),
            ..write_p(&f, b"# more\n")
        })
        .unwrap();
        assert!(std::fs::metadata(&f).unwrap().mtime() >= before);
    }
}
