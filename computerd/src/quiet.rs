//! A unix stream socket whose writer is not woken by its peer's reads.
//!
//! tokio registers every `UnixStream` for reading and writing at once. A
//! unix socket tells a registered writer that it has room again each time
//! its peer reads (the kernel's write-space callback), so every message a
//! daemon reads wakes the runtime thread of the process that sent it, which
//! wakes up to find nothing to do. On a call that crosses four processes
//! (client, server, init, guard) that is one needless wake-up per hop, each
//! taking a CPU from the processes that have work on a two-CPU computer.
//!
//! [`QuietStream`] registers its socket for reading only. Its writer writes
//! straight away (the socket is non-blocking); only when the socket is full
//! does it register a copy of the descriptor for writing, wait for room, and
//! drop that registration once the bytes are out. Messages here are small
//! and read at once, so a full socket is rare (a large file going out).

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A connected unix stream socket, read through the runtime and written
/// without a standing write registration.
pub struct QuietStream {
    read: QuietRead,
    write: QuietWrite,
}

/// The read half: registered for reading only.
pub struct QuietRead {
    fd: AsyncFd<UnixStream>,
}

/// The write half: a descriptor of its own, registered only while a write
/// waits for room.
pub struct QuietWrite {
    fd: UnixStream,
    waiting: Option<AsyncFd<UnixStream>>,
}

impl QuietStream {
    /// Take a connected unix stream socket (made non-blocking here). Must be
    /// called inside a tokio runtime with IO enabled.
    pub fn new(socket: OwnedFd) -> io::Result<Self> {
        let socket = UnixStream::from(socket);
        socket.set_nonblocking(true)?;
        let write = socket.try_clone()?;
        Ok(Self {
            read: QuietRead {
                fd: register(socket, Interest::READABLE)?,
            },
            write: QuietWrite {
                fd: write,
                waiting: None,
            },
        })
    }

    /// From tokio's own stream (its registration is dropped).
    pub fn from_tokio(stream: tokio::net::UnixStream) -> io::Result<Self> {
        Self::new(stream.into_std()?.into())
    }

    /// Connect to a listening socket's path.
    pub async fn connect(path: impl AsRef<std::path::Path>) -> io::Result<Self> {
        Self::from_tokio(tokio::net::UnixStream::connect(path).await?)
    }

    /// The two halves, each usable from its own task.
    pub fn into_split(self) -> (QuietRead, QuietWrite) {
        (self.read, self.write)
    }

    /// The socket's descriptor (for peer credentials and the like).
    pub fn as_raw_fd(&self) -> RawFd {
        self.read.fd.get_ref().as_raw_fd()
    }

    /// The socket again, whole and unregistered, from its two halves (the
    /// write half's copy of the descriptor is closed).
    pub fn reunite(read: QuietRead, write: QuietWrite) -> OwnedFd {
        drop(write);
        read.fd.into_inner().into()
    }
}

fn register(fd: UnixStream, interest: Interest) -> io::Result<AsyncFd<UnixStream>> {
    // SAFETY: a UnixStream owns its descriptor, open and naming the same
    // socket for as long as it lives, and the AsyncFd owns the stream for
    // its whole life.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

impl AsyncRead for QuietRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|fd| fd.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl QuietWrite {
    /// Run `f` on the socket (a `sendmsg` with descriptors, say) until it
    /// does not say WouldBlock, waiting for room in between.
    pub async fn write_with<R>(
        &mut self,
        mut f: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            match f(self.fd.as_fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => {
                    self.waiting = None;
                    return r;
                }
            }
            if self.waiting.is_none() {
                self.waiting = Some(register(self.fd.try_clone()?, Interest::WRITABLE)?);
            }
            if let Some(waiting) = self.waiting.as_ref() {
                waiting.writable().await?.clear_ready();
            }
        }
    }

    /// One write: the bytes taken, or WouldBlock.
    fn send(&self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match (&self.fd).write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

impl AsyncWrite for QuietWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.send(buf) {
                Ok(n) => {
                    // Room again: no standing registration to be woken by.
                    self.waiting = None;
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    self.waiting = None;
                    return Poll::Ready(Err(e));
                }
            }
            if self.waiting.is_none() {
                // A registration made while the socket has room reports it
                // at once, so no wake-up is lost between the send and here.
                let copy = self.fd.try_clone()?;
                self.waiting = Some(register(copy, Interest::WRITABLE)?);
            }
            let Some(waiting) = self.waiting.as_ref() else {
                continue;
            };
            let mut ready = ready!(waiting.poll_write_ready(cx))?;
            ready.clear_ready();
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.waiting = None;
        Poll::Ready(match self.fd.shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

impl AsyncRead for QuietStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for QuietStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.write).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_shutdown(cx)
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)] // the helpers below are test code too
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const EPOLLOUT: u32 = 0x4;
    const EPOLLIN: u32 = 0x1;

    /// The events this process's epoll sets watch for on `fd` (from
    /// /proc/self/fdinfo of every eventpoll descriptor).
    fn watched(fd: RawFd) -> Vec<u32> {
        let mut found = Vec::new();
        // The runtime's epoll may be open twice (one set, two descriptors).
        let mut seen = std::collections::HashSet::new();
        for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            if !target.to_string_lossy().contains("eventpoll") {
                continue;
            }
            let info = std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .unwrap_or_default();
            if !seen.insert(info.clone()) {
                continue;
            }
            for line in info.lines() {
                let mut words = line.split_whitespace();
                if words.next() == Some("tfd:")
                    && words.next().and_then(|n| n.parse::<RawFd>().ok()) == Some(fd)
                    && words.next() == Some("events:")
                    && let Some(ev) = words.next().and_then(|h| u32::from_str_radix(h, 16).ok())
                {
                    found.push(ev);
                }
            }
        }
        found
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_socket_is_watched_for_reading_only_and_writes_wait_for_room_without_a_standing_watch()
     {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let plain = watched(a.as_raw_fd());
        assert!(
            plain.iter().any(|e| e & EPOLLOUT != 0),
            "tokio's own stream: {plain:x?}"
        );
        let quiet = QuietStream::from_tokio(a).unwrap();
        let fd = quiet.as_raw_fd();
        assert_eq!(
            watched(fd)
                .iter()
                .map(|e| (e & EPOLLIN != 0, e & EPOLLOUT != 0))
                .collect::<Vec<_>>(),
            vec![(true, false)]
        );
        drop(quiet);
        // In the same test: fd numbers are the process's, and another
        // test's sockets would show in the same listings.
        bytes_go_both_ways_a_write_past_a_full_socket_waits_for_room_and_shutdown_is_eof().await;
    }

    async fn bytes_go_both_ways_a_write_past_a_full_socket_waits_for_room_and_shutdown_is_eof() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (mut read, mut write) = QuietStream::from_tokio(a).unwrap().into_split();
        let (mut peer_read, mut peer_write) = b.into_split();
        // 8 MiB is far more than a unix socket holds: the write must wait
        // for the peer, which starts reading only after a pause.
        let big: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            write.write_all(&sent).await.unwrap();
            write.shutdown().await.unwrap();
            write
        });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(
            !writer.is_finished(),
            "the socket took 8 MiB without a reader"
        );
        let mut got = Vec::new();
        peer_read.read_to_end(&mut got).await.unwrap();
        assert!(
            got == big,
            "the bytes arrived changed ({} of {})",
            got.len(),
            big.len()
        );
        let write = writer.await.unwrap();
        assert!(
            watched(write.fd.as_raw_fd()).is_empty(),
            "the write half stays registered after its wait"
        );

        peer_write.write_all(b"back\n").await.unwrap();
        drop(peer_write);
        let mut back = Vec::new();
        read.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"back\n");

        // Reunited, the socket is whole and watched by no one.
        let fd = QuietStream::reunite(read, write);
        assert!(watched(fd.as_raw_fd()).is_empty());
    }
}
