//! Snapshot and fork on real computers, local and Docker:
//!
//! - a snapshot of a computer's /work holding a tree of 1,000 files of
//!   10 KiB and one of 20 MiB (about 30 MB): `Provider::snapshot`, start
//!   to the archive in place;
//! - a fork: create → fill /work from the snapshot (`Provider::restore`) →
//!   the first `exec.run` result, against a plain create → first result
//!   (the fork's cost is the difference).
//!
//! Medians of `CMCP_BENCH_SNAPSHOTS` rounds (default 7) of each. Run on
//! demand, as root, with dockerd up and the test image built for the
//! Docker half (skipped without an engine):
//!
//!     cargo bench -p computer-providers --bench snapshot
//!
//! `COMPUTERD_BIN` the local daemon, `CMCP_TEST_DOCKER_IMAGE` and
//! `CMCP_TEST_DOCKER_COMPUTERD` as for the docker bench.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, Labels, Provider, Release, label};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use support::{count, exec_true, first_result, median, ms};
use tokio_util::sync::CancellationToken;

mod support;

const FILL: &str = "mkdir -p ~/t && for i in $(seq 1000); do head -c 10240 /dev/urandom > ~/t/f$i; done && head -c 20971520 /dev/urandom > ~/big";

async fn bench(p: &impl Provider, rounds: usize) {
    let cancel = CancellationToken::new();
    let spec = ComputerSpec::sandbox(600_000);
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let r = conn
        .client
        .call_typed(&ExecParams {
            argv: vec!["sh".into(), "-c".into(), FILL.into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    conn.client.close();

    let (mut snap, mut plain, mut forked) = (Vec::new(), Vec::new(), Vec::new());
    let mut size = 0;
    // One round more than counted: the first warms the page cache.
    for round in 0..=rounds {
        let labels = Labels::from([(label::NAME.to_string(), format!("bench-{round}"))]);
        let t = Instant::now();
        let s = p
            .snapshot(&made.computer, &labels, 600_000, &cancel)
            .await
            .unwrap();
        let took_snap = t.elapsed();
        size = s.size_bytes;

        let (took_plain, c) = first_result(p, &spec, &cancel).await;
        p.release(&c, Release::Delete, &cancel).await.unwrap();

        let t = Instant::now();
        let f = p.create(&spec, &cancel).await.unwrap();
        p.restore(&s, &f.computer, &cancel).await.unwrap();
        let conn = p.connect(&f.computer, &cancel).await.unwrap();
        exec_true(&conn).await;
        let took_fork = t.elapsed();
        conn.client.close();
        p.release(&f.computer, Release::Delete, &cancel)
            .await
            .unwrap();
        p.release_snapshot(&s, &cancel).await.unwrap();
        if round > 0 {
            snap.push(took_snap);
            plain.push(took_plain);
            forked.push(took_fork);
        }
    }
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    let (s, c, f): (Duration, Duration, Duration) =
        (median(&mut snap), median(&mut plain), median(&mut forked));
    println!(
        "{:<7} snapshot of {:.1} MB: median {:>7.1} ms ({:.0} MB/s) | create → first result {:>7.1} ms, fork (create + fill + first result) {:>7.1} ms: the fill adds {:>7.1} ms ({:.2}x a plain create)  ({rounds} rounds)",
        p.id(),
        size as f64 / 1e6,
        ms(s),
        size as f64 / 1e6 / s.as_secs_f64(),
        ms(c),
        ms(f),
        ms(f.saturating_sub(c)),
        f.as_secs_f64() / c.as_secs_f64(),
    );
}

#[tokio::main]
async fn main() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: local computers need root here");
        return;
    }
    let rounds = count("CMCP_BENCH_SNAPSHOTS", 7);
    let bin = std::env::var_os("COMPUTERD_BIN")
        .map(PathBuf::from)
        .or_else(computer_testkit::computerd_bin)
        .expect("build computerd first (cargo build -p computerd)");
    let state = tempfile::tempdir().unwrap();
    let local = LocalProvider::new(LocalOptions::new(state.path().to_path_buf(), bin)).unwrap();
    bench(&local, rounds).await;

    if !std::path::Path::new("/var/run/docker.sock").exists() {
        println!("docker: skipped: no Docker engine at /var/run/docker.sock");
        return;
    }
    let (image, computerd) = support::docker_image_and_daemon();
    let cache = tempfile::tempdir().unwrap();
    let mut opts = DockerOptions::new(computerd, cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image));
    let docker = DockerProvider::new(opts).unwrap();
    bench(&docker, rounds).await;
}
