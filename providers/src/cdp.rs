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

pub mod chromium;
pub mod conn;
pub mod pipe;
pub mod ws;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    CdpEventsParams, CdpSendParams, CdpSendResult, Group, HelloResult, MachineKind,
    ProcessListParams, ProcessSignalParams, RpcError, Signal, decode_params, limits,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

pub use chromium::{HostChromium, Launch};
pub use conn::{CallError, CdpConn};

use crate::types::{ErrorCode, ProviderError, Result};

/// How long a new browser gets to answer its first command.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// The groups only a provider declares: hello never lists them.
pub const PROVIDER_GROUPS: &[Group] = &[Group::Cdp, Group::Stream, Group::Downloads];

/// How long `ping` waits for the browser.
const PING_WAIT: Duration = Duration::from_secs(10);

/// The client of a computer of kind browser.
pub struct BrowserClient {
    conn: Arc<CdpConn>,
    /// The computer's daemon, when the browser runs in one.
    daemon: Option<Arc<dyn ComputerClient>>,
    /// The browser's process in that daemon.
    process: Option<String>,
    hello: HelloResult,
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
        .map_err(|e| {
            let words = match e {
                CallError::Browser(e) => e.message,
                CallError::Timeout(w) | CallError::Closed(w) => w,
            };
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("the browser did not answer: {words}"),
            )
        })?;
    Ok(version
        .get("product")
        .and_then(Value::as_str)
        .unwrap_or("a browser")
        .to_string())
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
            conn,
            daemon: None,
            process: None,
            hello: HelloResult {
                version: product,
                os: "linux".into(),
                kind: MachineKind::Browser,
                arch: std::env::consts::ARCH
                    .replace("x86_64", "amd64")
                    .replace("aarch64", "arm64"),
                groups,
            },
        })
    }

    /// Start the browser `launch` in the computer behind `daemon` (whose
    /// hello is `daemon_hello`), ending any an earlier connection started,
    /// and wait until it answers. The computer's own groups stay: its
    /// exec, files and processes go to the daemon.
    pub async fn in_computer(
        daemon: Arc<dyn ComputerClient>,
        daemon_hello: &HelloResult,
        launch: &Launch,
        env: BTreeMap<String, String>,
    ) -> Result<BrowserClient> {
        end_earlier(&daemon).await;
        let started = pipe::start(Arc::clone(&daemon), &launch.argv(), env).await?;
        if let Err(e) = ready(&started.conn).await {
            started.conn.end("it did not answer");
            return Err(e);
        }
        let groups = daemon_hello.groups.clone();
        Ok(BrowserClient {
            conn: started.conn,
            daemon: Some(daemon),
            process: Some(started.process),
            hello: HelloResult {
                kind: MachineKind::Browser,
                groups,
                ..daemon_hello.clone()
            },
        })
    }

    /// What `hello` answers: kind browser, with the computer's own groups
    /// (none for a vendor's browser; cdp is the provider's to declare).
    pub fn hello(&self) -> &HelloResult {
        &self.hello
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
        let result = self
            .conn
            .call(
                &p.method,
                p.params,
                p.session_id.as_deref(),
                Duration::from_millis(ms),
            )
            .await
            .map_err(call_error)?;
        Ok(json!(CdpSendResult { result }))
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
        if let Some(why) = self.conn.closed() {
            return Err(ClientError::Closed(why));
        }
        Ok(json!(self.conn.events(&p).await))
    }
}

/// End the browsers an earlier connection started in this computer (its
/// pipe went with that connection, so no one can drive them).
async fn end_earlier(daemon: &Arc<dyn ComputerClient>) {
    let mut from = None;
    loop {
        let Ok(list) = daemon
            .call_typed(&ProcessListParams { from: from.clone() })
            .await
        else {
            return;
        };
        for p in list.processes.iter().filter(|p| {
            p.running
                && p.argv.first().map(String::as_str) == Some("/bin/sh")
                && p.argv.get(3).map(String::as_str) == Some(pipe::PIPE_NAME)
        }) {
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
            _ => return,
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
                "ping" => {
                    self.conn
                        .call("Browser.getVersion", None, None, PING_WAIT)
                        .await
                        .map_err(call_error)?;
                    if let Some(d) = &self.daemon {
                        d.call_value("ping", params).await?;
                    }
                    Ok(json!({}))
                }
                "cdp.send" => self.send(params).await,
                "cdp.events" => self.events(params).await,
                _ => match &self.daemon {
                    Some(d) => d.call_value(method, params).await,
                    None if computerd::protocol::Method::from_name(method).is_none() => {
                        Err(ClientError::Rpc(
                            RpcError::not_found(format!(
                                "unknown method {method:?}; a browser answers hello, ping, cdp.send and cdp.events"
                            ))
                            .with_code(computerd::protocol::METHOD_NOT_FOUND),
                        ))
                    }
                    None => Err(ClientError::Rpc(RpcError::unsupported(format!(
                        "{method}: a browser answers hello, ping, cdp.send and cdp.events, and has no daemon for the rest"
                    )))),
                },
            }
        })
    }

    fn close(&self) {
        self.conn.end("the connection was closed");
        let Some(d) = self.daemon.clone() else {
            return;
        };
        // The browser ends with its connection, then the daemon's
        // connection closes.
        match (self.process.clone(), tokio::runtime::Handle::try_current()) {
            (Some(id), Ok(rt)) => {
                rt.spawn(async move {
                    let _ = d
                        .call_typed(&ProcessSignalParams {
                            id,
                            signal: Signal::Kill,
                        })
                        .await;
                    d.close();
                });
            }
            _ => d.close(),
        }
    }

    fn is_closed(&self) -> bool {
        self.conn.closed().is_some() || self.daemon.as_ref().is_some_and(|d| d.is_closed())
    }
}

impl Drop for BrowserClient {
    fn drop(&mut self) {
        self.conn.end("the connection was let go");
    }
}
