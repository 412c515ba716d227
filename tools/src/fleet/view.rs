//! `computer_view`: a link a person opens to watch a computer's screen
//! live, and take control of it. Listed only where the server serves a
//! viewer ([`super::FleetPolicy::view`]).

use rmcp::model::{CallToolResult, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::takeover::{self, RequestTakeoverArgs, TakeoverOutcome};
use super::{Fleet, FleetPolicy, TAKEOVER_NAME, Which};
use crate::define::{done, hints, make_tool, parse};
use crate::error::{Result, ToolError};

/// The tool's name.
pub const VIEW_NAME: &str = "computer_view";
/// The viewer as an MCP App: its resource (served where a viewer is).
pub const APP_URI: &str = "ui://computer-mcp/view";
/// The tools whose results the app shows, where a viewer is served: the
/// screen's (a desktop's and a phone's) and the page's (a browser's front
/// tab, on its X display or cast over CDP where it has none).
pub const APP_SHOWN_BY: [&str; 2] = ["screenshot", "browser_screenshot"];

/// Name the app in `tool`'s listing (`_meta.ui.resourceUri`, the MCP Apps
/// extension's key), if it is one the app shows.
pub fn tie_app(tool: &mut Tool) {
    if APP_SHOWN_BY.contains(&tool.name.as_ref()) {
        let mut meta = tool.meta.take().unwrap_or_default();
        meta.0
            .insert("ui".into(), serde_json::json!({ "resourceUri": APP_URI }));
        tool.meta = Some(meta);
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerViewArgs {
    /// Handle or name; default: yours.
    pub computer: Option<String>,
    /// End its links.
    pub revoke: Option<bool>,
    /// Ask a person to take control for this reason; waits till it is given back.
    pub ask: Option<String>,
    /// Seconds ask waits, 1-1800 (300).
    pub timeout_s: Option<i64>,
}

/// A link to a computer's live view, or the links ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ViewLink {
    /// The computer: `build (c-…)`.
    pub computer: String,
    /// The link to give a person; absent when links were revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// When the link stops working (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Links of this computer ended by this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked: Option<u64>,
    /// With ask: how the request ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover: Option<TakeoverOutcome>,
}

pub(super) fn tool() -> Tool {
    make_tool::<ComputerViewArgs, ViewLink>(
        VIEW_NAME,
        "A link for a person to watch the screen live and take control.".to_string(),
        hints("Watch link", false, false, false, false),
    )
}

pub(super) async fn call(
    args: Value,
    policy: &FleetPolicy,
    fleet: &dyn Fleet,
) -> Result<CallToolResult> {
    let a: ComputerViewArgs = parse(VIEW_NAME, args)?;
    let invalid = |s: &str| Err(ToolError::Invalid(format!("{VIEW_NAME}: {s}")));
    match (&a.ask, a.timeout_s, a.revoke) {
        (Some(_), _, Some(true)) => return invalid("ask and revoke go in separate calls"),
        (None, Some(_), _) => {
            return invalid("timeout_s goes with ask (how long to wait for the person)");
        }
        (Some(_), _, _) if !policy.takeover() => {
            return Err(ToolError::Refused(format!(
                "{VIEW_NAME}: ask needs a computer with a screen; this server's have none"
            )));
        }
        (Some(_), Some(t), _) if t < 1 => {
            return Err(ToolError::Invalid(format!(
                "{VIEW_NAME}: timeout_s {t} is out of range; it is 1 to {} seconds",
                takeover::MAX_TIMEOUT_S
            )));
        }
        (Some(reason), timeout_s, _) => {
            let o = takeover::ask(
                RequestTakeoverArgs {
                    reason: reason.clone(),
                    timeout_s: timeout_s.map(|t| t.unsigned_abs()),
                    computer: a.computer.clone(),
                },
                fleet,
            )
            .await
            .map_err(|e| match e {
                ToolError::Invalid(w) => ToolError::Invalid(
                    w.replacen(TAKEOVER_NAME, VIEW_NAME, 1)
                        .replacen("reason", "ask", 1),
                ),
                other => other,
            })?;
            let link = ViewLink {
                computer: o.computer.clone(),
                url: Some(o.url.clone()),
                takeover: Some(o.clone()),
                ..Default::default()
            };
            return Ok(done(takeover::words(&o), &link));
        }
        _ => {}
    }
    let which = match &a.computer {
        None => Which::Default,
        Some(c) => Which::parse("computer", c)
            .map_err(|e| ToolError::Invalid(format!("{VIEW_NAME}: {e}")))?,
    };
    let link = fleet
        .view(which, a.revoke.unwrap_or(false))
        .await
        .map_err(ToolError::Refused)?;
    let text = match (&link.url, &link.expires, link.revoked) {
        (Some(url), Some(expires), _) => format!(
            "{url}\nGive this link to a person: it shows {}'s screen live, and its \"Take control\" button lets them use the mouse and keyboard until they give control back. \
It works for that computer only, until {expires} or until computer_view with revoke: true; whoever has it can watch and control, so share it with that person only.",
            link.computer
        ),
        _ => format!(
            "ended {} link(s) to {}: open views closed, and the links no longer work",
            link.revoked.unwrap_or(0),
            link.computer
        ),
    };
    Ok(done(text, &link))
}
