//! Idle guards, started ahead of the runs that will take them.
//!
//! A guard costs an exec of computerd (a few hundred microseconds of
//! loading and setting up) before the program's own. Init keeps up to
//! [`MAX_SIZE`] guards started and waiting on their control socket, and
//! tops the pool up in the background whenever a run takes one, so a run
//! costs one exec on its path: its program's. With the pool empty (a burst,
//! or a size of 0) a run starts its own guard, as it always could.
//!
//! The pool is not keyed: every guard, idle or not, is started the same
//! way by the same init, so it has init's credentials, cgroups, namespaces,
//! seccomp filter, no_new_privs, rlimits and umask, which init fixes before
//! it serves and never changes. What a run asks for (its user, cwd,
//! environment, stdio or terminal) reaches the guard with the run and is
//! applied after it arrives, as for a guard started for the run.
//!
//! Idle guards are init's children and in its reaper's table like any
//! guard: the sweep spares them, shutdown lets them go (their sockets close)
//! and TERMs them with the rest. Each holds one pid of the computer's
//! process limit.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::super::{Daemon, sys};

/// The most idle guards init keeps.
pub const MAX_SIZE: usize = 4;
/// The idle guards init keeps unless told otherwise.
pub const DEFAULT_SIZE: usize = 2;
/// The environment variable that sets the pool's size for one init.
pub const SIZE_VAR: &str = "COMPUTERD_GUARD_POOL";

/// How long the pool waits before it tries again after a guard would not start
/// (the computer's process limit, most likely).
const RETRY: Duration = Duration::from_secs(1);

/// A guard started and waiting for its run.
pub struct Guard {
    pub pid: i32,
    /// The daemon's end of the control socket (non-blocking).
    pub socket: std::os::unix::net::UnixStream,
    /// The guard's wait status, from the reaper.
    pub exit: oneshot::Receiver<i32>,
}

/// The idle guards, and how many to keep.
pub struct Pool {
    idle: Mutex<VecDeque<Guard>>,
    size: AtomicUsize,
    closed: AtomicBool,
    /// Wakes [`keep_filled`] when a run took a guard.
    taken: Notify,
}

impl Default for Pool {
    fn default() -> Self {
        Self::new()
    }
}

impl Pool {
    /// An empty pool that keeps nothing until [`Pool::set_size`].
    pub fn new() -> Self {
        Self {
            idle: Mutex::new(VecDeque::new()),
            size: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            taken: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Guard>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_size(&self, n: usize) {
        self.size.store(n.min(MAX_SIZE), Ordering::SeqCst);
        self.taken.notify_one();
    }

    /// An idle guard that is still alive, if there is one; the pool is
    /// topped up behind it.
    pub fn take(&self) -> Option<Guard> {
        let mut idle = self.lock();
        let mut found = None;
        while let Some(mut g) = idle.pop_front() {
            // One reaped while idle (killed by a program of the computer)
            // is dropped.
            if let Err(oneshot::error::TryRecvError::Empty) = g.exit.try_recv() {
                found = Some(g);
                break;
            }
        }
        drop(idle);
        self.taken.notify_one();
        found
    }

    /// Let every idle guard go and keep no more: each sees its socket
    /// close and exits. Returns how many there were.
    pub fn close(&self) -> usize {
        self.closed.store(true, Ordering::SeqCst);
        let gone: Vec<Guard> = self.lock().drain(..).collect();
        self.taken.notify_one();
        gone.len()
    }

    pub fn idle(&self) -> usize {
        self.lock().len()
    }

    fn wants_more(&self) -> bool {
        !self.closed.load(Ordering::SeqCst) && self.idle() < self.size.load(Ordering::SeqCst)
    }

    /// Keep `g` if the pool still wants it; otherwise it is dropped, and exits.
    fn put(&self, g: Guard) {
        let mut idle = self.lock();
        if !self.closed.load(Ordering::SeqCst) && idle.len() < self.size.load(Ordering::SeqCst) {
            idle.push_back(g);
        }
    }
}

/// The pool's size from [`SIZE_VAR`]: [`DEFAULT_SIZE`] when unset, 0 to
/// start a guard for every run.
pub fn size_from_env() -> Result<usize, String> {
    parse_size(std::env::var_os(SIZE_VAR).as_deref())
}

fn parse_size(v: Option<&std::ffi::OsStr>) -> Result<usize, String> {
    let Some(v) = v else {
        return Ok(DEFAULT_SIZE);
    };
    let v = v.to_string_lossy();
    match v.trim().parse::<usize>() {
        Ok(n) if n <= MAX_SIZE => Ok(n),
        Ok(n) => Err(format!(
            "{SIZE_VAR} is {n}; the most is {MAX_SIZE} idle guards"
        )),
        Err(_) => Err(format!(
            "{SIZE_VAR} is {v:?}, not a number from 0 to {MAX_SIZE}"
        )),
    }
}

/// Start a guard, idle until it is handed a run. Its stdio is /dev/null
/// until then; it is registered with the reaper from fork on.
pub fn start_guard(daemon: &Daemon) -> std::io::Result<Guard> {
    let (ours, theirs) = sys::socketpair()?;
    // Above the stdio numbers, so the guard's own dup2 onto 0-2 never hits it.
    let theirs = sys::dup_above(theirs.as_fd(), 10)?;
    // No pre_exec: std can then start the guard with posix_spawn (vfork),
    // which costs a multi-threaded daemon far less than fork. The socket is
    // handed down by number and made inheritable only inside the reaper's
    // spawn lock, where no other child can be forked.
    let mut cmd = Command::new(&daemon.exe);
    cmd.arg0("computerd")
        .arg("guard")
        .arg(theirs.as_raw_fd().to_string())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let (pid, exit) = daemon.reaper.spawn(&mut cmd, Some(theirs.as_fd()))?;
    // The guard's end must be the guard's alone: EOF on the socket is how
    // each side learns the other is gone.
    drop(cmd);
    drop(theirs);
    let socket = std::os::unix::net::UnixStream::from(ours);
    socket.set_nonblocking(true)?;
    Ok(Guard { pid, socket, exit })
}

/// Keep the pool at its size until it is closed: start a guard whenever a
/// run took one. Runs in init's background, never on a run's path.
pub async fn keep_filled(daemon: Arc<Daemon>) {
    let pool = &daemon.reaper.pool;
    let mut failing = false;
    loop {
        let taken = pool.taken.notified();
        tokio::pin!(taken);
        taken.as_mut().enable();
        while pool.wants_more() {
            let d = Arc::clone(&daemon);
            match tokio::task::spawn_blocking(move || start_guard(&d)).await {
                Ok(Ok(g)) => {
                    failing = false;
                    pool.put(g);
                }
                Ok(Err(e)) => {
                    if !failing {
                        tracing::warn!(
                            "could not start an idle guard ({e}); runs start their own until one starts"
                        );
                    }
                    failing = true;
                    tokio::time::sleep(RETRY).await;
                }
                Err(_) => return,
            }
        }
        if pool.closed.load(Ordering::SeqCst) {
            return;
        }
        taken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_is_read_from_the_environment_and_bounded() {
        let size = |v: Option<&str>| parse_size(v.map(std::ffi::OsStr::new));
        assert_eq!(size(None), Ok(DEFAULT_SIZE));
        assert_eq!(size(Some("0")), Ok(0));
        assert_eq!(size(Some("4")), Ok(4));
        assert_eq!(size(Some(" 3 ")), Ok(3));
        assert_eq!(
            size(Some("9")),
            Err("COMPUTERD_GUARD_POOL is 9; the most is 4 idle guards".to_string())
        );
        assert_eq!(
            size(Some("two")),
            Err("COMPUTERD_GUARD_POOL is \"two\", not a number from 0 to 4".to_string())
        );
    }
}
