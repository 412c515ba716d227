//! The Kubernetes provider against the fake Kubernetes API (computer-fakes'
//! kubernetes, on loopback, each pod a bounded container running a real
//! computerd init):
//!
//! - create → connect → the first `exec.run` result, with computerd in
//!   the image and with computerd streamed in through exec (a 4 MB
//!   static binary over the exec's stdin), each the median of
//!   `CMCP_BENCH_CREATES` (3) network-none computers;
//! - the fake's round trip: one pod GET, the least any API call costs;
//! - `exec.run` of `true` through the pods/exec bridge (the protocol's
//!   bytes over the exec's WebSocket): its added cost per exec is this
//!   over the GET.
//!
//! On a real cluster every exec goes API server → kubelet → runtime, so
//! opening the bridge costs an exec's setup (tens of ms on a kind node,
//! per the kubelet's streaming server and CRI round trips), but an
//! `exec.run` on an open bridge is one WebSocket frame each way through
//! the API server's proxy; streaming computerd adds 4 MB over that same
//! path once per computer, which on a cluster network is tens of ms more,
//! while pulling an image that carries it costs nothing per computer once
//! the node has the image.
//!
//! Run on demand, as root, with dockerd up and the test image built
//! (fixtures/images/build.sh):
//!
//!     cargo bench -p computer-providers --bench kubernetes
//!
//! `CMCP_TEST_DOCKER_IMAGE` names the image, `CMCP_TEST_DOCKER_COMPUTERD`
//! the static daemon, `CMCP_BENCH_EXECS` the count of each call (100).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use computer_fakes::kubernetes::FakeKubernetes;
use computer_providers::kubernetes::{DEFAULT_COMPUTERD, KubernetesProvider, KubernetesSettings};
use computer_providers::provider::Configure;
use computer_providers::settings::HostDefaults;
use computer_providers::{ComputerSpec, Provider, Release};
use support::{count, exec_true, first_result, median, ms};
use tokio_util::sync::CancellationToken;

mod support;

const TOKEN: &str = "k8s-bench-token";
const NS: &str = "bench";

fn main() {
    support::on_two_workers(bench());
}

/// The median of `n` creates to the first result through `p`.
async fn creates(p: &KubernetesProvider, n: usize, cancel: &CancellationToken) -> Duration {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let (took, c) = first_result(p, &ComputerSpec::sandbox(600_000), cancel).await;
        all.push(took);
        p.release(&c, Release::Delete, cancel).await.unwrap();
    }
    median(&mut all)
}

async fn bench() {
    let Some(env) = computer_testkit::docker_env().await else {
        println!("no Docker engine or test image: nothing measured");
        return;
    };
    let n = count("CMCP_BENCH_CREATES", 3);
    let execs = count("CMCP_BENCH_EXECS", 100);
    let owner = computer_testkit::marker("k8s-bench");
    let fake = FakeKubernetes::start(&env.docker, &env.image, TOKEN, &owner)
        .await
        .unwrap();
    fake.carry(DEFAULT_COMPUTERD, env.computerd.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig(NS)).unwrap();
    let settings = KubernetesSettings {
        kubeconfig: Some(kubeconfig),
        image: Some(env.image.clone()),
        ..Default::default()
    };
    let image = KubernetesProvider::configure(settings.clone(), &HostDefaults::default()).unwrap();
    let streamed = KubernetesProvider::configure(
        KubernetesSettings {
            stream_computerd: Some(env.computerd.clone()),
            ..settings
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let in_image = creates(&image, n, &cancel).await;
    let in_stream = creates(&streamed, n, &cancel).await;

    let made = image
        .create(&ComputerSpec::sandbox(600_000), &cancel)
        .await
        .unwrap()
        .computer;
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(
        kube::Client::try_from({
            let mut cfg = kube::Config::new(fake.url().parse().unwrap());
            cfg.auth_info.token = Some(TOKEN.to_string().into());
            cfg
        })
        .unwrap(),
        NS,
    );
    let mut gets = Vec::with_capacity(execs);
    for _ in 0..execs {
        let t = Instant::now();
        api.get(&made.id).await.unwrap();
        gets.push(t.elapsed());
    }
    let conn = image.connect(&made, &cancel).await.unwrap();
    let mut runs = Vec::with_capacity(execs);
    for _ in 0..execs {
        let t = Instant::now();
        exec_true(&conn).await;
        runs.push(t.elapsed());
    }
    conn.client.close();
    image
        .release(&made, Release::Delete, &cancel)
        .await
        .unwrap();
    fake.close().await;
    let (get, run) = (median(&mut gets), median(&mut runs));
    let size = std::fs::metadata(&env.computerd)
        .map(|m| m.len())
        .unwrap_or(0);

    println!("kubernetes fake, medians ({n} creates, {execs} calls):");
    println!(
        "  create to the first exec result, computerd in the image: {:.0} ms",
        ms(in_image)
    );
    println!(
        "  create to the first exec result, computerd streamed:     {:.0} ms ({:.2}x; {size} bytes over exec)",
        ms(in_stream),
        in_stream.as_secs_f64() / in_image.as_secs_f64()
    );
    println!(
        "  one pod GET (the fake's round trip):                     {:.2} ms",
        ms(get)
    );
    println!(
        "  exec.run of true through the pods/exec bridge:           {:.2} ms",
        ms(run)
    );
    println!(
        "  the bridge's added cost per exec over a GET:             {:.2} ms",
        ms(run.saturating_sub(get))
    );
}
