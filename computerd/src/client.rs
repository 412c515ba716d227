//! [`DaemonClient`]: JSON-RPC 2.0 to a computerd over any byte stream.
//!
//! Many calls may be in flight on one connection; replies are matched to
//! calls by id, in whatever order they come. A call whose future is dropped
//! before its reply (a cancelled tool call, a `select!` that went the other
//! way) sends `$/cancelRequest` so the daemon stops the work. When the stream
//! ends, every pending call fails with [`ClientError::Closed`].
//!
//! The helpers in [`files`](self::DaemonClient::read_file) and friends page
//! what one call cannot carry: whole files, tar archives and process output.

mod helpers;
mod port;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::protocol::{
    Call, CancelParams, Envelope, ErrorKind, Id, Method, RpcError, limits, method,
};

pub use helpers::{
    ComputerExt, FollowChunk, ProcessFollow, ProcessOutput, TarPull, WriteFileOptions,
};
pub use port::{PortConn, nothing_listens};

/// Why a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The daemon answered with an error object.
    #[error("{0}")]
    Rpc(RpcError),
    /// The connection ended before the reply came.
    #[error("the connection to computerd ended: {0}")]
    Closed(String),
    /// The reply did not have the shape of the method's result.
    #[error("computerd's reply to {method} could not be read: {detail}")]
    Decode { method: String, detail: String },
    /// A helper's own input failed (the byte source of a tar push).
    #[error("{0}")]
    Source(String),
}

impl ClientError {
    /// The protocol's error kind, when the daemon gave one.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Rpc(e) => e.kind(),
            _ => None,
        }
    }
}

impl From<RpcError> for ClientError {
    fn from(e: RpcError) -> Self {
        ClientError::Rpc(e)
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A reply: its result, and the bytes frame that came after its line.
type Answer = (Value, Option<Vec<u8>>);

type Pending = HashMap<i64, oneshot::Sender<Result<Answer>>>;

enum Outgoing {
    /// A line, and the bytes frame after it.
    Line(String, Option<Vec<u8>>),
    Close,
}

/// What a call by [`ComputerClient::call_bytes`] got back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BytesReply {
    /// The result; without its `data` when that came as [`BytesReply::data`].
    pub result: Value,
    /// The result's `data`, when it came as a bytes frame.
    pub data: Option<Vec<u8>>,
}

/// Whether the daemon takes bytes frames: not known before a hello reply.
const FRAMES_UNKNOWN: i64 = -1;

struct Inner {
    out: mpsc::UnboundedSender<Outgoing>,
    pending: Mutex<Pending>,
    /// Set once the stream has ended, with the reason; no call is sent after.
    closed: Mutex<Option<String>>,
    next_id: AtomicI64,
    /// The most bytes a frame to the daemon may carry (0: none; the daemon
    /// said nothing of frames), or [`FRAMES_UNKNOWN`] before any hello.
    frames: AtomicI64,
}

impl Inner {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // A poisoned lock only means a panic elsewhere; the map is still sound.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close_with(&self, reason: String) {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if closed.is_none() {
            *closed = Some(reason.clone());
        }
        drop(closed);
        let drained: Vec<_> = self.pending().drain().collect();
        for (_, tx) in drained {
            let _ = tx.send(Err(ClientError::Closed(reason.clone())));
        }
    }

    fn closed_reason(&self) -> Option<String> {
        self.closed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The client seam every tool sees: a call by method name, and close. A
/// `DaemonClient` over a byte stream implements it, and so does a provider's
/// in-process client (a phone over adb, a browser over CDP). Dropping the
/// future of a call cancels it.
pub trait ComputerClient: Send + Sync {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, Result<Value>>;

    /// A call whose `data` may travel as raw bytes beside its JSON (a bytes
    /// frame, where the connection has them) instead of base64 inside it.
    /// `data`, when given, is the params' `data` (which `params` leaves
    /// out). With `reply_data`, the result's `data` may come back as
    /// [`BytesReply::data`] instead of inside the result. A client without
    /// frames (this default) sends `data` in base64 and returns the result
    /// whole.
    fn call_bytes<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> futures::future::BoxFuture<'a, Result<BytesReply>> {
        let _ = reply_data;
        Box::pin(async move {
            let params = with_base64_data(params, data);
            Ok(BytesReply {
                result: self.call_value(method, params).await?,
                data: None,
            })
        })
    }

    /// Stop sending; calls already sent still get their replies.
    fn close(&self);

    /// True once the connection has ended (the computer is gone or closed).
    fn is_closed(&self) -> bool {
        false
    }
}

impl<T: ComputerClient + ?Sized> ComputerClient for std::sync::Arc<T> {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, Result<Value>> {
        (**self).call_value(method, params)
    }
    fn call_bytes<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> futures::future::BoxFuture<'a, Result<BytesReply>> {
        (**self).call_bytes(method, params, data, reply_data)
    }
    fn close(&self) {
        (**self).close()
    }
    fn is_closed(&self) -> bool {
        (**self).is_closed()
    }
}

impl ComputerClient for DaemonClient {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, Result<Value>> {
        Box::pin(DaemonClient::call_value(self, method, params))
    }
    fn call_bytes<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> futures::future::BoxFuture<'a, Result<BytesReply>> {
        Box::pin(DaemonClient::call_bytes(
            self, method, params, data, reply_data,
        ))
    }
    fn close(&self) {
        DaemonClient::close(self)
    }
    fn is_closed(&self) -> bool {
        DaemonClient::is_closed(self)
    }
}

/// A connection to one computerd. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct DaemonClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DaemonClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonClient").finish_non_exhaustive()
    }
}

impl DaemonClient {
    /// Start a client over a stream. Must be called inside a tokio runtime:
    /// it spawns the tasks that write requests and read replies.
    pub fn new<S>(stream: S) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Self::from_parts(read, write)
    }

    /// Start a client over a separate reader and writer (a child's stdout and stdin).
    pub fn from_parts<R, W>(read: R, write: W) -> Self
    where
        R: AsyncRead + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        let (out, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            out,
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            next_id: AtomicI64::new(1),
            frames: AtomicI64::new(FRAMES_UNKNOWN),
        });
        tokio::spawn(write_loop(Arc::downgrade(&inner), rx, write));
        tokio::spawn(read_loop(Arc::downgrade(&inner), read));
        Self { inner }
    }

    /// Call a method with raw JSON params; the raw result comes back.
    pub async fn call_value(&self, method: &str, params: Value) -> Result<Value> {
        let (mut result, data) = self.send(method, params, None, false).await?;
        // Asked for none, a frame's bytes still belong in the result.
        if let Some(data) = data
            && let Value::Object(map) = &mut result
        {
            map.insert("data".into(), Value::String(STANDARD.encode(data)));
        }
        Ok(result)
    }

    /// [`ComputerClient::call_bytes`]: frames once the daemon's hello said
    /// it takes them (a hello is sent first when none was seen yet), base64
    /// inside the JSON otherwise.
    pub async fn call_bytes(
        &self,
        method: &str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> Result<BytesReply> {
        let most = self.frames().await;
        let (params, data) = match data {
            Some(d) if d.len() as u64 > most => (with_base64_data(params, Some(d)), None),
            d => (params, d),
        };
        let (result, data) = self
            .send(method, params, data, reply_data && most > 0)
            .await?;
        Ok(BytesReply { result, data })
    }

    /// The most bytes a frame to the daemon may carry, 0 when it takes none.
    async fn frames(&self) -> u64 {
        let known = self.inner.frames.load(Ordering::Relaxed);
        if known != FRAMES_UNKNOWN {
            return known.max(0) as u64;
        }
        // Its reply sets what is known (see `send`); a failed hello means none.
        if self
            .call_value(method_name(Method::Hello), serde_json::json!({}))
            .await
            .is_err()
        {
            let _ = self.inner.frames.compare_exchange(
                FRAMES_UNKNOWN,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        self.inner.frames.load(Ordering::Relaxed).max(0) as u64
    }

    async fn send(
        &self,
        method: &str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> Result<Answer> {
        if let Some(reason) = self.inner.closed_reason() {
            return Err(ClientError::Closed(reason));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut env = Envelope::request(Id::Num(id), method, params);
        env.bytes = data.as_ref().map(|d| d.len() as u64);
        env.reply_bytes = reply_data.then_some(true);
        let line = env.to_line();
        // The daemon answers a line over its bound with no id (it cannot
        // read one), which no call would ever be matched to: refuse here.
        if line.len() as u64 > limits::MAX_LINE_BYTES {
            return Err(ClientError::Rpc(RpcError::limit(format!(
                "{method}: its request is {} bytes, over the {} bytes one message to the computer may hold; send less at once (a large text as a file, in pieces)",
                line.len(),
                limits::MAX_LINE_BYTES
            ))));
        }
        let (tx, rx) = oneshot::channel();
        self.inner.pending().insert(id, tx);
        if self.inner.out.send(Outgoing::Line(line, data)).is_err() {
            self.inner.pending().remove(&id);
            return Err(ClientError::Closed("the writer has stopped".into()));
        }
        let mut guard = CancelOnDrop {
            inner: &self.inner,
            id,
            armed: true,
        };
        let outcome = rx.await;
        guard.armed = false;
        let answer = match outcome {
            Ok(r) => r?,
            Err(_) => {
                return Err(ClientError::Closed(
                    self.inner
                        .closed_reason()
                        .unwrap_or_else(|| "the reader has stopped".into()),
                ));
            }
        };
        if method == method_name(Method::Hello) {
            // Negotiated in hello: frames go to a daemon that says it takes them.
            let most = answer
                .0
                .get("bytesFrames")
                .and_then(Value::as_u64)
                .map_or(0, |n| n.min(limits::MAX_FRAME_BYTES) as i64);
            self.inner.frames.store(most, Ordering::Relaxed);
        }
        Ok(answer)
    }

    /// Call a method by its typed params.
    pub async fn call<P: Call>(&self, params: &P) -> Result<P::Result> {
        self.call_as(P::METHOD.as_str(), params).await
    }

    /// Call a method by name with any serializable params and result.
    pub async fn call_as<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R> {
        let params = serde_json::to_value(params).map_err(|e| ClientError::Decode {
            method: method.to_string(),
            detail: format!("params could not be encoded: {e}"),
        })?;
        let value = self.call_value(method, params).await?;
        serde_json::from_value(value).map_err(|e| ClientError::Decode {
            method: method.to_string(),
            detail: e.to_string(),
        })
    }

    /// Stop sending: the daemon sees the end of its input. Calls already sent
    /// still get their replies.
    pub fn close(&self) {
        let _ = self.inner.out.send(Outgoing::Close);
    }

    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.inner.closed_reason().is_some()
    }

    /// Calls sent and not yet answered.
    pub fn pending_calls(&self) -> usize {
        self.inner.pending().len()
    }
}

/// Sends `$/cancelRequest` when a call's future is dropped before its reply.
struct CancelOnDrop<'a> {
    inner: &'a Arc<Inner>,
    id: i64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.inner.pending().remove(&self.id).is_none() {
            return; // the reply came first
        }
        let params = serde_json::to_value(CancelParams {
            id: Id::Num(self.id),
        })
        .unwrap_or(Value::Null);
        let line = Envelope::notification(method::CANCEL_REQUEST, params).to_line();
        let _ = self.inner.out.send(Outgoing::Line(line, None));
    }
}

async fn write_loop<W: AsyncWrite + Send>(
    inner: std::sync::Weak<Inner>,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    write: W,
) {
    // Lines gather in the buffer; a frame's bytes of more than the buffer
    // holds go past it straight to the stream.
    let write = tokio::io::BufWriter::with_capacity(256 * 1024, write);
    let mut write = std::pin::pin!(write);
    while let Some(msg) = rx.recv().await {
        let (line, data) = match msg {
            Outgoing::Line(line, data) => (line, data),
            Outgoing::Close => break,
        };
        let mut sent = write.write_all(line.as_bytes()).await;
        if sent.is_ok() {
            sent = write.write_all(b"\n").await;
        }
        if sent.is_ok()
            && let Some(data) = &data
        {
            sent = write.write_all(data).await;
        }
        // Flush when nothing else is queued, so a burst goes out as one write.
        if sent.is_ok() && rx.is_empty() {
            sent = write.flush().await;
        }
        if let Err(e) = sent {
            if let Some(inner) = inner.upgrade() {
                inner.close_with(format!("writing to computerd failed: {e}"));
            }
            return;
        }
    }
    let _ = write.flush().await;
    let _ = write.shutdown().await;
}

async fn read_loop<R: AsyncRead + Send>(inner: std::sync::Weak<Inner>, read: R) {
    let read = BufReader::with_capacity(256 * 1024, read);
    tokio::pin!(read);
    // A reply line may be as long as the protocol allows, and a little more
    // for the envelope around a full result.
    let max = (limits::MAX_LINE_BYTES + 64 * 1024) as usize;
    let mut line = Vec::with_capacity(4096);
    let reason = loop {
        line.clear();
        match read_bounded_line(&mut read, &mut line, max).await {
            Ok(LineRead::Eof) => break "computerd closed the connection".to_string(),
            Ok(LineRead::TooLong) => {
                break format!("computerd sent a line longer than {max} bytes");
            }
            Ok(LineRead::Line) => {}
            Err(e) => break format!("reading from computerd failed: {e}"),
        }
        let Some(inner) = inner.upgrade() else { return };
        let env = match serde_json::from_slice::<Envelope>(&line) {
            Ok(env) => env,
            Err(_) => {
                if let Ok(v) = serde_json::from_slice::<Value>(&line)
                    && let Some(count) = v.get("bytes")
                {
                    break format!(
                        "computerd sent a line whose bytes ({count}) is not a count of the bytes after it"
                    );
                }
                tracing::warn!("computerd sent a line that is not JSON-RPC; ignored");
                continue;
            }
        };
        let data = match env.bytes {
            None => None,
            Some(n) if n > limits::MAX_FRAME_BYTES => {
                break format!(
                    "computerd sent a bytes frame of {n} bytes; the most is {}",
                    limits::MAX_FRAME_BYTES
                );
            }
            Some(n) => {
                let mut buf = Vec::with_capacity(n as usize);
                match (&mut read).take(n).read_to_end(&mut buf).await {
                    Ok(got) if got as u64 == n => Some(buf),
                    Ok(got) => {
                        break format!(
                            "computerd's bytes frame was cut short: {got} of its {n} bytes came before the end"
                        );
                    }
                    Err(e) => break format!("reading from computerd failed: {e}"),
                }
            }
        };
        let Some(Id::Num(id)) = env.id else { continue };
        if env.method.is_some() {
            continue; // a request from the daemon: none are defined
        }
        let Some(tx) = inner.pending().remove(&id) else {
            continue;
        };
        let outcome = match env.error {
            Some(e) => Err(ClientError::Rpc(e)),
            None => Ok((env.result.unwrap_or(Value::Null), data)),
        };
        let _ = tx.send(outcome);
    };
    if let Some(inner) = inner.upgrade() {
        inner.close_with(reason);
    }
}

/// `params` with `data` in base64 inside it, as a call without frames sends it.
fn with_base64_data(mut params: Value, data: Option<Vec<u8>>) -> Value {
    if let Some(data) = data
        && let Value::Object(map) = &mut params
    {
        map.insert("data".into(), Value::String(STANDARD.encode(data)));
    }
    params
}

fn method_name(m: Method) -> &'static str {
    m.as_str()
}

pub(crate) enum LineRead {
    Line,
    Eof,
    TooLong,
}

/// Read one line into `buf` (without its newline), up to `max` bytes. A line
/// past `max` is read to its end and thrown away, and `TooLong` is returned,
/// so the stream stays in step and memory stays bounded.
pub(crate) async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            // EOF: a last line without newline still counts.
            if too_long {
                return Ok(LineRead::TooLong);
            }
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line
            });
        }
        let (chunk, found) = match memchr(available) {
            Some(i) => (&available[..i], Some(i)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = match found {
            Some(i) => i + 1,
            None => available.len(),
        };
        read.consume(used);
        if found.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

fn memchr(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ExecParams, PingParams};
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A client and a fake daemon at its other end: `answer` is given each
    /// request and says the replies to send now; the daemon's task ends
    /// with every method it was asked, once the client closes.
    fn fake_daemon(
        mut answer: impl FnMut(Envelope) -> Vec<Envelope> + Send + 'static,
    ) -> (DaemonClient, tokio::task::JoinHandle<Vec<String>>) {
        let (a, b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move {
            let (r, mut w) = tokio::io::split(b);
            let mut lines = BufReader::new(r).lines();
            let mut seen = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                let env: Envelope = serde_json::from_str(&line).unwrap();
                seen.push(env.method.clone().unwrap_or_default());
                for reply in answer(env) {
                    w.write_all(format!("{}\n", reply.to_line()).as_bytes())
                        .await
                        .unwrap();
                }
            }
            seen
        });
        (DaemonClient::new(a), server)
    }

    /// A request over the line bound is refused in words before it is
    /// sent (the daemon could only answer it with no id: the call would
    /// wait forever), and the connection goes on.
    #[tokio::test]
    async fn a_request_over_the_line_bound_is_refused_before_it_is_sent() {
        let (client, server) = fake_daemon(|env| vec![Envelope::reply(env.id, Ok(json!({})))]);
        let big = ExecParams {
            argv: vec!["echo".into(), "x".repeat(limits::MAX_LINE_BYTES as usize)],
            ..Default::default()
        };
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), client.call(&big))
            .await
            .expect("refused at once, not left waiting")
            .unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Limit), "{e}");
        assert!(
            e.to_string()
                .contains("over the 1048576 bytes one message to the computer may hold"),
            "{e}"
        );
        client.call(&PingParams {}).await.unwrap();
        client.close();
        assert_eq!(server.await.unwrap(), ["ping"]);
    }

    /// A fake daemon: answers requests in reverse order of arrival, two at a time.
    #[tokio::test]
    async fn replies_are_matched_by_id_in_any_order() {
        let mut held = Vec::new();
        let (client, server) = fake_daemon(move |env| {
            held.push(env);
            if held.len() < 2 {
                return Vec::new();
            }
            held.drain(..)
                .rev()
                .map(|env| Envelope::reply(env.id, Ok(json!({"echo": env.method}))))
                .collect()
        });
        let c2 = client.clone();
        let (x, y) = tokio::join!(
            client.call_value("one", json!({})),
            c2.call_value("two", json!({}))
        );
        assert_eq!(x.unwrap(), json!({"echo": "one"}));
        assert_eq!(y.unwrap(), json!({"echo": "two"}));
        client.close();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_dropped_call_sends_cancel_request() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let client = DaemonClient::new(a);
        let (r, _w) = tokio::io::split(b);
        let mut lines = BufReader::new(r).lines();
        let params = ExecParams {
            argv: vec!["sleep".into(), "9".into()],
            ..Default::default()
        };
        let call = client.call(&params);
        tokio::select! {
            _ = call => panic!("no reply was sent"),
            _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
        }
        let first: Envelope =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let second: Envelope =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(first.method.as_deref(), Some("exec.run"));
        assert_eq!(second.method.as_deref(), Some("$/cancelRequest"));
        assert_eq!(second.params, Some(json!({"id": first.id.unwrap()})));
        assert_eq!(second.id, None);
        assert_eq!(client.pending_calls(), 0);
    }

    #[tokio::test]
    async fn pending_calls_fail_when_the_stream_ends() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let client = DaemonClient::new(a);
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.call(&PingParams {}).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(b);
        let err = call.await.unwrap().unwrap_err();
        assert!(matches!(err, ClientError::Closed(_)), "{err:?}");
        assert!(
            err.to_string().contains("connection to computerd ended"),
            "{err}"
        );
        let again = client.call(&PingParams {}).await.unwrap_err();
        assert!(matches!(again, ClientError::Closed(_)));
    }

    /// A fake daemon that answers hello as `hello` and then records the next
    /// request's line, answering it with `reply` (a line and raw bytes).
    async fn one_call_after_hello(
        hello: Value,
        reply: Vec<u8>,
        call: impl FnOnce(DaemonClient) -> futures::future::BoxFuture<'static, Result<BytesReply>>,
    ) -> (Envelope, Result<BytesReply>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let client = DaemonClient::new(a);
        let server = tokio::spawn(async move {
            let (r, mut w) = tokio::io::split(b);
            let mut lines = BufReader::new(r).lines();
            let first: Envelope =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(first.method.as_deref(), Some("hello"));
            let answer = Envelope::reply(first.id, Ok(hello));
            w.write_all(format!("{}\n", answer.to_line()).as_bytes())
                .await
                .unwrap();
            let second: Envelope =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            w.write_all(&reply).await.unwrap();
            w.shutdown().await.unwrap();
            // Hold the other side open until the client is done reading.
            let _ = lines.next_line().await;
            second
        });
        let outcome = call(client.clone()).await;
        client.close();
        (server.await.unwrap(), outcome)
    }

    #[tokio::test]
    async fn without_bytes_frames_in_hello_data_goes_as_base64() {
        let reply = format!(
            "{}\n",
            Envelope::reply(Some(Id::Num(2)), Ok(json!({"size": 3}))).to_line()
        );
        let (sent, got) = one_call_after_hello(
            json!({"version": "0", "os": "linux", "kind": "linux", "arch": "amd64", "groups": []}),
            reply.into_bytes(),
            |c| {
                Box::pin(async move {
                    c.call_bytes(
                        "files.write",
                        json!({"path": "/f"}),
                        Some(b"abc".to_vec()),
                        true,
                    )
                    .await
                })
            },
        )
        .await;
        assert_eq!(sent.bytes, None);
        assert_eq!(sent.reply_bytes, None);
        assert_eq!(sent.params, Some(json!({"path": "/f", "data": "YWJj"})));
        assert_eq!(
            got.unwrap(),
            BytesReply {
                result: json!({"size": 3}),
                data: None
            }
        );
    }

    #[tokio::test]
    async fn a_reply_frame_cut_short_or_over_the_limit_ends_the_connection_in_words() {
        let hello = json!({"version": "0", "os": "linux", "kind": "linux", "arch": "amd64",
                           "groups": [], "bytesFrames": 524288});
        let read = |c: DaemonClient| -> futures::future::BoxFuture<'static, Result<BytesReply>> {
            Box::pin(async move {
                c.call_bytes("tar.pull.read", json!({"id": "t"}), None, true)
                    .await
            })
        };
        let mut short = Envelope::reply(Some(Id::Num(2)), Ok(json!({"eof": false})));
        short.bytes = Some(100);
        let mut bytes = format!("{}\n", short.to_line()).into_bytes();
        bytes.extend_from_slice(&[1; 10]);
        let (sent, got) = one_call_after_hello(hello.clone(), bytes, read).await;
        assert_eq!(sent.reply_bytes, Some(true));
        let e = got.unwrap_err();
        assert!(matches!(e, ClientError::Closed(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "the connection to computerd ended: computerd's bytes frame was cut short: 10 of its 100 bytes came before the end"
        );

        let mut over = Envelope::reply(Some(Id::Num(2)), Ok(json!({"eof": false})));
        over.bytes = Some(limits::MAX_FRAME_BYTES + 1);
        let bytes = format!("{}\n", over.to_line()).into_bytes();
        let (_, got) = one_call_after_hello(hello.clone(), bytes, read).await;
        assert_eq!(
            got.unwrap_err().to_string(),
            "the connection to computerd ended: computerd sent a bytes frame of 524289 bytes; the most is 524288"
        );

        // A whole frame arrives as the reply's data, and the stream goes on.
        let mut whole = Envelope::reply(Some(Id::Num(2)), Ok(json!({"eof": true})));
        whole.bytes = Some(4);
        let mut bytes = format!("{}\n", whole.to_line()).into_bytes();
        bytes.extend_from_slice(b"a\nb\n");
        let (sent, got) = one_call_after_hello(hello, bytes, read).await;
        assert_eq!(sent.method.as_deref(), Some("tar.pull.read"));
        assert_eq!(
            got.unwrap(),
            BytesReply {
                result: json!({"eof": true}),
                data: Some(b"a\nb\n".to_vec())
            }
        );
    }

    #[tokio::test]
    async fn bounded_line_reader_skips_long_lines_and_keeps_step() {
        let data = format!("{}\nshort\n", "x".repeat(100));
        let mut r = BufReader::with_capacity(8, data.as_bytes());
        let mut buf = Vec::new();
        assert!(matches!(
            read_bounded_line(&mut r, &mut buf, 10).await.unwrap(),
            LineRead::TooLong
        ));
        buf.clear();
        assert!(matches!(
            read_bounded_line(&mut r, &mut buf, 10).await.unwrap(),
            LineRead::Line
        ));
        assert_eq!(buf, b"short");
        buf.clear();
        assert!(matches!(
            read_bounded_line(&mut r, &mut buf, 10).await.unwrap(),
            LineRead::Eof
        ));
    }
}
