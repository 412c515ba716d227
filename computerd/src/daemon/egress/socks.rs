//! The proxy's SOCKS5: the greeting (no authentication), one CONNECT
//! request, its reply, then the tunnel; BIND and UDP ASSOCIATE refused.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::handoff::Client;
use super::head::{self, SocksCommand};
use super::*;

fn socks_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

pub(super) async fn socks(mut client: Client, proxy: &Proxy) {
    let until = tokio::time::Instant::now() + HEAD_WAIT;
    let Some((req, rest)) = socks_request(&mut client, until).await else {
        return;
    };
    let refused = match req.command {
        SocksCommand::Connect => None,
        SocksCommand::Bind => Some(
            "SOCKS BIND is refused: this proxy carries outgoing TCP connections (CONNECT) to listed hosts only",
        ),
        SocksCommand::UdpAssociate => Some(
            "SOCKS UDP ASSOCIATE is refused: this proxy carries outgoing TCP connections (CONNECT) to listed hosts only; UDP reaches nothing",
        ),
        SocksCommand::Other(_) => Some("an unknown SOCKS command is refused"),
    };
    if let Some(words) = refused {
        let r = Refusal::new(403, 7, "socks-command", words.into());
        proxy.log_refuse(&req.host_text, req.port, &r);
        let _ = socks_refuse(&mut client, &r).await;
        return;
    }
    let upstream = match open(proxy, &req.host_text, req.port).await {
        Ok(u) => u,
        Err(r) => {
            let _ = socks_refuse(&mut client, &r).await;
            return;
        }
    };
    if client.write_all(&socks_reply(0)).await.is_err() {
        return;
    }
    relay(client, upstream, rest).await;
}

/// A SOCKS5 exchange up to its request, its first byte (5) read: the
/// greeting, the method chosen (no authentication; a greeting without it
/// is told none is acceptable), then the request, read by `until`, and
/// the bytes sent past it. None when it ended, or could not be one (a
/// request that cannot be is answered with its reply code first).
pub(super) async fn socks_request(
    client: &mut Client,
    until: tokio::time::Instant,
) -> Option<(head::SocksRequest, Vec<u8>)> {
    let mut buf = vec![5u8];
    // The greeting: VER NMETHODS METHODS.
    while buf.len() < 2 || buf.len() < 2 + buf[1] as usize {
        read_more(client, &mut buf, until).await?;
    }
    let methods = &buf[2..2 + buf[1] as usize];
    if !methods.contains(&0) {
        let _ = client.write_all(&[5, 0xff]).await;
        return None;
    }
    let mut buf = buf.split_off(2 + buf[1] as usize);
    if client.write_all(&[5, 0]).await.is_err() {
        return None;
    }
    let len = loop {
        match head::socks_request_len(&buf) {
            Ok(Some(n)) => break n,
            Ok(None) => read_more(client, &mut buf, until).await?,
            Err(why) => {
                // 8, address type not supported, for an ATYP of none of
                // 1, 3 and 4; else 1, a general failure.
                let code = if buf.len() > 3 && buf[0] == 5 { 8 } else { 1 };
                tracing::info!("egress refuse rule=socks socks={code} {why}");
                let _ = client.write_all(&socks_reply(code)).await;
                return None;
            }
        }
    };
    let rest = buf.split_off(len);
    match head::parse_socks_request(&buf) {
        Ok(r) => Some((r, rest)),
        Err(_) => {
            let _ = client.write_all(&socks_reply(1)).await;
            None
        }
    }
}

/// A SOCKS refusal: the reply code, then the words on a line of their own
/// (a client reads the reply; a person reading the bytes sees why).
pub(super) async fn socks_refuse(client: &mut Client, r: &Refusal) -> std::io::Result<()> {
    let mut out = socks_reply(r.socks).to_vec();
    out.extend_from_slice(format!("{}\n", r.words).as_bytes());
    client.write_all(&out).await
}

async fn read_more(
    client: &mut Client,
    buf: &mut Vec<u8>,
    until: tokio::time::Instant,
) -> Option<()> {
    if buf.len() > 600 {
        return None;
    }
    let mut chunk = [0u8; 512];
    match tokio::time::timeout_at(until, client.read(&mut chunk)).await {
        Ok(Ok(n)) if n > 0 => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
        _ => None,
    }
}
