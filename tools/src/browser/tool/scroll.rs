//! `browser_scroll`: the wheel at a point or over an element, or an element
//! scrolled into view; says which area moved and where it stands.

use std::time::Duration;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::dom::{SCROLLER, call_on, describe_el, object, release, resolve};
use crate::browser::pointer::{dialog_words, hit_at, mouse_move, point_of, viewport};
use crate::browser::target::{Where, frame_for_points, target_args, where_of};
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{INPUT_MS, Tab, current, cursor, send_held, send_to};
use crate::error::{Result, ToolError};

/// The farthest one scroll goes, in CSS pixels.
pub const MAX_SCROLL_PX: u32 = 100_000;

/// How long a scroll may take to come to rest (a wheel scroll may be
/// animated) before its position is read as it is.
const SETTLE: Duration = Duration::from_millis(1_500);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

impl Direction {
    fn word(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Left => "left",
            Direction::Right => "right",
        }
    }
    fn vertical(self) -> bool {
        matches!(self, Direction::Up | Direction::Down)
    }
}

target_args! {
    pub struct ScrollArgs {
        /// up, down, left or right. Without it, ref is scrolled into view.
        #[serde(alias = "scroll_direction")]
        pub direction: Option<Direction>,
        /// How far, in CSS pixels (1 to 100000; default 80% of the viewport).
        pub amount: Option<u32>,
        ref: "Where the wheel turns: an element's ref (the area it is in scrolls); default the middle of the viewport.",
        element,
        point,
        target,
        tab_id,
    }
}

/// Where a scrollable area stands: its scroll, and how far it can go.
#[derive(Clone, Debug, PartialEq)]
struct Spot {
    name: String,
    page: bool,
    left: f64,
    top: f64,
    max_left: f64,
    max_top: f64,
}

impl Spot {
    fn read(v: &Value) -> Option<Spot> {
        Some(Spot {
            name: v["name"].as_str()?.to_string(),
            page: v["page"].as_bool()?,
            left: v["left"].as_f64()?,
            top: v["top"].as_f64()?,
            max_left: v["maxLeft"].as_f64()?,
            max_top: v["maxTop"].as_f64()?,
        })
    }
}

/// The area under the wheel and the page, read on `obj` (a node's handle)
/// or on the document when the wheel is over no node.
async fn spots(
    ctx: &ToolContext,
    tab: &Tab,
    obj: Option<&str>,
    vertical: bool,
) -> Result<(Option<Spot>, Spot)> {
    let v = match obj {
        Some(o) => call_on(ctx, tab, o, SCROLLER, vec![json!(vertical)]).await?,
        None => {
            let r = send_to(ctx, tab, "Runtime.evaluate", json!({
                    "expression": format!("({SCROLLER}).call(document.documentElement, {vertical})"),
                    "returnByValue": true,
                }))
            .await?;
            r["result"]["value"].clone()
        }
    };
    let page = Spot::read(&v["page"])
        .ok_or_else(|| ToolError::Broken("the page gave no scroll position".into()))?;
    Ok((Spot::read(&v["area"]), page))
}

/// "y 400 of 2600" for where `s` stands along the axis.
fn stands(s: &Spot, vertical: bool) -> String {
    if vertical {
        format!("y {:.0} of {:.0}", s.top, s.max_top)
    } else {
        format!("x {:.0} of {:.0}", s.left, s.max_left)
    }
}

fn moved(a: &Spot, b: &Spot) -> bool {
    (a.left - b.left).abs() >= 0.5 || (a.top - b.top).abs() >= 0.5
}

pub(crate) async fn scroll(ctx: &ToolContext, a: ScrollArgs) -> Result<CallToolResult> {
    if let Some(n) = a.amount
        && !(1..=MAX_SCROLL_PX).contains(&n)
    {
        return Err(ToolError::Invalid(format!(
            "amount is {n}; give 1 to {MAX_SCROLL_PX} CSS pixels; nothing was scrolled"
        )));
    }
    let given = a.reference.is_some() || a.x.is_some() || a.y.is_some() || a.target.is_some();
    let wh = if given {
        Some(where_of(a.reference, a.x, a.y, a.target)?)
    } else {
        None
    };
    let Some(dir) = a.direction else {
        let Some(Where::Ref(raw)) = wh else {
            return Err(ToolError::Invalid(
                "give direction (up, down, left or right), or ref alone to scroll that element into view; nothing was scrolled".into(),
            ));
        };
        if a.amount.is_some() {
            return Err(ToolError::Invalid(
                "amount needs a direction (up, down, left or right); nothing was scrolled".into(),
            ));
        }
        let (tab, el, n) = resolve(ctx, "ref", &raw).await?;
        let (x, y) = point_of(ctx, &tab, &el, n, "nothing more was done").await?;
        let (_, page) = spots(ctx, &tab, None, true).await?;
        let text = format!(
            "scrolled e{n} ({}) into view: its middle is at viewport ({x:.0}, {y:.0}); the page stands at {}",
            describe_el(&el),
            stands(&page, true)
        );
        let out = ActOutput {
            done: text.clone(),
            at: Some([x, y]),
            navigated: false,
        };
        return Ok(act_done(text, &out));
    };
    let (tab, point, what) = match wh {
        None => {
            let tab = current(ctx).await?;
            let (w, h, _, _) = viewport(ctx, &tab).await?;
            (
                tab,
                (w / 2.0, h / 2.0),
                "the middle of the viewport".to_string(),
            )
        }
        Some(Where::Ref(raw)) => {
            let (tab, el, n) = resolve(ctx, "ref", &raw).await?;
            let p = point_of(ctx, &tab, &el, n, "nothing was scrolled").await?;
            (tab, p, format!("e{n} ({})", describe_el(&el)))
        }
        Some(Where::Point(x, y)) => {
            let tab = current(ctx).await?;
            let f = frame_for_points(ctx, &tab).await?;
            let p = f.to_viewport(x, y)?;
            (tab, p, format!("({x}, {y}) of the screenshot"))
        }
    };
    let (vw, vh, px, py) = viewport(ctx, &tab).await?;
    let vertical = dir.vertical();
    let amount = match a.amount {
        Some(n) => f64::from(n),
        None => ((if vertical { vh } else { vw }) * 0.8).round().max(1.0),
    };
    let (dx, dy) = match dir {
        Direction::Up => (0.0, -amount),
        Direction::Down => (0.0, amount),
        Direction::Left => (-amount, 0.0),
        Direction::Right => (amount, 0.0),
    };
    let hit = hit_at(ctx, &tab, point, (px, py)).await?;
    let obj = match hit {
        Some(b) => object(ctx, &tab, b, "the element under the wheel")
            .await
            .ok(),
        None => None,
    };
    let result = wheel(ctx, &tab, point, (dx, dy), obj.as_deref(), vertical).await;
    release(ctx, &tab).await;
    let (before, after, dialog) = result?;
    let ((area0, page0), (area1, page1)) = (before, after);
    let head = format!(
        "turned the wheel {} {amount:.0} px at {what}, viewport ({:.0}, {:.0})",
        dir.word(),
        point.0,
        point.1
    );
    let mut parts = Vec::new();
    if let (Some(a0), Some(a1)) = (&area0, &area1)
        && moved(a0, a1)
    {
        parts.push(format!(
            "the area {} scrolled to {}",
            a1.name,
            stands(a1, vertical)
        ));
    }
    if moved(&page0, &page1) {
        parts.push(format!("the page scrolled to {}", stands(&page1, vertical)));
    }
    let tail = if parts.is_empty() {
        let s = area1.as_ref().unwrap_or(&page1);
        let whose = if s.page {
            "the page".to_string()
        } else {
            format!("the area {}", s.name)
        };
        format!(
            "nothing moved: {whose} stands at {} and cannot scroll {} from there",
            stands(s, vertical),
            dir.word()
        )
    } else {
        parts.join("; ")
    };
    let text = format!("{head}: {tail}{}", dialog_words(&dialog));
    let out = ActOutput {
        done: text.clone(),
        at: Some([point.0, point.1]),
        navigated: false,
    };
    Ok(act_done(text, &out))
}

type Spots = (Option<Spot>, Spot);

/// One wheel turn at `point`, and the scroll before and after it (read
/// again until it rests, up to [`SETTLE`]).
async fn wheel(
    ctx: &ToolContext,
    tab: &Tab,
    point: (f64, f64),
    (dx, dy): (f64, f64),
    obj: Option<&str>,
    vertical: bool,
) -> Result<(Spots, Spots, Option<String>)> {
    let before = spots(ctx, tab, obj, vertical).await?;
    let since = cursor(ctx, &tab.session).await?;
    mouse_move(ctx, tab, point.0, point.1, 0).await?;
    let (_, dialog) = send_held(
        ctx,
        tab,
        "Input.dispatchMouseEvent",
        json!({"type": "mouseWheel", "x": point.0, "y": point.1, "deltaX": dx, "deltaY": dy}),
        since,
        INPUT_MS,
    )
    .await?;
    if dialog.is_some() {
        let after = spots(ctx, tab, obj, vertical).await?;
        return Ok((before, after, dialog));
    }
    // At rest: the same position twice in a row, 50 ms apart, after a move
    // (or no move within the first 300 ms).
    let start = tokio::time::Instant::now();
    let mut last = spots(ctx, tab, obj, vertical).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = spots(ctx, tab, obj, vertical).await?;
        let any = now != before;
        if (now == last && (any || start.elapsed() >= Duration::from_millis(300)))
            || start.elapsed() >= SETTLE
        {
            return Ok((before, now, None));
        }
        last = now;
    }
}
