//! agent-sandbox's warm pool against a cold start, on the fake Kubernetes
//! API (computer-fakes' kubernetes with agent-sandbox installed, each pod a
//! bounded container running a real computerd init): create → connect →
//! the first `exec.run` result, the median of `CMCP_BENCH_CREATES` (3)
//! network-none computers each way:
//!
//! - cold: `--kubernetes-api sandbox` with no pool, so a `Sandbox` whose
//!   controller makes the pod, which then starts from nothing;
//! - warm: a `SandboxClaim` on the pool of the computer's template, which
//!   hands over a pod already running (its container started, its shell
//!   waiting for the deadline); the pool is let refill between claims,
//!   as a pool sized for the load would be.
//!
//! What a real cluster adds to the cold path, and a claim takes away: the
//! scheduler's placement and the pod's start. agent-sandbox's own
//! measurements (extensions/controllers/sandboxwarmpool_controller.go,
//! its sizing notes from a 300-claim warm-adoption benchmark) put pod
//! scheduling at about 70 pods/s and a pod's start with the image cached
//! at about 2.5-3.5 s, before any image pull on a node that lacks it; a
//! claim skips both. What a claim still costs there is the controller's
//! adoption (a watch event and a patch of the Sandbox) and our own calls
//! through the API server (the pod's patch, the policy, the exec that
//! writes the deadline), each a round trip of the API server.
//!
//! Run on demand, as root, with dockerd up and the test image built:
//!
//!     cargo bench -p computer-providers --bench kubernetes_pool

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use computer_fakes::kubernetes::FakeKubernetes;
use computer_providers::kubernetes::{
    DEFAULT_COMPUTERD, KubernetesApi, KubernetesProvider, KubernetesSettings,
};
use computer_providers::provider::Configure;
use computer_providers::settings::HostDefaults;
use computer_providers::{ComputerSpec, Provider, Release};
use support::{count, first_result, median, ms};
use tokio_util::sync::CancellationToken;

mod support;

const NS: &str = "bench";

fn main() {
    support::on_two_workers(bench());
}

/// Until the one template's pool holds a Ready warm pod.
async fn warm_ready(fake: &FakeKubernetes) {
    for _ in 0..1200 {
        let ready = fake.objects("sandboxes").iter().any(|s| {
            let name = s.trim_start_matches(&format!("{NS}/"));
            fake.object("sandboxes", NS, name).is_some_and(|sb| {
                sb["metadata"]["labels"]["agents.x-k8s.io/warm-pool-sandbox"].is_string()
                    && sb["status"]["conditions"][0]["status"] == "True"
            })
        });
        if ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no warm pod was ready within 60 s");
}

async fn bench() {
    let Some(env) = computer_testkit::docker_env().await else {
        println!("no Docker engine or test image: nothing measured");
        return;
    };
    let n = count("CMCP_BENCH_CREATES", 3);
    let owner = computer_testkit::marker("k8s-pool-bench");
    let fake = FakeKubernetes::start(&env.docker, &env.image, "k8s-pool-bench", &owner)
        .await
        .unwrap();
    fake.carry(DEFAULT_COMPUTERD, env.computerd.clone());
    fake.install_agent_sandbox();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig(NS)).unwrap();
    let p = KubernetesProvider::configure(
        KubernetesSettings {
            kubeconfig: Some(kubeconfig),
            image: Some(env.image.clone()),
            api: Some(KubernetesApi::Sandbox),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let spec = ComputerSpec::sandbox(600_000);
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (took, c) = first_result(&p, &spec, &cancel).await;
        cold.push(took);
        p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    fake.knobs(|k| k.auto_pool = Some(1));
    for _ in 0..n {
        warm_ready(&fake).await;
        let (took, c) = first_result(&p, &spec, &cancel).await;
        warm.push(took);
        p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    fake.remove_pools().await;
    fake.close().await;
    let (cold_m, warm_m) = (median(&mut cold), median(&mut warm));
    let each = |v: &[Duration]| {
        v.iter()
            .map(|d| format!("{:.0}", ms(*d)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("kubernetes fake through agent-sandbox, create to the first exec result ({n} each):");
    println!(
        "  cold Sandbox (its pod made and started): {:.0} ms median ({} ms)",
        ms(cold_m),
        each(&cold)
    );
    println!(
        "  claimed from the warm pool:              {:.0} ms median ({} ms)",
        ms(warm_m),
        each(&warm)
    );
    println!(
        "  warm / cold: {:.2}x",
        warm_m.as_secs_f64() / cold_m.as_secs_f64()
    );
}
