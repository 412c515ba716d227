//! The mouse and the keys as the page tools use them: the viewport, what
//! the browser hits at a point, a ref's point scrolled into view, moves,
//! clicks and key presses (each stopping at a dialog it opens).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::dom::{describe_el, describe_node, gone, object, release, scroll_into_view};
use crate::browser::{INPUT_MS, Tab, keys, send, send_held, send_to, snapshot::Element};
use crate::error::{Result, ToolError};

/// The viewport in CSS pixels: width, height, and the page's scroll.
pub(crate) async fn viewport(ctx: &ToolContext, tab: &Tab) -> Result<(f64, f64, f64, f64)> {
    let m = send_to(ctx, tab, "Page.getLayoutMetrics", json!({})).await?;
    let v = &m["cssVisualViewport"];
    let w = v["clientWidth"].as_f64().unwrap_or(0.0);
    let h = v["clientHeight"].as_f64().unwrap_or(0.0);
    Ok((
        w,
        h,
        v["pageX"].as_f64().unwrap_or(0.0),
        v["pageY"].as_f64().unwrap_or(0.0),
    ))
}

/// The node the browser hits at a viewport point. `DOM.getNodeForLocation`
/// takes the point in the document, so the page's scroll (`px`, `py`) is
/// added.
pub(crate) async fn hit_at(
    ctx: &ToolContext,
    tab: &Tab,
    (x, y): (f64, f64),
    (px, py): (f64, f64),
) -> Result<Option<u64>> {
    let r = send_to(
        ctx,
        tab,
        "DOM.getNodeForLocation",
        json!({
            "x": (x + px).floor() as i64,
            "y": (y + py).floor() as i64,
            "includeUserAgentShadowDOM": false,
        }),
    )
    .await;
    match r {
        Ok(r) => Ok(r["backendNodeId"].as_u64()),
        // No node there (outside the document).
        Err(ToolError::Daemon { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Scroll the element into view and take the viewport point to act at,
/// checking the browser hits the element (or what is inside it) there.
pub(crate) async fn point_of(
    ctx: &ToolContext,
    tab: &Tab,
    el: &Element,
    n: u64,
    nothing: &str,
) -> Result<(f64, f64)> {
    point_in_view(ctx, tab, el, n, nothing, true).await
}

/// [`point_of`], scrolling the element into view first only when `scroll`
/// (a drag's end must be in view with its start, so it is not scrolled).
pub(crate) async fn point_in_view(
    ctx: &ToolContext,
    tab: &Tab,
    el: &Element,
    n: u64,
    nothing: &str,
    scroll: bool,
) -> Result<(f64, f64)> {
    let s = Some(tab.session.as_str());
    if scroll {
        scroll_into_view(ctx, tab, el, n).await?;
    }
    let d = describe_el(el);
    let shown = if scroll {
        format!("scrolled e{n} ({d}) into view")
    } else {
        format!("e{n} ({d}) was left where it is")
    };
    let q = send(
        ctx,
        s,
        "DOM.getContentQuads",
        json!({"backendNodeId": el.backend}),
        None,
    )
    .await
    .map_err(|_| gone(n, el))?;
    let (vw, vh, px, py) = viewport(ctx, tab).await?;
    // The largest part of its box inside the viewport.
    let mut best: Option<(f64, f64, f64)> = None;
    for quad in q["quads"].as_array().cloned().unwrap_or_default() {
        let p: Vec<f64> = quad
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if p.len() != 8 {
            continue;
        }
        let xs = [p[0], p[2], p[4], p[6]];
        let ys = [p[1], p[3], p[5], p[7]];
        let (x0, x1) = (
            xs.iter().cloned().fold(f64::MAX, f64::min).max(0.0),
            xs.iter().cloned().fold(f64::MIN, f64::max).min(vw),
        );
        let (y0, y1) = (
            ys.iter().cloned().fold(f64::MAX, f64::min).max(0.0),
            ys.iter().cloned().fold(f64::MIN, f64::max).min(vh),
        );
        let area = (x1 - x0).max(0.0) * (y1 - y0).max(0.0);
        if area >= 1.0 && best.is_none_or(|b| area > b.2) {
            best = Some(((x0 + x1) / 2.0, (y0 + y1) / 2.0, area));
        }
    }
    let Some((x, y, _)) = best else {
        return Err(ToolError::Refused(format!(
            "{shown}, but it has no box inside the viewport ({}): {nothing}",
            if scroll {
                "it is hidden, collapsed or of zero size"
            } else {
                "it is out of view, hidden or of zero size"
            }
        )));
    };
    let hit = hit_at(ctx, tab, (x, y), (px, py)).await?;
    let Some(hit) = hit else {
        return Err(ToolError::Refused(format!(
            "{shown}; nothing of the page is at its point ({x:.0}, {y:.0}): {nothing}"
        )));
    };
    if hit != el.backend {
        let target = object(ctx, tab, el.backend, &format!("e{n}")).await?;
        // A pseudo-element (::marker, ::before) has no handle: it is
        // named as what covers the point.
        let Ok(hit_obj) = object(ctx, tab, hit, "the element").await else {
            let what = describe_node(ctx, tab, hit).await;
            release(ctx, tab).await;
            return Err(ToolError::Refused(format!(
                "{shown}; the point ({x:.0}, {y:.0}) of its box is covered by {what}: {nothing} (close or move what covers it, then take a new snapshot)"
            )));
        };
        // Inside it (through shadow roots), or a label of it.
        let r = send(
            ctx,
            s,
            "Runtime.callFunctionOn",
            json!({
                "objectId": target,
                "functionDeclaration": "function(h){ for (let n = h; n; n = n.parentNode || n.host) { if (n === this) return true; } return !!(this.labels && Array.from(this.labels).some(l => l === h || l.contains(h))); }",
                "arguments": [{"objectId": hit_obj}],
                "returnByValue": true,
            }),
            None,
        )
        .await?;
        if r["result"]["value"] != true {
            let what = describe_node(ctx, tab, hit).await;
            release(ctx, tab).await;
            return Err(ToolError::Refused(format!(
                "{shown}; the point ({x:.0}, {y:.0}) of its box is covered by {what}: {nothing} (close or move what covers it, then take a new snapshot)"
            )));
        }
        release(ctx, tab).await;
    }
    Ok((x, y))
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Button {
    #[default]
    Left,
    Right,
    Middle,
}

impl Button {
    pub(super) fn name(self) -> &'static str {
        match self {
            Button::Left => "left",
            Button::Right => "right",
            Button::Middle => "middle",
        }
    }
    pub(super) fn bit(self) -> u32 {
        match self {
            Button::Left => 1,
            Button::Right => 2,
            Button::Middle => 4,
        }
    }
}

pub(crate) async fn mouse_move(
    ctx: &ToolContext,
    tab: &Tab,
    x: f64,
    y: f64,
    modifiers: u32,
) -> Result<()> {
    send_to(
        ctx,
        tab,
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": x, "y": y, "modifiers": modifiers}),
    )
    .await?;
    Ok(())
}

/// A click; the words of a dialog it opened (and that was closed).
pub(crate) async fn mouse_click(
    ctx: &ToolContext,
    tab: &Tab,
    (x, y): (f64, f64),
    button: Button,
    count: u32,
    modifiers: u32,
    since: u64,
) -> Result<Option<String>> {
    mouse_move(ctx, tab, x, y, modifiers).await?;
    for c in 1..=count {
        for (kind, buttons) in [("mousePressed", button.bit()), ("mouseReleased", 0)] {
            let (_, dialog) = send_held(
                ctx,
                tab,
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": button.name(), "buttons": buttons, "clickCount": c, "modifiers": modifiers}),
                since,
                INPUT_MS,
            )
            .await?;
            if dialog.is_some() {
                return Ok(dialog);
            }
        }
    }
    Ok(None)
}

/// "; <words>" for a dialog an action met.
pub(crate) fn dialog_words(d: &Option<String>) -> String {
    d.as_ref().map(|w| format!("; {w}")).unwrap_or_default()
}

/// Key presses; the words of a dialog one opened (the rest not sent).
pub(crate) async fn key_presses(
    ctx: &ToolContext,
    tab: &Tab,
    presses: &[keys::Press],
    repeat: u32,
    since: u64,
) -> Result<(usize, Option<String>)> {
    let total = presses.len() * repeat as usize;
    let mut sent = 0;
    for _ in 0..repeat {
        for p in presses {
            for e in p.events() {
                let (_, dialog) = send_held(ctx, tab, "Input.dispatchKeyEvent", e, since, INPUT_MS)
                    .await
                    .map_err(|e| {
                        ToolError::Refused(format!(
                            "{sent} of {total} presses were sent, then the browser refused: {e}"
                        ))
                    })?;
                if dialog.is_some() {
                    return Ok((sent + 1, dialog));
                }
            }
            sent += 1;
        }
    }
    Ok((sent, None))
}
