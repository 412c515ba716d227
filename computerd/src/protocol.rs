//! The wire protocol of `computerd`: JSON-RPC 2.0, one JSON object per line.
//!
//! This module is the single definition of every method's params and result,
//! used by the daemon and by every client. Field names are camelCase on the
//! wire; params refuse unknown fields. Byte payloads travel as base64
//! ([`Bytes64`]). Every limit is a named constant in [`limits`].
//!
//! - [`Envelope`]: the one message shape, request, notification or reply.
//! - [`RpcError`], [`ErrorKind`]: the error object `{code, message, data: {kind}}`.
//! - [`Call`]: ties a params type to its method name and result type.
//! - [`decode_params`]: params from JSON, with errors that name the field.
//! - [`ProbeReport`]: the one JSON line `computerd probe` prints (no method:
//!   providers run the probe through exec.run and parse its stdout).

mod envelope;
mod exec;
mod files;
mod kinds;
mod lifecycle;
pub mod limits;
mod probe;
mod process;
mod tar;

pub use envelope::{
    Bytes64, Call, Envelope, ErrorData, ErrorKind, INVALID_REQUEST, Id, METHOD_NOT_FOUND,
    PARSE_ERROR, RpcError, decode_params,
};
pub use exec::{ExecParams, ExecResult};
pub use files::{
    FileStat, FileType, FilesListParams, FilesListResult, FilesMkdirParams, FilesMoveParams,
    FilesReadParams, FilesReadResult, FilesRemoveParams, FilesStatParams, FilesWriteParams,
    FilesWriteResult, ListEntry,
};
pub use kinds::{KindRow, MachineKind, SETTING_KINDS, SettingKind, serves, serving_refusals};
pub use lifecycle::{
    CancelParams, DeadlineExtendParams, DeadlineExtendResult, Empty, HelloParams, HelloResult,
    PingParams,
};
pub use probe::{
    DEFAULT_PROBE_TARGETS, DIAGNOSE_ANSWER_MS, DIAGNOSE_CONNECT_MS, DIAGNOSE_TARGETS,
    DIAGNOSE_TOTAL_MS, PROBE_ANSWER_MS, PROBE_CONNECT_MS, PROBE_READ_BYTES, PROBE_TOTAL_MS,
    ProbeOutcome, ProbeProtocol, ProbeReport, ProbeResult, ProbeTarget, ProbeVerdict, parse_target,
    targets_with,
};
pub use process::{
    Orphans, ProcessInfo, ProcessListParams, ProcessListResult, ProcessReadParams,
    ProcessReadResult, ProcessResizeParams, ProcessSignalParams, ProcessSignalResult,
    ProcessStartParams, ProcessStartResult, ProcessWaitParams, ProcessWaitResult,
    ProcessWriteParams, PtySize, Signal, Stream,
};
pub use tar::{
    TarPullBeginParams, TarPullEndParams, TarPullReadParams, TarPullReadResult, TarPushBeginParams,
    TarPushEndParams, TarPushEndResult, TarPushWriteParams, TarStreamId,
};

/// The method names, exactly as they travel on the wire.
pub mod method {
    pub const HELLO: &str = "hello";
    pub const PING: &str = "ping";
    pub const EXEC_RUN: &str = "exec.run";
    pub const FILES_READ: &str = "files.read";
    pub const FILES_WRITE: &str = "files.write";
    pub const FILES_STAT: &str = "files.stat";
    pub const FILES_LIST: &str = "files.list";
    pub const FILES_MKDIR: &str = "files.mkdir";
    pub const FILES_MOVE: &str = "files.move";
    pub const FILES_REMOVE: &str = "files.remove";
    pub const TAR_PULL_BEGIN: &str = "tar.pull.begin";
    pub const TAR_PULL_READ: &str = "tar.pull.read";
    pub const TAR_PULL_END: &str = "tar.pull.end";
    pub const TAR_PUSH_BEGIN: &str = "tar.push.begin";
    pub const TAR_PUSH_WRITE: &str = "tar.push.write";
    pub const TAR_PUSH_END: &str = "tar.push.end";
    pub const PROCESS_START: &str = "process.start";
    pub const PROCESS_READ: &str = "process.read";
    pub const PROCESS_WRITE: &str = "process.write";
    pub const PROCESS_SIGNAL: &str = "process.signal";
    pub const PROCESS_RESIZE: &str = "process.resize";
    pub const PROCESS_LIST: &str = "process.list";
    pub const PROCESS_WAIT: &str = "process.wait";
    pub const DEADLINE_EXTEND: &str = "deadline.extend";
    /// A notification (no id): cancel the request with the given id.
    pub const CANCEL_REQUEST: &str = "$/cancelRequest";

    /// Every request method the daemon answers today.
    pub const ALL: &[&str] = &[
        HELLO,
        PING,
        EXEC_RUN,
        FILES_READ,
        FILES_WRITE,
        FILES_STAT,
        FILES_LIST,
        FILES_MKDIR,
        FILES_MOVE,
        FILES_REMOVE,
        TAR_PULL_BEGIN,
        TAR_PULL_READ,
        TAR_PULL_END,
        TAR_PUSH_BEGIN,
        TAR_PUSH_WRITE,
        TAR_PUSH_END,
        PROCESS_START,
        PROCESS_READ,
        PROCESS_WRITE,
        PROCESS_SIGNAL,
        PROCESS_RESIZE,
        PROCESS_LIST,
        PROCESS_WAIT,
        DEADLINE_EXTEND,
    ];
}

/// Capability groups a computer declares (hello's `groups`).
pub mod group {
    pub const EXEC: &str = "exec";
    pub const FILES: &str = "files";
    pub const PROCESSES: &str = "processes";
    pub const SCREEN: &str = "screen";
    pub const INPUT_POINTER: &str = "input.pointer";
    pub const INPUT_KEYS: &str = "input.keys";
    pub const INPUT_TOUCH: &str = "input.touch";
    pub const APPS: &str = "apps";
    pub const APPS_INSTALL: &str = "apps.install";
    pub const APPS_UI_TREE: &str = "apps.ui_tree";
    pub const CDP: &str = "cdp";
    pub const STREAM: &str = "stream";
    pub const DOWNLOADS: &str = "downloads";
}

/// Check that a path on the wire is absolute and clean it lexically: `.` and
/// empty parts go, `..` takes the part before it (never above `/`). A path
/// that is relative, empty or holds a NUL byte is refused, naming `field`.
pub fn clean_path(field: &str, path: &str) -> Result<String, RpcError> {
    if path.is_empty() {
        return Err(RpcError::invalid_field(
            field,
            format!("{field} is empty; give an absolute path such as /tmp/x"),
        ));
    }
    if path.contains('\0') {
        return Err(RpcError::invalid_field(
            field,
            format!("{field} holds a NUL byte"),
        ));
    }
    if !path.starts_with('/') {
        return Err(RpcError::invalid_field(
            field,
            format!("{field} must be an absolute path (starting with /), got {path:?}"),
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = String::with_capacity(path.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_path_resolves_dots_and_refuses_relative() {
        assert_eq!(clean_path("path", "/a/./b//c/../d/").unwrap(), "/a/b/d");
        assert_eq!(clean_path("path", "/../..").unwrap(), "/");
        assert_eq!(clean_path("path", "/").unwrap(), "/");
        let err = clean_path("path", "a/b").unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid));
        assert!(err.message.contains("absolute"), "{}", err.message);
        assert!(
            clean_path("cwd", "/a\0b")
                .unwrap_err()
                .message
                .contains("cwd holds a NUL")
        );
    }

    #[test]
    fn method_table_has_no_duplicates() {
        let mut all = method::ALL.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), method::ALL.len());
    }
}
