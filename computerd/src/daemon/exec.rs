//! exec.run: a program to its end under its own guard, output kept apart and capped.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::GuardCommand;
use super::runner::{self, Exit, StartFailure, Stdio3, room};
use super::{Daemon, KILL_GRACE, check, sys};
use crate::protocol::{Bytes64, ExecParams, ExecResult, RpcError, limits};

/// After TERM and the kill grace, how much longer the daemon waits for a
/// guard before it kills the guard's tree itself.
const GUARD_SLACK: Duration = Duration::from_secs(3);

pub async fn run(
    daemon: &Arc<Daemon>,
    p: ExecParams,
    cancel: CancellationToken,
) -> Result<ExecResult, RpcError> {
    let called = Instant::now();
    let timeout_ms = check::one_to(
        "timeoutMs",
        p.timeout_ms.unwrap_or(limits::DEFAULT_EXEC_TIMEOUT_MS),
        limits::MAX_EXEC_TIMEOUT_MS,
    )?;
    let max_output = check::at_most(
        "maxOutput",
        p.max_output.unwrap_or(limits::MAX_OUTPUT_BYTES),
        limits::MAX_OUTPUT_BYTES,
    )?;
    let queue_ms = check::queue_ms(p.queue_ms)?;
    let deadline = called + Duration::from_millis(timeout_ms);
    let mut prepared = runner::prepare(daemon, p.invocation())?;
    // A run that ends clean gives its guard back for the next one.
    prepared.spec.reuse = true;

    // Room under the computer's pids bound, waited for in turn when asked.
    let room = &daemon.reaper.room;
    let queue_until = (called + Duration::from_millis(queue_ms)).min(deadline);
    let mut ticket = None;
    if queue_ms > 0 && room.queued() > 0 {
        ticket = Some(room.join("exec.run")?);
    }
    let mut failed = false;
    let (run, out_r, err_r, stdin_w, start) = loop {
        if let Some(t) = &ticket {
            tokio::select! {
                ok = t.turn(queue_until, failed) => if !ok {
                    return Err(t.gave_up("exec.run", called.elapsed()));
                },
                _ = cancel.cancelled() => {
                    return Err(RpcError::aborted("exec.run was cancelled while it waited for room"));
                }
            }
        }
        // Counted as a start only while it tries: a queued start holds up no
        // shutdown.
        let start = daemon.life.begin_start()?;
        let full = match start_once(daemon, &prepared.spec, &p, deadline, &cancel).await? {
            Started::Run(run, out_r, err_r, stdin_w) => break (run, out_r, err_r, stdin_w, start),
            Started::TimedOut => {
                return Ok(ExecResult {
                    timed_out: true,
                    exit_code: None,
                    signal: Some("KILL".into()),
                    ..Default::default()
                });
            }
            Started::Full(e) => e,
        };
        if queue_ms == 0 {
            return Err(room::refused("exec.run", room.queued()));
        }
        if ticket.is_none() {
            ticket = Some(room.join("exec.run")?);
        }
        failed = true;
        tracing::debug!("exec.run found no room to start ({full}); queued");
    };
    // Out of the queue: the next in line tries at once.
    drop(ticket);
    start.finish();

    let stdout = tokio::spawn(read_capped(receiver(out_r), max_output));
    let stderr = tokio::spawn(read_capped(receiver(err_r), max_output));
    let feeder = match (stdin_w, p.stdin) {
        (Some(w), Some(data)) => Some(tokio::spawn(async move {
            if let Ok(mut tx) = pipe::Sender::from_owned_fd(w) {
                // EPIPE is fine: the program does not have to read its stdin.
                let _ = tx.write_all(&data).await;
                let _ = tx.shutdown().await;
            }
        })),
        _ => None,
    };

    let mut timed_out = false;
    let mut aborted = false;
    let mut force_at: Option<Instant> = None;
    let exit = loop {
        tokio::select! {
            e = run.exited() => break e,
            _ = tokio::time::sleep_until(deadline), if !timed_out && !aborted => {
                timed_out = true;
                force_at = Some(Instant::now() + KILL_GRACE + GUARD_SLACK);
                run.command(&GuardCommand::Terminate).await;
            }
            _ = cancel.cancelled(), if !timed_out && !aborted => {
                aborted = true;
                force_at = Some(Instant::now() + KILL_GRACE + GUARD_SLACK);
                run.command(&GuardCommand::Terminate).await;
            }
            _ = sleep_until_opt(force_at) => {
                tracing::warn!(guard = run.guard_pid, "a guard did not end its run in time; killing its tree");
                run.kill_now();
                force_at = None;
            }
        }
    };
    // Its pids are free (its guard may stay, idle): a queued start tries.
    daemon.reaper.room.freed();
    if let Some(f) = feeder {
        f.abort();
    }
    // Every writer is gone once the guard has reported, so both reads end.
    let (out, out_cut) = stdout.await.unwrap_or_default();
    let (err, err_cut) = stderr.await.unwrap_or_default();
    if aborted {
        return Err(RpcError::aborted(
            "exec.run was cancelled; its program and everything it started were ended",
        ));
    }
    run.recycle(daemon).await;
    let (exit_code, signal) = sys::decode_wait_status(match exit {
        Exit::Program(s) | Exit::GuardEnded(s) => s,
    });
    Ok(ExecResult {
        exit_code,
        signal,
        stdout: Bytes64(out),
        stderr: Bytes64(err),
        timed_out,
        truncated: out_cut || err_cut,
    })
}

/// One try at starting the run: the guard, its pipes, the program.
enum Started {
    Run(Box<runner::Run>, OwnedFd, OwnedFd, Option<OwnedFd>),
    /// The deadline came before the program started (it was killed).
    TimedOut,
    /// No pid was free: the computer's process bound (nothing is left).
    Full(String),
}

async fn start_once(
    daemon: &Arc<Daemon>,
    spec: &super::guard::GuardSpec,
    p: &ExecParams,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Started, RpcError> {
    let io_err = |e: std::io::Error| {
        RpcError::limit(format!(
            "exec.run could not set up the program's pipes: {e}"
        ))
    };
    let (out_r, out_w) = sys::output_pipe().map_err(io_err)?;
    let (err_r, err_w) = sys::output_pipe().map_err(io_err)?;
    let (stdin_fd, stdin_w): (OwnedFd, Option<OwnedFd>) = match &p.stdin {
        Some(_) => {
            let (r, w) = sys::pipe().map_err(io_err)?;
            (r, Some(w))
        }
        None => (dev_null().map_err(io_err)?, None),
    };
    let stdio = Stdio3 {
        stdin: stdin_fd,
        stdout: out_w,
        stderr: err_w,
    };
    let run = match runner::spawn(daemon, spec, stdio).await {
        Ok(run) => run,
        Err(e) if e.raw_os_error().is_some_and(room::is_full) => {
            return Ok(Started::Full(format!("its guard: {e}")));
        }
        Err(e) => {
            return Err(RpcError::limit(format!(
                "exec.run could not start its guard: {e}"
            )));
        }
    };

    // The start counts against the timeout: a guard whose exec stalls is
    // killed with everything under it, and the run times out.
    tokio::select! {
        started = run.started() => match started {
            Ok(_) => Ok(Started::Run(Box::new(run), out_r, err_r, stdin_w)),
            Err(StartFailure::Program { errno, message }) if room::is_full(errno) => {
                Ok(Started::Full(format!("the program: {message}")))
            }
            Err(f) => Err(f.into_rpc(&p.argv[0])),
        },
        _ = tokio::time::sleep_until(deadline) => {
            run.kill_now();
            let _ = run.exited().await;
            Ok(Started::TimedOut)
        }
        _ = cancel.cancelled() => {
            run.kill_now();
            let _ = run.exited().await;
            Err(RpcError::aborted("exec.run was cancelled before its program started"))
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The read end of an [`sys::output_pipe`] (a pipe, non-blocking already).
fn receiver(fd: OwnedFd) -> Option<pipe::Receiver> {
    pipe::Receiver::from_owned_fd_unchecked(fd).ok()
}

/// Read to EOF, keeping the first `max` bytes and dropping the rest.
async fn read_capped<R: AsyncRead + Unpin>(r: Option<R>, max: u64) -> (Vec<u8>, bool) {
    let Some(mut r) = r else {
        return (Vec::new(), false);
    };
    let max = max as usize;
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, cut),
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                if n > room {
                    cut = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

pub fn dev_null() -> std::io::Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    Ok(OwnedFd::from(f))
}
