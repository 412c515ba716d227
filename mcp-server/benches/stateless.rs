//! A warm `exec` of `true` over streamable HTTP, three ways, interleaved in
//! one run against one server: a 2025-11-25 session client (rmcp's), a
//! 2026-07-28 stateless client (no session: each request says its revision
//! and the server finds the caller's default computer), and the stateless
//! client naming the computer by its handle. The last two differ by the
//! handle lookup alone.
//!
//! Run on demand (never part of `cargo test`), as root like the tests:
//!
//!     cargo bench -p computer-mcp --bench stateless
//!
//! `CMCP_BENCH_CALLS` sets the warm calls of each way (default 300);
//! `COMPUTERD_BIN` the daemon (default: the one beside the server).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

#[path = "support.rs"]
mod support;
use support::{count_from_env, line, ms, server_cmd};

const TOKEN: &str = "bench-token-0123456789abcdef";

/// One 2026-07-28 tools/call of exec `true`, optionally on `computer`.
async fn stateless_exec(http: &reqwest::Client, url: &str, computer: Option<&str>) -> Value {
    let mut arguments = json!({"argv": ["true"]});
    if let Some(c) = computer {
        arguments["computer"] = json!(c);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "exec", "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }}});
    let text = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "exec")
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no response in {text}"));
    assert_eq!(v["result"]["isError"], false, "{v}");
    v
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls = count_from_env("CMCP_BENCH_CALLS", 300);
    let state = tempfile::Builder::new()
        .prefix("cmcp-bench")
        .tempdir()
        .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let mut child = server_cmd(state.path(), &["--http", &address])
        .env("COMPUTER_MCP_TOKEN", TOKEN)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN.to_string()),
    );
    let session = ().serve(transport).await.unwrap();
    let exec = || {
        let args = json!({"argv": ["true"]});
        CallToolRequestParams::new("exec").with_arguments(args.as_object().unwrap().clone())
    };
    let http = reqwest::Client::new();
    // Warm both computers (the session's and the principal's default).
    session.call_tool(exec()).await.unwrap();
    let first = stateless_exec(&http, &url, None).await;
    let handle = first["result"]["_meta"]["computer-mcp/computer"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..20 {
        session.call_tool(exec()).await.unwrap();
        stateless_exec(&http, &url, None).await;
        stateless_exec(&http, &url, Some(&handle)).await;
    }

    let (mut sess, mut bare, mut by_handle) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..calls {
        let t = Instant::now();
        let r = session.call_tool(exec()).await.unwrap();
        sess.push(t.elapsed());
        assert_eq!(r.is_error, Some(false));
        let t = Instant::now();
        stateless_exec(&http, &url, None).await;
        bare.push(t.elapsed());
        let t = Instant::now();
        stateless_exec(&http, &url, Some(&handle)).await;
        by_handle.push(t.elapsed());
    }
    println!("warm exec of `true` over streamable HTTP, {calls} calls each, interleaved:");
    let s = line("2025-11-25 session client (rmcp)", &mut sess);
    let b = line("2026-07-28 stateless, no computer named", &mut bare);
    let h = line("2026-07-28 stateless, computer: <handle>", &mut by_handle);
    println!(
        "stateless vs session: {:+.3} ms ({:.2}x); the handle lookup adds {:+.3} ms (target: under 0.2 ms)",
        ms(b) - ms(s),
        ms(b) / ms(s),
        ms(h) - ms(b)
    );
    session.cancel().await.unwrap();
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}
