//! The egress proxy's cost, on demand (needs root, curl, openssl, python3):
//! `cargo bench -p computer-providers --bench egress`.
//!
//! Against the test hosts of `tests/egress/net.rs` (a network namespace
//! of the bench's own; nothing leaves this machine):
//! - throughput of a 100 MiB download with curl from inside an allowlisted
//!   local computer (init's relay, then the proxy) versus curl direct from
//!   this machine's namespace, the two in turn [`ROUNDS`] times, medians
//!   compared (the range of each shown);
//! - the latency of a small request, the same two ways (median and p90 of
//!   50 requests in one curl run; each a new connection, as the test
//!   server closes every one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/egress/net.rs"]
mod net;

use std::collections::BTreeMap;

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, NetworkPolicy, Provider, Release};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

const SMALL: usize = 50;
/// Downloads each way.
const ROUNDS: usize = 7;

fn times(text: &str) -> Vec<f64> {
    let mut v: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: the egress bench makes network namespaces, which needs root");
        return;
    }
    let Some(bin) = computer_testkit::computerd_bin() else {
        println!("skipped: build computerd first (cargo build -p computerd)");
        return;
    };
    let net = net::Net::up(43).await.unwrap();
    let a = net.a;
    let big = format!("http://{a}/big");
    let small_urls: String = (0..SMALL).map(|_| format!(" http://{a}/")).collect();

    let direct_download = || {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--noproxy",
                "*",
                "-o",
                "/dev/null",
                "-w",
                "%{speed_download}\n",
                &big,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .unwrap_or(0.0)
    };

    // Through an allowlisted computer.
    let state = tempfile::tempdir().unwrap();
    let p = LocalProvider::new(LocalOptions {
        max_lifetime_ms: 3_600_000,
        egress_resolvers: vec![net.dns],
        ..LocalOptions::new(state.path().to_path_buf(), bin)
    })
    .unwrap();
    let cancel = CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.network = NetworkPolicy::Allow(vec!["good.eg.test".into()]);
    let made = p.create(&spec, &cancel).await.unwrap();
    let run = |script: String| {
        let p = &p;
        let c = made.computer.clone();
        async move {
            let conn = p.connect(&c, &CancellationToken::new()).await.unwrap();
            let r = conn
                .client
                .call_typed(&ExecParams {
                    argv: vec!["sh".into(), "-c".into(), script],
                    env: Some(BTreeMap::new()),
                    timeout_ms: Some(300_000),
                    ..Default::default()
                })
                .await
                .unwrap();
            conn.client.close();
            String::from_utf8_lossy(&r.stdout.0).into_owned()
        }
    };

    // The two ways in turn, ROUNDS times: one download of a few hundred
    // milliseconds says more of the machine's other load than of the
    // proxy, so each way's median is compared.
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    for _ in 0..ROUNDS {
        direct.push(direct_download());
        proxied.push(
            run("curl -sS -o /dev/null -w '%{speed_download}\\n' http://good.eg.test/big".into())
                .await
                .trim()
                .parse::<f64>()
                .unwrap_or(0.0),
        );
    }
    direct.sort_by(|a, b| a.total_cmp(b));
    proxied.sort_by(|a, b| a.total_cmp(b));
    let (direct_bps, proxied_bps) = (pct(&direct, 0.5), pct(&proxied, 0.5));

    let script = format!("curl -sS --noproxy '*' -o /dev/null -w '%{{time_total}}\\n'{small_urls}");
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let direct_lat = times(&String::from_utf8_lossy(&out.stdout));
    let small_proxied: String = (0..SMALL).map(|_| " http://good.eg.test/").collect();
    let proxied_lat = times(
        &run(format!(
            "curl -sS -o /dev/null -w '%{{time_total}}\\n'{small_proxied}"
        ))
        .await,
    );
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();

    let mib = |bps: f64| bps / (1024.0 * 1024.0);
    println!(
        "100 MiB download, median of {ROUNDS} in turn: direct {:.0} MiB/s ({:.0} to {:.0}), through the proxy {:.0} MiB/s ({:.0} to {:.0}): {:.0}% of direct",
        mib(direct_bps),
        mib(direct[0]),
        mib(direct[ROUNDS - 1]),
        mib(proxied_bps),
        mib(proxied[0]),
        mib(proxied[ROUNDS - 1]),
        100.0 * proxied_bps / direct_bps
    );
    let ms = |s: f64| s * 1000.0;
    println!(
        "small request ({SMALL}, each a new connection): direct median {:.2} ms p90 {:.2} ms; through the proxy median {:.2} ms p90 {:.2} ms; added median {:.2} ms",
        ms(pct(&direct_lat, 0.5)),
        ms(pct(&direct_lat, 0.9)),
        ms(pct(&proxied_lat, 0.5)),
        ms(pct(&proxied_lat, 0.9)),
        ms(pct(&proxied_lat, 0.5) - pct(&direct_lat, 0.5))
    );
}
