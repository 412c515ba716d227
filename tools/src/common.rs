//! The tools every family shares: `computer_info` and `computer_extend`,
//! the computer itself. Every family lists [`TOOLS`]; extend is listed only
//! where the provider can move the deadline ([`Needs::Extend`]).

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::define::{done, hints, listing};
use crate::error::{Result, ToolError};
use crate::registry::{Needs, ToolDef, ToolSet, handler};
use crate::{ComputerFacts, Receipt, ToolContext};

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
    "This computer: provider, OS, user, work directory (HOME), \
network as read back (`none (only lo)`: nothing outside reachable), deadline, isolation, what it used (`receipt`), open `ports`.",
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
    if let Some(r) = &f.receipt {
        t.push_str(&format!("used: {}\n", render_receipt(r)));
    }
    for p in &f.ports {
        t.push_str(&format!("port {}: {}\n", p.port, p.url));
    }
    for n in &f.notes {
        t.push_str(&format!("note: {n}\n"));
    }
    t
}

/// A receipt in a line: `12 s since made, 1.93 CPU seconds, peak memory
/// 130.2 MiB, 7 tool calls`.
pub fn render_receipt(r: &Receipt) -> String {
    let mut parts = vec![format!("{} s since made", r.wall_seconds)];
    if let Some(cpu) = r.cpu_seconds {
        parts.push(format!("{cpu:.2} CPU seconds"));
    }
    if let Some(peak) = r.peak_memory_bytes {
        parts.push(format!(
            "peak memory {:.1} MiB",
            peak as f64 / (1024.0 * 1024.0)
        ));
    }
    let s = if r.tool_calls == 1 { "" } else { "s" };
    parts.push(format!("{} tool call{s}", r.tool_calls));
    if r.bytes_pushed + r.bytes_pulled > 0 {
        parts.push(format!(
            "{} B pushed, {} B pulled",
            r.bytes_pushed, r.bytes_pulled
        ));
    }
    if let Some(usd) = r.estimated_cost_usd {
        parts.push(format!("about ${usd:.4} at the vendor's price"));
    }
    parts.join(", ")
}

async fn info(ctx: &ToolContext, _a: ComputerInfoArgs) -> Result<CallToolResult> {
    let mut facts = ctx.facts.clone();
    if let Some(receipt) = &ctx.receipt {
        facts.receipt = Some(receipt().await);
    }
    if let Some(ports) = &ctx.ports {
        facts.ports = ports.list();
    }
    let mut text = render_facts(&facts);
    if ctx.extend.is_some() && facts.deadline.is_some() {
        text.push_str("The deadline can be moved later with computer_extend.\n");
    }
    Ok(done(text, &facts))
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
    "Move this computer's deadline to `ttl_minutes` from now, when it ends with its programs. \
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
            receipt: None,
            ports: Vec::new(),
        };
        assert_eq!(
            render_facts(&f),
            "provider: local (id c1)\nkind: linux (linux amd64)\nuser: 1000:1000\nwork directory: /home/w (HOME and the default cwd)\nnetwork: none (only lo)\ndeadline: 2030-01-01T00:00:00Z (the computer and everything in it ends then)\nisolation: namespaces\nnote: a note\n"
        );
    }

    #[test]
    fn a_receipt_reads_as_one_line_with_what_is_known() {
        let mut r = Receipt {
            wall_seconds: 12,
            cpu_seconds: Some(1.934),
            peak_memory_bytes: Some(136_533_606),
            tool_calls: 7,
            bytes_pushed: 4096,
            bytes_pulled: 10,
            estimated_cost_usd: Some(0.0123),
            price: Some("e2b's".into()),
        };
        assert_eq!(
            render_receipt(&r),
            "12 s since made, 1.93 CPU seconds, peak memory 130.2 MiB, 7 tool calls, 4096 B pushed, 10 B pulled, about $0.0123 at the vendor's price"
        );
        r.bytes_pushed = 0;
        r.bytes_pulled = 0;
        r.estimated_cost_usd = None;
        r.cpu_seconds = None;
        r.peak_memory_bytes = None;
        r.tool_calls = 1;
        assert_eq!(render_receipt(&r), "12 s since made, 1 tool call");
    }
}
