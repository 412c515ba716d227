//! Idle guards, started ahead of the runs that will take them.
//!
//! A guard costs an exec of computerd (milliseconds of loading, relocating
//! and faulting in a 3 MB binary) before the program's own. Init keeps up
//! to [`MAX_SIZE`] guards started and waiting on their control socket, and
//! tops the pool up in the background whenever a run takes one, so a run
//! costs one exec on its path: its program's. With the pool empty (a burst)
//! a run forks its own guard from the template ([`guard_for_run`]); with a
//! size of 0 it starts one by exec, as it always could.
//!
//! Topping up is not an exec either, since on a busy machine the
//! background's CPU is the runs' CPU: one guard, started by exec, is the
//! template, and each new idle guard is forked from it (`fork` with one
//! descriptor, the new guard's control socket; the answer is its pid). The
//! fork uses CLONE_PARENT, so the new guard is init's child like any other,
//! and init holds its reaper's lock from the request to the registration.
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
//!
//! Most guards come back. An exec.run asks its guard to be reused: when
//! the run ends by itself with nothing left under the guard, the guard
//! says so, goes idle again on the same socket, and the daemon puts it
//! back here (up to [`MAX_RUNS`](super::super::guard::MAX_RUNS) runs a
//! guard). A pooled guard out on such a run is *lent*: it counts towards
//! the pool's size, so no guard is forked behind it, unless it stays out
//! past [`LENT_WAIT`]. A run one at a time then costs no fork, no exit and
//! no reap of a guard at all.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use super::super::setup::SetupError;
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

/// How long the template has to answer a fork request.
const TEMPLATE_ANSWER: Duration = Duration::from_secs(2);

/// How long the pool waits for lent guards before it forks new ones
/// behind them (a long run holds its guard for as long as it runs).
pub const LENT_WAIT: Duration = Duration::from_millis(100);

/// A guard started and waiting for its run.
pub struct Guard {
    pub pid: i32,
    /// The daemon's end of the control socket (non-blocking).
    pub socket: std::os::unix::net::UnixStream,
    /// The guard's wait status, from the reaper.
    pub exit: oneshot::Receiver<i32>,
}

/// The idle guards, and how many to keep. An empty pool (the default)
/// keeps nothing until [`Pool::set_size`].
#[derive(Default)]
pub struct Pool {
    idle: Mutex<VecDeque<Guard>>,
    /// The idle guard new ones are forked from; it never takes a run.
    template: Mutex<Option<Guard>>,
    size: AtomicUsize,
    closed: AtomicBool,
    /// Wakes [`keep_filled`] when a run took a guard.
    taken: Notify,
    /// Pooled guards out on runs that may give them back, by a number of
    /// their own, with when each went out; locked after `idle`.
    lent: Mutex<HashMap<u64, Instant>>,
    next_lent: AtomicU64,
    /// Held by a run forking its own guard (the pool was empty): one
    /// blocking thread at a time asks the template, whatever the burst.
    forking: tokio::sync::Mutex<()>,
    /// Runs waiting in [`guard_for_run`]: a guard given back while any
    /// wait is kept for them, past the pool's size.
    waiting: AtomicUsize,
}

/// A pooled guard's place in the pool while it is out on a run that may
/// give it back: dropped (the guard is not coming back), the pool is
/// topped up behind it.
pub struct Lent {
    daemon: Arc<Daemon>,
    id: u64,
}

impl Drop for Lent {
    fn drop(&mut self) {
        let pool = &self.daemon.reaper.pool;
        let idle = pool.lock();
        let was = pool.lent().remove(&self.id).is_some();
        drop(idle);
        if was {
            pool.taken.notify_one();
        }
    }
}

/// What the pool needs now.
enum Fill {
    /// A guard: fewer are idle or coming back than its size.
    Now,
    /// Nothing unless the guards lent are still out then.
    At(Instant),
    /// Nothing: full, or closed.
    No,
}

impl Pool {
    fn lent(&self) -> MutexGuard<'_, HashMap<u64, Instant>> {
        self.lent.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Guard>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_size(&self, n: usize) {
        self.size.store(n.min(MAX_SIZE), Ordering::SeqCst);
        self.taken.notify_one();
    }

    /// An idle guard that is still alive, if there is one. With `lend`
    /// (a run that may give it back) it is lent: the pool is topped up
    /// behind it only if it stays out; otherwise at once.
    pub fn take(&self, daemon: &Arc<Daemon>, lend: bool) -> Option<(Guard, Option<Lent>)> {
        let mut idle = self.lock();
        let mut found = None;
        let mut dead = false;
        while let Some(mut g) = idle.pop_front() {
            // One reaped while idle (killed by a program of the computer)
            // is dropped.
            if let Err(oneshot::error::TryRecvError::Empty) = g.exit.try_recv() {
                found = Some(g);
                break;
            }
            dead = true;
        }
        let lent = match (&found, lend) {
            (Some(_), true) => {
                let id = self.next_lent.fetch_add(1, Ordering::SeqCst);
                self.lent().insert(id, Instant::now());
                Some(Lent {
                    daemon: Arc::clone(daemon),
                    id,
                })
            }
            _ => None,
        };
        drop(idle);
        // A lent guard needs no refill behind it (yet); a dead one does.
        if lent.is_none() || dead {
            self.taken.notify_one();
        }
        found.map(|g| (g, lent))
    }

    /// A guard idle again after its run: kept if the pool has room for it
    /// (counting the guards still lent), dropped otherwise (its socket
    /// closes and it exits). `lent` is its place if it was lent.
    pub fn put_back(&self, mut g: Guard, lent: Option<Lent>) {
        let mut idle = self.lock();
        let out = {
            let mut all = self.lent();
            if let Some(l) = &lent {
                all.remove(&l.id);
            }
            all.len()
        };
        // Its place is given up here: `lent`, dropped once the locks are
        // let go, finds nothing left to give up.
        let alive = matches!(g.exit.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        let room = idle.len() + out < self.size.load(Ordering::SeqCst)
            || idle.len() < self.waiting.load(Ordering::SeqCst);
        if alive && room && !self.closed.load(Ordering::SeqCst) {
            idle.push_back(g);
            return;
        }
        drop(idle);
        // Dropped: the pool may now be short of a guard that was counted.
        self.taken.notify_one();
    }

    /// Let every idle guard go and keep no more: each sees its socket
    /// close and exits. Returns how many there were.
    pub fn close(&self) -> usize {
        self.closed.store(true, Ordering::SeqCst);
        let gone: Vec<Guard> = self.lock().drain(..).collect();
        let template = self
            .template
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.taken.notify_one();
        gone.len() + usize::from(template.is_some())
    }

    pub fn idle(&self) -> usize {
        self.lock().len()
    }

    /// Whether to start a guard: the idle ones and the lent ones that
    /// went out less than [`LENT_WAIT`] ago are fewer than the size.
    fn fill(&self) -> Fill {
        let idle = self.lock();
        let size = self.size.load(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) || idle.len() >= size {
            return Fill::No;
        }
        let now = Instant::now();
        let back_by: Vec<Instant> = self
            .lent()
            .values()
            .map(|&t| t + LENT_WAIT)
            .filter(|&due| due > now)
            .collect();
        if idle.len() + back_by.len() < size {
            return Fill::Now;
        }
        back_by.into_iter().min().map_or(Fill::Now, Fill::At)
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
pub fn size_from_env() -> Result<usize, SetupError> {
    parse_size(std::env::var_os(SIZE_VAR).as_deref())
}

fn parse_size(v: Option<&std::ffi::OsStr>) -> Result<usize, SetupError> {
    let Some(v) = v else {
        return Ok(DEFAULT_SIZE);
    };
    let v = v.to_string_lossy();
    match v.trim().parse::<usize>() {
        Ok(n) if n <= MAX_SIZE => Ok(n),
        Ok(n) => Err(format!("{SIZE_VAR} is {n}; the most is {MAX_SIZE} idle guards").into()),
        Err(_) => Err(format!("{SIZE_VAR} is {v:?}, not a number from 0 to {MAX_SIZE}").into()),
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

/// An idle guard forked from the template (started first if there is
/// none): a clone of an exec'd, idle guard, which costs a fraction of an
/// exec. If the template fails it is let go, and the guard is started by exec.
pub fn fork_guard(daemon: &Daemon) -> std::io::Result<Guard> {
    let pool = &daemon.reaper.pool;
    let mut template = pool.template.lock().unwrap_or_else(|p| p.into_inner());
    if pool.closed.load(Ordering::SeqCst) {
        return Err(std::io::Error::other("the pool is closed"));
    }
    let alive = template
        .as_mut()
        .is_some_and(|t| matches!(t.exit.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
    if !alive {
        let t = start_guard(daemon)?;
        t.socket.set_nonblocking(false)?;
        // A template that does not answer in time (stopped by a program of
        // the computer) is let go: the reaper's lock is held meanwhile.
        t.socket.set_read_timeout(Some(TEMPLATE_ANSWER))?;
        t.socket.set_write_timeout(Some(TEMPLATE_ANSWER))?;
        *template = Some(t);
    }
    let Some(t) = template.as_ref() else {
        return start_guard(daemon);
    };
    let (ours, theirs) = sys::socketpair()?;
    let asked = daemon.reaper.register(|| ask_fork(&t.socket, &theirs));
    drop(theirs);
    match asked {
        Ok((pid, exit)) => {
            let socket = std::os::unix::net::UnixStream::from(ours);
            socket.set_nonblocking(true)?;
            Ok(Guard { pid, socket, exit })
        }
        // The computer's pids bound: the template is fine, and an exec would
        // find no pid either.
        Err(e) if e.raw_os_error().is_some_and(super::room::is_full) => Err(e),
        Err(e) => {
            tracing::info!("the guard template did not fork ({e}); starting one by exec");
            if let Some(mut t) = template.take()
                && matches!(t.exit.try_recv(), Err(oneshot::error::TryRecvError::Empty))
            {
                sys::kill(t.pid, libc::SIGKILL);
            }
            drop(template);
            start_guard(daemon)
        }
    }
}

/// A guard for a run that found the pool empty (a burst, or every pooled
/// guard lent), with its place in the pool if it is a pooled one.
///
/// Runs wait here one at a time. The first waiting takes a guard given
/// back in the meantime (kept for the runs waiting, past the pool's size,
/// and lent as [`Pool::take`] lends), or else forks one from the template
/// as the pool's own are: a fraction of the exec a started guard costs (a
/// burst of 1000 `true` runs cost the computer 2.5 ms of CPU a run with a
/// guard started by exec for each). The template answers on a blocking
/// socket, so that request runs on the blocking pool: one thread, whatever
/// the burst. With a pool of size 0 every run starts its own guard by
/// exec, as that setting says.
pub async fn guard_for_run(
    daemon: &Arc<Daemon>,
    lend: bool,
) -> std::io::Result<(Guard, Option<Lent>, bool)> {
    let pool = &daemon.reaper.pool;
    if pool.size.load(Ordering::SeqCst) == 0 {
        return Ok((start_guard(daemon)?, None, false));
    }
    let _waiting = Waiting::new(pool);
    let _one_at_a_time = pool.forking.lock().await;
    if let Some((g, lent)) = pool.take(daemon, lend) {
        return Ok((g, lent, true));
    }
    let d = Arc::clone(daemon);
    let g = tokio::task::spawn_blocking(move || fork_guard(&d))
        .await
        .map_err(std::io::Error::other)??;
    Ok((g, None, false))
}

/// A run counted in [`Pool::waiting`] until it has its guard. When the
/// last one goes, the guards kept for the waiting past the pool's size
/// are let go.
struct Waiting<'a>(&'a Pool);

impl<'a> Waiting<'a> {
    fn new(pool: &'a Pool) -> Self {
        pool.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(pool)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let pool = self.0;
        let mut idle = pool.lock();
        if pool.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            let out = pool.lent().len();
            let keep = pool.size.load(Ordering::SeqCst).saturating_sub(out);
            if idle.len() > keep {
                // Dropped: their sockets close and they exit.
                let extra: Vec<Guard> = idle.drain(keep..).collect();
                drop(idle);
                drop(extra);
            }
        }
    }
}

/// Send the template `fork` with the new guard's end of its control socket;
/// its answer is the new guard's pid.
fn ask_fork(
    template: &std::os::unix::net::UnixStream,
    theirs: &std::os::fd::OwnedFd,
) -> std::io::Result<i32> {
    use std::io::Read;
    let fd = [theirs.as_raw_fd()];
    // With a timeout set, a signal to init (SIGCHLD, under a burst) breaks
    // the blocking call with EINTR whatever SA_RESTART says: try again.
    let sent = sys::retry(|| {
        sys::send_fds(
            template.as_fd(),
            b"fork\n",
            &fd,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        )
    })?;
    if sent != 5 {
        return Err(std::io::Error::other("the fork request went in part"));
    }
    let mut answer = Vec::with_capacity(16);
    let mut byte = [0u8; 1];
    let mut reader = template;
    while answer.len() < 16 {
        match reader.read(&mut byte) {
            Ok(0) => return Err(std::io::Error::other("the template closed its socket")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if byte[0] == b'\n' {
            // `!errno`: the template could not fork, and is still there.
            if let Some(errno) = answer.strip_prefix(b"!") {
                let errno = std::str::from_utf8(errno)
                    .ok()
                    .and_then(|s| s.parse::<i32>().ok())
                    .unwrap_or(libc::EIO);
                return Err(std::io::Error::from_raw_os_error(errno));
            }
            return std::str::from_utf8(&answer)
                .ok()
                .and_then(|s| s.parse::<i32>().ok())
                .filter(|&p| p > 0)
                .ok_or_else(|| std::io::Error::other("the template's answer is not a pid"));
        }
        answer.push(byte[0]);
    }
    Err(std::io::Error::other("the template's answer is too long"))
}

/// Keep the pool at its size until it is closed: start a guard whenever a
/// run took one that is not coming back, or that has been out for
/// [`LENT_WAIT`]. Runs in init's background, never on a run's path.
pub async fn keep_filled(daemon: Arc<Daemon>) {
    let pool = &daemon.reaper.pool;
    let mut failing = false;
    loop {
        let taken = pool.taken.notified();
        tokio::pin!(taken);
        taken.as_mut().enable();
        match pool.fill() {
            Fill::Now => {}
            Fill::At(at) => {
                tokio::select! {
                    _ = taken.as_mut() => {}
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                }
                continue;
            }
            Fill::No => {
                if pool.closed.load(Ordering::SeqCst) {
                    return;
                }
                taken.await;
                continue;
            }
        }
        let d = Arc::clone(&daemon);
        match tokio::task::spawn_blocking(move || fork_guard(&d)).await {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_is_read_from_the_environment_and_bounded() {
        let size =
            |v: Option<&str>| parse_size(v.map(std::ffi::OsStr::new)).map_err(|e| e.to_string());
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
