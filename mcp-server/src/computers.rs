//! The server's computers, each one an [`Entry`] under the handle the
//! server minted for it, and whose it is (its principal).
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
//! Modules: [`slot`] (default computers, made lazily), `release` (ending
//! computers, the reaper, extend's lifetime bound).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use computer_providers::{ComputerRef, ComputerSpec, Labels, Release, label};
use computer_tools::fleet::{self, ComputerSummary, NewComputer, Which};
use computer_tools::{ComputerFacts, ComputerState};
use computerd::client::ComputerClient;
use computerd::protocol::SettingKind;

use crate::session::{App, Session, words};

mod release;
mod slot;

pub use slot::{ForCall, Slot, end_state};

/// Who is calling, as HTTP's auth layer found it (a request extension).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    /// A bearer token's principal: a hash of it (the token itself is never
    /// kept in a label or a log).
    pub fn of_token(token: &str) -> Principal {
        Principal(format!("t{}", digest("computer-mcp token", token)))
    }

    /// A stdio server's principal: its instance name's hash, so a server
    /// started again with the same `--instance` is the same caller.
    pub fn of_stdio(instance: &str) -> Principal {
        Principal(format!("s{}", digest("computer-mcp stdio", instance)))
    }
}

fn digest(domain: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    let out = h.finalize();
    out.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// A fresh handle: `c-` and 32 hex digits from the OS's random source.
fn mint_handle() -> Result<String, String> {
    let hex = computer_providers::random::random_hex(16).map_err(|e| e.message)?;
    Ok(format!("{}{hex}", fleet::HANDLE_PREFIX))
}

/// Which default computer a computer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One MCP session's (stdio, or HTTP with sessions).
    Session,
    /// A principal's, for the calls of stateless clients that name none.
    Principal,
}

impl Scope {
    fn as_label(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Principal => "principal",
        }
    }
}

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

/// One computer the server holds.
pub struct Entry {
    pub handle: String,
    /// The name the model gave it, if any.
    pub name: Option<String>,
    /// Which default computer it is, if it is one.
    pub default: Option<Scope>,
    pub principal: Principal,
    pub kind: SettingKind,
    pub computer: ComputerRef,
    pub client: Arc<dyn ComputerClient>,
    /// What the tools remember about it: made with it, gone with it.
    pub state: Arc<ComputerState>,
    facts: Mutex<ComputerFacts>,
    /// Made by this server's instance (what shutdown releases).
    made_here: bool,
    /// When this server made or found it.
    since: Instant,
    last_used: Mutex<Option<Instant>>,
    in_use: AtomicUsize,
    /// Why it was released, once it was.
    released: Mutex<Option<String>>,
}

impl Entry {
    pub fn facts(&self) -> ComputerFacts {
        self.facts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_deadline(&self, deadline: String) {
        self.facts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .deadline = Some(deadline);
    }

    /// How it is named to the model: `build`, `default`, or none.
    pub fn shown_name(&self) -> Option<String> {
        match (&self.name, self.default) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(_)) => Some(fleet::DEFAULT_NAME.to_string()),
            (None, None) => None,
        }
    }

    /// `build (c-…)`, or the handle alone: what the model reads.
    pub fn label(&self) -> String {
        match self.shown_name() {
            Some(n) => format!("{n} ({})", self.handle),
            None => self.handle.clone(),
        }
    }

    /// How logs name it: its name and provider id, never its handle.
    pub fn log_name(&self) -> String {
        format!(
            "{} ({})",
            self.shown_name().unwrap_or_else(|| "unnamed".into()),
            self.computer.id
        )
    }

    pub fn released_why(&self) -> Option<String> {
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lost: released, or its connection ended.
    fn lost(&self) -> Option<String> {
        if let Some(why) = self.released_why() {
            return Some(format!(
                "the computer {} was released ({why})",
                self.label()
            ));
        }
        if self.client.is_closed() {
            return Some(format!("the computer {} stopped answering", self.label()));
        }
        None
    }

    /// Mark a call on it: busy until the guard drops, then used now.
    pub fn begin_use(self: &Arc<Self>) -> InUse {
        self.in_use.fetch_add(1, Ordering::SeqCst);
        InUse(Arc::clone(self))
    }

    fn idle_for(&self) -> Option<Duration> {
        if self.in_use.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = *self.last_used.lock().unwrap_or_else(|p| p.into_inner());
        Some(last.unwrap_or(self.since).elapsed())
    }

    pub fn summary(&self, default_here: bool) -> ComputerSummary {
        let idle_seconds = self
            .last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed().as_secs());
        ComputerSummary {
            handle: self.handle.clone(),
            name: if self.name.is_some() || default_here {
                self.shown_name()
            } else {
                None
            },
            kind: self.kind.as_str().to_string(),
            default: default_here,
            age_seconds: age_seconds(&self.computer.created_at),
            idle_seconds,
            deadline: self
                .facts()
                .deadline
                .unwrap_or_else(|| self.computer.deadline.clone()),
        }
    }
}

/// A call in progress on an entry.
pub struct InUse(Arc<Entry>);

impl Drop for InUse {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.0.in_use.fetch_sub(1, Ordering::SeqCst);
    }
}

fn age_seconds(created_at: &str) -> u64 {
    let Ok(t) =
        time::OffsetDateTime::parse(created_at, &time::format_description::well_known::Rfc3339)
    else {
        return 0;
    };
    let age = time::OffsetDateTime::now_utc() - t;
    age.whole_seconds().max(0) as u64
}

/// The most one creation may take, whatever the provider does.
pub const CREATE_WAIT: Duration = Duration::from_secs(180);

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
    by_principal: HashMap<Principal, usize>,
    names: Vec<(Principal, String)>,
    /// Handles of the creations under way: the provider may list such a
    /// computer already, and it counts once, as pending.
    handles: HashSet<String>,
    total: usize,
}

/// Handles released lately, and why, so a later call says so (per
/// principal: another caller's released handle reads as unknown).
#[derive(Default)]
pub struct Released {
    recent: VecDeque<(String, Principal, String)>,
}

const RELEASED_KEPT: usize = 1024;

impl Released {
    fn add(&mut self, handle: &str, principal: &Principal, why: &str) {
        if self.recent.len() >= RELEASED_KEPT {
            self.recent.pop_front();
        }
        self.recent
            .push_back((handle.to_string(), principal.clone(), why.to_string()));
    }
    fn why(&self, handle: &str, principal: &Principal) -> Option<String> {
        self.recent
            .iter()
            .rev()
            .find(|(h, p, _)| h == handle && p == principal)
            .map(|(_, _, w)| w.clone())
    }
}

/// The labels of a computer: its own and the spec's.
fn entry_labels(ask: &Ask, handle: &str) -> Labels {
    let mut labels = ask.spec.labels.clone();
    labels.insert(label::HANDLE.into(), handle.to_string());
    labels.insert(label::PRINCIPAL.into(), ask.principal.0.clone());
    labels.insert(label::KIND.into(), ask.spec.kind.as_str().to_string());
    if let Some(n) = &ask.name {
        labels.insert(label::NAME.into(), n.clone());
    }
    if let Some(scope) = ask.default {
        labels.insert(label::DEFAULT.into(), scope.as_label().to_string());
    }
    if let Some(s) = &ask.session {
        labels.insert(label::SESSION.into(), s.clone());
    }
    labels
}

impl App {
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

    /// Admit one creation for `principal` under the bounds, or refuse in
    /// words naming the limit and the computers to release.
    async fn admit(&self, ask: &Ask) -> Result<Admitted<'_>, String> {
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
        let server_limit = self.config.fleet.max_server_computers;
        let held = self.entries().len() + pending.1;
        if held >= server_limit {
            return Err(format!(
                "this server holds {held} computers, its most (--max-server-computers {server_limit}); release one of yours with computer_release first: {}",
                list_words(&mine)
            ));
        }
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

    /// The principal's computers: those held here and those only the
    /// provider knows (kept by an earlier server, made by a replica),
    /// running, oldest first.
    pub async fn principal_computers(
        &self,
        principal: &Principal,
    ) -> Result<Vec<ComputerSummary>, String> {
        let mut out: Vec<ComputerSummary> = self
            .entries()
            .values()
            .filter(|e| &e.principal == principal && e.lost().is_none())
            .map(|e| e.summary(false))
            .collect();
        let labels = Labels::from([(label::PRINCIPAL.to_string(), principal.0.clone())]);
        let found = self
            .provider
            .list(&labels, &CancellationToken::new())
            .await
            .map_err(|e| words(&e, "listing your computers"))?;
        for r in self.live(found) {
            let Some(handle) = r.labels.get(label::HANDLE) else {
                continue;
            };
            if out.iter().any(|c| &c.handle == handle) {
                continue;
            }
            out.push(ComputerSummary {
                handle: handle.clone(),
                name: r.labels.get(label::NAME).cloned(),
                kind: r
                    .labels
                    .get(label::KIND)
                    .cloned()
                    .unwrap_or_else(|| "sandbox".into()),
                default: false,
                age_seconds: age_seconds(&r.created_at),
                idle_seconds: None,
                deadline: r.deadline.clone(),
            });
        }
        out.sort_by_key(|c| std::cmp::Reverse(c.age_seconds));
        Ok(out)
    }

    /// Make a computer for `ask`, connect to it and gather its facts.
    pub async fn make(self: &Arc<Self>, mut ask: Ask) -> Result<Arc<Entry>, String> {
        let mut admitted = self.admit(&ask).await?;
        let handle = mint_handle()?;
        admitted.making(&handle);
        ask.spec.labels = entry_labels(&ask, &handle);
        let cancel = CancellationToken::new();
        // A provider bounds its own calls; this bound holds whatever one does.
        let created = match tokio::time::timeout(
            CREATE_WAIT,
            self.provider.create(&ask.spec, &cancel),
        )
        .await
        {
            Ok(r) => r.map_err(|e| words(&e, "making a computer"))?,
            Err(_) => {
                cancel.cancel();
                return Err(format!(
                    "making a computer took over {} s and was given up; the provider ({}) may be overloaded or stuck",
                    CREATE_WAIT.as_secs(),
                    self.provider.id()
                ));
            }
        };
        let conn = match self.provider.connect(&created.computer, &cancel).await {
            Ok(c) => c,
            Err(e) => {
                let _ = self
                    .provider
                    .release(&created.computer, Release::Delete, &cancel)
                    .await;
                return Err(words(&e, "connecting to the new computer"));
            }
        };
        let network = created
            .network
            .as_ref()
            .map_or_else(|| "not read back".to_string(), ToString::to_string);
        let facts = self.facts_of(
            &created.computer,
            &conn.hello,
            network,
            created.notes.clone(),
        );
        let entry = Arc::new(Entry {
            handle,
            name: ask.name.clone(),
            default: ask.default,
            principal: ask.principal.clone(),
            kind: ask.spec.kind,
            computer: created.computer,
            client: conn.client,
            state: ComputerState::new(),
            facts: Mutex::new(facts),
            made_here: true,
            since: Instant::now(),
            last_used: Mutex::new(None),
            in_use: AtomicUsize::new(0),
            released: Mutex::new(None),
        });
        {
            // Held and no longer pending in one step for the admission
            // check, which would count it twice, or not at all, in between.
            let _check = self.admission.lock().await;
            self.entries()
                .insert(entry.handle.clone(), Arc::clone(&entry));
            drop(admitted);
        }
        tracing::info!(
            computer = entry.log_name(),
            session = ask.session.as_deref().unwrap_or("-"),
            "computer made"
        );
        Ok(entry)
    }

    fn facts_of(
        &self,
        computer: &ComputerRef,
        hello: &computerd::protocol::HelloResult,
        network: String,
        notes: Vec<String>,
    ) -> ComputerFacts {
        let caps = self.provider.capabilities();
        ComputerFacts {
            provider: self.provider.id().to_string(),
            id: computer.id.clone(),
            kind: hello.kind.to_string(),
            os: hello.os.clone(),
            arch: hello.arch.clone(),
            user: computer.user.clone().unwrap_or_default(),
            work_dir: computer.home.clone().unwrap_or_default(),
            network,
            deadline: Some(computer.deadline.clone()),
            isolation: caps.isolation.clone(),
            notes,
        }
    }

    /// Attach to a computer the provider listed (not in this server's
    /// memory): connect, read its network back, and hold it.
    async fn attach(self: &Arc<Self>, r: ComputerRef) -> Result<Arc<Entry>, String> {
        let handle = r
            .labels
            .get(label::HANDLE)
            .cloned()
            .ok_or_else(|| format!("the computer {} has no handle label", r.id))?;
        if let Some(e) = self.entries().get(&handle)
            && e.lost().is_none()
        {
            return Ok(Arc::clone(e));
        }
        let cancel = CancellationToken::new();
        let conn = self
            .provider
            .connect(&r, &cancel)
            .await
            .map_err(|e| words(&e, "connecting to the computer"))?;
        let network = match self.provider.network(&r, None, &cancel).await {
            Ok(n) => n.to_string(),
            Err(e) => format!("not read back ({})", e.message),
        };
        let facts = self.facts_of(&r, &conn.hello, network, Vec::new());
        let default = match r.labels.get(label::DEFAULT).map(String::as_str) {
            Some("session") => Some(Scope::Session),
            Some("principal") => Some(Scope::Principal),
            _ => None,
        };
        let kind = r
            .labels
            .get(label::KIND)
            .and_then(|k| {
                serde_json::from_value::<SettingKind>(serde_json::Value::String(k.clone())).ok()
            })
            .unwrap_or(SettingKind::Sandbox);
        let principal = Principal(r.labels.get(label::PRINCIPAL).cloned().unwrap_or_default());
        let made_here = r.labels.get(label::INSTANCE) == Some(&self.config.instance);
        let entry = Arc::new(Entry {
            handle: handle.clone(),
            name: r.labels.get(label::NAME).cloned(),
            default,
            principal,
            kind,
            computer: r,
            client: conn.client,
            state: ComputerState::new(),
            facts: Mutex::new(facts),
            made_here,
            since: Instant::now(),
            last_used: Mutex::new(None),
            in_use: AtomicUsize::new(0),
            released: Mutex::new(None),
        });
        let mut all = self.entries();
        if let Some(e) = all.get(&handle)
            && e.lost().is_none()
        {
            // Another call attached it meanwhile: use that one.
            entry.client.close();
            return Ok(Arc::clone(e));
        }
        all.insert(handle, Arc::clone(&entry));
        drop(all);
        tracing::info!(
            computer = entry.log_name(),
            "computer found by its labels and attached"
        );
        Ok(entry)
    }

    /// A principal's default computer that the provider still runs (kept
    /// by an earlier server, or a replica's), if any: the newest.
    async fn find_default(
        self: &Arc<Self>,
        principal: &Principal,
    ) -> Result<Option<Arc<Entry>>, String> {
        // Of this server's kind: a default of another kind's server (same
        // token, same provider state) is that server's, and its tools
        // would not fit it.
        let labels = Labels::from([
            (label::PRINCIPAL.to_string(), principal.0.clone()),
            (
                label::DEFAULT.to_string(),
                Scope::Principal.as_label().to_string(),
            ),
            (label::KIND.to_string(), self.kind().as_str().to_string()),
        ]);
        let found = self
            .provider
            .list(&labels, &CancellationToken::new())
            .await
            .map_err(|e| words(&e, "looking for your default computer"))?;
        let mut found = self.live(found);
        let Some(newest) = found.pop() else {
            return Ok(None);
        };
        match self.attach(newest).await {
            Ok(e) => Ok(Some(e)),
            Err(why) => {
                tracing::warn!("a kept default computer could not be attached: {why}");
                Ok(None)
            }
        }
    }

    /// The computer `which` names for `caller`.
    pub async fn resolve(
        self: &Arc<Self>,
        caller: &Caller,
        which: &Which,
        cancel: &CancellationToken,
    ) -> Result<ForCall, String> {
        match which {
            Which::Default => caller.default_slot(self).computer(self, cancel).await,
            _ => self
                .find(&caller.principal, which)
                .await
                .map(|entry| ForCall { entry, note: None }),
        }
    }

    /// A named or handled computer of `principal`: held here, or found by
    /// its labels. Another principal's computer reads exactly as one that
    /// never existed.
    pub async fn find(
        self: &Arc<Self>,
        principal: &Principal,
        which: &Which,
    ) -> Result<Arc<Entry>, String> {
        let held = self
            .entries()
            .values()
            .find(|e| {
                &e.principal == principal
                    && match which {
                        Which::Handle(h) => &e.handle == h,
                        Which::Name(n) => e.name.as_deref() == Some(n.as_str()),
                        Which::Default => false,
                    }
            })
            .cloned();
        if let Some(e) = held {
            match e.lost() {
                None => return Ok(e),
                Some(_) if e.released_why().is_some() => {}
                Some(why) => {
                    self.forget(&e, "it stopped answering");
                    return Err(format!(
                        "{why} (ended from outside, or crashed): its files and processes are gone; make another with computer_new"
                    ));
                }
            }
        }
        // Only this server's kind: another kind's computer is not one it
        // can serve.
        let mut labels = Labels::from([
            (label::PRINCIPAL.to_string(), principal.0.clone()),
            (label::KIND.to_string(), self.kind().as_str().to_string()),
        ]);
        match which {
            Which::Handle(h) => labels.insert(label::HANDLE.into(), h.clone()),
            Which::Name(n) => labels.insert(label::NAME.into(), n.clone()),
            Which::Default => None,
        };
        let found = self
            .provider
            .list(&labels, &CancellationToken::new())
            .await
            .map_err(|e| words(&e, "looking for the computer"))?;
        if let Some(r) = self.live(found).pop() {
            return self.attach(r).await;
        }
        if let Which::Handle(h) = which
            && let Some(why) = self
                .released
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .why(h, principal)
        {
            return Err(format!(
                "the computer {h} was released ({why}); its handle no longer works. Make another with computer_new, or leave `computer` out for your default computer"
            ));
        }
        let mine = self
            .principal_computers(principal)
            .await
            .unwrap_or_default();
        Err(format!(
            "no computer {:?} of yours: it was released, never made, or is not yours. Your computers: {}. Make one with computer_new, or leave `computer` out for your default computer",
            which.as_str(),
            list_words(&mine)
        ))
    }
}

/// A creation admitted under the bounds; dropping it frees its place.
struct Admitted<'a> {
    app: &'a App,
    principal: Principal,
    name: Option<String>,
    handle: Option<String>,
}

impl Admitted<'_> {
    /// The creation's computer will carry `handle`.
    fn making(&mut self, handle: &str) {
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

fn list_words(mine: &[ComputerSummary]) -> String {
    if mine.is_empty() {
        return "none".into();
    }
    mine.iter()
        .map(|c| c.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The fleet tools' server side, for one caller.
pub struct CallerFleet {
    pub app: Arc<App>,
    pub caller: Caller,
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
        self.app
            .provider
            .check(&spec)
            .map_err(|e| words(&e, "checking the new computer"))?;
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
        Ok(entry.summary(false))
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

    async fn release_one(&self, which: Which) -> Result<ComputerSummary, String> {
        let entry = match &which {
            Which::Default => {
                let slot = self.caller.default_slot(&self.app);
                slot.current()
                    .await
                    .ok_or_else(|| "you have no default computer now (it is made on your first tool call without `computer`)".to_string())?
            }
            _ => self.app.find(&self.caller.principal, &which).await?,
        };
        let summary = entry.summary(which == Which::Default);
        self.app.end_entry(&entry, "computer_release").await;
        Ok(summary)
    }
}

impl fleet::Fleet for CallerFleet {
    fn create(&self, ask: NewComputer) -> BoxFuture<'_, Result<ComputerSummary, String>> {
        Box::pin(self.create_named(ask))
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<ComputerSummary>, String>> {
        Box::pin(self.list_mine())
    }
    fn release(&self, which: Which) -> BoxFuture<'_, Result<ComputerSummary, String>> {
        Box::pin(self.release_one(which))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_hashes_never_the_token() {
        let token = "a-secret-token-of-mine";
        let p = Principal::of_token(token);
        assert!(!p.0.contains(token));
        assert_eq!(p.0.len(), 33);
        assert_eq!(p, Principal::of_token(token));
        assert_ne!(p, Principal::of_token("another-secret-token"));
        // A stdio instance named like a token is still another principal.
        assert_ne!(p.0[1..], Principal::of_stdio(token).0[1..]);
    }

    #[test]
    fn handles_are_128_random_bits_in_the_handle_form() {
        let a = mint_handle().unwrap();
        let b = mint_handle().unwrap();
        assert_ne!(a, b);
        assert!(fleet::is_handle(&a), "{a}");
        assert_eq!(a.len(), 2 + 32);
    }

    #[test]
    fn ages_read_from_rfc3339() {
        let t = time::OffsetDateTime::now_utc() - time::Duration::seconds(90);
        let s = t
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let a = age_seconds(&s);
        assert!((89..=92).contains(&a), "{a}");
        assert_eq!(age_seconds("not a time"), 0);
    }
}
