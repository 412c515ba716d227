//! The server under test, MCP clients for it, and the leftover checks.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResult,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

pub use computer_testkit::{marked_processes, need_root, or_skip, wait_until};

mod http;
pub use http::*;

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

/// Records progress notifications, and counts resource-list changes.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub resources_changed: Arc<std::sync::atomic::AtomicUsize>,
}

impl Recorder {
    /// How many `notifications/resources/list_changed` came so far.
    pub fn resource_changes(&self) -> usize {
        self.resources_changed
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.resources_changed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// Where a test server's computers come from.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The local provider, its state in the server's directory.
    Local,
    /// The Docker provider: the test image and the static daemon it binds.
    Docker { image: String, computerd: PathBuf },
    /// The Kubernetes provider over the cluster a kubeconfig names (the
    /// fake Kubernetes API's, which the test holds and checks itself).
    Kubernetes { kubeconfig: PathBuf, image: String },
    /// A cloud vendor's provider (`id`) over its fake, which the test
    /// holds and checks itself: the flags that point it there (URL, key,
    /// the static daemon it installs).
    Vendor {
        id: &'static str,
        flags: Vec<String>,
    },
}

/// A state directory for one test's server.
pub struct Server {
    pub state: tempfile::TempDir,
    /// The provider's state directory: `state`, or another server's.
    pub state_dir: PathBuf,
    pub instance: String,
    pub backend: Backend,
}

/// A process's start time in clock ticks (field 22 of its stat), to tell
/// it from a later process given the same pid.
fn start_ticks(pid: i64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

impl Drop for Server {
    /// A test that ends early (a failed assertion) drops its state with a
    /// server's computers still running: end them first, so none runs on
    /// to its deadline with its state gone.
    fn drop(&mut self) {
        if self.state_dir != self.state.path() {
            return; // a replica's: the owner ends them
        }
        match &self.backend {
            Backend::Local => {
                let Ok(dir) = std::fs::read_dir(self.state_dir.join("computers")) else {
                    return;
                };
                for e in dir.flatten() {
                    let Ok(meta) = std::fs::read(e.path().join("meta.json")) else {
                        continue;
                    };
                    let Ok(meta) = serde_json::from_slice::<serde_json::Value>(&meta) else {
                        continue;
                    };
                    let (Some(pid), Some(ticks)) = (
                        meta["process"]["pid"].as_i64(),
                        meta["process"]["startTicks"].as_u64(),
                    ) else {
                        continue;
                    };
                    if start_ticks(pid) == Some(ticks) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::SIGKILL,
                        );
                    }
                }
            }
            Backend::Docker { .. } => {
                for name in self.computers() {
                    let _ = std::process::Command::new("docker")
                        .args(["rm", "-f", &name])
                        .output();
                }
            }
            // The fake's close removes its pods' (sandboxes') boxes.
            Backend::Kubernetes { .. } | Backend::Vendor { .. } => {}
        }
    }
}

impl Server {
    /// Where root is at hand (local computers need it): a server over a
    /// fresh local state.
    pub fn local() -> Option<Server> {
        need_root().then(Server::new)
    }

    pub fn new() -> Server {
        let state = tempfile::Builder::new()
            .prefix("cmcp-state")
            .tempdir()
            .unwrap();
        Server {
            state_dir: state.path().to_path_buf(),
            state,
            instance: format!("t{}", marker().to_lowercase()),
            backend: Backend::Local,
        }
    }

    /// A server on the Docker provider, or None (skipped, or failed under
    /// COMPUTER_MCP_REQUIRE=docker) where no engine, test image or static
    /// daemon is there. The image is CMCP_TEST_DOCKER_IMAGE, the daemon
    /// CMCP_TEST_DOCKER_COMPUTERD (as .ci/run sets them).
    pub fn docker() -> Option<Server> {
        let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
            .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
        Self::docker_with_image(&image)
    }

    /// A server on the Docker provider with the image `image` (as
    /// [`Server::docker`]).
    pub fn docker_with_image(image: &str) -> Option<Server> {
        let image = image.to_string();
        if !computer_testkit::need(
            "docker",
            docker_up(),
            "no Docker engine answers (docker info)",
        ) {
            return None;
        }
        let have = std::process::Command::new("docker")
            .args(["image", "inspect", &image])
            .output()
            .is_ok_and(|o| o.status.success());
        if !computer_testkit::need(
            "docker",
            have,
            &format!("the test image {image} is not built (fixtures/images/build.sh)"),
        ) {
            return None;
        }
        let computerd = std::env::var_os("CMCP_TEST_DOCKER_COMPUTERD")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../target/x86_64-unknown-linux-gnu/daemon/computerd")
            });
        if !computer_testkit::need(
            "docker",
            computerd.is_file(),
            &format!("the static computerd {} is not built", computerd.display()),
        ) {
            return None;
        }
        let mut s = Server::new();
        s.backend = Backend::Docker { image, computerd };
        Some(s)
    }

    /// The provider's id, as computer_info names it.
    pub fn provider(&self) -> &'static str {
        match self.backend {
            Backend::Local => "local",
            Backend::Docker { .. } => "docker",
            Backend::Kubernetes { .. } => "kubernetes",
            Backend::Vendor { id, .. } => id,
        }
    }

    /// End a computer from outside, as a crash or an operator would.
    pub fn kill_computer(&self, id: &str) {
        match &self.backend {
            Backend::Local => {
                let meta: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(self.state_dir.join("computers").join(id).join("meta.json"))
                        .unwrap(),
                )
                .unwrap();
                let pid = meta["process"]["pid"].as_i64().unwrap() as i32;
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
                    .unwrap();
            }
            Backend::Docker { .. } => {
                let out = std::process::Command::new("docker")
                    .args(["kill", id])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "docker kill {id}: {out:?}");
            }
            Backend::Kubernetes { .. } | Backend::Vendor { .. } => {
                panic!("a pod or sandbox is ended through the fake's API")
            }
        }
    }

    /// A replica of `other`: another server (its own instance) over the
    /// same provider state.
    pub fn replica_of(other: &Server) -> Server {
        let mut s = Server::new();
        s.backend = other.backend.clone();
        s.state_dir = other.state_dir.clone();
        s.instance = format!("{}-b", other.instance);
        s
    }

    pub fn args(&self) -> Vec<String> {
        self.args_logging("warn")
    }

    /// The server's arguments, logging at `level`.
    pub fn args_logging(&self, level: &str) -> Vec<String> {
        let mut v: Vec<String> = match &self.backend {
            Backend::Local => vec![
                "--local-state-dir".into(),
                self.state_dir.display().to_string(),
                "--local-computerd".into(),
                computerd().display().to_string(),
            ],
            Backend::Docker { image, computerd } => vec![
                "--provider".into(),
                "docker".into(),
                "--docker-image".into(),
                image.clone(),
                "--docker-computerd".into(),
                computerd.display().to_string(),
                "--docker-cache-dir".into(),
                self.state_dir.join("cache").display().to_string(),
            ],
            Backend::Kubernetes { kubeconfig, image } => vec![
                "--provider".into(),
                "kubernetes".into(),
                "--kubernetes-kubeconfig".into(),
                kubeconfig.display().to_string(),
                "--kubernetes-image".into(),
                image.clone(),
            ],
            Backend::Vendor { id, flags } => {
                let mut v = vec!["--provider".to_string(), id.to_string()];
                v.extend(flags.iter().cloned());
                v
            }
        };
        v.extend([
            // The receipts journal, beside the provider's state.
            "--state-dir".into(),
            self.state_dir.join("server").display().to_string(),
            "--instance".into(),
            self.instance.clone(),
            "--log".into(),
            level.into(),
        ]);
        v
    }

    /// The computers the server has now: on disk (local), or the
    /// containers carrying its instance label (Docker); none for
    /// Kubernetes and the vendors, whose tests ask their fakes.
    pub fn computers(&self) -> Vec<String> {
        if let Backend::Kubernetes { .. } | Backend::Vendor { .. } = self.backend {
            return Vec::new();
        }
        if let Backend::Docker { .. } = self.backend {
            let out = std::process::Command::new("docker")
                .args([
                    "ps",
                    "-a",
                    "--format",
                    "{{.Names}}",
                    "--filter",
                    &format!("label=computer-mcp.instance={}", self.instance),
                ])
                .output()
                .unwrap();
            let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(String::from)
                .collect();
            v.sort();
            return v;
        }
        let Ok(dir) = std::fs::read_dir(self.state_dir.join("computers")) else {
            return Vec::new();
        };
        let mut v: Vec<String> = dir
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Where root is at hand (local computers need it): a local server and
    /// a stdio client of it, with `extra` flags.
    pub async fn local_stdio(extra: &[&str]) -> Option<(Server, Client, Recorder)> {
        Self::local_stdio_needing(&[], extra).await
    }

    /// [`Server::local_stdio`] where each of `needs` (Xvfb, Chromium) is at
    /// hand too, asked in order after root.
    pub async fn local_stdio_needing(
        needs: &[fn() -> bool],
        extra: &[&str],
    ) -> Option<(Server, Client, Recorder)> {
        let server = Server::local()?;
        if !needs.iter().all(|need| need()) {
            return None;
        }
        let (client, recorder) = server.stdio(extra).await;
        Some((server, client, recorder))
    }

    /// A stdio client of a fresh `computer-mcp serve`.
    pub async fn stdio(&self, extra: &[&str]) -> (Client, Recorder) {
        let args: Vec<String> = self
            .args()
            .into_iter()
            .chain(extra.iter().map(|a| a.to_string()))
            .collect();
        stdio_serve(&args).await
    }
}

/// A stdio client of `computer-mcp serve <args>` (a provider of its own:
/// none of [`Server`]'s flags).
pub async fn stdio_serve(args: &[String]) -> (Client, Recorder) {
    let mut cmd = tokio::process::Command::new(SERVER);
    cmd.arg("serve").args(args);
    let recorder = Recorder::default();
    let client = recorder
        .clone()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    (client, recorder)
}

pub fn args(v: Value) -> Option<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The names of the tools `client`'s server lists.
pub async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let mut p = CallToolRequestParams::new(name.to_string());
    if let Some(a) = args(arguments) {
        p = p.with_arguments(a);
    }
    client.call_tool(p).await.unwrap()
}

/// A call that must succeed (its text shown where it did not).
pub async fn call_ok(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let r = call(client, name, arguments).await;
    assert!(!is_error(&r), "{name}: {}", text(&r));
    r
}

/// The URIs of the resources the server lists.
pub async fn resource_uris(client: &Client) -> Vec<String> {
    let listed = client.list_all_resources().await.unwrap();
    listed.into_iter().map(|r| r.uri).collect()
}

/// Resource `uri`, which must be read.
pub async fn read(client: &Client, uri: impl Into<String>) -> ReadResourceResult {
    let uri = uri.into();
    client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap_or_else(|e| panic!("reading {uri}: {e}"))
}

/// Why reading resource `uri` was refused.
pub async fn read_refused(client: &Client, uri: impl Into<String>) -> String {
    let uri = uri.into();
    match client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
    {
        Ok(r) => panic!("{uri} was read: {r:?}"),
        Err(e) => e.to_string(),
    }
}

/// What the exec tool's `command` printed on stdout (empty where the
/// call answered none).
pub async fn stdout_of(client: &Client, command: &str) -> String {
    let r = call(client, "exec", serde_json::json!({ "command": command })).await;
    structured(&r)["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Serve `content` as /work/site/`file` from the computer (python's
/// http.server on `port`, waited for until it listens) and open it in the
/// browser: the navigation's answer.
pub async fn open_served(client: &Client, file: &str, content: &str, port: u16) -> CallToolResult {
    call_ok(
        client,
        "write_file",
        serde_json::json!({"path": format!("/work/site/{file}"), "content": content}),
    )
    .await;
    call_ok(
        client,
        "process_start",
        serde_json::json!({"command": format!("cd /work/site && exec python3 -m http.server {port} --bind 127.0.0.1")}),
    )
    .await;
    // /proc/net/tcp names the port in hex, and a listening socket 0A.
    call_ok(
        client,
        "exec",
        serde_json::json!({"command": format!("for i in $(seq 200); do grep -q ':{port:04X} 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1")}),
    )
    .await;
    call_ok(
        client,
        "browser_navigate",
        serde_json::json!({"url": format!("http://127.0.0.1:{port}/{file}")}),
    )
    .await
}

/// A call that must be refused with `words` in its text: that text.
pub async fn call_refused(client: &Client, name: &str, arguments: Value, words: &str) -> String {
    let shown = format!("{name} {arguments}");
    let r = call(client, name, arguments).await;
    let t = text(&r);
    assert!(is_error(&r), "{shown}: {t}");
    assert!(t.contains(words), "{shown}: {t}");
    t
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

/// Docker tests of this binary share the engine; the one that restarts it
/// takes it alone.
pub static DOCKER_ENGINE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// One behaviour pinned on both providers: the tests `$name::local` and
/// `$name::docker` run the async fn `$name` (which takes a [`Server`]) on a
/// local computer and on a Docker one (skipped where Docker is not set up,
/// and sharing the engine with the other Docker tests). The module and the
/// fn share the name: one is a type-namespace item, the other a value.
macro_rules! on_each_provider {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local() {
                if !$crate::suite::support::need_root() {
                    return;
                }
                super::$name($crate::suite::support::Server::new()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn docker() {
                if !$crate::suite::support::need_root() {
                    return;
                }
                // The engine first: its restart test may have it alone.
                let _shared = $crate::suite::support::DOCKER_ENGINE.read().await;
                let Some(server) = $crate::suite::support::Server::docker() else {
                    return;
                };
                super::$name(server).await;
            }
        }
    };
}
pub(crate) use on_each_provider;

/// Whether dockerd answers.
fn engine_answers() -> bool {
    std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn docker_up() -> bool {
    let answers = engine_answers;
    if answers() {
        return true;
    }
    // The engine-restart test of this binary may have stopped it on
    // purpose: wait out the restart rather than read it as no engine.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while ENGINE_RESTARTING.load(std::sync::atomic::Ordering::SeqCst)
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    answers()
}

/// Set while the engine-restart test has dockerd stopped.
pub static ENGINE_RESTARTING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Start dockerd the way .ci/run does, and wait (60 s) until it answers.
pub fn start_dockerd() {
    if engine_answers() {
        return;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open("/tmp/dockerd.log")
        .unwrap();
    // setsid forks dockerd off and returns: wait for setsid itself.
    let mut setsid = std::process::Command::new("setsid")
        .arg("--fork")
        .arg("dockerd")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let _ = setsid.wait();
    wait_until(
        "dockerd to answer",
        std::time::Duration::from_secs(60),
        engine_answers,
    );
}

/// Starts dockerd again when dropped, whatever the test did.
pub struct DockerdBack;

impl Drop for DockerdBack {
    fn drop(&mut self) {
        start_dockerd();
        ENGINE_RESTARTING.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
