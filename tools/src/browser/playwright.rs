//! Playwright MCP's vocabulary (`@playwright/mcp`, the browser server most
//! models and prompts were trained on), taken as it is sent.
//!
//! Which names are listed: ours stay the listed ones where we have a tool
//! of our own for the act (`browser_screenshot`, `browser_press`,
//! `browser_select`, `browser_eval`, ...), and Playwright's name is the
//! listed one where the tool is new here or the names already agree
//! (`browser_wait_for`, `browser_fill_form`, `browser_click`, ...). Our
//! names are shorter and our tools take more (refs or points, several
//! keys, Anthropic's field names too), so they stay what a model reads;
//! Playwright's other names are answered without being listed
//! ([`ALIASES`]): each resolves to one listed tool and reads Playwright's
//! arguments into that tool's, so `tools/list` does not grow by a second
//! copy of any tool (issue 41 wants every kind's listing at most 20 KB).
//! Of the tools new here, `browser_wait_for` and `browser_fill_form` are
//! listed (a model needs them on most forms); `browser_handle_dialog`,
//! `browser_resize`, `browser_close` and `browser_pdf` are answered
//! unlisted, offered with the listed tool that needs what they need.
//!
//! A Playwright call gets Playwright's kind of answer: what was done, then
//! `### Page` with the page's URL and title and the console messages the
//! act produced ([`with_page_state`]). A Playwright argument we cannot
//! honour is refused naming it and what is done instead ([`instead`]);
//! `element`, the human description, is taken and not used, as Playwright
//! itself only logs it. The fixture
//! `fixtures/playwright-mcp/<version>/tools.json` holds the schemas these
//! were written against; a golden test holds what each of their fields
//! gets here.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolContext;
use crate::browser::tool::console::{self, ConsoleEntry, RecentArgs, console_entry};
use crate::browser::tool::navigate::{History, NavigateArgs, navigate};
use crate::browser::tool::network::{self, NetworkEntry};
use crate::browser::tool::press::{PressArgs, press};
use crate::browser::tool::screenshot::{ScreenshotArgs, screenshot};
use crate::browser::tool::select::{SelectArgs, select};
use crate::browser::tool::upload::{self, UploadArgs};
use crate::browser::tool::{eval, window};
use crate::browser::{current, cursor, events, title_url};
use crate::error::{Result, ToolError};
use crate::registry::Alias;

/// Playwright's names that are not ours, each doing a listed tool's work.
pub const ALIASES: &[Alias] = &[
    alias!(
        "browser_take_screenshot",
        "browser_screenshot",
        take_screenshot
    ),
    alias!("browser_navigate_back", "browser_navigate", navigate_back),
    alias!("browser_press_key", "browser_press", press_key),
    alias!("browser_select_option", "browser_select", select_option),
    alias!("browser_file_upload", "browser_upload", file_upload),
    alias!(
        "browser_console_messages",
        "browser_console",
        console_messages
    ),
    alias!(
        "browser_network_requests",
        "browser_network",
        network_requests
    ),
    alias!("browser_evaluate", "browser_eval", evaluate),
    // Acts of the browser as a whole that models rarely need: answered,
    // not listed (each would add about 1 KB to every `tools/list`); the
    // instructions and the skill name them.
    alias!(
        "browser_handle_dialog",
        "browser_tabs",
        window::handle_dialog
    ),
    alias!("browser_resize", "browser_tabs", window::resize),
    alias!("browser_close", "browser_tabs", window::close),
    alias!("browser_pdf", "browser_upload", window::pdf),
];

/// An [`Alias`] whose handler parses Playwright's arguments into `$f`'s
/// own type (refusals name Playwright's fields) and answers with the
/// page's state after.
macro_rules! alias {
    ($name:literal, $of:literal, $f:path) => {
        Alias {
            name: $name,
            of: $of,
            call: |ctx, name, args| {
                Box::pin(async move {
                    let a = $crate::define::parse(name, args)?;
                    let mark = $crate::browser::playwright::mark(ctx).await;
                    let r = $f(ctx, a).await;
                    let r = $crate::browser::playwright::with_page_state(ctx, mark, r).await;
                    $crate::browser::say_started_again(ctx, r)
                })
            },
        }
    };
}
use alias;

/// Playwright's arguments that are not taken here, by tool: what is done
/// instead, for the refusal's words (the unknown field is named before).
const INSTEAD: &[(&str, &str, &str)] = &[
    (
        "browser_snapshot",
        "target",
        "the snapshot is of the whole page; read one element's text with browser_get_text {ref}",
    ),
    (
        "browser_snapshot",
        "filename",
        "the snapshot comes back in the answer and no file is written",
    ),
    (
        "browser_snapshot",
        "depth",
        "a long snapshot is cut into pages (page: 2 reads on), not by depth",
    ),
    (
        "browser_snapshot",
        "boxes",
        "no boxes are given; browser_screenshot shows where things are",
    ),
    (
        "browser_take_screenshot",
        "filename",
        "the image comes back in the answer and no file is written (browser_pdf saves a page in the computer)",
    ),
    (
        "browser_console_messages",
        "filename",
        "the messages come back in the answer and no file is written",
    ),
    (
        "browser_network_requests",
        "filename",
        "the requests come back in the answer and no file is written",
    ),
    (
        "browser_evaluate",
        "filename",
        "the value comes back in the answer and no file is written",
    ),
    (
        "browser_tabs",
        "isolatedContext",
        "every tab shares the browser's one context (cookies and storage)",
    ),
];

/// What is done instead of Playwright's `field` of `tool`, if it is one.
pub(crate) fn instead(tool: &str, field: &str) -> Option<&'static str> {
    INSTEAD
        .iter()
        .find(|(t, f, _)| *t == tool && *f == field)
        .map(|(_, _, w)| *w)
}

/// Where the current tab's events stood before an act: the console
/// messages after it are the act's.
pub(crate) struct Mark {
    session: String,
    seq: u64,
}

pub(crate) async fn mark(ctx: &ToolContext) -> Option<Mark> {
    let tab = current(ctx).await.ok()?;
    let seq = cursor(ctx, &tab.session).await.ok()?;
    Some(Mark {
        session: tab.session,
        seq,
    })
}

/// The most new console messages an answer shows (browser_console has all).
const NEW_MESSAGES: usize = 10;

/// `r`, when it succeeded, with the page's state after the act as
/// Playwright MCP gives it: `### Page` (URL, title) and the console
/// messages logged since `mark` (in the tab the act ended in).
pub(crate) async fn with_page_state(
    ctx: &ToolContext,
    mark: Option<Mark>,
    r: Result<CallToolResult>,
) -> Result<CallToolResult> {
    let mut r = r?;
    if r.is_error == Some(true) {
        return Ok(r);
    }
    let Ok(tab) = current(ctx).await else {
        return Ok(r);
    };
    let (title, url) = title_url(ctx, &tab).await?;
    let mut text = format!("### Page\n- Page URL: {url}\n- Page Title: {title}");
    let since = match mark {
        Some(m) if m.session == tab.session => m.seq,
        _ => 0,
    };
    let (evs, _) = events(ctx, &tab.session, since, &console::METHODS, Duration::ZERO).await?;
    let new: Vec<ConsoleEntry> = evs.iter().filter_map(console_entry).collect();
    if !new.is_empty() {
        text.push_str("\n### New console messages");
        let left = new.len().saturating_sub(NEW_MESSAGES);
        if left > 0 {
            text.push_str(&format!(
                "\n- ({left} earlier ones left out: browser_console has them)"
            ));
        }
        for e in &new[left..] {
            text.push_str(&format!("\n- [{}] {}", e.level, e.text));
        }
    }
    r.content.push(ContentBlock::text(text));
    Ok(r)
}

/// Playwright's `element`: a description for the record, not used.
type Described = Option<String>;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeScreenshotArgs {
    pub element: Described,
    pub target: Option<String>,
    #[serde(rename = "type")]
    pub format: Option<String>,
    #[serde(rename = "fullPage")]
    pub full_page: Option<bool>,
    pub scale: Option<String>,
}

async fn take_screenshot(ctx: &ToolContext, a: TakeScreenshotArgs) -> Result<CallToolResult> {
    if let Some(f) = a.format.as_deref().filter(|f| *f != "png") {
        return Err(ToolError::Invalid(format!(
            "type is {f:?}; screenshots are made as png only (fit to the screenshot size): give \"png\" or leave it out; nothing was taken"
        )));
    }
    if let Some(s) = a.scale.as_deref().filter(|s| *s != "css") {
        return Err(ToolError::Invalid(format!(
            "scale is {s:?}; screenshots are in CSS pixels, fit to the screenshot size: give \"css\" or leave it out; nothing was taken"
        )));
    }
    screenshot(
        ctx,
        ScreenshotArgs {
            reference: a.target,
            full_page: a.full_page,
            ..Default::default()
        },
    )
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

async fn navigate_back(ctx: &ToolContext, _: NoArgs) -> Result<CallToolResult> {
    navigate(
        ctx,
        NavigateArgs {
            action: Some(History::Back),
            ..Default::default()
        },
    )
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PressKeyArgs {
    pub key: String,
}

async fn press_key(ctx: &ToolContext, a: PressKeyArgs) -> Result<CallToolResult> {
    // Playwright's chords join with `+` as ours do; one key is one press
    // (a space is the Space key, not a separator).
    let key = if a.key == " " { "Space".into() } else { a.key };
    press(
        ctx,
        PressArgs {
            key: Some(key),
            ..Default::default()
        },
    )
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectOptionArgs {
    pub element: Described,
    pub target: String,
    pub values: Vec<String>,
}

async fn select_option(ctx: &ToolContext, a: SelectOptionArgs) -> Result<CallToolResult> {
    select(
        ctx,
        SelectArgs {
            reference: Some(a.target),
            values: Some(a.values),
            ..Default::default()
        },
    )
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileUploadArgs {
    pub paths: Option<Vec<String>>,
}

/// Playwright answers the file chooser a click opened; a click here opens
/// none, so the files go to the page's one file input (with several, the
/// model names the input by ref with browser_upload).
async fn file_upload(ctx: &ToolContext, a: FileUploadArgs) -> Result<CallToolResult> {
    let paths = a.paths.unwrap_or_default();
    let tab = current(ctx).await?;
    let reference = upload::only_file_input(ctx, &tab).await?;
    upload::upload(
        ctx,
        UploadArgs {
            reference,
            paths,
            ..Default::default()
        },
    )
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleMessagesArgs {
    pub level: Option<String>,
    pub all: Option<bool>,
}

/// How severe a console level is: error 0, warning 1, info 2, debug 3.
fn severity(level: &str) -> Option<u8> {
    match level {
        "error" | "exception" | "assert" => Some(0),
        "warning" | "warn" => Some(1),
        "info" | "log" | "dir" | "dirxml" | "table" | "trace" | "count" | "timeEnd" => Some(2),
        "debug" | "verbose" => Some(3),
        _ => None,
    }
}

async fn console_messages(ctx: &ToolContext, a: ConsoleMessagesArgs) -> Result<CallToolResult> {
    let level = a.level.unwrap_or_else(|| "info".into());
    let most = match level.as_str() {
        "error" | "warning" | "info" | "debug" => severity(&level).unwrap_or(2),
        _ => {
            return Err(ToolError::Invalid(format!(
                "level is {level:?}; give error, warning, info or debug (each takes the more severe too)"
            )));
        }
    };
    let args = recent_args(a.all);
    console::console_kept(ctx, args, |e| severity(&e.level).unwrap_or(2) <= most).await
}

/// Playwright's `all`: every entry kept, else the recent ones.
fn recent_args(all: Option<bool>) -> RecentArgs {
    let max = if all == Some(true) {
        console::MAX_ENTRIES
    } else {
        console::DEFAULT_ENTRIES
    };
    RecentArgs {
        max: Some(max),
        ..Default::default()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkRequestsArgs {
    #[serde(rename = "static")]
    pub statics: Option<bool>,
    pub filter: Option<String>,
    pub all: Option<bool>,
}

/// A request that loaded a page's static part (image, font, script, style).
fn is_static(e: &NetworkEntry) -> bool {
    let mime = e.mime.as_deref().unwrap_or("");
    e.failed.is_none()
        && e.status.is_some_and(|s| s < 400)
        && (mime.starts_with("image/")
            || mime.starts_with("font/")
            || mime.contains("javascript")
            || mime == "text/css")
}

async fn network_requests(ctx: &ToolContext, a: NetworkRequestsArgs) -> Result<CallToolResult> {
    let pattern = match &a.filter {
        Some(f) => Some(regex_automata::meta::Regex::new(f).map_err(|e| {
            ToolError::Invalid(format!(
                "filter is not a regular expression ({e}); nothing was read"
            ))
        })?),
        None => None,
    };
    let keep_static = a.statics == Some(true);
    network::network_kept(ctx, recent_args(a.all), |e| {
        (keep_static || !is_static(e)) && pattern.as_ref().is_none_or(|p| p.is_match(&e.url))
    })
    .await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateArgs {
    pub element: Described,
    pub target: Option<String>,
    pub function: String,
}

async fn evaluate(ctx: &ToolContext, a: EvaluateArgs) -> Result<CallToolResult> {
    eval::eval_function(ctx, "function", &a.function, a.target.as_deref()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_take_the_more_severe() {
        assert_eq!(severity("error"), Some(0));
        assert!(severity("exception") <= severity("warning"));
        assert!(severity("log") <= severity("debug"));
        assert_eq!(severity("loud"), None);
    }

    #[test]
    fn static_requests_are_the_loaded_parts() {
        let e = |mime: &str, status| NetworkEntry {
            seq: 1,
            method: "GET".into(),
            url: "http://h/x".into(),
            status: Some(status),
            mime: Some(mime.into()),
            failed: None,
        };
        assert!(is_static(&e("image/png", 200)));
        assert!(is_static(&e("text/css", 200)));
        assert!(!is_static(&e("image/png", 404)));
        assert!(!is_static(&e("application/json", 200)));
    }

    #[test]
    fn refused_fields_say_what_is_done_instead() {
        assert!(
            instead("browser_snapshot", "depth")
                .unwrap()
                .contains("pages")
        );
        assert_eq!(instead("browser_click", "depth"), None);
    }
}

#[cfg(test)]
#[path = "playwright_golden.rs"]
mod golden;
