//! The server over streamable HTTP: auth, Host and Origin, and a session.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_needs_a_token_and_checks_host_and_origin() {
    let s = or_skip!(HttpServer::start().await);
    let http = reqwest::Client::new();
    let post = |auth: Option<&str>, origin: Option<&str>, host: Option<&str>| {
        let mut rq = http
            .post(&s.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&HttpServer::initialize_body());
        if let Some(t) = auth {
            rq = rq.header("authorization", format!("Bearer {t}"));
        }
        if let Some(o) = origin {
            rq = rq.header("origin", o);
        }
        if let Some(h) = host {
            rq = rq.header("host", h);
        }
        rq.send()
    };
    let missing = post(None, None, None).await.unwrap();
    // 403 with words, no challenge: a 401 sends SDK clients into an OAuth
    // flow this server does not offer.
    assert_eq!(missing.status(), 403);
    assert!(missing.headers().get("www-authenticate").is_none());
    assert!(missing.text().await.unwrap().starts_with("no bearer token"));
    let wrong = post(Some("wrong-token-0123456789"), None, None)
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);
    assert!(wrong.headers().get("www-authenticate").is_none());
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("is not one of this server's")
    );
    assert_eq!(
        post(Some(&s.token), Some("http://evil.example"), None)
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        post(Some(&s.token), None, Some("evil.example"))
            .await
            .unwrap()
            .status(),
        403
    );
    let ok = post(Some(&s.token), Some("http://localhost:6274"), None)
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "{:?}", ok.text().await);
    assert!(s.server.computers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_session_runs_tools_and_its_computer_goes_with_it() {
    let s = or_skip!(HttpServer::start().await);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url.clone()).auth_header(s.token.clone()),
    );
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "exec"));
    assert!(s.server.computers().is_empty());
    let mut p = rmcp::model::CallToolRequestParams::new("exec");
    p = p.with_arguments(args(json!({"command": "echo over-http"})).unwrap());
    let r = client.call_tool(p).await.unwrap();
    assert_eq!(structured(&r)["stdout"], "over-http\n", "{}", text(&r));
    assert_eq!(s.server.computers().len(), 1);
    // Closing the client ends the session (DELETE): the computer goes.
    client.cancel().await.unwrap();
    s.end_when_released(
        "the HTTP session's computer release",
        Duration::from_secs(20),
    )
    .await;
}

/// POST one JSON-RPC message; the body (SSE or JSON) as text.
async fn post(
    http: &reqwest::Client,
    s: &HttpServer,
    session: Option<&str>,
    body: serde_json::Value,
) -> (u16, Option<String>, String) {
    mcp_post(http, &s.url, &s.token, session, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http_session_expires_and_its_computer_is_released() {
    let s = or_skip!(HttpServer::start_with(&["--session-idle", "2s"]).await);
    let http = reqwest::Client::new();
    let sid = open_session(&http, &s.url, &s.token).await.unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec", "arguments": {"argv": ["echo", "idle"]}}});
    let (status, _, body) = post(&http, &s, Some(&sid), call).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("idle"), "{body}");
    assert_eq!(s.server.computers().len(), 1);
    // Nobody calls for the idle time: the session ends and takes its computer.
    s.end_when_released(
        "the idle session's computer release",
        Duration::from_secs(30),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let server = Server::new();
    let out = tokio::process::Command::new(SERVER)
        .arg("serve")
        .args(server.args())
        .arg("--http")
        .arg(addr.to_string())
        .env("COMPUTER_MCP_TOKEN", TOKEN)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--http {addr}: the address is in use")),
        "{err}"
    );
}

/// A client's DELETE of its session is answered 204 (what SDK clients take
/// as a clean close); a second one, or one of a session that never was, 404;
/// without the token, 403 as ever. The session's computer goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_delete_is_204_then_404() {
    let mut s = or_skip!(HttpServer::start().await);
    let http = reqwest::Client::new();
    let sid = open_session(&http, &s.url, &s.token).await.unwrap();
    let (status, _, body) = post(
        &http,
        &s,
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "exec", "arguments": {"command": "true"}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(s.server.computers().len(), 1);
    let delete = |token: Option<&str>, id: &str| {
        let mut rq = http
            .delete(&s.url)
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18")
            .timeout(Duration::from_secs(20));
        if let Some(t) = token {
            rq = rq.header("authorization", format!("Bearer {t}"));
        }
        rq.send()
    };
    assert_eq!(delete(None, &sid).await.unwrap().status(), 403);
    let r = delete(Some(&s.token), &sid).await.unwrap();
    assert_eq!(r.status(), 204);
    assert!(r.text().await.unwrap().is_empty());
    wait_until(
        "the deleted session's computer release",
        Duration::from_secs(20),
        || s.server.computers().is_empty(),
    );
    let r = delete(Some(&s.token), &sid).await.unwrap();
    assert_eq!(r.status(), 404);
    let words = r.text().await.unwrap();
    assert!(words.contains("no such session"), "{words}");
    assert!(!words.contains(&sid), "{words}");
    assert_eq!(
        delete(Some(&s.token), "never-was").await.unwrap().status(),
        404
    );
    let _ = s.child.start_kill();
    let _ = s.child.wait().await;
}
