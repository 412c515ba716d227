//! The handoff: init gives the proxy each program's TCP connection itself,
//! so the bytes go program → proxy → host, not program → init → unix
//! socket → proxy → host.
//!
//! Init accepts a connection on the computer's 127.0.0.1:3128, opens the
//! proxy's socket, and sends one byte, [`HANDOFF`], with the accepted
//! socket as SCM_RIGHTS; then it closes both. The proxy, outside the
//! computer, serves the program on that socket directly. The socket stays
//! in the computer's network namespace (the proxy can only read, write and
//! end it), and the proxy dials upstream from its own.
//!
//! Anything in the computer can open the proxy's socket and send it
//! descriptors, so what arrives is checked: exactly one, with the handoff
//! byte, and a connected-or-not TCP socket (domain inet or inet6, a stream,
//! protocol TCP); anything else is closed and the connection ended. A
//! connection that sends no descriptor is served as a plain stream (its
//! first byte is the request's), as before.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::Instant;

use super::splice::Side;
use crate::daemon::sys;

/// The byte a handoff's descriptor comes with. No HTTP request starts
/// with it, nor SOCKS5 (5).
pub const HANDOFF: u8 = 0;

/// Descriptors room is made for in one receive: one is a handoff; a few
/// more are received (and closed) so a sender of several learns nothing
/// and leaves nothing open here. The kernel closes any past the room.
const ROOM: usize = 4;

/// Hand `tcp` to the proxy at the other end of `unix`.
pub async fn send(unix: &UnixStream, tcp: &TcpStream) -> io::Result<()> {
    loop {
        unix.writable().await?;
        match unix.try_io(Interest::WRITABLE, || {
            send_fd(unix.as_fd(), tcp.as_raw_fd())
        }) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn send_fd(sock: BorrowedFd<'_>, fd: RawFd) -> io::Result<()> {
    use nix::sys::socket::MsgFlags;
    let n = sys::send_fds(
        sock,
        &[HANDOFF],
        &[fd],
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
    )?;
    if n != 1 {
        return Err(io::Error::other("the handoff byte was not sent"));
    }
    Ok(())
}

/// One receive of at most one byte and its descriptors (every one owned,
/// so closed on drop, a truncated control part included).
fn recv_first(sock: BorrowedFd<'_>) -> io::Result<(usize, u8, Vec<OwnedFd>)> {
    let mut byte = [0u8; 1];
    let got = sys::recv_fds(sock, &mut byte, ROOM, libc::MSG_DONTWAIT)?;
    Ok((got.bytes, byte[0], got.fds))
}

/// The handed socket's congestion control made reno, where the host's
/// default may be one that paces (bbr). The socket's far end is the
/// program, across the computer's own loopback: nothing there to pace for
/// or to lose a packet, and pacing costs timers and CPU (measured on a
/// 2-CPU machine whose default is bbr: a 100 MiB download through the
/// proxy was 0.58 to 0.62 of direct with bbr on this hop and 0.64 to 0.84
/// with reno or cubic, medians of 25 pairs in turn). Reno is the one every
/// unprivileged process may choose. Best effort: a kernel without it keeps
/// its default.
fn pace_off(fd: &OwnedFd) {
    use nix::sys::socket::{setsockopt, sockopt::TcpCongestion};
    let _ = setsockopt(fd, TcpCongestion, &std::ffi::OsString::from("reno"));
}

/// The handed descriptor as a TCP stream, or why it is not one.
fn tcp_of(fd: OwnedFd) -> Result<TcpStream, String> {
    let what = |e: io::Error| format!("the handed descriptor is not a socket ({e})");
    let domain = sys::socket_int(fd.as_fd(), libc::SO_DOMAIN).map_err(what)?;
    let kind = sys::socket_int(fd.as_fd(), libc::SO_TYPE).map_err(what)?;
    let proto = sys::socket_int(fd.as_fd(), libc::SO_PROTOCOL).map_err(what)?;
    if !matches!(domain, libc::AF_INET | libc::AF_INET6)
        || kind != libc::SOCK_STREAM
        || proto != libc::IPPROTO_TCP
    {
        return Err(format!(
            "the handed descriptor is not a TCP socket (domain {domain}, type {kind}, protocol {proto})"
        ));
    }
    pace_off(&fd);
    let s = std::net::TcpStream::from(fd);
    s.set_nonblocking(true)
        .map_err(|e| format!("the handed socket cannot be made non-blocking ({e})"))?;
    TcpStream::from_std(s).map_err(|e| format!("the handed socket cannot be polled ({e})"))
}

/// A program's connection to the proxy: its own TCP socket, handed over
/// by init, or a stream on the proxy's unix socket.
pub enum Client {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Client {
    pub fn side(&self) -> Side<'_> {
        match self {
            Client::Unix(s) => Side::Unix(s),
            Client::Tcp(s) => Side::Tcp(s),
        }
    }
}

impl AsyncRead for Client {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Client::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Client::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Client::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Client::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Client::Unix(s) => Pin::new(s).poll_flush(cx),
            Client::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Client::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Client::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// How a connection to the proxy's socket began.
pub enum Opening {
    /// The program's connection and the first byte of its request.
    Ready(Client, u8),
    /// No byte came by the time given.
    Silent(Client),
    /// It ended before its first byte.
    Closed,
    /// It sent descriptors that are no handoff: closed, with why.
    Refused(String),
}

/// Take a new connection on the proxy's socket to its program's first
/// byte, by `until`: a handoff's socket (its first byte read from it), or
/// the stream itself.
pub async fn open(unix: UnixStream, until: Instant) -> Opening {
    let first = tokio::time::timeout_at(until, async {
        loop {
            unix.readable().await?;
            match unix.try_io(Interest::READABLE, || recv_first(unix.as_fd())) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return other,
            }
        }
    })
    .await;
    let (n, byte, mut fds) = match first {
        Err(_) => return Opening::Silent(Client::Unix(unix)),
        Ok(Err(_)) | Ok(Ok((0, _, _))) => return Opening::Closed,
        Ok(Ok(got)) => got,
    };
    debug_assert_eq!(n, 1);
    if fds.is_empty() {
        return Opening::Ready(Client::Unix(unix), byte);
    }
    if byte != HANDOFF || fds.len() != 1 {
        return Opening::Refused(format!(
            "{} descriptors came with the byte {byte}, where a handoff is one with {HANDOFF}",
            fds.len()
        ));
    }
    drop(unix);
    let Some(fd) = fds.pop() else {
        return Opening::Closed;
    };
    match tcp_of(fd) {
        Ok(t) => first_byte(t, until).await,
        Err(why) => Opening::Refused(why),
    }
}

/// A connection as the proxy accepted it: on its unix socket, or (its
/// TCP form, `--listen`) a program's own TCP connection, with no handoff.
pub enum Incoming {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// Take an accepted connection to its program's first byte, by `until`.
pub async fn open_incoming(c: Incoming, until: Instant) -> Opening {
    match c {
        Incoming::Unix(u) => open(u, until).await,
        Incoming::Tcp(t) => {
            let _ = t.set_nodelay(true);
            first_byte(t, until).await
        }
    }
}

/// A program's TCP connection, to its first byte.
async fn first_byte(mut tcp: TcpStream, until: Instant) -> Opening {
    let mut b = [0u8; 1];
    match tokio::time::timeout_at(until, tcp.read(&mut b)).await {
        Err(_) => Opening::Silent(Client::Tcp(tcp)),
        Ok(Ok(1)) => Opening::Ready(Client::Tcp(tcp), b[0]),
        Ok(_) => Opening::Closed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use tokio::io::AsyncWriteExt;

    fn until() -> Instant {
        Instant::now() + std::time::Duration::from_secs(5)
    }

    /// Send `byte` with `fds`, as a program in the computer could.
    fn send_raw(to: &UnixStream, byte: u8, fds: &[RawFd]) {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
        let n = sendmsg::<()>(
            to.as_raw_fd(),
            &[io::IoSlice::new(&[byte])],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        assert_eq!(n, 1);
    }

    /// A connected pair: the program's end and the end init accepts.
    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let program = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = l.accept().await.unwrap();
        (program, accepted)
    }

    /// A pipe, non-blocking (a read end still open elsewhere reads EAGAIN,
    /// not forever).
    fn pipe() -> (OwnedFd, OwnedFd) {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).unwrap()
    }

    /// A pipe whose write end goes to the proxy: its read end sees the
    /// end of file once the proxy has closed what it was given.
    fn closed_by_the_proxy(read_end: &OwnedFd) -> bool {
        let mut b = [0u8; 1];
        matches!(nix::unistd::read(read_end.as_fd(), &mut b), Ok(0))
    }

    #[tokio::test]
    async fn a_handed_socket_is_served_and_init_keeps_nothing() {
        let (mut program, accepted) = tcp_pair().await;
        let (init, proxy) = UnixStream::pair().unwrap();
        send(&init, &accepted).await.unwrap();
        drop(accepted);
        drop(init);
        program.write_all(b"GET").await.unwrap();
        let Opening::Ready(mut client, first) = open(proxy, until()).await else {
            panic!("a handoff was not taken");
        };
        assert_eq!(first, b'G');
        let Client::Tcp(ref tcp) = client else {
            panic!("a handoff was served as a stream");
        };
        // Reno (built into every kernel), not the host's pacing default.
        let cc =
            nix::sys::socket::getsockopt(tcp, nix::sys::socket::sockopt::TcpCongestion).unwrap();
        assert_eq!(cc, "reno");
        // The proxy's socket is the program's connection itself, both ways.
        let mut rest = [0u8; 2];
        client.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"ET");
        client.write_all(b"HTTP/1.1 200").await.unwrap();
        client.shutdown().await.unwrap();
        drop(client);
        let mut got = Vec::new();
        program.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 200");
    }

    #[tokio::test]
    async fn a_stream_with_no_descriptor_is_served_as_itself() {
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, 5, &[]);
        match open(proxy, until()).await {
            Opening::Ready(Client::Unix(_), 5) => {}
            _ => panic!("a plain SOCKS5 stream was not served as one"),
        }
        // A zero byte alone is a request's first byte, not a handoff.
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &[]);
        assert!(matches!(
            open(proxy, until()).await,
            Opening::Ready(Client::Unix(_), HANDOFF)
        ));
    }

    #[tokio::test]
    async fn descriptors_that_are_no_tcp_handoff_are_refused_and_closed() {
        let refused = |o: Opening| match o {
            Opening::Refused(why) => why,
            _ => panic!("taken"),
        };
        // A pipe: not a socket.
        let (r, w) = pipe();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &[w.as_raw_fd()]);
        drop(w);
        let why = refused(open(proxy, until()).await);
        assert!(why.contains("not a socket"), "{why}");
        assert!(closed_by_the_proxy(&r));
        // A unix socket, and a UDP one: not TCP.
        let (other, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &[other.as_raw_fd()]);
        let why = refused(open(proxy, until()).await);
        assert!(why.contains("not a TCP socket"), "{why}");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &[udp.as_raw_fd()]);
        let why = refused(open(proxy, until()).await);
        assert!(why.contains("not a TCP socket"), "{why}");
        // Two at once, or one with another byte: no handoff, all closed.
        let (_p1, a1) = tcp_pair().await;
        let (r, w) = pipe();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &[a1.as_raw_fd(), w.as_fd().as_raw_fd()]);
        drop(w);
        let why = refused(open(proxy, until()).await);
        assert!(why.contains("2 descriptors"), "{why}");
        assert!(closed_by_the_proxy(&r));
        let (r, w) = pipe();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, b'G', &[w.as_raw_fd()]);
        drop(w);
        let why = refused(open(proxy, until()).await);
        assert!(why.contains("byte 71"), "{why}");
        assert!(closed_by_the_proxy(&r));
        // More than there is room for: those past it the kernel closes.
        let pipes: Vec<(OwnedFd, OwnedFd)> = (0..ROOM + 3).map(|_| pipe()).collect();
        let ws: Vec<RawFd> = pipes.iter().map(|(_, w)| w.as_raw_fd()).collect();
        let (program, proxy) = UnixStream::pair().unwrap();
        send_raw(&program, HANDOFF, &ws);
        let reads: Vec<OwnedFd> = pipes.into_iter().map(|(r, _w)| r).collect();
        assert!(matches!(open(proxy, until()).await, Opening::Refused(_)));
        assert!(reads.iter().all(closed_by_the_proxy));
    }

    #[tokio::test]
    async fn a_handed_socket_that_sends_nothing_is_silent_by_the_bound() {
        let (_program, accepted) = tcp_pair().await;
        let (init, proxy) = UnixStream::pair().unwrap();
        send(&init, &accepted).await.unwrap();
        let soon = Instant::now() + std::time::Duration::from_millis(200);
        assert!(matches!(
            open(proxy, soon).await,
            Opening::Silent(Client::Tcp(_))
        ));
    }
}
