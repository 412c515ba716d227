//! Tools a family lists as one: `process` for `process_start` …
//! `process_list`, or a desktop's page tools as `browser`. Every member
//! stays one [`crate::ToolDef`] and keeps answering to its own name; the
//! family only lists it inside the one tool, which takes `action` (the
//! member's name without the one tool's `<name>_`) and the member's own
//! arguments in `args`.
//!
//! What it is for: a kind whose tools' schemas would not fit a model's
//! context (each kind's `tools/list` is held to 20 KB) lists its rarer acts
//! this way. The one tool's description gives each act as a line, its
//! arguments named (`?` when optional, an enum's values after `=`), and the
//! first sentence of the member's own description; an act's arguments are
//! checked by the member, whose words name the field at fault.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// Members of a family listed as one tool.
#[derive(Clone, Copy, Debug)]
pub struct Together {
    /// The one tool's name; a member named `<name>_<act>` is the act `act`.
    pub name: &'static str,
    pub title: &'static str,
    /// The description's first words: what the acts have in common.
    pub lead: &'static str,
    pub members: Members,
}

/// Which tools of a family are a [`Together`]'s members.
#[derive(Clone, Copy, Debug)]
pub enum Members {
    /// These, by name.
    Named(&'static [&'static str]),
    /// Every tool of a set (a desktop's page tools).
    Set(&'static crate::ToolSet),
}

impl Together {
    pub fn contains(&self, tool: &str) -> bool {
        self.names().any(|m| m == tool)
    }

    fn names(&self) -> impl Iterator<Item = &'static str> + use<> {
        let (named, set): (&[&str], &[crate::ToolDef]) = match self.members {
            Members::Named(n) => (n, &[]),
            Members::Set(s) => (&[], s.tools),
        };
        named.iter().copied().chain(set.iter().map(|t| t.name))
    }

    /// The act a member is: its name without `<name>_`.
    pub fn act<'a>(&self, member: &'a str) -> &'a str {
        member
            .strip_prefix(self.name)
            .and_then(|rest| rest.strip_prefix('_'))
            .unwrap_or(member)
    }

    /// The member an `action` names: an act, or a member's whole name.
    fn member(&self, action: &str) -> Option<&'static str> {
        self.names().find(|m| *m == action || self.act(m) == action)
    }

    /// The one tool, from its members as they would be listed one by one
    /// (in the family's order; only those the computer offers).
    pub fn tool(&self, members: &[Tool]) -> Tool {
        let acts: Vec<&str> = members.iter().map(|t| self.act(&t.name)).collect();
        let mut description = format!(
            "{} Call as {{\"action\": \"{}\", \"args\": {{…}}}}:",
            self.lead,
            acts.first().copied().unwrap_or_default()
        );
        for (t, act) in members.iter().zip(&acts) {
            description.push_str(&format!(
                "\n- {act}({}): {}",
                signature(&t.input_schema),
                first_sentence(t.description.as_deref().unwrap_or_default())
            ));
        }
        let input = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "action": {"type": "string", "enum": acts},
                "args": {"type": "object", "description": "The act's arguments, as its line above names them."},
            },
            "required": ["action"],
        });
        let Value::Object(input) = input else {
            unreachable!("a JSON object literal")
        };
        Tool::new(self.name, description, Arc::new(input))
            .annotate(annotations(self.title, members))
    }

    /// A call of the one tool as a call of the member its `action` names:
    /// that member's name and its arguments (`args`, with the `computer`
    /// argument kept beside them). `offered` says which members the
    /// computer offers; another is refused as the act it is not.
    pub fn unfold(
        &self,
        arguments: Option<JsonObject>,
        offered: impl Fn(&str) -> bool,
    ) -> Result<(&'static str, Option<JsonObject>), String> {
        let mut arguments = arguments.unwrap_or_default();
        let acts = || {
            self.names()
                .filter(|m| offered(m))
                .map(|m| self.act(m))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let action = match arguments.remove("action") {
            Some(Value::String(a)) => a,
            Some(_) => return Err(format!("action must be a string, one of {}", acts())),
            None => return Err(format!("action is missing: give one of {}", acts())),
        };
        let Some(member) = self.member(&action).filter(|m| offered(m)) else {
            if acts().is_empty() {
                return Err(format!(
                    "this computer offers none of {}'s acts; nothing was done",
                    self.name
                ));
            }
            return Err(format!(
                "action {action:?} is not one of {}; nothing was done",
                acts()
            ));
        };
        let mut args = match arguments.remove("args") {
            Some(Value::Object(o)) => o,
            None | Some(Value::Null) => JsonObject::new(),
            Some(_) => return Err("args must be an object of the act's arguments".into()),
        };
        if let Some((field, _)) = arguments
            .iter()
            .find(|(k, _)| *k != crate::fleet::COMPUTER_ARG)
        {
            return Err(format!(
                "{field} is not taken beside action: give it inside args; nothing was done"
            ));
        }
        if let Some(computer) = arguments.remove(crate::fleet::COMPUTER_ARG) {
            args.insert(crate::fleet::COMPUTER_ARG.into(), computer);
        }
        Ok((member, Some(args)))
    }
}

/// A member's arguments in one line: `url, timeout_ms?, direction?=up|down`.
/// `computer`, which every tool takes beside action, and `tab_id`, which
/// every page act takes (the lead says so), are left out.
fn signature(schema: &JsonObject) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let defs = schema.get("$defs").and_then(Value::as_object);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    let mut words = Vec::new();
    for (name, prop) in props {
        if name == crate::fleet::COMPUTER_ARG || name == "tab_id" {
            continue;
        }
        let mut word = name.clone();
        if !required.contains(&name.as_str()) {
            word.push('?');
        }
        if let Some(values) = enum_values(prop, defs) {
            word.push('=');
            word.push_str(&values.join("|"));
        }
        words.push(word);
    }
    words.join(", ")
}

/// A property's enum values, its own or its `$ref`'s.
fn enum_values(prop: &Value, defs: Option<&JsonObject>) -> Option<Vec<String>> {
    let target = match prop.get("$ref").and_then(Value::as_str) {
        Some(r) => defs?.get(r.strip_prefix("#/$defs/")?)?,
        None => prop,
    };
    let values = target.get("enum")?.as_array()?;
    Some(
        values
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
    )
}

/// The most of a line's words an act's line keeps.
const LINE_CHARS: usize = 110;

/// What an act does, in a line: its description's first sentence without
/// its parentheses, cut at a clause when still over [`LINE_CHARS`].
fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map_or(text.len(), |i| i + 1);
    let mut line = String::new();
    let mut depth = 0usize;
    for c in text[..end].chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => line.push(c),
            _ => {}
        }
    }
    let mut line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    line = line
        .replace(" ,", ",")
        .replace(" ;", ";")
        .replace(" :", ":")
        .replace(" .", ".");
    if line.chars().count() > LINE_CHARS {
        let cut: String = line.chars().take(LINE_CHARS).collect();
        // A clause's end: a colon or semicolon, else the last comma.
        let at = ["; ", ": "]
            .iter()
            .filter_map(|p| cut.rfind(p))
            .max()
            .filter(|at| *at > LINE_CHARS / 2)
            .or_else(|| cut.rfind(", "))
            .unwrap_or(cut.len());
        line = format!("{}.", cut[..at].trim_end_matches('.'));
    }
    line
}

/// The one tool's hints: read-only or idempotent only if every member is,
/// destructive or open-world if any is.
fn annotations(title: &str, members: &[Tool]) -> ToolAnnotations {
    let each = |f: fn(&ToolAnnotations) -> Option<bool>| {
        members
            .iter()
            .map(|t| t.annotations.as_ref().and_then(f).unwrap_or(false))
            .collect::<Vec<_>>()
    };
    let all = |v: Vec<bool>| !v.is_empty() && v.iter().all(|b| *b);
    let any = |v: Vec<bool>| v.iter().any(|b| *b);
    let a = ToolAnnotations::with_title(title).open_world(any(each(|a| a.open_world_hint)));
    if all(each(|a| a.read_only_hint)) {
        return a.read_only(true);
    }
    let a = a.destructive(any(each(|a| a.destructive_hint)));
    if all(each(|a| a.idempotent_hint)) {
        a.idempotent(true)
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROCESS: Together = Together {
        name: "process",
        title: "Background processes",
        lead: "Background processes.",
        members: Members::Named(&["process_start", "process_read"]),
    };

    fn member(name: &'static str, description: &str, schema: Value) -> Tool {
        let Value::Object(s) = schema else { panic!() };
        Tool::new(name, description.to_string(), Arc::new(s))
            .annotate(ToolAnnotations::with_title(name).read_only(name == "process_read"))
    }

    fn members() -> Vec<Tool> {
        vec![
            member(
                "process_start",
                "Start a program in the background. It runs on.",
                json!({"type": "object", "properties": {
                    "command": {"type": "string"},
                    "computer": {"type": "string"},
                    "mode": {"$ref": "#/$defs/Mode"}},
                  "$defs": {"Mode": {"enum": ["pipe", "pty"], "type": "string"}},
                  "required": ["command"]}),
            ),
            member(
                "process_read",
                "Read its output",
                json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
            ),
        ]
    }

    #[test]
    fn the_one_tool_lists_each_act_with_its_arguments_and_first_sentence() {
        let t = PROCESS.tool(&members());
        let d = t.description.as_deref().unwrap();
        assert!(
            d.contains("\n- start(command, mode?=pipe|pty): Start a program in the background."),
            "{d}"
        );
        assert!(d.contains("\n- read(id): Read its output"), "{d}");
        assert!(!d.contains("It runs on"), "{d}");
        assert_eq!(
            first_sentence(
                "Move the pointer over an element by ref (scrolled into view, checked uncovered) or to x, y of the latest screenshot, without clicking: opens hover menus and tooltips. Take a snapshot after."
            ),
            "Move the pointer over an element by ref or to x, y of the latest screenshot, without clicking."
        );
        assert_eq!(
            t.input_schema["properties"]["action"]["enum"],
            json!(["start", "read"])
        );
        let a = t.annotations.unwrap();
        assert_eq!(a.read_only_hint, None, "one member writes");
    }

    #[test]
    fn a_call_unfolds_to_the_member_with_its_args_and_computer() {
        let args = json!({"action": "start", "args": {"command": "sleep 1"}, "computer": "b"});
        let Value::Object(args) = args else { panic!() };
        let (name, args) = PROCESS.unfold(Some(args), |_| true).unwrap();
        assert_eq!(name, "process_start");
        assert_eq!(
            Value::Object(args.unwrap()),
            json!({"command": "sleep 1", "computer": "b"})
        );
        // The member's whole name works as the action too.
        let Value::Object(args) = json!({"action": "process_read", "args": {"id": "p1"}}) else {
            panic!()
        };
        assert_eq!(
            PROCESS.unfold(Some(args), |_| true).unwrap().0,
            "process_read"
        );
    }

    #[test]
    fn a_bad_action_or_an_argument_beside_it_is_refused_in_words() {
        let call = |v: Value, offered: fn(&str) -> bool| {
            let Value::Object(o) = v else { panic!() };
            PROCESS.unfold(Some(o), offered).unwrap_err()
        };
        let e = call(json!({"action": "stop"}), |_| true);
        assert_eq!(
            e,
            "action \"stop\" is not one of start, read; nothing was done"
        );
        let e = call(json!({}), |_| true);
        assert_eq!(e, "action is missing: give one of start, read");
        let e = call(json!({"action": "start", "command": "ls"}), |_| true);
        assert_eq!(
            e,
            "command is not taken beside action: give it inside args; nothing was done"
        );
        let e = call(json!({"action": "start", "args": "ls"}), |_| true);
        assert_eq!(e, "args must be an object of the act's arguments");
        // A member the computer does not offer is not an act of it.
        let e = call(json!({"action": "read"}), |m| m == "process_start");
        assert_eq!(e, "action \"read\" is not one of start; nothing was done");
    }
}
