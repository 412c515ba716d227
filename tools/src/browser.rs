//! The browser family: page tools over the browser's DevTools protocol
//! (`cdp.send`, `cdp.events`), plus the sandbox tools where the computer
//! has them (a local browser does, a vendor's does not).
//!
//! A model reads a page as an accessibility snapshot ([`snapshot`]) whose
//! interactive elements carry refs (`e12`), and acts on those refs; a
//! screenshot is taken only when asked, and its pixels are a frame the
//! click coordinates are in, as on a desktop.
//!
//! - [`tool`]: one module per page tool (`browser_navigate`,
//!   `browser_snapshot`, `browser_click`, ...), listed in [`tool::PAGE_TOOLS`];
//!   `browser_upload` is listed where the computer has files.
//! - [`dom`]: refs resolved to nodes, node handles and the JavaScript
//!   snippets called on them; [`pointer`]: the viewport, hit tests, mouse
//!   and keys; [`target`]: where an action lands.
//! - [`check`]: the address, ref and size checks made before anything is
//!   sent; [`keys`]: key names to key events; [`snapshot`]: the tree as
//!   text.
//!
//! What the family remembers of a computer ([`BrowserMemo`], one slot of
//! [`crate::ComputerState`]): the current tab and its CDP session, the
//! latest snapshot (its refs, the tab and the document it was taken of) and
//! the latest screenshot's frame, and every ref handed out. A ref names one
//! element for as long as it lives: the same element keeps its ref across
//! snapshots and filters (and a page restored from the back-forward cache
//! is the same document, so its refs hold again); a number is never given
//! to another element, so a ref whose element was removed, or whose
//! document the tab has navigated away from, is refused, never retargeted.

pub mod check;
pub mod dialog;
pub mod dom;
pub mod keys;
pub mod pages;
pub mod playwright;
pub mod pointer;
pub mod snapshot;
pub mod tabs;
pub mod target;
pub mod tool;

pub use pages::Pages;
pub(crate) use pages::with_memo;
use pages::with_pages;

pub(crate) use dialog::{INPUT_MS, send_held};
pub(crate) use tabs::{
    MainFrame, activate, current, main_frame, new_blank_tab, page_targets, title_url, use_tab,
};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use computerd::client::ComputerExt;
use computerd::protocol::{
    BROWSER_STARTS_AGAIN, CdpEvent, CdpEventsParams, CdpSendParams, MachineKind, SettingKind,
    limits,
};
use serde_json::{Value, json};

use crate::ToolContext;
use crate::common;
use crate::error::{Result, ToolError};
use crate::registry::Family;
use crate::sandbox;

/// Put the note of a browser started again (once) before a page tool's
/// answer: it is the first answer from the new browser.
pub(crate) fn say_started_again(
    ctx: &ToolContext,
    r: Result<rmcp::model::CallToolResult>,
) -> Result<rmcp::model::CallToolResult> {
    let mut r = r?;
    if let Some(why) = with_memo(ctx, |m| m.started_again.take()) {
        r.content.insert(
            0,
            rmcp::model::ContentBlock::text(format!(
                "Note: the browser was started again before this call; the old one was ended ({why}). No tab, page or ref from before it is left."
            )),
        );
    }
    Ok(r)
}

/// The browser family: the page tools, then the sandbox's (listed only
/// where the computer declares their groups).
pub const FAMILY: Family = Family {
    kind: SettingKind::Browser,
    instructions: INSTRUCTIONS,
    skill: SKILL_TEXT,
    sets: &[
        tool::PAGE_TOOLS,
        sandbox::TOOLS,
        crate::ports::TOOLS,
        common::TOOLS,
    ],
    together: &[
        tool::RARE_PAGE_TOGETHER,
        sandbox::PROCESS_TOGETHER,
        crate::ports::TOGETHER,
    ],
};

/// The browser family's skill.
pub const SKILL_TEXT: &str = include_str!("../../skills/browser/SKILL.md");

const INSTRUCTIONS: &str = "\
This server gives you a web browser (Chromium). It is made on your first tool \
call. Open a page with `browser_navigate`, read it with `browser_snapshot` (the \
page as text, each link, button and field with a ref such as e12), and act on \
refs with `browser_click`, `browser_type`, `browser_fill_form` and \
`browser_press`; `browser` does the rarer acts (select, hover, scroll, drag, \
upload, tabs, text, console, network, eval), and `process` runs background \
programs. A ref names its element for as long as the element is on the \
page; a removed element's ref is refused, and a navigation voids every ref: \
then take a new snapshot. Take `browser_screenshot` only when you need to see pixels; \
`browser_click` also takes x and y in that screenshot's pixels. Answered though \
not listed: `browser_handle_dialog` {accept, promptText} (the open or the next \
dialog; others are dismissed), `browser_resize` {width, height}, `browser_close`, \
`browser_pdf` {path}, and Playwright MCP's tool names and arguments.";

// --------------------------------------------------------------- memory

/// A tab the family drives: its target and the CDP session attached to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tab {
    pub target: String,
    pub session: String,
}

/// The latest snapshot: what it was taken of, and its lines.
#[derive(Clone, Debug)]
pub struct Snap {
    /// 1, 2, ...
    pub n: u64,
    /// The tab and the document (the main frame's loaderId) it was taken of.
    pub target: String,
    pub loader: String,
    pub url: String,
    /// How many refs it shows.
    pub refs: u64,
    pub lines: Vec<String>,
}

/// What a ref names: the element, and the tab and document it lives in.
#[derive(Clone, Debug)]
pub struct Held {
    pub el: snapshot::Element,
    pub target: String,
    pub loader: String,
    pub url: String,
    /// The execution context of the isolated world the element was
    /// numbered in (where its ref is looked up).
    pub world: u64,
}

/// The tools' isolated world in a tab's document: the walk is defined in
/// it, and the elements with refs are numbered there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// The main frame's loaderId when it was made.
    pub loader: String,
    /// Its execution context id.
    pub context: u64,
}

/// The most refs remembered; past it, those of documents no tab shows in
/// the latest snapshot are forgotten (and then refused as unknown).
pub const MAX_HELD: usize = 50_000;

/// The latest screenshot: the space `x`, `y` are in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShotFrame {
    pub n: u64,
    /// The image, in pixels.
    pub width: u32,
    pub height: u32,
    /// The viewport it shows, in CSS pixels.
    pub css_width: f64,
    pub css_height: f64,
}

impl ShotFrame {
    pub fn id(&self) -> String {
        format!("b{}", self.n)
    }

    /// An image point as a viewport point (the centre of the image pixel),
    /// or the words refusing it.
    pub fn to_viewport(&self, x: i64, y: i64) -> Result<(f64, f64)> {
        let (w, h) = (i64::from(self.width), i64::from(self.height));
        if !(0..w).contains(&x) || !(0..h).contains(&y) {
            return Err(ToolError::Invalid(format!(
                "x, y ({x}, {y}) is outside the {}x{} screenshot (frame {}): x goes 0 to {} and y 0 to {}; nothing was clicked",
                self.width,
                self.height,
                self.id(),
                w - 1,
                h - 1
            )));
        }
        let f = |v: i64, img: i64, css: f64| (2 * v + 1) as f64 * css / (2 * img) as f64;
        Ok((f(x, w, self.css_width), f(y, h, self.css_height)))
    }
}

/// What the browser family remembers of one computer.
#[derive(Debug, Default)]
pub struct BrowserMemo {
    /// The tab the tools act on; none until the first call picks one.
    pub tab: Option<Tab>,
    /// The CDP session of every tab attached so far, by target.
    pub sessions: HashMap<String, String>,
    /// The number the next new element gets (numbers are never reused).
    pub next_ref: u64,
    /// Every ref handed out, by number.
    pub held: HashMap<u64, Held>,
    /// The ref of each element handed out, by its tab, document, world
    /// and number in that world.
    pub numbers: HashMap<(String, String, u64, u64), u64>,
    /// The tools' isolated world of each tab's document, by target.
    pub worlds: HashMap<String, World>,
    pub snaps: u64,
    pub latest: Option<Snap>,
    /// The latest screenshot, and the tab it shows.
    pub frame: Option<(ShotFrame, String)>,
    pub shots: u64,
    /// Why the browser was ended under a call (it ended, or was stuck):
    /// said once, in the next page tool's answer, whose call starts a new one.
    pub started_again: Option<String>,
    /// How the model asked the next dialog to be answered
    /// (`browser_handle_dialog` when none was open); none dismisses it.
    pub dialog: Option<DialogAnswer>,
    /// The page tabs' target ids in the order the tools first saw them:
    /// the order tabs are listed and numbered in.
    pub tab_order: Vec<String>,
}

/// A model's answer to a dialog not yet opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogAnswer {
    pub accept: bool,
    pub prompt_text: Option<String>,
}

// ------------------------------------------------------------------ CDP

/// A CDP command to `tab`'s session, in the default time.
pub(crate) async fn send_to(
    ctx: &ToolContext,
    tab: &Tab,
    method: &str,
    params: Value,
) -> Result<Value> {
    send(ctx, Some(&tab.session), method, params, None).await
}

/// One CDP command on `session` (none: the browser). A CDP error comes back
/// as the browser's words, prefixed with what the tool was doing.
pub(crate) async fn send(
    ctx: &ToolContext,
    session: Option<&str>,
    method: &str,
    params: Value,
    timeout_ms: Option<u64>,
) -> Result<Value> {
    let r = ctx
        .client
        .call_typed(&CdpSendParams {
            method: method.to_string(),
            params: Some(params),
            session_id: session.map(str::to_string),
            timeout_ms,
        })
        .await;
    match r {
        Ok(r) => Ok(r.result),
        Err(e) => {
            let mut e = ToolError::client("the browser", e);
            if let ToolError::Daemon { error, .. } = &e
                && error.kind() == Some(computerd::protocol::ErrorKind::Aborted)
                && error.message.contains(BROWSER_STARTS_AGAIN)
            {
                // Its tabs and sessions went with it.
                let why = error
                    .message
                    .replace(&format!("; {BROWSER_STARTS_AGAIN}"), "");
                // Every caller's: each is told at its next page tool.
                with_pages(ctx, |p| {
                    p.owners.clear();
                    for m in p.memos.values_mut() {
                        *m = BrowserMemo {
                            next_ref: m.next_ref,
                            snaps: m.snaps,
                            shots: m.shots,
                            started_again: Some(why.clone()),
                            ..BrowserMemo::default()
                        }
                    }
                });
                return Err(e);
            }
            let gone = match (session, &e) {
                (Some(_), ToolError::Daemon { error, .. })
                    if error.message.contains("ession with given id not found")
                        || error.message.contains("No target with given id") =>
                {
                    true
                }
                // A command sent while its tab closes may get no answer.
                (Some(s), ToolError::Daemon { error, .. })
                    if error.kind() == Some(computerd::protocol::ErrorKind::Timeout) =>
                {
                    session_gone(ctx, s).await
                }
                _ => false,
            };
            // A tab closed under us: the next call picks a tab again.
            if let (true, Some(s), ToolError::Daemon { hint, .. }) = (gone, session, &mut e) {
                with_memo(ctx, |m| {
                    if m.tab.as_ref().is_some_and(|t| t.session == s) {
                        m.tab = None;
                    }
                    let sessions = &m.sessions;
                    m.worlds
                        .retain(|t, _| sessions.get(t).map(String::as_str) != Some(s));
                    m.sessions.retain(|_, v| v != s);
                });
                *hint = Some(
                    "the tab is gone (closed by the page or the browser); the next call acts in another tab: browser_tabs list shows them".into(),
                );
            }
            Err(e)
        }
    }
}

/// Whether the tab of `session` is no longer among the browser's targets
/// (asked directly: this runs inside [`send`]'s error path).
async fn session_gone(ctx: &ToolContext, session: &str) -> bool {
    let Some(target) = with_memo(ctx, |m| {
        m.sessions
            .iter()
            .find(|(_, v)| v.as_str() == session)
            .map(|(t, _)| t.clone())
    }) else {
        return false;
    };
    let r = ctx
        .client
        .call_typed(&CdpSendParams {
            method: "Target.getTargets".into(),
            params: Some(json!({})),
            session_id: None,
            timeout_ms: Some(5_000),
        })
        .await;
    match r {
        Ok(r) => !r.result["targetInfos"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t["targetId"] == target.as_str())),
        Err(_) => false,
    }
}

/// The events kept since `since` of `methods` on `session`, waiting up to
/// `wait` for one.
pub(crate) async fn events(
    ctx: &ToolContext,
    session: &str,
    since: u64,
    methods: &[&str],
    wait: Duration,
) -> Result<(Vec<CdpEvent>, u64)> {
    let wait_ms = (wait.as_millis() as u64).min(limits::CDP_EVENTS_WAIT_MAX_MS);
    let r = ctx
        .client
        .call_typed(&CdpEventsParams {
            since: Some(since),
            methods: Some(methods.iter().map(|m| m.to_string()).collect()),
            session_id: Some(session.to_string()),
            wait_ms: (wait_ms > 0).then_some(wait_ms),
            max: Some(limits::CDP_EVENTS_MAX),
        })
        .await
        .map_err(|e| ToolError::client("reading the browser's events", e))?;
    Ok((r.events, r.next))
}

/// Where the event ring stands now: events after this are news.
pub(crate) async fn cursor(ctx: &ToolContext, session: &str) -> Result<u64> {
    let r = ctx
        .client
        .call_typed(&CdpEventsParams {
            since: None,
            methods: Some(vec!["PageTools.none".into()]),
            session_id: Some(session.to_string()),
            wait_ms: None,
            max: Some(1),
        })
        .await
        .map_err(|e| ToolError::client("reading the browser's events", e))?;
    Ok(r.next)
}

/// The domains a tab's session needs, enabled once when it is attached
/// (the client keeps every event it gets, so these are what it gets).
async fn enable(ctx: &ToolContext, target: &str, session: &str) -> Result<()> {
    for m in [
        "Page.enable",
        "Runtime.enable",
        "Network.enable",
        "Log.enable",
        "DOM.enable",
    ] {
        send(ctx, Some(session), m, json!({}), None).await?;
    }
    send(
        ctx,
        Some(session),
        "Page.setLifecycleEventsEnabled",
        json!({"enabled": true}),
        None,
    )
    .await?;
    if ctx.facts.kind == MachineKind::Browser.to_string() {
        fill_window(ctx, target, session).await?;
    }
    Ok(())
}

/// A headless browser's page gets its whole window (the screen it is
/// given): headless Chromium keeps room for a toolbar it does not show
/// (1280x657 of a 1280x800 window), so the viewport and the screen the
/// page sees are set to the window's size. A shown browser's page keeps
/// what its window leaves it. `browser_resize` sets another size.
async fn fill_window(ctx: &ToolContext, target: &str, session: &str) -> Result<()> {
    let w = send(
        ctx,
        None,
        "Browser.getWindowForTarget",
        json!({"targetId": target}),
        None,
    )
    .await?;
    let (Some(width), Some(height)) = (
        w["bounds"]["width"].as_u64().filter(|v| *v > 0),
        w["bounds"]["height"].as_u64().filter(|v| *v > 0),
    ) else {
        return Ok(());
    };
    send(
        ctx,
        Some(session),
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": height, "deviceScaleFactor": 0, "mobile": false,
            "screenWidth": width, "screenHeight": height}),
        None,
    )
    .await?;
    Ok(())
}

/// Attach to `target` (once; later calls reuse its session) and make it
/// the current tab.
pub(crate) async fn attach(ctx: &ToolContext, target: &str) -> Result<Tab> {
    if let Some(s) = with_memo(ctx, |m| m.sessions.get(target).cloned()) {
        let tab = Tab {
            target: target.to_string(),
            session: s,
        };
        with_memo(ctx, |m| m.tab = Some(tab.clone()));
        return Ok(tab);
    }
    let r = send(
        ctx,
        None,
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
        None,
    )
    .await?;
    let Some(session) = r["sessionId"].as_str().map(str::to_string) else {
        return Err(ToolError::Broken(
            "the browser attached to the tab but named no session".into(),
        ));
    };
    enable(ctx, target, &session).await?;
    let tab = Tab {
        target: target.to_string(),
        session: session.clone(),
    };
    with_memo(ctx, |m| {
        m.sessions.insert(target.to_string(), session);
        m.tab = Some(tab.clone());
    });
    Ok(tab)
}

/// One open tab as the browser lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TargetInfo {
    pub id: String,
    pub title: String,
    pub url: String,
    /// The tab whose page opened it (`window.open`, a link to a new tab).
    pub opener: Option<String>,
}

/// How a wait for a page load ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Loaded {
    /// The document (this loaderId) fired its load event, or was restored
    /// from the back-forward cache, or the navigation stayed in the document.
    Done,
    /// The deadline passed first.
    TimedOut,
}

/// Wait until the main frame `frame` shows a new document (other than
/// `old_loader`, or `want` when known) that has loaded, watching the events
/// after `since`.
pub(crate) async fn wait_load(
    ctx: &ToolContext,
    tab: &Tab,
    frame: &str,
    old_loader: &str,
    mut want: Option<String>,
    mut since: u64,
    within: Duration,
) -> Result<Loaded> {
    let deadline = Instant::now() + within;
    let methods = [
        "Page.frameNavigated",
        "Page.lifecycleEvent",
        "Page.navigatedWithinDocument",
    ];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (evs, next) = events(ctx, &tab.session, since, &methods, left).await?;
        for e in &evs {
            match e.method.as_str() {
                "Page.frameNavigated" => {
                    let f = &e.params["frame"];
                    if f.get("parentId").is_some() {
                        continue;
                    }
                    let l = f["loaderId"].as_str().unwrap_or("");
                    if e.params["type"] == "BackForwardCacheRestore" {
                        return Ok(Loaded::Done);
                    }
                    if want.is_none() && l != old_loader {
                        want = Some(l.to_string());
                    }
                }
                "Page.lifecycleEvent"
                    if e.params["frameId"] == frame
                        && e.params["name"] == "load"
                        && want.as_deref() == e.params["loaderId"].as_str() =>
                {
                    return Ok(Loaded::Done);
                }
                "Page.navigatedWithinDocument"
                    if e.params["frameId"] == frame && want.is_none() =>
                {
                    return Ok(Loaded::Done);
                }
                _ => {}
            }
        }
        since = next.max(since);
        if Instant::now() >= deadline {
            return Ok(Loaded::TimedOut);
        }
        if evs.is_empty() {
            // The wait found nothing new; a short pause keeps a client
            // whose wait returns at once from spinning.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// After an action that may start a navigation (a click, Enter): whether
/// the main frame started loading within a moment, and if so, the wait
/// for it (at most `within`). None when nothing started.
///
/// The moment is the page's own: a navigation an input asks for is asked
/// while the page handles it (a link, a submit) or in a task it queues
/// (`setTimeout(…, 0)`), so once a zero-delay timer of the page has run
/// (at most [`FOLLOW_START`]) and a short grace for the browser's event
/// has passed, one not seen was not asked for. A page that navigates later
/// is still known by the next snapshot and by the refusal of older refs.
pub(crate) async fn follow(
    ctx: &ToolContext,
    tab: &Tab,
    before: &MainFrame,
    since: u64,
    within: Duration,
) -> Result<Option<(Loaded, String, String)>> {
    let turn = send_to(
        ctx,
        tab,
        "Runtime.evaluate",
        json!({
            "expression": "new Promise(r => setTimeout(r, 0))",
            "awaitPromise": true,
            "timeout": FOLLOW_START.as_millis() as u64,
        }),
    );
    // A page that is navigating away may not answer: the events say so.
    let _ = tokio::time::timeout(FOLLOW_START, turn).await;
    let (evs, _) = events(
        ctx,
        &tab.session,
        since,
        &["Page.frameStartedLoading", "Page.frameRequestedNavigation"],
        FOLLOW_GRACE,
    )
    .await?;
    if !evs
        .iter()
        .any(|e| e.params["frameId"] == before.id.as_str())
    {
        return Ok(None);
    }
    let l = wait_load(ctx, tab, &before.id, &before.loader, None, since, within).await?;
    let (title, url) = title_url(ctx, tab).await?;
    Ok(Some((l, title, url)))
}

/// The words a result adds after an action that navigated.
pub(crate) fn followed_words(f: &Option<(Loaded, String, String)>) -> String {
    match f {
        None => String::new(),
        Some((Loaded::Done, title, url)) => format!(
            "; the page navigated to {url} ({title:?}): refs of earlier snapshots no longer apply, take browser_snapshot"
        ),
        Some((Loaded::TimedOut, _, url)) => format!(
            "; a navigation started and was still loading after {} s (the tab shows {url}): take browser_snapshot to see what loaded",
            FOLLOW.as_secs()
        ),
    }
}

/// How long an action waits for a navigation to start: a click on a link
/// or a submit button asks for it within a few milliseconds of the input,
/// so a short look finds it; a page that navigates later is still known,
/// by the next snapshot and by the refusal of older refs.
pub(crate) const FOLLOW_START: Duration = Duration::from_millis(100);

/// How long, after the page's turn, an action looks for the browser's
/// event of a navigation the page asked for in that turn.
pub(crate) const FOLLOW_GRACE: Duration = Duration::from_millis(15);

/// How long an action waits for a navigation it started.
pub(crate) const FOLLOW: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Offer;
    use crate::{ToolSettings, skills};
    use computerd::protocol::Group;

    #[test]
    fn the_skill_names_every_tool_and_only_arguments_that_exist() {
        let skill = skills::parse(FAMILY.skill).unwrap();
        assert_eq!(skill.name, "browser");
        // A local browser: cdp and its computer's sandbox groups.
        let groups = [Group::Cdp, Group::Exec, Group::Files, Group::Processes];
        let offer = Offer {
            groups: &groups,
            extend: true,
        };
        let tools = FAMILY.list(&offer, &ToolSettings::default());
        let (names, _) = skills::names_and_args(&tools);
        // Arguments of every tool offered, those listed inside one too.
        let each: Vec<_> = FAMILY
            .offered(&offer)
            .map(|t| t.tool(&ToolSettings::default()))
            .collect();
        let (_, args) = skills::names_and_args(&each);
        let mut rest = skill.body;
        while let Some(i) = rest.find('`') {
            let after = &rest[i + 1..];
            let Some(end) = after.find('`') else { break };
            let word = &after[..end];
            if word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') && !word.is_empty() {
                assert!(
                    names.iter().any(|n| n == word)
                        || args.iter().any(|a| a == word)
                        || FAMILY.offers(word, &offer)
                        || FAMILY.together.iter().any(|g| FAMILY
                            .offered(&offer)
                            .any(|t| g.contains(t.name) && g.act(t.name) == word)),
                    "the skill names `{word}`, which is no tool or argument"
                );
            }
            rest = &after[end + 1..];
        }
        // Every tool offered, those listed inside `browser` and `process`
        // too (each answers to its own name as well).
        for n in FAMILY.offered(&offer).map(|t| t.name) {
            if n != "computer_extend" {
                assert!(
                    skill.body.contains(&format!("`{n}`")),
                    "the skill never names {n}"
                );
            }
        }
        for (tool, a, want) in skills::examples(skill.body) {
            assert!(names.contains(&tool), "an example calls {tool}");
            serde_json::from_str::<Value>(&a).unwrap();
            assert!(!want.is_empty());
        }
    }

    #[test]
    fn a_vendor_browser_lists_the_page_tools_alone() {
        let offer = Offer {
            groups: &[Group::Cdp],
            extend: false,
        };
        let names: Vec<&str> = FAMILY.offered(&offer).map(|t| t.name).collect();
        // Every page tool but browser_upload (it needs the computer's files).
        assert_eq!(names.len(), 18, "{names:?}");
        assert!(!names.contains(&"browser_upload"), "{names:?}");
        assert!(!FAMILY.offers("browser_upload", &offer));
        let with_files = Offer {
            groups: &[Group::Cdp, Group::Files],
            extend: false,
        };
        assert!(FAMILY.offers("browser_upload", &with_files));
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("browser_") || *n == "computer_info")
        );
        // Listed: the frequent page acts one by one, the rest inside
        // `browser` (no `process`: a vendor's browser has no processes).
        let listed = FAMILY.names(&offer);
        assert_eq!(listed.len(), 9, "{listed:?}");
        assert!(listed.contains(&"browser") && !listed.contains(&"process"));
    }

    #[test]
    fn a_screenshot_point_lands_on_the_viewport_point_it_shows() {
        let f = ShotFrame {
            n: 2,
            width: 640,
            height: 360,
            css_width: 1280.0,
            css_height: 720.0,
        };
        assert_eq!(f.to_viewport(0, 0).unwrap(), (1.0, 1.0));
        assert_eq!(f.to_viewport(100, 50).unwrap(), (201.0, 101.0));
        assert_eq!(
            f.to_viewport(640, 5).unwrap_err().to_string(),
            "x, y (640, 5) is outside the 640x360 screenshot (frame b2): x goes 0 to 639 and y 0 to 359; nothing was clicked"
        );
        assert!(f.to_viewport(-1, 0).is_err());
    }
}
