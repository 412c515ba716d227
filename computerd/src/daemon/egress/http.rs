//! The proxy's plain HTTP: an absolute-URI request (or CONNECT) read and
//! checked, the one request sent upstream with `Connection: close`, and
//! HTTP's refusals.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::handoff::Client;
use super::head::{self, Authority};
use super::*;

/// The reply for a refused HTTP request: its status and the words.
pub fn http_reply(status: u16, words: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let body = format!("{status} {words}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Egress-Refused: {status}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub(super) async fn http(mut client: Client, first: u8, proxy: &Proxy) {
    let mut buf = Vec::with_capacity(4096);
    buf.push(first);
    let until = tokio::time::Instant::now() + HEAD_WAIT;
    let end = loop {
        if let Some(end) = head::head_end(&buf) {
            break end;
        }
        if buf.len() > head::MAX_HEAD {
            let words = format!("the request head is over {} bytes", head::MAX_HEAD);
            tracing::info!("egress refuse rule=head-size");
            refuse_http(&mut client, 431, &words).await;
            return;
        }
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(until, client.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {
                let words = format!("the request head did not come within {HEAD_WAIT:?}");
                refuse_http(&mut client, 408, &words).await;
                return;
            }
        }
    };
    let rest = buf.split_off(end);
    let parsed = head::parse_head(&buf)
        .map_err(|e| ("head", e))
        .and_then(|h| {
            let framing = body::framing(&h).map_err(|e| ("framing", e))?;
            Ok((h, framing))
        });
    let (h, framing) = match parsed {
        Ok(x) => x,
        Err((rule, e)) => {
            tracing::info!("egress refuse rule={rule} status={}", e.status);
            refuse_http(&mut client, e.status, &e.words).await;
            return;
        }
    };
    if h.method.eq_ignore_ascii_case("CONNECT") {
        let auth = match head::parse_authority(&h.target, None) {
            Ok(a) => a,
            Err(why) => {
                let words = format!("CONNECT {}: {why} (CONNECT host:port)", h.target);
                refuse_http(&mut client, 400, &words).await;
                return;
            }
        };
        let upstream = match open(proxy, &auth.host_text, auth.port).await {
            Ok(u) => u,
            Err(r) => {
                refuse_http(&mut client, r.status, &r.words).await;
                return;
            }
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        relay(client, upstream, rest).await;
        return;
    }
    let (auth, path) = match head::parse_absolute(&h.target) {
        Ok(x) => x,
        Err(why) => {
            tracing::info!("egress refuse rule=target");
            refuse_http(&mut client, 400, &why).await;
            return;
        }
    };
    if let Some(r) = check_plain(&h, &auth) {
        proxy.log_refuse(&auth.host_text, auth.port, &r);
        refuse_http(&mut client, r.status, &r.words).await;
        return;
    }
    let mut upstream = match open(proxy, &auth.host_text, auth.port).await {
        Ok(u) => u,
        Err(r) => {
            refuse_http(&mut client, r.status, &r.words).await;
            return;
        }
    };
    let mut out = format!("{} {path} {}\r\n", h.method, h.version);
    let mut has_host = false;
    for (n, v) in &h.headers {
        let l = n.to_ascii_lowercase();
        if l.starts_with("proxy-") || l == "connection" || l == "keep-alive" || l == "te" {
            continue;
        }
        has_host |= l == "host";
        out.push_str(n);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    if !has_host {
        out.push_str(&format!("Host: {}\r\n", authority_text(&auth)));
    }
    out.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(out.as_bytes()).await.is_err() {
        return;
    }
    body::carry_one(client, upstream, rest, framing).await;
}

/// Send a refusal and end the connection: the program's unread bytes
/// (a head past its bound) are drained a little first, so the reply is
/// read rather than lost to a reset.
pub(super) async fn refuse_http(client: &mut Client, status: u16, words: &str) {
    if client.write_all(&http_reply(status, words)).await.is_err() {
        return;
    }
    let _ = client.shutdown().await;
    drain(client).await;
}

/// Read a little of what the program still sends before the connection is
/// dropped, so what it was sent is read rather than lost to a reset.
pub(super) async fn drain(client: &mut Client) {
    let mut sink = [0u8; 4096];
    let until = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut left = 256 * 1024;
    while left > 0 {
        match tokio::time::timeout_at(until, client.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => left -= n.min(left),
            _ => break,
        }
    }
}

fn authority_text(a: &Authority) -> String {
    if a.port == 80 {
        a.host.to_string()
    } else {
        format!("{}:{}", a.host, a.port)
    }
}

/// What a plain-HTTP request may not do: name another host in `Host`
/// than on its request line, or ask for an upgrade.
fn check_plain(h: &head::Head, auth: &Authority) -> Option<Refusal> {
    let hosts: Vec<&str> = h.headers_named("host").collect();
    if hosts.len() > 1 {
        return Some(Refusal::new(
            400,
            2,
            "host-header",
            "the request has more than one Host header".into(),
        ));
    }
    if let Some(v) = hosts.first() {
        let same = head::parse_authority(v, Some(80))
            .map(|b| head::same_host(auth, &b))
            .unwrap_or(false);
        if !same {
            return Some(Refusal::new(
                403,
                2,
                "host-header",
                format!(
                    "the Host header names {}, another host than the request line's {}: a request reaches only the host its request line names, so send Host: {}",
                    printable(v),
                    authority_text(auth),
                    authority_text(auth)
                ),
            ));
        }
    }
    if h.header("upgrade").is_some() {
        return Some(Refusal::new(
            403,
            2,
            "upgrade",
            "an HTTP upgrade is not carried over plain HTTP: reach the host over TLS (CONNECT, wss://, https://)".into(),
        ));
    }
    None
}
