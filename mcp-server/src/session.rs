//! MCP sessions and their computers: made on the first tool call that needs
//! one (concurrent first calls share one creation), one per session, lost
//! computers replaced on the next call, released when the session ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio_util::task::TaskTracker;

use computer_providers::{
    Capabilities, ComputerRef, ComputerSpec, Provider, ProviderError, Release, label,
};
use computer_tools::{ComputerFacts, ComputerState};
use computerd::client::ComputerClient;
use computerd::protocol::SettingKind;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// What every session of one server shares.
pub struct App {
    pub provider: Arc<dyn Provider>,
    pub config: Config,
    /// Live sessions, so shutdown can release their computers.
    sessions: Mutex<Vec<Weak<Session>>>,
    /// Every computer made and not yet released, by id: what shutdown
    /// releases whatever became of its session.
    computers: Mutex<HashMap<String, ComputerRef>>,
    /// Creations and releases under way, which shutdown waits for.
    tasks: TaskTracker,
}

impl App {
    pub fn new(provider: Arc<dyn Provider>, config: Config) -> Arc<App> {
        Arc::new(App {
            provider,
            config,
            sessions: Mutex::new(Vec::new()),
            computers: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
        })
    }

    pub fn capabilities(&self) -> Capabilities {
        self.provider.capabilities()
    }

    /// The setting kind of this server's computers, as its spec asks for
    /// it: the kind whose tool family the sessions get.
    pub fn kind(&self) -> SettingKind {
        // Every computer of this server is a sandbox (Config::spec).
        SettingKind::Sandbox
    }

    /// A new session, named from the OS's random source (which must answer).
    pub fn new_session(self: &Arc<Self>) -> Result<Arc<Session>, String> {
        let session = Arc::new(Session {
            app: Arc::clone(self),
            id: format!("s-{}", &crate::config::random_token()?[..12]),
            state: Arc::new(tokio::sync::Mutex::new(State::default())),
        });
        let mut all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&session));
        tracing::info!(session = session.id, "session started");
        Ok(session)
    }

    /// The server is stopping: end every live session, wait (bounded) for
    /// the creations and releases under way, then release whatever
    /// computer is still held, whichever session it was made for.
    pub async fn release_all(&self) {
        let live: Vec<Arc<Session>> = {
            let all = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            all.iter().filter_map(Weak::upgrade).collect()
        };
        futures::future::join_all(live.iter().map(|s| s.end())).await;
        self.tasks.close();
        if tokio::time::timeout(RELEASE_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("creations and releases still running after {RELEASE_WAIT:?}");
        }
        if self.config.keep {
            return;
        }
        let left: Vec<ComputerRef> = self.lock_computers().drain().map(|(_, c)| c).collect();
        futures::future::join_all(left.iter().map(|c| self.release(c))).await;
    }

    fn lock_computers(&self) -> std::sync::MutexGuard<'_, HashMap<String, ComputerRef>> {
        self.computers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Release one computer now, bounded in time, saying how it went.
    async fn release(&self, computer: &ComputerRef) {
        self.lock_computers().remove(&computer.id);
        let r = tokio::time::timeout(
            RELEASE_WAIT,
            self.provider
                .release(computer, Release::Delete, &CancellationToken::new()),
        )
        .await;
        match r {
            Ok(Ok(())) => tracing::info!(computer = computer.id, "computer released"),
            Ok(Err(e)) => {
                tracing::warn!(computer = computer.id, "releasing the computer failed: {e}")
            }
            Err(_) => tracing::warn!(
                computer = computer.id,
                "releasing the computer took over {RELEASE_WAIT:?}"
            ),
        }
    }

    /// Release in the background, tracked so shutdown waits for it.
    fn release_later(self: &Arc<Self>, computer: ComputerRef) {
        let app = Arc::clone(self);
        self.tasks
            .spawn(async move { app.release(&computer).await });
    }

    fn spec(&self, session: &str) -> Result<ComputerSpec, String> {
        let mut spec = self.config.spec()?;
        spec.labels
            .insert(label::SESSION.into(), session.to_string());
        Ok(spec)
    }
}

/// How long one release, or shutdown's wait for those under way, may take.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// A session's computer, while it lives.
#[derive(Clone)]
pub struct Live {
    pub computer: ComputerRef,
    pub client: Arc<dyn ComputerClient>,
    pub facts: ComputerFacts,
    /// What the tools remember about this computer (its shell, its
    /// processes' streams): made with it, gone with it.
    pub state: Arc<ComputerState>,
}

type Creation = Shared<BoxFuture<'static, Result<Live, String>>>;

#[derive(Default)]
struct State {
    current: Option<Live>,
    /// The creation under way: it belongs to the session, not to the call
    /// that started it, so a cancelled call leaves it to finish and be
    /// used by the next call, or released with the session.
    making: Option<Creation>,
    /// Why the last computer was lost, said once by the next call.
    lost: Option<String>,
    ended: bool,
}

pub struct Session {
    app: Arc<App>,
    pub id: String,
    state: Arc<tokio::sync::Mutex<State>>,
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
    /// arrive while it is being made wait for that one creation; a caller
    /// cancelled meanwhile stops waiting, and the creation goes on.
    pub async fn computer(&self, cancel: &CancellationToken) -> Result<ForCall, String> {
        let creation = {
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
            match &st.making {
                Some(c) => c.clone(),
                None => {
                    let c = self.start_creation();
                    st.making = Some(c.clone());
                    c
                }
            }
        };
        let live = tokio::select! {
            r = creation => r?,
            _ = cancel.cancelled() => return Err("the tool call was cancelled while its computer was being made (the making goes on, for the next call)".to_string()),
        };
        let note = self.state.lock().await.lost.take().map(|why| {
            format!("Note: {why}, so a new computer ({}) was made for this call; files and processes of the old one are gone.", live.computer.id)
        });
        Ok(ForCall { live, note })
    }

    /// Make the session's computer in a task of its own, which installs it
    /// as the session's when done, or releases it if the session ended
    /// meanwhile.
    fn start_creation(&self) -> Creation {
        let app = Arc::clone(&self.app);
        let state = Arc::clone(&self.state);
        let session = self.id.clone();
        let task = self.app.tasks.spawn(async move {
            let made = make(&app, &session).await;
            let mut st = state.lock().await;
            st.making = None;
            let live = made?;
            if st.ended {
                drop(st);
                live.client.close();
                if !app.config.keep {
                    app.release(&live.computer).await;
                }
                return Err("this session ended while its computer was being made".into());
            }
            st.current = Some(live.clone());
            Ok(live)
        });
        async move {
            task.await
                .unwrap_or_else(|e| Err(format!("making the computer failed: {e}")))
        }
        .boxed()
        .shared()
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
        if let Some(live) = live {
            self.app.release_later(live.computer);
        }
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

    /// The session is over: release its computer unless the server keeps
    /// them. A creation still under way sees the end and releases what it
    /// made.
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
        tracing::info!(
            session = self.id,
            computer = live.computer.id,
            "session ended"
        );
        self.app.release(&live.computer).await;
    }
}

/// Mark a dropped session's state ended and hand back its computer.
fn end_state(st: &mut State) -> Option<Live> {
    if st.ended {
        return None;
    }
    st.ended = true;
    st.current.take()
}

impl Drop for Session {
    fn drop(&mut self) {
        // An HTTP session that closed or expired drops its handler: release
        // its computer in the background (stdio sessions end explicitly),
        // tracked so a stopping server waits for it.
        let app = Arc::clone(&self.app);
        let keep = app.config.keep;
        let done = |live: Option<Live>| {
            if let Some(live) = live {
                live.client.close();
                if !keep {
                    app.release_later(live.computer);
                }
            }
        };
        match self.state.try_lock() {
            Ok(mut st) => done(end_state(&mut st)),
            Err(_) => {
                // A creation holds the state for a moment; end it after.
                let state = Arc::clone(&self.state);
                let app = Arc::clone(&self.app);
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        let live = end_state(&mut *state.lock().await);
                        if let Some(live) = live {
                            live.client.close();
                            if !app.config.keep {
                                app.release_later(live.computer);
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Make a computer for `session`, connect to it and gather its facts.
async fn make(app: &Arc<App>, session: &str) -> Result<Live, String> {
    let spec = app.spec(session)?;
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
        .network
        .as_ref()
        .map_or_else(|| "not read back".to_string(), ToString::to_string);
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
    app.lock_computers()
        .insert(created.computer.id.clone(), created.computer.clone());
    tracing::info!(session, computer = created.computer.id, "computer made");
    Ok(Live {
        computer: created.computer,
        client: conn.client,
        facts,
        state: ComputerState::new(),
    })
}

/// A provider failure in words for the model.
pub fn words(e: &ProviderError, doing: &str) -> String {
    format!("{doing} failed ({:?}): {}", e.code, e.message)
}
