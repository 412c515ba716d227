//! What a computer's bounds cost at creation: create → connect → the first
//! `exec.run` of `true` → its result, with a cgroup (the default) and
//! without one, on real local computers.
//!
//! Run on demand, as root like the tests:
//!
//!     cargo bench -p computer-providers --bench create
//!
//! `CMCP_BENCH_CREATES` sets the computers made each way (default 20);
//! `COMPUTERD_BIN` the daemon (default: the workspace build's).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, Provider, Release};
use support::{count, first_result, ms};
use tokio_util::sync::CancellationToken;

mod support;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn run(p: &LocalProvider, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let cancel = CancellationToken::new();
    let spec = ComputerSpec::sandbox(600_000);
    let (mut first, mut release) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (took, computer) = first_result(p, &spec, &cancel).await;
        first.push(took);
        let t = Instant::now();
        p.release(&computer, Release::Delete, &cancel)
            .await
            .unwrap();
        release.push(t.elapsed());
    }
    (first, release)
}

#[tokio::main]
async fn main() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: local computers need root here");
        return;
    }
    let n = count("CMCP_BENCH_CREATES", 20);
    let bin = std::env::var_os("COMPUTERD_BIN")
        .map(std::path::PathBuf::from)
        .or_else(computer_testkit::computerd_bin)
        .expect("build computerd first (cargo build -p computerd)");
    println!("computerd: {}", bin.display());
    let mut figures = Vec::new();
    for cgroups in [true, false] {
        let state = tempfile::tempdir().unwrap();
        let opts = LocalOptions {
            cgroups,
            ..LocalOptions::new(state.path().to_path_buf(), bin.clone())
        };
        let p = LocalProvider::new(opts).unwrap();
        // One to warm the page cache.
        run(&p, 1).await;
        let (mut first, mut release) = run(&p, n).await;
        let name = if cgroups {
            "with cgroups"
        } else {
            "without cgroups"
        };
        let med = pct(&mut first, 0.5);
        println!(
            "{name:<16} create → first exec result: median {:>7.2} ms  p90 {:>7.2} ms | release: median {:>7.2} ms  ({n} computers)",
            ms(med),
            ms(pct(&mut first, 0.9)),
            ms(pct(&mut release, 0.5)),
        );
        figures.push(med);
    }
    println!(
        "cgroups add {:+.2} ms to create → first exec result (median; target at most +5 ms)",
        ms(figures[0]) - ms(figures[1])
    );
}
