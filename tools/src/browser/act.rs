//! The tools that act on a page: `browser_click`, `browser_type`,
//! `browser_select`, `browser_hover`, `browser_press` by ref (or at a
//! point of the latest screenshot), and `browser_screenshot`.
//!
//! An action by ref is checked before it is done: the ref must be of the
//! latest snapshot, of this tab and of the document now shown; the element
//! is scrolled into view, its point taken from its box, and what the
//! browser hits at that point must be the element or inside it. Whatever
//! fails says what was confirmed up to there and that nothing was done.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    FOLLOW, INPUT_MS, ShotFrame, Tab, check, current, cursor, follow, followed_words, keys,
    main_frame, send, send_held, snapshot::Element, with_memo,
};
use crate::define::{hints, make_tool, with_structured};
use crate::desktop::image;
use crate::error::{Result, ToolError};
use crate::{ToolContext, ToolSettings};

/// The object group the tools' handles live in (released after each use).
const GROUP: &str = "computer-mcp-page-tools";

// ---------------------------------------------------------------- refs

/// The element `raw` names, checked: a ref of the latest snapshot, taken
/// of the current tab and of the document it shows now.
pub(crate) async fn resolve(
    ctx: &ToolContext,
    field: &str,
    raw: &str,
) -> Result<(Tab, Element, u64)> {
    let n = check::ref_number(field, raw)?;
    let Some(s) = with_memo(ctx, |m| m.latest.clone()) else {
        return Err(ToolError::Refused(format!(
            "{field} {raw:?}: there is no snapshot yet; take browser_snapshot and use the refs it shows; nothing was done"
        )));
    };
    let range = if s.next > s.first {
        format!("refs e{} to e{}", s.first, s.next - 1)
    } else {
        "no refs".into()
    };
    if n < s.first {
        return Err(ToolError::Refused(format!(
            "{field} e{n} is from an older snapshot than the latest (snapshot {}, {range}); a ref is never carried over to a newer snapshot: take a new snapshot with browser_snapshot and use its refs; nothing was done",
            s.n
        )));
    }
    let Some(el) = s.refs.get(&n).cloned() else {
        return Err(ToolError::Refused(format!(
            "{field} e{n} is no ref of any snapshot: the latest (snapshot {}) has {range}; take browser_snapshot to see the page's refs; nothing was done",
            s.n
        )));
    };
    let tab = current(ctx).await?;
    if tab.target != s.target {
        return Err(ToolError::Refused(format!(
            "{field} e{n} is of snapshot {}, taken in another tab; the current tab changed since: take a new snapshot with browser_snapshot; nothing was done",
            s.n
        )));
    }
    let frame = main_frame(ctx, &tab).await?;
    if frame.loader != s.loader {
        return Err(ToolError::Refused(format!(
            "{field} e{n} is of snapshot {}, taken before the page navigated (it was {}, it now shows {}): take a new snapshot with browser_snapshot and use its refs; nothing was done",
            s.n, s.url, frame.url
        )));
    }
    Ok((tab, el, n))
}

pub(super) fn gone(n: u64, el: &Element) -> ToolError {
    ToolError::Refused(format!(
        "e{n} ({}) is no longer in the page: it was removed or replaced since the snapshot was taken; take a new snapshot with browser_snapshot; nothing was done",
        describe_el(el)
    ))
}

pub(super) fn describe_el(el: &Element) -> String {
    if el.name.is_empty() {
        el.role.clone()
    } else {
        format!("{} {:?}", el.role, el.name)
    }
}

/// A handle on the element `backend` for Runtime calls.
pub(crate) async fn object(
    ctx: &ToolContext,
    tab: &Tab,
    backend: u64,
    raw: &str,
) -> Result<String> {
    let r = send(
        ctx,
        Some(&tab.session),
        "DOM.resolveNode",
        json!({"backendNodeId": backend, "objectGroup": GROUP}),
        None,
    )
    .await
    .map_err(|_| {
        ToolError::Refused(format!(
            "{raw} is no longer in the page: it was removed or replaced since the snapshot was taken; take a new snapshot with browser_snapshot; nothing was done"
        ))
    })?;
    r["object"]["objectId"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ToolError::Broken("the browser gave no handle on the element".into()))
}

/// Call `function` on the element (`this`), with `args` by value; its
/// value back.
pub(super) async fn call_on(
    ctx: &ToolContext,
    tab: &Tab,
    object: &str,
    function: &str,
    args: Vec<Value>,
) -> Result<Value> {
    let r = send(
        ctx,
        Some(&tab.session),
        "Runtime.callFunctionOn",
        json!({
            "objectId": object,
            "functionDeclaration": function,
            "arguments": args.into_iter().map(|a| json!({"value": a})).collect::<Vec<_>>(),
            "returnByValue": true,
        }),
        None,
    )
    .await?;
    if let Some(d) = r.get("exceptionDetails") {
        return Err(ToolError::Broken(format!(
            "the page refused the element call: {}",
            d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("an exception")
        )));
    }
    Ok(r["result"]["value"].clone())
}

pub(super) async fn release(ctx: &ToolContext, tab: &Tab) {
    let _ = send(
        ctx,
        Some(&tab.session),
        "Runtime.releaseObjectGroup",
        json!({"objectGroup": GROUP}),
        None,
    )
    .await;
}

/// `<div id=x class=a.b>` for the node `backend`, for words.
pub(super) async fn describe_node(ctx: &ToolContext, tab: &Tab, backend: u64) -> String {
    const F: &str = "function(){ const e = this.nodeType === 1 ? this : this.parentElement; if (!e) return String(this.nodeName).toLowerCase(); let s = '<' + e.tagName.toLowerCase(); if (e.id) s += ' id=' + e.id; if (typeof e.className === 'string' && e.className.trim()) s += ' class=' + e.className.trim().split(/\\s+/).slice(0, 3).join('.'); const t = (e.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 40); return s + '>' + (t ? ' \"' + t + '\"' : ''); }";
    let Ok(obj) = object(ctx, tab, backend, "the element").await else {
        let d = send(
            ctx,
            Some(&tab.session),
            "DOM.describeNode",
            json!({"backendNodeId": backend}),
            None,
        )
        .await;
        return match d
            .ok()
            .and_then(|d| d["node"]["nodeName"].as_str().map(str::to_lowercase))
        {
            Some(name) => format!("<{name}>"),
            None => "an element".into(),
        };
    };
    call_on(ctx, tab, &obj, F, vec![])
        .await
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "an element".into())
}

/// The viewport in CSS pixels: width, height, and the page's scroll.
pub(super) async fn viewport(ctx: &ToolContext, tab: &Tab) -> Result<(f64, f64, f64, f64)> {
    let m = send(
        ctx,
        Some(&tab.session),
        "Page.getLayoutMetrics",
        json!({}),
        None,
    )
    .await?;
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
pub(super) async fn hit_at(
    ctx: &ToolContext,
    tab: &Tab,
    (x, y): (f64, f64),
    (px, py): (f64, f64),
) -> Result<Option<u64>> {
    let r = send(
        ctx,
        Some(&tab.session),
        "DOM.getNodeForLocation",
        json!({
            "x": (x + px).floor() as i64,
            "y": (y + py).floor() as i64,
            "includeUserAgentShadowDOM": false,
        }),
        None,
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
pub(super) async fn point_of(
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
pub(super) async fn point_in_view(
    ctx: &ToolContext,
    tab: &Tab,
    el: &Element,
    n: u64,
    nothing: &str,
    scroll: bool,
) -> Result<(f64, f64)> {
    let s = Some(tab.session.as_str());
    if scroll {
        send(
            ctx,
            s,
            "DOM.scrollIntoViewIfNeeded",
            json!({"backendNodeId": el.backend}),
            None,
        )
        .await
        .map_err(|_| gone(n, el))?;
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

pub(super) async fn mouse_move(
    ctx: &ToolContext,
    tab: &Tab,
    x: f64,
    y: f64,
    modifiers: u32,
) -> Result<()> {
    send(
        ctx,
        Some(&tab.session),
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": x, "y": y, "modifiers": modifiers}),
        None,
    )
    .await?;
    Ok(())
}

/// A click; the words of a dialog it opened (and that was closed).
pub(super) async fn mouse_click(
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
pub(super) fn dialog_words(d: &Option<String>) -> String {
    d.as_ref().map(|w| format!("; {w}")).unwrap_or_default()
}

/// Key presses; the words of a dialog one opened (the rest not sent).
async fn key_presses(
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

// ------------------------------------------------------------- targets

/// `target`: a ref as it is ("e12", as Playwright's MCP tools take it), or
/// Anthropic's browser tool's object (an element by ref, or a point).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Target {
    /// A ref from the latest snapshot.
    Plain(String),
    Typed(Typed),
}

/// Listed inline and flat: both forms in one object schema, so the five
/// tools that take a target do not each carry two definitions (about 700
/// bytes apiece of every `tools/list`). Deserializing stays exact: a typed
/// target with a field of the other form is refused.
impl JsonSchema for Target {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Target".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {
                        "type": {"enum": ["ref", "coordinate"]},
                        "ref": {"type": "string"},
                        "x": {"type": "integer"},
                        "y": {"type": "integer"}
                    },
                    "required": ["type"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

/// Anthropic's form of a target.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Typed {
    /// An element by its ref.
    Ref {
        #[serde(rename = "ref")]
        element: String,
    },
    /// A point in the latest screenshot's pixels.
    Coordinate { x: i64, y: i64 },
}

/// Where an action lands: a ref, or a point of the latest screenshot.
pub(super) enum Where {
    Ref(String),
    Point(i64, i64),
}

pub(super) fn where_of(
    element: Option<String>,
    x: Option<i64>,
    y: Option<i64>,
    target: Option<Target>,
) -> Result<Where> {
    match (element, x, y, target) {
        (Some(r), None, None, None) => Ok(Where::Ref(r)),
        (None, Some(x), Some(y), None) => Ok(Where::Point(x, y)),
        (None, None, None, Some(Target::Plain(element)))
        | (None, None, None, Some(Target::Typed(Typed::Ref { element }))) => Ok(Where::Ref(element)),
        (None, None, None, Some(Target::Typed(Typed::Coordinate { x, y }))) => {
            Ok(Where::Point(x, y))
        }
        (None, Some(_), None, None) | (None, None, Some(_), None) => Err(ToolError::Invalid(
            "give both x and y (a point of the latest screenshot); nothing was done".into(),
        )),
        (None, None, None, None) => Err(ToolError::Invalid(
            "give ref (from browser_snapshot), or x and y (in the latest screenshot's pixels); nothing was done".into(),
        )),
        _ => Err(ToolError::Invalid(
            "give one of ref, x and y, or target; nothing was done".into(),
        )),
    }
}

/// The frame points are in: the latest screenshot of this tab, or the
/// space a screenshot would have now.
pub(super) async fn frame_for_points(ctx: &ToolContext, tab: &Tab) -> Result<ShotFrame> {
    let last = with_memo(ctx, |m| m.frame.clone());
    if let Some((f, _)) = last.filter(|(_, t)| *t == tab.target) {
        return Ok(f);
    }
    let (w, h, _, _) = viewport(ctx, tab).await?;
    let (iw, ih) = image::fit(
        w.round() as u32,
        h.round() as u32,
        ctx.settings.screenshot_max,
        None,
        false,
    );
    Ok(ShotFrame {
        n: 0,
        width: iw,
        height: ih,
        css_width: w,
        css_height: h,
    })
}

// ---------------------------------------------------------------- click

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClickArgs {
    /// The element's ref from the latest snapshot (e12).
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record (the ref decides what is acted on).
    #[serde(default)]
    pub element: Option<String>,
    /// Instead of ref: a point in the latest browser_screenshot's pixels.
    #[serde(default)]
    pub x: Option<i64>,
    #[serde(default)]
    pub y: Option<i64>,
    /// Instead of ref or x, y: "e12", {"type": "ref", "ref": "e12"} or {"type": "coordinate", "x": 10, "y": 20}.
    #[serde(default)]
    pub target: Option<Target>,
    /// left (default), right or middle.
    #[serde(default)]
    pub button: Option<Button>,
    /// 2 for a double click, 3 for a triple click (default 1).
    #[serde(default)]
    pub click_count: Option<u32>,
    /// Keys held while clicking: "shift", "ctrl+shift", "cmd".
    #[serde(default)]
    pub modifiers: Option<String>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ActOutput {
    /// What was done, in words.
    pub done: String,
    /// The viewport point acted at, in CSS pixels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<[f64; 2]>,
    /// The page navigated because of the action.
    pub navigated: bool,
}

pub(super) fn click_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<ClickArgs, ActOutput>(
        name,
        "Click an element by its ref from the latest browser_snapshot (it is scrolled into view and clicked at the middle of its box, after checking nothing covers it), or at x, y in the latest browser_screenshot's pixels. Waits briefly for a navigation the click starts. A ref from an older snapshot, or from before the page navigated, is refused: take a new snapshot.".to_string(),
        hints("Click", false, true, false, false),
    )
}

pub(super) fn act_done(text: String, out: &ActOutput) -> CallToolResult {
    with_structured(CallToolResult::success(vec![ContentBlock::text(text)]), out)
}

pub(super) async fn click(ctx: &ToolContext, a: ClickArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let button = a.button.unwrap_or_default();
    let count = a.click_count.unwrap_or(1);
    if !(1..=3).contains(&count) {
        return Err(ToolError::Invalid(format!(
            "click_count is {count}; give 1, 2 or 3; nothing was done"
        )));
    }
    let modifiers = match &a.modifiers {
        Some(m) => keys::modifier_bits("modifiers", m)?,
        None => 0,
    };
    let wh = where_of(a.reference, a.x, a.y, a.target)?;
    let (tab, point, what) = match wh {
        Where::Ref(raw) => {
            let (tab, el, n) = resolve(ctx, "ref", &raw).await?;
            let p = point_of(ctx, &tab, &el, n, "nothing was clicked").await?;
            (tab, p, format!("e{n} ({})", describe_el(&el)))
        }
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

// ---------------------------------------------------------------- hover

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HoverArgs {
    /// The element's ref from the latest snapshot.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record (the ref decides what is acted on).
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
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

pub(super) fn hover_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<HoverArgs, ActOutput>(
        name,
        "Move the pointer over an element by ref (scrolled into view, checked uncovered) or to x, y of the latest screenshot, without clicking: opens hover menus and tooltips. Take a snapshot after to see what appeared.".to_string(),
        hints("Hover", false, false, true, false),
    )
}

pub(super) async fn hover(ctx: &ToolContext, a: HoverArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
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

// ----------------------------------------------------------------- type

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeArgs {
    /// The field's ref from the latest snapshot; none types where the focus is.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record (the ref decides what is acted on).
    #[serde(default)]
    pub element: Option<String>,
    /// The text to type, as it is (at most 64 KiB).
    pub text: String,
    /// Empty the field first.
    #[serde(default)]
    pub clear: Option<bool>,
    /// Press Enter after (submits most forms).
    #[serde(default)]
    pub submit: Option<bool>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

pub(super) fn type_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<TypeArgs, ActOutput>(
        name,
        "Type text into a field by its ref from the latest snapshot (it is scrolled into view and focused first; clear empties it first; submit presses Enter after), or where the focus is when no ref is given. What is typed into a password field is never shown back.".to_string(),
        hints("Type", false, true, false, false),
    )
}

/// The focus is on the element, or inside it.
const HAS_FOCUS: &str = "function(){ const a = document.activeElement; return a === this || this.contains(a) || (this.shadowRoot && this.shadowRoot.activeElement !== null); }";

/// The field's value for words: null for a password field.
const VALUE_OF: &str = "function(){ if (this.type === 'password') return null; const v = ('value' in this) ? this.value : this.textContent; return String(v ?? ''); }";

const CLEAR: &str = "function(){ if ('value' in this) { this.value = ''; this.dispatchEvent(new Event('input', {bubbles: true})); return true; } if (this.isContentEditable) { this.textContent = ''; return true; } return false; }";

pub(super) async fn type_text(ctx: &ToolContext, a: TypeArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    check::bounded("text", &a.text, check::MAX_TYPE_BYTES)?;
    let chars = a.text.chars().count();
    let (tab, into, obj) = match &a.reference {
        Some(raw) => {
            let (tab, el, n) = resolve(ctx, "ref", raw).await?;
            send(
                ctx,
                Some(&tab.session),
                "DOM.scrollIntoViewIfNeeded",
                json!({"backendNodeId": el.backend}),
                None,
            )
            .await
            .map_err(|_| gone(n, &el))?;
            let _ = send(
                ctx,
                Some(&tab.session),
                "DOM.focus",
                json!({"backendNodeId": el.backend}),
                None,
            )
            .await;
            let obj = object(ctx, &tab, el.backend, &format!("e{n}")).await?;
            if call_on(ctx, &tab, &obj, HAS_FOCUS, vec![]).await? != true {
                release(ctx, &tab).await;
                return Err(ToolError::Refused(format!(
                    "scrolled e{n} ({}) into view, but it did not take the focus (it is disabled, read-only or not a field): nothing was typed",
                    describe_el(&el)
                )));
            }
            if a.clear == Some(true) && call_on(ctx, &tab, &obj, CLEAR, vec![]).await? != true {
                release(ctx, &tab).await;
                return Err(ToolError::Refused(format!(
                    "focused e{n} ({}), but it holds no value to clear: nothing was typed",
                    describe_el(&el)
                )));
            }
            (tab, Some((n, el)), Some(obj))
        }
        None => (current(ctx).await?, None, None),
    };
    if !a.text.is_empty() {
        send(
            ctx,
            Some(&tab.session),
            "Input.insertText",
            json!({"text": a.text}),
            None,
        )
        .await?;
    }
    let mut text = match &into {
        Some((n, el)) => format!("typed {chars} characters into e{n} ({})", describe_el(el)),
        None => format!("typed {chars} characters where the focus is"),
    };
    if let (Some((_, el)), Some(obj)) = (&into, &obj) {
        let v = call_on(ctx, &tab, obj, VALUE_OF, vec![]).await?;
        match v.as_str() {
            Some(v) if !el.password => {
                let shown: String = v.chars().take(200).collect();
                text.push_str(&format!("; it now holds {shown:?}"));
            }
            _ => text.push_str("; it is a password field: what it holds is not shown"),
        }
        release(ctx, &tab).await;
    }
    let mut navigated = false;
    if a.submit == Some(true) {
        let before = main_frame(ctx, &tab).await?;
        let since = cursor(ctx, &tab.session).await?;
        let enter = keys::parse("submit", "Enter")?;
        let (_, dialog) = key_presses(ctx, &tab, &enter, 1, since).await?;
        let f = follow(ctx, &tab, &before, since, FOLLOW).await?;
        navigated = f.is_some();
        text.push_str(&format!(
            "; pressed Enter{}{}",
            dialog_words(&dialog),
            followed_words(&f)
        ));
    }
    let out = ActOutput {
        done: text.clone(),
        at: None,
        navigated,
    };
    Ok(act_done(text, &out))
}

// --------------------------------------------------------------- select

/// A form value: text, a number, or true/false for a checkbox.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FormValue {
    Flag(bool),
    Number(f64),
    Text(String),
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectArgs {
    /// The select's (or field's) ref from the latest snapshot.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record (the ref decides what is acted on).
    #[serde(default)]
    pub element: Option<String>,
    /// Instead of ref: "e12" or {"type": "ref", "ref": "e12"}.
    #[serde(default)]
    pub target: Option<Target>,
    /// The options to pick, by value or by their text (one for a plain select).
    #[serde(default)]
    pub values: Option<Vec<String>>,
    /// Instead of values: one option; true or false to check or uncheck a checkbox; text for a text field.
    #[serde(default)]
    pub value: Option<FormValue>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

/// The options to pick at most.
pub const MAX_VALUES: usize = 100;

pub(super) fn select_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<SelectArgs, ActOutput>(
        name,
        "Pick options of a <select> by its ref (values: the options' values or texts, several for a multiple select), or set a form field's value directly (value: true/false checks a checkbox or radio, text sets a text field). Fires input and change as a user's choice would.".to_string(),
        hints("Select", false, true, true, false),
    )
}

const SET_FORM: &str = r#"function(vals, flag, text){
  const tag = this.tagName ? this.tagName.toLowerCase() : String(this.nodeName);
  if (this.disabled) return {error: 'is disabled'};
  const fire = () => { this.dispatchEvent(new Event('input', {bubbles: true})); this.dispatchEvent(new Event('change', {bubbles: true})); };
  if (flag !== null) {
    if (!(tag === 'input' && (this.type === 'checkbox' || this.type === 'radio'))) return {error: 'is a <' + tag + '>, not a checkbox or radio: true/false set only those'};
    if (this.checked !== flag) this.click();
    return {done: (this.checked ? 'checked' : 'unchecked')};
  }
  if (text !== null && tag !== 'select') {
    if (!('value' in this) || tag === 'button') return {error: 'is a <' + tag + '>, which holds no value'};
    this.focus(); this.value = text; fire();
    return {done: 'set', password: this.type === 'password'};
  }
  if (tag !== 'select') return {error: 'is a <' + tag + '>, not a <select>: type into it with browser_type'};
  if (text !== null) vals = [text];
  if (!this.multiple && vals.length !== 1) return {error: 'is a plain select: give exactly one value'};
  const opts = Array.from(this.options);
  const label = o => (o.label || o.text || '').trim();
  const found = vals.map(v => opts.find(o => o.value === v) || opts.find(o => label(o) === v) || null);
  const missing = vals.filter((v, i) => !found[i]);
  if (missing.length) return {missing: missing, options: opts.slice(0, 50).map(o => label(o) + (o.value !== label(o) ? ' (value ' + o.value + ')' : ''))};
  for (const o of opts) o.selected = found.includes(o);
  fire();
  return {selected: opts.filter(o => o.selected).map(label)};
}"#;

pub(super) async fn select(ctx: &ToolContext, a: SelectArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let raw = match (a.reference, a.target) {
        (Some(r), None)
        | (None, Some(Target::Plain(r)))
        | (None, Some(Target::Typed(Typed::Ref { element: r }))) => r,
        (None, Some(Target::Typed(Typed::Coordinate { .. }))) => {
            return Err(ToolError::Invalid(
                "target is a coordinate; a form value is set on an element: give its ref; nothing was done".into(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ToolError::Invalid(
                "give ref or target, not both; nothing was done".into(),
            ));
        }
        (None, None) => {
            return Err(ToolError::Invalid(
                "ref is missing: give the select's ref from browser_snapshot; nothing was done"
                    .into(),
            ));
        }
    };
    let (vals, flag, text): (Vec<String>, Option<bool>, Option<String>) = match (a.values, a.value)
    {
        (Some(v), None) => {
            if v.is_empty() || v.len() > MAX_VALUES {
                return Err(ToolError::Invalid(format!(
                    "values holds {} entries; give 1 to {MAX_VALUES}; nothing was done",
                    v.len()
                )));
            }
            (v, None, None)
        }
        (None, Some(FormValue::Flag(b))) => (vec![], Some(b), None),
        (None, Some(FormValue::Number(n))) => (vec![], None, Some(n.to_string())),
        (None, Some(FormValue::Text(t))) => {
            check::bounded("value", &t, check::MAX_TYPE_BYTES)?;
            (vec![], None, Some(t))
        }
        (Some(_), Some(_)) => {
            return Err(ToolError::Invalid(
                "give values or value, not both; nothing was done".into(),
            ));
        }
        (None, None) => {
            return Err(ToolError::Invalid(
                "values is missing: give the options to pick (their values or texts); nothing was done".into(),
            ));
        }
    };
    let (tab, el, n) = resolve(ctx, "ref", &raw).await?;
    send(
        ctx,
        Some(&tab.session),
        "DOM.scrollIntoViewIfNeeded",
        json!({"backendNodeId": el.backend}),
        None,
    )
    .await
    .map_err(|_| gone(n, &el))?;
    let obj = object(ctx, &tab, el.backend, &format!("e{n}")).await?;
    // A select whose change handler navigates is followed like a click.
    let before = main_frame(ctx, &tab).await?;
    let since = cursor(ctx, &tab.session).await?;
    let r = call_on(
        ctx,
        &tab,
        &obj,
        SET_FORM,
        vec![json!(vals), json!(flag), json!(text)],
    )
    .await;
    release(ctx, &tab).await;
    let r = r?;
    let who = format!("e{n} ({})", describe_el(&el));
    if let Some(e) = r["error"].as_str() {
        return Err(ToolError::Refused(format!(
            "{who} {e}; nothing was changed"
        )));
    }
    if let Some(m) = r["missing"].as_array() {
        let missing: Vec<String> = m
            .iter()
            .filter_map(|v| v.as_str().map(|s| format!("{s:?}")))
            .collect();
        let opts: Vec<String> = r["options"]
            .as_array()
            .map(|o| {
                o.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        return Err(ToolError::Refused(format!(
            "{who} has no option {}; its options are: {}; nothing was changed",
            missing.join(", "),
            opts.join("; ")
        )));
    }
    let text = if let Some(sel) = r["selected"].as_array() {
        let s: Vec<String> = sel
            .iter()
            .filter_map(|v| v.as_str().map(|s| format!("{s:?}")))
            .collect();
        format!("{who} now has {} selected", s.join(", "))
    } else if r["password"] == true || el.password {
        format!("{who} was set (a password field: its value is not shown)")
    } else if let Some(d) = r["done"].as_str() {
        match (d, &text) {
            ("set", Some(t)) => format!(
                "{who} was set to {:?}",
                t.chars().take(200).collect::<String>()
            ),
            _ => format!("{who} is now {d}"),
        }
    } else {
        format!("{who} was set")
    };
    let f = follow(ctx, &tab, &before, since, FOLLOW).await?;
    let text = format!("{text}{}", followed_words(&f));
    let out = ActOutput {
        done: text.clone(),
        at: None,
        navigated: f.is_some(),
    };
    Ok(act_done(text, &out))
}

// ---------------------------------------------------------------- press

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PressArgs {
    /// The key or chord: Enter, Tab, Escape, ArrowDown, ctrl+a, shift+Tab; several separated by spaces ("Backspace Backspace").
    #[serde(default)]
    pub key: Option<String>,
    /// The same as key (the name Anthropic's key action uses).
    #[serde(default)]
    pub text: Option<String>,
    /// Focus this element (a ref from the latest snapshot) first.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A few words naming the element, for the record (the ref decides what is acted on).
    #[serde(default)]
    pub element: Option<String>,
    /// Press it this many times, 1 to 100 (default 1).
    #[serde(default)]
    pub repeat: Option<u32>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

pub(super) fn press_tool(name: &'static str, _s: &ToolSettings) -> Tool {
    make_tool::<PressArgs, ActOutput>(
        name,
        format!(
            "Press keys in the page: a key name or chord (Enter, Tab, Escape, ArrowDown, PageDown, ctrl+a, shift+Tab), several separated by spaces, at most {} presses; ref focuses that element first, else they go where the focus is. To type text use browser_type.",
            keys::MAX_PRESSES
        ),
        hints("Press keys", false, true, false, false),
    )
}

pub(super) async fn press(ctx: &ToolContext, a: PressArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    let (field, keys_text) = match (a.key, a.text) {
        (Some(k), None) => ("key", k),
        (None, Some(t)) => ("text", t),
        (Some(_), Some(_)) => {
            return Err(ToolError::Invalid(
                "give key or text, not both; nothing was pressed".into(),
            ));
        }
        (None, None) => {
            return Err(ToolError::Invalid(
                "key is missing: give a key such as Enter, Tab or ctrl+a; nothing was pressed"
                    .into(),
            ));
        }
    };
    let repeat = a.repeat.unwrap_or(1);
    let presses = keys::parse(field, &keys_text)?;
    if repeat == 0 || presses.len() * repeat as usize > keys::MAX_PRESSES {
        return Err(ToolError::Invalid(format!(
            "repeat is {repeat} for {} presses; give 1 or more, at most {} presses in all; nothing was pressed",
            presses.len(),
            keys::MAX_PRESSES
        )));
    }
    let (tab, on) = match &a.reference {
        Some(raw) => {
            let (tab, el, n) = resolve(ctx, "ref", raw).await?;
            send(
                ctx,
                Some(&tab.session),
                "DOM.scrollIntoViewIfNeeded",
                json!({"backendNodeId": el.backend}),
                None,
            )
            .await
            .map_err(|_| gone(n, &el))?;
            send(
                ctx,
                Some(&tab.session),
                "DOM.focus",
                json!({"backendNodeId": el.backend}),
                None,
            )
            .await
            .map_err(|_| {
                ToolError::Refused(format!(
                    "scrolled e{n} ({}) into view, but it cannot take the focus: nothing was pressed",
                    describe_el(&el)
                ))
            })?;
            (tab, format!(" in e{n} ({})", describe_el(&el)))
        }
        None => (current(ctx).await?, String::new()),
    };
    let before = main_frame(ctx, &tab).await?;
    let since = cursor(ctx, &tab.session).await?;
    let (_, dialog) = key_presses(ctx, &tab, &presses, repeat, since).await?;
    let f = follow(ctx, &tab, &before, since, FOLLOW).await?;
    let text = format!(
        "pressed {}{}{on}{}{}",
        keys_text.trim(),
        if repeat > 1 {
            format!(" {repeat} times")
        } else {
            String::new()
        },
        dialog_words(&dialog),
        followed_words(&f)
    );
    let out = ActOutput {
        done: text.clone(),
        at: None,
        navigated: f.is_some(),
    };
    Ok(act_done(text, &out))
}

// ----------------------------------------------------------- screenshot

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotArgs {
    /// At most this many pixels wide (saves context).
    #[serde(default)]
    pub max_width: Option<u32>,
    /// The tab to act in, a tab_id from browser_tabs list (it becomes the current tab); default the current tab.
    #[serde(default)]
    pub tab_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ShotOutput {
    /// The frame: x, y you give browser_click and browser_hover are in its pixels.
    pub frame: String,
    pub width: u32,
    pub height: u32,
    /// Image pixels per CSS pixel of the viewport.
    pub scale: f64,
    pub viewport_width: f64,
    pub viewport_height: f64,
}

pub(super) fn screenshot_tool(name: &'static str, s: &ToolSettings) -> Tool {
    make_tool::<ScreenshotArgs, ShotOutput>(
        name,
        format!(
            "See the current tab's viewport: a PNG fit to {}x{}, and its frame id. x, y given to browser_click and browser_hover are in this image's pixels. Prefer browser_snapshot to read a page; take a screenshot for what only pixels show.",
            s.screenshot_max.0, s.screenshot_max.1
        ),
        hints("Browser screenshot", true, false, false, false),
    )
}

/// A PNG's size, from its header.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[..8] != b"\x89PNG\r\n\x1a\n" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

pub(super) async fn screenshot(ctx: &ToolContext, a: ScreenshotArgs) -> Result<CallToolResult> {
    super::use_tab(ctx, a.tab_id.as_deref()).await?;
    if let Some(w) = a.max_width
        && w < crate::desktop::MIN_MAX_WIDTH
    {
        return Err(ToolError::Invalid(format!(
            "max_width is {w}; give at least {} pixels",
            crate::desktop::MIN_MAX_WIDTH
        )));
    }
    let tab = current(ctx).await?;
    let (vw, vh, px, py) = viewport(ctx, &tab).await?;
    let (w, _) = image::fit(
        vw.round().max(1.0) as u32,
        vh.round().max(1.0) as u32,
        ctx.settings.screenshot_max,
        a.max_width,
        false,
    );
    let scale = f64::from(w) / vw.max(1.0);
    let mut params = json!({"format": "png"});
    if (w as f64) < vw.round() {
        // The browser scales the viewport's region itself.
        params["clip"] = json!({"x": px, "y": py, "width": vw, "height": vh, "scale": scale});
    }
    let r = send(
        ctx,
        Some(&tab.session),
        "Page.captureScreenshot",
        params,
        None,
    )
    .await?;
    let data = r["data"].as_str().unwrap_or("");
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| {
            ToolError::Broken(format!("the browser's screenshot could not be read: {e}"))
        })?;
    let (iw, ih) = png_size(&png)
        .ok_or_else(|| ToolError::Broken("the browser's screenshot is no PNG".into()))?;
    let frame = with_memo(ctx, |m| {
        m.shots += 1;
        let f = ShotFrame {
            n: m.shots,
            width: iw,
            height: ih,
            css_width: vw,
            css_height: vh,
        };
        m.frame = Some((f, tab.target.clone()));
        f
    });
    let out = ShotOutput {
        frame: frame.id(),
        width: iw,
        height: ih,
        scale: f64::from(iw) / vw.max(1.0),
        viewport_width: vw,
        viewport_height: vh,
    };
    let text = format!(
        "frame {}: {iw}x{ih} image of the {vw:.0}x{vh:.0} viewport (scale {:.3}); give browser_click x, y in this image's pixels",
        out.frame, out.scale
    );
    let blocks = vec![
        ContentBlock::image(data.to_string(), "image/png".to_string()),
        ContentBlock::text(text),
    ];
    Ok(with_structured(CallToolResult::success(blocks), &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members of Anthropic's browser toolset that name a field
    /// another way decode to ours: `text` for press and eval,
    /// `scroll_direction` for scroll; a misspelt field is still refused.
    #[test]
    fn the_browser_toolsets_field_names_are_taken() {
        let press: PressArgs =
            serde_json::from_value(json!({"text": "ctrl+a", "tab_id": "t1"})).unwrap();
        assert_eq!((press.key, press.text.as_deref()), (None, Some("ctrl+a")));
        let eval: super::super::page::EvalArgs =
            serde_json::from_value(json!({"text": "document.title"})).unwrap();
        assert_eq!(eval.text.as_deref(), Some("document.title"));
        let scroll: super::super::gesture::ScrollArgs =
            serde_json::from_value(json!({"scroll_direction": "down", "amount": 300})).unwrap();
        assert_eq!(
            scroll.direction,
            Some(super::super::gesture::Direction::Down)
        );
        assert_eq!(scroll.amount, Some(300));
        let wrong = serde_json::from_value::<super::super::gesture::ScrollArgs>(
            json!({"scroll_dir": "down"}),
        )
        .unwrap_err();
        assert!(wrong.to_string().contains("scroll_dir"), "{wrong}");
    }

    /// The flat listed schema takes both forms; decoding stays exact.
    #[test]
    fn a_target_is_a_ref_or_one_typed_form_and_nothing_mixed() {
        let t = |v: Value| serde_json::from_value::<Target>(v);
        assert!(matches!(t(json!("e12")), Ok(Target::Plain(r)) if r == "e12"));
        assert!(matches!(
            t(json!({"type": "ref", "ref": "e3"})),
            Ok(Target::Typed(Typed::Ref { element })) if element == "e3"
        ));
        assert!(matches!(
            t(json!({"type": "coordinate", "x": 4, "y": 5})),
            Ok(Target::Typed(Typed::Coordinate { x: 4, y: 5 }))
        ));
        for bad in [
            json!({"type": "ref", "ref": "e3", "x": 1}),
            json!({"type": "coordinate", "x": 4}),
            json!({"type": "point", "x": 4, "y": 5}),
            json!({"ref": "e3"}),
            json!(7),
        ] {
            assert!(t(bad.clone()).is_err(), "{bad} was taken as a target");
        }
        let schema = serde_json::to_value(schemars::schema_for!(Target)).unwrap();
        assert!(schema.get("$defs").is_none(), "{schema}");
    }

    #[test]
    fn a_png_header_gives_its_size() {
        let mut h = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        h.extend_from_slice(&640u32.to_be_bytes());
        h.extend_from_slice(&360u32.to_be_bytes());
        assert_eq!(png_size(&h), Some((640, 360)));
        assert_eq!(png_size(b"GIF89a"), None);
    }

    #[test]
    fn one_place_to_act_is_taken() {
        assert!(matches!(
            where_of(Some("e1".into()), None, None, None),
            Ok(Where::Ref(_))
        ));
        assert!(matches!(
            where_of(None, None, None, Some(Target::Plain("e7".into()))),
            Ok(Where::Ref(r)) if r == "e7"
        ));
        assert!(matches!(
            where_of(None, Some(1), Some(2), None),
            Ok(Where::Point(1, 2))
        ));
        assert!(matches!(
            where_of(
                None,
                None,
                None,
                Some(Target::Typed(Typed::Coordinate { x: 3, y: 4 }))
            ),
            Ok(Where::Point(3, 4))
        ));
        let e = |r: Result<Where>| match r {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        assert!(e(where_of(None, Some(1), None, None)).starts_with("give both x and y"));
        assert!(e(where_of(None, None, None, None)).starts_with("give ref"));
        assert!(e(where_of(Some("e1".into()), Some(1), Some(1), None)).starts_with("give one of"));
    }
}
