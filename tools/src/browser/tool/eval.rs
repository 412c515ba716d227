//! `browser_eval`: run JavaScript in the page and give back its value.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use super::console::MAX_ENTRY_CHARS;
use crate::ToolContext;
use crate::browser::dom::{object, release, resolve};
use crate::browser::target::target_args;
use crate::browser::tool::{budget, chars_cut};
use crate::browser::{Tab, check, current, cursor, send_held};
use crate::define::done;
use crate::error::{Result, ToolError};

/// `browser_eval`'s `timeout_ms` when none is given, and at most.
pub const EVAL_DEFAULT_MS: u64 = 10_000;
pub const EVAL_MAX_MS: u64 = 60_000;

target_args! {
    pub struct EvalArgs {
        /// JavaScript evaluated in the page; its last expression's value is the answer (a promise is awaited). At most 64 KiB.
        pub expression: Option<String>,
        /// The same as expression (the name Anthropic's javascript_exec uses).
        pub text: Option<String>,
        /// How long it may run, 100 to 60000 ms (default 10000).
        pub timeout_ms: Option<u64>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct EvalOutput {
    /// The value's JavaScript type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The value as JSON, when it fit the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The JSON was cut to fit.
    pub cut: bool,
}

pub(crate) async fn eval(ctx: &ToolContext, a: EvalArgs) -> Result<CallToolResult> {
    let (field, expr) = check::field_or_text(
        "expression",
        a.expression,
        a.text,
        "nothing was run",
        "expression is missing: give the JavaScript to run",
    )?;
    check::bounded(field, &expr, check::MAX_EXPRESSION_BYTES)?;
    let ms = a.timeout_ms.unwrap_or(EVAL_DEFAULT_MS);
    if !(100..=EVAL_MAX_MS).contains(&ms) {
        return Err(ToolError::Invalid(format!(
            "timeout_ms is {ms}; give 100 to {EVAL_MAX_MS}; nothing was run"
        )));
    }
    let tab = current(ctx).await?;
    let params = json!({
        "expression": expr,
        "returnByValue": true,
        "awaitPromise": true,
        "userGesture": true,
        "timeout": ms,
    });
    run(ctx, &tab, field, "Runtime.evaluate", params, ms).await
}

/// Playwright's `browser_evaluate`: `function` is a function's source,
/// called with no argument, or with the element `target` names (a ref).
pub(crate) async fn eval_function(
    ctx: &ToolContext,
    field: &str,
    function: &str,
    target: Option<&str>,
) -> Result<CallToolResult> {
    check::bounded(field, function, check::MAX_EXPRESSION_BYTES)?;
    let Some(raw) = target else {
        let tab = current(ctx).await?;
        let params = json!({
            "expression": format!("({function})()"),
            "returnByValue": true,
            "awaitPromise": true,
            "userGesture": true,
            "timeout": EVAL_DEFAULT_MS,
        });
        return run(
            ctx,
            &tab,
            field,
            "Runtime.evaluate",
            params,
            EVAL_DEFAULT_MS,
        )
        .await;
    };
    let (tab, el, n) = resolve(ctx, "target", raw).await?;
    let obj = object(ctx, &tab, el.backend, &format!("e{n}")).await?;
    let params = json!({
        "objectId": obj,
        "functionDeclaration": format!("function() {{ return ({function})(this); }}"),
        "returnByValue": true,
        "awaitPromise": true,
        "userGesture": true,
    });
    let r = run(
        ctx,
        &tab,
        field,
        "Runtime.callFunctionOn",
        params,
        EVAL_DEFAULT_MS,
    )
    .await;
    release(ctx, &tab).await;
    r
}

/// Run `method` (an evaluation) and answer its value, or why there is none.
async fn run(
    ctx: &ToolContext,
    tab: &Tab,
    field: &str,
    method: &str,
    params: Value,
    ms: u64,
) -> Result<CallToolResult> {
    let since = cursor(ctx, &tab.session).await?;
    let (r, dialog) = send_held(
        ctx,
        tab,
        method,
        params,
        since,
        (ms + 2_000).min(computerd::protocol::limits::CDP_SEND_MAX_MS),
    )
    .await?;
    if let Some(words) = dialog {
        return Err(ToolError::Refused(format!(
            "the {field} was held by a dialog: {words}; its value was not read, and the page answers again"
        )));
    }
    if let Some(d) = r.get("exceptionDetails") {
        let what = d["exception"]["description"]
            .as_str()
            .or(d["text"].as_str())
            .unwrap_or("an exception");
        return Err(ToolError::Refused(format!(
            "the {field} threw: {}; the page still answers",
            chars_cut(what, MAX_ENTRY_CHARS)
        )));
    }
    let res = &r["result"];
    let kind = res["subtype"]
        .as_str()
        .or(res["type"].as_str())
        .unwrap_or("undefined")
        .to_string();
    let value = match (&res["value"], res["unserializableValue"].as_str()) {
        (Value::Null, Some(u)) => Value::String(u.to_string()),
        (v, _) => v.clone(),
    };
    let shown = if kind == "undefined" {
        "undefined".to_string()
    } else {
        serde_json::to_string_pretty(&value).unwrap_or_default()
    };
    let max = budget(&ctx.settings);
    let cut = shown.len() > max;
    let text = if cut {
        let end = crate::budget::floor_boundary(&shown, max);
        format!(
            "{}\n(cut: the value is {} bytes as JSON, {} shown; ask for a part of it)",
            &shown[..end],
            shown.len(),
            end
        )
    } else {
        shown
    };
    let out = EvalOutput {
        kind,
        value: (!cut).then_some(value),
        cut,
    };
    Ok(done(text, &out))
}
