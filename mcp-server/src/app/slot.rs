//! A default computer, made lazily: a session's or a principal's [`Slot`].

use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio_util::sync::CancellationToken;

use super::App;
use super::{Ask, Entry, Principal, Scope};

/// A computer a call runs on, and what the call must say about it first
/// (a new default computer replacing a lost one).
pub struct ForCall {
    pub entry: Arc<Entry>,
    pub note: Option<String>,
}

type Creation = Shared<BoxFuture<'static, Result<Arc<Entry>, String>>>;

/// A lazily made default computer: a session's or a principal's.
pub struct Slot {
    scope: Scope,
    principal: Principal,
    /// The session's id, for a session's slot.
    session: Option<String>,
    state: Arc<tokio::sync::Mutex<SlotState>>,
}

#[derive(Default)]
pub struct SlotState {
    current: Option<Arc<Entry>>,
    /// The creation under way: it belongs to the slot, not to the call
    /// that started it, so a cancelled call leaves it to finish and be
    /// used by the next call, or released with the slot.
    making: Option<Creation>,
    /// Why the last computer was lost, said once by the next call.
    lost: Option<String>,
    ended: bool,
}

impl Slot {
    pub fn new(scope: Scope, principal: Principal, session: Option<String>) -> Slot {
        Slot {
            scope,
            principal,
            session,
            state: Arc::new(tokio::sync::Mutex::new(SlotState::default())),
        }
    }

    /// The slot's computer, made now if there is none. Callers that arrive
    /// while it is being made wait for that one creation; a caller
    /// cancelled meanwhile stops waiting, and the creation goes on.
    pub async fn computer(
        &self,
        app: &Arc<App>,
        cancel: &CancellationToken,
    ) -> Result<ForCall, String> {
        let creation = {
            let mut st = self.state.lock().await;
            if st.ended {
                return Err("this session has ended".into());
            }
            if let Some(entry) = &st.current {
                match entry.lost() {
                    None => {
                        return Ok(ForCall {
                            entry: Arc::clone(entry),
                            note: None,
                        });
                    }
                    Some(why) if entry.released_why().is_some() => {
                        // Released (unused too long, or by computer_release):
                        // a new one now, said in the result.
                        st.lost = Some(why);
                        st.current = None;
                    }
                    Some(why) => {
                        // The loss is this call's error; the next call makes
                        // a new computer and says so (a silent new computer
                        // would hide that every file and process is gone).
                        st.lost = Some(why.clone());
                        let gone = st.current.take();
                        if let Some(e) = gone {
                            app.forget(&e, "it stopped answering");
                        }
                        return Err(format!(
                            "{why} (ended from outside, or crashed): its files and processes are gone. The next tool call makes a new computer."
                        ));
                    }
                }
            }
            match &st.making {
                Some(c) => c.clone(),
                None => {
                    let c = self.start_creation(app);
                    st.making = Some(c.clone());
                    c
                }
            }
        };
        let entry = tokio::select! {
            r = creation => r?,
            _ = cancel.cancelled() => return Err("the tool call was cancelled while its computer was being made (the making goes on, for the next call)".to_string()),
        };
        let note = self.state.lock().await.lost.take().map(|why| {
            format!(
                "Note: {why}, so a new computer ({}) was made for this call; files and processes of the old one are gone.",
                entry.label()
            )
        });
        Ok(ForCall { entry, note })
    }

    /// Make (or, for a principal's, find again by labels) the slot's
    /// computer in a task of its own, which installs it when done, or
    /// releases it if the slot ended meanwhile.
    fn start_creation(&self, app: &Arc<App>) -> Creation {
        let app2 = Arc::clone(app);
        let state = Arc::clone(&self.state);
        let scope = self.scope;
        let principal = self.principal.clone();
        let session = self.session.clone();
        let task = app.tasks.spawn(async move {
            let made = async {
                if scope == Scope::Principal
                    && let Some(found) = app2.find_default(&principal).await?
                {
                    return Ok(found);
                }
                let ask = Ask {
                    principal: principal.clone(),
                    name: None,
                    default: Some(scope),
                    session,
                    spec: app2.config.spec()?,
                };
                app2.make(ask).await
            }
            .await;
            let mut st = state.lock().await;
            st.making = None;
            let entry = made?;
            if st.ended {
                drop(st);
                app2.end_entry(&entry, "its session ended while it was being made")
                    .await;
                return Err("this session ended while its computer was being made".into());
            }
            st.current = Some(Arc::clone(&entry));
            Ok(entry)
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
    pub async fn check_lost(&self, app: &Arc<App>, entry: &Arc<Entry>) {
        if !entry.client.is_closed() {
            return;
        }
        let mut st = self.state.lock().await;
        if st.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, entry)) {
            st.lost = Some(format!("the computer {} stopped answering", entry.label()));
            st.current = None;
            app.forget(entry, "it stopped answering");
        }
    }

    /// The slot's computer now, if it has a live one.
    pub async fn current(&self) -> Option<Arc<Entry>> {
        self.state
            .lock()
            .await
            .current
            .clone()
            .filter(|e| e.lost().is_none())
    }

    /// The slot is over: hand back its computer (a creation under way sees
    /// the end and releases what it made).
    pub async fn end(&self) -> Option<Arc<Entry>> {
        let mut st = self.state.lock().await;
        st.ended = true;
        st.current.take()
    }

    /// Like [`Slot::end`], without waiting: None when the state is busy.
    pub fn try_end(&self) -> Option<Option<Arc<Entry>>> {
        let mut st = self.state.try_lock().ok()?;
        if st.ended {
            return Some(None);
        }
        st.ended = true;
        Some(st.current.take())
    }

    pub fn state_handle(&self) -> Arc<tokio::sync::Mutex<SlotState>> {
        Arc::clone(&self.state)
    }
}

/// End a slot's state from outside an async context (a dropped session).
pub async fn end_state(state: &tokio::sync::Mutex<SlotState>) -> Option<Arc<Entry>> {
    let mut st = state.lock().await;
    if st.ended {
        return None;
    }
    st.ended = true;
    st.current.take()
}
