//! Browsers over the Chrome DevTools Protocol: the in-process
//! [`ComputerClient`] of a computer of kind browser.
//!
//! A [`BrowserClient`] answers `hello` and `ping` itself and the group
//! cdp's two methods, `cdp.send` and `cdp.events`, over one CDP
//! connection ([`conn`]), whatever carries it:
//! - [`ws`]: a WebSocket, a vendor's browser (its URL a secret, used to
//!   dial and dropped) or [`HostChromium`]'s port;
//! - [`pipe`]: a Chromium the computer runs itself, on its debugging pipe
//!   carried by the computer's daemon; every other method then goes to
//!   that daemon, so a local browser also answers exec, files and
//!   processes.
//!
//! The page tools see this client as they see every other computer's.
//! A browser with no X display (a vendor's, or a headless one a computer
//! runs) also answers `screen.watch`, `screen.read` and `input.actions`
//! by casting its front tab ([`cast`]): what a person's live viewer reads
//! and sends (for a computer's own browser, on the model's client). Its hello lists no screen group (the desktop tools stay a
//! desktop's); [`casts`] says whether a hello's computer is cast so.

pub mod cast;
pub mod chromium;
pub mod conn;
pub mod front;
pub mod pipe;
pub mod ws;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    CdpEventsParams, CdpSendParams, CdpSendResult, ErrorKind, Group, HelloResult, MachineKind,
    ProcessInfo, ProcessListParams, ProcessListResult, ProcessSignalParams, RpcError, Signal,
    decode_params, limits,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

pub use chromium::{HostChromium, Launch};
pub use conn::{CallError, CdpConn};

use crate::types::{ErrorCode, ProviderError, Result, SizesReadBack};

/// How long a new browser gets to answer its first command.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// The groups only a provider declares: hello never lists them.
pub const PROVIDER_GROUPS: &[Group] = &[Group::Cdp, Group::Stream, Group::Downloads];

/// How long `ping` waits for the browser.
const PING_WAIT: Duration = Duration::from_secs(10);

/// How long a browser whose command timed out gets to answer a trivial
/// one (itself, and the page the command went to) before it counts as
/// stuck and is ended.
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// The client of a computer of kind browser (or of a desktop whose page
/// tools drive its visible browser).
pub struct BrowserClient {
    browser: Browser,
    hello: HelloResult,
    /// The front tab's cast, where the computer has no X display.
    cast: cast::Cast,
}

/// Whether a computer whose hello is `hello` shows its screen by the cast
/// of its browser's front tab (a browser with no X display) rather than
/// its daemon's `screen.watch`. A headless browser run by a computer's
/// daemon lives as long as the connection that started it (a second
/// connection would start a second browser and end the first), so its
/// view is cast on the model's own client, and ended by [`STOP_CAST`].
pub fn casts(hello: &HelloResult) -> bool {
    hello.kind == MachineKind::Browser && !hello.groups.contains(&Group::Screen)
}

/// The call (answered by a cast browser's client itself, never sent on)
/// that ends its cast when a view that shared the client leaves: the
/// screencast stops and its tabs are let go; the page is not touched.
pub const STOP_CAST: &str = "cast.stop";

/// Where the browser is.
enum Browser {
    /// Reached over a WebSocket: it lives as long as the connection.
    Remote(Arc<CdpConn>),
    /// Run by the computer: started on its pipe when first needed, and
    /// again after it ended. Every other method goes to the daemon.
    InComputer {
        daemon: Arc<dyn ComputerClient>,
        argv: Vec<String>,
        env: BTreeMap<String, String>,
        running: tokio::sync::Mutex<Option<pipe::PipeBrowser>>,
        /// The daemon's ids of the browsers this client started or ended:
        /// not the model's to read, write or signal (their pipes carry
        /// every caller's pages).
        hidden: Box<std::sync::Mutex<std::collections::HashSet<String>>>,
        /// The computer's bounds as read back, for words when Chromium
        /// cannot start within them.
        bounds: Option<SizesReadBack>,
    },
}

impl BrowserClient {
    /// A browser at a CDP WebSocket `url` (which may be a secret: no word
    /// of a failure holds it) whose hello lists `groups`, less the
    /// provider's own (cdp, stream and downloads are declared by the
    /// provider's capabilities and never listed by hello): a vendor's
    /// browser answers no other group.
    pub async fn websocket(url: &str, groups: Vec<Group>) -> Result<BrowserClient> {
        let conn = ws::connect(url).await?;
        let product = ready(&conn).await?;
        let groups: Vec<Group> = groups
            .into_iter()
            .filter(|g| !PROVIDER_GROUPS.contains(g))
            .collect();
        Ok(BrowserClient {
            browser: Browser::Remote(conn),
            hello: HelloResult {
                version: product,
                os: "linux".into(),
                kind: MachineKind::Browser,
                arch: std::env::consts::ARCH
                    .replace("x86_64", "amd64")
                    .replace("aarch64", "arm64"),
                groups,
                bytes_frames: None,
            },
            cast: cast::Cast::default(),
        })
    }

    /// The browser `launch` in the computer behind `daemon` (whose hello
    /// is `daemon_hello`), answering as `kind`: started when a cdp method
    /// first needs it (ending any an earlier connection started), and
    /// again after it ended. The computer's own groups stay: its exec,
    /// files and processes (and a desktop's screen and input) go to the
    /// daemon.
    pub fn in_computer(
        daemon: Arc<dyn ComputerClient>,
        daemon_hello: &HelloResult,
        kind: MachineKind,
        launch: &Launch,
        env: BTreeMap<String, String>,
    ) -> BrowserClient {
        BrowserClient {
            browser: Browser::InComputer {
                daemon,
                argv: launch.argv(),
                env,
                running: tokio::sync::Mutex::new(None),
                hidden: Default::default(),
                bounds: None,
            },
            hello: HelloResult {
                kind,
                ..daemon_hello.clone()
            },
            cast: cast::Cast::default(),
        }
    }

    /// The computer's bounds (pids, memory) as read back: a browser that
    /// cannot start says when they are below what Chromium needs.
    pub fn bounded_by(mut self, sizes: Option<SizesReadBack>) -> BrowserClient {
        if let Browser::InComputer { bounds, .. } = &mut self.browser {
            *bounds = sizes;
        }
        self
    }

    /// Start the browser now (it starts on its own when first needed):
    /// what a provider calls before handing a browser out, so a computer
    /// that cannot run one fails at once.
    pub async fn start(&self) -> Result<()> {
        self.conn().await.map(|_| ()).map_err(|e| {
            ProviderError::new(
                match &e {
                    ClientError::Rpc(r) if r.kind() == Some(ErrorKind::Timeout) => {
                        ErrorCode::Timeout
                    }
                    _ => ErrorCode::Unreachable,
                },
                e.to_string(),
            )
        })
    }

    /// What `hello` answers: the computer's own groups (none for a
    /// vendor's browser; cdp is the provider's to declare).
    pub fn hello(&self) -> &HelloResult {
        &self.hello
    }

    /// The connection to the browser, started (again) when it is not running.
    async fn conn(&self) -> std::result::Result<Arc<CdpConn>, ClientError> {
        match &self.browser {
            Browser::Remote(conn) => match conn.closed() {
                Some(why) => Err(ClientError::Closed(why)),
                None => Ok(Arc::clone(conn)),
            },
            Browser::InComputer {
                daemon,
                argv,
                env,
                running,
                hidden,
                bounds,
            } => {
                let did_not_start =
                    |why: &str| match bounds.and_then(|b| chromium::bounds_too_low(&b, why)) {
                        Some(low) => format!("the computer's browser did not start: {low}; {why}"),
                        None => format!("the computer's browser did not start: {why}"),
                    };
                let mut running = running.lock().await;
                if let Some(b) = running.as_ref().filter(|b| b.conn.closed().is_none()) {
                    return Ok(Arc::clone(&b.conn));
                }
                if let Some(old) = running.take() {
                    tracing::info!(
                        "the computer's browser ended ({}); starting it again",
                        old.conn.closed().unwrap_or_default()
                    );
                }
                let ended = end_earlier(daemon).await;
                let started = pipe::start(Arc::clone(daemon), argv, env.clone())
                    .await
                    .map_err(|e| {
                        ClientError::Rpc(RpcError::unsupported(did_not_start(&e.message)))
                    })?;
                if let Ok(mut h) = hidden.lock() {
                    h.extend(ended);
                    h.insert(started.process.clone());
                }
                let answered = match ready(&started.conn).await {
                    Ok(_) => first_page_answers(&started.conn).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = answered {
                    started.conn.end("it did not answer");
                    let words = did_not_start(&e.message);
                    return Err(ClientError::Rpc(if e.code == ErrorCode::Timeout {
                        RpcError::timeout(words)
                    } else {
                        RpcError::unsupported(words)
                    }));
                }
                let conn = Arc::clone(&started.conn);
                *running = Some(started);
                Ok(conn)
            }
        }
    }

    /// The connection to the browser while it runs (never started here).
    async fn running(&self) -> Option<Arc<CdpConn>> {
        match &self.browser {
            Browser::Remote(conn) => Some(Arc::clone(conn)),
            Browser::InComputer { running, .. } => {
                running.lock().await.as_ref().map(|b| Arc::clone(&b.conn))
            }
        }
        .filter(|c| c.closed().is_none())
    }

    /// Whether `params` name (by `id`) a browser this client started or
    /// ended: the browser is the server's, and its pipe carries every
    /// caller's pages, so to the model it does not exist.
    fn hides(&self, params: &Value) -> bool {
        let Browser::InComputer { hidden, .. } = &self.browser else {
            return false;
        };
        let Some(id) = params["id"].as_str() else {
            return false;
        };
        hidden.lock().is_ok_and(|h| h.contains(id))
    }

    /// The daemon's process list without the browsers on their pipes.
    async fn list_processes(&self, params: Value) -> std::result::Result<Value, ClientError> {
        let Some(d) = self.daemon() else {
            return Err(ClientError::Closed(
                "a vendor's browser has no processes".into(),
            ));
        };
        let mut list: ProcessListResult =
            serde_json::from_value(d.call_value("process.list", params).await?).map_err(|e| {
                ClientError::Decode {
                    method: "process.list".into(),
                    detail: e.to_string(),
                }
            })?;
        list.processes.retain(|p| !is_browser(p));
        Ok(json!(list))
    }

    async fn send(&self, params: Value) -> std::result::Result<Value, ClientError> {
        let p: CdpSendParams = decode_params(Some(params)).map_err(ClientError::Rpc)?;
        if p.method.is_empty() || p.method.len() > 200 {
            return Err(ClientError::Rpc(RpcError::invalid(
                "method: a CDP method such as Page.navigate, 1 to 200 characters",
            )));
        }
        let ms = p.timeout_ms.unwrap_or(limits::CDP_SEND_MAX_MS);
        if ms == 0 || ms > limits::CDP_SEND_MAX_MS {
            return Err(ClientError::Rpc(RpcError::invalid(format!(
                "timeoutMs: {ms} is outside 1 to {}",
                limits::CDP_SEND_MAX_MS
            ))));
        }
        let conn = self.conn().await?;
        let result = conn
            .call(
                &p.method,
                p.params,
                p.session_id.as_deref(),
                Duration::from_millis(ms),
            )
            .await;
        match result {
            Ok(result) => Ok(json!(CdpSendResult { result })),
            Err(CallError::Timeout(words)) => {
                Err(self.timed_out(&conn, p.session_id.as_deref(), words).await)
            }
            Err(e) => Err(self.call_error(e)),
        }
    }

    /// A command that got no answer in time. A browser the computer runs
    /// that then answers no trivial command either, itself or in the page
    /// the command went to, is stuck (a page that ate the computer's
    /// memory leaves its renderer dead or thrashing, and every later
    /// command on it waits out its bound): it is ended now, and the next
    /// call starts it again. A page that is only slow is left alone.
    async fn timed_out(
        &self,
        conn: &Arc<CdpConn>,
        session: Option<&str>,
        words: String,
    ) -> ClientError {
        let Browser::InComputer {
            daemon, running, ..
        } = &self.browser
        else {
            return call_error(CallError::Timeout(words));
        };
        let silent =
            |r: std::result::Result<Value, CallError>| matches!(r, Err(CallError::Timeout(_)));
        let mut stuck = silent(
            conn.call("Browser.getVersion", None, None, PROBE_WAIT)
                .await,
        );
        if !stuck && let Some(s) = session {
            let zero = json!({ "expression": "0", "returnByValue": true });
            stuck = silent(
                conn.call("Runtime.evaluate", Some(zero), Some(s), PROBE_WAIT)
                    .await,
            );
        }
        if !stuck {
            return call_error(CallError::Timeout(words));
        }
        let mut running = running.lock().await;
        if running.as_ref().is_some_and(|b| Arc::ptr_eq(&b.conn, conn)) {
            running.take();
            conn.end("it stopped answering");
            tracing::info!("the computer's browser stopped answering; ending it");
            end_earlier(daemon).await;
        }
        ClientError::Rpc(RpcError::aborted(format!(
            "{words}, and then the browser answered no command within {} s: it was stuck, and was ended; {}",
            PROBE_WAIT.as_secs(),
            computerd::protocol::BROWSER_STARTS_AGAIN
        )))
    }

    async fn events(&self, params: Value) -> std::result::Result<Value, ClientError> {
        let p: CdpEventsParams = decode_params(Some(params)).map_err(ClientError::Rpc)?;
        if let Some(w) = p.wait_ms.filter(|w| *w > limits::CDP_EVENTS_WAIT_MAX_MS) {
            return Err(ClientError::Rpc(RpcError::invalid(format!(
                "waitMs: {w} is over the most, {}",
                limits::CDP_EVENTS_WAIT_MAX_MS
            ))));
        }
        if let Some(m) = p.max.filter(|m| *m == 0 || *m > limits::CDP_EVENTS_MAX) {
            return Err(ClientError::Rpc(RpcError::invalid(format!(
                "max: {m} is outside 1 to {}",
                limits::CDP_EVENTS_MAX
            ))));
        }
        let conn = self.conn().await?;
        Ok(json!(conn.events(&p).await))
    }

    /// A call's failure: a computer's browser that ended is no lost
    /// connection (the next call starts it again).
    fn call_error(&self, e: CallError) -> ClientError {
        match (e, &self.browser) {
            (CallError::Closed(why), Browser::InComputer { bounds, .. }) => {
                let reached = bounds
                    .and_then(|b| chromium::bounds_reached(&b, &why))
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default();
                ClientError::Rpc(RpcError::aborted(format!(
                    "the computer's browser ended before it answered{reached} ({why}); {}",
                    computerd::protocol::BROWSER_STARTS_AGAIN
                )))
            }
            (e, _) => call_error(e),
        }
    }

    /// A screen method answered by the front tab's cast.
    async fn cast_call(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, ClientError> {
        let conn = self.conn().await?;
        let value = |r: std::result::Result<Value, serde_json::Error>| {
            r.map_err(|e| ClientError::Decode {
                method: method.to_string(),
                detail: e.to_string(),
            })
        };
        match method {
            "screen.watch" => {
                let p = decode_params(Some(params)).map_err(ClientError::Rpc)?;
                value(serde_json::to_value(self.cast.watch(&conn, p).await?))
            }
            "screen.read" => {
                let p = decode_params(Some(params)).map_err(ClientError::Rpc)?;
                value(serde_json::to_value(self.cast.read(p).await?))
            }
            _ => {
                let p = decode_params(Some(params)).map_err(ClientError::Rpc)?;
                value(serde_json::to_value(self.cast.actions(&conn, p).await?))
            }
        }
    }

    fn daemon(&self) -> Option<&Arc<dyn ComputerClient>> {
        match &self.browser {
            Browser::Remote(_) => None,
            Browser::InComputer { daemon, .. } => Some(daemon),
        }
    }
}

fn call_error(e: CallError) -> ClientError {
    match e {
        CallError::Browser(e) => ClientError::Rpc(e),
        CallError::Timeout(w) => ClientError::Rpc(RpcError::timeout(w)),
        CallError::Closed(w) => ClientError::Closed(w),
    }
}

/// The browser's product ("HeadlessChrome/148.0.7778.167"), once it
/// answers.
async fn ready(conn: &CdpConn) -> Result<String> {
    let version = conn
        .call("Browser.getVersion", None, None, READY_WAIT)
        .await
        .map_err(|e| no_answer("the browser", e))?;
    Ok(version
        .get("product")
        .and_then(Value::as_str)
        .unwrap_or("a browser")
        .to_string())
}

/// A start's call that failed: `who` did not answer, and why.
fn no_answer(who: &str, e: CallError) -> ProviderError {
    let (code, words) = match e {
        CallError::Browser(e) => (ErrorCode::Unreachable, e.message),
        CallError::Timeout(w) => (ErrorCode::Timeout, w),
        CallError::Closed(w) => (ErrorCode::Unreachable, w),
    };
    ProviderError::new(code, format!("{who} did not answer: {words}"))
}

/// A browser that answers may still lose its first page's renderer at
/// once (a memory bound it fits in only without one): the first page
/// evaluates an expression before the browser counts as started. A
/// browser with no page open is left as it is.
async fn first_page_answers(conn: &CdpConn) -> Result<()> {
    let failed = |e: CallError| no_answer("its first page", e);
    let targets = conn
        .call("Target.getTargets", None, None, READY_WAIT)
        .await
        .map_err(failed)?;
    let Some(page) = targets["targetInfos"].as_array().and_then(|all| {
        all.iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["targetId"].as_str())
    }) else {
        return Ok(());
    };
    let attached = conn
        .call(
            "Target.attachToTarget",
            Some(json!({ "targetId": page, "flatten": true })),
            None,
            READY_WAIT,
        )
        .await
        .map_err(failed)?;
    let Some(session) = attached["sessionId"].as_str() else {
        return Err(ProviderError::new(
            ErrorCode::Unreachable,
            "its first page did not answer: attaching to it gave no session",
        ));
    };
    let two = conn
        .call(
            "Runtime.evaluate",
            Some(json!({ "expression": "1 + 1", "returnByValue": true })),
            Some(session),
            READY_WAIT,
        )
        .await
        .map_err(failed)?;
    if two["result"]["value"] != 2 {
        return Err(ProviderError::new(
            ErrorCode::Unreachable,
            format!(
                "its first page did not answer: 1 + 1 gave {}",
                two["result"]
            ),
        ));
    }
    conn.call(
        "Target.detachFromTarget",
        Some(json!({ "sessionId": session })),
        None,
        READY_WAIT,
    )
    .await
    .map_err(failed)?;
    Ok(())
}

/// Whether the daemon's process `p` is a browser on its pipe (this
/// connection's or an earlier one's).
fn is_browser(p: &ProcessInfo) -> bool {
    p.argv.first().map(String::as_str) == Some("/bin/sh")
        && p.argv.get(3).map(String::as_str) == Some(pipe::PIPE_NAME)
}

/// End the browsers an earlier connection started in this computer (its
/// pipe went with that connection, so no one can drive them); gives the
/// ids of every browser listed, running or not.
async fn end_earlier(daemon: &Arc<dyn ComputerClient>) -> Vec<String> {
    let mut from = None;
    let mut seen = Vec::new();
    loop {
        let Ok(list) = daemon
            .call_typed(&ProcessListParams { from: from.clone() })
            .await
        else {
            return seen;
        };
        seen.extend(
            list.processes
                .iter()
                .filter(|p| is_browser(p))
                .map(|p| p.id.clone()),
        );
        for p in list.processes.iter().filter(|p| p.running && is_browser(p)) {
            tracing::info!(process = %p.id, "ending the browser an earlier connection started");
            let _ = daemon
                .call_typed(&ProcessSignalParams {
                    id: p.id.clone(),
                    signal: Signal::Kill,
                })
                .await;
        }
        match list.next {
            Some(n) if list.truncated => from = Some(n),
            _ => return seen,
        }
    }
}

impl ComputerClient for BrowserClient {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, computerd::client::Result<Value>> {
        Box::pin(async move {
            match method {
                "hello" => Ok(json!(self.hello)),
                "ping" => match self.daemon() {
                    Some(d) => d.call_value("ping", params).await,
                    None => {
                        self.conn()
                            .await?
                            .call("Browser.getVersion", None, None, PING_WAIT)
                            .await
                            .map_err(call_error)?;
                        Ok(json!({}))
                    }
                },
                "cdp.send" => self.send(params).await,
                "cdp.events" => self.events(params).await,
                "screen.watch" | "screen.read" | "input.actions" if casts(&self.hello) => {
                    self.cast_call(method, params).await
                }
                STOP_CAST if casts(&self.hello) => {
                    if let Some(conn) = self.running().await {
                        self.cast.stop(&conn).await;
                    }
                    Ok(json!({}))
                }
                "process.list" if self.daemon().is_some() => self.list_processes(params).await,
                m if m.starts_with("process.") && self.hides(&params) => {
                    let id = params["id"].as_str().unwrap_or_default();
                    Err(ClientError::Rpc(
                        RpcError::not_found(format!(
                            "no process {id}: it never existed, or the table (256 entries) let it go"
                        ))
                        .with_field("id"),
                    ))
                }
                _ => match self.daemon() {
                    Some(d) => d.call_value(method, params).await,
                    None if computerd::protocol::Method::from_name(method).is_none() => {
                        Err(ClientError::Rpc(
                            RpcError::not_found(format!(
                                "unknown method {method:?}; a browser answers hello, ping, cdp.send, cdp.events and its screen's watch, read and input"
                            ))
                            .with_code(computerd::protocol::METHOD_NOT_FOUND),
                        ))
                    }
                    None => Err(ClientError::Rpc(RpcError::unsupported(format!(
                        "{method}: a browser answers hello, ping, cdp.send, cdp.events and its screen's watch, read and input, and has no daemon for the rest"
                    )))),
                },
            }
        })
    }

    fn close(&self) {
        match &self.browser {
            Browser::Remote(conn) => conn.end("the connection was closed"),
            Browser::InComputer {
                daemon, running, ..
            } => {
                // The browser ends with its connection (its pipe's writer
                // kills it), then the daemon's connection closes.
                let d = Arc::clone(daemon);
                let browser = running.try_lock().ok().and_then(|mut r| r.take());
                match (browser, tokio::runtime::Handle::try_current()) {
                    (Some(b), Ok(rt)) => {
                        b.conn.end("the connection was closed");
                        rt.spawn(async move {
                            let _ = d
                                .call_typed(&ProcessSignalParams {
                                    id: b.process,
                                    signal: Signal::Kill,
                                })
                                .await;
                            d.close();
                        });
                    }
                    (Some(b), Err(_)) => {
                        b.conn.end("the connection was closed");
                        d.close();
                    }
                    (None, _) => d.close(),
                }
            }
        }
    }

    /// A vendor's browser is closed when its connection is; a computer's
    /// when its daemon's is (a browser that ended starts again).
    fn is_closed(&self) -> bool {
        match &self.browser {
            Browser::Remote(conn) => conn.closed().is_some(),
            Browser::InComputer { daemon, .. } => daemon.is_closed(),
        }
    }
}

impl Drop for BrowserClient {
    fn drop(&mut self) {
        match &self.browser {
            Browser::Remote(conn) => conn.end("the connection was let go"),
            Browser::InComputer { running, .. } => {
                if let Ok(mut r) = running.try_lock()
                    && let Some(b) = r.take()
                {
                    b.conn.end("the connection was let go");
                }
            }
        }
    }
}
