//! Load on one computer through the whole stack: 1000 `exec` calls in
//! flight at once on one MCP session, then 10 000 one after another, with
//! the latencies (p50, p99, max) beside the single-call median and the
//! server's and the computer's daemon's memory and open descriptors before
//! and after. First, the same burst against the floor: the trivial rmcp
//! server of `tool_call` (trivial.rs), which spawns `true` on this machine
//! per call with no computer, so the burst's figures have their floor
//! beside them (a burst's p99 is bounded below by how many programs this
//! machine can start in a second, whatever the server).
//!
//! Run on demand (never part of `cargo test`), as root like the tests:
//!
//!     cargo bench -p computer-mcp --bench load
//!
//! `CMCP_BENCH_CONCURRENT` (default 1000) and `CMCP_BENCH_SEQUENTIAL`
//! (default 10000) set the counts; `COMPUTERD_BIN` the daemon.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

#[path = "support.rs"]
mod support;
#[path = "trivial.rs"]
mod trivial;
use support::{count_from_env, line, ms, pct, server_cmd};

fn exec_true() -> CallToolRequestParams {
    let args = serde_json::json!({"argv": ["true"]});
    CallToolRequestParams::new("exec").with_arguments(args.as_object().unwrap().clone())
}

/// A process's resident memory (KiB): all of it, and its anonymous part
/// (heap and stacks; the rest is the binary's and libraries' pages, which
/// grow as code runs for the first time and are shared and reclaimable).
#[derive(Clone, Copy)]
struct Usage {
    rss: u64,
    anon: u64,
    fds: usize,
    threads: u64,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    Usage {
        rss: kib("VmRSS:"),
        anon: kib("RssAnon:"),
        fds,
        threads: kib("Threads:"),
    }
}

/// The computer's daemon: the init whose socket is under `state`.
fn daemon_pid(state: &Path) -> Option<u32> {
    let computers = std::fs::read_dir(state.join("computers")).ok()?;
    for c in computers.flatten() {
        let meta = std::fs::read_to_string(c.path().join("meta.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&meta).ok()?;
        if let Some(pid) = v["process"]["pid"].as_u64() {
            return Some(pid as u32);
        }
    }
    None
}

fn show(name: &str, before: Usage, after: Usage) {
    let pct = |b: u64, a: u64| (a as f64 - b as f64) * 100.0 / (b.max(1) as f64);
    println!(
        "{name:<40} RSS {:>7} KiB -> {:>7} KiB ({:+.1}%)   anonymous {:>6} -> {:>6} KiB ({:+.1}%)   fds {} -> {}   threads {} -> {}",
        before.rss,
        after.rss,
        pct(before.rss, after.rss),
        before.anon,
        after.anon,
        pct(before.anon, after.anon),
        before.fds,
        after.fds,
        before.threads,
        after.threads
    );
}

/// 50 calls to warm up, then 200 one at a time: their median.
async fn single_calls(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> Result<Duration, Box<dyn std::error::Error>> {
    for _ in 0..50 {
        client.call_tool(exec_true()).await?;
    }
    let mut single = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        client.call_tool(exec_true()).await?;
        single.push(t.elapsed());
    }
    Ok(line("one call at a time", &mut single))
}

/// What a burst gave: each call's time, the failures, the whole time.
struct Burst {
    p50: Duration,
    p99: Duration,
    max: Duration,
    wall: Duration,
    failed: Vec<String>,
}

impl Burst {
    fn show(&self, n: usize, single: Duration) {
        println!(
            "{n} at once: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, all in {:.1} ms ({:.0} calls/s); p99 over the single call {:.1} ms; {} failed",
            ms(self.p50),
            ms(self.p99),
            ms(self.max),
            ms(self.wall),
            n as f64 / self.wall.as_secs_f64(),
            ms(self.p99.saturating_sub(single)),
            self.failed.len()
        );
        if let Some(f) = self.failed.first() {
            println!("  first failure: {f}");
        }
    }
}

/// `n` calls of `call` in flight at once on one session.
async fn burst(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    n: usize,
    call: CallToolRequestParams,
) -> Burst {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let peer = client.peer().clone();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = peer.call_tool(call).await;
            (t.elapsed(), r)
        }));
    }
    let mut took = Vec::with_capacity(n);
    let mut failed = Vec::new();
    for t in tasks {
        match t.await {
            Ok((d, r)) => {
                took.push(d);
                match r {
                    Ok(r) if r.is_error != Some(true) => {}
                    Ok(r) => failed.push(format!("{:?}", r.content.first())),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            Err(e) => failed.push(e.to_string()),
        }
    }
    let wall = started.elapsed();
    Burst {
        p50: pct(&mut took, 0.5),
        p99: pct(&mut took, 0.99),
        max: pct(&mut took, 1.0),
        wall,
        failed,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let concurrent = count_from_env("CMCP_BENCH_CONCURRENT", 1000);
    let sequential = count_from_env("CMCP_BENCH_SEQUENTIAL", 10_000);
    if std::env::var_os(trivial::ENV).is_some() {
        return trivial::serve().await;
    }

    // The floor: the same single calls and the same burst against the
    // trivial server.
    let mut floor_cmd = tokio::process::Command::new(std::env::current_exe()?);
    floor_cmd.env(trivial::ENV, "1");
    let floor = ().serve(TokioChildProcess::new(floor_cmd)?).await?;
    println!(
        "floor: the trivial rmcp server spawning `true` per call on this machine (no computer)"
    );
    let floor_single = single_calls(&floor).await?;
    let floor_burst = burst(&floor, concurrent, exec_true()).await;
    floor_burst.show(concurrent, floor_single);
    floor.cancel().await?;

    let state = tempfile::tempdir()?;
    let transport = TokioChildProcess::new(server_cmd(state.path(), &[]))?;
    let server_pid = transport.id().expect("the server's pid");
    let client = ().serve(transport).await?;
    println!("computer-mcp load bench: exec {{argv: [true]}} on one computer, one MCP session");

    let single_med = single_calls(&client).await?;
    let daemon = daemon_pid(state.path()).expect("the computer's daemon");
    let server_before = usage(server_pid);
    let daemon_before = usage(daemon);

    // A thousand in flight.
    let ours = burst(&client, concurrent, exec_true()).await;
    ours.show(concurrent, single_med);
    println!(
        "  p99 over the single-call median: {:.1} ms (target: at most 50 ms; the floor's: {:.1} ms); all {} in {:.2}x the floor's time",
        ms(ours.p99.saturating_sub(single_med)),
        ms(floor_burst.p99.saturating_sub(floor_single)),
        concurrent,
        ours.wall.as_secs_f64() / floor_burst.wall.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    show(
        "server 1 s after the burst",
        server_before,
        usage(server_pid),
    );
    // The server gives the burst's free heap back within a few seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;
    show(
        "server 7 s after the burst",
        server_before,
        usage(server_pid),
    );
    // Past tokio's 10 s keep-alive, the blocking threads the burst started
    // (stdio's reads and writes) have ended, with their stacks.
    tokio::time::sleep(Duration::from_secs(6)).await;
    show(
        "server 13 s after the burst",
        server_before,
        usage(server_pid),
    );
    show("daemon after the burst", daemon_before, usage(daemon));

    // Ten thousand one after another.
    let server_mid = usage(server_pid);
    let daemon_mid = usage(daemon);
    let mut seq = Vec::with_capacity(sequential);
    for _ in 0..sequential {
        let t = Instant::now();
        let r = client.call_tool(exec_true()).await?;
        seq.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    line(&format!("{sequential} one after another"), &mut seq);
    tokio::time::sleep(Duration::from_secs(1)).await;
    show("server after the sequence", server_mid, usage(server_pid));
    show("daemon after the sequence", daemon_mid, usage(daemon));
    client.cancel().await?;

    // Past the computer's process bound: each `sleep` run holds two pids
    // (its guard and the program) for its half second, so a thousand at
    // once need 2000 against 256; the calls wait their turn in computerd's
    // queue instead of failing.
    let state = tempfile::tempdir()?;
    let bounded = ()
        .serve(TokioChildProcess::new(server_cmd(
            state.path(),
            &["--pids", "256"],
        ))?)
        .await?;
    println!("a computer bounded to 256 pids: exec {{argv: [sleep, 0.5]}}, queued at the bound");
    single_calls(&bounded).await?;
    let sleep = CallToolRequestParams::new("exec").with_arguments(
        serde_json::json!({"argv": ["sleep", "0.5"]})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let queued = burst(&bounded, concurrent, sleep).await;
    queued.show(concurrent, Duration::from_millis(500));
    bounded.cancel().await?;
    Ok(())
}
