//! What every session of one server shares ([`App`]), and MCP sessions
//! ([`Session`]): each session-bound client's default computer is its
//! session's [`Slot`], made on the first call that needs it and released
//! when the session ends (kept with `--keep`). The computers themselves
//! are in [`crate::computers`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::task::TaskTracker;

use computer_providers::{Capabilities, Provider, ProviderError};
use computerd::protocol::SettingKind;

use crate::computers::{self, Entry, Pending, Principal, Released, Scope, Slot};
use crate::config::Config;

/// What every session of one server shares.
pub struct App {
    pub provider: Arc<dyn Provider>,
    pub config: Config,
    /// The principal of a stdio client (the server's instance).
    pub stdio_principal: Principal,
    /// Live sessions, so shutdown can end them.
    sessions: Mutex<Vec<Weak<Session>>>,
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
    /// still, counted against no bound.
    pub(crate) releasing: Mutex<HashSet<String>>,
    /// HTTP sessions by the id rmcp gave each, and whose each is.
    http_sessions: Mutex<HttpSessions>,
    /// Creations and releases under way, which shutdown waits for.
    pub(crate) tasks: TaskTracker,
}

impl App {
    pub fn new(provider: Arc<dyn Provider>, config: Config) -> Arc<App> {
        Arc::new(App {
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
            http_sessions: Mutex::new(HttpSessions::default()),
            tasks: TaskTracker::new(),
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

    /// A new session, named from the OS's random source (which must answer).
    pub fn new_session(self: &Arc<Self>, principal: &Principal) -> Result<Arc<Session>, String> {
        self.new_session_as(principal, None)
    }

    fn new_session_as(
        self: &Arc<Self>,
        principal: &Principal,
        http_id: Option<String>,
    ) -> Result<Arc<Session>, String> {
        let id = format!("s-{}", &crate::config::random_token()?[..12]);
        let session = Arc::new(Session {
            app: Arc::clone(self),
            slot: Arc::new(Slot::new(
                Scope::Session,
                principal.clone(),
                Some(id.clone()),
            )),
            id,
            http_id,
        });
        let mut all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&session));
        tracing::debug!(session = session.id, "session started");
        Ok(session)
    }

    fn http_sessions(&self) -> std::sync::MutexGuard<'_, HttpSessions> {
        self.http_sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// rmcp opened the HTTP session `id` for `principal` (its initialize):
    /// from now on only that principal's requests reach it. Returns the
    /// ids to check for ending (see [`App::forget_http_sessions`]) when the
    /// table has grown enough to be pruned.
    pub fn own_http_session(&self, id: &str, principal: &Principal) -> Option<Vec<String>> {
        let mut all = self.http_sessions();
        all.by_id.insert(
            id.to_string(),
            HttpSession {
                principal: principal.clone(),
                session: Weak::new(),
            },
        );
        if all.by_id.len() < all.prune_at.max(PRUNE_FLOOR) {
            return None;
        }
        all.prune_at = all.by_id.len() * 2;
        Some(all.by_id.keys().cloned().collect())
    }

    /// Sessions rmcp has ended without a DELETE (idle, closed): out of the
    /// table.
    pub fn forget_http_sessions(&self, gone: &[String]) {
        let mut all = self.http_sessions();
        for id in gone {
            all.by_id.remove(id);
        }
        let n = all.by_id.len();
        all.prune_at = (n * 2).max(PRUNE_FLOOR);
    }

    /// Whether the HTTP session `id` is open and `principal`'s.
    pub fn http_session_is(&self, id: &str, principal: &Principal) -> bool {
        self.http_sessions()
            .by_id
            .get(id)
            .is_some_and(|s| &s.principal == principal)
    }

    /// The session of the HTTP session `id`, made on its first call that
    /// needs one, for its owner only.
    pub fn http_session(
        self: &Arc<Self>,
        id: &str,
        principal: &Principal,
    ) -> Result<Arc<Session>, String> {
        let mut all = self.http_sessions();
        let Some(entry) = all.by_id.get_mut(id).filter(|s| &s.principal == principal) else {
            return Err("no such session: it has ended, or never began".into());
        };
        if let Some(s) = entry.session.upgrade() {
            return Ok(s);
        }
        let s = self.new_session_as(principal, Some(id.to_string()))?;
        entry.session = Arc::downgrade(&s);
        Ok(s)
    }

    /// A client ended the HTTP session `id` (its DELETE, checked to be its
    /// owner's): out of the table, and its default computer counts no more
    /// from now on (released in the background).
    pub async fn end_http_session(&self, id: &str) {
        let gone = self.http_sessions().by_id.remove(id);
        if let Some(session) = gone.and_then(|s| s.session.upgrade()) {
            session.end_by_client().await;
        }
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
}

/// How long one release, or shutdown's wait for those under way, may take.
pub const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// The table is pruned of ended sessions once it holds this many.
const PRUNE_FLOOR: usize = 64;

/// HTTP sessions by rmcp's id.
#[derive(Default)]
struct HttpSessions {
    by_id: HashMap<String, HttpSession>,
    /// The size at which the table is next pruned.
    prune_at: usize,
}

struct HttpSession {
    /// Who opened it (its initialize's bearer token).
    principal: Principal,
    /// Ours, once a call made it.
    session: Weak<Session>,
}

pub struct Session {
    app: Arc<App>,
    /// Our short name for it (`s-…`), the only one logs use.
    pub id: String,
    /// rmcp's id of an HTTP session: a credential, never logged.
    http_id: Option<String>,
    /// The session's default computer.
    pub slot: Arc<Slot>,
}

impl Session {
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// The session is over: release its default computer unless the server
    /// keeps them. A creation still under way sees the end and releases
    /// what it made.
    pub async fn end(&self) {
        let Some(entry) = self.slot.end().await else {
            return;
        };
        tracing::info!(session = self.id, "session ended");
        self.app.end_session_entry(&entry).await;
    }

    /// The client ended the session: its default computer stops counting
    /// against the caller's bounds before this returns, and is released in
    /// the background (tracked, so a stopping server waits for it).
    async fn end_by_client(&self) {
        let Some(entry) = self.slot.end().await else {
            return;
        };
        tracing::info!(session = self.id, "session ended");
        let why = "its session ended";
        if self.app.retire(&entry, why, self.app.config.keep) {
            let app = Arc::clone(&self.app);
            self.app
                .tasks
                .spawn(async move { app.release_retired(&entry, why).await });
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(id) = &self.http_id {
            let mut all = self.app.http_sessions();
            if all
                .by_id
                .get(id)
                .is_some_and(|s| s.session.strong_count() == 0)
            {
                all.by_id.remove(id);
            }
        }
        // An HTTP session that closed or expired drops its handler: release
        // its computer in the background (stdio sessions end explicitly),
        // tracked so a stopping server waits for it.
        match self.slot.try_end() {
            Some(Some(entry)) => self.app.end_session_entry_later(entry),
            Some(None) => {}
            None => {
                // A creation holds the state for a moment; end it after.
                let state = self.slot.state_handle();
                let app = Arc::clone(&self.app);
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        if let Some(entry) = computers::end_state(&state).await {
                            app.end_session_entry(&entry).await;
                        }
                    });
                }
            }
        }
    }
}

/// A provider failure in words for the model.
pub fn words(e: &ProviderError, doing: &str) -> String {
    format!("{doing} failed ({:?}): {}", e.code, e.message)
}
