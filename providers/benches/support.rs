//! What the providers' benches share.

use std::time::{Duration, Instant};

use computer_providers::{ComputerRef, ComputerSpec, Provider};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

/// The median of `v` (sorted in place). Not every bench takes medians.
#[allow(dead_code)]
pub fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Run `bench` on a runtime of two workers. Not every bench is async.
#[allow(dead_code)]
pub fn on_two_workers(bench: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench);
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The count `var` sets, else `default`.
pub fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// create → connect → the first `exec.run` of `true` → its result: how
/// long that took, and the computer made (its connection closed). Not
/// every bench takes it.
#[allow(dead_code)]
pub async fn first_result(
    p: &impl Provider,
    spec: &ComputerSpec,
    cancel: &CancellationToken,
) -> (Duration, ComputerRef) {
    let t = Instant::now();
    let made = p.create(spec, cancel).await.unwrap();
    let conn = p.connect(&made.computer, cancel).await.unwrap();
    exec_true(&conn).await;
    let took = t.elapsed();
    conn.client.close();
    (took, made.computer)
}

/// One `exec.run` of `true` on `conn`'s computer, which must exit 0.
pub async fn exec_true(conn: &computer_providers::Connection) {
    let r = conn
        .client
        .call_typed(&ExecParams {
            argv: vec!["true".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.exit_code, Some(0));
}

/// The Docker benches' image (`CMCP_TEST_DOCKER_IMAGE`, default the test
/// image) and static daemon (`CMCP_TEST_DOCKER_COMPUTERD`, default the
/// workspace's static build). Not every bench runs Docker.
#[allow(dead_code)]
pub fn docker_image_and_daemon() -> (String, std::path::PathBuf) {
    let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    let computerd = std::env::var_os("CMCP_TEST_DOCKER_COMPUTERD")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../target/x86_64-unknown-linux-gnu/daemon/computerd")
        });
    (image, computerd)
}
