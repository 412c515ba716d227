//! `computerd init --egress <socket>`: inside the computer, init listens on
//! [`PROXY_PORT`] of its own loopback and hands each connection it accepts
//! to the egress proxy over the proxy's socket ([`super::handoff`]): the
//! proxy then serves the program on its own TCP socket, and init carries no
//! byte. Every program is given the proxy variables ([`proxy_env`]) naming
//! that port. A program that ignores them reaches nothing (the computer has
//! no route); one that dials the socket itself meets the same proxy.
//!
//! `--egress-tcp IP:PORT` is the TCP form, for a proxy in another network
//! namespace (a pod of its own on Kubernetes, where no descriptor can
//! cross): init dials the proxy for each connection and copies the bytes
//! both ways; the variables are the same.

use crate::daemon::setup::{SetupError, Step};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use tokio::net::{TcpListener, TcpStream, UnixStream};

/// Where init relays to: the proxy's socket (the connection handed over),
/// or its TCP address (the bytes copied).
#[derive(Clone, Debug)]
pub enum To {
    Socket(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for To {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            To::Socket(p) => write!(f, "socket {}", p.display()),
            To::Tcp(a) => write!(f, "address {a}"),
        }
    }
}

/// The port init listens on, on the computer's loopback.
pub const PROXY_PORT: u16 = 3128;

/// The variables every program gets when init relays to a proxy.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut out = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        out.push((name.to_string(), url.clone()));
        out.push((name.to_ascii_lowercase(), url.clone()));
    }
    let none = "localhost,127.0.0.1,::1".to_string();
    out.push(("NO_PROXY".into(), none.clone()));
    out.push(("no_proxy".into(), none));
    out
}

/// Listen on 127.0.0.1:[`PROXY_PORT`] (before the runtime starts, so init
/// refuses to start when it cannot).
pub fn listen() -> Result<std::net::TcpListener, SetupError> {
    let at = SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT));
    let l = std::net::TcpListener::bind(at).flag_step("--egress", format!("listen on {at}"))?;
    l.set_nonblocking(true)
        .flag_step("--egress", format!("listen on {at}"))?;
    Ok(l)
}

/// Hand (or relay) every connection to the proxy at `to` until init ends.
pub async fn serve(listener: std::net::TcpListener, to: To) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("--egress: the relay cannot listen: {e}");
            return;
        }
    };
    loop {
        let Ok((mut tcp, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let to = to.clone();
        super::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let handed = match &to {
                To::Socket(socket) => match UnixStream::connect(socket).await {
                    Ok(unix) => super::handoff::send(&unix, &tcp).await,
                    Err(e) => Err(e),
                },
                To::Tcp(at) => {
                    match tokio::time::timeout(super::DIAL_WAIT, TcpStream::connect(at)).await {
                        Ok(Ok(mut proxy)) => {
                            let _ = proxy.set_nodelay(true);
                            // The proxy's own bounds end an idle tunnel.
                            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut proxy).await;
                            return;
                        }
                        Ok(Err(e)) => Err(e),
                        Err(_) => Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no answer within {:?}", super::DIAL_WAIT),
                        )),
                    }
                }
            };
            if let Err(e) = handed {
                tracing::warn!("--egress: the proxy's {to} does not answer: {e}");
                let words = format!(
                    "the computer's egress proxy does not answer ({e}): its network reaches nothing now"
                );
                let reply = super::http_reply(502, &words);
                let _ = tokio::io::AsyncWriteExt::write_all(&mut tcp, &reply).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The relay on an address of its own (init's is 127.0.0.1:3128).
    fn relay_to(to: To) -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let at = l.local_addr().unwrap();
        tokio::spawn(serve(l, to));
        at
    }

    #[tokio::test]
    async fn the_tcp_form_copies_both_ways_and_a_silent_proxy_is_a_502_in_words() {
        // A proxy that answers what it is sent, upper-cased.
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_at = proxy.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = proxy.accept().await.unwrap();
            let mut b = [0u8; 5];
            s.read_exact(&mut b).await.unwrap();
            s.write_all(&b.to_ascii_uppercase()).await.unwrap();
        });
        let mut c = TcpStream::connect(relay_to(To::Tcp(proxy_at)))
            .await
            .unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"HELLO");

        // Nothing listens there: the program is told so.
        let gone = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut c = TcpStream::connect(relay_to(To::Tcp(gone))).await.unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).await.unwrap();
        assert!(got.starts_with("HTTP/1.1 502"), "{got}");
        assert!(
            got.contains("the computer's egress proxy does not answer"),
            "{got}"
        );
    }
}
