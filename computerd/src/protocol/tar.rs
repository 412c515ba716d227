//! tar.pull.* and tar.push.*: whole trees in and out, a chunk per call.

use serde::{Deserialize, Serialize};

use super::envelope::Bytes64;

/// `{id}`: what a begin returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TarStreamId {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPullBeginParams {
    /// A file (one entry, its name) or a directory (entries relative to it).
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPullReadParams {
    pub id: String,
    /// Default and most 512 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TarPullReadResult {
    pub data: Bytes64,
    /// True once the archive has been read to its end.
    pub eof: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPullEndParams {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPushBeginParams {
    /// The directory to extract into; made when missing.
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPushWriteParams {
    pub id: String,
    /// The next bytes of the archive (at most 512 KiB).
    pub data: Bytes64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TarPushEndParams {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TarPushEndResult {
    /// Entries extracted.
    pub entries: u64,
}
