//! `browser_wait_for` (Playwright MCP's name and arguments): wait for text
//! to appear or to go, or for a time, bounded; a wait that reaches its
//! bound ends with what the page showed.

use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::chars_cut;
use crate::browser::{Tab, check, current, send_to};
use crate::define::done;
use crate::error::{Result, ToolError};

/// The longest wait, in seconds (Playwright's bound too).
pub const WAIT_MAX_S: f64 = 30.0;

/// How long a wait for text lasts when no time is given.
pub const WAIT_TEXT_DEFAULT_S: f64 = 10.0;

/// How often the page's text is read.
const POLL: Duration = Duration::from_millis(100);

target_args! {
    pub struct WaitArgs {
        /// Seconds to wait (at most 30); with text or textGone, how long to wait for it (default 10).
        pub time: Option<f64>,
        /// Wait until this text shows in the page.
        pub text: Option<String>,
        /// Wait until this text no longer shows in the page.
        #[serde(rename = "textGone")]
        pub text_gone: Option<String>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct WaitOutput {
    /// What happened: "appeared", "gone" or "waited".
    pub outcome: String,
    /// How long the wait took, in milliseconds.
    pub waited_ms: u64,
}

/// The page's visible text (the main frame's `innerText`).
async fn page_text(ctx: &ToolContext, tab: &Tab) -> Result<String> {
    let r = send_to(
        ctx,
        tab,
        "Runtime.evaluate",
        json!({"expression": "document.body ? document.body.innerText : ''", "returnByValue": true}),
    )
    .await?;
    Ok(r["result"]["value"].as_str().unwrap_or("").to_string())
}

pub(crate) async fn wait_for(ctx: &ToolContext, a: WaitArgs) -> Result<CallToolResult> {
    if let Some(t) = a.time
        && !(0.0..=WAIT_MAX_S).contains(&t)
    {
        return Err(ToolError::Invalid(format!(
            "time is {t}; give 0 to {WAIT_MAX_S} seconds"
        )));
    }
    for (field, v) in [("text", &a.text), ("textGone", &a.text_gone)] {
        if let Some(v) = v {
            check::bounded(field, v, check::MAX_URL_BYTES)?;
            if v.is_empty() {
                return Err(ToolError::Invalid(format!(
                    "{field} is empty; give the text to wait for"
                )));
            }
        }
    }
    let started = Instant::now();
    let out = |outcome: &str| WaitOutput {
        outcome: outcome.into(),
        waited_ms: started.elapsed().as_millis() as u64,
    };
    if a.text.is_none() && a.text_gone.is_none() {
        let Some(t) = a.time else {
            return Err(ToolError::Invalid(
                "give time (seconds), text or textGone: what to wait for".into(),
            ));
        };
        tokio::time::sleep(Duration::from_secs_f64(t)).await;
        return Ok(done(format!("### Result\nwaited {t} s"), &out("waited")));
    }
    let bound = Duration::from_secs_f64(a.time.unwrap_or(WAIT_TEXT_DEFAULT_S));
    let tab = current(ctx).await?;
    loop {
        let seen = page_text(ctx, &tab).await?;
        if let Some(t) = &a.text
            && seen.contains(t.as_str())
        {
            let o = out("appeared");
            let text = format!(
                "### Result\n{t:?} shows in the page (after {} ms)",
                o.waited_ms
            );
            return Ok(done(text, &o));
        }
        if let Some(t) = &a.text_gone
            && !seen.contains(t.as_str())
        {
            let o = out("gone");
            let text = format!(
                "### Result\n{t:?} is gone from the page (after {} ms)",
                o.waited_ms
            );
            return Ok(done(text, &o));
        }
        if started.elapsed() >= bound {
            let what = match (&a.text, &a.text_gone) {
                (Some(t), Some(g)) => format!("{t:?} did not show and {g:?} did not go"),
                (Some(t), None) => format!("{t:?} did not show"),
                (_, Some(g)) => format!("{g:?} did not go"),
                (None, None) => String::new(),
            };
            return Err(ToolError::Refused(format!(
                "waited {:.1} s (the bound; time sets it, at most {WAIT_MAX_S} s): {what}. The page shows: {:?}",
                bound.as_secs_f64(),
                chars_cut(&seen, 1_000)
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
