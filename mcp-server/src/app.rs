//! What every session of one server shares ([`App`]): the provider, the
//! configuration, and the table of every computer the server holds, each
//! one an [`Entry`] under the handle the server minted for it, and whose
//! it is (its principal).
//!
//!
//! - A caller ([`Caller`]) is a principal (a bearer token's hash over HTTP,
//!   the server's instance over stdio) and, for a session-bound client
//!   (stdio, or HTTP with a session), its [`Session`].
//! - A call that names no computer runs on the caller's default computer:
//!   its session's, or for a stateless client its principal's ([`Slot`]:
//!   made on first use, concurrent first calls sharing one creation).
//! - `computer_new` makes named ones; a handle or a name finds one.
//! - Everything needed to find a computer again is in its provider labels
//!   (handle, name, principal hash, kind, default scope), so a computer
//!   not in this server's memory (a server restarted with `--keep`, a
//!   replica over the same provider) is found by labels and attached.
//! - Bounds: `--max-computers` per principal and `--max-server-computers`
//!   per server, checked under one admission lock before a creation; a
//!   computer unused for `--session-idle` is released by the reaper.
//! - Every release is logged with the computer's name and provider id and
//!   the reason, never its handle.
//!
//!
//! Modules: `entry` (a held computer, its principal and scope), `caller`
//! (who calls, and the fleet tools' server side), `admission` (the bounds
//! on creations), `table` (making, attaching and finding computers),
//! [`slot`] (default computers, made lazily), `release` (ending computers,
//! the reaper, extend's lifetime bound, shutdown), [`snapshot`] (snapshots
//! and forks from them). MCP sessions are in
//! [`crate::session`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::task::TaskTracker;

use computer_providers::{Capabilities, Provider};
use computerd::protocol::SettingKind;

use crate::config::Config;
use crate::session::{HttpSessions, Session};

mod admission;
mod caller;
mod entry;
mod release;
mod slot;
pub mod snapshot;
mod table;

pub use admission::Ask;
use admission::{Pending, Released};
pub use caller::{Caller, CallerFleet};
pub use entry::{Entry, Principal, Scope};
pub use slot::{ForCall, Slot, end_state};

/// The most one creation may take, whatever the provider does.
pub const CREATE_WAIT: Duration = Duration::from_secs(180);

/// How long one release, or shutdown's wait for those under way, may take.
pub const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// What every session of one server shares.
pub struct App {
    pub provider: Arc<dyn Provider>,
    pub config: Config,
    /// The principal of a stdio client (the server's instance).
    pub stdio_principal: Principal,
    /// Live sessions, so shutdown can end them.
    pub(crate) sessions: Mutex<Vec<Weak<Session>>>,
    /// Every computer held, by handle.
    pub(crate) entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Each principal's default computer (stateless clients).
    pub(crate) principal_defaults: Mutex<HashMap<Principal, Arc<Slot>>>,
    /// Creations admitted and not done, for the bounds.
    pub(crate) pending: Mutex<Pending>,
    /// One admission check at a time.
    pub(crate) admission: tokio::sync::Mutex<()>,
    /// Handles released lately, and why.
    pub(crate) released: Mutex<Released>,
    /// Handles of computers being released now: listed by the provider
    /// still, counted against no caller's bound (the server's bound counts
    /// them until they are gone: their programs still run).
    pub(crate) releasing: Mutex<HashSet<String>>,
    /// Told each time a release under way is done.
    pub(crate) release_done: tokio::sync::Notify,
    /// HTTP sessions by the id rmcp gave each, and whose each is.
    pub(crate) http_sessions: Mutex<HttpSessions>,
    /// Creations and releases under way, which shutdown waits for.
    pub(crate) tasks: TaskTracker,
    /// The live viewer's links and control leases.
    pub views: crate::view::Views,
    /// Where receipts are kept past the server, and their prices.
    pub book: crate::receipts::Book,
}

impl App {
    pub fn new(provider: Arc<dyn Provider>, config: Config) -> Arc<App> {
        let link_ttl = config.fleet.view_link_ttl;
        Arc::new(App {
            book: crate::receipts::Book::new(&config),
            provider,
            stdio_principal: Principal::of_stdio(&config.instance),
            config,
            sessions: Mutex::new(Vec::new()),
            entries: Mutex::new(HashMap::new()),
            principal_defaults: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            admission: tokio::sync::Mutex::new(()),
            released: Mutex::new(Released::default()),
            releasing: Mutex::new(HashSet::new()),
            release_done: tokio::sync::Notify::new(),
            http_sessions: Mutex::new(HttpSessions::default()),
            tasks: TaskTracker::new(),
            views: crate::view::Views::with_link_ttl(link_ttl),
        })
    }

    pub fn capabilities(&self) -> Capabilities {
        self.provider.capabilities()
    }

    /// The setting kind of this server's computers, as its spec asks for
    /// it: the kind whose tool family the sessions get.
    pub fn kind(&self) -> SettingKind {
        // Every computer of this server is of its --kind (Config::spec).
        self.config.setting_kind()
    }

    /// The server is stopping: end every live session, wait (bounded) for
    /// the creations and releases under way, then release every computer
    /// made here (kept with `--keep`), whoever it was made for.
    pub async fn release_all(&self) {
        let live: Vec<Arc<Session>> = {
            let all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            all.iter().filter_map(Weak::upgrade).collect()
        };
        futures::future::join_all(live.iter().map(|s| s.end())).await;
        let slots: Vec<Arc<Slot>> = self
            .principal_defaults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for slot in slots {
            slot.end().await;
        }
        self.tasks.close();
        if tokio::time::timeout(RELEASE_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("creations and releases still running after {RELEASE_WAIT:?}");
        }
        self.end_all_entries().await;
    }

    /// The principal's default slot (stateless clients), made on first ask.
    pub fn principal_slot(&self, principal: &Principal) -> Arc<Slot> {
        let mut all = self
            .principal_defaults
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            all.entry(principal.clone())
                .or_insert_with(|| Arc::new(Slot::new(Scope::Principal, principal.clone(), None))),
        )
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The handles of the principal's computers held here, sorted: what
    /// its `computer://<handle>/info` resources are, read without asking
    /// the provider (a tool call compares them before and after itself).
    pub fn held_handles(&self, principal: &Principal) -> Vec<String> {
        let mut out: Vec<String> = self
            .entries()
            .values()
            .filter(|e| &e.principal == principal && e.lost().is_none())
            .map(|e| e.handle.clone())
            .collect();
        out.sort();
        out
    }
}
