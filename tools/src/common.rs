//! The tools every family shares: `computer_info` and `computer_extend`,
//! the computer itself. Every family lists [`TOOLS`]; extend is listed only
//! where the provider can move the deadline ([`Needs::Extend`]).

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::define::{done, hints, listing};
use crate::error::{Result, ToolError};
use crate::registry::{Needs, ToolDef, ToolSet, handler};
use crate::{ComputerFacts, ToolContext};

/// `computer_info` (what the server knows about the computer) and
/// `computer_extend` (move the deadline, where the provider can).
#[rustfmt::skip]
pub const TOOLS: ToolSet = ToolSet {
    name: "common",
    tools: &[
        ToolDef::new("computer_info",   Needs::Nothing, info_tool,   handler!(info)),
        ToolDef::new("computer_extend", Needs::Extend,  extend_tool, handler!(extend)),
    ],
    aliases: &[],
};

/// computer_extend's `ttl_minutes` at most (a day).
pub const MAX_TTL_MINUTES: u64 = 1440;

// ------------------------------------------------------------ computer_info

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerInfoArgs {}

listing!(
    fn info_tool(_): ComputerInfoArgs => ComputerFacts,
    "Describe this computer: provider, OS, user, work directory (HOME), \
network as read back (`none (only lo)`: nothing outside reachable), deadline, isolation.",
    hints("About this computer", true, false, true, false)
);

pub(crate) fn render_facts(f: &ComputerFacts) -> String {
    let mut t = String::new();
    t.push_str(&format!("provider: {} (id {})\n", f.provider, f.id));
    let platform = [f.os.as_str(), f.arch.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    t.push_str(&format!("kind: {} ({platform})\n", f.kind));
    // A phone has no user and no work directory: no line says nothing.
    if !f.user.is_empty() {
        t.push_str(&format!("user: {}\n", f.user));
    }
    if !f.work_dir.is_empty() {
        t.push_str(&format!(
            "work directory: {} (HOME and the default cwd)\n",
            f.work_dir
        ));
    }
    t.push_str(&format!("network: {}\n", f.network));
    match &f.deadline {
        Some(d) => t.push_str(&format!(
            "deadline: {d} (the computer and everything in it ends then)\n"
        )),
        None => t.push_str("deadline: none\n"),
    }
    t.push_str(&format!("isolation: {}\n", f.isolation));
    for n in &f.notes {
        t.push_str(&format!("note: {n}\n"));
    }
    t
}

async fn info(ctx: &ToolContext, _a: ComputerInfoArgs) -> Result<CallToolResult> {
    let mut text = render_facts(&ctx.facts);
    if ctx.extend.is_some() && ctx.facts.deadline.is_some() {
        text.push_str("The deadline can be moved later with computer_extend.\n");
    }
    Ok(done(text, &ctx.facts))
}

// ---------------------------------------------------------- computer_extend

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerExtendArgs {
    /// Minutes from now, 1 to 1440; the provider may allow less.
    #[schemars(range(min = 1, max = 1440))]
    pub ttl_minutes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComputerExtendOutput {
    /// The new deadline, RFC 3339.
    pub deadline: String,
}

listing!(
    fn extend_tool(_): ComputerExtendArgs => ComputerExtendOutput,
    "Move this computer's deadline to `ttl_minutes` from now: then every program ends and the computer is gone. \
Never past the server's lifetime from creation: a later ask is cut there, and said.",
    hints("Extend the deadline", false, false, true, false)
);

async fn extend(ctx: &ToolContext, a: ComputerExtendArgs) -> Result<CallToolResult> {
    if a.ttl_minutes == 0 || a.ttl_minutes > MAX_TTL_MINUTES {
        return Err(ToolError::Invalid(format!(
            "ttl_minutes is {}; it is 1 to {MAX_TTL_MINUTES} (a day)",
            a.ttl_minutes
        )));
    }
    let Some(extend) = &ctx.extend else {
        return Err(ToolError::Refused(
            "this computer's provider cannot move its deadline; finish the work before it (see computer_info)".into(),
        ));
    };
    let moved = extend(a.ttl_minutes * 60_000)
        .await
        .map_err(|why| ToolError::Refused(format!("the deadline was not moved: {why}")))?;
    let deadline = moved.deadline;
    let text = match moved.capped {
        Some(why) => format!("the computer now ends at {deadline}: {why}"),
        None => format!("the computer now ends at {deadline}"),
    };
    Ok(done(text, &ComputerExtendOutput { deadline }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_read_as_lines() {
        let f = ComputerFacts {
            provider: "local".into(),
            id: "c1".into(),
            kind: "linux".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            user: "1000:1000".into(),
            work_dir: "/home/w".into(),
            network: "none (only lo)".into(),
            deadline: Some("2030-01-01T00:00:00Z".into()),
            isolation: "namespaces".into(),
            notes: vec!["a note".into()],
        };
        assert_eq!(
            render_facts(&f),
            "provider: local (id c1)\nkind: linux (linux amd64)\nuser: 1000:1000\nwork directory: /home/w (HOME and the default cwd)\nnetwork: none (only lo)\ndeadline: 2030-01-01T00:00:00Z (the computer and everything in it ends then)\nisolation: namespaces\nnote: a note\n"
        );
    }
}
