//! Computers a model names: the `computer` argument every tool takes, and
//! the fleet tools that make, list and release a caller's computers
//! (`computer_new`, `computer_list`, `computer_release`).
//!
//! A computer is named by a handle the server minted (`c-` and 32 hex
//! digits: 128 random bits, opaque, never a provider's id) or by the short
//! name the model gave it; `default` (or no `computer` at all) is the
//! caller's default computer. What the server does with them is behind the
//! [`Fleet`] trait; this module holds the words, the schemas and the checks
//! of what a model may ask ([`FleetPolicy`]), so a refusal names the
//! argument and the allowed values before anything is made.

use std::sync::Arc;

use computerd::protocol::SettingKind;
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::define::{done, hints, make_tool, parse};
use crate::error::{Result, ToolError};

mod pause;
mod snapshot;
mod takeover;
mod view;
pub use pause::PAUSE_NAMES;
pub use snapshot::{FROM_ARG, SNAPSHOT_NAME, SnapshotSummary, is_snapshot_handle};
pub use takeover::{INPUT_WAIT_S, PageSeen, TAKEOVER_NAME, TakeoverAsk, TakeoverOutcome};
pub use view::{APP_SHOWN_BY, APP_URI, VIEW_NAME, ViewLink, tie_app};

/// The argument every tool of a family takes to say which computer.
pub const COMPUTER_ARG: &str = "computer";
/// The name that always means the caller's default computer.
pub const DEFAULT_NAME: &str = "default";
/// A name's most bytes.
pub const MAX_NAME_BYTES: usize = 64;
/// Every handle begins with this.
pub const HANDLE_PREFIX: &str = "c-";
/// A handle's hex digits after the prefix (128 bits).
pub const HANDLE_HEX_DIGITS: usize = 32;

/// Which computer a call names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    /// The caller's default computer (no `computer`, or `default`).
    Default,
    /// A handle the server minted.
    Handle(String),
    /// A name the model gave.
    Name(String),
}

impl Which {
    /// Read a `computer` value given as `field`: a handle, a name, or
    /// `default`; anything else refused in words naming the field and what
    /// it may be.
    pub fn parse(field: &str, text: &str) -> std::result::Result<Which, String> {
        if text == DEFAULT_NAME {
            return Ok(Which::Default);
        }
        if let Some(hex) = text.strip_prefix(HANDLE_PREFIX)
            && !hex.is_empty()
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
            && text.len() > HANDLE_PREFIX.len() + 8
        {
            if hex.len() != HANDLE_HEX_DIGITS || hex.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(format!(
                    "{field} {text:?} looks like a handle but is not one: a handle is {HANDLE_PREFIX} and {HANDLE_HEX_DIGITS} lowercase hex digits, as computer_new and computer_list give it"
                ));
            }
            return Ok(Which::Handle(text.to_string()));
        }
        check_name(field, text)?;
        Ok(Which::Name(text.to_string()))
    }

    /// How the model wrote it, for words.
    pub fn as_str(&self) -> &str {
        match self {
            Which::Default => DEFAULT_NAME,
            Which::Handle(h) => h,
            Which::Name(n) => n,
        }
    }
}

/// Whether `text` has a handle's form.
pub fn is_handle(text: &str) -> bool {
    matches!(Which::parse("computer", text), Ok(Which::Handle(_)))
}

/// A name a model may give: 1 to 64 bytes of `a-z`, `0-9`, `-` and `_`.
pub fn check_name(field: &str, name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err(format!(
            "{field} is empty; a name is 1 to {MAX_NAME_BYTES} characters of a-z, 0-9, '-' and '_'"
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{field} is {} bytes; a name is at most {MAX_NAME_BYTES} (a-z, 0-9, '-' and '_')",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "{field} {name:?} has {bad:?}; a name is 1 to {MAX_NAME_BYTES} characters of a-z, 0-9, '-' and '_', or a handle ({HANDLE_PREFIX} and {HANDLE_HEX_DIGITS} hex digits)"
        ));
    }
    Ok(())
}

/// Take the `computer` argument out of a call's arguments (so the tool's
/// own parser, which refuses unknown fields, never sees it).
pub fn take_computer_arg(arguments: &mut Option<JsonObject>) -> std::result::Result<Which, String> {
    let Some(args) = arguments.as_mut() else {
        return Ok(Which::Default);
    };
    match args.remove(COMPUTER_ARG) {
        None | Some(Value::Null) => Ok(Which::Default),
        Some(Value::String(s)) => Which::parse(COMPUTER_ARG, &s),
        Some(other) => Err(format!(
            "{COMPUTER_ARG} must be a string (a handle or a name), not {other}"
        )),
    }
}

/// The network a model may ask a new computer for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkChoice {
    /// Only the computer's own loopback.
    None,
    /// Whatever the server's host reaches.
    Open,
    /// Every public host, through the server's egress proxy.
    Public,
    /// The server's allow list, through its egress proxy.
    Allow,
}

impl NetworkChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkChoice::None => "none",
            NetworkChoice::Open => "open",
            NetworkChoice::Public => "public",
            NetworkChoice::Allow => "allow",
        }
    }
}

/// What the server lets a model ask of `computer_new`, and how long the
/// server keeps computers: stated in the descriptions, held in the checks.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetPolicy {
    /// The kinds this server makes; the first is the default.
    pub kinds: Vec<SettingKind>,
    /// A new computer's lifetime, and the most a model may ask.
    pub max_lifetime_ms: u64,
    /// The networks a model may ask, narrowest first; the last is the
    /// server's own (a model may narrow it, never widen it).
    pub networks: Vec<NetworkChoice>,
    /// The most of each size a model may ask (the server's own sizes).
    pub max_cpus: f64,
    pub max_memory_mb: u64,
    pub max_pids: u64,
    /// A computer unused this long is released.
    pub idle_ms: u64,
    /// The most computers one caller holds at once.
    pub max_computers: usize,
    /// The provider can pause a computer: computer_pause and
    /// computer_resume are listed.
    pub pause: bool,
    /// The server serves a live viewer: computer_view is listed (and
    /// request_takeover offered, inside it, where a kind it makes has a
    /// screen).
    pub view: bool,
    /// The provider can snapshot: computer_snapshot is listed, and
    /// computer_new takes `from`.
    pub snapshot: bool,
}

impl Default for FleetPolicy {
    fn default() -> Self {
        FleetPolicy {
            kinds: vec![SettingKind::Sandbox],
            max_lifetime_ms: 6 * 3_600_000,
            networks: vec![NetworkChoice::None],
            max_cpus: 2.0,
            max_memory_mb: 4096,
            max_pids: 1024,
            idle_ms: 30 * 60_000,
            max_computers: 4,
            pause: false,
            view: false,
            snapshot: false,
        }
    }
}

impl FleetPolicy {
    /// request_takeover is offered: a viewer is served and a kind this
    /// server makes has a screen the viewer shows (a desktop's, a phone's,
    /// a browser's front tab).
    pub fn takeover(&self) -> bool {
        self.view
            && self.kinds.iter().any(|k| {
                matches!(
                    k,
                    SettingKind::Desktop | SettingKind::Phone | SettingKind::Browser
                )
            })
    }
    fn kinds_text(&self) -> String {
        let v: Vec<&str> = self.kinds.iter().map(|k| k.as_str()).collect();
        v.join(", ")
    }
    fn networks_text(&self) -> String {
        let v: Vec<&str> = self.networks.iter().map(|n| n.as_str()).collect();
        v.join(", ")
    }
    fn max_lifetime_minutes(&self) -> u64 {
        (self.max_lifetime_ms / 60_000).max(1)
    }
}

/// Minutes or hours, the way a retention is said.
fn human_minutes(ms: u64) -> String {
    let min = ms / 60_000;
    if ms < 60_000 {
        format!("{} s", ms.div_ceil(1000))
    } else if min >= 120 && min.is_multiple_of(60) {
        format!("{} h", min / 60)
    } else {
        format!("{min} min")
    }
}

/// The `computer` property every family tool gets (the retention is
/// stated once, in computer_new's description).
pub fn computer_property() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "From computer_new; default: yours.",
    })
}

/// Add the `computer` property to a family tool's input schema.
pub fn with_computer_arg(mut tool: Tool) -> Tool {
    let mut schema: JsonObject = tool.input_schema.as_ref().clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(COMPUTER_ARG.into(), computer_property());
    }
    tool.input_schema = Arc::new(schema);
    tool
}

// ----------------------------------------------------------------- the trait

/// A new computer as a model asked for it, checked against the policy.
#[derive(Clone, Debug, PartialEq)]
pub struct NewComputer {
    pub name: Option<String>,
    pub kind: SettingKind,
    pub lifetime_ms: u64,
    pub network: NetworkChoice,
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub pids: Option<u64>,
    /// A snapshot's name or handle to start from.
    pub from: Option<String>,
}

/// One of a caller's computers, as computer_list shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComputerSummary {
    /// Its handle: pass it as `computer` to any tool.
    pub handle: String,
    /// Its name (`default` for the default computer), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its kind (`sandbox`).
    pub kind: String,
    /// Whether it is the caller's default computer (the one calls without `computer` use).
    pub default: bool,
    /// Seconds since it was made.
    pub age_seconds: u64,
    /// Seconds since a tool last ran on it through this server; absent when none has yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// When it and everything in it ends (RFC 3339).
    pub deadline: String,
}

impl ComputerSummary {
    /// `build (c-…)`, or the handle alone.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} ({})", self.handle),
            None => self.handle.clone(),
        }
    }
}

/// What the server does for the fleet tools, for one caller.
pub trait Fleet: Send + Sync {
    /// Make a computer (the call waits until it answers).
    fn create(
        &self,
        ask: NewComputer,
    ) -> BoxFuture<'_, std::result::Result<ComputerSummary, String>>;
    /// The caller's computers.
    fn list(&self) -> BoxFuture<'_, std::result::Result<Vec<ComputerSummary>, String>>;
    /// End one of the caller's computers.
    fn release(&self, which: Which)
    -> BoxFuture<'_, std::result::Result<ComputerReleased, String>>;
    /// Pause (`on`) or resume one of the caller's computers.
    fn pause(
        &self,
        which: Which,
        on: bool,
    ) -> BoxFuture<'_, std::result::Result<ComputerSummary, String>>;
    /// Keep one of the caller's computers' files as snapshot `name`.
    fn snapshot(
        &self,
        which: Which,
        name: String,
    ) -> BoxFuture<'_, std::result::Result<SnapshotSummary, String>>;
    /// A link to watch one of the caller's computers, or (`revoke`) every
    /// link to it ended.
    fn view(
        &self,
        which: Which,
        revoke: bool,
    ) -> BoxFuture<'_, std::result::Result<ViewLink, String>>;
    /// Ask a person to take control of one of the caller's computers, and
    /// wait until they give it back or the ask's timeout passes.
    fn takeover(
        &self,
        ask: TakeoverAsk,
    ) -> BoxFuture<'_, std::result::Result<TakeoverOutcome, String>>;
}

// ----------------------------------------------------------------- the tools

/// The fleet tools' names, in listed order.
pub const NAMES: [&str; 3] = ["computer_new", "computer_list", "computer_release"];

/// Whether `name` is a fleet tool.
pub fn is_fleet_tool(name: &str) -> bool {
    NAMES.contains(&name)
        || PAUSE_NAMES.contains(&name)
        || name == VIEW_NAME
        || name == SNAPSHOT_NAME
        || name == TAKEOVER_NAME
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerNewArgs {
    /// A name (1 to 64 of a-z, 0-9, - and _), unique among yours; not `default`.
    pub name: Option<String>,
    /// Its kind; the server's own when left out.
    pub kind: Option<String>,
    /// Minutes it may live (default and most: the server's lifetime).
    pub lifetime_minutes: Option<u64>,
    /// The network it reaches; the server's when left out. A computer may be given less network than the server's, never more.
    pub network: Option<NetworkChoice>,
    /// CPUs (0.25 and up), at most the server's.
    pub cpus: Option<f64>,
    /// Memory in MiB, at most the server's.
    pub memory_mb: Option<u64>,
    /// Most processes and threads at once, at most the server's.
    pub pids: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerListArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerReleaseArgs {
    /// Handle or name (`default`: yours).
    pub computer: String,
}

/// What computer_release answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComputerReleased {
    #[serde(flatten)]
    pub computer: ComputerSummary,
    /// Where it had a read-write share copied in (a provider that cannot bind one): what its copy-back brought to the host folder before the release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_back: Option<CopyBack>,
}

/// A release's copy-back of read-write shares.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CopyBack {
    /// Whether every folder was copied back; when not, each is as it was and the computer is kept until its deadline for `computer-mcp cp --sync`.
    pub done: bool,
    /// Each folder's outcome (files and bytes copied back, written, unchanged, moved aside, kept), or why it was refused.
    pub words: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ComputerListOutput {
    /// Your computers, oldest first.
    pub computers: Vec<ComputerSummary>,
}

/// The fleet tools as listed under `policy`.
pub fn tools(policy: &FleetPolicy) -> Vec<Tool> {
    let idle = human_minutes(policy.idle_ms);
    let max_life = human_minutes(policy.max_lifetime_ms);
    let mut new = make_tool::<ComputerNewArgs, ComputerSummary>(
        "computer_new",
        format!(
            "Make another computer, with its own files and processes. \
Pass its handle or name as `computer` to any tool to run there. \
It lives until computer_release, {idle} without use, or its lifetime ({max_life} unless you ask less); \
it outlives a server restart only if the server keeps computers. \
You may hold {} computers, your default one included. \
Kinds: {}. Networks: {}. For work that must not share a machine.",
            policy.max_computers,
            policy.kinds_text(),
            policy.networks_text(),
        ),
        hints("Make a computer", false, false, false, false),
    );
    let kinds: Vec<Value> = policy
        .kinds
        .iter()
        .map(|k| Value::from(k.as_str()))
        .collect();
    let nets: Vec<Value> = policy
        .networks
        .iter()
        .map(|n| Value::from(n.as_str()))
        .collect();
    let mut schema: JsonObject = new.input_schema.as_ref().clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(
            "kind".into(),
            serde_json::json!({"type": "string", "enum": kinds, "description": format!("Its kind, one of: {}; {} when left out.", policy.kinds_text(), policy.kinds.first().map_or("sandbox", |k| k.as_str()))}),
        );
        props.insert(
            "network".into(),
            serde_json::json!({"type": "string", "enum": nets, "description": format!("The network it reaches, one of: {}; the server's ({}) when left out.", policy.networks_text(), policy.networks.last().map_or("none", |n| n.as_str()))}),
        );
        if let Some(Value::Object(p)) = props.get_mut("lifetime_minutes") {
            p.insert("minimum".into(), Value::from(1));
            p.insert("maximum".into(), Value::from(policy.max_lifetime_minutes()));
        }
    }
    schema.remove("$defs");
    if policy.snapshot {
        snapshot::offer_from(&mut schema);
    }
    new.input_schema = Arc::new(schema);
    let list = make_tool::<ComputerListArgs, ComputerListOutput>(
        "computer_list",
        format!(
            "List your computers: handle, name, kind, age, time since last use, and deadline. \
A computer unused for {idle} is released, so one you made earlier may be gone."
        ),
        hints("List my computers", true, false, true, false),
    );
    let release = make_tool::<ComputerReleaseArgs, ComputerReleased>(
        "computer_release",
        "End a computer now: its files and processes are gone, its handle no longer works. \
Release one when its work is done, to stay under your limit."
            .to_string(),
        hints("Release a computer", false, true, true, false),
    );
    let mut all = vec![new, list, release];
    if policy.pause {
        all.extend(pause::tools());
    }
    if policy.snapshot {
        all.push(snapshot::tool());
    }
    if policy.view {
        all.push(view::tool());
    }
    all
}

/// Check `a` against `policy`: the first argument at fault, named with
/// what it may be.
pub fn check_new(
    a: ComputerNewArgs,
    from: Option<String>,
    policy: &FleetPolicy,
) -> Result<NewComputer> {
    let invalid = |s: String| ToolError::Invalid(format!("computer_new: {s}"));
    if let Some(n) = &a.name {
        check_name("name", n).map_err(invalid)?;
        if n == DEFAULT_NAME {
            return Err(invalid(
                "name \"default\" is your default computer's; choose another".into(),
            ));
        }
        if is_handle(n) {
            return Err(invalid(format!(
                "name {n:?} has a handle's form; choose a name that is not {HANDLE_PREFIX} and hex digits"
            )));
        }
    }
    let kind = match &a.kind {
        None => *policy.kinds.first().unwrap_or(&SettingKind::Sandbox),
        Some(k) => *policy
            .kinds
            .iter()
            .find(|o| o.as_str() == k)
            .ok_or_else(|| {
                invalid(format!(
                    "kind {k:?} is not offered by this server; it offers: {}",
                    policy.kinds_text()
                ))
            })?,
    };
    let lifetime_ms = match a.lifetime_minutes {
        None => policy.max_lifetime_ms,
        Some(0) => {
            return Err(invalid(format!(
                "lifetime_minutes is 0; it is 1 to {}",
                policy.max_lifetime_minutes()
            )));
        }
        Some(m) if m.saturating_mul(60_000) > policy.max_lifetime_ms => {
            return Err(invalid(format!(
                "lifetime_minutes {m} is past this server's most, {} ({})",
                policy.max_lifetime_minutes(),
                human_minutes(policy.max_lifetime_ms)
            )));
        }
        Some(m) => m * 60_000,
    };
    let network = match a.network {
        None => *policy.networks.last().unwrap_or(&NetworkChoice::None),
        Some(n) if policy.networks.contains(&n) => n,
        Some(n) => {
            return Err(invalid(format!(
                "network {:?} is wider than this server allows; it allows: {}",
                n.as_str(),
                policy.networks_text()
            )));
        }
    };
    if let Some(c) = a.cpus
        && !(c.is_finite() && c >= 0.25 && c <= policy.max_cpus)
    {
        return Err(invalid(format!(
            "cpus {c} is out of range; it is 0.25 to {} (this server's)",
            policy.max_cpus
        )));
    }
    if let Some(m) = a.memory_mb
        && !(64..=policy.max_memory_mb).contains(&m)
    {
        return Err(invalid(format!(
            "memory_mb {m} is out of range; it is 64 to {} (this server's)",
            policy.max_memory_mb
        )));
    }
    if let Some(p) = a.pids
        && !(16..=policy.max_pids).contains(&p)
    {
        return Err(invalid(format!(
            "pids {p} is out of range; it is 16 to {} (this server's)",
            policy.max_pids
        )));
    }
    Ok(NewComputer {
        name: a.name,
        kind,
        lifetime_ms,
        network,
        cpus: a.cpus,
        memory_mb: a.memory_mb,
        pids: a.pids,
        from,
    })
}

fn summary_lines(c: &ComputerSummary) -> String {
    let idle = match c.idle_seconds {
        Some(s) => format!("idle {s} s"),
        None => "not used yet".into(),
    };
    format!(
        "{}{}: {}, made {} s ago, {idle}, ends {}",
        c.label(),
        if c.default { " [default]" } else { "" },
        c.kind,
        c.age_seconds,
        c.deadline
    )
}

/// Run fleet tool `name`; None when `name` is not one.
pub async fn call(
    name: &str,
    arguments: Option<JsonObject>,
    policy: &FleetPolicy,
    fleet: &dyn Fleet,
) -> Option<CallToolResult> {
    let args = Value::Object(arguments.unwrap_or_default());
    let r = match name {
        "computer_new" => new(args, policy, fleet).await,
        "computer_list" => list(args, fleet).await,
        "computer_release" => release(args, fleet).await,
        "computer_pause" | "computer_resume" if !policy.pause => Err(ToolError::Refused(format!(
            "{name}: this server's provider cannot pause a computer"
        ))),
        "computer_pause" => pause::call(args, true, fleet).await,
        "computer_resume" => pause::call(args, false, fleet).await,
        SNAPSHOT_NAME if !policy.snapshot => Err(ToolError::Refused(format!(
            "{name}: this server's provider cannot snapshot computers"
        ))),
        SNAPSHOT_NAME => snapshot::call(args, fleet).await,
        VIEW_NAME if !policy.view => Err(ToolError::Refused(format!(
            "{name}: this server serves no viewer (start it with --http, or --viewer 127.0.0.1:0 over stdio)"
        ))),
        VIEW_NAME => view::call(args, policy, fleet).await,
        TAKEOVER_NAME if !policy.takeover() => Err(ToolError::Refused(format!(
            "{name}: this server serves no viewer for a person to take control in (start it with --http, or --viewer 127.0.0.1:0 over stdio), or its computers have no screen"
        ))),
        TAKEOVER_NAME => takeover::call(args, fleet).await,
        _ => return None,
    };
    Some(r.unwrap_or_else(ToolError::into_result))
}

async fn new(mut args: Value, policy: &FleetPolicy, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let from = snapshot::take_from(&mut args, policy.snapshot)?;
    let a: ComputerNewArgs = parse("computer_new", args)?;
    let ask = check_new(a, from, policy)?;
    let made = fleet.create(ask).await.map_err(ToolError::Refused)?;
    let call_it = made.name.as_deref().unwrap_or(&made.handle);
    let text = format!(
        "made {}: a {} computer, ending {} (or after {} without use).\nPass computer: \"{call_it}\" to any tool to run there.",
        made.label(),
        made.kind,
        made.deadline,
        human_minutes(policy.idle_ms),
    );
    Ok(done(text, &made))
}

async fn list(args: Value, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let _: ComputerListArgs = parse("computer_list", args)?;
    let computers = fleet.list().await.map_err(ToolError::Refused)?;
    let text = if computers.is_empty() {
        "you have no computers yet; your default one is made on your first tool call".to_string()
    } else {
        computers
            .iter()
            .map(summary_lines)
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(done(text, &ComputerListOutput { computers }))
}

async fn release(args: Value, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let a: ComputerReleaseArgs = parse("computer_release", args)?;
    let which = Which::parse("computer", &a.computer)
        .map_err(|e| ToolError::Invalid(format!("computer_release: {e}")))?;
    let gone = fleet.release(which).await.map_err(ToolError::Refused)?;
    let label = gone.computer.label();
    let text = match &gone.copied_back {
        None => format!(
            "released {label}: its files and processes are gone, and its handle no longer works"
        ),
        Some(b) if b.done => format!(
            "released {label} after the copy-back of its read-write shares ({}): its files and processes are gone, and its handle no longer works",
            b.words
        ),
        Some(b) => format!(
            "{label} is retired (its handle no longer works), but its read-write shares were NOT copied back ({}), so the computer is kept until its deadline ({}): run `computer-mcp cp --sync {}` from a terminal to copy them back",
            b.words, gone.computer.deadline, gone.computer.handle
        ),
    };
    Ok(done(text, &gone))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "c-0123456789abcdef0123456789abcdef";

    #[test]
    fn a_computer_value_is_a_handle_a_name_or_default_and_nothing_else() {
        assert_eq!(Which::parse("computer", "default"), Ok(Which::Default));
        assert_eq!(Which::parse("computer", H), Ok(Which::Handle(H.into())));
        assert_eq!(
            Which::parse("computer", "build_2-x"),
            Ok(Which::Name("build_2-x".into()))
        );
        // A short c-… is a name (c-build is a fine name).
        assert_eq!(
            Which::parse("computer", "c-build"),
            Ok(Which::Name("c-build".into()))
        );
        let e = Which::parse("computer", "c-0123456789abcdef0123").unwrap_err();
        assert!(e.contains("looks like a handle but is not one"), "{e}");
        assert!(e.contains("32 lowercase hex digits"), "{e}");
        let e = Which::parse("computer", &H.to_uppercase().replace("C-", "c-")).unwrap_err();
        assert!(e.contains("looks like a handle"), "{e}");
        let e = Which::parse("computer", "Build!").unwrap_err();
        assert!(e.starts_with("computer \"Build!\" has 'B'"), "{e}");
        assert!(e.contains("a-z, 0-9, '-' and '_'"), "{e}");
        let e = Which::parse("computer", &"x".repeat(65)).unwrap_err();
        assert_eq!(
            e,
            "computer is 65 bytes; a name is at most 64 (a-z, 0-9, '-' and '_')"
        );
        assert!(Which::parse("computer", &"x".repeat(64)).is_ok());
        let e = Which::parse("computer", "").unwrap_err();
        assert!(e.contains("is empty"), "{e}");
    }

    #[test]
    fn the_computer_argument_is_taken_out_before_the_tool_sees_its_arguments() {
        let mut args = Some(
            serde_json::json!({"argv": ["true"], "computer": "build"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert_eq!(
            take_computer_arg(&mut args),
            Ok(Which::Name("build".into()))
        );
        assert_eq!(args.unwrap().keys().collect::<Vec<_>>(), ["argv"]);
        assert_eq!(take_computer_arg(&mut None), Ok(Which::Default));
        let mut bad = serde_json::json!({"computer": 7}).as_object().cloned();
        let e = take_computer_arg(&mut bad).unwrap_err();
        assert_eq!(e, "computer must be a string (a handle or a name), not 7");
    }

    fn ask(v: Value) -> Result<NewComputer> {
        let a: ComputerNewArgs = parse("computer_new", v)?;
        check_new(a, None, &FleetPolicy::default())
    }

    fn refusal(v: Value) -> String {
        match ask(v) {
            Err(ToolError::Invalid(w)) => w,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn computer_new_takes_the_servers_values_when_left_out() {
        let n = ask(serde_json::json!({"name": "build"})).unwrap();
        assert_eq!(
            n,
            NewComputer {
                name: Some("build".into()),
                kind: SettingKind::Sandbox,
                lifetime_ms: 6 * 3_600_000,
                network: NetworkChoice::None,
                cpus: None,
                memory_mb: None,
                pids: None,
                from: None,
            }
        );
        let n = ask(
            serde_json::json!({"lifetime_minutes": 30, "cpus": 0.5, "memory_mb": 512, "pids": 64}),
        )
        .unwrap();
        assert_eq!(n.lifetime_ms, 30 * 60_000);
        assert_eq!(
            (n.cpus, n.memory_mb, n.pids),
            (Some(0.5), Some(512), Some(64))
        );
    }

    #[test]
    fn computer_new_refuses_each_bad_argument_naming_it_and_the_allowed_values() {
        assert_eq!(
            refusal(serde_json::json!({"kind": "desktop"})),
            "computer_new: kind \"desktop\" is not offered by this server; it offers: sandbox"
        );
        assert_eq!(
            refusal(serde_json::json!({"lifetime_minutes": 361})),
            "computer_new: lifetime_minutes 361 is past this server's most, 360 (6 h)"
        );
        assert_eq!(
            refusal(serde_json::json!({"network": "open"})),
            "computer_new: network \"open\" is wider than this server allows; it allows: none"
        );
        assert!(
            refusal(serde_json::json!({"name": "Big Name"})).contains("name \"Big Name\" has 'B'")
        );
        assert!(refusal(serde_json::json!({"name": "x".repeat(65)})).contains("name is 65 bytes"));
        assert!(
            refusal(serde_json::json!({"name": "default"})).contains("is your default computer's")
        );
        assert!(refusal(serde_json::json!({"name": H})).contains("has a handle's form"));
        assert!(
            refusal(serde_json::json!({"cpus": 3}))
                .contains("cpus 3 is out of range; it is 0.25 to 2")
        );
        assert!(
            refusal(serde_json::json!({"memory_mb": 8192}))
                .contains("memory_mb 8192 is out of range; it is 64 to 4096")
        );
        assert!(
            refusal(serde_json::json!({"pids": 4}))
                .contains("pids 4 is out of range; it is 16 to 1024")
        );
        assert!(
            refusal(serde_json::json!({"lifetime_minutes": 0})).contains("lifetime_minutes is 0")
        );
        assert!(refusal(serde_json::json!({"network": "wide"})).contains("network"));
        assert!(refusal(serde_json::json!({"colour": "red"})).contains("unknown field `colour`"));
        // The server's own network is allowed, and a narrower one.
        let open = FleetPolicy {
            networks: vec![NetworkChoice::None, NetworkChoice::Open],
            ..FleetPolicy::default()
        };
        let a: ComputerNewArgs = parse("computer_new", serde_json::json!({})).unwrap();
        assert_eq!(
            check_new(a, None, &open).unwrap().network,
            NetworkChoice::Open
        );
        let a: ComputerNewArgs =
            parse("computer_new", serde_json::json!({"network": "none"})).unwrap();
        assert_eq!(
            check_new(a, None, &open).unwrap().network,
            NetworkChoice::None
        );
    }

    #[test]
    fn the_fleet_tools_match_their_golden_schemas() {
        let tools = tools(&FleetPolicy {
            pause: true,
            view: true,
            snapshot: true,
            ..FleetPolicy::default()
        });
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [&NAMES[..], &PAUSE_NAMES[..], &[SNAPSHOT_NAME, VIEW_NAME]].concat()
        );
        // Where the provider cannot pause or snapshot, those are not
        // listed, and computer_new takes no `from`.
        let plain = super::tools(&FleetPolicy::default());
        assert_eq!(plain.len(), NAMES.len());
        assert!(
            !plain[0].input_schema["properties"]
                .as_object()
                .unwrap()
                .contains_key(FROM_ARG)
        );
        assert!(
            tools[0].input_schema["properties"]
                .as_object()
                .unwrap()
                .contains_key(FROM_ARG)
        );
        let mut text = serde_json::to_string_pretty(&tools).unwrap();
        text.push('\n');
        computer_testkit::assert_golden("fleet-tools", &text);
        // The retention is stated where a model reads it.
        let d = tools[0].description.as_deref().unwrap();
        assert!(d.contains("30 min without use"), "{d}");
        assert!(d.contains("its lifetime (6 h"), "{d}");
    }
}
