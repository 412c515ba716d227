//! The page's dialogs (`alert`, `confirm`, `prompt`, `beforeunload`):
//! closed as they open under an action, as the model asked with
//! `browser_handle_dialog` or else dismissed, with words saying so.

use std::time::Duration;

use computerd::protocol::limits;
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::{Tab, events, send, send_to, with_memo};
use crate::error::Result;

/// How long an input event may take before the tools look for a dialog
/// that holds it (a page in `alert()` answers no input until it closes).
pub(crate) const INPUT_MS: u64 = 5_000;

/// A dialog (`alert`, `confirm`, `prompt`, `beforeunload`) the page opened
/// since `since` and left open, closed: the words saying so. As the model
/// asked with `browser_handle_dialog` before it opened, else a
/// `beforeunload` is accepted (the navigation asked for goes on) and every
/// other dismissed.
pub(crate) async fn close_dialog(
    ctx: &ToolContext,
    tab: &Tab,
    since: u64,
) -> Result<Option<String>> {
    let (evs, _) = events(ctx, &tab.session, since, &DIALOG_EVENTS, Duration::ZERO).await?;
    let mut open = None;
    for e in evs {
        if e.method == "Page.javascriptDialogOpening" {
            open = Some(e.params);
        } else {
            open = None;
        }
    }
    let Some(d) = open else {
        return Ok(None);
    };
    let kind = d["type"].as_str().unwrap_or("alert").to_string();
    let asked = with_memo(ctx, |m| m.dialog.take());
    let accept = asked.as_ref().map_or(kind == "beforeunload", |a| a.accept);
    let prompt_text = asked.as_ref().and_then(|a| a.prompt_text.as_deref());
    let message = answer(ctx, tab, &d, accept, prompt_text).await?;
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    Ok(Some(format!(
        "the page opened {article} {kind} dialog saying {message:?}, which was {}{}",
        if accept { "accepted" } else { "dismissed" },
        if asked.is_some() {
            " as browser_handle_dialog asked"
        } else {
            ""
        }
    )))
}

/// Close the open dialog `d` (its `Page.javascriptDialogOpening` params),
/// accepted or not, with `prompt_text` for a prompt; its message, the first
/// 200 characters, for the words that say so.
pub(crate) async fn answer(
    ctx: &ToolContext,
    tab: &Tab,
    d: &Value,
    accept: bool,
    prompt_text: Option<&str>,
) -> Result<String> {
    let mut params = json!({ "accept": accept });
    if let Some(t) = prompt_text {
        params["promptText"] = json!(t);
    }
    send_to(ctx, tab, "Page.handleJavaScriptDialog", params).await?;
    Ok(d["message"]
        .as_str()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect())
}

/// One input event (or a command the page may hold with a dialog): a
/// dialog the page opens while the command is held is closed as soon as it
/// opens (a page in `prompt()` can leave the browser answering nothing
/// until it is closed), and its words come back; without one, a command
/// that does not finish within `timeout_ms` is an error.
pub(crate) async fn send_held(
    ctx: &ToolContext,
    tab: &Tab,
    method: &str,
    params: Value,
    since: u64,
    timeout_ms: u64,
) -> Result<(Value, Option<String>)> {
    let held = send(ctx, Some(&tab.session), method, params, Some(timeout_ms));
    tokio::pin!(held);
    let opened = async {
        let mut at = since;
        loop {
            let wait = Duration::from_millis(limits::CDP_EVENTS_WAIT_MAX_MS);
            let (evs, next) = events(ctx, &tab.session, at, &DIALOG_EVENTS[..1], wait).await?;
            if !evs.is_empty() {
                return Result::Ok(());
            }
            at = next.max(at);
        }
    };
    let words = tokio::select! {
        r = &mut held => {
            return match r {
                Ok(v) => Ok((v, None)),
                Err(e) if e.kind() == Some(computerd::protocol::ErrorKind::Timeout) => {
                    match close_dialog(ctx, tab, since).await? {
                        Some(words) => Ok((Value::Null, Some(words))),
                        None => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
        }
        o = opened => {
            o?;
            close_dialog(ctx, tab, since).await?
        }
    };
    // The dialog closed, the command it held finishes.
    let v = held.await.unwrap_or(Value::Null);
    Ok((v, words))
}

/// The events of a page's dialogs, opening first.
pub(crate) const DIALOG_EVENTS: [&str; 2] = [
    "Page.javascriptDialogOpening",
    "Page.javascriptDialogClosed",
];
