//! Skills: one per tool family, a `SKILL.md` (front matter with `name` and
//! `description`, then a body written for a model) kept in the repository's
//! `skills/` folder, embedded at build time, served by the server as an MCP
//! prompt and as the resource `skill://<name>/SKILL.md`.

/// One skill as embedded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The name in its front matter (`sandbox`).
    pub name: &'static str,
    /// The description in its front matter.
    pub description: &'static str,
    /// The whole file, front matter included.
    pub text: &'static str,
    /// The part after the front matter.
    pub body: &'static str,
}

impl Skill {
    /// The resource that serves it.
    pub fn uri(&self) -> String {
        format!("skill://{}/SKILL.md", self.name)
    }
}

/// Read a `SKILL.md`: `---`, `name:` and `description:` lines, `---`, body.
pub fn parse(text: &'static str) -> Result<Skill, String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("a SKILL.md starts with a front matter block (---)")?;
    let (front, body) = rest
        .split_once("\n---\n")
        .ok_or("the front matter block has no closing ---")?;
    let mut name = None;
    let mut description = None;
    for line in front.lines() {
        match line.split_once(':') {
            Some(("name", v)) => name = Some(v.trim()),
            Some(("description", v)) => description = Some(v.trim()),
            Some((k, _)) => return Err(format!("the front matter has an unknown key {k:?}")),
            None => return Err(format!("front matter line {line:?} is not `key: value`")),
        }
    }
    let name = name.ok_or("the front matter has no name")?;
    let description = description.ok_or("the front matter has no description")?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!(
            "skill name {name:?} must be lowercase letters, digits and '-'"
        ));
    }
    if description.is_empty() || description.len() > 1024 {
        return Err("a skill's description is 1 to 1024 characters".into());
    }
    Ok(Skill {
        name,
        description,
        text,
        body: body.trim_start_matches('\n'),
    })
}

/// The sandbox family's skill.
pub const SANDBOX_TEXT: &str = include_str!("../../skills/sandbox/SKILL.md");

/// Every example call in a skill: (tool, arguments as JSON text, the text
/// its result must contain), from a ```call block (`tool {json}`) and the
/// ```text block after it.
pub fn examples(body: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("```call\n") {
        let after = &rest[i + 8..];
        let Some(end) = after.find("\n```") else {
            break;
        };
        let call = after[..end].trim();
        let (tool, args) = call.split_once(' ').unwrap_or((call, "{}"));
        let mut want = String::new();
        let next = &after[end + 4..];
        if let Some(t) = next.trim_start().strip_prefix("```text\n")
            && let Some(e) = t.find("\n```")
        {
            want = t[..e].to_string();
        }
        out.push((tool.to_string(), args.trim().to_string(), want));
        rest = next;
    }
    out
}

/// Whether `text` is what an example's answer shows, where each `…` in
/// `shown` stands for any run of characters (a pid, a time, a handle) and
/// the rest must be the same, end to end.
pub fn answer_matches(shown: &str, text: &str) -> bool {
    let mut parts = shown.split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The tools' names and every argument they take, for the tests that
/// hold a skill's words to the tools it speaks of.
#[cfg(test)]
pub(crate) fn names_and_args(tools: &[rmcp::model::Tool]) -> (Vec<String>, Vec<String>) {
    let names = tools.iter().map(|t| t.name.to_string()).collect();
    let mut args = Vec::new();
    for t in tools {
        if let Some(serde_json::Value::Object(p)) = t.input_schema.get("properties") {
            args.extend(p.keys().cloned());
        }
    }
    (names, args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Offer, ToolSettings, registry};
    use computerd::protocol::SettingKind;

    #[test]
    fn an_answer_matches_what_is_shown_with_any_text_for_each_ellipsis() {
        assert!(answer_matches("wrote 29 bytes", "wrote 29 bytes"));
        assert!(!answer_matches("wrote 29 bytes", "wrote 29 bytes to /x"));
        assert!(!answer_matches("wrote 29", "I wrote 29"));
        assert!(answer_matches(
            "started p1 (pid …). Log …log",
            "started p1 (pid 8). Log /tmp/a.log"
        ));
        assert!(!answer_matches(
            "started p1 (pid …).",
            "started p1 (pid 8). More"
        ));
        assert!(answer_matches(
            "made (c-…): ending … (or)",
            "made (c-ab): ending 12:00 (or)"
        ));
        assert!(!answer_matches("a…b…c", "a b"));
    }

    #[test]
    fn every_family_has_a_skill_that_parses() {
        for f in registry().families() {
            let s = parse(f.skill).unwrap_or_else(|e| panic!("{}: {e}", f.kind.as_str()));
            assert_eq!(s.name, f.kind.as_str());
            assert!(s.body.starts_with("# "), "{}", s.body);
        }
    }

    #[test]
    fn a_skill_names_only_tools_and_arguments_that_exist_and_every_tool_of_its_family() {
        let family = registry().family(SettingKind::Sandbox).unwrap();
        let skill = parse(family.skill).unwrap();
        let groups = {
            let row = SettingKind::Sandbox.row();
            [row.required, row.optional].concat()
        };
        let offer = Offer {
            groups: &groups,
            extend: true,
        };
        let mut tools = family.list(&offer, &ToolSettings::default());
        tools.extend(crate::fleet::tools(&crate::fleet::FleetPolicy::default()));
        let (names, args) = names_and_args(&tools);
        // Every `snake_case` word in backticks is a tool or an argument.
        let mut rest = skill.body;
        while let Some(i) = rest.find('`') {
            let after = &rest[i + 1..];
            let Some(end) = after.find('`') else { break };
            let word = &after[..end];
            if word.contains('_') && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                assert!(
                    names.iter().any(|n| n == word) || args.iter().any(|a| a == word),
                    "the skill names `{word}`, which is no tool or argument"
                );
            }
            rest = &after[end + 1..];
        }
        for n in family.names(&offer) {
            assert!(
                skill.body.contains(&format!("`{n}`")),
                "the skill never names {n}"
            );
        }
        // Its examples call tools that exist, with JSON arguments.
        let ex = examples(skill.body);
        assert!(ex.len() >= 8, "{ex:?}");
        for (tool, a, want) in ex {
            assert!(names.contains(&tool), "an example calls {tool}");
            serde_json::from_str::<serde_json::Value>(&a)
                .unwrap_or_else(|e| panic!("{tool} {a}: {e}"));
            assert!(!want.is_empty(), "{tool} {a} says no result");
        }
    }

    #[test]
    fn a_bad_front_matter_is_named() {
        assert!(
            parse("# no front matter")
                .unwrap_err()
                .contains("starts with")
        );
        assert!(
            parse("---\nname: x\n---\nbody")
                .unwrap_err()
                .contains("no description")
        );
        assert!(
            parse("---\nname: X Y\ndescription: d\n---\nb")
                .unwrap_err()
                .contains("lowercase")
        );
        assert!(
            parse("---\nname: x\ndescription: d\ncolour: red\n---\nb")
                .unwrap_err()
                .contains("unknown key")
        );
    }
}
