//! `browser_type`: type into a field by ref, or where the focus is.

use rmcp::model::CallToolResult;
use serde_json::json;

use crate::ToolContext;
use crate::browser::dom::{
    CLEAR, HAS_FOCUS, VALUE_OF, call_on, describe_el, focus, object, release, resolve,
    scroll_into_view,
};
use crate::browser::pointer::{dialog_words, key_presses};
use crate::browser::target::{ref_of, target_args};
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{
    FOLLOW, check, current, cursor, follow, followed_words, keys, main_frame, send_to,
};
use crate::error::{Result, ToolError};

target_args! {
    pub struct TypeArgs {
        ref: "The field's ref from the latest snapshot; none types where the focus is.",
        element,
        /// Playwright's name for ref (unlisted).
        #[schemars(skip)]
        pub target: Option<crate::browser::target::Target>,
        /// The text to type, as it is (at most 64 KiB).
        pub text: String,
        /// Empty the field first.
        pub clear: Option<bool>,
        /// Press Enter after (submits most forms).
        pub submit: Option<bool>,
        /// Playwright's: one key press per character (unlisted).
        #[schemars(skip)]
        pub slowly: Option<bool>,
        tab_id,
    }
}

pub(crate) async fn type_text(ctx: &ToolContext, a: TypeArgs) -> Result<CallToolResult> {
    check::bounded("text", &a.text, check::MAX_TYPE_BYTES)?;
    let chars = a.text.chars().count();
    let reference = ref_of(a.reference, a.target)?;
    let (tab, into, obj) = match &reference {
        Some(raw) => {
            let (tab, el, n) = resolve(ctx, "ref", raw).await?;
            scroll_into_view(ctx, &tab, &el, n).await?;
            let _ = focus(ctx, &tab, el.backend).await;
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
    if a.slowly == Some(true) {
        for c in a.text.chars() {
            let t = c.to_string();
            for kind in ["keyDown", "keyUp"] {
                let mut p = json!({"type": kind, "key": t});
                if kind == "keyDown" {
                    p["text"] = json!(t);
                }
                send_to(ctx, &tab, "Input.dispatchKeyEvent", p).await?;
            }
        }
    } else if !a.text.is_empty() {
        send_to(ctx, &tab, "Input.insertText", json!({"text": a.text})).await?;
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
