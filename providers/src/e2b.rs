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
pub mod snapshots;

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
use crate::daemon_backed::labels::{LostCreate, set_up_failed};
use crate::daemon_backed::probe;
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, NetworkKind,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result, check_labels, check_lifetime,
    human_ms, label, refuse_host_parts,
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
    /// The records of E2B's snapshots ([`snapshots`]).
    snapshots: Option<crate::snapshot::SnapshotStore>,
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
            snapshots: host.snapshot_store(ID),
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
            // A paused sandbox lives on (its files and memory kept).
            running: s.state == "running" || s.state == "paused",
            paused: s.state == "paused",
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

    /// Everything after E2B made the sandbox: read it back, push the
    /// daemon in, start it and say hello.
    async fn set_up(
        &self,
        id: &str,
        mark: &str,
        max_ms: u64,
        forked: bool,
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
        desktop::check_template(self.made, &host, &self.template).await?;
        if forked {
            child::clear_captured(&host).await?;
        }
        child::install(&host, Bytes::from(daemon)).await?;
        let init = self.made.init_args(child::init_args(deadline, max));
        child::start_init(&host, &init).await?;
        let conn = self.checked(
            crate::daemon_backed::up::wait_until_up(&mut Booting { host: &host }, cancel).await?,
        )?;
        let inside = probe::at_create(&conn, ID, "E2B", id).await?;
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

    /// `conn` once its daemon is this server's.
    fn checked(&self, conn: Connection) -> Result<Connection> {
        let d = self.made.drift(&conn.hello);
        crate::daemon_backed::hello::refuse_drift(conn, d, "the E2B sandbox")
    }
}

#[path = "e2b/provider.rs"]
mod provider_impl;

impl LostCreate for E2bProvider {
    const FOUND_BY: &'static str = "its create label";
    const ENDED: &'static str = "killed";
    const WITHIN: Duration = RECOVER;

    async fn marked(&self, mark: &str) -> Result<Vec<String>> {
        let labels: Labels = [(CREATE_LABEL.to_string(), mark.to_string())].into();
        let listed = self
            .control
            .list(&labels, &CancellationToken::new())
            .await?;
        Ok(listed.into_iter().map(|s| s.id).collect())
    }

    async fn end(&self, id: &str) -> Result<()> {
        self.kill_and_wait(id, &CancellationToken::new()).await
    }
}

#[cfg(test)]
#[path = "e2b/tests.rs"]
mod tests;
