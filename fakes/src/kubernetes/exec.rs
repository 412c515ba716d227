//! `pods/exec` over WebSocket, as the API server relays it from the
//! kubelet. The rules, with their sources:
//!
//! - The request: GET (or POST) `…/pods/{name}/exec?command=…` with one
//!   `command` per argv word, `stdin`, `stdout`, `stderr`, `tty` and
//!   `container` (core/v1 `PodExecOptions`). A pod not `Running` answers
//!   400 before the upgrade (the API server's "container not found" /
//!   "pod does not have a host assigned").
//! - The subprotocol: the client offers a list in
//!   `Sec-WebSocket-Protocol`; the first the server knows is chosen, and
//!   the fake knows `v5.channel.k8s.io` and `v4.channel.k8s.io`
//!   (apimachinery pkg/util/httpstream/wsstream/conn.go `handshake`;
//!   remotecommand/constants.go). None known: 400 before the upgrade.
//! - Framing: every message is binary, its first byte the channel: 0
//!   stdin (client to server), 1 stdout, 2 stderr, 3 error (the `Status`),
//!   4 resize (client to server, a JSON `{Width, Height}`: the fake has no
//!   tty and reads it only to drop it) (wsstream/conn.go, "channel
//!   protocol"). Once open, the server sends one message of the channel
//!   byte alone on stdout, which clients skip (conn.go writes an empty
//!   message to signal the stream is open).
//! - v5 adds close: the message `[255, n]` closes channel `n`; `[255, 0]`
//!   is the end of stdin (conn.go, `remotecommand.StreamClose`, v5 only).
//!   On v4 the client's only way to end stdin is to close the socket.
//! - The end: when the command ends, its output is flushed, then channel
//!   3 carries a `metav1.Status`: `{"status":"Success"}` for exit 0;
//!   else `status: Failure`, `reason: NonZeroExitCode`, `message:
//!   "command terminated with non-zero exit code: …"` and `details.causes
//!   [{"reason": "ExitCode", "message": "<code>"}]` (kubelet
//!   cri/streaming/remotecommand/httpstream.go `v4WriteStatusFunc`;
//!   client-go tools/remotecommand/v4.go `errorDecoderV4` reads the code
//!   back from there). Then the server closes the socket.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::pod::user_of;
use super::{Shared, gate, lock, not_found, status};
use crate::vendor_box::{Chunk, Cmd, VendorBox};

pub const V5: &str = "v5.channel.k8s.io";
pub const V4: &str = "v4.channel.k8s.io";
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
pub const CLOSE: u8 = 255;

/// The `Status` channel 3 carries for a command that ended with `code`.
pub fn end_status(code: i64, argv: &[String]) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command {argv:?}, exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The first offered subprotocol the fake knows.
fn negotiate(offered: &str) -> Option<&'static str> {
    offered
        .split(',')
        .map(str::trim)
        .find_map(|p| [V5, V4].into_iter().find(|k| *k == p))
}

pub(super) async fn exec(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    mut req: Request,
) -> Response {
    if let Some(r) = gate(&s, req.headers()) {
        return r;
    }
    let mut argv = Vec::new();
    let mut flags = BTreeMap::new();
    for (k, v) in form_urlencoded::parse(q.unwrap_or_default().as_bytes()) {
        if k == "command" {
            argv.push(v.into_owned());
        } else {
            flags.insert(k.into_owned(), v.into_owned());
        }
    }
    let yes = |k: &str| flags.get(k).is_some_and(|v| v == "true" || v == "1");
    if argv.is_empty() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "you must specify at least 1 command",
        );
    }
    if yes("tty") {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the fake has no tty: ask with tty=false",
        );
    }
    let (boxed, user) = {
        let pods = lock(&s.pods);
        let Some(p) = pods.get(&(ns, name.clone())) else {
            return not_found("pods", &name);
        };
        match (&p.boxed, p.object["status"]["phase"].as_str()) {
            (Some(b), Some("Running")) => (Arc::clone(b), user_of(&p.object)),
            (_, phase) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!(
                        "unable to upgrade connection: pod {name} is {}, not Running",
                        phase.unwrap_or("Pending")
                    ),
                );
            }
        }
    };
    let offered = req
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(protocol) = negotiate(offered) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!("requested protocol(s) are not supported: {offered}; supported: {V5}, {V4}"),
        );
    };
    let key = req
        .headers()
        .get("sec-websocket-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
    let (Some(key), Some(upgrade)) = (key, upgrade) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "pods/exec needs a WebSocket upgrade",
        );
    };
    let cmd = Cmd {
        argv,
        user: Some(user),
        ..Default::default()
    };
    let stdin = yes("stdin");
    let stop = s.stop.clone();
    tokio::spawn(async move {
        let Ok(up) = upgrade.await else { return };
        let ws =
            WebSocketStream::from_raw_socket(hyper_util::rt::TokioIo::new(up), Role::Server, None)
                .await;
        tokio::select! {
            _ = relay(ws, boxed, cmd, stdin, protocol == V5) => {}
            _ = stop.cancelled() => {}
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-protocol", protocol)
        .header(
            "sec-websocket-accept",
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        )
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn framed(channel: u8, bytes: &[u8]) -> Message {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.push(channel);
    v.extend_from_slice(bytes);
    Message::binary(v)
}

/// Run `cmd` in the box and relay it over the socket until it ends.
async fn relay<S>(ws: WebSocketStream<S>, boxed: Arc<VendorBox>, cmd: Cmd, stdin: bool, v5: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut tx, mut rx) = ws.split();
    let mut a = match boxed.attach(&cmd, stdin).await {
        Ok(a) => a,
        Err(e) => {
            let st = json!({"metadata": {}, "status": "Failure", "reason": "InternalError", "message": e.0});
            let _ = tx.send(framed(ERROR, st.to_string().as_bytes())).await;
            let _ = tx.close().await;
            return;
        }
    };
    if tx.send(framed(STDOUT, &[])).await.is_err() {
        return;
    }
    let mut input = a.input.take();
    // The client's side: stdin bytes, v5's close, resize (dropped).
    let reading = async move {
        while let Some(Ok(m)) = rx.next().await {
            let Message::Binary(b) = m else {
                if matches!(m, Message::Close(_)) {
                    break;
                }
                continue;
            };
            match b.first().copied() {
                Some(STDIN) => {
                    if let Some(i) = input.as_mut()
                        && i.write_all(&b[1..]).await.is_err()
                    {
                        input = None;
                    }
                }
                Some(CLOSE) if v5 && b.get(1) == Some(&STDIN) => {
                    if let Some(mut i) = input.take() {
                        let _ = i.shutdown().await;
                    }
                }
                _ => {}
            }
        }
        // The socket closed: on v4 the end of stdin.
        if let Some(mut i) = input.take() {
            let _ = i.shutdown().await;
        }
    };
    let reader = tokio::spawn(reading);
    while let Some(c) = a.output.next().await {
        let m = match c {
            Chunk::Stdout(b) => framed(STDOUT, &b),
            Chunk::Stderr(b) => framed(STDERR, &b),
        };
        if tx.send(m).await.is_err() {
            reader.abort();
            let _ = boxed.signal(a.pid, "KILL").await;
            return;
        }
    }
    let code = boxed.exit_code(&a.exec).await.unwrap_or(-1);
    let st = end_status(code, &cmd.argv);
    let _ = tx.send(framed(ERROR, st.to_string().as_bytes())).await;
    let _ = tx.close().await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_offered_protocol_the_fake_knows_is_chosen() {
        assert_eq!(negotiate("v5.channel.k8s.io, v4.channel.k8s.io"), Some(V5));
        assert_eq!(negotiate("v4.channel.k8s.io,v5.channel.k8s.io"), Some(V4));
        assert_eq!(negotiate("base64.channel.k8s.io"), None);
    }

    #[test]
    fn a_failed_command_carries_its_exit_code_where_clients_read_it() {
        let argv = vec!["false".to_string()];
        assert_eq!(
            end_status(0, &argv),
            json!({"metadata": {}, "status": "Success"})
        );
        let st = end_status(3, &argv);
        assert_eq!(st["reason"], "NonZeroExitCode");
        assert_eq!(
            st["details"]["causes"],
            json!([{"reason": "ExitCode", "message": "3"}])
        );
    }
}
