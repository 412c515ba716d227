//! exec.run latency and throughput through DaemonClient over init's socket,
//! beside the floor: fork+exec+wait of the same program by this process.
//!
//! Run on demand (never part of `cargo test`):
//!
//!     cargo bench -p computerd --bench exec
//!
//! Besides the blocks of each, a run of pairs in turn (a fork+exec+wait and
//! an exec.run) gives the ratio the target is held to: the machine's speed
//! drifts between blocks, not within a pair.
//!
//! `COMPUTERD_BENCH_CALLS` sets the number of calls (default 2000), and
//! `COMPUTERD_BIN` the daemon to measure (default: the bench profile's, which
//! links glibc dynamically; the shipped daemon is the static build). Runs
//! one at a time are measured twice: with init's idle guards (its default),
//! and with none (`COMPUTERD_GUARD_POOL=0`, a guard started per run).

#![allow(clippy::print_stdout)] // a bench prints its figures

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::DaemonClient;
// As the server connects: watched for reading only (computerd::quiet).
use computerd::launch::{InitArgs, Program, Time};
use computerd::protocol::ExecParams;
use computerd::quiet::QuietStream;

const PROGRAM: &str = "/bin/true";

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort_unstable();
    let (med, p99) = (percentile(&v, 0.5), percentile(&v, 0.99));
    println!(
        "{name:<44} median {:>8.3} ms   p99 {:>8.3} ms   ({} calls)",
        ms(med),
        ms(p99),
        v.len()
    );
    (med, p99)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A `computerd init` of its own, in a fresh directory, with `pool` idle
/// guards (None: the daemon's default).
struct Daemon {
    init: std::process::Child,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(bin: &str, pool: Option<usize>) -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let run = dir.path().join("run");
        std::fs::create_dir(&run)?;
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))?;
        let socket = run.join("computerd.sock");
        let deadline = Time::from_now(Duration::from_secs(3600));
        let mut cmd = Program::at(bin).command(InitArgs::new(deadline, &socket));
        cmd.env("COMPUTERD_LOG", "warn").stdin(Stdio::null());
        if let Some(n) = pool {
            cmd.env("COMPUTERD_GUARD_POOL", n.to_string());
        }
        let init = cmd.spawn()?;
        let until = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if Instant::now() > until {
                return Err("computerd init did not come up".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Self {
            init,
            socket,
            _dir: dir,
        })
    }

    fn stop(mut self) -> Result<(), Box<dyn std::error::Error>> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.init.id() as i32),
            nix::sys::signal::SIGTERM,
        )?;
        self.init.wait()?;
        Ok(())
    }
}

fn params() -> ExecParams {
    ExecParams {
        argv: vec![PROGRAM.into()],
        timeout_ms: Some(10_000),
        ..Default::default()
    }
}

/// `calls` exec.runs one at a time, after 50 to warm up: each one's latency.
async fn one_at_a_time(
    socket: &std::path::Path,
    calls: usize,
) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let client = DaemonClient::new(QuietStream::connect(socket).await?);
    let params = params();
    for _ in 0..50 {
        client.call(&params).await?;
    }
    let mut seq = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let r = client.call(&params).await?;
        seq.push(t.elapsed());
        assert_eq!(r.exit_code, Some(0));
    }
    Ok(seq)
}

/// `calls` pairs, each a fork+exec+wait by this process and an exec.run,
/// in turn (which goes first alternates): each pair's two latencies.
/// The floor once: fork+exec+wait of the program, as std does it.
fn floor_once() -> Result<Duration, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let st = Command::new(PROGRAM)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    assert!(st.success());
    Ok(t.elapsed())
}

async fn interleaved(
    socket: &std::path::Path,
    calls: usize,
) -> Result<Vec<(Duration, Duration)>, Box<dyn std::error::Error>> {
    let client = DaemonClient::new(QuietStream::connect(socket).await?);
    let params = params();
    let mut pairs = Vec::with_capacity(calls);
    for i in 0..calls {
        let mut floor = None;
        if i % 2 == 0 {
            floor = Some(floor_once()?);
        }
        let t = Instant::now();
        let r = client.call(&params).await?;
        let exec = t.elapsed();
        assert_eq!(r.exit_code, Some(0));
        let floor = match floor {
            Some(f) => f,
            None => floor_once()?,
        };
        pairs.push((floor, exec));
    }
    Ok(pairs)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes --bench; a filter argument would be for another harness.
    let calls: usize = std::env::var("COMPUTERD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let bin = std::env::var("COMPUTERD_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_computerd").to_string());
    println!("daemon: {bin}");
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average: {}", load.trim_end());
    }

    // The floor: what it costs this process to fork, exec and wait.
    for _ in 0..50 {
        Command::new(PROGRAM).status()?;
    }
    let mut floor = Vec::with_capacity(calls);
    for _ in 0..calls {
        floor.push(floor_once()?);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Without idle guards: every run starts its own (two execs a run).
    let spawned = Daemon::start(&bin, Some(0))?;
    let per_run = rt.block_on(one_at_a_time(&spawned.socket, calls))?;
    spawned.stop()?;

    let daemon = Daemon::start(&bin, None)?;
    let (seq, pairs, conc, conc_elapsed) = rt.block_on(async {
        let seq = one_at_a_time(&daemon.socket, calls).await?;
        let pairs = interleaved(&daemon.socket, calls).await?;
        let client = DaemonClient::new(QuietStream::connect(&daemon.socket).await?);
        let params = params();
        // 64 in flight at once, `calls` in all.
        let started = Instant::now();
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
        let mut tasks = Vec::with_capacity(calls);
        for _ in 0..calls {
            let permit = std::sync::Arc::clone(&sem).acquire_owned().await?;
            let client = client.clone();
            let params = params.clone();
            tasks.push(tokio::spawn(async move {
                let t = Instant::now();
                let r = client.call(&params).await;
                drop(permit);
                r.map(|r| (t.elapsed(), r.exit_code))
            }));
        }
        let mut conc = Vec::with_capacity(calls);
        for t in tasks {
            let (d, code) = t.await??;
            assert_eq!(code, Some(0));
            conc.push(d);
        }
        Ok::<_, Box<dyn std::error::Error>>((seq, pairs, conc, started.elapsed()))
    })?;

    println!("exec.run of {PROGRAM} through DaemonClient over the unix socket");
    let (floor_med, floor_p99) = summary("fork+exec+wait floor (this process)", floor);
    let (seq_med, seq_p99) = summary("exec.run, one at a time", seq);
    let (spawn_med, _) = summary("exec.run, no idle guards (guard per run)", per_run);
    summary("exec.run, 64 in flight (latency each)", conc);
    println!(
        "ratio exec.run / floor (medians of the runs above) {:.2}x",
        seq_med.as_secs_f64() / floor_med.as_secs_f64()
    );
    // The blocks above run one after the other, minutes apart on a slow
    // machine whose speed drifts; pairs taken in turn see the same machine.
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(f, e)| e.as_secs_f64() / f.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| ratios[((ratios.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "ratio exec.run / floor, {} pairs in turn       {:.2}x median (quartiles {:.2}x-{:.2}x)   (target: at most 1.5x)",
        ratios.len(),
        q(0.5),
        q(0.25),
        q(0.75)
    );
    println!(
        "ratio exec.run / floor (p99)                 {:.2}x",
        seq_p99.as_secs_f64() / floor_p99.as_secs_f64()
    );
    println!(
        "ratio with no idle guards / floor (median)   {:.2}x",
        spawn_med.as_secs_f64() / floor_med.as_secs_f64()
    );
    println!(
        "throughput with 64 in flight                 {:.0} calls/s",
        calls as f64 / conc_elapsed.as_secs_f64()
    );
    daemon.stop()
}
