//! Configuration: flags, then `COMPUTER_MCP_*` variables, then an optional
//! TOML file, then defaults. This crate is the only one that reads the
//! environment; everything below it takes typed options.
//!
//! Each option is defined once, as a field of a struct that is both a clap
//! `Args` (its flag, variable and default) and serde's (its key in the file):
//! [`Config`] for every command, [`ServeArgs`] for `serve` (the file's
//! `[http]` table), and each provider's own settings (`--<id>-<key>`,
//! `[providers.<id>]`, see `computer_providers::registry`). One generic merge,
//! `computer_providers::layer`, layers them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, ArgMatches, Args, CommandFactory, FromArgMatches};
use computer_providers::share::ShareArg;
use computer_providers::{ComputerSpec, NetworkPolicy, label};
use computer_providers::{HostDefaults, Table, layer, unknown_option, with_provider_flags};
use computer_tools::registry;
use computerd::launch::Screen;
use computerd::protocol::SettingKind;
use serde::{Deserialize, Serialize};

mod commands;
mod fleet;
mod viewer;

pub use commands::{
    Cli, Command, ComputersCommand, ConformanceArgs, ExecArgs, PortsCommand, ReceiptsArgs,
    SweepArgs,
};
pub use fleet::FleetLimits;

/// The network every computer of this server reaches: `none`, `open`,
/// `public` (every public host, through the egress proxy) or
/// `allow:NAME[,NAME…]` (names, `*.suffix` wildcards and CIDRs). In a TOML
/// file, also a list of entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkArg {
    /// Only the computer's own loopback (the default).
    None,
    /// Whatever this machine reaches, its own loopback services included.
    Open,
    /// Every public host, through the egress proxy.
    Public,
    /// The names, wildcards and CIDRs of the list, through the egress
    /// proxy (checked, normalized).
    Allow(Vec<String>),
}

impl NetworkArg {
    /// The policy every computer is made with.
    pub fn policy(&self) -> NetworkPolicy {
        match self {
            NetworkArg::None => NetworkPolicy::None,
            NetworkArg::Open => NetworkPolicy::Open,
            NetworkArg::Public => {
                NetworkPolicy::Allow(vec![computerd::protocol::egress::PUBLIC.into()])
            }
            NetworkArg::Allow(list) => NetworkPolicy::Allow(list.clone()),
        }
    }

    fn from_list(entries: &[String]) -> Result<NetworkArg, String> {
        let list = computerd::protocol::egress::Allowlist::parse(entries)
            .map_err(|e| format!("--network allow: {e}"))?;
        Ok(if list.public {
            NetworkArg::Public
        } else {
            NetworkArg::Allow(list.entries())
        })
    }
}

impl std::str::FromStr for NetworkArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(NetworkArg::None),
            "open" => Ok(NetworkArg::Open),
            "public" => Ok(NetworkArg::Public),
            t => match t.strip_prefix("allow:") {
                Some(list) => {
                    let entries: Vec<String> = list
                        .split(',')
                        .map(str::trim)
                        .filter(|e| !e.is_empty())
                        .map(String::from)
                        .collect();
                    NetworkArg::from_list(&entries)
                }
                None => Err(format!(
                    "--network {t:?} is none, open, public or allow:NAME[,NAME...] (names, *.suffix wildcards and CIDRs, e.g. allow:pypi.org,*.pythonhosted.org)"
                )),
            },
        }
    }
}

impl std::fmt::Display for NetworkArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetworkArg::None => f.write_str("none"),
            NetworkArg::Open => f.write_str("open"),
            NetworkArg::Public => f.write_str("public"),
            NetworkArg::Allow(l) => write!(f, "allow:{}", l.join(",")),
        }
    }
}

impl Serialize for NetworkArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for NetworkArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Text(String),
            List(Vec<String>),
        }
        match Written::deserialize(d)? {
            Written::Text(t) => t.parse().map_err(serde::de::Error::custom),
            Written::List(l) => NetworkArg::from_list(&l).map_err(serde::de::Error::custom),
        }
    }
}

/// The server's options for every command (its root flags, which are taken
/// after a subcommand too; the file's top-level keys), resolved.
#[derive(Args, Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// A TOML file with any of these options.
    #[arg(long = "config", value_name = "FILE", env = "COMPUTER_MCP_CONFIG")]
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// Where computers come from.
    #[arg(
        long,
        value_name = "ID",
        env = "COMPUTER_MCP_PROVIDER",
        default_value = "local"
    )]
    pub provider: String,
    /// How long a computer may live (30m, 6h, 2d).
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_LIFETIME")]
    #[arg(default_value = DEFAULT_LIFETIME_TEXT, value_parser = duration)]
    #[serde(with = "text")]
    pub lifetime: Duration,
    /// How long a snapshot (computer_snapshot) is kept before the sweep deletes it (30m, 6h, 2d).
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_SNAPSHOT_TTL")]
    #[arg(default_value = "24h", value_parser = duration)]
    #[serde(with = "text")]
    pub snapshot_ttl: Duration,
    /// The network a computer reaches: none; open (whatever this machine reaches, its own loopback services included); public (every public host, through an egress proxy that refuses private, loopback, link-local, metadata and this machine's addresses); or allow:NAME[,NAME...] (only these names, *.suffix wildcards and CIDRs, on ports 80 and 443, through the same proxy).
    #[arg(long, value_name = "NETWORK", env = "COMPUTER_MCP_NETWORK", default_value = "none", value_parser = |s: &str| s.parse::<NetworkArg>())]
    pub network: NetworkArg,
    /// What a computer is: sandbox (a shell, files, processes); desktop (a screen, a keyboard and a mouse too; needs Xvfb, Debian's package xvfb); or browser (a headless Chromium in the computer, driven by page tools; needs Debian's package chromium). `conformance --kind` names the kind whose cases run (phone too).
    #[arg(
        long,
        value_name = "KIND",
        env = "COMPUTER_MCP_KIND",
        default_value = "sandbox"
    )]
    pub kind: String,
    /// A desktop's screen in pixels.
    #[arg(
        long,
        value_name = "WxH",
        env = "COMPUTER_MCP_SCREEN",
        default_value = "1280x800"
    )]
    pub screen: Screen,
    /// The most a screenshot shows the model: it fits WxH (either way round) and about 1.15 megapixels, or WxH's pixels if more (1920x1080 for the newest models); each side at most 2000.
    #[arg(
        long,
        value_name = "WxH",
        env = "COMPUTER_MCP_SCREENSHOT_MAX",
        default_value = "1280x800"
    )]
    pub screenshot_max: Screen,
    /// Each computer's CPU quota, 0.25 up to this machine's CPUs. [default: 2, or this machine's CPUs if fewer]
    #[arg(long, value_name = "N", env = "COMPUTER_MCP_CPUS")]
    pub cpus: Option<f64>,
    /// Each computer's memory in MiB, 64 up to this machine's (swap the same); /work and /tmp hold half of it each. [default: 4096]
    #[arg(long, value_name = "MIB", env = "COMPUTER_MCP_MEMORY_MB")]
    pub memory_mb: Option<u64>,
    /// The most processes and threads one computer runs at once, 16 to 32768. [default: 1024]
    #[arg(long, value_name = "N", env = "COMPUTER_MCP_PIDS")]
    pub pids: Option<u64>,
    /// A host directory every computer sees at /workspace: DIR, or DIR:ro for read-only (repeat for more, each then at /workspace/<name>). It must exist and be canonical. Local and Docker bind it: then it must be writable by the computer's user unless :ro (a root server's local computers are given an ACL entry on it for their life instead, and what they write there is given to the folder's owner at release). Vendors and Kubernetes get a copy at creation, and a read-write one is copied back at release and by `cp --sync COMPUTER`. An empty value shares nothing.
    #[arg(long = "share", value_name = "DIR[:ro]", env = "COMPUTER_MCP_SHARE")]
    #[arg(value_delimiter = ',')]
    pub share: Vec<String>,
    /// Keep computers when a session ends (they end at their lifetime). The variable takes true/false/1/0.
    #[arg(long, action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    #[arg(env = "COMPUTER_MCP_KEEP")]
    pub keep: bool,
    /// This server's name in its computers' labels. [default: a random one]
    #[arg(long, value_name = "NAME", env = "COMPUTER_MCP_INSTANCE")]
    #[arg(default_value = "", hide_default_value = true)]
    pub instance: String,
    /// The most text one tool result carries before it is cut in the middle (bytes, 1024 to 1048576).
    #[arg(long, value_name = "BYTES", env = "COMPUTER_MCP_OUTPUT_BUDGET")]
    #[arg(default_value_t = 24 * 1024)]
    pub output_budget: usize,
    /// exec's timeout when the model gives none.
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_EXEC_TIMEOUT")]
    #[arg(default_value = "2m", value_parser = duration)]
    #[serde(with = "text")]
    pub exec_timeout: Duration,
    /// The most timeout a model may ask of exec.
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_EXEC_MAX_TIMEOUT")]
    #[arg(default_value = "10m", value_parser = duration)]
    #[serde(with = "text")]
    pub exec_max_timeout: Duration,
    /// List each tool's output schema in tools/list, for clients that check structured results against it. Off, every result still carries its structured content; the schemas only cost a model's context. The variable takes true/false/1/0.
    #[arg(long, action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    #[arg(env = "COMPUTER_MCP_OUTPUT_SCHEMAS")]
    #[serde(default)]
    pub output_schemas: bool,
    /// Log level on stderr: error, warn, info, debug, trace, or a tracing filter.
    #[arg(
        long,
        value_name = "LEVEL",
        env = "COMPUTER_MCP_LOG",
        default_value = "info"
    )]
    pub log: String,
    /// `serve`'s HTTP options, resolved; none for stdio and the other commands.
    #[arg(skip)]
    #[serde(skip)]
    pub http: Option<HttpConfig>,
    /// `serve --viewer`'s address, resolved (stdio only).
    #[arg(skip)]
    #[serde(skip)]
    pub viewer: Option<SocketAddr>,
    /// `serve`'s bounds on computers (defaults for the other commands).
    #[arg(skip)]
    #[serde(skip)]
    pub fleet: FleetLimits,
    /// Where the server keeps what outlives it: the receipts journal (receipts.jsonl) that `computer-mcp receipts` and a restarted server read. [default: /var/lib/computer-mcp as root, else $XDG_STATE_HOME/computer-mcp or ~/.local/state/computer-mcp]
    #[arg(long, value_name = "DIR", env = "COMPUTER_MCP_STATE_DIR")]
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// The file's `[prices.<id>]` tables over the vendors' published
    /// prices (a receipt's estimated cost).
    #[arg(skip)]
    #[serde(skip)]
    pub prices: crate::receipts::price::Prices,
    /// The file's `[providers]` table: one table per provider id, for the
    /// registry to check and the chosen provider to read.
    #[arg(skip)]
    #[serde(skip)]
    pub providers: Table,
}

/// `serve`'s options (the file's `[http]` table).
#[derive(Args, Debug, Clone, Serialize, Deserialize)]
#[command(next_help_heading = "Options of serve (the file's [http])")]
#[serde(deny_unknown_fields)]
pub struct ServeArgs {
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8700) instead of stdio.
    #[arg(long = "http", value_name = "ADDR", env = "COMPUTER_MCP_HTTP")]
    pub listen: Option<String>,
    /// A bearer token HTTP clients may send (repeat for several callers: each token is its own caller, with its own computers). [default: a random one, printed to stderr; required for a non-loopback address]
    #[arg(
        long,
        value_name = "TOKEN",
        env = "COMPUTER_MCP_TOKEN",
        hide_env_values = true
    )]
    #[arg(value_delimiter = ',')]
    pub token: Vec<String>,
    /// A browser Origin allowed to call (repeat).
    #[arg(
        long = "allowed-origin",
        value_name = "ORIGIN",
        env = "COMPUTER_MCP_ALLOWED_ORIGINS"
    )]
    #[arg(value_delimiter = ',', default_values = DEFAULT_ORIGINS)]
    pub allowed_origins: Vec<String>,
    /// A Host header allowed (repeat), beside the listening address's own and localhost, 127.0.0.1, ::1 (always allowed).
    #[arg(
        long = "allowed-host",
        value_name = "HOST",
        env = "COMPUTER_MCP_ALLOWED_HOSTS"
    )]
    #[arg(value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// A computer unused this long is released, and an HTTP session idle this long is ended.
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_SESSION_IDLE")]
    #[arg(default_value = "30m", value_parser = duration)]
    #[serde(with = "text")]
    pub session_idle: Duration,
    /// The most computers one caller (a token, or the stdio client) holds at once, its default one included.
    #[arg(long, value_name = "N", env = "COMPUTER_MCP_MAX_COMPUTERS")]
    #[arg(default_value_t = 4)]
    pub max_computers: usize,
    /// The most computers this server holds at once, all callers together.
    #[arg(long, value_name = "N", env = "COMPUTER_MCP_MAX_SERVER_COMPUTERS")]
    #[arg(default_value_t = 16)]
    pub max_server_computers: usize,
    /// Over stdio, serve the live viewer (computer_view's links) on this loopback address, e.g. 127.0.0.1:0 (over --http it is served at /view of the same address).
    #[arg(long, value_name = "ADDR", env = "COMPUTER_MCP_VIEWER")]
    #[serde(default)]
    pub viewer: Option<String>,
    /// How long a computer_view link works from when it is given, 10s to 24h.
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_VIEWER_LINK_TTL")]
    #[arg(default_value = "30m", value_parser = duration)]
    #[serde(with = "text")]
    pub viewer_link_ttl: Duration,
    /// A page Origin, besides the viewer's own and a sandboxed frame's (`null`), that may open the viewer's socket (repeat): a host that renders the viewer's MCP App on a domain of its own, e.g. https://apps.example.com. The socket still needs the link's token.
    #[arg(
        long = "viewer-origin",
        value_name = "ORIGIN",
        env = "COMPUTER_MCP_VIEWER_ORIGINS"
    )]
    #[arg(value_delimiter = ',')]
    #[serde(default)]
    pub viewer_origins: Vec<String>,
}

/// The browser Origins allowed over HTTP when none are given.
const DEFAULT_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];
/// The Host headers always allowed over HTTP.
const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// `serve`'s HTTP options, resolved.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub listen: SocketAddr,
    /// The tokens (each its own caller), and whether they were given
    /// (false: one made up and printed).
    pub tokens: Vec<String>,
    pub token_given: bool,
    /// serve's options as layered, with the loopback names and the
    /// listening address added to `allowed_hosts`.
    pub options: ServeArgs,
}

/// The whole command line: the server's own options (every root option
/// taken after a subcommand too) and every provider's.
pub fn command() -> clap::Command {
    with_provider_flags(Cli::command().mut_args(|a| a.global(true)))
}

/// A parsed command line: the typed one, and clap's matches for layering.
pub struct Parsed {
    pub cli: Cli,
    pub matches: ArgMatches,
}

/// Why a command line was refused.
pub enum ArgsError {
    /// clap's own (usage, `--help`, `--version`).
    Clap(clap::Error),
    /// Ours, in words.
    Words(String),
}

/// Parse a command line (argv with the binary's name first).
pub fn parse_from<I, T>(argv: I) -> Result<Parsed, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command().try_get_matches_from(argv).map_err(|e| {
        // A provider-scoped flag that is none of the provider's options:
        // name the ones it has (clap would name the closest one at most).
        if e.kind() == ErrorKind::UnknownArgument
            && let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg)
            && let Some(words) = unknown_option(arg)
        {
            return ArgsError::Words(words);
        }
        if e.kind() == ErrorKind::UnknownArgument
            && let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg)
            && let Some(words) = serve_only(arg)
        {
            return ArgsError::Words(words);
        }
        ArgsError::Clap(e)
    })?;
    let cli = Cli::from_arg_matches(&matches).map_err(ArgsError::Clap)?;
    Ok(Parsed { cli, matches })
}

/// Words for one of serve's own options given before any subcommand
/// (`computer-mcp --viewer 127.0.0.1:0`): bare `computer-mcp` is serve over
/// stdio, but its options come after the word (or from their variables).
fn serve_only(arg: &str) -> Option<String> {
    let flag = arg.split_once('=').map_or(arg, |(f, _)| f);
    let serve = ServeArgs::augment_args(clap::Command::new("serve"));
    let known = serve
        .get_arguments()
        .find(|a| a.get_long().is_some_and(|l| flag == format!("--{l}")))?;
    let variable = known
        .get_env()
        .map(|v| format!(", or set {}", v.to_string_lossy()))
        .unwrap_or_default();
    Some(format!(
        "{flag} is an option of serve: put it after the word (`computer-mcp serve {flag} ...`; bare `computer-mcp` is serve over stdio){variable}"
    ))
}

/// Durations in the file and back (for layering): text, as on the command line.
mod text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::duration(&text).map_err(serde::de::Error::custom)
    }
}

/// A duration option's value.
fn duration(s: &str) -> Result<Duration, String> {
    parse_duration("the value", s)
}

/// How long a computer lives unless told otherwise (the flag's default).
pub const DEFAULT_LIFETIME_TEXT: &str = "6h";
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(6 * 3600);

/// "90s", "30m", "6h", "2d", "1500ms", or a plain number of seconds.
pub fn parse_duration(field: &str, s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{field} {s:?} is not a duration such as 90s, 30m, 6h or 2d"))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" | "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    }
    .ok_or_else(|| format!("{field} {s:?} is not a duration such as 90s, 30m, 6h or 2d"))?;
    if ms == 0 {
        return Err(format!("{field} must be above 0"));
    }
    Ok(Duration::from_millis(ms))
}

/// A fresh random token or name, from the OS's random source; an error
/// (never a predictable value) when that cannot be read.
pub fn random_token() -> Result<String, String> {
    computer_providers::random::random_hex(24).map_err(|e| e.message)
}

impl Config {
    /// `--state-dir`, or this host's default.
    pub fn server_state_dir(&self) -> Option<PathBuf> {
        self.state_dir.clone().or_else(|| {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from);
            default_state_dir(home.as_deref())
        })
    }
}

fn default_state_dir(home: Option<&Path>) -> Option<PathBuf> {
    if nix::unistd::geteuid().is_root() {
        return Some(PathBuf::from("/var/lib/computer-mcp"));
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("computer-mcp"));
    }
    home.map(|h| h.join(".local/state/computer-mcp"))
}

fn default_computerd() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let beside = me.with_file_name("computerd");
    if beside.is_file() {
        return Some(beside);
    }
    // This binary is computerd too (a multi-call binary), only larger.
    Some(me)
}

/// What providers' defaults need from the environment, found here (the
/// only crate that reads it).
pub fn host_defaults() -> HostDefaults {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    HostDefaults {
        state_dir: default_state_dir(home.as_deref()),
        computerd: default_computerd(),
        home,
        cwd: std::env::current_dir().ok(),
        kind: SettingKind::Sandbox,
        screen: Screen::DEFAULT,
        // Set from the server's state directory once it is known.
        snapshot_dir: None,
    }
}

/// The file's parts: its top-level keys, `[http]`, `[providers]` and
/// `[prices]`.
struct File {
    root: Table,
    http: Option<Table>,
    providers: Table,
    prices: Table,
}

impl File {
    fn read(path: Option<&Path>) -> Result<File, String> {
        let Some(path) = path else {
            return Ok(File {
                root: Table::new(),
                http: None,
                providers: Table::new(),
                prices: Table::new(),
            });
        };
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let value: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
        let mut root = match serde_json::to_value(value) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(_) => return Err("the file is not a table of keys".into()),
            Err(e) => return Err(e.to_string()),
        };
        let mut table = |key: &str| match root.remove(key) {
            None => Ok(None),
            Some(serde_json::Value::Object(t)) => Ok(Some(t)),
            Some(_) => Err(format!("`{key}` must be a table ([{key}])")),
        };
        let http = table("http")?;
        let providers = table("providers")?.unwrap_or_default();
        let prices = table("prices")?.unwrap_or_default();
        Ok(File {
            root,
            http,
            providers,
            prices,
        })
    }
}

/// Refuse a `COMPUTER_MCP_<ID>_*` variable that is none of provider
/// `<id>`'s options (clap would let it pass unread).
fn refuse_unknown_variables() -> Result<(), String> {
    for (name, _) in std::env::vars_os() {
        if let Some(words) = name.to_str().and_then(unknown_option) {
            return Err(words);
        }
    }
    Ok(())
}

impl Config {
    /// Layer flags, variables, the file and defaults, and check the result.
    pub fn resolve(parsed: &Parsed) -> Result<Config, String> {
        refuse_unknown_variables()?;
        let path = parsed.cli.config.file.as_deref();
        let in_file = |e: String| match path {
            Some(p) => format!("--config {}: {e}", p.display()),
            None => e,
        };
        let file = File::read(path).map_err(in_file)?;
        let mut config: Config = layer(&parsed.matches, Some(&file.root), "").map_err(in_file)?;
        // An empty entry shares nothing: launchers that always pass the
        // variable (a desktop extension's unset folder) give "".
        config.share.retain(|s| !s.trim().is_empty());
        for share in &config.share {
            share.parse::<ShareArg>()?;
        }
        if config.instance.is_empty() {
            let hex = random_token()?;
            config.instance = format!("cmcp-{}", &hex[..8]);
        }
        if !matches!(parsed.matches.subcommand(), Some(("conformance", _))) {
            config.kind_of_computers()?;
        }
        if config.exec_timeout > config.exec_max_timeout {
            return Err(format!(
                "--exec-timeout ({} s) is over --exec-max-timeout ({} s)",
                config.exec_timeout.as_secs(),
                config.exec_max_timeout.as_secs()
            ));
        }
        let side = computer_tools::desktop::image::MAX_SIDE;
        if config
            .screenshot_max
            .width
            .max(config.screenshot_max.height)
            > side
        {
            return Err(format!(
                "--screenshot-max {} has a side over {side} px, the most a model is shown (the Claude API refuses larger)",
                config.screenshot_max
            ));
        }
        if !(1024..=1 << 20).contains(&config.output_budget) {
            return Err(format!(
                "--output-budget {} must be from 1024 to 1048576 bytes",
                config.output_budget
            ));
        }
        // Bare `computer-mcp` is `computer-mcp serve`: its options come from
        // the variables, the file and the defaults.
        let bare;
        let serve = match parsed.matches.subcommand() {
            Some(("serve", m)) => Some(m),
            Some(_) => None,
            None => {
                bare = ServeArgs::augment_args(clap::Command::new("serve"))
                    .no_binary_name(true)
                    .try_get_matches_from(Vec::<String>::new())
                    .map_err(|e| e.to_string())?;
                Some(&bare)
            }
        };
        if let Some(m) = serve {
            let options: ServeArgs =
                layer(m, file.http.as_ref(), "").map_err(|e| in_file(format!("[http]: {e}")))?;
            config.fleet = fleet::limits(&options)?;
            config.viewer = viewer::address(&options)?;
            config.http = resolve_http(options)?;
        }
        config.providers = file.providers;
        config.prices = crate::receipts::price::Prices::with(&file.prices).map_err(in_file)?;
        Ok(config)
    }
}

fn resolve_http(mut options: ServeArgs) -> Result<Option<HttpConfig>, String> {
    let Some(listen) = options.listen.clone() else {
        return Ok(None);
    };
    let listen = listen_address(&listen)?;
    let given: Vec<String> = options
        .token
        .iter()
        .filter(|t| !t.is_empty())
        .cloned()
        .collect();
    if given.is_empty() && !listen.ip().is_loopback() {
        return Err(format!(
            "--http {listen} is not a loopback address: give a --token (or COMPUTER_MCP_TOKEN) so only your clients can call"
        ));
    }
    if given.iter().any(|t| t.len() < 16) {
        return Err("--token must be at least 16 characters (each of them)".into());
    }
    let own = listen.ip().to_string();
    for h in LOOPBACK_HOSTS.iter().copied().chain([own.as_str()]) {
        if !options.allowed_hosts.iter().any(|x| x == h) {
            options.allowed_hosts.push(h.to_string());
        }
    }
    Ok(Some(HttpConfig {
        listen,
        token_given: !given.is_empty(),
        tokens: if given.is_empty() {
            vec![random_token()?]
        } else {
            given
        },
        options,
    }))
}

/// `--http`'s address: `IP:PORT`, or `localhost:PORT` (loopback).
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "--http {text:?} is not an address such as 127.0.0.1:8700 or localhost:8700"
    ))
}

impl Config {
    /// `--kind` as the kind of every computer this server makes: one with a
    /// tool family in the registry (`conformance` takes any kind, which it
    /// checks itself).
    pub fn kind_of_computers(&self) -> Result<SettingKind, String> {
        let kinds: Vec<SettingKind> = registry().families().iter().map(|f| f.kind).collect();
        let k = self.kind.trim();
        kinds
            .iter()
            .copied()
            .find(|kind| kind.as_str() == k)
            .ok_or_else(|| {
                let names: Vec<&str> = kinds.iter().map(|kind| kind.as_str()).collect();
                let listed = match names.split_last() {
                    Some((last, [])) => last.to_string(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => "no".to_string(),
                };
                format!("--kind {k:?}: this server makes {listed} computers")
            })
    }

    /// The kind of this server's computers (a sandbox where `--kind` names
    /// none it makes, which only `conformance` accepts).
    pub fn setting_kind(&self) -> SettingKind {
        self.kind_of_computers().unwrap_or(SettingKind::Sandbox)
    }

    /// The spec of every computer this server makes, labelled with its
    /// instance (the fleet adds the computer's own labels).
    pub fn spec(&self) -> Result<ComputerSpec, String> {
        let mut spec = ComputerSpec::sandbox(self.lifetime.as_millis() as u64);
        // A computer of the fleet may be made with less; none is extended
        // past the server's lifetime from its creation.
        spec.max_lifetime_ms = Some(spec.lifetime_ms);
        spec.kind = self.setting_kind();
        spec.network = self.network.policy();
        spec.sizes.cpus = self.cpus;
        spec.sizes.memory_mb = self.memory_mb;
        spec.sizes.pids = self.pids;
        spec.shares = self
            .share
            .iter()
            .map(|s| s.parse::<ShareArg>())
            .collect::<Result<_, _>>()?;
        spec.labels
            .insert(label::INSTANCE.into(), sanitize(&self.instance));
        if self.keep {
            spec.labels.insert(label::KEEP.into(), "1".into());
        }
        Ok(spec)
    }
}

/// A label value: printable ASCII, at most 255 bytes.
fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(255)
        .collect()
}

#[cfg(test)]
mod fuzz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        for (text, secs) in [
            ("90s", 90),
            ("30m", 1800),
            ("6h", 21_600),
            ("2d", 172_800),
            ("120", 120),
        ] {
            assert_eq!(
                parse_duration("x", text).unwrap(),
                Duration::from_secs(secs),
                "{text}"
            );
        }
        assert!(
            parse_duration("--lifetime", "soon")
                .unwrap_err()
                .contains("--lifetime \"soon\"")
        );
        assert!(parse_duration("x", "0s").is_err());
    }

    #[test]
    fn the_default_lifetime_is_the_flags_default() {
        assert_eq!(duration(DEFAULT_LIFETIME_TEXT), Ok(DEFAULT_LIFETIME));
        assert_eq!(resolved(&["serve"]).unwrap().lifetime, DEFAULT_LIFETIME);
    }

    fn resolved(argv: &[&str]) -> Result<Config, String> {
        let parsed = match parse_from(std::iter::once("computer-mcp").chain(argv.iter().copied())) {
            Ok(p) => p,
            Err(ArgsError::Words(w)) => return Err(w),
            Err(ArgsError::Clap(e)) => return Err(e.to_string()),
        };
        Config::resolve(&parsed)
    }

    #[test]
    fn network_takes_none_open_public_and_an_allow_list_checked() {
        let c = resolved(&[
            "--network",
            "allow:PyPI.org, *.pythonhosted.org,93.184.215.0/24",
            "serve",
        ])
        .unwrap();
        assert_eq!(
            c.network,
            NetworkArg::Allow(vec![
                "pypi.org".into(),
                "*.pythonhosted.org".into(),
                "93.184.215.0/24".into()
            ])
        );
        assert_eq!(
            c.spec().unwrap().network,
            NetworkPolicy::Allow(vec![
                "pypi.org".into(),
                "*.pythonhosted.org".into(),
                "93.184.215.0/24".into()
            ])
        );
        let c = resolved(&["--network", "public", "serve"]).unwrap();
        assert_eq!(
            c.spec().unwrap().network,
            NetworkPolicy::Allow(vec!["*".into()])
        );
        for (bad, said) in [
            ("allow:", "an empty list reaches nothing"),
            (
                "allow:10.0.0.0/8",
                "\"10.0.0.0/8\": the range holds private addresses",
            ),
            ("allow:*.co.uk", "a wildcard on the public suffix co.uk"),
            ("allow:pypi.org:443", "a port (:443)"),
            ("internet", "is none, open, public or allow:NAME"),
        ] {
            let e = resolved(&["--network", bad, "serve"])
                .unwrap_err()
                .to_string();
            assert!(e.contains(said), "{bad}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "network = [\"pypi.org\", \"*.pythonhosted.org\"]\n").unwrap();
        let c = resolved(&["--config", file.to_str().unwrap(), "serve"]).unwrap();
        assert_eq!(
            c.network,
            NetworkArg::Allow(vec!["pypi.org".into(), "*.pythonhosted.org".into()])
        );
    }

    #[test]
    fn a_screenshot_budget_over_2000_px_a_side_is_refused_in_words() {
        let e = resolved(&["--screenshot-max", "4000x3000"]).unwrap_err();
        assert_eq!(
            e,
            "--screenshot-max 4000x3000 has a side over 2000 px, the most a model is shown (the Claude API refuses larger)"
        );
        let c = resolved(&["--screenshot-max", "1920x1080"]).unwrap();
        assert_eq!(c.screenshot_max.to_string(), "1920x1080");
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "lifetime = \"1h\"\nnetwork = \"open\"\noutput_budget = 4096\n[http]\nlisten = \"127.0.0.1:0\"\n").unwrap();
        let f = file.to_str().unwrap();
        let c = resolved(&["--config", f, "--lifetime", "20m", "serve"]).unwrap();
        assert_eq!(c.lifetime, Duration::from_secs(1200));
        assert_eq!(c.network, NetworkArg::Open);
        assert_eq!(c.output_budget, 4096);
        assert_eq!(c.exec_timeout, Duration::from_secs(120));
        let http = c.http.unwrap();
        assert!(!http.token_given && http.tokens.len() == 1 && http.tokens[0].len() == 48);
        // A root option after the subcommand counts as a flag too.
        let c = resolved(&["--config", f, "serve", "--lifetime", "20m"]).unwrap();
        assert_eq!(c.lifetime, Duration::from_secs(1200));
        // Bare computer-mcp is serve: the file's [http] applies.
        assert!(resolved(&["--config", f]).unwrap().http.is_some());
        assert!(resolved(&["--config", f, "sweep"]).unwrap().http.is_none());
        std::fs::write(&file, "bogus = 1\n").unwrap();
        let e = resolved(&["--config", f, "sweep"]).unwrap_err();
        assert!(e.contains("unknown field `bogus`"), "{e}");
        assert!(e.contains("expected one of `provider`, `lifetime`"), "{e}");
    }

    #[test]
    fn the_bounds_on_computers_are_checked_and_reach_the_server() {
        let c = resolved(&["serve"]).unwrap();
        assert_eq!(c.fleet, FleetLimits::default());
        let c = resolved(&["serve", "--max-computers", "2", "--session-idle", "5m"]).unwrap();
        assert_eq!(c.fleet.max_computers, 2);
        assert_eq!(c.fleet.idle, Duration::from_secs(300));
        let e = resolved(&["serve", "--max-computers", "0"]).unwrap_err();
        assert!(e.contains("must be at least 1"), "{e}");
        let e = resolved(&["serve", "--max-computers", "20"]).unwrap_err();
        assert_eq!(
            e,
            "--max-computers (20) is over --max-server-computers (16)"
        );
    }

    #[test]
    fn a_serve_option_before_the_word_says_where_it_goes() {
        let Err(ArgsError::Words(w)) = parse_from(["computer-mcp", "--viewer", "127.0.0.1:0"])
        else {
            panic!("--viewer before serve was taken or refused by clap's own words");
        };
        assert_eq!(
            w,
            "--viewer is an option of serve: put it after the word (`computer-mcp serve --viewer ...`; bare `computer-mcp` is serve over stdio), or set COMPUTER_MCP_VIEWER"
        );
        assert!(matches!(
            parse_from(["computer-mcp", "--no-such-flag"]),
            Err(ArgsError::Clap(_))
        ));
    }

    #[test]
    fn the_viewer_of_a_stdio_server_is_on_loopback_only() {
        let c = resolved(&["serve", "--viewer", "127.0.0.1:0"]).unwrap();
        assert_eq!(c.viewer, Some(SocketAddr::from(([127, 0, 0, 1], 0))));
        let e = resolved(&["serve", "--viewer", "0.0.0.0:0"]).unwrap_err();
        assert!(
            e.ends_with("the viewer of a stdio server listens on 127.0.0.1 or ::1 only"),
            "{e}"
        );
        let e =
            resolved(&["serve", "--viewer", "127.0.0.1:0", "--http", "127.0.0.1:0"]).unwrap_err();
        assert!(e.starts_with("--viewer is for a stdio server"), "{e}");
        let e = resolved(&["serve", "--viewer", "nowhere"]).unwrap_err();
        assert!(
            e.starts_with("--viewer \"nowhere\" is not an address"),
            "{e}"
        );
        // A link's lifetime: 30 minutes unless told, 10s to 24h.
        let c = resolved(&["serve", "--viewer", "127.0.0.1:0"]).unwrap();
        assert_eq!(c.fleet.view_link_ttl, Duration::from_secs(1800));
        let c = resolved(&["serve", "--viewer-link-ttl", "2h"]).unwrap();
        assert_eq!(c.fleet.view_link_ttl, Duration::from_secs(7200));
        for bad in ["5s", "25h"] {
            let e = resolved(&["serve", "--viewer-link-ttl", bad]).unwrap_err();
            assert!(
                e.ends_with("is out of range; a link works 10s to 24h"),
                "{bad}: {e}"
            );
        }
        // The hosts' pages that may open the socket: exact origins only.
        assert!(c.fleet.view_origins.is_empty());
        let c = resolved(&[
            "serve",
            "--viewer-origin",
            "https://Apps.Example.com/,http://127.0.0.1:6274",
        ])
        .unwrap();
        assert_eq!(
            c.fleet.view_origins,
            ["https://apps.example.com", "http://127.0.0.1:6274"]
        );
        for (bad, why) in [
            ("apps.example.com", "(no scheme)"),
            (
                "ftp://apps.example.com",
                "(its scheme is not http or https)",
            ),
            ("https://", "(no host)"),
            ("https://*.example.com", "('*' has no place"),
            ("https://apps.example.com/view", "('/' has no place"),
        ] {
            let e = resolved(&["serve", "--viewer-origin", bad]).unwrap_err();
            assert!(
                e.starts_with(&format!("--viewer-origin {bad:?} is not an origin {why}")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn http_takes_an_ip_or_localhost() {
        assert_eq!(
            listen_address("localhost:8700").unwrap(),
            "127.0.0.1:8700".parse().unwrap()
        );
        assert_eq!(
            listen_address("[::1]:9").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        let e = listen_address("example.com:80").unwrap_err();
        assert!(
            e.contains("such as 127.0.0.1:8700 or localhost:8700"),
            "{e}"
        );
        let c = resolved(&["serve", "--http", "localhost:8700"]).unwrap();
        assert_eq!(c.http.unwrap().listen.port(), 8700);
    }

    #[test]
    fn keep_is_a_plain_flag() {
        assert!(!resolved(&["sweep"]).unwrap().keep);
        assert!(resolved(&["--keep", "sweep"]).unwrap().keep);
        assert!(resolved(&["sweep", "--keep"]).unwrap().keep);
        let e = resolved(&["sweep", "--keep", "true"]).unwrap_err();
        assert!(e.contains("unexpected argument 'true'"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "keep = true\n").unwrap();
        let f = file.to_str().unwrap();
        assert!(resolved(&["--config", f, "sweep"]).unwrap().keep);
    }

    #[test]
    fn a_providers_table_and_scoped_flags_reach_the_provider_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[providers.local]\nstate_dir = \"/s\"\n").unwrap();
        let f = file.to_str().unwrap();
        let c = resolved(&["--config", f, "sweep"]).unwrap();
        assert_eq!(
            serde_json::Value::Object(c.providers),
            serde_json::json!({"local": {"state_dir": "/s"}})
        );
        std::fs::write(&file, "[http]\nlisten = 5\n").unwrap();
        let e = resolved(&["--config", f, "serve"]).unwrap_err();
        assert!(
            e.ends_with("[http]: listen: invalid type: integer `5`, expected a string"),
            "{e}"
        );
        std::fs::write(&file, "http = 5\n").unwrap();
        let e = resolved(&["--config", f, "serve"]).unwrap_err();
        assert!(e.ends_with("`http` must be a table ([http])"), "{e}");
    }

    #[test]
    fn an_unknown_provider_flag_is_named_with_the_providers_flags() {
        let e = resolved(&["--local-stat-dir", "/x", "sweep"]).unwrap_err();
        assert_eq!(
            e,
            "flag --local-stat-dir is not an option of the local provider; its options are: --local-state-dir, --local-computerd, --local-isolation, --local-run-as"
        );
        let e = resolved(&["serve", "--local-bogus=1"]).unwrap_err();
        assert!(
            e.starts_with("flag --local-bogus is not an option of the local provider"),
            "{e}"
        );
    }

    #[test]
    fn a_non_loopback_address_needs_a_token() {
        let e = resolved(&["serve", "--http", "0.0.0.0:8700"]).unwrap_err();
        assert!(e.contains("give a --token"), "{e}");
        let token = "x".repeat(20);
        let c = resolved(&["serve", "--http", "0.0.0.0:8700", "--token", &token]).unwrap();
        let http = c.http.unwrap();
        assert!(http.token_given);
        assert_eq!(http.tokens, std::slice::from_ref(&token));
        let other = "y".repeat(20);
        let both = format!("{token},{other}");
        let c = resolved(&["serve", "--http", "127.0.0.1:0", "--token", &both]).unwrap();
        assert_eq!(c.http.unwrap().tokens, [token.clone(), other.clone()]);
        let e = resolved(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--token",
            &token,
            "--token",
            "short",
        ])
        .unwrap_err();
        assert!(e.contains("at least 16 characters"), "{e}");
        assert_eq!(
            http.options.allowed_hosts,
            ["localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"]
        );
        assert_eq!(
            http.options.allowed_origins,
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        );
    }

    /// The flags and variables a text names: words starting `--` or
    /// `COMPUTER_MCP_`, cut at the first character not in a name.
    fn names(text: &str) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        for (i, _) in text
            .match_indices("--")
            .chain(text.match_indices("COMPUTER_MCP_"))
        {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            let before = text[..i].chars().last();
            let starts_word =
                !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if starts_word && name.len() > 2 && !name.ends_with('-') {
                out.insert(name);
            }
        }
        out
    }

    #[test]
    fn the_readme_table_and_help_name_the_same_flags_and_variables() {
        let readme = include_str!("../../README.md");
        let start = readme.find("## Configuration").unwrap();
        let end = start + readme[start..].find("\n## ").unwrap();
        let rows: String = readme[start..end]
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                // The flag and variable columns only.
                let l = l.replace("\\|", "/");
                l.split('|').take(3).collect::<Vec<_>>().join("|") + "\n"
            })
            .collect();
        let documented = names(&rows);
        let mut cmd = command();
        cmd.build();
        let mut help = cmd.render_long_help().to_string();
        let serve = cmd.find_subcommand_mut("serve").unwrap();
        help.push_str(&serve.render_long_help().to_string());
        let mut offered = std::collections::BTreeSet::new();
        for line in help.lines().map(str::trim_start) {
            if line.starts_with('-') {
                offered.extend(names(line.split("  ").next().unwrap_or(line)));
            }
            if let Some(env) = line.strip_prefix("[env: ") {
                offered.extend(names(env));
            }
        }
        for builtin in ["--help", "--version"] {
            offered.remove(builtin);
        }
        assert_eq!(
            documented, offered,
            "README's configuration tables vs --help"
        );
    }
}
