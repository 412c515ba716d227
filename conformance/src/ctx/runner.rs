//! A run, step by step: each selected case in turn (skipped in words when
//! the provider does not declare what it needs), then what hello said,
//! the clean-up of everything the run made, and the report.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use computer_providers::provider::Provider;
use computer_providers::types::{
    Capabilities, ComputerSpec, DaemonMode, Labels, LifetimeMode, Release, human_ms,
};
use computerd::client::ComputerExt;
use computerd::protocol::HelloParams;
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Computer, Ctx, Outcome, Slot, Tracker, bounded, end_slot, lock, run_spec, undeclared};
use crate::report::{CaseResult, DaemonInfo, Report, Status};
use crate::verdict::{core_needs, core_not_run, core_summary, kind_verdict};
use crate::{Bounds, Case, Level, Need, RUN_LABEL, RunOptions, daemon_str};

pub(crate) async fn run(
    provider: Arc<dyn Provider>,
    options: RunOptions,
    selected: Vec<Case>,
    partial: bool,
) -> Report {
    let started = Instant::now();
    let run = Run::new(provider, options);
    let mut results = Vec::new();
    let mut undeclared_all: Vec<String> = Vec::new();
    for case in own_computers_first(&selected) {
        let result = run.case(case).await;
        if let Some(n) = &result.undeclared
            && !undeclared_all.contains(n)
        {
            undeclared_all.push(n.clone());
        }
        results.push(result);
    }
    // The report keeps the table's order.
    results.sort_by_key(|r| selected.iter().position(|c| c.id == r.id));
    // What hello said on the shared computer, before it goes.
    let daemon = daemon_info(&run.shared).await;
    run.clean_up().await;
    let not_run = if partial {
        core_not_run(&selected)
    } else {
        Vec::new()
    };
    run.report(Ended {
        selected,
        not_run,
        results,
        undeclared: undeclared_all,
        daemon,
        started,
    })
}

/// What every case of a run shares.
struct Run {
    provider: Arc<dyn Provider>,
    options: RunOptions,
    caps: Capabilities,
    bounds: Bounds,
    run_id: String,
    /// The spec of the run's computers, labelled with the run.
    base: ComputerSpec,
    /// A phone's files: the host folder shared with the run's phones.
    phone_files: Option<std::path::PathBuf>,
    /// The needs a computer of the provider's kind must declare.
    required: Vec<Need>,
    cancel: CancellationToken,
    shared: Arc<OnceCell<Result<Computer, String>>>,
    shared_slot: Arc<Mutex<Slot>>,
    tracker: Arc<Tracker>,
}

/// What the cases of a run gave, for its report.
struct Ended {
    selected: Vec<Case>,
    not_run: Vec<String>,
    results: Vec<CaseResult>,
    undeclared: Vec<String>,
    daemon: Option<DaemonInfo>,
    started: Instant,
}

impl Run {
    fn new(provider: Arc<dyn Provider>, options: RunOptions) -> Run {
        let caps = provider.capabilities();
        let run_id = options.run_id.clone().unwrap_or_else(random_run_id);
        let mut base = run_spec(&caps, options.kind, options.image.clone());
        base.labels.insert(RUN_LABEL.to_string(), run_id.clone());
        let phone_files = phone_files(&*provider, &mut base, options.run_folders.as_deref());
        Run {
            phone_files,
            bounds: options.bounds.unwrap_or_default(),
            required: core_needs(caps.kind, caps.daemon),
            cancel: options.cancel.clone().unwrap_or_default(),
            tracker: Arc::new(Tracker {
                cleanup: Mutex::new(Default::default()),
                notes: Mutex::new(Vec::new()),
                case_notes: Mutex::new(Vec::new()),
                creates: Mutex::new(Vec::new()),
            }),
            shared: Arc::new(OnceCell::new()),
            shared_slot: Arc::new(Mutex::new(Slot::default())),
            provider,
            options,
            caps,
            run_id,
            base,
        }
    }

    /// One case: skipped (or failed) for a need the provider does not
    /// declare, else run within its bound.
    async fn case(&self, case: &Case) -> CaseResult {
        let t0 = Instant::now();
        let mut result = CaseResult {
            id: case.id.to_string(),
            level: case.level,
            group: case.group,
            status: Status::Pass,
            reason: None,
            undeclared: None,
            ms: 0,
        };
        if self.cancel.is_cancelled() {
            result.status = Status::Skip;
            result.reason = Some("the run was cancelled".into());
            return result;
        }
        match self.first_undeclared(case).await {
            Some((need, why)) => self.not_declared(case, need, why, &mut result),
            None => settle(&mut result, self.outcome(case).await),
        }
        result.ms = t0.elapsed().as_millis() as u64;
        result
    }

    /// The first of the case's needs the provider does not declare, with
    /// why.
    async fn first_undeclared(&self, case: &Case) -> Option<(&'static Need, String)> {
        for need in case.needs {
            if let Some(why) = undeclared(
                need,
                &self.provider,
                &self.caps,
                &self.base,
                self.options.drifted.is_some(),
                self.options.run_folders.as_deref(),
            )
            .await
            {
                return Some((need, why));
            }
        }
        None
    }

    /// A case whose `need` is not declared: a Core case fails when its
    /// kind requires the need; any other skips.
    fn not_declared(&self, case: &Case, need: &Need, why: String, result: &mut CaseResult) {
        match need {
            need if case.level == Level::Core && self.required.contains(need) => {
                result.status = Status::Fail;
                result.reason = Some(format!(
                    "a {} computer must declare {need}: {why}",
                    self.caps.kind
                ));
            }
            Need::Drifted if self.caps.daemon == DaemonMode::None => {
                // No daemon runs, so none can drift: not applicable.
                result.status = Status::Skip;
                result.reason =
                    Some("the provider runs no daemon (daemon none), so none can drift".into());
                result.undeclared = Some("a daemon".into());
            }
            Need::Drifted => {
                // Not a declaration: the run was not given what it needs.
                result.status = Status::Skip;
                result.reason = Some(why);
            }
            need => {
                result.status = Status::Skip;
                result.reason = Some(why);
                result.undeclared = Some(need.to_string());
            }
        }
    }

    /// The case run with a context of its own, bounded by the case's
    /// bound and the run's cancel; what it made ends with it.
    async fn outcome(&self, case: &Case) -> Result<(), Outcome> {
        let bounds = self.bounds;
        let ctx = self.ctx(case);
        let outcome = tokio::select! {
            r = tokio::time::timeout(bounds.case, (case.run)(&ctx)) => match r {
                Ok(r) => r,
                Err(_) => Err(Outcome::Fail(format!(
                    "the case ran past its bound, {}",
                    human_ms(bounds.case.as_millis() as u64)
                ))),
            },
            _ = self.cancel.cancelled() => Err(Outcome::Skip("the run was cancelled".into())),
        };
        ctx.cancel.cancel();
        end_slot(&ctx.slot, &bounds, &self.tracker).await;
        outcome
    }

    fn ctx(&self, case: &Case) -> Ctx {
        let options = &self.options;
        Ctx {
            provider: Arc::clone(&self.provider),
            drifted: options.drifted.clone(),
            caps: self.caps.clone(),
            run_id: self.run_id.clone(),
            case_id: case.id,
            bounds: self.bounds,
            daemon_path: options
                .daemon_path
                .clone()
                .unwrap_or_else(|| computerd::DAEMON_PATH.to_string()),
            run_folders: options.run_folders.clone(),
            fixture: options.fixture.clone(),
            phone_files: self.phone_files.clone(),
            cancel: self.cancel.child_token(),
            base: self.base.clone(),
            slot: Arc::new(Mutex::new(Slot::default())),
            shared: Arc::clone(&self.shared),
            shared_slot: Arc::clone(&self.shared_slot),
            tracker: Arc::clone(&self.tracker),
        }
    }

    /// The shared computer goes, every create the run started is awaited,
    /// a janitor provider is swept, and whatever still carries the run's
    /// label is named and deleted.
    async fn clean_up(&self) {
        let bounds = self.bounds;
        end_slot(&self.shared_slot, &bounds, &self.tracker).await;
        // Every create the run started, answered or not: a late one deletes
        // its computer as it arrives.
        let creates: Vec<(String, JoinHandle<()>)> =
            std::mem::take(&mut *lock(&self.tracker.creates));
        let until = tokio::time::Instant::now() + bounds.cleanup;
        for (what, mut task) in creates {
            if tokio::time::timeout_at(until, &mut task).await.is_err() {
                task.abort();
                lock(&self.tracker.cleanup).errors.push(format!(
                    "a create for {what} was still pending after {}: what it makes may be left",
                    human_ms(bounds.cleanup.as_millis() as u64)
                ));
            }
        }
        if self.caps.lifetime == LifetimeMode::Janitor
            && let Err(e) = bounded(
                "sweep",
                bounds.cleanup,
                self.provider.sweep(&CancellationToken::new()),
            )
            .await
        {
            lock(&self.tracker.cleanup)
                .errors
                .push(format!("sweep failed: {}", e.message));
        }
        self.delete_left().await;
    }

    /// Whatever still carries the run's label, named and deleted.
    async fn delete_left(&self) {
        let cleanup = self.bounds.cleanup;
        let labels = Labels::from([(RUN_LABEL.to_string(), self.run_id.clone())]);
        let listed = bounded(
            "list",
            cleanup,
            self.provider.list(&labels, &CancellationToken::new()),
        )
        .await;
        let left = match listed {
            Ok(left) => left,
            Err(e) => {
                lock(&self.tracker.cleanup)
                    .errors
                    .push(format!("listing the run's label failed: {}", e.message));
                return;
            }
        };
        for c in left {
            let gone = bounded(
                "release",
                cleanup,
                self.provider
                    .release(&c, Release::Delete, &CancellationToken::new()),
            )
            .await;
            let words = match gone {
                Ok(()) => format!("{} (deleted now)", c.id),
                Err(e) => format!("{} (could not be deleted: {})", c.id, e.message),
            };
            lock(&self.tracker.cleanup).left.push(words);
        }
    }

    fn report(self, ended: Ended) -> Report {
        let Run {
            provider,
            options,
            caps,
            run_id,
            tracker,
            ..
        } = self;
        let cleanup = lock(&tracker.cleanup).clone();
        let core = core_summary(&ended.results, &cleanup, &ended.not_run);
        let kind_verdict = options
            .kind
            .map(|k| kind_verdict(k, &caps, &ended.selected, &ended.results, &cleanup));
        let computer_notes = lock(&tracker.notes).clone();
        let mut notes = Vec::new();
        if options.drifted.is_none()
            && caps.daemon != DaemonMode::None
            && ended
                .selected
                .iter()
                .any(|c| c.needs.contains(&Need::Drifted))
        {
            notes.push("no drifted provider: the drift case skipped, so Core cannot pass".into());
        }
        notes.extend(lock(&tracker.case_notes).iter().cloned());
        Report {
            provider: provider.id().to_string(),
            run_id,
            kind: caps.kind.to_string(),
            daemon_mode: daemon_str(caps.daemon).to_string(),
            image: options.image,
            daemon: ended.daemon,
            only: options.only,
            core_not_run: ended.not_run,
            results: ended.results,
            core,
            undeclared: ended.undeclared,
            cleanup,
            notes,
            computer_notes,
            kind_verdict,
            elapsed_ms: ended.started.elapsed().as_millis() as u64,
        }
    }
}

/// A case's outcome into its result.
fn settle(result: &mut CaseResult, outcome: Result<(), Outcome>) {
    match outcome {
        Ok(()) => {}
        Err(Outcome::Fail(w)) => {
            result.status = Status::Fail;
            result.reason = Some(w);
        }
        Err(Outcome::Skip(w)) => {
            result.status = Status::Skip;
            result.reason = Some(w);
        }
        Err(Outcome::Undeclared { need, why }) => {
            result.status = Status::Skip;
            result.reason = Some(why);
            result.undeclared = Some(need);
        }
    }
}

/// What hello says on the shared computer (what it said at connect when
/// it does not answer now), if the run made one.
async fn daemon_info(shared: &OnceCell<Result<Computer, String>>) -> Option<DaemonInfo> {
    let Some(Ok(c)) = shared.get() else {
        return None;
    };
    let hello = tokio::time::timeout(
        Duration::from_secs(10),
        c.conn.client.call_typed(&HelloParams::default()),
    )
    .await;
    Some(match hello {
        Ok(Ok(h)) => DaemonInfo {
            version: h.version,
            os: h.os,
            arch: h.arch,
        },
        _ => DaemonInfo {
            version: c.conn.hello.version.clone(),
            os: c.conn.hello.os.clone(),
            arch: c.conn.hello.arch.clone(),
        },
    })
}

fn random_run_id() -> String {
    computer_providers::random::random_hex(4).unwrap_or_else(|_| {
        format!(
            "{:08x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        )
    })
}

/// A phone has no files of its own: its files are a host folder shared
/// with it. Where the run has folders and the provider takes a share, a
/// fresh one is shared (read-only) with the run's phones, for the APK
/// that apps.install-launch installs.
fn phone_files(
    provider: &dyn Provider,
    base: &mut ComputerSpec,
    run_folders: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    if base.kind != computerd::protocol::SettingKind::Phone {
        return None;
    }
    let dir = run_folders?.join("phone-files");
    std::fs::create_dir_all(&dir).ok()?;
    let dir = std::fs::canonicalize(&dir).ok()?;
    let mut spec = base.clone();
    spec.shares = vec![computer_providers::share::ShareArg {
        source: dir.clone(),
        read_only: true,
    }];
    provider.check(&spec).ok()?;
    *base = spec;
    Some(dir)
}

/// The order a run takes its cases: those of the provider's own promises
/// (provider, lifetime, mount), which make computers of their own, before
/// the others, which share one. A provider whose computer is a hold on a
/// device it has one of (a phone over adb) can make theirs only while the
/// shared computer does not hold it yet.
fn own_computers_first(selected: &[Case]) -> impl Iterator<Item = &Case> {
    use crate::CaseGroup;
    let own = |c: &&Case| {
        matches!(
            c.group,
            CaseGroup::Provider | CaseGroup::Lifetime | CaseGroup::Mount
        )
    };
    selected
        .iter()
        .filter(own)
        .chain(selected.iter().filter(move |c| !own(c)))
}
