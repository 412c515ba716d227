//! Streamable HTTP for the tests: a server started with `--http`, raw
//! JSON-RPC posts with their status and session id, stateless callers, and
//! the readers of a JSON reply's text, error flag and handle.

use super::*;

/// POST one JSON-RPC message to a streamable HTTP server with the bearer
/// `token` (and the session's id, once it has one): the status, the
/// session id the server gave, and the body (SSE or JSON) as text.
pub async fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, String) {
    let mut rq = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .timeout(std::time::Duration::from_secs(20))
        .json(&body);
    if let Some(id) = session {
        rq = rq
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let r = rq.send().await.unwrap();
    let status = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    (status, sid, r.text().await.unwrap())
}

/// A `computer-mcp serve --http` of a test, its stderr kept in a file.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub url: String,
    pub token: String,
    pub server: Server,
    pub log: std::path::PathBuf,
    _log_dir: tempfile::TempDir,
}

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// Initialize and confirm a session for `token`: its id.
pub async fn open_session(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> Result<String, String> {
    let (status, sid, body) = mcp_post(http, url, token, None, HttpServer::initialize_body()).await;
    let sid = match (status, sid) {
        (200, Some(sid)) => sid,
        _ => return Err(format!("initialize answered {status}: {body}")),
    };
    let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = mcp_post(http, url, token, Some(&sid), note).await;
    if status != 202 {
        return Err(format!("initialized answered {status}: {body}"));
    }
    Ok(sid)
}

impl HttpServer {
    /// Where root is at hand (local computers need it): a server over a
    /// fresh local state, with `extra` flags.
    pub async fn start() -> Option<HttpServer> {
        Self::start_with(&[]).await
    }

    /// [`HttpServer::start`] with `extra` flags.
    pub async fn start_with(extra: &[&str]) -> Option<HttpServer> {
        Some(Self::start_on(Server::local()?, extra, &[TOKEN]).await)
    }

    /// Serve over `server`'s state (a restart keeps it), logging at info,
    /// with `tokens` (the first is the one `token` holds).
    pub async fn start_on(server: Server, extra: &[&str], tokens: &[&str]) -> HttpServer {
        Self::start_logging(server, extra, tokens, "info").await
    }

    /// [`HttpServer::start_on`], logging at `level` (`--log`).
    pub async fn start_logging(
        server: Server,
        extra: &[&str],
        tokens: &[&str],
        level: &str,
    ) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log_dir = tempfile::tempdir().unwrap();
        let log = log_dir.path().join("stderr.log");
        let child = tokio::process::Command::new(SERVER)
            .arg("serve")
            .args(server.args_logging(level))
            .arg("--http")
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .env("COMPUTER_MCP_TOKEN", tokens.join(","))
            .stdin(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/mcp");
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        HttpServer {
            child,
            url,
            token: tokens[0].to_string(),
            server,
            log,
            _log_dir: log_dir,
        }
    }

    pub fn initialize_body() -> Value {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    }

    /// What the server wrote on stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait (up to `within`) until the server holds no computer, then kill
    /// it.
    pub async fn end_when_released(mut self, what: &str, within: std::time::Duration) {
        wait_until(what, within, || self.server.computers().is_empty());
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM, and wait for the server to exit; its state stays.
    pub async fn stop(mut self) -> (Server, String) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(40), self.child.wait()).await;
        let _ = self.child.start_kill();
        let log = self.log_text();
        (self.server, log)
    }

    /// [`HttpServer::stop`], and hold that no computer of its is left.
    pub async fn stop_leaving_none(self) {
        let (server, _) = self.stop().await;
        assert!(server.computers().is_empty(), "{:?}", server.computers());
    }

    /// A 2026-07-28 (stateless) client of this server with `token`.
    pub fn stateless(&self, token: &str) -> Stateless {
        Stateless {
            http: reqwest::Client::new(),
            url: self.url.clone(),
            token: token.to_string(),
        }
    }
}

/// A client of the 2026-07-28 revision over streamable HTTP: no
/// initialize, no session; each request carries its protocol version and
/// client capabilities in `_meta` and the standard headers.
pub struct Stateless {
    pub http: reqwest::Client,
    pub url: String,
    pub token: String,
}

pub const STATELESS_VERSION: &str = "2026-07-28";

impl Stateless {
    /// One request; the JSON-RPC response (from a JSON or an SSE body).
    pub async fn rpc(&self, method: &str, name: Option<&str>, mut params: Value) -> Value {
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut rq = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token))
            .header("mcp-protocol-version", STATELESS_VERSION)
            .header("mcp-method", method)
            .timeout(std::time::Duration::from_secs(60))
            .json(&body);
        if let Some(n) = name {
            rq = rq.header("mcp-name", n);
        }
        let r = rq.send().await.unwrap();
        assert!(
            r.headers().get("mcp-session-id").is_none(),
            "a stateless request got a session"
        );
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        response_of(&text)
    }

    /// The handle of a computer made by `computer_new` with `name`.
    pub async fn computer_new(&self, name: &str) -> String {
        let made = self
            .call("computer_new", serde_json::json!({ "name": name }))
            .await;
        made["structuredContent"]["handle"]
            .as_str()
            .unwrap_or_else(|| panic!("no handle in {made}"))
            .to_string()
    }

    /// The refusal of an exec on `computer` once another server's release
    /// of it has run on: a release answers before the provider is done, so
    /// within 30 s (the test fails if the computer still answers then).
    pub async fn gone_soon(&self, computer: &str) -> Value {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let r = self
                .call(
                    "exec",
                    serde_json::json!({"argv": ["true"], "computer": computer}),
                )
                .await;
            if r["isError"] == true {
                return r;
            }
            assert!(
                std::time::Instant::now() < until,
                "{computer} still answers 30 s after its release: {r}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// A tool call's result (a JSON-RPC error fails the test).
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        let v = self
            .rpc(
                "tools/call",
                Some(tool),
                serde_json::json!({"name": tool, "arguments": arguments}),
            )
            .await;
        assert!(v.get("error").is_none(), "{v}");
        v["result"].clone()
    }
}

/// The JSON-RPC response in a body: JSON, or the SSE event carrying an id.
pub fn response_of(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no response in {body}"))
}

/// A result's text blocks, joined (a result as JSON).
pub fn jtext(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Whether a result (as JSON) is an error.
pub fn jerror(result: &Value) -> bool {
    result["isError"] == Value::Bool(true)
}

/// The handle of the computer a result (as JSON) ran on.
pub fn jhandle(result: &Value) -> String {
    result["_meta"]["computer-mcp/computer"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("no computer in {result}"))
        .to_string()
}
