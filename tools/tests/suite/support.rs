//! A real `computerd init` to drive the tools against, the tool context
//! around its client, and the leftover checks (after computerd's own test
//! support).

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use computer_testkit::rfc3339_in;
use computer_tools::{ComputerFacts, Progress, ToolContext, registry};
use computerd::client::{ComputerClient, DaemonClient};
use computerd::launch::{InitArgs, Program, Time};
use computerd::protocol::SettingKind;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use tokio::net::UnixStream;

pub use computer_testkit::{describe, marked_processes, need};

/// The computerd binary: `COMPUTERD_BIN`, else `computerd` in the target
/// directory this test binary was built in (`target/<profile>/deps/..`).
/// A dev-dependency builds only computerd's library, so the binary is there
/// when `cargo build -p computerd` ran first.
pub fn computerd_bin() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("COMPUTERD_BIN") {
        let p = PathBuf::from(p);
        return p.exists().then_some(p);
    }
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let bin = profile_dir.join("computerd");
    bin.exists().then_some(bin)
}

/// A unique word for one test: set as an environment variable on every
/// program the test starts, so its leftovers can be found in /proc.
pub fn marker() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "CTT_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub use computer_testkit::or_skip;

/// A running init with a tool context around a client of it.
pub struct Sandbox {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub marker: String,
    pub client: DaemonClient,
    pub ctx: ToolContext,
}

impl Sandbox {
    /// A running init, or None (the test then skips, saying why) when this
    /// process is not root or the computerd binary was not built.
    pub async fn start() -> Option<Sandbox> {
        let root = need(
            "root",
            nix::unistd::geteuid().is_root(),
            "computerd init needs root here: it refuses to start while it holds a bounding set it cannot empty, as an unprivileged user does",
        );
        if !root {
            return None;
        }
        let Some(bin) = computerd_bin() else {
            // Tests that must run (CI names root) must also find the daemon.
            need(
                "root",
                false,
                "the computerd binary is not built: run `cargo build -p computerd` first (with the same CARGO_TARGET_DIR), or set COMPUTERD_BIN",
            );
            return None;
        };
        let dirs = computer_testkit::InitDirs::new("computer-tools-test");
        let mut init = InitArgs::new(Time::from_now(Duration::from_secs(600)), &dirs.socket);
        init.max_deadline = Some(Time::from_now(Duration::from_secs(3600)));
        let mut cmd = Program::at(&bin).command(init);
        let child = dirs
            .daemon_env(&mut cmd)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let computer_testkit::InitDirs { dir, socket, home } = dirs;
        let until = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match UnixStream::connect(&socket).await {
                Ok(s) => break s,
                Err(e) => {
                    assert!(
                        Instant::now() < until,
                        "computerd init did not listen on {} within 10 s: {e}",
                        socket.display()
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        let client = DaemonClient::new(stream);
        let facts = ComputerFacts {
            provider: "test".into(),
            id: "t1".into(),
            kind: "linux".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            user: "0:0".into(),
            work_dir: home.to_str().unwrap().to_string(),
            network: "host (tests run without a network namespace)".into(),
            deadline: Some(rfc3339_in(Duration::from_secs(600))),
            isolation: "none (test)".into(),
            notes: vec!["a test computer".into()],
            receipt: None,
            ports: Vec::new(),
        };
        let shared: Arc<dyn ComputerClient> = Arc::new(client.clone());
        let ctx = ToolContext {
            facts,
            ..ToolContext::new(shared)
        };
        Some(Sandbox {
            child,
            dir,
            socket,
            marker: marker(),
            client,
            ctx,
        })
    }

    /// A process started with `args`: the answer's text and structured
    /// content, and the process's id.
    pub async fn start_process(&self, args: Value) -> (String, Value, String) {
        let (t, v) = self.ok("process_start", args).await;
        let id = v["id"].as_str().expect("a process id").to_string();
        (t, v, id)
    }

    /// The output of process `id` from `since`, waiting up to `wait_ms`.
    pub async fn read_from(&self, id: &str, since: u64, wait_ms: u64) -> (String, Value) {
        self.ok(
            "process_read",
            json!({"id": id, "since": since, "wait_ms": wait_ms}),
        )
        .await
    }

    pub fn home(&self) -> String {
        self.ctx.facts.work_dir.clone()
    }

    /// A path in the test's temporary directory (outside HOME).
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    /// The env object that marks the test's programs.
    pub fn env(&self) -> Value {
        json!({ &self.marker: "1" })
    }

    /// Call a tool with this sandbox's context.
    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        self.call_with(&self.ctx, name, args).await
    }

    pub async fn call_with(&self, ctx: &ToolContext, name: &str, args: Value) -> CallToolResult {
        let args: Map<String, Value> = match args {
            Value::Object(m) => m,
            other => panic!("tool arguments must be an object, got {other}"),
        };
        tokio::time::timeout(
            Duration::from_secs(60),
            registry()
                .family(SettingKind::Sandbox)
                .expect("the sandbox family")
                .call(name, Some(args), ctx),
        )
        .await
        .expect("the tool answered within 60 s")
        .expect("a known tool")
    }

    /// A context that collects progress reports.
    pub fn with_progress(&self) -> (ToolContext, Arc<Mutex<Vec<Progress>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut ctx = self.ctx.clone();
        ctx.progress = Some(Arc::new(move |p: Progress| sink.lock().unwrap().push(p)));
        (ctx, seen)
    }

    /// Wait until some program of the test runs (a `sleep` it started, say).
    pub async fn wait_for_marked(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while marked_processes(&self.marker).is_empty() {
            assert!(Instant::now() < until, "no program of the test started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What the tests ask of a tool caller (a sandbox, a browser): a call that
/// must succeed, one that must fail, and those two with words to find in
/// the answer.
pub trait Calls {
    /// A call that must succeed: its text and structured content.
    async fn ok(&self, name: &str, args: Value) -> (String, Value);

    /// A call that must fail: its text.
    async fn err(&self, name: &str, args: Value) -> String;

    /// A call that must succeed with `needle` in its text: its structured
    /// content.
    async fn ok_has(&self, name: &str, args: Value, needle: &str) -> Value {
        let (t, v) = self.ok(name, args).await;
        assert!(t.contains(needle), "{name}: no {needle:?} in {t}");
        v
    }

    /// Write `content` to the file at `path` through write_file, which must
    /// succeed.
    async fn write_file(&self, path: &str, content: &str) {
        self.ok("write_file", json!({"path": path, "content": content}))
            .await;
    }

    /// A call that must fail with `needle` in its text.
    async fn err_has(&self, name: &str, args: Value, needle: &str) {
        let e = self.err(name, args).await;
        assert!(e.contains(needle), "{name}: no {needle:?} in {e}");
    }
}

impl Calls for Sandbox {
    /// A call that must succeed: its structured content.
    async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args.clone()).await;
        let t = text(&r);
        assert_eq!(r.is_error, Some(false), "{name} {args} failed: {t}");
        (t, r.structured_content.expect("structured content"))
    }

    /// A call that must fail: its text.
    async fn err(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args.clone()).await;
        let t = text(&r);
        assert_eq!(r.is_error, Some(true), "{name} {args} should fail: {t}");
        assert!(r.structured_content.is_none());
        t
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        computer_testkit::stop_child(&mut self.child, Duration::from_secs(15));
        if !std::thread::panicking() {
            assert_no_leftovers(&self.marker);
        }
    }
}

/// The text of a result, its text blocks joined.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` starts with `prefix` (a failure shows the whole text).
#[track_caller]
pub fn assert_starts(text: &str, prefix: &str) {
    assert!(text.starts_with(prefix), "{text}");
}

/// `text` holds `needle` (a failure shows the whole text).
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{text}");
}

/// `text` ends with `suffix` (a failure shows the whole text).
#[track_caller]
pub fn assert_ends(text: &str, suffix: &str) {
    assert!(text.ends_with(suffix), "{text}");
}

/// No process of the test is left (waiting up to 4 s for them to go: a
/// run's TERM is followed by KILL 2 s later).
#[track_caller]
pub fn assert_no_leftovers(marker: &str) {
    assert_no_leftovers_after(marker, "the test");
}

/// [`assert_no_leftovers`], saying what the test had just done.
#[track_caller]
pub fn assert_no_leftovers_after(marker: &str, what: &str) {
    let until = Instant::now() + Duration::from_secs(4);
    loop {
        let left = marked_processes(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= until {
            let described: Vec<String> = left.iter().map(|p| describe(*p)).collect();
            panic!("processes are left behind after {what}: {described:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Read process output until `needle` shows up (or 10 s pass); the output
/// so far and the next offset.
pub async fn read_until(s: &Sandbox, id: &str, needle: &str) -> (String, u64) {
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    let mut since = 0u64;
    loop {
        let (_, v) = s.read_from(id, since, 1000).await;
        seen.push_str(v["output"].as_str().unwrap());
        since = v["next_offset"].as_u64().unwrap();
        if seen.contains(needle) {
            return (seen, since);
        }
        assert!(
            Instant::now() < until,
            "{needle:?} did not come within 10 s; the output was {seen:?}"
        );
    }
}
