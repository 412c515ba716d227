//! What the cloud providers' bridge adds, against their fakes (whose
//! sandboxes are bounded Docker containers of the test image): per vendor,
//! the median of `exec.run` of `true` through the provider's connection
//! (the vendor's process API, the bridge, `computerd stdio`, the daemon)
//! against the fake's own round trip for the same program (E2B: an envd
//! process stream; Daytona: a toolbox execute), and a 10 MiB file pushed
//! through the daemon (`files.write` in 512 KiB pieces) against the
//! vendor's own upload.
//!
//! Against the real vendor: neither E2B nor Daytona publishes a per-call
//! latency (each publishes sandbox start times only). A bridged exec is
//! one request carrying the daemon's stdin (E2B: envd SendInput; Daytona:
//! a session command input POST) and its answer on the output stream the
//! bridge holds open, so it costs about one network round trip to the
//! vendor plus the figure measured here; the vendor's own exec is a
//! process start and a stream, at least as many trips. The live runs
//! (`COMPUTER_MCP_<ID>_API_KEY`) give the real figure.
//!
//! Run on demand, as root, with Docker and the test image:
//!
//!     cargo bench -p computer-providers --bench cloud
//!
//! `CMCP_BENCH_EXECS` sets the runs each way (default 30);
//! `CMCP_TEST_DOCKER_IMAGE` and `CMCP_TEST_DOCKER_COMPUTERD` the image and
//! the static daemon, as for the tests.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use computer_fakes::daytona::{BoxMachines, FakeDaytona};
use computer_fakes::e2b::FakeE2b;
use computer_fakes::vendor_box::BoxSpec;
use computer_providers::daytona::{Daytona, DaytonaProvider, DaytonaSettings};
use computer_providers::e2b::envd::{Envd, Event};
use computer_providers::e2b::{E2bProvider, E2bSettings};
use computer_providers::vendor::Secret;
use computer_providers::{
    ComputerRef, ComputerSpec, Configure, Connection, HostDefaults, Provider, Release,
};
use computerd::client::ComputerExt;
use computerd::protocol::limits::MAX_WRITE_BYTES;
use computerd::protocol::{Bytes64, FilesWriteParams};
use support::{count, exec_true, ms};
use tokio_util::sync::CancellationToken;

// Not every shared helper is used here.
#[allow(dead_code)]
mod support;

const PUSH: usize = 10 * 1024 * 1024;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// `n` timings of `f`, after one to warm up.
async fn timed<F, Fut>(n: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    f().await;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        v.push(t.elapsed());
    }
    median(v)
}

/// 10 MiB written through the daemon in pieces it takes.
async fn push_through(conn: &Connection, data: &[u8]) -> Duration {
    let t = Instant::now();
    for (i, piece) in data.chunks(MAX_WRITE_BYTES as usize / 2).enumerate() {
        conn.client
            .call_typed(&FilesWriteParams {
                path: "/work/push.bin".into(),
                data: Bytes64(piece.to_vec()),
                offset: Some((i * piece.len()) as u64),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    t.elapsed()
}

/// The vendor's own figures: medians, and one upload.
struct Own {
    /// One API call of the fake's (a read).
    call: Duration,
    /// `true` run as a new process through the vendor's own process API.
    own: Duration,
    /// 10 MiB through the vendor's own upload.
    upload: Duration,
}

/// A provider of `settings`, then a computer of it made and reached.
async fn reached<P: Configure>(
    settings: P::Settings,
    cancel: &CancellationToken,
) -> (P, (ComputerRef, Connection)) {
    let p = P::configure(settings, &HostDefaults::default()).unwrap();
    let made = made(&p, cancel).await;
    (p, made)
}

/// The vendor's own figures: `n` runs of `own` and of `call` (medians),
/// and one `upload`.
async fn vendor_figures<O, OF, C, CF>(
    n: usize,
    own: O,
    call: C,
    upload: impl Future<Output = ()>,
) -> Own
where
    O: FnMut() -> OF,
    OF: Future<Output = ()>,
    C: FnMut() -> CF,
    CF: Future<Output = ()>,
{
    let own = timed(n, own).await;
    let call = timed(n, call).await;
    let t = Instant::now();
    upload.await;
    Own {
        call,
        own,
        upload: t.elapsed(),
    }
}

/// A computer of `p` made and reached.
async fn made(p: &dyn Provider, cancel: &CancellationToken) -> (ComputerRef, Connection) {
    let made = p
        .create(&ComputerSpec::sandbox(600_000), cancel)
        .await
        .unwrap();
    let conn = p.connect(&made.computer, cancel).await.unwrap();
    (made.computer, conn)
}

/// The bridge's figures beside the vendor's own (`f`), reported; then the
/// computer released.
async fn bridge_and_report(
    vendor: &str,
    p: &dyn Provider,
    (computer, conn): (ComputerRef, Connection),
    n: usize,
    data: &[u8],
    f: Own,
    cancel: &CancellationToken,
) {
    let bridged = timed(n, || exec_true(&conn)).await;
    let pushed = push_through(&conn, data).await;
    println!(
        "{vendor:<8} exec of true: the fake's own process {:>7.2} ms; through the bridge {:>7.2} ms, {:>+7.2} ms over one fake API call ({:.2} ms) (medians)",
        ms(f.own),
        ms(bridged),
        ms(bridged) - ms(f.call),
        ms(f.call)
    );
    println!(
        "{vendor:<8} 10 MiB push: the vendor's upload {:>7.1} ms, through the daemon {:>7.1} ms ({:.1} MiB/s)",
        ms(f.upload),
        ms(pushed),
        10.0 / pushed.as_secs_f64()
    );
    conn.client.close();
    p.release(&computer, Release::Delete, cancel).await.unwrap();
}

async fn e2b(env: &computer_testkit::DockerEnv, n: usize, data: &[u8]) {
    let key = "e2b_bench_key";
    let owner = computer_testkit::marker("e2b-bench");
    let fake = FakeE2b::start(&env.docker, &env.image, key, &owner)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let (p, made) = reached::<E2bProvider>(
        E2bSettings {
            api_key: Some(Secret::new(key)),
            api_url: Some(fake.url().into()),
            envd_url: Some(fake.url().into()),
            computerd: Some(env.computerd.clone()),
            ..Default::default()
        },
        &cancel,
    )
    .await;
    let envd = Envd {
        http: computer_providers::vendor::http_client("E2B", false).unwrap(),
        base: fake.url().into(),
        sandbox: made.0.id.clone(),
        token: fake.tokens().last().cloned().map(Secret::new),
    };
    let own = vendor_figures(
        n,
        || async {
            let argv = ["true".to_string()];
            let (_, mut s) = envd
                .start(&argv, false, Some(Duration::from_secs(10)))
                .await
                .unwrap();
            while let Some(e) = s.next().await.unwrap() {
                if let Event::End { exit_code, .. } = e {
                    assert_eq!(exit_code, 0);
                }
            }
        },
        || async {
            p.list(&Default::default(), &cancel).await.unwrap();
        },
        async {
            envd.upload("/tmp/upload.bin", Bytes::copy_from_slice(data))
                .await
                .unwrap();
        },
    )
    .await;
    bridge_and_report("E2B", &p, made, n, data, own, &cancel).await;
    fake.close().await;
}

async fn daytona(env: &computer_testkit::DockerEnv, n: usize, data: &[u8]) {
    let key = "dtn_bench_key";
    let owner = computer_testkit::marker("daytona-bench");
    let machines = BoxMachines::new(env.docker.clone(), BoxSpec::new(&env.image, &owner));
    let fake = FakeDaytona::start(key, Arc::new(machines)).await.unwrap();
    let cancel = CancellationToken::new();
    let (p, made) = reached::<DaytonaProvider>(
        DaytonaSettings {
            api_key: Some(Secret::new(key)),
            api_url: Some(fake.api_url()),
            computerd: Some(env.computerd.clone()),
            ..Default::default()
        },
        &cancel,
    )
    .await;
    let d = Daytona::new(Some(&fake.api_url()), Some(Secret::new(key))).unwrap();
    let sb = d.get(&made.0.id, &cancel).await.unwrap().unwrap();
    let tb = d.toolbox(&sb).unwrap();
    let own = vendor_figures(
        n,
        || async {
            let r = tb
                .execute("true", Duration::from_secs(10), &cancel)
                .await
                .unwrap();
            assert_eq!(r.exit_code, 0);
        },
        || async {
            d.get(&made.0.id, &cancel).await.unwrap().unwrap();
        },
        async {
            tb.upload("/tmp/upload.bin", Bytes::copy_from_slice(data), &cancel)
                .await
                .unwrap();
        },
    )
    .await;
    bridge_and_report("Daytona", &p, made, n, data, own, &cancel).await;
    fake.shutdown().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(env) = computer_testkit::docker_env().await else {
        println!("skipped: no Docker or no test image");
        return;
    };
    let n = count("CMCP_BENCH_EXECS", 30);
    let data: Vec<u8> = (0..PUSH).map(|i| (i * 31 % 251) as u8).collect();
    e2b(&env, n, &data).await;
    daytona(&env, n, &data).await;
}
