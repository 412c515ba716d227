//! Init's reaper: event-driven, so an idle computer never wakes init, and
//! an orphan re-parented to init with no SIGCHLD at the time (one left by
//! something entered from outside, here `nsenter`) is reaped at its end
//! and swept at the next connection.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use super::support::*;

/// Each thread of `pid` and its context switches (voluntary and not): every
/// wake-up of a thread that slept is one.
fn switches(pid: i32) -> HashMap<i32, u64> {
    let mut out = HashMap::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let Ok(tid) = t.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(tid, n);
    }
    out
}

/// The wake-ups of `pid`'s threads over `span` (threads that ended in it
/// are left out: an idle blocking thread ending once is no tick).
fn wakeups_over(pid: i32, span: Duration) -> u64 {
    let before = switches(pid);
    std::thread::sleep(span);
    let after = switches(pid);
    before
        .iter()
        .filter_map(|(tid, n)| Some(after.get(tid)?.saturating_sub(*n)))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_init_never_wakes() {
    let (init, c) = or_skip!(Init::with_client().await);
    // A run, so the pool is filled and everything a run starts has settled.
    let r = init.run_script(&c, "true").await;
    assert_eq!(r.exit_code, Some(0));
    std::thread::sleep(Duration::from_millis(500));
    // A one-second tick would wake a thread at least 3 times in 3.5 s.
    let woke = wakeups_over(init.init_pid(), Duration::from_millis(3500));
    assert!(woke <= 1, "idle init woke {woke} times in 3.5 s");
    // And it still answers.
    assert_eq!(init.run_script(&c, "true").await.exit_code, Some(0));
}

/// Start `script` as `uid` in init's PID namespace from outside the daemon
/// (as `docker exec` would), with init's pid `pid`; its own parent
/// (nsenter) stays outside, so what it leaves goes to init with no SIGCHLD.
fn enter(pid: i32, uid: u32, script: &str) -> bool {
    let (pid, uid) = (pid.to_string(), uid.to_string());
    Command::new("nsenter")
        .args([
            "-t", &pid, "-p", "-S", &uid, "-G", &uid, "--", "sh", "-c", script,
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// Init's children whose command line is `argv` (joined by spaces).
fn children_running(init: i32, argv: &str) -> Vec<i32> {
    children_of(init)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .filter(|s| !s.is_empty())
                    .eq(argv.split(' ').map(str::as_bytes))
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_from_outside_is_reaped_at_its_end_and_swept_at_the_next_connection() {
    let uid = fresh_uid();
    let Some(init) = Init::start_sandboxed(SandboxOptions {
        user: Some(uid),
        ..Default::default()
    }) else {
        return;
    };
    let pid = init.init_pid();
    // One that ends on its own: its end is SIGCHLD to init (the kernel
    // makes it so at the re-parenting), so no zombie is left.
    assert!(enter(pid, uid, "sleep 0.7 & exit 0"), "nsenter failed");
    computer_testkit::wait_until("the orphan is init's", Duration::from_secs(5), || {
        !children_running(pid, "sleep 0.7").is_empty()
    });
    computer_testkit::wait_until("the orphan ends", Duration::from_secs(5), || {
        children_running(pid, "sleep 0.7").is_empty()
    });
    assert_no_zombies_under(pid);

    // One that lives on is init's until the next connection, which sweeps it.
    assert!(enter(pid, uid, "sleep 300 & exit 0"), "nsenter failed");
    computer_testkit::wait_until("the orphan is init's", Duration::from_secs(5), || {
        !children_running(pid, "sleep 300").is_empty()
    });
    let c = init.client().await;
    computer_testkit::wait_until("the orphan is swept", Duration::from_secs(5), || {
        children_running(pid, "sleep 300").is_empty()
    });
    assert_no_zombies_under(pid);
    assert_eq!(init.run_script(&c, "true").await.exit_code, Some(0));
}
