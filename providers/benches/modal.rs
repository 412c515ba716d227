//! The Modal provider against the fake Modal (computer-fakes' modal, on
//! loopback, each sandbox a bounded container running a real computerd):
//!
//! - create → connect → the first `exec.run` result, once;
//! - the fake's own round trip: one unary control call (SandboxWait with
//!   timeout 0), the least any Modal call costs;
//! - one Modal exec of `true` straight through the command router
//!   (TaskExecStart, stdin eof, both outputs read, TaskExecWait): what a
//!   provider without a daemon would pay per command;
//! - `exec.run` of `true` through the daemon's bridge (one stdin write and
//!   the answer on the open stdout stream): the bridge's cost per exec is
//!   this over the unary round trip;
//! - a 10 MiB file pushed through the bridge (`files.write` in 512 KiB
//!   chunks, each a stdin write at its offset), in MiB/s.
//!
//! Against real Modal each router call is one more network round trip to
//! Modal's router (not published; a gRPC round trip to a region nearby is
//! tens of ms), so a bridged exec costs about two such trips (the stdin
//! write, the stdout data) and a direct exec four or more.
//!
//! Run on demand, as root, with dockerd up and the test image built
//! (fixtures/images/build.sh):
//!
//!     cargo bench -p computer-providers --bench modal
//!
//! `CMCP_TEST_DOCKER_IMAGE` names the image, `CMCP_TEST_DOCKER_COMPUTERD`
//! the static daemon, `CMCP_BENCH_EXECS` the count of each kind of call
//! (100) and `CMCP_BENCH_PUSHES` the 10 MiB pushes (5).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use computer_fakes::modal::FakeModal;
use computer_providers::daemon_backed::child::ChildHost;
use computer_providers::modal::control::{Control, Tokens};
use computer_providers::modal::host::ModalHost;
use computer_providers::modal::router::Router;
use computer_providers::modal::{ModalProvider, ModalSettings};
use computer_providers::provider::Configure;
use computer_providers::settings::HostDefaults;
use computer_providers::vendor::Secret;
use computer_providers::{ComputerSpec, Provider, Release};
use computerd::client::{ComputerExt, WriteFileOptions};
use support::{count, exec_true, first_result, median, ms};
use tokio_util::sync::CancellationToken;

mod support;

const ID: &str = "ak-bench";
const SECRET: &str = "as-bench";

async fn timed<F, Fut>(n: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        all.push(t.elapsed());
    }
    median(&mut all)
}

fn main() {
    support::on_two_workers(bench());
}

async fn bench() {
    let Some(env) = computer_testkit::docker_env().await else {
        println!("no Docker engine or test image: nothing measured");
        return;
    };
    let execs = count("CMCP_BENCH_EXECS", 100);
    let pushes = count("CMCP_BENCH_PUSHES", 5);
    let owner = computer_testkit::marker("modal-bench");
    let fake = FakeModal::start(&env.docker, &env.image, ID, SECRET, &owner)
        .await
        .unwrap();
    let settings = ModalSettings {
        token_id: Some(Secret::new(ID)),
        token_secret: Some(Secret::new(SECRET)),
        server_url: Some(fake.url().into()),
        insecure_plaintext_for_tests: Some(true),
        computerd: Some(env.computerd.clone()),
        ..Default::default()
    };
    let p = ModalProvider::configure(settings, &HostDefaults::default()).unwrap();
    let cancel = CancellationToken::new();
    // create → connect → the first result, once (the image is new, so
    // this includes the app and image get-or-create).
    let (first, computer) = first_result(&p, &ComputerSpec::sandbox(1_800_000), &cancel).await;
    let id = computer.id.clone();

    let control = Arc::new(Control::new(
        fake.url().into(),
        true,
        Some(Tokens {
            id: Secret::new(ID),
            secret: Secret::new(SECRET),
        }),
    ));
    let unary = timed(execs, || async {
        assert!(control.poll(&id).await.unwrap().is_none());
    })
    .await;
    let task = control.task_id(&id, 10.0).await.unwrap();
    let host = ModalHost {
        router: Arc::new(Router::open(Arc::clone(&control), &task).await.unwrap()),
    };
    let direct = timed(execs, || async {
        let ran = host
            .run(&["true".to_string()], Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(ran.code, 0);
    })
    .await;
    let conn = p.connect(&computer, &cancel).await.unwrap();
    let bridged = timed(execs, || exec_true(&conn)).await;
    let ten = vec![b'x'; 10 * 1024 * 1024];
    let push = timed(pushes, || async {
        let n = conn
            .client
            .write_file("/work/ten", &ten, WriteFileOptions::default())
            .await
            .unwrap();
        assert_eq!(n, ten.len() as u64);
    })
    .await;
    conn.client.close();
    p.release(&computer, Release::Delete, &cancel)
        .await
        .unwrap();
    fake.close().await;

    println!("modal fake, medians of {execs} (pushes: {pushes}):");
    println!(
        "  create to the first exec result (once):     {:.0} ms",
        ms(first)
    );
    println!(
        "  unary control call (the fake's round trip): {:.2} ms",
        ms(unary)
    );
    println!(
        "  Modal exec of true through the router:      {:.2} ms",
        ms(direct)
    );
    println!(
        "  exec.run of true through the bridge:        {:.2} ms",
        ms(bridged)
    );
    println!(
        "  the bridge's added cost per exec:           {:.2} ms",
        ms(bridged.saturating_sub(unary))
    );
    println!(
        "  10 MiB files.write through the bridge:      {:.0} ms ({:.1} MiB/s)",
        ms(push),
        10.0 / push.as_secs_f64()
    );
}
