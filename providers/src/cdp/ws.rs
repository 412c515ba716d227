//! CDP over a WebSocket: a vendor's browser, or a Chromium's
//! `--remote-debugging-port`. The URL may be a secret (a vendor's signed
//! URL): it is used to dial and then dropped, and no word of a failure
//! carries it.

use std::sync::Arc;
use std::time::Duration;

use computerd::protocol::limits;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::conn::CdpConn;
use crate::types::{ErrorCode, ProviderError, Result};

/// How long dialling (TCP, TLS and the upgrade) may take.
pub const DIAL_WAIT: Duration = Duration::from_secs(20);

/// A failure to dial, in words that never hold the URL.
fn dial_error(e: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Http(r) => format!("the CDP endpoint answered HTTP {}", r.status().as_u16()),
        E::Io(io) => format!("the CDP endpoint could not be reached: {}", io.kind()),
        E::Url(_) => "the CDP URL is not a ws:// or wss:// URL this client can dial".into(),
        E::Tls(_) => "the CDP endpoint's TLS handshake failed".into(),
        E::Protocol(p) => format!("the CDP endpoint broke the WebSocket handshake: {p}"),
        _ => "the CDP endpoint refused the WebSocket".into(),
    }
}

/// Dial `url` and carry `conn` over it until either side ends.
pub async fn connect(url: &str) -> Result<Arc<CdpConn>> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(limits::CDP_MESSAGE_MAX_BYTES))
        .max_frame_size(Some(limits::CDP_MESSAGE_MAX_BYTES));
    let dial = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let (socket, _) = match tokio::time::timeout(DIAL_WAIT, dial).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(ProviderError::new(ErrorCode::Unreachable, dial_error(&e)));
        }
        Err(_) => {
            return Err(ProviderError::new(
                ErrorCode::Unreachable,
                format!(
                    "the CDP endpoint did not open a WebSocket within {} s",
                    DIAL_WAIT.as_secs()
                ),
            ));
        }
    };
    let (conn, mut outbox) = CdpConn::new();
    let (mut sink, mut stream) = socket.split();
    let writer = Arc::clone(&conn);
    tokio::spawn(async move {
        while let Some(text) = writer.outgoing(&mut outbox).await {
            if let Err(e) = sink.send(Message::text(text)).await {
                writer.end(format!("sending to the browser failed: {}", send_words(&e)));
                return;
            }
        }
        let _ = sink.close().await;
    });
    let reader = Arc::clone(&conn);
    tokio::spawn(async move {
        let why = loop {
            let next = tokio::select! {
                _ = reader.stopped() => return,
                n = stream.next() => n,
            };
            match next {
                Some(Ok(Message::Text(t))) => reader.on_message(t.as_bytes()),
                Some(Ok(Message::Binary(b))) => reader.on_message(&b),
                Some(Ok(Message::Close(_))) | None => {
                    break "the browser closed its CDP WebSocket".to_string();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    break format!("the browser's CDP WebSocket failed: {}", send_words(&e));
                }
            }
        };
        reader.end(why);
    });
    Ok(conn)
}

fn send_words(e: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Io(io) => io.kind().to_string(),
        E::Capacity(c) => c.to_string(),
        E::ConnectionClosed | E::AlreadyClosed => "the WebSocket is closed".into(),
        E::Protocol(p) => p.to_string(),
        _ => "a WebSocket error".into(),
    }
}
