//! The pointer's gestures past a click: `browser_scroll` (the wheel, or an
//! element scrolled into view) and `browser_drag` (press, move, release;
//! an HTML drag and drop is carried through the browser's drag events).
//!
//! Both say what moved, read back from the page: a scroll names the area
//! the wheel scrolled and where it now stands, a drag whether the page took
//! it as a drag and drop or as plain mouse moves.

use std::time::Duration;

use rmcp::model::{CallToolResult, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::act::{
    ActOutput, Button, Target, Where, act_done, call_on, describe_el, dialog_words,
    frame_for_points, hit_at, mouse_move, object, point_in_view, point_of, release, resolve,
    viewport, where_of,
};
use super::{INPUT_MS, Tab, current, cursor, events, send, send_held};
use crate::define::{hints, make_tool};
use crate::error::{Result, ToolError};
use crate::{ToolContext, ToolSettings};

/// The farthest one scroll goes, in CSS pixels.
pub const MAX_SCROLL_PX: u32 = 100_000;

/// How long a scroll may take to come to rest (a wheel scroll may be
/// animated) before its position is read as it is.
const SETTLE: Duration = Duration::from_millis(1_500);

/// The moves a drag is made of between its press and its release.
const DRAG_STEPS: u32 = 10;

/// How long a drag waits, after its moves, for the page to start an HTML
/// drag and drop (`dragstart`), before it is taken as plain mouse moves.
const DRAG_START_WAIT: Duration = Duration::from_millis(300);

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

// --------------------------------------------------------------- scroll

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScrollArgs {
    /// up, down, left or right. Without it, ref is scrolled into view.
    #[serde(default, alias = "scroll_direction")]
    pub direction: Option<Direction>,
    /// How far, in CSS pixels (1 to 100000; default 80% of the viewport).
    #[serde(default)]
    pub amount: Option<u32>,
    /// Where the wheel turns: an element's ref (the area it is in scrolls); default the middle of the viewport.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record.
    #[serde(default)]
    pub element: Option<String>,
    /// Instead of ref: a point in the latest browser_screenshot's pixels.
    #[serde(default)]
    pub x: Option<i64>,
    #[serde(default)]
    pub y: Option<i64>,
    /// Instead: "e12", {"type": "ref", "ref": "e12"} or {"type": "coordinate", "x": 10, "y": 20}.
    #[serde(default)]
    pub target: Option<Target>,
    /// The tab to act in (a tab_id from browser_tabs list); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

pub(super) fn scroll_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<ScrollArgs, ActOutput>(
        name,
        "Scroll with the mouse wheel: direction up, down, left or right, by amount CSS pixels (default most of a viewport), at ref, at x, y of the latest screenshot, or at the middle of the viewport; the area under that point scrolls. Says what moved and where it stands now (or that it was already at its end). With ref and no direction, scrolls that element into view. Refs stay valid after a scroll.".to_string(),
        hints("Scroll", false, false, false, false),
    )
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

/// On the node the wheel is over (`this`): the nearest area that scrolls
/// along the wheel's axis (`vertical`), or the page's; and the page's too.
const SCROLLER: &str = "function(vertical){
  const doc = this.ownerDocument || document;
  const page = doc.scrollingElement || doc.documentElement;
  const spot = (e, isPage) => {
    let name = 'the page';
    if (!isPage) {
      name = '<' + e.tagName.toLowerCase();
      if (e.id) name += ' id=' + e.id;
      if (typeof e.className === 'string' && e.className.trim()) name += ' class=' + e.className.trim().split(/\\s+/).slice(0, 3).join('.');
      name += '>';
    }
    return {name, page: isPage, left: e.scrollLeft, top: e.scrollTop,
      maxLeft: Math.max(0, e.scrollWidth - e.clientWidth), maxTop: Math.max(0, e.scrollHeight - e.clientHeight)};
  };
  let e = this.nodeType === 1 ? this : (this.parentElement || null);
  for (; e && e !== page && e !== doc.body && e !== doc.documentElement; e = e.parentElement || (e.getRootNode && e.getRootNode().host) || null) {
    const s = getComputedStyle(e);
    const o = vertical ? s.overflowY : s.overflowX;
    const room = vertical ? e.scrollHeight > e.clientHeight : e.scrollWidth > e.clientWidth;
    if (room && /(auto|scroll|overlay)/.test(o)) return {area: spot(e, false), page: spot(page, true)};
  }
  return {area: null, page: spot(page, true)};
}";

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
            let r = send(
                ctx,
                Some(&tab.session),
                "Runtime.evaluate",
                json!({
                    "expression": format!("({SCROLLER}).call(document.documentElement, {vertical})"),
                    "returnByValue": true,
                }),
                None,
            )
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

pub(super) async fn scroll(ctx: &ToolContext, a: ScrollArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
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

// ----------------------------------------------------------------- drag

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DragArgs {
    /// The ref of the element to drag, from the latest snapshot.
    #[serde(default)]
    pub start_ref: Option<String>,
    /// A few words naming it, for the record.
    #[serde(default)]
    pub start_element: Option<String>,
    /// The ref of the element to drop on (it must be in view with the start).
    #[serde(default)]
    pub end_ref: Option<String>,
    /// A few words naming it, for the record.
    #[serde(default)]
    pub end_element: Option<String>,
    /// Instead of start_ref: a point in the latest browser_screenshot's pixels.
    #[serde(default)]
    pub start_x: Option<i64>,
    #[serde(default)]
    pub start_y: Option<i64>,
    /// Instead of end_ref: a point in the latest browser_screenshot's pixels.
    #[serde(default)]
    pub end_x: Option<i64>,
    #[serde(default)]
    pub end_y: Option<i64>,
    /// The tab to act in (a tab_id from browser_tabs list); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

pub(super) fn drag_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<DragArgs, ActOutput>(
        name,
        "Drag from start_ref (or start_x, start_y of the latest screenshot) to end_ref (or end_x, end_y) with the left button held: moves a slider, reorders a list, drops an item on a target (HTML drag and drop included). The start is scrolled into view; the end must be in view with it, or the drag is refused and nothing is done. Says whether the page took it as a drag and drop or as mouse moves; take a snapshot after to see the result.".to_string(),
        hints("Drag", false, true, false, false),
    )
}

/// One end of a drag: a ref, or a point of the latest screenshot.
fn end_of(which: &str, reference: Option<String>, x: Option<i64>, y: Option<i64>) -> Result<Where> {
    match (reference, x, y) {
        (Some(r), None, None) => Ok(Where::Ref(r)),
        (None, Some(x), Some(y)) => Ok(Where::Point(x, y)),
        (None, None, None) => Err(ToolError::Invalid(format!(
            "give {which}_ref (from browser_snapshot), or {which}_x and {which}_y (in the latest screenshot's pixels); nothing was dragged"
        ))),
        (None, _, _) => Err(ToolError::Invalid(format!(
            "give both {which}_x and {which}_y; nothing was dragged"
        ))),
        (Some(_), _, _) => Err(ToolError::Invalid(format!(
            "give {which}_ref or {which}_x and {which}_y, not both; nothing was dragged"
        ))),
    }
}

pub(super) async fn drag(ctx: &ToolContext, a: DragArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let start = end_of("start", a.start_ref, a.start_x, a.start_y)?;
    let end = end_of("end", a.end_ref, a.end_x, a.end_y)?;
    let nothing = "nothing was dragged";
    let (tab, from, from_words) = match start {
        Where::Ref(raw) => {
            let (tab, el, n) = resolve(ctx, "start_ref", &raw).await?;
            let p = point_of(ctx, &tab, &el, n, nothing).await?;
            (tab, p, format!("e{n} ({})", describe_el(&el)))
        }
        Where::Point(x, y) => {
            let tab = current(ctx).await?;
            let f = frame_for_points(ctx, &tab).await?;
            (tab, f.to_viewport(x, y)?, format!("({x}, {y})"))
        }
    };
    let (to, to_words) = match end {
        Where::Ref(raw) => {
            let (_, el, n) = resolve(ctx, "end_ref", &raw).await?;
            let what = "nothing was dragged (scroll so that both ends show, or drag in steps)";
            let p = point_in_view(ctx, &tab, &el, n, what, false).await?;
            (p, format!("e{n} ({})", describe_el(&el)))
        }
        Where::Point(x, y) => {
            let f = frame_for_points(ctx, &tab).await?;
            (f.to_viewport(x, y)?, format!("({x}, {y})"))
        }
    };
    let how = press_move_release(ctx, &tab, from, to).await?;
    let how = match how {
        Dragged::Dropped => "the page took it as a drag and drop, dropped at the end".to_string(),
        Dragged::Moved => {
            "the page started no drag and drop: it got the press, the moves and the release"
                .to_string()
        }
        Dragged::Dialog(words) => format!("stopped at a dialog: {words}"),
    };
    let text = format!(
        "dragged from {from_words} at viewport ({:.0}, {:.0}) to {to_words} at ({:.0}, {:.0}): {how}",
        from.0, from.1, to.0, to.1
    );
    let out = ActOutput {
        done: text.clone(),
        at: Some([to.0, to.1]),
        navigated: false,
    };
    Ok(act_done(text, &out))
}

enum Dragged {
    /// An HTML drag and drop, carried through the drag events.
    Dropped,
    /// Plain mouse events (a slider, a canvas, a list of its own).
    Moved,
    Dialog(String),
}

/// The drag itself. Drags are intercepted while it runs, so an HTML drag
/// the page starts (`dragstart`) comes back as `Input.dragIntercepted` and
/// is carried on with the browser's drag events (enter, over, drop);
/// otherwise the moves and the release are plain mouse events.
async fn press_move_release(
    ctx: &ToolContext,
    tab: &Tab,
    from: (f64, f64),
    to: (f64, f64),
) -> Result<Dragged> {
    let session = Some(tab.session.as_str());
    let intercept = send(
        ctx,
        session,
        "Input.setInterceptDrags",
        json!({"enabled": true}),
        None,
    )
    .await
    .is_ok();
    let r = drag_steps(ctx, tab, from, to, intercept).await;
    if intercept {
        let _ = send(
            ctx,
            session,
            "Input.setInterceptDrags",
            json!({"enabled": false}),
            None,
        )
        .await;
    }
    r
}

async fn drag_steps(
    ctx: &ToolContext,
    tab: &Tab,
    from: (f64, f64),
    to: (f64, f64),
    intercept: bool,
) -> Result<Dragged> {
    let since = cursor(ctx, &tab.session).await?;
    let left = Button::Left;
    mouse_move(ctx, tab, from.0, from.1, 0).await?;
    let mouse = |kind: &str, (x, y): (f64, f64), buttons: u32| json!({"type": kind, "x": x, "y": y, "button": left.name(), "buttons": buttons, "clickCount": 1});
    let (_, d) = send_held(
        ctx,
        tab,
        "Input.dispatchMouseEvent",
        mouse("mousePressed", from, left.bit()),
        since,
        INPUT_MS,
    )
    .await?;
    if let Some(w) = d {
        return Ok(Dragged::Dialog(w));
    }
    let at = |i: u32| {
        let t = f64::from(i) / f64::from(DRAG_STEPS);
        (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t)
    };
    let mut data: Option<Value> = None;
    for i in 1..=DRAG_STEPS {
        let p = at(i);
        if let Some(d) = &data {
            drag_event(ctx, tab, "dragOver", p, d).await?;
            continue;
        }
        let (_, d) = send_held(
            ctx,
            tab,
            "Input.dispatchMouseEvent",
            mouse("mouseMoved", p, left.bit()),
            since,
            INPUT_MS,
        )
        .await?;
        if let Some(w) = d {
            return Ok(Dragged::Dialog(w));
        }
        if intercept {
            let wait = if i == DRAG_STEPS {
                DRAG_START_WAIT
            } else {
                Duration::ZERO
            };
            let (evs, _) =
                events(ctx, &tab.session, since, &["Input.dragIntercepted"], wait).await?;
            if let Some(e) = evs.into_iter().next() {
                let d = e.params["data"].clone();
                drag_event(ctx, tab, "dragEnter", p, &d).await?;
                drag_event(ctx, tab, "dragOver", p, &d).await?;
                data = Some(d);
            }
        }
    }
    if let Some(d) = &data {
        drag_event(ctx, tab, "drop", to, d).await?;
    }
    // The release ends the press in the browser's mouse state either way.
    let (_, d) = send_held(
        ctx,
        tab,
        "Input.dispatchMouseEvent",
        mouse("mouseReleased", to, 0),
        since,
        INPUT_MS,
    )
    .await?;
    if let Some(w) = d {
        return Ok(Dragged::Dialog(w));
    }
    Ok(if data.is_some() {
        Dragged::Dropped
    } else {
        Dragged::Moved
    })
}

async fn drag_event(
    ctx: &ToolContext,
    tab: &Tab,
    kind: &str,
    (x, y): (f64, f64),
    data: &Value,
) -> Result<()> {
    send(
        ctx,
        Some(&tab.session),
        "Input.dispatchDragEvent",
        json!({"type": kind, "x": x, "y": y, "data": data}),
        Some(INPUT_MS),
    )
    .await?;
    Ok(())
}
