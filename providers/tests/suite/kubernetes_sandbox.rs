//! `--kubernetes-api sandbox` against the fake Kubernetes API with
//! agent-sandbox installed: a cold computer is a Sandbox whose controller
//! makes the pod, a warm one a SandboxClaim on the pool of its template;
//! both are hardened, labelled, bounded by their deadline and network
//! none as a bare pod is, and release leaves nothing but the pool.

use computer_fakes::kubernetes::FakeKubernetes;
use computer_providers::kubernetes::{KubernetesApi, KubernetesProvider};
use computer_providers::provider::Provider;
use computer_providers::types::{AttachBy, ComputerRef, ErrorCode, NetworkKind, Release};
use tokio_util::sync::CancellationToken;

use super::kubernetes::{NS, Rig, rig};
use super::support::{run, text};

/// agent-sandbox installed on the rig's fake, and a provider in sandbox
/// mode.
pub(super) fn sandbox_mode(r: &Rig) -> KubernetesProvider {
    r.fake.install_agent_sandbox();
    r.with(|s| s.api = Some(KubernetesApi::Sandbox))
}

/// From now on an operator keeps one warm pod for every template.
pub(super) fn operator_keeps_one_warm(r: &Rig) {
    r.fake.knobs(|k| k.auto_pool = Some(1));
}

/// The one SandboxTemplate's pool once it holds a Ready warm pod: its
/// name and that pod's.
pub(super) async fn pool_ready(fake: &FakeKubernetes) -> (String, String) {
    for _ in 0..600 {
        let templates = fake.objects("sandboxtemplates");
        if let [t] = templates.as_slice() {
            let name = t.trim_start_matches(&format!("{NS}/")).to_string();
            let pool = fake.object("sandboxwarmpools", NS, &name);
            // A Sandbox the pool holds (its label), Ready.
            let warm = fake
                .objects("sandboxes")
                .into_iter()
                .map(|s| s.trim_start_matches(&format!("{NS}/")).to_string())
                .find(|s| {
                    fake.object("sandboxes", NS, s).is_some_and(|sb| {
                        sb["metadata"]["labels"]["agents.x-k8s.io/warm-pool-sandbox"].is_string()
                            && sb["status"]["conditions"][0]["status"] == "True"
                    })
                });
            if let (true, Some(warm)) = (pool.is_some(), warm) {
                return (name, warm);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!(
        "no warm pod was ready within 60 s: templates {:?}",
        fake.objects("sandboxtemplates")
    );
}

/// A cold computer, then one claimed from the warm pool, each used and
/// released; the pool removed after. Their refs.
pub(super) async fn cold_then_warm(
    r: &Rig,
    cancel: &CancellationToken,
) -> (ComputerRef, ComputerRef) {
    let p = sandbox_mode(r);
    let cold = p
        .create(&super::support::labelled("cold"), cancel)
        .await
        .unwrap();
    assert!(
        cold.notes[0].starts_with("pod of the Sandbox "),
        "{:?}",
        cold.notes
    );
    operator_keeps_one_warm(r);
    pool_ready(&r.fake).await;
    let warm = p
        .create(&super::support::labelled("warm"), cancel)
        .await
        .unwrap();
    assert!(
        warm.notes[0].starts_with("pod claimed from the SandboxWarmPool "),
        "{:?}",
        warm.notes
    );
    for c in [&cold.computer, &warm.computer] {
        let conn = p.connect(c, cancel).await.unwrap();
        assert_eq!(text(&run(&conn.client, "echo up").await), "up\n");
        conn.client.close();
        p.release(c, Release::Delete, cancel).await.unwrap();
    }
    r.fake.remove_pools().await;
    (cold.computer, warm.computer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_from_the_warm_pool_is_a_hardened_computer_of_its_own_deadline_and_the_pool_refills()
 {
    let Some(r) = rig("k8s-warm").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = sandbox_mode(&r);
    // The first computer: no pool yet, so a Sandbox, named as its pod.
    let cold = p
        .create(&super::support::labelled("cold"), &cancel)
        .await
        .unwrap();
    let c = cold.computer;
    assert!(
        r.fake
            .objects("sandboxes")
            .contains(&format!("{NS}/{}", c.id))
    );
    assert_eq!(cold.network.unwrap().kind, NetworkKind::None);
    operator_keeps_one_warm(&r);

    // Its template now has a pool (the operator's); a claim adopts the
    // warm pod, which becomes a computer with its own labels and deadline.
    let (template, warm_pod) = pool_ready(&r.fake).await;
    assert!(template.starts_with("computer-mcp-"), "{template}");
    let mut spec = super::support::labelled("warm");
    spec.lifetime_ms = 300_000;
    let made = p.create(&spec, &cancel).await.unwrap();
    let w = made.computer;
    assert_eq!(w.id, warm_pod, "the warm pod was not the one claimed");
    let net = made.network.unwrap();
    assert!(
        net.detail.starts_with(&format!(
            "NetworkPolicy {} denies all ingress and egress; read from inside: egress blocked",
            w.id
        )),
        "{}",
        net.detail
    );
    let claims = r.fake.objects("sandboxclaims");
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claim_name = claims[0].trim_start_matches(&format!("{NS}/")).to_string();
    let claim = r.fake.object("sandboxclaims", NS, &claim_name).unwrap();
    assert_eq!(claim["status"]["sandbox"]["name"], serde_json::json!(w.id));
    assert_eq!(
        claim["spec"]["lifecycle"]["shutdownTime"],
        serde_json::json!(w.deadline)
    );
    // The pod's activeDeadlineSeconds was lowered to end by the deadline.
    let mut held = serde_json::Value::Null;
    r.fake.edit_pod(NS, &w.id, |pod| held = pod.clone());
    let ads = held["spec"]["activeDeadlineSeconds"].as_u64().unwrap();
    assert!((300..=360).contains(&ads), "activeDeadlineSeconds {ads}");
    assert_eq!(
        held["metadata"]["annotations"]["computer-mcp.name"],
        serde_json::json!("warm")
    );

    // Init runs as the computer's user with the computer's deadline.
    let conn = p.connect(&w, &cancel).await.unwrap();
    let out = run(
        &conn.client,
        "id -u; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -o 'init --deadlin[e] [^ ]*' | sort -u",
    )
    .await;
    conn.client.close();
    assert_eq!(
        text(&out),
        format!(
            "{}\ninit --deadline {}\n",
            computer_providers::kubernetes::DEFAULT_UID,
            w.deadline
        ),
        "{out:?}"
    );

    // Another server finds it by its labels; the pool made another.
    let found = r
        .another()
        .attach(&AttachBy::Labels(w.labels.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(found.id, w.id);
    let (_, refill) = pool_ready(&r.fake).await;
    assert_ne!(refill, w.id);

    // Changed behind our back: refused as a bare pod is.
    assert!(r.fake.edit_pod(NS, &w.id, |pod| {
        pod["spec"]["automountServiceAccountToken"] = serde_json::json!(true);
    }));
    let e = p
        .attach(&AttachBy::Id(w.id.clone()), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Refused, "{e:?}");

    // Release deletes the claim and the Sandbox; their pods follow.
    p.release(&w, Release::Delete, &cancel).await.unwrap();
    p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert_eq!(r.fake.objects("sandboxclaims"), Vec::<String>::new());
    r.fake.remove_pools().await;
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_agent_sandbox_sandbox_mode_is_refused_saying_what_to_install() {
    let Some(r) = rig("k8s-no-crds").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = r.with(|s| s.api = Some(KubernetesApi::Sandbox));
    let checks = p.service_checks(&cancel).await;
    assert_eq!(checks.len(), 1);
    let (said, next) = checks[0].found.clone().unwrap_err();
    assert_eq!(
        said,
        "agent-sandbox's CRDs are not all installed: the cluster serves no Sandbox, SandboxTemplate, SandboxClaim, SandboxWarmPool (v1beta1)"
    );
    assert!(next.contains("--kubernetes-api pods"), "{next}");
    let e = p
        .create(&super::support::labelled("none"), &cancel)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Unsupported, Some("api")),
        "{e:?}"
    );
    assert!(
        e.message.starts_with(
            "the cluster serves no Sandbox (agents.x-k8s.io/v1beta1): agent-sandbox is not installed"
        ),
        "{}",
        e.message
    );
    r.fake.install_agent_sandbox();
    let found = p.service_checks(&cancel).await[0].found.clone().unwrap();
    assert!(
        found.starts_with("agent-sandbox's CRDs are installed (Sandbox, SandboxTemplate, SandboxClaim, SandboxWarmPool, v1beta1)"),
        "{found}"
    );
    r.close().await;
}

/// Delete the pod `name` as another client would, and wait until it is
/// gone or made again by its Sandbox's controller (another uid).
async fn delete_pod_behind_our_back(r: &Rig, name: &str) {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(
        kube::Client::try_from({
            let mut cfg = kube::Config::new(r.fake.url().parse().unwrap());
            cfg.auth_info.token = Some(super::kubernetes::TOKEN.to_string().into());
            cfg
        })
        .unwrap(),
        NS,
    );
    let uid = pods.get(name).await.unwrap().metadata.uid;
    pods.delete(name, &kube::api::DeleteParams::default().grace_period(1))
        .await
        .unwrap();
    for _ in 0..200 {
        match pods.get_opt(name).await.unwrap() {
            Some(p) if p.metadata.uid == uid => {}
            _ => return,
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the pod {name} was not gone 20 s after its delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_deletes_a_sandbox_and_a_claim_whose_pod_vanished() {
    let Some(r) = rig("k8s-vanish").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = sandbox_mode(&r);
    let cold = p
        .create(&super::support::labelled("cold"), &cancel)
        .await
        .unwrap()
        .computer;
    operator_keeps_one_warm(&r);
    pool_ready(&r.fake).await;
    let warm = p
        .create(&super::support::labelled("warm"), &cancel)
        .await
        .unwrap()
        .computer;
    let claims = r.fake.objects("sandboxclaims");
    assert_eq!(claims.len(), 1, "{claims:?}");
    // A sweeper whose start bound is 1 s: an owner 11 s old is settled.
    let sweeper = r.with(|s| {
        s.api = Some(KubernetesApi::Sandbox);
        s.start_s = Some(1);
    });
    sweeper.sweep(&cancel).await.unwrap();
    assert_eq!(
        r.fake.objects("sandboxclaims"),
        claims,
        "a live claim was swept"
    );
    assert!(
        r.fake
            .objects("sandboxes")
            .contains(&format!("{NS}/{}", cold.id))
    );
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    // Both pods deleted behind our back: the controller makes them again,
    // the cold one a fresh computer, the warm one the pool's blueprint.
    delete_pod_behind_our_back(&r, &cold.id).await;
    delete_pod_behind_our_back(&r, &warm.id).await;
    sweeper.sweep(&cancel).await.unwrap();
    assert_eq!(r.fake.objects("sandboxclaims"), Vec::<String>::new());
    assert!(
        !r.fake
            .objects("sandboxes")
            .contains(&format!("{NS}/{}", cold.id)),
        "{:?}",
        r.fake.objects("sandboxes")
    );
    // Nothing of either is left once the garbage collector ran.
    r.fake.remove_pools().await;
    for _ in 0..300 {
        if r.fake.pods().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    sweeper.sweep(&cancel).await.unwrap();
    r.close().await;
}
