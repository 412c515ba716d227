//! A process's log file: made without following a link, appended to under
//! a cap, read back by offset.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

use nix::fcntl::{AT_FDCWD, OFlag};
use nix::sys::stat::Mode;

use crate::daemon::{sys, walk};
use crate::protocol::{Bytes64, ProcessReadParams, ProcessReadResult, RpcError, limits};

use super::table::Entry;

pub(super) struct Log {
    pub(super) file: std::fs::File,
    pub(super) written: u64,
    pub(super) capped: bool,
    pub(super) error: Option<String>,
}

impl Log {
    /// Append what fits under the cap. A failed or short write stops the log
    /// for good, so the file stays a true prefix of the output.
    pub(super) fn append(&mut self, data: &[u8]) {
        if self.error.is_some() || data.is_empty() {
            return;
        }
        let room = limits::MAX_LOG_BYTES.saturating_sub(self.written) as usize;
        if data.len() > room {
            self.capped = true;
        }
        let mut todo = &data[..data.len().min(room)];
        while !todo.is_empty() {
            match self.file.write_at(todo, self.written) {
                Ok(0) => {
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: the disk took no more",
                        self.written
                    ));
                    return;
                }
                Ok(n) if n < todo.len() => {
                    self.written += n as u64;
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: a write was short (is the disk full?)",
                        self.written
                    ));
                    return;
                }
                Ok(n) => {
                    self.written += n as u64;
                    todo = &todo[n..];
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: {e}",
                        self.written
                    ));
                    return;
                }
            }
        }
    }
}

/// A log file made for a start, removed again if the start fails.
pub(super) struct NewLog {
    file: std::fs::File,
    parent: OwnedFd,
    name: String,
}

impl NewLog {
    pub(super) fn remove(self) {
        let _ = nix::unistd::unlinkat(
            self.parent.as_fd(),
            self.name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    pub(super) fn into_log(self) -> Log {
        Log {
            file: self.file,
            written: 0,
            capped: false,
            error: None,
        }
    }
}

/// Make the log file: each directory entered from the one above with
/// O_NOFOLLOW|O_DIRECTORY (missing ones made), the file with
/// O_CREAT|O_EXCL|O_NOFOLLOW, so no link anywhere on the way is followed.
pub(super) fn create_log(path: &str) -> Result<NewLog, RpcError> {
    let parts = walk::names(path);
    let Some((name, dirs)) = parts.split_last() else {
        return Err(RpcError::invalid_field(
            "log",
            "log must name a file, not /",
        ));
    };
    let denied_link = |at: &str| {
        RpcError::denied(format!("log {path}: {at} is a symbolic link or not a directory; the log is never made through a link"))
            .with_field("log")
    };
    let root = walk::dir_at(AT_FDCWD, "/".as_ref(), OFlag::O_PATH)
        .map_err(|e| sys::path_error("log", "/", e))?;
    let dir = walk::mkdirs_beneath(root.as_fd(), dirs, 0o755, OFlag::O_RDONLY, &mut |_| {})
        .map_err(|stuck| {
            let walked = dirs
                .get(..=stuck.at)
                .map_or_else(|| "/".to_string(), |way| format!("/{}", way.join("/")));
            if stuck.is_link_or_file() {
                denied_link(&walked)
            } else if stuck.making {
                sys::path_error("log: making", &walked, stuck.errno).with_field("log")
            } else {
                sys::path_error("log: entering", &walked, stuck.errno).with_field("log")
            }
        })?;
    let flags =
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir.as_fd(), *name, flags, Mode::from_bits_truncate(0o644))
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST => RpcError::exists(format!(
                "log {path}: a file is already there; give a new path"
            ))
            .with_field("log"),
            nix::errno::Errno::ELOOP => denied_link(path),
            e => sys::path_error("log: creating", path, e).with_field("log"),
        })?;
    Ok(NewLog {
        file: std::fs::File::from(fd),
        parent: dir,
        name: (*name).to_string(),
    })
}

pub(super) fn read_log(
    e: &Entry,
    p: &ProcessReadParams,
    max: usize,
) -> Result<ProcessReadResult, RpcError> {
    let log = e.log.as_ref().ok_or_else(|| {
        RpcError::invalid_field(
            "stream",
            format!("{} has no log stream: it was started without log", p.id),
        )
    })?;
    let size = log.written;
    if p.offset > size {
        return Err(RpcError::invalid_field(
            "offset",
            format!(
                "offset {} is past the end of the log ({size} bytes so far)",
                p.offset
            ),
        ));
    }
    let n = ((size - p.offset) as usize).min(max);
    let mut data = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match log.file.read_at(&mut data[got..], p.offset + got as u64) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                return Err(RpcError::invalid(format!(
                    "reading the log of {} failed: {err}",
                    p.id
                )));
            }
        }
    }
    data.truncate(got);
    let next = p.offset + got as u64;
    Ok(ProcessReadResult {
        exited: e.ended.is_some() && e.output_done() && next == size,
        size,
        data: Bytes64(data),
        next_offset: next,
        dropped: 0,
        capped: Some(log.capped),
        log_error: log.error.clone(),
    })
}
