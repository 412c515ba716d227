//! CDP over a Chromium's debugging pipe, carried by the computer's own
//! daemon: the browser runs inside the computer (its user, its limits, its
//! network), started with `process.start`; a shell hands the program's
//! stdin pipe to it as fd 3 and its stdout pipe as fd 4, which is where
//! `--remote-debugging-pipe` reads commands and writes replies, each
//! message ended by a NUL. So no port is opened, inside the computer or
//! out of it: the CDP traffic is `process.write` and `process.read` on the
//! connection the server already holds.

use std::sync::Arc;

use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::{
    Bytes64, ProcessReadParams, ProcessSignalParams, ProcessStartParams, ProcessWaitParams,
    ProcessWriteParams, Signal, Stream, limits,
};

use super::conn::CdpConn;
use crate::types::{ErrorCode, ProviderError, Result};

/// The shell line that gives the browser its pipe: fd 3 is what the
/// server writes (stdin), fd 4 what it reads (stdout); the browser's own
/// stdout joins its stderr.
const PIPE_SHELL: &str = "exec \"$@\" 3<&0 4>&1 0</dev/null 1>&2";

/// argv 0 of the shell: `process.list` shows the browser under this name.
pub const PIPE_NAME: &str = "computer-mcp-browser";

/// The most bytes one read asks for (the daemon's own most).
const READ_BYTES: u64 = 512 * 1024;

/// How long one read waits for the browser to say something.
const READ_WAIT_MS: u64 = 30_000;

/// The argv that starts `browser` (its path and flags) on the pipe.
pub fn pipe_argv(browser: &[String]) -> Vec<String> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        PIPE_SHELL.into(),
        PIPE_NAME.into(),
    ];
    argv.extend(browser.iter().cloned());
    argv
}

/// A browser the computer runs, and the connection to it.
pub struct PipeBrowser {
    pub conn: Arc<CdpConn>,
    /// The process's id in the daemon (`p3`).
    pub process: String,
}

/// Start `browser` (its argv: path and flags, `--remote-debugging-pipe`
/// among them) in the computer behind `daemon`, and carry CDP over its
/// pipe until it ends or the connection is let go.
pub async fn start(
    daemon: Arc<dyn ComputerClient>,
    browser: &[String],
    env: std::collections::BTreeMap<String, String>,
) -> Result<PipeBrowser> {
    let started = daemon
        .call_typed(&ProcessStartParams {
            argv: pipe_argv(browser),
            stdin: Some(true),
            env: (!env.is_empty()).then_some(env),
            // A reply of many MiB (a big page's accessibility tree) waits
            // for the reads instead of overrunning the ring.
            hold: Some(true),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("the computer could not start its browser: {e}"),
            )
        })?;
    let process = started.id;
    let (conn, mut outbox) = CdpConn::new();

    let writer = Arc::clone(&conn);
    let wd = Arc::clone(&daemon);
    let wid = process.clone();
    tokio::spawn(async move {
        while let Some(text) = writer.outgoing(&mut outbox).await {
            let mut bytes = text.into_bytes();
            bytes.push(0);
            let sent = wd
                .call_typed(&ProcessWriteParams {
                    id: wid.clone(),
                    data: Some(Bytes64(bytes)),
                    close: None,
                })
                .await;
            if let Err(e) = sent {
                writer.end(format!("writing to the browser's pipe failed: {e}"));
                break;
            }
        }
        // The connection is over: so is the browser.
        let _ = wd
            .call_typed(&ProcessSignalParams {
                id: wid,
                signal: Signal::Kill,
            })
            .await;
    });

    let reader = Arc::clone(&conn);
    let rd = Arc::clone(&daemon);
    let rid = process.clone();
    tokio::spawn(async move {
        let why = read_loop(&reader, &rd, &rid).await;
        reader.end(why);
    });
    Ok(PipeBrowser { conn, process })
}

/// Read the browser's stdout until it ends, handing each NUL-ended message
/// to `conn`; the words say why it stopped.
async fn read_loop(conn: &CdpConn, daemon: &Arc<dyn ComputerClient>, id: &str) -> String {
    let mut offset = 0u64;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let params = ProcessReadParams {
            id: id.to_string(),
            stream: Stream::Stdout,
            offset,
            max_bytes: Some(READ_BYTES),
            wait_ms: Some(READ_WAIT_MS),
        };
        let read = tokio::select! {
            _ = conn.stopped() => return "the connection was let go".into(),
            r = daemon.call_typed(&params) => r,
        };
        let read = match read {
            Ok(r) => r,
            Err(e) => return format!("reading the browser's pipe failed: {e}"),
        };
        if read.dropped > 0 {
            return format!(
                "the browser wrote faster than it was read and the computer's {} MiB buffer let {} bytes go; the browser is ended and the next call starts it again",
                limits::RING_BYTES >> 20,
                read.dropped
            );
        }
        offset = read.next_offset;
        let mut data = read.data.0;
        let mut start = 0;
        while let Some(end) = data[start..].iter().position(|b| *b == 0) {
            let piece = &data[start..start + end];
            if buf.is_empty() {
                conn.on_message(piece);
            } else {
                buf.extend_from_slice(piece);
                conn.on_message(&buf);
                buf.clear();
            }
            start += end + 1;
        }
        if start < data.len() {
            if start == 0 && buf.is_empty() {
                buf = std::mem::take(&mut data);
            } else {
                buf.extend_from_slice(&data[start..]);
            }
            if buf.len() > limits::CDP_MESSAGE_MAX_BYTES {
                return format!(
                    "the browser sent a message over {} MiB",
                    limits::CDP_MESSAGE_MAX_BYTES >> 20
                );
            }
        }
        if read.exited {
            return ended_words(daemon, id).await;
        }
    }
}

/// Why the browser ended, with the last of what it said on stderr.
async fn ended_words(daemon: &Arc<dyn ComputerClient>, id: &str) -> String {
    let tail = match daemon
        .call_typed(&ProcessReadParams {
            id: id.to_string(),
            stream: Stream::Stderr,
            offset: 0,
            max_bytes: Some(READ_BYTES),
            wait_ms: None,
        })
        .await
    {
        Ok(r) => {
            let text = String::from_utf8_lossy(&r.data.0).into_owned();
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let last = lines[lines.len().saturating_sub(3)..].join(" | ");
            if last.is_empty() {
                String::new()
            } else {
                format!("; its last words: {}", clip(&last, 600))
            }
        }
        Err(_) => String::new(),
    };
    let how = match daemon
        .call_typed(&ProcessWaitParams {
            id: id.to_string(),
            timeout_ms: 1000,
        })
        .await
    {
        Ok(w) if !w.running => match (w.exit_code, w.signal) {
            (_, Some(s)) => format!(" (killed by {s})"),
            (Some(c), None) => format!(" (exit code {c})"),
            (None, None) => String::new(),
        },
        _ => String::new(),
    };
    format!("the browser in the computer ended{how}{tail}")
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_gives_the_browser_its_pipe_on_fds_3_and_4() {
        let argv = pipe_argv(&["/usr/lib/chromium/chromium".into(), "--headless".into()]);
        assert_eq!(
            argv,
            [
                "/bin/sh",
                "-c",
                "exec \"$@\" 3<&0 4>&1 0</dev/null 1>&2",
                "computer-mcp-browser",
                "/usr/lib/chromium/chromium",
                "--headless"
            ]
        );
    }
}
