//! What a computer is made from, what a provider says it can do, and the
//! error every provider call answers with.

use std::collections::BTreeMap;
use std::fmt;

use computerd::protocol::{Group, MachineKind, SettingKind};
use serde::{Deserialize, Serialize};

/// Labels: small key/value strings a computer carries, to find it again.
pub type Labels = BTreeMap<String, String>;

/// The label keys computer-mcp sets on every computer it makes.
pub mod label {
    /// The server instance that made the computer.
    pub const INSTANCE: &str = "computer-mcp.instance";
    /// The MCP session the computer belongs to.
    pub const SESSION: &str = "computer-mcp.session";
    /// The computer's deadline, RFC 3339.
    pub const DEADLINE: &str = "computer-mcp.deadline";
    /// The handle the server minted for the computer (what a model passes
    /// as `computer`): opaque, random, never the provider's id.
    pub const HANDLE: &str = "computer-mcp.handle";
    /// The name the model gave the computer (`build`), if it gave one.
    pub const NAME: &str = "computer-mcp.name";
    /// Whose computer it is: a hash of the caller's identity (a bearer
    /// token's, or a stdio server's instance), never the token itself.
    pub const PRINCIPAL: &str = "computer-mcp.principal";
    /// The setting kind it was made as (`sandbox`).
    pub const KIND: &str = "computer-mcp.kind";
    /// Which default computer it is, when it is one: `session` (one MCP
    /// session's) or `principal` (the caller's, for stateless clients).
    pub const DEFAULT: &str = "computer-mcp.default";
    /// `1` when the server that made it keeps computers past its sessions
    /// (`--keep`).
    pub const KEEP: &str = "computer-mcp.keep";
    /// Marks a computer computer-mcp made (`1`), on providers whose
    /// containers share an engine with others (Docker).
    pub const COMPUTER: &str = "computer-mcp.computer";
    /// The run a computer belongs to (see `janitor::release_older`).
    pub const RUN: &str = "computer-mcp.run";
    /// The claim epoch of the runner that made it, in decimal.
    pub const EPOCH: &str = "computer-mcp.epoch";
    /// On a Docker image built from a recipe: the recipe's whole sha256.
    pub const RECIPE: &str = "computer-mcp.recipe";
}

/// The network a computer may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "mode", content = "hosts")]
pub enum NetworkPolicy {
    /// Nothing but its own loopback.
    #[default]
    None,
    /// Whatever the host reaches.
    Open,
    /// Only these hosts (host or host:port).
    Allow(Vec<String>),
}

impl NetworkPolicy {
    pub fn kind(&self) -> NetworkKind {
        match self {
            NetworkPolicy::None => NetworkKind::None,
            NetworkPolicy::Open => NetworkKind::Open,
            NetworkPolicy::Allow(_) => NetworkKind::Allow,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkKind {
    None,
    Open,
    Allow,
}

impl fmt::Display for NetworkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NetworkKind::None => "none",
            NetworkKind::Open => "open",
            NetworkKind::Allow => "allow",
        })
    }
}

/// Sizes a computer is made with; a provider refuses one it cannot honour.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sizes {
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub disk_mb: Option<u64>,
    pub pids: Option<u64>,
}

/// What a computer is made from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ComputerSpec {
    pub kind: SettingKind,
    /// The image to start from; a provider without images refuses one.
    pub image: Option<String>,
    /// How long the computer may live, from its creation.
    pub lifetime_ms: u64,
    /// The most an extend may take its life to, from its creation (the
    /// server's `--lifetime`, whatever a computer of the fleet was made
    /// with); none: its `lifetime_ms`. A provider that can extend gives its
    /// daemon this bound, so nothing, a program of the computer included,
    /// moves its deadline past it.
    #[serde(default)]
    pub max_lifetime_ms: Option<u64>,
    pub network: NetworkPolicy,
    pub labels: Labels,
    /// A host directory to mount (bind), where the provider can.
    pub mount: Option<MountSpec>,
    /// Host directories shown at `/workspace` (each checked before anything
    /// is made), where the provider can.
    #[serde(default)]
    pub shares: Vec<crate::share::ShareArg>,
    /// The user programs run as (uid:gid); the provider's default when absent.
    pub user: Option<String>,
    pub sizes: Sizes,
    /// The snapshot the computer is forked from (`computer_new {from}`).
    /// A provider whose vendor keeps snapshots itself (E2B) starts the
    /// computer from it at create; the others make a fresh one here and
    /// fill it in [`crate::Provider::restore`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<crate::snapshot::Snapshot>,
}

impl ComputerSpec {
    /// A sandbox with no network, for `lifetime_ms`.
    pub fn sandbox(lifetime_ms: u64) -> Self {
        Self {
            kind: SettingKind::Sandbox,
            image: None,
            lifetime_ms,
            max_lifetime_ms: None,
            network: NetworkPolicy::None,
            labels: Labels::new(),
            mount: None,
            shares: Vec::new(),
            user: None,
            sizes: Sizes::default(),
            from: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MountSpec {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// A computer a provider made, as it can be found again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputerRef {
    pub provider: String,
    pub id: String,
    pub labels: Labels,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; the computer ends itself then.
    pub deadline: String,
    /// Whether it still runs, as the provider last saw it.
    pub running: bool,
    /// Whether its programs are stopped where they were by a pause
    /// (`computer_pause`: the cgroup freezer, `docker pause`), as read from
    /// what holds them; a paused computer answers nothing until resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The programs' HOME (absolute), where the provider knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The user programs run as (uid:gid), where the provider knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The bounds it is held to, read back from what enforces them (the
    /// cgroup's files, the engine's inspect); none where the provider
    /// bounds no size or cannot read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<SizesReadBack>,
    /// The image it runs, as read back from what runs it (Docker: the
    /// inspect's Config.Image); none where the provider runs no image (the
    /// local provider runs this machine's own system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The network as read back with the rest, where the provider reads
    /// it there (Docker: an allowlist from its proxy too); none where it
    /// is read by [`crate::Provider::network`] alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkRead>,
}

impl ComputerRef {
    /// A running computer named by its id alone: no labels, no times and
    /// nothing read back, as one is named by a caller that holds only the id.
    pub fn by_id(provider: impl Into<String>, id: impl Into<String>) -> Self {
        ComputerRef {
            provider: provider.into(),
            id: id.into(),
            running: true,
            ..ComputerRef::default()
        }
    }
}

/// A network as read back with a computer: a policy's read-back, or the
/// words for one that is none of the policies (never reported as one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NetworkRead {
    Policy(NetworkReadBack),
    Other(String),
}

impl NetworkRead {
    /// A read-back, or its refusal's words.
    pub fn of(read: Result<NetworkReadBack>) -> Self {
        match read {
            Ok(r) => NetworkRead::Policy(r),
            Err(e) => NetworkRead::Other(e.message),
        }
    }
}

/// A computer's bounds as read back.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SizesReadBack {
    /// CPUs of time per wall second (1.5 is 150 ms every 100 ms).
    pub cpus: f64,
    /// Memory, swap included, in MiB.
    pub memory_mb: u64,
    /// Processes and threads at once.
    pub pids: u64,
}

/// What create returns: the computer, its network as read back, and notes
/// for the model.
#[derive(Clone, Debug)]
pub struct Created {
    pub computer: ComputerRef,
    /// The network as read back from the new computer; `None` where the
    /// provider cannot read it (its capabilities say so).
    pub network: Option<NetworkReadBack>,
    pub notes: Vec<String>,
}

/// How to find a computer again.
#[derive(Clone, Debug)]
pub enum AttachBy {
    Id(String),
    Labels(Labels),
}

/// How to let a computer go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Release {
    /// End its programs, keep its files (listed as stopped until deleted).
    Stop,
    /// End it and remove everything it had.
    Delete,
}

/// Who answers the protocol's methods in a computer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaemonMode {
    /// `computerd init` is the computer's first process.
    Pid1,
    /// Another agent is first and started init.
    Child,
    /// No daemon: the provider answers in process.
    None,
}

/// Who ends a computer at its lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LifetimeMode {
    /// The computer ends itself (init's deadline, a vendor timer).
    Enforced,
    /// A sweep must end it.
    Janitor,
}

/// What a provider offers, stated truthfully.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub kind: MachineKind,
    pub os: String,
    pub daemon: DaemonMode,
    pub groups: Vec<Group>,
    pub lifetime: LifetimeMode,
    pub release: Vec<Release>,
    pub max_lifetime_ms: u64,
    pub networks: Vec<NetworkKind>,
    /// The provider reads a computer's network back rather than assuming it.
    pub network_read_back: bool,
    /// What keeps a computer from its host, in words.
    pub isolation: String,
    pub extend: bool,
    /// How a host directory given as a share (`--share`) reaches the
    /// computer.
    #[serde(default)]
    pub shares: ShareWay,
}

/// How a provider's computers see a host directory shared with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShareWay {
    /// Bound where it is: the computer reads and writes the host's own
    /// files (local, Docker; a phone's files are read on this side).
    Bind,
    /// The computer is made elsewhere (a vendor, a cluster): the server
    /// copies the directory in at creation through the daemon's `tar.*`
    /// methods, and a read-write one back at release and on
    /// `computer-mcp cp --sync`. The provider itself never sees it.
    Copy,
    /// No share at all (a vendor's browser): refused.
    #[default]
    None,
}

/// A computer's network, read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkReadBack {
    pub kind: NetworkKind,
    /// What was read, in words: "only lo; no route".
    pub detail: String,
}

/// "none (only lo; no route)": the kind, then what was read.
impl fmt::Display for NetworkReadBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.detail)
    }
}

/// The codes a provider's failure carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed (a field, a limit).
    Invalid,
    /// The provider cannot do this at all.
    Unsupported,
    NotFound,
    /// The computer ended behind the caller's back.
    Gone,
    /// The provider or the computer did not answer.
    Unreachable,
    /// The provider refused (the host cannot give what was asked).
    Refused,
    Unauthorized,
    Timeout,
    Aborted,
    Limit,
    /// Something failed that should not have.
    Failed,
}

/// Every expected failure of a provider: a code and words that never hold a
/// key, a token or a signed URL.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
pub struct ProviderError {
    pub code: ErrorCode,
    pub message: String,
    /// The spec or option field at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ProviderError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
        }
    }
    pub fn with_field(mut self, field: &str) -> Self {
        self.field = Some(field.to_string());
        self
    }
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, message).with_field(field)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Refused, message)
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Gone, message)
    }
}

pub type Result<T, E = ProviderError> = std::result::Result<T, E>;

/// The rule every check() shares: a whole number of milliseconds above 0,
/// at most the provider's cap, refused in words with no vendor call.
pub fn check_lifetime(lifetime_ms: u64, caps: &Capabilities) -> Result<()> {
    if lifetime_ms == 0 {
        return Err(ProviderError::invalid(
            "lifetime",
            "lifetime must be above 0 ms",
        ));
    }
    if lifetime_ms > caps.max_lifetime_ms {
        return Err(ProviderError::invalid(
            "lifetime",
            format!(
                "lifetime {} is over this provider's most, {}",
                human_ms(lifetime_ms),
                human_ms(caps.max_lifetime_ms)
            ),
        ));
    }
    Ok(())
}

/// "90 s", "15 min", "2 h", "3 d" for a message.
pub fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    if !ms.is_multiple_of(1000) || s < 120 {
        return format!("{ms} ms");
    }
    if s.is_multiple_of(86_400) {
        return format!("{} d", s / 86_400);
    }
    if s.is_multiple_of(3600) {
        return format!("{} h", s / 3600);
    }
    if s.is_multiple_of(60) {
        return format!("{} min", s / 60);
    }
    format!("{s} s")
}

/// Refuse what a computer that is not made on a host takes (a vendor's
/// browser, a phone): a mount, shared directories, a user, sizes. `what`
/// names the computer ("a Kernel browser").
pub fn refuse_host_parts(spec: &ComputerSpec, what: &str) -> Result<()> {
    let refusal = if spec.mount.is_some() {
        Some(("mount", format!("{what} takes no mount")))
    } else if !spec.shares.is_empty() {
        Some(("shares", format!("{what} takes no shared directory")))
    } else if spec.user.is_some() {
        Some(("user", format!("{what} has no user to choose")))
    } else if spec.sizes != Sizes::default() {
        Some(("sizes", format!("{what}'s size is its own; give no sizes")))
    } else {
        None
    };
    match refusal {
        Some((field, words)) => Err(ProviderError::invalid(field, words)),
        None => Ok(()),
    }
}

/// Label rules: 1 to 63 bytes of key in `[a-z0-9._/-]`, a value of at most
/// 255 printable ASCII bytes, at most 32 labels.
pub fn check_labels(labels: &Labels) -> Result<()> {
    if labels.len() > 32 {
        return Err(ProviderError::invalid(
            "labels",
            format!("{} labels; the most is 32", labels.len()),
        ));
    }
    for (k, v) in labels {
        let key_ok = !k.is_empty()
            && k.len() <= 63
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._/-".contains(&b));
        if !key_ok {
            return Err(ProviderError::invalid(
                "labels",
                format!(
                    "label key {k:?} must be 1 to 63 characters of a-z, 0-9, '.', '_', '/' and '-'"
                ),
            ));
        }
        if v.len() > 255 || !v.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(ProviderError::invalid(
                "labels",
                format!("label {k}'s value must be at most 255 printable ASCII characters"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(max: u64) -> Capabilities {
        Capabilities {
            kind: MachineKind::Linux,
            os: "linux".into(),
            daemon: DaemonMode::Pid1,
            groups: vec![],
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Delete],
            max_lifetime_ms: max,
            networks: vec![NetworkKind::None],
            network_read_back: true,
            isolation: "test".into(),
            extend: false,
            shares: crate::types::ShareWay::None,
        }
    }

    #[test]
    fn lifetimes_above_zero_and_within_the_cap_pass() {
        assert!(check_lifetime(60_000, &caps(3_600_000)).is_ok());
        let e = check_lifetime(0, &caps(3_600_000)).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            (ErrorCode::Invalid, Some("lifetime"))
        );
        let e = check_lifetime(3_600_001, &caps(3_600_000)).unwrap_err();
        assert_eq!(
            e.message,
            "lifetime 3600001 ms is over this provider's most, 1 h"
        );
    }

    #[test]
    fn label_rules_name_the_bad_label() {
        let mut l = Labels::new();
        l.insert(label::SESSION.into(), "abc-123".into());
        assert!(check_labels(&l).is_ok());
        l.insert("Bad Key".into(), "x".into());
        assert!(
            check_labels(&l)
                .unwrap_err()
                .message
                .contains("\"Bad Key\"")
        );
    }

    #[test]
    fn network_policy_reads_as_written() {
        let p: NetworkPolicy = serde_json::from_str(r#"{"mode":"none"}"#).unwrap();
        assert_eq!(p, NetworkPolicy::None);
        let p: NetworkPolicy =
            serde_json::from_str(r#"{"mode":"allow","hosts":["pypi.org"]}"#).unwrap();
        assert_eq!(p.kind(), NetworkKind::Allow);
    }
}

/// What a computer has used so far, as its provider reads it from what
/// runs it (a receipt's figures): none where the provider cannot tell.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Used {
    /// CPU seconds its programs have used, user and system.
    pub cpu_seconds: Option<f64>,
    /// The most memory it has held at once, in bytes.
    pub peak_memory_bytes: Option<u64>,
}
