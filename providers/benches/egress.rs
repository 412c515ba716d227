//! The egress proxy's cost, on demand (needs root, curl, openssl, python3):
//! `cargo bench -p computer-providers --bench egress`.
//!
//! Against the test hosts of `tests/suite/support/net.rs` (a network namespace
//! of the bench's own; nothing leaves this machine):
//! - throughput of a 100 MiB download with curl from inside an allowlisted
//!   local computer (init hands the connection to the proxy, which carries
//!   it) versus curl direct from this machine's namespace, the two in turn
//!   `CMCP_BENCH_ROUNDS` times (default [`ROUNDS`]), medians compared (the
//!   range of each shown), and the median of each round's ratio;
//! - the CPU time the whole machine spent per download each way (from
//!   /proc/stat, so the kernel's share in every process and interrupt is
//!   counted), and how many CPUs that kept busy: where the direct way
//!   already keeps this machine's CPUs busy, the ratio of throughputs is
//!   the ratio of CPU costs;
//! - the latency of a small request, the same two ways (median and p90 of
//!   50 requests in one curl run; each a new connection, as the test
//!   server closes every one).
//!
//! `CMCP_BENCH_HOLD=SECS` keeps the computer SECS seconds after the figures
//! (its `sleep` is the newest on this machine), for measuring by hand from
//! its network namespace: `nsenter --net=/proc/PID/ns/net curl -x
//! http://127.0.0.1:3128 http://good.eg.test/big`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/suite/support/net.rs"]
mod net;

use std::collections::BTreeMap;

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, NetworkPolicy, Provider, Release};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

const SMALL: usize = 50;
/// Downloads each way.
const ROUNDS: usize = 21;

/// The machine's busy time so far, in clock ticks (user, nice, system,
/// irq and softirq of every CPU).
fn busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or_default();
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    [0, 1, 2, 5, 6].iter().filter_map(|&i| f.get(i)).sum()
}

fn tick_ms() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1000.0 / if hz > 0 { hz as f64 } else { 100.0 }
}

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
    let rounds: usize = std::env::var("CMCP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(ROUNDS);
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let mut ratios = Vec::new();
    // Busy ticks and wall time, each way.
    let (mut direct_cpu, mut proxied_cpu) = (0u64, 0u64);
    let (mut direct_wall, mut proxied_wall) = (0f64, 0f64);
    for _ in 0..rounds {
        let (t, b) = (std::time::Instant::now(), busy_ticks());
        let d = direct_download();
        direct_cpu += busy_ticks() - b;
        direct_wall += t.elapsed().as_secs_f64();
        let (t, b) = (std::time::Instant::now(), busy_ticks());
        let p =
            run("curl -sS -o /dev/null -w '%{speed_download}\\n' http://good.eg.test/big".into())
                .await
                .trim()
                .parse::<f64>()
                .unwrap_or(0.0);
        proxied_cpu += busy_ticks() - b;
        proxied_wall += t.elapsed().as_secs_f64();
        direct.push(d);
        proxied.push(p);
        if d > 0.0 {
            ratios.push(p / d);
        }
    }
    direct.sort_by(|a, b| a.total_cmp(b));
    proxied.sort_by(|a, b| a.total_cmp(b));
    ratios.sort_by(|a, b| a.total_cmp(b));
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
    if let Ok(hold) = std::env::var("CMCP_BENCH_HOLD") {
        println!("holding the computer {hold} s; the test host's /big is {big}");
        run(format!("sleep {hold}")).await;
    }
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();

    let mib = |bps: f64| bps / (1024.0 * 1024.0);
    println!(
        "100 MiB download, median of {rounds} in turn: direct {:.0} MiB/s ({:.0} to {:.0}), through the proxy {:.0} MiB/s ({:.0} to {:.0}): {:.0}% of direct (each round's ratio: median {:.0}%, quartiles {:.0}% to {:.0}%)",
        mib(direct_bps),
        mib(direct[0]),
        mib(direct[rounds - 1]),
        mib(proxied_bps),
        mib(proxied[0]),
        mib(proxied[rounds - 1]),
        100.0 * proxied_bps / direct_bps,
        100.0 * pct(&ratios, 0.5),
        100.0 * pct(&ratios, 0.25),
        100.0 * pct(&ratios, 0.75),
    );
    let per = |ticks: u64| ticks as f64 * tick_ms() / rounds as f64;
    println!(
        "CPU per download (the whole machine, process starts included): direct {:.0} ms, keeping {:.2} CPUs busy; through the proxy {:.0} ms ({:.2}x), keeping {:.2} CPUs busy; this machine has {}",
        per(direct_cpu),
        per(direct_cpu) / 1000.0 / (direct_wall / rounds as f64),
        per(proxied_cpu),
        per(proxied_cpu) / per(direct_cpu).max(f64::MIN_POSITIVE),
        per(proxied_cpu) / 1000.0 / (proxied_wall / rounds as f64),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
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
