//! `browser_press`: press keys and key combinations.

use rmcp::model::CallToolResult;

use crate::ToolContext;
use crate::browser::dom::{describe_el, focus, resolve, scroll_into_view};
use crate::browser::pointer::{dialog_words, key_presses};
use crate::browser::target::target_args;
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{FOLLOW, check, current, cursor, follow, followed_words, keys, main_frame};
use crate::error::{Result, ToolError};

target_args! {
    pub struct PressArgs {
        /// The key or chord: Enter, Tab, Escape, ArrowDown, ctrl+a, shift+Tab; several separated by spaces ("Backspace Backspace").
        pub key: Option<String>,
        /// The same as key (the name Anthropic's key action uses); taken,
        /// not listed.
        #[schemars(skip)]
        pub text: Option<String>,
        ref: "Focus this element (a ref from the latest snapshot) first.",
        element,
        /// Press it this many times, 1 to 100 (default 1).
        pub repeat: Option<u32>,
        tab_id,
    }
}

pub(crate) async fn press(ctx: &ToolContext, a: PressArgs) -> Result<CallToolResult> {
    let (field, keys_text) = check::field_or_text(
        "key",
        a.key,
        a.text,
        "nothing was pressed",
        "key is missing: give a key such as Enter, Tab or ctrl+a; nothing was pressed",
    )?;
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
            scroll_into_view(ctx, &tab, &el, n).await?;
            focus(ctx, &tab, el.backend).await
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
