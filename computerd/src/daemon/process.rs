//! process.*: the table of programs that outlive their call.
//!
//! One table serves every connection. Each process has its own guard (as an
//! exec.run does), rings for its output under one budget, an optional log
//! file, and a stdin or terminal that writers take turns on.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::fcntl::{AT_FDCWD, OFlag};
use nix::sys::stat::Mode;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::GuardCommand;
use super::ring::Ring;
use super::runner::{self, Exit, Run, Stdio3};
use super::{Daemon, exec, now_ms, proctree, sys, walk};
use crate::protocol::{
    Bytes64, Empty, ErrorData, ErrorKind, ProcessInfo, ProcessListParams, ProcessListResult,
    ProcessReadParams, ProcessReadResult, ProcessResizeParams, ProcessSignalParams,
    ProcessSignalResult, ProcessStartParams, ProcessStartResult, ProcessWaitParams,
    ProcessWaitResult, ProcessWriteParams, RpcError, Signal, Stream, clean_path, limits,
};

pub struct Table {
    inner: Mutex<Inner>,
    /// Starts take turns.
    start_turn: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<u64, Entry>,
    next_seq: u64,
    /// Bytes kept by every ring together.
    kept: u64,
    /// Counts ends, so "the process that ended first" is well defined.
    end_counter: u64,
}

struct Entry {
    pid: i32,
    argv: Vec<String>,
    pty: bool,
    started_at: i64,
    ended: Option<Ended>,
    keep_orphans: bool,
    /// stdout, or the terminal's one stream.
    out: Ring,
    err: Ring,
    log: Option<Log>,
    run: Arc<Run>,
    input: Option<Arc<Input>>,
    terminal: Option<Arc<AsyncFd<OwnedFd>>>,
    changed: watch::Sender<u64>,
}

impl Entry {
    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Every output stream has reached its end (or, with kept orphans, the
    /// process has ended: what it left running may hold them open for good).
    fn output_done(&self) -> bool {
        (self.out.closed && self.err.closed) || (self.ended.is_some() && self.keep_orphans)
    }
}

#[derive(Clone)]
struct Ended {
    order: u64,
    at: i64,
    exit_code: Option<i32>,
    signal: Option<String>,
}

struct Log {
    file: std::fs::File,
    written: u64,
    capped: bool,
    error: Option<String>,
}

enum InputKind {
    Pipe(Option<pipe::Sender>),
    Terminal(Arc<AsyncFd<OwnedFd>>),
}

/// A process's stdin or terminal; writers take turns on the mutex.
struct Input {
    kind: tokio::sync::Mutex<InputKind>,
}

#[derive(Clone, Copy)]
enum Which {
    Out,
    Err,
}

enum Io {
    Terminal(Arc<AsyncFd<OwnedFd>>),
    Pipes(OwnedFd, OwnedFd),
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

fn seq_of(id: &str) -> Result<u64, RpcError> {
    id.strip_prefix('p')
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            RpcError::invalid_field("id", format!("id {id:?} is not a process id (p1, p2, ...)"))
        })
}

fn unknown(id: &str) -> RpcError {
    RpcError::not_found(format!(
        "no process {id}: it never existed, or the table (256 entries) let it go"
    ))
    .with_field("id")
}

fn check_pty_size(cols: u16, rows: u16) -> Result<(), RpcError> {
    for (field, v) in [("cols", cols), ("rows", rows)] {
        if v == 0 || v > limits::MAX_PTY_SIDE {
            return Err(RpcError::invalid_field(
                field,
                format!(
                    "{field} is {v}; a terminal has 1 to {} {field}",
                    limits::MAX_PTY_SIDE
                ),
            ));
        }
    }
    Ok(())
}

impl Inner {
    fn remove(&mut self, seq: u64) {
        if let Some(e) = self.entries.remove(&seq) {
            self.kept -= e.out.kept() + e.err.kept();
            e.bump();
        }
    }

    /// Keep every ring together under the budget: first let go of the rings
    /// of the processes that ended first; then cap each running ring at an
    /// equal share (never under 64 KiB).
    fn enforce_budget(&mut self) {
        if self.kept <= limits::RING_BUDGET_BYTES {
            return;
        }
        let mut ended: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.out.kept() + e.err.kept() > 0)
            .filter_map(|(s, e)| e.ended.as_ref().map(|x| (x.order, *s)))
            .collect();
        ended.sort_unstable();
        for (_, seq) in ended {
            if self.kept <= limits::RING_BUDGET_BYTES {
                return;
            }
            if let Some(e) = self.entries.get_mut(&seq) {
                let freed = e.out.release() + e.err.release();
                self.kept -= freed;
                e.bump();
            }
        }
        if self.kept <= limits::RING_BUDGET_BYTES {
            return;
        }
        let rings: u64 = self
            .entries
            .values()
            .filter(|e| e.ended.is_none())
            .map(|e| if e.pty { 1 } else { 2 })
            .sum();
        if rings == 0 {
            return;
        }
        let share = (limits::RING_BUDGET_BYTES / rings).max(limits::RING_MIN_SHARE_BYTES) as usize;
        let mut freed = 0;
        for e in self.entries.values_mut().filter(|e| e.ended.is_none()) {
            freed += e.out.shrink_to(share) + e.err.shrink_to(share);
        }
        self.kept -= freed;
    }

    fn push(&mut self, seq: u64, which: Which, data: &[u8]) {
        let Some(e) = self.entries.get_mut(&seq) else {
            return;
        };
        let ring = match which {
            Which::Out => &mut e.out,
            Which::Err => &mut e.err,
        };
        let delta = ring.push(data);
        if let Some(log) = e.log.as_mut() {
            log.append(data);
        }
        e.bump();
        self.kept = (self.kept as i64 + delta) as u64;
        self.enforce_budget();
    }

    fn close(&mut self, seq: u64, which: Which) {
        if let Some(e) = self.entries.get_mut(&seq) {
            match which {
                Which::Out => e.out.closed = true,
                Which::Err => e.err.closed = true,
            }
            e.bump();
        }
    }
}

impl Log {
    /// Append what fits under the cap. A failed or short write stops the log
    /// for good, so the file stays a true prefix of the output.
    fn append(&mut self, data: &[u8]) {
        if self.error.is_some() || data.is_empty() {
            return;
        }
        let room = limits::MAX_LOG_BYTES.saturating_sub(self.written) as usize;
        if data.len() > room {
            self.capped = true;
        }
        let mut todo = &data[..data.len().min(room)];
        while !todo.is_empty() {
            match self.file.write_at(todo, self.written) {
                Ok(0) => {
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: the disk took no more",
                        self.written
                    ));
                    return;
                }
                Ok(n) if n < todo.len() => {
                    self.written += n as u64;
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: a write was short (is the disk full?)",
                        self.written
                    ));
                    return;
                }
                Ok(n) => {
                    self.written += n as u64;
                    todo = &todo[n..];
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(format!(
                        "writing the log stopped at {} bytes: {e}",
                        self.written
                    ));
                    return;
                }
            }
        }
    }
}

/// A log file made for a start, removed again if the start fails.
struct NewLog {
    file: std::fs::File,
    parent: OwnedFd,
    name: String,
}

impl NewLog {
    fn remove(self) {
        let _ = nix::unistd::unlinkat(
            self.parent.as_fd(),
            self.name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    fn into_log(self) -> Log {
        Log {
            file: self.file,
            written: 0,
            capped: false,
            error: None,
        }
    }
}

/// Make the log file: each directory entered from the one above with
/// O_NOFOLLOW|O_DIRECTORY (missing ones made), the file with
/// O_CREAT|O_EXCL|O_NOFOLLOW, so no link anywhere on the way is followed.
fn create_log(path: &str) -> Result<NewLog, RpcError> {
    let parts = walk::names(path);
    let Some((name, dirs)) = parts.split_last() else {
        return Err(RpcError::invalid_field(
            "log",
            "log must name a file, not /",
        ));
    };
    let denied_link = |at: &str| {
        RpcError::denied(format!("log {path}: {at} is a symbolic link or not a directory; the log is never made through a link"))
            .with_field("log")
    };
    let root = walk::dir_at(AT_FDCWD, "/".as_ref(), OFlag::O_PATH)
        .map_err(|e| sys::path_error("log", "/", e))?;
    let dir = walk::mkdirs_beneath(root.as_fd(), dirs, 0o755, OFlag::O_RDONLY, &mut |_| {})
        .map_err(|stuck| {
            let walked = dirs
                .get(..=stuck.at)
                .map_or_else(|| "/".to_string(), |way| format!("/{}", way.join("/")));
            if stuck.is_link_or_file() {
                denied_link(&walked)
            } else if stuck.making {
                sys::path_error("log: making", &walked, stuck.errno).with_field("log")
            } else {
                sys::path_error("log: entering", &walked, stuck.errno).with_field("log")
            }
        })?;
    let flags =
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir.as_fd(), *name, flags, Mode::from_bits_truncate(0o644))
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST => RpcError::exists(format!(
                "log {path}: a file is already there; give a new path"
            ))
            .with_field("log"),
            nix::errno::Errno::ELOOP => denied_link(path),
            e => sys::path_error("log: creating", path, e).with_field("log"),
        })?;
    Ok(NewLog {
        file: std::fs::File::from(fd),
        parent: dir,
        name: (*name).to_string(),
    })
}

impl Table {
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            start_turn: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub async fn start(
        &self,
        daemon: &Arc<Daemon>,
        p: ProcessStartParams,
        cancel: CancellationToken,
    ) -> Result<ProcessStartResult, RpcError> {
        let mut prepared = runner::prepare(
            daemon,
            &p.argv,
            p.cwd.as_deref(),
            p.env.as_ref(),
            p.user.as_deref(),
        )?;
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
        let start = daemon.life.begin_start()?;
        let _turn = tokio::select! {
            t = self.start_turn.lock() => t,
            _ = cancel.cancelled() => return Err(RpcError::aborted("process.start was cancelled while it waited for its turn")),
        };
        let evict = {
            let inner = self.lock();
            if inner.entries.len() >= limits::MAX_PROCESSES {
                let first_ended = inner
                    .entries
                    .iter()
                    .filter_map(|(s, e)| e.ended.as_ref().map(|x| (x.order, *s)))
                    .min();
                match first_ended {
                    Some((_, seq)) => Some(seq),
                    None => {
                        return Err(RpcError::limit(format!(
                            "all {} processes in the table are running; end or wait for one before starting another",
                            limits::MAX_PROCESSES
                        )));
                    }
                }
            } else {
                None
            }
        };

        prepared.spec.pty = p.pty.is_some();
        prepared.spec.wait_group = p.wait_group.unwrap_or(false);
        prepared.spec.keep_orphans = p.orphans.is_some();

        let mut log = match &log_path {
            Some(path) => Some(create_log(path)?),
            None => None,
        };
        let outcome = self
            .spawn_and_start(daemon, &p, &prepared.spec, &cancel)
            .await;
        let (run, pid, io, stdin) = match outcome {
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
                    run: Arc::clone(&run),
                    input,
                    terminal,
                    changed: watch::channel(0).0,
                },
            );
            seq
        };
        match io {
            Io::Terminal(fd) => {
                tokio::spawn(pump_terminal(Arc::clone(daemon), seq, fd));
            }
            Io::Pipes(out, err) => {
                tokio::spawn(pump_pipe(Arc::clone(daemon), seq, Which::Out, out));
                tokio::spawn(pump_pipe(Arc::clone(daemon), seq, Which::Err, err));
            }
        }
        tokio::spawn(wait_for_end(Arc::clone(daemon), seq, run));
        Ok(ProcessStartResult {
            id: format!("p{seq}"),
            pid,
        })
    }

    async fn spawn_and_start(
        &self,
        daemon: &Arc<Daemon>,
        p: &ProcessStartParams,
        spec: &super::guard::GuardSpec,
        cancel: &CancellationToken,
    ) -> Result<(Arc<Run>, i32, Io, Option<pipe::Sender>), RpcError> {
        let io_err = |e: std::io::Error| {
            RpcError::limit(format!(
                "process.start could not set up the program's stdio: {e}"
            ))
        };
        let (stdio, io, stdin_w) = if let Some(size) = p.pty {
            let ws = nix::pty::Winsize {
                ws_row: size.rows,
                ws_col: size.cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            let pty = nix::pty::openpty(&ws, None).map_err(|e| io_err(e.into()))?;
            set_cloexec_nonblock(&pty.master).map_err(io_err)?;
            set_cloexec(&pty.slave).map_err(io_err)?;
            let s1 = sys::dup_above(pty.slave.as_fd(), 3).map_err(io_err)?;
            let s2 = sys::dup_above(pty.slave.as_fd(), 3).map_err(io_err)?;
            // SAFETY: the master is an OwnedFd moved into the AsyncFd, so it
            // stays open and the same descriptor for the AsyncFd's whole life.
            let master = unsafe { AsyncFd::register(pty.master) }.map_err(|e| io_err(e.into()))?;
            (
                Stdio3 {
                    stdin: pty.slave,
                    stdout: s1,
                    stderr: s2,
                },
                Io::Terminal(Arc::new(master)),
                None,
            )
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
        let run = runner::spawn(daemon, spec, stdio).await.map_err(|e| {
            RpcError::limit(format!("process.start could not start its guard: {e}"))
        })?;
        let run = Arc::new(run);
        let pid = tokio::select! {
            started = run.started() => started.map_err(|f| f.into_rpc(&p.argv[0]))?,
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
        Ok((run, pid, io, stdin))
    }

    pub async fn read(
        &self,
        p: ProcessReadParams,
        cancel: CancellationToken,
    ) -> Result<ProcessReadResult, RpcError> {
        let max = p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES);
        if max == 0 {
            return Err(RpcError::invalid_field(
                "maxBytes",
                "maxBytes must be at least 1",
            ));
        }
        if max > limits::MAX_CHUNK_BYTES {
            return Err(RpcError::over_limit(
                "maxBytes",
                max,
                limits::MAX_CHUNK_BYTES,
            ));
        }
        let wait = p.wait_ms.unwrap_or(0);
        if wait > limits::MAX_WAIT_MS {
            return Err(RpcError::over_limit("waitMs", wait, limits::MAX_WAIT_MS));
        }
        let seq = seq_of(&p.id)?;
        let until = Instant::now() + Duration::from_millis(wait);
        loop {
            let (result, mut rx) = {
                let inner = self.lock();
                let e = inner.entries.get(&seq).ok_or_else(|| unknown(&p.id))?;
                (read_entry(e, &p, max as usize)?, e.changed.subscribe())
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
            (
                Arc::clone(&e.run),
                e.ended.is_some(),
                e.terminal.clone(),
                e.pid,
            )
        };
        let ended_note = || ProcessSignalResult {
            note: Some(format!("{} has ended; nothing was signalled", p.id)),
        };
        if ended {
            return Ok(ended_note());
        }
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

fn info_of(seq: u64, e: &Entry) -> ProcessInfo {
    let mut argv = Vec::new();
    let mut bytes = 2usize;
    let mut clipped = false;
    for a in &e.argv {
        let n = serde_json::to_string(a)
            .map(|s| s.len() + 1)
            .unwrap_or(usize::MAX);
        if bytes.saturating_add(n) > limits::MAX_LISTED_ARGV_BYTES {
            clipped = true;
            break;
        }
        bytes += n;
        argv.push(a.clone());
    }
    ProcessInfo {
        id: format!("p{seq}"),
        pid: e.pid,
        argv,
        argv_clipped: clipped,
        pty: e.pty,
        running: e.ended.is_none(),
        exit_code: e.ended.as_ref().and_then(|x| x.exit_code),
        signal: e.ended.as_ref().and_then(|x| x.signal.clone()),
        started_at: e.started_at,
        ended_at: e.ended.as_ref().map(|x| x.at),
    }
}

fn read_entry(e: &Entry, p: &ProcessReadParams, max: usize) -> Result<ProcessReadResult, RpcError> {
    let no_stream = |why: &str| {
        RpcError::invalid_field(
            "stream",
            format!("{} has no {} stream: {why}", p.id, p.stream),
        )
    };
    let ring = match p.stream {
        Stream::Stdout if !e.pty => &e.out,
        Stream::Stderr if !e.pty => &e.err,
        Stream::Pty if e.pty => &e.out,
        Stream::Stdout | Stream::Stderr => {
            return Err(no_stream("it runs in a terminal; read stream pty"));
        }
        Stream::Pty => {
            return Err(no_stream(
                "it was started without pty; read stdout or stderr",
            ));
        }
        Stream::Log => return read_log(e, p, max),
    };
    let r = ring.read(p.offset, max, &p.stream.to_string())?;
    let stream_done = ring.closed || (e.ended.is_some() && e.keep_orphans) || ring.is_released();
    Ok(ProcessReadResult {
        exited: e.ended.is_some() && stream_done && r.next_offset == ring.size(),
        size: ring.size(),
        data: Bytes64(r.data),
        next_offset: r.next_offset,
        dropped: r.dropped,
        capped: None,
        log_error: None,
    })
}

fn read_log(e: &Entry, p: &ProcessReadParams, max: usize) -> Result<ProcessReadResult, RpcError> {
    let log = e.log.as_ref().ok_or_else(|| {
        RpcError::invalid_field(
            "stream",
            format!("{} has no log stream: it was started without log", p.id),
        )
    })?;
    let size = log.written;
    if p.offset > size {
        return Err(RpcError::invalid_field(
            "offset",
            format!(
                "offset {} is past the end of the log ({size} bytes so far)",
                p.offset
            ),
        ));
    }
    let n = ((size - p.offset) as usize).min(max);
    let mut data = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match log.file.read_at(&mut data[got..], p.offset + got as u64) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                return Err(RpcError::invalid(format!(
                    "reading the log of {} failed: {err}",
                    p.id
                )));
            }
        }
    }
    data.truncate(got);
    let next = p.offset + got as u64;
    Ok(ProcessReadResult {
        exited: e.ended.is_some() && e.output_done() && next == size,
        size,
        data: Bytes64(data),
        next_offset: next,
        dropped: 0,
        capped: Some(log.capped),
        log_error: log.error.clone(),
    })
}

fn set_cloexec(fd: &OwnedFd) -> std::io::Result<()> {
    nix::fcntl::fcntl(
        fd.as_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

fn set_cloexec_nonblock(fd: &OwnedFd) -> std::io::Result<()> {
    set_cloexec(fd)?;
    let flags = nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(std::io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))
        .map(|_| ())
        .map_err(std::io::Error::from)
}

async fn write_terminal(fd: &AsyncFd<OwnedFd>, data: &[u8]) -> std::io::Result<usize> {
    loop {
        let mut ready = fd.writable().await?;
        match ready
            .try_io(|inner| nix::unistd::write(inner.get_ref(), data).map_err(std::io::Error::from))
        {
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

async fn pump_pipe(daemon: Arc<Daemon>, seq: u64, which: Which, fd: OwnedFd) {
    if let Ok(mut rx) = pipe::Receiver::from_owned_fd(fd) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => daemon.processes.lock().push(seq, which, &buf[..n]),
            }
        }
    }
    daemon.processes.lock().close(seq, which);
}

async fn pump_terminal(daemon: Arc<Daemon>, seq: u64, fd: Arc<AsyncFd<OwnedFd>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(mut ready) = fd.readable().await else {
            break;
        };
        match ready.try_io(|inner| {
            nix::unistd::read(inner.get_ref(), &mut buf).map_err(std::io::Error::from)
        }) {
            // EIO: every holder of the terminal's other side has closed it.
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => daemon.processes.lock().push(seq, Which::Out, &buf[..n]),
            Err(_would_block) => continue,
        }
    }
    daemon.processes.lock().close(seq, Which::Out);
}

async fn wait_for_end(daemon: Arc<Daemon>, seq: u64, run: Arc<Run>) {
    let exit = run.exited().await;
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
    // Hold the run (and so its control socket) until the guard is gone: a
    // guard keeping orphans must not see the daemon leave.
    run.guard_gone().await;
}
