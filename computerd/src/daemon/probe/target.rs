//! One target, on its own thread: resolve, connect, ask, read, and say what
//! came back.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Instant;

use crate::protocol::{PROBE_READ_BYTES, ProbeOutcome, ProbeProtocol, ProbeResult, ProbeTarget};

use super::wire::{
    DNS_ANSWER, describe_tcp, dns_query, is_dns_answer, no_expected_protocol, random_bytes,
    tcp_request,
};
use super::{Bounds, at_least_a_ms, io_words, refused, result, secs};

/// One target, on its own thread: resolve, connect, ask, read.
pub(super) fn check(target: &ProbeTarget, bounds: Bounds, start: Instant) -> ProbeResult {
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

pub(super) fn tcp(
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
            Err(e) if read_again(&e) => {}
            Err(e) => break End::Failed(e),
        }
    };
    buf.truncate(got);
    (buf, end)
}

/// A read that failed only for now (a signal, or its timeout before the
/// bound the caller's clock keeps): read again.
fn read_again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
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
            Err(e) if read_again(&e) => {}
            Err(e) => return refused(target, format!("no reply ({})", io_words(&e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::daemon::probe::tests::*;
    use crate::daemon::probe::{STILL_CONNECTING, report};

    #[test]
    fn a_server_that_speaks_first_answers() {
        assert_a_speaking_server_answers("127.0.0.1", b"SSH-2.0-x\r\n", 11);
    }

    /// `t` is probed and answered: `bytes` came back, said as `detail`.
    fn assert_answered(t: &str, bytes: u64, detail: &str) {
        assert_eq!(probe_one(t), want(t, ProbeOutcome::Answered, bytes, detail));
    }

    /// A server on `host` that speaks `banner` first is answered with its
    /// `bytes`, and was sent what any port but 443 and 53 is: an HTTP HEAD
    /// with the target's host.
    fn assert_a_speaking_server_answers(host: &str, banner: &'static [u8], bytes: u64) {
        let (port, server) = speaking_server(banner);
        let t = format!("{host}:{port}");
        assert_answered(&t, bytes, &format!("{bytes} bytes of no expected protocol"));
        assert_eq!(
            server.join().unwrap(),
            format!("HEAD / HTTP/1.0\r\nHost: {host}\r\n\r\n").into_bytes()
        );
    }

    #[test]
    fn an_http_server_answers_with_its_status_line() {
        let (port, server) = replying_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        let t = format!("127.0.0.1:{port}");
        let r = probe_one(&t);
        assert_eq!(r.outcome, ProbeOutcome::Answered, "{r:?}");
        assert_eq!(r.detail, "HTTP status line: HTTP/1.1 200 OK");
        assert!(r.bytes >= 17, "{r:?}");
        let got = server.join().unwrap();
        assert!(got.starts_with(b"HEAD / HTTP/1.0\r\n"), "{got:?}");
        assert_eq!(got, b"HEAD / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    }

    /// A server that reads the probe's request, answers `reply`, and
    /// gives back the request.
    fn replying_server(reply: &'static [u8]) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
        tcp_server(move |conn| {
            let got = read_request(conn);
            conn.write_all(reply).unwrap();
            got
        })
    }

    #[test]
    fn a_tls_alert_is_an_answer() {
        // fatal (2), handshake_failure (40)
        let (port, server) = replying_server(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
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
        assert_a_speaking_server_answers("localhost", b"220 smtp\r\n", 10);
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
        assert_answered(&t, 29, DNS_ANSWER);
        let query = server.join().unwrap();
        assert_eq!(query.len(), 29);
        assert_eq!(query[2..], dns_query(0)[2..], "{query:?}");
    }

    #[test]
    fn a_udp_datagram_that_is_not_the_answer_still_answers() {
        let another_id: fn(&[u8]) -> Vec<u8> = |query| {
            let mut reply = query.to_vec();
            reply[0] ^= 0xff; // another id
            reply[2] |= 0x80;
            reply
        };
        let hello: fn(&[u8]) -> Vec<u8> = |_| b"hello".to_vec();
        for (reply, bytes) in [(another_id, 29), (hello, 5)] {
            let (port, server) = udp_server(reply);
            let t = format!("127.0.0.1:{port}/udp");
            // The expected result names the case: its bytes.
            assert_answered(&t, bytes, "a UDP datagram that is not the DNS answer");
            server.join().unwrap();
        }
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
}
