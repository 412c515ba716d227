//! process.*: the table of programs that outlive their call.
//!
//! One table serves every connection. Each process has its own guard (as an
//! exec.run does), rings for its output under one budget, an optional log
//! file, and a stdin or terminal that writers take turns on.
//!
//! `table` holds the entries and the ring budget, `log` the log files, `pty`
//! the terminals; the methods are here.

mod log;
mod pty;
mod table;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::GuardCommand;
use super::ring::Ring;
use super::runner::{self, Exit, Run, StartFailure, Stdio3, room};
use super::{Daemon, check, exec, proctree, sys};
use crate::now_ms;
use crate::protocol::{
    Bytes64, Empty, ErrorData, ErrorKind, ProcessEnded, ProcessListParams, ProcessListResult,
    ProcessReadParams, ProcessReadResult, ProcessResizeParams, ProcessSignalParams,
    ProcessSignalResult, ProcessStartParams, ProcessStartResult, ProcessWaitParams,
    ProcessWaitResult, ProcessWriteParams, RpcError, Signal, Stream, clean_path, limits,
};

use log::{NewLog, create_log};
use pty::{check_pty_size, pump_terminal, write_terminal};
use table::{Ended, Entry, Inner, Which, info_of, read_entry, seq_of, unknown};

#[derive(Default)]
pub struct Table {
    inner: Mutex<Inner>,
    /// Starts take turns.
    start_turn: tokio::sync::Mutex<()>,
}

enum InputKind {
    Pipe(Option<pipe::Sender>),
    Terminal(Arc<AsyncFd<OwnedFd>>),
}

/// A process's stdin or terminal; writers take turns on the mutex.
struct Input {
    kind: tokio::sync::Mutex<InputKind>,
}

enum Io {
    Terminal(Arc<AsyncFd<OwnedFd>>),
    Pipes(OwnedFd, OwnedFd),
}

impl Table {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start a program; with waitMs, wait for its end up to then (after
    /// the start's turn is given up) and answer how it ended with the
    /// first of its output. A cancel while waiting answers the start as
    /// it is: the program runs on, and its id is the caller's.
    pub async fn start(
        &self,
        daemon: &Arc<Daemon>,
        p: ProcessStartParams,
        cancel: CancellationToken,
    ) -> Result<ProcessStartResult, RpcError> {
        let wait = p.wait_ms;
        if let Some(w) = wait
            && w > limits::MAX_WAIT_MS
        {
            return Err(RpcError::over_limit("waitMs", w, limits::MAX_WAIT_MS));
        }
        let pty = p.pty.is_some();
        let mut r = self.start_now(daemon, p, cancel.clone()).await?;
        let Some(w) = wait.filter(|w| *w > 0) else {
            return Ok(r);
        };
        let waited = tokio::select! {
            w = self.wait(ProcessWaitParams { id: r.id.clone(), timeout_ms: w }, cancel.clone()) => w,
            _ = cancel.cancelled() => return Ok(r),
        };
        let Ok(w) = waited else {
            return Ok(r);
        };
        if w.running {
            return Ok(r);
        }
        let (stdout, stderr) = if pty {
            (None, None)
        } else {
            (
                self.first_output(&r.id, Stream::Stdout, &cancel).await,
                self.first_output(&r.id, Stream::Stderr, &cancel).await,
            )
        };
        r.ended = Some(ProcessEnded {
            exit_code: w.exit_code,
            signal: w.signal,
            stdout,
            stderr,
        });
        Ok(r)
    }

    /// An ended program's first output on `stream`, from offset 0, once its
    /// pipe has closed (its end can be known a moment before its last bytes
    /// are in), a chunk's worth, or a second has passed: what is not in it
    /// is read as usual.
    async fn first_output(
        &self,
        id: &str,
        stream: Stream,
        cancel: &CancellationToken,
    ) -> Option<ProcessReadResult> {
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            let r = self
                .read(
                    ProcessReadParams {
                        id: id.to_string(),
                        stream,
                        offset: 0,
                        max_bytes: None,
                        wait_ms: None,
                    },
                    cancel.clone(),
                )
                .await
                .ok()?;
            let left = until.saturating_duration_since(Instant::now());
            if r.exited || r.data.len() as u64 >= limits::MAX_CHUNK_BYTES || left.is_zero() {
                return Some(r);
            }
            // Wait for what comes past it (or the end), then read again.
            self.read(
                ProcessReadParams {
                    id: id.to_string(),
                    stream,
                    offset: r.next_offset,
                    max_bytes: Some(1),
                    wait_ms: Some(left.as_millis().max(1) as u64),
                },
                cancel.clone(),
            )
            .await
            .ok()?;
        }
    }

    async fn start_now(
        &self,
        daemon: &Arc<Daemon>,
        p: ProcessStartParams,
        cancel: CancellationToken,
    ) -> Result<ProcessStartResult, RpcError> {
        let mut prepared = runner::prepare(daemon, p.invocation())?;
        if let Some(size) = p.pty {
            check_pty_size(size.cols, size.rows)?;
            if p.stdin == Some(true) {
                return Err(RpcError::invalid_field(
                    "stdin",
                    "stdin and pty do not go together: a terminal is its own input; write to it",
                ));
            }
        }
        let log_path = p.log.as_deref().map(|l| clean_path("log", l)).transpose()?;
        let queue_ms = check::queue_ms(p.queue_ms)?;
        prepared.spec.pty = p.pty.is_some();
        prepared.spec.wait_group = p.wait_group.unwrap_or(false);
        prepared.spec.keep_orphans = p.orphans.is_some();
        // A run that ends clean gives its guard back, as exec.run's does
        // (the guard says so only with no terminal, no kept orphans and
        // nothing left under it).
        prepared.spec.reuse = p.pty.is_none() && p.orphans.is_none();

        let mut log = match &log_path {
            Some(path) => Some(create_log(path)?),
            None => None,
        };
        let outcome = self
            .start_in_turn(daemon, &p, &prepared.spec, queue_ms, &cancel)
            .await;
        let (run, pid, io, stdin, evict, start, _turn) = match outcome {
            Ok(x) => x,
            Err(e) => {
                if let Some(l) = log.take() {
                    l.remove();
                }
                return Err(e);
            }
        };
        start.finish();

        let input = match (&io, stdin) {
            (Io::Terminal(fd), _) => Some(Arc::new(Input {
                kind: tokio::sync::Mutex::new(InputKind::Terminal(Arc::clone(fd))),
            })),
            (Io::Pipes(..), Some(tx)) => Some(Arc::new(Input {
                kind: tokio::sync::Mutex::new(InputKind::Pipe(Some(tx))),
            })),
            (Io::Pipes(..), None) => None,
        };
        let terminal = match &io {
            Io::Terminal(fd) => Some(Arc::clone(fd)),
            Io::Pipes(..) => None,
        };
        let seq = {
            let mut inner = self.lock();
            if let Some(old) = evict {
                inner.remove(old);
            }
            inner.next_seq += 1;
            let seq = inner.next_seq;
            let mut err = Ring::new();
            // A terminal has one stream; the second is closed from the start.
            err.closed = terminal.is_some();
            inner.entries.insert(
                seq,
                Entry {
                    pid,
                    argv: p.argv.clone(),
                    pty: terminal.is_some(),
                    started_at: now_ms(),
                    ended: None,
                    keep_orphans: p.orphans.is_some(),
                    out: Ring::new(),
                    err,
                    log: log.take().map(NewLog::into_log),
                    run: Some(Arc::clone(&run)),
                    input,
                    terminal,
                    changed: watch::channel(0).0,
                    hold: p.hold == Some(true) && p.pty.is_none(),
                    read_to: 0,
                },
            );
            seq
        };
        match io {
            Io::Terminal(fd) => {
                super::spawn(pump_terminal(Arc::clone(daemon), seq, fd));
            }
            Io::Pipes(out, err) => {
                super::spawn(pump_pipe(Arc::clone(daemon), seq, Which::Out, out));
                super::spawn(pump_pipe(Arc::clone(daemon), seq, Which::Err, err));
            }
        }
        super::spawn(wait_for_end(Arc::clone(daemon), seq, run));
        Ok(ProcessStartResult {
            id: format!("p{seq}"),
            pid,
            ended: None,
        })
    }

    /// Take the start's turn, make room in the table, and start: queued
    /// for room under the computer's pids bound (outside the turn) when
    /// `queue_ms` allows. The table entry to evict comes with the run.
    #[allow(clippy::type_complexity)]
    async fn start_in_turn(
        &self,
        daemon: &Arc<Daemon>,
        p: &ProcessStartParams,
        spec: &super::guard::GuardSpec,
        queue_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<
        (
            Arc<Run>,
            i32,
            Io,
            Option<pipe::Sender>,
            Option<u64>,
            crate::daemon::StartToken,
            tokio::sync::MutexGuard<'_, ()>,
        ),
        RpcError,
    > {
        let called = Instant::now();
        let room = &daemon.reaper.room;
        let mut ticket = None;
        if queue_ms > 0 && room.queued() > 0 {
            ticket = Some(room.join("process.start")?);
        }
        let mut failed = false;
        loop {
            if let Some(t) = &ticket {
                tokio::select! {
                    ok = t.turn(called + Duration::from_millis(queue_ms), failed) => if !ok {
                        return Err(t.gave_up("process.start", called.elapsed()));
                    },
                    _ = cancel.cancelled() => {
                        return Err(RpcError::aborted("process.start was cancelled while it waited for room"));
                    }
                }
            }
            // Counted as a start only while it tries: a queued start holds
            // up no shutdown.
            let start = daemon.life.begin_start()?;
            // The turn is held to the table's insert (evict and insert as one).
            let turn = tokio::select! {
                t = self.start_turn.lock() => t,
                _ = cancel.cancelled() => return Err(RpcError::aborted("process.start was cancelled while it waited for its turn")),
            };
            let evict = self.room_in_table()?;
            match self.spawn_and_start(daemon, p, spec, cancel).await? {
                Some((run, pid, io, stdin)) => {
                    return Ok((run, pid, io, stdin, evict, start, turn));
                }
                None if queue_ms == 0 => {
                    return Err(room::refused("process.start", room.queued()));
                }
                None => {}
            }
            if ticket.is_none() {
                ticket = Some(room.join("process.start")?);
            }
            failed = true;
        }
    }

    /// The ended entry to drop for a new one when the table is full.
    fn room_in_table(&self) -> Result<Option<u64>, RpcError> {
        let inner = self.lock();
        if inner.entries.len() < limits::MAX_PROCESSES {
            return Ok(None);
        }
        let first_ended = inner
            .entries
            .iter()
            .filter_map(|(s, e)| e.ended.as_ref().map(|x| (x.order, *s)))
            .min();
        match first_ended {
            Some((_, seq)) => Ok(Some(seq)),
            None => Err(RpcError::limit(format!(
                "all {} processes in the table are running; end or wait for one before starting another",
                limits::MAX_PROCESSES
            ))),
        }
    }

    async fn spawn_and_start(
        &self,
        daemon: &Arc<Daemon>,
        p: &ProcessStartParams,
        spec: &super::guard::GuardSpec,
        cancel: &CancellationToken,
    ) -> Result<Option<(Arc<Run>, i32, Io, Option<pipe::Sender>)>, RpcError> {
        let io_err = |e: std::io::Error| {
            RpcError::limit(format!(
                "process.start could not set up the program's stdio: {e}"
            ))
        };
        let (stdio, io, stdin_w) = if let Some(size) = p.pty {
            let (stdio, master) = pty::open(size).map_err(io_err)?;
            (stdio, Io::Terminal(Arc::new(master)), None)
        } else {
            let (out_r, out_w) = sys::pipe().map_err(io_err)?;
            let (err_r, err_w) = sys::pipe().map_err(io_err)?;
            let (stdin, w) = if p.stdin == Some(true) {
                let (r, w) = sys::pipe().map_err(io_err)?;
                (r, Some(w))
            } else {
                (exec::dev_null().map_err(io_err)?, None)
            };
            (
                Stdio3 {
                    stdin,
                    stdout: out_w,
                    stderr: err_w,
                },
                Io::Pipes(out_r, err_r),
                w,
            )
        };
        let run = match runner::spawn(daemon, spec, stdio).await {
            Ok(run) => run,
            // No pid for the guard: the computer's process bound.
            Err(e) if e.raw_os_error().is_some_and(room::is_full) => return Ok(None),
            Err(e) => {
                return Err(RpcError::limit(format!(
                    "process.start could not start its guard: {e}"
                )));
            }
        };
        let run = Arc::new(run);
        let pid = tokio::select! {
            started = run.started() => match started {
                Ok(pid) => pid,
                Err(StartFailure::Program { errno, .. }) if room::is_full(errno) => return Ok(None),
                Err(f) => return Err(f.into_rpc(&p.argv[0])),
            },
            _ = cancel.cancelled() => {
                run.kill_now();
                let _ = run.exited().await;
                return Err(RpcError::aborted("process.start was cancelled before its program ran; nothing it started is left"));
            }
        };
        let stdin = match stdin_w {
            Some(w) => Some(pipe::Sender::from_owned_fd(w).map_err(io_err)?),
            None => None,
        };
        Ok(Some((run, pid, io, stdin)))
    }

    pub async fn read(
        &self,
        p: ProcessReadParams,
        cancel: CancellationToken,
    ) -> Result<ProcessReadResult, RpcError> {
        let max = check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let wait = check::at_most("waitMs", p.wait_ms.unwrap_or(0), limits::MAX_WAIT_MS)?;
        let seq = seq_of(&p.id)?;
        let until = Instant::now() + Duration::from_millis(wait);
        loop {
            let (result, mut rx) = {
                let mut inner = self.lock();
                let e = inner.entries.get_mut(&seq).ok_or_else(|| unknown(&p.id))?;
                let result = read_entry(e, &p, max as usize)?;
                if e.hold && p.stream == Stream::Stdout && result.next_offset > e.read_to {
                    // A held pump waiting for room goes on.
                    e.read_to = result.next_offset;
                    e.bump();
                }
                (result, e.changed.subscribe())
            };
            let has_news = !result.data.is_empty() || result.dropped > 0 || result.exited;
            if has_news || Instant::now() >= until {
                return Ok(result);
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(until) => {}
                _ = cancel.cancelled() => return Err(RpcError::aborted("process.read was cancelled")),
            }
        }
    }

    pub async fn write(
        &self,
        p: ProcessWriteParams,
        cancel: CancellationToken,
    ) -> Result<Empty, RpcError> {
        let until = Instant::now() + Duration::from_millis(limits::WRITE_TIMEOUT_MS);
        let seq = seq_of(&p.id)?;
        let (input, pty) = {
            let inner = self.lock();
            let e = inner.entries.get(&seq).ok_or_else(|| unknown(&p.id))?;
            let input = e.input.clone().ok_or_else(|| {
                RpcError::invalid(format!(
                    "{} has no stdin: start it with stdin: true or a pty to write to it",
                    p.id
                ))
            })?;
            (input, e.pty)
        };
        if pty && p.close == Some(true) {
            return Err(RpcError::invalid_field(
                "close",
                "a terminal has no stdin to close: write \"\\u0004\" (end of input) or send HUP",
            ));
        }
        let data = p.data.map(Bytes64::into_inner).unwrap_or_default();
        let mut kind = tokio::select! {
            k = tokio::time::timeout_at(until, input.kind.lock()) => match k {
                Ok(k) => k,
                Err(_) => return Err(write_timeout(&p.id, 0, data.len())),
            },
            _ = cancel.cancelled() => return Err(RpcError::aborted("process.write was cancelled while it waited for its turn; nothing was written")),
        };
        let mut written = 0usize;
        let outcome: Result<(), RpcError> = async {
            match &mut *kind {
                InputKind::Pipe(None) => Err(RpcError::invalid(format!("the stdin of {} was closed by an earlier write", p.id))),
                InputKind::Pipe(Some(tx)) => {
                    while written < data.len() {
                        tokio::select! {
                            r = tx.write(&data[written..]) => match r {
                                Ok(n) => written += n,
                                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                                    return Err(RpcError::invalid(format!(
                                        "{} has closed its stdin; {written} of {} bytes were written", p.id, data.len()
                                    )));
                                }
                                Err(e) => return Err(RpcError::invalid(format!("writing to {} failed: {e}", p.id))),
                            },
                            _ = tokio::time::sleep_until(until) => return Err(write_timeout(&p.id, written, data.len())),
                            _ = cancel.cancelled() => return Err(RpcError::aborted(format!(
                                "process.write was cancelled; {written} of {} bytes were written", data.len()
                            ))),
                        }
                    }
                    Ok(())
                }
                InputKind::Terminal(fd) => {
                    while written < data.len() {
                        tokio::select! {
                            r = write_terminal(fd, &data[written..]) => match r {
                                Ok(n) => written += n,
                                Err(e) => return Err(RpcError::invalid(format!(
                                    "writing to the terminal of {} failed after {written} bytes: {e}", p.id
                                ))),
                            },
                            _ = tokio::time::sleep_until(until) => return Err(write_timeout(&p.id, written, data.len())),
                            _ = cancel.cancelled() => return Err(RpcError::aborted(format!(
                                "process.write was cancelled; {written} of {} bytes were written", data.len()
                            ))),
                        }
                    }
                    Ok(())
                }
            }
        }
        .await;
        outcome?;
        if p.close == Some(true)
            && let InputKind::Pipe(tx) = &mut *kind
            && let Some(mut tx) = tx.take()
        {
            let _ = tx.shutdown().await;
        }
        Ok(Empty {})
    }

    pub async fn signal(&self, p: ProcessSignalParams) -> Result<ProcessSignalResult, RpcError> {
        let seq = seq_of(&p.id)?;
        let (run, ended, terminal, pid) = {
            let inner = self.lock();
            let e = inner.entries.get(&seq).ok_or_else(|| unknown(&p.id))?;
            (e.run.clone(), e.ended.is_some(), e.terminal.clone(), e.pid)
        };
        let ended_note = || ProcessSignalResult {
            note: Some(format!("{} has ended; nothing was signalled", p.id)),
        };
        let Some(run) = run.filter(|_| !ended) else {
            return Ok(ended_note());
        };
        let sig = match p.signal {
            Signal::Term => libc::SIGTERM,
            Signal::Int => libc::SIGINT,
            Signal::Kill => libc::SIGKILL,
            Signal::Hup => libc::SIGHUP,
        };
        let group = GuardCommand::Signal { sig };
        let (cmd, note) = match (&p.signal, &terminal) {
            (Signal::Int, Some(fd)) => match sys::tcgetpgrp(fd.get_ref().as_fd()) {
                Ok(Some(pgid)) => {
                    let members: Vec<_> = proctree::all()
                        .into_iter()
                        .filter(|x| x.pgrp == pgid && !x.is_zombie())
                        .collect();
                    if !members.is_empty() && !members.iter().any(|x| x.session == pid) {
                        return Err(RpcError::denied(format!(
                            "the terminal of {} has handed its foreground to group {pgid} in another session; nothing was signalled",
                            p.id
                        )));
                    }
                    (GuardCommand::SignalForeground { sig, pgid }, None)
                }
                _ => (
                    group,
                    Some(
                        "the terminal has no foreground group; INT went to the program's group"
                            .to_string(),
                    ),
                ),
            },
            _ => (group, None),
        };
        match run.signal(&cmd).await {
            Ok(guard_note) => Ok(ProcessSignalResult {
                note: guard_note.or(note),
            }),
            Err(()) => Ok(ended_note()),
        }
    }

    pub fn resize(&self, p: ProcessResizeParams) -> Result<Empty, RpcError> {
        check_pty_size(p.cols, p.rows)?;
        let seq = seq_of(&p.id)?;
        let inner = self.lock();
        let e = inner.entries.get(&seq).ok_or_else(|| unknown(&p.id))?;
        let fd = e.terminal.as_ref().ok_or_else(|| {
            RpcError::invalid(format!(
                "{} has no terminal: it was started without pty",
                p.id
            ))
        })?;
        sys::set_winsize(fd.get_ref().as_fd(), p.cols, p.rows).map_err(|e| {
            RpcError::invalid(format!("resizing the terminal of {} failed: {e}", p.id))
        })?;
        Ok(Empty {})
    }

    pub fn list(&self, p: ProcessListParams) -> Result<ProcessListResult, RpcError> {
        let from = match &p.from {
            Some(id) => seq_of(id).map_err(|e| e.with_field("from"))?,
            None => 0,
        };
        let inner = self.lock();
        let mut processes = Vec::new();
        let mut bytes = 64u64;
        for (seq, e) in inner.entries.range(from..) {
            let info = info_of(*seq, e);
            let size = serde_json::to_vec(&info)
                .map(|v| v.len() as u64 + 1)
                .unwrap_or(0);
            if bytes + size > limits::MAX_LIST_REPLY_BYTES && !processes.is_empty() {
                return Ok(ProcessListResult {
                    processes,
                    truncated: true,
                    next: Some(format!("p{seq}")),
                });
            }
            bytes += size;
            processes.push(info);
        }
        Ok(ProcessListResult {
            processes,
            truncated: false,
            next: None,
        })
    }

    pub async fn wait(
        &self,
        p: ProcessWaitParams,
        cancel: CancellationToken,
    ) -> Result<ProcessWaitResult, RpcError> {
        if p.timeout_ms > limits::MAX_PROCESS_WAIT_MS {
            return Err(RpcError::over_limit(
                "timeoutMs",
                p.timeout_ms,
                limits::MAX_PROCESS_WAIT_MS,
            ));
        }
        let seq = seq_of(&p.id)?;
        let until = Instant::now() + Duration::from_millis(p.timeout_ms);
        loop {
            let (state, mut rx) = {
                let inner = self.lock();
                let e = inner.entries.get(&seq).ok_or_else(|| unknown(&p.id))?;
                (e.ended.clone(), e.changed.subscribe())
            };
            if let Some(x) = state {
                return Ok(ProcessWaitResult {
                    running: false,
                    exit_code: x.exit_code,
                    signal: x.signal,
                });
            }
            if Instant::now() >= until {
                return Ok(ProcessWaitResult {
                    running: true,
                    exit_code: None,
                    signal: None,
                });
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(until) => {}
                _ = cancel.cancelled() => return Err(RpcError::aborted("process.wait was cancelled")),
            }
        }
    }

    /// Bytes every ring keeps together (for tests and logs).
    pub fn kept_bytes(&self) -> u64 {
        self.lock().kept
    }
}

fn write_timeout(id: &str, written: usize, total: usize) -> RpcError {
    let mut e = RpcError::timeout(format!(
        "process.write to {id} gave up after {} s: {written} of {total} bytes were written (the program is not reading)",
        limits::WRITE_TIMEOUT_MS / 1000
    ));
    e.data = Some(ErrorData {
        kind: ErrorKind::Timeout,
        field: None,
        written: Some(written as u64),
    });
    e
}

async fn pump_pipe(daemon: Arc<Daemon>, seq: u64, which: Which, fd: OwnedFd) {
    if let Ok(mut rx) = pipe::Receiver::from_owned_fd(fd) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if which == Which::Out {
                wait_for_room(&daemon, seq, buf.len()).await;
            }
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => daemon.processes.lock().push(seq, which, &buf[..n]),
            }
        }
    }
    daemon.processes.lock().close(seq, which);
}

/// A held stdout's pump waits here until reads leave room for `chunk` more
/// bytes (the program's writes wait on its full pipe meanwhile).
async fn wait_for_room(daemon: &Daemon, seq: u64, chunk: usize) {
    loop {
        let mut changed = {
            let inner = daemon.processes.lock();
            match inner.entries.get(&seq) {
                Some(e) if !e.room_for(chunk) && e.ended.is_none() => e.changed.subscribe(),
                _ => return,
            }
        };
        // A change is a read (or the end); look again at least now and then.
        let _ = tokio::time::timeout(Duration::from_millis(50), changed.changed()).await;
    }
}

async fn wait_for_end(daemon: Arc<Daemon>, seq: u64, run: Arc<Run>) {
    let exit = run.exited().await;
    // Its pids are free (its guard may stay, idle): a queued start tries.
    daemon.reaper.room.freed();
    let (exit_code, signal) = sys::decode_wait_status(match exit {
        Exit::Program(s) | Exit::GuardEnded(s) => s,
    });
    {
        let mut inner = daemon.processes.lock();
        inner.end_counter += 1;
        let order = inner.end_counter;
        if let Some(e) = inner.entries.get_mut(&seq) {
            e.ended = Some(Ended {
                order,
                at: now_ms(),
                exit_code,
                signal,
            });
            e.bump();
        }
        inner.enforce_budget();
    }
    // A guard idle again after a clean end goes back to the pool, once no
    // one else holds the run (the entry's hold is let go: an ended process
    // takes no signal).
    if run.went_idle().await {
        let mine = {
            let mut inner = daemon.processes.lock();
            if let Some(e) = inner.entries.get_mut(&seq) {
                e.run = None;
            }
            drop(inner);
            Arc::try_unwrap(run)
        };
        match mine {
            Ok(run) => {
                run.recycle(&daemon).await;
                return;
            }
            Err(shared) => {
                // Held elsewhere for a moment: the guard, idle with nothing
                // under it, exits when that hold goes and its socket closes.
                drop(shared);
                return;
            }
        }
    }
    // Hold the run (and so its control socket) until the guard is gone: a
    // guard keeping orphans must not see the daemon leave.
    run.guard_gone().await;
}
