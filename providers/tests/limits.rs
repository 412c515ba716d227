// A binary of its own: it moves its whole process into a cgroup it makes (need_own_bound).
//! A local computer cannot hurt its host: its processes, memory and disk
//! are bounded, it sees only the host's OS, it has a uid of its own, and
//! nothing of it survives its release. Real computers (root, as CI runs).
//!
//! Every hostile program here runs inside a bound of the test's own: the
//! test binary first moves itself into a cgroup it makes (pids and memory),
//! under which every computer's own cgroup nests, so a failure of the code
//! under test is still held.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use computer_providers::local::cgroup::{self, Cgroups};
use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::share::ShareArg;
use computer_providers::{ComputerRef, ComputerSpec, Connection, Provider, Release};
use computer_testkit::{computerd_bin, marked_processes, marker, need, or_skip, wait_until};
use computerd::client::ComputerExt;
use computerd::protocol::{ExecParams, ExecResult, ProcessStartParams};
use tokio_util::sync::CancellationToken;

/// The test's own bound around this whole test binary, made by hand
/// (testkit), independent of the cgroup code under test: every computer's
/// cgroup nests under it.
fn bound_this_binary() -> bool {
    computer_testkit::need_own_bound()
}

/// A local provider over a fresh state directory (kept alive beside it),
/// where root, the test's own bound and the daemon are at hand.
fn provider() -> Option<(tempfile::TempDir, LocalProvider)> {
    if !need(
        "root",
        nix::unistd::geteuid().is_root(),
        "local computers need root here",
    ) || !bound_this_binary()
    {
        return None;
    }
    let bin = computerd_bin();
    if !need("root", bin.is_some(), "the computerd binary is not built") {
        return None;
    }
    let state = tempfile::tempdir().unwrap();
    let opts = LocalOptions {
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.path().to_path_buf(), bin.unwrap())
    };
    Some((state, LocalProvider::new(opts).unwrap()))
}

struct Made {
    computer: ComputerRef,
    conn: Connection,
}

async fn make(p: &LocalProvider, spec: &ComputerSpec) -> Made {
    let cancel = CancellationToken::new();
    let created = p.create(spec, &cancel).await.unwrap();
    let conn = p.connect(&created.computer, &cancel).await.unwrap();
    Made {
        computer: created.computer,
        conn,
    }
}

async fn release(p: &LocalProvider, m: Made) {
    m.conn.client.close();
    p.release(&m.computer, Release::Delete, &CancellationToken::new())
        .await
        .unwrap();
}

async fn sh(m: &Made, script: &str, env: &BTreeMap<String, String>, timeout_ms: u64) -> ExecResult {
    m.conn
        .client
        .call_typed(&ExecParams {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: Some(env.clone()),
            timeout_ms: Some(timeout_ms),
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The computer still answers a call.
async fn still_answers(m: &Made) {
    let r = sh(m, "echo alive", &BTreeMap::new(), 5000).await;
    assert_eq!(out(&r), "alive\n");
}

fn out(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout.0).into_owned()
}

fn err(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stderr.0).into_owned()
}

fn spec_with(f: impl FnOnce(&mut ComputerSpec)) -> ComputerSpec {
    let mut s = ComputerSpec::sandbox(600_000);
    f(&mut s);
    s
}

/// The computer's cgroup, as the provider made it.
fn cgroup_of(state: &std::path::Path, id: &str) -> Option<cgroup::ComputerCgroup> {
    Cgroups::detect(&cgroup::group_for(state))
        .ok()?
        .open(id)
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stays_under_its_pids_limit_and_leaves_nothing() {
    let (state, p) = or_skip!(provider());
    let m = make(&p, &spec_with(|s| s.sizes.pids = Some(64))).await;
    let cg = cgroup_of(state.path(), &m.computer.id).expect("the computer's cgroup");
    assert_eq!(cg.read_back().unwrap().pids, 64);

    // Beside the bomb: the most the cgroup held, and whether this host
    // could still fork.
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let host_forks = Arc::new(AtomicU64::new(0));
    let host_fails = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (stop, most, ok, bad) = (
            stop.clone(),
            most.clone(),
            host_forks.clone(),
            host_fails.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(u) = cg.usage() {
                    most.fetch_max(u.pids, Ordering::Relaxed);
                }
                match std::process::Command::new("/bin/true").status() {
                    Ok(s) if s.success() => ok.fetch_add(1, Ordering::Relaxed),
                    _ => bad.fetch_add(1, Ordering::Relaxed),
                };
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mark = marker("LIMITS");
    let env = computer_testkit::marked(&mark);
    let start = Instant::now();
    let r = m
        .conn
        .client
        .call_typed(&ExecParams {
            argv: vec![
                "bash".into(),
                "-c".into(),
                "f(){ f | f & }; f; sleep 30".into(),
            ],
            env: Some(env),
            timeout_ms: Some(5000),
            ..Default::default()
        })
        .await
        .unwrap();
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    // The timeout sends TERM at 5 s and KILL 2 s later; a fork bomb held at
    // its pids limit may need the KILL, so the call ends by about 7 s.
    assert!(
        took < Duration::from_secs(9),
        "the call took {took:?} (timeout 5 s, then TERM and KILL 2 s later)"
    );
    assert!(
        most.load(Ordering::Relaxed) <= 64,
        "the cgroup held {} pids",
        most.load(Ordering::Relaxed)
    );
    assert!(
        most.load(Ordering::Relaxed) > 8,
        "the bomb never grew: {r:?}"
    );
    assert!(host_forks.load(Ordering::Relaxed) > 0);
    assert_eq!(
        host_fails.load(Ordering::Relaxed),
        0,
        "this host could not fork during the bomb"
    );
    wait_until(
        "the bomb's processes to end",
        Duration::from_secs(5),
        || marked_processes(&mark).is_empty(),
    );
    still_answers(&m).await;
    release(&p, m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_past_memory_is_killed_in_the_computer_which_answers_next() {
    let (_state, p) = or_skip!(provider());
    let m = make(&p, &spec_with(|s| s.sizes.memory_mb = Some(128))).await;
    let r = sh(
        &m,
        "exec python3 -c 'b = bytearray(256 * 1024 * 1024); print(len(b))'",
        &BTreeMap::new(),
        60_000,
    )
    .await;
    assert_eq!(r.exit_code, None, "the allocation was not stopped: {r:?}");
    assert_eq!(r.signal.as_deref(), Some("KILL"), "{r:?}");
    assert!(!r.timed_out);
    still_answers(&m).await;
    release(&p, m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_work_fails_with_enospc_and_the_hosts_disk_does_not_move() {
    let (state, p) = or_skip!(provider());
    // memoryMb 64: /work holds 32 MiB.
    let m = make(&p, &spec_with(|s| s.sizes.memory_mb = Some(64))).await;
    let free = || {
        let s = nix::sys::statvfs::statvfs(state.path()).unwrap();
        s.blocks_available() as u64 * s.fragment_size() as u64
    };
    let before = free();
    let r = sh(
        &m,
        "dd if=/dev/zero of=/work/fill bs=1M count=64 2>&1; df -m /work | tail -1",
        &BTreeMap::new(),
        60_000,
    )
    .await;
    let text = out(&r);
    assert!(text.contains("No space left on device"), "{text}");
    let after = free();
    assert!(
        before.abs_diff(after) < 16 << 20,
        "the host's free space moved by {} bytes",
        before.abs_diff(after)
    );
    release(&p, m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_release_nothing_of_the_computer_remains_even_a_forking_program() {
    let (state, p) = or_skip!(provider());
    let m = make(&p, &spec_with(|s| s.sizes.pids = Some(64))).await;
    let mark = marker("LIMITS");
    // A program that forks for ever (perl does not give up when a fork
    // fails, as a shell does), started to outlive the call.
    m.conn
        .client
        .call_typed(&ProcessStartParams {
            argv: vec!["perl".into(), "-e".into(), "while (1) { fork }".into()],
            env: Some(computer_testkit::marked(&mark)),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_until("the forking to start", Duration::from_secs(5), || {
        marked_processes(&mark).len() > 8
    });
    let id = m.computer.id.clone();
    release(&p, m).await;
    assert_eq!(marked_processes(&mark), Vec::<i32>::new());
    assert!(
        cgroup_of(state.path(), &id).is_none(),
        "its cgroup is still there"
    );
    assert!(!state.path().join("computers").join(&id).exists());
}

/// What `/` of a computer may hold: the host's OS directories it has, and
/// what the sandbox makes.
fn allowed_root() -> BTreeSet<String> {
    let mut want: BTreeSet<String> = ["dev", "proc", "run", "sys", "tmp", "work"]
        .into_iter()
        .map(String::from)
        .collect();
    for d in [
        "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
    ] {
        if std::path::Path::new("/").join(d).symlink_metadata().is_ok() {
            want.insert(d.into());
        }
    }
    want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_sees_only_the_hosts_os_and_two_have_different_uids() {
    let (state, p) = or_skip!(provider());
    let spec = ComputerSpec::sandbox(600_000);
    let (a, b) = tokio::join!(make(&p, &spec), make(&p, &spec));
    let mut uids = Vec::new();
    for m in [&a, &b] {
        let r = sh(
            m,
            "ls -A /; echo --; ls /sys/class/net; echo --; echo $HOME; pwd; id -u",
            &BTreeMap::new(),
            10_000,
        )
        .await;
        let text = out(&r);
        let parts: Vec<&str> = text.split("--\n").collect();
        let root: BTreeSet<String> = parts[0].lines().map(String::from).collect();
        let mut want = allowed_root();
        // /opt appears only when the daemon is shown at /opt/computerd.
        if root.contains("opt") {
            want.insert("opt".into());
        }
        assert_eq!(root, want, "{text}");
        let host: BTreeSet<String> = std::fs::read_dir("/")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for only_host in host.difference(&want) {
            assert!(
                !root.contains(only_host),
                "the host's /{only_host} is visible"
            );
        }
        assert_eq!(parts[1], "lo\n", "{text}");
        let rest: Vec<&str> = parts[2].lines().collect();
        assert_eq!(rest[..2], ["/work", "/work"], "{text}");
        uids.push(rest[2].parse::<u32>().unwrap());
    }
    assert_ne!(uids[0], uids[1]);
    for uid in &uids {
        assert!(
            *uid >= 0x7000_0000,
            "uid {uid} is not from the computers' range"
        );
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
        assert!(
            !passwd
                .lines()
                .any(|l| l.split(':').nth(2) == Some(&uid.to_string()))
        );
    }
    release(&p, a).await;
    release(&p, b).await;
    assert!(std::fs::read_dir(state.path().join("uids")).map_or(true, |mut d| d.next().is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_bind_read_write_and_read_only_and_a_bad_one_makes_nothing() {
    let (state, p) = or_skip!(provider());
    let rw = tempfile::tempdir().unwrap();
    let ro = tempfile::tempdir().unwrap();
    // The computer's uid is its own: let anyone write the read-write share.
    std::fs::set_permissions(rw.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(ro.path().join("given"), "from the host\n").unwrap();
    let name = |d: &tempfile::TempDir| d.path().file_name().unwrap().to_string_lossy().into_owned();
    let spec = spec_with(|s| {
        s.shares = vec![
            ShareArg {
                source: rw.path().canonicalize().unwrap(),
                read_only: false,
            },
            ShareArg {
                source: ro.path().canonicalize().unwrap(),
                read_only: true,
            },
        ]
    });
    let m = make(&p, &spec).await;
    let script = format!(
        "echo made > /workspace/{a}/x && echo rw-ok; cat /workspace/{b}/given; touch /workspace/{b}/y 2>&1",
        a = name(&rw),
        b = name(&ro)
    );
    let r = sh(&m, &script, &BTreeMap::new(), 10_000).await;
    let text = out(&r);
    assert!(text.contains("rw-ok"), "{text}{}", err(&r));
    assert!(text.contains("from the host"), "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert_eq!(
        std::fs::read_to_string(rw.path().join("x")).unwrap(),
        "made\n"
    );
    assert!(!ro.path().join("y").exists());
    release(&p, m).await;

    // A bad share is refused before anything is made.
    let link = rw.path().join("link");
    std::os::unix::fs::symlink(ro.path(), &link).unwrap();
    let bad = spec_with(|s| {
        s.shares = vec![ShareArg {
            source: link.clone(),
            read_only: true,
        }]
    });
    let e = p.create(&bad, &CancellationToken::new()).await.unwrap_err();
    assert_eq!(e.field.as_deref(), Some("share"), "{e:?}");
    assert!(e.message.contains("is a symlink"), "{}", e.message);
    let left = |d: &str| std::fs::read_dir(state.path().join(d)).map_or(0, |d| d.count());
    assert_eq!(left("computers"), 0);
    assert_eq!(left("uids"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cgroup_processes_are_still_bounded_and_sizes_refused_in_words() {
    let (state, _) = or_skip!(provider());
    // As on a host with no cgroup the server may use.
    let p = LocalProvider::new(LocalOptions {
        cgroups: false,
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.path().to_path_buf(), computerd_bin().unwrap())
    })
    .unwrap();
    let e = p
        .check(&spec_with(|s| s.sizes.memory_mb = Some(512)))
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("memoryMb"));
    assert!(e.message.contains("cannot bound"), "{}", e.message);
    let cancel = CancellationToken::new();
    let created = p
        .create(&spec_with(|s| s.sizes.pids = Some(32)), &cancel)
        .await
        .unwrap();
    let note = created.notes.join("\n");
    assert!(
        note.contains("at most 32 processes") && note.contains("NOT bounded"),
        "{note}"
    );
    let conn = p.connect(&created.computer, &cancel).await.unwrap();
    let m = Made {
        computer: created.computer,
        conn,
    };
    let mark = marker("LIMITS");
    let params = ExecParams {
        argv: vec![
            "bash".into(),
            "-c".into(),
            "f(){ f | f & }; f; sleep 30".into(),
        ],
        env: Some(computer_testkit::marked(&mark)),
        timeout_ms: Some(4000),
        ..Default::default()
    };
    let pending = m.conn.client.call_typed(&params);
    let most = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (most, stop, mark) = (most.clone(), stop.clone(), mark.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                most.fetch_max(marked_processes(&mark).len() as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let r = pending.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(r.timed_out, "{r:?}");
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= 32,
        "{most} processes ran at once under --max-procs 32"
    );
    assert!(most > 4, "the bomb never grew ({most})");
    wait_until(
        "the bomb's processes to end",
        Duration::from_secs(5),
        || marked_processes(&mark).is_empty(),
    );
    release(&p, m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_computer_comes_from_a_spare_with_its_own_limits_and_none_outlives_the_provider() {
    let (state, p) = or_skip!(provider());
    let a = make(&p, &ComputerSpec::sandbox(600_000)).await;
    // The spare is made after the first creation, in the background.
    let spares = state.path().join("spares");
    let ready = || std::fs::read_dir(&spares).map_or(0, |d| d.count()) == 1;
    wait_until("a spare sandbox", Duration::from_secs(10), ready);
    let b = make(&p, &spec_with(|s| s.sizes.pids = Some(48))).await;
    // b is the spare, held to b's own limits, and its log is b's.
    let cg = cgroup_of(state.path(), &b.computer.id).expect("b's cgroup");
    assert_eq!(cg.read_back().unwrap().pids, 48);
    assert!(
        state
            .path()
            .join("computers")
            .join(&b.computer.id)
            .join("daemon.log")
            .exists()
    );
    let r = sh(&b, "echo from-the-spare", &BTreeMap::new(), 5000).await;
    assert_eq!(out(&r), "from-the-spare\n");
    release(&p, a).await;
    release(&p, b).await;
    wait_until("the next spare", Duration::from_secs(10), ready);
    drop(p);
    let spare_procs = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|c| {
                        let c = String::from_utf8_lossy(&c).into_owned();
                        c.contains("spare") && c.contains(&cgroup::group_for(state.path()))
                    })
                    .unwrap_or(false)
            })
            .count()
    };
    wait_until(
        "the spare to end with its provider",
        Duration::from_secs(5),
        || spare_procs() == 0,
    );
    assert_eq!(std::fs::read_dir(&spares).unwrap().count(), 0);
}
