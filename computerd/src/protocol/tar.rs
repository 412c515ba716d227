//! tar.pull.* and tar.push.*: whole trees in and out, a chunk per call.

use serde::{Deserialize, Serialize};

use super::envelope::{Bytes64, WithData};

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
    /// Where the read starts in the archive. With it, reads may be sent
    /// without waiting for each other's answers: a read ahead of the bytes
    /// returned waits for the reads before it (at most 16 MiB ahead), one
    /// at bytes already returned is refused, and one past the end gets the
    /// end. Every read but the last returns `maxBytes` bytes, so the next
    /// offset is known. Without it, a read follows the bytes returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
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
    /// Where `data` starts in the archive. With it, writes may be sent
    /// without waiting for each other's answers: each is extracted in
    /// order, a write ahead of the bytes received waits for those before it
    /// (at most 16 MiB ahead), and one at bytes already written is refused.
    /// Without it, a write's bytes follow those already received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
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

impl WithData for TarPullReadResult {
    fn data_mut(&mut self) -> &mut Bytes64 {
        &mut self.data
    }
}

impl WithData for TarPushWriteParams {
    fn data_mut(&mut self) -> &mut Bytes64 {
        &mut self.data
    }
}
