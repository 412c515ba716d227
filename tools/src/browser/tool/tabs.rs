//! `browser_tabs`: list, open, select and close tabs.

use std::time::Duration;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::navigate::{NAVIGATE_DEFAULT_MS, goto};
use crate::ToolContext;
use crate::browser::target::InTab;
use crate::browser::tool::chars_cut;
use crate::browser::{
    activate, attach, check, current, new_blank_tab, page_targets, send, with_memo,
};
use crate::define::done;
use crate::error::{Result, ToolError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TabAction {
    List,
    New,
    #[serde(alias = "select")]
    Switch,
    Close,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsArgs {
    /// list, new (url optional), switch (index or tab_id), close (index or tab_id; default the current tab).
    pub action: TabAction,
    /// The tab's index as list shows it, from 0.
    pub index: Option<usize>,
    /// Instead of index: the tab's id as list shows it.
    pub tab_id: Option<String>,
    /// For new: the address to open in it (http://, https:// or about:blank).
    pub url: Option<String>,
}

/// Its `tab_id` is the tab to switch to or close, not one to act in: it
/// runs on whatever tab is current.
impl InTab for TabsArgs {
    fn tab_id(&self) -> Option<&str> {
        None
    }
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

pub(crate) async fn tabs(ctx: &ToolContext, a: TabsArgs) -> Result<CallToolResult> {
    let head = match a.action {
        TabAction::List => String::from("tabs:"),
        TabAction::New => {
            let url = match &a.url {
                Some(u) => Some(check::url("url", u)?),
                None => None,
            };
            let id = new_blank_tab(ctx).await?;
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
            activate(ctx, &id).await?;
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
                m.worlds.remove(&id);
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
