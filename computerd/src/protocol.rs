//! The wire protocol of `computerd`: JSON-RPC 2.0, one JSON object per line.
//!
//! This module is the single definition of every method's params and result,
//! used by the daemon and by every client. Field names are camelCase on the
//! wire; params refuse unknown fields. Byte payloads travel as base64
//! ([`Bytes64`]). Every limit is a named constant in [`limits`].
//!
//! - [`Envelope`]: the one message shape, request, notification or reply.
//! - [`RpcError`], [`ErrorKind`]: the error object `{code, message, data: {kind}}`.
//! - [`Method`]: the method table, each method's name, params and result
//!   ([`Call`] ties a params type to its method and result type).
//! - [`MachineKind`], [`Group`], [`SettingKind`]: what a computer is and
//!   declares, and what an agent is given.
//! - [`decode_params`]: params from JSON, with errors that name the field.
//! - [`ProbeReport`]: the one JSON line `computerd probe` prints (no method:
//!   providers run the probe through exec.run and parse its stdout).

mod apps;
mod cdp;
pub mod cdp_keys;
pub mod direct;
pub mod egress;
mod envelope;
mod exec;
mod files;
mod input;
mod kinds;
mod lifecycle;
pub mod limits;
mod port;
mod probe;
mod process;
mod screen;
mod tar;

pub use apps::{
    App, AppsInstallParams, AppsInstallResult, AppsLaunchParams, AppsListParams, AppsListResult,
    AppsOpenUrlParams, AppsTerminateParams, AppsUiTreeParams, AppsUiTreeResult, UiNode,
    check_app_id,
};
pub use cdp::{
    BROWSER_STARTS_AGAIN, CdpEvent, CdpEventsParams, CdpEventsResult, CdpSendParams, CdpSendResult,
};
pub use envelope::{
    Bytes64, Call, Envelope, ErrorData, ErrorKind, INVALID_REQUEST, Id, METHOD_NOT_FOUND,
    PARSE_ERROR, RpcError, WithData, decode_params, decode_params_with_bytes,
};
pub use exec::{ExecParams, ExecResult, Invocation};
pub use files::{
    FileStat, FileType, FilesListParams, FilesListResult, FilesMkdirParams, FilesMoveParams,
    FilesReadParams, FilesReadResult, FilesRemoveParams, FilesStatParams, FilesWriteParams,
    FilesWriteResult, ListEntry,
};
pub use input::{
    Action, ActionFailure, Button, CheckOptions, InputActionsParams, InputActionsResult, KEYS,
    PhoneButton, ScrollUnit, check_actions, check_actions_json, is_key,
};
pub use kinds::{
    Group, KindRow, MachineKind, SETTING_KINDS, SettingKind, known_groups, serves, serving_refusals,
};
pub use lifecycle::{
    CancelParams, DeadlineExtendParams, DeadlineExtendResult, Empty, HelloParams, HelloResult,
    PingParams,
};
pub use port::{
    PortCloseParams, PortConnectParams, PortReadParams, PortReadResult, PortStreamId,
    PortWriteParams,
};
pub use probe::{
    DEFAULT_PROBE_TARGETS, DIAGNOSE_ANSWER_MS, DIAGNOSE_CONNECT_MS, DIAGNOSE_TARGETS,
    DIAGNOSE_TOTAL_MS, PROBE_ANSWER_MS, PROBE_CONNECT_MS, PROBE_READ_BYTES, PROBE_TOTAL_MS,
    ProbeOutcome, ProbeProtocol, ProbeReport, ProbeResult, ProbeTarget, ProbeVerdict, parse_target,
    targets_with,
};
pub use process::{
    Orphans, ProcessEnded, ProcessInfo, ProcessListParams, ProcessListResult, ProcessReadParams,
    ProcessReadResult, ProcessResizeParams, ProcessSignalParams, ProcessSignalResult,
    ProcessStartParams, ProcessStartResult, ProcessWaitParams, ProcessWaitResult,
    ProcessWriteParams, PtySize, Signal, Stream,
};
pub use screen::{
    Fit, ImageFormat, Orientation, Region, ScreenOrientationParams, ScreenOrientationResult,
    ScreenReadParams, ScreenReadResult, ScreenShotParams, ScreenShotResult, ScreenWatchParams,
    ScreenWatchResult, WatchAsk, WatchFrame, area_spans,
};
pub use tar::{
    TarPullBeginParams, TarPullEndParams, TarPullReadParams, TarPullReadResult, TarPushBeginParams,
    TarPushEndParams, TarPushEndResult, TarPushWriteParams, TarStreamId,
};

/// The method table: every request method's wire name, its params and its
/// result, in one place. [`Method`], [`Method::ALL`], [`method::ALL`] and
/// every [`Call`] impl come from it, and the daemon dispatches by an
/// exhaustive match on [`Method`], so no method can be listed and not
/// answered, or answered and not listed.
macro_rules! methods {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal : $params:ty => $result:ty; )*) => {
        /// A request method. On the wire, its name ([`Method::as_str`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        impl Method {
            /// Every request method, in the table's order.
            pub const ALL: &'static [Method] = &[ $( Method::$variant, )* ];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Method::$variant => $name, )*
                }
            }

            pub fn from_name(name: &str) -> Option<Method> {
                match name {
                    $( $name => Some(Method::$variant), )*
                    _ => None,
                }
            }
        }

        $(
            impl Call for $params {
                const METHOD: Method = Method::$variant;
                type Result = $result;
            }
        )*

        /// Each method's name with the JSON schemas of its params and its
        /// result, the types' definitions gathered in `generator`.
        #[cfg(any(test, feature = "schemas"))]
        pub fn method_schemas(
            generator: &mut schemars::SchemaGenerator,
        ) -> Vec<(Method, schemars::Schema, schemars::Schema)> {
            vec![ $( (
                Method::$variant,
                generator.subschema_for::<$params>(),
                generator.subschema_for::<$result>(),
            ), )* ]
        }
    };
}

methods! {
    /// The daemon's version, platform, kind and groups.
    Hello = "hello": HelloParams => HelloResult;
    Ping = "ping": PingParams => Empty;
    ExecRun = "exec.run": ExecParams => ExecResult;
    FilesRead = "files.read": FilesReadParams => FilesReadResult;
    FilesWrite = "files.write": FilesWriteParams => FilesWriteResult;
    FilesStat = "files.stat": FilesStatParams => FileStat;
    FilesList = "files.list": FilesListParams => FilesListResult;
    FilesMkdir = "files.mkdir": FilesMkdirParams => Empty;
    FilesMove = "files.move": FilesMoveParams => Empty;
    FilesRemove = "files.remove": FilesRemoveParams => Empty;
    TarPullBegin = "tar.pull.begin": TarPullBeginParams => TarStreamId;
    TarPullRead = "tar.pull.read": TarPullReadParams => TarPullReadResult;
    TarPullEnd = "tar.pull.end": TarPullEndParams => Empty;
    TarPushBegin = "tar.push.begin": TarPushBeginParams => TarStreamId;
    TarPushWrite = "tar.push.write": TarPushWriteParams => Empty;
    TarPushEnd = "tar.push.end": TarPushEndParams => TarPushEndResult;
    ProcessStart = "process.start": ProcessStartParams => ProcessStartResult;
    ProcessRead = "process.read": ProcessReadParams => ProcessReadResult;
    ProcessWrite = "process.write": ProcessWriteParams => Empty;
    ProcessSignal = "process.signal": ProcessSignalParams => ProcessSignalResult;
    ProcessResize = "process.resize": ProcessResizeParams => Empty;
    ProcessList = "process.list": ProcessListParams => ProcessListResult;
    ProcessWait = "process.wait": ProcessWaitParams => ProcessWaitResult;
    DeadlineExtend = "deadline.extend": DeadlineExtendParams => DeadlineExtendResult;
    /// A TCP connection to a port on the computer's own loopback.
    PortConnect = "port.connect": PortConnectParams => PortStreamId;
    /// The next bytes the port's server sent (a bytes frame on request).
    PortRead = "port.read": PortReadParams => PortReadResult;
    /// Bytes for the port's server (a bytes frame), and a close of the sending side.
    PortWrite = "port.write": PortWriteParams => Empty;
    PortClose = "port.close": PortCloseParams => Empty;
    /// A PNG of the screen or a region of it (group screen).
    ScreenShot = "screen.shot": ScreenShotParams => ScreenShotResult;
    ScreenRead = "screen.read": ScreenReadParams => ScreenReadResult;
    /// The live view's next frame (JPEG), paced by the caller's ack.
    ScreenWatch = "screen.watch": ScreenWatchParams => ScreenWatchResult;
    /// How the screen stands, and a lock of it (group screen; answered by
    /// a phone's provider, never by computerd).
    ScreenOrientation = "screen.orientation": ScreenOrientationParams => ScreenOrientationResult;
    /// A batch of pointer, key and touch actions (groups input.pointer,
    /// input.keys, input.touch).
    InputActions = "input.actions": InputActionsParams => InputActionsResult;
    /// The apps on the device and the one in front (group apps; answered
    /// by a phone's provider, never by computerd).
    AppsList = "apps.list": AppsListParams => AppsListResult;
    /// Bring an app to the front (group apps).
    AppsLaunch = "apps.launch": AppsLaunchParams => Empty;
    /// Stop an app (group apps).
    AppsTerminate = "apps.terminate": AppsTerminateParams => Empty;
    /// Open a web address (group apps).
    AppsOpenUrl = "apps.open_url": AppsOpenUrlParams => Empty;
    /// Install a package already in the computer's files (group apps.install).
    AppsInstall = "apps.install": AppsInstallParams => AppsInstallResult;
    /// What the screen shows, as a tree of at most 5000 nodes (group apps.ui_tree).
    AppsUiTree = "apps.ui_tree": AppsUiTreeParams => AppsUiTreeResult;
    /// One CDP command to the browser (group cdp; answered by the
    /// provider's client, never by computerd).
    CdpSend = "cdp.send": CdpSendParams => CdpSendResult;
    /// The browser's events kept since a sequence number (group cdp).
    CdpEvents = "cdp.events": CdpEventsParams => CdpEventsResult;
}

crate::display_as_str!(Method);

impl std::str::FromStr for Method {
    type Err = RpcError;
    /// An unknown name is the error the daemon answers with.
    fn from_str(name: &str) -> Result<Self, RpcError> {
        Method::from_name(name).ok_or_else(|| {
            RpcError::not_found(format!(
                "unknown method {name:?}; this daemon answers: {}",
                method::ALL.join(", ")
            ))
            .with_code(METHOD_NOT_FOUND)
        })
    }
}

/// The method names as strings, from [`Method`].
pub mod method {
    use super::Method;

    /// A notification (no id): cancel the request with the given id.
    pub const CANCEL_REQUEST: &str = "$/cancelRequest";

    /// Every request method's name, in [`Method::ALL`]'s order.
    pub const ALL: &[&str] = &names();

    const fn names() -> [&'static str; Method::ALL.len()] {
        let mut out = [""; Method::ALL.len()];
        let mut i = 0;
        while i < out.len() {
            out[i] = Method::ALL[i].as_str();
            i += 1;
        }
        out
    }
}

/// The capability groups' names, for tables that hold names; [`Group`] is
/// the type on the wire.
pub mod group {
    use super::Group;

    pub const EXEC: &str = Group::Exec.as_str();
    pub const FILES: &str = Group::Files.as_str();
    pub const PROCESSES: &str = Group::Processes.as_str();
    pub const SCREEN: &str = Group::Screen.as_str();
    pub const INPUT_POINTER: &str = Group::InputPointer.as_str();
    pub const INPUT_KEYS: &str = Group::InputKeys.as_str();
    pub const INPUT_TOUCH: &str = Group::InputTouch.as_str();
    pub const APPS: &str = Group::Apps.as_str();
    pub const APPS_INSTALL: &str = Group::AppsInstall.as_str();
    pub const APPS_UI_TREE: &str = Group::AppsUiTree.as_str();
    pub const CDP: &str = Group::Cdp.as_str();
    pub const STREAM: &str = Group::Stream.as_str();
    pub const DOWNLOADS: &str = Group::Downloads.as_str();
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

    #[test]
    fn every_method_is_found_by_its_name_and_no_other_is() {
        for m in Method::ALL {
            assert_eq!(m.as_str().parse::<Method>(), Ok(*m));
        }
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(names, method::ALL);
        let e = "files.delete".parse::<Method>().unwrap_err();
        assert_eq!(
            (e.code, e.kind()),
            (METHOD_NOT_FOUND, Some(ErrorKind::NotFound))
        );
        assert!(
            e.message
                .contains("this daemon answers: hello, ping, exec.run")
        );
        assert_eq!(method::CANCEL_REQUEST.parse::<Method>().ok(), None);
    }

    #[test]
    fn groups_and_kinds_travel_as_their_names() {
        for g in Group::ALL {
            assert_eq!(serde_json::to_value(g).unwrap(), g.as_str());
            assert_eq!(g.as_str().parse::<Group>(), Ok(*g));
        }
        for k in MachineKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(group::APPS_UI_TREE, "apps.ui_tree");
        // A newer daemon's group this client does not know is left out; a
        // kind it does not know is refused, naming it.
        let hello: HelloResult = serde_json::from_value(serde_json::json!({
            "version": "9", "os": "linux", "kind": "linux", "arch": "amd64",
            "groups": ["exec", "teleport", "files"]
        }))
        .unwrap();
        assert_eq!(hello.groups, vec![Group::Exec, Group::Files]);
        let e = serde_json::from_value::<HelloResult>(serde_json::json!({
            "version": "9", "os": "linux", "kind": "quantum", "arch": "amd64", "groups": []
        }))
        .unwrap_err();
        assert!(e.to_string().contains("quantum"), "{e}");
    }

    /// The protocol's types are held to a golden file, so a change on the
    /// wire is a reviewed change: every method's params and result, the
    /// notification, the envelope, the error object and the probe's report.
    /// On a mismatch the new schemas are written beside it as
    /// `*.current.json`; `COMPUTER_MCP_ACCEPT_SCHEMAS=1` accepts them.
    #[test]
    fn the_protocol_matches_its_golden_schemas() {
        use serde_json::{Map, Value, json};
        let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        let mut methods = Map::new();
        for (m, params, result) in method_schemas(&mut generator) {
            methods.insert(
                m.as_str().into(),
                json!({ "params": params, "result": result }),
            );
        }
        let mut notifications = Map::new();
        notifications.insert(
            method::CANCEL_REQUEST.into(),
            json!({ "params": generator.subschema_for::<CancelParams>() }),
        );
        let envelope = generator.subschema_for::<Envelope>();
        let error = generator.subschema_for::<RpcError>();
        let probe = generator.subschema_for::<ProbeReport>();
        let defs: Map<String, Value> = generator.take_definitions(true);
        let doc = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "computerd protocol",
            "methods": methods,
            "notifications": notifications,
            "envelope": envelope,
            "error": error,
            "probeReport": probe,
            "$defs": defs,
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap();
        text.push('\n');
        computer_testkit::assert_golden("protocol", &text);
    }
}
