//! The Modal provider (`--provider modal`, cargo feature `modal`): a
//! computer is a Modal sandbox made from a registry image, with computerd
//! pushed in and started as a child of Modal's own exec (daemon mode
//! `child`, [`crate::daemon_backed::child`]). Modal speaks gRPC only.
//!
//! - [`proto`]: the messages, written by hand from Modal's protos.
//! - [`grpc`]: channels, calls, statuses in words, a JWT's expiry.
//! - [`control`]: `modal.client.ModalClient` with the token pair.
//! - [`router`]: the task command router with its refreshed JWT.
//! - [`host`]: the child layer's [`ChildHost`] over the router.
//!
//! The rules: network none only (Modal's BLOCKED, and the daemon's own
//! network namespace; open and Modal's allowlist refused in words before
//! any request); a sandbox's `timeout_secs` is its lifetime (5 min
//! default, 24 h at most) and init's deadline ends its programs first;
//! at most 10 tags, one of them the provider's; a create whose answer is
//! lost is found by its tag and terminated; a release terminates and
//! waits until SandboxWait reads an end. The token pair, the auth token
//! and every router JWT are [`Secret`]s: never in words, logs or refs.

pub mod control;
pub mod grpc;
pub mod host;
pub mod proto;
pub mod router;
pub mod snapshots;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use computerd::launch::Time;
use computerd::protocol::{Group, MachineKind, SettingKind};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::daemon_backed::child::{self, Booting};
use crate::daemon_backed::hello::checked_linux;
use crate::daemon_backed::labels::{LostCreate, set_up_failed};
use crate::daemon_backed::probe;
use crate::provider::{Configure, Connection, Preflight, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, NetworkKind,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result, Sizes, check_labels,
    check_lifetime, label, refuse_host_parts,
};
use crate::vendor::{CREATE_LABEL, Failure, Secret};
use crate::wait::{Wait, wait_until};
use control::{Control, Tokens};
use host::ModalHost;
use proto::{NetworkAccess, NetworkAccessType, Resources, SandboxInfo, SandboxTag};
use router::Router;

pub const ID: &str = "modal";
pub const DEFAULT_SERVER_URL: &str = "https://api.modal.com:443";
pub const DEFAULT_APP: &str = "computer-mcp";
pub const DEFAULT_IMAGE: &str = "debian:bookworm-slim";
/// Modal's longest sandbox timeout.
pub const MAX_LIFETIME_MS: u64 = 86_400_000;
/// Modal's most tags on a sandbox; the provider keeps one of them.
pub const MAX_TAGS: usize = 10;
/// How long a lost create's sandbox is looked for (the listing lags).
pub const RECOVER: Duration = Duration::from_secs(30);
/// How long a create waits for Modal's listing to show its sandbox.
pub const LISTED_WAIT: Duration = Duration::from_secs(15);
/// How long a terminate is waited for (the seed's releaseMs).
pub const GONE_WAIT: Duration = Duration::from_secs(120);
/// How long a new sandbox's task may take to be scheduled.
pub const TASK_WAIT_S: f32 = 60.0;
/// The main command: the sandbox only waits; init is started beside it.
const ENTRYPOINT: [&str; 2] = ["sleep", "infinity"];
const GROUPS: &[Group] = &[Group::Exec, Group::Files, Group::Processes];

/// What a user sets of the Modal provider: flags `--modal-<key>`,
/// variables `COMPUTER_MCP_MODAL_<KEY>`, keys of `[providers.modal]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Modal provider (--provider modal)")]
#[serde(deny_unknown_fields)]
pub struct ModalSettings {
    /// Modal's token id (a secret: never printed).
    #[arg(
        id = "modal.token_id",
        long = "modal-token-id",
        value_name = "ID",
        env = "COMPUTER_MCP_MODAL_TOKEN_ID",
        hide_env_values = true
    )]
    pub token_id: Option<Secret>,
    /// Modal's token secret (a secret: never printed).
    #[arg(
        id = "modal.token_secret",
        long = "modal-token-secret",
        value_name = "SECRET",
        env = "COMPUTER_MCP_MODAL_TOKEN_SECRET",
        hide_env_values = true
    )]
    pub token_secret: Option<Secret>,
    /// Modal's API. [default: https://api.modal.com:443]
    #[arg(
        id = "modal.server_url",
        long = "modal-server-url",
        value_name = "URL",
        env = "COMPUTER_MCP_MODAL_SERVER_URL"
    )]
    pub server_url: Option<String>,
    /// The Modal app every sandbox is made in (made when missing).
    /// [default: computer-mcp]
    #[arg(
        id = "modal.app",
        long = "modal-app",
        value_name = "NAME",
        env = "COMPUTER_MCP_MODAL_APP"
    )]
    pub app: Option<String>,
    /// The registry image every computer is made from. [default:
    /// debian:bookworm-slim]
    #[arg(
        id = "modal.image",
        long = "modal-image",
        value_name = "IMAGE",
        env = "COMPUTER_MCP_MODAL_IMAGE"
    )]
    pub image: Option<String>,
    /// The most a computer may live, in ms (Modal's most is 24 h).
    /// [default: 86400000]
    #[arg(
        id = "modal.max_lifetime_ms",
        long = "modal-max-lifetime-ms",
        value_name = "MS",
        env = "COMPUTER_MCP_MODAL_MAX_LIFETIME_MS"
    )]
    pub max_lifetime_ms: Option<u64>,
    /// The static Linux computerd pushed into every sandbox. [default: as
    /// the Docker provider finds it]
    #[arg(
        id = "modal.computerd",
        long = "modal-computerd",
        value_name = "PATH",
        env = "COMPUTER_MCP_MODAL_COMPUTERD"
    )]
    pub computerd: Option<PathBuf>,
    /// Tests only: allow plaintext http:// to the server and the command
    /// router (a fake on loopback). Never for Modal itself: the token
    /// pair and the JWTs would cross the network in the clear.
    /// [default: false]
    #[arg(
        id = "modal.insecure_plaintext_for_tests",
        long = "modal-insecure-plaintext-for-tests",
        value_name = "BOOL",
        env = "COMPUTER_MCP_MODAL_INSECURE_PLAINTEXT_FOR_TESTS"
    )]
    pub insecure_plaintext_for_tests: Option<bool>,
}

pub struct ModalProvider {
    control: Arc<Control>,
    app: String,
    image: String,
    max_lifetime_ms: u64,
    computerd: PathBuf,
    /// The app's and images' ids, once known.
    ids: tokio::sync::Mutex<(Option<String>, HashMap<String, String>)>,
    /// Each sandbox's command router (its JWT held), by sandbox id.
    routers: Mutex<HashMap<String, Arc<Router>>>,
    /// The records of Modal's snapshot images ([`snapshots`]), and the
    /// archives of older ones kept through the daemon's `tar.*`.
    snapshots: Option<crate::snapshot::SnapshotStore>,
}

impl std::fmt::Debug for ModalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModalProvider")
            .field("app", &self.app)
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

/// An image reference as it may go into `FROM`: no space, no newline.
fn check_image(image: &str, field: &str) -> Result<()> {
    let ok = !image.is_empty()
        && image.len() <= 256
        && image
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/:@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ProviderError::invalid(
            field,
            "a Modal image is a registry reference: 1 to 256 letters, digits and . _ / : @ -",
        ))
    }
}

impl Configure for ModalProvider {
    type Settings = ModalSettings;

    fn configure(s: ModalSettings, host: &HostDefaults) -> Result<Self> {
        let url = s.server_url.unwrap_or_else(|| DEFAULT_SERVER_URL.into());
        let plaintext = s.insecure_plaintext_for_tests.unwrap_or(false);
        if !(url.starts_with("https://") || (plaintext && url.starts_with("http://"))) {
            return Err(ProviderError::invalid(
                "server_url",
                "--modal-server-url must be an https:// URL (http:// only with --modal-insecure-plaintext-for-tests, for a fake)",
            ));
        }
        let max = s.max_lifetime_ms.unwrap_or(MAX_LIFETIME_MS);
        if max == 0 || max > MAX_LIFETIME_MS {
            return Err(ProviderError::invalid(
                "max_lifetime_ms",
                format!(
                    "--modal-max-lifetime-ms is 1 to {MAX_LIFETIME_MS} ms (Modal's most, 24 h)"
                ),
            ));
        }
        let tokens = match (s.token_id, s.token_secret) {
            (Some(id), Some(secret)) => Some(Tokens { id, secret }),
            (None, None) => None,
            _ => {
                return Err(ProviderError::invalid(
                    "token_secret",
                    "give both --modal-token-id and --modal-token-secret (COMPUTER_MCP_MODAL_TOKEN_ID, COMPUTER_MCP_MODAL_TOKEN_SECRET), or neither",
                ));
            }
        };
        let app = s.app.unwrap_or_else(|| DEFAULT_APP.into());
        if app.is_empty() || app.len() > 64 {
            return Err(ProviderError::invalid(
                "app",
                "--modal-app is a name of 1 to 64 characters",
            ));
        }
        let image = s.image.unwrap_or_else(|| DEFAULT_IMAGE.into());
        check_image(&image, "image")?;
        let computerd = match s.computerd {
            Some(p) => host.absolute("--modal-computerd", p),
            None => crate::docker::cache::default_computerd(host)
                .ok_or_else(|| "cannot find a static computerd; give --modal-computerd".into()),
        }
        .map_err(|e: String| ProviderError::invalid("computerd", e))?;
        Ok(ModalProvider {
            control: Arc::new(Control::new(url, plaintext, tokens)),
            app,
            image,
            max_lifetime_ms: max,
            computerd,
            ids: tokio::sync::Mutex::new((None, HashMap::new())),
            routers: Mutex::new(HashMap::new()),
            snapshots: host.snapshot_store(ID),
        })
    }
}

fn rfc3339_s(secs: f64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos((secs * 1e9) as i128)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// A spec's sizes as Modal's resources: CPUs (vCPUs, two a physical core)
/// as a limit in milli-cores with Modal's default request or less, memory
/// the same (the seed's rule); disk and processes refused.
fn resources(sizes: &Sizes) -> Result<Option<Resources>> {
    if sizes.pids.is_some() {
        return Err(ProviderError::invalid(
            "sizes",
            "Modal has no limit on processes: give no pids",
        ));
    }
    if sizes.disk_mb.is_some() {
        return Err(ProviderError::invalid(
            "sizes",
            "a Modal computer's disk is Modal's: give no disk",
        ));
    }
    if sizes.cpus.is_none() && sizes.memory_mb.is_none() {
        return Ok(None);
    }
    let mut r = Resources::default();
    if let Some(c) = sizes.cpus {
        if !(0.25..=64.0).contains(&c) {
            return Err(ProviderError::invalid(
                "sizes",
                format!("cpus {c} is not 0.25 to 64 (Modal's sizes)"),
            ));
        }
        r.milli_cpu_max = (c * 500.0).round() as u32;
        r.milli_cpu = r.milli_cpu_max.min(125);
    }
    if let Some(m) = sizes.memory_mb {
        if !(128..=344_064).contains(&m) {
            return Err(ProviderError::invalid(
                "sizes",
                format!("memory {m} MiB is not 128 to 344064 (Modal's sizes)"),
            ));
        }
        r.memory_mb_max = m as u32;
        r.memory_mb = r.memory_mb_max.min(128);
    }
    Ok(Some(r))
}

fn tags_of(labels: &Labels) -> Vec<SandboxTag> {
    labels
        .iter()
        .map(|(k, v)| SandboxTag {
            tag_name: k.clone(),
            tag_value: v.clone(),
        })
        .collect()
}

fn tag<'a>(s: &'a SandboxInfo, name: &str) -> Option<&'a str> {
    s.tags
        .iter()
        .find(|t| t.tag_name == name)
        .map(|t| t.tag_value.as_str())
}

impl ModalProvider {
    async fn app_id(&self) -> Result<String> {
        let mut ids = self.ids.lock().await;
        if let Some(a) = &ids.0 {
            return Ok(a.clone());
        }
        let a = self.control.app(&self.app).await?;
        ids.0 = Some(a.clone());
        Ok(a)
    }

    async fn image_id(&self, app: &str, image: &str) -> Result<String> {
        if let Some(i) = self.ids.lock().await.1.get(image) {
            return Ok(i.clone());
        }
        let i = self.control.image(app, image).await?;
        self.ids.lock().await.1.insert(image.into(), i.clone());
        Ok(i)
    }

    fn routers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Router>>> {
        self.routers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sandbox's command router, opened once and kept.
    async fn router(&self, id: &str) -> Result<Arc<Router>> {
        if let Some(r) = self.routers().get(id).cloned() {
            return Ok(r);
        }
        let task = self.control.task_id(id, TASK_WAIT_S).await?;
        let r = Arc::new(Router::open(Arc::clone(&self.control), &task).await?);
        self.routers().insert(id.into(), Arc::clone(&r));
        Ok(r)
    }

    fn to_ref(&self, s: &SandboxInfo) -> ComputerRef {
        let labels: Labels = s
            .tags
            .iter()
            .filter(|t| t.tag_name != label::COMPUTER)
            .map(|t| (t.tag_name.clone(), t.tag_value.clone()))
            .collect();
        ComputerRef {
            provider: ID.into(),
            id: s.id.clone(),
            labels,
            created_at: rfc3339_s(s.created_at),
            deadline: rfc3339_s(s.created_at + f64::from(s.timeout_secs)),
            running: true,
            paused: false,
            home: Some(child::HOME.into()),
            user: Some(child::DAEMON_USER.to_string()),
            sizes: None,
            image: Some(self.image.clone()),
            network: None,
        }
    }

    /// Running sandboxes of the app carrying `tags` and the provider's
    /// tag; Modal keeps listing an ended one a while, so each is polled
    /// and one that reads an end (or that Modal forgot) is left out.
    async fn running(&self, tags: &Labels) -> Result<Vec<SandboxInfo>> {
        let app = self.app_id().await?;
        let listed = self.control.list(&app, &tags_of(tags)).await?;
        let mut out = Vec::new();
        for s in listed {
            if tag(&s, label::COMPUTER).is_none() {
                continue;
            }
            match self.control.poll(&s.id).await {
                Ok(None) => out.push(s),
                Ok(Some(_)) => {}
                Err(e) if e.code == ErrorCode::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The running sandbox `id` of this provider; None when ended or
    /// unknown.
    async fn find(&self, id: &str) -> Result<Option<SandboxInfo>> {
        crate::vendor::check_id(id)?;
        Ok(self
            .running(&Labels::new())
            .await?
            .into_iter()
            .find(|s| s.id == id))
    }

    /// Terminate and wait until Modal reads the sandbox ended.
    async fn terminate_and_wait(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        self.control.terminate(id).await?;
        let wait = Wait::new(format!("Modal sandbox {id} to end"), GONE_WAIT);
        wait_until(
            &wait,
            cancel,
            || async {
                match self.control.poll(id).await {
                    Ok(r) => Ok(r.map(|r| control::status_name(r.status))),
                    Err(e) if e.code == ErrorCode::NotFound => Ok(Some("unknown".into())),
                    Err(e) => Err(e),
                }
            },
            Option::is_some,
            |_| "running".into(),
        )
        .await?;
        self.routers().remove(id);
        Ok(())
    }

    /// Everything after Modal made the sandbox: push the daemon in, start
    /// it, say hello, read network none from inside (Modal reads no
    /// policy back), and wait until the listing shows it. The sandbox, the
    /// connection and the probe's words.
    async fn set_up(
        &self,
        id: &str,
        mark: &str,
        deadline: Time,
        forked: bool,
        cancel: &CancellationToken,
    ) -> Result<(SandboxInfo, Connection, String)> {
        let router = self.router(id).await?;
        let host = ModalHost { router };
        let daemon = tokio::fs::read(&self.computerd).await.map_err(|e| {
            ProviderError::failed(format!(
                "cannot read the static computerd {}: {e}",
                self.computerd.display()
            ))
        })?;
        if forked {
            child::clear_captured(&host).await?;
        }
        child::install(&host, Bytes::from(daemon)).await?;
        // No extend on Modal: the deadline is also the most.
        child::start_init(&host, &child::init_args(deadline, deadline)).await?;
        let conn = self.checked(
            crate::daemon_backed::up::wait_until_up(&mut Booting { host: &host }, cancel).await?,
        )?;
        let inside = probe::at_create(&conn, ID, "Modal", id).await?;
        let mine: Labels = [(label::COMPUTER.to_string(), mark.to_string())].into();
        let wait = Wait::new(format!("Modal's listing to show sandbox {id}"), LISTED_WAIT);
        let listed = wait_until(
            &wait,
            cancel,
            || self.running(&mine),
            |l| l.iter().any(|x| x.id == id),
            |_| "not listed".into(),
        )
        .await;
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                conn.client.close();
                return Err(e);
            }
        };
        let s = listed
            .into_iter()
            .find(|x| x.id == id)
            .ok_or_else(|| ProviderError::failed(format!("Modal sandbox {id} was not listed")))?;
        Ok((s, conn, inside))
    }

    /// `conn` once its daemon is this server's.
    fn checked(&self, conn: Connection) -> Result<Connection> {
        checked_linux(conn, GROUPS, "the Modal sandbox")
    }

    /// Network none as Modal was asked for it, with `inside`, the words
    /// of a probe from inside where one ran.
    fn none_read_back(inside: Option<&str>) -> NetworkReadBack {
        let mut detail = "Modal: network access BLOCKED at create (Modal reads no policy back); the daemon and its programs in a network namespace of their own (only lo)".to_string();
        if let Some(inside) = inside {
            detail = format!("{detail}; {inside}");
        }
        NetworkReadBack {
            kind: NetworkKind::None,
            detail,
        }
    }
}

#[path = "modal/provider.rs"]
mod provider_impl;

impl LostCreate for ModalProvider {
    const FOUND_BY: &'static str = "its tag";
    const ENDED: &'static str = "terminated";
    const WITHIN: Duration = RECOVER;

    async fn marked(&self, mark: &str) -> Result<Vec<String>> {
        let mine: Labels = [(label::COMPUTER.to_string(), mark.to_string())].into();
        Ok(self
            .running(&mine)
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect())
    }

    async fn end(&self, id: &str) -> Result<()> {
        self.terminate_and_wait(id, &CancellationToken::new()).await
    }
}

#[cfg(test)]
#[path = "modal/tests.rs"]
mod tests;
