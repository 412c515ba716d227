//! The server over stdio, driven by rmcp's client.

use std::time::{Duration, Instant};

use serde_json::json;

use super::support::*;

/// The sandbox kind's tool names, as its golden listing
/// (`fixtures/schemas/sandbox-tools.json`) has them.
fn golden_sandbox_names() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/schemas/sandbox-tools.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let tools: Vec<serde_json::Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

on_each_provider!(a_session_lists_tools_makes_its_computer_on_first_use_and_releases_it_at_the_end);

async fn a_session_lists_tools_makes_its_computer_on_first_use_and_releases_it_at_the_end(
    server: Server,
) {
    let (client, _) = server.stdio(&[]).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "computer-mcp");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or("")
            .contains("computer")
    );

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    for want in golden_sandbox_names() {
        // Only a provider that can move a deadline offers computer_extend.
        if want == "computer_extend" && server.provider() == "docker" {
            assert!(!names.contains(&want), "{names:?}");
            continue;
        }
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let exec = tools.iter().find(|t| t.name == "exec").unwrap();
    assert!(
        exec.input_schema
            .get("properties")
            .is_some_and(|p| p.get("command").is_some()),
        "{:?}",
        exec.input_schema
    );
    // Output schemas are listed only with --output-schemas; the result
    // still carries its structured content (below).
    assert!(exec.output_schema.is_none());
    // Listing made no computer.
    assert!(server.computers().is_empty(), "{:?}", server.computers());

    let r = call_ok(&client, "exec", json!({"command": "uname -a"})).await;
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .starts_with("Linux"),
        "{r:?}"
    );
    assert_eq!(structured(&r)["exit_code"], 0);
    assert_eq!(server.computers().len(), 1);

    let info = call(&client, "computer_info", json!({})).await;
    let facts = structured(&info);
    assert_eq!(facts["provider"], server.provider());
    assert!(
        facts["network"].as_str().unwrap().starts_with("none"),
        "{facts}"
    );
    let home = facts["work_dir"].as_str().unwrap().to_string();

    // write, edit, read.
    let path = format!("{home}/notes/a.txt");
    call_ok(
        &client,
        "write_file",
        json!({"path": path, "content": "alpha\nbeta\ngamma\n"}),
    )
    .await;
    let r = call_ok(
        &client,
        "edit_file",
        json!({"path": path, "old_string": "beta", "new_string": "BETA"}),
    )
    .await;
    assert_eq!(structured(&r)["replacements"], 1);
    let r = call(&client, "read_file", json!({"path": path})).await;
    let t = text(&r);
    assert!(t.contains("2\tBETA") && t.contains("3\tgamma"), "{t}");

    // The session ends (stdin closes): the computer is released.
    client.cancel().await.unwrap();
    wait_until("the computer's release", Duration::from_secs(20), || {
        server.computers().is_empty()
    });
}

on_each_provider!(a_background_server_is_started_read_and_signalled);

async fn a_background_server_is_started_read_and_signalled(server: Server) {
    let (client, _) = server.stdio(&[]).await;
    let r = call_ok(
        &client,
        "process_start",
        json!({"command": "python3 -u -m http.server 18777 --bind 127.0.0.1"}),
    )
    .await;
    let id = structured(&r)["id"].as_str().unwrap().to_string();
    let mut seen = String::new();
    let mut since = 0;
    let until = Instant::now() + Duration::from_secs(15);
    while !seen.contains("Serving HTTP") {
        assert!(Instant::now() < until, "no output from the server: {seen}");
        let r = call(
            &client,
            "process_read",
            json!({"id": id, "wait_ms": 2000, "since": since}),
        )
        .await;
        let s = structured(&r);
        seen.push_str(s["output"].as_str().unwrap_or(""));
        since = s["next_offset"].as_u64().unwrap();
    }
    // The computer's own loopback answers it.
    let r = call(&client, "exec", json!({"command": "python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:18777/').status)\""})).await;
    assert_eq!(
        structured(&r)["stdout"].as_str().unwrap().trim(),
        "200",
        "{}",
        text(&r)
    );
    call_ok(
        &client,
        "process_signal",
        json!({"id": id, "signal": "TERM"}),
    )
    .await;
    let mut exited = false;
    for _ in 0..20 {
        let r = call(
            &client,
            "process_read",
            json!({"id": id, "wait_ms": 1000, "since": since}),
        )
        .await;
        let s = structured(&r);
        since = s["next_offset"].as_u64().unwrap();
        if s["exited"] == true {
            exited = true;
            break;
        }
    }
    assert!(exited, "the server did not end on TERM");
    let r = call(&client, "process_list", json!({})).await;
    assert!(text(&r).contains(&id), "{}", text(&r));
    client.cancel().await.unwrap();
}

on_each_provider!(a_long_exec_sends_progress_and_a_cancelled_one_ends_within_3_s);

async fn a_long_exec_sends_progress_and_a_cancelled_one_ends_within_3_s(server: Server) {
    let (client, recorder) = server.stdio(&[]).await;
    let r = call(
        &client,
        "exec",
        json!({"command": "for i in 1 2 3; do echo step$i; sleep 1; done"}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let progress = recorder.progress.lock().unwrap().clone();
    assert!(!progress.is_empty(), "no progress notification arrived");
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().unwrap_or("").contains("step")),
        "{progress:?}"
    );

    // A 2-minute sleep, cancelled by the client (the future dropped sends
    // notifications/cancelled): its process group ends within 3 s.
    let m = marker();
    let mut p = rmcp::model::CallToolRequestParams::new("exec");
    p = p.with_arguments(args(json!({"command": "sleep 120", "env": {m.clone(): "1"}})).unwrap());
    let mut pending = Box::pin(client.call_tool(p));
    // Wait (up to 15 s, for a loaded machine) until the sleep runs, then
    // drop the call.
    let asked = Instant::now();
    while marked_processes(&m).is_empty() {
        assert!(
            asked.elapsed() < Duration::from_secs(15),
            "the sleep never ran"
        );
        tokio::select! {
            r = &mut pending => panic!("the sleep ended by itself? {r:?}"),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    drop(pending);
    let t = Instant::now();
    wait_until("the cancelled sleep to end", Duration::from_secs(3), || {
        marked_processes(&m).is_empty()
    });
    assert!(t.elapsed() < Duration::from_secs(3));
    // The session goes on.
    let r = call(&client, "exec", json!({"argv": ["echo", "still here"]})).await;
    assert_eq!(structured(&r)["stdout"], "still here\n");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_computer_is_kept_from_the_host() {
    if !need_root() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = Server::new();
    let (client, _) = server.stdio(&[]).await;
    let script = format!(
        "touch /etc/x 2>&1; touch /usr/x 2>&1; touch /var/x 2>&1; touch $HOME/ok && echo home-ok; touch /tmp/ok && echo tmp-ok; \
         ps -e -o pid= | wc -l; \
         python3 -c \"import socket; s=socket.socket(); s.settimeout(3)\ntry:\n s.connect(('127.0.0.1', {port})); print('connected')\nexcept OSError as e: print('refused', type(e).__name__)\""
    );
    let r = call(&client, "exec", json!({"command": script})).await;
    let out = structured(&r)["stdout"].as_str().unwrap().to_string();
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines
            .iter()
            // /etc and /usr are read-only; /var is not there at all.
            .filter(|l| {
                l.contains("Read-only file system")
                    || l.contains("Permission denied")
                    || l.contains("/var/x': No such file or directory")
            })
            .count()
            >= 3,
        "{out}"
    );
    assert!(out.contains("home-ok") && out.contains("tmp-ok"), "{out}");
    let procs: usize = lines.iter().find_map(|l| l.trim().parse().ok()).unwrap();
    assert!(procs < 10, "host processes are visible: {procs}\n{out}");
    assert!(
        out.contains("refused ConnectionRefusedError") || out.contains("refused OSError"),
        "{out}"
    );
    drop(listener);
    client.cancel().await.unwrap();
}

/// A 4000x3000 PNG read with read_file comes back scaled within what a
/// model is shown (2000 px a side, the result under 1 MB), and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_image_file_is_shown_scaled_within_a_models_bounds() {
    if !need_root() {
        return;
    }
    let server = Server::new();
    let (client, _) = server.stdio(&[]).await;
    let script = "python3 -c \"import zlib,struct\n\
w,h=4000,3000\n\
row=b'\\x00'+bytes((i*7)%256 for i in range(w*3))\n\
def chunk(t,d): return struct.pack('>I',len(d))+t+d+struct.pack('>I',zlib.crc32(t+d))\n\
png=b'\\x89PNG\\r\\n\\x1a\\n'+chunk(b'IHDR',struct.pack('>IIBBBBB',w,h,8,2,0,0,0))+chunk(b'IDAT',zlib.compress(row*h,9))+chunk(b'IEND',b'')\n\
open('/tmp/big.png','wb').write(png)\"";
    call_ok(&client, "exec", json!({"command": script})).await;
    let r = call_ok(&client, "read_file", json!({"path": "/tmp/big.png"})).await;
    let said = text(&r);
    assert!(
        said.contains("4000x3000 pixels") && said.contains("shown scaled to 2000x1500"),
        "{said}"
    );
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image");
    let whole = serde_json::to_string(&r).unwrap().len();
    assert!(whole < 1_000_000, "the result is {whole} bytes");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    let shown = png_size(&bytes);
    assert_eq!(shown, (2000, 1500), "{}", image.mime_type);
    client.cancel().await.unwrap();
}

/// A PNG's width and height, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

on_each_provider!(bad_input_is_answered_in_words_and_the_session_goes_on);

async fn bad_input_is_answered_in_words_and_the_session_goes_on(server: Server) {
    let (client, _) = server.stdio(&[]).await;
    // An unknown tool is a protocol error naming the tools.
    let e = client
        .call_tool(rmcp::model::CallToolRequestParams::new("no_such_tool"))
        .await
        .unwrap_err();
    assert!(format!("{e}").contains("no_such_tool"), "{e}");
    let cases = [
        ("exec", json!({}), "command"),
        (
            "exec",
            json!({"command": "true", "timeout_ms": 99_999_999}),
            "timeout_ms",
        ),
        ("exec", json!({"command": 5}), "command"),
        ("read_file", json!({"path": "relative/x"}), "absolute"),
        ("process_read", json!({"id": "p999"}), "p999"),
        (
            "write_file",
            json!({"path": "/x", "content": "y", "extra": 1}),
            "extra",
        ),
    ];
    for (tool, a, words) in cases {
        call_refused(&client, tool, a, words).await;
    }
    call_ok(&client, "exec", json!({"argv": ["true"]})).await;
    client.cancel().await.unwrap();
}

on_each_provider!(a_computer_killed_from_outside_fails_that_call_and_the_next_call_makes_a_new_one);

async fn a_computer_killed_from_outside_fails_that_call_and_the_next_call_makes_a_new_one(
    server: Server,
) {
    let (client, _) = server.stdio(&[]).await;
    call_ok(&client, "exec", json!({"argv": ["true"]})).await;
    let first = server.computers();
    assert_eq!(first.len(), 1);
    // Kill the computer from outside: its first process on the host
    // (local), or the container (Docker).
    server.kill_computer(&first[0]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    a_call_fails_in_words_and_the_next_makes_a_new_computer(&client, "again").await;
    client.cancel().await.unwrap();
    wait_until("every computer's release", Duration::from_secs(20), || {
        server.computers().is_empty()
    });
}

on_each_provider!(calls_past_the_computers_pids_bound_wait_their_turn_and_all_answer);

/// 60 runs of `sleep 0.3` at once need 120 pids (a guard and a program
/// each) on a computer bounded to 48: each call waits in computerd's queue
/// until room comes, and every one answers with its program's exit. (The
/// queue is for starts: a program that forks once started meets the bound
/// as on any machine, so these programs do not fork.)
async fn calls_past_the_computers_pids_bound_wait_their_turn_and_all_answer(server: Server) {
    let (client, _) = server.stdio(&["--pids", "48"]).await;
    // The session's first command reads the login environment (a login
    // shell, which forks), here before the burst.
    let first = call(&client, "exec", json!({"command": "true"})).await;
    assert_eq!(structured(&first)["exit_code"], 0, "{}", text(&first));
    let calls = (0..60).map(|i| {
        let client = &client;
        // Half as argv, half as a plain command line (started without bash).
        let args = if i % 2 == 0 {
            json!({"argv": ["sleep", "0.3"]})
        } else {
            json!({"command": "sleep 0.3"})
        };
        async move { call(client, "exec", args).await }
    });
    let results = futures::future::join_all(calls).await;
    for r in &results {
        assert_eq!(structured(r)["exit_code"], 0, "{}", text(r));
        assert_eq!(structured(r)["timed_out"], false, "{}", text(r));
    }
    client.cancel().await.unwrap();
}

on_each_provider!(concurrent_first_calls_share_one_computer);

async fn concurrent_first_calls_share_one_computer(server: Server) {
    let (client, _) = server.stdio(&[]).await;
    let calls = (0..4).map(|i| {
        let client = &client;
        async move { call(client, "exec", json!({"argv": ["echo", format!("n{i}")]})).await }
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.iter().enumerate() {
        assert_eq!(structured(r)["stdout"], format!("n{i}\n"), "{}", text(r));
    }
    assert_eq!(server.computers().len(), 1, "{:?}", server.computers());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dockerd_restarted_under_a_live_session_is_answered_in_words_and_the_next_call_makes_a_new_computer()
 {
    if !need_root() {
        return;
    }
    let server = or_skip!(Server::docker());
    let _alone = DOCKER_ENGINE.write().await;
    let (client, _) = server.stdio(&[]).await;
    let r = call(&client, "exec", json!({"argv": ["echo", "before"]})).await;
    assert_eq!(structured(&r)["stdout"], "before\n", "{}", text(&r));
    // Stop the engine (its containers end with it), and start it again.
    ENGINE_RESTARTING.store(true, std::sync::atomic::Ordering::SeqCst);
    let back = DockerdBack;
    let pids = std::process::Command::new("pidof")
        .arg("dockerd")
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&pids.stdout).to_string();
    for pid in pids.split_whitespace() {
        let pid: i32 = pid.parse().unwrap();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM);
    }
    // Gone, process and all (a new one refuses to start beside its pid file).
    wait_until("dockerd to exit", Duration::from_secs(60), || {
        std::process::Command::new("pidof")
            .arg("dockerd")
            .output()
            .is_ok_and(|o| o.stdout.is_empty())
    });
    drop(back);
    ENGINE_RESTARTING.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(docker_up());
    a_call_fails_in_words_and_the_next_makes_a_new_computer(&client, "after").await;
    client.cancel().await.unwrap();
    // The new computer, and the one the stopped engine ended, are released.
    wait_until("every computer's release", Duration::from_secs(30), || {
        server.computers().is_empty()
    });
}

/// With the session's computer gone from under it: the next call fails
/// within 5 s saying so, and the one after makes a new computer that runs
/// `echo word`.
async fn a_call_fails_in_words_and_the_next_makes_a_new_computer(client: &Client, word: &str) {
    let t = Instant::now();
    let r = call(client, "exec", json!({"argv": ["true"]})).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the gone computer took {:?} to answer",
        t.elapsed()
    );
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("gone") || text(&r).contains("stopped answering"),
        "{}",
        text(&r)
    );
    let r = call_ok(client, "exec", json!({"argv": ["echo", word]})).await;
    assert!(text(&r).contains("a new computer"), "{}", text(&r));
    assert_eq!(structured(&r)["stdout"], format!("{word}\n"));
}

/// One blocking JSON-RPC exchange over the test's end of the server's stdio.
fn exchange(
    to: &mut impl std::io::Write,
    from: &mut impl std::io::BufRead,
    msg: serde_json::Value,
) -> Option<serde_json::Value> {
    let mut line = msg.to_string();
    line.push('\n');
    to.write_all(line.as_bytes()).unwrap();
    to.flush().unwrap();
    msg.get("id")?;
    loop {
        let mut reply = String::new();
        assert!(
            from.read_line(&mut reply).unwrap() > 0,
            "the server closed its stdout"
        );
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        if v.get("id") == msg.get("id") {
            return Some(v);
        }
    }
}

fn nonblocking(fd: &impl std::os::fd::AsFd) -> bool {
    let flags = nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
    nix::fcntl::OFlag::from_bits_truncate(flags).contains(nix::fcntl::OFlag::O_NONBLOCK)
}

/// Serve one session with `stdin` and `stdout` as the server's fd 0 and
/// 1 (the test keeps copies of the server's ends), run `echo` in it, and
/// check that the server left those ends blocking, as it found them.
fn a_session_over<W: std::io::Write>(
    server: &Server,
    (stdin, mut to): (std::os::fd::OwnedFd, W),
    (stdout, from): (std::os::fd::OwnedFd, impl std::io::Read),
    end_input: impl FnOnce(W),
) {
    let kept_in = stdin.try_clone().unwrap();
    let kept_out = stdout.try_clone().unwrap();
    let mut child = std::process::Command::new(SERVER)
        .arg("serve")
        .args(server.args())
        .stdin(std::process::Stdio::from(stdin))
        .stdout(std::process::Stdio::from(stdout))
        .spawn()
        .unwrap();
    let mut from = std::io::BufReader::new(from);
    let init = exchange(
        &mut to,
        &mut from,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fd-test", "version": "1"}}}),
    )
    .unwrap();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "computer-mcp",
        "{init}"
    );
    exchange(
        &mut to,
        &mut from,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let r = exchange(
        &mut to,
        &mut from,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "exec", "arguments": {"argv": ["echo", "over", "fds"]}}}),
    )
    .unwrap();
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["stdout"], "over fds\n", "{r}");
    assert_eq!(out["exit_code"], 0, "{r}");
    end_input(to);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        !nonblocking(&kept_in) && !nonblocking(&kept_out),
        "the server left its stdin or stdout non-blocking"
    );
}

#[test]
fn a_client_that_gives_stdio_as_a_socket_pair_is_served_and_gets_it_back_as_it_was() {
    if !need_root() {
        return;
    }
    // Node's child_process gives a child's stdio as a unix socket pair.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let theirs_out = theirs.try_clone().unwrap();
    let ours_read = ours.try_clone().unwrap();
    a_session_over(
        &Server::new(),
        (theirs.into(), ours),
        (theirs_out.into(), ours_read),
        // Its read copy stays open: the end of input is a shutdown.
        |ours| ours.shutdown(std::net::Shutdown::Write).unwrap(),
    );
}

#[test]
fn a_client_that_gives_stdio_as_pipes_is_served_and_gets_them_back_as_they_were() {
    if !need_root() {
        return;
    }
    // Close-on-exec, so the server holds no copy of the test's ends (it
    // would never see its stdin end).
    let cloexec = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let (in_r, in_w) = cloexec();
    let (out_r, out_w) = cloexec();
    a_session_over(
        &Server::new(),
        (in_r, std::fs::File::from(in_w)),
        (out_w, std::fs::File::from(out_r)),
        drop,
    );
}
