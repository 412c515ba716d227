//! What a create costs as computers pile up (issue 42): create → connect →
//! the first `exec.run` → its result, one at a time, with one computer
//! alive, with many alive, and with many idle threads elsewhere on the
//! host; the same for a warm `exec` on one computer and for a release.
//! Each line prints its ratio to the one-alive figure. A create here is
//! what the server does for one: the caller's computers counted first (the
//! provider's brief listing of one principal's label, which every
//! computer of the bench carries, as it does one caller's under the
//! server), then the create. The many are made 16 at a time, and that
//! filling's create → first result is printed as p50 and p99.
//!
//! The release printed is the provider's (init's orderly shutdown, the
//! cgroup and uid given back), which the server runs off its caller's
//! path: `computer_release` answers once the computer counts against the
//! caller no more (the `tool_call` bench of computer-mcp times that).
//!
//! Run on demand, as root like the tests:
//!
//!     cargo bench -p computer-providers --bench volume
//!
//! `CMCP_BENCH_ALIVE` sets how many computers are kept alive (default 200;
//! the figure is 1000, which wants about 6 GiB), `CMCP_BENCH_CREATES`
//! the creates measured each way (default 20), `CMCP_BENCH_THREADS` the idle
//! host threads (default 5000), `COMPUTERD_BIN` the daemon.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerRef, ComputerSpec, Provider, Release, label};
use support::{count, exec_true, first_result, ms};

use tokio_util::sync::CancellationToken;

mod support;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Medians of create → first result, of the release after it, and of a
/// warm exec on `warm`.
struct Figures {
    /// The brief listing a create counts the caller's computers with.
    count: Duration,
    first: Duration,
    release: Duration,
    exec: Duration,
}

/// Every computer of the bench carries one caller's label, as one caller's
/// computers do under the server.
fn spec() -> ComputerSpec {
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.labels
        .insert(label::PRINCIPAL.into(), "the-bench's-caller".into());
    spec
}

/// What the server does for a create: the caller's computers counted (a
/// brief listing by its label), then create → first result.
async fn counted_first_result(p: &LocalProvider) -> (Duration, ComputerRef) {
    let cancel = CancellationToken::new();
    let spec = spec();
    let t = Instant::now();
    let mine = p.list_brief(&spec.labels, &cancel).await.unwrap();
    std::hint::black_box(mine.len());
    let listed = t.elapsed();
    let (took, computer) = first_result(p, &spec, &cancel).await;
    (listed + took, computer)
}

async fn measure(p: &LocalProvider, n: usize, warm: &ComputerRef) -> Figures {
    let cancel = CancellationToken::new();
    let (mut first, mut release) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (took, computer) = counted_first_result(p).await;
        first.push(took);
        let t = Instant::now();
        p.release(&computer, Release::Delete, &cancel)
            .await
            .unwrap();
        release.push(t.elapsed());
    }
    let conn = p.connect(warm, &cancel).await.unwrap();
    exec_true(&conn).await;
    let mut exec = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        exec_true(&conn).await;
        exec.push(t.elapsed());
    }
    conn.client.close();
    let mut count = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let mine = p.list_brief(&spec().labels, &cancel).await.unwrap();
        count.push(t.elapsed());
        std::hint::black_box(mine.len());
    }
    Figures {
        count: median(count),
        first: median(first),
        release: median(release),
        exec: median(exec),
    }
}

/// Computers made until `alive` are, 16 at a time; each one's create →
/// first result.
async fn fill(p: &Arc<LocalProvider>, held: &mut Vec<ComputerRef>, alive: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    while held.len() < alive {
        let batch = (alive - held.len()).min(16);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..batch {
            let p = p.clone();
            tasks.spawn(async move { counted_first_result(&p).await });
        }
        while let Some(made) = tasks.join_next().await {
            let (t, c) = made.unwrap();
            took.push(t);
            held.push(c);
        }
    }
    took
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn line(name: &str, f: &Figures, base: &Figures) {
    println!(
        "{name:<34} create → first result {:>7.2} ms ({:.2}x; its count {:.2} ms) | release {:>7.2} ms ({:.2}x of its create) | warm exec {:>5.2} ms ({:.2}x)",
        ms(f.first),
        ms(f.first) / ms(base.first),
        ms(f.count),
        ms(f.release),
        ms(f.release) / ms(f.first),
        ms(f.exec),
        ms(f.exec) / ms(base.exec),
    );
}

/// Set in the parker's environment: how many threads it parks.
const PARK: &str = "CMCP_BENCH_PARK_THREADS";

/// The parker: `n` threads that wait until stdin closes.
fn park(n: usize) {
    let stop = Arc::new(std::sync::Barrier::new(n + 1));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    stop.wait();
                })
                .unwrap()
        })
        .collect();
    println!("parked");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    stop.wait();
    for t in threads {
        t.join().unwrap();
    }
}

fn main() {
    if let Some(n) = std::env::var(PARK).ok().and_then(|v| v.parse().ok()) {
        return park(n);
    }
    tokio::runtime::Runtime::new().unwrap().block_on(bench());
}

async fn bench() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: local computers need root here");
        return;
    }
    let (alive, n, threads) = (
        count("CMCP_BENCH_ALIVE", 200).max(2),
        count("CMCP_BENCH_CREATES", 20),
        count("CMCP_BENCH_THREADS", 5000),
    );
    let bin = std::env::var_os("COMPUTERD_BIN")
        .map(std::path::PathBuf::from)
        .or_else(computer_testkit::computerd_bin)
        .expect("build computerd first (cargo build -p computerd)");
    let state = tempfile::tempdir().unwrap();
    let p =
        Arc::new(LocalProvider::new(LocalOptions::new(state.path().to_path_buf(), bin)).unwrap());
    let mut held = Vec::new();
    fill(&p, &mut held, 1).await;
    let warm = held[0].clone();
    // One round to warm the page cache, then the one-alive figures.
    measure(&p, 2, &warm).await;
    let one = measure(&p, n, &warm).await;
    line("1 computer alive", &one, &one);

    let t = Instant::now();
    let mut filling = fill(&p, &mut held, alive).await;
    println!(
        "filling 1 → {alive}, 16 at a time ({:.1} s): create → first result p50 {:.2} ms, p99 {:.2} ms (target p99 at most 250 ms)",
        t.elapsed().as_secs_f64(),
        ms(pct(&mut filling, 0.5)),
        ms(pct(&mut filling, 0.99)),
    );
    let many = measure(&p, n, &warm).await;
    line(&format!("{alive} computers alive"), &many, &one);

    // Idle threads in another process (this bench run again as a parker),
    // as the host's other programs would have them.
    let mut parker = std::process::Command::new(std::env::current_exe().unwrap())
        .env(PARK, threads.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parker.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(
        ready.trim(),
        "parked",
        "the parker did not start its threads"
    );
    let busy = measure(&p, n, &warm).await;
    line(
        &format!("{alive} alive + {threads} idle threads"),
        &busy,
        &one,
    );
    drop(parker.stdin.take());
    parker.wait().unwrap();

    let cancel = CancellationToken::new();
    for c in held {
        p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    println!(
        "targets (issue 42): create at most 1.2x with 1000 alive, 1.1x with 5000 idle threads; release at most its create; exec at most 1.1x"
    );
}
