//! `computer_snapshot`: a computer's files (its HOME, `/work`) kept under a
//! name, for `computer_new {from}` to start new computers from. Listed,
//! and `from` offered, only where the provider can snapshot
//! ([`super::FleetPolicy::snapshot`]).

use rmcp::model::{CallToolResult, JsonObject, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Fleet, Which, check_name};
use crate::define::{done, hints, make_tool, parse};
use crate::error::{Result, ToolError};

/// The tool's name.
pub const SNAPSHOT_NAME: &str = "computer_snapshot";
/// computer_new's argument naming a snapshot to start from.
pub const FROM_ARG: &str = "from";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerSnapshotArgs {
    /// The computer: its handle or name (`default`: yours).
    pub computer: String,
    /// The snapshot's name (1 to 64 of a-z, 0-9, - and _), unique among your snapshots.
    pub name: String,
}

/// A snapshot, as computer_snapshot answers it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotSummary {
    /// Its handle (`s-` and 32 hex digits): pass it, or its name, as computer_new's `from`.
    pub handle: String,
    pub name: String,
    /// The kind of the computer it was taken of.
    pub kind: String,
    /// The directory it holds.
    pub path: String,
    /// What it keeps, in words.
    pub keeps: String,
    /// Its size in bytes, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// When it is deleted (RFC 3339).
    pub deadline: String,
}

pub(super) fn tool() -> Tool {
    make_tool::<ComputerSnapshotArgs, SnapshotSummary>(
        SNAPSHOT_NAME,
        "Keep a computer's files (/work, its HOME) under a name. computer_new with `from` set to that name \
makes a new computer starting from them; each such fork has its own copy. Processes and /tmp are not kept."
            .to_string(),
        hints("Snapshot a computer", false, false, false, false),
    )
}

/// computer_new's `from` property (added to its schema where the provider
/// can snapshot).
pub(super) fn from_property() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "A snapshot's name or handle (computer_snapshot): the new computer's /work starts as its copy.",
    })
}

/// Take `from` out of computer_new's arguments: none, or a snapshot's name
/// or handle, checked; refused, naming the field, where the server cannot
/// snapshot.
pub(super) fn take_from(args: &mut Value, offered: bool) -> Result<Option<String>> {
    let Some(v) = args.as_object_mut().and_then(|o| o.remove(FROM_ARG)) else {
        return Ok(None);
    };
    let invalid = |s: String| ToolError::Invalid(format!("computer_new: {s}"));
    let text = match v {
        Value::Null => return Ok(None),
        Value::String(s) => s,
        other => return Err(invalid(format!("{FROM_ARG} must be a string, not {other}"))),
    };
    if !offered {
        return Err(invalid(format!(
            "{FROM_ARG}: this server's provider cannot snapshot computers, so none starts from one"
        )));
    }
    if !is_snapshot_handle(&text) {
        check_name(FROM_ARG, &text).map_err(invalid)?;
    }
    Ok(Some(text))
}

/// `s-` and 32 lowercase hex digits.
pub fn is_snapshot_handle(text: &str) -> bool {
    text.strip_prefix("s-").is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Add `from` to computer_new's schema.
pub(super) fn offer_from(schema: &mut JsonObject) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(FROM_ARG.into(), from_property());
    }
}

pub(super) async fn call(args: Value, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let a: ComputerSnapshotArgs = parse(SNAPSHOT_NAME, args)?;
    let invalid = |s: String| ToolError::Invalid(format!("{SNAPSHOT_NAME}: {s}"));
    let which = Which::parse("computer", &a.computer).map_err(invalid)?;
    check_name("name", &a.name).map_err(invalid)?;
    if is_snapshot_handle(&a.name) {
        return Err(invalid(format!(
            "name {:?} has a snapshot handle's form; choose another",
            a.name
        )));
    }
    let s = fleet
        .snapshot(which, a.name)
        .await
        .map_err(ToolError::Refused)?;
    let size = s
        .size_bytes
        .map(|b| format!(", {b} bytes"))
        .unwrap_or_default();
    let text = format!(
        "kept {} of {} as snapshot {} ({}){size}, until {}.\nPass from: \"{}\" to computer_new to start a computer from it.",
        s.keeps, a.computer, s.name, s.handle, s.deadline, s.name
    );
    Ok(done(text, &s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_is_a_snapshots_name_or_handle_and_only_where_offered() {
        let h = format!("s-{}", "0a".repeat(16));
        let mut a = serde_json::json!({"from": h, "name": "x"});
        assert_eq!(take_from(&mut a, true).unwrap(), Some(h));
        assert_eq!(a, serde_json::json!({"name": "x"}));
        let mut a = serde_json::json!({"from": "base"});
        assert_eq!(take_from(&mut a, true).unwrap(), Some("base".into()));
        let mut a = serde_json::json!({"from": "Base!"});
        let e = take_from(&mut a, true).unwrap_err().to_string();
        assert!(e.contains("from \"Base!\" has 'B'"), "{e}");
        let mut a = serde_json::json!({"from": "base"});
        let e = take_from(&mut a, false).unwrap_err().to_string();
        assert!(e.contains("cannot snapshot computers"), "{e}");
        let mut a = serde_json::json!({"from": 3});
        assert!(take_from(&mut a, true).is_err());
        assert_eq!(take_from(&mut serde_json::json!({}), true).unwrap(), None);
    }
}
