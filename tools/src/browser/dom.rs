//! The page's DOM as the tools reach it: a ref resolved to a live node
//! (checked against the latest snapshot, the tab and the document shown),
//! handles to nodes and the calls made on them, words naming a node, and
//! the JavaScript functions the tools call on a node (each a snippet run
//! with the node as `this`).

use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::{
    Held, Tab, check, current, main_frame, send_to, snapshot::Element, with_memo,
};
use crate::error::{Result, ToolError};

/// The object group the tools' handles live in (released after each use).
pub(crate) const GROUP: &str = "computer-mcp-page-tools";

/// The element `raw` names, checked: a ref handed out by a snapshot of
/// the current tab, of the document it shows now, and still in it.
pub(crate) async fn resolve(
    ctx: &ToolContext,
    field: &str,
    raw: &str,
) -> Result<(Tab, Element, u64)> {
    let n = check::ref_number(field, raw)?;
    let (held, snaps) = with_memo(ctx, |m| (m.held.get(&n).cloned(), m.snaps));
    let Some(held) = held else {
        return Err(ToolError::Refused(if snaps == 0 {
            format!(
                "{field} {raw:?}: there is no snapshot yet; take browser_snapshot and use the refs it shows; nothing was done"
            )
        } else {
            format!(
                "{field} e{n} is no ref of any snapshot; take browser_snapshot to see the page's refs; nothing was done"
            )
        }));
    };
    let tab = current(ctx).await?;
    if tab.target != held.target {
        return Err(ToolError::Refused(format!(
            "{field} e{n} was taken in another tab; the current tab changed since: take a new snapshot with browser_snapshot; nothing was done"
        )));
    }
    let frame = main_frame(ctx, &tab).await?;
    if frame.loader != held.loader {
        return Err(ToolError::Refused(format!(
            "{field} e{n} was taken before the page navigated (it was {}, it now shows {}): take a new snapshot with browser_snapshot and use its refs; nothing was done",
            held.url, frame.url
        )));
    }
    let Some(backend) = locate(ctx, &tab, &held).await else {
        return Err(removed(field, n, &held.el));
    };
    let mut el = held.el;
    el.backend = backend;
    Ok((tab, el, n))
}

/// The backend id of the element a ref names, found by its number in the
/// world it was numbered in, if it is still in its document (a removed
/// one may live on detached, and is not found).
async fn locate(ctx: &ToolContext, tab: &Tab, held: &Held) -> Option<u64> {
    let r = send_to(
        ctx,
        tab,
        "Runtime.evaluate",
        json!({
            "expression": format!("globalThis.__computerMcpWorld ? __computerMcpWorld.find({}) : null", held.el.node),
            "contextId": held.world,
            "objectGroup": GROUP,
        }),
    )
    .await
    .ok()?;
    let obj = r["result"]["objectId"].as_str()?.to_string();
    let d = send_to(ctx, tab, "DOM.describeNode", json!({"objectId": obj})).await;
    release(ctx, tab).await;
    d.ok()?["node"]["backendNodeId"].as_u64()
}

/// A ref whose element left the page: refused, never retargeted.
fn removed(field: &str, n: u64, el: &Element) -> ToolError {
    ToolError::Refused(format!(
        "{field} e{n} ({}) was removed from the page; take a new snapshot with browser_snapshot; nothing was done",
        describe_el(el)
    ))
}

/// An element that left the page while a tool acted on it.
pub(crate) fn gone(n: u64, el: &Element) -> ToolError {
    removed("ref", n, el)
}

pub(crate) fn describe_el(el: &Element) -> String {
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
    let r = send_to(ctx, tab, "DOM.resolveNode", json!({"backendNodeId": backend, "objectGroup": GROUP}))
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
pub(crate) async fn call_on(
    ctx: &ToolContext,
    tab: &Tab,
    object: &str,
    function: &str,
    args: Vec<Value>,
) -> Result<Value> {
    let r = send_to(
        ctx,
        tab,
        "Runtime.callFunctionOn",
        json!({
            "objectId": object,
            "functionDeclaration": function,
            "arguments": args.into_iter().map(|a| json!({"value": a})).collect::<Vec<_>>(),
            "returnByValue": true,
        }),
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

pub(crate) async fn release(ctx: &ToolContext, tab: &Tab) {
    let _ = send_to(
        ctx,
        tab,
        "Runtime.releaseObjectGroup",
        json!({"objectGroup": GROUP}),
    )
    .await;
}

/// `<div id=x class=a.b>` for the node `backend`, for words.
pub(crate) async fn describe_node(ctx: &ToolContext, tab: &Tab, backend: u64) -> String {
    const F: &str = "function(){ const e = this.nodeType === 1 ? this : this.parentElement; if (!e) return String(this.nodeName).toLowerCase(); let s = '<' + e.tagName.toLowerCase(); if (e.id) s += ' id=' + e.id; if (typeof e.className === 'string' && e.className.trim()) s += ' class=' + e.className.trim().split(/\\s+/).slice(0, 3).join('.'); const t = (e.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 40); return s + '>' + (t ? ' \"' + t + '\"' : ''); }";
    let Ok(obj) = object(ctx, tab, backend, "the element").await else {
        let d = send_to(
            ctx,
            tab,
            "DOM.describeNode",
            json!({"backendNodeId": backend}),
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

/// Scroll the element `e<n>` into view; a node that is gone says so.
pub(crate) async fn scroll_into_view(
    ctx: &ToolContext,
    tab: &Tab,
    el: &Element,
    n: u64,
) -> Result<()> {
    node_call(ctx, tab, "DOM.scrollIntoViewIfNeeded", el.backend)
        .await
        .map(drop)
        .map_err(|_| gone(n, el))
}

/// Give the node the focus (the caller checks or words a refusal).
pub(crate) async fn focus(ctx: &ToolContext, tab: &Tab, backend: u64) -> Result<Value> {
    node_call(ctx, tab, "DOM.focus", backend).await
}

/// A DOM method whose one parameter is the node.
async fn node_call(ctx: &ToolContext, tab: &Tab, method: &str, backend: u64) -> Result<Value> {
    send_to(ctx, tab, method, json!({"backendNodeId": backend})).await
}

// ------------------------------------------------------- JS snippets

/// The focus is on the element, or inside it.
pub(crate) const HAS_FOCUS: &str = "function(){ const a = document.activeElement; return a === this || this.contains(a) || (this.shadowRoot && this.shadowRoot.activeElement !== null); }";

/// The field's value for words: null for a password field.
pub(crate) const VALUE_OF: &str = "function(){ if (this.type === 'password') return null; const v = ('value' in this) ? this.value : this.textContent; return String(v ?? ''); }";

pub(crate) const CLEAR: &str = "function(){ if ('value' in this) { this.value = ''; this.dispatchEvent(new Event('input', {bubbles: true})); return true; } if (this.isContentEditable) { this.textContent = ''; return true; } return false; }";

pub(crate) const SET_FORM: &str = r#"function(vals, flag, text){
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

/// On the node the wheel is over (`this`): the nearest area that scrolls
/// along the wheel's axis (`vertical`), or the page's; and the page's too.
pub(crate) const SCROLLER: &str = "function(vertical){
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

/// What the page says of the element: a file input or not, and its rules.
pub(crate) const INPUT_FACTS: &str = "function(){ const f = this.tagName === 'INPUT' && String(this.type).toLowerCase() === 'file'; return {file: f, multiple: f && this.multiple, disabled: !!this.disabled, accept: f ? (this.accept || '') : ''}; }";

/// The files the input holds now: [[name, size], ...].
pub(crate) const INPUT_FILES: &str =
    "function(){ return Array.from(this.files || []).map(f => [f.name, f.size]); }";
