//! The caller's tabs: listing them in the order first seen, the current
//! tab, opening, choosing and activating one, and a tab's main frame,
//! title and URL.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::pages::with_pages;
use super::{Tab, TargetInfo, attach, send, send_to, with_memo};
use crate::ToolContext;
use crate::error::{Result, ToolError};

/// The caller's page tabs ([`Pages`]: another caller's are not listed),
/// in the order the tools first saw them (as Playwright numbers pages: by
/// when they opened). Chromium's own order moves a tab when it is
/// activated, so a tab's index would change between a `browser_tabs` list
/// and the next call.
pub(crate) async fn page_targets(ctx: &ToolContext) -> Result<Vec<TargetInfo>> {
    let r = send(ctx, None, "Target.getTargets", json!({}), None).await?;
    let mut targets = listed_pages(&r);
    // A closed tab's world goes with it (whoever's tab it was).
    with_memo(ctx, |m| forget_worlds_of_closed(&mut m.worlds, &targets));
    with_pages(ctx, |p| {
        whose(&mut p.owners, &targets, &ctx.caller);
        targets.retain(|t| p.owners.get(&t.id) == Some(&ctx.caller));
    });
    with_memo(ctx, |m| in_first_seen_order(&mut m.tab_order, &mut targets));
    Ok(targets)
}

/// Record whose each of `targets` is: a tab seen first is its opener's
/// caller's, else `caller`'s; closed tabs are forgotten.
fn whose(owners: &mut HashMap<String, String>, targets: &[TargetInfo], caller: &str) {
    owners.retain(|id, _| targets.iter().any(|t| &t.id == id));
    for t in targets {
        if !owners.contains_key(&t.id) {
            let owner = t
                .opener
                .as_ref()
                .and_then(|o| owners.get(o))
                .cloned()
                .unwrap_or_else(|| caller.to_string());
            owners.insert(t.id.clone(), owner);
        }
    }
}

/// Keep the tools' worlds of the tabs in `live` only.
fn forget_worlds_of_closed<W>(worlds: &mut HashMap<String, W>, live: &[TargetInfo]) {
    worlds.retain(|id, _| live.iter().any(|t| &t.id == id));
}

/// Order `targets` by `order` (target ids first seen first), adding the
/// new ones at its end in the browser's order and forgetting closed ones.
fn in_first_seen_order(order: &mut Vec<String>, targets: &mut [TargetInfo]) {
    order.retain(|id| targets.iter().any(|t| &t.id == id));
    for t in targets.iter() {
        if !order.contains(&t.id) {
            order.push(t.id.clone());
        }
    }
    targets.sort_by_key(|t| order.iter().position(|id| *id == t.id));
}

/// The page tabs of a `Target.getTargets` answer, in its order.
fn listed_pages(r: &Value) -> Vec<TargetInfo> {
    r["targetInfos"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|t| t["type"] == "page")
                .filter(|t| !t["url"].as_str().unwrap_or("").starts_with("devtools://"))
                .map(|t| TargetInfo {
                    id: t["targetId"].as_str().unwrap_or("").to_string(),
                    title: t["title"].as_str().unwrap_or("").to_string(),
                    url: t["url"].as_str().unwrap_or("").to_string(),
                    opener: t["openerId"].as_str().map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The current tab: the one the tools last used, else the browser's first
/// page tab (a new blank one when it has none).
pub(crate) async fn current(ctx: &ToolContext) -> Result<Tab> {
    if let Some(t) = with_memo(ctx, |m| m.tab.clone()) {
        return Ok(t);
    }
    let targets = page_targets(ctx).await?;
    let target = match targets.first() {
        Some(t) => t.id.clone(),
        None => new_blank_tab(ctx).await?,
    };
    attach(ctx, &target).await
}

/// Open a blank tab; gives its target id.
pub(crate) async fn new_blank_tab(ctx: &ToolContext) -> Result<String> {
    let r = send(
        ctx,
        None,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        None,
    )
    .await?;
    let id = r["targetId"].as_str().unwrap_or("").to_string();
    // The caller's from the start, whoever lists the tabs first.
    with_pages(ctx, |p| p.owners.insert(id.clone(), ctx.caller.clone()));
    Ok(id)
}

/// Make the tab `tab_id` (a tab_id from `browser_tabs` list) the current
/// one, when one is given (Anthropic's browser tool names the tab on every
/// call).
pub(crate) async fn use_tab(ctx: &ToolContext, tab_id: Option<&str>) -> Result<()> {
    let Some(id) = tab_id else {
        return Ok(());
    };
    if with_memo(ctx, |m| m.tab.as_ref().is_some_and(|t| t.target == id)) {
        return Ok(());
    }
    if !page_targets(ctx).await?.iter().any(|t| t.id == id) {
        return Err(ToolError::Invalid(format!(
            "tab_id {id:?} is no open tab; browser_tabs list shows the tabs and their tab_id; nothing was done"
        )));
    }
    activate(ctx, id).await
}

/// Bring the tab `id` to the front and make it the current tab.
pub(crate) async fn activate(ctx: &ToolContext, id: &str) -> Result<()> {
    send(
        ctx,
        None,
        "Target.activateTarget",
        json!({"targetId": id}),
        None,
    )
    .await?;
    attach(ctx, id).await?;
    Ok(())
}

/// The main frame of a tab: its id, the document's loaderId and its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MainFrame {
    pub id: String,
    pub loader: String,
    pub url: String,
}

impl MainFrame {
    /// The main frame of `tree`, Page.getFrameTree's answer.
    pub(crate) fn of(tree: &Value) -> MainFrame {
        let f = &tree["frameTree"]["frame"];
        MainFrame {
            id: f["id"].as_str().unwrap_or("").to_string(),
            loader: f["loaderId"].as_str().unwrap_or("").to_string(),
            url: f["url"].as_str().unwrap_or("").to_string(),
        }
    }
}

pub(crate) async fn main_frame(ctx: &ToolContext, tab: &Tab) -> Result<MainFrame> {
    let r = send_to(ctx, tab, "Page.getFrameTree", json!({})).await?;
    Ok(MainFrame::of(&r))
}

/// The tab's title and URL, from the browser (answers while a page loads).
pub(crate) async fn title_url(ctx: &ToolContext, tab: &Tab) -> Result<(String, String)> {
    let r = send(
        ctx,
        None,
        "Target.getTargetInfo",
        json!({"targetId": tab.target}),
        Some(5_000),
    )
    .await?;
    let i = &r["targetInfo"];
    Ok((
        i["title"].as_str().unwrap_or("").to_string(),
        i["url"].as_str().unwrap_or("").to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tabs keep the numbers they were first listed with, whatever order
    /// Chromium lists them in after one is activated; a closed one leaves,
    /// a new one comes last.
    #[test]
    fn tabs_are_listed_in_the_order_they_were_first_seen() {
        let answer = |ids: &[&str]| {
            let infos: Vec<Value> = ids
                .iter()
                .map(
                    |id| json!({"targetId": id, "type": "page", "title": id, "url": "about:blank"}),
                )
                .chain([json!({"targetId": "w", "type": "service_worker", "url": "x"})])
                .collect();
            json!({ "targetInfos": infos })
        };
        let ids = |t: &[TargetInfo]| t.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
        let mut order = Vec::new();
        let mut t = listed_pages(&answer(&["a", "b"]));
        in_first_seen_order(&mut order, &mut t);
        assert_eq!(ids(&t), ["a", "b"]);
        // "a" activated: Chromium lists it after "b".
        let mut t = listed_pages(&answer(&["b", "a"]));
        in_first_seen_order(&mut order, &mut t);
        assert_eq!(ids(&t), ["a", "b"]);
        // "a" closed, "c" opened.
        let mut worlds: HashMap<String, u64> = [("a".into(), 1), ("b".into(), 2)].into();
        let mut t = listed_pages(&answer(&["c", "b"]));
        forget_worlds_of_closed(&mut worlds, &t);
        assert_eq!(worlds, [("b".to_string(), 2)].into());
        in_first_seen_order(&mut order, &mut t);
        assert_eq!(ids(&t), ["b", "c"]);
        assert_eq!(order, ["b", "c"]);
    }
}
