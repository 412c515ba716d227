//! What a user sets of the Docker provider (flags, variables and its
//! `[providers.docker]` table), the options it runs on, and how the
//! registry makes it from them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{DEFAULT_SOCKET, DockerProvider, ImageSource, MAX_LIFETIME_MS, cache, plan, survey};
use crate::provider::{Configure, Preflight};
use crate::settings::{HostDefaults, Table};
use crate::types::{ProviderError, Result};

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

    async fn survey(table: Option<&Table>, host: &HostDefaults) -> Vec<Preflight> {
        survey::survey(table, host).await
    }
}
