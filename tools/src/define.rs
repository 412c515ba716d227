//! The pieces every tool definition is made of: the tool as listed (input
//! and output schemas from its args and result types, annotations), its
//! arguments parsed with words that name the field at fault, and its
//! successful result (text for the model, the result as structured content).

use std::sync::Arc;

use rmcp::handler::server::tool::{schema_for_input, schema_for_output, schema_for_type};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Result, ToolError};

/// Arguments from JSON, with words that name the field at fault.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T> {
    serde_path_to_error::deserialize::<_, T>(args).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // An unknown field's path ends with the field itself, which serde names.
        if inner.starts_with("unknown field") {
            path = path
                .rsplit_once('.')
                .map(|(p, _)| p.to_string())
                .unwrap_or_default();
        }
        if path == "." || path.is_empty() {
            ToolError::Invalid(format!("{tool}: {inner}"))
        } else {
            ToolError::Invalid(format!("{tool}: {path}: {inner}"))
        }
    })
}

/// A tool from its args and result types.
pub(crate) fn make_tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    description: String,
    annotations: ToolAnnotations,
) -> Tool {
    let mut input = schema_for_input::<A>().unwrap_or_else(|_| schema_for_type::<A>());
    if !input.contains_key("properties") {
        // A tool without arguments still states its (empty) properties,
        // which some clients expect.
        let mut with = input.as_ref().clone();
        with.insert("properties".into(), Value::Object(Default::default()));
        input = Arc::new(with);
    }
    Tool::new(name, description, input)
        .with_raw_output_schema(schema_for_output::<O>())
        .annotate(annotations)
}

/// Replace one property's description in a generated input schema (for
/// limits known only at run time), and set its maximum when given.
pub(crate) fn restate_property(
    tool: &mut Tool,
    property: &str,
    description: String,
    maximum: Option<u64>,
) {
    let mut schema: JsonObject = tool.input_schema.as_ref().clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties")
        && let Some(Value::Object(p)) = props.get_mut(property)
    {
        p.insert("description".into(), Value::String(description));
        if let Some(m) = maximum {
            p.insert("maximum".into(), Value::from(m));
        }
    }
    tool.input_schema = Arc::new(schema);
}

/// A success: text for the model, the result as structured content.
pub(crate) fn done<O: Serialize>(text: String, out: &O) -> CallToolResult {
    with_structured(CallToolResult::success(vec![ContentBlock::text(text)]), out)
}

pub(crate) fn with_structured<O: Serialize>(mut r: CallToolResult, out: &O) -> CallToolResult {
    r.structured_content = serde_json::to_value(out).ok();
    r
}

/// Annotations, each hint stated.
pub(crate) fn hints(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    let mut a = ToolAnnotations::with_title(title)
        .read_only(read_only)
        .open_world(open_world);
    if !read_only {
        a = a.destructive(destructive).idempotent(idempotent);
    } else {
        a = a.idempotent(idempotent);
    }
    a
}
