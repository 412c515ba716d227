//! Computers a model names, over real transports: stateless 2026-07-28
//! clients, handles and names, callers kept apart, a restart with `--keep`,
//! the bounds, idle release, and the terminal's `computers` command.

use std::time::Duration;

use serde_json::json;

use super::support::*;

const OTHER_TOKEN: &str = "other-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_keeps_its_work_between_calls_with_and_without_a_handle() {
    let s = or_skip!(HttpServer::start().await);
    let c = s.stateless(TOKEN);
    // server/discover answers with the instructions, and makes nothing.
    let d = c.rpc("server/discover", None, json!({})).await;
    let instructions = d["result"]["instructions"].as_str().unwrap_or_default();
    assert!(instructions.contains("computer_new"), "{d}");
    assert!(s.server.computers().is_empty());

    // Without a handle: the principal's default computer, across requests.
    let w = c
        .call("exec", json!({"command": "echo kept > /tmp/state.txt"}))
        .await;
    assert!(!jerror(&w), "{w}");
    let r = c
        .call("exec", json!({"command": "cat /tmp/state.txt"}))
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "kept\n", "{r}");
    let default = jhandle(&w);
    assert_eq!(jhandle(&r), default);
    assert!(
        jtext(&r).contains(&format!("(on computer default ({default}))")),
        "{r}"
    );
    assert_eq!(s.server.computers().len(), 1);

    // With its handle, and with the name `default`: the same computer.
    let r = c
        .call(
            "exec",
            json!({"command": "cat /tmp/state.txt", "computer": default}),
        )
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "kept\n", "{r}");
    let r = c
        .call(
            "read_file",
            json!({"path": "/tmp/state.txt", "computer": "default"}),
        )
        .await;
    assert!(jtext(&r).contains("kept"), "{r}");

    // A named computer is another machine; its handle and its name reach it.
    let made = c.call("computer_new", json!({"name": "build"})).await;
    assert!(!jerror(&made), "{made}");
    let build = made["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(build, default);
    let w = c
        .call(
            "exec",
            json!({"command": "echo built > /tmp/state.txt", "computer": build}),
        )
        .await;
    assert_eq!(jhandle(&w), build);
    let r = c
        .call(
            "exec",
            json!({"command": "cat /tmp/state.txt", "computer": "build"}),
        )
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "built\n", "{r}");
    let r = c
        .call("exec", json!({"command": "cat /tmp/state.txt"}))
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "kept\n", "{r}");
    assert_eq!(s.server.computers().len(), 2);
    s.stop_leaving_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_computers_are_apart_listed_and_released_and_a_released_handle_is_refused() {
    let s = or_skip!(HttpServer::start().await);
    let c = s.stateless(TOKEN);
    let a = c.call("computer_new", json!({"name": "alpha"})).await;
    let b = c.call("computer_new", json!({"name": "beta"})).await;
    let ha = a["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    let hb = b["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(jtext(&a).contains("Pass computer: \"alpha\""), "{a}");
    c.call(
        "write_file",
        json!({"path": "/tmp/only-alpha", "content": "a", "computer": "alpha"}),
    )
    .await;
    let r = c
        .call(
            "exec",
            json!({"argv": ["ls", "/tmp/only-alpha"], "computer": "beta"}),
        )
        .await;
    assert_ne!(r["structuredContent"]["exit_code"], 0, "{r}");
    assert_eq!(jhandle(&r), hb);

    let list = c.call("computer_list", json!({})).await;
    let listed = list["structuredContent"]["computers"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().filter_map(|x| x["name"].as_str()).collect();
    assert!(
        names.contains(&"alpha") && names.contains(&"beta"),
        "{list}"
    );
    assert!(jtext(&list).contains(&ha), "{list}");
    assert_eq!(s.server.computers().len(), 2);

    let gone = c
        .call("computer_release", json!({"computer": "alpha"}))
        .await;
    assert!(!jerror(&gone), "{gone}");
    // The release answers once the computer counts against no bound; the
    // provider's part (init's orderly shutdown) ends it soon after.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while s.server.computers().len() != 1 && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(s.server.computers().len(), 1);
    let r = c
        .call("exec", json!({"argv": ["true"], "computer": ha}))
        .await;
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains(&format!(
            "the computer {ha} was released (computer_release)"
        )),
        "{r}"
    );
    let r = c
        .call("exec", json!({"argv": ["true"], "computer": "alpha"}))
        .await;
    assert!(jerror(&r), "{r}");
    assert!(jtext(&r).contains("no computer \"alpha\" of yours"), "{r}");
    let list = c.call("computer_list", json!({})).await;
    assert!(!jtext(&list).contains(&ha), "{list}");
    assert!(jtext(&list).contains(&hb), "{list}");
    let (server, _) = s.stop().await;
    assert!(server.computers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_of_one_token_is_not_found_with_another_and_never_logged() {
    let s = HttpServer::start_on(or_skip!(Server::local()), &[], &[TOKEN, OTHER_TOKEN]).await;
    let mine = s.stateless(TOKEN);
    let theirs = s.stateless(OTHER_TOKEN);
    let made = mine.call("computer_new", json!({"name": "secret"})).await;
    let h = made["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    mine.call("exec", json!({"argv": ["true"], "computer": h}))
        .await;
    // The other caller: not by handle, not by name, not listed; the words
    // are those of a handle that never existed.
    let r = theirs
        .call("exec", json!({"argv": ["true"], "computer": h}))
        .await;
    assert!(jerror(&r), "{r}");
    let never = format!("c-{}", "0".repeat(32));
    let n = theirs
        .call("exec", json!({"argv": ["true"], "computer": never}))
        .await;
    assert_eq!(jtext(&r).replace(&h, "H"), jtext(&n).replace(&never, "H"));
    let r = theirs
        .call("exec", json!({"argv": ["true"], "computer": "secret"}))
        .await;
    assert!(jtext(&r).contains("no computer \"secret\" of yours"), "{r}");
    let list = theirs.call("computer_list", json!({})).await;
    assert!(!jtext(&list).contains(&h), "{list}");
    let r = theirs
        .call("computer_release", json!({"computer": h}))
        .await;
    assert!(jerror(&r), "{r}");
    // Each token has its own default computer.
    let d1 = mine.call("exec", json!({"argv": ["true"]})).await;
    let d2 = theirs.call("exec", json!({"argv": ["true"]})).await;
    assert_ne!(jhandle(&d1), jhandle(&d2));
    let (_, log) = s.stop().await;
    assert!(log.contains("computer made"), "{log}");
    for handle in [h, jhandle(&d1), jhandle(&d2)] {
        assert!(!log.contains(&handle), "a handle in the log:\n{log}");
    }
    assert!(!log.contains(TOKEN) && !log.contains(OTHER_TOKEN), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_computer_is_reached_by_its_handle_after_a_restart_and_released_from_a_terminal() {
    let s = HttpServer::start_on(or_skip!(Server::local()), &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let h = c.computer_new("keeper").await;
    c.call(
        "exec",
        json!({"command": "echo still-here > ~/note", "computer": h}),
    )
    .await;
    let d = c
        .call("exec", json!({"command": "echo default-too > ~/note"}))
        .await;
    let dh = jhandle(&d);
    let (server, _) = s.stop().await;
    assert_eq!(server.computers().len(), 2, "kept at the server's end");

    let s = HttpServer::start_on(server, &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let r = c
        .call("exec", json!({"command": "cat ~/note", "computer": h}))
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "still-here\n", "{r}");
    let r = c
        .call(
            "exec",
            json!({"command": "cat ~/note", "computer": "keeper"}),
        )
        .await;
    assert_eq!(jhandle(&r), h);
    // The principal's default computer is found again too.
    let r = c.call("exec", json!({"command": "cat ~/note"})).await;
    assert_eq!(r["structuredContent"]["stdout"], "default-too\n", "{r}");
    assert_eq!(jhandle(&r), dh);
    let (server, _) = s.stop().await;

    // From a terminal: listed with its handle and name, kept, released.
    let run = |args: &[&str]| {
        std::process::Command::new(SERVER)
            .arg("computers")
            .args(args)
            .args([
                "--local-state-dir",
                &server.state.path().display().to_string(),
            ])
            .output()
            .unwrap()
    };
    let out = run(&["list"]);
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    let line = listing
        .lines()
        .find(|l| l.contains(&h))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        line.contains("keeper") && line.contains("sandbox"),
        "{line}"
    );
    assert!(line.contains(" yes "), "kept: {line}");
    let out = run(&["release", &h, "nothing-by-this-name"]);
    assert!(
        !out.status.success(),
        "an unknown name fails the command: {out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no computer \"nothing-by-this-name\""),
        "{out:?}"
    );
    assert_eq!(server.computers().len(), 1);
    let out = run(&["release", &dh]);
    assert!(out.status.success(), "{out:?}");
    assert!(server.computers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifth_computer_of_a_caller_and_one_past_the_servers_bound_are_refused() {
    let s = HttpServer::start_on(
        or_skip!(Server::local()),
        &["--max-server-computers", "5"],
        &[TOKEN, OTHER_TOKEN],
    )
    .await;
    let c = s.stateless(TOKEN);
    let mut handles = Vec::new();
    for i in 0..4 {
        let r = c
            .call("computer_new", json!({"name": format!("n{i}")}))
            .await;
        assert!(!jerror(&r), "{r}");
        handles.push(
            r["structuredContent"]["handle"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let r = c.call("computer_new", json!({"name": "n4"})).await;
    assert!(jerror(&r), "{r}");
    let t = jtext(&r);
    assert!(
        t.contains("you hold 4 computers, the most one caller may (--max-computers 4)"),
        "{t}"
    );
    assert!(t.contains(&handles[0]) && t.contains("n3"), "{t}");
    // The default computer counts too.
    let r = c.call("exec", json!({"argv": ["true"]})).await;
    assert!(jerror(&r) && jtext(&r).contains("--max-computers 4"), "{r}");
    // Another caller fits once, then meets the server's bound.
    let o = s.stateless(OTHER_TOKEN);
    let r = o.call("computer_new", json!({"name": "n0"})).await;
    assert!(!jerror(&r), "{r}");
    let r = o.call("computer_new", json!({"name": "n1"})).await;
    assert!(
        jtext(&r).contains("this server holds 5 computers, its most (--max-server-computers 5)"),
        "{r}"
    );
    assert_eq!(s.server.computers().len(), 5);
    // A name is one computer's.
    let r = o.call("computer_new", json!({"name": "n0"})).await;
    assert!(
        jtext(&r).contains("you have a computer named n0 already"),
        "{r}"
    );
    // Releasing one makes room.
    c.call("computer_release", json!({"computer": "n0"})).await;
    let r = c.call("computer_new", json!({"name": "n4"})).await;
    assert!(!jerror(&r), "{r}");
    let (server, _) = s.stop().await;
    assert!(server.computers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computers_unused_for_the_idle_time_are_released_and_said_so() {
    let s = or_skip!(HttpServer::start_with(&["--session-idle", "2s"]).await);
    let c = s.stateless(TOKEN);
    let made = c.call("computer_new", json!({"name": "brief"})).await;
    let h = made["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    let d = c.call("exec", json!({"argv": ["true"]})).await;
    let dh = jhandle(&d);
    assert_eq!(s.server.computers().len(), 2);
    wait_until(
        "the idle computers' release",
        Duration::from_secs(30),
        || s.server.computers().is_empty(),
    );
    let r = c
        .call("exec", json!({"argv": ["true"], "computer": h}))
        .await;
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains("was released (unused for 2000 ms (--session-idle))"),
        "{r}"
    );
    // The default computer is made again, and the call says so.
    let r = c.call("exec", json!({"argv": ["echo", "again"]})).await;
    assert!(!jerror(&r), "{r}");
    assert_ne!(jhandle(&r), dh);
    assert!(
        jtext(&r).contains(&format!("the computer default ({dh}) was released")),
        "{r}"
    );
    let (_, log) = s.stop().await;
    assert!(
        log.contains("reason=\"unused for 2000 ms (--session-idle)\""),
        "{log}"
    );
    assert!(log.contains("brief (local-"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_computer_arguments_are_refused_in_words_and_make_nothing() {
    let Some((server, client, _)) = Server::local_stdio(&[]).await else {
        return;
    };
    let cases: [(&str, serde_json::Value, &str); 9] = [
        (
            "exec",
            json!({"argv": ["true"], "computer": "c-0123456789abcdef0123"}),
            "looks like a handle but is not one",
        ),
        (
            "exec",
            json!({"argv": ["true"], "computer": "nobody"}),
            "no computer \"nobody\" of yours",
        ),
        (
            "exec",
            json!({"argv": ["true"], "computer": "x".repeat(65)}),
            "is 65 bytes; a name is at most 64",
        ),
        (
            "exec",
            json!({"argv": ["true"], "computer": "Bad Name"}),
            "has 'B'; a name is 1 to 64 characters of a-z, 0-9, '-' and '_'",
        ),
        (
            "computer_new",
            json!({"name": "Bad Name"}),
            "name \"Bad Name\" has 'B'",
        ),
        (
            "computer_new",
            json!({"kind": "desktop"}),
            "kind \"desktop\" is not offered by this server; it offers: sandbox",
        ),
        (
            "computer_new",
            json!({"lifetime_minutes": 100000}),
            "lifetime_minutes 100000 is past this server's most, 360 (6 h)",
        ),
        (
            "computer_new",
            json!({"network": "open"}),
            "network \"open\" is wider than this server allows; it allows: none",
        ),
        (
            "computer_release",
            json!({"computer": "nobody"}),
            "no computer \"nobody\" of yours",
        ),
    ];
    for (tool, a, want) in cases {
        call_refused(&client, tool, a.clone(), want).await;
        assert!(server.computers().is_empty(), "{tool} {a} made a computer");
    }
    // stdio runs the same fleet: a named computer, then the default.
    call_ok(&client, "computer_new", json!({"name": "side"})).await;
    let r = call(
        &client,
        "exec",
        json!({"argv": ["true"], "computer": "side"}),
    )
    .await;
    assert!(text(&r).contains("(on computer side (c-"), "{}", text(&r));
    assert_eq!(server.computers().len(), 1);
    client.cancel().await.unwrap();
    wait_until("the stdio server's end", Duration::from_secs(20), || {
        server.computers().is_empty()
    });
}

#[test]
fn a_stateless_client_over_stdio_keeps_its_default_computer() {
    if !need_root() {
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    let server = Server::new();
    let mut child = std::process::Command::new(SERVER)
        .arg("serve")
        .args(server.args())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut ask = |id: u64, command: &str| {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "exec", "arguments": {"command": command}, "_meta": meta}});
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    // No initialize: each request says its revision.
    let w = ask(1, "echo over-stdio > /tmp/s");
    assert!(w.get("result").is_some(), "{w}");
    let r = ask(2, "cat /tmp/s");
    assert_eq!(
        r["result"]["structuredContent"]["stdout"], "over-stdio\n",
        "{r}"
    );
    assert_eq!(server.computers().len(), 1);
    drop(stdin);
    let _ = child.wait();
    wait_until("the stdio server's end", Duration::from_secs(20), || {
        server.computers().is_empty()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_over_one_provider_serve_the_same_handle() {
    let a = or_skip!(HttpServer::start().await);
    // A second server over the same provider state, with its own instance.
    let b = HttpServer::start_on(Server::replica_of(&a.server), &[], &[TOKEN]).await;
    let ca = a.stateless(TOKEN);
    let cb = b.stateless(TOKEN);
    let h = ca.computer_new("shared").await;
    ca.call(
        "exec",
        json!({"command": "echo from-a > ~/f", "computer": h}),
    )
    .await;
    let r = cb
        .call("exec", json!({"command": "cat ~/f", "computer": h}))
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "from-a\n", "{r}");
    let r = cb
        .call("exec", json!({"command": "cat ~/f", "computer": "shared"}))
        .await;
    assert_eq!(jhandle(&r), h);
    // Released through B, it is gone for A too (once B's release has run
    // on: the release answers before the provider is done).
    cb.call("computer_release", json!({"computer": h})).await;
    ca.gone_soon(&h).await;
    let (_, _) = b.stop().await;
    a.stop_leaving_none().await;
}
