//! Background and interactive processes end to end.

use computerd::client::ComputerExt;
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_loop_is_started_read_listed_and_signalled() {
    let s = or_skip!(Sandbox::start().await);
    let (t, v, id) = s.start_process(json!({"command": "for i in $(seq 1 1000); do echo tick $i; sleep 0.2; done", "env": s.env()})).await;
    assert_starts(&t, &format!("started {id} (pid "));
    let log = v["log_file"].as_str().unwrap().to_string();
    assert!(log.starts_with("/tmp/computer-mcp/process-") && log.ends_with(".log"));
    assert_eq!(v["pty"], false);

    let (seen, since) = read_until(&s, &id, "tick 2\n").await;
    assert_starts(&seen, "tick 1\ntick 2\n");
    // From `since`, only what came after.
    let (t, v) = s.read_from(&id, since, 3000).await;
    assert_starts(&t, &format!("{id} is running. Output {since}-"));
    // A read takes what follows its first output within 0.2 s too, so the
    // ticks seen so far may be more than two: the next read goes on from there.
    let last: u32 = seen
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("tick "))
        .unwrap()
        .parse()
        .unwrap();
    let want = format!("tick {}\n", last + 1);
    assert!(v["output"].as_str().unwrap().starts_with(&want), "{v}");
    assert_eq!(v["exited"], false);
    assert_eq!(v["stream"], "log");

    let (t, v) = s.ok("process_list", json!({})).await;
    assert_starts(&t, "1 process (1 running), oldest first:\n");
    assert!(
        t.contains("for i in $(seq 1 1000); do echo tick $i; sleep 0.2; done"),
        "{t}"
    );
    assert_eq!(v["processes"][0]["id"], id.as_str());
    assert_eq!(v["processes"][0]["running"], true);

    let (t, v) = s
        .ok("process_signal", json!({"id": id, "signal": "TERM"}))
        .await;
    assert_eq!(
        t,
        format!("sent TERM to {id}; it was ended by signal TERM.")
    );
    assert_eq!(
        (v["running"].as_bool(), v["ended_by"].as_str()),
        (Some(false), Some("TERM"))
    );

    // Read to the end: the process has exited, and how is said.
    let mut since = 0;
    let v = loop {
        let (_, v) = s.read_from(&id, since, 2000).await;
        since = v["next_offset"].as_u64().unwrap();
        if v["exited"] == true {
            break v;
        }
    };
    assert_eq!(v["signal"], "TERM");
    let (_, v) = s.ok("process_list", json!({})).await;
    assert_eq!(v["processes"][0]["running"], false);
    assert_eq!(v["processes"][0]["signal"], "TERM");
    // The log file holds the output too.
    let logged = s.client.read_file(&log).await.unwrap();
    assert!(logged.starts_with(b"tick 1\ntick 2\ntick 3\n"));
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_http_server_runs_in_the_background() {
    let s = or_skip!(Sandbox::start().await);
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no /usr/bin/python3 on this machine");
        return;
    }
    let (_, v, id) = s
        .start_process(
            json!({"command": "python3 -u -m http.server 0 --bind 127.0.0.1", "env": s.env()}),
        )
        .await;
    let log = v["log_file"].as_str().unwrap().to_string();
    let (seen, _) = read_until(&s, &id, "Serving HTTP on 127.0.0.1 port ").await;
    let port: u16 = seen
        .split("port ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {seen:?}"));
    let (_, r) = s
        .ok(
            "exec",
            json!({"argv": ["python3", "-c", format!("import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/').status)")]}),
        )
        .await;
    assert_eq!(r["stdout"], "200\n");
    let (seen, _) = read_until(&s, &id, "\"GET / HTTP/1.1\" 200").await;
    assert_has(&seen, "Serving HTTP");
    let (_, v) = s
        .ok("process_signal", json!({"id": id, "signal": "TERM"}))
        .await;
    assert_eq!(v["running"], false);
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_write_feeds_a_cat_and_close_ends_it() {
    let s = or_skip!(Sandbox::start().await);
    let (_, v, id) = s
        .start_process(json!({"argv": ["cat"], "env": s.env()}))
        .await;
    let log = v["log_file"].as_str().unwrap().to_string();
    let (t, v) = s
        .ok("process_write", json!({"id": id, "input": "hello\n"}))
        .await;
    assert_eq!(
        t,
        format!("wrote 6 bytes to {id}; read the answer with process_read.")
    );
    assert_eq!(v, json!({"id": id, "bytes_written": 6, "closed": false}));
    let (seen, since) = read_until(&s, &id, "hello\n").await;
    assert_eq!(seen, "hello\n");
    let (_, v) = s
        .ok(
            "process_write",
            json!({"id": id, "input": "bye\n", "close": true}),
        )
        .await;
    assert_eq!(v["closed"], true);
    let (t, v) = s.read_from(&id, since, 5000).await;
    assert_eq!(v["output"], "bye\n");
    // The end comes with the last output or right after it.
    let v = if v["exited"] == true {
        v
    } else {
        let next = v["next_offset"].as_u64().unwrap();
        s.read_from(&id, next, 5000).await.1
    };
    assert_eq!(
        (v["exited"].as_bool(), v["exit_code"].as_i64()),
        (Some(true), Some(0)),
        "{t}"
    );
    // It has ended: nothing is written, and the words say how it ended.
    let t = s
        .err("process_write", json!({"id": id, "input": "more\n"}))
        .await;
    assert_starts(
        &t,
        &format!("{id} has exited with code 0, so nothing was written."),
    );
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_to_a_program_that_has_ended_is_refused_even_in_a_terminal() {
    let s = or_skip!(Sandbox::start().await);
    // A terminal outlives its program: bytes written to it are taken, by
    // nobody who reads them.
    let (_, _, id) = s
        .start_process(json!({"command": "echo started", "pty": true, "env": s.env()}))
        .await;
    let (_, v) = s
        .ok("process_read", json!({"id": id, "wait_ms": 10000}))
        .await;
    let v = if v["exited"] == true {
        v
    } else {
        s.ok("process_read", json!({"id": id, "wait_ms": 10000}))
            .await
            .1
    };
    assert_eq!(v["exited"], true, "{v}");
    let t = s
        .err("process_write", json!({"id": id, "input": "hello\n"}))
        .await;
    assert_eq!(
        t,
        format!(
            "{id} has exited with code 0, so nothing was written. Its output is still there for process_read; start the program again with process_start to give it input."
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_come_together_in_order() {
    let s = or_skip!(Sandbox::start().await);
    let (_, v, id) = s
        .start_process(
            json!({"command": "echo out; sleep 0.1; echo err >&2; sleep 0.1; echo out2; exit 7"}),
        )
        .await;
    let log = v["log_file"].as_str().unwrap().to_string();
    let (seen, since) = read_until(&s, &id, "out2\n").await;
    assert_eq!(seen, "out\nerr\nout2\n");
    let (t, v) = s.read_from(&id, since, 5000).await;
    assert_eq!(t, format!("{id} has exited with code 7. No more output.\n"));
    assert_eq!(v["exit_code"], 7);
    // Past the end is refused with what to pass instead.
    s.err_has(
        "process_read",
        json!({"id": id, "since": since + 100}),
        "pass the next_offset of the last process_read",
    )
    .await;
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_in_a_terminal_answers_what_is_typed() {
    let s = or_skip!(Sandbox::start().await);
    let (t, v, id) = s
        .start_process(
            json!({"argv": ["sh", "-i"], "pty": {"cols": 80, "rows": 24}, "env": s.env()}),
        )
        .await;
    assert_has(&t, "in a 80x24 terminal");
    assert_eq!((v["pty"].as_bool(), v.get("log_file")), (Some(true), None));
    s.ok(
        "process_write",
        json!({"id": id, "input": "echo hi$((40+2))\n"}),
    )
    .await;
    let (seen, _) = read_until(&s, &id, "hi42").await;
    assert!(
        seen.contains("echo hi$((40+2))"),
        "the terminal echoes the input: {seen:?}"
    );
    // A terminal has no stdin to close: the daemon says so.
    let t = s
        .err("process_write", json!({"id": id, "close": true}))
        .await;
    assert_starts(&t, &format!("writing to {id}: "));
    // ^D ends the shell.
    s.ok("process_write", json!({"id": id, "input": "\u{4}"}))
        .await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut since = 0;
    loop {
        let (_, v) = s.read_from(&id, since, 1000).await;
        assert_eq!(v["stream"], "pty");
        since = v["next_offset"].as_u64().unwrap();
        if v["exited"] == true {
            assert_eq!(v["exit_code"], 0);
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the shell did not end on ^D"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_ignores_term_is_ended_with_kill() {
    let s = or_skip!(Sandbox::start().await);
    let (_, v, id) = s
        .start_process(json!({"command": "trap '' TERM; echo ready; sleep 60", "env": s.env()}))
        .await;
    let log = v["log_file"].as_str().unwrap().to_string();
    read_until(&s, &id, "ready").await;
    let (t, v) = s
        .ok("process_signal", json!({"id": id, "signal": "TERM"}))
        .await;
    assert_eq!(
        t,
        format!("sent TERM to {id}; it is still running (send KILL to end it at once).")
    );
    assert_eq!(v["running"], true);
    // As a shell writes it: SIGKILL (9 and "kill" mean the same).
    let (t, v) = s
        .ok("process_signal", json!({"id": id, "signal": "SIGKILL"}))
        .await;
    assert_eq!(
        t,
        format!("sent KILL to {id}; it was ended by signal KILL.")
    );
    assert_eq!(v["ended_by"], "KILL");
    // Signalling it again: the daemon's note says nothing was signalled.
    let (t, v) = s
        .ok("process_signal", json!({"id": id, "signal": "TERM"}))
        .await;
    assert!(v["note"].as_str().unwrap().contains("has ended"), "{t}");
    std::fs::remove_file(&log).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_without_since_goes_on_where_the_last_read_ended() {
    let s = or_skip!(Sandbox::start().await);
    let (_, _, id) = s.start_process(json!({"command": "echo one; sleep 0.5; echo two; sleep 0.5; echo three; sleep 30", "env": s.env()})).await;
    let mut seen = String::new();
    let mut starts = Vec::new();
    for _ in 0..40 {
        let (_, v) = s
            .ok("process_read", json!({"id": id, "wait_ms": 1000}))
            .await;
        starts.push(v["since"].as_u64().unwrap());
        seen.push_str(v["output"].as_str().unwrap());
        if seen.contains("three\n") {
            break;
        }
    }
    // Each line once, in order: no poll started again at 0.
    assert_eq!(seen, "one\ntwo\nthree\n", "{starts:?}");
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    // `since` still reads from anywhere.
    let (_, v) = s.read_from(&id, 0, 0).await;
    assert_eq!(v["output"], "one\ntwo\nthree\n");
    let (_, v) = s.ok("process_read", json!({"id": id, "wait_ms": 0})).await;
    assert_eq!(v["output"], "", "{v}");
    s.ok("process_signal", json!({"id": id, "signal": "KILL"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_true_is_a_terminal_of_the_default_size() {
    let s = or_skip!(Sandbox::start().await);
    let (_, v) = s
        .ok(
            "process_start",
            json!({"argv": ["sh", "-c", "stty size; sleep 30"], "pty": true, "env": s.env()}),
        )
        .await;
    assert_eq!(v["pty"], true, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let (seen, _) = read_until(&s, &id, "40 120").await;
    assert_has(&seen, "40 120");
    let (_, v) = s
        .ok(
            "process_start",
            json!({"argv": ["true"], "pty": false, "env": s.env()}),
        )
        .await;
    assert_eq!(v["pty"], false, "{v}");
    s.ok("process_signal", json!({"id": id, "signal": "KILL"}))
        .await;
}
