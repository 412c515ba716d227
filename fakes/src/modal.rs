//! A fake Modal, for the Modal provider's tests: its control plane
//! (`modal.client.ModalClient`) and its task command router
//! (`modal.task_command_router.TaskCommandRouter`) as two gRPC servers on
//! 127.0.0.1 (plaintext h2: the provider reaches them only under its
//! insecure-test setting), each sandbox a [`VendorBox`] (a bounded Docker
//! container of the test image) whose execs run in it as root, as on
//! Modal. The rules it keeps, each from /work/shared/research/vendor-apis.md
//! section 3 and the sources it cites (modal-labs/modal-client@69519aef):
//!
//! - Auth (js/src/client.ts:428-472): every control call needs
//!   `x-modal-token-id` and `x-modal-token-secret` of the pair it was
//!   given, else UNAUTHENTICATED; every call but AuthTokenGet also an
//!   `x-modal-auth-token` that AuthTokenGet handed out. The router takes
//!   `authorization: Bearer <jwt>` with a JWT TaskGetCommandRouterAccess
//!   gave for that task, unexpired (task_command_router_client.ts:350-360),
//!   else UNAUTHENTICATED. JWTs carry `exp` and live [`Knobs::jwt_ttl`].
//!   A stream or a wait opened under a JWT ends UNAUTHENTICATED when it
//!   expires: the SDK answers that by a refresh and a resume from its
//!   offset (task_command_router_client.ts:915-966), which is what a
//!   long exec across a refresh needs.
//! - Apps (api.proto:4693): AppGetOrCreate makes with CREATE_IF_MISSING
//!   and is NOT_FOUND for a missing app without it. Images (4826-4827,
//!   image.ts:434-514): ImageGetOrCreate answers an id with no result,
//!   and ImageJoinStreaming then ends in SUCCESS with eof. Every `FROM`
//!   image is the test image here.
//! - Throttling: Modal publishes no rate limits (its SDKs retry a
//!   throttled call themselves); [`Knobs::throttle`] answers the next
//!   calls RESOURCE_EXHAUSTED with a `grpc-retry-pushback-ms` trailer, the
//!   server's wait in gRPC's retry design (grpc/proposal A6-client-retries).
//! - SandboxCreate (4867, sandbox.ts:614-660) keeps the definition and
//!   the tags (at most 10, else INVALID_ARGUMENT), runs the entrypoint in
//!   the box (its end is the sandbox's end) and ends the sandbox at
//!   `timeout_secs` (TIMEOUT). [`Knobs::lose_create`] makes the sandbox
//!   and answers UNAVAILABLE.
//! - SandboxList (4882, sandbox.ts:1015-1020): running sandboxes of the
//!   app carrying every tag asked, newest first, paged by
//!   `before_timestamp`; a new sandbox is left out of its first
//!   [`Knobs::list_lag`] listings, and an ended one still listed for
//!   [`Knobs::listed_after_end`] more (the seed: Modal lists a terminated
//!   sandbox a while).
//! - SandboxWait with timeout 0 (4900, sandbox.ts:1796-1801) answers no
//!   result while the sandbox runs; SandboxTerminate (4898) ends it
//!   asynchronously: the next [`Knobs::terminate_polls`] waits still
//!   answer none, then TERMINATED with exit code 137. An unknown id is
//!   NOT_FOUND.
//! - SandboxGetTaskId (4878) and TaskGetCommandRouterAccess (4927) give
//!   the task and the router's URL with a new JWT.
//! - The router (task_command_router.proto:373-421), in [`router`]:
//!   TaskExecStart runs `command_args` as root with stdout and stderr
//!   kept whole, `timeout_secs` its bound; TaskExecStdinWrite takes bytes
//!   at an offset, a write the router has already taken is taken once and
//!   a gap is FAILED_PRECONDITION, and eof closes stdin; TaskExecStdioRead
//!   streams one fd from an offset until the exec's output ends, so a
//!   reader resumes where it was; TaskExecWait answers the code, or the
//!   signal for a command killed by one. There is no kill of an exec.

/// An axum router with one gRPC route per method, each handler given
/// the shared state and the request.
macro_rules! routes {
    ($router:expr, $prefix:expr, $shared:expr, { $($name:literal => $handler:expr),* $(,)? }) => {{
        let mut r = $router;
        $(
            let s = Arc::clone(&$shared);
            r = r.route(
                &format!("{}{}", $prefix, $name),
                post(move |req: Request| { let s = Arc::clone(&s); async move { $handler(s, req).await } }),
            );
        )*
        r
    }};
}

mod router;
mod serve;
mod snapshots;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::response::Response;
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bollard::Docker;
use computer_providers::modal::proto::*;
use computer_providers::types::Result;
use futures::StreamExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::vendor_box::{BoxSpec, Cmd, VendorBox};

/// Modal's most tags on a sandbox.
pub const MAX_TAGS: usize = 10;

/// What the fake does now and then, set by a test.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Listings a new sandbox is left out of.
    pub list_lag: u32,
    /// Listings an ended sandbox is still in.
    pub listed_after_end: u32,
    /// Waits after a terminate that still answer no result.
    pub terminate_polls: u32,
    /// How long a router JWT lives.
    pub jwt_ttl: Duration,
    /// Make the next create's sandbox and answer UNAVAILABLE.
    pub lose_create: bool,
    /// Sandboxes per listing page at most.
    pub page: usize,
    /// The next calls (but AuthTokenGet) answered RESOURCE_EXHAUSTED with
    /// a `grpc-retry-pushback-ms` of [`PUSHBACK_MS`].
    pub throttle: u32,
}

/// The wait a throttled answer asks for.
pub const PUSHBACK_MS: u64 = 200;

impl Default for Knobs {
    fn default() -> Self {
        Self {
            list_lag: 0,
            listed_after_end: 0,
            terminate_polls: 0,
            jwt_ttl: Duration::from_secs(600),
            lose_create: false,
            page: 100,
            throttle: 0,
        }
    }
}

struct Sbx {
    app: String,
    tags: Vec<SandboxTag>,
    definition: Sandbox,
    created_at: f64,
    task: String,
    lag: u32,
    /// The end, once it ended, and the waits left before it shows.
    ended: Option<GenericResult>,
    hidden_polls: u32,
    listed_after: u32,
    boxed: Arc<VendorBox>,
}

/// A JWT handed out: its task and its end.
struct Jwt {
    task: String,
    until: Instant,
}

struct Shared {
    token_id: String,
    token_secret: String,
    docker: Docker,
    image: String,
    owner: String,
    router_url: String,
    apps: Mutex<HashMap<String, String>>,
    images: Mutex<HashMap<String, Vec<String>>>,
    /// The snapshot images among them.
    snaps: Mutex<HashMap<String, snapshots::Snap>>,
    /// The snapshot calls seen, in order ("ImageDelete im-…").
    calls: Mutex<Vec<String>>,
    sandboxes: Mutex<BTreeMap<String, Sbx>>,
    execs: Mutex<HashMap<(String, String), Arc<router::Exec>>>,
    auth_tokens: Mutex<Vec<String>>,
    jwts: Mutex<HashMap<String, Jwt>>,
    knobs: Mutex<Knobs>,
    creates: AtomicU64,
    throttled: AtomicU64,
    made: Mutex<Vec<Arc<VendorBox>>>,
    stop: CancellationToken,
}

/// The fake, serving until dropped; every box it made is removed then.
pub struct FakeModal {
    shared: Arc<Shared>,
    url: String,
}

impl std::fmt::Debug for FakeModal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeModal")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A fresh id: random, else (no randomness) a count, distinct either way.
fn random_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    match computer_providers::random::random_hex(12) {
        Ok(h) => format!("{prefix}-{h}"),
        Err(_) => format!("{prefix}-{n:024x}"),
    }
}

/// Serve `app` (an axum router of gRPC routes) on `listener` until `stop`.
fn serve(listener: TcpListener, app: axum::Router, stop: CancellationToken) {
    tokio::spawn(async move {
        // No Nagle: a small answer goes at once, as from a real server.
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let _ = tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::from(app))
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await;
    });
}

impl FakeModal {
    /// Start the fake on 127.0.0.1, taking the token pair `token_id`,
    /// `token_secret`; its sandboxes are boxes of `image`, labelled with
    /// `owner`.
    pub async fn start(
        docker: &Docker,
        image: &str,
        token_id: &str,
        token_secret: &str,
        owner: &str,
    ) -> Result<FakeModal> {
        let (control, cport) = crate::bind_local().await?;
        let (routerl, rport) = crate::bind_local().await?;
        let shared = Arc::new(Shared {
            token_id: token_id.into(),
            token_secret: token_secret.into(),
            docker: docker.clone(),
            image: image.into(),
            owner: owner.into(),
            router_url: format!("http://127.0.0.1:{rport}"),
            apps: Mutex::new(HashMap::new()),
            images: Mutex::new(HashMap::new()),
            snaps: Mutex::new(HashMap::new()),
            calls: Mutex::new(Vec::new()),
            sandboxes: Mutex::new(BTreeMap::new()),
            execs: Mutex::new(HashMap::new()),
            auth_tokens: Mutex::new(Vec::new()),
            jwts: Mutex::new(HashMap::new()),
            knobs: Mutex::new(Knobs::default()),
            creates: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            made: Mutex::new(Vec::new()),
            stop: CancellationToken::new(),
        });
        let app = routes!(axum::Router::new(), CLIENT, shared, {
            "AuthTokenGet" => auth_token_get,
            "AppGetOrCreate" => app_get_or_create,
            "ImageGetOrCreate" => image_get_or_create,
            "ImageJoinStreaming" => image_join,
            "ImageDelete" => snapshots::image_delete,
            "SandboxCreate" => sandbox_create,
            "SandboxList" => sandbox_list,
            "SandboxWait" => sandbox_wait,
            "SandboxTerminate" => sandbox_terminate,
            "SandboxGetTaskId" => sandbox_task,
            "TaskGetCommandRouterAccess" => router_access,
        });
        serve(control, app, shared.stop.clone());
        serve(routerl, router::routes(&shared), shared.stop.clone());
        Ok(FakeModal {
            shared,
            url: format!("http://127.0.0.1:{cport}"),
        })
    }

    /// The control plane's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Set what the fake does next.
    pub fn knobs(&self, f: impl FnOnce(&mut Knobs)) {
        f(&mut lock(&self.shared.knobs));
    }

    /// How many creates were asked.
    pub fn creates(&self) -> u64 {
        self.shared.creates.load(Ordering::SeqCst)
    }

    /// How many calls were answered RESOURCE_EXHAUSTED ([`Knobs::throttle`]).
    pub fn throttled(&self) -> u64 {
        self.shared.throttled.load(Ordering::SeqCst)
    }

    /// Every auth token and router JWT handed out (for a canary check).
    pub fn secrets(&self) -> Vec<String> {
        let mut s = lock(&self.shared.auth_tokens).clone();
        s.extend(lock(&self.shared.jwts).keys().cloned());
        s
    }

    /// How many router JWTs were handed out.
    pub fn jwts(&self) -> usize {
        lock(&self.shared.jwts).len()
    }

    /// Ids of the sandboxes still running.
    pub fn running(&self) -> Vec<String> {
        lock(&self.shared.sandboxes)
            .iter()
            .filter(|(_, s)| s.ended.is_none())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The tags a sandbox was made with.
    pub fn tags(&self, id: &str) -> Option<Vec<SandboxTag>> {
        lock(&self.shared.sandboxes).get(id).map(|s| s.tags.clone())
    }

    /// The definition a sandbox was made with.
    pub fn definition(&self, id: &str) -> Option<Sandbox> {
        lock(&self.shared.sandboxes)
            .get(id)
            .map(|s| s.definition.clone())
    }

    /// The snapshot calls seen, in order: "TaskSnapshotFilesystem <task>",
    /// "ImageDelete <image>", "SandboxCreate <image>" for a create from a
    /// snapshot's image.
    pub fn snapshot_calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }

    /// The box of the running sandbox `id` (a test reads or plants in it
    /// as root).
    pub fn box_of(&self, id: &str) -> Option<Arc<VendorBox>> {
        lock(&self.shared.sandboxes)
            .get(id)
            .filter(|s| s.ended.is_none())
            .map(|s| Arc::clone(&s.boxed))
    }

    /// The snapshot images kept.
    pub fn snapshot_images(&self) -> Vec<String> {
        lock(&self.shared.snaps).keys().cloned().collect()
    }

    /// Remove every box now.
    pub async fn close(&self) {
        let boxes: Vec<Arc<VendorBox>> = lock(&self.shared.made).drain(..).collect();
        for b in boxes {
            // A box a terminate is removing answers a conflict until it is
            // gone: asked again until the engine says it is.
            for _ in 0..50 {
                if b.remove().await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.shared.stop.cancel();
    }
}

impl Drop for FakeModal {
    fn drop(&mut self) {
        self.shared.stop.cancel();
        lock(&self.shared.execs).clear();
        lock(&self.shared.sandboxes).clear();
        lock(&self.shared.made).clear();
    }
}

impl Shared {
    /// The token pair's check, and the auth token's unless `pair_only`.
    fn auth(&self, md: &tonic::metadata::MetadataMap, pair_only: bool) -> Result<(), Status> {
        if serve::meta(md, "x-modal-token-id") != self.token_id
            || serve::meta(md, "x-modal-token-secret") != self.token_secret
        {
            return Err(Status::unauthenticated("Invalid token id or secret"));
        }
        if !pair_only {
            let t = serve::meta(md, "x-modal-auth-token");
            if t.is_empty() || !lock(&self.auth_tokens).iter().any(|a| a == t) {
                return Err(Status::unauthenticated("Missing or invalid auth token"));
            }
            let mut knobs = lock(&self.knobs);
            if knobs.throttle > 0 {
                knobs.throttle -= 1;
                self.throttled.fetch_add(1, Ordering::SeqCst);
                let mut s = Status::resource_exhausted("rate limit exceeded, try again later");
                s.metadata_mut().insert(
                    "grpc-retry-pushback-ms",
                    tonic::metadata::MetadataValue::from(PUSHBACK_MS),
                );
                return Err(s);
            }
        }
        Ok(())
    }

    /// A JWT-shaped token with `exp`, `ttl` from now.
    fn jwt(&self, task: &str, ttl: Duration) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let exp = (now_s() + ttl.as_secs_f64()).ceil() as u64;
        let payload =
            URL_SAFE_NO_PAD.encode(format!(r#"{{"exp":{exp},"task_id":"{task}"}}"#).as_bytes());
        let token = format!("{header}.{payload}.{}", random_id("sig"));
        lock(&self.jwts).insert(
            token.clone(),
            Jwt {
                task: task.into(),
                until: Instant::now() + ttl,
            },
        );
        token
    }

    /// End sandbox `id` with `result` (its box removed).
    fn end(self: &Arc<Self>, id: &str, result: GenericResult, terminated: bool) {
        let knobs = lock(&self.knobs).clone();
        let boxed = {
            let mut sbs = lock(&self.sandboxes);
            let Some(s) = sbs.get_mut(id) else { return };
            if s.ended.is_some() {
                return;
            }
            s.ended = Some(result);
            s.hidden_polls = if terminated { knobs.terminate_polls } else { 0 };
            s.listed_after = knobs.listed_after_end;
            Arc::clone(&s.boxed)
        };
        tokio::spawn(async move {
            let _ = boxed.remove().await;
        });
    }
}

type Shr = Arc<Shared>;

async fn auth_token_get(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<AuthTokenGetRequest>| async move {
            s.auth(r.metadata(), true)?;
            let token = s.jwt("auth", Duration::from_secs(3600));
            lock(&s.jwts).remove(&token);
            lock(&s.auth_tokens).push(token.clone());
            Ok(AuthTokenGetResponse { token })
        },
    )
    .await
}

async fn app_get_or_create(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<AppGetOrCreateRequest>| async move {
            s.auth(r.metadata(), false)?;
            let m = r.into_inner();
            let mut apps = lock(&s.apps);
            if let Some(id) = apps.get(&m.app_name) {
                return Ok(AppGetOrCreateResponse { app_id: id.clone() });
            }
            if m.object_creation_type != ObjectCreationType::CreateIfMissing as i32 {
                return Err(Status::not_found(format!("App '{}' not found", m.app_name)));
            }
            let id = random_id("ap");
            apps.insert(m.app_name, id.clone());
            Ok(AppGetOrCreateResponse { app_id: id })
        },
    )
    .await
}

async fn image_get_or_create(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<ImageGetOrCreateRequest>| async move {
            s.auth(r.metadata(), false)?;
            let m = r.into_inner();
            let cmds = m.image.map(|i| i.dockerfile_commands).unwrap_or_default();
            if !cmds.first().is_some_and(|c| c.starts_with("FROM ")) {
                return Err(Status::invalid_argument("an image needs a FROM"));
            }
            let id = random_id("im");
            lock(&s.images).insert(id.clone(), cmds);
            Ok(ImageGetOrCreateResponse {
                image_id: id,
                result: None,
            })
        },
    )
    .await
}

async fn image_join(s: Shr, req: Request) -> Response {
    serve::stream(
        req,
        move |r: tonic::Request<ImageJoinStreamingRequest>| async move {
            s.auth(r.metadata(), false)?;
            let id = r.into_inner().image_id;
            if !lock(&s.images).contains_key(&id) {
                return Err(Status::not_found(format!("Image {id} not found")));
            }
            let done = ImageJoinStreamingResponse {
                result: Some(GenericResult {
                    status: GenericStatus::Success as i32,
                    exception: String::new(),
                    exitcode: 0,
                }),
                entry_id: "1".into(),
                eof: true,
            };
            Ok(futures::stream::iter([Ok(done)]))
        },
    )
    .await
}

async fn sandbox_create(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<SandboxCreateRequest>| async move {
            s.auth(r.metadata(), false)?;
            s.creates.fetch_add(1, Ordering::SeqCst);
            let m = r.into_inner();
            if m.tags.len() > MAX_TAGS {
                return Err(Status::invalid_argument(format!(
                    "at most {MAX_TAGS} tags are allowed"
                )));
            }
            if !lock(&s.apps).values().any(|a| *a == m.app_id) {
                return Err(Status::not_found("App not found"));
            }
            let def = m.definition.unwrap_or_default();
            let from = s.snap_files(&def.image_id);
            if !lock(&s.images).contains_key(&def.image_id) {
                return Err(Status::not_found("Image not found"));
            }
            if def.entrypoint_args.is_empty() {
                return Err(Status::invalid_argument("a sandbox needs an entrypoint"));
            }
            let boxed = VendorBox::start(&s.docker, &BoxSpec::new(&s.image, &s.owner))
                .await
                .map_err(|e| Status::internal(e.0))?;
            let boxed = Arc::new(boxed);
            lock(&s.made).push(Arc::clone(&boxed));
            if let Some(files) = &from {
                boxed
                    .unpack(files)
                    .await
                    .map_err(|e| Status::internal(e.0))?;
                lock(&s.calls).push(format!("SandboxCreate {}", def.image_id));
            }
            let id = random_id("sb");
            let knobs = lock(&s.knobs).clone();
            let main = boxed
                .attach(&Cmd::new(&def.entrypoint_args), false)
                .await
                .map_err(|e| Status::internal(e.0))?;
            let timeout = Duration::from_secs(u64::from(def.timeout_secs.max(1)));
            lock(&s.sandboxes).insert(
                id.clone(),
                Sbx {
                    app: m.app_id,
                    tags: m.tags,
                    definition: def,
                    created_at: now_s(),
                    task: random_id("ta"),
                    lag: knobs.list_lag,
                    ended: None,
                    hidden_polls: 0,
                    listed_after: 0,
                    boxed: Arc::clone(&boxed),
                },
            );
            watch_main(Arc::clone(&s), id.clone(), main, timeout);
            if knobs.lose_create {
                lock(&s.knobs).lose_create = false;
                return Err(Status::unavailable("connection reset by peer"));
            }
            Ok(SandboxCreateResponse { sandbox_id: id })
        },
    )
    .await
}

/// The sandbox ends when its entrypoint does, or at its timeout.
fn watch_main(s: Shr, id: String, main: crate::vendor_box::Attached, timeout: Duration) {
    tokio::spawn(async move {
        let mut output = main.output;
        let ended = tokio::time::timeout(timeout, async { while output.next().await.is_some() {} });
        let result = match ended.await {
            Err(_) => GenericResult {
                status: GenericStatus::Timeout as i32,
                exception: "Sandbox timed out".into(),
                exitcode: 137,
            },
            Ok(()) => {
                let boxed = lock(&s.sandboxes).get(&id).map(|b| Arc::clone(&b.boxed));
                let code = match boxed {
                    Some(b) => b.exit_code(&main.exec).await.unwrap_or(137),
                    None => 137,
                };
                GenericResult {
                    status: if code == 0 {
                        GenericStatus::Success
                    } else {
                        GenericStatus::Failure
                    } as i32,
                    exception: String::new(),
                    exitcode: code as i32,
                }
            }
        };
        s.end(&id, result, false);
    });
}

async fn sandbox_list(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<SandboxListRequest>| async move {
            s.auth(r.metadata(), false)?;
            let m = r.into_inner();
            let page = lock(&s.knobs).page.max(1);
            let mut sbs = lock(&s.sandboxes);
            let mut out = Vec::new();
            for (id, sb) in sbs.iter_mut() {
                if sb.app != m.app_id
                    || (m.before_timestamp > 0.0 && sb.created_at >= m.before_timestamp)
                    || !m.tags.iter().all(|t| sb.tags.contains(t))
                {
                    continue;
                }
                let shown = match &sb.ended {
                    None if sb.lag > 0 => {
                        sb.lag -= 1;
                        false
                    }
                    None => true,
                    Some(_) if m.include_finished => true,
                    Some(_) if sb.listed_after > 0 => {
                        sb.listed_after -= 1;
                        true
                    }
                    Some(_) => false,
                };
                if shown {
                    out.push(SandboxInfo {
                        id: id.clone(),
                        created_at: sb.created_at,
                        app_id: sb.app.clone(),
                        tags: sb.tags.clone(),
                        image_id: sb.definition.image_id.clone(),
                        timeout_secs: sb.definition.timeout_secs,
                    });
                }
            }
            out.sort_by(|a, b| b.created_at.total_cmp(&a.created_at));
            out.truncate(page);
            Ok(SandboxListResponse { sandboxes: out })
        },
    )
    .await
}

async fn sandbox_wait(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<SandboxWaitRequest>| async move {
            s.auth(r.metadata(), false)?;
            let m = r.into_inner();
            let until = Instant::now() + Duration::from_secs_f32(m.timeout.clamp(0.0, 60.0));
            loop {
                {
                    let mut sbs = lock(&s.sandboxes);
                    let sb = sbs.get_mut(&m.sandbox_id).ok_or_else(|| {
                        Status::not_found(format!("Sandbox {} not found", m.sandbox_id))
                    })?;
                    if sb.ended.is_some() {
                        if sb.hidden_polls > 0 {
                            sb.hidden_polls -= 1;
                        } else {
                            return Ok(SandboxWaitResponse {
                                result: sb.ended.clone(),
                            });
                        }
                    }
                }
                if Instant::now() >= until {
                    return Ok(SandboxWaitResponse { result: None });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        },
    )
    .await
}

async fn sandbox_terminate(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<SandboxTerminateRequest>| async move {
            s.auth(r.metadata(), false)?;
            let id = r.into_inner().sandbox_id;
            let existing = lock(&s.sandboxes)
                .get(&id)
                .ok_or_else(|| Status::not_found(format!("Sandbox {id} not found")))?
                .ended
                .clone();
            s.end(
                &id,
                GenericResult {
                    status: GenericStatus::Terminated as i32,
                    exception: String::new(),
                    exitcode: 137,
                },
                true,
            );
            Ok(SandboxTerminateResponse {
                existing_result: existing,
            })
        },
    )
    .await
}

async fn sandbox_task(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<SandboxGetTaskIdRequest>| async move {
            s.auth(r.metadata(), false)?;
            let id = r.into_inner().sandbox_id;
            let sbs = lock(&s.sandboxes);
            let sb = sbs
                .get(&id)
                .ok_or_else(|| Status::not_found(format!("Sandbox {id} not found")))?;
            Ok(match &sb.ended {
                None => SandboxGetTaskIdResponse {
                    task_id: Some(sb.task.clone()),
                    task_result: None,
                },
                Some(r) => SandboxGetTaskIdResponse {
                    task_id: None,
                    task_result: Some(r.clone()),
                },
            })
        },
    )
    .await
}

async fn router_access(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskGetCommandRouterAccessRequest>| async move {
            s.auth(r.metadata(), false)?;
            let task = r.into_inner().task_id;
            let known = lock(&s.sandboxes)
                .values()
                .any(|sb| sb.task == task && sb.ended.is_none());
            if !known {
                return Err(Status::not_found(format!("Task {task} not found")));
            }
            let ttl = lock(&s.knobs).jwt_ttl;
            Ok(TaskGetCommandRouterAccessResponse {
                jwt: s.jwt(&task, ttl),
                url: s.router_url.clone(),
            })
        },
    )
    .await
}
