//! `browser_fill_form` (Playwright MCP's name and arguments): several
//! fields by ref in one call, each set as `browser_type` or
//! `browser_select` sets it, in order; the first that fails stops the call
//! and says which were filled.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::tool::select::{FormValue, SelectArgs, select};
use crate::browser::tool::type_text::{TypeArgs, type_text};
use crate::define::done;
use crate::error::{Result, ToolError};

/// The most fields one call fills.
pub const MAX_FIELDS: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    Textbox,
    Checkbox,
    Radio,
    Combobox,
    Slider,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// Its ref.
    pub target: String,
    /// Its name, for the answer.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldKind,
    pub value: String,
    /// Playwright's description, for the record (unlisted).
    #[schemars(skip)]
    pub element: Option<String>,
}

target_args! {
    pub struct FillFormArgs {
        /// The fields, filled in order (at most 50).
        pub fields: Vec<Field>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct FillFormOutput {
    /// How many fields were filled.
    pub filled: usize,
}

/// One field set as the tool that sets its kind would.
async fn fill(ctx: &ToolContext, f: &Field) -> Result<CallToolResult> {
    let by_select = |value: FormValue| SelectArgs {
        reference: Some(f.target.clone()),
        value: Some(value),
        ..Default::default()
    };
    match f.kind {
        FieldKind::Textbox => {
            let a = TypeArgs {
                reference: Some(f.target.clone()),
                text: f.value.clone(),
                clear: Some(true),
                ..Default::default()
            };
            type_text(ctx, a).await
        }
        FieldKind::Checkbox | FieldKind::Radio => {
            let flag = match f.value.as_str() {
                "true" => true,
                "false" => false,
                v => {
                    return Err(ToolError::Invalid(format!(
                        "value {v:?} of a {:?} field: give \"true\" or \"false\"",
                        f.kind
                    )));
                }
            };
            select(ctx, by_select(FormValue::Flag(flag))).await
        }
        FieldKind::Combobox => {
            let a = SelectArgs {
                reference: Some(f.target.clone()),
                values: Some(vec![f.value.clone()]),
                ..Default::default()
            };
            select(ctx, a).await
        }
        FieldKind::Slider => select(ctx, by_select(FormValue::Text(f.value.clone()))).await,
    }
}

pub(crate) async fn fill_form(ctx: &ToolContext, a: FillFormArgs) -> Result<CallToolResult> {
    if a.fields.is_empty() || a.fields.len() > MAX_FIELDS {
        return Err(ToolError::Invalid(format!(
            "fields has {} entries; give 1 to {MAX_FIELDS}; nothing was filled",
            a.fields.len()
        )));
    }
    let mut said = Vec::new();
    for (i, f) in a.fields.iter().enumerate() {
        match fill(ctx, f).await {
            Ok(r) => {
                let words = r
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                    .collect::<Vec<_>>()
                    .join(" ");
                said.push(format!("- {}: {words}", f.name));
            }
            Err(e) => {
                let before = if said.is_empty() {
                    "nothing was filled".to_string()
                } else {
                    format!("filled before it:\n{}", said.join("\n"))
                };
                return Err(ToolError::Refused(format!(
                    "fields[{i}] ({:?}, {}): {e}; {before}",
                    f.name, f.target
                )));
            }
        }
    }
    let text = format!(
        "### Result\nfilled {} fields:\n{}",
        said.len(),
        said.join("\n")
    );
    Ok(done(text, &FillFormOutput { filled: said.len() }))
}
