//! What the probe sends and how it knows an answer: a TLS 1.2 ClientHello,
//! a DNS query, an HTTP/1.0 HEAD, built by hand, and the bytes that come back.

use std::hash::{BuildHasher, Hasher};
use std::io::Read;

use crate::protocol::ProbeTarget;

/// What a DNS answer with the query's id reads as.
pub(super) const DNS_ANSWER: &str = "DNS response with the query's id";

/// The first bytes sent to a TCP target, by its port, and the DNS id when it
/// is a DNS query.
pub(super) fn tcp_request(target: &ProbeTarget) -> (Vec<u8>, Option<u16>) {
    match target.port {
        443 => {
            // An IP literal is no server name (RFC 6066, section 3).
            let sni = target.ip().is_none().then_some(target.host.as_str());
            (client_hello(sni, &random_bytes::<32>()), None)
        }
        53 => {
            let id = u16::from_be_bytes(random_bytes::<2>());
            let query = dns_query(id);
            let mut framed = Vec::with_capacity(2 + query.len());
            put_u16(&mut framed, query.len());
            framed.extend_from_slice(&query);
            (framed, Some(id))
        }
        // 80, and any other port: HTTP is the most common protocol where the
        // client speaks first; a server that speaks first answers anything.
        _ => (http_head(target), None),
    }
}

/// `HEAD / HTTP/1.0` with the target's host.
pub(super) fn http_head(target: &ProbeTarget) -> Vec<u8> {
    let host = if target.host.contains(':') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    format!("HEAD / HTTP/1.0\r\nHost: {host}\r\n\r\n").into_bytes()
}

/// TLS 1.2 cipher suites a server of today accepts: ECDHE with AES-GCM and
/// ChaCha20, then plain RSA key exchange for an old one.
const CIPHER_SUITES: &[u16] = &[
    0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0x009c, 0x009d, 0x002f, 0x0035,
];
/// x25519, secp256r1, secp384r1.
const GROUPS: &[u16] = &[0x001d, 0x0017, 0x0018];
/// ECDSA, RSA-PSS and RSA PKCS#1 with SHA-256/384/512, and RSA with SHA-1.
const SIGNATURE_ALGORITHMS: &[u16] = &[
    0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0201,
];

/// A TLS 1.2 ClientHello record: enough for any TLS server to answer with a
/// ServerHello or an alert. `server_name` becomes the SNI extension.
pub(super) fn client_hello(server_name: Option<&str>, random: &[u8; 32]) -> Vec<u8> {
    let mut extensions = Vec::new();
    if let Some(name) = server_name {
        let mut list = vec![0u8]; // name_type host_name
        put_u16(&mut list, name.len());
        list.extend_from_slice(name.as_bytes());
        let mut body = Vec::new();
        put_u16(&mut body, list.len());
        body.extend_from_slice(&list);
        put_extension(&mut extensions, 0x0000, &body);
    }
    put_extension(&mut extensions, 0x000a, &u16_list(GROUPS));
    put_extension(&mut extensions, 0x000b, &[1, 0]); // ec_point_formats: uncompressed
    put_extension(&mut extensions, 0x000d, &u16_list(SIGNATURE_ALGORITHMS));
    put_extension(&mut extensions, 0x0017, &[]); // extended_master_secret
    put_extension(&mut extensions, 0xff01, &[0]); // renegotiation_info, initial

    let mut hello = vec![0x03, 0x03]; // client_version TLS 1.2
    hello.extend_from_slice(random);
    hello.push(0); // no session id
    hello.extend_from_slice(&u16_list(CIPHER_SUITES));
    hello.extend_from_slice(&[1, 0]); // compression: null only
    put_u16(&mut hello, extensions.len());
    hello.extend_from_slice(&extensions);

    let mut handshake = vec![1]; // client_hello
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);

    // Record version 1.0, as every client sends its first record.
    let mut record = vec![0x16, 0x03, 0x01];
    put_u16(&mut record, handshake.len());
    record.extend_from_slice(&handshake);
    record
}

fn put_extension(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    put_u16(out, body.len());
    out.extend_from_slice(body);
}

/// A list of u16s behind its 2-byte length in bytes.
fn u16_list(items: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 * items.len());
    put_u16(&mut out, 2 * items.len());
    for i in items {
        out.extend_from_slice(&i.to_be_bytes());
    }
    out
}

/// A length as 2 bytes; every length here is a few hundred bytes at most.
fn put_u16(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u16).to_be_bytes());
}

/// A recursive DNS query for example.com's A records.
pub(super) fn dns_query(id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(29);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00]); // RD: recursion desired
    q.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // one question
    for label in ["example", "com"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&[0, 1, 0, 1]); // QTYPE A, QCLASS IN
    q
}

/// A DNS message with the query's id and the response bit.
pub(super) fn is_dns_answer(msg: &[u8], id: u16) -> bool {
    msg.len() >= 3 && msg[..2] == id.to_be_bytes() && msg[2] & 0x80 != 0
}

enum Match {
    Yes(String),
    Maybe,
    No,
}

/// What the bytes from a TCP target are, or None while more bytes could still
/// change that (`done` says no more will come).
pub(super) fn describe_tcp(buf: &[u8], dns_id: Option<u16>, done: bool) -> Option<String> {
    let dns = match (dns_id, buf.get(2..)) {
        (None, _) => Match::No,
        (Some(_), None) => Match::Maybe,
        (Some(id), Some(msg)) if msg.len() < 3 => {
            if msg.len() < 2 || msg[..2] == id.to_be_bytes() {
                Match::Maybe
            } else {
                Match::No
            }
        }
        (Some(id), Some(msg)) if is_dns_answer(msg, id) => Match::Yes(DNS_ANSWER.into()),
        (Some(_), Some(_)) => Match::No,
    };
    let mut maybe = false;
    for m in [dns, tls_match(buf), http_match(buf, done)] {
        match m {
            Match::Yes(d) => return Some(d),
            Match::Maybe => maybe = true,
            Match::No => {}
        }
    }
    (done || !maybe).then(|| no_expected_protocol(buf.len()))
}

fn tls_match(buf: &[u8]) -> Match {
    match buf {
        [0x15 | 0x16] => Match::Maybe,
        [0x15, 0x03, ..] => Match::Yes("TLS alert".into()),
        [0x16, 0x03, _, _, _, 2, ..] => Match::Yes("TLS ServerHello".into()),
        [0x16, 0x03, rest @ ..] if rest.len() < 4 => Match::Maybe,
        _ => Match::No,
    }
}

/// The most of an HTTP status line a detail carries.
const STATUS_LINE_CHARS: usize = 128;

fn http_match(buf: &[u8], done: bool) -> Match {
    const PREFIX: &[u8] = b"HTTP/1.";
    if buf.len() < PREFIX.len() {
        return if PREFIX.starts_with(buf) {
            Match::Maybe
        } else {
            Match::No
        };
    }
    if !buf.starts_with(PREFIX) {
        return Match::No;
    }
    let end = buf.iter().position(|&b| b == b'\r' || b == b'\n');
    if end.is_none() && !done && buf.len() < STATUS_LINE_CHARS {
        return Match::Maybe;
    }
    let line = &buf[..end.unwrap_or(buf.len()).min(STATUS_LINE_CHARS)];
    // Words only: anything but printable ASCII reads as '?'.
    let line: String = line
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    Match::Yes(format!("HTTP status line: {line}"))
}

pub(super) fn no_expected_protocol(n: usize) -> String {
    format!("{n} bytes of no expected protocol")
}

/// Random bytes from the kernel (/dev/urandom); where that cannot be read,
/// from std's hasher keys, which std draws from getrandom(2). Only nonces and
/// DNS ids use them: nothing is encrypted with them.
pub(super) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut out));
    if read.is_err() {
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            let word = h.finish().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_target;

    fn target(s: &str) -> ProbeTarget {
        parse_target(s).unwrap()
    }

    /// The extensions of a ClientHello record, as (type, body), after
    /// checking every length on the way.
    fn hello_extensions(record: &[u8], random: &[u8; 32]) -> Vec<(u16, Vec<u8>)> {
        let u16_at = |i: usize| u16::from_be_bytes([record[i], record[i + 1]]) as usize;
        assert_eq!(record[0], 0x16, "handshake record");
        assert_eq!(record[1..3], [0x03, 0x01], "record version");
        assert_eq!(u16_at(3), record.len() - 5, "record length");
        assert_eq!(record[5], 1, "client_hello");
        let hs_len = u32::from_be_bytes([0, record[6], record[7], record[8]]) as usize;
        assert_eq!(hs_len, record.len() - 9, "handshake length");
        assert_eq!(record[9..11], [0x03, 0x03], "client_version TLS 1.2");
        assert_eq!(&record[11..43], random);
        assert_eq!(record[43], 0, "no session id");
        let suites = u16_at(44);
        assert!(suites > 0 && suites % 2 == 0);
        let mut i = 46 + suites;
        assert_eq!(record[i..i + 2], [1, 0], "null compression");
        i += 2;
        assert_eq!(u16_at(i), record.len() - i - 2, "extensions length");
        i += 2;
        let mut out = Vec::new();
        while i < record.len() {
            let kind = u16_at(i) as u16;
            let len = u16_at(i + 2);
            out.push((kind, record[i + 4..i + 4 + len].to_vec()));
            i += 4 + len;
        }
        assert_eq!(i, record.len());
        out
    }

    #[test]
    fn a_client_hello_names_a_dns_name_and_never_an_ip_literal() {
        let random = [7u8; 32];
        for (sni, want_name) in [(None, None), (Some("example.com"), Some("example.com"))] {
            let ext = hello_extensions(&client_hello(sni, &random), &random);
            let kinds: Vec<u16> = ext.iter().map(|(k, _)| *k).collect();
            let server_name = ext.iter().find(|(k, _)| *k == 0x0000);
            match want_name {
                None => assert!(server_name.is_none(), "{kinds:x?}"),
                Some(name) => {
                    let (_, body) = server_name.unwrap();
                    let mut want = ((name.len() + 3) as u16).to_be_bytes().to_vec();
                    want.push(0);
                    want.extend_from_slice(&(name.len() as u16).to_be_bytes());
                    want.extend_from_slice(name.as_bytes());
                    assert_eq!(body, &want);
                }
            }
            for needed in [0x000a, 0x000b, 0x000d] {
                assert!(kinds.contains(&needed), "{kinds:x?}");
            }
        }

        // By target: an IP literal, v4 or v6, gets no SNI; a name does.
        for (t, name) in [
            ("1.1.1.1:443", None),
            ("[2606:4700:4700::1111]:443", None),
            ("one.one.one.one:443", Some("one.one.one.one")),
        ] {
            let (request, dns_id) = tcp_request(&target(t));
            assert_eq!(dns_id, None);
            let random: [u8; 32] = request[11..43].try_into().unwrap();
            let ext = hello_extensions(&request, &random);
            let sni = ext
                .iter()
                .find(|(k, _)| *k == 0)
                .map(|(_, body)| String::from_utf8(body[5..].to_vec()).unwrap());
            assert_eq!(sni.as_deref(), name, "{t}");
        }
    }

    #[test]
    fn each_client_hello_has_a_fresh_nonce() {
        let (a, _) = tcp_request(&target("1.1.1.1:443"));
        let (b, _) = tcp_request(&target("1.1.1.1:443"));
        assert_ne!(a[11..43], b[11..43]);
        assert_eq!(a[..11], b[..11]);
        assert_eq!(a[43..], b[43..]);
    }

    #[test]
    fn the_dns_query_asks_recursively_for_example_com_a() {
        let q = dns_query(0xbeef);
        let want: Vec<u8> = [
            &[0xbe, 0xef][..],         // id
            &[0x01, 0x00],             // flags: RD only (a query, not a response)
            &[0, 1, 0, 0, 0, 0, 0, 0], // QDCOUNT 1
            b"\x07example\x03com\x00", // QNAME
            &[0, 1],                   // QTYPE A
            &[0, 1],                   // QCLASS IN
        ]
        .concat();
        assert_eq!(q, want);

        // Over TCP (port 53): the same behind its 2-byte length, a random id.
        let (framed, id) = tcp_request(&target("1.1.1.1:53"));
        let id = id.unwrap();
        assert_eq!(framed[..2], [0, 29]);
        assert_eq!(framed[2..], dns_query(id));
    }

    #[test]
    fn port_80_and_any_other_get_http_head_with_the_host() {
        for (t, want) in [
            (
                "example.com:80",
                "HEAD / HTTP/1.0\r\nHost: example.com\r\n\r\n",
            ),
            ("10.0.0.1:8080", "HEAD / HTTP/1.0\r\nHost: 10.0.0.1\r\n\r\n"),
            ("[::1]:22", "HEAD / HTTP/1.0\r\nHost: [::1]\r\n\r\n"),
        ] {
            let (request, dns_id) = tcp_request(&target(t));
            assert_eq!(String::from_utf8(request).unwrap(), want);
            assert_eq!(dns_id, None);
        }
    }

    #[test]
    fn answers_are_described_by_what_came_back() {
        let hello = [0x16, 0x03, 0x03, 0x00, 0x31, 0x02, 0x00];
        // DNS over TCP: length, then the id and the response bit.
        let dns = [0x00, 0x2d, 0xbe, 0xef, 0x81, 0x80];
        let query_echo = [0x00, 0x1d, 0xbe, 0xef, 0x01, 0x00];
        let no_protocol = |n: usize| Some(format!("{n} bytes of no expected protocol"));
        /// What came back, the DNS id asked, no more will come, the words.
        type Case<'a> = (&'a [u8], Option<u16>, bool, Option<String>);
        let cases: [Case; 14] = [
            (&hello, None, false, Some("TLS ServerHello".into())),
            // Too few bytes to tell: wait for more, unless no more will come.
            (&hello[..3], None, false, None),
            (&hello[..3], None, true, no_protocol(3)),
            (&[0x15, 0x03, 0x01], None, false, Some("TLS alert".into())),
            (
                &[0x16, 0x03, 0x03, 0x00, 0x04, 0x0b],
                None,
                false,
                no_protocol(6),
            ),
            (b"HTTP/1.1 301 Mo", None, false, None),
            (
                b"HTTP/1.1 301 Moved\r\nLocation: x",
                None,
                false,
                Some("HTTP status line: HTTP/1.1 301 Moved".into()),
            ),
            (
                b"HTTP/1.1 301 Mo",
                None,
                true,
                Some("HTTP status line: HTTP/1.1 301 Mo".into()),
            ),
            (
                b"HTTP/1.0 200 \x01\xff\n",
                None,
                false,
                Some("HTTP status line: HTTP/1.0 200 ??".into()),
            ),
            (b"SSH-2.0-x\r\n", None, false, no_protocol(11)),
            (&dns, Some(0xbeef), false, Some(DNS_ANSWER.into())),
            (&dns[..4], Some(0xbeef), false, None),
            (&dns, Some(0x1234), false, no_protocol(6)),
            (&query_echo, Some(0xbeef), false, no_protocol(6)),
        ];
        for (buf, id, done, want) in cases {
            assert_eq!(describe_tcp(buf, id, done), want, "{buf:?} {id:?} {done}");
        }

        assert!(is_dns_answer(&[0xbe, 0xef, 0x81], 0xbeef));
        assert!(!is_dns_answer(&[0xbe, 0xef, 0x01], 0xbeef));
        assert!(!is_dns_answer(&[0xbe, 0xee, 0x81], 0xbeef));
        assert!(!is_dns_answer(&[0xbe, 0xef], 0xbeef));
    }
}
