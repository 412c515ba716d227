//! The `phone-harness` provider: a computer of kind phone is a cloud
//! Android emulator rented from the phone harness (phone-harness.com),
//! billed by the minute until it is released or its lifetime ends. No
//! daemon runs on it: connect asks the service for the session's adb
//! link, hands it to the local adb server over its socket, unlocks the
//! phone with the session's code ([`link`]) and answers the protocol in
//! this process with the same phone client as the `adb` provider.
//!
//! The rules of a paid create:
//! - Every POST carries a random `Idempotency-Key`, and a create whose
//!   outcome is uncertain (no answer, a 5xx, the request's bound hit, a
//!   2xx with no session) is found by it (`GET /sessions/requests/<key>`),
//!   never sent twice. Only a refusal (a 4xx, `phones_busy`) says nothing
//!   was made.
//! - A phone that errors, or is not ready within `ready_ms` (and its
//!   lifetime), is ended; so is the phone of a create cancelled or
//!   dropped mid-way, by a task of its own.
//! - The [`ledger`] names this provider's phones (their labels, image and
//!   deadline, which the service does not keep): list, attach, connect,
//!   release and the janitor see only those.
//!
//! The key, the adb endpoint, the unlock code and the watch URL are never
//! in an error, a log line, a ref or a note.

pub mod api;
pub mod ledger;
pub mod link;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_adb::Adb;
use computer_phone::client::Launched;
use computer_phone::install::Folder;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::android::{self, client_over, start_adb};
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, LifetimeMode,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result, human_ms,
};
use crate::vendor::{Api, Auth, Secret, check_id, now_rfc3339, plus_secs};
use crate::wait::{Wait, wait_until};
use api::{Phase, Posted, Session, Sessions};
use ledger::{Entry, Ledger, pending};

/// The registry id.
pub const ID: &str = "phone-harness";
/// The service's API unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://api.phone-harness.com";
/// The one image a phone is.
pub const IMAGE: &str = "android";
/// A phone lives at most this long unless configured otherwise.
pub const MAX_LIFETIME_MS: u64 = 30 * 60 * 1000;
/// How long a new phone may take to be ready.
pub const READY_MS: u64 = 240_000;
/// Each request's bound.
pub const REQUEST_MS: u64 = 30_000;
/// How long a release waits for the service to forget the phone.
pub const RELEASE_WAIT: Duration = Duration::from_secs(60);
/// How many times an uncertain create asks for its session by key.
const RECOVER_TRIES: u32 = 3;

/// What a user sets of the phone harness provider: flags
/// `--phone-harness-<key>`, variables `COMPUTER_MCP_PHONE_HARNESS_<KEY>`,
/// keys of `[providers.phone-harness]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(
    next_help_heading = "The phone harness provider (--provider phone-harness, --kind phone)"
)]
#[serde(deny_unknown_fields)]
pub struct PhoneHarnessSettings {
    /// The phone harness's API key (a secret: never printed).
    #[arg(
        id = "phone-harness.api_key",
        long = "phone-harness-api-key",
        value_name = "KEY",
        env = "COMPUTER_MCP_PHONE_HARNESS_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<Secret>,
    /// The phone harness's API. [default: https://api.phone-harness.com]
    #[arg(
        id = "phone-harness.api_url",
        long = "phone-harness-api-url",
        value_name = "URL",
        env = "COMPUTER_MCP_PHONE_HARNESS_API_URL"
    )]
    pub api_url: Option<String>,
    /// The ledger of this server's phones (JSON). [default:
    /// <state dir>/phone-harness/ledger.json]
    #[arg(
        id = "phone-harness.ledger",
        long = "phone-harness-ledger",
        value_name = "PATH",
        env = "COMPUTER_MCP_PHONE_HARNESS_LEDGER"
    )]
    pub ledger: Option<PathBuf>,
    /// How long a new phone may take to be ready, in ms; it is ended past
    /// it. [default: 240000]
    #[arg(
        id = "phone-harness.ready_ms",
        long = "phone-harness-ready-ms",
        value_name = "MS",
        env = "COMPUTER_MCP_PHONE_HARNESS_READY_MS"
    )]
    pub ready_ms: Option<u64>,
    /// Each request's bound, in ms. [default: 30000]
    #[arg(
        id = "phone-harness.request_ms",
        long = "phone-harness-request-ms",
        value_name = "MS",
        env = "COMPUTER_MCP_PHONE_HARNESS_REQUEST_MS"
    )]
    pub request_ms: Option<u64>,
    /// The local adb server's port on 127.0.0.1. [default: 5037]
    #[arg(
        id = "phone-harness.adb_port",
        long = "phone-harness-adb-port",
        value_name = "PORT",
        env = "COMPUTER_MCP_PHONE_HARNESS_ADB_PORT"
    )]
    pub adb_port: Option<u16>,
    /// The adb program that starts a server when none answers. [default:
    /// adb on PATH]
    #[arg(
        id = "phone-harness.adb_program",
        long = "phone-harness-adb-program",
        value_name = "PATH",
        env = "COMPUTER_MCP_PHONE_HARNESS_ADB_PROGRAM"
    )]
    pub adb_program: Option<PathBuf>,
}

/// What the provider and the tasks that end abandoned phones share.
struct Inner {
    sessions: Sessions,
    ledger: Ledger,
    adb: Adb,
    program: PathBuf,
    ready: Duration,
    /// The server's state directory, which no share may be.
    state_dir: Option<PathBuf>,
    /// The apps each phone's sessions launched.
    launched: Mutex<HashMap<String, Launched>>,
    /// The adb links connected, by phone: let go of at release, so the
    /// adb server keeps no transport to a phone that has ended.
    links: Mutex<HashMap<String, api::AdbLink>>,
}

/// The phone harness provider.
pub struct PhoneHarnessProvider {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PhoneHarnessProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhoneHarnessProvider")
            .field("ledger", &self.inner.ledger.path())
            .finish_non_exhaustive()
    }
}

fn aborted(what: &str) -> ProviderError {
    ProviderError::new(ErrorCode::Aborted, format!("{what} was cancelled"))
}

/// A ref of the phone `id` as the ledger keeps it.
fn to_ref(id: &str, entry: &Entry, running: bool) -> ComputerRef {
    ComputerRef {
        provider: ID.into(),
        id: id.into(),
        labels: entry.labels.clone(),
        created_at: entry.created_at.clone(),
        deadline: entry.deadline.clone(),
        running,
        paused: false,
        home: None,
        user: None,
        sizes: None,
        image: Some(entry.image.clone()),
        network: None,
    }
}

/// A phone's network as this provider reads it: the service's, open.
const NETWORK: &str = "the phone harness's own network for its emulators, not read back";
/// Why another network policy is refused.
const KEEPS: &str = "a phone harness phone's network is the service's and stays open";

/// The phone's phase as a wait names it last.
fn phase_words(s: &Option<Session>) -> String {
    s.as_ref()
        .map_or("unknown to the service", |s| s.phase.words())
        .into()
}

/// Ends the phone of a create that did not finish (cancelled, dropped):
/// armed until the create answers, it spawns the cleanup when dropped.
struct Abandon {
    inner: Arc<Inner>,
    key: String,
    id: Option<String>,
    armed: bool,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (inner, key, id) = (Arc::clone(&self.inner), self.key.clone(), self.id.take());
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { inner.abandon(&key, id).await });
            }
            Err(_) => tracing::warn!(
                provider = ID,
                "a cancelled create's phone could not be ended (no runtime); the janitor ends it at its deadline"
            ),
        }
    }
}

impl Inner {
    /// The session a POST under `key` made, asked a few times; none when
    /// the service names none.
    async fn recover(&self, key: &str, cancel: &CancellationToken) -> Result<Option<Session>> {
        let mut last = Ok(None);
        for round in 0..RECOVER_TRIES {
            if round > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            last = self.sessions.by_key(key, cancel).await;
            if matches!(last, Ok(Some(_))) {
                break;
            }
        }
        last
    }

    /// Wait until the phone `id` is past provisioning, within `bound`:
    /// the session when it is ready with its adb link.
    async fn wait_ready(
        &self,
        id: &str,
        bound: Duration,
        cancel: &CancellationToken,
    ) -> Result<Session> {
        let wait = Wait::new(format!("the phone harness phone {id} to be ready"), bound);
        let s = wait_until(
            &wait,
            cancel,
            || self.sessions.get(id, cancel),
            |s| {
                s.as_ref().is_none_or(|s| {
                    !matches!(s.phase, Phase::Provisioning)
                        && (s.phase != Phase::Ready || s.adb.is_some())
                })
            },
            phase_words,
        )
        .await?;
        match s {
            None => Err(ProviderError::gone(format!(
                "the phone harness no longer knows the phone {id}; make a new one"
            ))),
            Some(s) if s.phase == Phase::Ready => Ok(s),
            Some(s) => Err(ProviderError::failed(format!(
                "the phone harness says the phone {id} is {}, not ready",
                s.phase.words()
            ))),
        }
    }

    /// DELETE the phone, mark it released, and wait (within `wait`) until
    /// the service no longer knows it, then forget it. True once it is
    /// forgotten; false when it still reads as closing at the bound (the
    /// entry stays, marked released, for a later list or sweep).
    async fn end(&self, id: &str, wait: Duration, cancel: &CancellationToken) -> Result<bool> {
        self.sessions.delete(id, cancel).await?;
        self.ledger.mark_released(id)?;
        if let Ok(mut l) = self.launched.lock() {
            l.remove(id);
        }
        let link = self.links.lock().ok().and_then(|mut l| l.remove(id));
        if let Some(link) = link {
            // A transport to an ended phone only goes offline: drop it.
            // Its failure words may hold the endpoint, so they stay unsaid.
            if self
                .adb
                .disconnect(link.host.expose(), link.port)
                .await
                .is_err()
            {
                tracing::debug!(provider = ID, computer = %id, "the adb server kept its transport to the phone");
            }
        }
        let gone = wait_until(
            &Wait::new(format!("the phone harness to end the phone {id}"), wait),
            cancel,
            || self.sessions.get(id, cancel),
            Option::is_none,
            phase_words,
        )
        .await;
        match gone {
            Ok(_) => {
                self.ledger.remove(id)?;
                tracing::info!(provider = ID, computer = %id, "the phone has ended");
                Ok(true)
            }
            Err(e) if e.code == ErrorCode::Timeout => {
                tracing::info!(provider = ID, computer = %id, "released; the service is still closing it");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// After a create that did not finish: find its phone by key where
    /// the id is unknown, and end it.
    async fn abandon(&self, key: &str, id: Option<String>) {
        let own = CancellationToken::new();
        let id = match id {
            Some(id) => Some(id),
            None => match self.recover(key, &own).await {
                Ok(Some(s)) => Some(s.id),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(
                        provider = ID,
                        "a cancelled create's phone was not found: {}; the janitor looks again",
                        e.message
                    );
                    None
                }
            },
        };
        let Some(id) = id else { return };
        if let Ok(Some(entry)) = self.ledger.get(&pending(key)) {
            let _ = self.ledger.rename(&pending(key), &id, &entry);
        }
        match self.end(&id, RELEASE_WAIT, &own).await {
            Ok(_) => {
                tracing::info!(provider = ID, computer = %id, "ended the phone of a cancelled create")
            }
            Err(e) => {
                tracing::warn!(provider = ID, computer = %id, "the phone of a cancelled create was not ended: {}", e.message)
            }
        }
    }

    /// The create after its pending entry: POST, recovery, the ledger,
    /// readiness. `guard` learns the id, and is disarmed where nothing is
    /// left to end.
    async fn make(&self, entry: &Entry, lifetime_ms: u64, guard: &mut Abandon) -> Result<Session> {
        let own = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let key = entry.key.as_str();
        let made = match self
            .sessions
            .create(key, lifetime_ms.div_ceil(1000), &own)
            .await
        {
            Posted::Made(s) => s,
            Posted::Refused(e) => {
                guard.armed = false;
                self.ledger.remove(&pending(key))?;
                return Err(e);
            }
            Posted::Unknown(why) => match self.recover(key, &own).await {
                Ok(Some(s)) => {
                    tracing::info!(provider = ID, computer = %s.id, "a create's uncertain answer was recovered by its key");
                    s
                }
                outcome => {
                    // Nothing to end now: a phone made later is found by
                    // its key (list, the janitor) while the entry stays.
                    guard.armed = false;
                    let after = match outcome {
                        Ok(_) => "the service names no phone made under its key".to_string(),
                        Err(e) => format!("asking the service for it failed too ({})", e.message),
                    };
                    return Err(ProviderError::new(
                        why.code,
                        format!(
                            "{}; no second create was sent, and {after}: if a phone was made, this server's ledger keeps its key, so list and the janitor find and end it",
                            why.message
                        ),
                    ));
                }
            },
        };
        let id = made.id.clone();
        guard.id = Some(id.clone());
        if let Err(e) = self.ledger.rename(&pending(key), &id, entry) {
            guard.armed = false;
            let ended = self.end(&id, RELEASE_WAIT, &own).await;
            return Err(ProviderError::failed(format!(
                "{}; so the phone {id} was {}",
                e.message,
                if ended.is_ok() {
                    "ended"
                } else {
                    "asked to end, which failed: release it"
                }
            )));
        }
        let bound = Duration::from_millis(lifetime_ms).min(self.ready);
        let left = bound.saturating_sub(started.elapsed());
        let ready = if made.phase == Phase::Ready && made.adb.is_some() {
            Ok(made)
        } else {
            self.wait_ready(&id, left, &own).await
        };
        if let Err(e) = &ready {
            guard.armed = false;
            let ended = self.end(&id, RELEASE_WAIT, &own).await;
            let how = match ended {
                Ok(_) => "so it was ended".to_string(),
                Err(f) => format!("and ending it failed ({}): release it", f.message),
            };
            let code = if e.code == ErrorCode::Timeout {
                ErrorCode::Timeout
            } else {
                ErrorCode::Failed
            };
            return Err(ProviderError::new(
                code,
                format!(
                    "the phone harness phone {id} was not ready within {} ({}); {how}",
                    human_ms(bound.as_millis() as u64),
                    e.message
                ),
            ));
        }
        ready
    }

    /// Every live phone of the ledger, with its session: pending entries
    /// whose key names an account session adopted, pending ones past
    /// their deadline and phones the service forgot dropped. The ledger
    /// is read before the listing, so a phone a create records meanwhile
    /// is never forgotten.
    async fn phones(&self, cancel: &CancellationToken) -> Result<Vec<(String, Entry, Session)>> {
        let ledger = self.ledger.all()?;
        let listed = self.sessions.list(cancel).await?;
        let now = computerd::now_ms();
        let mut out = Vec::new();
        for (name, entry) in ledger {
            if let Some(key) = name.strip_prefix("pending-") {
                let mut of_key = listed
                    .iter()
                    .filter(|s| s.request_key.as_deref() == Some(key));
                match (of_key.next(), of_key.next()) {
                    (Some(s), None) => {
                        self.ledger.rename(&name, &s.id, &entry)?;
                        if s.phase != Phase::Closing {
                            out.push((s.id.clone(), entry, s.clone()));
                        }
                    }
                    _ if entry.deadline_ms <= now => self.ledger.remove(&name)?,
                    _ => {}
                }
                continue;
            }
            let session = match listed.iter().find(|s| s.id == name) {
                Some(s) => Some(s.clone()),
                None => self.sessions.get(&name, cancel).await?,
            };
            match session {
                None => self.ledger.remove(&name)?,
                Some(_) if entry.released => {}
                Some(s) => out.push((name, entry, s)),
            }
        }
        Ok(out)
    }

    /// The ledger's entry of a phone not released.
    fn live_entry(&self, id: &str) -> Result<Entry> {
        check_id(id)?;
        match self.ledger.get(id)? {
            Some(e) if !e.released => Ok(e),
            Some(_) => Err(ProviderError::not_found(format!(
                "the phone harness phone {id} was released"
            ))),
            None => Err(ProviderError::not_found(format!(
                "this server's phone harness ledger names no phone {id}"
            ))),
        }
    }

    fn launched_of(&self, id: &str) -> Launched {
        let mut l = self.launched.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(l.entry(id.to_string()).or_default())
    }
}

impl Configure for PhoneHarnessProvider {
    type Settings = PhoneHarnessSettings;

    fn configure(s: PhoneHarnessSettings, host: &HostDefaults) -> Result<Self> {
        let ledger = match s.ledger {
            Some(p) => host
                .absolute("--phone-harness-ledger", p)
                .map_err(|e| ProviderError::invalid("ledger", e))?,
            None => host
                .state_dir
                .as_ref()
                .map(|d| d.join("phone-harness").join("ledger.json"))
                .ok_or_else(|| {
                    ProviderError::invalid(
                        "ledger",
                        "no state directory to keep the phone harness ledger in: set HOME or give --phone-harness-ledger",
                    )
                })?,
        };
        let ms = |v: Option<u64>, default: u64, most: u64, flag: &str, field: &str| {
            let v = v.unwrap_or(default);
            if v == 0 || v > most {
                return Err(ProviderError::invalid(
                    field,
                    format!("{flag} is 1 to {most} ms"),
                ));
            }
            Ok(Duration::from_millis(v))
        };
        let ready = ms(
            s.ready_ms,
            READY_MS,
            MAX_LIFETIME_MS,
            "--phone-harness-ready-ms",
            "ready_ms",
        )?;
        let request = ms(
            s.request_ms,
            REQUEST_MS,
            300_000,
            "--phone-harness-request-ms",
            "request_ms",
        )?;
        let api = Api::for_provider(
            ID,
            "the phone harness",
            s.api_url.as_deref().unwrap_or(DEFAULT_API_URL),
            s.api_key,
            Auth::Bearer,
        )?;
        Ok(PhoneHarnessProvider {
            inner: Arc::new(Inner {
                sessions: Sessions { api, request },
                ledger: Ledger::new(ledger),
                adb: Adb::new(s.adb_port.unwrap_or(crate::adb::DEFAULT_PORT)),
                program: s.adb_program.unwrap_or_else(|| PathBuf::from("adb")),
                ready,
                state_dir: host.state_dir.clone(),
                launched: Mutex::new(HashMap::new()),
                links: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl PhoneHarnessProvider {
    /// The spec checked, and its shares as the phone's files.
    fn checked(&self, spec: &ComputerSpec) -> Result<Vec<Folder>> {
        if let Some(i) = spec.image.as_deref()
            && i != IMAGE
        {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "a phone harness phone is an Android emulator (a cloud iPhone is not offered yet); leave image out or give {IMAGE:?}"
                ),
            ));
        }
        android::check_phone(
            spec,
            &self.capabilities(),
            "a phone harness phone",
            self.inner.state_dir.as_deref(),
        )
    }
}

#[async_trait::async_trait]
impl Provider for PhoneHarnessProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        android::capabilities(
            LifetimeMode::Enforced,
            MAX_LIFETIME_MS,
            "vm: a cloud Android emulator at the phone harness, nothing of this host",
        )
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        self.checked(spec).map(|_| ())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        let files = self.checked(spec)?;
        let key = crate::random::random_hex(16)?;
        let created_at = now_rfc3339();
        let entry = Entry {
            key: key.clone(),
            labels: spec.labels.clone(),
            image: IMAGE.into(),
            deadline: plus_secs(&created_at, spec.lifetime_ms.div_ceil(1000)),
            created_at,
            deadline_ms: computerd::now_ms()
                .saturating_add(i64::try_from(spec.lifetime_ms).unwrap_or(i64::MAX)),
            released: false,
            files,
        };
        // Before the POST: a phone it makes is found by its key whatever
        // happens to this server next.
        self.inner.ledger.put(&pending(&key), &entry)?;
        let mut guard = Abandon {
            inner: Arc::clone(&self.inner),
            key,
            id: None,
            armed: true,
        };
        let made = tokio::select! {
            r = self.inner.make(&entry, spec.lifetime_ms, &mut guard) => r,
            _ = cancel.cancelled() => Err(aborted("making a phone harness phone")),
        };
        let session = made?;
        guard.armed = false;
        tracing::info!(provider = ID, computer = %session.id, "rented a phone");
        let mut notes = vec![format!(
            "a cloud Android emulator from the phone harness, billed by the minute until it is released or its deadline ({}); nothing is installed on it",
            entry.deadline
        )];
        notes.extend(android::files_note(&entry.files));
        Ok(Created {
            computer: to_ref(&session.id, &entry, true),
            network: Some(android::open_network(NETWORK)),
            notes,
        })
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                let entry = self.inner.live_entry(id)?;
                match self.inner.sessions.get(id, cancel).await? {
                    None => {
                        self.inner.ledger.remove(id)?;
                        Err(ProviderError::gone(format!(
                            "the phone harness no longer knows the phone {id}"
                        )))
                    }
                    Some(s) => Ok(to_ref(
                        id,
                        &entry,
                        s.phase != Phase::Closing && s.phase != Phase::Error,
                    )),
                }
            }
            AttachBy::Labels(labels) => android::only_one(
                self.list(labels, cancel).await?,
                "no phone harness phone of this server carries those labels",
            ),
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        Ok(self
            .inner
            .phones(cancel)
            .await?
            .into_iter()
            .filter(|(_, e, _)| labels.iter().all(|(k, v)| e.labels.get(k) == Some(v)))
            .map(|(id, e, s)| {
                to_ref(
                    &id,
                    &e,
                    s.phase != Phase::Closing && s.phase != Phase::Error,
                )
            })
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        self.inner.live_entry(&computer.id)?;
        android::network(computer, policy, KEEPS, NETWORK)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let id = computer.id.as_str();
        let entry = self.inner.live_entry(id)?;
        let session = self.inner.wait_ready(id, self.inner.ready, cancel).await?;
        let Some(link) = session.adb else {
            return Err(ProviderError::failed(format!(
                "the phone harness gave the phone {id} no adb link"
            )));
        };
        start_adb(&self.inner.program, self.inner.adb.port()).await?;
        if let Ok(mut l) = self.inner.links.lock() {
            l.insert(id.to_string(), link.clone());
        }
        let device = tokio::select! {
            d = link::open(&self.inner.adb, id, &link) => d?,
            _ = cancel.cancelled() => return Err(aborted("connecting to the phone")),
        };
        let client = client_over(device, &self.inner.launched_of(id), id, cancel).await?;
        Ok(android::connection(client.with_folders(entry.files)))
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        android::delete_only(
            how,
            "a phone harness phone cannot be stopped and kept; release it with delete",
        )?;
        let id = computer.id.as_str();
        check_id(id)?;
        let sessions = &self.inner.sessions;
        match self.inner.ledger.get(id)? {
            // Not this server's: no DELETE, whatever the account holds.
            None => match sessions.get(id, cancel).await? {
                None => Ok(()),
                Some(_) => Err(ProviderError::not_found(format!(
                    "this server's phone harness ledger names no phone {id}, so it is left as it is"
                ))),
            },
            Some(e) if e.released => {
                if sessions.get(id, cancel).await?.is_none() {
                    self.inner.ledger.remove(id)?;
                }
                Ok(())
            }
            Some(_) => self.inner.end(id, RELEASE_WAIT, cancel).await.map(|_| ()),
        }
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        // Adopts pending phones by key, forgets what the service forgot.
        self.inner.phones(cancel).await?;
        let now = computerd::now_ms();
        let mut out = Vec::new();
        for (name, entry) in self.inner.ledger.all()? {
            if name.starts_with("pending-") || entry.deadline_ms > now {
                continue;
            }
            if entry.released {
                if self.inner.sessions.get(&name, cancel).await?.is_none() {
                    self.inner.ledger.remove(&name)?;
                }
                continue;
            }
            self.inner.end(&name, RELEASE_WAIT, cancel).await?;
            out.push(name);
        }
        Ok(out)
    }

    async fn test_connection(&self, cancel: &CancellationToken) -> Option<Preflight> {
        let found = self.inner.phones(cancel).await.map(|p| {
            format!(
                "reached; {} of this server's ledger",
                crate::vendor::count(p.len(), "phone", "phones")
            )
        });
        Some(crate::vendor::account_preflight("phone harness", ID, found))
    }

    fn preflight(&self) -> Vec<Preflight> {
        vec![android::adb_preflight(
            &self.inner.program,
            self.inner.adb.port(),
            "--phone-harness-adb-program",
        )]
    }
}
