//! The Kubernetes provider against the fake Kubernetes API (computer-fakes'
//! kubernetes), whose pods' containers are bounded Docker containers
//! running the real `computerd init`: a computer made, used, found again
//! from a second provider and released leaving nothing; a pod changed or
//! deleted behind the provider's back refused or read as gone.

use computer_fakes::kubernetes::FakeKubernetes;
use computer_providers::kubernetes::{KubernetesProvider, KubernetesSettings};
use computer_providers::provider::{Configure, Provider};
use computer_providers::settings::HostDefaults;
use computer_providers::types::{AttachBy, ErrorCode, NetworkKind, Release};
use tokio_util::sync::CancellationToken;

use super::support::{Boxes, run, text};

pub(super) const NS: &str = "computers";
pub(super) const TOKEN: &str = "k8s-canary-token-5d1e";

pub(super) struct Rig {
    pub(super) fake: FakeKubernetes,
    pub(super) provider: KubernetesProvider,
    pub(super) settings: KubernetesSettings,
    boxes: Boxes,
    _dir: tempfile::TempDir,
}

pub(super) async fn rig(name: &str) -> Option<Rig> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let fake = FakeKubernetes::start(&env.docker, &env.image, TOKEN, &owner)
        .await
        .unwrap();
    // The test image plus the static computerd: an image that carries it.
    fake.carry(
        computer_providers::kubernetes::DEFAULT_COMPUTERD,
        env.computerd.clone(),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig(NS)).unwrap();
    let settings = KubernetesSettings {
        kubeconfig: Some(kubeconfig),
        image: Some(env.image.clone()),
        ..Default::default()
    };
    let provider =
        KubernetesProvider::configure(settings.clone(), &HostDefaults::default()).unwrap();
    Some(Rig {
        fake,
        provider,
        settings,
        boxes: Boxes {
            docker: env.docker,
            owner,
        },
        _dir: dir,
    })
}

impl Rig {
    pub(super) fn another(&self) -> KubernetesProvider {
        self.with(|_| {})
    }

    /// A provider of the same cluster, its settings changed by `f`.
    pub(super) fn with(&self, f: impl FnOnce(&mut KubernetesSettings)) -> KubernetesProvider {
        let mut s = self.settings.clone();
        f(&mut s);
        KubernetesProvider::configure(s, &HostDefaults::default()).unwrap()
    }

    /// Delete the pod `name` as another client would (kubectl), and wait
    /// until the API no longer has it.
    pub(super) async fn delete_behind_our_back(&self, name: &str) {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(
            kube::Client::try_from({
                let mut cfg = kube::Config::new(self.fake.url().parse().unwrap());
                cfg.auth_info.token = Some(TOKEN.to_string().into());
                cfg
            })
            .unwrap(),
            NS,
        );
        pods.delete(name, &kube::api::DeleteParams::default().grace_period(1))
            .await
            .unwrap();
        for _ in 0..200 {
            if pods.get_opt(name).await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the pod {name} was not gone 20 s after its delete");
    }

    pub(super) async fn close(self) {
        self.fake.assert_nothing_left();
        self.fake.close().await;
        self.boxes.assert_none().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_computer_is_made_used_found_from_another_server_and_released_leaving_nothing() {
    let Some(r) = rig("k8s-life").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r
        .provider
        .create(&super::support::labelled("life"), &cancel)
        .await
        .unwrap();
    let c = made.computer;
    let net = made.network.unwrap();
    assert_eq!(net.kind, NetworkKind::None);
    assert!(
        net.detail.starts_with(&format!(
            "NetworkPolicy {} denies all ingress and egress; ",
            c.id
        )),
        "{}",
        net.detail
    );
    assert_eq!(r.fake.pods(), [format!("{NS}/{}", c.id)]);
    assert_eq!(r.fake.policies(), [format!("{NS}/{}", c.id)]);

    let conn = r.provider.connect(&c, &cancel).await.unwrap();
    let out = run(
        &conn.client,
        "id -u; echo \"$HOME\"; grep CapEff /proc/self/status; echo kept > /work/f; cat /work/f",
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        text(&out),
        format!(
            "{}\n/work/home\nCapEff:\t0000000000000000\nkept\n",
            computer_providers::kubernetes::DEFAULT_UID
        )
    );
    conn.client.close();

    // A second server of the same cluster finds it by its labels and by
    // its id, and reads what the first wrote.
    let other = r.another();
    let listed = other
        .list(&c.labels, &cancel)
        .await
        .unwrap()
        .into_iter()
        .map(|x| x.id)
        .collect::<Vec<_>>();
    assert_eq!(listed, std::slice::from_ref(&c.id));
    let found = other
        .attach(&AttachBy::Labels(c.labels.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!((found.id.as_str(), found.running), (c.id.as_str(), true));
    assert_eq!(found.labels, c.labels);
    let conn = other.connect(&found, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn.client, "cat /work/f").await), "kept\n");
    conn.client.close();

    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    let e = other
        .attach(&AttachBy::Id(c.id.clone()), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone, "{e:?}");
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_changed_behind_our_back_is_refused_and_one_deleted_reads_as_gone() {
    let Some(r) = rig("k8s-drift").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let spec = super::support::labelled("drift");
    let a = r.provider.create(&spec, &cancel).await.unwrap().computer;
    assert!(r.fake.edit_pod(NS, &a.id, |p| {
        p["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"] =
            serde_json::json!([]);
    }));
    let e = r
        .another()
        .attach(&AttachBy::Id(a.id.clone()), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");
    assert_eq!(
        e.message,
        format!(
            "the pod {} is not as it was made (hardening changed behind our back): it lacks capabilities drop ALL; delete it",
            a.id
        )
    );
    r.provider
        .release(&a, Release::Delete, &cancel)
        .await
        .unwrap();

    // Deleted by another client: connect and attach say it is gone.
    let b = r.provider.create(&spec, &cancel).await.unwrap().computer;
    r.delete_behind_our_back(&b.id).await;
    let e = r.provider.connect(&b, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone, "{e:?}");
    assert_eq!(e.message, format!("the pod {} is gone", b.id));
    r.provider
        .release(&b, Release::Delete, &cancel)
        .await
        .unwrap();
    // Its policy outlived it until the release.
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_range_a_forbidden_namespace_a_pending_pod_and_an_image_without_computerd_are_refused_in_words()
 {
    let Some(r) = rig("k8s-words").await else {
        return;
    };
    let cancel = CancellationToken::new();

    // LimitRanger: the bound and the range named.
    r.fake.limit_range(
        NS,
        "small",
        serde_json::json!({"limits": [
            {"type": "Container", "max": {"memory": "512Mi"}, "min": {"memory": "64Mi"}},
        ]}),
    );
    let mut spec = super::support::labelled("words");
    spec.sizes.memory_mb = Some(1024);
    let e = r.provider.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Invalid, Some("sizes")),
        "{e:?}"
    );
    assert!(
        e.message.starts_with(&format!(
            "the namespace {NS}'s LimitRange refuses this computer: memory 1024Mi (sizes.memoryMb 1024) is outside the range (LimitRange small: min 64Mi, max 512Mi) (the API server said 403 Forbidden: pods \"cmcp-"
        )) && e.message.ends_with("\" is forbidden: maximum memory usage per Container is 512Mi, but limit is 1024Mi)"),
        "{}",
        e.message
    );
    assert_eq!(r.fake.policies(), Vec::<String>::new(), "a policy was left");
    spec.sizes.memory_mb = Some(256);

    // RBAC: the verb and the resource named.
    r.fake.knobs(|k| k.forbidden = vec![NS.to_string()]);
    let e = r.provider.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Refused, Some("namespace")),
        "{e:?}"
    );
    assert!(
        e.message.starts_with(&format!(
            "the account may not create pods in the namespace {NS}: it lacks the verb \"create\" on the resource \"pods\" (the API server said 403 Forbidden: pods is forbidden: User \""
        )),
        "{}",
        e.message
    );
    assert_eq!(r.fake.policies(), Vec::<String>::new(), "a policy was left");
    r.fake.knobs(|k| k.forbidden.clear());

    // A pod no node takes: its own event's words, and deleted.
    r.fake.knobs(|k| {
        k.pending = Some((
            "FailedScheduling".into(),
            "0/3 nodes are available: 3 Insufficient memory.".into(),
        ))
    });
    let short = r.with(|s| s.start_s = Some(2));
    let e = short.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout, "{e:?}");
    assert!(
        e.message.contains(" did not leave Pending within 2 s (--kubernetes-start-s): Unschedulable: 0/3 nodes are available: 3 Insufficient memory.; its events: FailedScheduling: 0/3 nodes are available: 3 Insufficient memory.; the sandbox was deleted"),
        "{}",
        e.message
    );
    assert_eq!(
        r.fake.pods(),
        Vec::<String>::new(),
        "the Pending pod was left"
    );
    r.fake.knobs(|k| k.pending = None);

    // An image that has a shell but not computerd where we look.
    let missing = r.with(|s| s.computerd = Some("/opt/elsewhere/computerd".into()));
    let e = missing.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Invalid, Some("image")),
        "{e:?}"
    );
    assert!(
        e.message.contains("cannot start computerd: it has no /bin/sh, or no executable computerd at /opt/elsewhere/computerd")
            && e.message.contains("/opt/elsewhere/computerd: not found")
            && e.message.contains("COPY computerd /opt/computerd/computerd")
            && e.message.contains("--kubernetes-computerd")
            && e.message.contains("--kubernetes-stream-computerd PATH"),
        "{}",
        e.message
    );
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_is_refused_where_the_cni_ignores_policies_and_a_full_work_is_evicted() {
    let Some(r) = rig("k8s-cni").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let spec = super::support::labelled("cni");

    r.fake.knobs(|k| k.ignore_network_policy = true);
    let e = r.provider.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Refused, Some("network")),
        "{e:?}"
    );
    assert!(
        e.message.contains("was asked for network none, but read from inside kubernetes.default.svc:443 answered: the cluster's CNI does not enforce NetworkPolicy (the API server's Service, which a deny-all policy blocks, was reached)"),
        "{}",
        e.message
    );
    assert_eq!(
        r.fake.pods(),
        Vec::<String>::new(),
        "the refused pod was left"
    );
    r.fake.knobs(|k| k.ignore_network_policy = false);

    // Enforced: egress blocked, eth0 or not; then /work filled past its
    // sizeLimit and the pod evicted, in the kubelet's words.
    let small = r.with(|s| s.work_mb = Some(16));
    let made = small.create(&spec, &cancel).await.unwrap();
    let detail = made.network.unwrap().detail;
    assert!(
        detail.contains("read from inside: egress blocked, none of 6 targets answered (the API server's Service kubernetes.default.svc:443 among them)"),
        "{detail}"
    );
    let c = made.computer;
    let conn = small.connect(&c, &cancel).await.unwrap();
    let out = run(
        &conn.client,
        "head -c 24000000 /dev/zero > /work/big; echo $?",
    )
    .await;
    assert_eq!(text(&out), "0\n", "{out:?}");
    conn.client.close();
    let mut said = String::new();
    for _ in 0..100 {
        match small.connect(&c, &cancel).await {
            Ok(conn) => conn.client.close(),
            Err(e) => {
                assert_eq!(e.code, ErrorCode::Gone, "{e:?}");
                said = e.message;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        said,
        format!(
            "the pod {} is not running (Failed, Evicted: Usage of EmptyDir volume \"work\" exceeds the limit \"16Mi\".)",
            c.id
        )
    );
    small.release(&c, Release::Delete, &cancel).await.unwrap();
    r.close().await;
}

/// Every document of every manifest in deploy/kubernetes/: (file, object).
fn manifests() -> Vec<(String, serde_json::Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        for doc in text.split("\n---\n") {
            let v: serde_json::Value =
                serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
            out.push((name.clone(), v));
        }
    }
    out
}

/// `v` read as the API type `T` and written back.
fn as_api<T: serde::Serialize + serde::de::DeserializeOwned>(
    v: &serde_json::Value,
) -> serde_json::Value {
    serde_json::to_value(serde_json::from_value::<T>(v.clone()).unwrap()).unwrap()
}

/// deploy/kubernetes/ is checked offline: `kubectl apply --dry-run=client`
/// needs an API server even with `--validate=false` (it asks discovery
/// for each kind's resource), so each object is read as its Kubernetes
/// API type (k8s-openapi, the v1_33 schema) and must write back the same:
/// a field the API does not know, or a value of the wrong type, differs.
#[test]
fn the_deploy_manifests_are_exactly_kubernetes_api_objects() {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core, rbac::v1 as rbac};
    let mut kinds = Vec::new();
    for (file, v) in manifests() {
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        let back = match kind.as_str() {
            "Deployment" => as_api::<apps::Deployment>(&v),
            "Service" => as_api::<core::Service>(&v),
            "ServiceAccount" => as_api::<core::ServiceAccount>(&v),
            "Role" => as_api::<rbac::Role>(&v),
            "RoleBinding" => as_api::<rbac::RoleBinding>(&v),
            other => panic!("{file}: an unexpected kind {other:?}"),
        };
        assert_eq!(back, v, "{file}: {kind} is not exactly an API object");
        kinds.push(kind);
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ]
    );
    // The server runs as this build says it can.
    let all = manifests();
    let d = &all
        .iter()
        .find(|(_, v)| v["kind"] == "Deployment")
        .unwrap()
        .1;
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["args"], serde_json::json!(["serve"]));
    // Every variable it sets is one the README's tables name (they are
    // held to --help by the server's own tests).
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    for e in c["env"].as_array().unwrap() {
        let n = e["name"].as_str().unwrap();
        assert!(
            readme.contains(&format!("`{n}`")),
            "{n} is no variable of the server"
        );
    }
}

/// The Role's rules as (API group, resource, verb).
pub(super) fn role_verbs() -> std::collections::BTreeSet<(String, String, String)> {
    let all = manifests();
    let role = &all.iter().find(|(_, v)| v["kind"] == "Role").unwrap().1;
    let mut out = std::collections::BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let s = |k: &str| -> Vec<String> {
            rule[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_string())
                .collect()
        };
        for g in s("apiGroups") {
            for r in s("resources") {
                for v in s("verbs") {
                    out.insert((g.clone(), r.clone(), v));
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_holds_every_verb_the_provider_calls_and_no_more() {
    let Some(r) = rig("k8s-role").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // Every path: a life with network none, found again, used, released…
    let spec = super::support::labelled("role");
    let c = r.provider.create(&spec, &cancel).await.unwrap().computer;
    let found = r
        .another()
        .attach(&AttachBy::Labels(c.labels.clone()), &cancel)
        .await
        .unwrap();
    let conn = r.provider.connect(&found, &cancel).await.unwrap();
    conn.client.close();
    r.provider
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    // The janitor's sweep…
    r.provider.sweep(&cancel).await.unwrap();
    // …agent-sandbox's paths: a cold Sandbox, then a claim on the warm
    // pool an operator made for its template…
    super::kubernetes_sandbox::cold_then_warm(&r, &cancel).await;
    // …the sweep in sandbox mode (claims and Sandboxes listed)…
    r.with(|s| s.api = Some(computer_providers::kubernetes::KubernetesApi::Sandbox))
        .sweep(&cancel)
        .await
        .unwrap();
    // …and the refusals that read LimitRanges and events.
    r.fake.limit_range(
        NS,
        "small",
        serde_json::json!({"limits": [{"type": "Container", "max": {"memory": "64Mi"}}]}),
    );
    r.provider.create(&spec, &cancel).await.unwrap_err();
    r.fake
        .knobs(|k| k.pending = Some(("FailedScheduling".into(), "no node".into())));
    let mut small = spec.clone();
    small.sizes.memory_mb = Some(32);
    r.with(|s| s.start_s = Some(1))
        .create(&small, &cancel)
        .await
        .unwrap_err();
    assert_eq!(r.fake.verbs(), role_verbs());
    r.close().await;
}

/// kubectl maps each manifest's kind through the fake's discovery and
/// reads it as new: what `kubectl apply --dry-run=client` does without a
/// real cluster (it cannot run with none at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_deploy_kubernetes_in_a_client_dry_run() {
    let kubectl = computer_testkit::on_path("kubectl");
    if !computer_testkit::need(
        "kubectl",
        kubectl.is_some(),
        "kubectl is not on PATH (Debian: kubernetes-client)",
    ) {
        return;
    }
    let Some(r) = rig("k8s-kubectl").await else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kubernetes/");
    let out = tokio::process::Command::new(kubectl.unwrap())
        .env("KUBECONFIG", r.settings.kubeconfig.as_ref().unwrap())
        .env("HOME", cache.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args([
            "apply",
            "--dry-run=client",
            "--validate=false",
            "-n",
            NS,
            "-f",
            dir,
        ])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = said.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "deployment.apps/computer-mcp created (dry run)",
            "role.rbac.authorization.k8s.io/computer-mcp created (dry run)",
            "rolebinding.rbac.authorization.k8s.io/computer-mcp created (dry run)",
            "service/computer-mcp created (dry run)",
            "serviceaccount/computer-mcp created (dry run)",
        ]
    );
    r.close().await;
}

/// An image with a shell and no computerd of its own: this host's
/// computerd is streamed in through exec, and the computer works (the
/// fake's image carries one at /opt/computerd, which a streamed pod does
/// not use: it runs the one at /run/computerd/bin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computerd_streamed_in_through_exec_runs_the_computer() {
    let Some(r) = rig("k8s-stream").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let host = computer_testkit::docker_env().await.unwrap().computerd;
    let streaming = r.with(|s| s.stream_computerd = Some(host.clone()));
    let made = streaming
        .create(&super::support::labelled("stream"), &cancel)
        .await
        .unwrap();
    assert!(
        made.network.unwrap().detail.contains("egress blocked"),
        "the probe ran from the streamed computerd"
    );
    let c = made.computer;
    let conn = streaming.connect(&c, &cancel).await.unwrap();
    let out = run(&conn.client, "stat -c '%s %a' /run/computerd/bin/computerd").await;
    conn.client.close();
    let size = std::fs::metadata(&host).unwrap().len();
    assert_eq!(text(&out), format!("{size} 700\n"), "{out:?}");
    streaming
        .release(&c, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}

/// The janitor's sweep on Kubernetes: a pod the kubelet ended at its
/// `activeDeadlineSeconds` (the object is kept, phase Failed) is deleted
/// with its policy, and so is the deny-all policy of a pod deleted behind
/// our back; a live pod is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_deletes_pods_past_their_deadline_and_policies_whose_pod_is_gone() {
    let Some(r) = rig("k8s-sweep").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let mut short = super::support::labelled("short");
    short.lifetime_ms = 6_000;
    let a = r.provider.create(&short, &cancel).await.unwrap().computer;
    let b = r
        .provider
        .create(&super::support::labelled("deleted"), &cancel)
        .await
        .unwrap()
        .computer;
    let live = r
        .provider
        .create(&super::support::labelled("live"), &cancel)
        .await
        .unwrap()
        .computer;
    r.delete_behind_our_back(&b.id).await;
    // Until the kubelet (the fake's) has ended `a` at its deadline.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        // Listed, not attached: an attach says hello, which a pod ending
        // at that moment may not answer.
        let listed = r.provider.list(&a.labels, &cancel).await.unwrap();
        if listed.iter().all(|c| !c.running) {
            break;
        }
        assert!(std::time::Instant::now() < until, "a was still running");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(r.fake.pods().contains(&format!("{NS}/{}", a.id)), "kept");
    assert!(r.fake.policies().contains(&format!("{NS}/{}", b.id)));
    assert_eq!(
        r.provider.sweep(&cancel).await.unwrap(),
        std::slice::from_ref(&a.id)
    );
    assert_eq!(r.fake.pods(), [format!("{NS}/{}", live.id)]);
    assert_eq!(r.fake.policies(), [format!("{NS}/{}", live.id)]);
    // A second sweep finds nothing more.
    assert_eq!(
        r.provider.sweep(&cancel).await.unwrap(),
        Vec::<String>::new()
    );
    r.provider
        .release(&live, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}
