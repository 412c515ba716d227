//! `browser_click`: click an element by ref, or at a point of the latest
//! screenshot.

use rmcp::model::CallToolResult;

use crate::ToolContext;
use crate::browser::dom::{describe_node, release};
use crate::browser::pointer::{Button, dialog_words, hit_at, mouse_click, viewport};
use crate::browser::target::{Where, at_ref, frame_for_points, target_args, where_of};
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{FOLLOW, current, cursor, follow, followed_words, keys, main_frame};
use crate::error::{Result, ToolError};

target_args! {
    pub struct ClickArgs {
        ref: "The element's ref from the latest snapshot (e12).",
        element,
        point,
        target,
        /// left (default), right or middle.
        pub button: Option<Button>,
        /// 2 for a double click, 3 for a triple click (default 1).
        pub click_count: Option<u32>,
        /// Keys held while clicking: "shift", "ctrl+shift", "cmd".
        pub modifiers: Option<Modifiers>,
        /// Playwright's: true is click_count 2 (unlisted).
        #[serde(rename = "doubleClick")]
        #[schemars(skip)]
        pub double_click: Option<bool>,
        tab_id,
    }
}

/// Modifier keys as one `+`-joined text, or Playwright's list of names.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum Modifiers {
    Joined(String),
    Listed(Vec<String>),
}

impl Modifiers {
    fn joined(&self) -> String {
        match self {
            Modifiers::Joined(s) => s.clone(),
            Modifiers::Listed(l) => l.join("+"),
        }
    }
}

/// Listed as the string it was (Playwright's list is taken unlisted).
impl schemars::JsonSchema for Modifiers {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Modifiers".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

pub(crate) async fn click(ctx: &ToolContext, a: ClickArgs) -> Result<CallToolResult> {
    let button = a.button.unwrap_or_default();
    let count = match (a.click_count, a.double_click) {
        (Some(c), Some(true)) if c != 2 => {
            return Err(ToolError::Invalid(format!(
                "doubleClick is true and click_count is {c}; give one of them; nothing was done"
            )));
        }
        (_, Some(true)) => 2,
        (c, _) => c.unwrap_or(1),
    };
    if !(1..=3).contains(&count) {
        return Err(ToolError::Invalid(format!(
            "click_count is {count}; give 1, 2 or 3; nothing was done"
        )));
    }
    let modifiers = match &a.modifiers {
        Some(m) => keys::modifier_bits("modifiers", &m.joined())?,
        None => 0,
    };
    let wh = where_of(a.reference, a.x, a.y, a.target)?;
    let (tab, point, what) = match wh {
        Where::Ref(raw) => at_ref(ctx, "ref", &raw, "nothing was clicked").await?,
        Where::Point(x, y) => {
            let tab = current(ctx).await?;
            let f = frame_for_points(ctx, &tab).await?;
            let p = f.to_viewport(x, y)?;
            let (_, _, px, py) = viewport(ctx, &tab).await?;
            let hit = hit_at(ctx, &tab, p, (px, py)).await?;
            let on = match hit {
                Some(b) => describe_node(ctx, &tab, b).await,
                None => "nothing".into(),
            };
            release(ctx, &tab).await;
            let fid = if f.n == 0 {
                "no screenshot yet, the viewport's space".to_string()
            } else {
                format!("frame {}", f.id())
            };
            (tab, p, format!("({x}, {y}) of {fid}, on {on}"))
        }
    };
    let before = main_frame(ctx, &tab).await?;
    let since = cursor(ctx, &tab.session).await?;
    let dialog = mouse_click(ctx, &tab, point, button, count, modifiers, since).await?;
    let followed = follow(ctx, &tab, &before, since, FOLLOW).await?;
    let verb = match (button, count) {
        (Button::Left, 1) => "clicked".to_string(),
        (b, 1) => format!("{}-clicked", b.name()),
        (b, c) => format!("{}-clicked {c} times", b.name()),
    };
    let text = format!(
        "{verb} {what} at viewport ({:.0}, {:.0}){}{}",
        point.0,
        point.1,
        dialog_words(&dialog),
        followed_words(&followed)
    );
    let out = ActOutput {
        done: text.clone(),
        at: Some([point.0, point.1]),
        navigated: followed.is_some(),
    };
    Ok(act_done(text, &out))
}
