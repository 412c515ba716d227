//! The `docker` provider: hardened containers with `computerd init` as
//! PID 1, made and read back through the engine's API (bollard; the docker
//! CLI is never run).
//!
//! A computer is a container named `computer-<12 hex digits>` carrying
//! `computer-mcp.computer=1` and its deadline, made as its [`Plan`] says:
//! a non-root user, every capability dropped, no-new-privileges, private
//! IPC and cgroup namespaces, network `none` (only lo) or the default
//! bridge, a CPU quota, memory with swap the same, a pids limit, tmpfs
//! /work (HOME) and /run/computerd (init's socket) of the user's alone, a
//! read-only root whose other writable places are sized tmpfs (so nothing
//! written lands on the host's disk), and the provider's cached copy of the static daemon bound read-only at
//! /opt/computerd/computerd as the entrypoint. After it starts, the drift
//! check holds the whole inspect and the daemon's hello to the plan; a
//! computer that drifted is deleted at create and refused (never deleted)
//! at attach. Every connection is one exec of `computerd stdio`.
//!
//! - [`plan`]: what a computer is made with, and the create body.
//! - [`drift`]: the closed check of inspect and hello against the plan.
//! - [`host`]: the host's enforcement from `docker info`, and the engine's
//!   failures in words.
//! - [`cache`]: the daemon's copy the computers bind.
//! - [`image`]: an image by name or from a recipe, one flight per image.
//! - [`stream`]: the exec that carries a connection.
//! - [`egress`]: an allowlist's proxy container and socket volume, made,
//!   read back and removed with their computer.
//! - `removal`: a computer and its parts removed, also when a create's
//!   future is dropped part-way.

pub mod cache;
pub mod desktop;
pub mod direct;
pub mod drift;
pub mod egress;
pub mod host;
pub mod image;
pub mod plan;
mod removal;
pub mod stream;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    StopContainerOptionsBuilder,
};
use computerd::launch::Time;
use computerd::protocol::{Group, HelloParams, MachineKind, SettingKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::local::cgroup::{self, CPU_PERIOD_US, Limits};
use crate::provider::{Connection, Provider};
use crate::registry::Configure;
use crate::settings::HostDefaults;
use crate::share::{Share, WORKSPACE};
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkRead, NetworkReadBack, ProviderError, Release,
    Result, check_labels, check_lifetime, label,
};
pub use host::Host;
pub use image::ImageSource;
pub use plan::Plan;

/// Docker's cap on a computer's life: 30 days (its deadline is a label,
/// fixed at create, so there is no extend).
pub const MAX_LIFETIME_MS: u64 = 30 * 24 * 3600 * 1000;
/// The engine's socket unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// A root server's computers run as this user unless told otherwise: one
/// below the local provider's own range (0x70000000 up), so no account of
/// a host (uid 1000 is often a person's) shares it.
pub const DEFAULT_USER: (u32, u32) = (0x6fff_ffff, 0x6fff_ffff);
/// Every engine call's bound until its answer begins (a build's or a
/// pull's stream, and an exec's attached stream, go on past it).
const ENGINE_TIMEOUT_S: u64 = 30;
/// The create step that makes the container (which may then not exist).
const MAKING: &str = "making the container";
/// How long a new computer gets until its daemon answers hello.
const START_WAIT: Duration = Duration::from_secs(30);
/// How long hello may take on a live connection.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// A janitor's allowance for clock skew on a deadline label.
const SKEW_MS: i64 = 60_000;
/// How long a removed computer may take to be gone from the engine.
const REMOVE_WAIT: Duration = Duration::from_secs(10);
/// Seconds `docker stop` waits before KILL (init ends in order in 2 s).
const STOP_WAIT_S: i32 = 5;

/// What a user sets of the Docker provider: flags `--docker-<key>`,
/// variables `COMPUTER_MCP_DOCKER_<KEY>`, keys of `[providers.docker]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Docker provider (--provider docker)")]
#[serde(deny_unknown_fields)]
pub struct DockerSettings {
    /// The image computers start from when the spec names none (pulled once when missing).
    #[arg(id = "docker.image", long = "docker-image", value_name = "NAME")]
    #[arg(env = "COMPUTER_MCP_DOCKER_IMAGE")]
    pub image: Option<String>,
    /// A Dockerfile (no build context) to build the image from, once per content hash, as computer-mcp:<hash>.
    #[arg(
        id = "docker.recipe",
        long = "docker-recipe",
        value_name = "DOCKERFILE"
    )]
    #[arg(env = "COMPUTER_MCP_DOCKER_RECIPE")]
    pub recipe: Option<PathBuf>,
    /// The static Linux computerd bound into every computer. [default: `computerd` beside this binary when it is static, else the static build of the checkout this binary was built in (target/<arch>-unknown-linux-gnu/daemon or release)]
    #[arg(
        id = "docker.computerd",
        long = "docker-computerd",
        value_name = "PATH"
    )]
    #[arg(env = "COMPUTER_MCP_DOCKER_COMPUTERD")]
    pub computerd: Option<PathBuf>,
    /// The Docker engine's unix socket. [default: /var/run/docker.sock]
    #[arg(id = "docker.socket", long = "docker-socket", value_name = "PATH")]
    #[arg(env = "COMPUTER_MCP_DOCKER_SOCKET")]
    pub socket: Option<String>,
    /// The uid:gid computers run as (never root). [default: this process's, or 1879048191:1879048191 (a uid no host account has) for a root server]
    #[arg(id = "docker.user", long = "docker-user", value_name = "UID:GID")]
    #[arg(env = "COMPUTER_MCP_DOCKER_USER")]
    pub user: Option<String>,
    /// Where the daemon's copy and each computer's direct directory are kept (0700). [default: ~/.cache/computer-mcp]
    #[arg(id = "docker.cache_dir", long = "docker-cache-dir", value_name = "DIR")]
    #[arg(env = "COMPUTER_MCP_DOCKER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// With --kind desktop: the image has Chromium, so desktops list the page tools and show the browser they drive on their screen (ignored by other kinds). [default: false]
    #[arg(
        id = "docker.desktop_browser",
        long = "docker-desktop-browser",
        value_name = "BOOL"
    )]
    #[arg(env = "COMPUTER_MCP_DOCKER_DESKTOP_BROWSER")]
    pub desktop_browser: Option<bool>,
    /// For --network allow: and public: the Docker host's own IP addresses, comma-separated, which every egress proxy refuses as this host's. Needed when the server runs in a container (it cannot see the host's interfaces), and for a public IP no interface holds (a cloud machine's NAT'd address). [default: none; this machine's public interface addresses are always refused]
    #[arg(
        id = "docker.host_addresses",
        long = "docker-host-addresses",
        value_name = "IP[,IP...]"
    )]
    #[arg(env = "COMPUTER_MCP_DOCKER_HOST_ADDRESSES")]
    pub host_addresses: Option<String>,
}

/// `--docker-host-addresses`: IP addresses, comma-separated, each once.
pub fn parse_host_addresses(text: &str) -> Result<Vec<std::net::IpAddr>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let ip: std::net::IpAddr = part.parse().map_err(|_| {
            ProviderError::invalid(
                "host_addresses",
                format!(
                    "--docker-host-addresses: {part:?} is not an IP address; give the Docker host's own addresses, comma-separated (203.0.113.7,2001:db8::7)"
                ),
            )
        })?;
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    Ok(out)
}

/// The Docker provider's options, resolved.
#[derive(Clone, Debug)]
pub struct DockerOptions {
    /// The engine's unix socket (a path, or `unix://` and a path).
    pub socket: String,
    /// The image when a spec names none.
    pub image: Option<ImageSource>,
    /// The static computerd.
    pub computerd: PathBuf,
    /// Where its copy is kept.
    pub cache_dir: PathBuf,
    /// The provider's user; else this process's, or [`DEFAULT_USER`].
    pub user: Option<(u32, u32)>,
    pub max_lifetime_ms: u64,
    /// Make desktops with this screen (the server's `--kind desktop`):
    /// the image must have Xvfb ([`desktop`]).
    pub desktop: Option<computerd::launch::Screen>,
    /// Make browsers (the server's `--kind browser`): the image must have
    /// Chromium, which each connection starts headless in the container
    /// on its debugging pipe ([`crate::cdp`]).
    pub browser: bool,
    /// A desktop's image has Chromium: desktops declare cdp, and each
    /// connection drives a Chromium shown on the screen, started when a
    /// page tool first needs it.
    pub desktop_browser: bool,
    /// The DNS servers an allowlist's proxy asks instead of its
    /// container's resolv.conf (tests and embedders).
    pub egress_resolvers: Vec<std::net::SocketAddr>,
    /// The Docker host's own addresses beyond this process's interfaces'
    /// (a NAT'd public IP), refused by every proxy as this-host; needed
    /// for an allowlist when this process runs in a container.
    pub egress_host_addresses: Vec<std::net::IpAddr>,
    /// The root under which the signs of a container are read (`/`).
    pub egress_host_root: PathBuf,
    /// Reach computers the direct way ([`stream`]): a directory of this
    /// host's bound read-only into each, where this process listens for
    /// the daemon's bridge. Off: every byte goes through the exec's
    /// streams, as through a remote engine.
    pub direct: bool,
}

impl DockerOptions {
    pub fn new(computerd: PathBuf, cache_dir: PathBuf) -> Self {
        Self {
            socket: DEFAULT_SOCKET.into(),
            image: None,
            computerd,
            cache_dir,
            user: None,
            max_lifetime_ms: MAX_LIFETIME_MS,
            desktop: None,
            browser: false,
            desktop_browser: false,
            egress_resolvers: Vec::new(),
            egress_host_addresses: Vec::new(),
            egress_host_root: PathBuf::from("/"),
            direct: true,
        }
    }
}

pub struct DockerProvider {
    opts: DockerOptions,
    /// The engine client, made on first use (the engine may start later).
    engine: Mutex<Option<Docker>>,
    /// The host, read once (a failed read is not kept).
    host: tokio::sync::OnceCell<Host>,
    images: image::Flights,
}

impl DockerProvider {
    pub fn new(opts: DockerOptions) -> Result<Self> {
        if !opts.computerd.is_absolute() {
            return Err(ProviderError::invalid(
                "computerd",
                "the computerd path must be absolute",
            ));
        }
        if let Some((u, g)) = opts.user
            && (u == 0 || g == 0)
        {
            return Err(ProviderError::invalid(
                "user",
                format!(
                    "--docker-user {u}:{g} is root or root's group: the provider's user never is (a spec may ask for root itself)"
                ),
            ));
        }
        if let Some(i) = &opts.image {
            i.check()?;
        }
        Ok(Self {
            opts,
            engine: Mutex::new(None),
            host: tokio::sync::OnceCell::new(),
            images: image::Flights::default(),
        })
    }

    fn socket(&self) -> &str {
        &self.opts.socket
    }

    fn shown_socket(&self) -> String {
        let s = self.socket();
        if s.starts_with("unix://") {
            s.to_string()
        } else {
            format!("unix://{s}")
        }
    }

    /// The engine client.
    pub fn engine(&self) -> Result<Docker> {
        let mut slot = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let d = Docker::connect_with_unix(
            self.socket(),
            ENGINE_TIMEOUT_S,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|_| host::unreachable(&self.shown_socket()))?;
        *slot = Some(d.clone());
        Ok(d)
    }

    fn err(&self, doing: &str) -> impl Fn(bollard::errors::Error) -> ProviderError + '_ {
        let doing = doing.to_string();
        move |e| host::docker_error(&self.shown_socket(), &doing, e)
    }

    /// The host's enforcement, read once per provider.
    pub async fn host(&self, cancel: &CancellationToken) -> Result<Host> {
        let docker = self.engine()?;
        let read = self.host.get_or_try_init(|| async {
            let info = docker
                .info()
                .await
                .map_err(self.err("reading docker info"))?;
            let version = docker
                .version()
                .await
                .map_err(self.err("reading docker version"))?;
            let mut host = Host::of(&info);
            host.require_api(version.api_version.as_deref().unwrap_or(""));
            Ok::<_, ProviderError>(host)
        });
        tokio::select! {
            h = read => h.cloned(),
            _ = cancel.cancelled() => Err(aborted("reading the Docker host")),
        }
    }

    /// The user a spec's computer runs as.
    fn user_for(&self, spec: &ComputerSpec) -> Result<(u32, u32)> {
        if let Some(u) = &spec.user {
            return plan::parse_user("user", u);
        }
        if let Some(u) = self.opts.user {
            return Ok(u);
        }
        let (u, g) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        Ok(if u == 0 || g == 0 {
            DEFAULT_USER
        } else {
            (u, g)
        })
    }

    fn image_of(&self, spec: &ComputerSpec) -> Result<ImageSource> {
        match (&spec.image, &self.opts.image) {
            (Some(i), _) => Ok(ImageSource::Name(i.clone())),
            (None, Some(s)) => Ok(s.clone()),
            (None, None) => Err(ProviderError::invalid(
                "image",
                "no image: name one in the spec, or give the provider one (--docker-image NAME or --docker-recipe DOCKERFILE)",
            )),
        }
    }

    /// Sizes, checked as the local provider checks them (one rule).
    fn limits_for(&self, spec: &ComputerSpec, host: Option<&Host>) -> Result<Limits> {
        if spec.sizes.disk_mb.is_some() {
            return Err(ProviderError::unsupported(
                "Docker bounds no disk: a computer's /work is half of its memory; leave diskMb out",
            )
            .with_field("diskMb"));
        }
        let size = match host {
            Some(h) => h.size,
            None => cgroup::Host::read()?,
        };
        Limits::from_sizes(&spec.sizes, &size)
    }

    /// Whether its computers run the image's Chromium: a browser always, a
    /// desktop when told its image has one.
    fn runs_chromium(&self) -> bool {
        self.opts.browser || (self.opts.desktop.is_some() && self.opts.desktop_browser)
    }

    /// The setting kind this provider's computers are.
    fn made_kind(&self) -> SettingKind {
        match (self.opts.desktop, self.opts.browser) {
            (Some(_), _) => SettingKind::Desktop,
            (None, true) => SettingKind::Browser,
            (None, false) => SettingKind::Sandbox,
        }
    }

    fn check_spec(&self, spec: &ComputerSpec, host: Option<&Host>) -> Result<()> {
        let caps = self.capabilities();
        check_lifetime(spec.lifetime_ms, &caps)?;
        check_labels(&spec.labels)?;
        for (k, v) in &spec.labels {
            if k == label::COMPUTER
                || k == label::DEADLINE
                || k == egress::LABEL
                || k == egress::LIST_LABEL
            {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the provider's own; leave it out"),
                ));
            }
            if v.contains('\0') {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("label {k} holds a NUL byte"),
                ));
            }
        }
        desktop::check_kind(spec.kind, self.made_kind())?;
        self.image_of(spec)?.check()?;
        let allow = egress::list_of(&spec.network)?.is_some();
        if allow
            && let Some(u) = &spec.user
            && plan::parse_user("user", u)?.0 == egress::UID
        {
            return Err(ProviderError::invalid(
                "user",
                format!(
                    "uid {} is the egress proxy's own: an allowlisted computer runs as another",
                    egress::UID
                ),
            ));
        }
        if spec.mount.is_some() {
            return Err(ProviderError::unsupported(
                "the Docker provider takes host directories as shares (at /workspace), not as mount; use share",
            )
            .with_field("mount"));
        }
        if let Some(u) = &spec.user {
            plan::parse_user("user", u)?;
        }
        self.limits_for(spec, host)?;
        crate::share::check(&spec.shares, &self.opts.cache_dir)?;
        for s in &spec.shares {
            let p = s.source.to_string_lossy();
            if p.contains([',', '"', '\n', '\r']) {
                return Err(ProviderError::invalid(
                    "share",
                    format!(
                        "the share {p:?} holds a comma, a quote or a line break, which a Docker mount cannot name"
                    ),
                ));
            }
        }
        if let Some(h) = host {
            h.require()?;
            if let (Some(remap), false) = (&h.remap, spec.shares.is_empty()) {
                return Err(ProviderError::unsupported(format!(
                    "this Docker host remaps user ids ({remap}), so a share's owner on the host is not the computer's user: leave share out, or use a Docker without remapping"
                ))
                .with_field("share"));
            }
            if let (Some(remap), true) = (&h.remap, allow) {
                return Err(ProviderError::unsupported(format!(
                    "this Docker host remaps user ids ({remap}), so the egress proxy's socket volume would be owned by host ids the computer's user does not map to: ask for network none or open, or use a Docker without remapping"
                ))
                .with_field("network"));
            }
        }
        Ok(())
    }

    /// The provider's copy of the static daemon, made if missing.
    async fn daemon_copy(&self) -> Result<PathBuf> {
        cache::check_static(&self.opts.computerd)?;
        let (computerd, cache_dir) = (self.opts.computerd.clone(), self.opts.cache_dir.clone());
        tokio::task::spawn_blocking(move || cache::ensure_copy(&computerd, &cache_dir))
            .await
            .map_err(|e| ProviderError::failed(format!("copying the daemon failed: {e}")))?
    }

    fn new_name() -> Result<String> {
        Ok(format!("computer-{}", &crate::random::random_hex(6)?))
    }

    /// Find one of our computers by its name or container id, inspected.
    async fn find(&self, docker: &Docker, id: &str) -> Result<Value> {
        let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
        let ok = plan::is_computer_name(id) || ((12..=64).contains(&id.len()) && hex(id));
        if !ok {
            return Err(ProviderError::not_found(format!(
                "{id:?} is not a Docker computer's name (computer-<12 hex digits>) or a container id"
            )));
        }
        let i = docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| {
                if host::is_not_found(&e) {
                    ProviderError::not_found(format!("no Docker computer {id}"))
                } else {
                    host::docker_error(&self.shown_socket(), "inspecting the computer", e)
                }
            })?;
        let v = serde_json::to_value(&i)
            .map_err(|e| ProviderError::failed(format!("reading the inspect: {e}")))?;
        let ours = v["Config"]["Labels"][label::COMPUTER].as_str() == Some("1")
            && plan::is_computer_name(name_of(&v));
        if !ours {
            return Err(ProviderError::not_found(format!(
                "the container {id} is not a computer this provider made"
            )));
        }
        Ok(v)
    }

    /// The plan a container was made from, read back from its own report
    /// and held to what check allows.
    fn plan_of(&self, v: &Value) -> std::result::Result<Plan, Vec<String>> {
        let mut bad = Vec::new();
        let hc = &v["HostConfig"];
        let cfg = &v["Config"];
        let labels: Labels = cfg["Labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let deadline = labels
            .get(label::DEADLINE)
            .and_then(|d| d.parse::<Time>().ok());
        let deadline = match deadline {
            Some(d) => d,
            None => {
                bad.push(format!(
                    "the label {} is missing or not an RFC 3339 time",
                    label::DEADLINE
                ));
                Time::from_now(Duration::ZERO)
            }
        };
        let user = match cfg["User"].as_str().map(|u| plan::parse_user("user", u)) {
            Some(Ok(u)) => u,
            _ => {
                bad.push(format!("Config.User is {}, not uid:gid", cfg["User"]));
                (0, 0)
            }
        };
        let egress = labels
            .get(egress::LIST_LABEL)
            .map(|l| egress::list_in_label(l));
        if let Some(l) = &egress {
            match computerd::protocol::egress::Allowlist::parse(l) {
                Ok(list) if list.entries() == *l => {}
                _ => bad.push(format!(
                    "its label {} holds {:?}, which is no network list create writes",
                    egress::LIST_LABEL,
                    l.join(",")
                )),
            }
        }
        let network = match hc["NetworkMode"].as_str() {
            Some("none") if egress.is_some() => NetworkKind::Allow,
            Some("none") => NetworkKind::None,
            Some("bridge") | Some("default") => NetworkKind::Open,
            _ => {
                bad.push(format!(
                    "HostConfig.NetworkMode is {}, where a computer is on \"none\" or the default \"bridge\"",
                    hc["NetworkMode"]
                ));
                NetworkKind::None
            }
        };
        if egress.is_some() && network != NetworkKind::Allow {
            bad.push(format!(
                "it carries a network list ({}) but is on network mode {}, where an allowlisted computer is on \"none\"",
                egress::LIST_LABEL,
                hc["NetworkMode"]
            ));
        }
        let memory = hc["Memory"].as_i64().unwrap_or(0).max(0) as u64 / (1024 * 1024);
        let quota = hc["CpuQuota"].as_i64().unwrap_or(0);
        let limits = Limits {
            cpus: quota as f64 / CPU_PERIOD_US as f64,
            memory_mb: memory,
            pids: hc["PidsLimit"].as_i64().unwrap_or(0).max(0) as u64,
        };
        let daemon = hc["Mounts"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|m| m["Target"].as_str() == Some(plan::DAEMON_PATH))
            })
            .and_then(|m| m["Source"].as_str())
            .map(PathBuf::from)
            .unwrap_or_default();
        let direct = hc["Mounts"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|m| m["Target"].as_str() == Some(plan::DIRECT_MOUNT))
            })
            .map(|m| PathBuf::from(m["Source"].as_str().unwrap_or_default()));
        if let Some(d) = &direct {
            let own = direct::dir_of(&self.opts.cache_dir, name_of(v));
            if *d != own {
                bad.push(format!(
                    "{} is bound from {}, where this provider binds a computer's own directory {} there",
                    plan::DIRECT_MOUNT,
                    d.display(),
                    own.display()
                ));
            }
        }
        let shares = hc["Mounts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|m| {
                        m["Target"].as_str().is_some_and(|t| {
                            t == WORKSPACE || t.starts_with(&format!("{WORKSPACE}/"))
                        })
                    })
                    .map(|m| Share {
                        source: m["Source"].as_str().unwrap_or_default().into(),
                        target: m["Target"].as_str().unwrap_or_default().into(),
                        read_only: m["ReadOnly"].as_bool().unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cmd: Vec<&str> = cfg["Cmd"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let display = cmd
            .windows(2)
            .find(|w| w[0] == "--display")
            .map(|w| w[1].to_string());
        match (&display, self.opts.desktop) {
            (Some(d), None) => bad.push(format!(
                "it is a desktop (display {d}), where this provider makes sandboxes"
            )),
            (None, Some(_)) => bad.push(
                "it is not a desktop (no DISPLAY), where this provider makes desktops".into(),
            ),
            _ => {}
        }
        let p = Plan {
            name: name_of(v).to_string(),
            image: cfg["Image"].as_str().unwrap_or_default().to_string(),
            user,
            network,
            limits,
            deadline,
            labels,
            daemon,
            shares,
            display,
            egress,
            direct,
        };
        // The sizes as check allows them, on this host.
        let size = self.host.get().map(|h| h.size);
        if let Some(size) = size
            && let Err(e) = limits.check(&size)
        {
            bad.push(e.message);
        }
        let created = created_ms(v);
        let limit = created.saturating_add(self.opts.max_lifetime_ms as i64 + SKEW_MS);
        if deadline_ms(&p.deadline) > limit {
            bad.push(format!(
                "its deadline {} is more than {} days after it was made",
                p.deadline,
                self.opts.max_lifetime_ms / 86_400_000
            ));
        }
        if bad.is_empty() { Ok(p) } else { Err(bad) }
    }

    fn to_ref(&self, v: &Value) -> ComputerRef {
        let labels: Labels = v["Config"]["Labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        ComputerRef {
            provider: "docker".into(),
            id: name_of(v).to_string(),
            deadline: labels.get(label::DEADLINE).cloned().unwrap_or_default(),
            labels,
            created_at: format_ms(created_ms(v)),
            running: v["State"]["Running"].as_bool().unwrap_or(false),
            home: Some(plan::HOME.into()),
            user: v["Config"]["User"].as_str().map(String::from),
            sizes: sizes_of(v),
            image: v["Config"]["Image"].as_str().map(String::from),
            network: None,
        }
    }

    /// A connection's hello, bounded.
    async fn hello(client: computerd::client::DaemonClient) -> Result<Connection> {
        let hello = tokio::time::timeout(
            HELLO_WAIT,
            client.call(&HelloParams {
                client: Some(format!("computer-mcp {}", env!("CARGO_PKG_VERSION"))),
            }),
        )
        .await
        .map_err(|_| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!(
                    "the computer's daemon did not answer hello within {} s",
                    HELLO_WAIT.as_secs()
                ),
            )
        })?
        .map_err(|e| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("the computer's daemon did not answer hello: {e}"),
            )
        })?;
        Ok(Connection {
            client: Arc::new(client),
            hello,
        })
    }

    /// Connect until init answers, within [`START_WAIT`].
    async fn wait_until_up(
        &self,
        docker: &Docker,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let name = plan.name.as_str();
        let until = tokio::time::Instant::now() + START_WAIT;
        loop {
            if cancel.is_cancelled() {
                return Err(aborted("creating the computer"));
            }
            let state = docker
                .inspect_container(name, None::<InspectContainerOptions>)
                .await
                .map_err(self.err("inspecting the new computer"))?;
            let st = state.state.unwrap_or_default();
            if st.running != Some(true) {
                // Read now: the container and its logs go with the failed create.
                return Err(ProviderError::refused(format!(
                    "the computer stopped as it started (exit code {}); its daemon said: {}",
                    st.exit_code.unwrap_or(-1),
                    daemon_words(docker, name).await
                )));
            }
            let last = match stream::open(
                docker,
                &self.shown_socket(),
                name,
                plan.direct.as_deref(),
            )
            .await
            {
                Ok((client, _)) => match Self::hello(client).await {
                    Ok(c) => return Ok(c),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the computer's daemon did not answer within {} s: {}",
                        START_WAIT.as_secs(),
                        last.message
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What removes a computer and its parts, owned.
    fn removal(&self, docker: &Docker) -> removal::Removal {
        removal::Removal {
            docker: docker.clone(),
            socket: self.shown_socket(),
            cache: self.opts.cache_dir.clone(),
        }
    }

    /// Remove a computer, then its egress proxy and volume (none is fine).
    async fn remove_with_parts(&self, docker: &Docker, name: &str) -> Result<()> {
        self.removal(docker).with_parts(name).await
    }

    /// A computer's network, read back from docker inspect (`v`), and for
    /// an allowlist from its proxy and volume too.
    async fn read_net(&self, docker: &Docker, v: &Value) -> Result<NetworkReadBack> {
        if v["Config"]["Labels"][egress::LIST_LABEL].is_null() {
            return read_network(v);
        }
        let plan = self.plan_of(v).map_err(|why| {
            ProviderError::refused(format!(
                "the Docker computer {} has network allow, but it is not what this provider makes: {}",
                name_of(v),
                why.join("; ")
            ))
            .with_field("network")
        })?;
        self.read_egress(docker, v, &plan).await
    }

    /// The part of create after the container exists; its failure names
    /// the step that failed, and the caller removes the container.
    async fn start(
        &self,
        docker: &Docker,
        plan: &Plan,
        host: &Host,
        cancel: &CancellationToken,
    ) -> std::result::Result<Created, (&'static str, ProviderError)> {
        let at = |step: &'static str| move |e: ProviderError| (step, e);
        let started = std::time::Instant::now();
        docker
            .start_container(
                &plan.name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(self.err("starting the computer"))
            .map_err(at("starting the container"))?;
        let hello_step = "waiting for its daemon's hello";
        let conn = match self.wait_until_up(docker, plan, cancel).await {
            Ok(c) => c,
            Err(e) if deadline_ms(&plan.deadline) <= now_ms() => {
                return Err((
                    hello_step,
                    ProviderError::new(
                        ErrorCode::Timeout,
                        format!(
                            "its lifetime ended before the computer finished starting (it took {:.1} s): {}",
                            started.elapsed().as_secs_f64(),
                            e.message
                        ),
                    ),
                ));
            }
            Err(e) => return Err((hello_step, e)),
        };
        if self.runs_chromium() {
            let step = "looking for the image's Chromium";
            let found = tokio::select! {
                r = tokio::time::timeout(HELLO_WAIT, crate::cdp::chromium::find_in_computer(&conn.client)) => r,
                _ = cancel.cancelled() => {
                    conn.client.close();
                    return Err((step, aborted(step)));
                }
            };
            let found = found.map_err(|_| {
                conn.client.close();
                (
                    step,
                    ProviderError::new(
                        ErrorCode::Timeout,
                        format!(
                            "the computer's daemon did not answer files.stat within {} s",
                            HELLO_WAIT.as_secs()
                        ),
                    ),
                )
            })?;
            if found.is_none() {
                conn.client.close();
                return Err((
                    step,
                    ProviderError::refused(format!(
                        "the image {} has no Chromium (none at {}), and {} runs the image's own: use an image with Debian's package chromium (fixtures/images/build.sh makes computer-mcp-test/desktop:bookworm)",
                        plan.image,
                        crate::cdp::chromium::CHROMIUM_PATHS.join(", "),
                        if self.opts.browser {
                            "a browser"
                        } else {
                            "a desktop told it has one (--docker-desktop-browser)"
                        }
                    ))
                    .with_field("image"),
                ));
            }
        }
        let (hello, window_manager) = match self.opts.desktop {
            Some(screen) => {
                let x = tokio::select! {
                    r = desktop::start_x(&conn.client, screen) => r,
                    _ = cancel.cancelled() => Err(aborted("starting the desktop's X server")),
                };
                let wm = match &x {
                    Ok(_) => Some(crate::window_manager::start(&conn.client).await),
                    Err(_) => None,
                };
                conn.client.close();
                (x.map_err(at("starting the desktop's X server"))?, wm)
            }
            None => {
                conn.client.close();
                (conn.hello, None)
            }
        };
        let v = self
            .find(docker, &plan.name)
            .await
            .map_err(at("reading the new computer back"))?;
        let mut drift = drift::inspect_drift(plan, &v, host);
        drift.extend(drift::hello_drift(&hello, host, plan.display.is_some()));
        if !drift.is_empty() {
            return Err((
                "the drift check",
                ProviderError::refused(format!(
                    "the new computer is not what was declared: {}",
                    drift.join("; ")
                )),
            ));
        }
        let network = self
            .read_net(docker, &v)
            .await
            .map_err(at("reading its network back"))?;
        let mut notes = vec![
            format!(
                "isolation: a Docker container (engine {}) as {} with no capability, no-new-privileges and Docker's seccomp profile; private IPC and cgroup namespaces; /work (HOME) is a {} MiB tmpfs",
                host.engine,
                plan.user_string(),
                plan.work_size_mib()
            ),
            format!("limits: {} (read back from docker inspect)", plan.limits),
            plan.disk_note(v["HostConfig"]["ShmSize"].as_i64()),
        ];
        notes.extend(window_manager);
        if plan.egress.is_some() {
            notes.push(format!(
                "egress: its one way out is the proxy container {} (Docker's default bridge, no published port, read-only root, no capability, 0.5 CPU, 256 MiB, 64 pids), its socket in the volume {} mounted read-only at {}",
                egress::name_of(&plan.name),
                egress::name_of(&plan.name),
                egress::MOUNT
            ));
        }
        for s in &plan.shares {
            notes.push(format!(
                "share: {} at {}{}",
                s.source.display(),
                s.target,
                if s.read_only { " (read-only)" } else { "" }
            ));
        }
        let mut computer = self.to_ref(&v);
        computer.network = Some(NetworkRead::Policy(network.clone()));
        Ok(Created {
            computer,
            network: Some(network),
            notes,
        })
    }

    /// The computers `list` sees, inspected (50 at a time).
    async fn listed(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<Value>> {
        let docker = self.engine()?;
        let mut filters = vec![format!("{}=1", label::COMPUTER)];
        filters.extend(labels.iter().map(|(k, v)| format!("{k}={v}")));
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&HashMap::from([("label", filters)]))
            .build();
        let found = tokio::select! {
            r = docker.list_containers(Some(opts)) => r.map_err(self.err("listing computers"))?,
            _ = cancel.cancelled() => return Err(aborted("listing computers")),
        };
        let mut out = Vec::new();
        for chunk in found.chunks(50) {
            let reads = chunk.iter().filter_map(|c| c.id.clone()).map(|id| {
                let docker = docker.clone();
                async move {
                    docker
                        .inspect_container(&id, None::<InspectContainerOptions>)
                        .await
                }
            });
            for r in futures::future::join_all(reads).await {
                // A computer gone between the list and the inspect is left out.
                let Ok(i) = r else { continue };
                let Ok(v) = serde_json::to_value(&i) else {
                    continue;
                };
                if plan::is_computer_name(name_of(&v))
                    && labels
                        .iter()
                        .all(|(k, want)| v["Config"]["Labels"][k].as_str() == Some(want))
                {
                    out.push(v);
                }
            }
        }
        out.sort_by_key(created_ms);
        Ok(out)
    }
}

/// The last lines a container's daemon wrote (stdout and stderr).
async fn daemon_words(docker: &Docker, name: &str) -> String {
    use futures::StreamExt;
    let opts = bollard::query_parameters::LogsOptionsBuilder::new()
        .stdout(true)
        .stderr(true)
        .tail("3")
        .build();
    let chunks: Vec<String> = docker
        .logs(name, Some(opts))
        .take_while(|c| std::future::ready(c.is_ok()))
        .filter_map(|c| async move { c.ok() })
        .map(|c| String::from_utf8_lossy(&c.into_bytes()).trim().to_string())
        .collect()
        .await;
    let said = chunks.join(" / ");
    if said.is_empty() {
        "nothing".into()
    } else {
        said
    }
}

fn aborted(what: &str) -> ProviderError {
    ProviderError::new(ErrorCode::Aborted, format!("{what} was cancelled"))
}

fn name_of(v: &Value) -> &str {
    v["Name"].as_str().unwrap_or("").trim_start_matches('/')
}

fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

fn deadline_ms(t: &Time) -> i64 {
    (t.get().unix_timestamp_nanos() / 1_000_000) as i64
}

fn created_ms(v: &Value) -> i64 {
    v["Created"]
        .as_str()
        .and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok())
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(0)
}

fn format_ms(ms: i64) -> String {
    Time::from_unix_ms(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The network, read back from docker inspect: none is network mode none
/// on Docker's own none network alone (only lo inside); open the default
/// bridge alone; anything else is refused in words, never a policy.
pub fn read_network(v: &Value) -> Result<NetworkReadBack> {
    if let Some(l) = v["Config"]["Labels"][egress::LIST_LABEL].as_str() {
        return Err(ProviderError::refused(format!(
            "the computer's network is the allowlist {l}, which is read back with its egress proxy (DockerProvider::network), not from its inspect alone"
        ))
        .with_field("network"));
    }
    let mode = v["HostConfig"]["NetworkMode"].as_str().unwrap_or("");
    let nets: Vec<String> = v["NetworkSettings"]["Networks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    match (mode, nets.as_slice()) {
        ("none", [n]) if n == "none" => Ok(NetworkReadBack {
            kind: NetworkKind::None,
            detail: "docker network mode none: only lo inside; no route out".into(),
        }),
        ("bridge" | "default", [n]) if n == "bridge" => Ok(NetworkReadBack {
            kind: NetworkKind::Open,
            detail: "Docker's default bridge alone".into(),
        }),
        _ => Err(ProviderError::refused(format!(
            "the computer's network is network mode {mode:?} on {nets:?}, which is none of the policies"
        ))
        .with_field("network")),
    }
}

impl Configure for DockerProvider {
    type Settings = DockerSettings;

    fn configure(settings: DockerSettings, host: &HostDefaults) -> Result<Self> {
        let invalid = |field: &'static str| move |e: String| ProviderError::invalid(field, e);
        let computerd = match settings.computerd {
            Some(p) => host.absolute("--docker-computerd", p),
            None => cache::default_computerd(host).ok_or_else(|| {
                "cannot find computerd beside this binary; give --docker-computerd".to_string()
            }),
        }
        .map_err(invalid("computerd"))?;
        let cache_dir = match settings.cache_dir {
            Some(d) => host
                .absolute("--docker-cache-dir", d)
                .map_err(invalid("cache_dir"))?,
            None => match (&host.home, &host.state_dir) {
                (Some(h), _) => h.join(".cache").join("computer-mcp"),
                (None, Some(s)) => s.join("docker-cache"),
                (None, None) => {
                    return Err(ProviderError::invalid(
                        "cache_dir",
                        "no cache directory: set HOME or give --docker-cache-dir",
                    ));
                }
            },
        };
        let image = match (settings.image, settings.recipe) {
            (Some(_), Some(_)) => {
                return Err(ProviderError::invalid(
                    "image",
                    "give --docker-image or --docker-recipe, not both",
                ));
            }
            (Some(n), None) => Some(ImageSource::Name(n)),
            (None, Some(r)) => {
                let path = host
                    .absolute("--docker-recipe", r)
                    .map_err(invalid("recipe"))?;
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ProviderError::invalid(
                        "recipe",
                        format!("cannot read the recipe {}: {e}", path.display()),
                    )
                })?;
                Some(ImageSource::Recipe(text))
            }
            (None, None) => None,
        };
        let user = settings
            .user
            .as_deref()
            .map(|u| plan::parse_user("user", u))
            .transpose()?;
        let mut opts = DockerOptions::new(computerd, cache_dir);
        opts.image = image;
        opts.user = user;
        opts.desktop = host.desktop();
        opts.browser = host.browser();
        // Without a desktop it means nothing (a browser always runs the
        // image's Chromium): `runs_chromium` reads it with the desktop.
        opts.desktop_browser = settings.desktop_browser.unwrap_or(false);
        if let Some(a) = settings.host_addresses.as_deref() {
            opts.egress_host_addresses = parse_host_addresses(a)?;
        }
        if let Some(s) = settings.socket {
            opts.socket = s;
        }
        Self::new(opts)
    }
}

/// The bounds an inspect shows the engine holds the container to: its CPU
/// quota, memory (with swap the same, so no swap) and pids limit; none
/// when any is unbounded.
fn sizes_of(v: &Value) -> Option<crate::SizesReadBack> {
    let h = &v["HostConfig"];
    let quota = h["CpuQuota"].as_u64().filter(|n| *n > 0)?;
    let period = h["CpuPeriod"].as_u64().filter(|n| *n > 0)?;
    let memory = h["Memory"].as_u64().filter(|m| *m > 0)?;
    let pids = h["PidsLimit"].as_u64().filter(|p| *p > 0)?;
    if h["MemorySwap"].as_u64() != Some(memory) {
        return None;
    }
    Some(crate::SizesReadBack {
        cpus: quota as f64 / period as f64,
        memory_mb: memory / (1024 * 1024),
        pids,
    })
}

#[async_trait::async_trait]
impl Provider for DockerProvider {
    fn id(&self) -> &'static str {
        "docker"
    }

    fn capabilities(&self) -> Capabilities {
        let mut groups = drift::GROUPS.to_vec();
        if self.opts.desktop.is_some() {
            groups.extend_from_slice(desktop::GROUPS);
        }
        if self.runs_chromium() {
            groups.push(Group::Cdp);
        }
        Capabilities {
            kind: match (self.opts.desktop, self.opts.browser) {
                (Some(_), _) => MachineKind::Desktop,
                (None, true) => MachineKind::Browser,
                (None, false) => MachineKind::Linux,
            },
            os: "linux".into(),
            daemon: DaemonMode::Pid1,
            groups,
            lifetime: LifetimeMode::Janitor,
            release: vec![Release::Stop, Release::Delete],
            max_lifetime_ms: self.opts.max_lifetime_ms,
            networks: vec![NetworkKind::None, NetworkKind::Open, NetworkKind::Allow],
            network_read_back: true,
            isolation: "a Docker container: a non-root user (unless the spec asks for root), no capability, no-new-privileges, Docker's seccomp profile, private IPC and cgroup namespaces, bounded CPU, memory (no swap) and pids, read back after create".into(),
            extend: false,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        self.check_spec(spec, self.host.get())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check_spec(spec, None)?;
        let host = self.host(cancel).await?;
        self.check_spec(spec, Some(&host))?;
        let docker = self.engine()?;
        let source = self.image_of(spec)?;
        let socket = self.shown_socket();
        let image = tokio::select! {
            r = self.images.ensure(&docker, &socket, &source) => r?,
            _ = cancel.cancelled() => return Err(aborted("making the image ready")),
        };
        let inspected = docker
            .inspect_image(&image)
            .await
            .map_err(self.err("reading the image"))?;
        let volumes = inspected
            .config
            .as_ref()
            .and_then(|c| c.volumes.clone())
            .unwrap_or_default();
        if !volumes.is_empty() {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "the image {image} declares VOLUME {volumes:?}, a mount the computer was not asked for: use an image without VOLUME"
                ),
            ));
        }
        let daemon = self.daemon_copy().await?;
        let user = self.user_for(spec)?;
        let limits = self.limits_for(spec, Some(&host))?;
        let shares = crate::share::plan(&spec.shares, &self.opts.cache_dir, user)?;
        let name = Self::new_name()?;
        // The lifetime counts from here: a host that holds the start eats
        // into it.
        let deadline = Time::from_unix_ms(now_ms().saturating_add(spec.lifetime_ms as i64))
            .ok_or_else(|| ProviderError::invalid("lifetime", "the deadline is past any time"))?;
        let mut labels = spec.labels.clone();
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        let allow = egress::list_of(&spec.network)?;
        if let Some(l) = &allow {
            labels.insert(egress::LIST_LABEL.into(), l.join(","));
        }
        let plan = Plan {
            name: name.clone(),
            image,
            user,
            network: spec.network.kind(),
            limits,
            deadline,
            labels,
            daemon,
            shares,
            display: self.opts.desktop.map(|_| desktop::DISPLAY.to_string()),
            egress: allow,
            direct: self
                .opts
                .direct
                .then(|| direct::dir_of(&self.opts.cache_dir, &name)),
        };
        if cancel.is_cancelled() {
            return Err(aborted("creating the computer"));
        }
        let egress_plan = match plan.egress {
            Some(_) => {
                let addresses = self.egress_addresses(&docker, &host).await?;
                self.egress_plan(&plan, addresses)
            }
            None => None,
        };
        // From the first thing made until create returns, a drop of this
        // future still removes what it made, at once.
        let mut unmade = removal::Unmade::arm(self.removal(&docker), &name);
        if plan.direct.is_some()
            && let Err(e) = direct::make(&self.opts.cache_dir, &name)
        {
            unmade.disarm();
            return Err(e);
        }
        // An allowlist's proxy first: the computer is never run without it.
        if let Some(ep) = egress_plan {
            let began = std::time::Instant::now();
            let started = match self.start_egress(&docker, &ep, cancel).await {
                Err(e) if deadline_ms(&plan.deadline) <= now_ms() => Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "its lifetime of {} ended before its egress proxy was ready (it took {:.1} s): {}",
                        crate::types::human_ms(spec.lifetime_ms),
                        began.elapsed().as_secs_f64(),
                        e.message
                    ),
                )),
                r => r,
            };
            if started.is_err() || cancel.is_cancelled() {
                if let Err(e) = self.removal(&docker).egress(&name).await {
                    tracing::warn!(
                        computer = name,
                        "removing a failed egress proxy: {}",
                        e.message
                    );
                }
                unmade.disarm();
                started?;
                return Err(aborted("creating the computer"));
            }
        }
        let made = match docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                plan.body(),
            )
            .await
            .map_err(self.err("making the container"))
        {
            Ok(_) => self.start(&docker, &plan, &host, cancel).await,
            // An engine that failed its answer may still have made it.
            Err(e) => Err((MAKING, e)),
        };
        if made.is_ok() && !cancel.is_cancelled() {
            unmade.disarm();
            return made.map_err(|(_, e)| e);
        }
        // From here the container (and an allowlist's proxy and volume)
        // may exist: gone before the error returns.
        let removed = self.remove_with_parts(&docker, &name).await;
        unmade.disarm();
        if let Err(e) = &removed {
            tracing::warn!(computer = name, "removing a failed computer: {}", e.message);
        }
        if cancel.is_cancelled() {
            return Err(aborted("creating the computer"));
        }
        let Err((step, e)) = made else {
            return Err(aborted("creating the computer"));
        };
        let proxy = plan.egress.is_some();
        let after = match removed {
            // It may never have been made: nothing by its name is left.
            Ok(()) if step == MAKING => format!(
                "no container {name} is left{}",
                if proxy {
                    ", and its egress proxy and volume were deleted"
                } else {
                    ""
                }
            ),
            Ok(()) => format!(
                "the container {name} was deleted{}",
                if proxy {
                    " with its egress proxy and volume"
                } else {
                    ""
                }
            ),
            Err(r) => format!(
                "the container {name} could not be deleted ({}); `computer-mcp sweep` deletes it after its deadline, or docker rm -f {name}",
                r.message
            ),
        };
        Err(ProviderError {
            message: format!(
                "creating the Docker computer failed at {step}: {}; {after}",
                e.message
            ),
            ..e
        })
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        let docker = self.engine()?;
        let host = self.host(cancel).await?;
        host.require()?;
        let v = match by {
            AttachBy::Id(id) => self.find(&docker, id).await?,
            AttachBy::Labels(labels) => {
                let mut found = self.listed(labels, cancel).await?;
                match found.len() {
                    0 => {
                        return Err(ProviderError::not_found(
                            "no Docker computer carries those labels",
                        ));
                    }
                    1 => found.remove(0),
                    n => {
                        return Err(ProviderError::invalid(
                            "labels",
                            format!("{n} computers match those labels; attach by id"),
                        ));
                    }
                }
            }
        };
        let name = name_of(&v).to_string();
        let refuse = |why: Vec<String>| {
            ProviderError::refused(format!(
                "the Docker computer {name} is not what this provider makes, so it was not attached (and left as it is): {}",
                why.join("; ")
            ))
        };
        let plan = self.plan_of(&v).map_err(refuse)?;
        let mut drift = drift::inspect_drift(&plan, &v, &host);
        // The daemon it binds is this provider's own copy (the same bytes
        // give the same path in every process).
        let own = self.daemon_copy().await?;
        if plan.daemon != own {
            drift.push(format!(
                "it binds the daemon {}, where this provider's is {}",
                plan.daemon.display(),
                own.display()
            ));
        }
        let mut network = None;
        if drift.is_empty() {
            let read = self.read_net(&docker, &v).await;
            if let (Some(_), Err(e)) = (&plan.egress, &read) {
                drift.push(e.message.clone());
            }
            network = Some(NetworkRead::of(read));
        }
        if drift.is_empty() && v["State"]["Running"].as_bool() == Some(true) {
            let dir = plan
                .direct
                .as_deref()
                .filter(|d| self.opts.direct && d.is_dir());
            let (client, _) = stream::open(&docker, &self.shown_socket(), &name, dir).await?;
            let conn = Self::hello(client).await?;
            conn.client.close();
            drift.extend(drift::hello_drift(
                &conn.hello,
                &host,
                plan.display.is_some(),
            ));
        }
        if !drift.is_empty() {
            return Err(refuse(drift));
        }
        let mut r = self.to_ref(&v);
        r.network = network;
        Ok(r)
    }

    /// Each computer with its network read back as `network` reads it (an
    /// allowlist from its proxy and volume too, in one more inspect each).
    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let listed = self.listed(labels, cancel).await?;
        let docker = self.engine()?;
        if listed
            .iter()
            .any(|v| !v["Config"]["Labels"][egress::LIST_LABEL].is_null())
        {
            // An allowlist's read-back holds its proxy to the host; a host
            // that cannot be read leaves those computers `other`, in words.
            let _ = self.host(cancel).await;
        }
        let reads = listed.iter().map(|v| {
            let docker = &docker;
            async move {
                let mut r = self.to_ref(v);
                r.network = Some(NetworkRead::of(self.read_net(docker, v).await));
                r
            }
        });
        Ok(futures::future::join_all(reads).await)
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        let docker = self.engine()?;
        let v = self.find(&docker, &computer.id).await?;
        self.host(cancel).await?;
        let read = self.read_net(&docker, &v).await?;
        if let Some(p) = policy
            && p.kind() != read.kind
        {
            return Err(ProviderError::unsupported(format!(
                "a Docker computer's network is fixed when it is made (it is {}); make another computer",
                read.kind
            ))
            .with_field("network"));
        }
        if let Some(asked) = policy.map(egress::list_of).transpose()?.flatten() {
            let held = v["Config"]["Labels"][egress::LIST_LABEL]
                .as_str()
                .map(egress::list_in_label)
                .unwrap_or_default();
            if asked != held {
                return Err(ProviderError::unsupported(format!(
                    "a Docker computer's network is fixed when it is made (it is allow {}); make another computer",
                    held.join(", ")
                ))
                .with_field("network"));
            }
        }
        Ok(read)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        if !plan::is_computer_name(&computer.id) {
            return Err(ProviderError::not_found(format!(
                "{:?} is not a Docker computer's name (computer-<12 hex digits>)",
                computer.id
            )));
        }
        let docker = self.engine()?;
        let host = self.host(cancel).await?;
        let dir = direct::dir_of(&self.opts.cache_dir, &computer.id);
        let dir = (self.opts.direct && dir.is_dir()).then_some(dir);
        let opened =
            stream::open(&docker, &self.shown_socket(), &computer.id, dir.as_deref()).await;
        let client = match opened {
            Ok((c, route)) => {
                tracing::debug!(computer = computer.id, ?route, "connected");
                c
            }
            Err(e) if e.code == ErrorCode::NotFound => {
                return Err(ProviderError::gone(format!(
                    "the Docker computer {} is gone",
                    computer.id
                )));
            }
            Err(e) if e.code == ErrorCode::Refused => {
                // 409: the container is not running.
                return Err(ProviderError::gone(format!(
                    "the Docker computer {} has stopped",
                    computer.id
                )));
            }
            Err(e) => return Err(e),
        };
        let conn = Self::hello(client).await?;
        let drift = drift::hello_drift(&conn.hello, &host, self.opts.desktop.is_some());
        if !drift.is_empty() {
            conn.client.close();
            return Err(ProviderError::refused(format!(
                "the computer's daemon is not this provider's: {}",
                drift.join("; ")
            )));
        }
        if !self.runs_chromium() {
            return Ok(conn);
        }
        // An allowlisted computer's browser goes through its proxy's relay.
        let (allowlisted, bounds) = match self.find(&docker, &computer.id).await {
            Ok(v) => (
                !v["Config"]["Labels"][egress::LIST_LABEL].is_null(),
                sizes_of(&v),
            ),
            Err(e) => {
                conn.client.close();
                return Err(e);
            }
        };
        let desktop = self.opts.desktop.is_some();
        let Some(program) = crate::cdp::chromium::find_in_computer(&conn.client).await else {
            conn.client.close();
            return Err(ProviderError::refused(format!(
                "the Docker computer {} has no Chromium any more (none at {})",
                computer.id,
                crate::cdp::chromium::CHROMIUM_PATHS.join(", ")
            )));
        };
        let launch = crate::cdp::Launch {
            program: program.into(),
            profile: crate::cdp::chromium::PROFILE.into(),
            headless: !desktop,
            proxy: allowlisted.then(|| crate::local::browser::EGRESS_PROXY.to_string()),
            debugging: crate::cdp::chromium::Debugging::Pipe,
        };
        let client = crate::cdp::BrowserClient::in_computer(
            conn.client,
            &conn.hello,
            if desktop {
                conn.hello.kind
            } else {
                MachineKind::Browser
            },
            &launch,
            Default::default(),
        )
        .bounded_by(bounds);
        // A browser is handed out running; a desktop's starts when a page
        // tool first needs it (shown on its screen).
        if !desktop {
            client.start().await.map_err(|e| {
                ProviderError::new(
                    e.code,
                    format!("the Docker computer {}: {}", computer.id, e.message),
                )
            })?;
        }
        let hello = client.hello().clone();
        Ok(Connection {
            client: Arc::new(client),
            hello,
        })
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        _cancel: &CancellationToken,
    ) -> Result<()> {
        let docker = self.engine()?;
        // Only our own: a name of ours with our label.
        match self.find(&docker, &computer.id).await {
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::NotFound && plan::is_computer_name(&computer.id) => {
                // Its parts, should any be left.
                direct::remove(&self.opts.cache_dir, &computer.id);
                return self.removal(&docker).egress(&computer.id).await;
            }
            Err(e) => return Err(e),
        }
        match how {
            Release::Delete => self.remove_with_parts(&docker, &computer.id).await,
            Release::Stop => match docker
                .stop_container(
                    &computer.id,
                    Some(StopContainerOptionsBuilder::new().t(STOP_WAIT_S).build()),
                )
                .await
            {
                Ok(()) => Ok(()),
                Err(e) if host::is_not_found(&e) => Ok(()),
                // 304: already stopped.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304, ..
                }) => Ok(()),
                Err(e) => Err(host::docker_error(
                    &self.shown_socket(),
                    "stopping the computer",
                    e,
                )),
            }
            .and(self.stop_egress(&docker, &computer.id).await),
        }
    }

    fn preflight(&self) -> Vec<crate::Preflight> {
        vec![cache::preflight(&self.opts.computerd)]
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let now = now_ms();
        let limit = now.saturating_add(self.opts.max_lifetime_ms as i64 + SKEW_MS);
        let mut deleted = Vec::new();
        let mut failed = Vec::new();
        for v in self.listed(&Labels::new(), cancel).await? {
            if cancel.is_cancelled() {
                return Err(aborted("the sweep"));
            }
            let name = name_of(&v).to_string();
            let deadline = v["Config"]["Labels"][label::DEADLINE]
                .as_str()
                .and_then(|d| d.parse::<Time>().ok())
                .map(|t| deadline_ms(&t));
            // Past its deadline, or a deadline no computer of ours carries.
            let expired = deadline.is_none_or(|d| d <= now || d > limit);
            if !expired {
                continue;
            }
            let docker = self.engine()?;
            match self.remove_with_parts(&docker, &name).await {
                Ok(()) => deleted.push(name),
                Err(e) => failed.push(format!("{name}: {}", e.message)),
            }
        }
        // Direct directories with no computer (the computers listed, less
        // those just deleted).
        let live: Vec<String> = self
            .listed(&Labels::new(), cancel)
            .await?
            .iter()
            .map(|v| name_of(v).to_string())
            .collect();
        let dirs = direct::sweep(&self.opts.cache_dir, &live);
        if !dirs.is_empty() {
            tracing::info!("the sweep removed direct directories left behind: {dirs:?}");
        }
        // Proxies and volumes left with no computer (not computers: not
        // counted in what the sweep deleted).
        match self.sweep_egress(now, limit).await {
            Ok(parts) if !parts.is_empty() => {
                tracing::info!("the sweep removed egress proxies left behind: {parts:?}");
            }
            Ok(_) => {}
            Err(e) => failed.push(e.message),
        }
        if !failed.is_empty() {
            return Err(ProviderError::failed(format!(
                "the sweep could not delete {} (it deleted {:?})",
                failed.join("; "),
                deleted
            )));
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> DockerProvider {
        let mut o =
            DockerOptions::new("/usr/bin/computerd".into(), "/tmp/cmcp-docker-cache".into());
        o.image = Some(ImageSource::Name("debian:bookworm".into()));
        DockerProvider::new(o).unwrap()
    }

    #[test]
    fn host_addresses_are_ip_addresses_and_a_bad_one_is_refused_naming_the_flag() {
        assert_eq!(
            parse_host_addresses(" 203.0.113.7,2001:db8::7 ,203.0.113.7").unwrap(),
            [
                "203.0.113.7".parse::<std::net::IpAddr>().unwrap(),
                "2001:db8::7".parse().unwrap()
            ]
        );
        for bad in ["", "203.0.113.7,", "example.com", "203.0.113.0/24"] {
            let e = parse_host_addresses(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("host_addresses"), "{bad}");
            assert!(
                e.message.starts_with("--docker-host-addresses: ")
                    && e.message.contains("is not an IP address"),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn a_desktop_declares_the_page_tools_only_when_told_its_image_has_chromium() {
        let made = |desktop: bool, desktop_browser: bool, browser: bool| {
            let mut o = DockerOptions::new("/c".into(), "/tmp/x".into());
            o.desktop = desktop.then(|| "1280x800".parse().unwrap());
            o.desktop_browser = desktop_browser;
            o.browser = browser;
            let caps = DockerProvider::new(o).unwrap().capabilities();
            (caps.kind, caps.groups.contains(&Group::Cdp))
        };
        assert_eq!(made(true, false, false), (MachineKind::Desktop, false));
        assert_eq!(made(true, true, false), (MachineKind::Desktop, true));
        assert_eq!(made(false, false, true), (MachineKind::Browser, true));
        // Without a desktop the setting means nothing.
        assert_eq!(made(false, true, false), (MachineKind::Linux, false));
    }

    fn refused(spec: &ComputerSpec) -> ProviderError {
        provider().check(spec).unwrap_err()
    }

    #[test]
    fn check_refuses_in_words_with_no_docker_call() {
        let mut s = ComputerSpec::sandbox(MAX_LIFETIME_MS + 1);
        let e = refused(&s);
        assert_eq!(e.field.as_deref(), Some("lifetime"));
        assert_eq!(
            e.message,
            "lifetime 2592000001 ms is over this provider's most, 30 d"
        );
        s.lifetime_ms = 60_000;
        assert!(provider().check(&s).is_ok());
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "*.pythonhosted.org".into()]);
        assert!(provider().check(&s).is_ok());
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "10.0.0.0/8".into()]);
        let e = refused(&s);
        assert_eq!(e.field.as_deref(), Some("network"));
        assert!(
            e.message
                .contains("\"10.0.0.0/8\": the range holds private"),
            "{}",
            e.message
        );
        s.network = NetworkPolicy::Allow(vec![]);
        assert_eq!(refused(&s).field.as_deref(), Some("network"));
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into()]);
        s.user = Some(format!("{}", egress::UID));
        assert_eq!(refused(&s).field.as_deref(), Some("user"));
        s.user = None;
        s.labels.insert(egress::LIST_LABEL.into(), "x.y".into());
        assert_eq!(refused(&s).field.as_deref(), Some("labels"));
        s.labels.clear();
        s.network = NetworkPolicy::None;
        s.user = Some("root".into());
        assert_eq!(refused(&s).field.as_deref(), Some("user"));
        s.user = None;
        s.sizes.disk_mb = Some(10);
        assert_eq!(refused(&s).field.as_deref(), Some("diskMb"));
        s.sizes.disk_mb = None;
        s.shares = vec!["relative/dir".parse().unwrap()];
        assert!(refused(&s).message.contains("is a relative path"));
        s.shares = vec![];
        s.labels.insert(label::DEADLINE.into(), "x".into());
        assert_eq!(refused(&s).field.as_deref(), Some("labels"));
    }

    #[test]
    fn with_no_image_anywhere_check_says_where_to_give_one() {
        let p = DockerProvider::new(DockerOptions::new("/c".into(), "/tmp/x".into())).unwrap();
        let e = p.check(&ComputerSpec::sandbox(60_000)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("image"));
    }

    #[test]
    fn the_provider_user_is_never_root() {
        let mut o = DockerOptions::new("/c".into(), "/tmp/x".into());
        o.user = Some((1000, 0));
        assert_eq!(
            DockerProvider::new(o).err().unwrap().field.as_deref(),
            Some("user")
        );
    }

    #[test]
    fn attach_reads_the_plan_back_from_the_inspect() {
        let p = provider();
        let deadline: Time = "2026-12-01T10:00:00Z".parse().unwrap();
        let mut labels = Labels::from([("k".to_string(), "v".to_string())]);
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        let plan = Plan {
            name: "computer-0123456789ab".into(),
            image: "debian:bookworm".into(),
            user: (1000, 1001),
            network: NetworkKind::Open,
            limits: Limits {
                cpus: 1.5,
                memory_mb: 512,
                pids: 100,
            },
            deadline,
            labels,
            daemon: "/cache/computerd-abc".into(),
            display: None,
            egress: None,
            direct: Some("/tmp/cmcp-docker-cache/direct/computer-0123456789ab".into()),
            shares: vec![Share {
                source: "/srv/ws".into(),
                target: WORKSPACE.into(),
                read_only: true,
            }],
        };
        let body = serde_json::to_value(plan.body()).unwrap();
        let mut config = body.clone();
        config.as_object_mut().unwrap().remove("HostConfig");
        let v = serde_json::json!({
            "Name": "/computer-0123456789ab",
            "Created": "2026-12-01T09:00:00Z",
            "HostConfig": body["HostConfig"],
            "Config": config,
        });
        assert_eq!(p.plan_of(&v).unwrap(), plan);
        // A deadline further than 30 days from creation is not ours.
        let mut far = v.clone();
        far["Created"] = "2026-10-01T09:00:00Z".into();
        let bad = p.plan_of(&far).unwrap_err();
        assert!(
            bad[0].contains("more than 30 days after it was made"),
            "{bad:?}"
        );
        // A direct directory that is not this computer's own is not ours.
        let mut wide = v.clone();
        wide["HostConfig"]["Mounts"][1]["Source"] = "/".into();
        let bad = p.plan_of(&wide).unwrap_err();
        assert!(
            bad[0].starts_with("/run/computerd-host is bound from /, where this provider binds a computer's own directory /tmp/cmcp-docker-cache/direct/computer-0123456789ab there"),
            "{bad:?}"
        );
    }

    #[test]
    fn the_network_reads_back_from_inspect() {
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "none"}, "NetworkSettings": {"Networks": {"none": {}}}});
        assert_eq!(read_network(&v).unwrap().kind, NetworkKind::None);
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "bridge"}, "NetworkSettings": {"Networks": {"bridge": {}}}});
        assert_eq!(read_network(&v).unwrap().kind, NetworkKind::Open);
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "host"}, "NetworkSettings": {"Networks": {"host": {}}}});
        assert_eq!(read_network(&v).unwrap_err().code, ErrorCode::Refused);
    }
}
