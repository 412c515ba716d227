//! MCP sessions ([`Session`]) and the HTTP sessions rmcp opens: each
//! session-bound client's default computer is its session's [`Slot`],
//! made on the first call that needs it and released when the session
//! ends (kept with `--keep`). What the sessions share, the computers
//! among it, is [`App`].

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use computer_providers::ProviderError;

use crate::app::{self, App, Principal, Scope, Slot};

impl App {
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
}

/// The table is pruned of ended sessions once it holds this many.
const PRUNE_FLOOR: usize = 64;

/// HTTP sessions by rmcp's id.
#[derive(Default)]
pub(crate) struct HttpSessions {
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
        self.app
            .retire_now_release_later(&entry, "its session ended", self.app.config.keep);
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
                        if let Some(entry) = app::end_state(&state).await {
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
