//! The daemon (Linux only).
//!
//! - [`init`]: `computerd init`, the computer's first process: the socket, one
//!   process table for every connection, the reaper and sweep, the deadline
//!   and the shutdown order.
//! - [`conn`]: one connection: bounded lines, requests run at once, replies in
//!   any order, `$/cancelRequest`, and what ends with the connection.
//! - [`guard`]: `computerd guard`, one per run: a child subreaper that starts
//!   the program in a group (or session) of its own and ends everything under
//!   it; [`runner`] is the daemon's side of it.
//! - [`exec`], [`process`] (with [`ring`]), [`files`], [`tar`]: the methods;
//!   [`check`] the range checks they share.
//! - [`bridge`]: `computerd stdio`.
//! - [`egress`]: `computerd egress`, a computer's allowlist proxy, outside it.
//! - [`isolate`]: what init makes true of itself before it serves: no
//!   capability, no_new_privs, seccomp, `--user`, `--own-network`.
//! - [`probe`]: `computerd probe`, what the network answers, read from inside.
//! - [`sandbox`]: `computerd sandbox`, the local provider's isolation
//!   (namespaces and a read-only view of the host) around init.
//! - [`users`]: `/etc/passwd` read by hand, so no NSS module of the computer's
//!   ever loads into the daemon.
//! - [`walk`]: paths below a directory descriptor, never through a symlink,
//!   and the depth-first directory walk.
//! - [`x11`]: the X display, for screen.* and input.actions; [`desktop`]
//!   the Xvfb a desktop's init starts (`--xvfb`).
//! - [`proctree`], [`sys`]: `/proc` walks and the raw system calls.

pub mod bridge;
pub mod check;
pub mod cli;
pub mod conn;
pub mod desktop;
pub mod egress;
pub mod exec;
pub mod files;
pub mod guard;
pub mod init;
pub mod isolate;
pub mod plain;
pub mod probe;
pub mod process;
pub mod proctree;
pub mod ring;
pub mod runner;
pub mod sandbox;
pub mod setup;
pub mod sys;
pub mod tar;
pub mod users;
pub mod walk;
pub mod x11;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::protocol::{RpcError, limits};

/// A task whose end nobody waits for, as one boxed type: the proxy's, init's
/// handoff, each connection and each process's pumps. The runtime's task
/// code is then compiled once for all of them, not once per future (some
/// 2 KiB of the static daemon each).
pub fn spawn(f: impl std::future::Future<Output = ()> + Send + 'static) {
    let f: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(f);
    tokio::spawn(f);
}

/// Who the daemon runs as, and what every program it starts is given.
#[derive(Clone, Debug)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// USER and LOGNAME for programs run as the daemon's own user.
    pub name: String,
    /// HOME for programs run as the daemon's own user.
    pub home: String,
    /// PATH for every program.
    pub path: String,
    /// DISPLAY for every program: the display of a desktop's own Xvfb
    /// ([`desktop`]), none otherwise.
    pub display: Option<String>,
    /// Set for every program after PATH, HOME, USER and LOGNAME (the
    /// proxy variables with `init --egress`), before the call's own env.
    pub extra_env: Vec<(String, String)>,
}

/// State shared by every connection of one init.
pub struct Daemon {
    pub identity: Identity,
    /// This binary, started again as `computerd guard` for every run.
    pub exe: PathBuf,
    pub reaper: init::Reaper,
    pub processes: process::Table,
    pub life: Arc<Lifecycle>,
    /// The X display, when DISPLAY named one at start (screen and input).
    pub display: x11::Display,
    next_stream_id: AtomicU64,
}

impl Daemon {
    pub fn new(identity: Identity, exe: PathBuf, life: Lifecycle) -> Arc<Self> {
        let display = x11::Display::from_env(&identity.home);
        Arc::new(Self {
            display,
            identity,
            exe,
            reaper: init::Reaper::default(),
            processes: process::Table::default(),
            life: Arc::new(life),
            next_stream_id: AtomicU64::new(1),
        })
    }

    /// A new id for a tar pull or push, unique in this daemon.
    pub fn stream_id(&self) -> String {
        format!("t{}", self.next_stream_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// Whether the daemon still takes new programs, and the starts under way.
pub struct Lifecycle {
    shutting_down: AtomicBool,
    starts: std::sync::Mutex<usize>,
    starts_done: Notify,
    pub deadline: init::Deadline,
}

impl Lifecycle {
    pub fn new(deadline: init::Deadline) -> Self {
        Self {
            shutting_down: AtomicBool::new(false),
            starts: std::sync::Mutex::new(0),
            starts_done: Notify::new(),
            deadline,
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Register a start (exec.run or process.start). Refused once shutdown began.
    pub fn begin_start(self: &Arc<Self>) -> Result<StartToken, RpcError> {
        let mut n = self.starts.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_shutting_down() {
            return Err(RpcError::unsupported("the computer is shutting down"));
        }
        *n += 1;
        Ok(StartToken {
            life: Arc::clone(self),
            done: false,
        })
    }

    /// Stop taking starts; then wait (bounded) for those under way.
    pub async fn stop_starts(&self, wait: Duration) {
        {
            let _n = self.starts.lock().unwrap_or_else(|p| p.into_inner());
            self.shutting_down.store(true, Ordering::SeqCst);
        }
        let until = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.starts_done.notified();
            if *self.starts.lock().unwrap_or_else(|p| p.into_inner()) == 0 {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                tracing::warn!("starts still under way after {wait:?}; shutting down anyway");
                return;
            }
        }
    }
}

/// Held by a start until its program runs (or the start fails).
pub struct StartToken {
    life: Arc<Lifecycle>,
    done: bool,
}

impl StartToken {
    pub fn finish(mut self) {
        self.release();
    }
    fn release(&mut self) {
        if !self.done {
            self.done = true;
            let mut n = self.life.starts.lock().unwrap_or_else(|p| p.into_inner());
            *n = n.saturating_sub(1);
            drop(n);
            self.life.starts_done.notify_waiters();
        }
    }
}

impl Drop for StartToken {
    fn drop(&mut self) {
        self.release();
    }
}

/// The kill grace, as a duration.
pub const KILL_GRACE: Duration = Duration::from_millis(limits::KILL_GRACE_MS);
