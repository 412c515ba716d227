//! The E2B provider (`--provider e2b`): a computer is an E2B sandbox (a
//! Firecracker microVM) made from a template, with computerd pushed in and
//! started as a child of envd, E2B's own agent (daemon mode `child`,
//! [`crate::daemon_backed::child`]).
//!
//! - [`control`]: E2B's REST control plane (`X-API-Key`).
//! - [`desktop`]: the desktop kind (`--kind desktop`): the desktop
//!   template, init starting its X server.
//! - [`envd`]: envd's file upload and Connect process calls.
//! - [`host`]: the child layer's [`ChildHost`] over envd.
//!
//! The rules: network none only (allow_internet_access false, public
//! traffic off, and the daemon's own network namespace; open and
//! allowlists refused in words before any request); the sandbox's timer
//! is the lifetime and `onTimeout` kill, so a timeout never pauses and
//! keeps one; a create whose answer is lost is found by its create label
//! and killed, nothing left; a release waits until E2B reads the sandbox
//! gone twice running. The key and envd's access token are [`Secret`]s:
//! never in words, logs, refs or notes.

pub mod control;
pub mod desktop;
pub mod envd;
pub mod host;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use computerd::launch::Time;
use computerd::protocol::SettingKind;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::daemon_backed::child::{self, Booting};
use crate::daemon_backed::labels::{Lost, recover_lost, set_up_failed};
use crate::daemon_backed::probe;
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
    check_labels, check_lifetime, human_ms, label, refuse_host_parts,
};
use crate::vendor::{Api, Auth, CREATE_LABEL, Failure, Secret};
use crate::wait::{Wait, wait_until};
use control::{Ask, Control, Sandbox};
use desktop::Made;
use envd::Envd;
use host::E2bHost;

pub const ID: &str = "e2b";
pub const DEFAULT_API_URL: &str = "https://api.e2b.app";
pub const DEFAULT_TEMPLATE: &str = "base";
/// E2B's lifetime on Base and Hobby; `--e2b-max-lifetime-ms` up to Pro's.
pub const DEFAULT_MAX_LIFETIME_MS: u64 = 3_600_000;
pub const PRO_MAX_LIFETIME_MS: u64 = 86_400_000;
/// The label holding the most a computer may live, from its start, in ms.
pub const MAX_LIFETIME_LABEL: &str = "computer-mcp.e2b.max-lifetime-ms";
/// How long a create's lost answer is looked for (the listing lags).
pub const RECOVER: Duration = Duration::from_secs(30);
/// How long a create waits for E2B's listing to show its sandbox.
pub const LISTED_WAIT: Duration = Duration::from_secs(15);
/// How long a release waits for E2B to read the sandbox gone.
pub const GONE_WAIT: Duration = Duration::from_secs(120);

/// What a user sets of the E2B provider: flags `--e2b-<key>`, variables
/// `COMPUTER_MCP_E2B_<KEY>`, keys of `[providers.e2b]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The E2B provider (--provider e2b)")]
#[serde(deny_unknown_fields)]
pub struct E2bSettings {
    /// E2B's API key (a secret: never printed).
    #[arg(
        id = "e2b.api_key",
        long = "e2b-api-key",
        value_name = "KEY",
        env = "COMPUTER_MCP_E2B_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<Secret>,
    /// E2B's API. [default: https://api.e2b.app]
    #[arg(
        id = "e2b.api_url",
        long = "e2b-api-url",
        value_name = "URL",
        env = "COMPUTER_MCP_E2B_API_URL"
    )]
    pub api_url: Option<String>,
    /// Where envd is reached, for a fake or a self-hosted E2B. [default:
    /// https://sandbox.<the sandbox's domain>]
    #[arg(
        id = "e2b.envd_url",
        long = "e2b-envd-url",
        value_name = "URL",
        env = "COMPUTER_MCP_E2B_ENVD_URL"
    )]
    pub envd_url: Option<String>,
    /// The template every computer is made from. [default: base]
    #[arg(
        id = "e2b.template",
        long = "e2b-template",
        value_name = "TEMPLATE",
        env = "COMPUTER_MCP_E2B_TEMPLATE"
    )]
    pub template: Option<String>,
    /// The template every desktop is made from (`--kind desktop`): one
    /// with X. [default: desktop]
    #[arg(
        id = "e2b.desktop_template",
        long = "e2b-desktop-template",
        value_name = "TEMPLATE",
        env = "COMPUTER_MCP_E2B_DESKTOP_TEMPLATE"
    )]
    pub desktop_template: Option<String>,
    /// The most a computer may live, in ms: E2B's cap on the account's
    /// plan (1 h on Hobby, up to 24 h on Pro). [default: 3600000]
    #[arg(
        id = "e2b.max_lifetime_ms",
        long = "e2b-max-lifetime-ms",
        value_name = "MS",
        env = "COMPUTER_MCP_E2B_MAX_LIFETIME_MS"
    )]
    pub max_lifetime_ms: Option<u64>,
    /// The static Linux computerd pushed into every sandbox. [default: as
    /// the Docker provider finds it]
    #[arg(
        id = "e2b.computerd",
        long = "e2b-computerd",
        value_name = "PATH",
        env = "COMPUTER_MCP_E2B_COMPUTERD"
    )]
    pub computerd: Option<PathBuf>,
}

/// How a sandbox's envd is reached.
#[derive(Clone)]
struct Reach {
    domain: Option<String>,
    token: Option<Secret>,
}

pub struct E2bProvider {
    control: Control,
    envd_url: Option<String>,
    /// The domain after `api.` in the API URL, for envd's address.
    domain: String,
    /// The template computers are made from: the desktop template when
    /// the server makes desktops.
    template: String,
    made: Made,
    max_lifetime_ms: u64,
    computerd: PathBuf,
    /// envd's access token of each sandbox seen, by id (never written out).
    reach: Mutex<HashMap<String, Reach>>,
    extending: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for E2bProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bProvider")
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl Configure for E2bProvider {
    type Settings = E2bSettings;

    fn configure(s: E2bSettings, host: &HostDefaults) -> Result<Self> {
        let url = s.api_url.as_deref().unwrap_or(DEFAULT_API_URL);
        let api = Api::for_provider(ID, "E2B", url, s.api_key, Auth::Header("X-API-Key"))?;
        let max = s.max_lifetime_ms.unwrap_or(DEFAULT_MAX_LIFETIME_MS);
        if max == 0 || max > PRO_MAX_LIFETIME_MS {
            return Err(ProviderError::invalid(
                "max_lifetime_ms",
                format!(
                    "--e2b-max-lifetime-ms is 1 to {PRO_MAX_LIFETIME_MS} ms (E2B's most, 24 h on Pro)"
                ),
            ));
        }
        if let Some(u) = &s.envd_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(ProviderError::invalid(
                "envd_url",
                "--e2b-envd-url must be an http:// or https:// URL",
            ));
        }
        let made = Made {
            screen: host.desktop(),
        };
        let (template, flag) = match made.screen {
            Some(_) => (
                s.desktop_template
                    .unwrap_or_else(|| desktop::DEFAULT_TEMPLATE.into()),
                "desktop_template",
            ),
            None => (
                s.template.unwrap_or_else(|| DEFAULT_TEMPLATE.into()),
                "template",
            ),
        };
        if template.is_empty() {
            return Err(ProviderError::invalid(
                flag,
                format!("--e2b-{} must name a template", flag.replace('_', "-")),
            ));
        }
        let computerd = match s.computerd {
            Some(p) => host.absolute("--e2b-computerd", p),
            None => crate::docker::cache::default_computerd(host)
                .ok_or_else(|| "cannot find a static computerd; give --e2b-computerd".into()),
        }
        .map_err(|e: String| ProviderError::invalid("computerd", e))?;
        let domain = url
            .split("://")
            .nth(1)
            .unwrap_or_default()
            .trim_end_matches('/')
            .trim_start_matches("api.")
            .to_string();
        Ok(E2bProvider {
            control: Control { api },
            envd_url: s.envd_url.map(|u| u.trim_end_matches('/').to_string()),
            domain,
            template,
            made,
            max_lifetime_ms: max,
            computerd,
            reach: Mutex::new(HashMap::new()),
            extending: tokio::sync::Mutex::new(()),
        })
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

impl E2bProvider {
    fn host(&self, id: &str, reach: &Reach) -> Result<E2bHost> {
        let base = match (&self.envd_url, &reach.domain) {
            (Some(u), _) => u.clone(),
            (None, Some(d)) => format!("https://sandbox.{d}"),
            (None, None) => format!("https://sandbox.{}", self.domain),
        };
        let https = base.starts_with("https://");
        Ok(E2bHost {
            envd: Envd {
                http: crate::vendor::http_client("E2B", https)?,
                base,
                sandbox: id.to_string(),
                token: reach.token.clone(),
            },
        })
    }

    async fn reach_of(&self, id: &str, cancel: &CancellationToken) -> Result<Reach> {
        if let Some(r) = self.lock().get(id).cloned() {
            return Ok(r);
        }
        let token = self.control.token(id, cancel).await?;
        let r = Reach {
            domain: None,
            token,
        };
        self.lock().insert(id.to_string(), r.clone());
        Ok(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Reach>> {
        self.reach.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sandbox, refused unless this provider made it.
    async fn ours(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Sandbox>> {
        crate::vendor::check_id(id)?;
        let s = self.control.info(id, cancel).await?;
        match s {
            Some(s) if s.metadata.get(label::COMPUTER).map(String::as_str) != Some("1") => Err(
                ProviderError::not_found(format!("E2B sandbox {id} was not made by computer-mcp")),
            ),
            s => Ok(s),
        }
    }

    fn to_ref(&self, s: &Sandbox) -> ComputerRef {
        let labels: Labels = s
            .metadata
            .iter()
            .filter(|(k, _)| k.as_str() != CREATE_LABEL && k.as_str() != MAX_LIFETIME_LABEL)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ComputerRef {
            provider: ID.into(),
            id: s.id.clone(),
            labels,
            created_at: s.started_at.clone(),
            deadline: s.end_at.clone(),
            running: s.state == "running",
            home: Some(child::HOME.into()),
            user: Some(child::DAEMON_USER.to_string()),
            sizes: None,
            image: Some(s.template.clone()),
            network: None,
        }
    }

    /// What E2B reads back of a sandbox's network: none only when both
    /// internet access and public traffic read off.
    fn network_of(s: &Sandbox) -> Result<NetworkReadBack> {
        match (s.allow_internet_access, s.allow_public_traffic) {
            (Some(false), Some(false)) => Ok(NetworkReadBack {
                kind: NetworkKind::None,
                detail: "E2B: internet access off, public traffic off; the daemon and its programs in a network namespace of their own (only lo)".into(),
            }),
            (i, p) => Err(ProviderError::refused(format!(
                "E2B sandbox {} reads back internet access {} and public traffic {}, not both off",
                s.id,
                i.map_or("unset".into(), |b| b.to_string()),
                p.map_or("unset".into(), |b| b.to_string())
            ))),
        }
    }

    /// Kill the sandbox and wait until E2B reads it gone twice running.
    async fn kill_and_wait(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        // Never the caller's cancel for the kill itself: a release whose
        // caller gave up still kills.
        self.control.kill(id, &CancellationToken::new()).await?;
        let gone_once = std::sync::atomic::AtomicBool::new(false);
        let wait = Wait::new(format!("E2B sandbox {id} to be gone"), GONE_WAIT);
        wait_until(
            &wait,
            cancel,
            || async {
                let gone = self.control.info(id, cancel).await?.is_none();
                let twice = gone && gone_once.swap(true, std::sync::atomic::Ordering::SeqCst);
                if !gone {
                    gone_once.store(false, std::sync::atomic::Ordering::SeqCst);
                }
                Ok((gone, twice))
            },
            |(_, twice)| *twice,
            |(gone, _)| {
                if *gone {
                    "gone once".into()
                } else {
                    "still there".into()
                }
            },
        )
        .await?;
        self.lock().remove(id);
        Ok(())
    }

    /// A create whose answer never came: find what it made by its create
    /// label (the listing lags, so it is asked again) and kill each.
    async fn recover(&self, mark: &str, lost: ProviderError) -> ProviderError {
        let labels: Labels = [(CREATE_LABEL.to_string(), mark.to_string())].into();
        let lost = Lost {
            error: lost,
            within: RECOVER,
            found_by: "its create label",
            ended: "killed",
        };
        recover_lost(
            lost,
            || async {
                Ok(self
                    .control
                    .list(&labels, &CancellationToken::new())
                    .await?
                    .into_iter()
                    .map(|s| s.id)
                    .collect())
            },
            |id| async move {
                let cancel = CancellationToken::new();
                self.kill_and_wait(&id, &cancel).await
            },
        )
        .await
    }

    /// Everything after E2B made the sandbox: read it back, push the
    /// daemon in, start it and say hello.
    async fn set_up(
        &self,
        id: &str,
        mark: &str,
        max_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<(Sandbox, Connection, String)> {
        let s = self.control.info(id, cancel).await?.ok_or_else(|| {
            ProviderError::gone(format!("E2B sandbox {id} was gone as soon as it was made"))
        })?;
        if s.state != "running" {
            return Err(ProviderError::failed(format!(
                "E2B sandbox {id} reads {} after create, not running",
                s.state
            )));
        }
        if s.on_timeout.as_deref().is_some_and(|o| o != "kill") {
            return Err(ProviderError::failed(format!(
                "E2B sandbox {id} would {} at its timeout, not be killed",
                s.on_timeout.as_deref().unwrap_or_default()
            )));
        }
        Self::network_of(&s)?;
        // Init ends the programs at E2B's own end, up to the cap from
        // E2B's start: one deadline, read the same by create and attach.
        let (deadline, max) = Self::deadlines(&s, max_ms)?;
        let reach = self.reach_of(id, cancel).await?;
        let host = self.host(id, &reach)?;
        let daemon = tokio::fs::read(&self.computerd).await.map_err(|e| {
            ProviderError::failed(format!(
                "cannot read the static computerd {}: {e}",
                self.computerd.display()
            ))
        })?;
        self.made.check_template(&host, &self.template).await?;
        child::install(&host, Bytes::from(daemon)).await?;
        let init = self.made.init_args(child::init_args(deadline, max));
        child::start_init(&host, &init).await?;
        let conn =
            crate::daemon_backed::up::wait_until_up(&mut Booting { host: &host }, cancel).await?;
        self.check_hello(&conn)?;
        let probed = probe::none_from_inside(&conn.client, "E2B", id).await;
        if probed.is_err() {
            conn.client.close();
        }
        tracing::info!(provider = ID, computer = %id, network = %probed.as_ref().map_or("refused", String::as_str), "network none at create");
        let inside = probed?;
        // E2B's listing shows a new sandbox a moment late: a create
        // returns once a list finds it steadily.
        let mine: Labels = [(CREATE_LABEL.to_string(), mark.to_string())].into();
        crate::daemon_backed::labels::wait_listed("E2B", id, LISTED_WAIT, cancel, || async {
            Ok(self
                .control
                .list(&mine, cancel)
                .await?
                .iter()
                .any(|x| x.id == id))
        })
        .await?;
        Ok((s, conn, inside))
    }

    /// A sandbox's end and the most extend may reach, as init takes them.
    fn deadlines(s: &Sandbox, max_ms: u64) -> Result<(Time, Time)> {
        let (Some(start), Some(end)) = (parse_time(&s.started_at), parse_time(&s.end_at)) else {
            return Err(ProviderError::failed(format!(
                "E2B sandbox {} reads back no startedAt or endAt",
                s.id
            )));
        };
        let cap = start + Duration::from_millis(max_ms);
        Ok((Time::new(end.min(cap)), Time::new(cap)))
    }

    fn check_hello(&self, conn: &Connection) -> Result<()> {
        let d = self.made.drift(&conn.hello);
        if d.is_empty() {
            return Ok(());
        }
        conn.client.close();
        Err(ProviderError::refused(format!(
            "the daemon in the E2B sandbox is not this server's: {}",
            d.join("; ")
        )))
    }
}

#[async_trait::async_trait]
impl Provider for E2bProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kind: self.made.kind(),
            os: "linux".into(),
            daemon: DaemonMode::Child,
            groups: self.made.groups(),
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Delete],
            max_lifetime_ms: self.max_lifetime_ms,
            networks: vec![NetworkKind::None],
            network_read_back: true,
            isolation: "microvm: an E2B sandbox (Firecracker); the daemon's programs as 2510:2510 in a network namespace of their own, cut off from envd".into(),
            extend: true,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        crate::daemon_backed::check_kind(
            "the E2B provider",
            spec.kind,
            self.made.setting(),
            (spec.kind == SettingKind::Desktop)
                .then_some("an E2B template with X (--e2b-desktop-template)"),
        )?;
        check_lifetime(spec.lifetime_ms, &self.capabilities())?;
        if spec.max_lifetime_ms.unwrap_or(0) > self.max_lifetime_ms {
            return Err(ProviderError::invalid(
                "lifetime",
                format!(
                    "the server's lifetime bound {} is over E2B's most here, {} (--e2b-max-lifetime-ms, up to 24 h on Pro)",
                    human_ms(spec.max_lifetime_ms.unwrap_or(0)),
                    human_ms(self.max_lifetime_ms)
                ),
            ));
        }
        if spec.network != NetworkPolicy::None {
            return Err(ProviderError::unsupported(format!(
                "an E2B computer's network is none: {} waits for a proxy out of the daemon's own network",
                match spec.network {
                    NetworkPolicy::Open => "open",
                    _ => "an allowlist",
                }
            ))
            .with_field("network"));
        }
        refuse_host_parts(spec, "an E2B computer")?;
        check_labels(&spec.labels)?;
        for k in [CREATE_LABEL, MAX_LIFETIME_LABEL, label::COMPUTER] {
            if spec.labels.contains_key(k) {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the E2B provider's own"),
                ));
            }
        }
        if spec.image.as_deref().is_some_and(|i| i != self.template) {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "an E2B computer's image is the template {} (--e2b-{})",
                    self.template,
                    if self.made.screen.is_some() {
                        "desktop-template"
                    } else {
                        "template"
                    }
                ),
            ));
        }
        Ok(())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        let mark = crate::random::random_hex(16)?;
        let max_ms = spec
            .max_lifetime_ms
            .unwrap_or(spec.lifetime_ms)
            .max(spec.lifetime_ms);
        let mut metadata = spec.labels.clone();
        metadata.insert(label::COMPUTER.into(), "1".into());
        metadata.insert(CREATE_LABEL.into(), mark.clone());
        metadata.insert(MAX_LIFETIME_LABEL.into(), max_ms.to_string());
        let timeout_s = spec.lifetime_ms.div_ceil(1000);
        let ask = Ask {
            template: &self.template,
            timeout_s,
            metadata: &metadata,
        };
        let made = match self.control.create(&ask, cancel).await {
            Ok(m) => m,
            Err(Failure::Refused(e)) => return Err(e),
            Err(Failure::Unknown(e)) => return Err(self.recover(&mark, e).await),
        };
        self.lock().insert(
            made.id.clone(),
            Reach {
                domain: made.domain.clone(),
                token: made.token.clone(),
            },
        );
        match self.set_up(&made.id, &mark, max_ms, cancel).await {
            Ok((s, conn, inside)) => {
                conn.client.close();
                let mut network = Self::network_of(&s)?;
                network.detail = format!("{}; {inside}", network.detail);
                Ok(Created {
                    computer: self.to_ref(&s),
                    network: Some(network),
                    notes: vec![format!(
                        "E2B template {}; ends at {} (E2B's timer and init's deadline)",
                        self.template, s.end_at
                    )],
                })
            }
            Err(e) => {
                let killed = self
                    .kill_and_wait(&made.id, &CancellationToken::new())
                    .await;
                Err(set_up_failed(e, "killed", killed))
            }
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                let c = self
                    .ours(id, cancel)
                    .await?
                    .map(|s| self.to_ref(&s))
                    .ok_or_else(|| ProviderError::not_found(format!("no E2B sandbox {id}")))?;
                probe::at_attach(self, c, "E2B", cancel).await
            }
            AttachBy::Labels(labels) => {
                let found = self.list(labels, cancel).await?;
                let c = crate::daemon_backed::labels::the_one(
                    found,
                    "no E2B computer carries those labels",
                    |n| format!("{n} E2B computers carry those labels; give more"),
                )?;
                probe::at_attach(self, c, "E2B", cancel).await
            }
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let mut want = labels.clone();
        want.insert(label::COMPUTER.into(), "1".into());
        let found = self.control.list(&want, cancel).await?;
        Ok(found
            .iter()
            .filter(|s| {
                crate::daemon_backed::labels::carries(&want, |k| {
                    s.metadata.get(k).map(String::as_str)
                })
            })
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
            return Err(ProviderError::unsupported(
                "an E2B computer's network is fixed at none when it is made",
            )
            .with_field("network"));
        }
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        Self::network_of(&s)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        if s.state != "running" {
            return Err(ProviderError::gone(format!(
                "E2B sandbox {} is {}, and connecting would resume it",
                s.id, s.state
            )));
        }
        let reach = self.reach_of(&s.id, cancel).await?;
        let host = self.host(&s.id, &reach)?;
        let conn = child::connect(&host).await?;
        self.check_hello(&conn)?;
        Ok(conn)
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        if how == Release::Stop {
            return Err(ProviderError::unsupported(
                "an E2B computer is only deleted: E2B's pause would keep it",
            ));
        }
        if self
            .ours(&computer.id, &CancellationToken::new())
            .await?
            .is_none()
        {
            self.lock().remove(&computer.id);
            return Ok(());
        }
        self.kill_and_wait(&computer.id, cancel).await
    }

    async fn extend(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let _one = self.extending.lock().await;
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        let started = parse_time(&s.started_at).ok_or_else(|| {
            ProviderError::failed("E2B's read sandbox call answered with no startedAt")
        })?;
        let max_ms: u64 = s
            .metadata
            .get(MAX_LIFETIME_LABEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.max_lifetime_ms)
            .min(self.max_lifetime_ms);
        let cap = started + Duration::from_millis(max_ms);
        let now = OffsetDateTime::now_utc();
        let want = now + Duration::from_millis(ttl_ms);
        if want > cap {
            return Err(ProviderError::new(
                ErrorCode::Limit,
                format!(
                    "that is past the most this computer may live, {} from its start (until {})",
                    human_ms(max_ms),
                    rfc3339(cap)
                ),
            )
            .with_field("ttl"));
        }
        let end = parse_time(&s.end_at).unwrap_or(now);
        if want < end {
            return Err(ProviderError::invalid(
                "ttl",
                format!(
                    "that would end the computer before its end {}; an extend never shortens a life",
                    s.end_at
                ),
            ));
        }
        // Whole seconds, rounded down, so E2B's end never passes the cap.
        let secs = (want - now).whole_seconds().max(1) as u64;
        self.control.set_timeout(&s.id, secs, cancel).await?;
        let moved = self
            .ours(&s.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        let (end, _) = Self::deadlines(&moved, max_ms)?;
        let conn = self.connect(computer, cancel).await?;
        let at = rfc3339(end.get());
        let r = computerd::client::ComputerExt::call_typed(
            &conn.client,
            &computerd::protocol::DeadlineExtendParams { at },
        )
        .await;
        conn.client.close();
        r.map(|_| moved.end_at.clone()).map_err(|e| {
            ProviderError::refused(format!(
                "E2B's timer moved, but the daemon refused the new deadline (its programs end at the old one): {e}"
            ))
        })
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        crate::daemon_backed::sweep::sweep(self, cancel).await
    }

    async fn test_connection(&self, cancel: &CancellationToken) -> Option<Preflight> {
        let labels: Labels = [(label::COMPUTER.to_string(), "1".to_string())].into();
        let found = match self.control.list(&labels, cancel).await {
            Ok(l) => Ok(format!(
                "reached; {} sandbox{} of computer-mcp",
                l.len(),
                if l.len() == 1 { "" } else { "es" }
            )),
            Err(e) => Err(match e.code {
                ErrorCode::Unauthorized => (
                    format!("unauthorized: {}", e.message),
                    "give a valid key: --e2b-api-key (COMPUTER_MCP_E2B_API_KEY)".into(),
                ),
                ErrorCode::Unreachable | ErrorCode::Timeout => (
                    format!("unreachable: {}", e.message),
                    "check --e2b-api-url and this host's network".into(),
                ),
                _ => (e.message, "do what the words say".into()),
            }),
        };
        Some(Preflight { name: "E2B", found })
    }
}

#[cfg(test)]
#[path = "e2b/tests.rs"]
mod tests;
