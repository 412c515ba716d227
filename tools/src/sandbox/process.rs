//! Background and interactive programs: `process_start`, `process_read`,
//! `process_write`, `process_signal`, `process_list`.
//!
//! A process started here without a terminal gets a stdin pipe (so
//! process_write works) and a `log` file, which holds stdout and stderr
//! together in the order they came: process_read reads that one stream from
//! one offset. A terminal process is read from its `pty` stream.

use std::collections::BTreeMap;

use computerd::client::{ClientError, ComputerExt};
use computerd::protocol::{
    Bytes64, ErrorKind, ProcessListParams, ProcessSignalParams, ProcessStartParams,
    ProcessWaitParams, ProcessWaitResult, ProcessWriteParams, PtySize, Signal, Stream, limits,
};
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod read;

pub use read::{ProcessReadArgs, ProcessReadOutput};
pub(crate) use read::{read, read_tool};

use super::{absolute, lock, memo, program, start_owned};
use crate::ToolContext;
use crate::budget::{kib, save_dirs, unique_name};
use crate::define::{done, hints, listing};
use crate::error::{Result, ToolError};

/// process_read's `wait_ms` when none is given, and at most.
pub const DEFAULT_WAIT_MS: u64 = 1000;
pub const MAX_WAIT_MS: u64 = limits::MAX_WAIT_MS;
/// After the first output of a read, how long more may come into the same reply.
pub const LINGER_MS: u64 = 200;
/// A terminal's size when `pty` gives none.
pub const DEFAULT_COLS: u16 = 120;
pub const DEFAULT_ROWS: u16 = 40;

const NO_SUCH_ID: &str = "Use process_list to see the ids of this computer's processes.";

pub(crate) fn id_error(doing: String, e: ClientError) -> ToolError {
    ToolError::client(doing, e).hint_for(ErrorKind::NotFound, NO_SUCH_ID)
}

// ------------------------------------------------------------ process_start

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessStartArgs {
    /// Bash command line (login profile). This or `argv`.
    pub command: Option<String>,
    /// Program and arguments, no shell. This or `command`.
    pub argv: Option<Vec<String>>,
    /// Terminal (shells, REPLs): `true` (120x40) or {cols, rows}. Default: stdin pipe, stdout+stderr merged.
    pub pty: Option<Pty>,
    /// Absolute working directory. Default: HOME.
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: Option<BTreeMap<String, String>>,
}

// A terminal: yes or no, or its size.
#[derive(Clone, Copy, Debug, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
pub enum Pty {
    On(bool),
    Size(PtyArgs),
}

impl<'de> Deserialize<'de> for Pty {
    /// By hand, so a wrong value is refused in words, not with a type's name.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(b) => Ok(Pty::On(b)),
            v @ serde_json::Value::Object(_) => serde_json::from_value::<PtyArgs>(v)
                .map(Pty::Size)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "pty is {other}; it is true, false, or a size such as {{\"cols\": 120, \"rows\": 40}}"
            ))),
        }
    }
}

// A terminal's size.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct PtyArgs {
    #[schemars(range(min = 1, max = 4096))]
    pub cols: Option<u16>,
    #[schemars(range(min = 1, max = 4096))]
    pub rows: Option<u16>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessStartOutput {
    /// The process's id for the other process_ tools.
    pub id: String,
    /// Its pid in the computer.
    pub pid: i32,
    /// Whether it runs in a terminal.
    pub pty: bool,
    /// A file in the computer with its stdout and stderr together (the first 16 MiB), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_file: Option<String>,
}

/// How long a background start waits for room under the computer's pids
/// bound before it is refused.
const START_QUEUE_MS: u64 = 30_000;

listing!(
    pub(crate) fn start_tool(s): ProcessStartArgs => ProcessStartOutput,
    "Start a program in the background (server, watcher, long build, REPL); returns its id at once. \
Without `pty` its output is also logged to a file the result names.",
    hints("Start a process", false, false, false, s.open_world)
);

fn check_side(field: &str, v: Option<u16>, default: u16) -> Result<u16> {
    match v {
        None => Ok(default),
        Some(n) if (1..=limits::MAX_PTY_SIDE).contains(&n) => Ok(n),
        Some(n) => Err(ToolError::Invalid(format!(
            "{field} is {n}; it is 1 to {}",
            limits::MAX_PTY_SIDE
        ))),
    }
}

pub(crate) async fn start(ctx: &ToolContext, a: ProcessStartArgs) -> Result<CallToolResult> {
    if let Some(cwd) = &a.cwd {
        absolute("cwd", cwd, &ctx.facts.work_dir)?;
    }
    let pty = match a.pty {
        None | Some(Pty::On(false)) => None,
        Some(Pty::On(true)) => Some(PtySize {
            cols: DEFAULT_COLS,
            rows: DEFAULT_ROWS,
        }),
        Some(Pty::Size(p)) => Some(PtySize {
            cols: check_side("pty.cols", p.cols, DEFAULT_COLS)?,
            rows: check_side("pty.rows", p.rows, DEFAULT_ROWS)?,
        }),
    };
    let (argv, env) = program(ctx, a.command, a.argv, a.env).await?;
    let base = ProcessStartParams {
        argv,
        cwd: a.cwd,
        env,
        pty,
        stdin: pty.is_none().then_some(true),
        // At the computer's process bound a start waits its turn a while.
        queue_ms: Some(START_QUEUE_MS),
        ..Default::default()
    };
    // A terminal is read from its own stream; a pipe process also gets a
    // log, tried in /tmp and then in the work directory, else none.
    let mut tries: Vec<Option<String>> = Vec::new();
    if pty.is_none() {
        let name = format!("{}.log", unique_name("process"));
        tries.extend(
            save_dirs(&ctx.facts.work_dir)
                .into_iter()
                .map(|d| Some(format!("{d}/{name}"))),
        );
    }
    tries.push(None);
    let mut outcome = None;
    for log in tries {
        let params = ProcessStartParams {
            log: log.clone(),
            ..base.clone()
        };
        match start_owned(&ctx.client, params).await {
            Ok(p) => {
                outcome = Some((p, log));
                break;
            }
            Err(ClientError::Rpc(e))
                if log.is_some()
                    && e.data.as_ref().and_then(|d| d.field.as_deref()) == Some("log") =>
            {
                tracing::debug!("process log {log:?} refused: {}", e.message);
            }
            Err(e) => return Err(ToolError::client("process_start failed", e)),
        }
    }
    let Some((p, log)) = outcome else {
        return Err(ToolError::Broken(
            "process_start failed: no start was tried".into(),
        ));
    };
    let stream = match (pty.is_some(), log.is_some()) {
        (true, _) => Stream::Pty,
        (false, true) => Stream::Log,
        (false, false) => Stream::Stdout,
    };
    lock(&memo(ctx)).set_stream(&p.id, stream);
    let mut text = format!(
        "started {} (pid {}){}. Read its output with process_read (id {:?}).",
        p.id,
        p.pid,
        match pty {
            Some(s) => format!(" in a {}x{} terminal", s.cols, s.rows),
            None => String::new(),
        },
        p.id
    );
    if let Some(l) = &log {
        text.push_str(&format!(
            " Its stdout and stderr also go to {l} (the first 16 MiB)."
        ));
    }
    let out = ProcessStartOutput {
        id: p.id,
        pid: p.pid,
        pty: pty.is_some(),
        log_file: log,
    };
    Ok(done(text, &out))
}

pub(crate) async fn wait(
    ctx: &ToolContext,
    id: &str,
    timeout_ms: u64,
) -> Result<ProcessWaitResult> {
    ctx.client
        .call_typed(&ProcessWaitParams {
            id: id.to_string(),
            timeout_ms,
        })
        .await
        .map_err(|e| id_error(format!("asking how {id} ended"), e))
}

/// How a process that no longer runs ended, as the end of a sentence
/// about it ("p1 has exited with code 0").
pub(crate) fn how_it_ended(w: &ProcessWaitResult) -> String {
    match (w.exit_code, &w.signal) {
        (Some(c), _) => format!("has exited with code {c}"),
        (None, Some(s)) => format!("was ended by signal {s}"),
        (None, None) => "has ended".to_string(),
    }
}

// ------------------------------------------------------------ process_write

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessWriteArgs {
    /// The process's id.
    pub id: String,
    /// Text; a line needs "\n". In a terminal "\u0003" is Ctrl-C, "\u0004" Ctrl-D.
    pub input: Option<String>,
    /// Close stdin after `input` (in a terminal: "\u0004").
    #[serde(default)]
    pub close: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessWriteOutput {
    /// The process written to.
    pub id: String,
    /// Bytes of input sent.
    pub bytes_written: u64,
    /// stdin is closed now.
    pub closed: bool,
}

listing!(
    pub(crate) fn write_tool(_): ProcessWriteArgs => ProcessWriteOutput,
    "Send text to a background process's stdin or terminal. \
Waits up to 10 s for it to be taken; read the answer with process_read.",
    hints("Write to a process", false, false, false, false)
);

pub(crate) async fn write(ctx: &ToolContext, a: ProcessWriteArgs) -> Result<CallToolResult> {
    let input = a.input.unwrap_or_default().into_bytes();
    if input.is_empty() && !a.close {
        return Err(ToolError::Invalid(
            "give input (the text to send) or close: true (or both)".into(),
        ));
    }
    // A program that has ended reads nothing: its stdin may still take
    // bytes (a child of it can hold the pipe), which would then be said to
    // have been written. Refuse instead, with how it ended.
    let now = ctx
        .client
        .call_typed(&ProcessWaitParams {
            id: a.id.clone(),
            timeout_ms: 0,
        })
        .await
        .map_err(|e| id_error(format!("writing to {}", a.id), e))?;
    if !now.running {
        return Err(ToolError::Refused(format!(
            "{} {}, so nothing was written. Its output is still there for process_read; start the program again with process_start to give it input.",
            a.id,
            how_it_ended(&now)
        )));
    }
    let chunk = limits::MAX_WRITE_BYTES as usize;
    let mut pieces: Vec<&[u8]> = input.chunks(chunk).collect();
    if pieces.is_empty() {
        pieces.push(&[]);
    }
    let last = pieces.len() - 1;
    let mut written = 0u64;
    for (i, piece) in pieces.into_iter().enumerate() {
        ctx.client
            .call_typed(&ProcessWriteParams {
                id: a.id.clone(),
                data: (!piece.is_empty()).then(|| Bytes64(piece.to_vec())),
                close: (a.close && i == last).then_some(true),
            })
            .await
            .map_err(|e| {
                let e = id_error(format!("writing to {}", a.id), e);
                if written > 0 {
                    ToolError::Refused(format!("{e} ({written} bytes were written before)"))
                } else {
                    e
                }
            })?;
        written += piece.len() as u64;
    }
    let mut text = format!("wrote {written} bytes to {}", a.id);
    if a.close {
        text.push_str(" and closed its stdin");
    }
    text.push_str("; read the answer with process_read.");
    let out = ProcessWriteOutput {
        id: a.id,
        bytes_written: written,
        closed: a.close,
    };
    Ok(done(text, &out))
}

// ----------------------------------------------------------- process_signal

/// A signal to send: its name as the tool lists it, as `kill -l` writes it
/// (`SIGKILL`), in any case, or its number (`9`, `"9"`). Models trained on
/// shells send all of these; each means the one signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(inline)]
pub enum SignalName {
    #[serde(rename = "TERM")]
    Term,
    #[serde(rename = "INT")]
    Int,
    #[serde(rename = "HUP")]
    Hup,
    #[serde(rename = "KILL")]
    Kill,
}

impl SignalName {
    fn wire(self) -> Signal {
        match self {
            SignalName::Term => Signal::Term,
            SignalName::Int => Signal::Int,
            SignalName::Hup => Signal::Hup,
            SignalName::Kill => Signal::Kill,
        }
    }

    /// The signal a name or number means, if it is one of the four.
    fn from_word(word: &str) -> Option<SignalName> {
        let w = word.trim().to_ascii_uppercase();
        let w = w.strip_prefix("SIG").unwrap_or(&w);
        Some(match w {
            "TERM" | "15" => SignalName::Term,
            "INT" | "2" => SignalName::Int,
            "HUP" | "1" => SignalName::Hup,
            "KILL" | "9" => SignalName::Kill,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for SignalName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Word(String),
            Number(i64),
        }
        let refuse = |given: String| {
            serde::de::Error::custom(format!(
                "{given} is not a signal this tool sends: give TERM (15, ask to stop), INT (2, Ctrl-C), HUP (1) or KILL (9, at once); SIGTERM and the numbers are taken too"
            ))
        };
        match Given::deserialize(d).map_err(|_| refuse("that".to_string()))? {
            Given::Word(w) => SignalName::from_word(&w).ok_or_else(|| refuse(format!("{w:?}"))),
            Given::Number(n) => {
                SignalName::from_word(&n.to_string()).ok_or_else(|| refuse(n.to_string()))
            }
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessSignalArgs {
    /// The process's id.
    pub id: String,
    /// TERM (ask to stop), INT (Ctrl-C), HUP or KILL (at once).
    pub signal: SignalName,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessSignalOutput {
    /// The process signalled.
    pub id: String,
    /// The signal sent.
    pub signal: String,
    /// The computer's note when the signal went elsewhere than asked, or nowhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether the process still runs a moment after the signal.
    pub running: bool,
    /// Its exit code, when it has exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<String>,
}

listing!(
    pub(crate) fn signal_tool(_): ProcessSignalArgs => ProcessSignalOutput,
    "Signal a background process and its group (in a terminal, INT goes to the foreground job). \
Says whether it ended; KILL ends one that ignores TERM.",
    hints("Signal a process", false, true, false, false)
);

pub(crate) async fn signal(ctx: &ToolContext, a: ProcessSignalArgs) -> Result<CallToolResult> {
    let r = ctx
        .client
        .call_typed(&ProcessSignalParams {
            id: a.id.clone(),
            signal: a.signal.wire(),
        })
        .await
        .map_err(|e| id_error(format!("signalling {}", a.id), e))?;
    // The wait ends as soon as the process does; the bound only costs a
    // process that goes on (INT to a shell in a terminal usually does).
    let settle = if a.signal == SignalName::Int {
        200
    } else {
        1000
    };
    let w = wait(ctx, &a.id, settle).await?;
    let name = a.signal.wire().name();
    let mut text = format!("sent {name} to {}", a.id);
    if let Some(n) = &r.note {
        text.push_str(&format!(" ({n})"));
    }
    match (w.running, w.exit_code, &w.signal) {
        (true, _, _) => text.push_str(&format!(
            "; it is still running{}",
            if a.signal == SignalName::Kill || a.signal == SignalName::Int {
                ""
            } else {
                " (send KILL to end it at once)"
            }
        )),
        (false, ..) => text.push_str(&format!("; it {}", how_it_ended(&w))),
    }
    text.push('.');
    let out = ProcessSignalOutput {
        id: a.id,
        signal: name.to_string(),
        note: r.note,
        running: w.running,
        exit_code: w.exit_code,
        ended_by: w.signal,
    };
    Ok(done(text, &out))
}

// ------------------------------------------------------------- process_list

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessListArgs {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct ListedProcess {
    /// Its id for the other process_ tools.
    pub id: String,
    /// Its pid in the computer.
    pub pid: i32,
    /// The command line as given (a shell command's own text).
    pub command: String,
    /// Runs in a terminal.
    pub pty: bool,
    /// Still running.
    pub running: bool,
    /// Its exit code, when it has exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// When it started, in milliseconds since the epoch.
    pub started_at_ms: i64,
    /// When it ended, in milliseconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessListOutput {
    /// Oldest first.
    pub processes: Vec<ListedProcess>,
    /// The text listing stopped at the output budget.
    pub truncated: bool,
}

listing!(
    pub(crate) fn list_tool(s): ProcessListArgs => ProcessListOutput,
    format!(
        "List background processes, oldest first: id, pid, state, command. \
Ended ones stay (up to 256), output readable. Fits about {}.",
        kib(s.output_budget_bytes)
    ),
    hints("List processes", true, false, false, false)
);

/// How a process is shown: a shell command by its own text, else its argv.
pub(crate) fn command_text(argv: &[String], clipped: bool) -> String {
    let shell = matches!(
        argv,
        [sh, flag, _] if (sh == "/bin/bash" && flag == "-lc") || (sh == "/bin/sh" && flag == "-c")
    );
    let text = if shell {
        argv[2].clone()
    } else {
        argv.iter()
            .map(|a| {
                if !a.is_empty()
                    && a.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
                {
                    a.clone()
                } else {
                    format!("'{}'", a.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut shown: String = text.chars().take(200).collect();
    if shown.len() < text.len() || clipped {
        shown.push_str("...");
    }
    shown
}

pub(crate) async fn list(ctx: &ToolContext, _a: ProcessListArgs) -> Result<CallToolResult> {
    let mut all = Vec::new();
    let mut from = None;
    loop {
        let page = ctx
            .client
            .call_typed(&ProcessListParams { from: from.take() })
            .await
            .map_err(|e| ToolError::client("listing the processes", e))?;
        all.extend(page.processes);
        match (page.truncated, page.next) {
            (true, Some(next)) => from = Some(next),
            _ => break,
        }
    }
    let budget = ctx.settings.output_budget_bytes;
    let mut lines = String::new();
    let mut processes = Vec::new();
    let mut truncated = false;
    // The newest matter most: when the budget is short, the oldest go.
    for p in all.into_iter().rev() {
        let state = match (p.running, p.exit_code, &p.signal) {
            (true, _, _) => "running".to_string(),
            (false, Some(c), _) => format!("exited {c}"),
            (false, None, Some(s)) => format!("killed by {s}"),
            (false, None, None) => "ended".to_string(),
        };
        let command = command_text(&p.argv, p.argv_clipped);
        let line = format!(
            "{:<5} pid {:<7} {:<16} {}{}\n",
            p.id,
            p.pid,
            state,
            if p.pty { "[pty] " } else { "" },
            command
        );
        if lines.len() + line.len() > budget {
            truncated = true;
            break;
        }
        lines.insert_str(0, &line);
        processes.push(ListedProcess {
            id: p.id,
            pid: p.pid,
            command,
            pty: p.pty,
            running: p.running,
            exit_code: p.exit_code,
            signal: p.signal,
            started_at_ms: p.started_at,
            ended_at_ms: p.ended_at,
        });
    }
    processes.reverse();
    let running = processes.iter().filter(|p| p.running).count();
    let mut text = if processes.is_empty() {
        "no processes: start one with process_start\n".to_string()
    } else {
        format!(
            "{} process{} ({running} running), oldest first:\n{lines}",
            processes.len(),
            if processes.len() == 1 { "" } else { "es" }
        )
    };
    if truncated {
        text.push_str(&format!(
            "[older processes are left out to fit the output budget ({})]\n",
            kib(budget)
        ));
    }
    Ok(done(
        text,
        &ProcessListOutput {
            processes,
            truncated,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn commands_are_shown_as_given() {
        assert_eq!(
            command_text(
                &v(&["/bin/bash", "-lc", "python3 -m http.server 8000"]),
                false
            ),
            "python3 -m http.server 8000"
        );
        assert_eq!(
            command_text(&v(&["/bin/sh", "-c", "echo hi"]), false),
            "echo hi"
        );
        assert_eq!(
            command_text(&v(&["grep", "-r", "a b", "it's"]), false),
            "grep -r 'a b' 'it'\\''s'"
        );
        assert_eq!(command_text(&v(&["cat"]), true), "cat...");
        let long = "x".repeat(300);
        assert_eq!(command_text(&v(&[&long]), false).len(), 203);
    }

    #[test]
    fn signals_are_the_four_the_daemon_sends_by_name_sig_name_or_number() {
        for (given, want) in [
            (serde_json::json!("TERM"), Signal::Term),
            (serde_json::json!("SIGKILL"), Signal::Kill),
            (serde_json::json!("sigint"), Signal::Int),
            (serde_json::json!("kill"), Signal::Kill),
            (serde_json::json!(9), Signal::Kill),
            (serde_json::json!("15"), Signal::Term),
            (serde_json::json!(1), Signal::Hup),
        ] {
            let s: SignalName = serde_json::from_value(given.clone()).unwrap();
            assert_eq!(s.wire(), want, "{given}");
        }
        for bad in [
            serde_json::json!("STOP"),
            serde_json::json!(19),
            serde_json::json!(true),
        ] {
            let e = serde_json::from_value::<SignalName>(bad.clone()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("is not a signal this tool sends: give TERM (15, ask to stop), INT (2, Ctrl-C), HUP (1) or KILL (9, at once)"),
                "{bad}: {e}"
            );
        }
    }
}
