//! The daemon's own reading of its command line: long flags only
//! (`--name value` or `--name=value`), `--help` and `--version` anywhere,
//! and for `sandbox` init's command after `--`. Lexing is lexopt's; the
//! flags, their help and their words are here, one table per subcommand.
//!
//! (computerd parses with this rather than clap: clap's runtime cost the
//! static daemon about 230 KB of its 4 MiB.)

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use super::{
    Command, DEFAULT_TMP_SIZE_MIB, DEFAULT_WORK_SIZE_MIB, EGRESS_ABOUT, EgressArgs, InitArgs,
    InitCommand, MAX_TMP_SIZE_MIB, MAX_WORK_SIZE_MIB, ProbeArgs, SANDBOX_ABOUT, SandboxArgs,
    SpareArgs, StdioArgs, WORD,
};

/// Why a command line is not run: help or the version to print (on
/// stdout, exit 0), or a refusal (on stderr, exit 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    text: String,
    refused: bool,
}

impl ParseError {
    fn refused(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            refused: true,
        }
    }

    fn shown(text: String) -> Self {
        Self {
            text,
            refused: false,
        }
    }

    /// A refusal (stderr, exit 1) rather than help or the version.
    pub fn use_stderr(&self) -> bool {
        self.refused
    }

    /// Print it where it belongs: a refusal on stderr, help on stdout.
    pub fn print(&self) {
        if self.refused {
            eprintln!("{self}");
        } else {
            #[allow(clippy::print_stdout)]
            {
                println!("{}", self.text);
            }
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.refused {
            write!(f, "error: {}", self.text)
        } else {
            f.write_str(&self.text)
        }
    }
}

impl std::error::Error for ParseError {}

/// One flag of a subcommand: its long name, its value's name (none for a
/// switch) and its help.
struct Flag {
    long: &'static str,
    value: Option<&'static str>,
    help: &'static str,
}

const fn flag(long: &'static str, value: &'static str, help: &'static str) -> Flag {
    Flag {
        long,
        value: Some(value),
        help,
    }
}

const fn switch(long: &'static str, help: &'static str) -> Flag {
    Flag {
        long,
        value: None,
        help,
    }
}

/// A subcommand: its word, its help and its flags.
struct Sub {
    word: &'static str,
    about: &'static str,
    long_about: Option<&'static str>,
    usage: &'static str,
    flags: &'static [Flag],
}

const INIT_FLAGS: &[Flag] = &[
    flag(
        "deadline",
        "TIME",
        "When the computer ends (RFC 3339, e.g. 2026-12-01T10:00:00Z). At the deadline every program gets TERM, then KILL. Required.",
    ),
    flag(
        "max-deadline",
        "TIME",
        "The latest time deadline.extend may move the deadline to. Without it the deadline cannot move.",
    ),
    flag(
        "socket",
        "PATH",
        "The unix socket to listen on (default /run/computerd/computerd.sock). Its directory must exist, be this user's alone (0700) and writable; init never makes it (with --user, init makes it that user's).",
    ),
    flag(
        "user",
        "UID:GID",
        "Start as root and become uid:gid with no groups, making $HOME and the socket's directory that user's alone (0700). 0:0 is root with no capability.",
    ),
    switch(
        "own-network",
        "Move init and every program into a network namespace of their own with only loopback up: they reach nothing outside. Needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN, and a --user other than 0 that no other process holds.",
    ),
    flag(
        "xvfb",
        "PATH",
        "Make this computer a desktop: start this Xvfb (an absolute path) as init's user before serving, on a display of the computer's own, and give every program DISPLAY.",
    ),
    flag(
        "screen",
        "WxH",
        "The desktop's screen with --xvfb, WIDTHxHEIGHT (default 1280x800).",
    ),
    flag(
        "display",
        "NAME",
        "A desktop whose X server its provider starts once init is up (as Docker does, through process.start): the display's name, such as :0. Screen and input reach it, and every program gets DISPLAY. Not with --xvfb.",
    ),
    flag(
        "egress",
        "PATH",
        "Relay 127.0.0.1:3128 to the egress proxy's socket at PATH and give every program HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower case) naming it, with NO_PROXY=localhost,127.0.0.1,::1.",
    ),
    flag(
        "egress-tcp",
        "IP:PORT",
        "The TCP form of --egress, for a proxy in another network namespace (a pod of its own): relay 127.0.0.1:3128 to the proxy at IP:PORT, byte for byte, with the same variables. Not with --egress.",
    ),
];

const SANDBOX_FLAGS: &[Flag] = &[
    flag(
        "run",
        "DIR",
        "The directory of init's socket on the host (absolute, existing), bound read-write at /run/computerd inside. Required.",
    ),
    flag(
        "network",
        "MODE",
        "none (default): a network namespace of the computer's own with only lo up, so it reaches nothing; host: the host's network, shared.",
    ),
    flag(
        "tmp-size-mib",
        "N",
        "The size of the private /tmp, and of /dev/shm, in MiB (default 1024, at most 1048576).",
    ),
    flag(
        "work-size-mib",
        "N",
        "The size of /work (HOME, a tmpfs), in MiB (default 2048, at most 1048576): a write past it fails with \"No space left on device\".",
    ),
    flag(
        "bind",
        "HOST_DIR:INSIDE[:ro]",
        "Show the host directory HOST_DIR (absolute, existing) at INSIDE, /workspace or a path under it, read-write, or read-only with :ro. Shares may not nest. Repeatable.",
    ),
    flag(
        "cgroup",
        "DIR",
        "A cgroup directory the sandbox joins (writes its pid into its cgroup.procs) before it does anything else; one per cgroup v1 hierarchy. Repeatable.",
    ),
    flag(
        "egress",
        "DIR",
        "The egress proxy's socket directory on the host (absolute, existing), bound read-only at /run/egress; init's --egress names the socket there.",
    ),
    flag(
        "max-procs",
        "N",
        "At most this many processes of the computer's user at once (RLIMIT_NPROC, 16 to 32768, set just before init starts): the bound on processes where no cgroup can be made. In a user namespace of its own, or for a uid no other process has, it counts the computer's alone.",
    ),
];

const SPARE_FLAGS: &[Flag] = &[flag(
    "cgroup",
    "DIR",
    "A cgroup directory to join now, before the sandbox's arguments arrive (one per cgroup v1 hierarchy). Repeatable.",
)];

const STDIO_FLAGS: &[Flag] = &[
    flag(
        "socket",
        "PATH",
        "The socket to reach (default $COMPUTERD_SOCKET, else /run/computerd/computerd.sock).",
    ),
    flag(
        "direct",
        "PATH",
        "A provider's socket bound into the computer: read a token line on stdin, connect here and send it, then relay this socket to init and say D on stdout; if it cannot be reached, say S and bridge stdin/stdout instead.",
    ),
];

const PROBE_FLAGS: &[Flag] = &[
    flag(
        "connect",
        "HOST:PORT[/udp]",
        "A target: host:port is tried over TCP (with a request by port: TLS ClientHello on 443, DNS on 53, HTTP HEAD otherwise), host:port/udp is sent a DNS query. Repeat for more; all are tried at once, 10 s to connect and 10 s to answer.",
    ),
    switch(
        "diagnose",
        "Also check 1.1.1.1, 8.8.8.8, 9.9.9.9 and 151.101.1.57 on 443/tcp, 80/tcp and 53/udp (3 s each way) and give a verdict: egress, accepted-only or none.",
    ),
];

const EGRESS_FLAGS: &[Flag] = &[
    flag(
        "allow",
        "ENTRY",
        "A name (pypi.org), a wildcard (*.pythonhosted.org), a CIDR (93.184.215.0/24), or * alone for every public host. Repeat for more; at least one.",
    ),
    flag(
        "deadline",
        "TIME",
        "When it stops (RFC 3339): every connection ends then. Required.",
    ),
    flag(
        "socket",
        "PATH",
        "The unix socket (0600, or 0660 with --client-gid). Required, unless --listen.",
    ),
    flag(
        "listen",
        "IP:PORT",
        "Instead of --socket, the TCP form: listen here, for a computer in another network namespace (a pod of its own) whose init relays with --egress-tcp. Not with --socket or --client-gid.",
    ),
    flag(
        "user",
        "UID:GID",
        "Start as root, bind, then become UID:GID (no groups, no_new_privs); never 0.",
    ),
    flag(
        "client-gid",
        "GID",
        "The group the socket is shared with (the computer's).",
    ),
    flag(
        "host-address",
        "IP",
        "An address of this host no interface shows (a NAT'd public IP), refused as this-host. Repeatable.",
    ),
    flag(
        "hint",
        "WORDS",
        "What a refusal ends with: how to allow a host.",
    ),
    flag(
        "with-pid",
        "PID",
        "End when this process (the computer's first) ends.",
    ),
    flag(
        "resolver",
        "IP:PORT",
        "The DNS server asked instead of /etc/resolv.conf's (tests and embedders). Repeatable.",
    ),
    flag(
        "cgroup",
        "DIR",
        "A cgroup directory joined first. Repeatable.",
    ),
];

const SUBS: &[Sub] = &[
    Sub {
        word: "init",
        about: "Run as the computer's first process: listen on the socket, run programs under guards, end everything at the deadline.",
        long_about: None,
        usage: "computerd init --deadline <TIME> [OPTIONS]",
        flags: INIT_FLAGS,
    },
    Sub {
        word: "probe",
        about: "Print one JSON line: the uid, gid, kernel and interfaces, and what each target answered (refused, accepted or answered). Exit 0 when the probe ran, whatever the targets answered. Only bytes that come back count as reaching a target.",
        long_about: None,
        usage: "computerd probe [--connect <HOST:PORT[/udp]>]... [--diagnose]",
        flags: PROBE_FLAGS,
    },
    Sub {
        word: "sandbox",
        about: "Run init isolated on this host (the local provider): a root of the host's OS directories only (read-only), a tmpfs HOME at /work, shares under /workspace, private /tmp, /dev, /proc, PID, IPC, UTS and network namespaces, joined to its cgroups first.",
        long_about: Some(SANDBOX_ABOUT),
        usage: "computerd sandbox --run <DIR> [OPTIONS] -- init <INIT FLAGS>...",
        flags: SANDBOX_FLAGS,
    },
    Sub {
        word: "spare",
        about: "A sandbox made ahead of its computer: join the cgroups now (the kernel's first move into a cgroup waits for an RCU grace period), then read `sandbox`'s arguments on stdin, NUL-separated, and go on as that sandbox. An empty stdin (the provider gone) ends it, exit 0.",
        long_about: None,
        usage: "computerd spare [--cgroup <DIR>]...",
        flags: SPARE_FLAGS,
    },
    Sub {
        word: "stdio",
        about: "Bridge stdin/stdout to init's socket (waits up to 3 s for it).",
        long_about: None,
        usage: "computerd stdio [--socket <PATH>] [--direct <PATH>]",
        flags: STDIO_FLAGS,
    },
    Sub {
        word: "egress",
        about: "A computer's egress proxy, outside it: HTTP (CONNECT and plain) and SOCKS5 CONNECT on a unix socket, to the hosts of its list only, on ports 80 and 443, after checking every address a name resolves to.",
        long_about: Some(EGRESS_ABOUT),
        usage: "computerd egress --allow <ENTRY>... --deadline <TIME> (--socket <PATH> | --listen <IP:PORT>) [OPTIONS]",
        flags: EGRESS_FLAGS,
    },
];

const ABOUT: &str = "computerd: the daemon inside a computer of computer-mcp.

It speaks JSON-RPC 2.0, one JSON object per line, on a unix socket (init) or
over stdin/stdout (stdio, a bridge to init's socket). See computerd/README.md
for the wire reference.";

fn version() -> String {
    format!("{WORD} {}", env!("CARGO_PKG_VERSION"))
}

/// Text wrapped at 76 columns, each line indented by `indent` spaces.
fn wrapped(out: &mut String, text: &str, indent: usize) {
    let mut col = 0;
    for word in text.split_whitespace() {
        if col > 0 && col + 1 + word.len() > 76 {
            out.push('\n');
            col = 0;
        }
        if col == 0 {
            out.extend(std::iter::repeat_n(' ', indent));
            col = indent;
        } else {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
    }
    out.push('\n');
}

fn top_help() -> String {
    let mut s = format!("{ABOUT}\n\nUsage: computerd <COMMAND>\n\nCommands:\n");
    for sub in SUBS {
        s.push_str(&format!("  {}\n", sub.word));
        wrapped(&mut s, sub.about, 10);
    }
    s.push_str("\nOptions:\n  -h, --help     Print help (see a command's own with `computerd <COMMAND> --help`)\n  -V, --version  Print version");
    s
}

fn sub_help(sub: &Sub) -> String {
    let mut s = String::new();
    match sub.long_about {
        Some(long) => {
            s.push_str(long);
            s.push('\n');
        }
        None => wrapped(&mut s, sub.about, 0),
    }
    s.push_str(&format!("\nUsage: {}\n\nOptions:\n", sub.usage));
    for f in sub.flags {
        match f.value {
            Some(v) => s.push_str(&format!("  --{} <{v}>\n", f.long)),
            None => s.push_str(&format!("  --{}\n", f.long)),
        }
        wrapped(&mut s, f.help, 10);
    }
    s.push_str("  -h, --help\n          Print help");
    s
}

/// What a command line held: each flag's values in order, and what came
/// after `--`.
struct Seen {
    sub: &'static Sub,
    values: Vec<(&'static str, OsString)>,
    rest: Option<Vec<OsString>>,
}

impl Seen {
    fn refuse(&self, what: impl fmt::Display) -> ParseError {
        ParseError::refused(format!(
            "computerd {}: {what}\n\nUsage: {}\n\nFor more, try 'computerd {} --help'.",
            self.sub.word, self.sub.usage, self.sub.word
        ))
    }

    fn all(&self, long: &str) -> impl Iterator<Item = &OsString> {
        self.values
            .iter()
            .filter(move |(l, _)| *l == long)
            .map(|(_, v)| v)
    }

    fn switch(&self, long: &str) -> bool {
        self.all(long).next().is_some()
    }

    /// At most one value of `long`.
    fn one(&self, long: &str) -> Result<Option<&OsString>, ParseError> {
        let mut it = self.all(long);
        let first = it.next();
        if it.next().is_some() {
            return Err(self.refuse(format_args!(
                "--{long} was given more than once; it takes one value"
            )));
        }
        Ok(first)
    }

    fn text<'a>(&self, long: &str, v: &'a OsString) -> Result<&'a str, ParseError> {
        v.to_str()
            .ok_or_else(|| self.refuse(format_args!("--{long}: {v:?} is not UTF-8")))
    }

    fn value<T: FromStr<Err = String>>(&self, long: &str) -> Result<Option<T>, ParseError> {
        match self.one(long)? {
            None => Ok(None),
            Some(v) => self
                .text(long, v)?
                .parse()
                .map(Some)
                .map_err(|e| self.refuse(e)),
        }
    }

    fn required<T: FromStr<Err = String>>(&self, long: &str) -> Result<T, ParseError> {
        self.value(long)?
            .ok_or_else(|| self.refuse(format_args!("--{long} is required")))
    }

    fn many<T: FromStr<Err = String>>(&self, long: &str) -> Result<Vec<T>, ParseError> {
        self.all(long)
            .map(|v| self.text(long, v)?.parse().map_err(|e| self.refuse(e)))
            .collect()
    }

    /// A value of any FromStr type, its words prefixed with the flag.
    fn parsed<T: FromStr>(&self, long: &str) -> Result<Option<T>, ParseError>
    where
        T::Err: fmt::Display,
    {
        match self.one(long)? {
            None => Ok(None),
            Some(v) => {
                let text = self.text(long, v)?;
                text.parse()
                    .map(Some)
                    .map_err(|e| self.refuse(format_args!("--{long} {text:?}: {e}")))
            }
        }
    }

    /// Every value of a repeatable flag of any FromStr type.
    fn all_parsed<T: FromStr>(&self, long: &str) -> Result<Vec<T>, ParseError>
    where
        T::Err: fmt::Display,
    {
        self.all(long)
            .map(|v| {
                let text = self.text(long, v)?;
                text.parse()
                    .map_err(|e| self.refuse(format_args!("--{long} {text:?}: {e}")))
            })
            .collect()
    }

    fn strings(&self, long: &str) -> Result<Vec<String>, ParseError> {
        self.all(long)
            .map(|v| self.text(long, v).map(str::to_owned))
            .collect()
    }

    fn path(&self, long: &str) -> Result<Option<PathBuf>, ParseError> {
        Ok(self.one(long)?.map(PathBuf::from))
    }

    fn paths(&self, long: &str) -> Vec<PathBuf> {
        self.all(long).map(PathBuf::from).collect()
    }

    /// A number in `range`, or `default` when the flag is left out.
    fn number(
        &self,
        long: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Option<u64>, ParseError> {
        let Some(v) = self.one(long)? else {
            return Ok(None);
        };
        let text = self.text(long, v)?;
        match text.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(self.refuse(format_args!(
                "--{long} {text:?} is not a whole number from {} to {}",
                range.start(),
                range.end()
            ))),
        }
    }
}

/// Read `args` (the subcommand first) as the flags of one subcommand.
fn lex(args: Vec<OsString>) -> Result<Seen, ParseError> {
    let mut p = lexopt::Parser::from_args(args);
    let word = match p.next() {
        Ok(Some(lexopt::Arg::Value(w))) => w,
        Ok(Some(lexopt::Arg::Long("help") | lexopt::Arg::Short('h'))) => {
            return Err(ParseError::shown(top_help()));
        }
        Ok(Some(lexopt::Arg::Long("version") | lexopt::Arg::Short('V'))) => {
            return Err(ParseError::shown(version()));
        }
        Ok(None) => {
            return Err(ParseError::refused(format!(
                "computerd needs a command\n\n{}",
                top_help()
            )));
        }
        Ok(Some(other)) => {
            return Err(ParseError::refused(format!(
                "computerd: {} comes before any command; give the command first, e.g. computerd init --deadline …",
                other.unexpected()
            )));
        }
        Err(e) => return Err(ParseError::refused(format!("computerd: {e}"))),
    };
    let Some(sub) = SUBS.iter().find(|s| word == s.word) else {
        let words: Vec<&str> = SUBS.iter().map(|s| s.word).collect();
        return Err(ParseError::refused(format!(
            "computerd: {word:?} is not a command; the commands are {}",
            words.join(", ")
        )));
    };
    let mut seen = Seen {
        sub,
        values: Vec::new(),
        rest: None,
    };
    loop {
        if let Ok(mut raw) = p.raw_args()
            && raw.peek().is_some_and(|a| a == "--")
        {
            raw.next();
            seen.rest = Some(raw.collect());
            break;
        }
        let arg = match p.next() {
            Ok(Some(a)) => a,
            Ok(None) => break,
            Err(e) => return Err(seen.refuse(e)),
        };
        match arg {
            lexopt::Arg::Long("help") | lexopt::Arg::Short('h') => {
                return Err(ParseError::shown(sub_help(sub)));
            }
            lexopt::Arg::Long("version") | lexopt::Arg::Short('V') => {
                return Err(ParseError::shown(version()));
            }
            lexopt::Arg::Long(name) => {
                let name = name.to_owned();
                let Some(f) = sub.flags.iter().find(|f| f.long == name) else {
                    let names: Vec<String> =
                        sub.flags.iter().map(|f| format!("--{}", f.long)).collect();
                    return Err(seen.refuse(format_args!(
                        "--{name} is not one of its flags ({})",
                        names.join(", ")
                    )));
                };
                let value = match f.value {
                    Some(_) => p.value().map_err(|e| seen.refuse(e))?,
                    None => {
                        if let Some(v) = p.optional_value() {
                            return Err(seen.refuse(format_args!(
                                "--{name} takes no value (it was given {v:?})"
                            )));
                        }
                        OsString::new()
                    }
                };
                seen.values.push((f.long, value));
            }
            other => {
                return Err(seen.refuse(format_args!(
                    "{} is not one of its flags (they are long flags, --name value)",
                    other.unexpected()
                )));
            }
        }
    }
    if seen.rest.is_some() && sub.word != "sandbox" {
        return Err(seen.refuse("takes nothing after --"));
    }
    Ok(seen)
}

fn init_args(s: &Seen) -> Result<InitArgs, ParseError> {
    Ok(InitArgs {
        deadline: s.required("deadline")?,
        max_deadline: s.value("max-deadline")?,
        socket: s
            .path("socket")?
            .unwrap_or_else(|| crate::DEFAULT_SOCKET.into()),
        user: s.value("user")?,
        own_network: s.switch("own-network"),
        xvfb: s.path("xvfb")?,
        screen: match (s.value("screen")?, s.one("xvfb")?) {
            (Some(_), None) => {
                return Err(s.refuse("--screen needs --xvfb (it is the Xvfb's screen)"));
            }
            (screen, _) => screen.unwrap_or_default(),
        },
        display: match (s.one("display")?, s.one("xvfb")?) {
            (Some(_), Some(_)) => {
                return Err(s.refuse(
                    "--display and --xvfb are two ways to a desktop; give one (--xvfb starts the X server, --display names one the provider starts)",
                ));
            }
            (Some(d), None) => Some(check_display(s.text("display", d)?).map_err(|e| s.refuse(e))?),
            (None, _) => None,
        },
        egress: s.path("egress")?,
        egress_tcp: match (s.parsed("egress-tcp")?, s.one("egress")?) {
            (Some(_), Some(_)) => {
                return Err(s.refuse(
                    "--egress and --egress-tcp are two ways to one proxy; give one (--egress names its socket, --egress-tcp its address in another network namespace)",
                ));
            }
            (tcp, _) => tcp,
        },
    })
}

/// A local display's name: `:N` or `:N.S`, nothing that names a host.
fn check_display(d: &str) -> Result<String, String> {
    let rest = d.strip_prefix(':').unwrap_or("");
    let (n, screen) = rest.split_once('.').unwrap_or((rest, "0"));
    let digits = |x: &str| !x.is_empty() && x.len() <= 5 && x.bytes().all(|b| b.is_ascii_digit());
    if digits(n) && digits(screen) {
        Ok(d.to_string())
    } else {
        Err(format!(
            "--display {d:?} is not a local display such as :0 (a display of another host is never used)"
        ))
    }
}

impl InitCommand {
    /// `init` and its flags, as `computerd init` would read them.
    pub fn parse(argv: &[OsString]) -> Result<Self, ParseError> {
        let Some(first) = argv.first() else {
            return Err(ParseError::refused(
                "computerd sandbox: give init's command (INIT) after --, e.g. -- init --deadline … --socket /run/computerd/computerd.sock",
            ));
        };
        if first != "init" {
            return Err(ParseError::refused(format!(
                "computerd sandbox: the sandbox runs `computerd init` only, as its PID 1; after -- came {first:?}"
            )));
        }
        let seen = lex(argv.to_vec())?;
        init_args(&seen).map(InitCommand)
    }
}

/// Parse computerd's command line: `args` are what follows the program
/// (and the word, for a multi-call binary), the subcommand first. This is
/// the daemon's own parser; `--help` and `--version` come back as errors
/// to print ([`ParseError::use_stderr`] is false for them).
pub fn parse<I, T>(args: I) -> Result<Command, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let seen = lex(args.into_iter().map(Into::into).collect())?;
    Ok(match seen.sub.word {
        "init" => Command::Init(init_args(&seen)?),
        "probe" => Command::Probe(ProbeArgs {
            connect: seen.strings("connect")?,
            diagnose: seen.switch("diagnose"),
        }),
        "sandbox" => {
            let run = seen
                .path("run")?
                .ok_or_else(|| seen.refuse("--run is required"))?;
            let network = seen.value("network")?.unwrap_or_default();
            let tmp_size_mib = seen
                .number("tmp-size-mib", 1..=MAX_TMP_SIZE_MIB)?
                .unwrap_or(DEFAULT_TMP_SIZE_MIB);
            let work_size_mib = seen
                .number("work-size-mib", 1..=MAX_WORK_SIZE_MIB)?
                .unwrap_or(DEFAULT_WORK_SIZE_MIB);
            let binds = seen.many("bind")?;
            let max_procs = seen.number("max-procs", 16..=32768)?;
            // Init's command last, once every flag of the sandbox's own reads well.
            let Some(rest) = &seen.rest else {
                return Err(seen.refuse(
                    "give init's command (INIT) after --, e.g. -- init --deadline … --socket /run/computerd/computerd.sock",
                ));
            };
            Command::Sandbox(SandboxArgs {
                run,
                network,
                tmp_size_mib,
                work_size_mib,
                binds,
                cgroups: seen.paths("cgroup"),
                max_procs,
                egress: seen.path("egress")?,
                init: InitCommand::parse(rest)?,
            })
        }
        "spare" => Command::Spare(SpareArgs {
            cgroups: seen.paths("cgroup"),
        }),
        "stdio" => Command::Stdio(StdioArgs {
            socket: seen
                .path("socket")?
                .or_else(|| std::env::var_os(crate::SOCKET_ENV).map(PathBuf::from))
                .unwrap_or_else(|| crate::DEFAULT_SOCKET.into()),
            direct: seen.path("direct")?,
        }),
        "egress" => {
            let allow = seen.strings("allow")?;
            if allow.is_empty() {
                return Err(seen.refuse("--allow is required (at least one entry)"));
            }
            let deadline = seen.required("deadline")?;
            let mut a = match (seen.parsed("listen")?, seen.path("socket")?) {
                (Some(_), Some(_)) => {
                    return Err(seen.refuse(
                        "--socket and --listen are two ways to listen; give one (--listen is the TCP form)",
                    ));
                }
                (Some(l), None) => {
                    if seen.one("client-gid")?.is_some() {
                        return Err(seen.refuse(
                            "--client-gid shares a unix socket; --listen has none (leave it out)",
                        ));
                    }
                    EgressArgs::tcp(allow, deadline, l)
                }
                (None, Some(s)) => EgressArgs::new(allow, deadline, s),
                (None, None) => {
                    return Err(seen.refuse("--socket (or its TCP form, --listen) is required"));
                }
            };
            a.user = seen.value("user")?;
            a.client_gid = seen.parsed("client-gid")?;
            a.host_addresses = seen.all_parsed("host-address")?;
            a.hint = seen
                .one("hint")?
                .map(|v| seen.text("hint", v).map(str::to_owned))
                .transpose()?;
            a.with_pid = seen.parsed("with-pid")?;
            a.resolvers = seen.all_parsed("resolver")?;
            a.cgroups = seen.paths("cgroup");
            Command::Egress(a)
        }
        other => return Err(seen.refuse(format_args!("{other:?} has no reader"))),
    })
}
