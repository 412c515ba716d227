//! `computer_pause` and `computer_resume`: every program of a computer
//! stopped where it is (its files and memory kept) and let run on again.
//! Listed only where the provider can pause ([`super::FleetPolicy::pause`]).

use rmcp::model::{CallToolResult, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{ComputerSummary, Fleet, Which};
use crate::define::{done, hints, make_tool, parse};
use crate::error::{Result, ToolError};

/// The two tools' names, in listed order.
pub const PAUSE_NAMES: [&str; 2] = ["computer_pause", "computer_resume"];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerPauseArgs {
    /// Handle or name (`default`: yours).
    pub computer: String,
}

pub(super) fn tools() -> Vec<Tool> {
    vec![
        make_tool::<ComputerPauseArgs, ComputerSummary>(
            "computer_pause",
            "Pause a computer: its programs stop, files and memory kept, until computer_resume; \
its tools are refused meanwhile; its deadline and idle time run on."
                .to_string(),
            hints("Pause a computer", false, false, true, false),
        ),
        make_tool::<ComputerPauseArgs, ComputerSummary>(
            "computer_resume",
            "Let a paused computer's programs run on.".to_string(),
            hints("Resume a computer", false, false, true, false),
        ),
    ]
}

pub(super) async fn call(args: Value, on: bool, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let tool = if on { PAUSE_NAMES[0] } else { PAUSE_NAMES[1] };
    let a: ComputerPauseArgs = parse(tool, args)?;
    let which = Which::parse("computer", &a.computer)
        .map_err(|e| ToolError::Invalid(format!("{tool}: {e}")))?;
    let c = fleet.pause(which, on).await.map_err(ToolError::Refused)?;
    let text = if on {
        format!(
            "paused {}: its programs are stopped; computer_resume lets them run on (its deadline, {}, still holds)",
            c.label(),
            c.deadline
        )
    } else {
        format!("resumed {}: its programs run on", c.label())
    };
    Ok(done(text, &c))
}
