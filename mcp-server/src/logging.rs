//! Logs on stderr that can never hold up a tool call.
//!
//! An MCP client may ignore the server's stderr (the spec lets it), and a
//! pipe nobody reads fills after 64 KiB: a plain `stderr` writer would then
//! block whichever task logged next, and with it a tool call or the whole
//! HTTP server. Lines go instead into a bounded queue that one thread of
//! its own writes out. When the queue is full a line is dropped and
//! counted; the count is written, in words, before the next line once
//! stderr takes writes again.
//!
//! The MCP SDK logs every request at info; those lines are moved one level
//! down (a plain `--log info` shows the SDK's warnings only), so info holds
//! what a person wants to see: sessions starting and ending, computers made
//! and released.
//!
//! An HTTP session's id is its credential beside the token, and the SDK
//! writes it into some of its lines ("create new session", "Failed to close
//! session …", errors naming the session) and into the span of each
//! session. Every line of the SDK's, or logged inside one of its spans, has
//! such ids (UUIDs) replaced before it is written, at every level; our own
//! lines name sessions only by our short `s-…` names.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// Lines held while stderr does not take writes.
const QUEUE_LINES: usize = 4096;

enum Msg {
    Line(Vec<u8>),
    /// Answered once every line queued before it has been written.
    Flush(SyncSender<()>),
}

/// The writer the subscriber formats into: each event is one `write`.
#[derive(Clone)]
pub struct Queue {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl Queue {
    /// A queue and the thread that writes it to `out`.
    fn start<W: Write + Send + 'static>(out: W, capacity: usize) -> std::io::Result<Queue> {
        let (tx, rx) = sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&dropped);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || drain(rx, out, &counter))?;
        Ok(Queue { tx, dropped })
    }

    /// Wait (at most `limit`) until what was logged so far is written.
    pub fn flush(&self, limit: Duration) {
        let until = std::time::Instant::now() + limit;
        let (tx, rx) = sync_channel(1);
        let mut msg = Msg::Flush(tx);
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if std::time::Instant::now() < until => {
                    msg = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
        let _ = rx.recv_timeout(until.saturating_duration_since(std::time::Instant::now()));
    }

    /// Lines dropped and not yet reported.
    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn drain<W: Write>(rx: Receiver<Msg>, mut out: W, dropped: &AtomicU64) {
    for msg in rx {
        match msg {
            Msg::Line(line) => {
                let n = dropped.swap(0, Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "computer-mcp: {n} log line(s) were dropped while stderr was not being read"
                    );
                }
                let _ = out.write_all(&line);
                let _ = out.flush();
            }
            Msg::Flush(done) => {
                let _ = out.flush();
                let _ = done.try_send(());
            }
        }
    }
}

impl Write for Queue {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.tx.try_send(Msg::Line(buf.to_vec())) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Queue {
    type Writer = Queue;
    fn make_writer(&'a self) -> Queue {
        self.clone()
    }
}

/// The filter `--log` names: a level (`error`, `warn`, `info`, `debug`,
/// `trace`, `off`), or a tracing filter such as `info,computer_mcp=debug`.
/// A bare word that is no level is refused (tracing would read it as a
/// target name and silently log nothing of ours).
pub fn filter(spec: &str) -> Result<EnvFilter, String> {
    let spec = spec.trim();
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let text = if let Some(i) = LEVELS.iter().position(|l| spec.eq_ignore_ascii_case(l)) {
        // The SDK's per-request info lines count as our debug, and so do
        // the warnings its service loop writes for every error answered to
        // a client (an unknown tool, a method this server does not serve:
        // the client's mistake, answered to it, as a Rust `Debug` dump).
        let sdk = match LEVELS[i] {
            "info" => "warn,rmcp::service=error",
            "debug" => "info",
            same => same,
        };
        format!("{},rmcp={sdk}", LEVELS[i])
    } else if spec.contains('=') || spec.contains(',') {
        spec.to_string()
    } else {
        return Err(format!(
            "--log {spec:?} is neither a level (error, warn, info, debug, trace, off) nor a filter such as info,computer_mcp=debug"
        ));
    };
    EnvFilter::try_new(&text).map_err(|e| format!("--log {spec:?} is not a log filter: {e}"))
}

/// The SDK's target, and that of its spans.
const SDK: &str = "rmcp";

/// What a session id becomes in a line of the SDK's.
pub const REDACTED: &str = "<session id>";

/// The formatter of our lines, which writes the SDK's lines with their
/// session ids replaced.
struct Redacting {
    inner: Format<Full, tracing_subscriber::fmt::time::SystemTime>,
}

impl<S, N> FormatEvent<S, N> for Redacting
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let in_sdk = event.metadata().target().starts_with(SDK)
            || ctx.event_scope().is_some_and(|mut scope| {
                scope.any(|span| span.metadata().target().starts_with(SDK))
            });
        if !in_sdk {
            return self.inner.format_event(ctx, writer, event);
        }
        // Formatted aside (without colour: the SDK's lines are plain), then
        // written with the ids out.
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        writer.write_str(&redact_ids(&line))
    }
}

/// `text` with every UUID (8-4-4-4-12 hex digits: how rmcp names
/// sessions) replaced by [`REDACTED`].
pub fn redact_ids(text: &str) -> String {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    const LEN: usize = 36;
    let b = text.as_bytes();
    let is_uuid_at = |i: usize| -> bool {
        if i + LEN > b.len() {
            return false;
        }
        let mut at = i;
        for (n, len) in GROUPS.iter().enumerate() {
            if !b[at..at + len].iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            at += len;
            if n < GROUPS.len() - 1 {
                if b[at] != b'-' {
                    return false;
                }
                at += 1;
            }
        }
        // Not the middle of a longer run of hex digits.
        (i == 0 || !b[i - 1].is_ascii_hexdigit())
            && b.get(i + LEN).is_none_or(|c| !c.is_ascii_hexdigit())
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if is_uuid_at(i) {
            out.push_str(&text[copied..i]);
            out.push_str(REDACTED);
            i += LEN;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Logs to stderr through the queue, at `level` (see [`filter`]), with
/// colour only when stderr is a terminal. Returns the queue so the server
/// can flush it before it exits.
pub fn init(level: &str) -> Result<Queue, String> {
    let filter = filter(level)?;
    let queue = Queue::start(std::io::stderr(), QUEUE_LINES)
        .map_err(|e| format!("could not start the log writer: {e}"))?;
    let ansi = std::io::stderr().is_terminal();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(queue.clone())
        .with_ansi(ansi)
        .event_format(Redacting {
            inner: tracing_subscriber::fmt::format()
                .with_target(false)
                .with_ansi(ansi),
        })
        .try_init();
    Ok(queue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that blocks every write until it is opened, as a pipe nobody
    /// reads does.
    #[derive(Clone)]
    struct Gate {
        open: Arc<(Mutex<bool>, std::sync::Condvar)>,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            self.got.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_stderr_drops_lines_and_says_so_when_it_resumes() {
        let gate = Gate {
            open: Arc::new((Mutex::new(false), std::sync::Condvar::new())),
            got: Arc::new(Mutex::new(Vec::new())),
        };
        let mut q = Queue::start(gate.clone(), 4).unwrap();
        // One line is taken by the writer (and blocks in it), four wait in
        // the queue, and the rest are dropped: no write here blocks.
        for i in 0..20 {
            q.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        assert!(q.dropped() >= 15, "dropped {}", q.dropped());
        {
            let (lock, cv) = &*gate.open;
            *lock.lock().unwrap() = true;
            cv.notify_all();
        }
        q.flush(Duration::from_secs(5));
        q.write_all(b"after\n").unwrap();
        q.flush(Duration::from_secs(5));
        let text = String::from_utf8(gate.got.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let report = lines
            .iter()
            .find(|l| l.contains("were dropped"))
            .unwrap_or_else(|| panic!("no report of dropped lines in {text:?}"));
        let n: u64 = report
            .trim_start_matches("computer-mcp: ")
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let kept = lines.iter().filter(|l| l.starts_with("line ")).count() as u64;
        assert_eq!(kept + n, 20, "{text}");
        assert_eq!(*lines.last().unwrap(), "after");
    }

    #[test]
    fn uuids_are_redacted_and_nothing_else() {
        let id = "2ad96457-1723-4c32-8847-fbe669011738";
        assert_eq!(
            redact_ids(&format!("create new session session_id=\"{id}\"")),
            format!("create new session session_id=\"{REDACTED}\"")
        );
        assert_eq!(
            redact_ids(&format!("{id}: Failed to close session {id}: x")),
            format!("{REDACTED}: Failed to close session {REDACTED}: x")
        );
        assert_eq!(redact_ids(&id.to_uppercase()), REDACTED.to_string());
        for kept in [
            "s-0af33cf7c18b",
            "local-27a3fc71f6a4b222",
            "2ad96457-1723-4c32-8847-fbe66901173",
            "a2ad96457-1723-4c32-8847-fbe669011738",
            "2ad96457-1723-4c32-8847-fbe6690117389",
            "2ad96457x1723-4c32-8847-fbe669011738",
            "é ü 12345678-",
        ] {
            assert_eq!(redact_ids(kept), kept);
        }
    }

    #[test]
    fn levels_and_filters_are_taken_and_other_words_refused() {
        for ok in [
            "info",
            "DEBUG",
            "warn",
            "trace",
            "off",
            "info,computer_mcp=debug",
            "rmcp=debug",
        ] {
            assert!(filter(ok).is_ok(), "{ok}");
        }
        let e = filter("verbose").unwrap_err();
        assert_eq!(
            e,
            "--log \"verbose\" is neither a level (error, warn, info, debug, trace, off) nor a filter such as info,computer_mcp=debug"
        );
        assert!(filter("info,=[").is_err());
        // The SDK's info lines show from debug on, not at info.
        assert_eq!(
            filter("info").unwrap().to_string(),
            "rmcp::service=error,rmcp=warn,info"
        );
        assert_eq!(filter("debug").unwrap().to_string(), "rmcp=info,debug");
        assert_eq!(filter("trace").unwrap().to_string(), "rmcp=trace,trace");
    }
}
