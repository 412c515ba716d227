//! The byte stream a [`DaemonClient`] needs, made of a session command's
//! two one-way halves (vendor-apis.md section 1, "Stream mechanics"):
//!
//! - what the client writes goes, whole line by whole line, one call
//!   after another, to `POST …/command/{cid}/input` (the toolbox appends a
//!   newline when one is missing, daemon/pkg/session/input.go:47-71);
//! - what the client reads is the command's stdout from the log WebSocket
//!   (`follow=true`, `X-Daytona-Split-Output: true`), demuxed by
//!   [`Split`]; stderr goes to the log at debug.
//!
//! The log is a file the toolbox replays from its first byte on every
//! connection (daemon/pkg/session/log.go:43-110), so the reader counts
//! the bytes it has taken and skips that many after a reconnect. A
//! connection that closes is followed by a read of the command: one that
//! has exited has said all (the toolbox closes ~1 s after its exit code
//! appears); one still running is followed again.
//!
//! The log is line-oriented text (NULs lost, a partial last line given a
//! newline), so no raw bytes frame may cross it: the hello reply's
//! `bytesFrames` is taken out, and the client then sends and takes every
//! byte as base64 inside its JSON. A line that is a request (a toolbox
//! that echoes input despite `suppressInputEcho`) is dropped: computerd
//! sends none.

use std::sync::Arc;
use std::time::Duration;

use computerd::client::DaemonClient;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use super::api::Toolbox;
use super::split::{Split, Which};
use crate::types::{ProviderError, Result};

/// The most one protocol line may be, and a little for its envelope.
const LINE_MAX: usize = computerd::protocol::limits::MAX_LINE_BYTES as usize + 64 * 1024;
/// How long one dial of the log WebSocket may take.
const DIAL_WAIT: Duration = Duration::from_secs(20);
/// Connections in a row that fail to open or bring nothing new before the
/// stream is given up.
const IDLE_RECONNECTS: u32 = 5;

/// A bridge's command: where its halves go.
#[derive(Clone, Debug)]
pub struct Command {
    pub session: String,
    pub command: String,
}

/// The two halves of the running command `cmd` of `toolbox`, as the
/// reader and writer of one byte stream. Dropping the writer (a client's
/// close), the command's end, or `stop` ends both and deletes the
/// command's session, which ends the command and nothing else.
pub fn open(
    toolbox: Arc<Toolbox>,
    cmd: Command,
    stop: CancellationToken,
) -> (DuplexStream, DuplexStream) {
    let (client_read, ours_write) = tokio::io::duplex(256 * 1024);
    let (ours_read, client_write) = tokio::io::duplex(256 * 1024);
    tokio::spawn(output(
        Arc::clone(&toolbox),
        cmd.clone(),
        ours_write,
        stop.clone(),
    ));
    tokio::spawn(input(
        Arc::clone(&toolbox),
        cmd.clone(),
        ours_read,
        stop.clone(),
    ));
    tokio::spawn(async move {
        stop.cancelled().await;
        // A fresh token: the session is ended even after the stop.
        let own = CancellationToken::new();
        let end = toolbox.end_session(&cmd.session, &own);
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(15), end).await {
            tracing::info!(error = %e.message, "the Daytona bridge's session could not be ended");
        }
    });
    (client_read, client_write)
}

/// A client over [`open`]'s halves.
pub fn client(toolbox: Arc<Toolbox>, cmd: Command, stop: CancellationToken) -> DaemonClient {
    let (read, write) = open(toolbox, cmd, stop);
    DaemonClient::from_parts(read, write)
}

/// The input half: whole lines, one POST after another. Ends (and so
/// closes the client's writes) when a POST fails: a 410 is a command gone.
async fn input(toolbox: Arc<Toolbox>, cmd: Command, from: DuplexStream, stop: CancellationToken) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut bounded = (&mut from).take(LINE_MAX as u64 + 1);
        let read = tokio::select! {
            r = bounded.read_until(b'\n', &mut line) => r,
            _ = stop.cancelled() => return,
        };
        match read {
            Ok(0) | Err(_) => {
                stop.cancel();
                return;
            }
            Ok(_) if line.len() > LINE_MAX => {
                tracing::warn!(
                    "a line to the Daytona bridge was longer than the protocol allows; closing"
                );
                stop.cancel();
                return;
            }
            Ok(_) => {}
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            tracing::warn!("a line to the Daytona bridge was not UTF-8; closing");
            stop.cancel();
            return;
        };
        if let Err(e) = toolbox.input(&cmd.session, &cmd.command, text, &stop).await {
            tracing::info!(error = %e.message, "the Daytona bridge's input ended");
            stop.cancel();
            return;
        }
    }
}

/// What the output half does with one stdout line.
fn filter_line(line: &mut Vec<u8>) -> bool {
    if !line.windows(6).any(|w| w == b"method")
        && !line.windows(13).any(|w| w == b"\"bytesFrames\"")
    {
        return true;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(line) else {
        return true;
    };
    if v.get("method").is_some() {
        return false;
    }
    if let Some(result) = v.get_mut("result").and_then(Value::as_object_mut)
        && result.remove("bytesFrames").is_some()
        && let Ok(mut out) = serde_json::to_vec(&v)
    {
        out.push(b'\n');
        *line = out;
    }
    true
}

/// The stdout half's state across connections.
struct Reader {
    split: Split,
    /// Raw log bytes taken so far: what a reconnect skips.
    taken: u64,
    /// The stdout line under way.
    line: Vec<u8>,
}

impl Reader {
    /// Take one frame at raw offset `at`; the complete stdout lines it
    /// finished, filtered.
    fn frame(&mut self, at: u64, data: &[u8], lines: &mut Vec<Vec<u8>>) {
        let skip = self.taken.saturating_sub(at).min(data.len() as u64) as usize;
        let new = &data[skip..];
        if new.is_empty() {
            return;
        }
        self.taken += new.len() as u64;
        let line = &mut self.line;
        self.split.feed(new, |which, bytes| match which {
            Which::Stderr => tracing::debug!(stderr = %String::from_utf8_lossy(bytes).trim_end(), "computerd bridge"),
            Which::Stdout => {
                line.extend_from_slice(bytes);
                if line.last() == Some(&b'\n') {
                    let mut done = std::mem::take(line);
                    if filter_line(&mut done) {
                        lines.push(done);
                    }
                }
            }
        });
    }
}

/// The output half: follow the log, reconnecting past what was taken.
async fn output(
    toolbox: Arc<Toolbox>,
    cmd: Command,
    mut to: DuplexStream,
    stop: CancellationToken,
) {
    let mut reader = Reader {
        split: Split::new(),
        taken: 0,
        line: Vec::new(),
    };
    let mut idle = 0u32;
    let why = loop {
        let before = reader.taken;
        let followed = follow(&toolbox, &cmd, &mut reader, &mut to, &stop).await;
        if stop.is_cancelled() {
            break "the connection was closed".to_string();
        }
        match toolbox.exit_code(&cmd.session, &cmd.command, &stop).await {
            Ok(Some(code)) if followed.is_ok() => {
                break format!("computerd stdio exited with code {code}");
            }
            Ok(_) => {}
            Err(e) => break e.message,
        }
        if reader.taken == before {
            idle += 1;
            if idle > IDLE_RECONNECTS {
                break match followed {
                    Err(e) => e.message,
                    Ok(()) => "the command's log brought nothing new on several connections".into(),
                };
            }
        } else {
            idle = 0;
        }
        tokio::time::sleep(Duration::from_millis(100 << idle.min(4))).await;
    };
    tracing::debug!(reason = %why, "the Daytona bridge's output ended");
    stop.cancel();
    let _ = to.shutdown().await;
}

/// One connection of the log WebSocket, read to its close.
async fn follow(
    toolbox: &Toolbox,
    cmd: &Command,
    reader: &mut Reader,
    to: &mut DuplexStream,
    stop: &CancellationToken,
) -> Result<()> {
    let req = toolbox.logs_request(&cmd.session, &cmd.command)?;
    crate::vendor::install_tls();
    let config = WebSocketConfig::default()
        .max_message_size(Some(LINE_MAX))
        .max_frame_size(Some(LINE_MAX));
    let dial = tokio_tungstenite::connect_async_with_config(req, Some(config), true);
    let (mut ws, _) = tokio::select! {
        d = tokio::time::timeout(DIAL_WAIT, dial) => match d {
            Ok(Ok(ws)) => ws,
            // Never the error's words: they may hold the URL.
            Ok(Err(_)) => return Err(ProviderError::failed(
                "Daytona's log stream of the computerd bridge could not be opened",
            )),
            Err(_) => return Err(ProviderError::failed(format!(
                "Daytona's log stream did not open within {} s", DIAL_WAIT.as_secs()
            ))),
        },
        _ = stop.cancelled() => return Ok(()),
    };
    let mut at = 0u64;
    let mut lines = Vec::new();
    loop {
        let msg = tokio::select! {
            m = ws.next() => m,
            _ = stop.cancelled() => return Ok(()),
        };
        let data = match msg {
            None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Ok(()),
            Some(Ok(Message::Binary(b))) => b.to_vec(),
            Some(Ok(Message::Text(t))) => t.as_bytes().to_vec(),
            Some(Ok(_)) => continue,
        };
        reader.frame(at, &data, &mut lines);
        at += data.len() as u64;
        for l in lines.drain(..) {
            if to.write_all(&l).await.is_err() {
                stop.cancel();
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(lines: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        for l in lines {
            v.extend_from_slice(&[1, 1, 1]);
            v.extend_from_slice(l.as_bytes());
            v.push(b'\n');
        }
        v
    }

    #[test]
    fn a_replay_after_reconnect_is_skipped_to_the_offset_taken() {
        let log = marked(&[
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
        ]);
        let mut r = Reader {
            split: Split::new(),
            taken: 0,
            line: Vec::new(),
        };
        let mut lines = Vec::new();
        // First connection: cut inside the second line's marker.
        let cut = log.len() / 2 + 1;
        r.frame(0, &log[..cut], &mut lines);
        // Second connection: the whole log again, from 0, in odd frames.
        let mut at = 0;
        for f in log.chunks(7) {
            r.frame(at, f, &mut lines);
            at += f.len() as u64;
        }
        let got: Vec<String> = lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        assert_eq!(
            got,
            vec![
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".to_string(),
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n".to_string(),
            ]
        );
    }

    #[test]
    fn echoed_requests_are_dropped_and_hello_offers_no_frames() {
        let mut echo = br#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{}}"#.to_vec();
        echo.push(b'\n');
        assert!(!filter_line(&mut echo));
        let mut hello =
            br#"{"jsonrpc":"2.0","id":1,"result":{"version":"1","bytesFrames":1048576}}"#.to_vec();
        hello.push(b'\n');
        assert!(filter_line(&mut hello));
        assert_eq!(hello.last(), Some(&b'\n'));
        assert_eq!(
            serde_json::from_slice::<Value>(&hello).unwrap(),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"version": "1"}})
        );
        let mut plain =
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stdout\":\"method\"}}\n".to_vec();
        let before = plain.clone();
        assert!(filter_line(&mut plain));
        assert_eq!(plain, before);
    }
}
