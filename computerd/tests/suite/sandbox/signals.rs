//! The forwarder's signals: TERM ends init in order (even before it
//! listens), KILL of the forwarder or of init leaves nothing inside.

use super::*;

/// A `sleep` started in the computer, and init's pid on the host.
async fn start_sleep(init: &Init) -> i32 {
    let c = init.client().await;
    c.call(&start_argv(&["sleep", "1000"], &init.marker))
        .await
        .unwrap();
    // The start is answered once the exec is under way; the kernel fills in
    // the new program's environment (where the marker is read) a moment later.
    let until = Instant::now() + Duration::from_secs(2);
    while marked_processes(&init.marker).is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(marked_processes(&init.marker).len(), 1);
    init.init_pid()
}

fn wait_gone(pid: i32, within: Duration) {
    let until = Instant::now() + within;
    while Path::new(&format!("/proc/{pid}")).exists() {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.starts_with(" Z")));
        if zombie {
            return;
        }
        assert!(
            Instant::now() < until,
            "pid {pid} still runs after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_the_sandbox_ends_init_in_order_and_exits_0() {
    let init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let init_pid = start_sleep(&init).await;
    let marker = init.marker.clone();
    let status = init.stop();
    assert_eq!(status.code(), Some(0));
    wait_gone(init_pid, Duration::from_secs(3));
    assert_no_leftovers(&marker);
}

#[test]
fn sigterm_before_init_listens_is_not_lost() {
    if !need_root() {
        return;
    }
    let (_dir, run) = socket_dir();
    let uid = fresh_uid();
    let mut init = InitArgs::new(
        Time::from_now(Duration::from_secs(600)),
        "/run/computerd/s.sock",
    );
    init.user = Some(UserSpec { uid, gid: uid });
    let mut child = Program::computerd(COMPUTERD)
        .command(SandboxArgs::new(&run, init))
        .env("COMPUTERD_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // As soon as the forwarder has forked (it takes TERM over before that;
    // a TERM earlier ends it before anything is made): the child is still
    // making the root, or init has not yet installed its handlers, and a
    // signal sent to it then would be dropped.
    let until = Instant::now() + Duration::from_secs(5);
    while children_of(child.id() as i32).is_empty() {
        if Instant::now() >= until {
            let _ = child.kill();
            panic!("the sandbox never forked");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let listening = run.join("s.sock").exists();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            panic!("the sandbox did not end on an early TERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    assert!(!listening, "the TERM came too late to test anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_forwarder_kills_everything_inside() {
    let mut init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let init_pid = start_sleep(&init).await;
    assert_ne!(init_pid, init.child.id() as i32);
    init.child.kill().unwrap();
    init.child.wait().unwrap();
    wait_gone(init_pid, Duration::from_secs(3));
    assert_no_leftovers(&init.marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_init_makes_the_sandbox_exit_137_with_nothing_left() {
    let mut init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let init_pid = start_sleep(&init).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(init_pid),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    let status = init.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(137));
    assert_no_leftovers(&init.marker);
}
