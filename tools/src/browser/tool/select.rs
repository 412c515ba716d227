//! `browser_select`: choose options of a select, set a checkbox, radio
//! or a field's value.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::ToolContext;
use crate::browser::dom::{
    SET_FORM, call_on, describe_el, object, release, resolve, scroll_into_view,
};
use crate::browser::target::{ref_of, target_args};
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{FOLLOW, check, cursor, follow, followed_words, main_frame};
use crate::error::{Result, ToolError};

/// A form value: text, a number, or true/false for a checkbox.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FormValue {
    Flag(bool),
    Number(f64),
    Text(String),
}

target_args! {
    pub struct SelectArgs {
        ref: "The select's (or field's) ref from the latest snapshot.",
        element,
        ref_target,
        /// The options to pick, by value or by their text (one for a plain select).
        pub values: Option<Vec<String>>,
        /// Instead of values: one option; true or false to check or uncheck a checkbox; text for a text field.
        pub value: Option<FormValue>,
        tab_id,
    }
}

/// The options to pick at most.
pub const MAX_VALUES: usize = 100;

pub(crate) async fn select(ctx: &ToolContext, a: SelectArgs) -> Result<CallToolResult> {
    let Some(raw) = ref_of(a.reference, a.target)? else {
        return Err(ToolError::Invalid(
            "ref is missing: give the select's ref from browser_snapshot; nothing was done".into(),
        ));
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
    scroll_into_view(ctx, &tab, &el, n).await?;
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
