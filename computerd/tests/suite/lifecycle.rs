//! init's flags, socket, deadline and shutdown, and the stdio bridge.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::ComputerExt;
use computerd::protocol::*;

use super::support::*;

fn init_refusal(args: &[&str], socket_dir_mode: u32) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(socket_dir_mode)).unwrap();
    let socket = run.join("s.sock");
    let out = Command::new(COMPUTERD)
        .arg("init")
        .arg("--socket")
        .arg(&socket)
        .args(args)
        .output()
        .unwrap();
    assert!(!socket.exists(), "a refused init must not listen");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_and_times_are_refused_in_words_with_exit_1() {
    let soon = rfc3339_in(Duration::from_secs(600));
    let later = rfc3339_in(Duration::from_secs(1200));
    let past = rfc3339_in(Duration::ZERO).replace("2026", "2001");
    let cases: Vec<(Vec<&str>, u32, &str)> = vec![
        (
            vec!["--deadline", "tomorrow"],
            0o700,
            "is not an RFC 3339 time",
        ),
        (vec!["--deadline", &past], 0o700, "is in the past"),
        (
            vec!["--deadline", &later, "--max-deadline", &soon],
            0o700,
            "is before --deadline",
        ),
        (
            vec!["--deadline", &soon],
            0o755,
            "must be this user's alone (0700)",
        ),
        (vec![], 0o700, "--deadline"),
        (vec!["--deadline", &soon, "--bogus"], 0o700, "--bogus"),
    ];
    for (args, mode, words) in cases {
        let (code, stderr) = init_refusal(&args, mode);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
}

#[test]
fn a_missing_socket_directory_is_refused() {
    let out = Program::computerd(COMPUTERD)
        .command(InitArgs::new(
            Time::from_now(Duration::from_secs(60)),
            "/no/such/dir/s.sock",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is missing"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_socket_is_refused_and_a_stale_one_replaced() {
    let init = or_skip!(Init::start());
    let out = Program::computerd(COMPUTERD)
        .command(InitArgs::new(
            Time::from_now(Duration::from_secs(60)),
            &init.socket,
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already listening"));
    init.client().await.call(&PingParams {}).await.unwrap();

    // A socket nobody listens on any more is replaced.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let stale = run.join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let mut second = Program::computerd(COMPUTERD)
        .command(InitArgs::new(
            Time::from_now(Duration::from_secs(60)),
            &stale,
        ))
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while std::os::unix::net::UnixStream::connect(&stale).is_err() {
        assert!(Instant::now() < until, "the stale socket was not replaced");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mode = std::fs::metadata(&stale).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(second.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert!(second.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_deadline_a_program_that_traps_term_logs_it_before_it_is_killed() {
    let mut init = or_skip!(Init::start_with(InitOptions {
        deadline: Duration::from_secs(3),
        ..Default::default()
    }));
    let c = init.client().await;
    let log = init.path("term.log");
    let script =
        format!("trap 'echo got TERM >> {log}' TERM; echo ready; while :; do sleep 0.1; done");
    let p = c
        .call(&ProcessStartParams {
            argv: vec!["sh".into(), "-c".into(), script],
            env: Some(marked(&init.marker)),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut follow = c.follow_process(&p.id, Stream::Stdout, 0);
    assert_eq!(follow.next().await.unwrap().unwrap().data, b"ready\n");
    let started = Instant::now();
    let status = init.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    // TERM at the deadline, KILL 2 s later (the trap does not exit).
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.starts_with("got TERM\n"), "{logged:?}");
    assert_no_leftovers(&init.marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutting_down_init_refuses_new_starts_and_still_answers_reads() {
    let mut init = or_skip!(Init::start());
    let c = init.client().await;
    let p = c
        .call(&start_sh(
            "trap '' TERM; echo up; while :; do sleep 0.1; done",
            &init.marker,
        ))
        .await
        .unwrap();
    let mut follow = c.follow_process(&p.id, Stream::Stdout, 0);
    follow.next().await.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(init.child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = refused(
        &c,
        &ExecParams {
            argv: vec!["true".into()],
            ..Default::default()
        },
        ErrorKind::Unsupported,
    )
    .await;
    assert!(e.to_string().contains("shutting down"), "{e}");
    let l = c.call(&ProcessListParams { from: None }).await.unwrap();
    assert_eq!(l.processes.len(), 1);
    let w = wait_within(&c, &p.id, 10_000).await.unwrap();
    assert_eq!(
        w.signal.as_deref(),
        Some("KILL"),
        "TERM was trapped, so KILL ended it"
    );
    assert!(init.wait_exit(Duration::from_secs(15)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_extend_moves_later_up_to_the_maximum_and_refuses_the_rest() {
    let init = or_skip!(Init::start_with(InitOptions {
        deadline: Duration::from_secs(60),
        max_deadline: Some(Duration::from_secs(600)),
        ..Default::default()
    }));
    let c = init.client().await;
    let to = rfc3339_in(Duration::from_secs(300));
    let r = c
        .call(&DeadlineExtendParams { at: to.clone() })
        .await
        .unwrap();
    assert_eq!(
        time::OffsetDateTime::parse(&r.at, &time::format_description::well_known::Rfc3339)
            .unwrap()
            .unix_timestamp(),
        time::OffsetDateTime::parse(&to, &time::format_description::well_known::Rfc3339)
            .unwrap()
            .unix_timestamp()
    );
    // Earlier than the deadline, past the maximum, not a time.
    for (at, kind) in [
        (rfc3339_in(Duration::from_secs(100)), ErrorKind::Invalid),
        (rfc3339_in(Duration::from_secs(3600)), ErrorKind::Limit),
        ("soon".into(), ErrorKind::Invalid),
    ] {
        let e = c.call(&DeadlineExtendParams { at }).await.unwrap_err();
        assert_eq!(e.kind(), Some(kind), "{e}");
    }

    let fixed = or_skip!(Init::start_with(InitOptions {
        max_deadline: None,
        ..Default::default()
    }));
    let e = fixed
        .client()
        .await
        .call(&DeadlineExtendParams {
            at: rfc3339_in(Duration::from_secs(900)),
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{e}");
}

#[test]
fn the_stdio_bridge_carries_the_protocol_and_says_why_when_it_cannot() {
    let init = or_skip!(Init::start());
    let mut bridge = Command::new(COMPUTERD)
        .arg("stdio")
        .env("COMPUTERD_SOCKET", &init.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"client\":\"t\"}}\n",
        )
        .unwrap();
    drop(stdin);
    let out = bridge.wait_with_output().unwrap();
    assert!(out.status.success());
    let reply: Envelope = serde_json::from_slice(&out.stdout).unwrap();
    let hello: HelloResult = serde_json::from_value(reply.result.unwrap()).unwrap();
    assert_eq!((hello.os.as_str(), hello.kind.as_str()), ("linux", "linux"));
    assert_eq!(hello.groups, vec!["exec", "files", "processes"]);

    let t = Instant::now();
    let out = Program::computerd(COMPUTERD)
        .command(StdioArgs {
            socket: "/no/such/computerd.sock".into(),
            direct: None,
        })
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("could not reach computerd init") && said.contains("no socket is there"),
        "{said}"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(2900),
        "it waits 3 s for a starting init"
    );
}

const HELLO_LINE: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"client\":\"t\"}}\n";

/// A bridge with `--direct <dir>/p.sock`, its token line written.
fn direct_bridge(init: &Init, provider: &std::path::Path, token: &[u8]) -> std::process::Child {
    let mut bridge = Program::computerd(COMPUTERD)
        .command(StdioArgs {
            socket: init.socket.clone(),
            direct: Some(provider.into()),
        })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bridge.stdin.as_mut().unwrap().write_all(token).unwrap();
    bridge
}

fn one_byte(from: &mut impl Read) -> u8 {
    let mut b = [0u8; 1];
    from.read_exact(&mut b).unwrap();
    b[0]
}

#[test]
fn a_direct_bridge_relays_the_providers_socket_after_the_token_and_stdio_when_it_cannot_reach_it() {
    use computerd::protocol::direct;
    use std::io::BufRead;
    let init = or_skip!(Init::start());
    let dir = tempfile::tempdir().unwrap();
    let token = format!("{}\n", "5e".repeat(32));

    // Reached: the token comes first on the provider's socket, then the
    // protocol goes over it; stdout says D and nothing more.
    let path = dir.path().join("p.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut bridge = direct_bridge(&init, &path, token.as_bytes());
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = vec![0u8; direct::TOKEN_LINE];
    conn.read_exact(&mut got).unwrap();
    assert_eq!(got, token.as_bytes());
    let mut stdout = bridge.stdout.take().unwrap();
    assert_eq!(one_byte(&mut stdout), direct::SAID_DIRECT);
    conn.write_all(HELLO_LINE).unwrap();
    let mut reply = String::new();
    std::io::BufReader::new(conn.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    let reply: Envelope = serde_json::from_str(&reply).unwrap();
    let hello: HelloResult = serde_json::from_value(reply.result.unwrap()).unwrap();
    assert_eq!(hello.kind.as_str(), "linux");
    // The provider's end closing ends the bridge, and stdout held nothing else.
    drop(conn);
    drop(bridge.stdin.take());
    assert!(bridge.wait().unwrap().success());
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");

    // Not reachable (nothing listens): it says S and bridges stdio.
    let mut bridge = direct_bridge(&init, &dir.path().join("none.sock"), token.as_bytes());
    let mut stdin = bridge.stdin.take().unwrap();
    stdin.write_all(HELLO_LINE).unwrap();
    drop(stdin);
    let out = bridge.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.first(), Some(&direct::SAID_STDIO));
    let reply: Envelope = serde_json::from_slice(&out.stdout[1..]).unwrap();
    assert!(reply.result.is_some(), "{reply:?}");

    // A first line that is not a token: refused in words, nothing bridged.
    let mut bridge = direct_bridge(&init, &path, HELLO_LINE);
    drop(bridge.stdin.take());
    let out = bridge.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not a token line"), "{said}");
}

#[test]
fn computerd_under_another_name_is_reached_through_its_word() {
    // As the multi-call server is: a binary not named computerd is started
    // with the word `computerd` before the subcommand.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("computer-mcp");
    std::fs::copy(COMPUTERD, &exe).unwrap();
    let program = Program::at(&exe);
    assert_eq!(program, Program::multi_call(&exe));
    let past = Time::from_unix_ms(0).unwrap();
    let out = program
        .command(InitArgs::new(past, dir.path().join("s.sock")))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.starts_with("computerd init: --deadline 1970-01-01T00:00:00Z is in the past"),
        "{said}"
    );
}

/// A program of the computer runs as init's own user, so it could open
/// the socket; it must not use it: its deadline.extend is refused and the
/// deadline stays where the provider set it. Inside a sandbox (the local
/// provider's computer, socket at /run/computerd) and beside a plain init
/// whose socket the programs' user reaches (as in a Docker computer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_of_the_computer_cannot_move_its_deadline_through_the_socket() {
    let sandboxed = or_skip!(Init::start_sandboxed(SandboxOptions {
        user: Some(fresh_uid()),
        ..Default::default()
    }));
    let plain = or_skip!(Init::as_fresh_user());
    const ASK: &str = r#"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({"connect": type(e).__name__}))
    sys.exit(0)
try:
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "deadline.extend",
                           "params": {"at": sys.argv[2]}}) + "\n").encode())
except OSError:
    pass  # the daemon may have closed already; its line is still there
print(s.makefile().readline().strip())
"#;
    let inside = [
        (&sandboxed, "/run/computerd/computerd.sock".to_string()),
        (&plain, plain.socket.display().to_string()),
    ];
    for (init, socket) in inside {
        let c = init.client().await;
        let far = rfc3339_in(Duration::from_secs(3000));
        let r = c
            .call(&ExecParams {
                argv: vec![
                    "python3".into(),
                    "-c".into(),
                    ASK.into(),
                    socket.clone(),
                    far,
                ],
                env: Some(marked(&init.marker)),
                timeout_ms: Some(20_000),
                ..Default::default()
            })
            .await
            .unwrap();
        let out = String::from_utf8_lossy(&r.stdout).trim().to_string();
        assert_eq!(
            r.exit_code,
            Some(0),
            "{out} {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let reply: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(reply["error"]["data"]["kind"], "denied", "{socket}: {out}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("a program of the computer cannot use the daemon"),
            "{out}"
        );
        assert!(reply.get("result").is_none(), "{out}");
        // Still the provider's deadline (10 min): a move to 20 min is a move
        // later, which a deadline of 50 min would have refused.
        let r = c
            .call(&DeadlineExtendParams {
                at: rfc3339_in(Duration::from_secs(1200)),
            })
            .await;
        assert!(r.is_ok(), "{socket}: {r:?}");
        // The provider's own connection goes on serving.
        c.call(&PingParams {}).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_methods_are_refused_in_words_naming_the_group_not_declared() {
    let Some((_init, c)) = Init::with_client().await else {
        return;
    };
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    let refused = |e: computerd::client::ClientError| match e {
        computerd::client::ClientError::Rpc(e) => e,
        other => panic!("not an error reply: {other}"),
    };
    let cases = [
        ("apps.list", serde_json::json!({}), "apps"),
        (
            "apps.launch",
            serde_json::json!({"id": "com.android.settings"}),
            "apps",
        ),
        (
            "apps.terminate",
            serde_json::json!({"id": "com.android.settings"}),
            "apps",
        ),
        (
            "apps.install",
            serde_json::json!({"path": "/tmp/a.apk"}),
            "apps.install",
        ),
        ("apps.ui_tree", serde_json::json!({}), "apps.ui_tree"),
    ];
    for (method, params, group) in cases {
        assert!(
            !hello.groups.iter().any(|g| g.as_str() == group),
            "{group} is declared"
        );
        let e = refused(c.call_value(method, params).await.unwrap_err());
        assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{method}");
        assert_eq!(
            e.message,
            format!(
                "{method} is answered by a phone's provider, not by computerd: this computer declares no {group}"
            )
        );
    }
    // The connection still answers after the refusals.
    c.call(&PingParams {}).await.unwrap();
}
