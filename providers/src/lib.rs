//! computer-mcp's providers: who makes, finds and ends computers.
//!
//! - [`types`]: the spec a computer is made from, its ref, what create
//!   returns (with the network read back as a [`NetworkReadBack`]), a
//!   provider's capabilities, [`ProviderError`], labels and
//!   [`check_lifetime`].
//! - [`provider`]: the [`Provider`] trait, [`Connection`], and the
//!   [`Configure`] trait a registered provider has (how it is made from its
//!   settings, and what doctor says of it when another is configured).
//! - [`registry`]: [`PROVIDERS`], the one table of id → constructor from
//!   which the id list, the lookup ([`provider_for`]), every provider's
//!   scoped flags and doctor's survey of the others come.
//! - [`settings`]: how a provider's typed settings are layered from flags,
//!   variables and its `[providers.<id>]` table ([`layer`]), and the
//!   [`HostDefaults`] the server finds for them.
//! - [`daemon_backed`]: what every provider whose computers run
//!   `computerd init` shares: the hello and its checks, waiting until up,
//!   the browser inside, the network fixed at creation.
//! - [`sizing`]: a computer's cpus, memory and pids, checked against this
//!   host, the same for every provider the host's kernel bounds.
//! - [`local`]: computers on this machine, isolated by `computerd sandbox`,
//!   bounded by a cgroup each ([`local::cgroup`]), with a uid each
//!   ([`local::uids`]).
//! - [`docker`]: hardened Docker containers with `computerd init` as PID 1,
//!   made and read back through the engine's API, each checked for drift.
//! - [`daytona`]: Daytona sandboxes over its REST API, computerd pushed
//!   in through the sandbox's toolbox and reached over its session
//!   command's input and log stream.
//! - [`e2b`]: E2B sandboxes, with computerd pushed in and started as a
//!   child of E2B's own agent ([`daemon_backed::child`]).
//! - `modal` (cargo feature `modal`): Modal sandboxes over gRPC, the
//!   daemon a child of Modal's exec through the task command router.
//! - `kubernetes` (cargo feature `kubernetes`): a hardened pod per
//!   computer, `computerd init` its container's process, reached by
//!   `pods/exec` of `computerd stdio`.
//! - [`vendor`]: what the browser vendors share: one request per call,
//!   the create label that finds what a lost create made, CDP URLs held
//!   as secrets; [`browserbase`] and [`kernel`] are its two vendors.
//! - [`android`]: what the phone providers share: adb's errors, the adb
//!   server started without this server's settings, a phone client.
//! - [`adb`]: a phone you already have; [`phone_harness`]: a cloud
//!   Android emulator rented per computer, with its ledger.
//! - [`janitor`]: [`janitor::release_older`], the run/epoch fence shared by
//!   every provider.
//! - [`share`]: host directories shown at `/workspace`, and the rules a
//!   share must pass before anything is made.
//! - [`snapshot`]: a computer's HOME kept as an archive in the provider's
//!   storage on this host, and forks filled from it (local, Docker).
//! - [`wait`]: [`wait::wait_until`], the one bounded wait for a state a
//!   vendor reads back later than it acted.
//! - [`random`]: names and tokens from the OS's random source, failing
//!   closed.
//! - [`window_manager`]: a desktop's window manager, started where the
//!   computer has one, and how a program is found in a computer.
//!
//! The conformance suite every provider must pass is the crate
//! `computer-conformance`; the fakes tests use (a scriptable provider, fake
//! browser vendors) are `computer-fakes`.
//!
//! A provider never depends on MCP; a tool never knows which provider made
//! its computer. Settings come in typed only: no provider reads the
//! environment (the server's clap reads the variables a provider declares).

pub mod adb;
pub mod android;
pub mod browserbase;
pub mod cdp;
pub mod daemon_backed;
pub mod daytona;
pub mod docker;
pub mod e2b;
pub mod janitor;
pub mod kernel;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod local;
#[cfg(feature = "modal")]
pub mod modal;
pub mod phone_harness;
pub mod provider;
pub mod random;
pub mod registry;
pub mod settings;
pub mod share;
pub mod sizing;
pub mod snapshot;
pub mod types;
pub mod vendor;
pub mod wait;
pub mod window_manager;

pub use adb::{AdbProvider, AdbSettings};
pub use browserbase::{BrowserbaseProvider, BrowserbaseSettings};
pub use docker::{DockerOptions, DockerProvider, DockerSettings};
pub use janitor::{ReleasedOlder, release_older, run_labels};
pub use kernel::{KernelProvider, KernelSettings};
pub use phone_harness::{PhoneHarnessProvider, PhoneHarnessSettings};
pub use provider::{Configure, Connection, Preflight, Provider};
pub use registry::{
    Constructor, PROVIDER_IDS, PROVIDERS, Sources, provider_for, survey_others, unknown_option,
    with_provider_flags,
};
pub use settings::{HostDefaults, Table, layer};
pub use snapshot::{SNAPSHOT_PREFIX, Snapshot, SnapshotStore, is_snapshot_handle};
pub use types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkRead, NetworkReadBack, ProviderError, Release,
    Result, ShareWay, Sizes, SizesReadBack, Used, check_labels, check_lifetime, human_ms, label,
};
