//! A fake E2B, for the E2B provider's tests: its control plane and envd on
//! one listener of 127.0.0.1, each sandbox a [`VendorBox`] (a bounded
//! Docker container of the test image) that envd's processes run in as
//! root, as on E2B. The rules it keeps, each from
//! /work/shared/research/vendor-apis.md section 2 and the sources it
//! cites:
//!
//! - Control plane (e2b-dev/infra spec/openapi.yml:11, 2355-2896): every
//!   call needs `X-API-Key`, else 401. `POST /sandboxes` answers 201 with
//!   `sandboxID`, `envdAccessToken` and `domain`, and keeps metadata,
//!   `allow_internet_access`, `network.allowPublicTraffic` and
//!   `lifecycle.onTimeout`; `GET /sandboxes/{id}` reflects them with
//!   `startedAt`, `endAt` and `state`, 404 once gone; `GET /v2/sandboxes`
//!   filters by `metadata`, `k=v&k2=v2` with each part URL-encoded and the
//!   whole encoded again (js-sdk sandboxApi.ts:1852-1882), pages by
//!   `limit` and `nextToken` with the next cursor in `X-Next-Token`
//!   (paginator.ts:59); `DELETE /sandboxes/{id}` answers 204, 404 when
//!   unknown; `POST /sandboxes/{id}/timeout` moves `endAt` to now plus
//!   its seconds. A sandbox past its `endAt` is killed.
//! - Pause and resume (e2b.dev/docs/api-reference, `postSandboxPause`;
//!   vendor-apis.md, connect): `POST /sandboxes/{id}/pause` answers 204
//!   and reads `state: paused` (its box and files kept); a second pause
//!   answers 409, an unknown sandbox 404. A paused sandbox has no timer
//!   (it is not killed at its `endAt`), and its envd answers nothing but
//!   502 "The sandbox was not found" (as E2B's proxy answers for a paused
//!   sandbox without auto-resume, e.g. oc-xiaoju/uncaged#69). The fake
//!   does not freeze the box's processes as E2B's snapshot does: a
//!   `docker pause` of a box stalled its unpause past 30 s under a loaded
//!   engine, so what a pause does to running programs is E2B's, not
//!   checked here. `POST /sandboxes/{id}/connect`
//!   with `{timeout}` (required, else 400) resumes a paused sandbox with
//!   `endAt` now plus its seconds and answers 201; on a running one it
//!   only extends (`endAt` never earlier) and answers 200; both with the
//!   sandbox's `sandboxID`, `envdAccessToken` and `domain`.
//! - Snapshots ([`snapshots`], e2b.dev/docs/sandbox/snapshots): `POST
//!   /sandboxes/{id}/snapshots` keeps the box's HOME and daemon state under
//!   a snapshotID, a create with it as `templateID` starts with those
//!   files, `DELETE /templates/{id}` deletes it; [`FakeE2b::snapshot_calls`]
//!   records each call.
//! - Templates: a sandbox is a box of the template's image, set by
//!   [`FakeE2b::template`] (the desktop template, as E2B's `desktop` has
//!   X, is the desktop test image); any other template is the image the
//!   fake was started with.
//! - Knobs the real one shows now and then: a new sandbox is left out of
//!   the listing for its first [`Knobs::list_lag`] listings; a killed one
//!   still reads back for [`Knobs::delete_polls`] reads; the next call is
//!   answered 429 with `Retry-After` ([`Knobs::rate_limit`]); the next
//!   create makes its sandbox and answers 502 ([`Knobs::lose_create`]).
//! - envd (infra packages/envd): routed by `E2b-Sandbox-Id` (js-sdk
//!   connectionConfig.ts:493-536); `X-Access-Token` must be the sandbox's
//!   token (envd internal/api/auth.go:22) and `Authorization: Basic` names
//!   the user `root` or `user` with an empty password (js-sdk
//!   envd/rpc.ts:160-180), else 401. `POST /files?path=&username=` takes
//!   the raw bytes, parents made. `/process.Process/Start` is a Connect
//!   server stream: a request envelope in, envelopes out (flag byte, 4-byte
//!   big-endian length, JSON; bytes as base64): start{pid}, data{stdout or
//!   stderr}, keepalive every `Keepalive-Ping-Interval` seconds, end
//!   {exitCode}, then the end-stream envelope (flag 0x02), each cut across
//!   writes at arbitrary points. A `Connect-Timeout-Ms` becomes the
//!   process's lifetime: it is killed then (envd process/start.go:38-43);
//!   without it the process outlives the stream. `SendInput` and
//!   `SendSignal` are unary JSON calls. [`Knobs::cut_stream`] cuts the next
//!   stream's connection inside an envelope.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bollard::Docker;
use computer_providers::e2b::envd::{Envelopes, envelope};
use computer_providers::types::{ErrorCode, ProviderError, Result};
use futures::StreamExt;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::vendor_box::{BoxSpec, Chunk, Cmd, VendorBox};

mod envd;
mod snapshots;
use envd::{files, send_input, send_signal, start};

/// The largest upload the fake takes.
pub const FILE_MAX: usize = 256 * 1024 * 1024;

/// What the fake does now and then, set by a test.
#[derive(Clone, Debug, Default)]
pub struct Knobs {
    /// Listings a new sandbox is left out of.
    pub list_lag: u32,
    /// Reads a killed sandbox still answers before 404.
    pub delete_polls: u32,
    /// Answer the next control call 429 with this Retry-After (s).
    pub rate_limit: Option<u64>,
    /// Make the next create's sandbox and answer 502.
    pub lose_create: bool,
    /// Cut the next process stream's connection after this many bytes
    /// (inside an envelope when it falls there).
    pub cut_stream: Option<usize>,
    /// Sandboxes per listing page at most (the ask's limit otherwise).
    pub page: Option<usize>,
}

struct Sbx {
    id: String,
    template: String,
    token: String,
    metadata: BTreeMap<String, String>,
    internet: bool,
    public: bool,
    on_timeout: String,
    started: OffsetDateTime,
    end: OffsetDateTime,
    lag: u32,
    /// Killed: reads left before it is gone.
    killed: Option<u32>,
    /// Paused: no timer, envd refuses.
    paused: bool,
    boxed: Arc<VendorBox>,
}

type Input = Arc<tokio::sync::Mutex<Option<std::pin::Pin<Box<dyn AsyncWrite + Send>>>>>;

struct Shared {
    key: String,
    docker: Docker,
    image: String,
    /// Each template's image, beside `image` for any other.
    templates: Mutex<HashMap<String, String>>,
    owner: String,
    sandboxes: Mutex<BTreeMap<String, Sbx>>,
    /// Each process's stdin, by sandbox and pid.
    inputs: Mutex<HashMap<(String, u32), Input>>,
    knobs: Mutex<Knobs>,
    creates: AtomicU64,
    tokens: Mutex<Vec<String>>,
    /// Each process start's `Connect-Timeout-Ms`, in order (None: none).
    starts: Mutex<Vec<Option<u64>>>,
    /// Every box made, so close removes even one a process still holds.
    made: Mutex<Vec<Arc<VendorBox>>>,
    /// The snapshots kept, by id without its tag.
    snaps: Mutex<BTreeMap<String, snapshots::Snap>>,
    /// Each snapshot call, as `METHOD path`, in order.
    calls: Mutex<Vec<String>>,
    stop: CancellationToken,
}

/// The fake, serving until dropped; every box it made is removed then.
pub struct FakeE2b {
    shared: Arc<Shared>,
    url: String,
}

impl std::fmt::Debug for FakeE2b {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeE2b")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn failed(e: impl std::fmt::Display) -> ProviderError {
    ProviderError::new(ErrorCode::Failed, e.to_string())
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

impl FakeE2b {
    /// Start the fake on 127.0.0.1, taking the key `key`; its sandboxes
    /// are boxes of `image`, labelled with `owner`.
    pub async fn start(docker: &Docker, image: &str, key: &str, owner: &str) -> Result<FakeE2b> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(failed)?;
        let port = listener.local_addr().map_err(failed)?.port();
        let shared = Arc::new(Shared {
            key: key.to_string(),
            docker: docker.clone(),
            image: image.to_string(),
            templates: Mutex::new(HashMap::new()),
            owner: owner.to_string(),
            sandboxes: Mutex::new(BTreeMap::new()),
            inputs: Mutex::new(HashMap::new()),
            knobs: Mutex::new(Knobs::default()),
            creates: AtomicU64::new(0),
            tokens: Mutex::new(Vec::new()),
            starts: Mutex::new(Vec::new()),
            made: Mutex::new(Vec::new()),
            snaps: Mutex::new(BTreeMap::new()),
            calls: Mutex::new(Vec::new()),
            stop: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/sandboxes", post(create))
            .route("/sandboxes/{id}", get(info).delete(kill))
            .route("/sandboxes/{id}/timeout", post(set_timeout))
            .route("/sandboxes/{id}/pause", post(pause))
            .route("/sandboxes/{id}/connect", post(connect))
            .route("/v2/sandboxes", get(list))
            .route(
                "/sandboxes/{id}/snapshots",
                post(snapshots::create_snapshot),
            )
            .route("/snapshots", get(snapshots::list_snapshots))
            .route(
                "/templates/{id}",
                axum::routing::delete(snapshots::delete_template),
            )
            // envd takes a file of any size (507 when the disk is full).
            .route(
                "/files",
                post(files).layer(axum::extract::DefaultBodyLimit::max(FILE_MAX)),
            )
            .route("/process.Process/Start", post(start))
            .route("/process.Process/SendInput", post(send_input))
            .route("/process.Process/SendSignal", post(send_signal))
            .with_state(Arc::clone(&shared));
        crate::serve(listener, app, shared.stop.clone());
        Ok(FakeE2b {
            shared,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// The control plane's and envd's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Make the template `template`'s sandboxes boxes of `image`.
    pub fn template(&self, template: &str, image: &str) {
        lock(&self.shared.templates).insert(template.to_string(), image.to_string());
    }

    /// Set what the fake does next.
    pub fn knobs(&self, f: impl FnOnce(&mut Knobs)) {
        f(&mut lock(&self.shared.knobs));
    }

    /// How many creates were asked.
    pub fn creates(&self) -> u64 {
        self.shared.creates.load(Ordering::SeqCst)
    }

    /// Every envd access token handed out (for a test's canary check).
    pub fn tokens(&self) -> Vec<String> {
        lock(&self.shared.tokens).clone()
    }

    /// Each process start's `Connect-Timeout-Ms` so far, in order (None
    /// where the start carried none).
    pub fn starts(&self) -> Vec<Option<u64>> {
        lock(&self.shared.starts).clone()
    }

    /// Ids of the sandboxes not yet gone (killed ones still reading back
    /// included).
    pub fn sandboxes(&self) -> Vec<String> {
        lock(&self.shared.sandboxes).keys().cloned().collect()
    }

    /// Ids of the sandboxes not killed.
    pub fn alive(&self) -> Vec<String> {
        lock(&self.shared.sandboxes)
            .iter()
            .filter(|(_, s)| s.killed.is_none())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The box of the sandbox `id` not killed (a test reads or plants in
    /// it as root).
    pub fn box_of(&self, id: &str) -> Option<Arc<VendorBox>> {
        lock(&self.shared.sandboxes)
            .get(id)
            .filter(|s| s.killed.is_none())
            .map(|s| Arc::clone(&s.boxed))
    }

    /// Each snapshot call so far (`POST /sandboxes/{id}/snapshots`,
    /// `DELETE /templates/{id}`), in order.
    pub fn snapshot_calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }

    /// The snapshots kept (their ids without the tag).
    pub fn snapshot_ids(&self) -> Vec<String> {
        lock(&self.shared.snaps).keys().cloned().collect()
    }

    /// Remove every box now.
    pub async fn close(&self) {
        let boxes: Vec<Arc<VendorBox>> = lock(&self.shared.made).drain(..).collect();
        for b in boxes {
            let _ = b.remove().await;
        }
        self.shared.stop.cancel();
    }
}

impl Drop for FakeE2b {
    fn drop(&mut self) {
        self.shared.stop.cancel();
        // Each box removes itself when its last holder drops it.
        lock(&self.shared.sandboxes).clear();
        lock(&self.shared.made).clear();
    }
}

fn status(code: StatusCode, message: &str) -> Response {
    (
        code,
        axum::Json(json!({"code": code.as_u16(), "message": message})),
    )
        .into_response()
}

/// The control plane's gate: the key, then a 429 when told.
fn gate(s: &Shared, h: &HeaderMap) -> Option<Response> {
    if h.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(s.key.as_str()) {
        return Some(status(StatusCode::UNAUTHORIZED, "Invalid API key"));
    }
    if let Some(secs) = lock(&s.knobs).rate_limit.take() {
        let mut r = status(StatusCode::TOO_MANY_REQUESTS, "rate limited");
        if let Ok(v) = secs.to_string().parse() {
            r.headers_mut().insert("retry-after", v);
        }
        return Some(r);
    }
    None
}

/// Forget sandboxes killed and read enough, and kill those past their end
/// (E2B's timer, onTimeout kill).
fn expire(s: &Shared) {
    let now = OffsetDateTime::now_utc();
    lock(&s.sandboxes).retain(|_, b| {
        if b.end <= now && !b.paused {
            let boxed = Arc::clone(&b.boxed);
            tokio::spawn(async move { boxed.remove().await });
            return false;
        }
        b.killed != Some(0)
    });
}

fn view(b: &Sbx) -> Value {
    json!({
        "sandboxID": b.id,
        "templateID": b.template,
        "alias": b.template,
        "startedAt": rfc3339(b.started),
        "endAt": rfc3339(b.end),
        "state": if b.paused { "paused" } else { "running" },
        "metadata": b.metadata,
        "allowInternetAccess": b.internet,
        "network": {"allowPublicTraffic": b.public},
        "lifecycle": {"onTimeout": b.on_timeout, "autoResume": false},
        "envdVersion": "0.5.7",
        "envdAccessToken": b.token,
    })
}

/// The image of the template `template` (the fake's own for any other).
fn image_of(s: &Shared, template: &str) -> String {
    lock(&s.templates)
        .get(template)
        .cloned()
        .unwrap_or_else(|| s.image.clone())
}

async fn create(State(s): State<Arc<Shared>>, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    s.creates.fetch_add(1, Ordering::SeqCst);
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "body is not JSON");
    };
    let Some(template) = v["templateID"].as_str() else {
        return status(StatusCode::BAD_REQUEST, "templateID is required");
    };
    let timeout = v["timeout"].as_u64().unwrap_or(15);
    let from = snapshots::of_template(&s, template);
    let image = from
        .as_ref()
        .map_or_else(|| image_of(&s, template), |(i, _)| i.clone());
    let boxed = match VendorBox::start(&s.docker, &BoxSpec::new(&image, &s.owner)).await {
        Ok(b) => {
            let b = Arc::new(b);
            lock(&s.made).push(Arc::clone(&b));
            b
        }
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, &e.0),
    };
    if let Some((_, files)) = &from
        && let Err(e) = boxed.unpack(files).await
    {
        return status(StatusCode::INTERNAL_SERVER_ERROR, &e.0);
    }
    let token = computer_providers::random::random_hex(16).unwrap_or_default();
    lock(&s.tokens).push(token.clone());
    let id = format!(
        "i{}",
        computer_providers::random::random_hex(10).unwrap_or_default()
    );
    let now = OffsetDateTime::now_utc();
    let metadata = v["metadata"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let on_timeout = match (
        v["lifecycle"]["onTimeout"].as_str(),
        v["autoPause"].as_bool(),
    ) {
        (Some(o), _) => o.to_string(),
        (None, Some(true)) => "pause".into(),
        _ => "kill".into(),
    };
    let lag = lock(&s.knobs).list_lag;
    let sbx = Sbx {
        id: id.clone(),
        template: template.to_string(),
        token: token.clone(),
        metadata,
        internet: v["allow_internet_access"].as_bool().unwrap_or(true),
        public: v["network"]["allowPublicTraffic"].as_bool().unwrap_or(true),
        on_timeout,
        started: now,
        end: now + Duration::from_secs(timeout),
        lag,
        killed: None,
        paused: false,
        boxed,
    };
    lock(&s.sandboxes).insert(id.clone(), sbx);
    if std::mem::take(&mut lock(&s.knobs).lose_create) {
        return status(StatusCode::BAD_GATEWAY, "upstream lost");
    }
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "sandboxID": id,
            "templateID": template,
            "alias": template,
            "clientID": "fake",
            "envdVersion": "0.5.7",
            "envdAccessToken": token,
            "trafficAccessToken": null,
            "domain": "e2b.fake",
        })),
    )
        .into_response()
}

async fn info(State(s): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    expire(&s);
    let mut all = lock(&s.sandboxes);
    let Some(b) = all.get_mut(&id) else {
        return status(StatusCode::NOT_FOUND, "sandbox not found");
    };
    if let Some(n) = b.killed.as_mut() {
        *n = n.saturating_sub(1);
    }
    axum::Json(view(b)).into_response()
}

async fn kill(State(s): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    expire(&s);
    let polls = lock(&s.knobs).delete_polls;
    let boxed = {
        let mut all = lock(&s.sandboxes);
        let Some(b) = all.get_mut(&id) else {
            return status(StatusCode::NOT_FOUND, "sandbox not found");
        };
        if b.killed.is_none() {
            b.killed = Some(polls);
        }
        Arc::clone(&b.boxed)
    };
    let _ = boxed.remove().await;
    if polls == 0 {
        lock(&s.sandboxes).remove(&id);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn set_timeout(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let secs = match timed(&s, &h, &body) {
        Ok(secs) => secs,
        Err(r) => return *r,
    };
    match lock(&s.sandboxes).get_mut(&id) {
        Some(b) if b.killed.is_none() => {
            b.end = OffsetDateTime::now_utc() + Duration::from_secs(secs);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => status(StatusCode::NOT_FOUND, "sandbox not found"),
    }
}

/// A timer or connect call through the gate: the `timeout` (seconds) its
/// body must carry, else 400.
fn timed(s: &Shared, h: &HeaderMap, body: &Bytes) -> std::result::Result<u64, Box<Response>> {
    if let Some(r) = gate(s, h) {
        return Err(Box::new(r));
    }
    expire(s);
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["timeout"].as_u64())
        .ok_or_else(|| Box::new(status(StatusCode::BAD_REQUEST, "timeout is required")))
}

async fn pause(State(s): State<Arc<Shared>>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    expire(&s);
    match lock(&s.sandboxes).get_mut(&id) {
        Some(b) if b.killed.is_none() && b.paused => {
            status(StatusCode::CONFLICT, "sandbox is already paused")
        }
        Some(b) if b.killed.is_none() => {
            b.paused = true;
            StatusCode::NO_CONTENT.into_response()
        }
        _ => status(StatusCode::NOT_FOUND, "sandbox not found"),
    }
}

async fn connect(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let secs = match timed(&s, &h, &body) {
        Ok(secs) => secs,
        Err(r) => return *r,
    };
    let end = OffsetDateTime::now_utc() + Duration::from_secs(secs);
    let (resumed, answer) = match lock(&s.sandboxes).get_mut(&id) {
        Some(b) if b.killed.is_none() => {
            let resumed = std::mem::take(&mut b.paused);
            b.end = if resumed { end } else { b.end.max(end) };
            let answer = json!({
                "sandboxID": b.id,
                "templateID": b.template,
                "envdVersion": "0.5.7",
                "envdAccessToken": b.token,
                "domain": "e2b.fake",
            });
            (resumed, answer)
        }
        _ => return status(StatusCode::NOT_FOUND, "sandbox not found"),
    };
    let code = if resumed {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (code, axum::Json(answer)).into_response()
}

/// The metadata filter, decoded twice as E2B does.
fn filter_of(raw: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(raw.as_bytes())
        .filter(|(k, _)| k == "metadata")
        .flat_map(|(_, v)| {
            v.split('&')
                .filter_map(|kv| {
                    let mut p = form_urlencoded::parse(kv.as_bytes());
                    p.next().map(|(k, v)| (k.into_owned(), v.into_owned()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

async fn list(State(s): State<Arc<Shared>>, h: HeaderMap, RawQuery(q): RawQuery) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    expire(&s);
    let q = q.unwrap_or_default();
    let filter = filter_of(&q);
    let pairs: HashMap<String, String> =
        form_urlencoded::parse(q.as_bytes()).into_owned().collect();
    let limit: usize = pairs
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .min(lock(&s.knobs).page.unwrap_or(100));
    let from: usize = pairs
        .get("nextToken")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let mut shown = Vec::new();
    for b in lock(&s.sandboxes).values_mut() {
        if b.lag > 0 {
            b.lag -= 1;
            continue;
        }
        if b.killed.is_some() || !filter.iter().all(|(k, v)| b.metadata.get(k) == Some(v)) {
            continue;
        }
        shown.push(view(b));
    }
    let page: Vec<Value> = shown.iter().skip(from).take(limit).cloned().collect();
    let mut r = axum::Json(page).into_response();
    if from + limit < shown.len()
        && let Ok(v) = (from + limit).to_string().parse()
    {
        r.headers_mut().insert("x-next-token", v);
    }
    r
}
