//! `computerd init`: the socket, the reaper and sweep, the deadline, shutdown.

use std::collections::HashMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

use nix::fcntl::{FcntlArg, FdFlag};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::runner::pool::{self, Pool};
use super::runner::room::Room;
use super::setup::SetupError;
use super::{Daemon, conn, proctree, sys};
use crate::protocol::{RpcError, limits};

/// Init's children that are guards, each with the channel its wait status
/// goes to, and the idle guards waiting for a run.
#[derive(Default)]
pub struct Reaper {
    guards: Mutex<HashMap<i32, Option<oneshot::Sender<i32>>>>,
    pub pool: Pool,
    /// Starts waiting for room under the computer's process bound.
    pub room: Room,
}

impl Reaper {
    fn lock(&self) -> MutexGuard<'_, HashMap<i32, Option<oneshot::Sender<i32>>>> {
        self.guards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawn a guard and register it before anything can reap or sweep it:
    /// the lock is held from fork to registration.
    /// `inherit` is made inheritable for this one spawn: every fork of the
    /// daemon happens under this lock, so no other child can take it.
    pub fn spawn(
        &self,
        cmd: &mut Command,
        inherit: Option<BorrowedFd<'_>>,
    ) -> io::Result<(i32, oneshot::Receiver<i32>)> {
        let mut guards = self.lock();
        if let Some(fd) = inherit {
            nix::fcntl::fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).map_err(io::Error::from)?;
        }
        let spawned = cmd.spawn();
        if let Some(fd) = inherit {
            let _ = nix::fcntl::fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
        }
        let child = spawned?;
        let pid = child.id() as i32;
        let (tx, rx) = oneshot::channel();
        guards.insert(pid, Some(tx));
        Ok((pid, rx))
    }

    /// Register a child that `start` makes some other way than by a spawn
    /// of init's own (a guard forked with CLONE_PARENT): the lock is held
    /// from before it exists to its registration, so neither the reap nor
    /// the sweep can see it unregistered.
    pub fn register(
        &self,
        start: impl FnOnce() -> io::Result<i32>,
    ) -> io::Result<(i32, oneshot::Receiver<i32>)> {
        let mut guards = self.lock();
        let pid = start()?;
        let (tx, rx) = oneshot::channel();
        guards.insert(pid, Some(tx));
        Ok((pid, rx))
    }

    /// Hold `pid`, a child init started before serving (a desktop's
    /// Xvfb), as a guard: the sweep spares it, shutdown sends it TERM with
    /// the guards, and its end is reaped.
    pub fn adopt(&self, pid: i32) {
        self.lock().insert(pid, None);
    }

    /// Reap every child that has ended; a guard's status goes to its run.
    pub fn reap(&self) {
        let mut guards = self.lock();
        let mut ended = false;
        while let Ok(Some((pid, status))) = sys::reap_any() {
            ended = true;
            if let Some(Some(tx)) = guards.remove(&pid) {
                let _ = tx.send(status);
            }
        }
        drop(guards);
        if ended {
            self.room.freed();
        }
    }

    /// Kill every child of init that is not a guard, with everything under
    /// it. Such a child can only be an orphan: of a guard that died (a
    /// program may kill its own guard), or of something run in the computer
    /// from outside the daemon.
    pub fn sweep(&self) {
        let guards = self.lock();
        let me = std::process::id() as i32;
        for child in proctree::children(me) {
            if !guards.contains_key(&child) {
                let alive = proctree::read_stat(child).is_some_and(|p| !p.is_zombie());
                if alive {
                    tracing::info!(pid = child, "sweeping an orphan that is under no guard");
                    proctree::signal_tree(child, libc::SIGKILL);
                }
            }
        }
    }

    pub fn guard_pids(&self) -> Vec<i32> {
        self.lock().keys().copied().collect()
    }
}

/// Init's deadline, and the most deadline.extend may move it to.
pub struct Deadline {
    state: Mutex<(OffsetDateTime, Option<OffsetDateTime>)>,
    changed: Notify,
}

pub fn parse_time(field: &str, s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &Rfc3339).map_err(|e| {
        format!("{field} {s:?} is not an RFC 3339 time such as 2026-12-01T10:00:00Z ({e})")
    })
}

pub fn format_time(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

impl Deadline {
    pub fn new(at: OffsetDateTime, max: Option<OffsetDateTime>) -> Self {
        Self {
            state: Mutex::new((at, max)),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (OffsetDateTime, Option<OffsetDateTime>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn at(&self) -> OffsetDateTime {
        self.lock().0
    }

    /// deadline.extend: move the deadline later, up to the maximum. A
    /// refusal moves nothing.
    pub fn extend(&self, to: &str) -> Result<String, RpcError> {
        let want = parse_time("at", to).map_err(|m| RpcError::invalid_field("at", m))?;
        let mut st = self.lock();
        let Some(max) = st.1 else {
            return Err(RpcError::unsupported(
                "this computer's deadline cannot move: init was started without --max-deadline",
            ));
        };
        if want < st.0 {
            return Err(RpcError::invalid_field(
                "at",
                format!(
                    "at {} is before the current deadline {}; a deadline only moves later",
                    format_time(want),
                    format_time(st.0)
                ),
            ));
        }
        if want > max {
            return Err(RpcError::limit(format!(
                "at {} is past the most this computer may live, {}",
                format_time(want),
                format_time(max)
            ))
            .with_field("at"));
        }
        st.0 = want;
        drop(st);
        self.changed.notify_waiters();
        Ok(format_time(want))
    }

    /// Resolve when the deadline (as it stands then) has come.
    pub async fn reached(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let left = self.at() - OffsetDateTime::now_utc();
            if left <= time::Duration::ZERO {
                return;
            }
            let left = Duration::try_from(left).unwrap_or(Duration::from_secs(1));
            tokio::select! {
                _ = tokio::time::sleep(left) => {}
                _ = &mut notified => {}
            }
        }
    }
}

/// Check the flags' times: a deadline in the future, a maximum not before it.
pub fn check_times(
    deadline: OffsetDateTime,
    max: Option<OffsetDateTime>,
) -> Result<(), SetupError> {
    let now = OffsetDateTime::now_utc();
    if deadline <= now {
        return Err(format!(
            "--deadline {} is in the past (now is {})",
            format_time(deadline),
            format_time(now)
        )
        .into());
    }
    if let Some(max) = max
        && max < deadline
    {
        return Err(format!(
            "--max-deadline {} is before --deadline {}; the most a computer may live cannot be less than its deadline",
            format_time(max),
            format_time(deadline)
        ).into());
    }
    Ok(())
}

/// The socket's directory must exist, be a directory (not a link), belong
/// to the daemon's user alone and be writable by it. Init never makes it: a
/// non-root init cannot write under /run, so the provider gives it.
pub fn check_socket_dir(socket: &Path) -> Result<(), SetupError> {
    let dir = socket
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let meta = std::fs::symlink_metadata(dir).map_err(|e| {
        format!("the socket's directory {} is missing or unreadable ({e}); the provider must make it, mode 0700, owned by this user", dir.display())
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "the socket's directory {} is not a directory (a symbolic link is not accepted)",
            dir.display()
        )
        .into());
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "the socket's directory {} belongs to uid {}, not to this user (uid {me}); it must be this user's alone",
            dir.display(),
            meta.uid()
        ).into());
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "the socket's directory {} has mode {mode:04o}; it must be this user's alone (0700)",
            dir.display()
        )
        .into());
    }
    if mode & 0o300 != 0o300 {
        return Err(format!(
            "the socket's directory {} is not writable by its owner (mode {mode:04o})",
            dir.display()
        )
        .into());
    }
    Ok(())
}

/// Bind the socket, 0600. A socket left by an init that is gone is replaced;
/// one that answers is another init's, and is refused.
pub fn bind_socket(socket: &Path) -> Result<UnixListener, SetupError> {
    match std::fs::symlink_metadata(socket) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(socket) {
            Ok(_) => {
                return Err(format!(
                    "another computerd is already listening on {}",
                    socket.display()
                )
                .into());
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(socket).map_err(|e| {
                    format!(
                        "could not replace the stale socket {}: {e}",
                        socket.display()
                    )
                })?;
            }
            Err(e) => {
                return Err(format!(
                    "could not check the socket {} left there: {e}",
                    socket.display()
                )
                .into());
            }
        },
        Ok(_) => {
            return Err(format!(
                "{} exists and is not a socket; refusing to replace it",
                socket.display()
            )
            .into());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("could not read {}: {e}", socket.display()).into()),
    }
    // umask makes the socket 0600 from its first moment.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(socket);
    nix::sys::stat::umask(old);
    let listener = bound
        .map_err(|e| SetupError::from(format!("could not listen on {}: {e}", socket.display())))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("could not make {} 0600: {e}", socket.display()))?;
    Ok(listener)
}

/// Whether a connection comes from a program of this computer. Programs
/// run as init's own user, so the socket's mode cannot keep them out; but
/// every one of them is under init (their guards are its children, and it
/// is the subreaper of whatever they leave), while the provider's ends are
/// not: the local provider is outside init's PID namespace (its pid reads
/// 0), and a bridge a provider execs into the computer (`computerd stdio`)
/// has a parent outside it. A peer that cannot be read is refused.
fn from_a_program(stream: &tokio::net::UnixStream) -> bool {
    match stream.peer_cred().map(|c| c.pid()) {
        Ok(Some(0)) => false,
        Ok(Some(pid)) => proctree::is_under(pid, std::process::id() as i32),
        _ => true,
    }
}

/// One error line, and the connection closes: the socket is the provider's
/// alone. Never waits on the peer; a line this short fits the socket's
/// buffer. Logged at debug only: a program that connects in a loop must not
/// fill the daemon's log.
fn refuse(stream: &tokio::net::UnixStream) {
    let e = RpcError::denied(
        "this socket is the provider's: a program of the computer cannot use the daemon through it (its deadline, runs, files); the connection is closed",
    );
    let line = format!(
        "{}\n",
        crate::protocol::Envelope::reply(None, Err(e)).to_line()
    );
    let _ = stream.try_write(line.as_bytes());
    tracing::debug!("refused a connection from a program of the computer");
}

/// Serve until SIGTERM, SIGINT or the deadline, then shut down in order.
/// Returns init's exit code.
pub async fn serve(daemon: Arc<Daemon>, socket: PathBuf) -> i32 {
    // The handlers come first: a SIGTERM that arrives once the socket
    // answers must shut down in order, never kill init outright.
    let (Ok(sigchld), Ok(mut sigterm), Ok(mut sigint)) = (
        signal(SignalKind::child()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("computerd init: could not install signal handlers");
        return 1;
    };
    let pool_size = match pool::size_from_env() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("computerd init: {e}");
            return 1;
        }
    };
    let listener = match bind_socket(&socket).and_then(|l| {
        l.set_nonblocking(true)
            .and_then(|()| tokio::net::UnixListener::from_std(l))
            .map_err(|e| SetupError::from(format!("could not serve the socket: {e}")))
    }) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("computerd init: {e}");
            return 1;
        }
    };
    tracing::info!(socket = %socket.display(), deadline = %format_time(daemon.life.deadline.at()), "computerd init is listening");

    // Idle guards, started from here on, off every run's path.
    daemon.reaper.pool.set_size(pool_size);
    let filler = tokio::spawn(pool::keep_filled(Arc::clone(&daemon)));
    let accept = tokio::spawn({
        let daemon = Arc::clone(&daemon);
        async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        if from_a_program(&stream) {
                            refuse(&stream);
                            continue;
                        }
                        // An orphan left by something entered from
                        // outside (no SIGCHLD came of it) goes at the next
                        // connection, if no child's end came first.
                        daemon.reaper.sweep();
                        super::spawn(conn::serve(Arc::clone(&daemon), stream));
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    });
    let reaper = tokio::spawn(reap_on_sigchld(Arc::clone(&daemon), sigchld));

    let reason = tokio::select! {
        _ = sigterm.recv() => "SIGTERM",
        _ = sigint.recv() => "SIGINT",
        _ = daemon.life.deadline.reached() => "the deadline",
    };
    shutdown(&daemon, reason).await;
    filler.abort();
    accept.abort();
    reaper.abort();
    let _ = std::fs::remove_file(&socket);
    tracing::info!("computerd init exits");
    0
}

/// The least time between two sweeps under a storm of SIGCHLD.
const SWEEP_GAP: Duration = Duration::from_millis(50);

/// Reap and sweep when a child of init ends, and at no other time: an idle
/// computer never wakes init. Every orphan re-parented to init gets SIGCHLD
/// as its exit signal (the kernel sets it at the re-parenting), so its end
/// is reaped at once whatever signal it was started with. An orphan comes
/// to init alive only when its parent ends: a guard (init's child, so a
/// SIGCHLD, and the sweep after it), or something entered from outside the
/// daemon (`docker exec`, `nsenter`), whose end signals its own parent
/// outside; such an orphan is swept at the next child's end or connection.
/// Under a storm the sweep runs at most every [`SWEEP_GAP`], and always
/// once after the last SIGCHLD (a one-shot timer, not a tick).
async fn reap_on_sigchld(daemon: Arc<Daemon>, mut sigchld: tokio::signal::unix::Signal) {
    // A child that ended before the handler was installed sent its SIGCHLD
    // to no one: reap and sweep once at the start.
    daemon.reaper.reap();
    let mut owed = true;
    let mut last_sweep: Option<Instant> = None;
    loop {
        let due = last_sweep.map_or_else(Instant::now, |t| t + SWEEP_GAP);
        tokio::select! {
            _ = sigchld.recv() => {
                daemon.reaper.reap();
                owed = true;
            }
            () = tokio::time::sleep_until(due), if owed => {}
        }
        if owed && Instant::now() >= due {
            daemon.reaper.sweep();
            last_sweep = Some(Instant::now());
            owed = false;
        }
    }
}

/// The shutdown order: refuse new starts, give starts under way up to 3 s,
/// let the idle guards go, TERM every guard (each KILLs its run 2 s later), and 5 s after the TERM
/// KILL whatever is still under init. Every program that started gets TERM
/// before any KILL.
async fn shutdown(daemon: &Arc<Daemon>, reason: &str) {
    tracing::info!("shutting down: {reason}");
    daemon
        .life
        .stop_starts(Duration::from_millis(limits::SHUTDOWN_START_WAIT_MS))
        .await;
    // Idle guards have no run to end: their sockets close and they exit
    // (the TERM below reaches them too).
    daemon.reaper.pool.close();
    let me = std::process::id() as i32;
    let term_at = Instant::now();
    for pid in daemon.reaper.guard_pids() {
        sys::kill(pid, libc::SIGTERM);
    }
    let kill_at = term_at + Duration::from_millis(limits::SHUTDOWN_KILL_AFTER_MS);
    loop {
        daemon.reaper.reap();
        if proctree::children(me).is_empty() {
            break;
        }
        if Instant::now() >= kill_at {
            kill_everything_under(me);
            daemon.reaper.reap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the runs see their guards' ends, so waits and reads answer truly.
    tokio::time::sleep(Duration::from_millis(20)).await;
}

fn kill_everything_under(me: i32) {
    for _ in 0..1000 {
        let left = proctree::descendants(me);
        if left.is_empty() {
            return;
        }
        for p in left {
            sys::kill(p.pid, libc::SIGKILL);
        }
        while let Ok(Some(_)) = sys::reap_any() {}
        std::thread::sleep(Duration::from_millis(1));
    }
}
