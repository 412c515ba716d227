//! Malformed messages over real stdio and HTTP: each gets a JSON-RPC error
//! (stdio) or a 400 in words (HTTP), and the server goes on serving.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

use super::support::*;

/// A `computer-mcp serve` over pipes, initialized.
struct Stdio {
    child: std::process::Child,
    to: std::process::ChildStdin,
    /// The server's lines, read by a thread of their own, so a line with no
    /// answer fails the test instead of hanging it.
    from: std::sync::mpsc::Receiver<String>,
}

/// The promise checked: an answer comes, and this is generous for it.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

impl Stdio {
    /// Started, not yet initialized.
    fn spawn(server: &Server) -> Stdio {
        let mut child = std::process::Command::new(SERVER)
            .arg("serve")
            .args(server.args())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, from) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Stdio { child, to, from }
    }

    /// Started and initialized (2025-06-18's `initialize`).
    fn start(server: &Server) -> Stdio {
        let mut s = Stdio::spawn(server);
        let init = s.ask(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "malformed", "version": "1"}}})
            .to_string()
            .into_bytes(),
        );
        assert_eq!(init["id"], 1, "{init}");
        s.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    fn send(&mut self, line: &[u8]) {
        self.to.write_all(line).unwrap();
        self.to.write_all(b"\n").unwrap();
        self.to.flush().unwrap();
    }

    /// Send one line; the next answer the server writes (a notification
    /// it sends meanwhile, such as a changed resource list, is passed by).
    fn ask(&mut self, line: &[u8]) -> Value {
        self.send(line);
        let what = String::from_utf8_lossy(&line[..line.len().min(60)]).into_owned();
        loop {
            let reply = self
                .from
                .recv_timeout(ANSWER_WITHIN)
                .unwrap_or_else(|e| panic!("no answer to {what:?} ({e})"));
            let v: Value = serde_json::from_str(&reply).unwrap();
            if v.get("method").is_none() {
                return v;
            }
        }
    }
}

/// A 2026-07-28 client on stdio: no `initialize`, `server/discover` first,
/// then requests that each carry their protocol version and client in
/// `_meta` (rmcp's inline lifecycle). The server answers them all, a tool
/// call included; the older `initialize` works on its own pipe (every other
/// test here).
#[test]
fn a_2026_07_28_client_discovers_and_calls_on_stdio_without_initialize() {
    let server = or_skip!(Server::local());
    let mut s = Stdio::spawn(&server);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "discover", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let ask = |s: &mut Stdio, id: u64, method: &str, mut params: Value| {
        params["_meta"] = meta.clone();
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        s.ask(m.to_string().as_bytes())
    };
    let found = ask(&mut s, 1, "server/discover", json!({}));
    let versions = &found["result"]["supportedVersions"];
    assert!(
        versions
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28")) && v.contains(&json!("2025-06-18"))),
        "{found}"
    );
    assert!(
        found["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/skills"].is_object(),
        "{found}"
    );
    assert!(
        found["result"]["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("skill://sandbox/SKILL.md")),
        "{found}"
    );
    let listed = ask(&mut s, 2, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"exec"), "{names:?}");
    let ran = ask(
        &mut s,
        3,
        "tools/call",
        json!({"name": "exec", "arguments": {"command": "echo discovered"}}),
    );
    assert_eq!(
        ran["result"]["structuredContent"]["stdout"], "discovered\n",
        "{ran}"
    );
    // A request without the per-request _meta is refused in words.
    let bare = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}});
    let v = s.ask(bare.to_string().as_bytes());
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("io.modelcontextprotocol/protocolVersion")),
        "{v}"
    );
    drop(s.to);
    assert!(s.child.wait().unwrap().success());
}

#[test]
fn every_malformed_stdio_line_is_answered_and_the_server_goes_on() {
    let server = or_skip!(Server::local());
    let mut s = Stdio::start(&server);
    let too_long = vec![b'x'; 16 * 1024 * 1024 + 1];
    let spaces = vec![b' '; 100_000];
    let null = Value::Null;
    let cases: Vec<(&str, &[u8], i64, Value)> = vec![
        ("a lone {", b"{", -32700, null.clone()),
        ("invalid UTF-8", b"\xff\xfe\x00{}", -32700, null.clone()),
        (
            "trailing bytes",
            br#"{"jsonrpc":"2.0","id":9,"method":"ping"} x"#,
            -32700,
            null.clone(),
        ),
        ("100 KB of spaces", &spaces, -32700, null.clone()),
        (
            "an object id",
            br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            -32600,
            null.clone(),
        ),
        (
            "a fraction id",
            br#"{"jsonrpc":"2.0","id":0.5,"method":"ping"}"#,
            -32600,
            null.clone(),
        ),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
            -32600,
            null.clone(),
        ),
        ("a number", b"42", -32600, null.clone()),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
            -32600,
            json!(5),
        ),
        (
            "no method",
            br#"{"jsonrpc":"2.0","id":"six"}"#,
            -32600,
            json!("six"),
        ),
        ("a line over 16 MiB", &too_long, -32600, null.clone()),
    ];
    for (n, (what, line, code, id)) in cases.into_iter().enumerate() {
        let v = s.ask(line);
        assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
        assert_eq!(v["error"]["code"], code, "{what}: {v}");
        assert_eq!(v["id"], id, "{what}: {v}");
        let words = v["error"]["message"].as_str().unwrap_or_default();
        assert!(words.len() > 30, "{what}: {v}");
        if what.contains("16 MiB") {
            assert!(words.contains("longer than 16777216 bytes"), "{v}");
        }
        // And the server goes on.
        let ping = json!({"jsonrpc": "2.0", "id": 100 + n, "method": "ping"});
        let v = s.ask(ping.to_string().as_bytes());
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 100 + n, "result": {}}),
            "after {what}"
        );
    }
    // A tool call whose message to the computer would be over the 1 MiB a
    // line may hold is answered in words (the daemon could not say which
    // call its refusal was for, and the call waited forever).
    let command = format!("echo {}", "x".repeat(1_100_000));
    let call = json!({"jsonrpc": "2.0", "id": 200, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": command}}});
    let v = s.ask(call.to_string().as_bytes());
    assert_eq!(
        v["result"]["isError"],
        true,
        "{}",
        &v.to_string()[..300.min(v.to_string().len())]
    );
    let words = v["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        words.contains("over the 1048576 bytes one message to the computer may hold"),
        "{words}"
    );
    drop(s.to);
    assert!(s.child.wait().unwrap().success());
}

/// What a client sends that the server refuses as it should (a tool that
/// does not exist, a method this server does not serve) is the client's
/// mistake, answered to it: not a warning in the server's log.
#[test]
fn a_clients_refused_requests_are_no_warnings_in_the_log() {
    let mut child = std::process::Command::new(SERVER)
        .args(["serve", "--log", "info"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = child.stdin.take().unwrap();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2026-07-28", "capabilities": {},
            "clientInfo": {"name": "warnings", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "format_disk", "arguments": {}}}),
    ] {
        writeln!(to, "{m}").unwrap();
    }
    // Every request answered, then the end of input ends it.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ids = Vec::new();
    while ids.len() < 3 {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "{ids:?}");
        let v: Value = serde_json::from_str(&line).unwrap();
        ids.push(v["id"].as_i64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3]);
    drop(to);
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success(), "{done:?}");
    let log = String::from_utf8_lossy(&done.stderr);
    assert!(
        !log.contains(" WARN ") && !log.contains("ErrorData {"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_that_is_not_one_message_is_a_400_in_words() {
    let mut s = or_skip!(HttpServer::start().await);
    let http = reqwest::Client::new();
    let send = |body: String, content_type: &str| {
        http.post(&s.url)
            .header("content-type", content_type)
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", s.token))
            .body(body)
            .send()
    };
    let truncated = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protoc"#;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let batch = Value::Array(vec![ping; 1000]).to_string();
    for (what, body) in [
        ("truncated JSON", truncated.to_string()),
        ("a batch of 1000", batch),
    ] {
        let r = send(body, "application/json").await.unwrap();
        let status = r.status().as_u16();
        let words = r.text().await.unwrap();
        assert_eq!(status, 400, "{what}: {words}");
        assert!(
            words.starts_with("the body is not one JSON-RPC message:"),
            "{what}: {words}"
        );
    }
    // A wrong Content-Type is still what 415 means.
    let r = send(HttpServer::initialize_body().to_string(), "text/plain")
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    // And the server goes on.
    let (status, sid, body) =
        mcp_post(&http, &s.url, &s.token, None, HttpServer::initialize_body()).await;
    assert_eq!(status, 200, "{body}");
    assert!(sid.is_some());
    let _ = s.child.start_kill();
    let _ = s.child.wait().await;
}
