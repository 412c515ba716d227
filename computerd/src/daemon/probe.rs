//! `computerd probe`: what the computer's network answers, read from inside.
//!
//! Every target is tried at once, each on a thread of its own, and the probe
//! prints one [`ProbeReport`] line. A target is reached only when bytes come
//! back from it; a TCP connection that is accepted and then stays silent is
//! accepted, which a provider names in its notes and never counts as reached
//! (some firewalls accept every connection first and decide after).
//!
//! Each TCP target is sent a request by its port, so a server that waits for
//! its client speaks: 443 a TLS 1.2 ClientHello, 80 and any other port an
//! HTTP/1.0 HEAD, 53 a DNS query behind its length. A UDP target gets one DNS
//! query whatever its port. Only those bytes leave: a random nonce, a random
//! DNS id, the target's own host name, and nothing of the computer's.
//!
//! The requests are built by hand (a few hundred bytes) so the daemon stays
//! one small static binary with no TLS or DNS library; they are in `wire`.

mod wire;

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::sys;

use wire::{
    DNS_ANSWER, describe_tcp, dns_query, is_dns_answer, no_expected_protocol, random_bytes,
    tcp_request,
};

use crate::protocol::{
    DIAGNOSE_ANSWER_MS, DIAGNOSE_CONNECT_MS, DIAGNOSE_TARGETS, DIAGNOSE_TOTAL_MS, PROBE_ANSWER_MS,
    PROBE_CONNECT_MS, PROBE_READ_BYTES, PROBE_TOTAL_MS, ProbeOutcome, ProbeProtocol, ProbeReport,
    ProbeResult, ProbeTarget, ProbeVerdict, parse_target, targets_with,
};

/// How long one target (or `--diagnose` check) may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    /// From the probe's start to a connection (a name's resolution included).
    connect: Duration,
    /// From the request to the answer.
    answer: Duration,
    /// From the probe's start to the end of everything.
    total: Duration,
}

impl Bounds {
    const PROBE: Bounds = Bounds {
        connect: Duration::from_millis(PROBE_CONNECT_MS),
        answer: Duration::from_millis(PROBE_ANSWER_MS),
        total: Duration::from_millis(PROBE_TOTAL_MS),
    };
    const DIAGNOSE: Bounds = Bounds {
        connect: Duration::from_millis(DIAGNOSE_CONNECT_MS),
        answer: Duration::from_millis(DIAGNOSE_ANSWER_MS),
        total: Duration::from_millis(DIAGNOSE_TOTAL_MS),
    };

    /// The longest one target can take from the probe's start.
    fn window(self) -> Duration {
        (self.connect + self.answer).min(self.total)
    }
}

/// How long past the longest window the probe waits for a target's thread to
/// report. Only a name whose resolution hangs (getaddrinfo takes no bound)
/// keeps a thread past its window; the probe reports it and leaves it behind.
const JOIN_SLACK: Duration = Duration::from_millis(500);

/// What a target whose thread never reported reads as.
const STILL_CONNECTING: &str = "no answer within the bound (still connecting)";

/// `computerd probe --connect <target>... [--diagnose]`: print the report as
/// one JSON line; 0 when the probe ran, whatever its targets answered, and 1
/// with words on stderr for a malformed target.
pub fn main(connect: &[String], diagnose: bool) -> i32 {
    let mut targets = Vec::with_capacity(connect.len());
    for s in connect {
        match parse_target(s) {
            Ok(t) => targets.push(t),
            Err(e) => {
                eprintln!("computerd probe: --connect {e}");
                return 1;
            }
        }
    }
    let report = run(&targets, diagnose);
    let line = match serde_json::to_string(&report) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("computerd probe: the report could not be encoded: {e}");
            return 1;
        }
    };
    let mut out = io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        eprintln!("computerd probe: the report could not be written to stdout: {e}");
        return 1;
    }
    0
}

/// Probe every target at once (10 s to connect, 10 s to answer), and with
/// `diagnose` the fixed checks too (3 s and 3 s, 15 s in all), whose results
/// come last and alone make the verdict. Returns within the longest bound
/// plus half a second, whatever the network or the resolver does.
pub fn run(targets: &[ProbeTarget], diagnose: bool) -> ProbeReport {
    let mut jobs: Vec<(ProbeTarget, Bounds)> =
        targets.iter().map(|t| (t.clone(), Bounds::PROBE)).collect();
    let first_check = jobs.len();
    if diagnose {
        jobs.extend(diagnose_targets().map(|t| (t, Bounds::DIAGNOSE)));
    }
    let results = check_all(&jobs, check);
    report(results, diagnose.then_some(first_check))
}

/// The report around `results`; with `verdict_from`, the verdict over the
/// results from that index on (`--diagnose`'s checks).
fn report(results: Vec<ProbeResult>, verdict_from: Option<usize>) -> ProbeReport {
    let verdict = verdict_from.map(|i| ProbeVerdict::of(results.get(i..).unwrap_or_default()));
    ProbeReport {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        kernel: kernel_release(),
        interfaces: interfaces(),
        reached: targets_with(&results, ProbeOutcome::Answered),
        accepted: targets_with(&results, ProbeOutcome::Accepted),
        results,
        verdict,
    }
}

fn diagnose_targets() -> impl Iterator<Item = ProbeTarget> {
    // Every entry parses (a test holds it to that).
    DIAGNOSE_TARGETS.iter().filter_map(|s| parse_target(s).ok())
}

/// The interfaces of this network namespace that are up or hold an address,
/// sorted: `["lo"]` alone under `--own-network`. A tunnel the kernel gives
/// every namespace (tunl0, gre0, sit0...) is down with no address there, and
/// stays so with no CAP_NET_ADMIN; it is named once anything brings it up or
/// addresses it. When the kernel cannot be asked, every interface
/// /proc/self/net/dev names is reported, so the list errs towards more.
pub fn interfaces() -> Vec<String> {
    use nix::net::if_::InterfaceFlags;
    // One netlink dump, in the calling thread's namespace, gives flags and
    // addresses together.
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return sys::interface_names().unwrap_or_default();
    };
    let mut names = BTreeSet::new();
    for a in addrs {
        let addressed = a
            .address
            .as_ref()
            .is_some_and(|s| s.as_sockaddr_in().is_some() || s.as_sockaddr_in6().is_some());
        if addressed || a.flags.contains(InterfaceFlags::IFF_UP) {
            names.insert(a.interface_name);
        }
    }
    names.into_iter().collect()
}

/// The kernel's release, as uname(2) gives it. Read by the system call, not
/// from /proc/sys/kernel/osrelease, which a sandboxed kernel (gVisor) may not
/// carry, and which a provider's check of the runtime depends on.
fn kernel_release() -> String {
    // SAFETY: utsname holds only C char arrays, for which all-zero bytes are
    // a valid value; uname writes into the struct we own for the call.
    let (r, u) = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        let r = libc::uname(&mut u);
        (r, u)
    };
    if r != 0 {
        return format!("unknown (uname: {})", errno_words(Errno::last()));
    }
    // c_char is i8 or u8 by architecture: take each as its byte.
    let bytes: Vec<u8> = u
        .release
        .iter()
        .map(|c| c.to_ne_bytes()[0])
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

type Check = fn(&ProbeTarget, Bounds, Instant) -> ProbeResult;

/// Run `check` for every job at once, each on its own thread, and collect the
/// results in the jobs' order. Waits until the longest window plus
/// [`JOIN_SLACK`]; a thread still running then (a name whose resolution
/// hangs) is left behind and its target reads refused.
fn check_all(jobs: &[(ProbeTarget, Bounds)], check: Check) -> Vec<ProbeResult> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<(usize, ProbeResult)>();
    let mut results: Vec<Option<ProbeResult>> = vec![None; jobs.len()];
    for (i, (target, bounds)) in jobs.iter().enumerate() {
        let tx = tx.clone();
        let job = target.clone();
        let bounds = *bounds;
        let spawned = std::thread::Builder::new()
            .name(format!("probe-{i}"))
            .spawn(move || {
                let _ = tx.send((i, check(&job, bounds, start)));
            });
        if let Err(e) = spawned {
            results[i] = Some(refused(
                target,
                format!("the probe could not start a thread for it: {e}"),
            ));
        }
    }
    drop(tx);
    let longest = jobs
        .iter()
        .map(|(_, b)| b.window())
        .max()
        .unwrap_or_default();
    let join_by = start + longest + JOIN_SLACK;
    while results.iter().any(Option::is_none) {
        let left = join_by.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, r)) => results[i] = Some(r),
            Err(_) => break,
        }
    }
    // Whatever reported in the last instant still counts.
    while let Ok((i, r)) = rx.try_recv() {
        results[i] = Some(r);
    }
    jobs.iter()
        .zip(results)
        .map(|((target, _), r)| r.unwrap_or_else(|| refused(target, STILL_CONNECTING.into())))
        .collect()
}

fn result(
    target: &ProbeTarget,
    outcome: ProbeOutcome,
    bytes: usize,
    detail: String,
) -> ProbeResult {
    ProbeResult {
        target: target.to_string(),
        protocol: target.protocol,
        outcome,
        bytes: bytes as u64,
        detail,
    }
}

fn refused(target: &ProbeTarget, detail: String) -> ProbeResult {
    result(target, ProbeOutcome::Refused, 0, detail)
}

/// One target, on its own thread: resolve, connect, ask, read.
fn check(target: &ProbeTarget, bounds: Bounds, start: Instant) -> ProbeResult {
    let connect_by = start + bounds.connect;
    let answer_cap = start + bounds.window();
    let addrs = match resolve(target) {
        Ok(a) => a,
        Err(detail) => return refused(target, detail),
    };
    if Instant::now() >= connect_by {
        return refused(
            target,
            format!(
                "the name {} took more than {} to resolve",
                target.host,
                secs(bounds.connect)
            ),
        );
    }
    match target.protocol {
        ProbeProtocol::Tcp => tcp(target, &addrs, bounds, connect_by, answer_cap),
        ProbeProtocol::Udp => udp(target, &addrs, bounds, answer_cap),
    }
}

/// The target's addresses: an IP literal as it is, a name through the
/// system's resolver (getaddrinfo), on the target's own thread, so a slow
/// resolver counts against that target's connect bound.
fn resolve(target: &ProbeTarget) -> Result<Vec<SocketAddr>, String> {
    if let Some(ip) = target.ip() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    match (target.host.as_str(), target.port).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() {
                Err(format!("the name {} resolves to no address", target.host))
            } else {
                Ok(addrs)
            }
        }
        Err(e) => Err(format!(
            "the name {} does not resolve ({})",
            target.host,
            io_words(&e)
        )),
    }
}

/// Why the read of an answer ended.
enum End {
    /// The bytes so far say what they are, or fill the read's limit.
    Enough,
    /// The far side closed the connection.
    Closed,
    /// The bound passed.
    Silent,
    /// The read failed (a reset, most often).
    Failed(io::Error),
}

fn tcp(
    target: &ProbeTarget,
    addrs: &[SocketAddr],
    bounds: Bounds,
    connect_by: Instant,
    answer_cap: Instant,
) -> ProbeResult {
    let mut last: Option<io::Error> = None;
    let mut stream = None;
    for addr in addrs {
        let left = connect_by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(addr, left) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(mut stream) = stream else {
        let detail = match last {
            Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                "the connection was refused".to_string()
            }
            Some(e) if e.kind() != io::ErrorKind::TimedOut => {
                format!("no connection ({})", io_words(&e))
            }
            _ => format!("no connection within {}", secs(bounds.connect)),
        };
        return refused(target, detail);
    };

    let (request, dns_id) = tcp_request(target);
    let asked = Instant::now();
    let answer_by = (asked + bounds.answer).min(answer_cap);
    // A server that closes at once may still have spoken first: whatever the
    // write does, read what came back.
    let sent = stream
        .set_write_timeout(Some(at_least_a_ms(
            answer_by.saturating_duration_since(asked),
        )))
        .and_then(|()| stream.write_all(&request));
    let (buf, end) = read_answer(&mut stream, answer_by, dns_id);
    if !buf.is_empty() {
        let detail =
            describe_tcp(&buf, dns_id, true).unwrap_or_else(|| no_expected_protocol(buf.len()));
        return result(target, ProbeOutcome::Answered, buf.len(), detail);
    }
    let mut detail = match end {
        End::Enough | End::Closed => "accepted, then closed with nothing sent back".to_string(),
        End::Silent => format!(
            "accepted and held open; nothing came back within {}",
            secs(answer_by.saturating_duration_since(asked))
        ),
        End::Failed(e) if e.kind() == io::ErrorKind::ConnectionReset => {
            "accepted, then reset with nothing sent back".to_string()
        }
        End::Failed(e) => format!(
            "accepted, then the read failed with nothing sent back ({})",
            io_words(&e)
        ),
    };
    if let Err(e) = sent {
        detail.push_str(&format!(
            "; the request could not be sent ({})",
            io_words(&e)
        ));
    }
    result(target, ProbeOutcome::Accepted, 0, detail)
}

/// Read at most [`PROBE_READ_BYTES`] until the bytes say what they are, the
/// far side closes, or `answer_by` passes.
fn read_answer(stream: &mut TcpStream, answer_by: Instant, dns_id: Option<u16>) -> (Vec<u8>, End) {
    let mut buf = vec![0u8; PROBE_READ_BYTES];
    let mut got = 0;
    let end = loop {
        if got == buf.len() || (got > 0 && describe_tcp(&buf[..got], dns_id, false).is_some()) {
            break End::Enough;
        }
        let left = answer_by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break End::Silent;
        }
        if let Err(e) = stream.set_read_timeout(Some(left)) {
            break End::Failed(e);
        }
        match stream.read(&mut buf[got..]) {
            Ok(0) => break End::Closed,
            Ok(n) => got += n,
            // The clock above decides when the bound has passed.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => break End::Failed(e),
        }
    };
    buf.truncate(got);
    (buf, end)
}

fn udp(
    target: &ProbeTarget,
    addrs: &[SocketAddr],
    bounds: Bounds,
    answer_cap: Instant,
) -> ProbeResult {
    let id = u16::from_be_bytes(random_bytes::<2>());
    let query = dns_query(id);
    let mut last: Option<io::Error> = None;
    let mut socket = None;
    for addr in addrs {
        let local: SocketAddr = if addr.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // Connected, so only the target's datagrams come back, and an ICMP
        // port unreachable comes back as ECONNREFUSED.
        let sent = UdpSocket::bind(local).and_then(|s| {
            s.connect(addr)?;
            s.send(&query)?;
            Ok(s)
        });
        match sent {
            Ok(s) => {
                socket = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(socket) = socket else {
        let why = last.map_or_else(|| "no address".to_string(), |e| io_words(&e));
        return refused(target, format!("the datagram could not be sent ({why})"));
    };
    let asked = Instant::now();
    let answer_by = (asked + bounds.answer).min(answer_cap);
    let mut buf = vec![0u8; PROBE_READ_BYTES];
    loop {
        let left = answer_by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return refused(
                target,
                format!(
                    "no reply within {}",
                    secs(answer_by.saturating_duration_since(asked))
                ),
            );
        }
        if let Err(e) = socket.set_read_timeout(Some(left)) {
            return refused(target, format!("no reply ({})", io_words(&e)));
        }
        match socket.recv(&mut buf) {
            // Any datagram that came back is an answer, the empty one too.
            Ok(n) => {
                let detail = if is_dns_answer(&buf[..n], id) {
                    DNS_ANSWER.to_string()
                } else {
                    "a UDP datagram that is not the DNS answer".to_string()
                };
                return result(target, ProbeOutcome::Answered, n, detail);
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return refused(
                    target,
                    "ICMP port unreachable: the far side refused the datagram".to_string(),
                );
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return refused(target, format!("no reply ({})", io_words(&e))),
        }
    }
}

/// A duration in words: "10 s", "0.3 s".
fn secs(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn at_least_a_ms(d: Duration) -> Duration {
    d.max(Duration::from_millis(1))
}

fn errno_words(e: Errno) -> String {
    e.desc().to_lowercase()
}

/// An io::Error in words: the errno's description when it carries one.
fn io_words(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_words(Errno::from_raw(n)),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Short bounds, so a silent target costs a test a fraction of a second.
    const SHORT: Bounds = Bounds {
        connect: Duration::from_secs(2),
        answer: Duration::from_millis(300),
        total: Duration::from_secs(5),
    };

    fn target(s: &str) -> ProbeTarget {
        parse_target(s).unwrap()
    }

    fn probe(targets: &[ProbeTarget]) -> Vec<ProbeResult> {
        let jobs: Vec<_> = targets.iter().map(|t| (t.clone(), SHORT)).collect();
        check_all(&jobs, check)
    }

    fn probe_one(t: &str) -> ProbeResult {
        probe(&[target(t)]).remove(0)
    }

    fn want(t: &str, outcome: ProbeOutcome, bytes: u64, detail: &str) -> ProbeResult {
        let target = target(t);
        ProbeResult {
            target: target.to_string(),
            protocol: target.protocol,
            outcome,
            bytes,
            detail: detail.into(),
        }
    }

    /// A TCP listener on 127.0.0.1 whose one connection `serve` handles;
    /// the port and what the listener read, once the connection ends.
    fn tcp_server(
        serve: impl FnOnce(&mut TcpStream) -> Vec<u8> + Send + 'static,
    ) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            serve(&mut conn)
        });
        (port, handle)
    }

    /// Read until the blank line that ends an HTTP request (or EOF).
    fn read_request(conn: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => got.push(byte[0]),
                _ => break,
            }
        }
        got
    }

    fn closed_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn a_server_that_speaks_first_answers() {
        let (port, server) = tcp_server(|conn| {
            conn.write_all(b"SSH-2.0-x\r\n").unwrap();
            read_request(conn)
        });
        let t = format!("127.0.0.1:{port}");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Answered,
                11,
                "11 bytes of no expected protocol"
            )
        );
        // Any port but 443 and 53 is sent an HTTP HEAD with the target's host.
        assert_eq!(
            server.join().unwrap(),
            b"HEAD / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        );
    }

    #[test]
    fn an_http_server_answers_with_its_status_line() {
        let (port, server) = tcp_server(|conn| {
            let got = read_request(conn);
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            got
        });
        let t = format!("127.0.0.1:{port}");
        let r = probe_one(&t);
        assert_eq!(r.outcome, ProbeOutcome::Answered, "{r:?}");
        assert_eq!(r.detail, "HTTP status line: HTTP/1.1 200 OK");
        assert!(r.bytes >= 17, "{r:?}");
        let got = server.join().unwrap();
        assert!(got.starts_with(b"HEAD / HTTP/1.0\r\n"), "{got:?}");
        assert_eq!(got, b"HEAD / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    }

    #[test]
    fn a_tls_alert_is_an_answer() {
        let (port, server) = tcp_server(|conn| {
            let got = read_request(conn);
            // fatal (2), handshake_failure (40)
            conn.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])
                .unwrap();
            got
        });
        let t = format!("127.0.0.1:{port}");
        let r = probe_one(&t);
        assert_eq!(r.outcome, ProbeOutcome::Answered, "{r:?}");
        assert_eq!(r.detail, "TLS alert");
        server.join().unwrap();
    }

    #[test]
    fn a_silent_server_held_open_is_accepted_never_reached() {
        let release = Arc::new(AtomicBool::new(false));
        let held = Arc::clone(&release);
        let (port, server) = tcp_server(move |conn| {
            let got = read_request(conn);
            while !held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            got
        });
        let t = format!("127.0.0.1:{port}");
        let results = probe(&[target(&t)]);
        release.store(true, Ordering::SeqCst);
        assert_eq!(
            results,
            [want(
                &t,
                ProbeOutcome::Accepted,
                0,
                "accepted and held open; nothing came back within 0.3 s"
            )]
        );
        server.join().unwrap();
        let report = report(results, None);
        assert_eq!(report.accepted, [t]);
        assert!(report.reached.is_empty());
    }

    #[test]
    fn a_server_that_closes_silently_is_accepted() {
        let (port, server) = tcp_server(|conn| {
            let got = read_request(conn);
            conn.shutdown(std::net::Shutdown::Both).unwrap();
            got
        });
        let t = format!("127.0.0.1:{port}");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Accepted,
                0,
                "accepted, then closed with nothing sent back"
            )
        );
        server.join().unwrap();
    }

    #[test]
    fn a_closed_port_is_refused() {
        let t = format!("127.0.0.1:{}", closed_port());
        assert_eq!(
            probe_one(&t),
            want(&t, ProbeOutcome::Refused, 0, "the connection was refused")
        );
    }

    #[test]
    fn a_name_is_resolved_and_every_address_tried() {
        // localhost may resolve to ::1 first, where nothing listens.
        let (port, server) = tcp_server(|conn| {
            conn.write_all(b"220 smtp\r\n").unwrap();
            read_request(conn)
        });
        let t = format!("localhost:{port}");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Answered,
                10,
                "10 bytes of no expected protocol"
            )
        );
        assert_eq!(
            server.join().unwrap(),
            b"HEAD / HTTP/1.0\r\nHost: localhost\r\n\r\n"
        );
    }

    #[test]
    fn a_name_that_does_not_resolve_is_refused_saying_so() {
        let t = "nothing.invalid:80";
        let r = probe_one(t);
        assert_eq!(r.outcome, ProbeOutcome::Refused, "{r:?}");
        assert!(
            r.detail
                .starts_with("the name nothing.invalid does not resolve (")
                || r.detail == STILL_CONNECTING,
            "{r:?}"
        );
    }

    /// A DNS server on 127.0.0.1 that answers one query with `answer` made
    /// from it; the port and the query it got.
    fn udp_server(
        answer: impl FnOnce(&[u8]) -> Vec<u8> + Send + 'static,
    ) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            socket
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut buf = [0u8; 512];
            let (n, from) = socket.recv_from(&mut buf).unwrap();
            let query = buf[..n].to_vec();
            socket.send_to(&answer(&query), from).unwrap();
            query
        });
        (port, handle)
    }

    #[test]
    fn a_udp_dns_answer_with_the_query_id_is_reached() {
        let (port, server) = udp_server(|query| {
            let mut reply = query.to_vec();
            reply[2] = 0x81; // QR, RD
            reply[3] = 0x80; // RA
            reply
        });
        let t = format!("127.0.0.1:{port}/udp");
        assert_eq!(
            probe_one(&t),
            want(&t, ProbeOutcome::Answered, 29, DNS_ANSWER)
        );
        let query = server.join().unwrap();
        assert_eq!(query.len(), 29);
        assert_eq!(query[2..], dns_query(0)[2..], "{query:?}");
    }

    #[test]
    fn a_udp_datagram_that_is_not_the_answer_still_answers() {
        let (port, server) = udp_server(|query| {
            let mut reply = query.to_vec();
            reply[0] ^= 0xff; // another id
            reply[2] |= 0x80;
            reply
        });
        let t = format!("127.0.0.1:{port}/udp");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Answered,
                29,
                "a UDP datagram that is not the DNS answer"
            )
        );
        server.join().unwrap();

        let (port, server) = udp_server(|_| b"hello".to_vec());
        let t = format!("127.0.0.1:{port}/udp");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Answered,
                5,
                "a UDP datagram that is not the DNS answer"
            )
        );
        server.join().unwrap();
    }

    #[test]
    fn a_udp_port_nobody_listens_on_is_refused() {
        let port = {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap().port()
        };
        let t = format!("127.0.0.1:{port}/udp");
        assert_eq!(
            probe_one(&t),
            want(
                &t,
                ProbeOutcome::Refused,
                0,
                "ICMP port unreachable: the far side refused the datagram"
            )
        );
    }

    #[test]
    fn a_silent_udp_server_is_refused() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let t = format!("127.0.0.1:{}/udp", socket.local_addr().unwrap().port());
        assert_eq!(
            probe_one(&t),
            want(&t, ProbeOutcome::Refused, 0, "no reply within 0.3 s")
        );
        drop(socket);
    }

    #[test]
    fn every_target_runs_at_once_and_keeps_its_order() {
        let release = Arc::new(AtomicBool::new(false));
        let silent_tcp = || {
            let held = Arc::clone(&release);
            tcp_server(move |conn| {
                let got = read_request(conn);
                while !held.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                got
            })
        };
        let (silent_a, server_a) = silent_tcp();
        let (silent_b, server_b) = silent_tcp();
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let targets = [
            format!("127.0.0.1:{silent_a}"),
            format!("127.0.0.1:{}/udp", quiet.local_addr().unwrap().port()),
            format!("127.0.0.1:{}", closed_port()),
            format!("127.0.0.1:{silent_b}"),
        ];
        let bounds = Bounds {
            answer: Duration::from_secs(1),
            ..SHORT
        };
        let jobs: Vec<_> = targets.iter().map(|t| (target(t), bounds)).collect();
        let started = Instant::now();
        let results = check_all(&jobs, check);
        let took = started.elapsed();
        release.store(true, Ordering::SeqCst);
        server_a.join().unwrap();
        server_b.join().unwrap();
        // Three silent targets of 1 s each: at once, not one after another.
        assert!(
            took >= bounds.answer && took < 2 * bounds.answer,
            "{took:?}"
        );
        let outcomes: Vec<_> = results
            .iter()
            .map(|r| (r.target.as_str(), r.outcome))
            .collect();
        assert_eq!(
            outcomes,
            [
                (targets[0].as_str(), ProbeOutcome::Accepted),
                (targets[1].as_str(), ProbeOutcome::Refused),
                (targets[2].as_str(), ProbeOutcome::Refused),
                (targets[3].as_str(), ProbeOutcome::Accepted),
            ]
        );
    }

    #[test]
    fn a_target_whose_thread_hangs_reads_refused_still_connecting_within_the_bound() {
        fn hangs(_: &ProbeTarget, _: Bounds, _: Instant) -> ProbeResult {
            std::thread::sleep(Duration::from_secs(3));
            refused(&target("late.example:1"), "too late to be read".into())
        }
        let bounds = Bounds {
            connect: Duration::from_millis(100),
            answer: Duration::from_millis(100),
            total: Duration::from_secs(15),
        };
        let t = target("hangs.example:443");
        let started = Instant::now();
        let results = check_all(&[(t.clone(), bounds)], hangs);
        let took = started.elapsed();
        assert!(
            took < bounds.window() + JOIN_SLACK + Duration::from_millis(300),
            "{took:?}"
        );
        assert_eq!(
            results,
            [want(
                "hangs.example:443",
                ProbeOutcome::Refused,
                0,
                STILL_CONNECTING
            )]
        );
    }

    #[test]
    fn bounds_are_the_seeds() {
        assert_eq!(Bounds::PROBE.window(), Duration::from_secs(20));
        assert_eq!(Bounds::DIAGNOSE.connect, Duration::from_secs(3));
        assert_eq!(Bounds::DIAGNOSE.answer, Duration::from_secs(3));
        assert_eq!(Bounds::DIAGNOSE.window(), Duration::from_secs(6));
        let capped = Bounds {
            total: Duration::from_secs(4),
            ..Bounds::DIAGNOSE
        };
        assert_eq!(capped.window(), Duration::from_secs(4));
        let checks: Vec<String> = diagnose_targets().map(|t| t.to_string()).collect();
        assert_eq!(checks, DIAGNOSE_TARGETS);
    }

    #[test]
    fn the_verdict_reads_the_diagnose_checks_alone() {
        let r = |t: &str, outcome| want(t, outcome, 0, "");
        let results = vec![
            // A --connect target to the loopback is no egress.
            r("127.0.0.1:22", ProbeOutcome::Answered),
            r("1.1.1.1:443", ProbeOutcome::Accepted),
            r("1.1.1.1:53/udp", ProbeOutcome::Refused),
        ];
        let report = report(results.clone(), Some(1));
        assert_eq!(report.verdict, Some(ProbeVerdict::AcceptedOnly));
        assert_eq!(report.reached, ["127.0.0.1:22"]);
        assert_eq!(report.accepted, ["1.1.1.1:443"]);
        assert_eq!(report.results, results);
        assert_eq!(super::report(results.clone(), None).verdict, None);
        assert_eq!(
            super::report(results.clone(), Some(0)).verdict,
            Some(ProbeVerdict::Egress)
        );
        assert_eq!(
            super::report(results.clone(), Some(2)).verdict,
            Some(ProbeVerdict::None)
        );
        assert_eq!(
            super::report(results, Some(3)).verdict,
            Some(ProbeVerdict::None)
        );
    }

    #[test]
    fn the_report_names_who_ran_the_kernel_and_the_interfaces() {
        let report = run(&[], false);
        assert_eq!(report.uid, nix::unistd::getuid().as_raw());
        assert_eq!(report.gid, nix::unistd::getgid().as_raw());
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(report.kernel, release.trim());
        assert!(report.interfaces.contains(&"lo".to_string()), "{report:?}");
        let mut sorted = report.interfaces.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(report.interfaces, sorted);
        assert!(report.results.is_empty() && report.verdict.is_none());
        // Every interface reported is one the namespace holds.
        let all = sys::interface_names().unwrap();
        assert!(report.interfaces.iter().all(|i| all.contains(i)), "{all:?}");
    }

    use computer_testkit::need;

    #[test]
    fn interfaces_are_those_up_or_addressed_in_a_namespace_of_its_own() {
        if !need(
            "root",
            nix::unistd::geteuid().is_root(),
            "this test needs root (to make a network namespace and interfaces in it)",
        ) {
            return;
        }
        // unshare moves this thread alone, and `ip` started from it runs in
        // its namespace, which ends with the thread.
        let seen = std::thread::spawn(|| -> Result<Vec<Vec<String>>, String> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("unshare(CLONE_NEWNET) failed: {e}"))?;
            let ip = |args: &[&str]| -> Result<(), String> {
                let status = std::process::Command::new("ip")
                    .args(args)
                    .stderr(std::process::Stdio::null())
                    .status()
                    .map_err(|e| format!("ip could not run: {e}"))?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("ip {} failed", args.join(" ")))
                }
            };
            let mut seen = vec![interfaces()];
            ip(&["link", "set", "lo", "up"])?;
            seen.push(interfaces());
            // Down with no address, as the kernel's fallback tunnels are.
            ip(&["link", "add", "pv0", "type", "veth", "peer", "name", "pv1"])?;
            seen.push(interfaces());
            ip(&["link", "set", "pv0", "up"])?;
            seen.push(interfaces());
            ip(&["addr", "add", "10.9.9.9/24", "dev", "pv1"])?;
            seen.push(interfaces());
            Ok(seen)
        })
        .join()
        .unwrap();
        let seen = match seen {
            Ok(seen) => seen,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let want: [&[&str]; 5] = [&[], &["lo"], &["lo"], &["lo", "pv0"], &["lo", "pv0", "pv1"]];
        assert_eq!(seen, want);
    }

    #[test]
    fn main_refuses_a_malformed_target_in_words() {
        assert_eq!(main(&["example.com".into()], false), 1);
    }

    #[test]
    fn durations_read_in_seconds() {
        assert_eq!(secs(Duration::from_secs(10)), "10 s");
        assert_eq!(secs(Duration::from_millis(300)), "0.3 s");
        assert_eq!(secs(Duration::from_millis(2500)), "2.5 s");
    }

    #[test]
    fn the_protocol_of_a_result_is_its_targets() {
        assert_eq!(
            refused(&target("1.1.1.1:53/udp"), String::new()).protocol,
            ProbeProtocol::Udp
        );
    }
}
