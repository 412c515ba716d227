//! One CDP connection, whatever carries it: command ids and their waiting
//! callers, and the ring of events kept for `cdp.events`.
//!
//! A transport ([`super::ws`], [`super::pipe`]) gets the outbound messages
//! from the receiver [`CdpConn::new`] returns, hands each inbound message
//! to [`CdpConn::on_message`], and calls [`CdpConn::end`] with words when
//! it stops. After that every call waiting and every call to come fails
//! with those words, and the connection says it is closed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computerd::protocol::{CdpEvent, CdpEventsParams, CdpEventsResult, RpcError, limits};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

/// Why a command got no result.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// The browser answered with an error (its words, after the method).
    Browser(RpcError),
    /// The browser did not answer within the bound.
    Timeout(String),
    /// The connection ended (its words).
    Closed(String),
}

type Reply = std::result::Result<Value, CallError>;

/// Outbound messages a transport takes, in order.
pub type Outbox = mpsc::Receiver<String>;

struct State {
    pending: HashMap<u64, (String, oneshot::Sender<Reply>)>,
    closed: Option<String>,
}

struct Ring {
    events: VecDeque<(CdpEvent, usize)>,
    bytes: usize,
    /// The seq the next event gets.
    next: u64,
}

impl Ring {
    fn first_seq(&self) -> u64 {
        self.events.front().map_or(self.next, |(e, _)| e.seq)
    }
}

/// Events never kept: the accessibility tree's own upkeep while its
/// domain is on (the page tools turn it on so a snapshot reads a tree the
/// renderer keeps, not one built anew each time), which on a busy page
/// would push the events the tools wait for out of the ring.
const UNKEPT: &[&str] = &["Accessibility.nodesUpdated", "Accessibility.loadComplete"];

/// A live view's frames (a cast shares the model's connection to a
/// computer's own browser): only the newest few are kept, so a busy cast
/// never pushes the events the page tools wait for out of the ring. The
/// browser sends the next frame only once the last is acked, and the
/// cast reads every frame it is sent at once, so older ones are read.
const FRAME_EVENT: &str = "Page.screencastFrame";
const FRAMES_KEPT: usize = 8;

/// A CDP connection: send commands, read events.
pub struct CdpConn {
    out: mpsc::Sender<String>,
    next_id: AtomicU64,
    state: Mutex<State>,
    ring: Mutex<Ring>,
    /// Woken on every event and at the end.
    arrived: Notify,
    /// Cancelled at the end: the transport's tasks stop on it.
    stop: tokio_util::sync::CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes a call's entry when its caller stops waiting (dropped or timed out).
struct Waiting<'a> {
    conn: &'a CdpConn,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.conn.state).pending.remove(&self.id);
    }
}

impl CdpConn {
    /// A connection and the receiver its transport sends from.
    pub fn new() -> (Arc<CdpConn>, Outbox) {
        let (out, rx) = mpsc::channel(256);
        let conn = Arc::new(CdpConn {
            out,
            next_id: AtomicU64::new(1),
            state: Mutex::new(State {
                pending: HashMap::new(),
                closed: None,
            }),
            ring: Mutex::new(Ring {
                events: VecDeque::new(),
                bytes: 0,
                next: 1,
            }),
            arrived: Notify::new(),
            stop: tokio_util::sync::CancellationToken::new(),
        });
        (conn, rx)
    }

    /// The words it ended with, once it has.
    pub fn closed(&self) -> Option<String> {
        lock(&self.state).closed.clone()
    }

    /// Resolves once the connection has ended: a transport's tasks stop
    /// on it.
    pub fn stopped(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// The next message its transport sends: None once the connection has
    /// ended or nothing more can be sent.
    pub async fn outgoing(&self, outbox: &mut Outbox) -> Option<String> {
        tokio::select! {
            _ = self.stopped() => None,
            t = outbox.recv() => t,
        }
    }

    /// The connection is over (its transport stopped, or its client let it
    /// go): fail every waiting call with `why` and stop the transport.
    pub fn end(&self, why: impl Into<String>) {
        let why = why.into();
        let pending = {
            let mut s = lock(&self.state);
            if s.closed.is_none() {
                tracing::debug!("the browser's CDP connection ended: {why}");
                s.closed = Some(why.clone());
            }
            std::mem::take(&mut s.pending)
        };
        for (_, (_, tx)) in pending {
            let _ = tx.send(Err(CallError::Closed(why.clone())));
        }
        self.stop.cancel();
        self.arrived.notify_waiters();
    }

    /// One command: its result, or why there is none. Dropping the future
    /// stops waiting (the browser's late answer is then let go).
    pub async fn call(
        &self,
        method: &str,
        params: Option<Value>,
        session: Option<&str>,
        timeout: Duration,
    ) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({ "id": id, "method": method });
        if let Some(p) = params {
            msg["params"] = p;
        }
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_string());
        }
        let text = msg.to_string();
        if text.len() > limits::CDP_MESSAGE_MAX_BYTES {
            return Err(CallError::Browser(RpcError::limit(format!(
                "{method}: the command is {} bytes, over the {} MiB a CDP message may be",
                text.len(),
                limits::CDP_MESSAGE_MAX_BYTES >> 20
            ))));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut s = lock(&self.state);
            if let Some(why) = &s.closed {
                return Err(CallError::Closed(why.clone()));
            }
            s.pending.insert(id, (method.to_string(), tx));
        }
        let _waiting = Waiting { conn: self, id };
        if self.out.send(text).await.is_err() {
            return Err(CallError::Closed(
                self.closed()
                    .unwrap_or_else(|| "the browser's transport stopped".into()),
            ));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => {
                Err(CallError::Closed(self.closed().unwrap_or_else(|| {
                    "the browser's transport stopped".into()
                })))
            }
            Err(_) => Err(CallError::Timeout(format!(
                "{method}: the browser did not answer within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// One message from the browser: a reply to a command, or an event.
    /// A message of another shape is logged and let go.
    pub fn on_message(&self, text: &[u8]) {
        let msg: Value = match serde_json::from_slice(text) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(
                    "the browser sent a message that is not JSON ({} bytes): {e}",
                    text.len()
                );
                return;
            }
        };
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            let Some((method, tx)) = lock(&self.state).pending.remove(&id) else {
                return;
            };
            let reply = match msg.get("error") {
                Some(err) => {
                    let words = err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("an error without words");
                    let data = err
                        .get("data")
                        .and_then(Value::as_str)
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default();
                    Err(CallError::Browser(RpcError::invalid(format!(
                        "{method}: {words}{data}"
                    ))))
                }
                None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = tx.send(reply);
            return;
        }
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            return;
        };
        if UNKEPT.contains(&method) {
            return;
        }
        let event = CdpEvent {
            seq: 0,
            method: method.to_string(),
            params: msg.get("params").cloned().unwrap_or(Value::Null),
            session_id: msg
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        self.keep(event, text.len());
    }

    fn keep(&self, mut event: CdpEvent, size: usize) {
        {
            let mut r = lock(&self.ring);
            event.seq = r.next;
            r.next += 1;
            r.bytes += size;
            let frame = event.method == FRAME_EVENT;
            r.events.push_back((event, size));
            if frame {
                let is_frame = |(e, _): &(CdpEvent, usize)| e.method == FRAME_EVENT;
                if r.events.iter().filter(|e| is_frame(e)).count() > FRAMES_KEPT
                    && let Some(i) = r.events.iter().position(is_frame)
                    && let Some((_, s)) = r.events.remove(i)
                {
                    r.bytes -= s;
                }
            }
            while r.events.len() > limits::CDP_EVENTS_KEPT
                || (r.bytes > limits::CDP_EVENTS_KEPT_BYTES && r.events.len() > 1)
            {
                if let Some((_, s)) = r.events.pop_front() {
                    r.bytes -= s;
                }
            }
        }
        self.arrived.notify_waiters();
    }

    /// The events `p` asks for, waiting up to its `waitMs` for a first one.
    pub async fn events(&self, p: &CdpEventsParams) -> CdpEventsResult {
        let wait = Duration::from_millis(p.wait_ms.unwrap_or(0));
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.arrived.notified();
            let read = self.read(p);
            if !read.events.is_empty()
                || self.closed().is_some()
                || tokio::time::Instant::now() >= deadline
            {
                return read;
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }

    fn read(&self, p: &CdpEventsParams) -> CdpEventsResult {
        let r = lock(&self.ring);
        // A since past the newest reads from now on.
        let since = p.since.unwrap_or(0).max(1).min(r.next);
        let first = r.first_seq();
        let dropped = first.saturating_sub(since);
        let max = p.max.unwrap_or(limits::CDP_EVENTS_MAX) as usize;
        let wanted = |e: &CdpEvent| {
            p.session_id
                .as_deref()
                .is_none_or(|s| e.session_id.as_deref() == Some(s))
                && p.methods.as_ref().is_none_or(|ms| {
                    ms.iter().any(|m| {
                        if m.ends_with('.') {
                            e.method.starts_with(m.as_str())
                        } else {
                            e.method == *m
                        }
                    })
                })
        };
        let mut events = Vec::new();
        let mut next = since.max(first);
        for (e, _) in r.events.iter().filter(|(e, _)| e.seq >= since) {
            if events.len() >= max {
                break;
            }
            next = e.seq + 1;
            if wanted(e) {
                events.push(e.clone());
            }
        }
        if events.len() < max {
            next = next.max(r.next);
        }
        CdpEventsResult {
            events,
            next,
            dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(conn: &CdpConn, method: &str, session: Option<&str>) {
        let mut m = json!({"method": method, "params": {"x": 1}});
        if let Some(s) = session {
            m["sessionId"] = json!(s);
        }
        conn.on_message(m.to_string().as_bytes());
    }

    #[tokio::test]
    async fn replies_find_their_callers_and_errors_name_the_method() {
        let (conn, mut out) = CdpConn::new();
        let c = Arc::clone(&conn);
        let call = tokio::spawn(async move {
            c.call(
                "Page.navigate",
                Some(json!({"url": "x"})),
                Some("S1"),
                Duration::from_secs(5),
            )
            .await
        });
        let sent: Value = serde_json::from_str(&out.recv().await.unwrap()).unwrap();
        assert_eq!(sent["method"], "Page.navigate");
        assert_eq!(sent["sessionId"], "S1");
        assert_eq!(sent["params"]["url"], "x");
        let id = sent["id"].as_u64().unwrap();
        conn.on_message(
            json!({"id": id, "error": {"code": -32000, "message": "Cannot navigate to invalid URL"}})
                .to_string()
                .as_bytes(),
        );
        match call.await.unwrap() {
            Err(CallError::Browser(e)) => {
                assert_eq!(e.message, "Page.navigate: Cannot navigate to invalid URL")
            }
            other => panic!("{other:?}"),
        }
        let c = Arc::clone(&conn);
        let call = tokio::spawn(async move {
            c.call("Browser.getVersion", None, None, Duration::from_secs(5))
                .await
        });
        let sent: Value = serde_json::from_str(&out.recv().await.unwrap()).unwrap();
        assert!(sent.get("params").is_none() && sent.get("sessionId").is_none());
        conn.on_message(
            json!({"id": sent["id"], "result": {"product": "Chrome/1"}})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(call.await.unwrap().unwrap()["product"], "Chrome/1");
    }

    #[tokio::test]
    async fn the_end_fails_every_waiting_call_and_every_later_one() {
        let (conn, _out) = CdpConn::new();
        let c = Arc::clone(&conn);
        let call =
            tokio::spawn(async move { c.call("A.b", None, None, Duration::from_secs(30)).await });
        tokio::task::yield_now().await;
        while lock(&conn.state).pending.is_empty() {
            tokio::task::yield_now().await;
        }
        conn.end("the browser ended (exit code 1)");
        assert_eq!(
            call.await.unwrap(),
            Err(CallError::Closed("the browser ended (exit code 1)".into()))
        );
        assert_eq!(
            conn.call("A.b", None, None, Duration::from_secs(1)).await,
            Err(CallError::Closed("the browser ended (exit code 1)".into()))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_call_times_out_and_is_forgotten() {
        let (conn, _out) = CdpConn::new();
        let r = conn
            .call("Page.reload", None, None, Duration::from_millis(200))
            .await;
        assert_eq!(
            r,
            Err(CallError::Timeout(
                "Page.reload: the browser did not answer within 200 ms".into()
            ))
        );
        assert!(lock(&conn.state).pending.is_empty());
    }

    #[tokio::test]
    async fn the_accessibility_trees_upkeep_is_not_kept() {
        let (conn, _out) = CdpConn::new();
        event(&conn, "Accessibility.nodesUpdated", Some("S1"));
        event(&conn, "Accessibility.loadComplete", Some("S1"));
        event(&conn, "Page.loadEventFired", Some("S1"));
        let all = conn.events(&CdpEventsParams::default()).await;
        let kept: Vec<&str> = all.events.iter().map(|e| e.method.as_str()).collect();
        assert_eq!(kept, ["Page.loadEventFired"]);
    }

    #[tokio::test]
    async fn events_are_read_by_method_prefix_session_and_since() {
        let (conn, _out) = CdpConn::new();
        event(&conn, "Network.requestWillBeSent", Some("S1"));
        event(&conn, "Page.loadEventFired", Some("S1"));
        event(&conn, "Network.responseReceived", Some("S2"));
        let all = conn.events(&CdpEventsParams::default()).await;
        assert_eq!(all.events.len(), 3);
        assert_eq!(all.next, 4);
        assert_eq!(all.dropped, 0);
        let net = conn
            .events(&CdpEventsParams {
                methods: Some(vec!["Network.".into()]),
                session_id: Some("S1".into()),
                ..Default::default()
            })
            .await;
        assert_eq!(net.events.len(), 1);
        assert_eq!(net.events[0].method, "Network.requestWillBeSent");
        let later = conn
            .events(&CdpEventsParams {
                since: Some(all.next),
                ..Default::default()
            })
            .await;
        assert!(later.events.is_empty());
        assert_eq!(later.next, 4);
        // max cuts the read, and next resumes after the last one looked at.
        let one = conn
            .events(&CdpEventsParams {
                max: Some(1),
                ..Default::default()
            })
            .await;
        assert_eq!((one.events.len(), one.next), (1, 2));
    }

    #[tokio::test]
    async fn a_wait_ends_on_the_first_matching_event() {
        let (conn, _out) = CdpConn::new();
        let c = Arc::clone(&conn);
        let waiter = tokio::spawn(async move {
            c.events(&CdpEventsParams {
                methods: Some(vec!["Page.loadEventFired".into()]),
                wait_ms: Some(10_000),
                ..Default::default()
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        event(&conn, "Page.frameNavigated", None);
        event(&conn, "Page.loadEventFired", None);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.events.len(), 1);
        assert_eq!(got.events[0].seq, 2);
    }

    #[test]
    fn a_casts_frames_keep_only_the_newest_and_never_push_other_events_out() {
        let (conn, _out) = CdpConn::new();
        event(&conn, "Page.loadEventFired", Some("s"));
        for _ in 0..limits::CDP_EVENTS_KEPT + 10 {
            event(&conn, FRAME_EVENT, Some("cast"));
        }
        let all = conn.read(&CdpEventsParams {
            since: Some(1),
            ..Default::default()
        });
        assert_eq!(all.dropped, 0);
        assert_eq!(all.events[0].method, "Page.loadEventFired");
        let frames: Vec<u64> = all.events[1..].iter().map(|e| e.seq).collect();
        let newest = limits::CDP_EVENTS_KEPT as u64 + 11;
        assert_eq!(frames, ((newest - 7)..=newest).collect::<Vec<_>>());
    }

    #[test]
    fn the_ring_lets_the_oldest_go_and_says_how_many() {
        let (conn, _out) = CdpConn::new();
        for _ in 0..limits::CDP_EVENTS_KEPT + 10 {
            event(&conn, "Log.entryAdded", None);
        }
        let r = conn.read(&CdpEventsParams {
            since: Some(1),
            ..Default::default()
        });
        assert_eq!(r.dropped, 10);
        assert_eq!(r.events.len(), limits::CDP_EVENTS_MAX as usize);
        assert_eq!(r.events[0].seq, 11);
    }
}
