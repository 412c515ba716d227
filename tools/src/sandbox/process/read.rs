//! `process_read`: a process's new output from an offset, taking a burst
//! whole, in named steps: the wait, the first read (finding the stream),
//! the burst that follows, a cut character held back, the words.

use std::time::{Duration, Instant};

use computerd::client::{ClientError, ComputerExt};
use computerd::protocol::{
    ErrorKind, ProcessReadParams, ProcessReadResult, ProcessWaitResult, Stream, limits,
};
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DEFAULT_WAIT_MS, LINGER_MS, MAX_WAIT_MS, how_it_ended, id_error, wait};
use crate::ToolContext;
use crate::budget::kib;
use crate::define::{done, hints, listing};
use crate::error::{Result, ToolError};
use crate::sandbox::{lock, memo};
use crate::text::incomplete_utf8_tail;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessReadArgs {
    /// The process's id (e.g. "p3").
    pub id: String,
    /// Byte offset (0: start). Default: where the last read ended.
    pub since: Option<u64>,
    /// Wait this long for new output or the exit. Default 1000, at most 30000; 0: none.
    #[schemars(range(max = 30000))]
    pub wait_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessReadOutput {
    /// The process read.
    pub id: String,
    /// The new output, as UTF-8 (invalid bytes replaced).
    pub output: String,
    /// Where this output starts.
    pub since: u64,
    /// Pass this as `since` next time.
    pub next_offset: u64,
    /// Bytes already there past next_offset, not in this reply.
    pub pending_bytes: u64,
    /// Bytes lost between `since` and this output (the process keeps its last 8 MiB).
    pub dropped: u64,
    /// The process has ended and all its output has been read.
    pub exited: bool,
    /// Its exit code, once exited (absent when a signal ended it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, once exited, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// What was read: `log` (stdout and stderr together), `pty` (the terminal), or `stdout`.
    pub stream: String,
    /// The log file reached its 16 MiB and keeps nothing more.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log_capped: bool,
}

listing!(
    pub(crate) fn read_tool(s): ProcessReadArgs => ProcessReadOutput,
    format!(
        "Read a background process's new output and whether it has exited. \
To follow it, call again: each waits up to `wait_ms` (no sleep needed). \
A reply holds about {}; when more is waiting it says so.",
        kib(s.output_budget_bytes)
    ),
    hints("Read process output", true, false, false, false)
);

fn stream_name(s: Stream) -> &'static str {
    match s {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
        Stream::Pty => "pty",
        Stream::Log => "log",
    }
}

pub(crate) async fn read(ctx: &ToolContext, a: ProcessReadArgs) -> Result<CallToolResult> {
    let wait_ms = wait_of(a.wait_ms)?;
    let started = Instant::now();
    let memo = memo(ctx);
    let since = match a.since {
        Some(s) => s,
        None => lock(&memo).read_to(&a.id).unwrap_or(0),
    };
    let known = lock(&memo).stream(&a.id);
    let max = (ctx.settings.output_budget_bytes as u64).clamp(1, limits::MAX_CHUNK_BYTES);
    let (stream, first) = first_read(ctx, &a.id, known, since, max, wait_ms).await?;
    if known.is_none() {
        lock(&memo).set_stream(&a.id, stream);
    }
    let until = started + Duration::from_millis(wait_ms);
    let mut burst = linger(ctx, &a.id, stream, first, max, until).await?;
    let next = burst.hold_back_partial_char();
    let last = &burst.last;
    let ended = if last.exited {
        Some(wait(ctx, &a.id, 0).await?)
    } else {
        None
    };
    lock(&memo).set_read_to(&a.id, next);
    let output = String::from_utf8_lossy(&burst.data).into_owned();
    let out = ProcessReadOutput {
        id: a.id,
        output,
        since,
        next_offset: next,
        pending_bytes: last.size.saturating_sub(next),
        dropped: burst.dropped,
        exited: last.exited,
        exit_code: ended.as_ref().and_then(|w| w.exit_code),
        signal: ended.as_ref().and_then(|w| w.signal.clone()),
        stream: stream_name(stream).to_string(),
        log_capped: last.capped == Some(true),
    };
    let text = read_text(&out, &burst, stream, ended.as_ref(), wait_ms);
    Ok(done(text, &out))
}

/// `wait_ms`, or the default; over the most is refused.
fn wait_of(wait_ms: Option<u64>) -> Result<u64> {
    match wait_ms {
        None => Ok(DEFAULT_WAIT_MS),
        Some(w) if w > MAX_WAIT_MS => Err(ToolError::Invalid(format!(
            "wait_ms is {w}; the most is {MAX_WAIT_MS} (30 s). Call process_read again to wait longer."
        ))),
        Some(w) => Ok(w),
    }
}

/// The first read: of the stream known for `id`, else the first of the
/// log, the terminal and stdout the process has.
async fn first_read(
    ctx: &ToolContext,
    id: &str,
    known: Option<Stream>,
    since: u64,
    max: u64,
    wait_ms: u64,
) -> Result<(Stream, ProcessReadResult)> {
    let order: Vec<Stream> = match known {
        Some(s) => vec![s],
        None => vec![Stream::Log, Stream::Pty, Stream::Stdout],
    };
    for stream in order {
        let r = ctx
            .client
            .call_typed(&ProcessReadParams {
                id: id.to_string(),
                stream,
                offset: since,
                max_bytes: Some(max),
                wait_ms: Some(wait_ms),
            })
            .await;
        match r {
            Ok(r) => return Ok((stream, r)),
            Err(ClientError::Rpc(e))
                if e.kind() == Some(ErrorKind::Invalid)
                    && e.data.as_ref().and_then(|d| d.field.as_deref()) == Some("stream") =>
            {
                continue;
            }
            Err(e) => {
                let e = id_error(format!("reading the output of {id}"), e);
                return Err(if e.field() == Some("offset") {
                    e.hint_for(
                        ErrorKind::Invalid,
                        "since must be at most the output's size so far: pass the next_offset of the last process_read, or 0.",
                    )
                } else {
                    e
                });
            }
        }
    }
    Err(ToolError::Refused(format!(
        "{id} has no output stream this tool can read"
    )))
}

/// What one process_read took: the bytes, those lost before them, and the
/// last answer (its offsets and whether the process ended), without data.
struct Burst {
    data: Vec<u8>,
    dropped: u64,
    last: ProcessReadResult,
}

impl Burst {
    /// Hold back a character cut at the end (it comes whole next time);
    /// gives the offset the next read starts at.
    fn hold_back_partial_char(&mut self) -> u64 {
        let mut next = self.last.next_offset;
        let held = incomplete_utf8_tail(&self.data);
        if !self.last.exited && held > 0 && held < self.data.len() {
            self.data.truncate(self.data.len() - held);
            next -= held as u64;
        }
        next
    }
}

/// Output comes in bursts (a prompt after a command's output, a test run's
/// lines): once some came, take what follows within LINGER_MS too, so one
/// reply holds the burst. Bounded by `until` (wait_ms) and the budget.
async fn linger(
    ctx: &ToolContext,
    id: &str,
    stream: Stream,
    first: ProcessReadResult,
    max: u64,
    until: Instant,
) -> Result<Burst> {
    let mut burst = Burst {
        dropped: first.dropped,
        data: first.data.0,
        last: ProcessReadResult {
            data: Default::default(),
            ..first
        },
    };
    while !burst.data.is_empty() && !burst.last.exited && (burst.data.len() as u64) < max {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let more = ctx
            .client
            .call_typed(&ProcessReadParams {
                id: id.to_string(),
                stream,
                offset: burst.last.next_offset,
                max_bytes: Some(max - burst.data.len() as u64),
                wait_ms: Some((left.as_millis() as u64).min(LINGER_MS)),
            })
            .await
            .map_err(|e| id_error(format!("reading the output of {id}"), e))?;
        let quiet = more.data.is_empty() && more.dropped == 0 && !more.exited;
        burst.dropped += more.dropped;
        burst.data.extend_from_slice(&more.data);
        burst.last = ProcessReadResult {
            data: Default::default(),
            ..more
        };
        if quiet {
            break;
        }
    }
    Ok(burst)
}

/// The words of a read: how the process stands, the output, and where the
/// next read goes on.
fn read_text(
    out: &ProcessReadOutput,
    burst: &Burst,
    stream: Stream,
    ended: Option<&ProcessWaitResult>,
    wait_ms: u64,
) -> String {
    let (id, since, next, dropped) = (&out.id, out.since, out.next_offset, out.dropped);
    let data = &burst.data;
    // A terminal ends lines with CR LF; the text shows them as plain lines.
    let shown = if stream == Stream::Pty {
        out.output.replace("\r\n", "\n")
    } else {
        out.output.clone()
    };
    let mut text = match ended {
        None => format!("{id} is running."),
        Some(w) => format!("{id} {}.", how_it_ended(w)),
    };
    if dropped > 0 {
        text.push_str(&format!(
            " {dropped} bytes after offset {since} were lost before they were read (a process keeps its last 8 MiB of output)."
        ));
    }
    if data.is_empty() {
        if !out.exited {
            text.push_str(&format!(" No new output within {wait_ms} ms."));
        } else if since == 0 {
            text.push_str(" It wrote no output.");
        } else {
            text.push_str(" No more output.");
        }
        text.push('\n');
    } else {
        text.push_str(&format!(
            " Output {}-{next} ({} bytes):\n{shown}",
            next - data.len() as u64,
            data.len()
        ));
        if !shown.ends_with('\n') {
            text.push('\n');
        }
    }
    if out.pending_bytes > 0 {
        text.push_str(&format!(
            "[{} more bytes are already waiting: process_read again goes on from {next}]\n",
            out.pending_bytes
        ));
    } else if !out.exited {
        text.push_str(&format!("[process_read again goes on from {next}]\n"));
    }
    if out.log_capped {
        text.push_str(
            "[the log file reached its 16 MiB cap; output after that is not kept in it]\n",
        );
    }
    if let Some(why) = &burst.last.log_error {
        text.push_str(&format!("[the log file stopped: {why}]\n"));
    }
    if let Some(note) = crate::text::binary_note("this output", data) {
        text.push_str(&format!("[{note}]\n"));
    }
    if stream == Stream::Stdout {
        text.push_str("[this process has no combined log: only its stdout is shown]\n");
    }
    text
}
