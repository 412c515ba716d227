//! MCP over stdio: one JSON-RPC message per line, every line answered.
//!
//! rmcp's own line transport drops a line it cannot read with no answer
//! (text that is not JSON, invalid UTF-8, a line over its limit), so a
//! client that sent one waits forever. Here every line that is not a
//! message gets a JSON-RPC error back, and the server goes on reading:
//! a parse error (-32700, `id` null) for a line that is not JSON text, an
//! invalid request (-32600) for JSON that is not a message (with its `id`
//! when it has a usable one) or for a line over [`MAX_LINE`], which says
//! the limit. Only an empty line, and a notification the server does not
//! know (JSON-RPC never answers a notification), get no answer.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::stdio::{Reader, Writer};

/// The longest line taken: 16 MiB, what an HTTP body may be.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// The stdio transport of the server's side.
pub struct Lines {
    read: BufReader<Reader>,
    /// The line read so far (a cancelled read resumes it).
    line: Vec<u8>,
    /// Skipping the rest of a line over the limit.
    discarding: bool,
    write: Arc<tokio::sync::Mutex<Option<Writer>>>,
    max: usize,
}

impl Lines {
    pub fn new((read, write): (Reader, Writer)) -> Lines {
        Lines::with_max(read, write, MAX_LINE)
    }

    fn with_max(read: Reader, write: Writer, max: usize) -> Lines {
        Lines {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            discarding: false,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            max,
        }
    }

    /// One line into `self.line`, never holding more than the limit.
    /// Cancel-safe: what was read stays in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                // A last message with no newline before the end is still one.
                if !self.line.is_empty() && !self.discarding {
                    return Ok(Read::Line);
                }
                return Ok(Read::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut read = None;
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
            } else if self.line.len() + take > self.max + 1 {
                // Over the limit (the newline is not counted): the rest of
                // the line is skipped.
                self.line.clear();
                self.discarding = newline.is_none();
                read = Some(Read::TooLong);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    read = Some(Read::Line);
                }
            }
            self.read.consume(take);
            if let Some(r) = read {
                return Ok(r);
            }
        }
    }

    /// Write an answer of the transport's own, whole, in a task of its
    /// own: a read cancelled meanwhile cannot cut the line short.
    fn answer(&self, error: Value) {
        let write = Arc::clone(&self.write);
        tokio::spawn(async move {
            let mut line = error.to_string().into_bytes();
            line.push(b'\n');
            let _ = write_line(&write, &line).await;
        });
    }
}

enum Read {
    Line,
    TooLong,
    Eof,
}

async fn write_line(
    write: &tokio::sync::Mutex<Option<Writer>>,
    line: &[u8],
) -> std::io::Result<()> {
    let mut w = write.lock().await;
    let Some(w) = w.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the stdio transport is closed",
        ));
    };
    w.write_all(line).await?;
    w.flush().await
}

/// What one line is.
#[derive(Debug)]
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answered with this error object; the id it answers (or null).
    Refused(Value),
    /// Nothing to answer.
    Skip,
}

fn error(code: i64, id: Value, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The `id` of a message that has a usable one (a string or an integer).
fn usable_id(v: &Value) -> Value {
    match v.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(id @ Value::Number(n)) if n.is_i64() || n.is_u64() => id.clone(),
        _ => Value::Null,
    }
}

/// Read one line (its newline taken off).
fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.is_empty() {
        return Line::Skip;
    }
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return Line::Refused(error(
                PARSE_ERROR,
                Value::Null,
                format!(
                    "Parse error: the line is not UTF-8 text (bad byte at offset {}); send one JSON-RPC message per line",
                    e.valid_up_to()
                ),
            ));
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Line::Refused(error(
                PARSE_ERROR,
                Value::Null,
                format!("Parse error: the line is not one JSON value: {e}"),
            ));
        }
    };
    let id = usable_id(&value);
    let invalid = |why: String| Line::Refused(error(INVALID_REQUEST, id.clone(), why));
    let Value::Object(map) = &value else {
        let what = match &value {
            Value::Array(_) => "an array (batches are not taken: send one message per line)",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return invalid(format!(
            "Invalid request: a JSON-RPC message is an object, and this line holds {what}"
        ));
    };
    if map.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid("Invalid request: \"jsonrpc\" must be \"2.0\"".into());
    }
    if map.contains_key("id") && id.is_null() {
        return invalid(
            "Invalid request: \"id\" must be a string or an integer (null and fractions are not ids)".into(),
        );
    }
    let method = match map.get("method") {
        None => None,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => return invalid("Invalid request: \"method\" must be a string".into()),
    };
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value.clone()) {
        Ok(m) => Line::Message(Box::new(m)),
        // A notification is never answered, one we do not know included.
        Err(e) if method.is_some() && !map.contains_key("id") => {
            tracing::debug!("ignored a notification that could not be read: {e}");
            Line::Skip
        }
        Err(e) => {
            let what = if method.is_some() {
                "not a request the server can read"
            } else {
                "neither a request (no \"method\") nor a response"
            };
            invalid(format!("Invalid request: the message is {what}: {e}"))
        }
    }
}

impl Transport<RoleServer> for Lines {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            write_line(&write, &line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Read::Line) => {}
                Ok(Read::TooLong) => {
                    tracing::warn!(
                        "a stdio line over {} bytes was refused (answered -32600)",
                        self.max
                    );
                    self.answer(error(
                        INVALID_REQUEST,
                        Value::Null,
                        format!(
                            "Invalid request: the line is longer than {} bytes, the most one message may be; it was not read. Send less per call (files go in parts: read_file and write_file take offsets)",
                            self.max
                        ),
                    ));
                    continue;
                }
                Ok(Read::Eof) => return None,
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let read = classify(line.strip_suffix(b"\n").unwrap_or(&line));
            // Keep the buffer's room for the next line.
            self.line = line;
            self.line.clear();
            match read {
                Line::Message(m) => return Some(*m),
                Line::Skip => {}
                Line::Refused(answer) => {
                    tracing::debug!("a stdio line was refused: {}", answer["error"]["message"]);
                    self.answer(answer);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let w = self.write.lock().await.take();
        if let Some(mut w) = w {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &[u8]) -> Value {
        match classify(line) {
            Line::Refused(v) => v,
            other => panic!(
                "{:?} was not refused: {other:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }

    #[test]
    fn each_kind_of_bad_line_gets_its_error() {
        let spaces = vec![b' '; 100_000];
        let cases: Vec<(&[u8], i64, Value)> = vec![
            (b"{", PARSE_ERROR, Value::Null),
            (b"\xff\xfe{}", PARSE_ERROR, Value::Null),
            (
                br#"{"jsonrpc":"2.0","id":9,"method":"ping"} x"#,
                PARSE_ERROR,
                Value::Null,
            ),
            (&spaces, PARSE_ERROR, Value::Null),
            (
                br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                INVALID_REQUEST,
                Value::Null,
            ),
            (b"[]", INVALID_REQUEST, Value::Null),
            (b"42", INVALID_REQUEST, Value::Null),
            (br#""ping""#, INVALID_REQUEST, Value::Null),
            (
                br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
                INVALID_REQUEST,
                json!(5),
            ),
            (
                br#"{"id":"a","method":"ping"}"#,
                INVALID_REQUEST,
                json!("a"),
            ),
            (br#"{"jsonrpc":"2.0","id":6}"#, INVALID_REQUEST, json!(6)),
            (
                br#"{"jsonrpc":"2.0","id":7,"method":3}"#,
                INVALID_REQUEST,
                json!(7),
            ),
        ];
        for (line, code, id) in cases {
            let v = refused(line);
            let what = String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned();
            assert_eq!(v["jsonrpc"], "2.0", "{what}");
            assert_eq!(v["error"]["code"], code, "{what}: {v}");
            assert_eq!(v["id"], id, "{what}: {v}");
            let words = v["error"]["message"].as_str().unwrap();
            assert!(words.len() > 20, "{what}: {words}");
        }
    }

    #[test]
    fn messages_pass_and_empty_lines_and_notifications_are_not_answered() {
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Line::Message(_)
        ));
        assert!(matches!(
            classify(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
            Line::Message(_)
        ));
        assert!(matches!(classify(b""), Line::Skip));
        assert!(matches!(classify(b"\r"), Line::Skip));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":3}"#),
            Line::Skip
        ));
    }

    #[tokio::test]
    async fn a_last_message_without_a_newline_is_read() {
        let (client, server) = tokio::io::duplex(4096);
        let (sr, sw) = tokio::io::split(server);
        let mut t = Lines::with_max(Box::pin(sr), Box::pin(sw), 1000);
        let (_cr, mut cw) = tokio::io::split(client);
        cw.write_all(br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
            .await
            .unwrap();
        cw.shutdown().await.unwrap();
        let m = t.receive().await.unwrap();
        assert!(serde_json::to_string(&m).unwrap().contains("\"id\":4"));
        assert!(t.receive().await.is_none());
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_answered_and_the_next_is_read() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (sr, sw) = tokio::io::split(server);
        let mut t = Lines::with_max(Box::pin(sr), Box::pin(sw), 100);
        let (cr, mut cw) = tokio::io::split(client);
        let mut long = vec![b'x'; 5000];
        long.push(b'\n');
        cw.write_all(&long).await.unwrap();
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
        cw.write_all(ping).await.unwrap();
        let m = t.receive().await.unwrap();
        assert!(serde_json::to_string(&m).unwrap().contains("ping"));
        let mut answers = BufReader::new(cr).lines();
        let first: Value =
            serde_json::from_str(&answers.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(first["error"]["code"], INVALID_REQUEST);
        assert_eq!(first["id"], Value::Null);
        assert!(
            first["error"]["message"]
                .as_str()
                .unwrap()
                .contains("longer than 100 bytes"),
            "{first}"
        );
        // A line exactly at the limit is read.
        let mut at = br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"p":""#.to_vec();
        let pad = 100 - at.len() - 3;
        at.extend(std::iter::repeat_n(b'a', pad));
        at.extend_from_slice(b"\"}}\n");
        assert_eq!(at.len(), 101);
        cw.write_all(&at).await.unwrap();
        let m = t.receive().await.unwrap();
        assert!(serde_json::to_string(&m).unwrap().contains("\"id\":3"));
    }
}
