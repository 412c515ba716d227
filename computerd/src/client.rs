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

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::protocol::{Call, CancelParams, Envelope, ErrorKind, Id, RpcError, limits, method};

pub use helpers::{
    ComputerExt, FollowChunk, ProcessFollow, ProcessOutput, TarPull, WriteFileOptions,
};

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

type Pending = HashMap<i64, oneshot::Sender<Result<Value>>>;

enum Outgoing {
    Line(String),
    Close,
}

struct Inner {
    out: mpsc::UnboundedSender<Outgoing>,
    pending: Mutex<Pending>,
    /// Set once the stream has ended, with the reason; no call is sent after.
    closed: Mutex<Option<String>>,
    next_id: AtomicI64,
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
        });
        tokio::spawn(write_loop(Arc::downgrade(&inner), rx, write));
        tokio::spawn(read_loop(Arc::downgrade(&inner), read));
        Self { inner }
    }

    /// Call a method with raw JSON params; the raw result comes back.
    pub async fn call_value(&self, method: &str, params: Value) -> Result<Value> {
        if let Some(reason) = self.inner.closed_reason() {
            return Err(ClientError::Closed(reason));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.inner.pending().insert(id, tx);
        let line = Envelope::request(Id::Num(id), method, params).to_line();
        if self.inner.out.send(Outgoing::Line(line)).is_err() {
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
        match outcome {
            Ok(r) => r,
            Err(_) => Err(ClientError::Closed(
                self.inner
                    .closed_reason()
                    .unwrap_or_else(|| "the reader has stopped".into()),
            )),
        }
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
        let _ = self.inner.out.send(Outgoing::Line(line));
    }
}

async fn write_loop<W: AsyncWrite + Send>(
    inner: std::sync::Weak<Inner>,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    write: W,
) {
    let mut write = std::pin::pin!(write);
    while let Some(msg) = rx.recv().await {
        let line = match msg {
            Outgoing::Line(line) => line,
            Outgoing::Close => break,
        };
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        if let Err(e) = write.write_all(&buf).await {
            if let Some(inner) = inner.upgrade() {
                inner.close_with(format!("writing to computerd failed: {e}"));
            }
            return;
        }
        // Flush when nothing else is queued, so a burst goes out as one write.
        if rx.is_empty()
            && let Err(e) = write.flush().await
        {
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
    let read = BufReader::with_capacity(64 * 1024, read);
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
        let Ok(env) = serde_json::from_slice::<Envelope>(&line) else {
            tracing::warn!("computerd sent a line that is not JSON-RPC; ignored");
            continue;
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
            None => Ok(env.result.unwrap_or(Value::Null)),
        };
        let _ = tx.send(outcome);
    };
    if let Some(inner) = inner.upgrade() {
        inner.close_with(reason);
    }
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

    /// A fake daemon: answers requests in reverse order of arrival, two at a time.
    #[tokio::test]
    async fn replies_are_matched_by_id_in_any_order() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let client = DaemonClient::new(a);
        let server = tokio::spawn(async move {
            let (r, mut w) = tokio::io::split(b);
            let mut lines = BufReader::new(r).lines();
            let mut held = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                let env: Envelope = serde_json::from_str(&line).unwrap();
                held.push(env);
                if held.len() == 2 {
                    for env in held.drain(..).rev() {
                        let reply = Envelope::reply(env.id, Ok(json!({"echo": env.method})));
                        w.write_all(format!("{}\n", reply.to_line()).as_bytes())
                            .await
                            .unwrap();
                    }
                }
            }
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
