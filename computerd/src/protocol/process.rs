//! process.*: programs that keep running after their call returns.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::envelope::Bytes64;
use super::exec::start_params;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PtySize {
    pub cols: u16,
    pub rows: u16,
}

/// `orphans: "keep"`: what the process started and left running is not ended with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Orphans {
    Keep,
}

start_params! {
    pub struct ProcessStartParams {
        /// Run in a terminal of this size; stdout and stderr are then one `pty` stream.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pty: Option<PtySize>,
        /// Give the program a stdin pipe for process.write (else /dev/null).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub stdin: Option<bool>,
        /// An absolute path for a new file that gets the first 16 MiB of output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub log: Option<String>,
        /// Run until the program and every process left in its group have ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wait_group: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub orphans: Option<Orphans>,
        /// Wait up to this long (at most 30 000) for the program to end: one
        /// that ends within it is answered with how it ended and the first of
        /// its output (`ended`), so a short program costs one round trip.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wait_ms: Option<u64>,
        /// When every process the computer's pids bound allows is in use, wait
        /// up to this long (at most 3 600 000) for room, queued behind earlier
        /// starts, instead of being refused at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub queue_ms: Option<u64>,
        /// Keep every byte of stdout: while what no read has reached yet
        /// fills its ring, the program's writes wait (a pipe's own
        /// backpressure) instead of the oldest output being let go. For a
        /// reader that reads all of it in order (a browser's debugging pipe).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hold: Option<bool>,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessStartResult {
    /// `p1`, `p2`, ...
    pub id: String,
    /// The program's pid.
    pub pid: i32,
    /// With waitMs: the program ended within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<ProcessEnded>,
}

/// How a program started with waitMs ended, and the first of its output:
/// what process.wait and a process.read of each stream from offset 0 would
/// have answered (no output read for a program in a terminal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessEnded {
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<ProcessReadResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<ProcessReadResult>,
}

/// Which output a read is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    Pty,
    Log,
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Pty => "pty",
            Stream::Log => "log",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessReadParams {
    pub id: String,
    pub stream: Stream,
    /// Bytes since the process started; the previous read's nextOffset.
    pub offset: u64,
    /// Default and most 512 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Wait up to this long (at most 30 000) when nothing past offset has come yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessReadResult {
    pub data: Bytes64,
    pub next_offset: u64,
    /// Bytes between offset and what could still be read, lost to the ring.
    pub dropped: u64,
    /// The process has ended and nothing is left past nextOffset.
    pub exited: bool,
    /// The stream's bytes so far, kept or dropped.
    pub size: u64,
    /// The log only: output past its 16 MiB was dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<bool>,
    /// The log only: why writing it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessWriteParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Bytes64>,
    /// Close stdin after the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<bool>,
}

/// The signals process.signal sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
pub enum Signal {
    #[serde(rename = "TERM")]
    Term,
    #[serde(rename = "INT")]
    Int,
    #[serde(rename = "KILL")]
    Kill,
    #[serde(rename = "HUP")]
    Hup,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Int => "INT",
            Signal::Kill => "KILL",
            Signal::Hup => "HUP",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessSignalParams {
    pub id: String,
    pub signal: Signal,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessSignalResult {
    /// Said when the signal went somewhere other than asked, or not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessResizeParams {
    pub id: String,
    pub cols: u16,
    pub rows: u16,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessListParams {
    /// List from this id on (the previous reply's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    pub id: String,
    pub pid: i32,
    pub argv: Vec<String>,
    pub argv_clipped: bool,
    pub pty: bool,
    pub running: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    pub ended_at: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessListResult {
    pub processes: Vec<ProcessInfo>,
    pub truncated: bool,
    /// When truncated: list again with `from` set to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessWaitParams {
    pub id: String,
    /// 0 to a day.
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessWaitResult {
    /// True when the wait timed out with the process still running.
    pub running: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}
