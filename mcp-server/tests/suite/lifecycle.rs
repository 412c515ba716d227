//! The server on its own account: it never stalls on a stderr nobody reads,
//! and a signal ends it promptly on every transport, leaving nothing behind.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const TOKEN: &str = "test-token-0123456789abcdef";

/// `computer-mcp serve --http` with stderr a pipe that is never read.
fn http_server(server: &Server, port: u16, extra: &[&str]) -> Child {
    let mut args = server.args();
    // A later --log replaces the test default's (clap takes a flag once).
    if let Some(i) = extra.iter().position(|a| *a == "--log") {
        let at = args.iter().position(|a| a == "--log").unwrap();
        args[at + 1] = extra[i + 1].to_string();
    }
    let extra: Vec<&str> = match extra.iter().position(|a| *a == "--log") {
        Some(i) => [&extra[..i], &extra[i + 2..]].concat(),
        None => extra.to_vec(),
    };
    let child = std::process::Command::new(SERVER)
        .arg("serve")
        .args(args)
        .arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .args(&extra)
        .env("COMPUTER_MCP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_port(port);
    child
}

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

async fn post(
    http: &reqwest::Client,
    port: u16,
    session: Option<&str>,
    body: serde_json::Value,
) -> (u16, Option<String>, String) {
    mcp_post(
        http,
        &format!("http://127.0.0.1:{port}/mcp"),
        TOKEN,
        session,
        body,
    )
    .await
}

/// Open a session and run one exec in it, so it has a computer.
async fn session_with_a_computer(http: &reqwest::Client, port: u16) -> String {
    let (status, sid, body) = post(http, port, None, initialize()).await;
    assert_eq!(status, 200, "{body}");
    let sid = sid.expect("a session id");
    let (status, _, _) = post(
        http,
        port,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec", "arguments": {"argv": ["echo", "made"]}}});
    let (status, _, body) = post(http, port, Some(&sid), call).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("made"), "{body}");
    sid
}

/// Processes whose command line names `needle` (a computer's state
/// directory appears in its sandbox's and init's arguments).
fn processes_naming(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = computer_testkit::processes_mentioning(needle);
    found.retain(|&pid| pid != me);
    found
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// Wait for the child's exit, at most `limit`; the time it took.
fn exits_within(child: &mut Child, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the server exited with {status}");
            return start.elapsed();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit within {limit:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server exits within `limit` and leaves no computer on disk and no
/// process of one.
fn exits_leaving_nothing(child: &mut Child, server: &Server, limit: Duration, after: &str) {
    let took = exits_within(child, limit);
    assert!(
        server.computers().is_empty(),
        "computers left after {after} ({took:?}): {:?}",
        server.computers()
    );
    let state = server.state.path().display().to_string();
    assert_eq!(processes_naming(&state), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_600_http_requests_while_nobody_reads_its_stderr() {
    let server = or_skip!(Server::local());
    let port = free_port();
    // debug logs a few lines per request: far more than a pipe holds.
    let mut child = http_server(&server, port, &["--log", "debug"]);
    let http = reqwest::Client::new();
    for i in 0..600 {
        let (status, sid, body) = post(&http, port, None, initialize()).await;
        assert_eq!(status, 200, "request {i}: {body}");
        assert!(sid.is_some(), "request {i} got no session");
        assert!(body.contains("serverInfo"), "request {i}: {body}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `computer-mcp serve` over stdio spoken to by hand, one JSON line at a
/// time, its session initialized.
struct RawStdio {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl RawStdio {
    fn start(server: &Server) -> RawStdio {
        let mut child = std::process::Command::new(SERVER)
            .arg("serve")
            .args(server.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut raw = RawStdio {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        raw.send(initialize());
        let line = raw.line();
        assert!(line.contains("serverInfo"), "{line}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, v: serde_json::Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line that is not a notification (a tool call that makes
    /// a computer is followed by `notifications/resources/list_changed`,
    /// which may come first), or "" at the end.
    fn line(&mut self) -> String {
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            let v: Option<serde_json::Value> = serde_json::from_str(&line).ok();
            let notification =
                v.is_some_and(|v| v.get("method").is_some() && v.get("id").is_none());
            if !notification {
                return line;
            }
        }
    }

    fn exec(id: u64, argv: &[&str]) -> serde_json::Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "exec", "arguments": {"argv": argv}}})
    }
}

#[test]
fn sigterm_ends_a_stdio_server_with_an_open_stdin_and_releases_its_computer() {
    let server = or_skip!(Server::local());
    let mut raw = RawStdio::start(&server);
    raw.send(RawStdio::exec(2, &["echo", "made"]));
    let line = raw.line();
    assert!(line.contains("made"), "{line}");
    assert_eq!(server.computers().len(), 1);
    sigterm(&raw.child);
    // stdin stays open (held in `raw`) the whole time.
    exits_leaving_nothing(&mut raw.child, &server, Duration::from_secs(5), "SIGTERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_an_http_server_with_live_sessions_and_leaves_nothing() {
    let server = or_skip!(Server::local());
    let port = free_port();
    let mut child = http_server(&server, port, &[]);
    let http = reqwest::Client::new();
    session_with_a_computer(&http, port).await;
    session_with_a_computer(&http, port).await;
    assert_eq!(server.computers().len(), 2);
    sigterm(&child);
    exits_leaving_nothing(&mut child, &server, Duration::from_secs(20), "SIGTERM");
}

#[test]
fn a_call_cancelled_while_its_computer_is_made_leaves_no_computer() {
    let server = or_skip!(Server::local());
    let mut raw = RawStdio::start(&server);
    // The first call starts the computer's creation and is cancelled at once.
    raw.send(RawStdio::exec(2, &["true"]));
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}),
    );
    // The session ends (EOF) while the creation may still be under way.
    raw.stdin = None;
    exits_leaving_nothing(
        &mut raw.child,
        &server,
        Duration::from_secs(30),
        "the session",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_past_the_computers_memory_is_killed_and_said_so() {
    if !need_root() {
        return;
    }
    // The test's own bound (its servers and their computers nest below),
    // should the computer's memory limit fail.
    if !computer_testkit::need_own_bound() {
        return;
    }
    let server = Server::new();
    let (client, _) = server.stdio(&["--memory-mb", "128"]).await;
    let r = call(
        &client,
        "exec",
        json!({"argv": ["python3", "-c", "b = bytearray(256 * 1024 * 1024)"]}),
    )
    .await;
    let t = text(&r);
    assert_eq!(structured(&r)["signal"], "KILL", "{t}");
    assert!(
        t.contains("more memory than the computer has"),
        "the result does not say why: {t}"
    );
    let r = call(&client, "computer_info", json!({})).await;
    assert!(text(&r).contains("memoryMb 128"), "{}", text(&r));
    let r = call(&client, "exec", json!({"argv": ["echo", "still here"]})).await;
    assert_eq!(structured(&r)["stdout"], "still here\n");
    client.cancel().await.unwrap();
}

#[test]
fn sizes_and_shares_out_of_range_stop_the_server_in_words_and_make_nothing() {
    let server = or_skip!(Server::local());
    for (flags, words) in [
        (
            vec!["--memory-mb", "10"],
            "memoryMb 10 is under the least, 64 MiB",
        ),
        (
            vec!["--pids", "99999"],
            "pids 99999 is over the most, 32768",
        ),
        (vec!["--pids", "8"], "pids 8 is under the least, 16"),
        (vec!["--cpus", "0.1"], "cpus"),
        (
            vec!["--share", "relative/dir"],
            "the share \"relative/dir\" is a relative path",
        ),
        (
            vec!["--share", "/"],
            "the share / is the host's whole filesystem",
        ),
    ] {
        let out = std::process::Command::new(SERVER)
            .arg("serve")
            .args(server.args())
            .args(&flags)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(words), "{flags:?}: {stderr}");
    }
    assert!(server.computers().is_empty());
}

#[test]
fn stdin_closed_before_any_message_exits_0_with_one_line() {
    let server = Server::new();
    let out = std::process::Command::new(SERVER)
        .arg("serve")
        .args(server.args_logging("info"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "computer-mcp: stdin closed before any MCP message; nothing to serve"
    );
    assert!(out.stdout.is_empty());
    assert!(server.computers().is_empty());
}

/// doctor's line for the computer it made (`ok  a computer …`), not another
/// check's words that mention one.
fn is_the_computer_line(l: &str) -> bool {
    l.get(4..).is_some_and(|r| r.starts_with("a computer "))
}

#[test]
fn doctor_reports_this_host_and_makes_a_computer() {
    let server = or_skip!(Server::local());
    let out = std::process::Command::new(SERVER)
        .arg("doctor")
        .args(server.args())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{report}\n{out:?}");
    for check in [
        "user namespaces",
        "network namespaces",
        "seccomp",
        "cgroups",
        "Xvfb",
        "Chromium",
        "Docker",
    ] {
        assert!(
            report.contains(&format!(" {check} ")),
            "{check} missing:\n{report}"
        );
    }
    let made = report
        .lines()
        .find(|l| is_the_computer_line(l))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(made.starts_with("ok "), "{made}");
    assert!(
        made.contains("made by the local provider, ran `true`, released"),
        "{made}"
    );
    // Every failed check names its next step.
    let lines: Vec<&str> = report.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("NO ") {
            assert!(lines[i + 1].trim_start().starts_with("next: "), "{report}");
        }
    }
    assert!(
        server.computers().is_empty(),
        "doctor left {:?}",
        server.computers()
    );
}

#[test]
fn doctor_with_the_docker_engine_unreachable_says_so_and_names_the_next_step() {
    let out = std::process::Command::new(SERVER)
        .args([
            "doctor",
            "--provider",
            "docker",
            "--docker-socket",
            "/nonexistent/docker.sock",
            "--docker-image",
            "computer-mcp-test/debian:bookworm",
            "--docker-computerd",
            SERVER,
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{report}\n{out:?}");
    let i = report
        .lines()
        .position(is_the_computer_line)
        .unwrap_or_else(|| panic!("{report}"));
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[i].starts_with("NO "), "{report}");
    assert!(lines[i].contains("is dockerd running"), "{report}");
    assert!(lines[i + 1].contains("next: start the engine"), "{report}");
    assert!(
        report.contains("cannot make a computer here yet"),
        "{report}"
    );
    // The daemon it checks is the one given (this binary, dynamically
    // linked), not the one it would find by itself.
    let daemon = lines
        .iter()
        .find(|l| l.contains(" Docker's computerd "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        daemon.starts_with("NO ")
            && daemon.contains(&format!("the computerd at {SERVER} is dynamically linked")),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_server_dropped_early_ends_its_computers() {
    let Some((server, client, _)) = Server::local_stdio(&[]).await else {
        return;
    };
    call_ok(&client, "exec", serde_json::json!({"argv": ["true"]})).await;
    let id = server.computers().pop().unwrap();
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            server
                .state_dir
                .join("computers")
                .join(&id)
                .join("meta.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let pid = meta["process"]["pid"].as_i64().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    // As a failed assertion would: the state goes while the server runs.
    drop(server);
    wait_until("the computer's end", Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    client.cancel().await.unwrap();
}

/// `computer_extend` never moves a deadline past `--lifetime` after the
/// computer was made: an ask past it is cut there and the answer says so,
/// and a computer already at it is refused in words, its deadline as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computer_extend_is_held_to_the_servers_lifetime() {
    if !need_root() {
        return;
    }
    use time::format_description::well_known::Rfc3339;
    let server = Server::new();
    let (client, _) = server.stdio(&["--lifetime", "30m"]).await;
    let parse = |t: &str| time::OffsetDateTime::parse(t, &Rfc3339).unwrap();
    let deadline_of =
        |r: &rmcp::model::CallToolResult| parse(structured(r)["deadline"].as_str().unwrap());

    // The default computer lives 30 min already: no room left.
    call_ok(&client, "exec", json!({"command": "true"})).await;
    let info = call(&client, "computer_info", json!({})).await;
    let before = structured(&info)["deadline"].clone();
    call_refused(
        &client,
        "computer_extend",
        json!({"ttl_minutes": 600}),
        "this server keeps a computer at most --lifetime 30 min after it was made",
    )
    .await;
    let info = call(&client, "computer_info", json!({})).await;
    assert_eq!(structured(&info)["deadline"], before);

    // A computer made for 10 min: 600 min is cut at 30 min after its making.
    call_ok(
        &client,
        "computer_new",
        json!({"name": "short", "lifetime_minutes": 10}),
    )
    .await;
    let made = time::OffsetDateTime::now_utc();
    let r = call_ok(
        &client,
        "computer_extend",
        json!({"computer": "short", "ttl_minutes": 600}),
    )
    .await;
    assert!(
        text(&r).contains(
            "that is as late as this server allows (--lifetime 30 min after the computer was made"
        ),
        "{}",
        text(&r)
    );
    let cut = deadline_of(&r);
    assert!(
        cut <= made + time::Duration::minutes(30),
        "{cut} vs made {made}"
    );
    assert!(
        cut > made + time::Duration::minutes(28),
        "{cut} vs made {made}"
    );
    // Within the bound nothing is said of it.
    call_ok(
        &client,
        "computer_new",
        json!({"name": "other", "lifetime_minutes": 10}),
    )
    .await;
    let r = call_ok(
        &client,
        "computer_extend",
        json!({"computer": "other", "ttl_minutes": 15}),
    )
    .await;
    assert!(!text(&r).contains("allows"), "{}", text(&r));
    client.cancel().await.unwrap();
    wait_until("every computer released", Duration::from_secs(30), || {
        server.computers().is_empty()
    });
}

/// Issue 34: a one-shot `exec` and a `doctor` on the state directory of
/// two running servers (as a user, or a client's health check, runs them
/// beside a server) leave both able to make computers. Their end once
/// removed the state directory's cgroup group from under the servers:
/// "cannot make the cgroup …: No such file or directory" for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_and_a_doctor_beside_two_servers_leave_both_able_to_make_computers() {
    let first = or_skip!(Server::local());
    let second = Server::replica_of(&first);
    let (a, _) = first.stdio(&[]).await;
    let (b, _) = second.stdio(&[]).await;
    // Both are up, neither holds a computer yet.
    for c in [&a, &b] {
        c.list_all_tools().await.unwrap();
    }
    for (what, argv) in [
        ("exec", vec!["exec", "--", "true"]),
        ("doctor", vec!["doctor"]),
    ] {
        let out = std::process::Command::new(SERVER)
            .arg(argv[0])
            .args(first.args())
            .args(&argv[1..])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{what}: {out:?}");
    }
    for (name, c) in [("first", &a), ("second", &b)] {
        let r = call(c, "exec", json!({"argv": ["echo", name]})).await;
        assert!(!is_error(&r), "the {name} server: {}", text(&r));
        assert_eq!(structured(&r)["stdout"], format!("{name}\n"), "{r:?}");
    }
    for c in [a, b] {
        c.cancel().await.unwrap();
    }
}
