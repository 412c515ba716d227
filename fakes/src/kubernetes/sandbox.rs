//! agent-sandbox in the fake (kubernetes-sigs/agent-sandbox, API
//! v1beta1), served once [`super::FakeKubernetes::install_agent_sandbox`]
//! was called: its four resources and, every [`TICK`], what its
//! controllers do. Before that, every path of theirs is the API server's
//! 404 for a resource it does not serve, and discovery lists neither group.
//! The rules, with the source each follows (controllers/ and
//! extensions/controllers/ of that repository):
//!
//! - Resources: `sandboxes` in `agents.x-k8s.io/v1beta1`;
//!   `sandboxtemplates`, `sandboxclaims`, `sandboxwarmpools` in
//!   `extensions.agents.x-k8s.io/v1beta1`; namespaced; create (201, 409),
//!   get (404), list by label selector, delete (200, gone at once: the
//!   fake holds no finalizers). A pool's `spec.replicas` defaults to 1
//!   (sandboxwarmpool_types.go, `+kubebuilder:default=1`).
//! - A Sandbox makes its pod, named after the Sandbox unless its
//!   `agents.x-k8s.io/pod-name` annotation names another (a warm pod it
//!   adopted): labels of its `podTemplate` plus
//!   `agents.x-k8s.io/sandbox-name-hash` (FNV-1a of its name, 8 hex
//!   digits: `NameHash`), the template's annotations, an ownerReference
//!   naming the Sandbox as controller, the template's spec; a pod that is
//!   gone is made again (sandbox_controller.go `reconcilePod`). The
//!   template's labels and annotations are kept on an existing pod
//!   (`updatePodMetadata`), others' left alone. Status: `Ready` True with
//!   reason `DependenciesReady` once the pod runs, else False
//!   `DependenciesNotReady` (or `ReconcilerError` with the API's words when
//!   the pod was refused); `podIPs` (`computeReadyCondition`). Past
//!   `spec.shutdownTime` its pod is deleted, and the Sandbox too under
//!   `shutdownPolicy: Delete`, else Ready False `SandboxExpired`
//!   (`handleSandboxExpiry`).
//! - A SandboxWarmPool keeps `replicas` Sandboxes of its template: each
//!   `generateName: <pool>-`, labelled `agents.x-k8s.io/warm-pool-sandbox`
//!   (NameHash of the pool), `agents.x-k8s.io/sandbox-template-ref-hash`
//!   (NameHash of the template), `agents.x-k8s.io/launch-type: warm`,
//!   controlled by the pool, the template's blueprint copied; extras are
//!   deleted; `status.replicas` and `readyReplicas` counted
//!   (sandboxwarmpool_controller.go `reconcilePool`,
//!   `buildPoolSandbox`).
//! - A SandboxClaim on `spec.warmPoolRef` adopts the pool's oldest Ready
//!   Sandbox: the warm-pool label dropped, the claim made its controller,
//!   `agents.x-k8s.io/pod-name` set to its name, `agents.x-k8s.io/claim-uid`
//!   on it and its pod template (`completeAdoption`); with none Ready it
//!   makes a Sandbox of the claim's name from the pool's template,
//!   launch-type cold (`createSandbox`). No pool: Ready False
//!   `WarmPoolNotFound`. `status.sandbox.name` names the Sandbox and Ready
//!   mirrors the Sandbox's. Past `spec.lifecycle.shutdownTime` the claim
//!   is deleted under `shutdownPolicy: Delete`, else its Sandbox is
//!   (`reconcileExpired`).
//! - [`super::Knobs::auto_pool`] stands for an operator who makes a pool
//!   of that many replicas, named as the template, for every
//!   SandboxTemplate made.
//! - Garbage collection, background propagation (docs, "Garbage
//!   Collection", owner references): an object whose controller owner
//!   (by uid) is gone is deleted, a pod with its own grace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{
    Shared, admit, exists, gate, itself, list_in, lock, name_for, not_found, now, read_in, stamp,
};

pub const GROUP: &str = "agents.x-k8s.io";
pub const EXTENSIONS: &str = "extensions.agents.x-k8s.io";
pub const VERSION: &str = "v1beta1";
/// How often the fake's agent-sandbox controllers reconcile.
pub const TICK: Duration = Duration::from_millis(100);

/// (group, kind, plural) of each resource.
pub const KINDS: &[(&str, &str, &str)] = &[
    (GROUP, "Sandbox", "sandboxes"),
    (EXTENSIONS, "SandboxTemplate", "sandboxtemplates"),
    (EXTENSIONS, "SandboxClaim", "sandboxclaims"),
    (EXTENSIONS, "SandboxWarmPool", "sandboxwarmpools"),
];

const POOL_LABEL: &str = "agents.x-k8s.io/warm-pool-sandbox";
const TEMPLATE_HASH: &str = "agents.x-k8s.io/sandbox-template-ref-hash";
const LAUNCH: &str = "agents.x-k8s.io/launch-type";
const POD_NAME: &str = "agents.x-k8s.io/pod-name";
const NAME_HASH: &str = "agents.x-k8s.io/sandbox-name-hash";
const CLAIM_UID: &str = "agents.x-k8s.io/claim-uid";

type Store = std::sync::Mutex<BTreeMap<(String, String), Value>>;
type Q = Query<BTreeMap<String, String>>;

/// The four stores, by plural.
#[derive(Default)]
pub struct Objects {
    pub sandboxes: Store,
    pub sandboxtemplates: Store,
    pub sandboxclaims: Store,
    pub sandboxwarmpools: Store,
}

impl Objects {
    pub fn of(&self, plural: &str) -> &Store {
        match plural {
            "sandboxes" => &self.sandboxes,
            "sandboxtemplates" => &self.sandboxtemplates,
            "sandboxclaims" => &self.sandboxclaims,
            _ => &self.sandboxwarmpools,
        }
    }
}

/// FNV-1a (32 bits) of `name` as 8 hex digits (sandbox_controller.go
/// `NameHash`).
pub fn name_hash(name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

fn installed(s: &Shared) -> bool {
    lock(&s.knobs).agent_sandbox
}

/// The API server's answer for a resource it does not serve.
fn unserved() -> Response {
    super::status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// The routes of the four resources.
pub(super) fn routes(mut app: Router<Arc<Shared>>) -> Router<Arc<Shared>> {
    for &(group, kind, plural) in KINDS {
        let base = format!("/apis/{group}/{VERSION}/namespaces/{{ns}}/{plural}");
        app = app
            .route(
                &base,
                get(
                    move |st: State<Arc<Shared>>, p: Path<String>, q: Q, h: HeaderMap| {
                        list(st, p, q, h, plural, kind)
                    },
                )
                .post(
                    move |st: State<Arc<Shared>>, p: Path<String>, h: HeaderMap, b: Bytes| {
                        create(st, p, h, b, plural, kind, group)
                    },
                ),
            )
            .route(
                &format!("{base}/{{name}}"),
                get(
                    move |st: State<Arc<Shared>>, p: Path<(String, String)>, h: HeaderMap| {
                        read(st, p, h, plural)
                    },
                )
                .delete(
                    move |st: State<Arc<Shared>>, p: Path<(String, String)>, h: HeaderMap| {
                        delete(st, p, h, plural, group)
                    },
                ),
            );
    }
    app
}

async fn list(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Q,
    h: HeaderMap,
    plural: &'static str,
    kind: &'static str,
) -> Response {
    if !installed(&s) {
        return gate(&s, &h).unwrap_or_else(unserved);
    }
    let group = KINDS.iter().find(|k| k.2 == plural).map_or(GROUP, |k| k.0);
    let api = format!("{group}/{VERSION}");
    let list = format!("{kind}List");
    list_in(&s, &h, &q, s.custom.of(plural), &ns, (&list, &api), itself)
}

async fn read(
    State(s): State<Arc<Shared>>,
    Path(key): Path<(String, String)>,
    h: HeaderMap,
    plural: &'static str,
) -> Response {
    if !installed(&s) {
        return gate(&s, &h).unwrap_or_else(unserved);
    }
    read_in(&s, &h, s.custom.of(plural), key, plural, itself)
}

async fn create(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    h: HeaderMap,
    body: Bytes,
    plural: &'static str,
    kind: &'static str,
    group: &'static str,
) -> Response {
    if !installed(&s) {
        return gate(&s, &h).unwrap_or_else(unserved);
    }
    let (v, name) = match admit(&s, &h, &body, kind) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    match store(&s, plural, &ns, &name, v, kind, group) {
        Some(v) => (StatusCode::CREATED, axum::Json(v)).into_response(),
        None => exists(&format!("{plural}.{group}"), &name),
    }
}

/// Store `v` as `name` of `plural` in `ns`, stamped; None when the name
/// is taken.
fn store(
    s: &Shared,
    plural: &str,
    ns: &str,
    name: &str,
    mut v: Value,
    kind: &str,
    group: &str,
) -> Option<Value> {
    let mut objects = lock(s.custom.of(plural));
    let key = (ns.to_string(), name.to_string());
    if objects.contains_key(&key) {
        return None;
    }
    stamp(s, &mut v, ns, name, kind, &format!("{group}/{VERSION}"));
    v["metadata"]["generation"] = json!(1);
    if plural == "sandboxwarmpools" && v["spec"]["replicas"].is_null() {
        v["spec"]["replicas"] = json!(1);
    }
    objects.insert(key, v.clone());
    Some(v)
}

async fn delete(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    h: HeaderMap,
    plural: &'static str,
    group: &'static str,
) -> Response {
    if !installed(&s) {
        return gate(&s, &h).unwrap_or_else(unserved);
    }
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    match lock(s.custom.of(plural)).remove(&(ns, name.clone())) {
        Some(v) => {
            s.bump();
            super::deleted(&name, group, plural, &v)
        }
        None => not_found(&format!("{plural}.{group}"), &name),
    }
}

/// The fake's controllers, every [`TICK`] while agent-sandbox is
/// installed, until the fake stops.
pub(super) async fn controllers(s: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = s.stop.cancelled() => return,
            _ = tokio::time::sleep(TICK) => {}
        }
        if installed(&s) {
            reconcile(&s);
        }
    }
}

fn reconcile(s: &Arc<Shared>) {
    auto_pools(s);
    pools(s);
    claims(s);
    sandboxes(s);
    collect(s);
}

fn all(store: &Store) -> Vec<((String, String), Value)> {
    lock(store)
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn put(s: &Shared, store: &Store, key: &(String, String), v: Value) {
    let version = s.bump();
    if let Some(held) = lock(store).get_mut(key) {
        *held = v;
        held["metadata"]["resourceVersion"] = json!(version);
    }
}

fn controller_uid(v: &Value) -> Option<String> {
    v["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == json!(true))
        .and_then(|o| o["uid"].as_str().map(str::to_string))
}

fn owner(kind: &str, group: &str, v: &Value) -> Value {
    json!([{
        "apiVersion": format!("{group}/{VERSION}"),
        "kind": kind,
        "name": v["metadata"]["name"],
        "uid": v["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

fn past(t: &Value) -> bool {
    t.as_str()
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        .is_some_and(|t| t <= OffsetDateTime::now_utc())
}

fn ready(v: &Value) -> bool {
    v["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn condition(status: &str, reason: &str, message: &str) -> Value {
    json!([{"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}])
}

fn auto_pools(s: &Shared) {
    let Some(n) = lock(&s.knobs).auto_pool else {
        return;
    };
    for ((ns, name), _) in all(&s.custom.sandboxtemplates) {
        let pool = json!({"metadata": {"name": name}, "spec": {"replicas": n, "sandboxTemplateRef": {"name": name}}});
        let _ = store(
            s,
            "sandboxwarmpools",
            &ns,
            &name,
            pool,
            "SandboxWarmPool",
            EXTENSIONS,
        );
    }
}

/// A new Sandbox of `template`'s blueprint with `meta`.
fn sandbox_of(template: &Value, meta: Value) -> Value {
    let mut spec = template["spec"].clone();
    if let Some(o) = spec.as_object_mut() {
        for k in [
            "networkPolicy",
            "networkPolicyManagement",
            "envVarsInjectionPolicy",
            "volumeClaimTemplatesPolicy",
        ] {
            o.remove(k);
        }
    }
    json!({"metadata": meta, "spec": spec})
}

fn make_sandbox(s: &Shared, ns: &str, v: Value) -> Option<String> {
    let name = name_for(&v).ok()?;
    store(s, "sandboxes", ns, &name, v, "Sandbox", GROUP).map(|_| name)
}

fn pools(s: &Shared) {
    let sandboxes = all(&s.custom.sandboxes);
    for (key, mut pool) in all(&s.custom.sandboxwarmpools) {
        let (ns, name) = &key;
        let puid = pool["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let mine: Vec<&Value> = sandboxes
            .iter()
            .filter(|((n, _), sb)| n == ns && controller_uid(sb).as_deref() == Some(&puid))
            .filter(|(_, sb)| sb["metadata"]["labels"][POOL_LABEL] == json!(name_hash(name)))
            .map(|(_, sb)| sb)
            .collect();
        let want = pool["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        let tname = pool["spec"]["sandboxTemplateRef"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let template = lock(&s.custom.sandboxtemplates)
            .get(&(ns.clone(), tname.clone()))
            .cloned();
        if let Some(t) = &template {
            for _ in mine.len()..want {
                let mut sb = sandbox_of(
                    t,
                    json!({
                        "generateName": format!("{name}-"),
                        "labels": {POOL_LABEL: name_hash(name), TEMPLATE_HASH: name_hash(&tname), LAUNCH: "warm", "agents.x-k8s.io/created-by": "controller"},
                        "annotations": {"agents.x-k8s.io/sandbox-template-ref": tname},
                        "ownerReferences": owner("SandboxWarmPool", EXTENSIONS, &pool),
                    }),
                );
                let labels = &mut sb["spec"]["podTemplate"]["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels[POOL_LABEL] = json!(name_hash(name));
                labels[TEMPLATE_HASH] = json!(name_hash(&tname));
                make_sandbox(s, ns, sb);
            }
        }
        for extra in mine.iter().skip(want) {
            let n = extra["metadata"]["name"].as_str().unwrap_or("").to_string();
            lock(&s.custom.sandboxes).remove(&(ns.clone(), n));
        }
        let status = json!({
            "replicas": mine.len().min(want),
            "readyReplicas": mine.iter().take(want).filter(|sb| ready(sb)).count(),
            "selector": format!("{POOL_LABEL}={}", name_hash(name)),
            "observedGeneration": 1,
        });
        if pool["status"] != status {
            pool["status"] = status;
            put(s, &s.custom.sandboxwarmpools, &key, pool);
        }
    }
}

fn claims(s: &Shared) {
    for (key, mut claim) in all(&s.custom.sandboxclaims) {
        let ns = &key.0;
        let expired = past(&claim["spec"]["lifecycle"]["shutdownTime"]);
        let bound = claim["status"]["sandbox"]["name"]
            .as_str()
            .map(str::to_string);
        if expired {
            if claim["spec"]["lifecycle"]["shutdownPolicy"] == "Delete" {
                lock(&s.custom.sandboxclaims).remove(&key);
                s.bump();
            } else if let Some(sb) = &bound {
                lock(&s.custom.sandboxes).remove(&(ns.clone(), sb.clone()));
                claim["status"]["conditions"] =
                    condition("False", "ClaimExpired", "the claim expired");
                put(s, &s.custom.sandboxclaims, &key, claim);
            }
            continue;
        }
        let sandbox = match bound {
            Some(sb) => sb,
            None => match bind(s, &claim) {
                Ok(sb) => sb,
                Err((reason, message)) => {
                    let c = condition("False", reason, &message);
                    if claim["status"]["conditions"][0]["reason"] != c[0]["reason"] {
                        claim["status"]["conditions"] = c;
                        put(s, &s.custom.sandboxclaims, &key, claim);
                    }
                    continue;
                }
            },
        };
        let held = lock(&s.custom.sandboxes)
            .get(&(ns.clone(), sandbox.clone()))
            .cloned();
        let status = json!({
            "sandbox": {"name": sandbox, "podIPs": held.as_ref().map(|h| h["status"]["podIPs"].clone())},
            "conditions": held.as_ref().map_or_else(
                || condition("False", "SandboxMissing", "the Sandbox is gone"),
                |h| h["status"]["conditions"].clone(),
            ),
        });
        if claim["status"] != status {
            claim["status"] = status;
            put(s, &s.custom.sandboxclaims, &key, claim);
        }
    }
}

/// The Sandbox a claim gets: the pool's oldest Ready one adopted, else
/// one made of the pool's template; or why none.
fn bind(s: &Shared, claim: &Value) -> Result<String, (&'static str, String)> {
    let ns = claim["metadata"]["namespace"].as_str().unwrap_or("");
    let pool_name = claim["spec"]["warmPoolRef"]["name"].as_str().unwrap_or("");
    let Some(pool) = lock(&s.custom.sandboxwarmpools)
        .get(&(ns.to_string(), pool_name.to_string()))
        .cloned()
    else {
        return Err((
            "WarmPoolNotFound",
            format!("SandboxWarmPool \"{pool_name}\" not found"),
        ));
    };
    let puid = pool["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let cuid = claim["metadata"]["uid"].clone();
    let mut candidates: Vec<((String, String), Value)> = all(&s.custom.sandboxes)
        .into_iter()
        .filter(|((n, _), sb)| {
            n == ns
                && controller_uid(sb).as_deref() == Some(&puid)
                && sb["metadata"]["labels"][POOL_LABEL].is_string()
                && ready(sb)
        })
        .collect();
    candidates.sort_by(|a, b| {
        a.1["metadata"]["creationTimestamp"]
            .as_str()
            .cmp(&b.1["metadata"]["creationTimestamp"].as_str())
    });
    if let Some((k, mut sb)) = candidates.into_iter().next() {
        let labels = &mut sb["metadata"]["labels"];
        if let Some(l) = labels.as_object_mut() {
            l.remove(POOL_LABEL);
        }
        labels[LAUNCH] = json!("warm");
        labels[CLAIM_UID] = cuid.clone();
        sb["metadata"]["ownerReferences"] = owner("SandboxClaim", EXTENSIONS, claim);
        sb["metadata"]["annotations"][POD_NAME] = json!(k.1);
        sb["spec"]["podTemplate"]["metadata"]["labels"][CLAIM_UID] = cuid;
        if let Some(l) = sb["spec"]["podTemplate"]["metadata"]["labels"].as_object_mut() {
            l.remove(POOL_LABEL);
        }
        put(s, &s.custom.sandboxes, &k, sb);
        return Ok(k.1);
    }
    let tname = pool["spec"]["sandboxTemplateRef"]["name"]
        .as_str()
        .unwrap_or("");
    let Some(template) = lock(&s.custom.sandboxtemplates)
        .get(&(ns.to_string(), tname.to_string()))
        .cloned()
    else {
        return Err((
            "TemplateNotFound",
            format!("SandboxTemplate \"{tname}\" not found"),
        ));
    };
    let name = claim["metadata"]["name"].as_str().unwrap_or("").to_string();
    let mut sb = sandbox_of(
        &template,
        json!({
            "name": name,
            "labels": {LAUNCH: "cold", CLAIM_UID: cuid, TEMPLATE_HASH: name_hash(tname)},
            "annotations": {"agents.x-k8s.io/sandbox-template-ref": tname},
            "ownerReferences": owner("SandboxClaim", EXTENSIONS, claim),
        }),
    );
    sb["spec"]["podTemplate"]["metadata"]["labels"][CLAIM_UID] = cuid;
    match make_sandbox(s, ns, sb) {
        Some(n) => Ok(n),
        None => Err((
            "ReconcilerError",
            format!("Sandbox \"{name}\" already exists"),
        )),
    }
}

fn sandboxes(s: &Arc<Shared>) {
    for (key, mut sb) in all(&s.custom.sandboxes) {
        let (ns, name) = &key;
        let pod_name = sb["metadata"]["annotations"][POD_NAME]
            .as_str()
            .unwrap_or(name)
            .to_string();
        let pkey = (ns.clone(), pod_name.clone());
        let pod = lock(&s.pods).get(&pkey).map(|p| p.object.clone());
        let suid = sb["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let owned = pod
            .as_ref()
            .is_some_and(|p| controller_uid(p).as_deref() == Some(&suid));
        if past(&sb["spec"]["shutdownTime"]) {
            if owned {
                super::pod::remove(s, pkey, None);
            }
            if sb["spec"]["shutdownPolicy"] == "Delete" {
                lock(&s.custom.sandboxes).remove(&key);
                s.bump();
            } else if sb["status"]["conditions"][0]["reason"] != "SandboxExpired" {
                sb["status"] = json!({"conditions": condition("False", "SandboxExpired", "the Sandbox expired")});
                put(s, &s.custom.sandboxes, &key, sb);
            }
            continue;
        }
        let template = &sb["spec"]["podTemplate"];
        let status = match &pod {
            None => {
                let mut labels = template["metadata"]["labels"].clone();
                if !labels.is_object() {
                    labels = json!({});
                }
                labels[NAME_HASH] = json!(name_hash(name));
                let p = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name,
                        "labels": labels,
                        "annotations": template["metadata"]["annotations"].clone(),
                        "ownerReferences": owner("Sandbox", GROUP, &sb),
                    },
                    "spec": template["spec"].clone(),
                });
                match super::pod::make(s, ns, &pod_name, p) {
                    Ok(_) => {
                        json!({"conditions": condition("False", "DependenciesNotReady", "the pod is being made")})
                    }
                    Err(r) => {
                        let said = refusal(*r);
                        json!({"conditions": condition("False", "ReconcilerError", &said)})
                    }
                }
            }
            Some(p) if owned => {
                keep_metadata(s, &pkey, template);
                let running = p["status"]["phase"] == "Running";
                let ip = p["status"]["podIP"].clone();
                if running {
                    json!({"conditions": condition("True", "DependenciesReady", "the pod is ready"), "podIPs": [ip], "selector": format!("{NAME_HASH}={}", name_hash(name))})
                } else {
                    let phase = p["status"]["phase"].as_str().unwrap_or("Pending");
                    json!({"conditions": condition("False", "DependenciesNotReady", &format!("the pod is {phase}")), "selector": format!("{NAME_HASH}={}", name_hash(name))})
                }
            }
            Some(_) => {
                json!({"conditions": condition("False", "ReconcilerError", &format!("the pod \"{pod_name}\" is not controlled by this Sandbox"))})
            }
        };
        let same = sb["status"]["conditions"][0]["status"] == status["conditions"][0]["status"]
            && sb["status"]["conditions"][0]["reason"] == status["conditions"][0]["reason"];
        if !same {
            sb["status"] = status;
            put(s, &s.custom.sandboxes, &key, sb);
        }
    }
}

/// The words of a refused pod (the Status's message).
fn refusal(r: Response) -> String {
    let code = r.status();
    format!("the pod was refused ({code})")
}

/// The template's labels and annotations on the pod `key`, others'
/// left alone.
fn keep_metadata(s: &Shared, key: &(String, String), template: &Value) {
    if let Some(p) = lock(&s.pods).get_mut(key) {
        super::merge_metadata(&mut p.object, &template["metadata"]);
    }
}

/// Background garbage collection: Sandboxes whose pool or claim is gone,
/// pods whose Sandbox is gone.
fn collect(s: &Arc<Shared>) {
    let mut owners: std::collections::HashSet<String> = std::collections::HashSet::new();
    for store in [&s.custom.sandboxwarmpools, &s.custom.sandboxclaims] {
        owners.extend(
            lock(store)
                .values()
                .filter_map(|v| v["metadata"]["uid"].as_str().map(str::to_string)),
        );
    }
    let orphans: Vec<(String, String)> = lock(&s.custom.sandboxes)
        .iter()
        .filter(|(_, v)| controller_uid(v).is_some_and(|u| !owners.contains(&u)))
        .map(|(k, _)| k.clone())
        .collect();
    for k in orphans {
        lock(&s.custom.sandboxes).remove(&k);
        s.bump();
    }
    let sandboxes: std::collections::HashSet<String> = lock(&s.custom.sandboxes)
        .values()
        .filter_map(|v| v["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    let pods: Vec<(String, String)> = lock(&s.pods)
        .iter()
        .filter(|(_, p)| p.object["metadata"]["deletionTimestamp"].is_null())
        .filter(|(_, p)| {
            p.object["metadata"]["ownerReferences"][0]["kind"] == "Sandbox"
                && controller_uid(&p.object).is_some_and(|u| !sandboxes.contains(&u))
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in pods {
        super::pod::remove(s, k, None);
    }
}

/// Make the SandboxWarmPool `name` of `template` with `replicas`, as an
/// operator's `kubectl apply` would.
pub(super) fn warm_pool(s: &Shared, ns: &str, name: &str, template: &str, replicas: u32) {
    let v = json!({"metadata": {"name": name}, "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": template}}});
    let _ = store(
        s,
        "sandboxwarmpools",
        ns,
        name,
        v,
        "SandboxWarmPool",
        EXTENSIONS,
    );
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn name_hash_is_fnv1a_as_the_controller_writes_it() {
        // FNV-1a 32 of "" is the offset basis; of "a" a known value.
        assert_eq!(name_hash(""), "811c9dc5");
        assert_eq!(name_hash("a"), "e40c292c");
    }
}
