//! The idle guards init keeps for its runs: they keep every promise of a
//! guard started for the run, refill after a burst, never outnumber their
//! bound, and none outlives init.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use computerd::client::DaemonClient;
use computerd::daemon::guard::TEMPLATE_NAME;
use computerd::daemon::runner::pool::{DEFAULT_SIZE, MAX_SIZE, SIZE_VAR};
use computerd::protocol::{ExecParams, Orphans, ProcessStartParams, Stream};

use super::support::*;

/// [`exec_sh`] from `/`.
fn sh_at_root(script: &str, marker: &str) -> ExecParams {
    ExecParams {
        cwd: Some("/".into()),
        ..exec_sh(script, marker)
    }
}

/// The live guards that are children of `init`, idle or with a run:
/// processes whose parent is init and whose command line is
/// `computerd guard <fd>`, but for the template idle guards are forked from.
fn guards_of(init: i32) -> BTreeSet<i32> {
    let mut all = every_guard_of(init);
    all.retain(|p| !is_template(*p));
    all
}

fn is_template(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end() == TEMPLATE_NAME)
}

fn every_guard_of(init: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for pid in computer_testkit::pids() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let (state, ppid) = (f.next(), f.next().and_then(|p| p.parse::<i32>().ok()));
        if ppid != Some(init) || state == Some("Z") {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.starts_with(b"computerd\0guard\0") {
            out.insert(pid);
        }
    }
    out
}

/// Wait (up to 10 s) until init has exactly `n` guards, all idle, and
/// (with a pool) the template they are forked from, and return them. The
/// template is told by its name, which it takes at its first fork: until
/// then it looks like a guard.
fn idle_guards(init: i32, n: usize) -> BTreeSet<i32> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let g = guards_of(init);
        let every = every_guard_of(init);
        if g.len() == n && every.len() == n + usize::from(n > 0) {
            return g;
        }
        assert!(
            Instant::now() < until,
            "init {init} has guards {g:?}, not {n} idle ones"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z'))
}

fn wait_all_gone(pids: &BTreeSet<i32>, within: Duration) {
    let until = Instant::now() + within;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "guards {left:?} are still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn with_pool(size: usize) -> InitOptions {
    InitOptions {
        env: vec![(SIZE_VAR.into(), size.to_string())],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_guard_ends_the_setsid_and_double_fork_escapees_of_its_run() {
    let init = or_skip!(Init::start());
    let idle = idle_guards(init.init_pid(), DEFAULT_SIZE);
    let c = init.client().await;
    let script = "echo $PPID; \
                  setsid sh -c 'sleep 300 & sleep 300' >/dev/null 2>&1 & \
                  (sh -c 'sleep 300 &' &) ; \
                  nohup sleep 300 >/dev/null 2>&1 & \
                  sleep 0.3; echo started";
    let r = c.call(&sh_at_root(script, &init.marker)).await.unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    let (guard, rest) = out.split_once('\n').unwrap();
    let guard: i32 = guard.parse().unwrap();
    assert!(
        idle.contains(&guard),
        "the run's guard {guard} was not one of the idle {idle:?}"
    );
    assert_eq!((rest, r.exit_code), ("started\n", Some(0)));
    // Everything the run started is gone by the time the reply is read.
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_burst_of_fifty_runs_the_pool_is_back_to_its_size_and_no_guard_is_left() {
    let init = or_skip!(Init::start());
    let pid = init.init_pid();
    let before = idle_guards(pid, DEFAULT_SIZE);
    let c = init.client().await;
    let p = sh_at_root("echo $PPID", &init.marker);
    let guards = burst(&c, &p, 50).await;
    // Runs at once had guards of their own (a guard given back during the
    // burst may have taken another), those idle before it among them.
    assert!(guards.len() > DEFAULT_SIZE, "{guards:?}");
    assert!(before.is_subset(&guards), "{before:?} not in {guards:?}");
    // The pool is full again (with guards given back by their runs), and
    // every other guard of the burst is gone.
    let after = idle_guards(pid, DEFAULT_SIZE);
    let gone: BTreeSet<i32> = guards.difference(&after).copied().collect();
    wait_all_gone(&gone, Duration::from_secs(5));
    // With the template they are forked from, no more guard processes.
    let every = every_guard_of(pid);
    let names: Vec<String> = every
        .iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default())
        .collect();
    assert_eq!(every.len(), DEFAULT_SIZE + 1, "{every:?} {names:?}");
    assert_eq!(
        every.iter().filter(|&&p| is_template(p)).count(),
        1,
        "{every:?}"
    );
    // A run after the burst takes one of the refilled guards.
    let r = c.call(&p).await.unwrap();
    let guard = guard_of(&r.stdout.0);
    assert!(after.contains(&guard), "{guard} not in {after:?}");
    idle_guards(pid, DEFAULT_SIZE);
    assert_no_zombies_under(pid);
}

/// A burst past the pool's guards costs no exec of computerd: each run
/// past them takes a guard given back by an earlier run of the burst, or
/// one forked from the template. Shown with init's binary deleted once the
/// pool is full: a guard started by exec could not start at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_pool_forks_or_reuses_its_guards_and_execs_none() {
    let copy = tempfile::tempdir().unwrap();
    let exe = copy.path().join("computerd");
    std::fs::copy(COMPUTERD, &exe).unwrap();
    let init = or_skip!(Init::start_with(InitOptions {
        exe: Some(exe.clone()),
        ..Default::default()
    }));
    let pid = init.init_pid();
    idle_guards(pid, DEFAULT_SIZE);
    std::fs::remove_file(&exe).unwrap();
    let c = init.client().await;
    // Each run holds its guard a while, so the burst is many at once.
    let p = sh_at_root("sleep 0.1; echo $PPID", &init.marker);
    let guards = burst(&c, &p, 40).await;
    assert!(guards.len() > DEFAULT_SIZE, "{guards:?}");
    // After it the pool is back to its size, with the template.
    idle_guards(pid, DEFAULT_SIZE);
    assert_no_zombies_under(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_run_sees_the_same_user_cwd_environment_and_confinement_as_a_started_one() {
    let probe = "echo $PPID; id -u; id -G; pwd; umask; env | sort; \
                 grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; \
                 cat /proc/self/cgroup; grep -E '^(Max processes|Max open files)' /proc/self/limits; \
                 for n in /proc/self/ns/*; do readlink $n; done";
    let mut seen = Vec::new();
    for size in [MAX_SIZE, 0] {
        let init = or_skip!(Init::start_with(with_pool(size)));
        let idle = idle_guards(init.init_pid(), size);
        let c = init.client().await;
        let mut p = sh_at_root(probe, &init.marker);
        p.cwd = Some("/tmp".into());
        p.env
            .get_or_insert_default()
            .insert("ASKED".into(), "yes".into());
        let r = c.call(&p).await.unwrap();
        assert_eq!(
            r.exit_code,
            Some(0),
            "{}",
            String::from_utf8_lossy(&r.stderr.0)
        );
        let out = String::from_utf8(r.stdout.0).unwrap();
        let (guard, rest) = out.split_once('\n').unwrap();
        let guard: i32 = guard.parse().unwrap();
        // With a pool the run went to an idle guard; without, to its own.
        assert_eq!(
            idle.contains(&guard),
            size > 0,
            "guard {guard}, idle {idle:?}"
        );
        // Each init has a HOME and a test marker of its own; all else must match.
        let home = init.dir.path().join("home");
        seen.push(
            rest.replace(home.to_str().unwrap(), "<home>")
                .replace(&init.marker, "<marker>"),
        );
    }
    assert!(seen[0].contains("\nASKED=yes\n"), "{}", seen[0]);
    assert!(seen[0].contains("\n/tmp\n"), "{}", seen[0]);
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_guard_killed_in_the_pool_is_passed_over() {
    let init = or_skip!(Init::start());
    let idle = idle_guards(init.init_pid(), DEFAULT_SIZE);
    let first = *idle.iter().next().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first), nix::sys::signal::SIGKILL).unwrap();
    wait_all_gone(&[first].into(), Duration::from_secs(5));
    let c = init.client().await;
    let r = c
        .call(&sh_at_root("echo $PPID", &init.marker))
        .await
        .unwrap();
    assert_eq!(r.exit_code, Some(0));
    let guard = guard_of(&r.stdout.0);
    assert_ne!(guard, first);
    idle_guards(init.init_pid(), DEFAULT_SIZE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_idle_guard_behind() {
    let init = or_skip!(Init::start_with(with_pool(MAX_SIZE)));
    idle_guards(init.init_pid(), MAX_SIZE);
    let idle = every_guard_of(init.init_pid());
    assert_eq!(idle.len(), MAX_SIZE + 1, "{idle:?}");
    let status = init.stop();
    assert_eq!(status.code(), Some(0));
    // Init reaped them before it exited: not one is left, not even a zombie.
    let left: Vec<i32> = idle
        .iter()
        .copied()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    assert_eq!(left, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_guards_exit_when_init_is_killed() {
    let mut init = or_skip!(Init::start_with(with_pool(MAX_SIZE)));
    idle_guards(init.init_pid(), MAX_SIZE);
    let idle = every_guard_of(init.init_pid());
    assert_eq!(idle.len(), MAX_SIZE + 1, "{idle:?}");
    init.child.kill().unwrap();
    init.child.wait().unwrap();
    // Their control sockets closed with init: each exits on its own.
    wait_all_gone(&idle, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_over_its_bound_is_refused_naming_the_variable_and_the_most() {
    if !need_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let socket = run.join("computerd.sock");
    let out = Program::computerd(COMPUTERD)
        .command(InitArgs::new(
            Time::from_now(Duration::from_secs(60)),
            &socket,
        ))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env(SIZE_VAR, "9")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().last(),
        Some("computerd init: COMPUTERD_GUARD_POOL is 9; the most is 4 idle guards")
    );
    assert!(!socket.exists());
}

/// The guard pid a run of `echo $PPID; ...` printed first.
fn guard_of(out: &[u8]) -> i32 {
    String::from_utf8_lossy(out)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no guard pid in {:?}", String::from_utf8_lossy(out)))
}

/// `n` runs of `p` (an `echo $PPID` first) at once, each of which must
/// succeed: the guards they ran under.
async fn burst(c: &DaemonClient, p: &ExecParams, n: usize) -> BTreeSet<i32> {
    let calls = (0..n).map(|_| {
        let c = c.clone();
        let p = p.clone();
        tokio::spawn(async move { c.call(&p).await })
    });
    let mut guards = BTreeSet::new();
    for call in calls.collect::<Vec<_>>() {
        let r = call.await.unwrap().expect("a run of the burst");
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        guards.insert(guard_of(&r.stdout.0));
    }
    guards
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_one_after_another_reuse_the_idle_guards_and_no_guard_is_started() {
    let init = or_skip!(Init::start());
    let pid = init.init_pid();
    let idle = idle_guards(pid, DEFAULT_SIZE);
    let every = every_guard_of(pid);
    let c = init.client().await;
    let mut used = BTreeSet::new();
    for _ in 0..20 {
        let r = c
            .call(&sh_at_root("echo $PPID", &init.marker))
            .await
            .unwrap();
        assert_eq!(r.exit_code, Some(0));
        used.insert(guard_of(&r.stdout.0));
    }
    // Twenty runs went to the guards that were idle before them: none was
    // started, forked or ended for them.
    assert!(used.is_subset(&idle), "{used:?} not in {idle:?}");
    idle_guards(pid, DEFAULT_SIZE);
    assert_eq!(every_guard_of(pid), every);
    assert_no_zombies_under(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_guard_gives_the_next_run_nothing_of_the_one_before() {
    let init = or_skip!(Init::start_with(with_pool(1)));
    let idle = idle_guards(init.init_pid(), 1);
    let c = init.client().await;
    // The first run asks for a cwd and a variable, and leaves an escapee.
    let mut first = sh_at_root(
        "echo $PPID; setsid sleep 300 >/dev/null 2>&1 & echo done",
        &init.marker,
    );
    first.cwd = Some("/tmp".into());
    first
        .env
        .get_or_insert_default()
        .insert("FIRST_ONLY".into(), "yes".into());
    let r = c.call(&first).await.unwrap();
    let guard = guard_of(&r.stdout.0);
    assert!(idle.contains(&guard), "{guard} not in {idle:?}");
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
    // The next run, on the same guard, starts from the defaults.
    let mut next = sh_at_root("echo $PPID; pwd; env", &init.marker);
    next.cwd = None;
    let r = c.call(&next).await.unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    assert_eq!(guard_of(out.as_bytes()), guard, "{out}");
    let home = init.dir.path().join("home");
    assert_eq!(out.lines().nth(1), home.to_str(), "{out}");
    assert!(!out.contains("FIRST_ONLY"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_run_timed_out_is_not_reused() {
    let init = or_skip!(Init::start_with(with_pool(1)));
    let pid = init.init_pid();
    let idle = idle_guards(pid, 1);
    let c = init.client().await;
    let mut p = sh_at_root("echo $PPID; exec sleep 30", &init.marker);
    p.timeout_ms = Some(300);
    let r = c.call(&p).await.unwrap();
    assert!(r.timed_out);
    let guard = guard_of(&r.stdout.0);
    assert!(idle.contains(&guard), "{guard} not in {idle:?}");
    // It ended, and another took its place.
    wait_all_gone(&[guard].into(), Duration::from_secs(5));
    let after = idle_guards(pid, 1);
    assert!(!after.contains(&guard));
    let r = c
        .call(&sh_at_root("echo $PPID", &init.marker))
        .await
        .unwrap();
    assert!(after.contains(&guard_of(&r.stdout.0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_cannot_reach_into_its_guard() {
    if !need_root() {
        return;
    }
    // As an unprivileged user, a program may signal its guard (same user)
    // but not read its memory, environment or descriptors.
    let init = or_skip!(Init::as_fresh_user());
    let c = init.client().await;
    let probe = "echo $PPID; \
                 ls /proc/$PPID/fd >/dev/null 2>&1 && echo fd-read; \
                 cat /proc/$PPID/environ >/dev/null 2>&1 && echo environ-read; \
                 head -c1 /proc/$PPID/mem >/dev/null 2>&1 && echo mem-read; \
                 ls /proc/self/fd >/dev/null 2>&1 && echo own-fd-read; \
                 id -u";
    let r = c.call(&sh_at_root(probe, &init.marker)).await.unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0], "own-fd-read", "{out}");
    assert_ne!(lines[1], "0", "{out}");
}

/// A process.start whose program ends clean gives its guard back to the
/// pool, as an exec.run does; one with kept orphans does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_process_that_ends_clean_gives_its_guard_back() {
    let init = or_skip!(Init::start());
    let pid = init.init_pid();
    idle_guards(pid, DEFAULT_SIZE);
    let c = init.client().await;
    let start = |script: &str| ProcessStartParams {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: Some(marked(&init.marker)),
        wait_ms: Some(10_000),
        ..Default::default()
    };
    let p = c.call(&start("echo $PPID")).await.unwrap();
    let ended = p.ended.expect("ended within waitMs");
    assert_eq!(ended.exit_code, Some(0));
    let guard = guard_of(&ended.stdout.unwrap().data.0);
    let idle = idle_guards(pid, DEFAULT_SIZE);
    assert!(idle.contains(&guard), "{guard} not in {idle:?}");

    let kept = c
        .call(&ProcessStartParams {
            orphans: Some(Orphans::Keep),
            ..start("echo $PPID")
        })
        .await
        .unwrap();
    // With orphans kept, a stream counts as done at the program's end, so
    // its bytes may come in just after: read until they have.
    let until = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = c
            .call(&read_at(&kept.id, Stream::Stdout, 0, None))
            .await
            .unwrap();
        if !out.data.0.is_empty() || Instant::now() > until {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let guard = guard_of(&out.data.0);
    // Its guard stays with the run (orphans may be under it), never idle.
    let idle = idle_guards(pid, DEFAULT_SIZE);
    assert!(!idle.contains(&guard), "{guard} in {idle:?}");
    assert_no_zombies_under(pid);
}

/// Init in a pids cgroup of the test's own at 40: 60 runs at once need
/// their guard and their program each, 120 pids. Asked to wait
/// (`queueMs`), every one is queued until room comes and runs; not asked,
/// those that find no pid are refused in words, and nothing else fails.
/// The template the pool forks from meets the bound and stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_pids_bound_a_start_that_may_wait_is_queued_and_one_that_may_not_is_refused() {
    use computerd::client::ClientError;
    use computerd::protocol::{ErrorKind, limits};
    if !need_root() {
        return;
    }
    let group = or_skip!(PidsGroup::new(&format!("computerd-room-{}", marker()), 40));
    let init = or_skip!(Init::start_with(InitOptions {
        user: Some(fresh_uid()),
        pids_group: Some(group.path().to_path_buf()),
        ..Default::default()
    }));
    let c = init.client().await;
    // The pool is full: its template is there, named at its first fork.
    let pid = init.init_pid();
    idle_guards(pid, DEFAULT_SIZE);
    let template: Vec<i32> = every_guard_of(pid)
        .into_iter()
        .filter(|&p| is_template(p))
        .collect();
    assert_eq!(template.len(), 1, "{template:?}");
    let run = |queue_ms: Option<u64>| ExecParams {
        argv: vec!["sleep".into(), "0.3".into()],
        env: Some(marked(&init.marker)),
        timeout_ms: Some(60_000),
        queue_ms,
        ..Default::default()
    };
    let burst = |queue_ms: Option<u64>| {
        let c = c.clone();
        let p = run(queue_ms);
        futures::future::join_all((0..60).map(move |_| {
            let c = c.clone();
            let p = p.clone();
            async move { c.call(&p).await }
        }))
    };

    let refused_before = group.refused();
    for r in burst(Some(30_000)).await {
        assert_eq!(r.unwrap().exit_code, Some(0));
    }
    assert!(
        group.refused() > refused_before,
        "the burst never met the bound: nothing was queued"
    );

    let (mut ran, mut refused) = (0, 0);
    for r in burst(None).await {
        match r {
            Ok(r) => {
                assert_eq!(r.exit_code, Some(0));
                ran += 1;
            }
            Err(ClientError::Rpc(e)) => {
                assert_eq!(e.kind(), Some(ErrorKind::Limit), "{e:?}");
                assert!(
                    e.message.contains("pids bound") && e.message.contains("queueMs"),
                    "{}",
                    e.message
                );
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(ran > 0 && refused > 0, "ran {ran}, refused {refused}");

    // process.start queues the same way; the table holds them all.
    let starts = (0..30).map(|_| {
        let c = c.clone();
        let p = ProcessStartParams {
            argv: vec!["sleep".into(), "0.3".into()],
            env: Some(marked(&init.marker)),
            queue_ms: Some(30_000),
            wait_ms: Some(5_000),
            ..Default::default()
        };
        async move { c.call(&p).await }
    });
    for r in futures::future::join_all(starts).await {
        let ended = r.unwrap().ended.expect("ended within waitMs");
        assert_eq!(ended.exit_code, Some(0));
    }
    // queueMs past its most is refused naming it, with nothing started.
    let e = c
        .call(&run(Some(limits::MAX_QUEUE_MS + 1)))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("queueMs"), "{e}");
    // A queued start that is cancelled leaves the queue and never runs:
    // 30 runs of 2 s need 60 pids against 40, so some of them wait, and a
    // start that comes once the bound was met waits behind them.
    let refused_before = group.refused();
    let hold: Vec<_> = (0..30)
        .map(|_| {
            let c = c.clone();
            let p = ExecParams {
                argv: vec!["sleep".into(), "2".into()],
                ..run(Some(30_000))
            };
            tokio::spawn(async move { c.call(&p).await })
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(10);
    while group.refused() == refused_before {
        assert!(
            Instant::now() < until,
            "the holding runs never met the bound"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let never = init.path("never");
    let touch = ExecParams {
        argv: vec!["touch".into(), never.clone()],
        ..run(Some(30_000))
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(200), c.call(&touch))
            .await
            .is_err(),
        "the start behind the queue did not wait"
    );
    for h in hold {
        assert_eq!(h.await.unwrap().unwrap().exit_code, Some(0));
    }
    // The queue goes on past the cancelled start, which never ran.
    assert_eq!(c.call(&run(Some(30_000))).await.unwrap().exit_code, Some(0));
    assert!(!exists(&never), "a cancelled queued start ran");

    c.call(&computerd::protocol::PingParams {}).await.unwrap();
    // The template met the bound too (its forks failed) and is still the
    // template: it said so and stayed.
    assert!(
        alive(template[0]) && is_template(template[0]),
        "the template {template:?} is gone"
    );
    let marker = init.marker.clone();
    drop(init);
    assert_no_leftovers(&marker);
}
