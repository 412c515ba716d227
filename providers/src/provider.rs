//! The provider seam: make, find, connect to and end computers.

use std::sync::Arc;

use computerd::client::ComputerClient;
use computerd::protocol::HelloResult;
use tokio_util::sync::CancellationToken;

use crate::settings::{HostDefaults, Table};
use crate::snapshot::{Snapshot, SnapshotStore};
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, Labels, NetworkPolicy,
    NetworkReadBack, ProviderError, Release, Result, Used,
};

/// A live connection to a computer: its client and what hello said.
#[derive(Clone)]
pub struct Connection {
    pub client: Arc<dyn ComputerClient>,
    pub hello: HelloResult,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("hello", &self.hello)
            .finish_non_exhaustive()
    }
}

/// One kind of place computers come from. Every call is bounded in time and
/// takes a cancel signal; every expected failure is a [`ProviderError`].
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The registry id ("local", "docker", ...).
    fn id(&self) -> &'static str;

    /// What this provider offers, as it will be enforced.
    fn capabilities(&self) -> Capabilities;

    /// Refuse, in words and with no side effect, a spec this provider cannot honour.
    fn check(&self, spec: &ComputerSpec) -> Result<()>;

    /// Make a computer. A refused spec makes nothing.
    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created>;

    /// Find a computer again.
    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef>;

    /// The provider's computers carrying every one of `labels`.
    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>>;

    /// [`Provider::list`] for a count: each computer's id, labels,
    /// creation, deadline and whether it runs are as `list` gives them;
    /// what `list` reads back per computer beyond that (sizes, network,
    /// paused) may be left out, so that a creation that counts a caller's
    /// computers does not read every computer's state.
    async fn list_brief(
        &self,
        labels: &Labels,
        cancel: &CancellationToken,
    ) -> Result<Vec<ComputerRef>> {
        self.list(labels, cancel).await
    }

    /// Read a computer's network back; with `policy`, change it first
    /// (refused, with the network unchanged, where the provider cannot).
    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack>;

    /// Open a connection to the computer's daemon.
    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection>;

    /// Let a computer go.
    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()>;

    /// Move the deadline to now + ttl, never earlier than it is and never
    /// past the provider's cap from creation. Returns the new deadline.
    async fn extend(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let _ = (computer, ttl_ms, cancel);
        Err(ProviderError::unsupported(format!(
            "the {} provider cannot extend a computer's life",
            self.id()
        )))
    }

    /// Whether [`Provider::pause`] can work here (the tools are listed only
    /// then).
    fn can_pause(&self) -> bool {
        false
    }

    /// Freeze every program of the computer, its daemon among them, until
    /// [`Provider::resume`]: nothing runs and no call is answered, while
    /// its files and memory stay. The deadline keeps running.
    async fn pause(&self, computer: &ComputerRef, cancel: &CancellationToken) -> Result<()> {
        let _ = (computer, cancel);
        Err(ProviderError::unsupported(format!(
            "the {} provider cannot pause a computer",
            self.id()
        )))
    }

    /// Let a paused computer's programs run on; a running one is left as
    /// it is.
    async fn resume(&self, computer: &ComputerRef, cancel: &CancellationToken) -> Result<()> {
        let _ = (computer, cancel);
        Err(ProviderError::unsupported(format!(
            "the {} provider cannot pause or resume a computer",
            self.id()
        )))
    }

    /// Where this provider keeps snapshots, if it can take them; the
    /// snapshot methods below use it.
    fn snapshot_store(&self) -> Option<&SnapshotStore> {
        None
    }

    /// Whether [`Provider::snapshot`] can work here (`computer_snapshot`
    /// is listed only then).
    fn can_snapshot(&self) -> bool {
        self.snapshot_store().is_some()
    }

    /// Keep the computer's files (its HOME) as a snapshot carrying
    /// `labels`, deleted by [`Provider::sweep`] `ttl_ms` from now. A name
    /// its owner gave another snapshot is refused naming `name`.
    async fn snapshot(
        &self,
        computer: &ComputerRef,
        labels: &Labels,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Snapshot> {
        match self.snapshot_store() {
            Some(s) => s.take(self, computer, labels, ttl_ms, cancel).await,
            None => Err(cannot_snapshot(self.id())),
        }
    }

    /// The provider's snapshots carrying every one of `labels`.
    async fn snapshots(
        &self,
        labels: &Labels,
        cancel: &CancellationToken,
    ) -> Result<Vec<Snapshot>> {
        let _ = cancel;
        self.snapshot_store()
            .map_or(Ok(Vec::new()), |s| s.list(labels))
    }

    /// Fill a new computer's HOME from `snapshot` (before its first call).
    async fn restore(
        &self,
        snapshot: &Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<()> {
        match self.snapshot_store() {
            Some(s) => s.fork(self, snapshot, into, cancel).await,
            None => Err(cannot_snapshot(self.id())),
        }
    }

    /// Delete a snapshot.
    async fn release_snapshot(
        &self,
        snapshot: &Snapshot,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let _ = cancel;
        match self.snapshot_store() {
            Some(s) => s.release(&snapshot.id),
            None => Err(cannot_snapshot(self.id())),
        }
    }

    /// What the computer has used so far (its receipt's CPU and memory),
    /// read from what runs it; nothing known by default.
    async fn used(&self, computer: &ComputerRef, cancel: &CancellationToken) -> Result<Used> {
        let _ = (computer, cancel);
        Ok(Used::default())
    }

    /// The computer's live view (group stream): a URL a person opens to
    /// watch it. A secret: never in a ref, a list, an error's words, a log
    /// line or a report.
    async fn live_view(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<crate::vendor::Secret> {
        let _ = (computer, cancel);
        Err(ProviderError::unsupported(format!(
            "the {} provider's computers have no live view (group stream)",
            self.id()
        )))
    }

    /// Release every computer of this provider whose deadline has passed;
    /// returns the ids released.
    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let _ = cancel;
        Ok(Vec::new())
    }

    /// For `doctor`: whether the provider's account answers, asked in a
    /// way that makes and rents nothing (a vendor's list): what was found,
    /// or what is wrong (unauthorized, unreachable) and the next step.
    /// None where the provider has no account to ask.
    async fn test_connection(&self, cancel: &CancellationToken) -> Option<Preflight> {
        let _ = cancel;
        None
    }

    /// For `doctor`: what the provider's service offers beyond its
    /// account (a cluster's optional APIs), asked without making anything.
    async fn service_checks(&self, cancel: &CancellationToken) -> Vec<Preflight> {
        let _ = cancel;
        Vec::new()
    }

    /// The sizes a computer gets when its spec names none, which a server
    /// offers as the most one may ask for unless told otherwise.
    fn default_sizes(&self) -> crate::sizing::Limits {
        crate::sizing::Limits::default()
    }

    /// What this provider, as configured, needs of the host beyond what
    /// making a computer shows, for `doctor`: each its name, and what was
    /// found or what is wrong with the next step. Read from the provider's
    /// own settings (flags, variables and file alike).
    fn preflight(&self) -> Vec<Preflight> {
        Vec::new()
    }
}

/// A provider without snapshots, in words naming it.
fn cannot_snapshot(provider: &str) -> ProviderError {
    ProviderError::unsupported(format!("the {provider} provider cannot snapshot computers"))
}

/// One line of [`Provider::preflight`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preflight {
    pub name: &'static str,
    /// What was found, or what is wrong and the next step.
    pub found: std::result::Result<String, (String, String)>,
}

/// A provider the registry can make from settings.
pub trait Configure: Provider + Sized + 'static {
    /// What a user can set, every field scoped by the registry's naming
    /// rule (see [`crate::registry`]).
    type Settings: clap::Args
        + clap::FromArgMatches
        + serde::Serialize
        + serde::de::DeserializeOwned;

    /// Make the provider from its layered settings and the host's defaults.
    fn configure(settings: Self::Settings, host: &HostDefaults) -> Result<Self>;

    /// What `doctor` says of this provider on a server configured with
    /// another: whether this host could run it (its `[providers.<id>]`
    /// table, where the file has one, and the host's defaults). A
    /// configured provider says its own through [`Provider::preflight`].
    fn survey(
        table: Option<&Table>,
        host: &HostDefaults,
    ) -> impl std::future::Future<Output = Vec<Preflight>> + Send {
        let _ = (table, host);
        async { Vec::new() }
    }
}
