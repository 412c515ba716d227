//! Configuration: flags, then `COMPUTER_MCP_*` variables, then an optional
//! TOML file, then defaults. This crate is the only one that reads the
//! environment; everything below it takes options.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Deserialize;

const ABOUT: &str = "An MCP server that gives a model a computer: a shell, files and processes in an isolated computer made on the first tool call.";

const LONG_ABOUT: &str = "\
An MCP server that gives a model a computer: a shell, files and background
processes in an isolated computer that is made on the first tool call and
gone when the session ends.

Plug it into an MCP client over stdio (the default: `computer-mcp`, or
`computer-mcp serve`), or over streamable HTTP (`computer-mcp serve --http
127.0.0.1:8700`, which requires a bearer token).

Every option can be given as a flag, as a COMPUTER_MCP_* variable (named
under each flag), or in a TOML file (--config; keys are the flags' names
with '_' for '-', and `[http]` for the HTTP ones), in that order of
precedence.";

#[derive(Parser, Debug)]
#[command(name = "computer-mcp", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub computer: ComputerArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve MCP over stdio (the default), or over streamable HTTP with --http.
    Serve(ServeArgs),
    /// Make a computer, run one program in it, print its output, release it.
    /// For trying the server's computers from a terminal.
    Exec(ExecArgs),
    /// Release every computer of the provider whose deadline has passed.
    Sweep,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IsolationArg {
    /// computerd's own namespaces (the default): a read-only view of this
    /// machine, a private /tmp, its own processes and, with network none,
    /// only its own loopback.
    Namespaces,
    /// No isolation at all: programs run on this machine as the server's
    /// user and can read and change anything it can. UNSAFE; only for
    /// hosts that cannot make namespaces, and only when asked for by name.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkArg {
    /// Only the computer's own loopback (the default).
    None,
    /// Whatever this machine reaches.
    Open,
}

/// Options of the computers the server makes (every subcommand).
#[derive(Args, Debug, Default, Clone)]
pub struct ComputerArgs {
    /// A TOML file with any of these options.
    #[arg(long, global = true, value_name = "FILE", env = "COMPUTER_MCP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where computers come from. [default: local]
    #[arg(long, global = true, value_name = "ID", env = "COMPUTER_MCP_PROVIDER")]
    pub provider: Option<String>,
    /// Where the local provider keeps computers' files. [default: /var/lib/computer-mcp as root, else $XDG_STATE_HOME/computer-mcp or ~/.local/state/computer-mcp]
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "COMPUTER_MCP_STATE_DIR"
    )]
    pub state_dir: Option<PathBuf>,
    /// The computerd binary. [default: `computerd` beside this binary, else this binary itself]
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "COMPUTER_MCP_COMPUTERD"
    )]
    pub computerd: Option<PathBuf>,
    /// How a local computer is kept from this machine. [default: namespaces]
    #[arg(long, global = true, value_enum, env = "COMPUTER_MCP_ISOLATION")]
    pub isolation: Option<IsolationArg>,
    /// With a root server: the uid:gid programs run as. [default: 65534:65534]
    #[arg(
        long,
        global = true,
        value_name = "UID:GID",
        env = "COMPUTER_MCP_RUN_AS"
    )]
    pub run_as: Option<String>,
    /// How long a computer may live (30m, 6h, 2d). [default: 6h]
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        env = "COMPUTER_MCP_LIFETIME"
    )]
    pub lifetime: Option<String>,
    /// The network a computer reaches. [default: none]
    #[arg(long, global = true, value_enum, env = "COMPUTER_MCP_NETWORK")]
    pub network: Option<NetworkArg>,
    /// Keep computers when a session ends (they end at their lifetime).
    #[arg(long, global = true, env = "COMPUTER_MCP_KEEP")]
    pub keep: Option<bool>,
    /// This server's name in its computers' labels. [default: a random one]
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        env = "COMPUTER_MCP_INSTANCE"
    )]
    pub instance: Option<String>,
    /// The most text one tool result carries before it is cut in the middle (bytes). [default: 24576]
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        env = "COMPUTER_MCP_OUTPUT_BUDGET"
    )]
    pub output_budget: Option<usize>,
    /// exec's timeout when the model gives none. [default: 2m]
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        env = "COMPUTER_MCP_EXEC_TIMEOUT"
    )]
    pub exec_timeout: Option<String>,
    /// The most timeout a model may ask of exec. [default: 10m]
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        env = "COMPUTER_MCP_EXEC_MAX_TIMEOUT"
    )]
    pub exec_max_timeout: Option<String>,
    /// Log level on stderr: error, warn, info, debug, trace, or a tracing filter. [default: info]
    #[arg(long, global = true, value_name = "LEVEL", env = "COMPUTER_MCP_LOG")]
    pub log: Option<String>,
}

#[derive(Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8700) instead of stdio.
    #[arg(long, value_name = "ADDR", env = "COMPUTER_MCP_HTTP")]
    pub http: Option<String>,
    /// The bearer token HTTP clients must send. [default: a random one, printed to stderr; required for a non-loopback address]
    #[arg(
        long,
        value_name = "TOKEN",
        env = "COMPUTER_MCP_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// A browser Origin allowed to call (repeat). [default: http://localhost:*, http://127.0.0.1:*]
    #[arg(
        long = "allowed-origin",
        value_name = "ORIGIN",
        env = "COMPUTER_MCP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// A Host header allowed (repeat), beside the listening address's own. [default: localhost, 127.0.0.1, ::1]
    #[arg(
        long = "allowed-host",
        value_name = "HOST",
        env = "COMPUTER_MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// An HTTP session idle this long is ended, and its computer released. [default: 30m]
    #[arg(long, value_name = "DURATION", env = "COMPUTER_MCP_SESSION_IDLE")]
    pub session_idle: Option<String>,
}

#[derive(Args, Debug, Default, Clone)]
pub struct ExecArgs {
    /// The program and its arguments (after --).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGV"
    )]
    pub argv: Vec<String>,
    /// The program's timeout. [default: the exec timeout]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}

/// The TOML file's shape.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    provider: Option<String>,
    state_dir: Option<PathBuf>,
    computerd: Option<PathBuf>,
    isolation: Option<IsolationArg>,
    run_as: Option<String>,
    lifetime: Option<String>,
    network: Option<NetworkArg>,
    keep: Option<bool>,
    instance: Option<String>,
    output_budget: Option<usize>,
    exec_timeout: Option<String>,
    exec_max_timeout: Option<String>,
    log: Option<String>,
    http: Option<FileHttp>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    listen: Option<String>,
    token: Option<String>,
    allowed_origins: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    session_idle: Option<String>,
}

/// Everything resolved.
#[derive(Clone, Debug)]
pub struct Config {
    pub provider: String,
    pub state_dir: PathBuf,
    pub computerd: PathBuf,
    pub isolation: IsolationArg,
    pub run_as: Option<String>,
    pub lifetime: Duration,
    pub network: NetworkArg,
    pub keep: bool,
    pub instance: String,
    pub output_budget: usize,
    pub exec_timeout: Duration,
    pub exec_max_timeout: Duration,
    pub log: String,
    pub http: Option<HttpConfig>,
    pub home: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub listen: SocketAddr,
    /// The token, and whether it was given (false: made up and printed).
    pub token: String,
    pub token_given: bool,
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
    pub session_idle: Duration,
}

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

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh random token or name.
pub fn random_token() -> String {
    random_hex(24)
}

fn default_state_dir(home: Option<&Path>) -> Result<PathBuf, String> {
    if nix::unistd::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/computer-mcp"));
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("computer-mcp"));
    }
    match home {
        Some(h) => Ok(h.join(".local/state/computer-mcp")),
        None => Err("no state directory: set HOME, XDG_STATE_HOME or --state-dir".into()),
    }
}

fn default_computerd() -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .map_err(|e| format!("cannot find this binary ({e}); give --computerd"))?;
    let beside = me.with_file_name("computerd");
    if beside.is_file() {
        return Ok(beside);
    }
    // This binary is computerd too (a multi-call binary), only larger.
    Ok(me)
}

impl Config {
    pub fn resolve(args: &ComputerArgs, serve: Option<&ServeArgs>) -> Result<Config, String> {
        let file: FileConfig = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--config {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| format!("--config {}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let pick_dur =
            |field: &str, flag: &Option<String>, file: &Option<String>, default: &str| {
                parse_duration(
                    field,
                    flag.as_deref().or(file.as_deref()).unwrap_or(default),
                )
            };
        let state_dir = match args.state_dir.clone().or(file.state_dir.clone()) {
            Some(d) => d,
            None => default_state_dir(home.as_deref())?,
        };
        let computerd = match args.computerd.clone().or(file.computerd.clone()) {
            Some(p) => p,
            None => default_computerd()?,
        };
        let computerd = if computerd.is_absolute() {
            computerd
        } else {
            std::env::current_dir()
                .map_err(|e| format!("--computerd: {e}"))?
                .join(computerd)
        };
        let state_dir = if state_dir.is_absolute() {
            state_dir
        } else {
            std::env::current_dir()
                .map_err(|e| format!("--state-dir: {e}"))?
                .join(state_dir)
        };
        let exec_timeout = pick_dur(
            "--exec-timeout",
            &args.exec_timeout,
            &file.exec_timeout,
            "2m",
        )?;
        let exec_max_timeout = pick_dur(
            "--exec-max-timeout",
            &args.exec_max_timeout,
            &file.exec_max_timeout,
            "10m",
        )?;
        if exec_timeout > exec_max_timeout {
            return Err(format!(
                "--exec-timeout ({} s) is over --exec-max-timeout ({} s)",
                exec_timeout.as_secs(),
                exec_max_timeout.as_secs()
            ));
        }
        let output_budget = args
            .output_budget
            .or(file.output_budget)
            .unwrap_or(24 * 1024);
        if !(1024..=1 << 20).contains(&output_budget) {
            return Err(format!(
                "--output-budget {output_budget} must be from 1024 to 1048576 bytes"
            ));
        }
        let http = match serve {
            Some(s) => Self::resolve_http(s, file.http.unwrap_or_default())?,
            None => None,
        };
        Ok(Config {
            provider: args
                .provider
                .clone()
                .or(file.provider)
                .unwrap_or_else(|| "local".into()),
            state_dir,
            computerd,
            isolation: args
                .isolation
                .or(file.isolation)
                .unwrap_or(IsolationArg::Namespaces),
            run_as: args.run_as.clone().or(file.run_as),
            lifetime: pick_dur("--lifetime", &args.lifetime, &file.lifetime, "6h")?,
            network: args.network.or(file.network).unwrap_or(NetworkArg::None),
            keep: args.keep.or(file.keep).unwrap_or(false),
            instance: args
                .instance
                .clone()
                .or(file.instance)
                .unwrap_or_else(|| format!("cmcp-{}", random_hex(4))),
            output_budget,
            exec_timeout,
            exec_max_timeout,
            log: args
                .log
                .clone()
                .or(file.log)
                .unwrap_or_else(|| "info".into()),
            http,
            home,
        })
    }

    fn resolve_http(s: &ServeArgs, file: FileHttp) -> Result<Option<HttpConfig>, String> {
        let Some(listen) = s.http.clone().or(file.listen) else {
            return Ok(None);
        };
        let listen: SocketAddr = listen
            .parse()
            .map_err(|_| format!("--http {listen:?} is not an address such as 127.0.0.1:8700"))?;
        let given = s.token.clone().or(file.token).filter(|t| !t.is_empty());
        if given.is_none() && !listen.ip().is_loopback() {
            return Err(format!(
                "--http {listen} is not a loopback address: give a --token (or COMPUTER_MCP_TOKEN) so only your clients can call"
            ));
        }
        if let Some(t) = &given
            && t.len() < 16
        {
            return Err("--token must be at least 16 characters".into());
        }
        let mut allowed_origins = if s.allowed_origins.is_empty() {
            file.allowed_origins.unwrap_or_default()
        } else {
            s.allowed_origins.clone()
        };
        if allowed_origins.is_empty() {
            allowed_origins = vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ];
        }
        let mut allowed_hosts = if s.allowed_hosts.is_empty() {
            file.allowed_hosts.unwrap_or_default()
        } else {
            s.allowed_hosts.clone()
        };
        for h in ["localhost", "127.0.0.1", "::1", "[::1]"] {
            if !allowed_hosts.iter().any(|x| x == h) {
                allowed_hosts.push(h.to_string());
            }
        }
        let own = listen.ip().to_string();
        if !allowed_hosts.contains(&own) {
            allowed_hosts.push(own);
        }
        let session_idle = parse_duration(
            "--session-idle",
            s.session_idle
                .as_deref()
                .or(file.session_idle.as_deref())
                .unwrap_or("30m"),
        )?;
        Ok(Some(HttpConfig {
            listen,
            token_given: given.is_some(),
            token: given.unwrap_or_else(random_token),
            allowed_origins,
            allowed_hosts,
            session_idle,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("x", "90s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration("x", "30m").unwrap(),
            Duration::from_secs(1800)
        );
        assert_eq!(
            parse_duration("x", "6h").unwrap(),
            Duration::from_secs(21_600)
        );
        assert_eq!(
            parse_duration("x", "2d").unwrap(),
            Duration::from_secs(172_800)
        );
        assert_eq!(
            parse_duration("x", "120").unwrap(),
            Duration::from_secs(120)
        );
        assert!(
            parse_duration("--lifetime", "soon")
                .unwrap_err()
                .contains("--lifetime \"soon\"")
        );
        assert!(parse_duration("x", "0s").is_err());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "lifetime = \"1h\"\nnetwork = \"open\"\noutput_budget = 4096\n[http]\nlisten = \"127.0.0.1:0\"\n").unwrap();
        let args = ComputerArgs {
            config: Some(file.clone()),
            lifetime: Some("20m".into()),
            state_dir: Some(dir.path().into()),
            computerd: Some("/bin/true".into()),
            ..Default::default()
        };
        let c = Config::resolve(&args, Some(&ServeArgs::default())).unwrap();
        assert_eq!(c.lifetime, Duration::from_secs(1200));
        assert_eq!(c.network, NetworkArg::Open);
        assert_eq!(c.output_budget, 4096);
        let http = c.http.unwrap();
        assert!(!http.token_given && http.token.len() == 48);
        std::fs::write(&file, "bogus = 1\n").unwrap();
        let e = Config::resolve(&args, None).unwrap_err();
        assert!(e.contains("unknown field `bogus`"), "{e}");
    }

    #[test]
    fn a_non_loopback_address_needs_a_token() {
        let s = ServeArgs {
            http: Some("0.0.0.0:8700".into()),
            ..Default::default()
        };
        let e = Config::resolve_http(&s, FileHttp::default()).unwrap_err();
        assert!(e.contains("give a --token"), "{e}");
        let s = ServeArgs {
            http: Some("0.0.0.0:8700".into()),
            token: Some("x".repeat(20)),
            ..Default::default()
        };
        assert!(
            Config::resolve_http(&s, FileHttp::default())
                .unwrap()
                .unwrap()
                .token_given
        );
    }
}
