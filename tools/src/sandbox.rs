//! The sandbox family: a shell, files and background processes in a Linux
//! computer, plus the shared `computer_info` and `computer_extend`.
//!
//! - [`exec`]: `exec` (one round trip without progress; followed with
//!   progress reports when the client asked for them).
//! - [`files`]: `read_file`, `write_file`, `edit_file`, `list_files`.
//! - [`process`]: `process_start`, `process_read`, `process_write`,
//!   `process_signal`, `process_list`.
//!
//! [`TOOLS`] is the set: one entry per tool, in the order they are listed
//! (by this family, and by the desktop and browser families too);
//! [`FAMILY`] lists it and the common tools. Every tool's input schema comes from its args type and its
//! output schema from its result type. Below it, what the tools share: path
//! and program checks, owned starts, and the memo of the computer's shell
//! and process streams (kept in the call's [`crate::ComputerState`]).

pub mod exec;
pub mod files;
pub mod process;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    ExecParams, FileType, FilesStatParams, Group, ProcessSignalParams, ProcessStartParams,
    ProcessStartResult, SettingKind, Signal, Stream,
};

use crate::ToolContext;
use crate::common;
use crate::error::{Result, ToolError};
use crate::registry::{Family, Needs, ToolDef, ToolSet, handler};
use crate::together::{Members, Together};

const EXEC: Needs = Needs::Group(Group::Exec);
const FILES: Needs = Needs::Group(Group::Files);
const PROCESSES: Needs = Needs::Group(Group::Processes);

/// The sandbox's tools, in the order they are listed. A new tool is one
/// line here (and its module's args, result, builder and handler); every
/// family that lists the set lists it.
#[rustfmt::skip]
pub const TOOLS: ToolSet = ToolSet {
    name: "sandbox",
    tools: &[
        ToolDef::new("exec",           EXEC,      exec::tool,           handler!(exec::run)),
        ToolDef::new("read_file",      FILES,     files::read_tool,     handler!(files::read)),
        ToolDef::new("write_file",     FILES,     files::write_tool,    handler!(files::write)),
        ToolDef::new("edit_file",      FILES,     files::edit_tool,     handler!(files::edit)),
        ToolDef::new("list_files",     FILES,     files::list_tool,     handler!(files::list)),
        ToolDef::new("process_start",  PROCESSES, process::start_tool,  handler!(process::start)),
        ToolDef::new("process_read",   PROCESSES, process::read_tool,   handler!(process::read)),
        ToolDef::new("process_write",  PROCESSES, process::write_tool,  handler!(process::write)),
        ToolDef::new("process_signal", PROCESSES, process::signal_tool, handler!(process::signal)),
        ToolDef::new("process_list",   PROCESSES, process::list_tool,   handler!(process::list)),
    ],
    aliases: &[],
};

/// The background-process tools listed as one tool (`process`, action
/// `start`, `read`…), for the kinds whose listing has no room for five
/// (a desktop, a browser); a sandbox lists them one by one.
pub const PROCESS_TOGETHER: Together = Together {
    name: "process",
    title: "Background processes",
    lead: "Background processes (servers, long or interactive programs): start one, then read its output as it comes.",
    members: Members::Named(&[
        "process_start",
        "process_read",
        "process_write",
        "process_signal",
        "process_list",
    ]),
};

/// The sandbox family: its tools, then the common ones.
pub const FAMILY: Family = Family {
    kind: SettingKind::Sandbox,
    instructions: INSTRUCTIONS,
    skill: crate::skills::SANDBOX_TEXT,
    sets: &[TOOLS, crate::ports::TOOLS, common::TOOLS],
    together: &[],
};

/// What a session of this kind is told (MCP instructions).
const INSTRUCTIONS: &str = "\
This server gives you a computer: a Linux sandbox with a shell, files and \
background processes. It is made on your first tool call. Use `exec` for commands that finish, `process_start` and \
`process_read` for servers and long or interactive programs, and the file \
tools for reading and editing. Paths are absolute; your home directory is \
the writable work directory (`computer_info` says where), and /tmp is \
yours too. Unless told otherwise the computer has no network.";

/// A path argument must be absolute; a relative one is refused with the
/// work directory, and what it may have meant.
pub(crate) fn absolute(field: &str, path: &str, work_dir: &str) -> Result<()> {
    if path.starts_with('/') {
        if path.contains('\0') {
            return Err(ToolError::Invalid(format!("{field} holds a NUL byte")));
        }
        return Ok(());
    }
    if path.is_empty() {
        return Err(ToolError::Invalid(format!(
            "{field} is empty; give an absolute path (the work directory is {work_dir})"
        )));
    }
    let rest = path
        .strip_prefix("~/")
        .or_else(|| path.strip_prefix("./"))
        .unwrap_or(if path == "~" || path == "." { "" } else { path });
    let base = work_dir.trim_end_matches('/');
    let meant = if rest.is_empty() {
        work_dir.to_string()
    } else {
        format!("{base}/{rest}")
    };
    Err(ToolError::Invalid(format!(
        "{field} must be an absolute path (starting with /), got {path:?}; the work directory is {work_dir}, so you may mean {meant:?}"
    )))
}

/// `command` or `argv`, exactly one of them, as the program's argv.
pub(crate) async fn program(
    ctx: &ToolContext,
    command: Option<String>,
    argv: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
) -> Result<(Vec<String>, Option<BTreeMap<String, String>>)> {
    match (command, argv) {
        (Some(_), Some(_)) => Err(ToolError::Invalid(
            "give either command (a shell command line) or argv (a program and its arguments), not both".into(),
        )),
        (None, None) => Err(ToolError::Invalid(
            "give command (a shell command line, e.g. \"ls -la | head\") or argv (a program and its arguments, e.g. [\"ls\", \"-la\"])".into(),
        )),
        (Some(c), None) => {
            if c.trim().is_empty() {
                return Err(ToolError::Invalid("command is empty".into()));
            }
            match shell(ctx).await? {
                Shell::Bash => match login_env(ctx).await? {
                    // The login profile's environment, read once per
                    // computer, under the call's own: `bash -c` then costs
                    // no profile on every call.
                    Some(login) => {
                        let mut all = (*login).clone();
                        all.extend(env.unwrap_or_default());
                        Ok((vec!["/bin/bash".into(), "-c".into(), c], Some(all)))
                    }
                    None => Ok((Shell::Bash.argv(c), env)),
                },
                Shell::Sh => Ok((Shell::Sh.argv(c), env)),
            }
        }
        (None, Some(a)) => {
            if a.first().is_none_or(|p| p.is_empty()) {
                return Err(ToolError::Invalid(
                    "argv must start with the program to run (argv[0] may not be empty)".into(),
                ));
            }
            Ok((a, env))
        }
    }
}

/// Variables of a login shell that belong to that one shell, not to the
/// environment a command is given.
const SHELL_OWN: &[&str] = &["_", "SHLVL", "PWD", "OLDPWD"];

/// Reads of the login environment that may fail (the computer at its
/// process bound, a profile that failed once) before commands give up on
/// it and run `bash -lc` for the rest of the computer's life.
const LOGIN_READ_TRIES: u32 = 3;

/// The environment `bash -lc` gives a command (the profile's PATH and
/// variables), read once per computer with one exec.run and remembered;
/// None when it could not be read (then commands run with `bash -lc`).
/// Calls that come together wait for one read; a read that fails is tried
/// again by a later call, [`LOGIN_READ_TRIES`] times in all.
async fn login_env(ctx: &ToolContext) -> Result<Option<Arc<BTreeMap<String, String>>>> {
    let memo = memo(ctx);
    let reading = {
        let m = lock(&memo);
        if let Some(known) = &m.login {
            return Ok(known.clone());
        }
        Arc::clone(&m.login_reading)
    };
    let _one_read = reading.lock().await;
    if let Some(known) = &lock(&memo).login {
        return Ok(known.clone());
    }
    let ran = ctx
        .client
        .call_typed(&ExecParams {
            argv: vec!["/bin/bash".into(), "-lc".into(), "env -0".into()],
            timeout_ms: Some(10_000),
            // At the computer's process bound, wait for room as the call would.
            queue_ms: Some(10_000),
            ..Default::default()
        })
        .await;
    let read = match ran {
        Ok(r) if r.exit_code == Some(0) && !r.truncated => {
            let vars: BTreeMap<String, String> = r
                .stdout
                .0
                .split(|b| *b == 0)
                .filter_map(|kv| {
                    let kv = std::str::from_utf8(kv).ok()?;
                    let (k, v) = kv.split_once('=')?;
                    (!k.is_empty() && !SHELL_OWN.contains(&k))
                        .then(|| (k.to_string(), v.to_string()))
                })
                .collect();
            (!vars.is_empty()).then(|| Arc::new(vars))
        }
        Ok(_) => None,
        Err(e) => {
            let e = ToolError::client("reading the login environment", e);
            if matches!(e, ToolError::Gone(_) | ToolError::Broken(_)) {
                return Err(e);
            }
            None
        }
    };
    let mut m = lock(&memo);
    if read.is_some() {
        m.login = Some(read.clone());
    } else {
        m.login_failures += 1;
        tracing::debug!(
            failures = m.login_failures,
            "the login environment could not be read; this command runs with bash -lc"
        );
        if m.login_failures >= LOGIN_READ_TRIES {
            m.login = Some(None);
        }
    }
    Ok(read)
}

/// process.start that is never abandoned half way. The daemon finishes a
/// start whose program already runs even when the call is cancelled, so a
/// tool call dropped during the start would leave a program nobody knows
/// of. The start runs in a task of its own instead, and whichever side
/// finds the answer untaken sends the program KILL: the task, when the
/// caller was gone before the answer; the caller's drop, when the answer
/// came and was never read.
pub(crate) async fn start_owned(
    client: &Arc<dyn ComputerClient>,
    params: ProcessStartParams,
) -> computerd::client::Result<ProcessStartResult> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task_client = client.clone();
    tokio::spawn(async move {
        let r = task_client.call_typed(&params).await;
        if let Err(Ok(p)) = tx.send(r) {
            kill(&task_client, p.id).await;
        }
    });
    let mut answer = Untaken {
        rx,
        client: client.clone(),
    };
    (&mut answer.rx)
        .await
        .unwrap_or_else(|_| Err(ClientError::Closed("the start was lost".into())))
}

/// The receiving end of a start; see [`start_owned`].
struct Untaken {
    rx: tokio::sync::oneshot::Receiver<computerd::client::Result<ProcessStartResult>>,
    client: Arc<dyn ComputerClient>,
}

impl Drop for Untaken {
    fn drop(&mut self) {
        // Closing first means the task's send either failed (and the task
        // kills) or already happened (and the answer is here to kill).
        self.rx.close();
        if let Ok(Ok(p)) = self.rx.try_recv() {
            spawn_kill(self.client.clone(), p.id);
        }
    }
}

async fn kill(client: &Arc<dyn ComputerClient>, id: String) {
    let _ = client
        .call_typed(&ProcessSignalParams {
            id,
            signal: Signal::Kill,
        })
        .await;
}

/// Send a process KILL from a task of its own (from a `Drop`). Without a
/// runtime nothing can be sent; the daemon's deadline ends it then.
pub(crate) fn spawn_kill(client: Arc<dyn ComputerClient>, id: String) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move { kill(&client, id).await });
    }
}

/// The shell a `command` runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shell {
    /// `/bin/bash -lc`: a login shell, so the profile's PATH applies (where
    /// the login environment could not be read once and kept).
    Bash,
    /// `/bin/sh -c`, where the computer has no bash.
    Sh,
}

impl Shell {
    pub fn argv(self, command: String) -> Vec<String> {
        match self {
            Shell::Bash => vec!["/bin/bash".into(), "-lc".into(), command],
            Shell::Sh => vec!["/bin/sh".into(), "-c".into(), command],
        }
    }
}

/// Whether the computer has bash: asked once per computer (one
/// files.stat), then remembered.
async fn shell(ctx: &ToolContext) -> Result<Shell> {
    let memo = memo(ctx);
    if let Some(s) = lock(&memo).shell {
        return Ok(s);
    }
    let stat = ctx
        .client
        .call_typed(&FilesStatParams {
            path: "/bin/bash".into(),
            follow: Some(true),
        })
        .await;
    let found = match stat {
        Ok(st) => st.file_type == FileType::File && st.mode & 0o111 != 0,
        Err(e) => {
            let e = ToolError::client("looking for /bin/bash", e);
            if matches!(e, ToolError::Gone(_) | ToolError::Broken(_)) {
                return Err(e);
            }
            false
        }
    };
    let s = if found { Shell::Bash } else { Shell::Sh };
    lock(&memo).shell = Some(s);
    Ok(s)
}

/// What the tools remember about one computer: its shell, and which
/// stream each process's output is read from.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    shell: Option<Shell>,
    /// The login shell's environment (see [`login_env`]): None until read,
    /// Some(None) when it could not be.
    login: Option<Option<Arc<BTreeMap<String, String>>>>,
    /// Held while the login environment is read: one read at a time.
    login_reading: Arc<tokio::sync::Mutex<()>>,
    /// Reads of it that failed so far.
    login_failures: u32,
    streams: HashMap<String, Stream>,
    /// Where the last process_read of each process ended: the next read
    /// without `since` goes on from there.
    read_to: HashMap<String, u64>,
}

impl Memo {
    pub fn stream(&self, id: &str) -> Option<Stream> {
        self.streams.get(id).copied()
    }

    pub fn set_stream(&mut self, id: &str, stream: Stream) {
        // The daemon's table holds 256 processes; forget the rest.
        if self.streams.len() >= 1024 {
            self.streams.clear();
        }
        self.streams.insert(id.to_string(), stream);
    }

    pub fn read_to(&self, id: &str) -> Option<u64> {
        self.read_to.get(id).copied()
    }

    pub fn set_read_to(&mut self, id: &str, offset: u64) {
        if self.read_to.len() >= 1024 {
            self.read_to.clear();
        }
        self.read_to.insert(id.to_string(), offset);
    }
}

/// The memo of the call's computer, kept in its [`crate::ComputerState`].
pub(crate) fn memo(ctx: &ToolContext) -> Arc<Mutex<Memo>> {
    ctx.state.slot::<Mutex<Memo>>()
}

pub(crate) fn lock(m: &Mutex<Memo>) -> std::sync::MutexGuard<'_, Memo> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use computerd::protocol::SettingKind;
    use futures::future::BoxFuture;
    use rmcp::model::Tool;
    use serde_json::Value;

    use super::*;
    use crate::define::parse;
    use crate::registry::{Dead, Offer, golden_names, registry};
    use crate::{ComputerState, ToolSettings};

    fn groups(g: &[&str]) -> Vec<Group> {
        g.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// The family the registry gives for the sandbox kind.
    fn family() -> &'static Family {
        registry().family(SettingKind::Sandbox).unwrap()
    }

    fn sandbox_tools_with(groups: &[Group], extend: bool, settings: &ToolSettings) -> Vec<Tool> {
        family().list(&Offer { groups, extend }, settings)
    }

    fn sandbox_tools(groups: &[Group], extend: bool) -> Vec<Tool> {
        sandbox_tools_with(groups, extend, &ToolSettings::default())
    }

    fn names(tools: &[Tool]) -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn groups_decide_which_tools_are_listed() {
        let all = sandbox_tools(&groups(&["exec", "files", "processes"]), true);
        assert_eq!(names(&all), golden_names(SettingKind::Sandbox));
        assert_eq!(
            names(&sandbox_tools(&groups(&["files"]), false)),
            [
                "read_file",
                "write_file",
                "edit_file",
                "list_files",
                "computer_info"
            ]
        );
        assert_eq!(
            names(&sandbox_tools(&groups(&["exec"]), false)),
            ["exec", "computer_info"]
        );
        assert_eq!(names(&sandbox_tools(&[], false)), ["computer_info"]);
        for t in &all {
            assert!(family().tool(&t.name).is_some());
        }
        assert!(family().tool("screenshot").is_none());
    }

    #[test]
    fn every_tool_has_typed_schemas_that_describe_every_field() {
        let listing = ToolSettings {
            output_schemas: true,
            ..ToolSettings::default()
        };
        let all = groups(&["exec", "files", "processes"]);
        let plain = sandbox_tools(&all, true);
        assert!(plain.iter().all(|t| t.output_schema.is_none()));
        for t in sandbox_tools_with(&all, true, &listing) {
            let input = Value::Object(t.input_schema.as_ref().clone());
            assert_eq!(input["type"], "object", "{}", t.name);
            assert_eq!(
                input["additionalProperties"],
                Value::Bool(false),
                "{}: unknown fields must be refused",
                t.name
            );
            if let Some(props) = input["properties"].as_object() {
                for (field, p) in props {
                    let d = p["description"].as_str().unwrap_or_default();
                    assert!(d.len() > 10, "{}.{field} has no description", t.name);
                }
            }
            let output = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(
                output.get("type"),
                Some(&Value::from("object")),
                "{}",
                t.name
            );
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 100, "{} needs a description for a model", t.name);
            assert!(t.annotations.is_some(), "{}", t.name);
        }
    }

    #[test]
    fn settings_are_stated_in_the_exec_schema() {
        let s = ToolSettings {
            output_budget_bytes: 8 * 1024,
            exec_default_timeout_ms: 30_000,
            exec_max_timeout_ms: 90_000,
            open_world: true,
            ..ToolSettings::default()
        };
        let tools = sandbox_tools_with(&groups(&["exec"]), false, &s);
        let exec = &tools[0];
        let t = &exec.input_schema["properties"]["timeout_ms"];
        assert_eq!(t["maximum"], 90_000);
        let d = t["description"].as_str().unwrap();
        assert!(
            d.contains("Default 30000") && d.contains("at most 90000"),
            "{d}"
        );
        assert!(exec.description.as_deref().unwrap().contains("8 KiB"));
        // Programs reach out only where the network is not none.
        let open_world = |s: &ToolSettings| {
            sandbox_tools_with(&groups(&["exec", "processes"]), false, s)
                .iter()
                .filter(|t| t.annotations.as_ref().and_then(|a| a.open_world_hint) == Some(true))
                .map(|t| t.name.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(open_world(&s), ["exec", "process_start"]);
        assert!(open_world(&ToolSettings::default()).is_empty());
    }

    #[test]
    fn relative_paths_are_refused_with_the_work_dir() {
        assert!(absolute("path", "/etc/hosts", "/home/u").is_ok());
        let e = absolute("path", "notes.txt", "/home/u").unwrap_err();
        assert_eq!(
            e.to_string(),
            "path must be an absolute path (starting with /), got \"notes.txt\"; the work directory is /home/u, so you may mean \"/home/u/notes.txt\""
        );
        let e = absolute("cwd", "~/src", "/home/u/").unwrap_err();
        assert!(
            e.to_string().contains("you may mean \"/home/u/src\""),
            "{e}"
        );
        assert!(
            absolute("path", "", "/w")
                .unwrap_err()
                .to_string()
                .contains("path is empty")
        );
        assert!(absolute("path", "/a\0b", "/w").is_err());
    }

    #[test]
    fn argument_errors_name_the_field() {
        let e = parse::<exec::ExecArgs>("exec", serde_json::json!({"command": "ls", "extra": 1}))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("exec: unknown field `extra`, expected one of `command`, `argv`"),
            "{e}"
        );
        let e =
            parse::<exec::ExecArgs>("exec", serde_json::json!({"timeout_ms": "5"})).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("exec: timeout_ms: invalid type: string \"5\""),
            "{e}"
        );
        let e = parse::<files::ReadFileArgs>("read_file", serde_json::json!({})).unwrap_err();
        assert_eq!(e.to_string(), "read_file: missing field `path`");
        let e = parse::<process::ProcessStartArgs>(
            "process_start",
            serde_json::json!({"argv": ["sh"], "pty": {"cols": 80, "width": 1}}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "process_start: pty: unknown field `width`, expected `cols` or `rows`"
        );
    }

    #[test]
    fn a_list_for_command_or_a_line_for_argv_points_at_the_other() {
        let e = parse::<exec::ExecArgs>("exec", serde_json::json!({"command": ["ls", "-l"]}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "exec: command: invalid type: a list, expected a string; command is one bash line as a string (\"ls -l /tmp\"); to give a program and its words as a list, use argv ([\"ls\", \"-l\", \"/tmp\"]) instead"
        );
        let e = parse::<process::ProcessStartArgs>(
            "process_start",
            serde_json::json!({"argv": "python3 -m http.server"}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "process_start: argv: invalid type: string \"python3 -m http.server\", expected a list; argv is a list of words ([\"ls\", \"-l\"]); to give one bash line as a string, use command instead"
        );
    }

    fn dead_ctx() -> ToolContext {
        ToolContext::new(Arc::new(Dead))
    }

    #[test]
    fn a_call_can_run_on_any_thread() {
        fn send<T: Send>(_: &T) {}
        let ctx = dead_ctx();
        let call = family().call("exec", None, &ctx);
        send(&call);
    }

    #[tokio::test]
    async fn a_cancelled_call_does_not_start() {
        let ctx = dead_ctx();
        ctx.cancel.cancel();
        let r = family().call("computer_info", None, &ctx).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(format!("{:?}", r.content).contains("cancelled"));
        let e = family().call("nope", None, &ctx).await.unwrap_err();
        assert!(e.message.contains("not found"), "{}", e.message);
    }

    /// A computer whose login shell fails `fails` times, then gives PATH,
    /// counting the reads.
    struct Profile {
        fails: u32,
        reads: std::sync::atomic::AtomicU32,
    }
    impl ComputerClient for Profile {
        fn call_value<'a>(
            &'a self,
            method: &'a str,
            params: Value,
        ) -> BoxFuture<'a, computerd::client::Result<Value>> {
            Box::pin(async move {
                assert_eq!(method, "exec.run");
                assert_eq!(params["argv"][1], "-lc");
                assert_eq!(params["queueMs"], 10_000);
                // Calls that come together meet here while the read is out.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let n = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (code, out) = if n < self.fails {
                    (254, "")
                } else {
                    (0, "PATH=/profile/bin\0")
                };
                Ok(serde_json::json!({
                    "exitCode": code,
                    "stdout": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, out),
                    "stderr": "",
                    "timedOut": false,
                    "truncated": false
                }))
            })
        }
        fn close(&self) {}
    }

    fn profile_ctx(fails: u32) -> (ToolContext, Arc<Profile>) {
        let client = Arc::new(Profile {
            fails,
            reads: Default::default(),
        });
        let mut ctx = dead_ctx();
        ctx.client = client.clone();
        (ctx, client)
    }

    #[tokio::test]
    async fn the_login_environment_is_read_once_for_calls_together_and_again_after_a_failure() {
        let reads = |c: &Profile| c.reads.load(std::sync::atomic::Ordering::SeqCst);
        // Eight calls at once: one read.
        let (ctx, client) = profile_ctx(0);
        let got = futures::future::join_all((0..8).map(|_| login_env(&ctx))).await;
        for g in got {
            assert_eq!(g.unwrap().unwrap()["PATH"], "/profile/bin");
        }
        assert_eq!(reads(&client), 1);
        // A failed read (the computer at its bound) is not kept: the next
        // call reads again, and gets it.
        let (ctx, client) = profile_ctx(1);
        assert!(login_env(&ctx).await.unwrap().is_none());
        assert_eq!(
            login_env(&ctx).await.unwrap().unwrap()["PATH"],
            "/profile/bin"
        );
        assert!(login_env(&ctx).await.unwrap().is_some());
        assert_eq!(reads(&client), 2);
        // A profile that keeps failing is given up after LOGIN_READ_TRIES.
        let (ctx, client) = profile_ctx(u32::MAX);
        for _ in 0..6 {
            assert!(login_env(&ctx).await.unwrap().is_none());
        }
        assert_eq!(reads(&client), LOGIN_READ_TRIES);
    }

    #[test]
    fn the_memo_is_per_computer_and_goes_with_it() {
        let a = dead_ctx();
        let b = dead_ctx();
        lock(&memo(&a)).shell = Some(Shell::Sh);
        assert_eq!(lock(&memo(&a.clone())).shell, Some(Shell::Sh));
        assert_eq!(lock(&memo(&b)).shell, None);
        // Over the same client, a new computer state (a new computer) starts
        // empty.
        let mut c = a.clone();
        c.state = ComputerState::new();
        assert_eq!(lock(&memo(&c)).shell, None);
    }
}
