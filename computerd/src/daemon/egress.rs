//! `computerd egress`: a computer's one way out when its network is an
//! allowlist. It listens on a unix socket, bound read-only into the
//! computer, where init hands it each connection made to 127.0.0.1:3128
//! ([`handoff`]), and speaks HTTP proxying (CONNECT for TLS, absolute-URI
//! requests for plain HTTP) and SOCKS5 CONNECT, told apart by the first
//! byte.
//!
//! Every request is decided before any socket opens: the port (80 and 443
//! only), the host against the list (a name off the list is refused before
//! any lookup, so it never leaves this host), then every address the name
//! resolves to (asked once, of [`dns`]) against the address rule
//! ([`crate::protocol::egress::classify_on`], this host's own addresses
//! included). The addresses checked are the ones dialled: there is no
//! second lookup to rebind. A plain-HTTP request goes to the host its
//! request line names, its `Host` header must name the same, it is sent
//! with `Connection: close`, and its response reaches the program as sent
//! (a redirect is the program's to follow, through the proxy again). A
//! plain-HTTP connection carries that one request and its body, framed
//! strictly, and nothing after it ([`body`]).
//!
//! Bounds: [`MAX_OPEN`] connections at once (each a tunnel at most),
//! [`MAX_TOTAL`] in all (one past either is refused in its own protocol,
//! SOCKS5's reply or HTTP's 503), a head of [`head::MAX_HEAD`] bytes read
//! within [`HEAD_WAIT`], [`IDLE`] without a byte either way. At its deadline, or
//! when the process it was started `--with-pid` ends, it stops: every
//! connection ends with it. Each decision is one log line: host, port,
//! address, class and rule; never a path, a header or a body.

pub mod body;
pub mod dns;
pub mod handoff;
pub mod head;
mod http;
pub mod relay;
mod socks;
pub mod splice;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use handoff::{Client, Incoming, Opening};

use crate::daemon::setup::{SetupError, Step};
use crate::launch::EgressArgs;
use crate::protocol::egress::{Allowlist, Class, DEFAULT_HINT, Host, PORTS, classify_on};
pub use http::http_reply;
use http::{drain, http, refuse_http};
use socks::{socks, socks_refuse, socks_request};

/// Connections (and so tunnels) open at once.
pub const MAX_OPEN: usize = 64;
/// Connections in the proxy's life.
pub const MAX_TOTAL: u64 = 20_000;
/// How long a program has to send its whole request head.
pub const HEAD_WAIT: Duration = Duration::from_secs(30);
/// A tunnel or request with no byte either way for this long is ended.
pub const IDLE: Duration = Duration::from_secs(300);
/// How long the dial of one host may take, over all its addresses.
pub const DIAL_WAIT: Duration = Duration::from_secs(10);
/// A connection past [`MAX_OPEN`] or [`MAX_TOTAL`] is answered in its own
/// protocol, told by what it sends within this (a SOCKS5 exchange up to
/// its request included); one that sends nothing gets HTTP's 503.
pub const REFUSE_WAIT: Duration = Duration::from_secs(2);
/// Connections past a bound answered at once; past these, one is closed
/// unanswered.
pub const MAX_REFUSING: usize = 16;

/// `computerd egress`: the list and the hint checked, then the proxy until
/// its deadline; the exit code, or why it did not start.
pub fn main(args: EgressArgs) -> Result<i32, SetupError> {
    let list = Allowlist::parse(&args.allow).map_err(|e| e.to_string())?;
    if let Some(h) = &args.hint
        && !h.bytes().all(|b| (0x20..0x7f).contains(&b))
    {
        return Err("--hint must be printable ASCII".into());
    }
    start(list, args)
}

fn start(list: Allowlist, opts: EgressArgs) -> Result<i32, SetupError> {
    crate::daemon::sandbox::join(std::process::id(), &opts.cgroups)?;
    let deadline: SystemTime = opts.deadline.get().into();
    if deadline <= SystemTime::now() {
        return Err("--deadline is in the past".into());
    }
    let user = opts.user.map(|u| (u.uid, u.gid));
    let listener = match opts.listen {
        Some(at) => {
            let l = std::net::TcpListener::bind(at)
                .map_err(|e| format!("could not listen on {at} ({e})"))?;
            l.set_nonblocking(true)
                .step("make the listener non-blocking")?;
            Bound::Tcp(l)
        }
        None => Bound::Unix(bind(&opts.socket, user, opts.client_gid)?),
    };
    if let Some((uid, gid)) = user {
        become_user(uid, gid)?;
    }
    let mut own = crate::net::own_addresses(|_| true);
    own.extend(&opts.host_addresses);
    let resolvers = if opts.resolvers.is_empty() {
        dns::resolvers_of(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default())
    } else {
        opts.resolvers.clone()
    };
    // One thread: the proxy's work per byte is the kernel's (splice), and
    // in its half-CPU cgroup a second worker only adds the wake-ups of
    // handing a ready socket from one thread to the other.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .step("start the runtime")?;
    let proxy = Arc::new(Proxy {
        list,
        own,
        resolvers,
        hint: opts
            .hint
            .clone()
            .unwrap_or_else(|| DEFAULT_HINT.to_string()),
        open: Arc::new(tokio::sync::Semaphore::new(MAX_OPEN)),
        refusing: Arc::new(tokio::sync::Semaphore::new(MAX_REFUSING)),
        total: AtomicU64::new(0),
    });
    let on = match opts.listen {
        Some(at) => at.to_string(),
        None => opts.socket.display().to_string(),
    };
    let code = rt.block_on(async move {
        let listener = listener
            .into_tokio()
            .map_err(|e| format!("could not listen on {on} ({e})"))?;
        tracing::info!(
            "egress ready on {on}: {} ({} resolvers)",
            proxy.list,
            proxy.resolvers.len()
        );
        let until = deadline_instant(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {
                tracing::info!("egress: the deadline came; every connection ends");
            }
            _ = watch_pid(opts.with_pid) => {
                tracing::info!("egress: the computer ended; every connection ends");
            }
            _ = accept_loop(listener, Arc::clone(&proxy)) => {}
        }
        Ok::<i32, String>(0)
    })?;
    if opts.listen.is_none() {
        let _ = std::fs::remove_file(&opts.socket);
    }
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(code)
}

fn deadline_instant(at: SystemTime) -> tokio::time::Instant {
    let left = at
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    tokio::time::Instant::now() + left
}

/// What the proxy listens on: its unix socket, or (`--listen`) TCP.
enum Bound {
    Unix(std::os::unix::net::UnixListener),
    Tcp(std::net::TcpListener),
}

enum Listening {
    Unix(tokio::net::UnixListener),
    Tcp(tokio::net::TcpListener),
}

impl Bound {
    fn into_tokio(self) -> std::io::Result<Listening> {
        Ok(match self {
            Bound::Unix(l) => Listening::Unix(tokio::net::UnixListener::from_std(l)?),
            Bound::Tcp(l) => Listening::Tcp(tokio::net::TcpListener::from_std(l)?),
        })
    }
}

impl Listening {
    async fn accept(&self) -> std::io::Result<Incoming> {
        Ok(match self {
            Listening::Unix(l) => Incoming::Unix(l.accept().await?.0),
            Listening::Tcp(l) => Incoming::Tcp(l.accept().await?.0),
        })
    }
}

/// The socket: a stale one replaced, made 0600 (0660 with a client
/// group), owned by the user the proxy becomes.
fn bind(
    path: &Path,
    user: Option<(u32, u32)>,
    client_gid: Option<u32>,
) -> Result<std::os::unix::net::UnixListener, SetupError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(format!("--socket {} exists and is not a socket", path.display()).into());
        }
        let _ = std::fs::remove_file(path);
    }
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let listener = std::os::unix::net::UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = listener.map_err(|e| format!("could not listen on {} ({e})", path.display()))?;
    listener
        .set_nonblocking(true)
        .step("make the socket non-blocking")?;
    let mode = if client_gid.is_some() { 0o660 } else { 0o600 };
    let owner = user.map(|(u, _)| nix::unistd::Uid::from_raw(u));
    let group = client_gid
        .or(user.map(|(_, g)| g))
        .map(nix::unistd::Gid::from_raw);
    if owner.is_some() || group.is_some() {
        nix::unistd::chown(path, owner, group)
            .map_err(|e| format!("could not give {} its owner ({e})", path.display()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("could not set {}'s mode ({e})", path.display()))?;
    Ok(listener)
}

/// Become uid:gid with no supplementary group and no_new_privs; read back.
fn become_user(uid: u32, gid: u32) -> Result<(), SetupError> {
    use nix::unistd::{Gid, Uid};
    if uid == 0 {
        return Err("--user 0:0: the proxy never runs as root".into());
    }
    nix::unistd::setgroups(&[]).map_err(|e| format!("--user: setgroups failed ({e})"))?;
    nix::unistd::setgid(Gid::from_raw(gid)).map_err(|e| format!("--user: setgid failed ({e})"))?;
    nix::unistd::setuid(Uid::from_raw(uid)).map_err(|e| format!("--user: setuid failed ({e})"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs failed ({e})"))?;
    if nix::unistd::geteuid().as_raw() != uid || nix::unistd::getegid().as_raw() != gid {
        return Err("--user did not read back".into());
    }
    Ok(())
}

/// Resolves when `pid` has ended (gone, a zombie, or another process).
async fn watch_pid(pid: Option<i32>) {
    let Some(pid) = pid else {
        return std::future::pending().await;
    };
    let start = start_of(pid);
    loop {
        let now = start_of(pid);
        if now.is_none() || now != start {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn start_of(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split(' ').collect();
    if f.first().is_some_and(|s| *s == "Z" || *s == "X") {
        return None;
    }
    f.get(19).map(|s| s.to_string())
}

struct Proxy {
    list: Allowlist,
    own: Vec<IpAddr>,
    resolvers: Vec<SocketAddr>,
    hint: String,
    open: Arc<tokio::sync::Semaphore>,
    /// Connections past a bound being answered (in their own protocol).
    refusing: Arc<tokio::sync::Semaphore>,
    total: AtomicU64,
}

async fn accept_loop(listener: Listening, proxy: Arc<Proxy>) {
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("egress: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let n = proxy.total.fetch_add(1, Ordering::Relaxed);
        let permit = match Arc::clone(&proxy.open).try_acquire_owned() {
            Ok(p) if n < MAX_TOTAL => p,
            other => {
                let r = if other.is_ok() {
                    Refusal::new(
                        503,
                        2,
                        "total",
                        format!(
                            "this proxy has carried its {MAX_TOTAL} connections and takes no more: make a new computer"
                        ),
                    )
                } else {
                    Refusal::new(
                        503,
                        2,
                        "bound",
                        format!(
                            "{MAX_OPEN} connections are open through this proxy, the most at once: close one and try again"
                        ),
                    )
                };
                // Answered in the program's own protocol, by a task of
                // its own: at most MAX_REFUSING at once, each within
                // REFUSE_WAIT (and refuse_http's drain).
                match Arc::clone(&proxy.refusing).try_acquire_owned() {
                    Ok(turn) => {
                        let proxy = Arc::clone(&proxy);
                        spawn(async move {
                            refuse_past_bound(stream, &proxy, r).await;
                            drop(turn);
                        });
                    }
                    Err(_) => {
                        proxy.log_refuse_unknown(
                            &r,
                            &format!(
                                "{MAX_REFUSING} refusals were being answered, so it was closed unanswered"
                            ),
                        );
                        drop(stream);
                    }
                }
                continue;
            }
        };
        let proxy = Arc::clone(&proxy);
        spawn(async move {
            serve(stream, &proxy).await;
            drop(permit);
        });
    }
}

/// The proxy's tasks are the daemon's one boxed task type ([`super::spawn`]).
pub use super::spawn;

/// A refusal: the rule, the log's fields, the words the program sees.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub socks: u8,
    pub rule: &'static str,
    pub address: Option<IpAddr>,
    pub class: Option<Class>,
    pub words: String,
}

impl Refusal {
    fn new(status: u16, socks: u8, rule: &'static str, words: String) -> Self {
        Self {
            status,
            socks,
            rule,
            address: None,
            class: None,
            words,
        }
    }
}

impl Proxy {
    /// Decide a host and port: the addresses to dial, checked, or why not.
    async fn decide(
        &self,
        host_text: &str,
        port: u16,
    ) -> Result<(Vec<SocketAddr>, Class), Refusal> {
        let shown = host_text.trim_end_matches('.');
        if !PORTS.contains(&port) {
            return Err(Refusal::new(
                403,
                2,
                "port",
                format!(
                    "{shown}:{port} is refused: a network list reaches ports 80 and 443 only, and no list can allow port {port}"
                ),
            ));
        }
        let host = crate::protocol::egress::parse_host(host_text).map_err(|why| {
            Refusal::new(
                400,
                4,
                "host",
                format!("{host_text:?} is not a host: {why}"),
            )
        })?;
        let addresses = match &host {
            Host::Ip(ip) => {
                if !self.list.allows_ip(*ip) {
                    return Err(Refusal::new(
                        403,
                        2,
                        "not-listed",
                        format!(
                            "{host} is not on this box's network list (an address is reached only inside a listed CIDR of its family): {}",
                            self.hint
                        ),
                    ));
                }
                vec![*ip]
            }
            Host::Name(name) => {
                if !self.list.allows_name(name) {
                    return Err(Refusal::new(
                        403,
                        2,
                        "not-listed",
                        format!("{name} is not on this box's network list: {}", self.hint),
                    ));
                }
                let found = dns::resolve(&self.resolvers, name).await.map_err(|why| {
                    Refusal::new(
                        502,
                        4,
                        "lookup",
                        format!("{name} could not be looked up: {why}"),
                    )
                })?;
                if found.is_empty() {
                    return Err(Refusal::new(
                        502,
                        4,
                        "lookup",
                        format!("{name} has no address (the resolver answered none)"),
                    ));
                }
                found
            }
        };
        // Every answer checked: one refused address refuses the host, so a
        // name that answers both a public and a private address reaches
        // neither.
        for ip in &addresses {
            let class = classify_on(*ip, &self.own);
            if class != Class::Public {
                let words = match &host {
                    Host::Ip(_) => {
                        format!("{host} is a {class} address, which no network list can allow")
                    }
                    Host::Name(n) => format!(
                        "{n} resolves to {ip}, a {class} address, which no network list can allow: a listed name reaches public addresses only"
                    ),
                };
                let mut r = Refusal::new(403, 2, "address", words);
                r.address = Some(*ip);
                r.class = Some(class);
                return Err(r);
            }
        }
        Ok((
            addresses
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
            Class::Public,
        ))
    }

    /// Dial the checked addresses in order; the first that answers.
    async fn dial(&self, host: &str, to: &[SocketAddr]) -> Result<TcpStream, Refusal> {
        let until = tokio::time::Instant::now() + DIAL_WAIT;
        let mut last = String::from("no address");
        // SOCKS5's reply for the last failure: 5 refused, 3 network and 4
        // host unreachable (no answer in time is the host's).
        let mut code = 4;
        for a in to {
            match tokio::time::timeout_at(until, TcpStream::connect(a)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Ok(Err(e)) => {
                    code = match e.raw_os_error() {
                        Some(libc::ECONNREFUSED) => 5,
                        Some(libc::ENETUNREACH) => 3,
                        _ => 4,
                    };
                    last = format!("{a}: {e}");
                }
                Err(_) => {
                    code = 4;
                    last = format!("no answer within {DIAL_WAIT:?}");
                    break;
                }
            }
        }
        Err(Refusal::new(
            502,
            code,
            "connect",
            format!("{host} could not be reached ({last})"),
        ))
    }

    fn log_allow(&self, host: &str, port: u16, to: SocketAddr) {
        tracing::info!(
            "egress allow host={} port={port} address={} class=public",
            host.trim_end_matches('.'),
            to.ip()
        );
    }

    fn log_refuse(&self, host: &str, port: u16, r: &Refusal) {
        let addr = r
            .address
            .map(|a| a.to_string())
            .unwrap_or_else(|| "-".into());
        let class = r.class.map(Class::as_str).unwrap_or("-");
        tracing::info!(
            "egress refuse host={} port={port} address={addr} class={class} rule={} socks={} fix={}",
            printable(host),
            r.rule,
            r.socks,
            self.fix(r.rule)
        );
    }

    /// A refusal of a connection whose host is not known (it is refused
    /// before its request is read, or sent none): `why` says which.
    fn log_refuse_unknown(&self, r: &Refusal, why: &str) {
        tracing::info!(
            "egress refuse host=- port=- address=- class=- rule={} socks={} fix={} (the host is unknown: {why})",
            r.rule,
            r.socks,
            self.fix(r.rule)
        );
    }

    /// What to do about a refusal by `rule`, for the log: a SOCKS reply
    /// carries a code and no words, so the log is where a SOCKS client's
    /// user reads which rule refused and how to allow the host.
    fn fix(&self, rule: &str) -> String {
        match rule {
            "not-listed" => self.hint.clone(),
            "port" => "none: a network list reaches ports 80 and 443 only".into(),
            "address" => "none: a listed name reaches public addresses only, and no list allows a private, loopback, link-local, metadata, reserved or this host's address".into(),
            "host" => "send a host name or an IP address".into(),
            "lookup" => "check the name: its resolver gave no address".into(),
            "connect" => "the host did not take the connection: try again later".into(),
            "socks-command" => "use SOCKS CONNECT (TCP) alone".into(),
            "host-header" => "send the request line's host in Host".into(),
            "upgrade" => "reach the host over TLS (CONNECT)".into(),
            "bound" => format!("close one of the {MAX_OPEN} connections open through this proxy and try again"),
            "total" => "make a new computer: this proxy takes no more connections".into(),
            _ => "-".into(),
        }
    }
}

async fn serve(stream: Incoming, proxy: &Proxy) {
    match handoff::open_incoming(stream, tokio::time::Instant::now() + HEAD_WAIT).await {
        Opening::Ready(client, 5) => socks(client, proxy).await,
        Opening::Ready(client, first) => http(client, first, proxy).await,
        Opening::Refused(why) => tracing::warn!("egress: a connection was closed: {why}"),
        Opening::Silent(_) | Opening::Closed => {}
    }
}

/// A connection past a bound, refused in its own protocol: a SOCKS5
/// client is given its method and, for its request, reply 2 (connection
/// not allowed by ruleset: the seed lists the bounds among what the proxy
/// refuses) with the words on a line after it; any other first byte, or
/// none within [`REFUSE_WAIT`], gets HTTP's 503 with the words.
async fn refuse_past_bound(stream: Incoming, proxy: &Proxy, r: Refusal) {
    let until = tokio::time::Instant::now() + REFUSE_WAIT;
    match handoff::open_incoming(stream, until).await {
        Opening::Ready(mut client, 5) => match socks_request(&mut client, until).await {
            Some((req, _)) => {
                proxy.log_refuse(&req.host_text, req.port, &r);
                let _ = socks_refuse(&mut client, &r).await;
            }
            None => proxy.log_refuse_unknown(
                &r,
                &format!(
                    "a SOCKS5 client whose request did not come within {REFUSE_WAIT:?}, or could not be one"
                ),
            ),
        },
        Opening::Ready(mut client, _) => {
            proxy.log_refuse_unknown(&r, "an HTTP request, refused before its head is read");
            refuse_http(&mut client, r.status, &r.words).await;
        }
        Opening::Closed => proxy.log_refuse_unknown(&r, "it closed before sending a byte"),
        Opening::Refused(why) => proxy.log_refuse_unknown(&r, &why),
        Opening::Silent(mut client) => {
            proxy.log_refuse_unknown(
                &r,
                &format!("it sent nothing within {REFUSE_WAIT:?}, and was answered as HTTP"),
            );
            refuse_http(&mut client, r.status, &r.words).await;
        }
    }
}

/// A program's text as it may go into a log line or a reply: printable
/// ASCII, anything else a `?`, at most 255 bytes.
fn printable(s: &str) -> String {
    s.bytes()
        .take(255)
        .map(|b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}

/// Decide, log, dial.
async fn open(proxy: &Proxy, host: &str, port: u16) -> Result<TcpStream, Refusal> {
    let (to, _) = match proxy.decide(host, port).await {
        Ok(x) => x,
        Err(r) => {
            proxy.log_refuse(host, port, &r);
            return Err(r);
        }
    };
    match proxy.dial(host, &to).await {
        Ok(s) => {
            let peer = s.peer_addr().unwrap_or(to[0]);
            proxy.log_allow(host, port, peer);
            Ok(s)
        }
        Err(r) => {
            proxy.log_refuse(host, port, &r);
            Err(r)
        }
    }
}

/// Carry bytes both ways until both ends are done or [`IDLE`] passes with
/// none either way; `early` (bytes the program sent past its head) goes
/// first.
async fn relay(client: Client, mut upstream: TcpStream, early: Vec<u8>) {
    if !early.is_empty() && upstream.write_all(&early).await.is_err() {
        return;
    }
    let seen = splice::Activity::new();
    // Spliced: the bytes stay in the kernel.
    tokio::select! {
        _ = splice::both(splice::Side::Tcp(&upstream), client.side(), &seen) => {}
        _ = seen.idle_for(IDLE) => {
            tracing::info!(
                "egress: a tunnel moved no byte either way for {} s and was ended",
                IDLE.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, UnixStream};
    use tokio::time::Instant;

    /// A relay between socket pairs: the program's end of the unix socket,
    /// the far (server's) end of the TCP connection, and the relay's task.
    async fn tunnel() -> (UnixStream, TcpStream, tokio::task::JoinHandle<()>) {
        let (program, client) = UnixStream::pair().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (far, _) = l.accept().await.unwrap();
        let task = tokio::spawn(relay(Client::Unix(client), upstream, b"early".to_vec()));
        (program, far, task)
    }

    async fn read_exact(s: &mut (impl AsyncReadExt + Unpin), n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        s.read_exact(&mut b).await.unwrap();
        b
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_with_no_byte_either_way_for_idle_is_ended() {
        let (mut program, mut far, task) = tunnel().await;
        assert_eq!(read_exact(&mut far, 5).await, b"early");
        let quiet_from = Instant::now();
        // Nothing moves: the relay's idle timer is all that is left, so the
        // paused clock runs to it (or to this bound, were there none).
        let mut b = [0u8; 1];
        let end = tokio::time::timeout(IDLE * 2, program.read(&mut b)).await;
        assert_eq!(end.expect("the tunnel outlived its idle bound").unwrap(), 0);
        assert_eq!(far.read(&mut b).await.unwrap(), 0);
        task.await.unwrap();
        let waited = quiet_from.elapsed();
        assert!(
            waited >= IDLE && waited < IDLE + Duration::from_secs(1),
            "ended after {waited:?}, where the bound is {IDLE:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_with_a_byte_either_way_within_idle_is_kept() {
        let (mut program, mut far, task) = tunnel().await;
        assert_eq!(read_exact(&mut far, 5).await, b"early");
        let start = Instant::now();
        // A byte every half of IDLE for four times IDLE, each way in turn:
        // one way alone keeps it.
        for i in 0..8u8 {
            tokio::time::sleep(IDLE / 2).await;
            if i % 2 == 0 {
                program.write_all(&[i]).await.unwrap();
                assert_eq!(read_exact(&mut far, 1).await, [i]);
            } else {
                far.write_all(&[i]).await.unwrap();
                assert_eq!(read_exact(&mut program, 1).await, [i]);
            }
            assert!(!task.is_finished(), "ended at {:?}", start.elapsed());
        }
        assert!(start.elapsed() >= IDLE * 4);
        // Then quiet: it ends IDLE after the last byte.
        let last = Instant::now();
        let mut b = [0u8; 1];
        let end = tokio::time::timeout(IDLE * 2, far.read(&mut b)).await;
        assert_eq!(end.expect("the tunnel outlived its idle bound").unwrap(), 0);
        task.await.unwrap();
        let waited = last.elapsed();
        assert!(
            waited >= IDLE && waited < IDLE + Duration::from_secs(1),
            "ended {waited:?} after the last byte"
        );
    }
}
