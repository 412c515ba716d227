//! `browser_get_text`: the text of the page or of an element, in pages.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::ToolContext;
use crate::browser::dom::resolve;
use crate::browser::target::target_args;
use crate::browser::tool::budget;
use crate::browser::{current, send_to};
use crate::define::done;
use crate::error::{Result, ToolError};

target_args! {
    pub struct GetTextArgs {
        ref: "An element's ref from the latest snapshot; none for the whole page.",
        /// Where to start, in bytes of the text (the previous answer's next_offset).
        pub offset: Option<usize>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct GetTextOutput {
    /// The whole text's size in bytes.
    pub bytes: usize,
    pub offset: usize,
    /// Where the next part starts, when there is more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

pub(crate) async fn get_text(ctx: &ToolContext, a: GetTextArgs) -> Result<CallToolResult> {
    let tab = current(ctx).await?;
    let r = match &a.reference {
        Some(raw) => {
            let (tab, r, _) = resolve(ctx, "ref", raw).await?;
            let obj = crate::browser::dom::object(ctx, &tab, r.backend, raw).await?;
            send_to(ctx, &tab, "Runtime.callFunctionOn", json!({
                    "objectId": obj,
                    "functionDeclaration": "function(){ return this.innerText ?? this.textContent ?? ''; }",
                    "returnByValue": true,
                }))
            .await?
        }
        None => {
            send_to(ctx, &tab, "Runtime.evaluate", json!({
                    "expression": "document.body ? document.body.innerText : (document.documentElement ? document.documentElement.innerText : '')",
                    "returnByValue": true,
                }))
            .await?
        }
    };
    let text = r["result"]["value"].as_str().unwrap_or("").to_string();
    let total = text.len();
    let offset = a.offset.unwrap_or(0);
    if offset > total {
        return Err(ToolError::Invalid(format!(
            "offset is {offset}, past the text's {total} bytes"
        )));
    }
    let start = crate::budget::floor_boundary(&text, offset);
    let end = crate::budget::floor_boundary(&text, (start + budget(&ctx.settings)).min(total));
    let mut out = text[start..end].to_string();
    let next_offset = (end < total).then_some(end);
    if let Some(n) = next_offset {
        out.push_str(&format!(
            "\n(bytes {start} to {end} of {total}: call browser_get_text with offset {n} for more)"
        ));
    } else if total == 0 {
        out.push_str("(no text)");
    }
    Ok(done(
        out,
        &GetTextOutput {
            bytes: total,
            offset: start,
            next_offset,
        },
    ))
}
