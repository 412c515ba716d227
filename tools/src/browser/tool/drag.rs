//! `browser_drag`: press, move and release; an HTML drag and drop is
//! carried through the browser's drag events.

use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::dom::{describe_el, resolve};
use crate::browser::pointer::{Button, mouse_move, point_in_view};
use crate::browser::target::{Where, frame_for_points, landing, target_args};
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{INPUT_MS, Tab, cursor, events, send, send_held};
use crate::error::{Result, ToolError};

/// The moves a drag is made of between its press and its release.
const DRAG_STEPS: u32 = 10;

/// How long a drag waits, after its moves, for the page to start an HTML
/// drag and drop (`dragstart`), before it is taken as plain mouse moves.
const DRAG_START_WAIT: Duration = Duration::from_millis(300);

target_args! {
    pub struct DragArgs {
        /// The ref of the element to drag, from the latest snapshot.
        #[serde(alias = "startTarget")]
        pub start_ref: Option<String>,
        /// A few words naming it, for the record (taken, not listed).
        #[serde(alias = "startElement")]
        #[schemars(skip)]
        pub start_element: Option<String>,
        /// The ref of the element to drop on (it must be in view with the start).
        #[serde(alias = "endTarget")]
        pub end_ref: Option<String>,
        /// A few words naming it, for the record (taken, not listed).
        #[serde(alias = "endElement")]
        #[schemars(skip)]
        pub end_element: Option<String>,
        /// Instead of start_ref: a point in the latest browser_screenshot's pixels.
        pub start_x: Option<i64>,
        pub start_y: Option<i64>,
        /// Instead of end_ref: a point in the latest browser_screenshot's pixels.
        pub end_x: Option<i64>,
        pub end_y: Option<i64>,
        tab_id,
    }
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

pub(crate) async fn drag(ctx: &ToolContext, a: DragArgs) -> Result<CallToolResult> {
    let start = end_of("start", a.start_ref, a.start_x, a.start_y)?;
    let end = end_of("end", a.end_ref, a.end_x, a.end_y)?;
    let nothing = "nothing was dragged";
    let (tab, from, from_words) = landing(ctx, "start_ref", start, nothing).await?;
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
    mouse_move(ctx, tab, from.0, from.1, 0).await?;
    let held = Button::Left.bit();
    if let Some(w) = left_mouse(ctx, tab, "mousePressed", from, held, since).await? {
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
        if let Some(w) = left_mouse(ctx, tab, "mouseMoved", p, held, since).await? {
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
    if let Some(w) = left_mouse(ctx, tab, "mouseReleased", to, 0, since).await? {
        return Ok(Dragged::Dialog(w));
    }
    Ok(if data.is_some() {
        Dragged::Dropped
    } else {
        Dragged::Moved
    })
}

/// One left-button mouse event of the drag (`buttons`: those held after
/// it): the words of a dialog it opened, if it opened one.
async fn left_mouse(
    ctx: &ToolContext,
    tab: &Tab,
    kind: &str,
    (x, y): (f64, f64),
    buttons: u32,
    since: u64,
) -> Result<Option<String>> {
    let left = Button::Left.name();
    let event =
        json!({"type": kind, "x": x, "y": y, "button": left, "buttons": buttons, "clickCount": 1});
    let (_, dialog) =
        send_held(ctx, tab, "Input.dispatchMouseEvent", event, since, INPUT_MS).await?;
    Ok(dialog)
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
