//! The computer table's lookups: making a computer, attaching one the
//! provider lists (kept by an earlier server, made by a replica), and
//! finding one by handle or name, or a caller's default.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use computer_providers::{ComputerRef, Labels, Release, label};
use computer_tools::fleet::{ComputerSummary, Which};
use computer_tools::{ComputerFacts, ComputerState};
use computerd::protocol::SettingKind;

use super::admission::list_words;
use super::entry::{age_seconds, mint_handle};
use super::{App, Ask, CREATE_WAIT, Caller, Entry, ForCall, Principal, Scope};
use crate::receipts::meter::{Meter, Metered};
use crate::session::words;

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
        for r in self
            .listed_as(&labels, "listing your computers", true)
            .await?
        {
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
        // Shares the provider cannot bind are copied in once it answers.
        let copied = crate::shares::take(
            &mut ask.spec,
            self.capabilities().shares,
            self.config.server_state_dir().as_deref(),
        )?;
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
        let mut notes = created.notes.clone();
        // Counted from here: the shares' copy-in is bytes pushed too.
        let meter = Arc::new(Meter::default());
        let client = Metered::wrap(conn.client, Arc::clone(&meter));
        match crate::shares::copy_in(&client, &copied).await {
            Ok(n) => notes.extend(n),
            Err(why) => {
                client.close();
                let _ = self
                    .provider
                    .release(&created.computer, Release::Delete, &cancel)
                    .await;
                return Err(format!("{why}; the computer was released"));
            }
        }
        let network = created
            .network
            .as_ref()
            .map_or_else(|| "not read back".to_string(), ToString::to_string);
        let facts = self.facts_of(&created.computer, &conn.hello, network, notes);
        let entry = Arc::new(Entry {
            handle,
            name: ask.name.clone(),
            default: ask.default,
            principal: ask.principal.clone(),
            kind: ask.spec.kind,
            computer: created.computer,
            ports: crate::ports::Ports::new(Arc::clone(&client)),
            client,
            meter,
            earlier: None,
            journaled: Mutex::new(None),
            state: ComputerState::new(),
            facts: Mutex::new(facts),
            made_here: true,
            since: Instant::now(),
            last_used: Mutex::new(None),
            in_use: AtomicUsize::new(0),
            calls: std::sync::atomic::AtomicU64::new(0),
            released: Mutex::new(None),
            paused: std::sync::atomic::AtomicBool::new(false),
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
        // On record from the start, should this server never write again.
        self.book
            .write(&[self.journal_line(&entry, &computer_tools::Receipt::default(), false)]);
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
            receipt: None,
            ports: Vec::new(),
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
        if r.paused {
            // Its daemon is stopped too: a connection would wait for an
            // answer that cannot come.
            return Err(paused_words(&ref_label(&r, &handle)));
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
        // A kept computer's counts go on from the journal's.
        let earlier = self.book.kept(&r).and_then(|k| k.last);
        let (calls, pushed, pulled) = earlier.as_ref().map_or((0, 0, 0), |l| {
            (l.tool_calls, l.bytes_pushed, l.bytes_pulled)
        });
        let meter = Arc::new(Meter::starting_at(pushed, pulled));
        let client = Metered::wrap(conn.client, Arc::clone(&meter));
        let entry = Arc::new(Entry {
            handle: handle.clone(),
            name: r.labels.get(label::NAME).cloned(),
            default,
            principal,
            kind,
            computer: r,
            ports: crate::ports::Ports::new(Arc::clone(&client)),
            client,
            meter,
            earlier,
            journaled: Mutex::new(None),
            state: ComputerState::new(),
            facts: Mutex::new(facts),
            made_here,
            since: Instant::now(),
            last_used: Mutex::new(None),
            in_use: AtomicUsize::new(0),
            calls: std::sync::atomic::AtomicU64::new(calls),
            released: Mutex::new(None),
            paused: std::sync::atomic::AtomicBool::new(false),
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
    pub(super) async fn find_default(
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
        let mut found = self
            .listed(&labels, "looking for your default computer")
            .await?;
        let Some(newest) = found.pop() else {
            return Ok(None);
        };
        if newest.paused {
            // Kept, and paused by a server before this one: the caller
            // hears so, rather than getting a new default beside it.
            let handle = newest
                .labels
                .get(label::HANDLE)
                .cloned()
                .unwrap_or_default();
            return Err(paused_words(&ref_label(&newest, &handle)));
        }
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
        let call = match which {
            Which::Default => caller.default_slot(self).computer(self, cancel).await?,
            _ => self
                .find(&caller.principal, which)
                .await
                .map(|entry| ForCall { entry, note: None })?,
        };
        if call.entry.is_paused() {
            return Err(paused_words(&call.entry.label()));
        }
        Ok(call)
    }

    /// Resume a paused computer of `principal` that this server does not
    /// hold (paused by a server before this one, or by a call whose
    /// session has ended), found by its labels, and attach it. None when
    /// no such computer is paused.
    pub async fn resume_listed(
        self: &Arc<Self>,
        principal: &Principal,
        which: &Which,
    ) -> Result<Option<Arc<Entry>>, String> {
        let mut labels = Labels::from([
            (label::PRINCIPAL.to_string(), principal.0.clone()),
            (label::KIND.to_string(), self.kind().as_str().to_string()),
        ]);
        let (key, value) = match which {
            Which::Handle(h) => (label::HANDLE, h.clone()),
            Which::Name(n) => (label::NAME, n.clone()),
            Which::Default => (label::DEFAULT, Scope::Principal.as_label().to_string()),
        };
        labels.insert(key.to_string(), value);
        let found = self
            .listed(&labels, "looking for the paused computer")
            .await?;
        let Some(mut r) = found.into_iter().rev().find(|r| r.paused) else {
            return Ok(None);
        };
        let cancel = CancellationToken::new();
        self.provider
            .resume(&r, &cancel)
            .await
            .map_err(|e| words(&e, "resuming the computer"))?;
        r.paused = false;
        self.attach(r).await.map(Some)
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
        let found = self.listed(&labels, "looking for the computer").await?;
        if let Some(r) = found.into_iter().last() {
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

/// The words for a call on a paused computer, shown as `shown`.
fn paused_words(shown: &str) -> String {
    format!("the computer {shown} is paused (computer_pause); computer_resume it first")
}

/// How a listed computer `r` (handle `handle`) is shown, as an entry's
/// label is: its name and handle, or its handle.
fn ref_label(r: &ComputerRef, handle: &str) -> String {
    match r.labels.get(label::NAME) {
        Some(n) => format!("{n} ({handle})"),
        None => handle.to_string(),
    }
}
