//! exec.run: run a program to its end under its own guard.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::envelope::Bytes64;

/// What every start names (exec.run and process.start): the program, where,
/// with what environment and as whom, as the daemon checks them in one place.
#[derive(Clone, Copy, Debug)]
pub struct Invocation<'a> {
    pub argv: &'a [String],
    pub cwd: Option<&'a str>,
    pub env: Option<&'a BTreeMap<String, String>>,
    pub user: Option<&'a str>,
}

/// Declares the params of a method that starts a program: `argv`, `cwd`,
/// `env` and `user` first, written once here (so their words cannot drift
/// apart between methods), then the method's own fields as they are, and
/// [`Invocation`] to read the four back. `#[serde(flatten)]` would share them
/// as a type, but serde then refuses an unknown field without naming the
/// expected ones; this keeps one plain struct, so the refusal still lists
/// every field.
macro_rules! start_params {
    ($(#[$m:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub struct $name {
            /// The program and its arguments; never a shell string.
            pub argv: Vec<String>,
            /// The working directory (absolute); the user's HOME when absent.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub cwd: Option<String>,
            /// Variables set over PATH, HOME, USER and LOGNAME.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub env: Option<std::collections::BTreeMap<String, String>>,
            /// A user name, or `uid[:gid]`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub user: Option<String>,
            $($own)*
        }

        impl $name {
            /// The program this start names.
            pub fn invocation(&self) -> $crate::protocol::Invocation<'_> {
                $crate::protocol::Invocation {
                    argv: &self.argv,
                    cwd: self.cwd.as_deref(),
                    env: self.env.as_ref(),
                    user: self.user.as_deref(),
                }
            }
        }
    };
}
pub(super) use start_params;

start_params! {
    pub struct ExecParams {
        /// Bytes for the program's stdin, which is closed after them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub stdin: Option<Bytes64>,
        /// Milliseconds from the call, the start included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeout_ms: Option<u64>,
        /// Bytes kept of each of stdout and stderr (default and most 360 KiB).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_output: Option<u64>,
        /// When every process the computer's pids bound allows is in use, wait
        /// up to this long (at most 3 600 000, and within timeoutMs) for room,
        /// queued behind earlier starts, instead of being refused at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub queue_ms: Option<u64>,
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// The program's exit code; absent when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended the program, without SIG: `TERM`, `KILL`, or its number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub stdout: Bytes64,
    pub stderr: Bytes64,
    pub timed_out: bool,
    /// True when either stream had more than maxOutput bytes.
    pub truncated: bool,
}
