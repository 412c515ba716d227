//! exec.run latency and throughput through DaemonClient over init's socket,
//! beside the floor: fork+exec+wait of the same program by this process.
//!
//! Run on demand (never part of `cargo test`):
//!
//!     cargo bench -p computerd --bench exec
//!
//! `COMPUTERD_BENCH_CALLS` sets the number of calls (default 2000), and
//! `COMPUTERD_BIN` the daemon to measure (default: the bench profile's, which
//! links glibc dynamically; the shipped daemon is the static build).

#![allow(clippy::print_stdout)] // a bench prints its figures

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::DaemonClient;
use computerd::launch::{InitArgs, Program, Time};
use computerd::protocol::ExecParams;

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes --bench; a filter argument would be for another harness.
    let calls: usize = std::env::var("COMPUTERD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir()?;
    let run = dir.path().join("run");
    std::fs::create_dir(&run)?;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))?;
    let socket = run.join("computerd.sock");
    let deadline = Time::from_now(Duration::from_secs(3600));
    let bin = std::env::var("COMPUTERD_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_computerd").to_string());
    println!("daemon: {bin}");
    let mut init = Program::at(&bin)
        .command(InitArgs::new(deadline, &socket))
        .env("COMPUTERD_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()?;
    let until = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if Instant::now() > until {
            return Err("computerd init did not come up".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }

    // The floor: what it costs this process to fork, exec and wait.
    for _ in 0..50 {
        Command::new(PROGRAM).status()?;
    }
    let mut floor = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let st = Command::new(PROGRAM)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        floor.push(t.elapsed());
        assert!(st.success());
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (seq, conc, conc_elapsed) = rt.block_on(async {
        let client = DaemonClient::new(tokio::net::UnixStream::connect(&socket).await?);
        let params = ExecParams {
            argv: vec![PROGRAM.into()],
            timeout_ms: Some(10_000),
            ..Default::default()
        };
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
        Ok::<_, Box<dyn std::error::Error>>((seq, conc, started.elapsed()))
    })?;

    println!("exec.run of {PROGRAM} through DaemonClient over the unix socket");
    let (floor_med, _) = summary("fork+exec+wait floor (this process)", floor);
    let (seq_med, _) = summary("exec.run, one at a time", seq);
    summary("exec.run, 64 in flight (latency each)", conc);
    println!(
        "ratio exec.run / floor (median)              {:.2}x   (target: at most 3x)",
        seq_med.as_secs_f64() / floor_med.as_secs_f64()
    );
    println!(
        "throughput with 64 in flight                 {:.0} calls/s",
        calls as f64 / conc_elapsed.as_secs_f64()
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(init.id() as i32),
        nix::sys::signal::SIGTERM,
    )?;
    init.wait()?;
    Ok(())
}
