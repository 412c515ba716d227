//! The server under test, MCP clients for it, and the leftover checks.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

pub use computer_testkit::{marked_processes, need_root, wait_until};

/// A marker for one test of this crate.
pub fn marker() -> String {
    computer_testkit::marker("CMCP")
}

pub const SERVER: &str = env!("CARGO_BIN_EXE_computer-mcp");

/// The computerd beside the server (cargo builds it with the workspace), or
/// the server itself, which is computerd too.
pub fn computerd() -> PathBuf {
    let beside = Path::new(SERVER).with_file_name("computerd");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from(SERVER)
    }
}

/// Records progress notifications.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// A state directory for one test's server.
pub struct Server {
    pub state: tempfile::TempDir,
    pub instance: String,
}

impl Server {
    pub fn new() -> Server {
        let state = tempfile::Builder::new()
            .prefix("cmcp-state")
            .tempdir()
            .unwrap();
        Server {
            state,
            instance: format!("t{}", marker().to_lowercase()),
        }
    }

    pub fn args(&self) -> Vec<String> {
        vec![
            "--local-state-dir".into(),
            self.state.path().display().to_string(),
            "--local-computerd".into(),
            computerd().display().to_string(),
            "--instance".into(),
            self.instance.clone(),
            "--log".into(),
            "warn".into(),
        ]
    }

    /// The computers the server has on disk now.
    pub fn computers(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(self.state.path().join("computers")) else {
            return Vec::new();
        };
        let mut v: Vec<String> = dir
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A stdio client of a fresh `computer-mcp serve`.
    pub async fn stdio(&self, extra: &[&str]) -> (Client, Recorder) {
        let mut cmd = tokio::process::Command::new(SERVER);
        cmd.arg("serve").args(self.args()).args(extra);
        let recorder = Recorder::default();
        let client = recorder
            .clone()
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap();
        (client, recorder)
    }
}

pub fn args(v: Value) -> Option<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let mut p = CallToolRequestParams::new(name.to_string());
    if let Some(a) = args(arguments) {
        p = p.with_arguments(a);
    }
    client.call_tool(p).await.unwrap()
}

/// The text blocks of a result, joined.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

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
