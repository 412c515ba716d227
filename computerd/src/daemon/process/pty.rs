//! A process's terminal: its size, its descriptors, and the pump from it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use nix::fcntl::OFlag;
use tokio::io::unix::AsyncFd;

use crate::daemon::runner::Stdio3;
use crate::daemon::{Daemon, sys};
use crate::protocol::{PtySize, RpcError, limits};

use super::table::Which;

pub(super) fn check_pty_size(cols: u16, rows: u16) -> Result<(), RpcError> {
    for (field, v) in [("cols", cols), ("rows", rows)] {
        if v == 0 || v > limits::MAX_PTY_SIDE {
            return Err(RpcError::invalid_field(
                field,
                format!(
                    "{field} is {v}; a terminal has 1 to {} {field}",
                    limits::MAX_PTY_SIDE
                ),
            ));
        }
    }
    Ok(())
}

/// A terminal of `size`: the program's three descriptors on its one side,
/// ours (non-blocking, registered with the runtime) on the other.
pub(super) fn open(size: PtySize) -> std::io::Result<(Stdio3, AsyncFd<OwnedFd>)> {
    let ws = nix::pty::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&ws, None)?;
    set_cloexec_nonblock(&pty.master)?;
    set_cloexec(&pty.slave)?;
    let stdout = sys::dup_above(pty.slave.as_fd(), 3)?;
    let stderr = sys::dup_above(pty.slave.as_fd(), 3)?;
    // SAFETY: the master is an OwnedFd moved into the AsyncFd, so it
    // stays open and the same descriptor for the AsyncFd's whole life.
    let master = unsafe { AsyncFd::register(pty.master) }?;
    Ok((
        Stdio3 {
            stdin: pty.slave,
            stdout,
            stderr,
        },
        master,
    ))
}

fn set_cloexec(fd: &OwnedFd) -> std::io::Result<()> {
    nix::fcntl::fcntl(
        fd.as_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

fn set_cloexec_nonblock(fd: &OwnedFd) -> std::io::Result<()> {
    set_cloexec(fd)?;
    let flags = nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(std::io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))
        .map(|_| ())
        .map_err(std::io::Error::from)
}

pub(super) async fn write_terminal(fd: &AsyncFd<OwnedFd>, data: &[u8]) -> std::io::Result<usize> {
    loop {
        let mut ready = fd.writable().await?;
        match ready
            .try_io(|inner| nix::unistd::write(inner.get_ref(), data).map_err(std::io::Error::from))
        {
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

pub(super) async fn pump_terminal(daemon: Arc<Daemon>, seq: u64, fd: Arc<AsyncFd<OwnedFd>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(mut ready) = fd.readable().await else {
            break;
        };
        match ready.try_io(|inner| {
            nix::unistd::read(inner.get_ref(), &mut buf).map_err(std::io::Error::from)
        }) {
            // EIO: every holder of the terminal's other side has closed it.
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => daemon.processes.lock().push(seq, Which::Out, &buf[..n]),
            Err(_would_block) => continue,
        }
    }
    daemon.processes.lock().close(seq, Which::Out);
}
