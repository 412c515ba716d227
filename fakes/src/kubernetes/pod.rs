//! The fake's pods: the object's CRUD and the life of its one container (a
//! vendor box running the pod's command). The rules are in the module's
//! parent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::admission::{self, quantity};
use super::{
    Pod, Shared, admit, exists, gate, list_in, lock, not_found, now, read_in, stamp, status,
};
use crate::vendor_box::{BoxSpec, Chunk, Cmd, VendorBox};

/// How often the fake's kubelet measures a pod's sized emptyDirs.
pub const HOUSEKEEPING: Duration = Duration::from_secs(2);
/// The API server's Service as a pod reaches it by name (the cluster's
/// DNS answers `kubernetes.default.svc`), and its port. The fake's boxes
/// have no DNS: under [`super::Knobs::ignore_network_policy`] the name is
/// put in the box's /etc/hosts for its loopback, where something answers
/// on the port (a box may bind low ports, `BoxSpec::low_ports`).
pub const SERVICE: (&str, u16) = ("kubernetes.default.svc", 443);
/// The most of a failed container's output its termination message keeps.
pub const MESSAGE_MAX: usize = 2048;

/// A pod's grace when neither the delete nor the pod names one (core/v1
/// `terminationGracePeriodSeconds` default).
pub const DEFAULT_GRACE_S: u64 = 30;

type Key = (String, String);

/// The pod's first container.
fn container(v: &Value) -> &Value {
    &v["spec"]["containers"][0]
}

/// The user the container runs as: the container's securityContext over
/// the pod's, root when neither names one ("uid:gid").
pub(crate) fn user_of(pod: &Value) -> String {
    let pick = |f: &str| {
        container(pod)["securityContext"][f]
            .as_u64()
            .or_else(|| pod["spec"]["securityContext"][f].as_u64())
    };
    let u = pick("runAsUser").unwrap_or(0);
    let g = pick("runAsGroup").unwrap_or(0);
    format!("{u}:{g}")
}

pub(super) async fn create(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, name) = match admit(&s, &h, &body, "Pod") {
        Ok(x) => x,
        Err(r) => return *r,
    };
    match make(&s, &ns, &name, v) {
        Ok(v) => (StatusCode::CREATED, axum::Json(v)).into_response(),
        Err(r) => *r,
    }
}

/// Admit and store the pod `v` named `name` in `ns` and start its life
/// (a client's create, or a controller's): the stored object, or the
/// answer refusing it.
pub(crate) fn make(
    s: &Arc<Shared>,
    ns: &str,
    name: &str,
    mut v: Value,
) -> std::result::Result<Value, Box<Response>> {
    let (forbid, pending) = {
        let k = lock(&s.knobs);
        (k.forbidden.iter().any(|f| f == ns), k.pending.clone())
    };
    if forbid {
        return Err(Box::new(admission::forbidden_create("pods", ns)));
    }
    if let Some(r) = admission::limit_ranges(s, ns, name, &v) {
        return Err(Box::new(r));
    }
    let c = container(&v);
    if !c["command"].is_array() && !c["args"].is_array() || c["name"].as_str().is_none() {
        return Err(Box::new(status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "spec.containers[0]: Required value: a container with a name and a command (the fake's images have no entrypoint of their own)",
        )));
    }
    let key = (ns.to_string(), name.to_string());
    let stop = CancellationToken::new();
    {
        let mut pods = lock(&s.pods);
        if pods.contains_key(&key) {
            return Err(Box::new(exists("pods", name)));
        }
        stamp(s, &mut v, ns, name, "Pod", "v1");
        v["status"] = json!({"phase": "Pending", "qosClass": "Burstable"});
        pods.insert(
            key.clone(),
            Pod {
                object: v.clone(),
                boxed: None,
                pid: None,
                starting: Arc::new(tokio::sync::Mutex::new(())),
                stop: stop.clone(),
            },
        );
    }
    match pending {
        Some((reason, message)) => stay_pending(s, &key, &reason, &message),
        None => drop(tokio::spawn(run(Arc::clone(s), key, stop))),
    }
    Ok(v)
}

/// Set the pod's status through `f`, moving its resourceVersion; false
/// when the pod is gone.
fn set_status(s: &Shared, key: &Key, f: impl FnOnce(&mut Value)) -> bool {
    let version = s.bump();
    match lock(&s.pods).get_mut(key) {
        Some(p) => {
            f(&mut p.object["status"]);
            p.object["metadata"]["resourceVersion"] = json!(version);
            true
        }
        None => false,
    }
}

fn terminated(st: &mut Value, phase: &str, reason: &str, code: i64, name: &str) {
    st["phase"] = json!(phase);
    st["containerStatuses"] = json!([{
        "name": name,
        "ready": false,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": reason, "finishedAt": now()}},
    }]);
}

/// A pod no node takes (or whose image no node pulls): Pending, with
/// the scheduler's (or the kubelet's) Warning event.
fn stay_pending(s: &Shared, key: &Key, reason: &str, message: &str) {
    set_status(s, key, |st| {
        st["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]);
    });
    let from = if reason == "FailedScheduling" {
        "default-scheduler"
    } else {
        "kubelet"
    };
    admission::event(s, &key.0, &key.1, reason, message, from);
}

/// `argv`, started [`super::Knobs::slow_start`]'s while later when the pod
/// `name` is one it names (a shell waits, then becomes the program).
fn slow_start(s: &Shared, name: &str, argv: Vec<String>) -> Vec<String> {
    let slow = lock(&s.knobs).slow_start.clone();
    match slow {
        Some((suffix, after)) if name.ends_with(&suffix) && !argv.is_empty() => {
            let mut a = vec![
                "/bin/sh".to_string(),
                "-c".into(),
                format!("sleep {}; exec \"$@\"", after.as_secs_f64()),
                "sh".into(),
            ];
            a.extend(argv);
            a
        }
        _ => argv,
    }
}

/// The pod's life: its box, its volumes, its command, its deadline.
async fn run(s: Arc<Shared>, key: Key, stop: CancellationToken) {
    let Some(pod) = lock(&s.pods).get(&key).map(|p| p.object.clone()) else {
        return;
    };
    let cname = container(&pod)["name"]
        .as_str()
        .unwrap_or("main")
        .to_string();
    // Held while the box starts: a delete waits for it, so it removes
    // the box it would otherwise miss.
    let Some(starting) = lock(&s.pods).get(&key).map(|p| Arc::clone(&p.starting)) else {
        return;
    };
    let held = starting.lock().await;
    let boxed = start_box(&s, &pod).await;
    let boxed = match boxed {
        Ok(b) => Arc::new(b),
        Err(e) => {
            set_status(&s, &key, |st| {
                st["phase"] = json!("Pending");
                st["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": e}]);
            });
            return;
        }
    };
    lock(&s.made).push(Arc::clone(&boxed));
    if stop.is_cancelled() {
        let _ = boxed.remove().await;
        return;
    }
    let mut argv: Vec<String> = Vec::new();
    for f in ["command", "args"] {
        if let Some(a) = container(&pod)[f].as_array() {
            argv.extend(a.iter().filter_map(|x| x.as_str().map(str::to_string)));
        }
    }
    if let Some(program) = argv.first()
        && !exists_in(&boxed, program).await
    {
        set_status(&s, &key, |st| {
            terminated(st, "Failed", "StartError", 128, &cname);
            st["containerStatuses"][0]["state"]["terminated"]["message"] = json!(format!(
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"{program}\": stat {program}: no such file or directory: unknown"
            ));
        });
        return;
    }
    if lock(&s.knobs).ignore_network_policy
        && let Err(e) = serve_service(&boxed).await
    {
        tracing::warn!(error = %e, "the fake's Service in a box did not start");
    }
    let cmd = Cmd {
        argv: slow_start(&s, &key.1, argv),
        env: env_of(&pod),
        cwd: container(&pod)["workingDir"].as_str().map(str::to_string),
        user: Some(user_of(&pod)),
    };
    let attached = match boxed.attach(&cmd, false).await {
        Ok(a) => a,
        Err(e) => {
            set_status(&s, &key, |st| {
                terminated(st, "Failed", "StartError", 128, &cname);
                st["message"] = json!(e.0);
            });
            return;
        }
    };
    let pid = attached.pid;
    {
        let mut pods = lock(&s.pods);
        let Some(p) = pods.get_mut(&key) else {
            return;
        };
        p.boxed = Some(Arc::clone(&boxed));
        p.pid = Some(pid);
    }
    drop(held);
    let started = now();
    // Its address on the pods' network, when it is on it.
    let ip = match s.pod_net.get() {
        Some(n) => boxed.address_on(n).await.ok().flatten(),
        None => None,
    };
    set_status(&s, &key, |st| {
        st["phase"] = json!("Running");
        st["startTime"] = json!(started);
        st["podIP"] = json!(ip.as_deref().unwrap_or("10.244.0.10"));
        st["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        st["containerStatuses"] = json!([{
            "name": cname,
            "ready": true,
            "restartCount": 0,
            "started": true,
            "state": {"running": {"startedAt": started}},
        }]);
    });
    let since = tokio::time::Instant::now();
    let mut output = attached.output;
    let ended = async move {
        let mut tail: Vec<u8> = Vec::new();
        while let Some(c) = output.next().await {
            let (Chunk::Stdout(b) | Chunk::Stderr(b)) = c;
            tail.extend_from_slice(&b);
            if tail.len() > 2 * MESSAGE_MAX {
                tail.drain(..tail.len() - MESSAGE_MAX);
            }
        }
        tail
    };
    let fallback = container(&pod)["terminationMessagePolicy"] == "FallbackToLogsOnError";
    tokio::select! {
        tail = ended => {
            let code = boxed.exit_code(&attached.exec).await.unwrap_or(-1);
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            let reason = if code == 0 { "Completed" } else { "Error" };
            let start = tail.len().saturating_sub(MESSAGE_MAX);
            let message = String::from_utf8_lossy(&tail[start..]).into_owned();
            set_status(&s, &key, |st| {
                terminated(st, phase, reason, code, &cname);
                if code != 0 && fallback {
                    st["containerStatuses"][0]["state"]["terminated"]["message"] = json!(message);
                }
            });
        }
        (volume, limit) = over_limit(&boxed, sized(&pod)) => {
            let message = format!("Usage of EmptyDir volume \"{volume}\" exceeds the limit \"{limit}\". ");
            set_status(&s, &key, |st| {
                terminated(st, "Failed", "Error", 137, &cname);
                st["reason"] = json!("Evicted");
                st["message"] = json!(message);
            });
            admission::event(&s, &key.0, &key.1, "Evicted", &message, "kubelet");
            let _ = boxed.remove().await;
        }
        _ = past_deadline(&s, &key, since) => {
            // The kubelet's active deadline: the pod fails and its
            // containers are killed; the object stays until deleted.
            set_status(&s, &key, |st| {
                terminated(st, "Failed", "DeadlineExceeded", 137, &cname);
                st["reason"] = json!("DeadlineExceeded");
                st["message"] = json!(format!("Pod was active on the node longer than the specified deadline"));
            });
            let _ = boxed.remove().await;
        }
        _ = stop.cancelled() => {}
    }
}

/// Once the pod has run longer than its `activeDeadlineSeconds` as it
/// stands (a pod update may lower it: core/v1 validation lets it only
/// decrease), read every 200 ms.
async fn past_deadline(s: &Shared, key: &Key, since: tokio::time::Instant) {
    loop {
        let held = lock(&s.pods)
            .get(key)
            .and_then(|p| p.object["spec"]["activeDeadlineSeconds"].as_u64());
        if held.is_some_and(|n| since.elapsed() >= Duration::from_secs(n)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn env_of(pod: &Value) -> Vec<(String, String)> {
    container(pod)["env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| {
                    Some((
                        e["name"].as_str()?.to_string(),
                        e["value"].as_str().unwrap_or("").to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the program `path` (a path, or a name on PATH) is in the box.
async fn exists_in(b: &VendorBox, path: &str) -> bool {
    let test = Cmd::new(&["/bin/sh", "-c", "command -v \"$1\" >/dev/null", "sh", path]);
    matches!(b.run(&test, None, Duration::from_secs(30)).await, Ok(r) if r.code == 0)
}

/// [`SERVICE`] answering on the box's loopback, as the API server's
/// Service answers a pod whose policy is not enforced (DNS included).
async fn serve_service(b: &VendorBox) -> Result<(), String> {
    let script = format!(
        "use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => {}, Listen => 16, ReuseAddr => 1) or die $!; while (my $c = $s->accept) {{ print $c \"HTTP/1.1 400 Bad Request\\r\\n\\r\\n\"; close $c }}",
        SERVICE.1
    );
    let line = format!("127.0.0.1 {}", SERVICE.0);
    let argv = [
        "/bin/sh",
        "-c",
        "echo \"$2\" >> /etc/hosts && { perl -e \"$1\" </dev/null >/dev/null 2>&1 & }",
        "sh",
        script.as_str(),
        line.as_str(),
    ];
    let ran = b
        .run(&Cmd::new(&argv), None, Duration::from_secs(30))
        .await
        .map_err(|e| e.0)?;
    if ran.code != 0 {
        return Err(String::from_utf8_lossy(&ran.stderr).into_owned());
    }
    Ok(())
}

/// Every emptyDir of the pod's container: (volume, mount path, its
/// `sizeLimit` as written).
fn empty_dirs(pod: &Value) -> Vec<(String, String, Option<String>)> {
    let vols = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mounts = container(pod)["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    mounts
        .iter()
        .filter_map(|m| {
            let name = m["name"].as_str()?;
            let v = vols
                .iter()
                .find(|v| v["name"] == json!(name) && v.get("emptyDir").is_some())?;
            let limit = v["emptyDir"]["sizeLimit"].as_str().map(str::to_string);
            Some((
                name.to_string(),
                m["mountPath"].as_str()?.to_string(),
                limit,
            ))
        })
        .collect()
}

/// The sized emptyDirs: (volume, mount path, limit as written, bytes).
fn sized(pod: &Value) -> Vec<(String, String, String, f64)> {
    empty_dirs(pod)
        .into_iter()
        .filter_map(|(n, p, l)| {
            let l = l?;
            let b = quantity(&l)?;
            Some((n, p, l, b))
        })
        .collect()
}

/// Once a sized emptyDir holds more than its limit (measured every
/// [`HOUSEKEEPING`]): the volume and its limit. Never without one.
async fn over_limit(b: &VendorBox, vols: Vec<(String, String, String, f64)>) -> (String, String) {
    if vols.is_empty() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(HOUSEKEEPING).await;
        for (name, path, limit, bytes) in &vols {
            let du = Cmd::new(&["du", "-sk", path.as_str()]);
            let Ok(r) = b.run(&du, None, Duration::from_secs(30)).await else {
                continue;
            };
            let used = String::from_utf8_lossy(&r.stdout)
                .split_whitespace()
                .next()
                .and_then(|k| k.parse::<f64>().ok());
            if used.is_some_and(|k| k * 1024.0 > *bytes) {
                return (name.clone(), limit.clone());
            }
        }
    }
}

/// The pod's box: made of its image, its emptyDir mounts made 0777 and
/// the carried files put in, before its command starts.
async fn start_box(s: &Shared, pod: &Value) -> Result<VendorBox, String> {
    let image = container(pod)["image"]
        .as_str()
        .unwrap_or(s.image.as_str())
        .to_string();
    let mut spec = BoxSpec::new(image, s.owner.clone());
    // The runtime's part of the securityContext: a container that drops
    // every capability and may not escalate gets a box with none and
    // no-new-privileges (else a non-root exec would keep a bounding set).
    let csc = &container(pod)["securityContext"];
    spec.low_ports = true;
    spec.hardened = csc["capabilities"]["drop"]
        .as_array()
        .is_some_and(|d| d.iter().any(|c| c == "ALL"))
        && csc["allowPrivilegeEscalation"] == json!(false);
    let reach = super::policy::reach_of(s, pod);
    if reach.world {
        spec.networks.push("bridge".into());
        spec.dns = lock(&s.knobs).dns.clone();
    }
    if reach.pods {
        spec.networks.push(super::policy::pod_network(s).await?);
    }
    let boxed = VendorBox::start(&s.docker, &spec).await.map_err(|e| e.0)?;
    let dirs: Vec<String> = empty_dirs(pod).into_iter().map(|(_, p, _)| p).collect();
    if !dirs.is_empty() {
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            "for d; do mkdir -p -- \"$d\" && chmod 0777 -- \"$d\" || exit 1; done".into(),
            "sh".into(),
        ];
        argv.extend(dirs);
        let ran = boxed
            .run(&Cmd::new(&argv), None, Duration::from_secs(60))
            .await
            .map_err(|e| e.0)?;
        if ran.code != 0 {
            return Err(format!(
                "making the pod's emptyDir volumes: {}",
                String::from_utf8_lossy(&ran.stderr).trim()
            ));
        }
    }
    let carried = lock(&s.carried).clone();
    for (path, host) in carried {
        let bytes = tokio::fs::read(&host)
            .await
            .map_err(|e| format!("reading {}: {e}", host.display()))?;
        boxed.upload(&path, &bytes).await.map_err(|e| e.0)?;
        let chmod = Cmd::new(&["chmod", "0755", path.as_str()]);
        boxed
            .run(&chmod, None, Duration::from_secs(30))
            .await
            .map_err(|e| e.0)?;
    }
    Ok(boxed)
}

fn object(p: &Pod) -> &Value {
    &p.object
}

pub(super) async fn read(
    State(s): State<Arc<Shared>>,
    Path(key): Path<(String, String)>,
    h: HeaderMap,
) -> Response {
    read_in(&s, &h, &s.pods, key, "pods", object)
}

pub(super) async fn list(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    h: HeaderMap,
) -> Response {
    list_in(&s, &h, &q, &s.pods, &ns, ("PodList", "v1"), object)
}

/// The grace a delete asks: the query's, else the body's DeleteOptions'.
fn grace_asked(q: &BTreeMap<String, String>, body: &[u8]) -> Option<u64> {
    q.get("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
        .or_else(|| {
            serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|b| b["gracePeriodSeconds"].as_u64())
        })
}

pub(super) async fn delete(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    let asked = grace_asked(&q, &body);
    match remove(&s, (ns, name.clone()), asked) {
        Some(object) => axum::Json(object).into_response(),
        None => not_found("pods", &name),
    }
}

/// Delete the pod `key` with the grace `asked` (else its own): the object
/// marked and its end begun; None when there is no such pod.
pub(crate) fn remove(s: &Arc<Shared>, key: Key, asked: Option<u64>) -> Option<Value> {
    let version = s.bump();
    let (object, first) = {
        let mut pods = lock(&s.pods);
        let p = pods.get_mut(&key)?;
        let first = p.object["metadata"]["deletionTimestamp"].is_null();
        if first {
            let grace = asked
                .or_else(|| p.object["spec"]["terminationGracePeriodSeconds"].as_u64())
                .unwrap_or(DEFAULT_GRACE_S);
            p.object["metadata"]["deletionTimestamp"] = json!(now());
            p.object["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            p.object["metadata"]["resourceVersion"] = json!(version);
        }
        (p.object.clone(), first)
    };
    if first {
        let grace = object["metadata"]["deletionGracePeriodSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_GRACE_S);
        tokio::spawn(end(Arc::clone(s), key, grace));
    }
    Some(object)
}

/// A pod update as a JSON merge patch (RFC 7386): labels and annotations
/// (null removes a key), and `spec.activeDeadlineSeconds`, which may only
/// be lowered; any other field of the spec is refused as the API refuses
/// it (core/v1 validation `ValidatePodUpdate`).
pub(super) async fn patch(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    let Ok(p) = serde_json::from_slice::<Value>(&body) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the body is not a merge patch",
        );
    };
    let spec = p["spec"].as_object().cloned().unwrap_or_default();
    if let Some(k) = spec.keys().find(|k| *k != "activeDeadlineSeconds") {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            &format!(
                "Pod \"{name}\" is invalid: spec.{k}: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
            ),
        );
    }
    let version = s.bump();
    let mut pods = lock(&s.pods);
    let Some(pod) = pods.get_mut(&(ns, name.clone())) else {
        return not_found("pods", &name);
    };
    if let Some(d) = spec.get("activeDeadlineSeconds") {
        let held = pod.object["spec"]["activeDeadlineSeconds"].as_u64();
        match (d.as_u64(), held) {
            (Some(n), Some(h)) if n > 0 && n <= h => {}
            (Some(n), None) if n > 0 => {}
            _ => {
                return status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    &format!(
                        "Pod \"{name}\" is invalid: spec.activeDeadlineSeconds: Invalid value: {d}: must be less than or equal to previous value"
                    ),
                );
            }
        }
        pod.object["spec"]["activeDeadlineSeconds"] = d.clone();
    }
    super::merge_metadata(&mut pod.object, &p["metadata"]);
    pod.object["metadata"]["resourceVersion"] = json!(version);
    axum::Json(pod.object.clone()).into_response()
}

/// A deleted pod's end: TERM to its container, KILL (the box removed)
/// when it has not ended within the grace, then the object gone.
async fn end(s: Arc<Shared>, key: Key, grace: u64) {
    let Some((starting, stop)) = lock(&s.pods)
        .get(&key)
        .map(|p| (Arc::clone(&p.starting), p.stop.clone()))
    else {
        return;
    };
    stop.cancel();
    // Once the box is up (or failed), or at once when it is.
    drop(starting.lock().await);
    let (boxed, pid) = match lock(&s.pods).get(&key) {
        Some(p) => (p.boxed.clone(), p.pid),
        None => return,
    };
    if let (Some(b), Some(pid)) = (&boxed, pid) {
        let _ = b.signal(pid, "TERM").await;
        let until = tokio::time::Instant::now() + Duration::from_secs(grace);
        while tokio::time::Instant::now() < until {
            let alive = Cmd::new(&["/bin/sh", "-c", "kill -0 \"$1\"", "sh", &pid.to_string()]);
            match b.run(&alive, None, Duration::from_secs(10)).await {
                Ok(r) if r.code == 0 => tokio::time::sleep(Duration::from_millis(200)).await,
                _ => break,
            }
        }
    }
    if let Some(b) = boxed {
        let _ = b.remove().await;
    }
    let lag = lock(&s.knobs).delete_lag;
    tokio::time::sleep(lag).await;
    lock(&s.pods).remove(&key);
    s.bump();
}
