//! What a user sets of the local provider (flags, variables and its
//! `[providers.local]` table), the options it runs on, and how the
//! registry makes it from them.

use std::path::PathBuf;

use computerd::launch::Screen;
use serde::{Deserialize, Serialize};

use super::LocalProvider;
use crate::provider::Configure;
use crate::settings::HostDefaults;
use crate::types::{ProviderError, Result};

/// How a local computer is kept from its host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// computerd's own namespaces (the default): a read-only view of this
    /// machine, a private /tmp, its own processes and, with network none,
    /// only its own loopback (a user namespace too when the server is not
    /// root).
    #[default]
    Namespaces,
    /// No isolation at all: programs run on this machine as the server's
    /// user and can read and change anything it can. UNSAFE; only for
    /// hosts that cannot make namespaces, and only when asked for by name.
    None,
}

fn default_max_lifetime() -> u64 {
    7 * 24 * 3600 * 1000
}

/// What a user sets of the local provider: flags `--local-<key>`,
/// variables `COMPUTER_MCP_LOCAL_<KEY>`, keys of `[providers.local]`.
/// Defaults that need the environment come from [`HostDefaults`].
#[derive(Clone, Debug, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The local provider (--provider local)")]
#[serde(deny_unknown_fields)]
pub struct LocalSettings {
    /// Where the local provider keeps computers' files. [default: /var/lib/computer-mcp as root, else $XDG_STATE_HOME/computer-mcp or ~/.local/state/computer-mcp]
    #[arg(id = "local.state_dir", long = "local-state-dir", value_name = "DIR")]
    #[arg(env = "COMPUTER_MCP_LOCAL_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// The computerd binary. [default: `computerd` beside this binary, else this binary itself]
    #[arg(id = "local.computerd", long = "local-computerd", value_name = "PATH")]
    #[arg(env = "COMPUTER_MCP_LOCAL_COMPUTERD")]
    pub computerd: Option<PathBuf>,
    /// How a local computer is kept from this machine.
    #[arg(
        id = "local.isolation",
        long = "local-isolation",
        value_name = "HOW",
        value_enum
    )]
    #[arg(default_value = "namespaces")]
    #[arg(env = "COMPUTER_MCP_LOCAL_ISOLATION")]
    pub isolation: Isolation,
    /// With a root server: the uid:gid every computer's programs run as. [default: a uid of its own for each computer, which no host account or other computer has]
    #[arg(id = "local.run_as", long = "local-run-as", value_name = "UID:GID")]
    #[arg(env = "COMPUTER_MCP_LOCAL_RUN_AS")]
    pub run_as: Option<String>,
}

/// The local provider's options, resolved: everything it runs on.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// Where computers' files live (made if missing, 0700).
    pub state_dir: PathBuf,
    /// The computerd binary.
    pub computerd: PathBuf,
    pub isolation: Isolation,
    /// With a root server: the uid:gid programs run as (default 65534:65534).
    pub run_as: Option<String>,
    pub max_lifetime_ms: u64,
    /// Bound each computer by a cgroup where the host allows (always, for
    /// a server: no setting turns it off; the create bench compares).
    pub cgroups: bool,
    /// Make desktops with this screen (the server's `--kind desktop`):
    /// each computer's init starts this machine's Xvfb ([`desktop`]).
    pub desktop: Option<Screen>,
    /// Make browsers (the server's `--kind browser`): each computer's
    /// connection starts this machine's Chromium inside it ([`browser`]).
    pub browser: bool,
    /// The DNS servers an allowlist's egress proxy asks (`computerd egress
    /// --resolver`); empty: this machine's /etc/resolv.conf. For tests
    /// that bring their own resolver.
    pub egress_resolvers: Vec<std::net::SocketAddr>,
}

impl LocalOptions {
    /// Computers under `state_dir` from `computerd`, isolated by namespaces,
    /// with the other options at their defaults.
    pub fn new(state_dir: PathBuf, computerd: PathBuf) -> Self {
        Self {
            state_dir,
            computerd,
            isolation: Isolation::Namespaces,
            run_as: None,
            max_lifetime_ms: default_max_lifetime(),
            cgroups: true,
            desktop: None,
            browser: false,
            egress_resolvers: Vec::new(),
        }
    }
}

pub(super) fn parse_uid_gid(s: &str) -> Result<(u32, u32)> {
    let bad = || {
        ProviderError::invalid(
            "run_as",
            format!("--local-run-as {s:?} is not uid:gid (two numbers)"),
        )
    };
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

impl Configure for LocalProvider {
    type Settings = LocalSettings;

    fn configure(settings: LocalSettings, host: &HostDefaults) -> Result<Self> {
        let invalid = |field: &'static str| move |e: String| ProviderError::invalid(field, e);
        let state_dir = settings
            .state_dir
            .or_else(|| host.state_dir.clone())
            .ok_or_else(|| {
                "no state directory: set HOME, XDG_STATE_HOME or --local-state-dir".to_string()
            })
            .and_then(|d| host.absolute("--local-state-dir", d))
            .map_err(invalid("state_dir"))?;
        let computerd = settings
            .computerd
            .or_else(|| host.computerd.clone())
            .ok_or_else(|| "cannot find this binary; give --local-computerd".to_string())
            .and_then(|p| host.absolute("--local-computerd", p))
            .map_err(invalid("computerd"))?;
        if settings.isolation == Isolation::None {
            tracing::warn!(
                "isolation none: computers run on this machine with the server's own rights; this is unsafe"
            );
        }
        Self::new(LocalOptions {
            isolation: settings.isolation,
            run_as: settings.run_as,
            desktop: host.desktop(),
            browser: host.browser(),
            ..LocalOptions::new(state_dir, computerd)
        })
    }
}
