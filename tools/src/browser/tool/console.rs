//! `browser_console`: the page's console messages and exceptions since a
//! point; the entry limits `browser_network` shares.

use std::time::Duration;

use computerd::protocol::CdpEvent;
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::chars_cut;
use crate::browser::{Tab, current, events};
use crate::define::done;
use crate::error::{Result, ToolError};

/// Entries `browser_console` and `browser_network` give at most.
pub const MAX_ENTRIES: u32 = 200;

/// Entries they give when `max` is not given.
/// The events console entries are read from.
pub const METHODS: [&str; 3] = [
    "Runtime.consoleAPICalled",
    "Runtime.exceptionThrown",
    "Log.entryAdded",
];

pub const DEFAULT_ENTRIES: u32 = 50;

/// One console entry or address at most, in characters.
pub const MAX_ENTRY_CHARS: usize = 500;

target_args! {
    pub struct RecentArgs {
        /// At most this many of the newest entries, 1 to 200 (default 50).
        pub max: Option<u32>,
        /// Only entries after this point (the previous answer's next).
        pub since: Option<u64>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ConsoleEntry {
    pub seq: u64,
    /// log, info, warning, error, exception, ...
    pub level: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ConsoleOutput {
    pub entries: Vec<ConsoleEntry>,
    /// since for the next call.
    pub next: u64,
}

pub(crate) fn entries_max(m: Option<u32>) -> Result<usize> {
    let m = m.unwrap_or(DEFAULT_ENTRIES);
    if !(1..=MAX_ENTRIES).contains(&m) {
        return Err(ToolError::Invalid(format!(
            "max is {m}; give 1 to {MAX_ENTRIES}"
        )));
    }
    Ok(m as usize)
}

/// Every event of `methods` kept since `since` (a few reads at most).
async fn all_events(
    ctx: &ToolContext,
    tab: &Tab,
    since: u64,
    methods: &[&str],
) -> Result<(Vec<CdpEvent>, u64)> {
    let mut all = Vec::new();
    let mut at = since;
    for _ in 0..5 {
        let (evs, next) = events(ctx, &tab.session, at, methods, Duration::ZERO).await?;
        let n = evs.len();
        all.extend(evs);
        at = next.max(at);
        if n < computerd::protocol::limits::CDP_EVENTS_MAX as usize {
            break;
        }
    }
    Ok((all, at))
}

fn remote_text(v: &Value) -> String {
    match &v["value"] {
        Value::String(s) => s.clone(),
        Value::Null => v["description"]
            .as_str()
            .or(v["unserializableValue"].as_str())
            .unwrap_or(v["type"].as_str().unwrap_or(""))
            .to_string(),
        other => other.to_string(),
    }
}

/// One console-ish event as an entry.
pub(crate) fn console_entry(e: &CdpEvent) -> Option<ConsoleEntry> {
    let (level, text) = match e.method.as_str() {
        "Runtime.consoleAPICalled" => {
            let args: Vec<String> = e.params["args"]
                .as_array()
                .map(|a| a.iter().map(remote_text).collect())
                .unwrap_or_default();
            (
                e.params["type"].as_str().unwrap_or("log").to_string(),
                args.join(" "),
            )
        }
        "Runtime.exceptionThrown" => {
            let d = &e.params["exceptionDetails"];
            let t = d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("");
            ("exception".to_string(), t.to_string())
        }
        "Log.entryAdded" => {
            let en = &e.params["entry"];
            (
                en["level"].as_str().unwrap_or("info").to_string(),
                format!(
                    "{} ({})",
                    en["text"].as_str().unwrap_or(""),
                    en["source"].as_str().unwrap_or("")
                ),
            )
        }
        _ => return None,
    };
    Some(ConsoleEntry {
        seq: e.seq,
        level,
        text: chars_cut(&text, MAX_ENTRY_CHARS),
    })
}

/// What `browser_console` and `browser_network` read: the entries `read`
/// makes of the events `methods` since `a.since` in the current tab, the
/// newest `a.max` kept; with how many older ones were left out, and `next`.
pub(crate) async fn recent<T>(
    ctx: &ToolContext,
    a: &RecentArgs,
    methods: &[&str],
    read: impl FnOnce(&[CdpEvent]) -> Vec<T>,
) -> Result<(Vec<T>, usize, u64)> {
    let max = entries_max(a.max)?;
    let tab = current(ctx).await?;
    let (evs, next) = all_events(ctx, &tab, a.since.unwrap_or(0), methods).await?;
    let mut entries = read(&evs);
    let skipped = entries.len().saturating_sub(max);
    entries.drain(..skipped);
    Ok((entries, skipped, next))
}

pub(crate) async fn console(ctx: &ToolContext, a: RecentArgs) -> Result<CallToolResult> {
    console_kept(ctx, a, |_| true).await
}

/// The recent console entries `keep` takes (Playwright's level).
pub(crate) async fn console_kept(
    ctx: &ToolContext,
    a: RecentArgs,
    keep: impl Fn(&ConsoleEntry) -> bool,
) -> Result<CallToolResult> {
    let (entries, skipped, next) = recent(ctx, &a, &METHODS, |evs| {
        evs.iter()
            .filter_map(console_entry)
            .filter(|e| keep(e))
            .collect()
    })
    .await?;
    let mut text = String::new();
    if skipped > 0 {
        text.push_str(&format!("({skipped} older entries left out)\n"));
    }
    for e in &entries {
        text.push_str(&format!("[{}] {}: {}\n", e.seq, e.level, e.text));
    }
    if entries.is_empty() {
        text.push_str("no console messages");
        if a.since.is_some() {
            text.push_str(" since then");
        }
        text.push('\n');
    }
    text.push_str(&format!("(next: {next})"));
    Ok(done(text, &ConsoleOutput { entries, next }))
}
