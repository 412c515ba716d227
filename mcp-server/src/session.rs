//! MCP sessions and their computers: made on the first tool call that needs
//! one (concurrent first calls share one creation), one per session, lost
//! computers replaced on the next call, released when the session ends.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use computer_providers::{
    Capabilities, ComputerRef, ComputerSpec, NetworkPolicy, Provider, ProviderError, Release, label,
};
use computer_tools::ComputerFacts;
use computerd::client::ComputerClient;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, NetworkArg};

/// What every session of one server shares.
pub struct App {
    pub provider: Arc<dyn Provider>,
    pub config: Config,
    /// Live sessions, so shutdown can release their computers.
    sessions: Mutex<Vec<Weak<Session>>>,
}

impl App {
    pub fn new(provider: Arc<dyn Provider>, config: Config) -> Arc<App> {
        Arc::new(App {
            provider,
            config,
            sessions: Mutex::new(Vec::new()),
        })
    }

    pub fn capabilities(&self) -> Capabilities {
        self.provider.capabilities()
    }

    pub fn new_session(self: &Arc<Self>) -> Arc<Session> {
        let session = Arc::new(Session {
            app: Arc::clone(self),
            id: format!("s-{}", &crate::config::random_token()[..12]),
            state: tokio::sync::Mutex::new(State::default()),
        });
        let mut all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&session));
        session
    }

    /// Release the computers of every live session (the server is stopping).
    pub async fn release_all(&self) {
        let live: Vec<Arc<Session>> = {
            let all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            all.iter().filter_map(Weak::upgrade).collect()
        };
        futures::future::join_all(live.iter().map(|s| s.end())).await;
    }

    fn spec(&self, session: &str) -> ComputerSpec {
        let mut spec = ComputerSpec::sandbox(self.config.lifetime.as_millis() as u64);
        spec.network = match self.config.network {
            NetworkArg::None => NetworkPolicy::None,
            NetworkArg::Open => NetworkPolicy::Open,
        };
        spec.labels
            .insert(label::INSTANCE.into(), sanitize(&self.config.instance));
        spec.labels
            .insert(label::SESSION.into(), session.to_string());
        spec
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(255)
        .collect()
}

/// A session's computer, while it lives.
#[derive(Clone)]
pub struct Live {
    pub computer: ComputerRef,
    pub client: Arc<dyn ComputerClient>,
    pub facts: ComputerFacts,
}

#[derive(Default)]
struct State {
    current: Option<Live>,
    /// Why the last computer was lost, said once by the next call.
    lost: Option<String>,
    ended: bool,
}

pub struct Session {
    app: Arc<App>,
    pub id: String,
    state: tokio::sync::Mutex<State>,
}

/// The session's computer for one call, and anything the call must say
/// about it (a new computer replacing a lost one).
pub struct ForCall {
    pub live: Live,
    pub note: Option<String>,
}

impl Session {
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// The session's computer, made now if there is none. Callers that
    /// arrive while it is being made wait for that one creation.
    pub async fn computer(&self, cancel: &CancellationToken) -> Result<ForCall, String> {
        let mut st = self.state.lock().await;
        if st.ended {
            return Err("this session has ended".into());
        }
        if let Some(live) = &st.current {
            if !live.client.is_closed() {
                return Ok(ForCall {
                    live: live.clone(),
                    note: None,
                });
            }
            // The loss is this call's error; the next call makes a new
            // computer and says so (a silent new computer would hide that
            // every file and process of the old one is gone).
            let gone = live.computer.id.clone();
            st.lost = Some(format!("the computer {gone} stopped answering"));
            self.forget(st.current.take());
            return Err(format!(
                "the computer {gone} stopped answering (ended from outside, or crashed): its files and processes are gone. The next tool call makes a new computer."
            ));
        }
        let made = tokio::select! {
            r = self.make() => r,
            _ = cancel.cancelled() => Err("the tool call was cancelled while its computer was being made".to_string()),
        };
        let live = made?;
        st.current = Some(live.clone());
        let note = st.lost.take().map(|why| {
            format!("Note: {why}, so a new computer ({}) was made for this call; files and processes of the old one are gone.", live.computer.id)
        });
        Ok(ForCall { live, note })
    }

    async fn make(&self) -> Result<Live, String> {
        let app = &self.app;
        let spec = app.spec(&self.id);
        let cancel = CancellationToken::new();
        let created = app
            .provider
            .create(&spec, &cancel)
            .await
            .map_err(|e| words(&e, "making a computer"))?;
        let conn = match app.provider.connect(&created.computer, &cancel).await {
            Ok(c) => c,
            Err(e) => {
                let _ = app
                    .provider
                    .release(&created.computer, Release::Delete, &cancel)
                    .await;
                return Err(words(&e, "connecting to the new computer"));
            }
        };
        let caps = app.provider.capabilities();
        let network = created
            .notes
            .iter()
            .find_map(|n| n.strip_prefix("network: "))
            .unwrap_or("not read back")
            .to_string();
        let facts = ComputerFacts {
            provider: app.provider.id().to_string(),
            id: created.computer.id.clone(),
            kind: conn.hello.kind.to_string(),
            os: conn.hello.os.clone(),
            arch: conn.hello.arch.clone(),
            user: created.computer.user.clone().unwrap_or_default(),
            work_dir: created.computer.home.clone().unwrap_or_default(),
            network,
            deadline: Some(created.computer.deadline.clone()),
            isolation: caps.isolation.clone(),
            notes: created.notes.clone(),
        };
        tracing::info!(
            session = self.id,
            computer = created.computer.id,
            "computer made"
        );
        Ok(Live {
            computer: created.computer,
            client: conn.client,
            facts,
        })
    }

    /// After a call: if the connection died, the computer is lost; the next
    /// call makes a new one and says so.
    pub async fn check_lost(&self, live: &Live) {
        if !live.client.is_closed() {
            return;
        }
        let mut st = self.state.lock().await;
        if st
            .current
            .as_ref()
            .is_some_and(|c| c.computer.id == live.computer.id)
        {
            st.lost = Some(format!(
                "the computer {} stopped answering",
                live.computer.id
            ));
            self.forget(st.current.take());
        }
    }

    /// Let a lost computer's remains go, in the background.
    fn forget(&self, live: Option<Live>) {
        let Some(live) = live else { return };
        let provider = Arc::clone(&self.app.provider);
        tokio::spawn(async move {
            let _ = provider
                .release(&live.computer, Release::Delete, &CancellationToken::new())
                .await;
        });
    }

    /// Move the deadline of the session's computer.
    pub async fn extend(&self, ttl_ms: u64) -> Result<String, String> {
        let current = self.state.lock().await.current.clone();
        let Some(live) = current else {
            return Err("there is no computer to extend".into());
        };
        let r = self
            .app
            .provider
            .extend(&live.computer, ttl_ms, &CancellationToken::new())
            .await
            .map_err(|e| words(&e, "extending the computer"))?;
        if let Some(l) = self.state.lock().await.current.as_mut() {
            l.facts.deadline = Some(r.clone());
        }
        Ok(r)
    }

    /// The session is over: release its computer unless the server keeps them.
    pub async fn end(&self) {
        let live = {
            let mut st = self.state.lock().await;
            st.ended = true;
            st.current.take()
        };
        let Some(live) = live else { return };
        live.client.close();
        if self.app.config.keep {
            tracing::info!(
                session = self.id,
                computer = live.computer.id,
                "session ended; computer kept until its deadline"
            );
            return;
        }
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            self.app
                .provider
                .release(&live.computer, Release::Delete, &CancellationToken::new()),
        )
        .await;
        match r {
            Ok(Ok(())) => tracing::info!(
                session = self.id,
                computer = live.computer.id,
                "session ended; computer released"
            ),
            Ok(Err(e)) => tracing::warn!(
                session = self.id,
                computer = live.computer.id,
                "releasing the computer failed: {e}"
            ),
            Err(_) => tracing::warn!(
                session = self.id,
                computer = live.computer.id,
                "releasing the computer took over 30 s"
            ),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // An HTTP session that closed or expired drops its handler: release
        // its computer in the background (stdio sessions end explicitly).
        let current = self.state.get_mut().current.take();
        let ended = self.state.get_mut().ended;
        if let (Some(live), false) = (current, ended) {
            live.client.close();
            if self.app.config.keep {
                return;
            }
            let provider = Arc::clone(&self.app.provider);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = provider
                        .release(&live.computer, Release::Delete, &CancellationToken::new())
                        .await;
                });
            }
        }
    }
}

/// A provider failure in words for the model.
pub fn words(e: &ProviderError, doing: &str) -> String {
    format!("{doing} failed ({:?}): {}", e.code, e.message)
}
