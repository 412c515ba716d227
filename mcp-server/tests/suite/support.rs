//! The server under test, MCP clients for it, and the leftover checks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

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

/// Whether a test that needs `what` can run; see computerd's support.rs.
pub fn need(what: &str, available: bool, why: &str) -> bool {
    if available {
        return true;
    }
    let required = std::env::var("COMPUTER_MCP_REQUIRE").unwrap_or_default();
    if required.split(',').any(|r| r.trim() == what) {
        panic!("COMPUTER_MCP_REQUIRE names {what}, but {why}");
    }
    eprintln!("skipped: {why} (set COMPUTER_MCP_REQUIRE={what} to make this a failure)");
    false
}

pub fn need_root() -> bool {
    need(
        "root",
        nix::unistd::geteuid().is_root(),
        "local computers need root here (or unprivileged user namespaces and an empty bounding set)",
    )
}

pub fn marker() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "CMCP_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Processes whose environment carries `marker=1`.
pub fn marked_processes(marker: &str) -> Vec<i32> {
    let needle = format!("{marker}=1");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

pub fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < until,
            "{what} did not happen within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
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
            "--state-dir".into(),
            self.state.path().display().to_string(),
            "--computerd".into(),
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
