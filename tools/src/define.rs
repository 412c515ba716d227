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
        // An unknown field's path ends with the field itself, which serde
        // names: drop it (a custom parser's error may stop at the parent).
        if let Some(rest) = inner.strip_prefix("unknown field `")
            && let Some((field, _)) = rest.split_once('`')
        {
            let (parent, last) = path.rsplit_once('.').unwrap_or(("", path.as_str()));
            if last == field {
                path = parent.to_string();
            }
        }
        if let Some(rest) = inner.strip_prefix("unknown field `")
            && let Some((field, _)) = rest.split_once('`')
            && let Some(instead) = crate::browser::playwright::instead(tool, field)
        {
            return ToolError::Invalid(format!(
                "{tool}: {field} is not taken here: {instead}; nothing was done"
            ));
        }
        let hint = shape_hint(&path, &inner);
        let inner = plain_words(&inner) + hint;
        if path == "." || path.is_empty() {
            ToolError::Invalid(format!("{tool}: {inner}"))
        } else {
            ToolError::Invalid(format!("{tool}: {path}: {inner}"))
        }
    })
}

/// What a model that sent the wrong shape most likely meant: the two ways
/// of giving a program are easy to mix up.
fn shape_hint(path: &str, words: &str) -> &'static str {
    match path {
        "command" if words.contains("sequence") => {
            "; command is one bash line as a string (\"ls -l /tmp\"); to give a program and its words as a list, use argv ([\"ls\", \"-l\", \"/tmp\"]) instead"
        }
        "argv" if words.contains("invalid type: string") => {
            "; argv is a list of words ([\"ls\", \"-l\"]); to give one bash line as a string, use command instead"
        }
        _ => "",
    }
}

/// serde's words without Rust's: `expected u32` is a whole number to a
/// model, `a sequence` a list, `struct PtyArgs` an object.
pub(crate) fn plain_words(text: &str) -> String {
    let mut out = text.to_string();
    for (rust, plain) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u32", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("invalid type: sequence", "invalid type: a list"),
        ("invalid type: map", "invalid type: an object"),
        ("expected a map", "expected an object"),
        ("expected a boolean", "expected true or false"),
    ] {
        if let Some(i) = out.find(rust) {
            let end = i + rust.len();
            // Only the whole word (`u8`, not `u8x`).
            if !out[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                out.replace_range(i..end, plain);
            }
        }
    }
    // `expected struct PtyArgs`, `untagged enum Pty`: name no type.
    for marker in ["expected struct ", "expected enum ", "untagged enum "] {
        while let Some(i) = out.find(marker) {
            let start = i + marker.len();
            let end = out[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(out.len(), |n| start + n);
            let plain = if marker == "untagged enum " {
                "the allowed forms"
            } else {
                "expected an object"
            };
            out.replace_range(i..end, plain);
        }
    }
    out
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
    let input = Arc::new(plain_schema(input.as_ref().clone()));
    // The output schema is for clients to check structured content; the
    // model reads the words of the text result ([`slim_output`]).
    let mut output = plain_schema(schema_for_output::<O>().as_ref().clone());
    slim_output(&mut output);
    let output = Arc::new(output);
    Tool::new(name, description, input)
        .with_raw_output_schema(output)
        .annotate(annotations)
}

/// A tool's listing fn (a [`crate::registry::ToolDef`]'s `build`), as a
/// closure in a table or a named fn: the tool named as the registry names
/// it, from its args and result types, with its description and
/// annotations, either of which may state the settings the pattern binds
/// (`_` where they state none).
macro_rules! listing {
    (|$s:pat_param| $args:ty => $out:ty, $description:expr, $hints:expr $(,)?) => {
        |name, $s| $crate::define::make_tool::<$args, $out>(name, String::from($description), $hints)
    };
    ($vis:vis fn $f:ident($s:pat): $args:ty => $out:ty, $description:expr, $hints:expr $(,)?) => {
        $vis fn $f(name: &'static str, $s: &$crate::ToolSettings) -> ::rmcp::model::Tool {
            $crate::define::make_tool::<$args, $out>(name, String::from($description), $hints)
        }
    };
}
pub(crate) use listing;

/// A schema as strict clients read it cleanly: no `$schema` line, no
/// non-standard `format` (`uint64`, `double`), an optional field typed as
/// itself (not `[T, "null"]`, which some validators refuse) and without a
/// `default: null`.
pub(crate) fn plain_schema(mut schema: JsonObject) -> JsonObject {
    schema.remove("$schema");
    clean(&mut schema);
    schema
}

fn clean(o: &mut JsonObject) {
    if let Some(Value::String(f)) = o.get("format")
        && !STANDARD_FORMATS.contains(&f.as_str())
    {
        o.remove("format");
    }
    if o.get("default") == Some(&Value::Null) {
        o.remove("default");
    }
    if let Some(Value::Array(types)) = o.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            o.insert("type".into(), kept[0].clone());
        } else if kept.len() != types.len() {
            o.insert("type".into(), Value::Array(kept));
        }
    }
    // `Option<T>` of a composite T is `anyOf: [T, {type: null}]`: T alone
    // (an absent field is already optional), merged into its property.
    if let Some(Value::Array(alts)) = o.get_mut("anyOf") {
        alts.retain(|a| a.get("type") != Some(&Value::from("null")));
        if alts.len() == 1
            && let Some(Value::Object(only)) = alts.pop()
        {
            o.remove("anyOf");
            for (k, v) in only {
                // The property's own words win over its type's.
                o.entry(k).or_insert(v);
            }
        }
    }
    inner_objects(o, clean);
}

/// `f` on every object among `o`'s values, directly or in an array.
fn inner_objects(o: &mut JsonObject, f: fn(&mut JsonObject)) {
    for (_, v) in o.iter_mut() {
        match v {
            Value::Object(inner) => f(inner),
            Value::Array(items) => {
                for i in items {
                    if let Value::Object(inner) = i {
                        f(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A result's schema as clients check structured content with it: types
/// only. Descriptions go (the model reads the text result's words),
/// `minimum: 0` on unsigned counts and `required` lists too: they check
/// nothing a client acts on, and every listed byte is context a model pays
/// for. Only keywords go, never a property that happens to share a name.
fn slim_output(o: &mut JsonObject) {
    if o.get("description").is_some_and(Value::is_string) {
        o.remove("description");
    }
    if o.get("minimum") == Some(&Value::from(0)) {
        o.remove("minimum");
    }
    if o.get("required").is_some_and(Value::is_array) {
        o.remove("required");
    }
    inner_objects(o, slim_output);
}

/// The `format` values JSON Schema defines.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
];

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

/// Annotations: the title, `openWorldHint`, and `readOnlyHint: true` for a
/// read; for a tool that changes things `destructiveHint` always and
/// `idempotentHint` when true. The spec reads an absent `readOnlyHint` or
/// `idempotentHint` as false and the other two as meaningless on a read,
/// and every listed byte is context a model pays for.
pub(crate) fn hints(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    let a = ToolAnnotations::with_title(title).open_world(open_world);
    if read_only {
        a.read_only(true)
    } else if idempotent {
        a.destructive(destructive).idempotent(true)
    } else {
        a.destructive(destructive)
    }
}

#[cfg(test)]
mod tests {
    use super::plain_words;

    #[test]
    fn serde_words_name_no_rust_type() {
        assert_eq!(
            plain_words("invalid type: string \"x\", expected u64"),
            "invalid type: string \"x\", expected a whole number, 0 or more"
        );
        assert_eq!(
            plain_words("invalid type: integer `3`, expected struct PtyArgs"),
            "invalid type: integer `3`, expected an object"
        );
        assert_eq!(
            plain_words("data did not match any variant of untagged enum Pty"),
            "data did not match any variant of the allowed forms"
        );
        assert_eq!(plain_words("expected u8x"), "expected u8x");
        assert_eq!(
            plain_words("invalid type: map, expected a sequence"),
            "invalid type: an object, expected a list"
        );
    }
}
