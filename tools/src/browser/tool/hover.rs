//! `browser_hover`: move the mouse over an element by ref, or to a point.

use rmcp::model::CallToolResult;

use crate::ToolContext;
use crate::browser::pointer::mouse_move;
use crate::browser::target::{landing, target_args, where_of};
use crate::browser::tool::{ActOutput, act_done};
use crate::error::Result;

target_args! {
    pub struct HoverArgs {
        ref: "The element's ref from the latest snapshot.",
        element,
        point,
        target,
        tab_id,
    }
}

pub(crate) async fn hover(ctx: &ToolContext, a: HoverArgs) -> Result<CallToolResult> {
    let wh = where_of(a.reference, a.x, a.y, a.target)?;
    let (tab, p, what) = landing(ctx, "ref", wh, "the pointer was not moved").await?;
    mouse_move(ctx, &tab, p.0, p.1, 0).await?;
    let text = format!(
        "the pointer is over {what} at viewport ({:.0}, {:.0})",
        p.0, p.1
    );
    let out = ActOutput {
        done: text.clone(),
        at: Some([p.0, p.1]),
        navigated: false,
    };
    Ok(act_done(text, &out))
}
