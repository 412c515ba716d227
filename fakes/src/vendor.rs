//! Fake Browserbase and Kernel APIs, for tests (and a standalone run, the
//! example `vendor_fake`):
//! an HTTP server of ours on 127.0.0.1 that speaks the documented subset
//! the providers call, checks the key, keeps browsers in memory, and hands
//! out CDP URLs backed by one real headless [`HostChromium`].
//!
//! A browser's CDP URL is `ws://127.0.0.1:<relay>/cdp/<canary>/<id>`: a
//! relay of ours to the Chromium's own endpoint, refused (404) once the
//! browser has ended or been forgotten, and cut when it ends. The canary
//! is a random word a test looks for in every error, ref, list, Debug and
//! log: it must never appear. Error bodies hold vendor words (and echo the
//! key sent) that must never reach a provider's error either.
//!
//! Scripts ([`FakeVendor::fail`], [`FakeVendor::lose_next_create`],
//! [`FakeVendor::pending_reads`], [`FakeVendor::release_reads`],
//! [`FakeVendor::forget`]) answer an error status, lose a create's answer
//! after the browser was made, lag a status, or forget a browser.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use computer_providers::cdp::HostChromium;
use computer_providers::types::{ErrorCode, ProviderError, Result};
use computer_providers::vendor::{now_rfc3339, plus_secs};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Which vendor a fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Browserbase,
    Kernel,
}

/// A call a script can answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Create,
    List,
    Get,
    Release,
    LiveView,
}

/// How a create's answer is lost (the browser is made either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lose {
    /// Answer 500.
    Status500,
    /// Begin a 200 and cut the connection mid-body.
    Cut,
    /// Answer 200 with no browser in the body.
    Empty,
}

#[derive(Default)]
struct Script {
    fail: Vec<(Route, u16)>,
    lose: Option<Lose>,
    pending_reads: u32,
    release_reads: u32,
}

struct Session {
    id: String,
    created_at: String,
    timeout_s: u64,
    /// userMetadata or tags, as sent.
    labels: Map<String, Value>,
    /// Reads still answered PENDING.
    pending: u32,
    /// After a release: reads still answered as running.
    releasing: Option<u32>,
    ended_at: Option<String>,
    /// Cuts the browser's relayed CDP connections when it ends.
    stop: CancellationToken,
}

impl Session {
    fn end(&mut self) {
        if self.ended_at.is_none() {
            self.ended_at = Some(now_rfc3339());
            self.stop.cancel();
        }
    }
    /// A release asked: the browser ends now, or after `lag` reads that
    /// still answer it as running (asked again, nothing changes).
    fn ask_release(&mut self, lag: u32) {
        if self.ended_at.is_none() && self.releasing.is_none() {
            if lag == 0 {
                self.end();
            } else {
                self.releasing = Some(lag);
            }
        }
    }
    /// One read: lags count down.
    fn read(&mut self) {
        if self.pending > 0 {
            self.pending -= 1;
        }
        if let Some(n) = self.releasing {
            if n == 0 {
                self.end();
            } else {
                self.releasing = Some(n - 1);
            }
        }
    }
    fn status(&self) -> &'static str {
        if self.ended_at.is_some() {
            "COMPLETED"
        } else if self.pending > 0 {
            "PENDING"
        } else {
            "RUNNING"
        }
    }
}

struct Shared {
    kind: Kind,
    key: String,
    canary: String,
    api_port: u16,
    relay_port: u16,
    /// The Chromium's endpoint: host:port and path.
    chromium_addr: String,
    chromium_path: String,
    sessions: Mutex<BTreeMap<String, Session>>,
    script: Mutex<Script>,
    calls: Mutex<Vec<String>>,
    next: AtomicU64,
}

/// A fake vendor API. Stops, with its Chromium, when dropped.
pub struct FakeVendor {
    shared: Arc<Shared>,
    stop: CancellationToken,
    api_url: String,
    _chromium: HostChromium,
}

impl std::fmt::Debug for FakeVendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeVendor")
            .field("kind", &self.shared.kind)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeVendor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An answer of `status` with the JSON `body` cut mid-way: its length is
/// announced, half of it sent, then the connection fails.
pub fn cut(status: StatusCode, body: &Value) -> Response {
    let text = body.to_string();
    let half = Bytes::from(text.as_bytes()[..text.len() / 2].to_vec());
    let chunks: Vec<std::result::Result<Bytes, std::io::Error>> =
        vec![Ok(half), Err(std::io::Error::other("cut"))];
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("content-length", text.len().to_string())
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn io_err(what: &str, e: std::io::Error) -> ProviderError {
    ProviderError::new(ErrorCode::Failed, format!("the fake vendor's {what}: {e}"))
}

impl FakeVendor {
    /// Start a fake of `kind` with its own Chromium, its API and its relay
    /// on ports of 127.0.0.1.
    pub async fn start(kind: Kind) -> Result<FakeVendor> {
        let chromium = HostChromium::start().await?;
        let rest = chromium
            .ws_url()
            .strip_prefix("ws://")
            .ok_or_else(|| ProviderError::failed("the Chromium's endpoint is not ws://"))?;
        let (addr, path) = rest
            .split_once('/')
            .ok_or_else(|| ProviderError::failed("the Chromium's endpoint has no path"))?;
        let api = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| io_err("API port", e))?;
        let relay = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| io_err("relay port", e))?;
        let api_port = api.local_addr().map_err(|e| io_err("API port", e))?.port();
        let relay_port = relay
            .local_addr()
            .map_err(|e| io_err("relay port", e))?
            .port();
        let shared = Arc::new(Shared {
            kind,
            key: format!("fake-key-{}", computer_providers::random::random_hex(8)?),
            canary: format!("canary{}", computer_providers::random::random_hex(12)?),
            api_port,
            relay_port,
            chromium_addr: addr.to_string(),
            chromium_path: format!("/{path}"),
            sessions: Mutex::new(BTreeMap::new()),
            script: Mutex::new(Script::default()),
            calls: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
        });
        let stop = CancellationToken::new();
        let app = match kind {
            Kind::Browserbase => Router::new()
                .route("/v1/sessions", post(bb_create).get(bb_list))
                .route("/v1/sessions/{id}", get(bb_get).post(bb_update))
                .route("/v1/sessions/{id}/debug", get(bb_debug)),
            Kind::Kernel => Router::new()
                .route("/browsers", post(k_create).get(k_list))
                .route("/browsers/{id}", get(k_get).delete(k_delete)),
        }
        .route("/live/{canary}/{id}", get(live_page))
        .with_state(Arc::clone(&shared));
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(api, app)
                .with_graceful_shutdown(s.cancelled_owned())
                .await;
        });
        let s = stop.clone();
        let r = Arc::clone(&shared);
        tokio::spawn(async move {
            loop {
                let sock = tokio::select! {
                    _ = s.cancelled() => return,
                    a = relay.accept() => match a {
                        Ok((sock, _)) => sock,
                        Err(_) => continue,
                    },
                };
                tokio::spawn(relay_one(Arc::clone(&r), sock, s.clone()));
            }
        });
        Ok(FakeVendor {
            api_url: format!("http://127.0.0.1:{api_port}"),
            shared,
            stop,
            _chromium: chromium,
        })
    }

    /// The API's base URL (the provider's `api_url` setting).
    pub fn api_url(&self) -> &str {
        &self.api_url
    }
    /// The one key it takes.
    pub fn key(&self) -> &str {
        &self.shared.key
    }
    /// The word in every CDP and live view URL it hands out.
    pub fn canary(&self) -> &str {
        &self.shared.canary
    }
    /// The next call of `route` answers `status` (once per call to this).
    pub fn fail(&self, route: Route, status: u16) {
        lock(&self.shared.script).fail.push((route, status));
    }
    /// The next create makes its browser and loses its answer.
    pub fn lose_next_create(&self, how: Lose) {
        lock(&self.shared.script).lose = Some(how);
    }
    /// New browsers read PENDING for `n` reads.
    pub fn pending_reads(&self, n: u32) {
        lock(&self.shared.script).pending_reads = n;
    }
    /// A released browser reads as running for `n` more reads.
    pub fn release_reads(&self, n: u32) {
        lock(&self.shared.script).release_reads = n;
    }
    /// Forget a browser, as a vendor that no longer knows it.
    pub fn forget(&self, id: &str) {
        if let Some(mut s) = lock(&self.shared.sessions).remove(id) {
            s.end();
        }
    }
    /// Every call so far, as `METHOD route` (`POST /v1/sessions`).
    pub fn calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }
    /// How many creates were asked.
    pub fn creates(&self) -> usize {
        let create = match self.shared.kind {
            Kind::Browserbase => "POST /v1/sessions",
            Kind::Kernel => "POST /browsers",
        };
        self.calls().iter().filter(|c| *c == create).count()
    }
    /// The ids of browsers that have not ended.
    pub fn live(&self) -> Vec<String> {
        lock(&self.shared.sessions)
            .values()
            .filter(|s| s.ended_at.is_none())
            .map(|s| s.id.clone())
            .collect()
    }
}

fn words(status: u16, sent_key: &str) -> Response {
    // Vendor words a provider must never repeat (they echo the key sent).
    let body = json!({
        "error": format!("vendor-words: status {status} for key {sent_key:?}"),
        "statusCode": status,
    });
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

/// Record the call, check the key, and answer a scripted failure.
fn enter(sh: &Shared, headers: &HeaderMap, call: &str, route: Route) -> Option<Response> {
    lock(&sh.calls).push(call.to_string());
    let sent = match sh.kind {
        Kind::Browserbase => headers
            .get("x-bb-api-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        Kind::Kernel => headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string(),
    };
    if sent != sh.key {
        return Some(words(401, &sent));
    }
    let mut script = lock(&sh.script);
    if let Some(i) = script.fail.iter().position(|(r, _)| *r == route) {
        let (_, status) = script.fail.remove(i);
        return Some(words(status, &sent));
    }
    None
}

fn ok(v: Value) -> Response {
    (StatusCode::OK, axum::Json(v)).into_response()
}

fn bad(why: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": format!("vendor-words: {why}")})),
    )
        .into_response()
}

/// `f`'s answer on the session `id`, or 404 when there is none.
fn with_session(sh: &Shared, id: &str, f: impl FnOnce(&mut Session) -> Response) -> Response {
    match lock(&sh.sessions).get_mut(id) {
        None => not_found(),
        Some(s) => f(s),
    }
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": "vendor-words: not found"})),
    )
        .into_response()
}

fn cdp_url(sh: &Shared, id: &str) -> String {
    format!("ws://127.0.0.1:{}/cdp/{}/{id}", sh.relay_port, sh.canary)
}

fn live_url(sh: &Shared, id: &str) -> String {
    format!("http://127.0.0.1:{}/live/{}/{id}", sh.api_port, sh.canary)
}

/// Make a session, then answer `answer` unless the script loses it.
fn made(
    sh: &Shared,
    timeout_s: u64,
    labels: Map<String, Value>,
    answer: impl Fn(&Session) -> Value,
) -> Response {
    let n = sh.next.fetch_add(1, Ordering::SeqCst);
    let id = format!(
        "fake{n:04}{}",
        computer_providers::random::random_hex(4).unwrap_or_default()
    );
    let (pending, lose) = {
        let mut s = lock(&sh.script);
        (s.pending_reads, s.lose.take())
    };
    let session = Session {
        id: id.clone(),
        created_at: now_rfc3339(),
        timeout_s,
        labels,
        pending,
        releasing: None,
        ended_at: None,
        stop: CancellationToken::new(),
    };
    let body = answer(&session);
    lock(&sh.sessions).insert(id, session);
    match lose {
        None => ok(body),
        Some(Lose::Status500) => words(500, ""),
        Some(Lose::Empty) => ok(json!({})),
        Some(Lose::Cut) => cut(StatusCode::OK, &body),
    }
}

// ---- Browserbase ----

fn bb_session(sh: &Shared, s: &Session, with_url: bool) -> Value {
    let mut v = json!({
        "id": s.id,
        "createdAt": s.created_at,
        "updatedAt": s.created_at,
        "startedAt": s.created_at,
        "expiresAt": plus_secs(&s.created_at, s.timeout_s),
        "endedAt": s.ended_at,
        "projectId": "fake-project",
        "status": s.status(),
        "keepAlive": true,
        "region": "us-west-2",
        "proxyBytes": 0,
        "userMetadata": s.labels,
    });
    if with_url {
        v["connectUrl"] = json!(cdp_url(sh, &s.id));
        v["seleniumRemoteUrl"] = json!("http://127.0.0.1:1/selenium");
        v["signingKey"] = json!(sh.canary);
    }
    v
}

async fn bb_create(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /v1/sessions", Route::Create) {
        return r;
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body is not JSON");
    };
    if v.get("keepAlive") != Some(&json!(true)) {
        return bad("keepAlive must be true here");
    }
    let timeout = v.get("timeout").and_then(Value::as_u64).unwrap_or(300);
    if !(60..=21_600).contains(&timeout) {
        return bad("timeout must be 60 to 21600 seconds");
    }
    let meta = v
        .get("userMetadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if meta.keys().any(|k| k.contains('.')) {
        return bad("a metadata key may not hold a dot");
    }
    if Value::Object(meta.clone()).to_string().len() > 512 {
        return bad("userMetadata is over 512 characters");
    }
    let s2 = Arc::clone(&sh);
    made(&sh, timeout, meta, move |s| bb_session(&s2, s, true))
}

/// `user_metadata['key']:'value'`.
fn parse_q(q: &str) -> Option<(String, String)> {
    let rest = q.strip_prefix("user_metadata['")?;
    let (k, rest) = rest.split_once("']:'")?;
    let v = rest.strip_suffix('\'')?;
    Some((k.to_string(), v.to_string()))
}

async fn bb_list(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /v1/sessions", Route::List) {
        return r;
    }
    let by = match q.get("q") {
        None => None,
        Some(text) => match parse_q(text) {
            Some(kv) => Some(kv),
            None => return bad("q is not a metadata query"),
        },
    };
    let sessions = lock(&sh.sessions);
    let items: Vec<Value> = sessions
        .values()
        .filter(|s| q.get("status").is_none_or(|st| st == s.status()))
        .filter(|s| {
            by.as_ref()
                .is_none_or(|(k, v)| s.labels.get(k).and_then(Value::as_str) == Some(v))
        })
        .map(|s| bb_session(&sh, s, false))
        .collect();
    ok(Value::Array(items))
}

async fn bb_get(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /v1/sessions/{id}", Route::Get) {
        return r;
    }
    with_session(&sh, &id, |s| {
        let v = bb_session(&sh, s, false);
        s.read();
        ok(v)
    })
}

async fn bb_update(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /v1/sessions/{id}", Route::Release) {
        return r;
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body is not JSON");
    };
    if v.get("status").and_then(Value::as_str) != Some("REQUEST_RELEASE") {
        return bad("status must be REQUEST_RELEASE");
    }
    let lag = lock(&sh.script).release_reads;
    with_session(&sh, &id, |s| {
        s.ask_release(lag);
        ok(bb_session(&sh, s, false))
    })
}

async fn bb_debug(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(
        &sh,
        &headers,
        "GET /v1/sessions/{id}/debug",
        Route::LiveView,
    ) {
        return r;
    }
    let sessions = lock(&sh.sessions);
    match sessions.get(&id) {
        Some(s) if s.ended_at.is_none() => ok(json!({
            "debuggerFullscreenUrl": live_url(&sh, &id),
            "debuggerUrl": live_url(&sh, &id),
            "wsUrl": cdp_url(&sh, &id),
            "pages": [],
        })),
        _ => not_found(),
    }
}

// ---- Kernel ----

fn k_browser(sh: &Shared, s: &Session) -> Value {
    json!({
        "session_id": s.id,
        "created_at": s.created_at,
        "timeout_seconds": s.timeout_s,
        "headless": false,
        "stealth": false,
        "cdp_ws_url": cdp_url(sh, &s.id),
        "browser_live_view_url": live_url(sh, &s.id),
        "tags": s.labels,
        "deleted_at": s.ended_at,
    })
}

async fn k_create(State(sh): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /browsers", Route::Create) {
        return r;
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body is not JSON");
    };
    let timeout = v
        .get("timeout_seconds")
        .and_then(Value::as_u64)
        .unwrap_or(60);
    if !(10..=259_200).contains(&timeout) {
        return bad("timeout_seconds must be 10 to 259200");
    }
    let tags = v
        .get("tags")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let s2 = Arc::clone(&sh);
    made(&sh, timeout, tags, move |s| k_browser(&s2, s))
}

async fn k_list(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /browsers", Route::List) {
        return r;
    }
    let status = q.get("status").map(String::as_str).unwrap_or("active");
    if !["all", "active", "deleted"].contains(&status) {
        return bad("status must be active, deleted or all");
    }
    let offset: usize = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
    let limit: usize = q.get("limit").and_then(|o| o.parse().ok()).unwrap_or(20);
    let sessions = lock(&sh.sessions);
    let items: Vec<Value> = sessions
        .values()
        .filter(|s| match status {
            "active" => s.ended_at.is_none(),
            "deleted" => s.ended_at.is_some(),
            _ => true,
        })
        .skip(offset)
        .take(limit)
        .map(|s| k_browser(&sh, s))
        .collect();
    ok(Value::Array(items))
}

async fn k_get(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /browsers/{id}", Route::Get) {
        return r;
    }
    with_session(&sh, &id, |s| {
        s.read();
        ok(k_browser(&sh, s))
    })
}

async fn k_delete(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "DELETE /browsers/{id}", Route::Release) {
        return r;
    }
    let lag = lock(&sh.script).release_reads;
    with_session(&sh, &id, |s| {
        s.ask_release(lag);
        StatusCode::OK.into_response()
    })
}

async fn live_page(
    State(sh): State<Arc<Shared>>,
    Path((canary, id)): Path<(String, String)>,
) -> Response {
    let known = lock(&sh.sessions)
        .get(&id)
        .is_some_and(|s| s.ended_at.is_none());
    if canary != sh.canary || !known {
        return not_found();
    }
    (StatusCode::OK, "the fake vendor's live view").into_response()
}

// ---- the CDP relay ----

/// One CDP connection: read the upgrade request, check its canary and
/// browser, and pipe it to the Chromium with the path rewritten.
async fn relay_one(sh: Arc<Shared>, mut sock: TcpStream, stop: CancellationToken) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if read != Ok(true) {
        return;
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let Some(line_end) = text.find("\r\n") else {
        return;
    };
    let mut parts = text[..line_end].split(' ');
    let (method, path, version) = (parts.next(), parts.next(), parts.next());
    let target = path
        .and_then(|p| p.strip_prefix("/cdp/"))
        .and_then(|p| p.split_once('/'));
    let session = target.and_then(|(canary, id)| {
        (canary == sh.canary)
            .then(|| {
                lock(&sh.sessions)
                    .get(id)
                    .filter(|s| s.ended_at.is_none())
                    .map(|s| s.stop.clone())
            })
            .flatten()
    });
    let (Some("GET"), Some(ended), Some(version)) = (method, session, version) else {
        let _ = sock
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let Ok(mut up) = TcpStream::connect(&sh.chromium_addr).await else {
        let _ = sock
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let rewritten = format!("GET {} {version}{}", sh.chromium_path, &text[line_end..]);
    if up.write_all(rewritten.as_bytes()).await.is_err() {
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut sock, &mut up) => {}
        _ = ended.cancelled() => {}
        _ = stop.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metadata_query_is_read_as_written() {
        assert_eq!(
            parse_q("user_metadata['computer-mcp_session']:'s1'"),
            Some(("computer-mcp_session".into(), "s1".into()))
        );
        assert_eq!(parse_q("status:'x'"), None);
    }
}
