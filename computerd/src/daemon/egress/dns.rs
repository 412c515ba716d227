//! The proxy's own stub resolver: A and AAAA over UDP to the resolvers of
//! /etc/resolv.conf (or `--resolver`). Its own, so a name is asked exactly
//! once per request and every answer is seen (no NSS module, no cache, no
//! search domain), and a static binary needs no libc resolver.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// How long one query waits for its answer.
pub const QUERY_WAIT: Duration = Duration::from_secs(3);
/// Tries per resolver.
pub const TRIES: usize = 2;

/// The nameservers of a resolv.conf text, on port 53.
pub fn resolvers_of(conf: &str) -> Vec<SocketAddr> {
    conf.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("nameserver"))
                .then(|| w.next())
                .flatten()
                .and_then(|a| a.split('%').next()?.parse::<IpAddr>().ok())
        })
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// A query for `name` of type `qtype` (1 A, 28 AAAA), recursion desired.
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(name.len() + 18);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    q
}

/// Skip a (possibly compressed) name at `at`; the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    for _ in 0..128 {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2).filter(|e| *e <= msg.len()),
            l if l & 0xc0 == 0 => at += 1 + l as usize,
            _ => return None,
        }
    }
    None
}

/// The answer to query `id`: its A and AAAA records (empty for a name
/// with none), or why it is no answer.
pub fn parse_answer(msg: &[u8], id: u16) -> Result<Vec<IpAddr>, String> {
    if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id || msg[2] & 0x80 == 0 {
        return Err("a reply that is not the answer to the query".into());
    }
    let rcode = msg[3] & 0x0f;
    match rcode {
        0 => {}
        3 => return Ok(Vec::new()),
        c => return Err(format!("the resolver answered with error code {c}")),
    }
    let qd = u16::from_be_bytes([msg[4], msg[5]]) as usize;
    let an = u16::from_be_bytes([msg[6], msg[7]]) as usize;
    let mut at = 12;
    for _ in 0..qd {
        at = skip_name(msg, at).ok_or("a cut question")? + 4;
    }
    let mut out = Vec::new();
    for _ in 0..an {
        at = skip_name(msg, at).ok_or("a cut answer")?;
        let rr = msg.get(at..at + 10).ok_or("a cut answer")?;
        let kind = u16::from_be_bytes([rr[0], rr[1]]);
        let class = u16::from_be_bytes([rr[2], rr[3]]);
        let len = u16::from_be_bytes([rr[8], rr[9]]) as usize;
        let data = msg.get(at + 10..at + 10 + len).ok_or("a cut answer")?;
        at += 10 + len;
        match (kind, class, len) {
            (1, 1, 4) => out.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (28, 1, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                out.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn random_id() -> u16 {
    use std::io::Read;
    let mut b = [0u8; 2];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u8(0);
        return h.finish() as u16;
    }
    u16::from_be_bytes(b)
}

async fn ask(server: SocketAddr, name: &str, qtype: u16) -> Result<Vec<IpAddr>, String> {
    let local: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = tokio::net::UdpSocket::bind(local)
        .await
        .map_err(|e| format!("no UDP socket for the lookup ({e})"))?;
    sock.connect(server)
        .await
        .map_err(|e| format!("the resolver {server} cannot be reached ({e})"))?;
    let mut last = String::new();
    for _ in 0..TRIES {
        let id = random_id();
        sock.send(&query(id, name, qtype))
            .await
            .map_err(|e| format!("the resolver {server} cannot be reached ({e})"))?;
        let until = tokio::time::Instant::now() + QUERY_WAIT;
        let mut buf = [0u8; 1500];
        loop {
            match tokio::time::timeout_at(until, sock.recv(&mut buf)).await {
                Err(_) => {
                    last = format!("the resolver {server} did not answer within {QUERY_WAIT:?}");
                    break;
                }
                Ok(Err(e)) => {
                    last = format!("the resolver {server} cannot be reached ({e})");
                    break;
                }
                // A reply to another id (a late one, a forgery) is not ours.
                Ok(Ok(n)) => match parse_answer(&buf[..n], id) {
                    Ok(a) => return Ok(a),
                    Err(e) if buf[..n].get(..2) == Some(&id.to_be_bytes()[..]) => return Err(e),
                    Err(_) => continue,
                },
            }
        }
    }
    Err(last)
}

/// Every A and AAAA answer for `name`, asked once of the first resolver
/// that answers. Empty: the name has no address.
pub async fn resolve(servers: &[SocketAddr], name: &str) -> Result<Vec<IpAddr>, String> {
    let mut last = "no resolver is configured (/etc/resolv.conf names none)".to_string();
    for s in servers {
        // Both at once: a resolver a network away answers each in a round
        // trip, and the request waits for both.
        let (a, aaaa) = tokio::join!(ask(*s, name, 1), ask(*s, name, 28));
        match (a, aaaa) {
            (Ok(mut a), Ok(b)) => {
                a.extend(b);
                return Ok(a);
            }
            (Ok(a), Err(_)) | (Err(_), Ok(a)) if !a.is_empty() => return Ok(a),
            (Err(e), _) | (_, Err(e)) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_gives_its_nameservers() {
        let conf =
            "# x\nsearch corp\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\nnameserver bad\n";
        assert_eq!(
            resolvers_of(conf),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[fe80::1]:53".parse().unwrap()
            ]
        );
    }

    #[test]
    fn answers_give_every_address_and_skip_the_rest() {
        let q = query(7, "a.test", 1);
        let mut msg = q.clone();
        msg[2] |= 0x80;
        msg[7] = 3;
        // CNAME (skipped), then A and AAAA, names compressed.
        msg.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 12]);
        msg.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1]);
        msg.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
        msg.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        assert_eq!(
            parse_answer(&msg, 7).unwrap(),
            vec![
                "10.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert!(parse_answer(&msg, 8).is_err());
        assert!(parse_answer(&msg[..msg.len() - 3], 7).is_err());
    }
}
