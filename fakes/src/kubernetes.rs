//! A fake Kubernetes API server, for the Kubernetes provider's tests: plain
//! http on 127.0.0.1 with one bearer token, serving the part of the core
//! and networking APIs the provider uses. Each pod's one container is a
//! [`VendorBox`] (a bounded Docker container of the test image) in which the
//! pod's command really runs, so the bytes of `pods/exec` really flow. The
//! rules it keeps, each from the Kubernetes API reference
//! (kubernetes.io/docs/reference/kubernetes-api/) or the source named:
//!
//! - Auth: every request carries `Authorization: Bearer <token>`, else 401
//!   with a `Status` of reason `Unauthorized` (docs, "Authenticating",
//!   bearer tokens). Errors are `metav1.Status` objects: `kind: Status`,
//!   `status: Failure`, `message`, `reason` (`NotFound`, `AlreadyExists`,
//!   `BadRequest`, `Invalid`), `details` and `code` (apimachinery
//!   pkg/api/errors/errors.go).
//! - Pods (`/api/v1/namespaces/{ns}/pods`): create answers 201 with the
//!   object, `metadata.uid`, `creationTimestamp`, `resourceVersion` set
//!   and `status.phase: Pending`; a second create of a name answers 409
//!   `AlreadyExists`; `generateName` gets 5 random characters (names.go
//!   `SimpleNameGenerator`). Get answers 404 `NotFound` when unknown; list
//!   is a `PodList` filtered by `?labelSelector=` ([`select`]) whose
//!   `metadata.resourceVersion` is the store's. Every write moves the one
//!   store-wide `resourceVersion` (docs, "API concepts", resource versions).
//! - A pod's life: once its box is up and its command started, `phase:
//!   Running` with the container `running` and `ready`; when the command
//!   ends, `Succeeded` or `Failed` with the container `terminated` and its
//!   `exitCode` (restartPolicy Never). `spec.activeDeadlineSeconds` after
//!   `status.startTime` the pod is `Failed` with reason `DeadlineExceeded`
//!   and its container killed (docs, Pod lifecycle; kubelet
//!   active_deadline.go).
//! - Delete: `gracePeriodSeconds` from the query or the `DeleteOptions`
//!   body, else `spec.terminationGracePeriodSeconds`, else 30. The answer
//!   is 200 with the pod carrying `deletionTimestamp` and
//!   `deletionGracePeriodSeconds`; the container gets TERM, then is killed
//!   when the grace ends, and only then does the object disappear (a get
//!   is 404): disappearance is asynchronous (docs, "Termination of Pods").
//!   [`Knobs::delete_lag`] holds the object a while longer, as a slow
//!   kubelet does.
//! - A pod's volumes: each `emptyDir` mount is made empty, mode 0777, as
//!   the kubelet makes it (pkg/volume/emptydir/empty_dir.go,
//!   `perm os.FileMode = 0777`). An emptyDir with a `sizeLimit` is
//!   measured (`du`) every [`pod::HOUSEKEEPING`]; past its limit the pod is
//!   evicted: `phase: Failed`, `reason: Evicted`, `message: Usage of
//!   EmptyDir volume "<name>" exceeds the limit "<limit>". `, its container
//!   killed (kubelet pkg/kubelet/eviction/eviction_manager.go
//!   `emptyDirLimitEviction`, helpers.go `emptyDirMessageFmt`; the real
//!   housekeeping interval is 10 s).
//! - Every pod can reach the API server's Service by name,
//!   `kubernetes.default.svc:443` (docs, "Accessing the Kubernetes API
//!   from a Pod"), unless a policy it is under blocks its egress (DNS
//!   included). The boxes have no network, so the fake's Service
//!   ([`pod::SERVICE`]) is on the box's loopback and its name in the box's
//!   /etc/hosts only when [`Knobs::ignore_network_policy`] is set: a CNI
//!   that does not enforce a pod's deny-all policy lets it resolve the
//!   name and reach the Service.
//! - A container whose program is missing fails to start: `phase:
//!   Failed`, container `terminated` with `reason: StartError`, exit code
//!   128 and the runtime's words (`exec: "<path>": stat <path>: no such
//!   file or directory`). A container that ends with a nonzero code under
//!   `terminationMessagePolicy: FallbackToLogsOnError` has the end of its
//!   output (at most 2048 bytes) as its `terminated.message` (core/v1
//!   Container; kubelet kuberuntime_container.go `getTerminationMessage`).
//! - Every request is recorded as RBAC authorizes it ([`FakeKubernetes::
//!   verbs`]): its API group, resource (with subresource) and verb. GET of
//!   one object is `get`, of a collection `list` (`watch` with
//!   `?watch=true`), POST `create`, PUT `update`, PATCH `patch`, DELETE
//!   `delete` (docs, "Authorization", determine the request verb). A
//!   WebSocket exec is a GET, so `get` on `pods/exec`, and API servers
//!   from 1.31 also require `create` on it for the upgrade
//!   (AuthorizePodWebsocketUpgradeCreatePermission): both are recorded.
//! - A pod update is a JSON merge patch of its labels, annotations and
//!   `spec.activeDeadlineSeconds` (only lowered), others refused
//!   ([`pod::patch`]); the fake's kubelet ends a pod at the deadline as it
//!   stands then.
//! - [`sandbox`]: agent-sandbox's resources and controllers, once
//!   installed ([`FakeKubernetes::install_agent_sandbox`]).
//! - [`discovery`]: the legacy discovery documents, for kubectl. An object
//!   of a kind the fake does not store reads as 404 `NotFound`.
//! - [`admission`]: RBAC's 403, LimitRanger's 403, LimitRanges and Events.
//!   A pod made while [`Knobs::pending`] is set stays `Pending` with
//!   `PodScheduled: False` and a Warning event of the knob's words.
//! - The runtime's part of the securityContext: a container that drops
//!   ALL capabilities with `allowPrivilegeEscalation: false` is a box with
//!   no capability and no-new-privileges (Docker's default seccomp profile
//!   stands for RuntimeDefault).
//! - The container runs its `command` + `args` as
//!   `securityContext.runAsUser`:`runAsGroup` (container's, else the
//!   pod's; root when neither), with its `env` and `workingDir`. When the
//!   fake was told an image carries a file ([`FakeKubernetes::carry`]) the
//!   file is put in the box first, so an image that carries a static
//!   computerd is the test image plus that file.
//! - `pods/exec` ([`exec`]): a WebSocket on GET or POST with the
//!   subprotocol `v5.channel.k8s.io` or `v4.channel.k8s.io`, the channel
//!   byte framing, the `Status` on channel 3 and v5's close of stdin.
//! - NetworkPolicy (`/apis/networking.k8s.io/v1/namespaces/{ns}/
//!   networkpolicies`): create (201, 409), get (404), list by selector,
//!   delete (200 with a `Status` of `Success`: no finalizers, gone at once).
//!   A box has no network unless a policy that selects its pod lets it
//!   reach something, so a deny-all policy is kept;
//!   [`Knobs::ignore_network_policy`] has the fake's nodes report, as a
//!   CNI that does not enforce policies would, that a pod is reachable.
//!   [`policy::reach_of`] is the fake's CNI for the rest: a pod whose
//!   policies let it reach or be reached by other pods is on the pods'
//!   network (internal: no way out), its `podIP` its address there; one
//!   let reach an `ipBlock` is also on Docker's default bridge (the
//!   world, the blocks' `except` lists not enforced: the egress proxy
//!   refuses those addresses itself), resolving with [`Knobs::dns`].

pub mod admission;
pub mod discovery;
pub mod exec;
pub mod pod;
mod policy;
pub mod rbac;
pub mod sandbox;
pub mod select;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bollard::Docker;
use computer_providers::types::{ErrorCode, ProviderError, Result};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::vendor_box::VendorBox;
use select::Selector;

/// The largest request body the fake takes (a pod or a policy).
pub const BODY_MAX: usize = 3 * 1024 * 1024;

/// What the fake does now and then, set by a test.
#[derive(Clone, Debug, Default)]
pub struct Knobs {
    /// How long a deleted pod's object outlives its container.
    pub delete_lag: Duration,
    /// The cluster's CNI does not enforce NetworkPolicy (read through
    /// [`FakeKubernetes::enforces_network_policy`]).
    pub ignore_network_policy: bool,
    /// Pods made while this is set stay `Pending`, with a Warning event
    /// of this reason and message (as a scheduler that finds no node, or
    /// a kubelet that cannot pull the image, leaves them).
    pub pending: Option<(String, String)>,
    /// Namespaces the account may not create pods in (RBAC's 403).
    pub forbidden: Vec<String>,
    /// agent-sandbox is installed: its resources served, its
    /// controllers run ([`sandbox`]).
    pub agent_sandbox: bool,
    /// An operator makes a SandboxWarmPool of this many replicas, named
    /// as the template, for every SandboxTemplate made.
    pub auto_pool: Option<u32>,
    /// The cluster's DNS servers, as a pod that may reach the world
    /// resolves with them ([`policy::reach_of`]).
    pub dns: Vec<String>,
    /// Pods whose name ends with this start their command this long
    /// after they read `Running`: a program slow to listen. The kubelet
    /// reports a container running once its process starts, not once it
    /// serves (docs, "Pod Lifecycle", container states; readiness is a
    /// probe's, and our pods set none).
    pub slow_start: Option<(String, Duration)>,
}

/// One pod: its object, and its box once made.
pub(crate) struct Pod {
    pub object: Value,
    pub boxed: Option<Arc<VendorBox>>,
    /// The container's process in the box (for TERM at delete).
    pub pid: Option<u32>,
    /// Ends the pod's own tasks (deadline, command watch).
    pub stop: CancellationToken,
    /// Held while its box is being made.
    pub starting: Arc<tokio::sync::Mutex<()>>,
}

pub(crate) struct Shared {
    pub token: String,
    pub docker: Docker,
    pub image: String,
    pub owner: String,
    pub version: AtomicU64,
    pub pods: Mutex<BTreeMap<(String, String), Pod>>,
    pub policies: Mutex<BTreeMap<(String, String), Value>>,
    pub limit_ranges: Mutex<BTreeMap<(String, String), Value>>,
    pub events: Mutex<Vec<Value>>,
    /// Every (API group, resource, verb) asked, as RBAC reads a request.
    pub verbs: Mutex<std::collections::BTreeSet<(String, String, String)>>,
    /// Files an image carries: (path in the image, file on this host).
    pub carried: Mutex<Vec<(String, PathBuf)>>,
    pub knobs: Mutex<Knobs>,
    /// agent-sandbox's objects.
    pub custom: sandbox::Objects,
    /// Every box made, so close removes even one a stream still holds.
    pub made: Mutex<Vec<Arc<VendorBox>>>,
    /// The pods' network, made at the first pod a policy lets reach
    /// another ([`policy::reach_of`]).
    pub pod_net: tokio::sync::OnceCell<String>,
    pub stop: CancellationToken,
}

impl Shared {
    /// The next resourceVersion, as the API writes it (a string).
    pub fn bump(&self) -> String {
        (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }
}

/// The fake, serving until dropped; every box it made is removed then.
pub struct FakeKubernetes {
    shared: Arc<Shared>,
    url: String,
}

impl std::fmt::Debug for FakeKubernetes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeKubernetes")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn failed(e: impl std::fmt::Display) -> ProviderError {
    ProviderError::new(ErrorCode::Failed, e.to_string())
}

pub(crate) fn now() -> String {
    OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

impl FakeKubernetes {
    /// Start the fake on 127.0.0.1, taking the bearer token `token`; its
    /// pods are boxes of their own `image` (the test image when they name
    /// none), labelled with `owner`.
    pub async fn start(
        docker: &Docker,
        image: &str,
        token: &str,
        owner: &str,
    ) -> Result<FakeKubernetes> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(failed)?;
        let port = listener.local_addr().map_err(failed)?.port();
        let shared = Arc::new(Shared {
            token: token.to_string(),
            docker: docker.clone(),
            image: image.to_string(),
            owner: owner.to_string(),
            version: AtomicU64::new(1000),
            pods: Mutex::new(BTreeMap::new()),
            policies: Mutex::new(BTreeMap::new()),
            limit_ranges: Mutex::new(BTreeMap::new()),
            events: Mutex::new(Vec::new()),
            verbs: Mutex::new(std::collections::BTreeSet::new()),
            pod_net: tokio::sync::OnceCell::new(),
            carried: Mutex::new(Vec::new()),
            knobs: Mutex::new(Knobs::default()),
            custom: sandbox::Objects::default(),
            made: Mutex::new(Vec::new()),
            stop: CancellationToken::new(),
        });
        let np = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies";
        let app = Router::new()
            .route(
                "/api/v1/namespaces/{ns}/pods",
                get(pod::list).post(pod::create),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(pod::read).delete(pod::delete).patch(pod::patch),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/exec",
                get(exec::exec).post(exec::exec),
            )
            .route(
                "/api/v1/namespaces/{ns}/events",
                get(admission::list_events),
            )
            .route(
                "/api/v1/namespaces/{ns}/limitranges",
                get(admission::list_limit_ranges),
            )
            .route("/api", get(discovery::core))
            .route("/api/v1", get(discovery::core_v1))
            .route("/apis", get(discovery::groups))
            .route("/apis/{group}/{version}", get(discovery::group_version))
            .route(np, get(list_policies).post(create_policy))
            .route(
                &format!("{np}/{{name}}"),
                get(read_policy).delete(delete_policy),
            );
        let app = sandbox::routes(app)
            .fallback(|| async {
                status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            })
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&shared),
                rbac::record,
            ))
            .layer(axum::extract::DefaultBodyLimit::max(BODY_MAX))
            .with_state(Arc::clone(&shared));
        crate::serve(listener, app, shared.stop.clone());
        tokio::spawn(sandbox::controllers(Arc::clone(&shared)));
        Ok(FakeKubernetes {
            shared,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// The API server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig naming this server and its token, as `kubectl config`
    /// writes one (one cluster, one user, one context, current).
    pub fn kubeconfig(&self, namespace: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake\n  user:\n    token: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: {namespace}\ncurrent-context: fake\n",
            self.url, self.shared.token
        )
    }

    /// Every pod's box holds `host`'s bytes at `path` before its command
    /// starts, as an image that carries the file would.
    pub fn carry(&self, path: &str, host: impl Into<PathBuf>) {
        lock(&self.shared.carried).push((path.to_string(), host.into()));
    }

    /// Store the LimitRange `spec` (its `limits` items) as `name` in
    /// `ns`, as an administrator's `kubectl apply` would.
    pub fn limit_range(&self, ns: &str, name: &str, spec: Value) {
        let mut v = json!({"metadata": {"name": name}, "spec": spec});
        stamp(&self.shared, &mut v, ns, name, "LimitRange", "v1");
        lock(&self.shared.limit_ranges).insert((ns.to_string(), name.to_string()), v);
    }

    /// Every (API group, resource, verb) asked so far, as RBAC reads the
    /// requests (`""` is the core group).
    pub fn verbs(&self) -> std::collections::BTreeSet<(String, String, String)> {
        lock(&self.shared.verbs).clone()
    }

    /// Set what the fake does next.
    pub fn knobs(&self, f: impl FnOnce(&mut Knobs)) {
        f(&mut lock(&self.shared.knobs));
    }

    /// Whether the cluster's CNI enforces NetworkPolicy (a real cluster
    /// tells it by a pod's traffic only; the fake says it).
    pub fn enforces_network_policy(&self) -> bool {
        !lock(&self.shared.knobs).ignore_network_policy
    }

    /// `namespace/name` of every pod object the store holds (deleting
    /// ones included).
    pub fn pods(&self) -> Vec<String> {
        lock(&self.shared.pods)
            .keys()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }

    /// The pod `ns/name`'s object, as stored.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        lock(&self.shared.pods)
            .get(&(ns.to_string(), name.to_string()))
            .map(|p| p.object.clone())
    }

    /// `namespace/name` of every NetworkPolicy.
    pub fn policies(&self) -> Vec<String> {
        lock(&self.shared.policies)
            .keys()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }

    /// For a test's end: panics naming any pod, NetworkPolicy, Sandbox
    /// or SandboxClaim left.
    pub fn assert_nothing_left(&self) {
        assert_eq!(self.pods(), Vec::<String>::new(), "a pod was left");
        assert_eq!(self.policies(), Vec::<String>::new(), "a policy was left");
        for plural in ["sandboxes", "sandboxclaims"] {
            assert_eq!(self.objects(plural), Vec::<String>::new(), "{plural} left");
        }
    }

    /// Serve agent-sandbox's resources and run its controllers.
    pub fn install_agent_sandbox(&self) {
        self.knobs(|k| k.agent_sandbox = true);
    }

    /// `namespace/name` of every object of agent-sandbox's `plural`.
    pub fn objects(&self, plural: &str) -> Vec<String> {
        lock(self.shared.custom.of(plural))
            .keys()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }

    /// An object of agent-sandbox's `plural`, as stored.
    pub fn object(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        lock(self.shared.custom.of(plural))
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Make the SandboxWarmPool `name` of the SandboxTemplate `template`
    /// holding `replicas` warm pods, as an operator would.
    pub fn warm_pool(&self, ns: &str, name: &str, template: &str, replicas: u32) {
        sandbox::warm_pool(&self.shared, ns, name, template, replicas);
    }

    /// Delete every SandboxWarmPool (their Sandboxes and pods follow, as
    /// the garbage collector takes them) and wait until no pod is left.
    /// The operator of [`Knobs::auto_pool`] stops too.
    pub async fn remove_pools(&self) {
        self.knobs(|k| k.auto_pool = None);
        lock(&self.shared.custom.sandboxwarmpools).clear();
        self.shared.bump();
        for _ in 0..600 {
            if self.pods().is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The names of the Docker containers of pods not yet gone.
    pub fn boxes(&self) -> Vec<String> {
        lock(&self.shared.pods)
            .values()
            .filter_map(|p| p.boxed.as_ref().map(|b| b.id().to_string()))
            .collect()
    }

    /// Change a pod's object behind the client's back (as another client
    /// or an admission webhook would), moving its resourceVersion.
    pub fn edit_pod(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Value)) -> bool {
        let version = self.shared.bump();
        let mut pods = lock(&self.shared.pods);
        match pods.get_mut(&(namespace.to_string(), name.to_string())) {
            Some(p) => {
                f(&mut p.object);
                p.object["metadata"]["resourceVersion"] = json!(version);
                true
            }
            None => false,
        }
    }

    /// Remove every box now and stop serving.
    pub async fn close(&self) {
        let starting: Vec<_> = lock(&self.shared.pods)
            .values()
            .map(|p| {
                p.stop.cancel();
                Arc::clone(&p.starting)
            })
            .collect();
        // A box being made is in `made` once its start lets go.
        for s in starting {
            drop(s.lock().await);
        }
        let boxes: Vec<Arc<VendorBox>> = lock(&self.shared.made).drain(..).collect();
        for b in boxes {
            let _ = b.remove().await;
        }
        if let Some(n) = self.shared.pod_net.get() {
            let _ = self.shared.docker.remove_network(n).await;
        }
        self.shared.stop.cancel();
    }
}

impl Drop for FakeKubernetes {
    fn drop(&mut self) {
        self.shared.stop.cancel();
        // Each box removes itself when its last holder drops it.
        lock(&self.shared.pods).clear();
        lock(&self.shared.made).clear();
    }
}

/// A `metav1.Status` failure, as the API server answers one.
pub(crate) fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    (
        code,
        axum::Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code.as_u16(),
        })),
    )
        .into_response()
}

pub(crate) fn not_found(kind: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{kind} \"{name}\" not found"),
    )
}

/// The bearer token's gate: 401 without it.
pub(crate) fn gate(s: &Shared, h: &HeaderMap) -> Option<Response> {
    let given = h
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    (given != Some(s.token.as_str()))
        .then(|| status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized"))
}

/// `?labelSelector=`, read, or the 400 of one that cannot be.
pub(crate) fn selector(
    q: &BTreeMap<String, String>,
) -> std::result::Result<Selector, Box<Response>> {
    Selector::parse(q.get("labelSelector").map(String::as_str).unwrap_or("")).map_err(|e| {
        Box::new(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!("unable to parse requirement: {e}"),
        ))
    })
}

/// An object's labels as a map (none, or not strings: empty).
pub(crate) fn labels_of(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v["metadata"]["labels"].clone()).unwrap_or_default()
}

/// A name as the API takes one: a DNS-1123 subdomain (at most 253
/// characters of `a-z0-9.-`, starting and ending alphanumeric;
/// apimachinery pkg/util/validation).
pub(crate) fn check_name(name: &str) -> std::result::Result<(), Box<Response>> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok {
        return Ok(());
    }
    Err(Box::new(status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        &format!(
            "metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ),
    )))
}

/// The object's name: `metadata.name`, or `generateName` plus 5 random
/// characters (apiserver pkg/storage/names SimpleNameGenerator).
pub(crate) fn name_for(v: &Value) -> std::result::Result<String, Box<Response>> {
    if let Some(n) = v["metadata"]["name"].as_str() {
        check_name(n)?;
        return Ok(n.to_string());
    }
    if let Some(g) = v["metadata"]["generateName"].as_str() {
        let n = format!("{g}{}", &random_suffix());
        check_name(&n)?;
        return Ok(n);
    }
    Err(Box::new(status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        "metadata.name: Required value: name or generateName is required",
    )))
}

/// 5 characters of the generator's alphabet (no vowels, no 0, 1, 3).
fn random_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let hex = computer_providers::random::random_hex(5).unwrap_or_default();
    hex.as_bytes()
        .chunks(2)
        .map(|b| {
            let n = u8::from_str_radix(std::str::from_utf8(b).unwrap_or("0"), 16).unwrap_or(0);
            ALPHA[usize::from(n) % ALPHA.len()] as char
        })
        .collect()
}

/// A UUID-shaped uid, as the API server gives every object.
pub(crate) fn uid() -> String {
    let b = computer_providers::random::random_hex(16).unwrap_or_default();
    if b.len() < 32 {
        return "00000000-0000-0000-0000-000000000000".into();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &b[0..8],
        &b[8..12],
        &b[12..16],
        &b[16..20],
        &b[20..32]
    )
}

/// A list object of `kind` holding `items`.
pub(crate) fn list_of(kind: &str, api: &str, version: String, items: Vec<Value>) -> Response {
    axum::Json(json!({
        "kind": kind,
        "apiVersion": api,
        "metadata": {"resourceVersion": version},
        "items": items,
    }))
    .into_response()
}

type Q = Query<BTreeMap<String, String>>;

/// A create's body, past the token's gate: the object and its name, or
/// the answer that refuses it.
pub(crate) fn admit(
    s: &Shared,
    h: &HeaderMap,
    body: &[u8],
    kind: &str,
) -> std::result::Result<(Value, String), Box<Response>> {
    if let Some(r) = gate(s, h) {
        return Err(Box::new(r));
    }
    let v = serde_json::from_slice::<Value>(body).map_err(|_| {
        Box::new(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!("the body is not a {kind}"),
        ))
    })?;
    let name = name_for(&v)?;
    Ok((v, name))
}

/// The `Status` of a delete that removed `v` at once (no finalizers).
pub(crate) fn deleted(name: &str, group: &str, kind: &str, v: &Value) -> Response {
    axum::Json(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": group, "kind": kind, "uid": v["metadata"]["uid"]},
    }))
    .into_response()
}

/// `given`'s labels and annotations (`{"labels": {…}, …}`) merged into
/// the object `v`'s metadata, a null removing a key (RFC 7386).
pub(crate) fn merge_metadata(v: &mut Value, given: &Value) {
    for m in ["labels", "annotations"] {
        let Some(given) = given[m].as_object() else {
            continue;
        };
        if !v["metadata"][m].is_object() {
            v["metadata"][m] = json!({});
        }
        if let Some(held) = v["metadata"][m].as_object_mut() {
            for (k, x) in given {
                if x.is_null() {
                    held.remove(k);
                } else {
                    held.insert(k.clone(), x.clone());
                }
            }
        }
    }
}

/// The 409 of a second create of `name` (`resource` as the API names it).
pub(crate) fn exists(resource: &str, name: &str) -> Response {
    status(
        StatusCode::CONFLICT,
        "AlreadyExists",
        &format!("{resource} \"{name}\" already exists"),
    )
}

/// What the server sets on every object it stores.
pub(crate) fn stamp(s: &Shared, v: &mut Value, ns: &str, name: &str, kind: &str, api: &str) {
    let meta = &mut v["metadata"];
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    meta["uid"] = json!(uid());
    meta["creationTimestamp"] = json!(now());
    meta["resourceVersion"] = json!(s.bump());
    v["kind"] = json!(kind);
    v["apiVersion"] = json!(api);
}

pub(crate) fn read_in<T>(
    s: &Shared,
    h: &HeaderMap,
    store: &Mutex<BTreeMap<(String, String), T>>,
    key: (String, String),
    resource: &str,
    object: fn(&T) -> &Value,
) -> Response {
    if let Some(r) = gate(s, h) {
        return r;
    }
    let name = key.1.clone();
    match lock(store).get(&key) {
        Some(v) => axum::Json(object(v).clone()).into_response(),
        None => not_found(resource, &name),
    }
}

/// A list of `store`'s objects in `ns` that `?labelSelector=` picks, as
/// the list object `kind` of `api`.
pub(crate) fn list_in<T>(
    s: &Shared,
    h: &HeaderMap,
    q: &BTreeMap<String, String>,
    store: &Mutex<BTreeMap<(String, String), T>>,
    ns: &str,
    (kind, api): (&str, &str),
    object: fn(&T) -> &Value,
) -> Response {
    if let Some(r) = gate(s, h) {
        return r;
    }
    let sel = match selector(q) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let items = lock(store)
        .iter()
        .filter(|((n, _), v)| n == ns && sel.matches(&labels_of(object(v))))
        .map(|(_, v)| object(v).clone())
        .collect();
    let version = s.version.load(Ordering::SeqCst).to_string();
    list_of(kind, api, version, items)
}

/// A stored object that is its own JSON (for [`read_in`], [`list_in`]).
pub(crate) fn itself(v: &Value) -> &Value {
    v
}

use policy::{create_policy, delete_policy, list_policies, read_policy};

#[cfg(test)]
#[path = "kubernetes/tests.rs"]
mod tests;
