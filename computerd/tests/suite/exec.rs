//! exec.run end to end, and what a connection promises around it.

use std::time::{Duration, Instant};

use computerd::protocol::{Bytes64, ErrorKind, ExecParams, ExecResult, PingParams, limits};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_program_and_returns_its_streams_apart() {
    let (init, c) = or_skip!(Init::with_client().await);
    let r = init.run_script(&c, "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        r,
        ExecResult {
            exit_code: Some(3),
            signal: None,
            stdout: Bytes64(b"out\n".to_vec()),
            stderr: Bytes64(b"err\n".to_vec()),
            timed_out: false,
            truncated: false,
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_exactly_path_home_user_logname_and_env() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut p = exec_sh("env | sort", &init.marker);
    p.env.as_mut().unwrap().insert("EXTRA".into(), "x y".into());
    let r = c.call(&p).await.unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    let names: Vec<&str> = out
        .lines()
        .map(|l| l.split('=').next().unwrap())
        .filter(|n| !["PWD", "SHLVL", "_"].contains(n))
        .collect();
    let mut want = vec![
        "EXTRA",
        "HOME",
        "LOGNAME",
        "PATH",
        "USER",
        init.marker.as_str(),
    ];
    want.sort();
    assert_eq!(names, want, "{out}");
    assert!(
        out.contains(&format!("HOME={}\n", init.home().display())),
        "{out}"
    );
    assert!(out.contains("EXTRA=x y\n"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_cwd_and_signal_come_through() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut p = exec_sh("pwd; cat", &init.marker);
    p.cwd = Some("/tmp".into());
    p.stdin = Some(Bytes64(b"from stdin".to_vec()));
    let r = c.call(&p).await.unwrap();
    assert_eq!(r.stdout.0, b"/tmp\nfrom stdin");
    let r = init.run_script(&c, "kill -KILL $$").await;
    assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("KILL")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_fork_and_setsid_leave_nothing_behind() {
    let (init, c) = or_skip!(Init::with_client().await);
    let script = "setsid sh -c 'sleep 300 & sleep 300' >/dev/null 2>&1 & \
                  (sh -c 'sleep 300 &' &) ; \
                  nohup sleep 300 >/dev/null 2>&1 & \
                  sleep 0.3; echo started";
    let r = init.run_script(&c, script).await;
    assert_eq!(r.stdout.0, b"started\n");
    assert_eq!(r.exit_code, Some(0));
    // Everything the run started is gone by the time the reply is read.
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_answers_timed_out_and_leaves_no_process() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut p = exec_sh("(sleep 300 &); echo begun; sleep 300", &init.marker);
    p.timeout_ms = Some(500);
    let t = Instant::now();
    let r = c.call(&p).await.unwrap();
    assert!(r.timed_out);
    assert_eq!(r.signal.as_deref(), Some("TERM"));
    assert_eq!(r.stdout.0, b"begun\n");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_start_with_no_signal_blocked_or_ignored_and_term_ends_them() {
    let (init, c) = or_skip!(Init::with_client().await);
    let r = c
        .call(&exec_argv(&["cat", "/proc/self/status"], &init.marker))
        .await
        .unwrap();
    let status = String::from_utf8(r.stdout.0).unwrap();
    for key in ["SigBlk:", "SigIgn:"] {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    // A plain program ends at TERM, well before the KILL 2 s later.
    let t = Instant::now();
    let r = c
        .call(&ExecParams {
            argv: vec!["sleep".into(), "30".into()],
            env: Some(marked(&init.marker)),
            timeout_ms: Some(300),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(r.timed_out);
    assert_eq!(r.signal.as_deref(), Some("TERM"));
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_ignores_term_is_killed_after_the_grace() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut p = exec_sh(
        "trap '' TERM; echo ready; while :; do sleep 0.05; done",
        &init.marker,
    );
    p.timeout_ms = Some(300);
    let t = Instant::now();
    let r = c.call(&p).await.unwrap();
    assert!(r.timed_out);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(2000) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    assert_eq!(r.signal.as_deref(), Some("KILL"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_answers_aborted_and_ends_the_run() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    raw.request(
        7,
        "exec.run",
        json!({"argv": ["sh", "-c", "sleep 300"], "env": {init.marker.clone(): "1"}}),
    )
    .await;
    computer_testkit::wait_until("sh and sleep run", Duration::from_secs(5), || {
        marked_processes(&init.marker).len() == 2
    });
    raw.send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}))
        .await;
    let t = Instant::now();
    let reply = raw.reply_to(7).await;
    assert_eq!(kind_of(&reply).as_deref(), Some("aborted"), "{reply:?}");
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_input_cancels_the_connections_runs() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    raw.request(
        1,
        "exec.run",
        json!({"argv": ["sleep", "300"], "env": {init.marker.clone(): "1"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    raw.write.shutdown().await.unwrap();
    let reply = raw.reply_to(1).await;
    assert_eq!(kind_of(&reply).as_deref(), Some("aborted"), "{reply:?}");
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mebibyte_of_output_is_cut_at_360_kib() {
    let (init, c) = or_skip!(Init::with_client().await);
    let r = init
        .run_script(&c, "head -c 1048576 /dev/zero; head -c 1000 /dev/zero >&2")
        .await;
    assert_eq!(r.stdout.len() as u64, limits::MAX_OUTPUT_BYTES);
    assert_eq!(r.stderr.len(), 1000);
    assert!(r.truncated);
    assert_eq!(r.exit_code, Some(0));
    let mut p = exec_sh("head -c 5000 /dev/zero", &init.marker);
    p.max_output = Some(100);
    let r = c.call(&p).await.unwrap();
    assert_eq!((r.stdout.len(), r.truncated), (100, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_mebibyte_line_gets_an_error_and_the_connection_goes_on() {
    let init = or_skip!(Init::start());
    let mut raw = init.raw().await;
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
    line.extend(std::iter::repeat_n(b'a', 2 << 20));
    line.extend_from_slice(br#""}}"#);
    raw.send_line(&line).await;
    let reply = raw.recv().await;
    assert_eq!(reply.id, Some(computerd::protocol::Id::Null));
    assert_eq!(kind_of(&reply).as_deref(), Some("limit"), "{reply:?}");
    assert!(reply.error.unwrap().message.contains("1 MiB"));
    raw.request(2, "ping", json!({})).await;
    let reply = raw.reply_to(2).await;
    assert_eq!(reply.result, Some(json!({})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_runs_in_flight_on_one_connection_all_complete() {
    let (init, c) = or_skip!(Init::with_client().await);
    let calls = (0..64).map(|i| {
        let c = c.clone();
        let p = exec_sh(&format!("sleep 0.2; echo {i}"), &init.marker);
        async move { c.call(&p).await }
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.into_iter().enumerate() {
        let r = r.unwrap();
        assert_eq!(r.stdout.0, format!("{i}\n").into_bytes());
        assert_eq!(r.exit_code, Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_naming_the_field() {
    let (_init, c) = or_skip!(Init::with_client().await);
    let cases = [
        (json!({"argv": []}), ErrorKind::Invalid, "argv is empty"),
        (
            json!({"argv": ["a\u{0}b"]}),
            ErrorKind::Invalid,
            "argv[0] holds a NUL byte",
        ),
        (
            json!({"argv": ["true"], "cwd": "tmp"}),
            ErrorKind::Invalid,
            "cwd must be an absolute path",
        ),
        (
            json!({"argv": ["true"], "cwd": "/no/such/dir"}),
            ErrorKind::NotFound,
            "cwd /no/such/dir does not exist",
        ),
        (
            json!({"argv": ["true"], "timeoutMs": -5}),
            ErrorKind::Invalid,
            "timeoutMs: ",
        ),
        (
            json!({"argv": ["true"], "timeoutMs": 99999999999u64}),
            ErrorKind::Limit,
            "timeoutMs is 99999999999; the most is 86400000",
        ),
        (
            json!({"argv": ["true"], "maxOutput": 400000}),
            ErrorKind::Limit,
            "maxOutput is 400000; the most is 368640",
        ),
        (
            json!({"argv": ["true"], "stdin": "***"}),
            ErrorKind::Invalid,
            "stdin: invalid base64",
        ),
        (
            json!({"argv": ["true"], "bogus": 1}),
            ErrorKind::Invalid,
            "unknown field `bogus`",
        ),
        (
            json!({"argv": ["true"], "env": {"A=B": "x"}}),
            ErrorKind::Invalid,
            "env name \"A=B\"",
        ),
        (
            json!({"argv": ["/no/such/program"]}),
            ErrorKind::NotFound,
            "/no/such/program: no such program",
        ),
        (
            json!({"argv": ["true"], "user": "no-such-user-here"}),
            ErrorKind::NotFound,
            "no user named",
        ),
    ];
    for (params, kind, words) in cases {
        let e = c.call_value("exec.run", params.clone()).await.unwrap_err();
        assert_eq!(e.kind(), Some(kind), "{params}: {e}");
        assert!(e.to_string().contains(words), "{params}: {e}");
    }
    let e = c.call_value("no.such.method", json!({})).await.unwrap_err();
    assert!(
        e.to_string().contains("unknown method \"no.such.method\""),
        "{e}"
    );
    c.call(&PingParams {}).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_setuid_denies_a_user_switch() {
    // init drops every capability, so no user switch is possible, as root
    // or as another user.
    let (init, c) = or_skip!(Init::with_client().await);
    let mut p = exec_sh("id -u", &init.marker);
    p.user = Some("65534".into());
    let e = refused(&c, &p, ErrorKind::Denied).await;
    assert!(e.to_string().contains("no CAP_SETUID"), "{e}");
    assert!(e.to_string().contains("leave user out"), "{e}");
    // Its own uid is no switch at all.
    let me = nix::unistd::getuid().to_string();
    p.user = Some(me.clone());
    let r = c.call(&p).await.unwrap();
    assert_eq!(r.stdout.0, format!("{me}\n").into_bytes());
}

/// `bash -c LINE` as a program sees it, its output lines sorted (bash's
/// own variables come in another order than the guard's).
async fn bash_c(
    c: &computerd::client::DaemonClient,
    line: &str,
    cwd: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> (Option<i32>, Vec<String>, String) {
    let r = c
        .call(&ExecParams {
            argv: vec!["/bin/bash".into(), "-c".into(), line.into()],
            cwd: Some(cwd.into()),
            env: Some(env.clone()),
            timeout_ms: Some(20_000),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut out: Vec<String> = String::from_utf8(r.stdout.0)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    out.sort();
    (r.exit_code, out, String::from_utf8(r.stderr.0).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_bash_line_gives_what_bash_itself_gives() {
    use std::os::unix::fs::PermissionsExt;
    let (init, c) = or_skip!(Init::with_client().await);
    // A working directory reached through a symlink (bash's PWD is the
    // physical one), a copy of env, a script without #!, a file that may
    // not be executed.
    let real = init.path("real");
    std::fs::create_dir(&real).unwrap();
    let link = init.path("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::fs::copy("/usr/bin/env", format!("{real}/myenv")).unwrap();
    std::fs::write(format!("{real}/noshebang"), "echo ran by a shell: $0\n").unwrap();
    std::fs::write(format!("{real}/data"), "not a program\n").unwrap();
    for (f, mode) in [("noshebang", 0o755), ("data", 0o644)] {
        std::fs::set_permissions(format!("{real}/{f}"), std::fs::Permissions::from_mode(mode))
            .unwrap();
    }
    let base = marked(&init.marker);
    let mut trailing = base.clone();
    trailing.insert("PATH".into(), "/usr/bin/:/bin".into());
    let mut steered = base.clone();
    steered.insert("BASH_ENV".into(), format!("{real}/noshebang"));
    // Variables bash resets (IFS, LINENO) or drops (PPID, RANDOM).
    let mut own = base.clone();
    for (k, v) in [
        ("IFS", ":"),
        ("LINENO", "9"),
        ("PPID", "1"),
        ("RANDOM", "4"),
    ] {
        own.insert(k.into(), v.into());
    }
    // Each line beside the same line with a backslash before its first
    // word, which only bash itself can run.
    for (plain, forced, env) in [
        ("env", "\\env", &base),
        ("env -u HOME", "\\env -u HOME", &base),
        ("./myenv", "\\./myenv", &base),
        ("env", "\\env", &trailing),
        ("./noshebang a b", "\\./noshebang a b", &base),
        ("no-such-program-cmt", "\\no-such-program-cmt", &base),
        ("./data", "\\./data", &base),
        ("env", "\\env", &steered),
        ("env", "\\env", &own),
        // Builtins whose twin program runs in their place.
        ("true", "\\true", &base),
        ("false x", "\\false x", &base),
        (
            "echo hi 'a  b' \"\" x-y",
            "\\echo hi 'a  b' \"\" x-y",
            &base,
        ),
        ("echo", "\\echo", &base),
    ] {
        let fast = bash_c(&c, plain, &link, env).await;
        let shell = bash_c(&c, forced, &link, env).await;
        assert_eq!(fast, shell, "{plain:?} with PATH {:?}", env.get("PATH"));
    }
    // What bash adds, and the run's own variables.
    let (code, out, _) = bash_c(&c, "env", &link, &base).await;
    assert_eq!(code, Some(0));
    for want in ["PWD=", "SHLVL=0", "_=/usr/bin/env"] {
        assert!(out.iter().any(|l| l.starts_with(want)), "{want}: {out:?}");
    }
    assert!(out.contains(&format!("PWD={real}")), "{out:?}");
    let (code, _, err) = bash_c(&c, "no-such-program-cmt", &link, &base).await;
    assert_eq!(code, Some(127));
    assert!(err.contains("command not found"), "{err}");
    let (code, _, err) = bash_c(&c, "./data", &link, &base).await;
    assert_eq!(code, Some(126));
    assert!(err.contains("Permission denied"), "{err}");
}
