//! A fake phone harness REST API, for the phone-harness provider's tests:
//! an HTTP server of ours on 127.0.0.1 that speaks the subset the
//! provider calls (`POST /sessions` with an `Idempotency-Key` and replay
//! by it, `GET /sessions/requests/{key}`, `GET /sessions`,
//! `GET`/`DELETE /sessions/{id}`), checks the key, and hands every ready
//! session an adb endpoint of its own, as each cloud phone has its own
//! address: a TCP forwarder on a port of its own to the phone it is told
//! ([`FakePhoneHarness::point_adb`]; in the tests, a locked fixture phone
//! and its code), ended with the session. One session's release (which
//! drops its adb server transport) then leaves the others' links up.
//!
//! Knobs: lose the next POST's answer after making its phone
//! ([`Lose`]), refuse the next POST ([`Refusal`]), answer `provisioning`
//! for the first reads of a new phone ([`FakePhoneHarness::ready_after`])
//! or fail its boot, and answer `closing` for reads after a DELETE
//! ([`FakePhoneHarness::delete_lag`]), or fail the recovery by key
//! ([`FakePhoneHarness::fail_by_key`]). It counts POSTs per key and
//! records DELETEs. Error bodies echo the key sent, and every session
//! carries a watch URL holding the canary: neither may reach a provider's
//! words.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use computer_providers::types::Result;
use computer_providers::vendor::{now_rfc3339, plus_secs};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How the next POST's answer is lost; its phone is made either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lose {
    /// No answer at all (until the fake stops): the client's bound ends it.
    Hang,
    /// Answer 500.
    Status500,
    /// Answer 200 with no session.
    Empty,
    /// Begin a 201 and cut the connection mid-body.
    Cut,
}

/// How the next POST is refused; nothing is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 503 `phones_busy`.
    PhonesBusy,
    /// 429 `session_limit`, with `available_session_slots: 0`.
    SessionLimit,
    /// 402: no credit.
    NoCredit,
}

struct Sess {
    id: String,
    request_key: Option<String>,
    created_at: String,
    timeout_s: u64,
    /// Reads still answered `provisioning`.
    provisioning: u32,
    /// Its boot fails once provisioning is over.
    fails: bool,
    /// After a DELETE: reads still answered `closing`.
    closing: Option<u32>,
    gone: bool,
    /// Its adb endpoint, from its first ready answer on.
    forward: Option<Forward>,
}

/// A session's own adb endpoint: a TCP forwarder on a port of 127.0.0.1
/// to the phone the fake was pointed at when the session became ready.
/// Ending it ends every connection through it.
struct Forward {
    port: u16,
    stop: CancellationToken,
}

impl Forward {
    fn start(to: (String, u16), stop: CancellationToken) -> std::io::Result<Forward> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let ends = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = ends.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((mut inbound, _)) = accepted else {
                    return;
                };
                let (to, ends) = (to.clone(), ends.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect((to.0.as_str(), to.1)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        () = ends.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Ok(Forward { port, stop })
    }
}

impl Sess {
    fn state(&self) -> &'static str {
        if self.closing.is_some() {
            "closing"
        } else if self.provisioning > 0 {
            "provisioning"
        } else if self.fails {
            "error"
        } else {
            "ready"
        }
    }
    /// Gone: its endpoint, and every link through it, ends.
    fn end(&mut self) {
        self.gone = true;
        if let Some(f) = self.forward.take() {
            f.stop.cancel();
        }
    }

    /// One read: lags count down.
    fn read(&mut self) {
        match self.closing {
            Some(0) => self.end(),
            Some(n) => self.closing = Some(n - 1),
            None if self.provisioning > 0 => self.provisioning -= 1,
            None => {}
        }
    }
}

#[derive(Default)]
struct Script {
    lose: Option<Lose>,
    refuse: Option<Refusal>,
    ready_after: u32,
    fail_boot: bool,
    delete_lag: u32,
    by_key_fails: u32,
}

struct Shared {
    key: String,
    canary: String,
    /// host, port, code handed to ready sessions.
    adb: Mutex<(String, u16, String)>,
    sessions: Mutex<BTreeMap<String, Sess>>,
    script: Mutex<Script>,
    posts: Mutex<BTreeMap<String, u32>>,
    deletes: Mutex<Vec<String>>,
    next: AtomicU64,
    stop: CancellationToken,
}

/// A fake phone harness. Stops when dropped.
pub struct FakePhoneHarness {
    shared: Arc<Shared>,
    url: String,
}

impl std::fmt::Debug for FakePhoneHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakePhoneHarness")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Drop for FakePhoneHarness {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakePhoneHarness {
    /// Start the fake on a port of 127.0.0.1, taking the key `key` (a
    /// test's canary key).
    pub async fn start(key: &str) -> Result<FakePhoneHarness> {
        let (listener, port) = crate::bind_local().await?;
        let shared = Arc::new(Shared {
            key: key.to_string(),
            canary: format!("canary{}", computer_providers::random::random_hex(12)?),
            adb: Mutex::new(("127.0.0.1".into(), 1, "0000".into())),
            sessions: Mutex::new(BTreeMap::new()),
            script: Mutex::new(Script::default()),
            posts: Mutex::new(BTreeMap::new()),
            deletes: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            stop: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/sessions", get(list).post(create))
            .route("/sessions/requests/{key}", get(by_key))
            .route("/sessions/{id}", get(read).delete(delete))
            .with_state(Arc::clone(&shared));
        let stop = shared.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Ok(FakePhoneHarness {
            shared,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Change what the next requests meet.
    fn script(&self, change: impl FnOnce(&mut Script)) {
        change(&mut lock(&self.shared.script));
    }
    /// The API's base URL (the provider's `api_url` setting).
    pub fn api_url(&self) -> &str {
        &self.url
    }
    /// The random word every watch URL holds.
    pub fn canary(&self) -> &str {
        &self.shared.canary
    }
    /// Ready sessions' adb link from now on.
    pub fn point_adb(&self, host: &str, port: u16, code: &str) {
        *lock(&self.shared.adb) = (host.into(), port, code.into());
    }
    /// The next POST makes its phone and loses its answer.
    pub fn lose_next_post(&self, how: Lose) {
        self.script(|s| s.lose = Some(how));
    }
    /// The next POST is refused.
    pub fn refuse_next_post(&self, how: Refusal) {
        self.script(|s| s.refuse = Some(how));
    }
    /// Phones made from now on read `provisioning` for their first `n`
    /// reads.
    pub fn ready_after(&self, n: u32) {
        self.script(|s| s.ready_after = n);
    }
    /// Phones made from now on fail their boot (read `error`).
    pub fn fail_boot(&self, fail: bool) {
        self.script(|s| s.fail_boot = fail);
    }
    /// A deleted phone reads `closing` for `n` reads before 404.
    pub fn delete_lag(&self, n: u32) {
        self.script(|s| s.delete_lag = n);
    }
    /// The next `n` reads of `GET /sessions/requests/{key}` answer 503
    /// (a create's recovery lost too).
    pub fn fail_by_key(&self, n: u32) {
        self.script(|s| s.by_key_fails = n);
    }
    /// POSTs per Idempotency-Key.
    pub fn posts(&self) -> BTreeMap<String, u32> {
        lock(&self.shared.posts).clone()
    }
    /// The ids DELETE was sent for, in order.
    pub fn deletes(&self) -> Vec<String> {
        lock(&self.shared.deletes).clone()
    }
    /// A session's state as the service has it, without counting a read;
    /// none once it is gone.
    pub fn state(&self, id: &str) -> Option<String> {
        lock(&self.shared.sessions)
            .get(id)
            .filter(|s| !s.gone)
            .map(|s| s.state().to_string())
    }
    /// The ids of the sessions the service has (gone ones left out).
    pub fn session_ids(&self) -> Vec<String> {
        lock(&self.shared.sessions)
            .values()
            .filter(|s| !s.gone)
            .map(|s| s.id.clone())
            .collect()
    }
    /// The port of a session's own adb endpoint, once it was answered ready
    /// (None after it ended).
    pub fn adb_port(&self, id: &str) -> Option<u16> {
        lock(&self.shared.sessions)
            .get(id)
            .and_then(|s| s.forward.as_ref())
            .map(|f| f.port)
    }

    /// A ready session of the account that no provider made (another
    /// client's): its id.
    pub fn add_foreign(&self) -> String {
        make(&self.shared, None, 600, 0, false)
    }
}

fn make(sh: &Shared, key: Option<&str>, timeout_s: u64, provisioning: u32, fails: bool) -> String {
    let id = format!("ph-{}", sh.next.fetch_add(1, Ordering::Relaxed));
    lock(&sh.sessions).insert(
        id.clone(),
        Sess {
            id: id.clone(),
            request_key: key.map(String::from),
            created_at: now_rfc3339(),
            timeout_s,
            provisioning,
            fails,
            closing: None,
            gone: false,
            forward: None,
        },
    );
    id
}

fn answer(sh: &Shared, s: &mut Sess) -> Value {
    let state = s.state();
    let (host, port, code) = lock(&sh.adb).clone();
    if state == "ready" && s.forward.is_none() {
        match Forward::start((host, port), sh.stop.child_token()) {
            Ok(f) => s.forward = Some(f),
            Err(e) => tracing::warn!(session = %s.id, "no adb endpoint: {e}"),
        }
    }
    let adb = match &s.forward {
        Some(f) if state == "ready" => json!({"host": "127.0.0.1", "port": f.port, "code": code}),
        _ => Value::Null,
    };
    json!({
        "id": s.id,
        "state": state,
        "request_key": s.request_key,
        "created_at": s.created_at,
        "expires_at": plus_secs(&s.created_at, s.timeout_s),
        "watch_url": format!("https://watch.phone-harness.test/{}/{}", sh.canary, s.id),
        "progress": {"phase": state, "queue_position": 0},
        "adb": adb,
    })
}

fn error(status: u16, words: String, code: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(json!({"error": words, "code": code}))).into_response()
}

/// None when the key is right; else a 401 that echoes what was sent.
fn refused_key(sh: &Shared, h: &HeaderMap) -> Option<Response> {
    let sent = h
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    (sent != format!("Bearer {}", sh.key))
        .then(|| error(401, format!("invalid credentials: {sent}"), "unauthorized"))
}

async fn create(State(sh): State<Arc<Shared>>, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = refused_key(&sh, &h) {
        return r;
    }
    let Some(key) = h.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return error(400, "Idempotency-Key is required".into(), "bad_request");
    };
    *lock(&sh.posts).entry(key.to_string()).or_default() += 1;
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "body is not JSON".into(), "bad_request");
    };
    let Some(timeout_s) = v.get("timeout_seconds").and_then(Value::as_u64) else {
        return error(400, "timeout_seconds is required".into(), "bad_request");
    };
    // A replay under a key already used answers its session.
    let replay = lock(&sh.sessions)
        .values_mut()
        .find(|s| s.request_key.as_deref() == Some(key))
        .map(|s| answer(&sh, s));
    if let Some(v) = replay {
        return (StatusCode::OK, axum::Json(v)).into_response();
    }
    let (refuse, lose, ready_after, fails) = {
        let mut sc = lock(&sh.script);
        (
            sc.refuse.take(),
            sc.lose.take(),
            sc.ready_after,
            sc.fail_boot,
        )
    };
    match refuse {
        Some(Refusal::PhonesBusy) => {
            return error(503, format!("no phone free for {}", sh.key), "phones_busy");
        }
        Some(Refusal::SessionLimit) => {
            let body = json!({"error": "session limit reached", "code": "session_limit", "available_session_slots": 0});
            return (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
        }
        Some(Refusal::NoCredit) => return error(402, "no credit".into(), "insufficient_credit"),
        None => {}
    }
    let id = make(&sh, Some(key), timeout_s, ready_after, fails);
    let body = lock(&sh.sessions)
        .get_mut(&id)
        .map(|s| answer(&sh, s))
        .unwrap_or_default();
    match lose {
        None => (StatusCode::CREATED, axum::Json(body)).into_response(),
        Some(Lose::Hang) => {
            sh.stop.cancelled().await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Some(Lose::Status500) => error(500, "internal error".into(), "internal"),
        Some(Lose::Empty) => (StatusCode::OK, axum::Json(json!({}))).into_response(),
        Some(Lose::Cut) => crate::vendor::cut(StatusCode::CREATED, &body),
    }
}

async fn by_key(State(sh): State<Arc<Shared>>, h: HeaderMap, Path(key): Path<String>) -> Response {
    if let Some(r) = refused_key(&sh, &h) {
        return r;
    }
    {
        let mut sc = lock(&sh.script);
        if sc.by_key_fails > 0 {
            sc.by_key_fails -= 1;
            return error(503, "try again".into(), "unavailable");
        }
    }
    let found = lock(&sh.sessions)
        .values_mut()
        .find(|s| s.request_key.as_deref() == Some(key.as_str()))
        .map(|s| answer(&sh, s));
    match found {
        Some(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        None => error(404, "no request by that key".into(), "not_found"),
    }
}

async fn list(State(sh): State<Arc<Shared>>, h: HeaderMap) -> Response {
    if let Some(r) = refused_key(&sh, &h) {
        return r;
    }
    let all: Vec<Value> = lock(&sh.sessions)
        .values_mut()
        .filter(|s| !s.gone)
        .map(|s| answer(&sh, s))
        .collect();
    (StatusCode::OK, axum::Json(json!({ "sessions": all }))).into_response()
}

async fn read(State(sh): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = refused_key(&sh, &h) {
        return r;
    }
    let mut all = lock(&sh.sessions);
    let v = all.get_mut(&id).filter(|s| !s.gone).and_then(|s| {
        let v = answer(&sh, s);
        s.read();
        (!s.gone).then_some(v)
    });
    drop(all);
    match v {
        Some(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        None => error(404, "no such session".into(), "not_found"),
    }
}

async fn delete(State(sh): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = refused_key(&sh, &h) {
        return r;
    }
    lock(&sh.deletes).push(id.clone());
    let lag = lock(&sh.script).delete_lag;
    let mut all = lock(&sh.sessions);
    match all.get_mut(&id).filter(|s| !s.gone) {
        None => error(404, "no such session".into(), "not_found"),
        Some(s) => {
            if s.closing.is_none() {
                if lag == 0 {
                    s.end();
                } else {
                    s.closing = Some(lag);
                }
            }
            (
                StatusCode::OK,
                axum::Json(json!({"id": id, "state": "closing"})),
            )
                .into_response()
        }
    }
}
