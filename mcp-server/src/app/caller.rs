//! Who calls ([`Caller`]): a principal and, for a session-bound client,
//! its session; and the fleet tools' server side for one caller
//! ([`CallerFleet`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use computer_tools::fleet::{self, ComputerSummary, NewComputer, SnapshotSummary, Which};
use computerd::protocol::SettingKind;

use super::{App, Ask, Principal, Slot};
use crate::session::{Session, words};

/// The caller of one tool call.
#[derive(Clone)]
pub struct Caller {
    pub principal: Principal,
    /// The session of a session-bound client; None for a stateless one.
    pub session: Option<Arc<Session>>,
}

impl Caller {
    /// The slot the caller's calls without a `computer` use.
    pub fn default_slot(&self, app: &Arc<App>) -> Arc<Slot> {
        match &self.session {
            Some(s) => Arc::clone(&s.slot),
            None => app.principal_slot(&self.principal),
        }
    }
}

/// The fleet tools' server side, for one caller.
pub struct CallerFleet {
    pub app: Arc<App>,
    pub caller: Caller,
    /// The client, for request_takeover's elicitation (None in tests).
    pub peer: Option<Peer<RoleServer>>,
    /// The call's cancellation.
    pub cancel: CancellationToken,
}

impl CallerFleet {
    async fn create_named(&self, ask: NewComputer) -> Result<ComputerSummary, String> {
        let mut spec = self.app.config.spec()?;
        spec.kind = ask.kind;
        spec.lifetime_ms = ask.lifetime_ms;
        spec.network = match ask.network {
            fleet::NetworkChoice::None => computer_providers::NetworkPolicy::None,
            fleet::NetworkChoice::Open => computer_providers::NetworkPolicy::Open,
            // The server's own list (every public host for public).
            fleet::NetworkChoice::Allow | fleet::NetworkChoice::Public => spec.network,
        };
        if ask.cpus.is_some() {
            spec.sizes.cpus = ask.cpus;
        }
        if ask.memory_mb.is_some() {
            spec.sizes.memory_mb = ask.memory_mb;
        }
        if ask.pids.is_some() {
            spec.sizes.pids = ask.pids;
        }
        let seen = crate::shares::for_provider(
            &spec,
            self.app.capabilities().shares,
            self.app.config.server_state_dir().as_deref(),
        )?;
        self.app
            .provider
            .check(&seen)
            .map_err(|e| words(&e, "checking the new computer"))?;
        // Found before anything is made: one not the caller's is refused
        // as unknown.
        let from = match &ask.from {
            Some(f) => Some(self.app.own_snapshot(&self.caller.principal, f).await?),
            None => None,
        };
        // A provider that starts a computer from its vendor's snapshot
        // does so at create; the others fill it below.
        spec.from = from.clone();
        let entry = self
            .app
            .make(Ask {
                principal: self.caller.principal.clone(),
                name: ask.name,
                default: None,
                session: None,
                spec,
            })
            .await?;
        if let Some(s) = &from {
            self.app.fill_from(&entry, s).await?;
        }
        Ok(entry.summary(false))
    }

    async fn snapshot_one(&self, which: Which, name: String) -> Result<SnapshotSummary, String> {
        let entry = self.named(&which).await?;
        let s = self
            .app
            .snapshot(&self.caller.principal, &entry, &name)
            .await?;
        Ok(super::snapshot::summary(&s))
    }

    async fn list_mine(&self) -> Result<Vec<ComputerSummary>, String> {
        let mut all = self.app.principal_computers(&self.caller.principal).await?;
        let slot = self.caller.default_slot(&self.app);
        if let Some(current) = slot.current().await {
            for c in all.iter_mut().filter(|c| c.handle == current.handle) {
                *c = current.summary(true);
            }
        }
        Ok(all)
    }

    /// The caller's computer `which` names, made by no call of this.
    async fn named(&self, which: &Which) -> Result<Arc<super::Entry>, String> {
        match which {
            Which::Default => {
                let slot = self.caller.default_slot(&self.app);
                slot.current()
                    .await
                    .ok_or_else(|| "you have no default computer now (it is made on your first tool call without `computer`)".to_string())
            }
            _ => self.app.find(&self.caller.principal, which).await,
        }
    }

    async fn pause_one(&self, which: Which, on: bool) -> Result<ComputerSummary, String> {
        let entry = match self.named(&which).await {
            Ok(entry) => entry,
            // Paused, and not held here: found by its labels, resumed, and
            // attached.
            Err(why) if !on => match self
                .app
                .resume_listed(&self.caller.principal, &which)
                .await?
            {
                Some(entry) => return Ok(entry.summary(which == Which::Default)),
                None => return Err(why),
            },
            Err(why) => return Err(why),
        };
        self.app.pause(&entry, on).await?;
        Ok(entry.summary(which == Which::Default))
    }

    async fn view_one(&self, which: Which, revoke: bool) -> Result<fleet::ViewLink, String> {
        let entry = self.named(&which).await?;
        if !revoke && entry.kind == SettingKind::Sandbox {
            return Err(format!(
                "{}: {} has no screen to watch (a {} computer)",
                fleet::VIEW_NAME,
                entry.label(),
                entry.kind.as_str()
            ));
        }
        self.app.views.link(&entry, revoke)
    }

    async fn takeover_one(
        &self,
        ask: fleet::TakeoverAsk,
    ) -> Result<fleet::TakeoverOutcome, String> {
        let entry = self.named(&ask.which).await?;
        if !matches!(
            entry.kind,
            SettingKind::Desktop | SettingKind::Phone | SettingKind::Browser
        ) {
            return Err(format!(
                "{}: {} has no screen for a person to use in the viewer (a {} computer)",
                fleet::TAKEOVER_NAME,
                entry.label(),
                entry.kind.as_str()
            ));
        }
        let _in_use = entry.begin_use();
        crate::view::takeover::run(
            &self.app.views,
            &entry,
            &ask,
            self.peer.clone(),
            &self.cancel,
        )
        .await
    }

    async fn release_one(&self, which: Which) -> Result<fleet::ComputerReleased, String> {
        let entry = self.named(&which).await?;
        let computer = entry.summary(which == Which::Default);
        // Answered once the computer counts against no bound of the
        // caller's (and its read-write shares are copied back); the
        // provider's part (init's orderly shutdown) runs on, tracked so a
        // stopping server waits for it.
        let back = self.app.release_answering(&entry, "computer_release").await;
        Ok(fleet::ComputerReleased {
            computer,
            copied_back: back.map(|b| match b {
                Ok(words) => fleet::CopyBack {
                    done: true,
                    words: words.join("; "),
                },
                Err(words) => fleet::CopyBack { done: false, words },
            }),
        })
    }
}

impl fleet::Fleet for CallerFleet {
    fn create(&self, ask: NewComputer) -> BoxFuture<'_, Result<ComputerSummary, String>> {
        Box::pin(self.create_named(ask))
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<ComputerSummary>, String>> {
        Box::pin(self.list_mine())
    }
    fn release(&self, which: Which) -> BoxFuture<'_, Result<fleet::ComputerReleased, String>> {
        Box::pin(self.release_one(which))
    }
    fn pause(&self, which: Which, on: bool) -> BoxFuture<'_, Result<ComputerSummary, String>> {
        Box::pin(self.pause_one(which, on))
    }
    fn snapshot(
        &self,
        which: Which,
        name: String,
    ) -> BoxFuture<'_, Result<SnapshotSummary, String>> {
        Box::pin(self.snapshot_one(which, name))
    }
    fn view(&self, which: Which, revoke: bool) -> BoxFuture<'_, Result<fleet::ViewLink, String>> {
        Box::pin(self.view_one(which, revoke))
    }
    fn takeover(
        &self,
        ask: fleet::TakeoverAsk,
    ) -> BoxFuture<'_, Result<fleet::TakeoverOutcome, String>> {
        Box::pin(self.takeover_one(ask))
    }
}
