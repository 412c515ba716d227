//! `exec`: run a command to its end.
//!
//! Without progress it is one `exec.run`, one round trip, so `exec true`
//! stays fast; cancelling drops that call, and the client sends
//! `$/cancelRequest`, which ends the run's whole tree in the daemon.
//! With progress the program is started with `process.start` and its two
//! streams are followed with long-poll reads, so a report can name the last
//! line of output about once a second; the timeout and a cancel are then
//! ours to enforce (TERM, KILL 2 s later; KILL on cancel).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::{
    Bytes64, ExecParams, ProcessReadParams, ProcessReadResult, ProcessSignalParams,
    ProcessStartParams, ProcessWaitParams, ProcessWaitResult, ProcessWriteParams, Signal, Stream,
    limits,
};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{absolute, program, spawn_kill, start_owned};
use crate::budget::{kib, middle_cut, save_output, split_budget, unique_name};
use crate::define::{done, hints, make_tool, restate_property};
use crate::error::{Result, ToolError};
use crate::{Progress, ProgressFn, ToolContext, ToolSettings};

/// The most stdin text one exec takes.
pub const MAX_STDIN_BYTES: usize = limits::MAX_WRITE_BYTES as usize;

/// What the tool keeps of each stream: the daemon's own cap for exec.run.
const KEEP_BYTES: usize = limits::MAX_OUTPUT_BYTES as usize;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// Bash command line (login profile). This or `argv`.
    pub command: Option<String>,
    /// Program and arguments, no shell. This or `command`.
    pub argv: Option<Vec<String>>,
    /// Absolute working directory. Default: HOME.
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: Option<BTreeMap<String, String>>,
    /// Text for stdin, then closed (at most 512 KiB).
    pub stdin: Option<String>,
    /// Then it and all it started end. Default 120000, at most 600000.
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecOutput {
    /// The program's exit code; absent when a signal ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the program (TERM, KILL, ...), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The program ran out of time and was ended.
    pub timed_out: bool,
    /// Standard output as UTF-8 (invalid bytes replaced), cut in the middle when over the budget.
    pub stdout: String,
    /// Standard error, likewise.
    pub stderr: String,
    /// stdout or stderr here was cut in the middle to fit the output budget; the whole of it is in stdout_file / stderr_file.
    pub truncated: bool,
    /// The program wrote more than the tool keeps of a stream (360 KiB); the excess is not in the files either.
    pub overflowed: bool,
    /// A file in the computer with all of stdout the tool received, when stdout was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_file: Option<String>,
    /// A file in the computer with all of stderr the tool received, when stderr was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_file: Option<String>,
    /// Bytes of stdout the tool received.
    pub stdout_bytes: u64,
    /// Bytes of stderr the tool received.
    pub stderr_bytes: u64,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
}

pub(crate) fn tool(name: &'static str, s: &ToolSettings) -> Tool {
    let description = format!(
        "Run a command to its end: exit code, stdout and stderr. \
Output over {} is cut in the middle, saved whole (up to {}) to a file it names. \
`cd`/`export` last one call: chain (`cd /a && make`) or use `cwd`, `env`. \
Nothing it starts outlives it: for servers or input, use process_start.",
        kib(s.output_budget_bytes),
        kib(limits::MAX_OUTPUT_BYTES as usize)
    );
    let mut t = make_tool::<ExecArgs, ExecOutput>(
        name,
        description,
        hints("Run a command", false, true, false, s.open_world),
    );
    restate_property(
        &mut t,
        "timeout_ms",
        format!(
            "Then it and all it started end. Default {}, at most {}.",
            s.exec_default_timeout_ms, s.exec_max_timeout_ms
        ),
        Some(s.exec_max_timeout_ms),
    );
    t
}

/// The checked arguments of a run.
struct Plan {
    argv: Vec<String>,
    cwd: Option<String>,
    env: Option<BTreeMap<String, String>>,
    stdin: Option<String>,
    timeout_ms: u64,
}

async fn plan(ctx: &ToolContext, a: ExecArgs) -> Result<Plan> {
    let s = &ctx.settings;
    let timeout_ms = match a.timeout_ms {
        None => s.exec_default_timeout_ms.min(s.exec_max_timeout_ms),
        Some(0) => {
            return Err(ToolError::Invalid(format!(
                "timeout_ms must be at least 1 (milliseconds; default {}, at most {})",
                s.exec_default_timeout_ms, s.exec_max_timeout_ms
            )));
        }
        Some(t) if t > s.exec_max_timeout_ms => {
            return Err(ToolError::Invalid(format!(
                "timeout_ms is {t}; the most is {} ({} min). For longer work, start it with process_start and check on it with process_read.",
                s.exec_max_timeout_ms,
                s.exec_max_timeout_ms / 60_000
            )));
        }
        Some(t) => t,
    };
    if let Some(cwd) = &a.cwd {
        absolute("cwd", cwd, &ctx.facts.work_dir)?;
    }
    if let Some(stdin) = &a.stdin
        && stdin.len() > MAX_STDIN_BYTES
    {
        return Err(ToolError::Invalid(format!(
            "stdin is {} bytes; the most is {MAX_STDIN_BYTES}. Write the input to a file with write_file and redirect it (`cmd < file`).",
            stdin.len()
        )));
    }
    let (argv, env) = program(ctx, a.command, a.argv, a.env).await?;
    Ok(Plan {
        argv,
        cwd: a.cwd,
        env,
        stdin: a.stdin,
        timeout_ms,
    })
}

pub(crate) async fn run(ctx: &ToolContext, a: ExecArgs) -> Result<CallToolResult> {
    let started = Instant::now();
    let plan = plan(ctx, a).await?;
    let ran = match &ctx.progress {
        None => run_once(ctx, plan).await?,
        Some(progress) => run_followed(ctx, plan, progress).await?,
    };
    finish(ctx, ran, started).await
}

/// What a run gave, before the budget.
#[derive(Debug, Default)]
struct Ran {
    exit_code: Option<i32>,
    signal: Option<String>,
    timed_out: bool,
    timeout_ms: u64,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Words on output the tool did not get, per stream.
    stdout_lost: Option<String>,
    stderr_lost: Option<String>,
}

fn failed(e: computerd::client::ClientError) -> ToolError {
    ToolError::client("exec failed", e)
}

/// One exec.run: one round trip.
async fn run_once(ctx: &ToolContext, p: Plan) -> Result<Ran> {
    let params = ExecParams {
        argv: p.argv,
        cwd: p.cwd,
        env: p.env,
        user: None,
        stdin: p.stdin.map(|s| Bytes64(s.into_bytes())),
        timeout_ms: Some(p.timeout_ms),
        max_output: None,
        // At the computer's process bound the call waits for room (within
        // its own timeout) rather than failing.
        queue_ms: Some(p.timeout_ms.min(limits::MAX_QUEUE_MS)),
    };
    let r = ctx.client.call_typed(&params).await.map_err(failed)?;
    let lost = |len: usize| {
        (r.truncated && len >= KEEP_BYTES).then(|| {
            format!(
                "the program wrote more than {}; only the first {} reached the tool (to see the end, run it again piped to tail, or redirect it to a file)",
                kib(KEEP_BYTES),
                kib(KEEP_BYTES)
            )
        })
    };
    Ok(Ran {
        stdout_lost: lost(r.stdout.len()),
        stderr_lost: lost(r.stderr.len()),
        exit_code: r.exit_code,
        signal: r.signal,
        timed_out: r.timed_out,
        timeout_ms: p.timeout_ms,
        stdout: r.stdout.into_inner(),
        stderr: r.stderr.into_inner(),
    })
}

/// The start and the end of a stream, up to [`KEEP_BYTES`] each.
#[derive(Debug, Default)]
struct Collector {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    /// Bytes the daemon's ring lost before the tool read them.
    dropped: u64,
}

impl Collector {
    fn push(&mut self, data: &[u8], dropped: u64) {
        self.dropped += dropped;
        self.total += data.len() as u64;
        let room = KEEP_BYTES - self.head.len();
        let (h, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(h);
        if !rest.is_empty() {
            self.tail.extend(rest);
            if self.tail.len() > KEEP_BYTES {
                let excess = self.tail.len() - KEEP_BYTES;
                self.tail.drain(..excess);
            }
        }
    }

    /// The bytes kept, with a marker where some were not, and words on it.
    fn into_bytes(self) -> (Vec<u8>, Option<String>) {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let skipped = self.total - kept;
        let lost = skipped + self.dropped;
        let mut out = self.head;
        if lost > 0 {
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(
                format!(
                    "[... {lost} bytes from the middle were not kept: the tool keeps the first and the last {} ...]\n",
                    kib(KEEP_BYTES)
                )
                .as_bytes(),
            );
        }
        out.extend(self.tail);
        let words = (lost > 0).then(|| {
            format!(
                "the program wrote {} bytes; {lost} from the middle were not kept",
                self.total + self.dropped
            )
        });
        (out, words)
    }
}

/// Ends a followed program when the call is cancelled or dropped.
struct KillOnDrop {
    client: Arc<dyn ComputerClient>,
    id: String,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        spawn_kill(self.client.clone(), std::mem::take(&mut self.id));
    }
}

type Call<'a, T> = BoxFuture<'a, computerd::client::Result<T>>;

fn read_next<'a>(
    client: &'a Arc<dyn ComputerClient>,
    id: &str,
    stream: Stream,
    offset: u64,
) -> Call<'a, ProcessReadResult> {
    let params = ProcessReadParams {
        id: id.to_string(),
        stream,
        offset,
        max_bytes: Some(limits::MAX_CHUNK_BYTES),
        wait_ms: Some(limits::MAX_WAIT_MS),
    };
    Box::pin(async move { client.call_typed(&params).await })
}

/// Write all of `data` to the program's stdin, then close it.
fn feed<'a>(client: &'a Arc<dyn ComputerClient>, id: &str, data: Vec<u8>) -> Call<'a, ()> {
    let id = id.to_string();
    Box::pin(async move {
        let chunk = limits::MAX_WRITE_BYTES as usize;
        let mut pieces: Vec<&[u8]> = data.chunks(chunk).collect();
        if pieces.is_empty() {
            pieces.push(&[]);
        }
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            client
                .call_typed(&ProcessWriteParams {
                    id: id.clone(),
                    data: (!piece.is_empty()).then(|| Bytes64(piece.to_vec())),
                    close: (i == last).then_some(true),
                })
                .await?;
        }
        Ok(())
    })
}

/// Poll an optional future: pending forever when there is none.
async fn maybe<F: std::future::Future + Unpin>(f: &mut Option<F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The last non-empty line of a chunk, for a progress message.
fn last_line(chunk: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(chunk);
    let line = text
        .split(['\n', '\r'])
        .map(str::trim)
        .rfind(|l| !l.is_empty())?;
    let mut shown: String = line.chars().take(200).collect();
    if shown.len() < line.len() {
        shown.push_str("...");
    }
    Some(shown)
}

/// How long a followed program's start waits for its end: under the
/// first progress report's second.
const FIRST_WAIT_MS: u64 = 900;

/// The program's end: brought by its start, or asked for beside the reads.
enum Waiting {
    Known(ProcessWaitResult),
    Asked(tokio::task::JoinHandle<computerd::client::Result<ProcessWaitResult>>),
}

/// process.start, then both streams followed with a progress report about
/// once a second; the timeout is TERM then KILL; a cancel or drop is KILL.
async fn run_followed(ctx: &ToolContext, p: Plan, progress: &ProgressFn) -> Result<Ran> {
    let started = tokio::time::Instant::now();
    let client = &ctx.client;
    // A program with no input to feed is waited for within the start, up
    // to just before the first progress report is due (or its timeout):
    // one that ends by then costs one round trip, as exec.run does.
    let wait_ms = p.stdin.is_none().then(|| FIRST_WAIT_MS.min(p.timeout_ms));
    let start = ProcessStartParams {
        argv: p.argv,
        cwd: p.cwd,
        env: p.env,
        stdin: p.stdin.is_some().then_some(true),
        wait_ms,
        queue_ms: Some(p.timeout_ms.min(limits::MAX_QUEUE_MS)),
        ..Default::default()
    };
    let begun = start_owned(client, start).await.map_err(failed)?;
    let id = begun.id;
    let mut guard = KillOnDrop {
        client: client.clone(),
        id: id.clone(),
        armed: true,
    };
    let mut out = Collector::default();
    let mut err = Collector::default();
    let mut latest = String::new();
    // The end is asked for at once, beside the reads, so its answer comes
    // with theirs instead of one round trip after (unless the start
    // brought it).
    let (waiting, mut out_read, mut err_read) = match begun.ended {
        Some(ended) => {
            let mut first =
                |chunk: Option<ProcessReadResult>, into: &mut Collector, stream| match chunk {
                    Some(r) => {
                        if let Some(l) = last_line(&r.data) {
                            latest = l;
                        }
                        into.push(&r.data, r.dropped);
                        (!r.exited).then(|| read_next(client, &id, stream, r.next_offset))
                    }
                    None => Some(read_next(client, &id, stream, 0)),
                };
            let out_read = first(ended.stdout, &mut out, Stream::Stdout);
            let err_read = first(ended.stderr, &mut err, Stream::Stderr);
            let w = ProcessWaitResult {
                running: false,
                exit_code: ended.exit_code,
                signal: ended.signal,
            };
            (Waiting::Known(w), out_read, err_read)
        }
        None => {
            let wait_client = client.clone();
            let wait_params = ProcessWaitParams {
                id: id.clone(),
                timeout_ms: p
                    .timeout_ms
                    .saturating_add(limits::KILL_GRACE_MS + 10_000)
                    .min(limits::MAX_PROCESS_WAIT_MS),
            };
            let task = tokio::spawn(async move { wait_client.call_typed(&wait_params).await });
            (
                Waiting::Asked(task),
                Some(read_next(client, &id, Stream::Stdout, 0)),
                Some(read_next(client, &id, Stream::Stderr, 0)),
            )
        }
    };
    let mut stdin = p.stdin.map(|s| feed(client, &id, s.into_bytes()));
    let second = Duration::from_secs(1);
    let mut tick = tokio::time::interval_at(started + second, second);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = tokio::time::sleep_until(started + Duration::from_millis(p.timeout_ms));
    tokio::pin!(deadline);
    let mut timed_out = false;
    let mut kill_at: Option<tokio::time::Instant> = None;
    while out_read.is_some() || err_read.is_some() {
        tokio::select! {
            r = maybe(&mut out_read) => {
                let r = r.map_err(failed)?;
                if let Some(l) = last_line(&r.data) { latest = l; }
                out.push(&r.data, r.dropped);
                out_read = (!r.exited).then(|| read_next(client, &id, Stream::Stdout, r.next_offset));
            }
            r = maybe(&mut err_read) => {
                let r = r.map_err(failed)?;
                if let Some(l) = last_line(&r.data) { latest = l; }
                err.push(&r.data, r.dropped);
                err_read = (!r.exited).then(|| read_next(client, &id, Stream::Stderr, r.next_offset));
            }
            // A program that exits without reading its input fails the
            // write; that is the program's business, as with exec.run.
            _ = maybe(&mut stdin) => { stdin = None; }
            _ = tick.tick() => {
                let elapsed = started.elapsed();
                let line = if latest.is_empty() { "(no output yet)" } else { latest.as_str() };
                progress(Progress {
                    elapsed_ms: elapsed.as_millis() as u64,
                    message: format!("{}s: {line}", elapsed.as_secs()),
                });
            }
            _ = &mut deadline, if !timed_out => {
                timed_out = true;
                signal(client, &id, Signal::Term).await?;
                kill_at = Some(tokio::time::Instant::now() + Duration::from_millis(limits::KILL_GRACE_MS));
            }
            _ = sleep_until_opt(kill_at) => {
                kill_at = None;
                signal(client, &id, Signal::Kill).await?;
            }
        }
    }
    drop(stdin);
    let waited = match waiting {
        Waiting::Known(w) => Ok(Ok(w)),
        Waiting::Asked(task) => task.await,
    };
    let w = match waited {
        Ok(Ok(w)) if !w.running => w,
        _ => client
            .call_typed(&ProcessWaitParams {
                id: id.clone(),
                timeout_ms: 10_000,
            })
            .await
            .map_err(failed)?,
    };
    if !w.running {
        guard.armed = false;
    }
    let (stdout, stdout_lost) = out.into_bytes();
    let (stderr, stderr_lost) = err.into_bytes();
    Ok(Ran {
        exit_code: w.exit_code,
        signal: w.signal,
        timed_out,
        timeout_ms: p.timeout_ms,
        stdout,
        stderr,
        stdout_lost,
        stderr_lost,
    })
}

async fn signal(client: &Arc<dyn ComputerClient>, id: &str, signal: Signal) -> Result<()> {
    client
        .call_typed(&ProcessSignalParams {
            id: id.to_string(),
            signal,
        })
        .await
        .map(|_| ())
        .map_err(failed)
}

/// The budget, the saved files, the text and the structured result.
async fn finish(ctx: &ToolContext, ran: Ran, started: Instant) -> Result<CallToolResult> {
    let budget = ctx.settings.output_budget_bytes;
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    let (keep_out, keep_err) = split_budget(out.len(), err.len(), budget);
    let cut_out = middle_cut(&out, keep_out);
    let cut_err = middle_cut(&err, keep_err);
    let stem = unique_name("exec");
    let mut notes = Vec::new();
    let mut save = async |cut: usize, ext: &str, bytes: &[u8]| -> Result<Option<String>> {
        if cut == 0 {
            return Ok(None);
        }
        match save_output(
            &ctx.client,
            &ctx.facts.work_dir,
            &format!("{stem}.{ext}"),
            bytes,
        )
        .await
        {
            Ok(path) => Ok(Some(path)),
            Err(e @ ToolError::Gone(_)) => Err(e),
            Err(e) => {
                notes.push(format!("the whole {ext} could not be saved: {e}"));
                Ok(None)
            }
        }
    };
    let stdout_file = save(cut_out.cut, "stdout", &ran.stdout).await?;
    let stderr_file = save(cut_err.cut, "stderr", &ran.stderr).await?;
    let shown_out = cut_out.render_kept(stdout_file.as_deref(), ran.stdout_lost.is_none());
    let shown_err = cut_err.render_kept(stderr_file.as_deref(), ran.stderr_lost.is_none());

    let mut text = match (&ran.exit_code, &ran.signal) {
        _ if ran.timed_out => format!(
            "timed out after {} ms; the program was ended{}",
            ran.timeout_ms,
            ran.signal
                .as_deref()
                .map(|s| format!(" by signal {s}"))
                .unwrap_or_default()
        ),
        (Some(code), _) => format!("exit code: {code}"),
        // Nothing in the computer sends KILL but its memory bound (the
        // kernel's OOM killer) or a program told to: say the likely one.
        (None, Some(sig)) if sig == "KILL" => format!(
            "ended by signal {sig}: killed, most likely for using more memory than the computer has (computer_info shows its limits); use less at once, or ask for a computer with more memory"
        ),
        (None, Some(sig)) => format!("ended by signal {sig}"),
        (None, None) => "ended without an exit code".to_string(),
    };
    text.push('\n');
    if shown_out.is_empty() && shown_err.is_empty() {
        text.push_str("(no output)\n");
    }
    for (name, shown) in [("stdout", &shown_out), ("stderr", &shown_err)] {
        if shown.is_empty() {
            continue;
        }
        text.push_str(&format!("--- {name} ---\n{shown}"));
        if !shown.ends_with('\n') {
            text.push('\n');
        }
    }
    for (name, bytes) in [("stdout", &ran.stdout), ("stderr", &ran.stderr)] {
        notes.extend(crate::text::binary_note(name, bytes));
    }
    for (name, lost) in [("stdout", &ran.stdout_lost), ("stderr", &ran.stderr_lost)] {
        if let Some(words) = lost {
            notes.push(format!("{name}: {words}"));
        }
    }
    for n in &notes {
        text.push_str(&format!("[{n}]\n"));
    }
    let output = ExecOutput {
        exit_code: ran.exit_code,
        signal: ran.signal.clone(),
        timed_out: ran.timed_out,
        truncated: cut_out.cut > 0 || cut_err.cut > 0,
        overflowed: ran.stdout_lost.is_some() || ran.stderr_lost.is_some(),
        stdout: shown_out,
        stderr: shown_err,
        stdout_file,
        stderr_file,
        stdout_bytes: ran.stdout.len() as u64,
        stderr_bytes: ran.stderr.len() as u64,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let mut r = done(text, &output);
    // Each saved output is also a resource the client can read in pages.
    if let Some(base) = &ctx.resources {
        for (file, size) in [
            (&output.stdout_file, output.stdout_bytes),
            (&output.stderr_file, output.stderr_bytes),
        ] {
            if let Some(path) = file {
                let name = path.rsplit('/').next().unwrap_or(path);
                r.content.push(ContentBlock::resource_link(
                    rmcp::model::Resource::new(format!("{base}/file{path}"), name)
                        .with_description("the whole output, saved in the computer; resources/read it in pages (?page=N)")
                        .with_mime_type("text/plain")
                        .with_size(size),
                ));
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_keeps_the_start_and_the_end() {
        let mut c = Collector::default();
        c.push(b"small", 0);
        let (bytes, lost) = c.into_bytes();
        assert_eq!((bytes.as_slice(), lost), (b"small".as_slice(), None));

        let mut c = Collector::default();
        let block = vec![b'a'; KEEP_BYTES];
        c.push(&block, 0);
        c.push(&vec![b'b'; 1000], 0);
        c.push(&vec![b'c'; KEEP_BYTES], 0);
        let (bytes, lost) = c.into_bytes();
        assert!(bytes.starts_with(&block));
        assert!(bytes.ends_with(&vec![b'c'; KEEP_BYTES]));
        assert_eq!(
            lost.as_deref(),
            Some("the program wrote 738280 bytes; 1000 from the middle were not kept")
        );
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("[... 1000 bytes from the middle were not kept"));
    }

    #[test]
    fn the_last_line_names_the_latest_output() {
        assert_eq!(last_line(b"one\ntwo\n\n").as_deref(), Some("two"));
        assert_eq!(last_line(b"50%\r75%\r").as_deref(), Some("75%"));
        assert_eq!(last_line(b"\n \n"), None);
        let long = "z".repeat(300);
        assert_eq!(last_line(long.as_bytes()).unwrap().len(), 203);
    }
}
