//! cdp.*: a browser's DevTools protocol, carried for a computer that
//! declares the group `cdp`. computerd never answers these itself: the
//! provider's in-process client does (a vendor's browser over its CDP
//! WebSocket, or a Chromium the computer runs over its debugging pipe), so
//! the page tools see the same `ComputerClient` seam as for every other
//! computer.
//!
//! `cdp.send` is one CDP command and its result. `cdp.events` reads the
//! events the client kept (a bounded ring, oldest dropped first), waiting
//! for one when asked: a tool waits for `Page.loadEventFired` or reads the
//! console this way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One CDP command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CdpSendParams {
    /// "Page.navigate", "Runtime.evaluate", ...
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// The target session (from `Target.attachToTarget` with flatten);
    /// none for the browser itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// How long the browser gets to answer; default and most
    /// [`limits::CDP_SEND_MAX_MS`](super::limits::CDP_SEND_MAX_MS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// What a client that runs the browser itself says, in an `aborted`
/// error, when the browser ended or was ended (stuck): the next call
/// starts a new one, with no page of the old one open.
pub const BROWSER_STARTS_AGAIN: &str = "the next call starts it again, with no page open";

/// What the browser answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CdpSendResult {
    pub result: Value,
}

/// Read the events kept since `since`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CdpEventsParams {
    /// Events with a sequence number at least this (the previous reply's
    /// `next`); 0 or none for every event kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Only events whose method is one of these, or starts with one that
    /// ends in "." ("Network.", "Page.loadEventFired").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
    /// Only events of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Wait up to this long (at most
    /// [`limits::CDP_EVENTS_WAIT_MAX_MS`](super::limits::CDP_EVENTS_WAIT_MAX_MS))
    /// for a matching event when none is kept yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// At most this many events (default and most
    /// [`limits::CDP_EVENTS_MAX`](super::limits::CDP_EVENTS_MAX)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// One event the browser sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CdpEvent {
    /// 1, 2, ... in the order the browser sent them.
    pub seq: u64,
    pub method: String,
    pub params: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CdpEventsResult {
    pub events: Vec<CdpEvent>,
    /// `since` for the next read.
    pub next: u64,
    /// Events past `since` the ring let go of before this read.
    pub dropped: u64,
}
