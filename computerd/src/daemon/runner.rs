//! The daemon's side of a guard: prepare a run, hand it to a guard (an idle
//! one from [`pool`], or one started for it), follow it.

pub mod pool;
pub mod room;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::quiet::{QuietRead, QuietStream, QuietWrite};

use super::guard::{GuardCommand, GuardEvent, GuardSpec};
use super::{Daemon, proctree, sys, users};
use crate::protocol::{Invocation, RpcError, clean_path, limits};

/// The validated parts every start shares (exec.run and process.start).
pub struct Prepared {
    pub spec: GuardSpec,
}

/// Check argv, cwd, env and user, and build the guard's spec.
pub fn prepare(daemon: &Daemon, invocation: Invocation<'_>) -> Result<Prepared, RpcError> {
    let Invocation {
        argv,
        cwd,
        env,
        user,
    } = invocation;
    if argv.is_empty() {
        return Err(RpcError::invalid_field(
            "argv",
            "argv is empty; give the program and its arguments, such as [\"ls\", \"-l\"]",
        ));
    }
    if argv.len() > limits::MAX_ARGV {
        return Err(RpcError::over_limit(
            "argv",
            argv.len() as u64,
            limits::MAX_ARGV as u64,
        ));
    }
    if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
        return Err(RpcError::invalid_field(
            "argv",
            format!("argv[{i}] holds a NUL byte"),
        ));
    }
    if argv[0].is_empty() {
        return Err(RpcError::invalid_field(
            "argv",
            "argv[0] is empty; it names the program",
        ));
    }
    let run_as = match user {
        None => None,
        Some(u) => {
            let r = users::resolve(u)?;
            let me = &daemon.identity;
            if r.uid == me.uid && r.gid == me.gid {
                None
            } else if !(sys::has_effective_cap(sys::CAP_SETUID)
                && sys::has_effective_cap(sys::CAP_SETGID))
            {
                return Err(RpcError::denied(format!(
                    "user: this computerd runs as uid {} with no CAP_SETUID/CAP_SETGID, so it cannot run programs as {u:?}; leave user out to run as uid {}",
                    me.uid, me.uid
                ))
                .with_field("user"));
            } else {
                Some(r)
            }
        }
    };
    let (name, home) = match &run_as {
        Some(r) => (r.name.clone(), r.home.clone()),
        None => (daemon.identity.name.clone(), daemon.identity.home.clone()),
    };
    let cwd = match cwd {
        Some(c) => clean_path("cwd", c)?,
        None => home.clone(),
    };
    match std::fs::metadata(&cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(
                RpcError::not_dir(format!("cwd {cwd} is not a directory")).with_field("cwd")
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RpcError::not_found(format!("cwd {cwd} does not exist")).with_field("cwd"));
        }
        Err(_) => {} // let the start say why
    }
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert("PATH".into(), daemon.identity.path.clone());
    vars.insert("HOME".into(), home);
    vars.insert("USER".into(), name.clone());
    vars.insert("LOGNAME".into(), name);
    if let Some(d) = &daemon.identity.display {
        vars.insert("DISPLAY".into(), d.clone());
    }
    for (k, v) in &daemon.identity.extra_env {
        vars.insert(k.clone(), v.clone());
    }
    if let Some(env) = env {
        for (k, v) in env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(RpcError::invalid_field(
                    "env",
                    format!("env name {k:?} is not a variable name (empty, or holds = or NUL)"),
                ));
            }
            if v.contains('\0') {
                return Err(RpcError::invalid_field(
                    "env",
                    format!("env {k} holds a NUL byte"),
                ));
            }
            vars.insert(k.clone(), v.clone());
        }
    }
    Ok(Prepared {
        spec: GuardSpec {
            argv: argv.to_vec(),
            cwd,
            env: vars.into_iter().collect(),
            user: run_as.map(|r| (r.uid, r.gid)),
            pty: false,
            wait_group: false,
            keep_orphans: false,
            reuse: false,
        },
    })
}

/// The program's stdio, handed to the guard.
pub struct Stdio3 {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The program's own wait status, as its guard reported it.
    Program(i32),
    /// The guard ended without reporting (it was killed): its wait status.
    GuardEnded(i32),
}

impl Exit {
    pub fn status(self) -> i32 {
        match self {
            Exit::Program(s) | Exit::GuardEnded(s) => s,
        }
    }
}

/// Why a start failed.
pub enum StartFailure {
    /// The program could not be started (errno from exec, chdir or setuid).
    Program { errno: i32, message: String },
    /// The working directory could not be entered.
    Cwd { errno: i32, message: String },
    /// The guard ended before it said anything.
    Guard(String),
}

impl StartFailure {
    pub fn into_rpc(self, argv0: &str) -> RpcError {
        match self {
            StartFailure::Program { errno, message } => {
                let e = nix::errno::Errno::from_raw(errno);
                let words = match e {
                    nix::errno::Errno::ENOENT => {
                        format!("{argv0}: no such program (looked up in PATH when it has no /)")
                    }
                    nix::errno::Errno::EACCES => format!(
                        "{argv0}: permission denied (not executable, or a directory on the way is closed)"
                    ),
                    nix::errno::Errno::EPERM => {
                        format!("{argv0}: the user switch was refused ({message})")
                    }
                    nix::errno::Errno::ENOEXEC => format!("{argv0}: not an executable format"),
                    _ => format!("{argv0}: could not be started: {message}"),
                };
                RpcError::new(sys::errno_kind(e), words)
            }
            StartFailure::Cwd { errno, message } => {
                let e = nix::errno::Errno::from_raw(errno);
                RpcError::new(
                    sys::errno_kind(e),
                    format!("cwd could not be entered: {message}"),
                )
                .with_field("cwd")
            }
            StartFailure::Guard(why) => {
                RpcError::invalid(format!("{argv0}: the run's guard failed: {why}"))
            }
        }
    }
}

/// A running guard, from the daemon's side.
pub struct Run {
    pub guard_pid: i32,
    ctl: Mutex<Option<QuietWrite>>,
    lifecycle: Mutex<Lifecycle>,
    replies: Mutex<mpsc::UnboundedReceiver<Option<String>>>,
    /// The read half of the control socket, given back by the event reader
    /// when the guard said it is idle again.
    back: oneshot::Receiver<QuietRead>,
    /// The pool's count of this guard while it is out (a pooled guard on a
    /// run that may give it back).
    lent: Option<pool::Lent>,
}

struct Lifecycle {
    events: mpsc::UnboundedReceiver<GuardEvent>,
    guard_exit: Option<oneshot::Receiver<i32>>,
    started: Option<i32>,
    exit: Option<Exit>,
    /// The guard's Exited said it is idle again.
    idle: bool,
}

/// Start `spec` under a guard, with the program's stdio: an idle guard
/// from the pool when one is there, one forked (or started) for it
/// otherwise. A
/// spec with `reuse` lends a pooled guard (the pool is not refilled behind
/// it while it may come back; see [`Run::recycle`]).
pub async fn spawn(daemon: &Arc<Daemon>, spec: &GuardSpec, stdio: Stdio3) -> std::io::Result<Run> {
    let mut line = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let fds = [
        stdio.stdin.as_raw_fd(),
        stdio.stdout.as_raw_fd(),
        stdio.stderr.as_raw_fd(),
    ];
    let (pid, stream, guard_exit, lent) = loop {
        let (guard, lent, pooled) = match daemon.reaper.pool.take(daemon, spec.reuse) {
            Some((g, lent)) => (g, lent, true),
            None => pool::guard_for_run(daemon, spec.reuse).await?,
        };
        let mut guard = guard;
        // Read through the runtime, written without a standing write
        // registration: the guard's reads do not wake init.
        let stream = QuietStream::new(guard.socket.into())?;
        let (read, mut write) = stream.into_split();
        match hand_over(&mut write, &line, &fds).await {
            Ok(()) => break (guard.pid, (read, write), guard.exit, lent),
            Err((sent, e)) => {
                // A guard that cannot take its run is of no use: it is
                // killed unless already reaped (its pid could be reused).
                if matches!(
                    guard.exit.try_recv(),
                    Err(oneshot::error::TryRecvError::Empty)
                ) {
                    sys::kill(guard.pid, libc::SIGKILL);
                }
                // An idle guard can have died in the pool (a program may kill
                // it): if nothing reached it, the run goes to the next.
                if pooled && !sent {
                    tracing::debug!(guard = guard.pid, "an idle guard could not take a run: {e}");
                    continue;
                }
                return Err(e);
            }
        }
    };
    // The daemon must hold no copy of the program's stdio: EOF on its pipes
    // depends on it.
    drop(stdio);
    let (read, write) = stream;

    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let (reply_tx, reply_rx) = mpsc::unbounded_channel();
    let (back_tx, back) = oneshot::channel();
    super::spawn(async move {
        let mut lines = BufReader::new(read);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match lines.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            match serde_json::from_slice::<GuardEvent>(buf.trim_ascii_end()) {
                Ok(GuardEvent::Signalled { note }) => {
                    let _ = reply_tx.send(note);
                }
                Ok(ev @ GuardEvent::Exited { idle: true, .. }) => {
                    let _ = ev_tx.send(ev);
                    // An idle guard says nothing until its next run: its
                    // socket goes back whole, or (with bytes after the
                    // Exited, which no guard sends) not at all.
                    if lines.buffer().is_empty() {
                        let _ = back_tx.send(lines.into_inner());
                    }
                    return;
                }
                Ok(ev) => {
                    let _ = ev_tx.send(ev);
                }
                Err(e) => tracing::warn!(guard = pid, "guard sent an unreadable event: {e}"),
            }
        }
    });
    Ok(Run {
        guard_pid: pid,
        ctl: Mutex::new(Some(write)),
        lifecycle: Mutex::new(Lifecycle {
            events: ev_rx,
            guard_exit: Some(guard_exit),
            started: None,
            exit: None,
            idle: false,
        }),
        replies: Mutex::new(reply_rx),
        back,
        lent,
    })
}

/// Send the spec line with the program's three stdio descriptors riding on
/// its first bytes. On failure, whether the descriptors went (a guard that
/// got them is not to be handed the run again).
async fn hand_over(
    write: &mut QuietWrite,
    line: &[u8],
    fds: &[RawFd; 3],
) -> Result<(), (bool, std::io::Error)> {
    let sent = write
        .write_with(|fd| {
            sys::send_fds(fd, line, fds, nix::sys::socket::MsgFlags::MSG_NOSIGNAL)
                .map_err(std::io::Error::from)
        })
        .await
        .map_err(|e| (false, e))?;
    // A long spec (a large env) may not go in one send; the rest follows
    // as plain bytes.
    write
        .write_all(&line[sent..])
        .await
        .map_err(|e| (true, e))?;
    Ok(())
}

impl Run {
    /// Wait for the program to start: its pid, or why it could not.
    pub async fn started(&self) -> Result<i32, StartFailure> {
        let mut lc = self.lifecycle.lock().await;
        if let Some(pid) = lc.started {
            return Ok(pid);
        }
        match lc.events.recv().await {
            Some(GuardEvent::Started { pid }) => {
                lc.started = Some(pid);
                Ok(pid)
            }
            Some(GuardEvent::Failed {
                stage,
                errno,
                message,
            }) => Err(if stage == "cwd" {
                StartFailure::Cwd { errno, message }
            } else {
                StartFailure::Program { errno, message }
            }),
            Some(other) => Err(StartFailure::Guard(format!("unexpected event {other:?}"))),
            None => {
                let status = match lc.guard_exit.take() {
                    Some(rx) => rx.await.ok(),
                    None => None,
                };
                let why = match status.map(sys::decode_wait_status) {
                    Some((Some(code), _)) => format!("it exited with code {code}"),
                    Some((_, Some(sig))) => format!("it was killed by {sig}"),
                    _ => "it ended".to_string(),
                };
                Err(StartFailure::Guard(why))
            }
        }
    }

    /// Wait for the run's end.
    pub async fn exited(&self) -> Exit {
        let mut lc = self.lifecycle.lock().await;
        if let Some(e) = lc.exit {
            return e;
        }
        let exit = loop {
            match lc.events.recv().await {
                Some(GuardEvent::Exited { status, idle }) => {
                    lc.idle = idle;
                    break Exit::Program(status);
                }
                Some(_) => continue,
                None => {
                    let status = match lc.guard_exit.take() {
                        Some(rx) => rx.await.unwrap_or(libc::SIGKILL),
                        None => libc::SIGKILL,
                    };
                    break Exit::GuardEnded(status);
                }
            }
        };
        lc.exit = Some(exit);
        exit
    }

    /// Send a command; false when the guard is gone.
    pub async fn command(&self, cmd: &GuardCommand) -> bool {
        let mut ctl = self.ctl.lock().await;
        let Some(w) = ctl.as_mut() else { return false };
        let mut line = serde_json::to_vec(cmd).unwrap_or_default();
        line.push(b'\n');
        if w.write_all(&line).await.is_err() {
            *ctl = None;
            return false;
        }
        true
    }

    /// Send a signal command and wait for the guard's answer (its note).
    pub async fn signal(&self, cmd: &GuardCommand) -> Result<Option<String>, ()> {
        let mut replies = self.replies.lock().await;
        if !self.command(cmd).await {
            return Err(());
        }
        match tokio::time::timeout(Duration::from_secs(5), replies.recv()).await {
            Ok(Some(note)) => Ok(note),
            _ => Err(()),
        }
    }

    /// End the run without the guard's help: SIGKILL the guard and every
    /// process under it (a guard stuck before the start, or not answering).
    pub fn kill_now(&self) {
        let pid = self.guard_pid;
        for p in proctree::descendants(pid) {
            sys::kill(p.pid, libc::SIGKILL);
        }
        sys::kill(pid, libc::SIGKILL);
    }

    /// Wait until the guard process itself has ended (a guard that keeps
    /// orphans lives on after the program's end).
    /// Whether the guard said, at the run's end, that it is idle again.
    pub async fn went_idle(&self) -> bool {
        self.lifecycle.lock().await.idle
    }

    pub async fn guard_gone(&self) {
        let rx = self.lifecycle.lock().await.guard_exit.take();
        if let Some(rx) = rx {
            let _ = rx.await;
        }
    }

    /// Close the control socket: the guard ends the program and everything under it.
    pub async fn close(&self) {
        self.ctl.lock().await.take();
    }

    /// After the run's end: give its guard back to the pool when the guard
    /// said it is idle again and the pool has room; otherwise drop it,
    /// which closes its socket, and it exits.
    pub async fn recycle(self, daemon: &Daemon) {
        let Run {
            guard_pid,
            ctl,
            lifecycle,
            back,
            lent,
            ..
        } = self;
        let lc = lifecycle.into_inner();
        let (Some(Exit::Program(_)), true, Some(exit)) = (lc.exit, lc.idle, lc.guard_exit) else {
            return;
        };
        let (Some(write), Ok(read)) = (ctl.into_inner(), back.await) else {
            return;
        };
        let socket = std::os::unix::net::UnixStream::from(QuietStream::reunite(read, write));
        daemon.reaper.pool.put_back(
            pool::Guard {
                pid: guard_pid,
                socket,
                exit,
            },
            lent,
        );
    }
}
