//! `browser_hover`: move the mouse over an element by ref, or to a point.

use rmcp::model::CallToolResult;

use crate::ToolContext;
use crate::browser::current;
use crate::browser::dom::{describe_el, resolve};
use crate::browser::pointer::{mouse_move, point_of};
use crate::browser::target::{Where, frame_for_points, target_args, where_of};
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
    let (tab, p, what) = match where_of(a.reference, a.x, a.y, a.target)? {
        Where::Ref(raw) => {
            let (tab, el, n) = resolve(ctx, "ref", &raw).await?;
            let p = point_of(ctx, &tab, &el, n, "the pointer was not moved").await?;
            (tab, p, format!("e{n} ({})", describe_el(&el)))
        }
        Where::Point(x, y) => {
            let tab = current(ctx).await?;
            let f = frame_for_points(ctx, &tab).await?;
            let p = f.to_viewport(x, y)?;
            (tab, p, format!("({x}, {y})"))
        }
    };
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
