//! `browser_snapshot`: the page as an accessibility tree in text, each
//! interactive element with a ref.

use std::collections::HashSet;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::budget;
use crate::browser::{
    BrowserMemo, Held, MAX_HELD, Snap, Tab, current, main_frame, send, send_to, snapshot as snap,
    title_url, with_memo,
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
    let tree = send_to(ctx, &tab, "Accessibility.getFullAXTree", json!({})).await?;
    let main = tree["nodes"].as_array().cloned().unwrap_or_default();
    let frames = frame_trees(ctx, &tab).await?;
    let nodes = snap::merge_frames(&main, &frames);
    let snap = with_memo(ctx, |m| {
        let built = snap::build(
            &nodes,
            &mut |b| number(m, &tab.target, &frame.loader, b),
            &passwords,
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

/// The ref of the element `backend` of tab `target`'s document `loader`:
/// the one it was given before, or a number no element had. The document
/// is part of the key: a new renderer process (a navigation to another
/// site) may give its elements backend ids an old document's had.
fn number(m: &mut BrowserMemo, target: &str, loader: &str, backend: u64) -> u64 {
    let key = (target.to_string(), loader.to_string(), backend);
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
