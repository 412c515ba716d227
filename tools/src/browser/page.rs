//! The tools that open and read pages: `browser_navigate`,
//! `browser_snapshot`, `browser_tabs`, `browser_get_text`,
//! `browser_console`, `browser_network` and `browser_eval`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rmcp::model::{CallToolResult, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::resolve;
use super::{
    Loaded, Snap, Tab, attach, check, current, cursor, events, main_frame, page_targets, send,
    send_held, snapshot as snap, title_url, wait_load, with_memo,
};
use crate::define::{done, hints, make_tool};
use crate::error::{Result, ToolError};
use crate::{ToolContext, ToolSettings};

/// `timeout_ms` of `browser_navigate` when none is given.
pub const NAVIGATE_DEFAULT_MS: u64 = 30_000;
/// `timeout_ms` of `browser_navigate` at most.
pub const NAVIGATE_MAX_MS: u64 = 60_000;
/// `timeout_ms` of `browser_navigate` at least.
pub const NAVIGATE_MIN_MS: u64 = 1_000;
/// Entries `browser_console` and `browser_network` give at most.
pub const MAX_ENTRIES: u32 = 200;
/// Entries they give when `max` is not given.
pub const DEFAULT_ENTRIES: u32 = 50;
/// One console entry or address at most, in characters.
pub const MAX_ENTRY_CHARS: usize = 500;
/// `browser_eval`'s `timeout_ms` when none is given, and at most.
pub const EVAL_DEFAULT_MS: u64 = 10_000;
pub const EVAL_MAX_MS: u64 = 60_000;

fn chars_cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n).collect();
    out.push('…');
    out
}

fn budget(s: &ToolSettings) -> usize {
    s.output_budget_bytes.saturating_sub(512).max(1024)
}

// ------------------------------------------------------------- navigate

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum History {
    Back,
    Forward,
    Reload,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateArgs {
    /// The address to open: http:// or https:// (a bare host gets https://), or about:blank. "back", "forward" and "reload" are taken here too.
    #[serde(default)]
    pub url: Option<String>,
    /// Instead of url: back, forward or reload.
    #[serde(default)]
    pub action: Option<History>,
    /// How long to wait for the page to load, 1000 to 60000 ms (default 30000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct NavigateOutput {
    pub url: String,
    pub title: String,
}

pub(super) fn navigate_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<NavigateArgs, NavigateOutput>(
        name,
        format!(
            "Open a page in the current tab (url: http://, https:// or about:blank; other schemes are refused), or go back, forward or reload (action). Waits for the page to load, at most timeout_ms (default {} s, at most {} s), and answers its URL and title. Then read it with browser_snapshot.",
            NAVIGATE_DEFAULT_MS / 1000,
            NAVIGATE_MAX_MS / 1000
        ),
        hints("Navigate", false, false, false, true),
    )
}

fn navigate_timeout(t: Option<u64>) -> Result<Duration> {
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
            send(ctx, Some(&tab.session), "Page.reload", json!({}), None).await?;
        }
        History::Back | History::Forward => {
            let r = send(
                ctx,
                Some(&tab.session),
                "Page.getNavigationHistory",
                json!({}),
                None,
            )
            .await?;
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
            send(
                ctx,
                Some(&tab.session),
                "Page.navigateToHistoryEntry",
                json!({"entryId": entry["id"]}),
                None,
            )
            .await?;
        }
    }
    match wait_load(ctx, tab, &frame.id, &frame.loader, None, since, within).await? {
        Loaded::Done => Ok(()),
        Loaded::TimedOut => Err(not_loaded(ctx, tab, within).await),
    }
}

pub(super) async fn navigate(ctx: &ToolContext, a: NavigateArgs) -> Result<CallToolResult> {
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
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
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

// ------------------------------------------------------------- snapshot

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArgs {
    /// Which page of a long snapshot, from 1. Pages after the first are of the latest snapshot (no new one is taken).
    #[serde(default)]
    pub page: Option<u32>,
    /// "interactive": only the elements with a ref, one a line (shorter); default every line.
    #[serde(default)]
    pub filter: Option<Filter>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

/// Which lines of a snapshot are shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    #[default]
    All,
    Interactive,
}

/// The lines `filter` shows: every one, or those with a ref, unindented.
pub(crate) fn shown(lines: &[String], filter: Filter) -> Vec<String> {
    match filter {
        Filter::All => lines.to_vec(),
        Filter::Interactive => lines
            .iter()
            .filter(|l| l.contains("[ref=e"))
            .map(|l| l.trim_start().to_string())
            .collect(),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SnapshotOutput {
    /// The snapshot's number: its refs are valid until the next one.
    pub snapshot: u64,
    pub url: String,
    pub title: String,
    pub page: u32,
    pub pages: u32,
    /// How many refs the snapshot has (all pages).
    pub refs: u64,
}

pub(super) fn snapshot_tool(name: &'static str, s: &ToolSettings) -> Tool {
    make_tool::<SnapshotArgs, SnapshotOutput>(
        name,
        format!(
            "Read the current page as its accessibility tree: indented lines such as `- button \"Submit\" [ref=e12]`, a ref on every link, button, field, checkbox, select and option you can act on. Pass the refs to browser_click, browser_type, browser_select, browser_hover, browser_press. Refs are of this snapshot only: after the page navigates or you take another snapshot, older refs are refused. Password values are never shown. At most {} KiB a page; page 2 and on are of the same snapshot.",
            budget(s) / 1024
        ),
        hints("Page snapshot", true, false, false, false),
    )
}

/// The backend ids of the document's password inputs.
async fn password_fields(ctx: &ToolContext, tab: &Tab) -> Result<HashSet<u64>> {
    let s = Some(tab.session.as_str());
    let doc = send(ctx, s, "DOM.getDocument", json!({"depth": 0}), None).await?;
    let root = doc["root"]["nodeId"].clone();
    let q = send(
        ctx,
        s,
        "DOM.querySelectorAll",
        json!({"nodeId": root, "selector": "input[type=password i]"}),
        None,
    )
    .await?;
    let mut out = HashSet::new();
    for id in q["nodeIds"].as_array().cloned().unwrap_or_default() {
        let d = send(ctx, s, "DOM.describeNode", json!({"nodeId": id}), None).await?;
        if let Some(b) = d["node"]["backendNodeId"].as_u64() {
            out.insert(b);
        }
    }
    Ok(out)
}

/// Frames read into a snapshot at most.
pub const MAX_FRAMES: usize = 20;

/// The accessibility trees of the tab's frames that share its process
/// (same-site iframes), each with the backend id of its `<iframe>`. A frame
/// of another site runs in another process and is left out.
async fn frame_trees(ctx: &ToolContext, tab: &Tab) -> Result<Vec<(u64, Vec<Value>)>> {
    let s = Some(tab.session.as_str());
    let tree = send(ctx, s, "Page.getFrameTree", json!({}), None).await?;
    let mut ids = Vec::new();
    let mut todo: Vec<Value> = tree["frameTree"]["childFrames"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    while let Some(f) = todo.pop() {
        if ids.len() >= MAX_FRAMES {
            break;
        }
        if let Some(id) = f["frame"]["id"].as_str() {
            ids.push(id.to_string());
        }
        todo.extend(f["childFrames"].as_array().cloned().unwrap_or_default());
    }
    let mut out = Vec::new();
    for id in ids {
        let Ok(owner) = send(ctx, s, "DOM.getFrameOwner", json!({"frameId": id}), None).await
        else {
            continue;
        };
        let Some(owner) = owner["backendNodeId"].as_u64() else {
            continue;
        };
        let Ok(t) = send(
            ctx,
            s,
            "Accessibility.getFullAXTree",
            json!({"frameId": id}),
            None,
        )
        .await
        else {
            continue;
        };
        out.push((owner, t["nodes"].as_array().cloned().unwrap_or_default()));
    }
    Ok(out)
}

/// Take a snapshot of the current tab, remembered as the latest.
pub(crate) async fn take_snapshot(ctx: &ToolContext) -> Result<Snap> {
    let tab = current(ctx).await?;
    let frame = main_frame(ctx, &tab).await?;
    let passwords = password_fields(ctx, &tab).await?;
    let tree = send(
        ctx,
        Some(&tab.session),
        "Accessibility.getFullAXTree",
        json!({}),
        None,
    )
    .await?;
    let main = tree["nodes"].as_array().cloned().unwrap_or_default();
    let frames = frame_trees(ctx, &tab).await?;
    let nodes = snap::merge_frames(&main, &frames);
    let snap = with_memo(ctx, |m| {
        // Refs are never reused: a snapshot starts past every earlier one.
        let first = m.next_ref;
        let built = snap::build(&nodes, first, &passwords);
        let next = first + built.refs.len() as u64;
        m.next_ref = next;
        m.snaps += 1;
        let s = Snap {
            n: m.snaps,
            first,
            next,
            target: tab.target.clone(),
            loader: frame.loader.clone(),
            url: frame.url.clone(),
            refs: built.refs.into_iter().collect(),
            lines: built.lines,
        };
        m.latest = Some(s.clone());
        s
    });
    Ok(snap)
}

fn ref_range(s: &Snap) -> String {
    if s.next > s.first {
        format!("refs e{} to e{}", s.first, s.next - 1)
    } else {
        "no refs".into()
    }
}

pub(super) async fn snapshot(ctx: &ToolContext, a: SnapshotArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let want = a.page.unwrap_or(1);
    if want == 0 {
        return Err(ToolError::Invalid(
            "page is 0; pages are numbered from 1".into(),
        ));
    }
    let s = if want == 1 {
        take_snapshot(ctx).await?
    } else {
        let Some(s) = with_memo(ctx, |m| m.latest.clone()) else {
            return Err(ToolError::Refused(format!(
                "there is no snapshot yet, so no page {want}: call browser_snapshot without page first"
            )));
        };
        let tab = current(ctx).await?;
        let frame = main_frame(ctx, &tab).await?;
        if s.target != tab.target || s.loader != frame.loader {
            return Err(ToolError::Refused(format!(
                "page {want} would be of snapshot {}, and the tab has navigated or changed since it was taken: take a new snapshot (browser_snapshot without page)",
                s.n
            )));
        }
        s
    };
    let tab = current(ctx).await?;
    let (title, url) = title_url(ctx, &tab).await?;
    let lines = shown(&s.lines, a.filter.unwrap_or_default());
    let ranges = snap::pages(&lines, budget(&ctx.settings));
    let pages = ranges.len() as u32;
    let Some(range) = ranges.get(want as usize - 1) else {
        return Err(ToolError::Invalid(format!(
            "page is {want}, and snapshot {} has {pages} page{}",
            s.n,
            if pages == 1 { "" } else { "s" }
        )));
    };
    let mut text = format!(
        "snapshot {} of {url} (title {title:?}), page {want} of {pages}, {}:\n",
        s.n,
        ref_range(&s)
    );
    if lines.is_empty() {
        text.push_str("(the page shows nothing an accessibility tree holds)\n");
    }
    for l in &lines[range.clone()] {
        text.push_str(l);
        text.push('\n');
    }
    if want < pages {
        text.push_str(&format!(
            "(more: call browser_snapshot with page {} for the next part; the refs stay those of snapshot {})\n",
            want + 1,
            s.n
        ));
    }
    let out = SnapshotOutput {
        snapshot: s.n,
        url,
        title,
        page: want,
        pages,
        refs: s.next - s.first,
    };
    Ok(done(text, &out))
}

// ------------------------------------------------------------------ tabs

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TabAction {
    List,
    New,
    Switch,
    Close,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsArgs {
    /// list, new (url optional), switch (index or tab_id), close (index or tab_id; default the current tab).
    pub action: TabAction,
    /// The tab's index as list shows it, from 0.
    #[serde(default)]
    pub index: Option<usize>,
    /// Instead of index: the tab's id as list shows it.
    #[serde(default)]
    pub tab_id: Option<String>,
    /// For new: the address to open in it (http://, https:// or about:blank).
    #[serde(default)]
    pub url: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TabRow {
    pub index: usize,
    pub tab_id: String,
    pub title: String,
    pub url: String,
    /// The tab the page tools act on.
    pub current: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TabsOutput {
    pub tabs: Vec<TabRow>,
}

pub(super) fn tabs_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<TabsArgs, TabsOutput>(
        name,
        "The browser's tabs: list them, open a new one (it becomes current, url optional), switch to one, or close one (index or tab_id from list). The page tools act on the current tab; refs and screenshots are of the tab they were taken in.".to_string(),
        hints("Tabs", false, true, false, false),
    )
}

async fn tab_rows(ctx: &ToolContext) -> Result<Vec<TabRow>> {
    let cur = current(ctx).await?;
    Ok(page_targets(ctx)
        .await?
        .into_iter()
        .enumerate()
        .map(|(index, t)| TabRow {
            index,
            current: t.id == cur.target,
            tab_id: t.id,
            title: t.title,
            url: t.url,
        })
        .collect())
}

async fn pick(ctx: &ToolContext, a: &TabsArgs) -> Result<String> {
    let targets = page_targets(ctx).await?;
    if let Some(id) = &a.tab_id {
        return targets
            .iter()
            .find(|t| &t.id == id)
            .map(|t| t.id.clone())
            .ok_or_else(|| {
                ToolError::Invalid(format!(
                    "tab_id {id:?} is no open tab; browser_tabs list shows the tabs"
                ))
            });
    }
    match a.index {
        Some(i) => targets.get(i).map(|t| t.id.clone()).ok_or_else(|| {
            ToolError::Invalid(format!(
                "index {i} is no tab: there are {} tabs, 0 to {} (browser_tabs list shows them)",
                targets.len(),
                targets.len().saturating_sub(1)
            ))
        }),
        None => Ok(current(ctx).await?.target),
    }
}

fn render_tabs(rows: &[TabRow]) -> String {
    let mut t = String::new();
    for r in rows {
        t.push_str(&format!(
            "[{}]{} {} — {} (tab_id {})\n",
            r.index,
            if r.current { " (current)" } else { "" },
            chars_cut(&r.title, 100),
            chars_cut(&r.url, 300),
            r.tab_id
        ));
    }
    t
}

pub(super) async fn tabs(ctx: &ToolContext, a: TabsArgs) -> Result<CallToolResult> {
    let head = match a.action {
        TabAction::List => String::from("tabs:"),
        TabAction::New => {
            let url = match &a.url {
                Some(u) => Some(check::url("url", u)?),
                None => None,
            };
            let r = send(
                ctx,
                None,
                "Target.createTarget",
                json!({"url": "about:blank"}),
                None,
            )
            .await?;
            let id = r["targetId"].as_str().unwrap_or("").to_string();
            let tab = attach(ctx, &id).await?;
            if let Some(u) = &url
                && u != "about:blank"
            {
                goto(ctx, &tab, u, Duration::from_millis(NAVIGATE_DEFAULT_MS)).await?;
            }
            "a new tab is open and current:".to_string()
        }
        TabAction::Switch => {
            if a.index.is_none() && a.tab_id.is_none() {
                return Err(ToolError::Invalid(
                    "switch needs index or tab_id (browser_tabs list shows them)".into(),
                ));
            }
            let id = pick(ctx, &a).await?;
            send(
                ctx,
                None,
                "Target.activateTarget",
                json!({"targetId": id}),
                None,
            )
            .await?;
            attach(ctx, &id).await?;
            "switched; the current tab is now the one marked:".to_string()
        }
        TabAction::Close => {
            let id = pick(ctx, &a).await?;
            send(
                ctx,
                None,
                "Target.closeTarget",
                json!({"targetId": id}),
                None,
            )
            .await?;
            // The browser answers before the tab is gone from its list.
            for _ in 0..100 {
                if !page_targets(ctx).await?.iter().any(|t| t.id == id) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            with_memo(ctx, |m| {
                m.sessions.remove(&id);
                if m.tab.as_ref().is_some_and(|t| t.target == id) {
                    m.tab = None;
                }
            });
            "closed; the tabs now:".to_string()
        }
    };
    let rows = tab_rows(ctx).await?;
    let text = format!("{head}\n{}", render_tabs(&rows));
    Ok(done(text, &TabsOutput { tabs: rows }))
}

// -------------------------------------------------------------- get_text

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTextArgs {
    /// An element's ref from the latest snapshot; none for the whole page.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// Where to start, in bytes of the text (the previous answer's next_offset).
    #[serde(default)]
    pub offset: Option<usize>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct GetTextOutput {
    /// The whole text's size in bytes.
    pub bytes: usize,
    pub offset: usize,
    /// Where the next part starts, when there is more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

pub(super) fn get_text_tool(name: &'static str, s: &ToolSettings) -> Tool {
    make_tool::<GetTextArgs, GetTextOutput>(
        name,
        format!(
            "The visible text of the page (or of one element by ref), as the page renders it (innerText), at most {} KiB per call; offset reads on. For reading articles and tables; use browser_snapshot to find what to act on.",
            budget(s) / 1024
        ),
        hints("Page text", true, false, true, false),
    )
}

pub(super) async fn get_text(ctx: &ToolContext, a: GetTextArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let tab = current(ctx).await?;
    let r = match &a.reference {
        Some(raw) => {
            let (tab, r, _) = resolve(ctx, "ref", raw).await?;
            let obj = super::act::object(ctx, &tab, r.backend, raw).await?;
            send(
                ctx,
                Some(&tab.session),
                "Runtime.callFunctionOn",
                json!({
                    "objectId": obj,
                    "functionDeclaration": "function(){ return this.innerText ?? this.textContent ?? ''; }",
                    "returnByValue": true,
                }),
                None,
            )
            .await?
        }
        None => {
            send(
                ctx,
                Some(&tab.session),
                "Runtime.evaluate",
                json!({
                    "expression": "document.body ? document.body.innerText : (document.documentElement ? document.documentElement.innerText : '')",
                    "returnByValue": true,
                }),
                None,
            )
            .await?
        }
    };
    let text = r["result"]["value"].as_str().unwrap_or("").to_string();
    let total = text.len();
    let offset = a.offset.unwrap_or(0);
    if offset > total {
        return Err(ToolError::Invalid(format!(
            "offset is {offset}, past the text's {total} bytes"
        )));
    }
    let start = crate::budget::floor_boundary(&text, offset);
    let end = crate::budget::floor_boundary(&text, (start + budget(&ctx.settings)).min(total));
    let mut out = text[start..end].to_string();
    let next_offset = (end < total).then_some(end);
    if let Some(n) = next_offset {
        out.push_str(&format!(
            "\n(bytes {start} to {end} of {total}: call browser_get_text with offset {n} for more)"
        ));
    } else if total == 0 {
        out.push_str("(no text)");
    }
    Ok(done(
        out,
        &GetTextOutput {
            bytes: total,
            offset: start,
            next_offset,
        },
    ))
}

// ------------------------------------------------------ console, network

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentArgs {
    /// At most this many of the newest entries, 1 to 200 (default 50).
    #[serde(default)]
    pub max: Option<u32>,
    /// Only entries after this point (the previous answer's next).
    #[serde(default)]
    pub since: Option<u64>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
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

pub(super) fn console_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<RecentArgs, ConsoleOutput>(
        name,
        format!(
            "The current tab's recent console messages and uncaught exceptions, newest last (at most max, default {DEFAULT_ENTRIES}, up to {MAX_ENTRIES}; each cut at {MAX_ENTRY_CHARS} characters). since (a previous answer's next) gives only newer ones."
        ),
        hints("Console", true, false, true, false),
    )
}

pub(super) fn network_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<RecentArgs, NetworkOutput>(
        name,
        format!(
            "The current tab's recent requests, newest last: method, URL, status and type, or why one failed (at most max, default {DEFAULT_ENTRIES}, up to {MAX_ENTRIES}). since (a previous answer's next) gives only newer ones."
        ),
        hints("Network", true, false, true, false),
    )
}

fn entries_max(m: Option<u32>) -> Result<usize> {
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
) -> Result<(Vec<computerd::protocol::CdpEvent>, u64)> {
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
pub(crate) fn console_entry(e: &computerd::protocol::CdpEvent) -> Option<ConsoleEntry> {
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

pub(super) async fn console(ctx: &ToolContext, a: RecentArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let max = entries_max(a.max)?;
    let tab = current(ctx).await?;
    let (evs, next) = all_events(
        ctx,
        &tab,
        a.since.unwrap_or(0),
        &[
            "Runtime.consoleAPICalled",
            "Runtime.exceptionThrown",
            "Log.entryAdded",
        ],
    )
    .await?;
    let mut entries: Vec<ConsoleEntry> = evs.iter().filter_map(console_entry).collect();
    let skipped = entries.len().saturating_sub(max);
    entries.drain(..skipped);
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

pub(super) async fn network(ctx: &ToolContext, a: RecentArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let max = entries_max(a.max)?;
    let tab = current(ctx).await?;
    let (evs, next) = all_events(
        ctx,
        &tab,
        a.since.unwrap_or(0),
        &[
            "Network.requestWillBeSent",
            "Network.responseReceived",
            "Network.loadingFailed",
        ],
    )
    .await?;
    let mut requests = network_entries(&evs);
    let skipped = requests.len().saturating_sub(max);
    requests.drain(..skipped);
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

// ------------------------------------------------------------------ eval

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalArgs {
    /// JavaScript evaluated in the page; its last expression's value is the answer (a promise is awaited). At most 64 KiB.
    #[serde(default)]
    pub expression: Option<String>,
    /// The same as expression (the name Anthropic's javascript_exec uses).
    #[serde(default)]
    pub text: Option<String>,
    /// How long it may run, 100 to 60000 ms (default 10000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct EvalOutput {
    /// The value's JavaScript type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The value as JSON, when it fit the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The JSON was cut to fit.
    pub cut: bool,
}

pub(super) fn eval_tool(name: &'static str, s: &ToolSettings) -> Tool {
    make_tool::<EvalArgs, EvalOutput>(
        name,
        format!(
            "Run JavaScript in the current page (expression, at most {} KiB) and answer its value as JSON (a promise is awaited; at most {} KiB of it). Write an expression, not a return. For what snapshots cannot show; act with the ref tools where you can.",
            check::MAX_EXPRESSION_BYTES / 1024,
            budget(s) / 1024
        ),
        hints("Run JavaScript", false, true, false, true),
    )
}

pub(super) async fn eval(ctx: &ToolContext, a: EvalArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let (field, expr) = match (a.expression, a.text) {
        (Some(e), None) => ("expression", e),
        (None, Some(t)) => ("text", t),
        (Some(_), Some(_)) => {
            return Err(ToolError::Invalid(
                "give expression or text, not both; nothing was run".into(),
            ));
        }
        (None, None) => {
            return Err(ToolError::Invalid(
                "expression is missing: give the JavaScript to run".into(),
            ));
        }
    };
    check::bounded(field, &expr, check::MAX_EXPRESSION_BYTES)?;
    let ms = a.timeout_ms.unwrap_or(EVAL_DEFAULT_MS);
    if !(100..=EVAL_MAX_MS).contains(&ms) {
        return Err(ToolError::Invalid(format!(
            "timeout_ms is {ms}; give 100 to {EVAL_MAX_MS}; nothing was run"
        )));
    }
    let tab = current(ctx).await?;
    let since = cursor(ctx, &tab.session).await?;
    let (r, dialog) = send_held(
        ctx,
        &tab,
        "Runtime.evaluate",
        json!({
            "expression": expr,
            "returnByValue": true,
            "awaitPromise": true,
            "userGesture": true,
            "timeout": ms,
        }),
        since,
        (ms + 2_000).min(computerd::protocol::limits::CDP_SEND_MAX_MS),
    )
    .await?;
    if let Some(words) = dialog {
        return Err(ToolError::Refused(format!(
            "the {field} was held by a dialog: {words}; its value was not read, and the page answers again"
        )));
    }
    if let Some(d) = r.get("exceptionDetails") {
        let what = d["exception"]["description"]
            .as_str()
            .or(d["text"].as_str())
            .unwrap_or("an exception");
        return Err(ToolError::Refused(format!(
            "the {field} threw: {}; the page still answers",
            chars_cut(what, MAX_ENTRY_CHARS)
        )));
    }
    let res = &r["result"];
    let kind = res["subtype"]
        .as_str()
        .or(res["type"].as_str())
        .unwrap_or("undefined")
        .to_string();
    let value = match (&res["value"], res["unserializableValue"].as_str()) {
        (Value::Null, Some(u)) => Value::String(u.to_string()),
        (v, _) => v.clone(),
    };
    let shown = if kind == "undefined" {
        "undefined".to_string()
    } else {
        serde_json::to_string_pretty(&value).unwrap_or_default()
    };
    let max = budget(&ctx.settings);
    let cut = shown.len() > max;
    let text = if cut {
        let end = crate::budget::floor_boundary(&shown, max);
        format!(
            "{}\n(cut: the value is {} bytes as JSON, {} shown; ask for a part of it)",
            &shown[..end],
            shown.len(),
            end
        )
    } else {
        shown
    };
    let out = EvalOutput {
        kind,
        value: (!cut).then_some(value),
        cut,
    };
    Ok(done(text, &out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use computerd::protocol::CdpEvent;

    fn ev(seq: u64, method: &str, params: Value) -> CdpEvent {
        CdpEvent {
            seq,
            method: method.into(),
            params,
            session_id: None,
        }
    }

    #[test]
    fn console_events_read_as_entries() {
        let e = ev(
            4,
            "Runtime.consoleAPICalled",
            json!({"type": "warning", "args": [{"type": "string", "value": "low"}, {"type": "number", "value": 3}, {"type": "object", "description": "Object"}]}),
        );
        assert_eq!(
            console_entry(&e),
            Some(ConsoleEntry {
                seq: 4,
                level: "warning".into(),
                text: "low 3 Object".into()
            })
        );
        let x = ev(
            5,
            "Runtime.exceptionThrown",
            json!({"exceptionDetails": {"text": "Uncaught", "exception": {"description": "Error: boom"}}}),
        );
        assert_eq!(console_entry(&x).unwrap().text, "Error: boom");
        let long = ev(
            6,
            "Runtime.consoleAPICalled",
            json!({"type": "log", "args": [{"type": "string", "value": "x".repeat(900)}]}),
        );
        assert_eq!(
            console_entry(&long).unwrap().text.chars().count(),
            MAX_ENTRY_CHARS + 1
        );
    }

    #[test]
    fn network_events_join_by_request() {
        let evs = [
            ev(
                1,
                "Network.requestWillBeSent",
                json!({"requestId": "a", "request": {"method": "GET", "url": "http://h/"}}),
            ),
            ev(
                2,
                "Network.requestWillBeSent",
                json!({"requestId": "b", "request": {"method": "POST", "url": "http://h/x"}}),
            ),
            ev(
                3,
                "Network.responseReceived",
                json!({"requestId": "a", "response": {"status": 200, "mimeType": "text/html"}}),
            ),
            ev(
                4,
                "Network.loadingFailed",
                json!({"requestId": "b", "errorText": "net::ERR_FAILED"}),
            ),
        ];
        let r = network_entries(&evs);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].status, r[0].mime.as_deref()),
            (Some(200), Some("text/html"))
        );
        assert_eq!(
            (r[1].method.as_str(), r[1].failed.as_deref()),
            ("POST", Some("net::ERR_FAILED"))
        );
    }

    #[test]
    fn the_interactive_filter_keeps_the_lines_with_refs() {
        let lines: Vec<String> = ["- heading \"H\"", "- group", "  - button \"B\" [ref=e4]"]
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(
            shown(&lines, Filter::Interactive),
            ["- button \"B\" [ref=e4]"]
        );
        assert_eq!(shown(&lines, Filter::All), lines);
    }

    #[test]
    fn bounds_are_named() {
        assert!(
            navigate_timeout(Some(999))
                .unwrap_err()
                .to_string()
                .starts_with("timeout_ms is 999; give 1000 to 60000")
        );
        assert_eq!(navigate_timeout(None).unwrap(), Duration::from_secs(30));
        assert_eq!(
            entries_max(Some(0)).unwrap_err().to_string(),
            "max is 0; give 1 to 200"
        );
    }
}
