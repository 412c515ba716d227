//! `browser_snapshot`: the page as an accessibility tree in text, each
//! interactive element with a ref.

use std::collections::HashSet;

use futures::future::join_all;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::budget;
use crate::browser::{
    BrowserMemo, Held, MAX_HELD, MainFrame, Snap, Tab, current, main_frame, send_to,
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

/// The backend ids of the document's password inputs (each described at
/// once).
async fn password_fields(ctx: &ToolContext, tab: &Tab) -> Result<HashSet<u64>> {
    let doc = send_to(ctx, tab, "DOM.getDocument", json!({"depth": 0})).await?;
    let q = send_to(
        ctx,
        tab,
        "DOM.querySelectorAll",
        json!({"nodeId": doc["root"]["nodeId"], "selector": "input[type=password i]"}),
    )
    .await?;
    let ids = q["nodeIds"].as_array().cloned().unwrap_or_default();
    let described = join_all(
        ids.iter()
            .map(|id| send_to(ctx, tab, "DOM.describeNode", json!({"nodeId": id}))),
    )
    .await;
    let mut out = HashSet::new();
    for d in described {
        if let Some(b) = d?["node"]["backendNodeId"].as_u64() {
            out.insert(b);
        }
    }
    Ok(out)
}

/// Frames read into a snapshot at most.
pub const MAX_FRAMES: usize = 20;

/// The ids of the frames under the main frame of `tree` (Page.getFrameTree's
/// answer), at most [`MAX_FRAMES`].
fn child_frames(tree: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    let mut todo: Vec<&Value> = tree["frameTree"]["childFrames"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    while let Some(f) = todo.pop() {
        if ids.len() >= MAX_FRAMES {
            break;
        }
        if let Some(id) = f["frame"]["id"].as_str() {
            ids.push(id.to_string());
        }
        todo.extend(f["childFrames"].as_array().into_iter().flatten());
    }
    ids
}

/// The accessibility tree of the frame `id` if it shares the tab's process
/// (a same-site iframe), with the backend id of its `<iframe>`; none for a
/// frame of another site (another process), which is left out.
async fn frame_tree(ctx: &ToolContext, tab: &Tab, id: &str) -> Option<(u64, Vec<Value>)> {
    let (owner, t) = tokio::join!(
        send_to(ctx, tab, "DOM.getFrameOwner", json!({"frameId": id})),
        send_to(
            ctx,
            tab,
            "Accessibility.getFullAXTree",
            json!({"frameId": id})
        ),
    );
    let owner = owner.ok()?["backendNodeId"].as_u64()?;
    let nodes = t.ok()?["nodes"].as_array().cloned().unwrap_or_default();
    Some((owner, nodes))
}

/// Take a snapshot of the current tab, remembered as the latest. The
/// browser is asked everything at once: the tree, the frames, the
/// password fields (then each frame's tree, at once).
pub(crate) async fn take_snapshot(ctx: &ToolContext) -> Result<Snap> {
    let tab = current(ctx).await?;
    let (frames, passwords, tree) = tokio::join!(
        send_to(ctx, &tab, "Page.getFrameTree", json!({})),
        password_fields(ctx, &tab),
        send_to(ctx, &tab, "Accessibility.getFullAXTree", json!({})),
    );
    let (frames, passwords, tree) = (frames?, passwords?, tree?);
    let frame = MainFrame::of(&frames);
    let main = tree["nodes"].as_array().cloned().unwrap_or_default();
    let inner: Vec<(u64, Vec<Value>)> = join_all(
        child_frames(&frames)
            .iter()
            .map(|id| frame_tree(ctx, &tab, id)),
    )
    .await
    .into_iter()
    .flatten()
    .collect();
    let nodes = snap::merge_frames(&main, &inner);
    let snap = with_memo(ctx, |m| {
        let built = snap::build(
            &nodes,
            &mut |b| number(m, &tab.target, &frame.loader, b),
            &passwords,
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
