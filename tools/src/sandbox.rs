//! The sandbox family: a shell, files and background processes in a Linux
//! computer, plus `computer_info` and `computer_extend`.
//!
//! - [`exec`]: `exec` (one round trip without progress; followed with
//!   progress reports when the client asked for them).
//! - [`files`]: `read_file`, `write_file`, `edit_file`, `list_files`.
//! - [`process`]: `process_start`, `process_read`, `process_write`,
//!   `process_signal`, `process_list`.
//! - [`computer`]: `computer_info`, `computer_extend`.
//!
//! Every tool's input schema comes from its args type and its output schema
//! from its result type; the group table below decides which are listed.

pub mod computer;
pub mod exec;
pub mod files;
pub mod process;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    FileType, FilesStatParams, Group, ProcessSignalParams, ProcessStartParams, ProcessStartResult,
    Signal, Stream, group,
};
use rmcp::ErrorData;
use rmcp::handler::server::tool::{schema_for_input, schema_for_output, schema_for_type};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Result, ToolError};
use crate::{ToolContext, ToolSettings};

/// The tools of this family, in the order they are listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Name {
    Exec,
    ReadFile,
    WriteFile,
    EditFile,
    ListFiles,
    ProcessStart,
    ProcessRead,
    ProcessWrite,
    ProcessSignal,
    ProcessList,
    ComputerInfo,
    ComputerExtend,
}

const ALL: [Name; 12] = [
    Name::Exec,
    Name::ReadFile,
    Name::WriteFile,
    Name::EditFile,
    Name::ListFiles,
    Name::ProcessStart,
    Name::ProcessRead,
    Name::ProcessWrite,
    Name::ProcessSignal,
    Name::ProcessList,
    Name::ComputerInfo,
    Name::ComputerExtend,
];

impl Name {
    fn as_str(self) -> &'static str {
        match self {
            Name::Exec => "exec",
            Name::ReadFile => "read_file",
            Name::WriteFile => "write_file",
            Name::EditFile => "edit_file",
            Name::ListFiles => "list_files",
            Name::ProcessStart => "process_start",
            Name::ProcessRead => "process_read",
            Name::ProcessWrite => "process_write",
            Name::ProcessSignal => "process_signal",
            Name::ProcessList => "process_list",
            Name::ComputerInfo => "computer_info",
            Name::ComputerExtend => "computer_extend",
        }
    }

    fn from_str(name: &str) -> Option<Name> {
        ALL.into_iter().find(|n| n.as_str() == name)
    }

    /// The capability group the tool needs; None: always listed (extend
    /// aside, which the provider decides).
    fn group(self) -> Option<&'static str> {
        match self {
            Name::Exec => Some(group::EXEC),
            Name::ReadFile | Name::WriteFile | Name::EditFile | Name::ListFiles => {
                Some(group::FILES)
            }
            Name::ProcessStart
            | Name::ProcessRead
            | Name::ProcessWrite
            | Name::ProcessSignal
            | Name::ProcessList => Some(group::PROCESSES),
            Name::ComputerInfo | Name::ComputerExtend => None,
        }
    }

    fn tool(self, s: &ToolSettings) -> Tool {
        match self {
            Name::Exec => exec::tool(s),
            Name::ReadFile => files::read_tool(s),
            Name::WriteFile => files::write_tool(),
            Name::EditFile => files::edit_tool(),
            Name::ListFiles => files::list_tool(s),
            Name::ProcessStart => process::start_tool(),
            Name::ProcessRead => process::read_tool(s),
            Name::ProcessWrite => process::write_tool(),
            Name::ProcessSignal => process::signal_tool(),
            Name::ProcessList => process::list_tool(s),
            Name::ComputerInfo => computer::info_tool(),
            Name::ComputerExtend => computer::extend_tool(),
        }
    }
}

/// The tools of the sandbox family that `groups` (hello's groups) allow,
/// with `extend` telling whether computer_extend is listed. Descriptions
/// state the default [`ToolSettings`].
pub fn sandbox_tools(groups: &[Group], extend: bool) -> Vec<Tool> {
    sandbox_tools_with(groups, extend, &ToolSettings::default())
}

/// [`sandbox_tools`] with the limits the server runs with, so that the
/// descriptions and schemas state them (exec's timeout, the output budget).
pub fn sandbox_tools_with(groups: &[Group], extend: bool, settings: &ToolSettings) -> Vec<Tool> {
    ALL.into_iter()
        .filter(|n| match n.group() {
            Some(g) => groups.iter().any(|x| x == g),
            None => *n != Name::ComputerExtend || extend,
        })
        .map(|n| n.tool(settings))
        .collect()
}

/// Whether `name` is one of this family's tools.
pub fn is_sandbox_tool(name: &str) -> bool {
    Name::from_str(name).is_some()
}

/// Run one tool call. Bad arguments, a refused path, a process id that does
/// not exist, a daemon error: `Ok(CallToolResult::error(..))` whose text
/// names the field and what is allowed. `Err(ErrorData)` only for an
/// unknown tool name.
///
/// When `ctx.cancel` fires, or the returned future is dropped, the calls in
/// flight are cancelled in the daemon and what the call started is ended.
pub async fn call_sandbox_tool(
    name: &str,
    arguments: Option<serde_json::Map<String, Value>>,
    ctx: &ToolContext,
) -> std::result::Result<CallToolResult, ErrorData> {
    let Some(tool) = Name::from_str(name) else {
        let known: Vec<&str> = ALL.iter().map(|n| n.as_str()).collect();
        return Err(ErrorData::invalid_params(
            format!(
                "tool {name:?} not found; the sandbox tools are {}",
                known.join(", ")
            ),
            None,
        ));
    };
    let args = Value::Object(arguments.unwrap_or_default());
    let work = run(tool, args, ctx);
    let outcome = tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        r = work => r,
    };
    Ok(outcome.unwrap_or_else(ToolError::into_result))
}

async fn run(tool: Name, args: Value, ctx: &ToolContext) -> Result<CallToolResult> {
    let name = tool.as_str();
    match tool {
        Name::Exec => exec::run(ctx, parse(name, args)?).await,
        Name::ReadFile => files::read(ctx, parse(name, args)?).await,
        Name::WriteFile => files::write(ctx, parse(name, args)?).await,
        Name::EditFile => files::edit(ctx, parse(name, args)?).await,
        Name::ListFiles => files::list(ctx, parse(name, args)?).await,
        Name::ProcessStart => process::start(ctx, parse(name, args)?).await,
        Name::ProcessRead => process::read(ctx, parse(name, args)?).await,
        Name::ProcessWrite => process::write(ctx, parse(name, args)?).await,
        Name::ProcessSignal => process::signal(ctx, parse(name, args)?).await,
        Name::ProcessList => process::list(ctx, parse(name, args)?).await,
        Name::ComputerInfo => computer::info(ctx, parse(name, args)?).await,
        Name::ComputerExtend => computer::extend(ctx, parse(name, args)?).await,
    }
}

/// Arguments from JSON, with words that name the field at fault.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T> {
    serde_path_to_error::deserialize::<_, T>(args).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // An unknown field's path ends with the field itself, which serde names.
        if inner.starts_with("unknown field") {
            path = path
                .rsplit_once('.')
                .map(|(p, _)| p.to_string())
                .unwrap_or_default();
        }
        if path == "." || path.is_empty() {
            ToolError::Invalid(format!("{tool}: {inner}"))
        } else {
            ToolError::Invalid(format!("{tool}: {path}: {inner}"))
        }
    })
}

/// A tool from its args and result types.
pub(crate) fn make_tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    description: String,
    annotations: ToolAnnotations,
) -> Tool {
    let mut input = schema_for_input::<A>().unwrap_or_else(|_| schema_for_type::<A>());
    if !input.contains_key("properties") {
        // A tool without arguments still states its (empty) properties,
        // which some clients expect.
        let mut with = input.as_ref().clone();
        with.insert("properties".into(), Value::Object(Default::default()));
        input = Arc::new(with);
    }
    Tool::new(name, description, input)
        .with_raw_output_schema(schema_for_output::<O>())
        .annotate(annotations)
}

/// Replace one property's description in a generated input schema (for
/// limits known only at run time), and set its maximum when given.
pub(crate) fn restate_property(
    tool: &mut Tool,
    property: &str,
    description: String,
    maximum: Option<u64>,
) {
    let mut schema: JsonObject = tool.input_schema.as_ref().clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties")
        && let Some(Value::Object(p)) = props.get_mut(property)
    {
        p.insert("description".into(), Value::String(description));
        if let Some(m) = maximum {
            p.insert("maximum".into(), Value::from(m));
        }
    }
    tool.input_schema = Arc::new(schema);
}

/// A success: text for the model, the result as structured content.
pub(crate) fn done<O: Serialize>(text: String, out: &O) -> CallToolResult {
    with_structured(CallToolResult::success(vec![ContentBlock::text(text)]), out)
}

pub(crate) fn with_structured<O: Serialize>(mut r: CallToolResult, out: &O) -> CallToolResult {
    r.structured_content = serde_json::to_value(out).ok();
    r
}

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
) -> Result<Vec<String>> {
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
            Ok(shell(ctx).await?.argv(c))
        }
        (None, Some(a)) => {
            if a.first().is_none_or(|p| p.is_empty()) {
                return Err(ToolError::Invalid(
                    "argv must start with the program to run (argv[0] may not be empty)".into(),
                ));
            }
            Ok(a)
        }
    }
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
    /// `/bin/bash -lc`: a login shell, so the profile's PATH applies.
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

/// Whether the computer has bash: asked once per client (one files.stat),
/// then remembered.
async fn shell(ctx: &ToolContext) -> Result<Shell> {
    let memo = memo(&ctx.client);
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

/// What the tools remember about one computer client: its shell, and which
/// stream each process's output is read from.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    shell: Option<Shell>,
    streams: HashMap<String, Stream>,
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
}

type Memos = Vec<(Weak<dyn ComputerClient>, Arc<Mutex<Memo>>)>;

/// The memo of `client`, kept while the client lives. Clients are told apart
/// by address; a dead client's entry goes on the next lookup (its weak
/// reference keeps the address from being reused until then).
pub(crate) fn memo(client: &Arc<dyn ComputerClient>) -> Arc<Mutex<Memo>> {
    static MEMOS: Mutex<Memos> = Mutex::new(Vec::new());
    let mut all = MEMOS.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|(w, _)| w.strong_count() > 0);
    let me = Arc::as_ptr(client);
    if let Some((_, m)) = all.iter().find(|(w, _)| std::ptr::addr_eq(w.as_ptr(), me)) {
        return m.clone();
    }
    let m = Arc::new(Mutex::new(Memo::default()));
    all.push((Arc::downgrade(client), m.clone()));
    m
}

pub(crate) fn lock(m: &Mutex<Memo>) -> std::sync::MutexGuard<'_, Memo> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Annotations, each hint stated.
pub(crate) fn hints(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    let mut a = ToolAnnotations::with_title(title)
        .read_only(read_only)
        .open_world(open_world);
    if !read_only {
        a = a.destructive(destructive).idempotent(idempotent);
    } else {
        a = a.idempotent(idempotent);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(g: &[&str]) -> Vec<Group> {
        g.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn names(tools: &[Tool]) -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn groups_decide_which_tools_are_listed() {
        let all = sandbox_tools(&groups(&["exec", "files", "processes"]), true);
        assert_eq!(
            names(&all),
            [
                "exec",
                "read_file",
                "write_file",
                "edit_file",
                "list_files",
                "process_start",
                "process_read",
                "process_write",
                "process_signal",
                "process_list",
                "computer_info",
                "computer_extend"
            ]
        );
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
            assert!(is_sandbox_tool(&t.name));
        }
        assert!(!is_sandbox_tool("screenshot"));
    }

    #[test]
    fn every_tool_has_typed_schemas_that_describe_every_field() {
        for t in sandbox_tools(&groups(&["exec", "files", "processes"]), true) {
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

    /// A computer whose connection has ended.
    struct Dead;
    impl ComputerClient for Dead {
        fn call_value<'a>(
            &'a self,
            _method: &'a str,
            _params: Value,
        ) -> futures::future::BoxFuture<'a, computerd::client::Result<Value>> {
            Box::pin(async { Err(computerd::client::ClientError::Closed("x".into())) })
        }
        fn close(&self) {}
    }

    fn dead_ctx() -> ToolContext {
        ToolContext {
            client: Arc::new(Dead),
            facts: Default::default(),
            settings: Default::default(),
            progress: None,
            extend: None,
            cancel: Default::default(),
        }
    }

    #[test]
    fn a_call_can_run_on_any_thread() {
        fn send<T: Send>(_: &T) {}
        let ctx = dead_ctx();
        let call = call_sandbox_tool("exec", None, &ctx);
        send(&call);
    }

    #[tokio::test]
    async fn a_cancelled_call_does_not_start() {
        let ctx = dead_ctx();
        ctx.cancel.cancel();
        let r = call_sandbox_tool("computer_info", None, &ctx)
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(format!("{:?}", r.content).contains("cancelled"));
        let e = call_sandbox_tool("nope", None, &ctx).await.unwrap_err();
        assert!(e.message.contains("not found"), "{}", e.message);
    }

    #[test]
    fn the_memo_is_per_client_and_goes_with_it() {
        let a: Arc<dyn ComputerClient> = Arc::new(Dead);
        let b: Arc<dyn ComputerClient> = Arc::new(Dead);
        lock(&memo(&a)).shell = Some(Shell::Sh);
        assert_eq!(lock(&memo(&a.clone())).shell, Some(Shell::Sh));
        assert_eq!(lock(&memo(&b)).shell, None);
    }
}
