//! A browser's front tab: the page a person looking at the browser sees.
//! Chromium lists its tabs in the order they opened, so the front one is
//! the page whose document is visible (only the active tab of a window
//! is); with none visible, the last opened. Read over a CDP connection,
//! or over any computer's client through `cdp.send`.

use std::time::Duration;

use computerd::client::{ClientError, ComputerClient};
use computerd::protocol::RpcError;
use serde_json::{Value, json};

use super::conn::{CallError, CdpConn};

/// How long one CDP command of the cast, an input or this look gets.
pub const CALL_WAIT: Duration = Duration::from_secs(10);

/// What sends CDP commands: a connection, or a computer's client.
#[async_trait::async_trait]
pub trait Cdp: Sync {
    async fn cdp(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, ClientError>;
}

pub(super) fn rpc(e: RpcError) -> ClientError {
    ClientError::Rpc(e)
}

fn call_error(what: &str, e: CallError) -> ClientError {
    match e {
        CallError::Browser(e) => rpc(RpcError::invalid(format!("{what}: {}", e.message))),
        CallError::Timeout(w) => rpc(RpcError::timeout(format!("{what}: {w}"))),
        CallError::Closed(w) => ClientError::Closed(w),
    }
}

#[async_trait::async_trait]
impl Cdp for CdpConn {
    async fn cdp(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.call(method, Some(params), session, CALL_WAIT)
            .await
            .map_err(|e| call_error(method, e))
    }
}

#[async_trait::async_trait]
impl<'c> Cdp for dyn ComputerClient + 'c {
    async fn cdp(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, ClientError> {
        let mut p = json!({ "method": method, "params": params });
        if let Some(s) = session {
            p["sessionId"] = json!(s);
        }
        let mut r = self.call_value("cdp.send", p).await?;
        Ok(r["result"].take())
    }
}

/// A tab: its target id, address and title.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontTab {
    pub target: String,
    pub url: String,
    pub title: String,
}

/// The browser's front tab.
pub async fn front(c: &(impl Cdp + ?Sized)) -> Result<FrontTab, ClientError> {
    let r = c.cdp("Target.getTargets", json!({}), None).await?;
    let tabs: Vec<FrontTab> = r["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .filter(|t| !t["url"].as_str().unwrap_or("").starts_with("devtools://"))
        .filter_map(|t| {
            Some(FrontTab {
                target: t["targetId"].as_str()?.to_string(),
                url: t["url"].as_str().unwrap_or_default().to_string(),
                title: t["title"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect();
    if tabs.len() > 1 {
        for t in &tabs {
            if visible(c, &t.target).await {
                return Ok(t.clone());
            }
        }
    }
    tabs.last().cloned().ok_or_else(|| {
        rpc(RpcError::unsupported(
            "the browser has no tab open: there is no screen to show",
        ))
    })
}

/// Whether tab `target`'s document is visible (a tab that does not
/// answer is not).
async fn visible(c: &(impl Cdp + ?Sized), target: &str) -> bool {
    let attach = json!({ "targetId": target, "flatten": true });
    let Ok(a) = c.cdp("Target.attachToTarget", attach, None).await else {
        return false;
    };
    let Some(session) = a["sessionId"].as_str() else {
        return false;
    };
    let ask = json!({ "expression": "document.visibilityState", "returnByValue": true });
    let seen = c.cdp("Runtime.evaluate", ask, Some(session)).await;
    let _ = c
        .cdp(
            "Target.detachFromTarget",
            json!({ "sessionId": session }),
            None,
        )
        .await;
    seen.is_ok_and(|r| r["result"]["value"] == "visible")
}
