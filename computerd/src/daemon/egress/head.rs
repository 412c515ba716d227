//! The proxy's request parsing: an HTTP/1 request head and the request
//! target it names, and SOCKS5's greeting and request. Programs send these
//! bytes, so every read is bounded and every failure is a value.

use std::net::IpAddr;

use crate::protocol::egress::{Host, parse_host};

/// The most bytes of a request head (line and headers) read.
pub const MAX_HEAD: usize = 16 * 1024;
/// The longest request line or header line.
pub const MAX_LINE: usize = 8 * 1024;
/// The most header lines in a head.
pub const MAX_HEADERS: usize = 100;

/// A request head, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The first header of this name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a head was refused: the HTTP status it gets and the words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadError {
    pub status: u16,
    pub words: String,
}

fn bad(words: impl Into<String>) -> HeadError {
    HeadError {
        status: 400,
        words: words.into(),
    }
}

/// Where the head ends in `buf`: the length through the blank line, if
/// it is there.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some(i + 2);
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some(i + 3);
            }
        }
        i += 1;
    }
    None
}

/// Parse a whole head (through its blank line).
pub fn parse_head(buf: &[u8]) -> Result<Head, HeadError> {
    if buf.len() > MAX_HEAD {
        return Err(HeadError {
            status: 431,
            words: format!("the request head is over {MAX_HEAD} bytes"),
        });
    }
    let text = std::str::from_utf8(buf).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or("");
    if line.len() > MAX_LINE {
        return Err(HeadError {
            status: 414,
            words: format!("the request line is over {MAX_LINE} bytes"),
        });
    }
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not METHOD TARGET HTTP/1.x"));
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(bad("the method is not a token"));
    }
    if target.is_empty() || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(
            "the request target is empty or holds a control or space",
        ));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HeadError {
            status: 505,
            words: "only HTTP/1.0 and HTTP/1.1 are taken".into(),
        });
    }
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            break;
        }
        if l.len() > MAX_LINE {
            return Err(HeadError {
                status: 431,
                words: format!("a header line is over {MAX_LINE} bytes"),
            });
        }
        if l.starts_with(' ') || l.starts_with('\t') {
            return Err(bad("a folded header line (obs-fold) is not taken"));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("a header line has no colon"));
        };
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(bad("a header name is not a token"));
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err(bad("a header value holds a control character"));
        }
        headers.push((name.to_string(), value.to_string()));
        if headers.len() > MAX_HEADERS {
            return Err(HeadError {
                status: 431,
                words: format!("the request has over {MAX_HEADERS} headers"),
            });
        }
    }
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    })
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A host and port as a request names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// As written (for the log and the words).
    pub host_text: String,
    pub host: Host,
    pub port: u16,
}

/// `host[:port]` (`[v6][:port]`), the port `default` when left out.
pub fn parse_authority(s: &str, default: Option<u16>) -> Result<Authority, String> {
    if s.contains('@') {
        return Err("a user name in the host (user@host) is not taken".into());
    }
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => {
                let rest = &s[end + 1..];
                let port = match rest.strip_prefix(':') {
                    Some(p) => Some(p),
                    None if rest.is_empty() => None,
                    None => return Err(format!("{s} is not [address]:port")),
                };
                (&s[..=end], port)
            }
            None => return Err(format!("{s} is not [address]:port")),
        }
    } else if s.matches(':').count() > 1 {
        return Err(format!(
            "{s}: an IPv6 address is written in brackets, [address]:port"
        ));
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => match p.parse::<u16>() {
            Ok(n) if !p.starts_with('+') && n != 0 => n,
            _ => return Err(format!("{p:?} is not a port")),
        },
        None => default.ok_or_else(|| format!("{s} names no port"))?,
    };
    let parsed = parse_host(host)?;
    Ok(Authority {
        host_text: host.to_string(),
        host: parsed,
        port,
    })
}

/// An absolute-form target, `http://authority/path`: the authority and the
/// origin-form path (`/` when none).
pub fn parse_absolute(target: &str) -> Result<(Authority, String), String> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err(
            "the target is not an absolute URI (http://host/path): this is a proxy; a TLS host is reached with CONNECT".into(),
        );
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "the scheme {scheme} is not taken: plain HTTP is http://host/path, and TLS goes through CONNECT"
        ));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = parse_authority(&rest[..end], Some(80))?;
    let mut path = rest[end..].to_string();
    if let Some(hash) = path.find('#') {
        path.truncate(hash);
    }
    if path.is_empty() {
        path = "/".into();
    } else if path.starts_with('?') {
        path.insert(0, '/');
    }
    Ok((authority, path))
}

/// Whether two authorities name the same host and port (a name by its
/// lower-case form, an address by its value).
pub fn same_host(a: &Authority, b: &Authority) -> bool {
    let ip = |h: &Host| match h {
        Host::Ip(ip) => Some(crate::protocol::egress::canonical(*ip)),
        Host::Name(_) => None,
    };
    a.port == b.port
        && match (ip(&a.host), ip(&b.host)) {
            (Some(x), Some(y)) => x == y,
            _ => a.host == b.host,
        }
}

/// A SOCKS5 request's command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocksCommand {
    Connect,
    Bind,
    UdpAssociate,
    Other(u8),
}

/// A SOCKS5 request: `VER CMD RSV ATYP ADDR PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocksRequest {
    pub command: SocksCommand,
    /// The host as sent: a name (`ATYP 3`) or an address (1, 4).
    pub host_text: String,
    pub port: u16,
}

/// The bytes a SOCKS5 request takes, if `buf` holds enough to know.
/// `Err` for a request that can never be one.
pub fn socks_request_len(buf: &[u8]) -> Result<Option<usize>, String> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 5 {
        return Err(format!("SOCKS version {} is not 5", buf[0]));
    }
    let addr = match buf[3] {
        1 => 4,
        4 => 16,
        3 => 1 + buf[4] as usize,
        t => return Err(format!("SOCKS address type {t} is unknown")),
    };
    let need = 4 + addr + 2;
    Ok((buf.len() >= need).then_some(need))
}

/// Parse a whole SOCKS5 request (see [`socks_request_len`]).
pub fn parse_socks_request(buf: &[u8]) -> Result<SocksRequest, String> {
    let Some(len) = socks_request_len(buf)? else {
        return Err("the SOCKS request is cut short".into());
    };
    let buf = &buf[..len];
    let command = match buf[1] {
        1 => SocksCommand::Connect,
        2 => SocksCommand::Bind,
        3 => SocksCommand::UdpAssociate,
        c => SocksCommand::Other(c),
    };
    let port = u16::from_be_bytes([buf[len - 2], buf[len - 1]]);
    let host_text = match buf[3] {
        1 => {
            let a: [u8; 4] = buf[4..8].try_into().map_err(|_| "short address")?;
            IpAddr::from(a).to_string()
        }
        4 => {
            let a: [u8; 16] = buf[4..20].try_into().map_err(|_| "short address")?;
            format!("[{}]", std::net::Ipv6Addr::from(a))
        }
        _ => {
            let name = &buf[5..len - 2];
            std::str::from_utf8(name)
                .map_err(|_| "the SOCKS host name is not UTF-8".to_string())?
                .to_string()
        }
    };
    Ok(SocksRequest {
        command,
        host_text,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_read_whole_and_bounded() {
        let raw = b"GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\nX-A:  b \r\n\r\nbody";
        let end = head_end(raw).unwrap();
        assert_eq!(&raw[end..], b"body");
        let h = parse_head(&raw[..end]).unwrap();
        assert_eq!(
            h,
            Head {
                method: "GET".into(),
                target: "http://pypi.org/simple/".into(),
                version: "HTTP/1.1".into(),
                headers: vec![
                    ("Host".into(), "pypi.org".into()),
                    ("X-A".into(), "b".into())
                ],
            }
        );
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_LINE));
        assert_eq!(parse_head(long.as_bytes()).unwrap_err().status, 414);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("H{i}: v\r\n")).collect();
        let h = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(parse_head(h.as_bytes()).unwrap_err().status, 431);
        for bad in [
            "GET\r\n\r\n",
            "GET / HTTP/2\r\n\r\n",
            "GET / HTTP/1.1\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn targets_and_authorities_are_read_strictly() {
        let (a, path) = parse_absolute("http://PyPI.org/simple?x=1#frag").unwrap();
        assert_eq!(
            (a.host, a.port, path.as_str()),
            (Host::Name("pypi.org".into()), 80, "/simple?x=1")
        );
        let (a, path) = parse_absolute("http://[::1]:8080").unwrap();
        assert_eq!((a.port, path.as_str()), (8080, "/"));
        assert!(parse_absolute("https://pypi.org/").is_err());
        assert!(parse_absolute("/simple").is_err());
        assert!(parse_absolute("http://user@pypi.org/").is_err());
        let c = parse_authority("pypi.org:443", None).unwrap();
        assert_eq!(c.port, 443);
        assert!(parse_authority("pypi.org", None).is_err());
        assert!(parse_authority("::1:443", None).is_err());
        assert!(parse_authority("pypi.org:0", None).is_err());
        assert!(parse_authority("pypi.org:99999", None).is_err());
        let x = parse_authority("127.0.0.1:80", None).unwrap();
        let y = parse_authority("2130706433", Some(80)).unwrap();
        assert!(same_host(&x, &y));
        let z = parse_authority("pypi.org.", Some(80)).unwrap();
        assert!(same_host(
            &z,
            &parse_authority("PYPI.org:80", None).unwrap()
        ));
        assert!(!same_host(
            &z,
            &parse_authority("pypi.org:8080", None).unwrap()
        ));
    }

    #[test]
    fn socks_requests_are_read_by_their_address_type() {
        let name = [
            5, 1, 0, 3, 8, b'p', b'y', b'p', b'i', b'.', b'o', b'r', b'g', 1, 187,
        ];
        assert_eq!(socks_request_len(&name[..6]).unwrap(), None);
        assert_eq!(
            parse_socks_request(&name).unwrap(),
            SocksRequest {
                command: SocksCommand::Connect,
                host_text: "pypi.org".into(),
                port: 443
            }
        );
        let bind = [5, 2, 0, 1, 10, 0, 0, 1, 0, 80];
        let r = parse_socks_request(&bind).unwrap();
        assert_eq!(
            (r.command, r.host_text.as_str()),
            (SocksCommand::Bind, "10.0.0.1")
        );
        assert!(socks_request_len(&[4, 1, 0, 1, 0]).is_err());
        assert!(socks_request_len(&[5, 1, 0, 9, 0]).is_err());
    }
}
