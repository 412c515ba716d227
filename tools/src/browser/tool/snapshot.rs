//! `browser_snapshot`: the page as an accessibility tree in text, each
//! interactive element with a ref.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::budget;
use crate::browser::{
    BrowserMemo, Held, MAX_HELD, MainFrame, Snap, Tab, World, current, main_frame, send_to,
    snapshot as snap, title_url, with_memo,
};
use crate::define::done;
use crate::error::{Result, ToolError};

target_args! {
    pub struct SnapshotArgs {
        /// Which page of a long snapshot, from 1. Pages after the first are of the latest snapshot (no new one is taken).
        pub page: Option<u32>,
        /// "interactive": only the elements with a ref, one a line (shorter); default every line.
        pub filter: Option<Filter>,
        tab_id,
    }
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
    /// The snapshot's number (a later page of it names it).
    pub snapshot: u64,
    pub url: String,
    pub title: String,
    pub page: u32,
    pub pages: u32,
    /// How many refs the snapshot has (all pages).
    pub refs: u64,
}

/// The most elements a walk goes down through.
const WALK_DEPTH: usize = snap::MAX_DEPTH;

/// Run the walk in the world `context`: defined there first when `define`
/// (a new world), else called as defined. None when the world has no walk
/// or is gone (its document was left).
async fn walk(ctx: &ToolContext, tab: &Tab, context: u64, define: bool) -> Result<Option<Value>> {
    let args = format!(
        "({WALK_DEPTH}, {}, {})",
        snap::MAX_TEXT_CHARS,
        json!(snap::INTERACTIVE)
    );
    let expression = if define {
        format!("(globalThis.__computerMcpWalk = {})\n{args}", snap::WALK)
    } else {
        format!("globalThis.__computerMcpWalk ? __computerMcpWalk{args} : null")
    };
    let r = send_to(
        ctx,
        tab,
        "Runtime.evaluate",
        json!({"expression": expression, "contextId": context, "returnByValue": true}),
    )
    .await?;
    if let Some(d) = r.get("exceptionDetails") {
        return Err(ToolError::Broken(format!(
            "reading the page failed: {}",
            d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("an exception")
        )));
    }
    let v = &r["result"]["value"];
    Ok(v.is_array().then(|| v.clone()))
}

/// The tools' isolated world in the main frame `frame` of the tab's current
/// document: its execution context id. Chromium keeps one world of a name
/// per document, so asking again in the same document gives the same
/// context (nothing new is made), and after a navigation the new
/// document's.
async fn world_of(ctx: &ToolContext, tab: &Tab, frame: &str) -> Result<u64> {
    let r = send_to(
        ctx,
        tab,
        "Page.createIsolatedWorld",
        json!({"frameId": frame, "worldName": "computer-mcp"}),
    )
    .await?;
    r["executionContextId"]
        .as_u64()
        .ok_or_else(|| ToolError::Broken("the browser made no world to read the page in".into()))
}

/// The walk's entries for the current document of `tab`, and the world
/// they were numbered in. One round trip at rest (the frame tree, the
/// document's world and the walk in the world known, at once), two on a
/// new document (then the walk is defined in its world first). The world
/// is asked in the frame of the tab's own id (a tab's main frame has it),
/// and again by the frame tree's id should that be refused.
async fn read_page(ctx: &ToolContext, tab: &Tab) -> Result<(MainFrame, World, Value)> {
    let known = with_memo(ctx, |m| m.worlds.get(&tab.target).cloned());
    let (frames, asked, early) = tokio::join!(
        send_to(ctx, tab, "Page.getFrameTree", json!({})),
        world_of(ctx, tab, &tab.target),
        async {
            match &known {
                Some(w) => walk(ctx, tab, w.context, false).await.ok().flatten(),
                None => None,
            }
        }
    );
    let frame = MainFrame::of(&frames?);
    let context = match asked {
        Ok(c) => c,
        Err(_) => world_of(ctx, tab, &frame.id).await?,
    };
    if let (Some(w), Some(v)) = (&known, early)
        && w.loader == frame.loader
        && w.context == context
    {
        return Ok((frame, w.clone(), v));
    }
    let world = World {
        loader: frame.loader.clone(),
        context,
    };
    let v = walk(ctx, tab, world.context, true).await?.ok_or_else(|| {
        ToolError::Broken("the page gave no answer to the snapshot's walk".into())
    })?;
    with_memo(ctx, |m| m.worlds.insert(tab.target.clone(), world.clone()));
    Ok((frame, world, v))
}

/// Take a snapshot of the current tab, remembered as the latest.
pub(crate) async fn take_snapshot(ctx: &ToolContext) -> Result<Snap> {
    let tab = current(ctx).await?;
    let (frame, world, entries) = read_page(ctx, &tab).await?;
    let entries = entries.as_array().map(Vec::as_slice).unwrap_or_default();
    let snap = with_memo(ctx, |m| {
        let built = snap::build(
            entries,
            &mut |node| number(m, &tab.target, &frame.loader, world.context, node),
            &frame.url,
        );
        if m.held.len() + built.refs.len() > MAX_HELD {
            m.held.retain(|_, h| h.loader == frame.loader);
            let held = &m.held;
            m.numbers.retain(|_, n| held.contains_key(n));
        }
        for (n, el) in &built.refs {
            m.held.insert(
                *n,
                Held {
                    el: el.clone(),
                    target: tab.target.clone(),
                    loader: frame.loader.clone(),
                    url: frame.url.clone(),
                    world: world.context,
                },
            );
        }
        m.snaps += 1;
        let s = Snap {
            n: m.snaps,
            target: tab.target.clone(),
            loader: frame.loader.clone(),
            url: frame.url.clone(),
            refs: built.refs.len() as u64,
            lines: built.lines,
        };
        m.latest = Some(s.clone());
        s
    });
    Ok(snap)
}

/// The ref of the element `node` of world `world` in tab `target`'s
/// document `loader`: the one it was given before, or a number no element
/// had. The document and world are part of the key: each world numbers its
/// elements from 1.
pub(crate) fn number(
    m: &mut BrowserMemo,
    target: &str,
    loader: &str,
    world: u64,
    node: u64,
) -> u64 {
    let key = (target.to_string(), loader.to_string(), world, node);
    if let Some(n) = m.numbers.get(&key) {
        return *n;
    }
    let n = m.next_ref;
    m.next_ref += 1;
    m.numbers.insert(key, n);
    n
}

fn ref_count(s: &Snap) -> String {
    match s.refs {
        0 => "no refs".into(),
        1 => "1 ref".into(),
        n => format!("{n} refs"),
    }
}

pub(crate) async fn snapshot(ctx: &ToolContext, a: SnapshotArgs) -> Result<CallToolResult> {
    let want = a.page.unwrap_or(1);
    if want == 0 {
        return Err(ToolError::Invalid(
            "page is 0; pages are numbered from 1".into(),
        ));
    }
    let (s, (title, url)) = if want == 1 {
        // The title and address are asked beside the snapshot's calls.
        let tab = current(ctx).await?;
        let (s, tu) = tokio::join!(take_snapshot(ctx), title_url(ctx, &tab));
        (s?, tu?)
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
        (s, title_url(ctx, &tab).await?)
    };
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
        ref_count(&s)
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
            "(more: call browser_snapshot with page {} for the next part, of snapshot {})\n",
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
        refs: s.refs,
    };
    Ok(done(text, &out))
}
