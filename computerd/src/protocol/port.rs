//! port.*: a TCP connection to a port on the computer's own loopback,
//! carried over this daemon connection (a preview of a server the computer
//! runs). The daemon connects from inside the computer's network namespace,
//! so a computer with network `none` serves a preview and gains no route
//! out. Bytes go as frames: port.write's `data` after its line, and
//! port.read's reply `data` when the caller asks (`replyBytes`).

use serde::{Deserialize, Serialize};

use super::envelope::{Bytes64, WithData};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortConnectParams {
    /// A TCP port on the computer's loopback (127.0.0.1), 1 to 65535.
    pub port: u32,
}

/// `{id}`: the connection, for port.read, port.write and port.close.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PortStreamId {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortReadParams {
    pub id: String,
    /// Default and most 512 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Wait up to this long (at most 30 000) for bytes; none by then is an
    /// empty answer, not the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PortReadResult {
    pub data: Bytes64,
    /// The server in the computer closed its side: nothing more will come.
    pub eof: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortWriteParams {
    pub id: String,
    /// The next bytes for the server (at most 512 KiB).
    #[serde(default)]
    pub data: Bytes64,
    /// Close the sending side after the data (the server reads its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortCloseParams {
    pub id: String,
}

impl WithData for PortReadResult {
    fn data_mut(&mut self) -> &mut Bytes64 {
        &mut self.data
    }
}

impl WithData for PortWriteParams {
    fn data_mut(&mut self) -> &mut Bytes64 {
        &mut self.data
    }
}
