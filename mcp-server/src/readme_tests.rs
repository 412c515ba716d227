//! The README's parts that are read off the code: the tool table (from the
//! tool registry and the fleet tools) and the troubleshooting table (every
//! next step `doctor` names).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use computer_tools::fleet::{self, FleetPolicy};
use computer_tools::{ToolSettings, registry};

const README: &str = include_str!("../../README.md");
const BEGIN: &str = "<!-- tools: generated from the registry -->\n";
const END: &str = "<!-- /tools -->\n";

/// One line per tool, in registry order, each with its title and the
/// kinds that list it (a desktop or browser lists a tool only when its
/// computer declares the tool's group).
fn tool_table() -> String {
    let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
    for family in registry().families() {
        for t in family.tools() {
            let kind = match family.together.iter().find(|g| g.contains(t.name)) {
                Some(g) => format!("{} (in `{}`)", family.kind.as_str(), g.name),
                None => family.kind.as_str().to_string(),
            };
            if let Some(row) = rows.iter_mut().find(|r| r.0 == t.name) {
                row.2.push(kind);
                continue;
            }
            let tool = t.tool(&ToolSettings::default());
            let title = tool
                .annotations
                .and_then(|a| a.title)
                .unwrap_or_else(|| panic!("{} has no title", t.name));
            rows.push((t.name.to_string(), title, vec![kind]));
        }
    }
    let mut out = String::from("| tool | what | kinds |\n|---|---|---|\n");
    for (name, title, kinds) in rows {
        out.push_str(&format!("| `{name}` | {title} | {} |\n", kinds.join(", ")));
    }
    let pausing = FleetPolicy {
        pause: true,
        view: true,
        snapshot: true,
        ..FleetPolicy::default()
    };
    for t in fleet::tools(&pausing) {
        let title = t.annotations.and_then(|a| a.title).unwrap();
        let kinds = if fleet::PAUSE_NAMES.contains(&t.name.as_ref()) {
            "every session, where the provider can pause (local with a cgroup freezer, Docker, E2B)"
        } else if t.name == fleet::SNAPSHOT_NAME {
            "sandbox sessions, where the provider can snapshot (local, Docker, E2B, Daytona, Modal, Kubernetes); computer_new then takes `from`"
        } else if t.name == fleet::VIEW_NAME {
            "every session, where a viewer is served (--http, or --viewer over stdio)"
        } else {
            "every session"
        };
        out.push_str(&format!("| `{}` | {title} | {kinds} |\n", t.name));
    }
    out
}

#[test]
fn the_readme_tool_table_is_the_registrys() {
    let want = tool_table();
    let start = README.find(BEGIN).expect("the README's tools marker") + BEGIN.len();
    let end = start
        + README[start..]
            .find(END)
            .expect("the README's tools end marker");
    if std::env::var("COMPUTER_MCP_ACCEPT_README").as_deref() == Ok("1") {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let now = std::fs::read_to_string(path).unwrap();
        let s = now.find(BEGIN).unwrap() + BEGIN.len();
        let e = s + now[s..].find(END).unwrap();
        std::fs::write(path, format!("{}{want}{}", &now[..s], &now[e..])).unwrap();
        return;
    }
    assert_eq!(
        &README[start..end],
        want,
        "the README's tool table is not the registry's: run COMPUTER_MCP_ACCEPT_README=1 cargo test -p computer-mcp readme"
    );
}

/// Doctor's own next steps: the last argument of each `Check::no(` call, and
/// the arms of its `let next = match`.
fn next_steps(src: &str) -> Vec<String> {
    let code = &src[..src.find("#[cfg(test)]").unwrap_or(src.len())];
    let mut out = computer_testkit::last_literal_args(code, "Check::no(");
    let m = code
        .find("let next = match")
        .expect("doctor's next-step match");
    let block = &code[m..m + code[m..].find("};").unwrap()];
    for line in block.lines().map(str::trim) {
        if let Some(lit) = line.strip_prefix('"').and_then(|l| l.strip_suffix("\",")) {
            out.push(lit.to_string());
        }
    }
    out
}

#[test]
fn the_readme_troubleshooting_names_every_next_step_doctor_gives() {
    // A provider's own lines (its survey and preflight) are held to the
    // same section by a test beside them.
    let steps = next_steps(include_str!("doctor.rs"));
    assert!(steps.len() >= 15, "{steps:?}");
    let section = computer_testkit::markdown_section(README, "## Troubleshooting");
    for s in steps {
        assert!(
            section.contains(&s),
            "README's Troubleshooting lacks doctor's next step {s:?}"
        );
    }
}
