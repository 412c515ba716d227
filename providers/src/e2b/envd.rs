//! envd, E2B's agent in every sandbox, over plain HTTP/1.1: file upload
//! and the Connect RPC process calls (vendor-apis.md, section 2).
//!
//! Connect without gRPC: a unary call is a POST of JSON; a server stream
//! is a POST of one envelope whose answer is a run of envelopes (one flag
//! byte, a 4-byte big-endian length, JSON), the last flagged 0x02 with the
//! call's error, if any. The answer's bytes come cut anywhere, so
//! [`Envelopes`] holds what it has until a whole envelope is in.
//!
//! No stream here sends `Connect-Timeout-Ms` unless it is a run with a
//! bound of its own: envd makes that header the process's lifetime and
//! kills it then (envd process/start.go), and init and the bridge must
//! outlive every call.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use crate::types::{ErrorCode, ProviderError, Result};
use crate::vendor::{Http, Secret};

/// envd's port, in the routing header.
pub const ENVD_PORT: u16 = 49983;
/// The most one envelope may hold.
pub const ENVELOPE_MAX: usize = 16 * 1024 * 1024;
/// envd's keepalive pings on a stream, in seconds (the SDK's choice).
pub const KEEPALIVE_S: u32 = 50;
/// How long a stream may take to say the process started.
pub const START_WAIT: Duration = Duration::from_secs(30);
/// Each unary call's bound.
pub const UNARY_WAIT: Duration = Duration::from_secs(30);
/// An upload's bound.
pub const UPLOAD_WAIT: Duration = Duration::from_secs(300);

/// Envelopes read from bytes that come cut at any point.
#[derive(Default)]
pub struct Envelopes {
    buf: BytesMut,
}

/// One envelope: its flags and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub flags: u8,
    pub message: Bytes,
}

impl Envelope {
    /// The stream's last envelope, which carries its end.
    pub fn is_end(&self) -> bool {
        self.flags & 0x02 != 0
    }
}

impl Envelopes {
    pub fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// The next whole envelope, `Ok(None)` until one is in.
    pub fn take(&mut self) -> Result<Option<Envelope>> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > ENVELOPE_MAX {
            return Err(ProviderError::failed(format!(
                "envd sent an envelope of {len} bytes, more than the {ENVELOPE_MAX} taken"
            )));
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let flags = self.buf[0];
        self.buf.advance(5);
        let message = self.buf.split_to(len).freeze();
        Ok(Some(Envelope { flags, message }))
    }

    /// Bytes held that are not a whole envelope.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// One envelope around `message`.
pub fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(flags);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// What a process stream says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Start {
        pid: u32,
    },
    Stdout(Bytes),
    Stderr(Bytes),
    End {
        exit_code: i32,
        error: Option<String>,
    },
    Keepalive,
}

/// One message of a process stream, read (proto3 JSON: bytes as base64).
pub fn event_of(message: &[u8]) -> Result<Event> {
    let bad = || ProviderError::failed("envd sent a process event this provider cannot read");
    let v: Value = serde_json::from_slice(message).map_err(|_| bad())?;
    let e = &v["event"];
    let bytes = |s: &Value| -> Result<Bytes> {
        let s = s.as_str().unwrap_or("");
        B64.decode(s).map(Bytes::from).map_err(|_| bad())
    };
    if let Some(s) = e.get("start") {
        let pid = s["pid"].as_u64().ok_or_else(bad)? as u32;
        return Ok(Event::Start { pid });
    }
    if let Some(d) = e.get("data") {
        if let Some(o) = d.get("stdout") {
            return Ok(Event::Stdout(bytes(o)?));
        }
        if let Some(o) = d.get("stderr") {
            return Ok(Event::Stderr(bytes(o)?));
        }
        return Ok(Event::Keepalive);
    }
    if let Some(end) = e.get("end") {
        return Ok(Event::End {
            exit_code: end["exitCode"].as_i64().unwrap_or(-1) as i32,
            error: end["error"].as_str().map(str::to_string),
        });
    }
    if e.get("keepalive").is_some() {
        return Ok(Event::Keepalive);
    }
    Err(bad())
}

/// The end-stream envelope's error, in words (never the vendor's own).
fn end_error(message: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(message).ok()?;
    let code = v.get("error")?.get("code")?.as_str()?.to_string();
    Some(code)
}

/// One sandbox's envd.
#[derive(Clone)]
pub struct Envd {
    pub http: Http,
    /// `http(s)://host[:port]`, no trailing slash.
    pub base: String,
    pub sandbox: String,
    pub token: Option<Secret>,
}

impl std::fmt::Debug for Envd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envd")
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

/// A process stream being read.
pub struct Stream {
    body: hyper::body::Incoming,
    envelopes: Envelopes,
    ended: bool,
}

impl Stream {
    /// The next event; `None` once the stream has ended.
    pub async fn next(&mut self) -> Result<Option<Event>> {
        loop {
            if let Some(env) = self.envelopes.take()? {
                if env.is_end() {
                    self.ended = true;
                    return match end_error(&env.message) {
                        Some(code) => Err(ProviderError::failed(format!(
                            "envd ended the process stream with error {code}"
                        ))),
                        None => Ok(None),
                    };
                }
                return event_of(&env.message).map(Some);
            }
            if self.ended {
                return Ok(None);
            }
            match self.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.envelopes.push(&data);
                    }
                }
                Some(Err(_)) => {
                    return Err(ProviderError::new(
                        ErrorCode::Unreachable,
                        "envd's process stream was cut",
                    ));
                }
                None => {
                    self.ended = true;
                    if self.envelopes.pending() > 0 {
                        return Err(ProviderError::new(
                            ErrorCode::Unreachable,
                            "envd's process stream was cut inside an envelope",
                        ));
                    }
                    return Ok(None);
                }
            }
        }
    }
}

impl Envd {
    fn request(&self, path: &str, content_type: &str) -> http::request::Builder {
        let mut b = http::Request::builder()
            .method(http::Method::POST)
            .uri(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .header("e2b-sandbox-id", &self.sandbox)
            .header("e2b-sandbox-port", ENVD_PORT.to_string())
            // Every call as root, with no password, as the SDK sends it.
            .header("authorization", format!("Basic {}", B64.encode("root:")));
        if let Some(t) = &self.token {
            b = b.header("x-access-token", t.expose());
        }
        b
    }

    async fn send(
        &self,
        req: http::request::Builder,
        body: Bytes,
        what: &str,
        within: Duration,
    ) -> Result<http::Response<hyper::body::Incoming>> {
        let req = req.body(Full::new(body)).map_err(|_| {
            ProviderError::invalid(
                "envd_url",
                format!("envd's {what} call could not be made: check --e2b-envd-url"),
            )
        })?;
        let resp = tokio::time::timeout(within, self.http.request(req))
            .await
            .map_err(|_| {
                ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "envd's {what} call did not answer within {} s",
                        within.as_secs()
                    ),
                )
            })?
            .map_err(|_| {
                ProviderError::new(
                    ErrorCode::Unreachable,
                    format!("envd's {what} call could not reach the sandbox"),
                )
            })?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        let code = match status {
            401 | 403 => ErrorCode::Unauthorized,
            404 => ErrorCode::Gone,
            429 => ErrorCode::Limit,
            507 => ErrorCode::Limit,
            s if s >= 500 => ErrorCode::Unreachable,
            _ => ErrorCode::Refused,
        };
        Err(ProviderError::new(
            code,
            format!("envd's {what} call answered HTTP {status}"),
        ))
    }

    /// Write `bytes` to `path` as root (parents made, replaced).
    pub async fn upload(&self, path: &str, bytes: Bytes) -> Result<()> {
        let q = form_urlencoded::Serializer::new(String::new())
            .append_pair("path", path)
            .append_pair("username", "root")
            .finish();
        let req = self.request(&format!("/files?{q}"), "application/octet-stream");
        let resp = self.send(req, bytes, "files upload", UPLOAD_WAIT).await?;
        let _ = resp.into_body().collect().await;
        Ok(())
    }

    /// Start `argv` as root; with `stdin`, its input is open for
    /// [`Envd::send_input`]. `lifetime` becomes envd's own bound on the
    /// process (Connect-Timeout-Ms): none for anything that must outlive
    /// the stream.
    pub async fn start(
        &self,
        argv: &[String],
        stdin: bool,
        lifetime: Option<Duration>,
    ) -> Result<(u32, Stream)> {
        let (cmd, args) = argv
            .split_first()
            .ok_or_else(|| ProviderError::failed("a process needs a program"))?;
        let body = json!({
            "process": {"cmd": cmd, "args": args, "envs": BTreeMap::<String, String>::new(), "cwd": "/"},
            "stdin": stdin,
        });
        let mut req = self
            .request("/process.Process/Start", "application/connect+json")
            .header("connect-protocol-version", "1")
            .header("keepalive-ping-interval", KEEPALIVE_S.to_string());
        if let Some(l) = lifetime {
            req = req.header("connect-timeout-ms", l.as_millis().to_string());
        }
        let framed = Bytes::from(envelope(0, body.to_string().as_bytes()));
        let resp = self.send(req, framed, "process start", START_WAIT).await?;
        let mut stream = Stream {
            body: resp.into_body(),
            envelopes: Envelopes::default(),
            ended: false,
        };
        let started = tokio::time::timeout(START_WAIT, async {
            loop {
                match stream.next().await? {
                    Some(Event::Start { pid }) => return Ok(pid),
                    Some(Event::Keepalive) => continue,
                    Some(_) | None => {
                        return Err(ProviderError::failed(
                            "envd's process stream did not open with the process's start",
                        ));
                    }
                }
            }
        })
        .await
        .map_err(|_| {
            ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "envd did not start the process within {} s",
                    START_WAIT.as_secs()
                ),
            )
        })??;
        Ok((started, stream))
    }

    async fn unary(&self, method: &str, body: Value) -> Result<()> {
        let req = self
            .request(&format!("/process.Process/{method}"), "application/json")
            .header("connect-protocol-version", "1");
        let resp = self
            .send(req, Bytes::from(body.to_string()), method, UNARY_WAIT)
            .await?;
        let _ = resp.into_body().collect().await;
        Ok(())
    }

    /// Write `bytes` to the process's stdin.
    pub async fn send_input(&self, pid: u32, bytes: &[u8]) -> Result<()> {
        self.unary(
            "SendInput",
            json!({"process": {"pid": pid}, "input": {"stdin": B64.encode(bytes)}}),
        )
        .await
    }

    /// Kill the process (SIGKILL).
    pub async fn kill(&self, pid: u32) -> Result<()> {
        self.unary(
            "SendSignal",
            json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_cut_at_every_byte_read_the_same() {
        let msgs = [
            json!({"event": {"start": {"pid": 7}}}),
            json!({"event": {"keepalive": {}}}),
            json!({"event": {"data": {"stdout": B64.encode(b"hello\x00\xff")}}}),
            json!({"event": {"data": {"stderr": B64.encode(b"err")}}}),
            json!({"event": {"end": {"exitCode": 3, "exited": true, "status": "exit status 3"}}}),
        ];
        let mut wire = Vec::new();
        for m in &msgs {
            wire.extend(envelope(0, m.to_string().as_bytes()));
        }
        wire.extend(envelope(2, b"{}"));
        let want = vec![
            (0, Event::Start { pid: 7 }),
            (0, Event::Keepalive),
            (0, Event::Stdout(Bytes::from_static(b"hello\x00\xff"))),
            (0, Event::Stderr(Bytes::from_static(b"err"))),
            (
                0,
                Event::End {
                    exit_code: 3,
                    error: None,
                },
            ),
        ];
        for cut in 1..wire.len() {
            let mut e = Envelopes::default();
            let mut got = Vec::new();
            let mut end = 0;
            for piece in wire.chunks(cut) {
                e.push(piece);
                while let Some(env) = e.take().unwrap() {
                    if env.is_end() {
                        end += 1;
                    } else {
                        got.push((env.flags, event_of(&env.message).unwrap()));
                    }
                }
            }
            assert_eq!((got, end, e.pending()), (want.clone(), 1, 0), "cut {cut}");
        }
    }

    #[test]
    fn an_envelope_past_the_bound_is_refused_before_it_is_read() {
        let mut e = Envelopes::default();
        e.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(e.take().unwrap_err().message.contains("more than"));
    }
}
