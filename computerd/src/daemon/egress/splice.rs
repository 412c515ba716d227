//! Both relays' copy (the proxy's, unix socket to TCP, and init's, TCP to
//! unix socket): splice(2) through a pipe, so the bytes move between the
//! sockets inside the kernel and never through this process's memory.
//! One function for both directions and both relays, so the static binary
//! holds it once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// The most moved by one splice.
const CHUNK: usize = 1 << 20;

/// One end of a relay.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    Tcp(&'a TcpStream),
    Unix(&'a UnixStream),
}

impl Side<'_> {
    fn fd(self) -> RawFd {
        match self {
            Side::Tcp(s) => s.as_raw_fd(),
            Side::Unix(s) => s.as_raw_fd(),
        }
    }

    async fn ready(self, i: Interest) -> io::Result<()> {
        match self {
            Side::Tcp(s) => s.ready(i).await.map(|_| ()),
            Side::Unix(s) => s.ready(i).await.map(|_| ()),
        }
    }

    fn try_io(self, i: Interest, f: impl FnOnce() -> io::Result<usize>) -> io::Result<usize> {
        match self {
            Side::Tcp(s) => s.try_io(i, f),
            Side::Unix(s) => s.try_io(i, f),
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made by pipe2 and are ours alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A bigger pipe moves more per call; the default (64 KiB) where refused.
    // SAFETY: F_SETPIPE_SZ takes an int and changes only the pipe's size.
    unsafe {
        libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int);
    }
    Ok((r, w))
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice moves bytes between two descriptors the caller holds
    // open; the offsets are null (sockets and pipes have none).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Move everything `from` sends to `to`, then end `to`'s writing.
pub async fn pump(from: Side<'_>, to: Side<'_>) {
    let _ = pump_inner(from, to).await;
    // SAFETY: shutdown takes the descriptor `to` holds open.
    unsafe {
        libc::shutdown(to.fd(), libc::SHUT_WR);
    }
}

async fn pump_inner(from: Side<'_>, to: Side<'_>) -> io::Result<()> {
    let (pr, pw) = pipe()?;
    loop {
        from.ready(Interest::READABLE).await?;
        let n = match from.try_io(Interest::READABLE, || {
            splice(from.fd(), pw.as_raw_fd(), CHUNK)
        }) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        let mut left = n;
        while left > 0 {
            to.ready(Interest::WRITABLE).await?;
            match to.try_io(Interest::WRITABLE, || splice(pr.as_raw_fd(), to.fd(), left)) {
                Ok(m) => left -= m.min(left),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Both ways at once, until both ends are done.
pub async fn both(tcp: &TcpStream, unix: &UnixStream) {
    let up = pump(Side::Unix(unix), Side::Tcp(tcp));
    let down = pump(Side::Tcp(tcp), Side::Unix(unix));
    tokio::join!(up, down);
}
