//! The bounds on creations: `--max-computers` per principal and
//! `--max-server-computers` per server, checked under one admission lock
//! before a creation ([`Admitted`] holds its place until it is done), and
//! the handles released lately ([`Released`]).

use std::collections::{HashMap, HashSet, VecDeque};

use computer_providers::ComputerSpec;
use computer_tools::fleet::ComputerSummary;

use super::{App, Principal, Scope};

/// What a creation asks for.
pub struct Ask {
    pub principal: Principal,
    pub name: Option<String>,
    pub default: Option<Scope>,
    pub session: Option<String>,
    pub spec: ComputerSpec,
}

/// Creations admitted and not yet done, for the bounds.
#[derive(Default)]
pub struct Pending {
    pub(super) by_principal: HashMap<Principal, usize>,
    pub(super) names: Vec<(Principal, String)>,
    /// Handles of the creations under way: the provider may list such a
    /// computer already, and it counts once, as pending.
    pub(super) handles: HashSet<String>,
    pub(super) total: usize,
}

/// Handles released lately, and why, so a later call says so (per
/// principal: another caller's released handle reads as unknown).
#[derive(Default)]
pub struct Released {
    recent: VecDeque<(String, Principal, String)>,
}

const RELEASED_KEPT: usize = 1024;

impl Released {
    pub(super) fn add(&mut self, handle: &str, principal: &Principal, why: &str) {
        if self.recent.len() >= RELEASED_KEPT {
            self.recent.pop_front();
        }
        self.recent
            .push_back((handle.to_string(), principal.clone(), why.to_string()));
    }
    pub(super) fn why(&self, handle: &str, principal: &Principal) -> Option<String> {
        self.recent
            .iter()
            .rev()
            .find(|(h, p, _)| h == handle && p == principal)
            .map(|(_, _, w)| w.clone())
    }
}

impl App {
    /// Admit one creation for `principal` under the bounds, or refuse in
    /// words naming the limit and the computers to release.
    pub(super) async fn admit(&self, ask: &Ask) -> Result<Admitted<'_>, String> {
        let _one_at_a_time = self.admission.lock().await;
        let p = &ask.principal;
        let mine = self.principal_computers(p).await?;
        let pending = {
            let pending = self.pending.lock().unwrap_or_else(|x| x.into_inner());
            if let Some(n) = &ask.name
                && pending.names.iter().any(|(q, m)| q == p && m == n)
            {
                return Err(format!(
                    "a computer named {n} is being made already; use it, or choose another name"
                ));
            }
            (
                pending.by_principal.get(p).copied().unwrap_or(0),
                pending.total,
            )
        };
        if let Some(n) = &ask.name
            && let Some(same) = mine.iter().find(|c| c.name.as_deref() == Some(n.as_str()))
        {
            return Err(format!(
                "you have a computer named {n} already ({}); use it, release it first, or choose another name",
                same.handle
            ));
        }
        let limit = self.config.fleet.max_computers;
        if mine.len() + pending.0 >= limit {
            return Err(format!(
                "you hold {} computers, the most one caller may (--max-computers {limit}); release one with computer_release first: {}",
                mine.len() + pending.0,
                list_words(&mine)
            ));
        }
        self.server_room(pending.1, &mine).await?;
        let mut pending = self.pending.lock().unwrap_or_else(|x| x.into_inner());
        *pending.by_principal.entry(p.clone()).or_default() += 1;
        pending.total += 1;
        if let Some(n) = &ask.name {
            pending.names.push((p.clone(), n.clone()));
        }
        Ok(Admitted {
            app: self,
            principal: p.clone(),
            name: ask.name.clone(),
            handle: None,
        })
    }
}

impl App {
    /// Room under `--max-server-computers` for one more, with `pending`
    /// creations under way. A computer being released counts until its
    /// provider's release is done (its programs still run): when only
    /// those fill the server, this waits for them (at most
    /// [`super::RELEASE_WAIT`]) rather than refuse.
    async fn server_room(&self, pending: usize, mine: &[ComputerSummary]) -> Result<(), String> {
        let limit = self.config.fleet.max_server_computers;
        let until = tokio::time::Instant::now() + super::RELEASE_WAIT;
        loop {
            let done = self.release_done.notified();
            tokio::pin!(done);
            // Asked to be told before counting, so a release that ends
            // between the count and the wait is not missed.
            done.as_mut().enable();
            let releasing = self
                .releasing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len();
            let held = self.entries().len() + pending;
            if held + releasing < limit {
                return Ok(());
            }
            if held >= limit || tokio::time::Instant::now() >= until {
                let still = match releasing {
                    0 => String::new(),
                    n => format!(" and {n} more are still being released"),
                };
                return Err(format!(
                    "this server holds {held} computers{still}, its most (--max-server-computers {limit}); release one of yours with computer_release first: {}",
                    list_words(mine)
                ));
            }
            let _ = tokio::time::timeout_at(until, done).await;
        }
    }
}

/// A creation admitted under the bounds; dropping it frees its place.
pub(super) struct Admitted<'a> {
    app: &'a App,
    principal: Principal,
    name: Option<String>,
    handle: Option<String>,
}

impl Admitted<'_> {
    /// The creation's computer will carry `handle`.
    pub(super) fn making(&mut self, handle: &str) {
        let mut pending = self.app.pending.lock().unwrap_or_else(|x| x.into_inner());
        pending.handles.insert(handle.to_string());
        self.handle = Some(handle.to_string());
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut pending = self.app.pending.lock().unwrap_or_else(|x| x.into_inner());
        if let Some(h) = &self.handle {
            pending.handles.remove(h);
        }
        if let Some(n) = pending.by_principal.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
        }
        pending.total = pending.total.saturating_sub(1);
        if let Some(name) = &self.name
            && let Some(i) = pending
                .names
                .iter()
                .position(|(p, n)| p == &self.principal && n == name)
        {
            pending.names.remove(i);
        }
    }
}

/// The caller's computers in words, for a refusal.
pub(super) fn list_words(mine: &[ComputerSummary]) -> String {
    if mine.is_empty() {
        return "none".into();
    }
    mine.iter()
        .map(|c| c.label())
        .collect::<Vec<_>>()
        .join(", ")
}
