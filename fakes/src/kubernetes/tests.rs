//! The fake spoken to by the real client (kube with its `ws` feature), so
//! what the provider will meet is what these tests hold.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as KPod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{AttachParams, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const NS: &str = "tests";

/// A fake whose boxes carry a marker made of `prefix`, the marker, and
/// a client of it in [`NS`]; None (skipped) without Docker.
async fn fake(prefix: &str) -> Option<(FakeKubernetes, Client, String)> {
    let owner = computer_testkit::marker(prefix);
    let env = computer_testkit::docker_env().await?;
    let f = FakeKubernetes::start(&env.docker, &env.image, "a-token", &owner)
        .await
        .unwrap();
    let c = client(&f, NS).await;
    Some((f, c, owner))
}

async fn client(f: &FakeKubernetes, ns: &str) -> Client {
    let kc = Kubeconfig::from_yaml(&f.kubeconfig(ns)).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

fn pod(name: &str, command: &[&str], labels: serde_json::Value) -> KPod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
            "containers": [{
                "name": "main",
                "command": command,
                "volumeMounts": [{"name": "work", "mountPath": "/work"}],
            }],
            "volumes": [{"name": "work", "emptyDir": {"sizeLimit": "64Mi"}}],
        },
    }))
    .unwrap()
}

async fn running(pods: &Api<KPod>, name: &str) -> KPod {
    for _ in 0..600 {
        let p = pods.get(name).await.unwrap();
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        if phase.as_deref() != Some("Pending") {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("pod {name} stayed Pending");
}

#[tokio::test]
async fn a_pod_runs_its_command_and_exec_streams_both_ways_with_the_exit_code() {
    let Some((f, c, owner)) = fake("fake-k8s-exec").await else {
        return;
    };
    let pods: Api<KPod> = Api::namespaced(c, NS);
    let made = pods
        .create(
            &PostParams::default(),
            &pod("one", &["sleep", "600"], json!({"app": "x", "n": "1"})),
        )
        .await
        .unwrap();
    assert_eq!(
        made.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let v0: u64 = made.metadata.resource_version.unwrap().parse().unwrap();
    let p = running(&pods, "one").await;
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    assert!(p.metadata.resource_version.unwrap().parse::<u64>().unwrap() > v0);

    // stdin in, stdout and stderr apart, the code back from channel 3, as
    // the container's user, in its emptyDir.
    let ap = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let script = "id -u; stat -c %a /work; cat; echo err >&2; exit 3";
    let mut a = pods.exec("one", ["sh", "-c", script], &ap).await.unwrap();
    let mut stdin = a.stdin().unwrap();
    let mut stdout = a.stdout().unwrap();
    let mut stderr = a.stderr().unwrap();
    let status = a.take_status().unwrap();
    stdin.write_all(b"through stdin\n").await.unwrap();
    // The end of stdin: kube sends v5's close of channel 0 on shutdown.
    stdin.shutdown().await.unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    let (r1, r2) = tokio::join!(
        stdout.read_to_string(&mut out),
        stderr.read_to_string(&mut err)
    );
    r1.unwrap();
    r2.unwrap();
    assert_eq!(
        (out.as_str(), err.as_str()),
        ("1000\n777\nthrough stdin\n", "err\n")
    );
    let st = status.await.unwrap();
    assert_eq!(st.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = st.details.unwrap().causes.unwrap();
    assert_eq!(
        (causes[0].reason.as_deref(), causes[0].message.as_deref()),
        (Some("ExitCode"), Some("3"))
    );
    a.join().await.unwrap();

    let ok = pods
        .exec("one", ["true"], &AttachParams::default().stderr(false))
        .await;
    let mut ok = ok.unwrap();
    let st = ok.take_status().unwrap().await.unwrap();
    assert_eq!(st.status.as_deref(), Some("Success"));

    // A label selector picks it out; another leaves it out.
    pods.create(
        &PostParams::default(),
        &pod("two", &["sleep", "600"], json!({"app": "x", "n": "2"})),
    )
    .await
    .unwrap();
    let names = |l: kube::api::ObjectList<KPod>| {
        l.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>()
    };
    let l = pods
        .list(&ListParams::default().labels("app=x,n!=2"))
        .await
        .unwrap();
    assert_eq!(names(l), ["one"]);
    let l = pods
        .list(&ListParams::default().labels("n in (1,2)"))
        .await
        .unwrap();
    assert_eq!(names(l), ["one", "two"]);

    // Delete: answered at once with the object marked, gone later.
    running(&pods, "two").await;
    let boxes = f.boxes();
    assert_eq!(boxes.len(), 2);
    let dp = DeleteParams {
        grace_period_seconds: Some(5),
        ..Default::default()
    };
    let d = pods.delete("one", &dp).await.unwrap();
    let marked = d.left().unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    for _ in 0..300 {
        if pods.get_opt("one").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pods.get_opt("one").await.unwrap().is_none());
    pods.delete("two", &DeleteParams::default()).await.unwrap();
    f.close().await;
    let env = computer_testkit::docker_env().await.unwrap();
    let left = computer_testkit::labelled_containers(
        &env.docker,
        &format!("{}={owner}", crate::vendor_box::LABEL),
    )
    .await;
    assert!(left.is_empty(), "boxes left: {left:?}");
}

#[tokio::test]
async fn a_pod_past_its_active_deadline_fails_and_a_wrong_token_is_refused() {
    let Some((f, c, _)) = fake("fake-k8s-deadline").await else {
        return;
    };
    let pods: Api<KPod> = Api::namespaced(c, NS);
    let mut p = pod("short", &["sleep", "600"], json!({}));
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(2);
    pods.create(&PostParams::default(), &p).await.unwrap();
    running(&pods, "short").await;
    let mut failed = None;
    for _ in 0..200 {
        let p = pods.get("short").await.unwrap();
        if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
            failed = p.status;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        failed.and_then(|s| s.reason).as_deref(),
        Some("DeadlineExceeded")
    );
    let e = pods
        .create(&PostParams::default(), &pod("short", &["true"], json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 409),
        "{e:?}"
    );

    let mut bad = Config::new(f.url().parse().unwrap());
    bad.auth_info.token = Some("not-it".to_string().into());
    let bad: Api<KPod> = Api::namespaced(Client::try_from(bad).unwrap(), NS);
    let e = bad.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 401),
        "{e:?}"
    );
    f.close().await;
}

#[tokio::test]
async fn network_policies_are_kept_listed_by_label_and_deleted() {
    let Some((f, c, _)) = fake("fake-k8s-np").await else {
        return;
    };
    let nps: Api<NetworkPolicy> = Api::namespaced(c, NS);
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "deny", "labels": {"k": "v"}},
        "spec": {"podSelector": {"matchLabels": {"c": "1"}}, "policyTypes": ["Ingress", "Egress"]},
    }))
    .unwrap();
    nps.create(&PostParams::default(), &np).await.unwrap();
    let got = nps.get("deny").await.unwrap();
    assert_eq!(got.spec, np.spec);
    let l = nps
        .list(&ListParams::default().labels("k=v"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(f.policies(), ["tests/deny"]);
    nps.delete("deny", &DeleteParams::default()).await.unwrap();
    assert!(nps.get_opt("deny").await.unwrap().is_none());
    assert!(f.policies().is_empty());
}
