//! `browser_navigate`: open an address, or go back, forward or reload.

use std::time::Duration;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::{
    Loaded, Tab, check, current, cursor, main_frame, send, send_to, title_url, wait_load,
};
use crate::define::done;
use crate::error::{Result, ToolError};

/// `timeout_ms` of `browser_navigate` when none is given.
pub const NAVIGATE_DEFAULT_MS: u64 = 30_000;

/// `timeout_ms` of `browser_navigate` at most.
pub const NAVIGATE_MAX_MS: u64 = 60_000;

/// `timeout_ms` of `browser_navigate` at least.
pub const NAVIGATE_MIN_MS: u64 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum History {
    Back,
    Forward,
    Reload,
}

target_args! {
    pub struct NavigateArgs {
        /// The address to open: http:// or https:// (a bare host gets https://), or about:blank. "back", "forward" and "reload" are taken here too.
        pub url: Option<String>,
        /// Instead of url: back, forward or reload.
        pub action: Option<History>,
        /// How long to wait for the page to load, 1000 to 60000 ms (default 30000).
        pub timeout_ms: Option<u64>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct NavigateOutput {
    pub url: String,
    pub title: String,
}

pub(crate) fn navigate_timeout(t: Option<u64>) -> Result<Duration> {
    let ms = t.unwrap_or(NAVIGATE_DEFAULT_MS);
    if !(NAVIGATE_MIN_MS..=NAVIGATE_MAX_MS).contains(&ms) {
        return Err(ToolError::Invalid(format!(
            "timeout_ms is {ms}; give {NAVIGATE_MIN_MS} to {NAVIGATE_MAX_MS} (default {NAVIGATE_DEFAULT_MS}); nothing was sent"
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// What a navigation that did not load says, after stopping it.
async fn not_loaded(ctx: &ToolContext, tab: &Tab, within: Duration) -> ToolError {
    let _ = send(
        ctx,
        Some(&tab.session),
        "Page.stopLoading",
        json!({}),
        Some(5_000),
    )
    .await;
    match title_url(ctx, tab).await {
        Ok((_, url)) => ToolError::Refused(format!(
            "the page did not finish loading within {} s (timeout_ms); loading was stopped and the browser still answers: the tab shows {url}. Take browser_snapshot to see what loaded, or navigate again with a longer timeout_ms (at most {NAVIGATE_MAX_MS})",
            within.as_secs_f64()
        )),
        Err(e) => ToolError::Refused(format!(
            "the page did not finish loading within {} s (timeout_ms), and the browser did not answer after: {e}",
            within.as_secs_f64()
        )),
    }
}

/// Open `url` in `tab` and wait for it to load.
pub(crate) async fn goto(ctx: &ToolContext, tab: &Tab, url: &str, within: Duration) -> Result<()> {
    let frame = main_frame(ctx, tab).await?;
    let since = cursor(ctx, &tab.session).await?;
    let started = std::time::Instant::now();
    // Page.navigate answers once the response starts (or the request
    // fails): a server that never answers holds it, so it gets the bound.
    let r = match send(
        ctx,
        Some(&tab.session),
        "Page.navigate",
        json!({"url": url}),
        Some(within.as_millis() as u64),
    )
    .await
    {
        Ok(r) => r,
        Err(e) if e.kind() == Some(computerd::protocol::ErrorKind::Timeout) => {
            return Err(not_loaded(ctx, tab, within).await);
        }
        Err(e) => return Err(e),
    };
    let left = within.saturating_sub(started.elapsed());
    if let Some(err) = r["errorText"].as_str()
        && !err.is_empty()
    {
        return Err(ToolError::Refused(format!(
            "{url} did not open: {err}; the browser still answers (check the address, or whether the server is up)"
        )));
    }
    let Some(loader) = r["loaderId"].as_str() else {
        // A navigation inside the document (a #fragment): nothing loads.
        return Ok(());
    };
    match wait_load(
        ctx,
        tab,
        &frame.id,
        &frame.loader,
        Some(loader.to_string()),
        since,
        left,
    )
    .await?
    {
        Loaded::Done => Ok(()),
        Loaded::TimedOut => Err(not_loaded(ctx, tab, within).await),
    }
}

async fn history(ctx: &ToolContext, tab: &Tab, h: History, within: Duration) -> Result<()> {
    let frame = main_frame(ctx, tab).await?;
    let since = cursor(ctx, &tab.session).await?;
    match h {
        History::Reload => {
            send_to(ctx, tab, "Page.reload", json!({})).await?;
        }
        History::Back | History::Forward => {
            let r = send_to(ctx, tab, "Page.getNavigationHistory", json!({})).await?;
            let at = r["currentIndex"].as_i64().unwrap_or(0);
            let entries = r["entries"].as_array().cloned().unwrap_or_default();
            let to = if h == History::Back { at - 1 } else { at + 1 };
            let Some(entry) = usize::try_from(to).ok().and_then(|i| entries.get(i)) else {
                return Err(ToolError::Refused(format!(
                    "there is no page to go {} to: this tab's history has {} entries and it is at entry {}; nothing was done",
                    if h == History::Back {
                        "back"
                    } else {
                        "forward"
                    },
                    entries.len(),
                    at + 1
                )));
            };
            send_to(
                ctx,
                tab,
                "Page.navigateToHistoryEntry",
                json!({"entryId": entry["id"]}),
            )
            .await?;
        }
    }
    match wait_load(ctx, tab, &frame.id, &frame.loader, None, since, within).await? {
        Loaded::Done => Ok(()),
        Loaded::TimedOut => Err(not_loaded(ctx, tab, within).await),
    }
}

pub(crate) async fn navigate(ctx: &ToolContext, a: NavigateArgs) -> Result<CallToolResult> {
    let within = navigate_timeout(a.timeout_ms)?;
    let word = a.url.as_deref().map(str::to_ascii_lowercase);
    let from_url = match word.as_deref() {
        Some("back") => Some(History::Back),
        Some("forward") => Some(History::Forward),
        Some("reload") => Some(History::Reload),
        _ => None,
    };
    /// Where to go, checked before anything is sent.
    enum Go {
        History(History),
        Url(String),
    }
    let go = match (a.url, a.action.or(from_url)) {
        (Some(_), Some(h)) if from_url.is_none() => {
            return Err(ToolError::Invalid(format!(
                "give url or action ({}), not both; nothing was sent",
                match h {
                    History::Back => "back",
                    History::Forward => "forward",
                    History::Reload => "reload",
                }
            )));
        }
        (_, Some(h)) => Go::History(h),
        (Some(u), None) => Go::Url(check::url("url", &u)?),
        (None, None) => {
            return Err(ToolError::Invalid(
                "give url (an http:// or https:// address) or action (back, forward or reload); nothing was sent".into(),
            ));
        }
    };
    let tab = current(ctx).await?;
    let what = match go {
        Go::History(h) => {
            history(ctx, &tab, h, within).await?;
            match h {
                History::Back => "went back",
                History::Forward => "went forward",
                History::Reload => "reloaded",
            }
        }
        Go::Url(url) => {
            goto(ctx, &tab, &url, within).await?;
            "opened"
        }
    };
    let (title, url) = title_url(ctx, &tab).await?;
    let text = format!(
        "{what}: {url} (title {title:?}). Take browser_snapshot to read the page and get refs to act on"
    );
    Ok(done(text, &NavigateOutput { url, title }))
}
