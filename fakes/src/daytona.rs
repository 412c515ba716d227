//! A fake Daytona (v0 API), for tests: an axum server on 127.0.0.1 that
//! speaks the control plane and the toolbox the `daytona` provider calls,
//! with Daytona's asynchrony and its faults on demand. Every rule below
//! is read from /work/shared/research/vendor-apis.md section 1 (its
//! sources in brackets); commands run in a [`Machine`], never here.
//!
//! Control plane (`/sandbox`):
//! - Every call needs `Authorization: Bearer <key>`; anything else is a
//!   401 whose body echoes what was sent (words a provider must not repeat)
//!   [clients sdk-typescript/src/Daytona.ts:375,392-406].
//! - A create answers the sandbox `creating`; it reads `started` after
//!   [`FakeDaytona::start_polls`] reads. A name already taken is a 409. No
//!   snapshot means the default one, reported by its own name
//!   [api.json:12069-12208; sandbox.service.ts:471-475].
//! - A delete sets the desired state `destroyed` and the state
//!   `destroying`; the sandbox reads 404 after [`FakeDaytona::delete_polls`]
//!   reads. A stop reads `stopping`, then `stopped` after as many; with
//!   `autoDeleteInterval` 0 a stop deletes [sandbox.service.ts:2013-2039,
//!   2151-2185; ephemeral.util.ts:6-8].
//! - A listing filters by the `labels` JSON object, pages by `limit`
//!   (1-200, 100) and `cursor`, answers `{items, nextCursor}`, and trails
//!   every change by [`FakeDaytona::list_lag`] listings [api.json:2702-2756,
//!   12000; the seed's "listing trails a create"].
//! - `network-settings` sets and reads back the network fields; block-all
//!   with a list is a 400 [network-limits.md].
//! - [`FakeDaytona::limit`]: the next calls answer 429 with `Retry-After`
//!   [daytona.io/docs/en/limits].
//! - [`FakeDaytona::lose_next_create`]: the next create makes its sandbox
//!   and answers 500.
//!
//! The toolbox (`/toolbox/<id>/…`, the sandbox's `toolboxProxyUrl`) is in
//! [`toolbox`].

mod boxed;
mod machine;
mod toolbox;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use computer_providers::types::Result;
use computer_providers::vendor::{now_rfc3339, plus_secs};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

pub use boxed::{BoxMachine, BoxMachines};
pub use machine::{Attached, Machine, Machines};

/// The snapshot a create with none is made of, by Daytona's own name.
pub const DEFAULT_SNAPSHOT: &str = "daytonaio/sandbox:0.11.0";

struct Sandbox {
    id: String,
    name: String,
    labels: Map<String, Value>,
    snapshot: String,
    state: &'static str,
    desired: &'static str,
    /// Reads until the state under way is reached.
    polls: u32,
    block_all: bool,
    allow_list: Option<String>,
    domain_list: Option<String>,
    auto_stop: i64,
    auto_delete: i64,
    public: bool,
    created_at: String,
    destroy_at: String,
    /// What the listing shows of it, and the listings still to pass
    /// before it shows the sandbox as it is.
    view: Option<Value>,
    view_lag: u32,
    /// Gone: read as 404, listed until its view catches up.
    gone: bool,
    machine: Option<Arc<dyn Machine>>,
}

#[derive(Default)]
struct Script {
    lose_create: bool,
    /// 429s still to answer, and their Retry-After in seconds.
    limited: u32,
    retry_after: u64,
    /// When the last 429 was answered, to check a retry waited.
    limited_at: Option<Instant>,
    early_retries: u32,
}

pub(crate) struct Shared {
    key: String,
    port: u16,
    sandboxes: Mutex<BTreeMap<String, Sandbox>>,
    script: Mutex<Script>,
    calls: Mutex<Vec<String>>,
    start_polls: AtomicU64,
    delete_polls: AtomicU64,
    list_lag: AtomicU64,
    machines: Arc<dyn Machines>,
    pub(crate) toolbox: toolbox::Boxes,
    next: AtomicU64,
    stop: CancellationToken,
}

/// A fake Daytona. Stops, and removes every sandbox's machine, when
/// dropped or [`FakeDaytona::shutdown`].
pub struct FakeDaytona {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FakeDaytona {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDaytona")
            .field("port", &self.shared.port)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeDaytona {
    fn drop(&mut self) {
        self.shared.stop.cancel();
        let machines: Vec<_> = lock(&self.shared.sandboxes)
            .values_mut()
            .filter_map(|s| s.machine.take())
            .collect();
        if !machines.is_empty()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                for m in machines {
                    m.remove().await;
                }
            });
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeDaytona {
    /// Start the fake on a port of 127.0.0.1, taking the key `key`, its
    /// sandboxes' insides made by `machines`.
    pub async fn start(key: &str, machines: Arc<dyn Machines>) -> Result<FakeDaytona> {
        let (listener, port) = crate::bind_local().await?;
        let shared = Arc::new(Shared {
            key: key.to_string(),
            port,
            sandboxes: Mutex::new(BTreeMap::new()),
            script: Mutex::new(Script::default()),
            calls: Mutex::new(Vec::new()),
            start_polls: AtomicU64::new(2),
            delete_polls: AtomicU64::new(2),
            list_lag: AtomicU64::new(0),
            machines,
            toolbox: toolbox::Boxes::default(),
            next: AtomicU64::new(1),
            stop: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/sandbox", post(create).get(list))
            .route("/sandbox/{id}", get(read).delete(delete))
            .route("/sandbox/{id}/stop", post(stop))
            .route("/sandbox/{id}/network-settings", post(network))
            .merge(toolbox::routes())
            .with_state(Arc::clone(&shared));
        let s = shared.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(s.cancelled_owned())
                .await;
        });
        Ok(FakeDaytona { shared })
    }

    /// The API's base URL (`--daytona-api-url`).
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }
    /// A new sandbox reads `creating` for `n` reads.
    pub fn start_polls(&self, n: u32) {
        self.shared.start_polls.store(n.into(), Ordering::Relaxed);
    }
    /// A deleted sandbox reads `destroying` for `n` reads (a stopped one
    /// `stopping`) before it is gone (stopped).
    pub fn delete_polls(&self, n: u32) {
        self.shared.delete_polls.store(n.into(), Ordering::Relaxed);
    }
    /// The listing shows every change `n` listings late.
    pub fn list_lag(&self, n: u32) {
        self.shared.list_lag.store(n.into(), Ordering::Relaxed);
    }
    /// The next `n` calls answer 429 with `Retry-After: secs`.
    pub fn limit(&self, n: u32, secs: u64) {
        let mut s = lock(&self.shared.script);
        s.limited = n;
        s.retry_after = secs;
    }
    /// Calls that came sooner after a 429 than its `Retry-After` said.
    pub fn early_retries(&self) -> u32 {
        lock(&self.shared.script).early_retries
    }
    /// The next create makes its sandbox and answers 500.
    pub fn lose_next_create(&self) {
        lock(&self.shared.script).lose_create = true;
    }
    /// Every call so far, as `METHOD path` with ids as `{id}`.
    pub fn calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }
    /// The names of the sandboxes that are not gone.
    pub fn names(&self) -> Vec<String> {
        lock(&self.shared.sandboxes)
            .values()
            .filter(|s| !s.gone)
            .map(|s| s.name.clone())
            .collect()
    }
    /// A sandbox's labels as Daytona holds them.
    pub fn labels_of(&self, name: &str) -> Option<Map<String, Value>> {
        lock(&self.shared.sandboxes)
            .values()
            .find(|s| s.name == name && !s.gone)
            .map(|s| s.labels.clone())
    }
    /// Set a sandbox's state, as Daytona moving it on its own (an error,
    /// an auto-stop).
    pub fn set_state(&self, name: &str, state: &'static str) {
        let lag = self.lag();
        if let Some(s) = lock(&self.shared.sandboxes)
            .values_mut()
            .find(|s| s.name == name)
        {
            s.state = state;
            s.polls = 0;
            s.view_lag = lag;
        }
    }
    /// Stop serving and remove every sandbox's machine now.
    pub async fn shutdown(&self) {
        self.shared.stop.cancel();
        let machines: Vec<_> = lock(&self.shared.sandboxes)
            .values_mut()
            .filter_map(|s| s.machine.take())
            .collect();
        for m in machines {
            m.remove().await;
        }
    }
    fn lag(&self) -> u32 {
        self.shared.list_lag.load(Ordering::Relaxed) as u32
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn error(status: StatusCode, words: &str) -> Response {
    answer(
        status,
        json!({"statusCode": status.as_u16(), "message": words}),
    )
}

/// Record the call, check the key, answer a scripted 429.
pub(crate) fn enter(sh: &Shared, headers: &HeaderMap, call: String) -> Option<Response> {
    lock(&sh.calls).push(call);
    let sent = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if sent != format!("Bearer {}", sh.key) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            &format!("vendor-words: invalid credentials {sent:?}"),
        ));
    }
    let mut script = lock(&sh.script);
    if let Some(at) = script.limited_at
        && at.elapsed() < Duration::from_secs(script.retry_after)
    {
        script.early_retries += 1;
    }
    script.limited_at = None;
    if script.limited > 0 {
        script.limited -= 1;
        script.limited_at = Some(Instant::now());
        let mut r = error(StatusCode::TOO_MANY_REQUESTS, "vendor-words: rate limit");
        if let Ok(v) = script.retry_after.to_string().parse() {
            r.headers_mut().insert("retry-after", v);
        }
        return Some(r);
    }
    None
}

impl Sandbox {
    fn json(&self, port: u16) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "organizationId": "fake-org",
            "snapshot": self.snapshot,
            "user": "daytona",
            "env": {},
            "labels": self.labels,
            "public": self.public,
            "networkBlockAll": self.block_all,
            "networkAllowList": self.allow_list,
            "domainAllowList": self.domain_list,
            "outboundProxyUrl": null,
            "target": "us",
            "cpu": 1,
            "gpu": 0,
            "memory": 1,
            "disk": 3,
            "state": self.state,
            "desiredState": self.desired,
            "errorReason": null,
            "autoStopInterval": self.auto_stop,
            "autoDeleteInterval": self.auto_delete,
            "autoDestroyAt": self.destroy_at,
            "sandboxClass": "container",
            "kvm": false,
            "volumes": [],
            "linkedSandboxId": null,
            "createdAt": self.created_at,
            "toolboxProxyUrl": format!("http://127.0.0.1:{port}/toolbox"),
        })
    }

    /// Past its TTL Daytona destroys it, whatever its state.
    fn expire(&mut self) {
        let at = time::OffsetDateTime::parse(
            &self.destroy_at,
            &time::format_description::well_known::Rfc3339,
        );
        if at.is_ok_and(|t| t <= time::OffsetDateTime::now_utc()) && !self.gone {
            self.gone = true;
        }
    }

    /// One read: a state under way moves on when its reads are spent.
    fn poll(&mut self) {
        self.expire();
        if self.gone {
            return;
        }
        if self.polls > 0 {
            self.polls -= 1;
            return;
        }
        match self.state {
            "creating" => self.state = "started",
            "stopping" if self.auto_delete == 0 => {
                self.state = "destroying";
                self.desired = "destroyed";
            }
            "stopping" => self.state = "stopped",
            "destroying" => self.gone = true,
            _ => {}
        }
    }
}

/// Find by id or name.
fn find<'a>(all: &'a mut BTreeMap<String, Sandbox>, key: &str) -> Option<&'a mut Sandbox> {
    if all.get(key).is_some_and(|s| !s.gone) {
        return all.get_mut(key);
    }
    all.values_mut().find(|s| s.name == key && !s.gone)
}

fn str_field(body: &Value, k: &str) -> Option<String> {
    body.get(k)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|s| !s.is_empty())
}

async fn create(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /sandbox".into()) {
        return r;
    }
    let name = str_field(&body, "name");
    let allow = str_field(&body, "networkAllowList");
    let domains = str_field(&body, "domainAllowList");
    let block_all = body
        .get("networkBlockAll")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if block_all && (allow.is_some() || domains.is_some()) {
        return error(StatusCode::BAD_REQUEST, "network modes are exclusive");
    }
    let labels = body
        .get("labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if labels.values().any(|v| !v.is_string()) {
        return error(StatusCode::BAD_REQUEST, "labels are strings");
    }
    let ttl = body.get("ttlMinutes").and_then(Value::as_u64).unwrap_or(0);
    let n = sh.next.fetch_add(1, Ordering::Relaxed);
    let id = format!("{n:08x}-fake-{}", std::process::id());
    let name = name.unwrap_or_else(|| id.clone());
    let snapshot = str_field(&body, "snapshot");
    {
        let all = lock(&sh.sandboxes);
        if all.values().any(|s| s.name == name && !s.gone) {
            return error(StatusCode::CONFLICT, "a sandbox with this name exists");
        }
    }
    let machine = match sh.machines.make(&id, snapshot.as_deref()).await {
        Ok(m) => m,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("no machine: {e}"),
            );
        }
    };
    let created_at = now_rfc3339();
    let lag = sh.list_lag.load(Ordering::Relaxed) as u32;
    let sb = Sandbox {
        id: id.clone(),
        name,
        labels,
        snapshot: snapshot.unwrap_or_else(|| DEFAULT_SNAPSHOT.to_string()),
        state: "creating",
        desired: "started",
        polls: sh.start_polls.load(Ordering::Relaxed) as u32,
        block_all,
        allow_list: allow,
        domain_list: domains,
        auto_stop: body
            .get("autoStopInterval")
            .and_then(Value::as_i64)
            .unwrap_or(15),
        auto_delete: body
            .get("autoDeleteInterval")
            .and_then(Value::as_i64)
            .unwrap_or(-1),
        public: body.get("public").and_then(Value::as_bool).unwrap_or(false),
        destroy_at: plus_secs(&created_at, ttl * 60),
        created_at,
        view: None,
        view_lag: lag,
        gone: false,
        machine: Some(machine),
    };
    let out = sb.json(sh.port);
    lock(&sh.sandboxes).insert(id, sb);
    if std::mem::take(&mut lock(&sh.script).lose_create) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "vendor-words: lost");
    }
    answer(StatusCode::OK, out)
}

/// Remove the machines of sandboxes that have gone.
async fn reap(sh: &Shared) {
    let dead: Vec<_> = lock(&sh.sandboxes)
        .values_mut()
        .filter(|s| s.gone)
        .filter_map(|s| s.machine.take())
        .collect();
    for m in dead {
        m.remove().await;
    }
}

async fn read(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /sandbox/{id}".into()) {
        return r;
    }
    let out = {
        let mut all = lock(&sh.sandboxes);
        match find(&mut all, &id) {
            None => None,
            Some(s) => {
                s.poll();
                s.view_lag = s
                    .view_lag
                    .max(sh.list_lag.load(Ordering::Relaxed) as u32 * u32::from(s.gone));
                (!s.gone).then(|| s.json(sh.port))
            }
        }
    };
    reap(&sh).await;
    match out {
        Some(v) => answer(StatusCode::OK, v),
        None => error(StatusCode::NOT_FOUND, "sandbox not found"),
    }
}

/// Move the sandbox `id` toward `to` (desired `want`), its reads and the
/// listing lagging as set; `None` when it is there or on its way already.
fn head_for(sh: &Shared, id: &str, to: &'static str, want: &'static str) -> Response {
    let lag = sh.list_lag.load(Ordering::Relaxed) as u32;
    let polls = sh.delete_polls.load(Ordering::Relaxed) as u32;
    let mut all = lock(&sh.sandboxes);
    let Some(s) = find(&mut all, id) else {
        return error(StatusCode::NOT_FOUND, "sandbox not found");
    };
    let settled = match to {
        "stopping" if s.state == "destroying" => {
            return error(StatusCode::BAD_REQUEST, "sandbox is being destroyed");
        }
        "stopping" => matches!(s.state, "stopped" | "stopping"),
        _ => s.state == to,
    };
    if !settled {
        s.state = to;
        s.desired = want;
        s.polls = polls;
        s.view_lag = lag;
    }
    answer(StatusCode::OK, s.json(sh.port))
}

async fn delete(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "DELETE /sandbox/{id}".into()) {
        return r;
    }
    head_for(&sh, &id, "destroying", "destroyed")
}

async fn stop(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /sandbox/{id}/stop".into()) {
        return r;
    }
    head_for(&sh, &id, "stopping", "stopped")
}

async fn network(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "POST /sandbox/{id}/network-settings".into()) {
        return r;
    }
    let block = body.get("networkBlockAll").and_then(Value::as_bool);
    let allow = body
        .get("networkAllowList")
        .and_then(Value::as_str)
        .map(str::to_string);
    let domains = body
        .get("domainAllowList")
        .and_then(Value::as_str)
        .map(str::to_string);
    if block == Some(true)
        && (allow.as_deref().is_some_and(|a| !a.is_empty())
            || domains.as_deref().is_some_and(|d| !d.is_empty()))
    {
        return error(StatusCode::BAD_REQUEST, "network modes are exclusive");
    }
    let mut all = lock(&sh.sandboxes);
    let Some(s) = find(&mut all, &id) else {
        return error(StatusCode::NOT_FOUND, "sandbox not found");
    };
    // Block-all clears both lists; false alone clears both too.
    if let Some(b) = block {
        s.block_all = b;
        s.allow_list = None;
        s.domain_list = None;
    }
    if let Some(a) = allow {
        s.allow_list = (!a.is_empty()).then_some(a);
    }
    if let Some(d) = domains {
        s.domain_list = (!d.is_empty()).then_some(d);
    }
    answer(StatusCode::OK, s.json(sh.port))
}

async fn list(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if let Some(r) = enter(&sh, &headers, "GET /sandbox".into()) {
        return r;
    }
    let wanted: Map<String, Value> = match q.get("labels").map(|l| serde_json::from_str(l)) {
        None => Map::new(),
        Some(Ok(m)) => m,
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "labels must be a JSON object"),
    };
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if (1..=200).contains(&n) => n,
        _ => return error(StatusCode::BAD_REQUEST, "limit must be 1 to 200"),
    };
    let after = q.get("cursor").cloned();
    let mut shown: VecDeque<Value> = VecDeque::new();
    {
        let mut all = lock(&sh.sandboxes);
        for s in all.values_mut() {
            s.expire();
            if s.view_lag > 0 {
                s.view_lag -= 1;
            } else {
                s.view = (!s.gone).then(|| s.json(sh.port));
            }
            let Some(v) = &s.view else { continue };
            let carries = wanted
                .iter()
                .all(|(k, want)| v.get("labels").and_then(|l| l.get(k)) == Some(want));
            if carries && after.as_deref().is_none_or(|c| s.id.as_str() > c) {
                shown.push_back(v.clone());
            }
        }
        all.retain(|_, s| !(s.gone && s.view.is_none() && s.machine.is_none()));
    }
    reap(&sh).await;
    let page: Vec<Value> = shown.drain(..shown.len().min(limit)).collect();
    let next = if shown.is_empty() {
        Value::Null
    } else {
        page.last()
            .and_then(|v| v.get("id"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    answer(StatusCode::OK, json!({"items": page, "nextCursor": next}))
}
