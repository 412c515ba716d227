//! The proxy's copy between a program's connection (its TCP socket, handed
//! over by init, or a stream on the proxy's unix socket) and the host's:
//! splice(2) through a pipe, so the bytes move between the sockets inside
//! the kernel and never through this process's memory. One function for
//! both directions, so the static binary holds it once.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};
use tokio::time::{Duration, Instant};

use crate::daemon::sys;

/// The most moved by one splice.
const CHUNK: usize = 1 << 20;

/// One end of a relay.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    Tcp(&'a TcpStream),
    Unix(&'a UnixStream),
}

impl<'a> Side<'a> {
    fn fd(self) -> BorrowedFd<'a> {
        match self {
            Side::Tcp(s) => s.as_fd(),
            Side::Unix(s) => s.as_fd(),
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

    /// Read what has come, waiting for something (0: the end).
    pub async fn read(self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.ready(Interest::READABLE).await?;
            let r = match self {
                Side::Tcp(s) => s.try_read(buf),
                Side::Unix(s) => s.try_read(buf),
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    pub async fn write_all(self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            self.ready(Interest::WRITABLE).await?;
            let r = match self {
                Side::Tcp(s) => s.try_write(buf),
                Side::Unix(s) => s.try_write(buf),
            };
            match r {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A pipe and its capacity: [`CHUNK`] where the kernel gives it, else
/// what it has (64 KiB by default). A bigger pipe moves more per call and
/// wakes each side less often.
fn pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    let (r, w) = sys::pipe_nonblocking()?;
    let cap = sys::set_pipe_size(w.as_fd(), CHUNK).unwrap_or(64 * 1024);
    Ok((r, w, cap))
}

/// A unix socket's send buffer, which bounds what is in flight to the
/// other relay: the default (208 KiB) makes each side wake about five
/// times a pipe; past `net.core.wmem_max` the kernel keeps its own.
const UNIX_SNDBUF: usize = CHUNK;

fn widen_send_buffer(sock: &UnixStream) {
    use nix::sys::socket::{setsockopt, sockopt::SndBuf};
    let _ = setsockopt(sock, SndBuf, &UNIX_SNDBUF);
}

/// When a relay last moved a byte either way, on tokio's clock (so a
/// test under a paused clock sees the idle bound without waiting it out).
pub struct Activity {
    since: Instant,
    /// Milliseconds after `since`.
    last_ms: AtomicU64,
}

impl Activity {
    pub fn new() -> Self {
        Self {
            since: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    pub fn touch(&self) {
        let ms = Instant::now()
            .saturating_duration_since(self.since)
            .as_millis();
        self.last_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Resolves once no byte has moved for `bound`.
    pub async fn idle_for(&self, bound: Duration) {
        loop {
            let last = self.since + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = Instant::now().saturating_duration_since(last);
            if quiet >= bound {
                return;
            }
            tokio::time::sleep(bound - quiet).await;
        }
    }
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

/// Move everything `from` sends to `to`, then end `to`'s writing.
pub async fn pump(from: Side<'_>, to: Side<'_>, seen: &Activity) {
    let _ = pump_inner(from, to, seen).await;
    let _ = nix::sys::socket::shutdown(to.fd().as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

/// Fill the empty pipe from `from`, then empty it into `to`, until `from`
/// ends. The pipe is read into only when empty: splice's EAGAIN cannot
/// tell a full pipe from a socket with nothing to read, and taking one for
/// the other would clear the socket's readiness while it still holds
/// bytes. The bytes that arrive meanwhile wait in the socket's own buffer.
async fn pump_inner(from: Side<'_>, to: Side<'_>, seen: &Activity) -> io::Result<()> {
    let (pr, pw, cap) = pipe()?;
    loop {
        from.ready(Interest::READABLE).await?;
        let n = match from.try_io(Interest::READABLE, || {
            sys::splice(from.fd(), pw.as_fd(), cap)
        }) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        seen.touch();
        let mut left = n;
        while left > 0 {
            to.ready(Interest::WRITABLE).await?;
            match to.try_io(Interest::WRITABLE, || {
                sys::splice(pr.as_fd(), to.fd(), left)
            }) {
                Ok(m) => {
                    left -= m.min(left);
                    seen.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Both ways at once, until both ends are done; every byte moved is
/// marked in `seen`.
pub async fn both(a: Side<'_>, b: Side<'_>, seen: &Activity) {
    for s in [a, b] {
        if let Side::Unix(u) = s {
            widen_send_buffer(u);
        }
    }
    let there = pump(a, b, seen);
    let back = pump(b, a, seen);
    tokio::join!(there, back);
}
