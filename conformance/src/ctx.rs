//! The runner and what a case is given ([`Ctx`]): the provider, the
//! shared computer, computers of its own (deleted when it ends), bounded
//! calls, and assertion helpers that fail in words.

mod runner;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_providers::provider::{Connection, Provider};
use computer_providers::types::{
    Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, LifetimeMode,
    ProviderError, Release,
};
use computerd::client::{ClientError, ComputerExt};
use computerd::protocol::{Call, ExecParams, ExecResult, MachineKind, SettingKind};
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::report::{Cleanup, ComputerNote};
use super::{Bounds, Need, RUN_LABEL, RUN_LIFETIME_MS, UserNeed};

pub(super) use runner::run;

/// How a case ends other than passing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The provider broke a promise: what the case found, in words.
    Fail(String),
    /// The case could not run here (no drifted provider given): not a pass.
    Skip(String),
    /// The case does not apply to this provider, which declares nothing it
    /// could check (a provider that offers every network has none to
    /// refuse): out of Core's count, as an undeclared need is.
    Undeclared { need: String, why: String },
}

/// Fail a case with words.
pub fn fail<T>(words: impl Into<String>) -> Result<T, Outcome> {
    Err(Outcome::Fail(words.into()))
}

/// Fail unless `cond`.
pub fn ensure(cond: bool, words: impl FnOnce() -> String) -> Result<(), Outcome> {
    if cond { Ok(()) } else { fail(words()) }
}

/// A computer a case uses: its ref, a connection, and what create said.
#[derive(Clone, Debug)]
pub struct Computer {
    pub computer: ComputerRef,
    pub conn: Connection,
    pub created: Option<CreatedInfo>,
}

/// What create returned besides the ref.
#[derive(Clone, Debug)]
pub struct CreatedInfo {
    pub network: Option<computer_providers::types::NetworkReadBack>,
    pub notes: Vec<String>,
}

/// The computers a case (or the run, for the shared one) made, and whether
/// it has ended: a create that answers after the end deletes its computer.
#[derive(Default)]
struct Slot {
    done: bool,
    made: Vec<(Arc<dyn Provider>, ComputerRef)>,
    conns: Vec<Connection>,
}

/// What the whole run shares.
struct Tracker {
    cleanup: Mutex<Cleanup>,
    notes: Mutex<Vec<ComputerNote>>,
    /// What a case that passed could not check, in its words.
    case_notes: Mutex<Vec<String>>,
    creates: Mutex<Vec<(String, JoinHandle<()>)>>,
}

/// What a case is given.
pub struct Ctx {
    pub provider: Arc<dyn Provider>,
    pub drifted: Option<Arc<dyn Provider>>,
    pub caps: Capabilities,
    pub run_id: String,
    pub case_id: &'static str,
    pub bounds: Bounds,
    /// Where the daemon is inside a computer.
    pub daemon_path: String,
    /// Where mount cases make their folders (see [`RunOptions::run_folders`]).
    pub run_folders: Option<std::path::PathBuf>,
    /// The desktop fixture, or a phone's fixture APK (see
    /// [`RunOptions::fixture`]).
    pub fixture: Option<std::path::PathBuf>,
    /// The host folder a run's phone sees at `/workspace`, when it has one.
    pub phone_files: Option<std::path::PathBuf>,
    pub cancel: CancellationToken,
    base: ComputerSpec,
    slot: Arc<Mutex<Slot>>,
    shared: Arc<OnceCell<Result<Computer, String>>>,
    shared_slot: Arc<Mutex<Slot>>,
    tracker: Arc<Tracker>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bound `f` by `within`, naming `what` when it does not answer.
pub async fn bounded<T>(
    what: &str,
    within: Duration,
    f: impl Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    match tokio::time::timeout(within, f).await {
        Ok(r) => r,
        Err(_) => Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "{what} did not answer within {}",
                computer_providers::types::human_ms(within.as_millis() as u64)
            ),
        )),
    }
}

impl Ctx {
    /// The spec every computer of the run starts from: the run's label, a
    /// 30-minute lifetime (less if the provider's cap is less), network
    /// none, the run's image.
    pub fn spec(&self) -> ComputerSpec {
        self.base.clone()
    }

    /// Say in the report what this case could not check here (a promise
    /// with nothing to hold it to), so a pass is never a silent one.
    pub fn note(&self, words: impl Into<String>) {
        lock(&self.tracker.case_notes).push(format!("{}: {}", self.case_id, words.into()));
    }

    /// The labels every computer of the run carries.
    pub fn run_labels(&self) -> Labels {
        Labels::from([(RUN_LABEL.to_string(), self.run_id.clone())])
    }

    /// The shared computer, made on first use.
    pub async fn shared(&self) -> Result<&Computer, Outcome> {
        let made = self
            .shared
            .get_or_init(|| async {
                let spec = self.spec();
                let slot = Arc::clone(&self.shared_slot);
                self.make_in(&self.provider, spec, slot, "the shared computer")
                    .await
                    .map_err(|e| format!("the shared computer could not be made: {e}"))
            })
            .await;
        match made {
            Ok(c) => Ok(c),
            Err(e) => fail(e.clone()),
        }
    }

    /// A computer of the case's own, from the run's spec changed by
    /// `extra`: deleted when the case ends.
    pub async fn create(&self, extra: impl FnOnce(&mut ComputerSpec)) -> Result<Computer, Outcome> {
        let mut spec = self.spec();
        extra(&mut spec);
        self.make_in(&self.provider, spec, Arc::clone(&self.slot), self.case_id)
            .await
            .map_err(Outcome::Fail)
    }

    async fn make_in(
        &self,
        provider: &Arc<dyn Provider>,
        spec: ComputerSpec,
        slot: Arc<Mutex<Slot>>,
        for_what: &str,
    ) -> Result<Computer, String> {
        let created = self
            .attempt_in(provider, &spec, Arc::clone(&slot), for_what)
            .await
            .map_err(|e| format!("create refused ({:?}): {}", e.code, e.message))?;
        let conn = bounded(
            "connect",
            self.bounds.create,
            provider.connect(&created.computer, &self.cancel),
        )
        .await
        .map_err(|e| {
            format!(
                "connect to {} failed ({:?}): {}",
                created.computer.id, e.code, e.message
            )
        })?;
        lock(&slot).conns.push(conn.clone());
        Ok(Computer {
            computer: created.computer,
            conn,
            created: Some(CreatedInfo {
                network: created.network,
                notes: created.notes,
            }),
        })
    }

    /// Create's result as it is, from the run's provider or another (the
    /// drifted one): a computer it makes is deleted when the case ends,
    /// or as it arrives if that is later.
    pub async fn attempt(
        &self,
        provider: &Arc<dyn Provider>,
        spec: &ComputerSpec,
    ) -> Result<Created, ProviderError> {
        self.attempt_in(provider, spec, Arc::clone(&self.slot), self.case_id)
            .await
    }

    async fn attempt_in(
        &self,
        provider: &Arc<dyn Provider>,
        spec: &ComputerSpec,
        slot: Arc<Mutex<Slot>>,
        for_what: &str,
    ) -> Result<Created, ProviderError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let p = Arc::clone(provider);
        let spec = spec.clone();
        let cancel = self.cancel.clone();
        let tracker = Arc::clone(&self.tracker);
        let cleanup_bound = self.bounds.cleanup;
        let what = for_what.to_string();
        let task = tokio::spawn(async move {
            let r = p.create(&spec, &cancel).await;
            if let Ok(c) = &r {
                {
                    let mut notes = lock(&tracker.notes);
                    for n in &c.notes {
                        notes.push(ComputerNote {
                            computer: c.computer.id.clone(),
                            note: n.clone(),
                        });
                    }
                }
                let late = {
                    let mut s = lock(&slot);
                    if s.done {
                        true
                    } else {
                        s.made.push((Arc::clone(&p), c.computer.clone()));
                        false
                    }
                };
                if late {
                    let id = c.computer.id.clone();
                    let gone = bounded(
                        "release",
                        cleanup_bound,
                        p.release(&c.computer, Release::Delete, &CancellationToken::new()),
                    )
                    .await;
                    let words = match gone {
                        Ok(()) => format!("{id}, made for {what}, arrived after it ended: deleted"),
                        Err(e) => format!(
                            "{id}, made for {what}, arrived after it ended and could not be deleted: {}",
                            e.message
                        ),
                    };
                    lock(&tracker.cleanup).late.push(words);
                }
            }
            let _ = tx.send(r);
        });
        lock(&self.tracker.creates).push((for_what.to_string(), task));
        match tokio::time::timeout(self.bounds.create, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(ProviderError::failed("create's task ended with no answer")),
            Err(_) => Err(ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "create did not answer within {}",
                    computer_providers::types::human_ms(self.bounds.create.as_millis() as u64)
                ),
            )),
        }
    }

    /// Call a method on `c`, failing the case in words when it errs.
    pub async fn call<P: Call>(&self, c: &Computer, params: &P) -> Result<P::Result, Outcome> {
        self.try_call(c, params)
            .await
            .map_err(|e| Outcome::Fail(format!("{} failed: {e}", P::METHOD.as_str())))
    }

    /// Call a method on `c`, bounded by a minute, the error as it came.
    pub async fn try_call<P: Call>(
        &self,
        c: &Computer,
        params: &P,
    ) -> Result<P::Result, ClientError> {
        match tokio::time::timeout(Duration::from_secs(60), c.conn.client.call_typed(params)).await
        {
            Ok(r) => r,
            Err(_) => Err(ClientError::Closed(format!(
                "{} did not answer within 60 s",
                P::METHOD.as_str()
            ))),
        }
    }

    /// Run `script` with `sh -c` on `c`.
    pub async fn sh(&self, c: &Computer, script: &str) -> Result<ExecResult, Outcome> {
        self.call(
            c,
            &ExecParams {
                argv: sh_argv(script),
                timeout_ms: Some(50_000),
                ..Default::default()
            },
        )
        .await
    }

    /// Run `script` and give its stdout, failing on a nonzero exit.
    pub async fn sh_ok(&self, c: &Computer, script: &str) -> Result<String, Outcome> {
        let r = self.sh(c, script).await?;
        if r.exit_code != Some(0) {
            return fail(format!(
                "`{script}` exited {:?} (signal {:?}): {}",
                r.exit_code,
                r.signal,
                String::from_utf8_lossy(&r.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&r.stdout).into_owned())
    }

    /// A fresh directory of the case's own under the computer's HOME
    /// (`$HOME/computer-mcp-conformance-<run>/<case>`).
    pub async fn workdir(&self, c: &Computer) -> Result<String, Outcome> {
        let home = match &c.computer.home {
            Some(h) => h.clone(),
            None => self.sh_ok(c, "printf %s \"$HOME\"").await?,
        };
        let dir = format!(
            "{}/computer-mcp-conformance-{}/{}",
            home.trim_end_matches('/'),
            self.run_id,
            self.case_id.replace('.', "-")
        );
        self.call(
            c,
            &computerd::protocol::FilesMkdirParams {
                path: dir.clone(),
                parents: Some(true),
                mode: None,
            },
        )
        .await?;
        Ok(dir)
    }

    /// A word unique to this run and case, for finding its processes.
    pub fn marker(&self) -> String {
        format!(
            "cmcpconf{}{}",
            self.run_id,
            self.case_id.replace(['.', '-'], "")
        )
    }

    /// Release a computer of the case's own now (it is not released again
    /// at the case's end).
    pub async fn release(&self, c: &ComputerRef, how: Release) -> Result<(), ProviderError> {
        let r = bounded(
            "release",
            self.bounds.cleanup,
            self.provider.release(c, how, &self.cancel),
        )
        .await;
        if r.is_ok() && how == Release::Delete {
            lock(&self.slot).made.retain(|(_, m)| m.id != c.id);
        }
        r
    }

    /// The provider's list, bounded.
    pub async fn list(&self, labels: &Labels) -> Result<Vec<ComputerRef>, ProviderError> {
        bounded(
            "list",
            self.bounds.cleanup,
            self.provider.list(labels, &self.cancel),
        )
        .await
    }
}

/// End a slot: close its connections and delete its computers, naming
/// every failure in cleanup.
async fn end_slot(slot: &Mutex<Slot>, bounds: &Bounds, tracker: &Tracker) {
    let (made, conns) = {
        let mut s = lock(slot);
        s.done = true;
        (std::mem::take(&mut s.made), std::mem::take(&mut s.conns))
    };
    for c in conns {
        c.client.close();
    }
    for (p, c) in made {
        // One the case deleted itself (a takeover) is gone already.
        if let Err(e) = bounded(
            "release",
            bounds.cleanup,
            p.release(&c, Release::Delete, &CancellationToken::new()),
        )
        .await
            && e.code != ErrorCode::NotFound
        {
            lock(&tracker.cleanup)
                .errors
                .push(format!("releasing {} failed: {}", c.id, e.message));
        }
    }
}

/// Whether the provider declares `need`, in words when it does not.
async fn undeclared(
    need: &Need,
    provider: &Arc<dyn Provider>,
    caps: &Capabilities,
    base: &ComputerSpec,
    drifted: bool,
    run_folders: Option<&std::path::Path>,
) -> Option<String> {
    let missing = match need {
        Need::Group(g) => !caps.groups.contains(g),
        Need::Network(n) => !caps.networks.contains(n),
        Need::Janitor => caps.lifetime != LifetimeMode::Janitor,
        Need::User(u) => {
            let mut spec = base.clone();
            spec.user = Some(match u {
                UserNeed::Root => "0:0".into(),
                UserNeed::Uid => "4242:4242".into(),
            });
            provider.check(&spec).is_err()
        }
        Need::Mount(_) => match run_folders {
            None => true,
            Some(dir) => {
                let mut spec = base.clone();
                spec.shares = vec![computer_providers::share::ShareArg {
                    source: dir.to_path_buf(),
                    read_only: false,
                }];
                provider.check(&spec).is_err()
            }
        },
        Need::Extend => !caps.extend,
        Need::Sizes => {
            let mut spec = base.clone();
            spec.sizes.pids = Some(64);
            spec.sizes.memory_mb = Some(256);
            provider.check(&spec).is_err()
        }
        Need::Drifted => !drifted,
    };
    missing.then(|| match need {
        Need::Drifted => "no drifted provider was given (a provider whose daemon reports another version); give one to run the drift checks".to_string(),
        Need::Sizes => "the provider's check refuses sizes (pids, memoryMb)".to_string(),
        Need::User(_) => format!("the provider's check refuses a spec that asks for {need}"),
        Need::Mount(kind) if run_folders.is_none() => {
            format!("no run folder was given, so mount:{kind} cannot be checked")
        }
        Need::Mount(kind) => {
            format!("the provider's check refuses a spec that shares a folder (mount:{kind})")
        }
        _ => format!("the provider does not declare {need}"),
    })
}

/// The spec of a run's computers, before its labels: the kind asked for,
/// else what the provider makes (a desktop provider makes desktops);
/// network none where the provider gives it, else open (a vendor's
/// browser reaches the open network only).
pub fn run_spec(
    caps: &computer_providers::types::Capabilities,
    kind: Option<SettingKind>,
    image: Option<String>,
) -> ComputerSpec {
    use computer_providers::types::{NetworkKind, NetworkPolicy};
    let mut spec = ComputerSpec::sandbox(RUN_LIFETIME_MS.min(caps.max_lifetime_ms));
    spec.image = image;
    spec.kind = kind.unwrap_or(match caps.kind {
        MachineKind::Desktop => SettingKind::Desktop,
        MachineKind::Browser => SettingKind::Browser,
        _ => SettingKind::Sandbox,
    });
    if !caps.networks.contains(&NetworkKind::None) && caps.networks.contains(&NetworkKind::Open) {
        spec.network = NetworkPolicy::Open;
    }
    spec
}

/// The argv that runs `script` with `sh -c`.
pub fn sh_argv(script: impl Into<String>) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// `k=v` lines of a text, for reading `/proc/self/status` and the like.
pub fn fields(text: &str, sep: char) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(sep))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}
