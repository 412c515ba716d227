//! What the tests of this binary share: the test hosts of the egress tests
//! ([`net`]), the turns tests take where one would disturb another, CDP
//! calls (a page, its load, an expression) and a shell script run in a
//! computer.

pub mod net;

use std::io::Write;
use std::sync::Mutex;

use std::sync::Arc;

use bollard::Docker;
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    CdpEventsParams, CdpEventsResult, CdpSendParams, ExecParams, ExecResult,
};
use serde_json::{Value, json};

/// A sweep releases every expired computer of the engine, so the tests
/// that sweep take turns (one's expired computer is the other's to find).
pub static SWEEPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Docker egress tests run one at a time, and never beside a local
/// egress test: a test host's address is this machine's own, which every
/// proxy must then refuse. The local egress tests share it (read), the
/// Docker ones hold it alone (write).
pub static EGRESS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A CDP command to the computer's browser (to a page with `session`),
/// and its result.
pub async fn send(
    c: &Arc<dyn ComputerClient>,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Result<Value, ClientError> {
    c.call_typed(&CdpSendParams {
        method: method.into(),
        params: Some(params),
        session_id: session.map(str::to_string),
        timeout_ms: None,
    })
    .await
    .map(|r| r.result)
}

/// A new page and its session, with Page and Runtime events on.
pub async fn page(c: &Arc<dyn ComputerClient>) -> String {
    let t = send(
        c,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        None,
    )
    .await
    .unwrap();
    let s = send(
        c,
        "Target.attachToTarget",
        json!({"targetId": t["targetId"], "flatten": true}),
        None,
    )
    .await
    .unwrap();
    let session = s["sessionId"].as_str().unwrap().to_string();
    send(c, "Page.enable", json!({}), Some(&session))
        .await
        .unwrap();
    send(c, "Runtime.enable", json!({}), Some(&session))
        .await
        .unwrap();
    session
}

/// Navigate the tab of `session` to `url`; what the browser answered.
pub async fn navigate(c: &Arc<dyn ComputerClient>, session: &str, url: &str) -> Value {
    send(c, "Page.navigate", json!({"url": url}), Some(session))
        .await
        .unwrap()
}

/// Navigate the tab of `session` to `url` and wait (up to 15 s) for its load.
pub async fn navigate_loaded(c: &Arc<dyn ComputerClient>, session: &str, url: &str) {
    navigate(c, session, url).await;
    load_events(c, session, 15_000).await;
}

/// The load events of the tab of `session`, waited for up to `wait_ms`.
pub async fn load_events(
    c: &Arc<dyn ComputerClient>,
    session: &str,
    wait_ms: u64,
) -> CdpEventsResult {
    c.call_typed(&CdpEventsParams {
        methods: Some(vec!["Page.loadEventFired".into()]),
        session_id: Some(session.to_string()),
        wait_ms: Some(wait_ms),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// What `expr` comes to in the tab of `session`.
pub async fn eval(c: &Arc<dyn ComputerClient>, session: &str, expr: &str) -> Value {
    let r = send(
        c,
        "Runtime.evaluate",
        json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        Some(session),
    )
    .await
    .unwrap();
    r["result"]["value"].clone()
}

/// `sh -c script` in the computer, bounded at 20 s, and what it did.
pub async fn run(c: &Arc<dyn ComputerClient>, script: &str) -> ExecResult {
    c.call_typed(&ExecParams {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        timeout_ms: Some(20_000),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// What a run wrote to stdout, as text.
pub fn text(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout.0).into_owned()
}

/// A new cloud computer `c` of `p`, labelled `computer-mcp.name=life`, as
/// a user finds it: its shell runs as the daemon's user in `/work` with no
/// capability and no network, 300 kB of output cross the bridge whole, a
/// listing by its label names it alone, and an attach by id reads the
/// label back. What the listing and the attach gave.
pub async fn used_listed_attached(
    p: &dyn computer_providers::provider::Provider,
    c: &computer_providers::types::ComputerRef,
    cancel: &tokio_util::sync::CancellationToken,
) -> (
    Vec<computer_providers::types::ComputerRef>,
    computer_providers::types::ComputerRef,
) {
    use computer_providers::types::{AttachBy, Labels};
    let conn = p.connect(c, cancel).await.unwrap();
    let out = run(
        &conn.client,
        "id -u; pwd; touch /work/mine && echo wrote; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /sys/class/net",
    )
    .await;
    assert_eq!(
        text(&out),
        "2510\n/work\nwrote\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nlo\n"
    );
    // The bridge survives output cut at any point (envelopes, offsets).
    let big = run(&conn.client, "head -c 300000 /dev/zero | tr '\\0' x").await;
    assert_eq!(big.stdout.0.len(), 300_000);
    conn.client.close();

    let listed = p
        .list(
            &Labels::from([("computer-mcp.name".into(), "life".into())]),
            cancel,
        )
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|l| l.id.clone()).collect::<Vec<_>>(),
        vec![c.id.clone()]
    );
    let by_id = p.attach(&AttachBy::Id(c.id.clone()), cancel).await.unwrap();
    assert_eq!(
        by_id.labels.get("computer-mcp.name").map(String::as_str),
        Some("life")
    );
    (listed, by_id)
}

/// A container removed from outside, as a user would (`docker rm -f`).
pub async fn remove_by_force(docker: &Docker, id: &str) {
    docker
        .remove_container(
            id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
        .unwrap();
}

/// A log writer the test reads back.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Every log line of this thread, at every level, into the returned
/// writer (the tests run on one thread, so every task logs here).
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let w = Captured::default();
    let w2 = w.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || w2.clone())
        .finish();
    (w, tracing::subscriber::set_default(sub))
}

/// The boxes a vendor's fake made for one test: the Docker containers
/// carrying the test's owner label.
pub struct Boxes {
    pub docker: Docker,
    pub owner: String,
}

impl Boxes {
    /// How many are there now.
    pub async fn count(&self) -> usize {
        let label = format!("{}={}", computer_fakes::vendor_box::LABEL, self.owner);
        computer_testkit::labelled_containers(&self.docker, &label)
            .await
            .len()
    }

    /// None is left (called after the fake is closed).
    pub async fn assert_none(&self) {
        assert_eq!(self.count().await, 0, "a box was left");
    }
}

/// A sandbox of ten minutes labelled `computer-mcp.name=<name>`.
pub fn labelled(name: &str) -> computer_providers::types::ComputerSpec {
    let mut s = computer_providers::types::ComputerSpec::sandbox(600_000);
    s.labels = computer_providers::types::Labels::from([(
        "computer-mcp.name".to_string(),
        name.to_string(),
    )]);
    s
}

/// A create through `p` whose answer the vendor's fake lost (`creates`
/// counts the fake's creates, `alive` its sandboxes still running):
/// refused after one create, in words saying the sandbox was found by
/// `found_by` and `ended`, and none of it left running. The refusal.
pub async fn lost_create(
    p: &dyn computer_providers::provider::Provider,
    creates: impl Fn() -> u64,
    alive: impl Fn() -> usize,
    found_by: &str,
    ended: &str,
) -> computer_providers::types::ProviderError {
    let e = p
        .create(
            &labelled("lost"),
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(creates(), 1, "a second create was sent");
    assert_eq!(alive(), 0, "the lost create's sandbox still runs");
    assert!(
        e.message
            .contains(&format!("the sandbox it made was found by its {found_by}"))
            && e.message.contains(ended),
        "{}",
        e.message
    );
    e
}
