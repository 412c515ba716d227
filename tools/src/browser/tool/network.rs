//! `browser_network`: the page's requests and their answers since a point.

use std::collections::HashMap;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;

use super::console::{MAX_ENTRY_CHARS, RecentArgs, recent};
use crate::ToolContext;
use crate::browser::tool::chars_cut;
use crate::define::done;
use crate::error::Result;

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct NetworkEntry {
    pub seq: u64,
    pub method: String,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct NetworkOutput {
    pub requests: Vec<NetworkEntry>,
    pub next: u64,
}

/// Requests from the network events, in the order they were sent.
pub(crate) fn network_entries(evs: &[computerd::protocol::CdpEvent]) -> Vec<NetworkEntry> {
    let mut order: Vec<String> = Vec::new();
    let mut by: HashMap<String, NetworkEntry> = HashMap::new();
    for e in evs {
        let Some(id) = e.params["requestId"].as_str() else {
            continue;
        };
        match e.method.as_str() {
            "Network.requestWillBeSent" => {
                let r = &e.params["request"];
                if !by.contains_key(id) {
                    order.push(id.to_string());
                }
                by.insert(
                    id.to_string(),
                    NetworkEntry {
                        seq: e.seq,
                        method: r["method"].as_str().unwrap_or("GET").to_string(),
                        url: chars_cut(r["url"].as_str().unwrap_or(""), MAX_ENTRY_CHARS),
                        status: None,
                        mime: None,
                        failed: None,
                    },
                );
            }
            "Network.responseReceived" => {
                if let Some(n) = by.get_mut(id) {
                    n.status = e.params["response"]["status"].as_u64();
                    n.mime = e.params["response"]["mimeType"]
                        .as_str()
                        .map(str::to_string);
                }
            }
            "Network.loadingFailed" => {
                if let Some(n) = by.get_mut(id) {
                    n.failed = Some(
                        e.params["errorText"]
                            .as_str()
                            .unwrap_or("failed")
                            .to_string(),
                    );
                }
            }
            _ => {}
        }
    }
    order.into_iter().filter_map(|id| by.remove(&id)).collect()
}

/// The events requests are read from.
pub const METHODS: [&str; 3] = [
    "Network.requestWillBeSent",
    "Network.responseReceived",
    "Network.loadingFailed",
];

pub(crate) async fn network(ctx: &ToolContext, a: RecentArgs) -> Result<CallToolResult> {
    network_kept(ctx, a, |_| true).await
}

/// The recent requests `keep` takes (Playwright's filters).
pub(crate) async fn network_kept(
    ctx: &ToolContext,
    a: RecentArgs,
    keep: impl Fn(&NetworkEntry) -> bool,
) -> Result<CallToolResult> {
    let (requests, skipped, next) = recent(ctx, &a, &METHODS, |evs| {
        network_entries(evs)
            .into_iter()
            .filter(|e| keep(e))
            .collect()
    })
    .await?;
    let mut text = String::new();
    if skipped > 0 {
        text.push_str(&format!("({skipped} older requests left out)\n"));
    }
    for r in &requests {
        let how = match (&r.failed, r.status) {
            (Some(f), _) => format!("failed: {f}"),
            (None, Some(s)) => format!("{s} {}", r.mime.as_deref().unwrap_or("")),
            (None, None) => "(no response yet)".into(),
        };
        text.push_str(&format!(
            "[{}] {} {} -> {}\n",
            r.seq,
            r.method,
            r.url,
            how.trim()
        ));
    }
    if requests.is_empty() {
        text.push_str("no requests seen\n");
    }
    text.push_str(&format!("(next: {next})"));
    Ok(done(text, &NetworkOutput { requests, next }))
}
