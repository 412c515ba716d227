//! hello, ping, deadline.extend and `$/cancelRequest`.

use serde::{Deserialize, Serialize};

use super::envelope::Id;
use super::kinds::{Group, MachineKind, known_groups};

/// An empty object, the result of methods that answer nothing but success.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HelloParams {
    /// The caller's name, for the daemon's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HelloResult {
    /// The daemon's version.
    pub version: String,
    /// The platform: `linux`.
    pub os: String,
    /// The machine kind: `linux` (or `desktop` with a display).
    pub kind: MachineKind,
    /// `amd64` or `arm64`.
    pub arch: String,
    /// The capability groups this daemon answers. A client leaves out the
    /// names it does not know (a newer daemon's).
    #[serde(deserialize_with = "known_groups")]
    pub groups: Vec<Group>,
    /// Present when the daemon reads and writes bytes frames (raw bytes
    /// after a line, see the envelope's `bytes`): the most one may carry.
    /// A client sends frames only to a daemon that says this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_frames: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PingParams {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeadlineExtendParams {
    /// The new deadline, an RFC 3339 time.
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeadlineExtendResult {
    /// The deadline init holds after the call, RFC 3339 in UTC.
    pub at: String,
}

/// Params of the `$/cancelRequest` notification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub id: Id,
}
