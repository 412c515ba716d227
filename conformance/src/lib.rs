//! The conformance suite: one contract every provider must pass.
//!
//! The suite is data: [`cases()`] is a table of [`Case`]s, each naming its
//! id, its [`Level`] (Core, what every computer of its kind does; Full, each
//! optional capability a provider declares), its [`CaseGroup`] and what it
//! [`Need`]s. A case uses only the [`Provider`] trait, the
//! [`ComputerClient`](computerd::client::ComputerClient) of a connection and
//! the suite's own helpers ([`Ctx`]), so it runs against any provider,
//! a daemon-less one included.
//!
//! [`run`] runs a selection of the table and returns a [`Report`]
//! ([`Report::text`] for people, serde for `--json`):
//!
//! - One shared computer for the cases that allow it, computers of their
//!   own for the others; every computer carries the run's label
//!   ([`RUN_LABEL`]), a 30-minute lifetime and network none.
//! - A case is bounded (3 min), and so is every provider call: create and
//!   connect 3 min, release, sweep and list a minute. A computer whose
//!   create answers after its case ended is deleted as it arrives and
//!   named in [`Cleanup::late`]; the run waits (bounded) for every create
//!   it started, and names one still pending in [`Cleanup::errors`].
//! - At the end the shared computer goes, a janitor provider is swept, and
//!   the run lists its label: whatever is left is named and deleted, and
//!   Core fails.
//! - Skips are honest: a need the computer's kind requires and the
//!   provider lacks fails the case; any other need that is not declared
//!   skips it, names the need in `undeclared`, and takes a Core case out
//!   of Core's count (listed as optional). Any other skip of a Core case
//!   (no drifted provider given) is not a pass, so Core does not pass.
//! - A run of a subset (`only`) that leaves a Core case out is partial,
//!   never a pass; a run by setting kind (`kind`) gives a kind verdict.

mod cases;
mod ctx;
#[cfg(test)]
mod fake_tests;
mod report;
mod verdict;

use computer_providers::provider::Provider;
use computer_providers::types::{DaemonMode, NetworkKind};
use computerd::protocol::{Group, MachineKind, SettingKind};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use cases::cases;
pub use ctx::{Computer, Ctx, Outcome, run_spec};
pub use report::{CaseResult, Cleanup, ComputerNote, CoreSummary, DaemonInfo, Report, Status};
pub use verdict::{KindVerdict, core_needs, kind_cases, kind_verdict};

/// The label every computer of a run carries, with the run's id.
pub const RUN_LABEL: &str = "computer-mcp.conformance";

/// How long a run's computers may live.
pub const RUN_LIFETIME_MS: u64 = 30 * 60 * 1000;

/// Core is what every computer of its kind does; Full is each optional
/// capability a provider declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Core,
    Full,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Core => "core",
            Level::Full => "full",
        }
    }
}

/// What part of the contract a case checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseGroup {
    Health,
    Exec,
    Files,
    Tar,
    Process,
    Provider,
    Drift,
    Isolation,
    Lifetime,
    Mount,
    Limits,
    Screen,
    Input,
    Touch,
    Apps,
    Browser,
}

impl CaseGroup {
    pub const ALL: &'static [CaseGroup] = &[
        CaseGroup::Health,
        CaseGroup::Exec,
        CaseGroup::Files,
        CaseGroup::Tar,
        CaseGroup::Process,
        CaseGroup::Provider,
        CaseGroup::Drift,
        CaseGroup::Isolation,
        CaseGroup::Lifetime,
        CaseGroup::Mount,
        CaseGroup::Limits,
        CaseGroup::Screen,
        CaseGroup::Input,
        CaseGroup::Touch,
        CaseGroup::Apps,
        CaseGroup::Browser,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CaseGroup::Health => "health",
            CaseGroup::Exec => "exec",
            CaseGroup::Files => "files",
            CaseGroup::Tar => "tar",
            CaseGroup::Process => "process",
            CaseGroup::Provider => "provider",
            CaseGroup::Drift => "drift",
            CaseGroup::Isolation => "isolation",
            CaseGroup::Lifetime => "lifetime",
            CaseGroup::Mount => "mount",
            CaseGroup::Limits => "limits",
            CaseGroup::Screen => "screen",
            CaseGroup::Input => "input",
            CaseGroup::Touch => "touch",
            CaseGroup::Apps => "apps",
            CaseGroup::Browser => "browser",
        }
    }
}

computerd::display_as_str!(CaseGroup);

impl std::str::FromStr for CaseGroup {
    type Err = String;
    /// A group by its name; an unknown one is refused naming them all.
    fn from_str(s: &str) -> Result<Self, String> {
        CaseGroup::ALL
            .iter()
            .copied()
            .find(|g| g.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = CaseGroup::ALL.iter().map(|g| g.as_str()).collect();
                format!(
                    "{s:?} is not a conformance group; the groups are: {}",
                    names.join(", ")
                )
            })
    }
}

/// The user a spec may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserNeed {
    Root,
    Uid,
}

/// What a case needs of the provider or its computer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Need {
    /// A protocol group, declared by the provider's capabilities.
    Group(Group),
    /// A network policy the provider offers.
    Network(NetworkKind),
    /// A provider whose lifetime is a janitor's (a sweep ends computers).
    Janitor,
    /// A spec's user: root, or another uid.
    User(UserNeed),
    /// A mount kind ("bind").
    Mount(&'static str),
    /// The provider's optional `extend`.
    Extend,
    /// Sizes (pids, memoryMb) a spec may ask for, taken by `check`.
    Sizes,
    /// A drifted provider: the same provider with a daemon that reports
    /// another version ([`RunOptions::drifted`]).
    Drifted,
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Group(g) => write!(f, "{g}"),
            Need::Network(n) => write!(f, "network:{n}"),
            Need::Janitor => f.write_str("lifetime:janitor"),
            Need::User(UserNeed::Root) => f.write_str("user:root"),
            Need::User(UserNeed::Uid) => f.write_str("user:uid"),
            Need::Mount(kind) => write!(f, "mount:{kind}"),
            Need::Extend => f.write_str("extend"),
            Need::Sizes => f.write_str("sizes"),
            Need::Drifted => f.write_str("a drifted provider"),
        }
    }
}

/// A case's body: it runs against `Ctx` and passes, fails or skips.
pub type CaseFn = for<'a> fn(&'a Ctx) -> futures::future::BoxFuture<'a, Result<(), Outcome>>;

/// One case of the suite.
#[derive(Clone, Copy)]
pub struct Case {
    /// `group.name`, such as `exec.argv`.
    pub id: &'static str,
    pub level: Level,
    pub group: CaseGroup,
    pub needs: &'static [Need],
    pub run: CaseFn,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("id", &self.id)
            .field("level", &self.level)
            .field("group", &self.group)
            .field("needs", &self.needs)
            .finish_non_exhaustive()
    }
}

/// How long a case, and each kind of provider call, may take.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub case: Duration,
    /// create and connect.
    pub create: Duration,
    /// release, sweep and list, and the run's final wait for creates.
    pub cleanup: Duration,
    /// How long past its deadline a computer may still run (init's TERM,
    /// KILL 2 s later, and a noisy host).
    pub deadline_grace: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            case: Duration::from_secs(180),
            create: Duration::from_secs(180),
            cleanup: Duration::from_secs(60),
            deadline_grace: Duration::from_secs(20),
        }
    }
}

/// What a run is given besides the provider.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The image every computer starts from (none: the provider's own).
    pub image: Option<String>,
    /// Run only these groups' cases (a partial run unless every Core case
    /// is among them).
    pub only: Option<Vec<CaseGroup>>,
    /// Run a setting kind's cases and give its verdict (never with `only`).
    pub kind: Option<SettingKind>,
    /// The same provider with a daemon that reports another version.
    pub drifted: Option<Arc<dyn Provider>>,
    /// Where the daemon is inside a computer, for `computerd probe`
    /// (default [`computerd::DAEMON_PATH`]).
    pub daemon_path: Option<String>,
    pub bounds: Option<Bounds>,
    /// Stops the run; cleanup still happens.
    pub cancel: Option<CancellationToken>,
    /// The run's id (default: random), the value of [`RUN_LABEL`].
    pub run_id: Option<String>,
    /// A host directory, on the machine the provider's computers see
    /// (local, Docker), under which a mount case makes a fresh folder to
    /// share at `/workspace`. None: the mount cases skip in words.
    pub run_folders: Option<std::path::PathBuf>,
    /// The desktop fixture on this machine (the static
    /// `computerd-x11-fixture`), which the input cases write into the
    /// computer and read the log of; for a phone, the APK that
    /// apps.install-launch installs. None: those cases skip in words.
    pub fixture: Option<std::path::PathBuf>,
}

/// The cases a run takes: a kind's, `only`'s groups', or the whole table.
pub fn select(options: &RunOptions) -> Vec<Case> {
    let all = cases();
    match (&options.kind, &options.only) {
        (Some(kind), _) => kind_cases(*kind),
        (None, Some(only)) => all
            .into_iter()
            .filter(|c| only.contains(&c.group))
            .collect(),
        (None, None) => all,
    }
}

/// Whether `kind`, `os` and `daemon` are a pair the protocol allows.
pub fn kind_refusals(kind: MachineKind, os: &str, daemon: DaemonMode) -> Vec<String> {
    let ok = match kind {
        MachineKind::Linux => os == "linux" && daemon != DaemonMode::None,
        MachineKind::Desktop => matches!(os, "linux" | "windows" | "macos"),
        MachineKind::Android => os == "android" && daemon == DaemonMode::None,
        MachineKind::Ios => os == "ios" && daemon == DaemonMode::None,
        // A vendor's browser has no daemon; a browser in a computer of
        // ours (local, Docker) has that computer's.
        MachineKind::Browser => os == "linux",
    };
    if ok {
        Vec::new()
    } else {
        vec![format!(
            "kind {kind} with os {os} and daemon {} is not a pair the protocol allows",
            daemon_str(daemon)
        )]
    }
}

pub(crate) fn daemon_str(d: DaemonMode) -> &'static str {
    match d {
        DaemonMode::Pid1 => "pid1",
        DaemonMode::Child => "child",
        DaemonMode::None => "none",
    }
}

/// Run the suite against `provider` and report.
pub async fn run(provider: Arc<dyn Provider>, options: RunOptions) -> Report {
    let selected = select(&options);
    let partial = options.only.is_some();
    ctx::run(provider, options, selected, partial).await
}

/// Run these cases of the table alone (by id), a partial run unless they
/// are every Core case; an unknown id is refused naming it.
pub async fn run_cases(
    provider: Arc<dyn Provider>,
    ids: &[&str],
    options: RunOptions,
) -> Result<Report, String> {
    let all = cases();
    let mut selected = Vec::new();
    for id in ids {
        match all.iter().find(|c| c.id == *id) {
            Some(c) => selected.push(*c),
            None => return Err(format!("no conformance case {id:?}")),
        }
    }
    Ok(ctx::run(provider, options, selected, true).await)
}
