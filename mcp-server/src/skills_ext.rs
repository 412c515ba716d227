//! The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`),
//! on rmcp's types: `skills/list` and `skills/get` over the skills a
//! session is offered ([`crate::resources::skills`]). Each is one file, its
//! `SKILL.md`, the resource `skill://<name>/SKILL.md` (read with
//! `resources/read`), listed with its SHA-256 digest and size. The prompts
//! stay, for clients without the extension.

use computer_tools::skills::Skill;
use computerd::protocol::SettingKind;
use rmcp::ErrorData;
use rmcp::model::{
    GetSkillResult, ListSkillsResult, Skill as Entry, SkillFrontmatter, SkillResource,
    SkillResources,
};

/// `skills/list`: every skill a session of `kind` is offered, whole (one
/// page).
pub fn list(kind: SettingKind) -> ListSkillsResult {
    ListSkillsResult::with_all_items(crate::resources::skills(kind).iter().map(entry).collect())
}

/// `skills/get`: the skill whose `SKILL.md` is `uri`, if a session of
/// `kind` is offered it; else invalid params (-32602), naming its skills.
pub fn get(kind: SettingKind, uri: &str) -> Result<GetSkillResult, ErrorData> {
    let skills = crate::resources::skills(kind);
    match skills.iter().find(|s| s.uri() == uri) {
        Some(s) => Ok(GetSkillResult::new(entry(s))),
        None => {
            let known: Vec<String> = skills.iter().map(Skill::uri).collect();
            Err(ErrorData::invalid_params(
                format!(
                    "skills/get: {uri} is no skill of this server; its skills are {}",
                    known.join(", ")
                ),
                None,
            ))
        }
    }
}

/// A skill's entry: its URI, its front matter (the two fields a skill of
/// ours has), and its one file with digest and size.
fn entry(skill: &Skill) -> Entry {
    Entry::new(
        skill.uri(),
        SkillFrontmatter::new(skill.name, skill.description),
        SkillResources::Files(vec![SkillResource::from_bytes(
            skill.uri(),
            skill.text.as_bytes(),
        )]),
    )
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;

    use super::*;

    #[test]
    fn the_list_gives_each_offered_skill_with_its_front_matter_and_digest() {
        let list = list(SettingKind::Desktop);
        let names: Vec<&str> = list.skills.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["desktop", "sandbox", "browser"]);
        let desktop = &list.skills[0];
        assert_eq!(desktop.uri, "skill://desktop/SKILL.md");
        let SkillResources::Files(files) = &desktop.resources else {
            panic!("{:?}", desktop.resources)
        };
        let text = computer_tools::desktop::FAMILY.skill.as_bytes();
        files[0].verify(text).unwrap();
        assert!(files[0].digest.starts_with("sha256:") && files[0].digest.len() == 71);
        rmcp::model::validate_skills(&list.skills).unwrap();
        // A sandbox session is offered its own skill only.
        assert_eq!(super::list(SettingKind::Sandbox).skills.len(), 1);
    }

    #[test]
    fn get_answers_a_skill_by_uri_and_refuses_another_as_invalid_params() {
        let got = get(SettingKind::Sandbox, "skill://sandbox/SKILL.md").unwrap();
        assert_eq!(got.skill.name(), "sandbox");
        let e = get(SettingKind::Sandbox, "skill://browser/SKILL.md").unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(
            e.message.contains("skill://sandbox/SKILL.md"),
            "{}",
            e.message
        );
    }
}
