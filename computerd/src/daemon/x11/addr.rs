//! Where DISPLAY points, and whether it is in this computer: the unix
//! socket, or TCP to a loopback address. Any other host is refused before
//! anything is sent to it, so no cookie of this computer goes elsewhere.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use crate::protocol::RpcError;

/// A display in this computer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub display: u16,
    pub screen: usize,
    pub how: Via,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// The X11 unix sockets' directory.
pub const SOCKET_DIR: &str = "/tmp/.X11-unix";

/// DISPLAY as `[host]:display[.screen]`, where host is empty or `unix` (the
/// socket), or `localhost` or a loopback address (TCP port 6000 + display).
pub fn parse(name: &str) -> Result<Target, RpcError> {
    let bad = |why: &str| {
        RpcError::unsupported(format!(
            "DISPLAY {name:?} {why}; computerd drives only a display in this computer: \":N\" (its unix socket) or \"localhost:N\""
        ))
    };
    let Some(colon) = name.rfind(':') else {
        return Err(bad("has no \":N\""));
    };
    let (host, rest) = (&name[..colon], &name[colon + 1..]);
    let (num, screen) = match rest.split_once('.') {
        Some((d, s)) => (d, Some(s)),
        None => (rest, None),
    };
    let display: u16 = num
        .parse()
        .ok()
        .filter(|d: &u16| *d <= 59_535)
        .ok_or_else(|| bad("has no display number after its colon"))?;
    let screen: usize = match screen {
        Some(s) => s
            .parse()
            .map_err(|_| bad("has a screen that is not a number"))?,
        None => 0,
    };
    let port = 6000 + display;
    let how = match host {
        "" | "unix" => Via::Unix(PathBuf::from(format!("{SOCKET_DIR}/X{display}"))),
        "localhost" => Via::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
        h => {
            let h = h
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(h);
            if let Ok(ip) = h.parse::<Ipv4Addr>()
                && ip.is_loopback()
            {
                Via::Tcp(SocketAddr::from((ip, port)))
            } else if let Ok(ip) = h.parse::<Ipv6Addr>()
                && ip.is_loopback()
            {
                Via::Tcp(SocketAddr::from((ip, port)))
            } else {
                return Err(bad(&format!(
                    "names the host {h:?}, which is not this computer"
                )));
            }
        }
    };
    Ok(Target {
        display,
        screen,
        how,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_displays_parse_and_others_are_refused() {
        let t = parse(":7").unwrap();
        assert_eq!((t.display, t.screen), (7, 0));
        assert_eq!(t.how, Via::Unix("/tmp/.X11-unix/X7".into()));
        assert_eq!(parse("unix:3.1").unwrap().screen, 1);
        assert_eq!(
            parse("localhost:2").unwrap().how,
            Via::Tcp("127.0.0.1:6002".parse().unwrap())
        );
        assert_eq!(
            parse("[::1]:0").unwrap().how,
            Via::Tcp("[::1]:6000".parse().unwrap())
        );
        assert!(matches!(parse("127.0.0.2:1").unwrap().how, Via::Tcp(_)));
        for bad in [
            "example.com:0",
            "10.0.0.1:0",
            "otherhost:0.0",
            "0",
            ":x",
            "[2001:db8::1]:0",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.message.contains("only a display in this computer"),
                "{bad}: {}",
                e.message
            );
        }
        assert!(
            parse("example.com:0")
                .unwrap_err()
                .message
                .contains("\"example.com\"")
        );
    }
}
