//! What every session of one server shares ([`App`]), and MCP sessions
//! ([`Session`]): each session-bound client's default computer is its
//! session's [`Slot`], made on the first call that needs it and released
//! when the session ends (kept with `--keep`). The computers themselves
//! are in [`crate::computers`].

use std::collections::HashMap;
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
        let id = format!("s-{}", &crate::config::random_token()?[..12]);
        let session = Arc::new(Session {
            app: Arc::clone(self),
            slot: Arc::new(Slot::new(
                Scope::Session,
                principal.clone(),
                Some(id.clone()),
            )),
            id,
        });
        let mut all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&session));
        tracing::debug!(session = session.id, "session started");
        Ok(session)
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

pub struct Session {
    app: Arc<App>,
    pub id: String,
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
}

impl Drop for Session {
    fn drop(&mut self) {
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
