//! The `daytona` provider (`--provider daytona`): a computer of kind
//! sandbox is a Daytona sandbox made through Daytona's v0 REST API, with
//! the static `computerd` pushed in through the sandbox's toolbox and run
//! as a child of it (daemon mode `child`, [`crate::daemon_backed::child`]).
//!
//! - [`api`]: the control plane and a sandbox's toolbox, over the shared
//!   vendor [`Api`](crate::vendor::Api), with Daytona's states read as a
//!   computer's phase.
//! - [`split`]: Daytona's split output (a marker before each line) read
//!   back into stdout and stderr, across frames cut anywhere.
//! - [`bridge`]: `computerd stdio`'s byte stream from a session command's
//!   input (POST) and its log (WebSocket).
//! - [`host`]: the toolbox as the child layer's [`ChildHost`].
//! - [`life`]: what a create sends and must read back, and the waits that
//!   see a create, a stop or a delete done.
//!
//! The rules: the key is a [`Secret`] and only ever in a header; a create
//! is sent once and never again; a create that failed or was aborted once
//! the sandbox may exist deletes the name it chose and waits until it is
//! gone; a release returns only once Daytona reads it done, by GET and by
//! the listing, twice running. Network none only: open and allowlists are
//! refused in words, with no request, until a proxy carries them out of
//! the daemon's own network.
//!
//! [`ChildHost`]: crate::daemon_backed::child::ChildHost

pub mod api;
pub mod bridge;
pub mod host;
pub mod life;
pub mod split;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use computerd::launch::Time;
use computerd::protocol::{Group, MachineKind, SettingKind};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::daemon_backed::child::{self, Booting};
use crate::daemon_backed::hello::{Expect, drift as hello_drift};
use crate::daemon_backed::{check_kind, labels as by_labels, probe};
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
    check_labels, check_lifetime, label, refuse_host_parts,
};
use crate::vendor::{Failure, Secret};
pub use api::{CreateBody, DEFAULT_API_URL, Daytona, ID, NAME, Phase, Sandbox, Toolbox};
use life::{DEFAULT_IMAGE, IMAGE_LABEL, Left, OWN_LABELS, Wanted};

/// The longest life: Daytona documents no cap on ttlMinutes; 30 days is
/// ours.
pub const MAX_LIFETIME_MS: u64 = 30 * 24 * 3600 * 1000;
/// The groups a Daytona computer's daemon answers.
const GROUPS: [Group; 3] = [Group::Exec, Group::Files, Group::Processes];

/// What a user sets of the Daytona provider: flags `--daytona-<key>`,
/// variables `COMPUTER_MCP_DAYTONA_<KEY>`, keys of `[providers.daytona]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Daytona provider (--provider daytona)")]
#[serde(deny_unknown_fields)]
pub struct DaytonaSettings {
    /// Daytona's API key (a secret: never printed).
    #[arg(
        id = "daytona.api_key",
        long = "daytona-api-key",
        value_name = "KEY",
        env = "COMPUTER_MCP_DAYTONA_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<Secret>,
    /// Daytona's API. [default: https://app.daytona.io/api]
    #[arg(
        id = "daytona.api_url",
        long = "daytona-api-url",
        value_name = "URL",
        env = "COMPUTER_MCP_DAYTONA_API_URL"
    )]
    pub api_url: Option<String>,
    /// The snapshot a computer is made of when its spec names no image,
    /// by id or name; "default" sends none, and Daytona uses its default
    /// snapshot. [default: default]
    #[arg(
        id = "daytona.snapshot",
        long = "daytona-snapshot",
        value_name = "SNAPSHOT",
        env = "COMPUTER_MCP_DAYTONA_SNAPSHOT"
    )]
    pub snapshot: Option<String>,
    /// Minutes with no call from outside after which Daytona stops a
    /// computer, whatever runs inside it; 0 never. [default: 0]
    #[arg(
        id = "daytona.auto_stop_minutes",
        long = "daytona-auto-stop-minutes",
        value_name = "MINUTES",
        env = "COMPUTER_MCP_DAYTONA_AUTO_STOP_MINUTES"
    )]
    pub auto_stop_minutes: Option<u32>,
    /// Minutes a stopped computer is kept before Daytona deletes it; 0
    /// deletes it as it stops. [default: never]
    #[arg(
        id = "daytona.auto_delete_minutes",
        long = "daytona-auto-delete-minutes",
        value_name = "MINUTES",
        env = "COMPUTER_MCP_DAYTONA_AUTO_DELETE_MINUTES"
    )]
    pub auto_delete_minutes: Option<u32>,
    /// The static Linux computerd pushed into every sandbox. [default:
    /// computerd beside this binary]
    #[arg(
        id = "daytona.computerd",
        long = "daytona-computerd",
        value_name = "PATH",
        env = "COMPUTER_MCP_DAYTONA_COMPUTERD"
    )]
    pub computerd: Option<PathBuf>,
}

/// Daytona sandboxes as computers.
pub struct DaytonaProvider {
    api: Daytona,
    snapshot: String,
    auto_stop: i64,
    auto_delete: i64,
    computerd: PathBuf,
    /// Snapshots, kept by this server through the daemon's `tar.*`.
    snapshots: Option<crate::snapshot::SnapshotStore>,
}

impl std::fmt::Debug for DaytonaProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaytonaProvider")
            .field("snapshot", &self.snapshot)
            .finish_non_exhaustive()
    }
}

impl Configure for DaytonaProvider {
    type Settings = DaytonaSettings;

    fn configure(s: DaytonaSettings, host: &HostDefaults) -> Result<Self> {
        let computerd = match s.computerd {
            Some(p) => host
                .absolute("--daytona-computerd", p)
                .map_err(|e| ProviderError::invalid("computerd", e))?,
            None => host.computerd.clone().ok_or_else(|| {
                ProviderError::invalid(
                    "computerd",
                    "cannot find computerd beside this binary; give --daytona-computerd (a static Linux build)",
                )
            })?,
        };
        let snapshot = s.snapshot.unwrap_or_else(|| DEFAULT_IMAGE.into());
        check_snapshot(&snapshot, "snapshot")?;
        Ok(Self {
            api: Daytona::new(s.api_url.as_deref(), s.api_key)?,
            snapshot,
            auto_stop: s.auto_stop_minutes.map_or(0, i64::from),
            auto_delete: s.auto_delete_minutes.map_or(-1, i64::from),
            computerd,
            snapshots: host.snapshot_store(ID),
        })
    }
}

/// A snapshot name as Daytona takes it: 1 to 256 printable characters.
fn check_snapshot(s: &str, field: &str) -> Result<()> {
    if s.is_empty() || s.len() > 256 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ProviderError::invalid(
            field,
            "a Daytona snapshot is its id or name: 1 to 256 characters, no spaces; \"default\" is Daytona's default",
        ));
    }
    Ok(())
}

fn unix_secs(t: &Time) -> i64 {
    t.get().unix_timestamp()
}

impl DaytonaProvider {
    fn image_of(&self, spec: &ComputerSpec) -> String {
        spec.image.clone().unwrap_or_else(|| self.snapshot.clone())
    }

    fn to_ref(&self, s: &Sandbox) -> ComputerRef {
        ComputerRef {
            provider: ID.into(),
            id: s.id.clone(),
            labels: s.labels.clone(),
            created_at: s.created_at.clone().unwrap_or_default(),
            deadline: s.labels.get(label::DEADLINE).cloned().unwrap_or_default(),
            // Init ends every process at the deadline; the sandbox itself
            // lives on to Daytona's TTL, rounded up to the minute.
            running: s.phase() == Phase::Running && !past(s.labels.get(label::DEADLINE)),
            paused: false,
            home: Some(child::HOME.into()),
            user: Some(format!(
                "{}:{}",
                child::DAEMON_USER.uid,
                child::DAEMON_USER.gid
            )),
            sizes: None,
            image: s
                .labels
                .get(IMAGE_LABEL)
                .cloned()
                .or_else(|| s.snapshot.clone()),
            network: None,
        }
    }

    /// This provider's sandboxes carrying each of `labels`, not going.
    async fn find(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<Sandbox>> {
        let mut ours = Labels::new();
        ours.insert(label::COMPUTER.into(), "1".into());
        let all = self.api.list(&ours, cancel).await?;
        Ok(all
            .into_iter()
            .filter(|s| life::is_ours(s) && s.phase() != Phase::Going)
            .filter(|s| by_labels::carries(labels, |k| s.labels.get(k).map(String::as_str)))
            .collect())
    }

    /// One of this provider's sandboxes by id or name.
    async fn read_ours(&self, id: &str, cancel: &CancellationToken) -> Result<Sandbox> {
        api::check_id(id)?;
        match self.api.get(id, cancel).await? {
            Some(s) if life::is_ours(&s) && s.phase() != Phase::Going => Ok(s),
            Some(s) if life::is_ours(&s) => Err(ProviderError::gone(format!(
                "the Daytona computer {id} is being deleted"
            ))),
            Some(_) => Err(life::not_ours(id)),
            None => Err(ProviderError::not_found(format!(
                "Daytona knows no sandbox {id}"
            ))),
        }
    }

    /// An attached computer, refused (and left as it is) where Daytona
    /// reads it other than this provider, as configured, makes them.
    fn undrifted(&self, s: Sandbox) -> Result<Sandbox> {
        let image = s.labels.get(IMAGE_LABEL).map(String::as_str);
        let deadline = s
            .labels
            .get(label::DEADLINE)
            .and_then(|d| {
                time::OffsetDateTime::parse(d, &time::format_description::well_known::Rfc3339).ok()
            })
            .map(|d| d.unix_timestamp());
        let Some(deadline) = deadline else {
            return Err(ProviderError::refused(format!(
                "the Daytona computer {} has no readable {} label; it is left as it is",
                s.id,
                label::DEADLINE
            )));
        };
        let want = Wanted {
            // A computer made before the image label reports its snapshot.
            snapshot: image.filter(|i| *i != DEFAULT_IMAGE),
            labels: &s.labels,
            auto_stop: self.auto_stop,
            auto_delete: self.auto_delete,
            deadline,
            network: false,
        };
        let drifted = life::drift(&s, &want);
        if drifted.is_empty() {
            return Ok(s);
        }
        Err(ProviderError::refused(format!(
            "the Daytona computer {} is not as this provider makes them: {}; it is left as it is",
            s.id,
            drifted.join("; ")
        )))
    }

    fn host(&self, s: &Sandbox, cancel: &CancellationToken) -> Result<host::SandboxHost> {
        Ok(host::SandboxHost::new(
            Arc::new(self.api.toolbox(s)?),
            cancel.clone(),
        ))
    }

    fn check_hello(&self, c: &Connection, id: &str) -> Result<()> {
        let drifted = hello_drift(
            &c.hello,
            &Expect {
                kind: MachineKind::Linux,
                groups: &GROUPS,
                exact: true,
                arch: None,
            },
        );
        if drifted.is_empty() {
            return Ok(());
        }
        Err(ProviderError::refused(format!(
            "the daemon of the Daytona computer {id} is not this server's: {drifted:?}; release it and make a new one"
        )))
    }

    /// Everything after the sandbox exists: started, drift, the daemon in
    /// and up, the listing showing it.
    async fn bring_up(
        &self,
        made: &Sandbox,
        want: &Wanted<'_>,
        deadline: Time,
        cancel: &CancellationToken,
    ) -> Result<(Sandbox, String)> {
        let s = life::started(&self.api, &made.id, cancel).await?;
        let drifted = life::drift(&s, want);
        if !drifted.is_empty() {
            return Err(ProviderError::refused(format!(
                "Daytona made the sandbox {} other than asked: {}",
                s.id,
                drifted.join("; ")
            )));
        }
        let bytes = tokio::fs::read(&self.computerd).await.map_err(|e| {
            ProviderError::invalid(
                "computerd",
                format!("cannot read computerd at {}: {e}", self.computerd.display()),
            )
        })?;
        let host = self.host(&s, cancel)?;
        child::install(&host, Bytes::from(bytes)).await?;
        child::start_init(&host, &child::init_args(deadline, deadline)).await?;
        let conn =
            crate::daemon_backed::up::wait_until_up(&mut Booting { host: &host }, cancel).await?;
        let checked = self.check_hello(&conn, &s.id);
        let probed = match checked {
            Ok(()) => probe::none_from_inside(&conn.client, "Daytona", &s.id).await,
            Err(e) => Err(e),
        };
        conn.client.close();
        tracing::info!(provider = ID, computer = %s.id, network = %probed.as_ref().map_or("refused", String::as_str), "network none at create");
        let inside = probed?;
        self.listed(&s.id, cancel).await?;
        Ok((s, inside))
    }

    /// An attached sandbox's ref, held to network none from inside when
    /// Daytona reads it blocked (one read open is network()'s to narrow).
    async fn probed(&self, s: Sandbox, cancel: &CancellationToken) -> Result<ComputerRef> {
        let c = self.to_ref(&s);
        if read_network(&s).kind != NetworkKind::None {
            return Ok(c);
        }
        probe::at_attach(self, c, "Daytona", cancel).await
    }

    /// Wait until the listing shows `id` twice running.
    async fn listed(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        crate::daemon_backed::labels::wait_listed(
            "Daytona",
            id,
            life::LISTED_WAIT,
            cancel,
            || async {
                Ok(self
                    .find(&Labels::new(), cancel)
                    .await?
                    .iter()
                    .any(|s| s.id == id))
            },
        )
        .await
    }
}

#[async_trait::async_trait]
impl Provider for DaytonaProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kind: MachineKind::Linux,
            os: "linux".into(),
            daemon: DaemonMode::Child,
            groups: GROUPS.to_vec(),
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Stop, Release::Delete],
            max_lifetime_ms: MAX_LIFETIME_MS,
            networks: vec![NetworkKind::None],
            network_read_back: true,
            isolation: "a Daytona sandbox (the snapshot's class: container or linux-vm), and computerd's own network namespace cut off from the toolbox".into(),
            extend: false,
            shares: crate::types::ShareWay::Copy,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        check_kind(
            "the Daytona provider",
            spec.kind,
            SettingKind::Sandbox,
            None,
        )?;
        check_lifetime(spec.lifetime_ms, &self.capabilities())?;
        if spec.network != NetworkPolicy::None {
            return Err(ProviderError::unsupported(
                "a Daytona computer has network none only: open and allowlists wait for a proxy out of the daemon's own network; ask for network none",
            )
            .with_field("network"));
        }
        refuse_host_parts(spec, "a Daytona computer")?;
        if let Some(own) = OWN_LABELS.iter().find(|k| spec.labels.contains_key(**k)) {
            return Err(ProviderError::invalid(
                "labels",
                format!("{own} is this provider's own label; leave it out"),
            ));
        }
        if let Some(i) = &spec.image {
            check_snapshot(i, "image")?;
        }
        let mut with = spec.labels.clone();
        for k in OWN_LABELS {
            with.insert(k.into(), "x".into());
        }
        check_labels(&with).map_err(|e| ProviderError {
            message: format!(
                "{} (with this provider's own {} labels)",
                e.message,
                OWN_LABELS.len()
            ),
            ..e
        })
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        if self.api.key().is_none() {
            return Err(ProviderError::new(
                ErrorCode::Unauthorized,
                "Daytona has no API key: give --daytona-api-key (COMPUTER_MCP_DAYTONA_API_KEY)",
            )
            .with_field("api_key"));
        }
        let name = format!("computer-{}", crate::random::random_hex(6)?);
        let deadline = Time::from_now(Duration::from_millis(spec.lifetime_ms));
        let image = self.image_of(spec);
        let mut labels = spec.labels.clone();
        labels.insert(label::COMPUTER.into(), "1".into());
        labels.insert(label::DEADLINE.into(), deadline.to_string());
        labels.insert(IMAGE_LABEL.into(), image.clone());
        let snapshot = (image != DEFAULT_IMAGE).then(|| image.clone());
        let body = CreateBody {
            name: name.clone(),
            snapshot: snapshot.clone(),
            labels: labels.clone(),
            public: false,
            network_block_all: true,
            ttl_minutes: spec.lifetime_ms.div_ceil(60_000),
            auto_stop_interval: self.auto_stop,
            auto_delete_interval: self.auto_delete,
        };
        let made = match self.api.create(&body, cancel).await {
            Ok(s) => s,
            Err(Failure::Refused(e)) => return Err(e),
            Err(Failure::Unknown(e)) => return Err(life::undo(&self.api, &name, e).await),
        };
        let want = Wanted {
            snapshot: snapshot.as_deref(),
            labels: &labels,
            auto_stop: self.auto_stop,
            auto_delete: self.auto_delete,
            deadline: unix_secs(&deadline),
            network: true,
        };
        let up = self.bring_up(&made, &want, deadline, cancel).await;
        let (s, inside) = match up {
            Ok(up) if !cancel.is_cancelled() => up,
            Ok(_) => {
                let why = crate::daemon_backed::aborted("creating the Daytona computer");
                return Err(life::undo(&self.api, &made.id, why).await);
            }
            Err(e) => return Err(life::undo(&self.api, &made.id, e).await),
        };
        tracing::info!(provider = ID, computer = %s.id, "made a Daytona computer");
        let read = read_network(&s);
        Ok(Created {
            computer: self.to_ref(&s),
            network: Some(NetworkReadBack {
                detail: format!("{}; {inside}", read.detail),
                ..read
            }),
            notes: vec![format!(
                "Daytona snapshot: {}",
                s.snapshot.as_deref().unwrap_or("unknown")
            )],
        })
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                let s = self.undrifted(self.read_ours(id, cancel).await?)?;
                self.probed(s, cancel).await
            }
            AttachBy::Labels(labels) => {
                let found = self.find(labels, cancel).await?;
                let one =
                    by_labels::the_one(found, "no Daytona computer carries those labels", |n| {
                        format!("{n} Daytona computers carry those labels; attach by id")
                    })?;
                self.probed(self.undrifted(one)?, cancel).await
            }
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        Ok(self
            .find(labels, cancel)
            .await?
            .iter()
            .map(|s| self.to_ref(s))
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        if let Some(p) = policy
            && *p != NetworkPolicy::None
        {
            return Err(ProviderError::unsupported(format!(
                "a Daytona computer's network can only be narrowed to none (open and allowlists wait for a proxy); the computer {} is unchanged",
                computer.id
            ))
            .with_field("network"));
        }
        let s = self.read_ours(&computer.id, cancel).await?;
        let now = read_network(&s);
        if policy.is_none() || now.kind == NetworkKind::None {
            return Ok(now);
        }
        self.api.block_network(&s.id, cancel).await?;
        let after = read_network(&self.read_ours(&s.id, cancel).await?);
        if after.kind == NetworkKind::None {
            Ok(after)
        } else {
            Err(ProviderError::refused(format!(
                "Daytona did not block the network of the computer {}: it reads {after}",
                s.id
            )))
        }
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let s = self.read_ours(&computer.id, cancel).await?;
        if s.state.as_deref() != Some("started") {
            return Err(ProviderError::gone(format!(
                "the Daytona computer {} is {}, not started",
                s.id,
                s.state_words()
            )));
        }
        let host = self.host(&s, cancel)?;
        let conn = child::connect(&host).await?;
        if let Err(e) = self.check_hello(&conn, &s.id) {
            conn.client.close();
            return Err(e);
        }
        Ok(conn)
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        api::check_id(&computer.id)?;
        let Some(s) = self.api.get(&computer.id, cancel).await? else {
            return Ok(());
        };
        if !life::is_ours(&s) {
            return Err(life::not_ours(&computer.id));
        }
        match how {
            Release::Delete => life::delete_and_wait(&self.api, &s.id, cancel).await,
            Release::Stop if self.auto_delete == 0 => {
                if s.phase() != Phase::Going {
                    self.api.stop(&s.id, false, cancel).await?;
                }
                life::settled(&self.api, &s.id, Left::Gone, life::GONE_WAIT, cancel).await
            }
            Release::Stop => {
                if s.phase() == Phase::Going {
                    return Err(ProviderError::gone(format!(
                        "the Daytona computer {} is being deleted; it cannot be stopped",
                        s.id
                    )));
                }
                if s.desired_state.as_deref() != Some("stopped") && s.phase() == Phase::Running {
                    self.api.stop(&s.id, false, cancel).await?;
                }
                life::settled(&self.api, &s.id, Left::Stopped, life::GONE_WAIT, cancel).await
            }
        }
    }

    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        self.snapshots.as_ref()
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        crate::daemon_backed::sweep::sweep(self, cancel).await
    }

    async fn test_connection(&self, cancel: &CancellationToken) -> Option<Preflight> {
        let found = self.find(&Labels::new(), cancel).await.map(|all| {
            format!(
                "reached; {} of this provider",
                crate::vendor::count(all.len(), "computer", "computers")
            )
        });
        Some(crate::vendor::account_preflight("daytona", ID, found))
    }
}

/// Whether an RFC 3339 deadline has passed (an unreadable one has not).
fn past(deadline: Option<&String>) -> bool {
    deadline
        .and_then(|d| {
            time::OffsetDateTime::parse(d, &time::format_description::well_known::Rfc3339).ok()
        })
        .is_some_and(|d| d <= time::OffsetDateTime::now_utc())
}

/// A sandbox's network as Daytona reads it back.
fn read_network(s: &Sandbox) -> NetworkReadBack {
    let list = |l: &Option<String>| l.as_deref().filter(|l| !l.is_empty()).map(str::to_string);
    let (cidrs, domains) = (list(&s.network_allow_list), list(&s.domain_allow_list));
    let proxy = s
        .outbound_proxy_url
        .as_deref()
        .is_some_and(|u| !u.is_empty());
    match (s.network_block_all, cidrs, domains) {
        (Some(true), None, None) if !proxy => NetworkReadBack {
            kind: NetworkKind::None,
            detail: "Daytona reads networkBlockAll with no list; the daemon has its own network namespace".into(),
        },
        (_, None, None) => NetworkReadBack {
            kind: NetworkKind::Open,
            detail: "Daytona reads no block and no list".into(),
        },
        (_, c, d) => NetworkReadBack {
            kind: NetworkKind::Allow,
            detail: format!(
                "Daytona reads allow lists: CIDRs {}, domains {}",
                c.unwrap_or_default(),
                d.unwrap_or_default()
            ),
        },
    }
}
