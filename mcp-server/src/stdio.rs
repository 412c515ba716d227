//! The stdio transport's two ends, read and written without a thread hop.
//!
//! `tokio::io::stdin()` and `stdout()` do every read and write on the
//! runtime's blocking pool: a message in wakes a pool thread, which wakes a
//! worker; a reply out does the same the other way. On this 2-CPU machine
//! those two extra wake-ups were about a tenth of a warm `exec` call (the
//! tool_call bench). When fd 0 and fd 1 are a pipe or a unix socket (every
//! MCP client starts a stdio server so: a pipe from Python or Go, a
//! socketpair from Node), they are read and written here in non-blocking
//! mode on the runtime's own event loop instead. A terminal, a file or
//! anything else keeps tokio's blocking ends, whose behaviour there is the
//! one people expect (a terminal is shared with the shell, and must not be
//! left non-blocking).
//!
//! Non-blocking mode is a flag of the open file, which the descriptors we
//! read through share with fd 0 and fd 1; [`Restore`] puts the flags back
//! when the session ends, so whatever else holds that file sees it as it
//! was.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use tokio::io::{AsyncRead, AsyncWrite};

pub type Reader = Pin<Box<dyn AsyncRead + Send + Sync>>;
pub type Writer = Pin<Box<dyn AsyncWrite + Send + Sync>>;

/// What fd 0 or fd 1 is, for the choice of how to drive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pipe,
    UnixSocket,
    Other,
}

fn kind(fd: BorrowedFd<'_>) -> Kind {
    let Ok(st) = fstat(fd) else {
        return Kind::Other;
    };
    let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if fmt == SFlag::S_IFIFO {
        return Kind::Pipe;
    }
    if fmt == SFlag::S_IFSOCK
        && nix::sys::socket::getsockname::<nix::sys::socket::UnixAddr>(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
        )
        .is_ok()
        && matches!(
            nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SockType),
            Ok(nix::sys::socket::SockType::Stream)
        )
    {
        return Kind::UnixSocket;
    }
    Kind::Other
}

/// The file status flags of fd 0 and fd 1 as they were, put back on drop.
pub struct Restore {
    saved: Vec<(i32, OFlag)>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        for (fd, flags) in &self.saved {
            // SAFETY: fd 0 and fd 1 stay open for the whole process; no Rust
            // object owns them.
            let fd = unsafe { BorrowedFd::borrow_raw(*fd) };
            let _ = fcntl(fd, FcntlArg::F_SETFL(*flags));
        }
    }
}

fn saved_flags(fd: BorrowedFd<'_>) -> Option<OFlag> {
    fcntl(fd, FcntlArg::F_GETFL)
        .ok()
        .map(OFlag::from_bits_truncate)
}

/// A copy of fd `n` (0 or 1) that the runtime may own and close.
fn copy_of(n: i32) -> Option<OwnedFd> {
    // SAFETY: fd 0 and fd 1 are open for the process's whole life (the
    // runtime checked nothing closed them); the borrow lasts this call.
    let fd = unsafe { BorrowedFd::borrow_raw(n) };
    fd.try_clone_to_owned().ok()
}

/// A socket end as tokio's, non-blocking as tokio needs.
fn unix_stream(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(s).ok()
}

fn reader(fd: OwnedFd, k: Kind) -> Option<Reader> {
    match k {
        Kind::Pipe => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::pin(r) as Reader),
        Kind::UnixSocket => unix_stream(fd).map(|r| Box::pin(r) as Reader),
        Kind::Other => None,
    }
}

fn writer(fd: OwnedFd, k: Kind) -> Option<Writer> {
    match k {
        Kind::Pipe => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::pin(w) as Writer),
        Kind::UnixSocket => unix_stream(fd).map(|w| Box::pin(w) as Writer),
        Kind::Other => None,
    }
}

/// fd `n` (with `fd` its borrow and `flags` its flags, read before either
/// end was touched, as the two may share one file description) as an end
/// `make` builds over a copy of it, its flags kept in `restore` to be given
/// back; else `fallback`, tokio's own end over a blocking thread.
fn end<T>(
    n: i32,
    fd: BorrowedFd<'_>,
    flags: Option<OFlag>,
    restore: &mut Restore,
    make: fn(OwnedFd, Kind) -> Option<T>,
    fallback: impl FnOnce() -> T,
) -> T {
    match (copy_of(n), kind(fd), flags) {
        (Some(copy), k, Some(flags)) if k != Kind::Other => {
            restore.saved.push((n, flags));
            make(copy, k).unwrap_or_else(fallback)
        }
        _ => fallback(),
    }
}

/// The two ends of the stdio transport, and the guard that gives fd 0 and
/// fd 1 their flags back. Must be called inside the runtime.
pub fn transport() -> ((Reader, Writer), Restore) {
    let mut restore = Restore { saved: Vec::new() };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let flags_in = saved_flags(stdin.as_fd());
    let flags_out = saved_flags(stdout.as_fd());
    let read = end(0, stdin.as_fd(), flags_in, &mut restore, reader, || {
        Box::pin(tokio::io::stdin()) as Reader
    });
    let write = end(1, stdout.as_fd(), flags_out, &mut restore, writer, || {
        Box::pin(tokio::io::stdout()) as Writer
    });
    ((read, write), restore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_and_unix_stream_sockets_are_told_from_terminals_and_files() {
        let (r, w) = nix::unistd::pipe().unwrap();
        assert_eq!(kind(r.as_fd()), Kind::Pipe);
        assert_eq!(kind(w.as_fd()), Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(kind(a.as_fd()), Kind::UnixSocket);
        let (d, _e) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert_eq!(kind(d.as_fd()), Kind::Other);
        let f = tempfile::tempfile().unwrap();
        assert_eq!(kind(f.as_fd()), Kind::Other);
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(kind(null.as_fd()), Kind::Other);
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(kind(tcp.as_fd()), Kind::Other);
    }
}
