//! The proxy's copy between a program's connection (its TCP socket, handed
//! over by init, or a stream on the proxy's unix socket) and the host's:
//! splice(2) through a pipe, so the bytes move between the sockets inside
//! the kernel and never through this process's memory. One function for
//! both directions, so the static binary holds it once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};
use tokio::time::{Duration, Instant};

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
/// what it has (64 KiB by default).
fn pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made by pipe2 and are ours alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A bigger pipe moves more per call and wakes each side less often.
    // SAFETY: F_SETPIPE_SZ takes an int and changes only the pipe's size.
    let mut size = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
    if size < 0 {
        // SAFETY: F_GETPIPE_SZ only reads the pipe's size.
        size = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) };
    }
    let cap = usize::try_from(size)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(64 * 1024);
    Ok((r, w, cap))
}

/// A unix socket's send buffer, which bounds what is in flight to the
/// other relay: the default (208 KiB) makes each side wake about five
/// times a pipe; past `net.core.wmem_max` the kernel keeps its own.
const UNIX_SNDBUF: libc::c_int = CHUNK as libc::c_int;

fn widen_send_buffer(fd: RawFd) {
    let v = UNIX_SNDBUF;
    // SAFETY: setsockopt reads an int from `v`, which lives for the call;
    // `fd` is the caller's open socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
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
    // SAFETY: shutdown takes the descriptor `to` holds open.
    unsafe {
        libc::shutdown(to.fd(), libc::SHUT_WR);
    }
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
            splice(from.fd(), pw.as_raw_fd(), cap)
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
            match to.try_io(Interest::WRITABLE, || splice(pr.as_raw_fd(), to.fd(), left)) {
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
            widen_send_buffer(u.as_raw_fd());
        }
    }
    let there = pump(a, b, seen);
    let back = pump(b, a, seen);
    tokio::join!(there, back);
}
