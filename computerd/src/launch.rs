//! The launch contract: computerd's command line as types, on every platform.
//!
//! Whoever starts a computerd (the local provider, Docker and the vendors,
//! every test support and bench) builds one of these and renders it here;
//! the daemon parses its own command line into the same types ([`parse`]),
//! and a test holds every field to the round trip.
//!
//! - [`Command`]: one of [`InitArgs`], [`SandboxArgs`] (which holds the
//!   [`InitArgs`] it runs), [`StdioArgs`], [`ProbeArgs`], with
//!   [`Command::to_args`] (each type has its own `to_args` too).
//! - [`Program`]: which binary to start and the words before the
//!   subcommand: a standalone `computerd`, or a multi-call binary (the
//!   server) entered through the word [`WORD`].
//! - [`daemon_args`]: how a binary tells that it was started as computerd.
//! - [`Time`], [`UserSpec`], [`Network`], [`Share`]: the typed values of the
//!   flags.

mod parse;
mod values;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use parse::{ParseError, parse};
pub use values::{Network, Screen, Share, Time, UserSpec};

/// The word that makes a multi-call binary computerd (`computer-mcp
/// computerd init …`); a binary started with argv[0] `computerd` is
/// computerd without it. computerd itself accepts the word too.
pub const WORD: &str = "computerd";

/// `computerd init`'s flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitArgs {
    /// When the computer ends (RFC 3339, e.g. 2026-12-01T10:00:00Z).
    /// At the deadline every program gets TERM, then KILL.
    pub deadline: Time,
    /// The latest time deadline.extend may move the deadline to.
    /// Without it the deadline cannot move.
    pub max_deadline: Option<Time>,
    /// The unix socket to listen on. Its directory must exist, be
    /// this user's alone (0700) and writable; init never makes it
    /// (with --user, init makes it that user's).
    pub socket: PathBuf,
    /// Start as root and become uid:gid with no groups, making $HOME
    /// and the socket's directory that user's alone (0700). 0:0 is
    /// root with no capability.
    pub user: Option<UserSpec>,
    /// Move init and every program into a network namespace of their
    /// own with only loopback up: they reach nothing outside. Needs
    /// root with CAP_SYS_ADMIN and CAP_NET_ADMIN, and a --user other
    /// than 0 that no other process holds.
    pub own_network: bool,
    /// Make this computer a desktop: start this Xvfb (an absolute path)
    /// as init's user before serving, on a display of the computer's own,
    /// and give every program DISPLAY.
    pub xvfb: Option<PathBuf>,
    /// The desktop's screen with --xvfb, WIDTHxHEIGHT.
    pub screen: Screen,
    /// A desktop whose X server its provider starts once init is up
    /// (Docker): the display's name (`:0`). Screen and input reach it, and
    /// every program gets DISPLAY. Not with --xvfb.
    pub display: Option<String>,
    /// Relay 127.0.0.1:3128 to the egress proxy's socket at PATH and give
    /// every program HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower case)
    /// naming it, with NO_PROXY=localhost,127.0.0.1,::1.
    pub egress: Option<PathBuf>,
    /// The TCP form of `egress`, for a proxy in another network namespace
    /// (a pod of its own on Kubernetes): relay 127.0.0.1:3128 to the
    /// proxy listening at IP:PORT, byte for byte, with the same variables.
    /// Not with `egress`.
    pub egress_tcp: Option<std::net::SocketAddr>,
}

impl InitArgs {
    /// An init with this deadline and socket and every other flag left out.
    pub fn new(deadline: Time, socket: impl Into<PathBuf>) -> Self {
        Self {
            deadline,
            max_deadline: None,
            socket: socket.into(),
            user: None,
            own_network: false,
            xvfb: None,
            screen: Screen::DEFAULT,
            display: None,
            egress: None,
            egress_tcp: None,
        }
    }

    /// `init --deadline … --socket …` and the flags that are set.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("init");
        a.flag("--deadline", self.deadline.to_string());
        if let Some(m) = self.max_deadline {
            a.flag("--max-deadline", m.to_string());
        }
        a.flag("--socket", &self.socket);
        if let Some(u) = self.user {
            a.flag("--user", u.to_string());
        }
        if self.own_network {
            a.word("--own-network");
        }
        if let Some(x) = &self.xvfb {
            a.flag("--xvfb", x);
            a.flag("--screen", self.screen.to_string());
        }
        if let Some(d) = &self.display {
            a.flag("--display", d);
        }
        if let Some(e) = &self.egress {
            a.flag("--egress", e);
        }
        if let Some(e) = &self.egress_tcp {
            a.flag("--egress-tcp", e.to_string());
        }
        a.0
    }
}

/// The sandbox's size of /tmp (and /dev/shm) unless told otherwise.
pub const DEFAULT_TMP_SIZE_MIB: u64 = 1024;
/// The most `--tmp-size-mib` takes (1 TiB).
pub const MAX_TMP_SIZE_MIB: u64 = 1_048_576;
/// The sandbox's size of /work (HOME) unless told otherwise.
pub const DEFAULT_WORK_SIZE_MIB: u64 = 2048;
/// The most `--work-size-mib` takes (1 TiB).
pub const MAX_WORK_SIZE_MIB: u64 = 1_048_576;

/// `computerd sandbox`'s flags, and the init it runs after `--`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxArgs {
    /// The directory of init's socket on the host (absolute, existing),
    /// bound read-write at /run/computerd inside.
    pub run: PathBuf,
    /// none: a network namespace of the computer's own with only lo
    /// up, so it reaches nothing; host: the host's network, shared.
    pub network: Network,
    /// The size of the private /tmp, and of /dev/shm, in MiB.
    pub tmp_size_mib: u64,
    /// The size of /work (HOME, a tmpfs), in MiB: a write past it fails
    /// with "No space left on device".
    pub work_size_mib: u64,
    /// Show the host directory HOST_DIR (absolute, existing) at INSIDE,
    /// /workspace or a path under it, read-write, or read-only with
    /// :ro. Shares may not nest. Repeatable.
    pub binds: Vec<Share>,
    /// A cgroup directory the sandbox joins (writes its pid into its
    /// cgroup.procs) before it does anything else; one per cgroup v1
    /// hierarchy. Repeatable.
    pub cgroups: Vec<PathBuf>,
    /// At most this many processes of the computer's user at once
    /// (RLIMIT_NPROC, set just before init starts): the bound on processes
    /// where no cgroup can be made. In a user namespace of its own, or for
    /// a uid no other process has, it counts the computer's alone.
    pub max_procs: Option<u64>,
    /// The egress proxy's socket directory on the host (absolute,
    /// existing), bound read-only at /run/egress; init's --egress names
    /// the socket there.
    pub egress: Option<PathBuf>,
    pub init: InitCommand,
}

impl SandboxArgs {
    /// A sandbox of `run` around `init`, every other flag at its default.
    pub fn new(run: impl Into<PathBuf>, init: InitArgs) -> Self {
        Self {
            run: run.into(),
            network: Network::default(),
            tmp_size_mib: DEFAULT_TMP_SIZE_MIB,
            work_size_mib: DEFAULT_WORK_SIZE_MIB,
            binds: Vec::new(),
            cgroups: Vec::new(),
            max_procs: None,
            egress: None,
            init: InitCommand(init),
        }
    }

    /// `sandbox --run … [flags] -- init …`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("sandbox");
        a.flag("--run", &self.run);
        a.flag("--network", self.network.as_str());
        a.flag("--tmp-size-mib", self.tmp_size_mib.to_string());
        a.flag("--work-size-mib", self.work_size_mib.to_string());
        for b in &self.binds {
            a.flag("--bind", b.to_string());
        }
        for c in &self.cgroups {
            a.flag("--cgroup", c);
        }
        if let Some(n) = self.max_procs {
            a.flag("--max-procs", n.to_string());
        }
        if let Some(e) = &self.egress {
            a.flag("--egress", e);
        }
        a.word("--");
        a.0.extend(self.init.0.to_args());
        a.0
    }
}

/// The init a sandbox runs: what follows `--` on its command line, parsed
/// as `computerd init`'s own flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitCommand(pub InitArgs);

impl std::ops::Deref for InitCommand {
    type Target = InitArgs;
    fn deref(&self) -> &InitArgs {
        &self.0
    }
}

impl std::ops::DerefMut for InitCommand {
    fn deref_mut(&mut self) -> &mut InitArgs {
        &mut self.0
    }
}

/// `computerd spare`'s flags: a sandbox made ahead of its computer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpareArgs {
    /// A cgroup directory to join now, before the sandbox's arguments
    /// arrive (one per cgroup v1 hierarchy). Repeatable.
    pub cgroups: Vec<PathBuf>,
}

impl SpareArgs {
    /// `spare --cgroup … --cgroup …`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("spare");
        for c in &self.cgroups {
            a.flag("--cgroup", c);
        }
        a.0
    }

    /// What a spare reads on its stdin to become a sandbox: `sandbox`'s
    /// argv (without its cgroups, which the spare joined already), each
    /// argument ended by a NUL.
    pub fn go(sandbox: &SandboxArgs) -> Vec<u8> {
        let mut s = sandbox.clone();
        s.cgroups.clear();
        let mut out = Vec::new();
        for a in s.to_args() {
            out.extend_from_slice(a.as_encoded_bytes());
            out.push(0);
        }
        out
    }
}

/// `computerd stdio`'s flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdioArgs {
    /// The socket to reach.
    pub socket: PathBuf,
    /// A socket of the provider's, outside the computer, bound into it
    /// read-only: the bridge reads a token line from stdin, connects here,
    /// sends the token and relays this socket (not stdio) to init, saying
    /// `D` on stdout; when it cannot connect it says `S` and bridges stdio
    /// as without it ([`crate::protocol::direct`]).
    pub direct: Option<PathBuf>,
}

impl Default for StdioArgs {
    fn default() -> Self {
        Self {
            socket: crate::DEFAULT_SOCKET.into(),
            direct: None,
        }
    }
}

impl StdioArgs {
    /// `stdio --socket …` (always named, so no variable of the caller's
    /// environment changes where it goes).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("stdio");
        a.flag("--socket", &self.socket);
        if let Some(d) = &self.direct {
            a.flag("--direct", d);
        }
        a.0
    }
}

/// `computerd probe`'s flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeArgs {
    /// A target: host:port is tried over TCP (with a request by port:
    /// TLS ClientHello on 443, DNS on 53, HTTP HEAD otherwise),
    /// host:port/udp is sent a DNS query. Repeat for more; all are
    /// tried at once, 10 s to connect and 10 s to answer.
    pub connect: Vec<String>,
    /// Also check 1.1.1.1, 8.8.8.8, 9.9.9.9 and 151.101.1.57 on
    /// 443/tcp, 80/tcp and 53/udp (3 s each way) and give a verdict:
    /// egress, accepted-only or none.
    pub diagnose: bool,
}

impl ProbeArgs {
    /// `probe --connect … [--diagnose]`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("probe");
        for c in &self.connect {
            a.flag("--connect", c);
        }
        if self.diagnose {
            a.word("--diagnose");
        }
        a.0
    }
}

/// `computerd egress`'s flags: a computer's egress proxy (see
/// `computerd::daemon::egress`). The list is checked as
/// [`crate::protocol::egress::Allowlist::parse`] checks it; [`parse`] reads
/// it, and [`EGRESS_ABOUT`] is its help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressArgs {
    /// `--allow ENTRY`, repeated: a name, a `*.suffix` wildcard, a CIDR,
    /// or `*` alone for every public host.
    pub allow: Vec<String>,
    /// `--deadline TIME`: every connection ends then.
    pub deadline: Time,
    /// `--socket PATH`: made 0600, or 0660 with `client_gid`. Empty (and
    /// left out) with `listen`.
    pub socket: PathBuf,
    /// `--listen IP:PORT`: the TCP form, for a computer in another network
    /// namespace (init's `--egress-tcp`): programs connect here directly,
    /// no descriptor is handed. Not with `--socket`.
    pub listen: Option<std::net::SocketAddr>,
    /// `--user UID:GID`: bind as root, then become this user (never 0).
    pub user: Option<UserSpec>,
    /// `--client-gid GID`: the socket's group (the computer's).
    pub client_gid: Option<u32>,
    /// `--host-address IP`, repeated: this host's addresses beyond its
    /// interfaces', refused as this-host.
    pub host_addresses: Vec<std::net::IpAddr>,
    /// `--hint WORDS`: what a refusal ends with.
    pub hint: Option<String>,
    /// `--with-pid PID`: end when that process ends.
    pub with_pid: Option<i32>,
    /// `--resolver IP:PORT`, repeated: instead of /etc/resolv.conf's.
    pub resolvers: Vec<std::net::SocketAddr>,
    /// `--cgroup DIR`, repeated: joined before anything else.
    pub cgroups: Vec<PathBuf>,
}

/// `computerd egress --help`.
pub const EGRESS_ABOUT: &str = "\
A computer's egress proxy, outside it: HTTP (CONNECT and absolute-URI plain
HTTP) and SOCKS5 CONNECT on a unix socket, to the hosts of its list only, on
ports 80 and 443, after checking every address a name resolves to.

  --allow ENTRY        a name (pypi.org), a wildcard (*.pythonhosted.org), a
                       CIDR (93.184.215.0/24), or * alone for every public
                       host; repeat for more (at least one)
  --deadline TIME      when it stops (RFC 3339): every connection ends then
  --socket PATH        the unix socket (0600, or 0660 with --client-gid)
  --listen IP:PORT     instead of --socket, the TCP form: for a computer in
                       another network namespace (a pod of its own), whose
                       init relays to it with --egress-tcp
  --user UID:GID       start as root, bind, then become UID:GID (no groups,
                       no_new_privs); never 0
  --client-gid GID     the group the socket is shared with (the computer's)
  --host-address IP    an address of this host no interface shows (a NAT'd
                       public IP), refused as this-host; repeatable
  --hint WORDS         what a refusal ends with: how to allow a host
  --with-pid PID       end when this process (the computer's first) ends
  --resolver IP:PORT   the DNS server asked instead of /etc/resolv.conf's
                       (tests and embedders); repeatable
  --cgroup DIR         a cgroup directory joined first; repeatable

A name off the list is refused before any lookup; a listed name is resolved
once and every answer checked (private, loopback, link-local, metadata,
multicast, reserved, documentation and this host's own addresses refused, in
every spelling); the checked address is the one dialled. Each decision is one
log line on stderr: host, port, address and class, never a path or header.";

impl EgressArgs {
    /// A proxy for `allow` until `deadline` on `socket`, the rest unset.
    pub fn new(allow: Vec<String>, deadline: Time, socket: impl Into<PathBuf>) -> Self {
        Self {
            allow,
            deadline,
            socket: socket.into(),
            listen: None,
            user: None,
            client_gid: None,
            host_addresses: Vec::new(),
            hint: None,
            with_pid: None,
            resolvers: Vec::new(),
            cgroups: Vec::new(),
        }
    }

    /// The TCP form: a proxy for `allow` until `deadline` listening on
    /// `listen`, the rest unset.
    pub fn tcp(allow: Vec<String>, deadline: Time, listen: std::net::SocketAddr) -> Self {
        Self {
            listen: Some(listen),
            ..Self::new(allow, deadline, PathBuf::new())
        }
    }

    /// `egress --allow … --deadline … --socket …` (or `--listen …`) and
    /// the flags set.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a = Argv::new("egress");
        for e in &self.allow {
            // `=` so an entry is never taken for a flag.
            a.word(&format!("--allow={e}"));
        }
        a.flag("--deadline", self.deadline.to_string());
        match &self.listen {
            Some(l) => a.flag("--listen", l.to_string()),
            None => a.flag("--socket", &self.socket),
        }
        if let Some(u) = self.user {
            a.flag("--user", u.to_string());
        }
        if let Some(g) = self.client_gid {
            a.flag("--client-gid", g.to_string());
        }
        for h in &self.host_addresses {
            a.flag("--host-address", h.to_string());
        }
        if let Some(h) = &self.hint {
            a.word(&format!("--hint={h}"));
        }
        if let Some(p) = self.with_pid {
            a.flag("--with-pid", p.to_string());
        }
        for r in &self.resolvers {
            a.flag("--resolver", r.to_string());
        }
        for c in &self.cgroups {
            a.flag("--cgroup", c);
        }
        a.0
    }
}

/// `computerd sandbox --help`: what the sandbox gives, and its security model.
pub(crate) const SANDBOX_ABOUT: &str = "\
Run `computerd init` on this host, isolated with namespaces, as bubblewrap
does but with no other tool. Its root is a fresh tmpfs (read-only once made)
holding only this; nothing else of the host is there, whatever the host adds:

  - /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32 and /etc of the host
    (those it has), read-only, nosuid and nodev; a host link such as
    /bin -> usr/bin is made again as a link;
  - /work, their HOME and init's working directory: a tmpfs of
    --work-size-mib, owned by the computer's user (init's --user, or the
    user who runs the sandbox), mode 0700, nosuid, nodev;
  - /run/computerd: --run, read-write (init's socket; the host reaches it in
    --run);
  - /workspace: each --bind HOST_DIR:INSIDE[:ro], read-write or read-only,
    nosuid and nodev;
  - /tmp and /dev/shm, private tmpfs of --tmp-size-mib; a minimal /dev
    (null, zero, full, random, urandom, tty and a pty instance of their
    own; never the host's disks);
  - their own /proc, PID (init is PID 1), IPC and UTS (hostname computer)
    namespaces; with --network none, a network namespace with only lo up
    and at /sys a read-only sysfs of it (no /sys where the kernel refuses
    one, and none with --network host);
  - /opt/computerd/computerd: this binary, read-only, when no directory above
    shows it; init and its guards run from there.

Before anything else, the sandbox writes its pid into each --cgroup
DIR/cgroup.procs, so init and all it starts are bounded from the start.
As root (with CAP_SYS_ADMIN) init must be given --user UID:GID, a uid other
than 0, so no program runs as root. Any other user gets a user namespace
mapping only its own uid and gid and init starts with an empty bounding set;
a host that forbids unprivileged user namespaces is refused in words. Init's
--socket must be in /run/computerd (its default is). This process stays
outside as a forwarder: it passes TERM, INT and HUP to init, exits with
init's status (128+signal if killed), and if it is killed the computer dies
with it. Every failure is a refusal on stderr with exit code 1.

Example:
  computerd sandbox --run /srv/c1/run --work-size-mib 2048 \\
    --bind /srv/project:/workspace/project --cgroup /sys/fs/cgroup/pids/c1 -- \\
    init --deadline 2026-12-01T10:00:00Z --user 1000:1000";

/// computerd's subcommands (the per-run `guard` is not one: only computerd
/// starts it, through its own binary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Run as the computer's first process: listen on the socket, run
    /// programs under guards, end everything at the deadline.
    Init(InitArgs),
    /// Print one JSON line: the uid, gid, kernel and interfaces, and what
    /// each target answered (refused, accepted or answered). Exit 0 when
    /// the probe ran, whatever the targets answered. Only bytes that come
    /// back count as reaching a target.
    Probe(ProbeArgs),
    /// Run init isolated on this host (the local provider): a root of
    /// the host's OS directories only (read-only), a tmpfs HOME at /work,
    /// shares under /workspace, private /tmp, /dev, /proc, PID, IPC, UTS and
    /// network namespaces, joined to its cgroups first.
    Sandbox(SandboxArgs),
    /// A sandbox made ahead of its computer: join the cgroups now (the
    /// kernel's first move into a cgroup waits for an RCU grace period),
    /// then read `sandbox`'s arguments on stdin, NUL-separated, and go on
    /// as that sandbox. An empty stdin (the provider gone) ends it, exit 0.
    Spare(SpareArgs),
    /// Bridge stdin/stdout to init's socket (waits up to 3 s for it).
    Stdio(StdioArgs),
    /// A computer's egress proxy, outside it: HTTP (CONNECT and plain) and
    /// SOCKS5 CONNECT on a unix socket, to the hosts of its list only, on
    /// ports 80 and 443, after checking every address a name resolves to.
    Egress(EgressArgs),
}

impl Command {
    /// The subcommand and its flags (what follows the program and its prefix).
    pub fn to_args(&self) -> Vec<OsString> {
        match self {
            Command::Init(a) => a.to_args(),
            Command::Probe(a) => a.to_args(),
            Command::Sandbox(a) => a.to_args(),
            Command::Spare(a) => a.to_args(),
            Command::Stdio(a) => a.to_args(),
            Command::Egress(a) => a.to_args(),
        }
    }
}

/// `Command::Init(args)` as `args.into()`, one impl per subcommand.
macro_rules! command_from {
    ($($variant:ident($args:ty)),* $(,)?) => {
        $(impl From<$args> for Command {
            fn from(a: $args) -> Self {
                Command::$variant(a)
            }
        })*
    };
}
command_from!(
    Init(InitArgs),
    Spare(SpareArgs),
    Sandbox(SandboxArgs),
    Stdio(StdioArgs),
    Egress(EgressArgs),
    Probe(ProbeArgs),
);

/// If `argv` (argv[0] first) is a call of computerd, the daemon's
/// arguments: what follows the word `computerd` when argv[1] is it, else
/// what follows argv[0] when its file name is `computerd`. None otherwise
/// (a multi-call binary then goes on as itself).
pub fn daemon_args(argv: &[OsString]) -> Option<&[OsString]> {
    let (first, rest) = argv.split_first()?;
    if rest.first().is_some_and(|w| w == WORD) {
        return Some(&rest[1..]);
    }
    (Path::new(first).file_name() == Some(OsStr::new(WORD))).then_some(rest)
}

/// The binary that is computerd, and the words that make it so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub exe: PathBuf,
    /// Put between the program and the subcommand: empty for computerd
    /// itself, `[WORD]` for a multi-call binary.
    pub prefix: Vec<OsString>,
}

impl Program {
    /// A standalone computerd.
    pub fn computerd(exe: impl Into<PathBuf>) -> Self {
        Self {
            exe: exe.into(),
            prefix: Vec::new(),
        }
    }

    /// A multi-call binary (computer-mcp) entered through [`WORD`].
    pub fn multi_call(exe: impl Into<PathBuf>) -> Self {
        Self {
            exe: exe.into(),
            prefix: vec![WORD.into()],
        }
    }

    /// By its file name: a binary named `computerd` is computerd itself;
    /// any other is taken for a multi-call binary. Either way is safe, since
    /// computerd also accepts the word.
    pub fn at(exe: impl Into<PathBuf>) -> Self {
        let exe = exe.into();
        if exe.file_name() == Some(OsStr::new(WORD)) {
            Self::computerd(exe)
        } else {
            Self::multi_call(exe)
        }
    }

    /// The arguments after the program: the prefix, then `command`'s.
    pub fn args(&self, command: &Command) -> Vec<OsString> {
        let mut a = self.prefix.clone();
        a.extend(command.to_args());
        a
    }

    /// A process to start `command` (stdio, environment and the rest are
    /// the caller's to set).
    pub fn command(&self, command: impl Into<Command>) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args(self.args(&command.into()));
        cmd
    }
}

/// An argv being written.
struct Argv(Vec<OsString>);

impl Argv {
    fn new(sub: &str) -> Self {
        Self(vec![sub.into()])
    }
    fn word(&mut self, w: &str) {
        self.0.push(w.into());
    }
    fn flag(&mut self, name: &str, value: impl AsRef<OsStr>) {
        self.0.push(name.into());
        self.0.push(value.as_ref().to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_flags_parse_or_are_refused_in_words() {
        let parse = |s: &str| s.parse::<UserSpec>().map(|u| (u.uid, u.gid));
        assert_eq!(parse("1000:1000"), Ok((1000, 1000)));
        assert_eq!(parse("0:0"), Ok((0, 0)));
        for bad in ["1000", "a:b", "1000:", ":1", "-1:0", "+1:1", "4294967295:0"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("is not uid:gid"), "{bad}: {e}");
        }
    }

    fn at(s: &str) -> Time {
        s.parse().unwrap()
    }

    fn every_init_field() -> InitArgs {
        InitArgs {
            deadline: at("2026-12-01T10:00:00.5Z"),
            max_deadline: Some(at("2026-12-08T12:30:00+02:00")),
            socket: "/srv/c1/run/computerd.sock".into(),
            user: Some(UserSpec {
                uid: 40000,
                gid: 40001,
            }),
            own_network: true,
            xvfb: Some("/usr/bin/Xvfb".into()),
            screen: Screen {
                width: 1920,
                height: 1080,
            },
            display: None,
            egress: Some("/run/egress/egress.sock".into()),
            egress_tcp: None,
        }
    }

    /// Render, parse with the daemon's own parser, compare the whole value.
    fn round_trip(c: Command) {
        let argv = c.to_args();
        let back = parse(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert_eq!(back, c, "{argv:?}");
    }

    #[test]
    fn every_field_of_every_command_survives_render_and_parse() {
        // Every field set away from its default.
        let sandbox = SandboxArgs {
            run: "/srv/c1/run".into(),
            network: Network::Host,
            tmp_size_mib: 64,
            work_size_mib: 512,
            binds: vec![
                "/srv/project:/workspace/project".parse().unwrap(),
                "/srv/data dir:/workspace/data:ro".parse().unwrap(),
            ],
            cgroups: vec![
                "/sys/fs/cgroup/pids/c1".into(),
                "/sys/fs/cgroup/memory/c1".into(),
            ],
            max_procs: Some(512),
            egress: Some("/srv/c1/egress".into()),
            init: InitCommand(every_init_field()),
        };
        round_trip(every_init_field().into());
        round_trip(sandbox.clone().into());
        round_trip(
            SpareArgs {
                cgroups: vec![
                    "/sys/fs/cgroup/pids/c1".into(),
                    "/sys/fs/cgroup/cpu/c1".into(),
                ],
            }
            .into(),
        );
        // What a spare is sent parses back to the sandbox, less its cgroups.
        let sent = SpareArgs::go(&sandbox);
        let argv: Vec<OsString> = sent
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| OsString::from(String::from_utf8(a.to_vec()).unwrap()))
            .collect();
        let mut want = sandbox.clone();
        want.cgroups.clear();
        assert_eq!(parse(argv).unwrap(), Command::Sandbox(want));
        round_trip(
            StdioArgs {
                socket: "/srv/c1/run/s.sock".into(),
                direct: None,
            }
            .into(),
        );
        round_trip(
            StdioArgs {
                socket: "/run/computerd/computerd.sock".into(),
                direct: Some("/run/computerd-host/0a1b.sock".into()),
            }
            .into(),
        );
        round_trip(
            EgressArgs {
                allow: vec![
                    "pypi.org".into(),
                    "*.pythonhosted.org".into(),
                    "93.184.215.0/24".into(),
                    "--x".into(),
                ],
                deadline: at("2026-12-01T10:00:00Z"),
                socket: "/srv/c1/egress/egress.sock".into(),
                listen: None,
                user: Some(UserSpec {
                    uid: 40002,
                    gid: 40002,
                }),
                client_gid: Some(40001),
                host_addresses: vec![
                    "93.184.215.14".parse().unwrap(),
                    "2001:db8::1".parse().unwrap(),
                ],
                hint: Some("--ask the operator".into()),
                with_pid: Some(4242),
                resolvers: vec![
                    "10.0.0.2:53".parse().unwrap(),
                    "[::1]:5353".parse().unwrap(),
                ],
                cgroups: vec!["/sys/fs/cgroup/pids/c1-egress".into()],
            }
            .into(),
        );
        // The TCP forms: a proxy pod's listener and its computer's relay.
        let mut tcp = EgressArgs::tcp(
            vec!["pypi.org".into()],
            at("2026-12-01T10:00:00Z"),
            "0.0.0.0:3128".parse().unwrap(),
        );
        tcp.host_addresses = vec!["10.0.0.1".parse().unwrap()];
        round_trip(tcp.into());
        round_trip(
            InitArgs {
                egress: None,
                egress_tcp: Some("10.244.1.7:3128".parse().unwrap()),
                ..every_init_field()
            }
            .into(),
        );
        round_trip(
            ProbeArgs {
                connect: vec!["1.1.1.1:443".into(), "9.9.9.9:53/udp".into()],
                diagnose: true,
            }
            .into(),
        );
    }

    #[test]
    fn defaults_survive_render_and_parse() {
        let init = InitArgs::new(at("2026-12-01T10:00:00Z"), crate::DEFAULT_SOCKET);
        round_trip(init.clone().into());
        round_trip(SandboxArgs::new("/r", init).into());
        round_trip(StdioArgs::default().into());
        round_trip(ProbeArgs::default().into());
        // What the daemon fills in when a flag is left out is the default.
        let parsed = parse(["init", "--deadline", "2026-12-01T10:00:00Z"]).unwrap();
        assert_eq!(
            parsed,
            InitArgs::new(at("2026-12-01T10:00:00Z"), crate::DEFAULT_SOCKET).into()
        );
        let parsed = parse([
            "sandbox",
            "--run",
            "/r",
            "--",
            "init",
            "--deadline",
            "2026-12-01T10:00:00Z",
        ])
        .unwrap();
        assert_eq!(
            parsed,
            SandboxArgs::new(
                "/r",
                InitArgs::new(at("2026-12-01T10:00:00Z"), crate::DEFAULT_SOCKET)
            )
            .into()
        );
    }

    #[test]
    fn a_sandbox_renders_its_flags_then_init_after_the_dashes() {
        let mut s = SandboxArgs::new(
            "/r",
            InitArgs::new(at("2026-12-01T10:00:00+01:00"), "/run/computerd/s.sock"),
        );
        s.init.user = Some(UserSpec {
            uid: 1000,
            gid: 1000,
        });
        let argv: Vec<String> = Program::at("/usr/bin/computer-mcp")
            .args(&s.into())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            argv,
            [
                "computerd",
                "sandbox",
                "--run",
                "/r",
                "--network",
                "none",
                "--tmp-size-mib",
                "1024",
                "--work-size-mib",
                "2048",
                "--",
                "init",
                "--deadline",
                "2026-12-01T09:00:00Z",
                "--socket",
                "/run/computerd/s.sock",
                "--user",
                "1000:1000"
            ]
        );
    }

    #[test]
    fn bad_values_are_refused_in_words() {
        let said = |args: &[&str]| parse(args).unwrap_err().to_string();
        assert!(said(&["init", "--deadline", "tomorrow"]).contains("is not an RFC 3339 time"));
        assert!(
            said(&[
                "init",
                "--deadline",
                "2026-12-01T10:00:00Z",
                "--user",
                "1000"
            ])
            .contains("is not uid:gid")
        );
        let s = said(&["sandbox", "--run", "/r", "--", "stdio", "--socket", "/s"]);
        assert!(s.contains("runs `computerd init` only"), "{s}");
        let s = said(&["sandbox", "--run", "/r", "--", "init"]);
        assert!(s.contains("--deadline"), "{s}");
        let s = said(&["sandbox", "--run", "/r", "--network", "x"]);
        assert!(s.contains("--network is none"), "{s}");
        let s = said(&["sandbox", "--run", "/r", "--bind", "/a"]);
        assert!(s.contains("is not HOST_DIR:INSIDE[:ro]"), "{s}");
        let s = said(&["sandbox", "--run", "/r", "--work-size-mib", "0"]);
        assert!(s.contains("--work-size-mib"), "{s}");
        assert!(said(&["sandbox", "--run", "/r"]).contains("INIT"));
        // The egress's two forms are one or the other.
        let t = "2026-12-01T10:00:00Z";
        let s = said(&[
            "init",
            "--deadline",
            t,
            "--egress",
            "/e.sock",
            "--egress-tcp",
            "10.0.0.1:3128",
        ]);
        assert!(
            s.contains("--egress and --egress-tcp are two ways to one proxy"),
            "{s}"
        );
        let s = said(&["init", "--deadline", t, "--egress-tcp", "proxy:3128"]);
        assert!(s.contains("--egress-tcp \"proxy:3128\""), "{s}");
        let e = ["egress", "--allow=a.b", "--deadline", t];
        let s = said(&[&e[..], &["--socket", "/s", "--listen", "0.0.0.0:3128"]].concat());
        assert!(
            s.contains("--socket and --listen are two ways to listen"),
            "{s}"
        );
        let s = said(&[&e[..], &["--listen", "0.0.0.0:3128", "--client-gid", "7"]].concat());
        assert!(s.contains("--client-gid shares a unix socket"), "{s}");
        assert!(said(&e).contains("--socket (or its TCP form, --listen) is required"));
        assert!("4294967295:0".parse::<UserSpec>().is_err());
        assert!("+1:0".parse::<UserSpec>().is_err());
    }

    #[test]
    fn unknown_repeated_and_misplaced_flags_are_refused_naming_the_flag() {
        let said = |args: &[&str]| parse(args).unwrap_err();
        let e = said(&["init", "--deadlin", "x"]);
        assert!(e.use_stderr());
        let text = e.to_string();
        assert!(
            text.contains("--deadlin is not one of its flags") && text.contains("--deadline,"),
            "{text}"
        );
        let text = said(&["stdio", "--socket=/a", "--socket", "/b"]).to_string();
        assert!(text.contains("--socket was given more than once"), "{text}");
        let text = said(&["probe", "--diagnose=yes"]).to_string();
        assert!(text.contains("--diagnose takes no value"), "{text}");
        let text = said(&["stdio", "--", "x"]).to_string();
        assert!(text.contains("takes nothing after --"), "{text}");
        let text = said(&["reboot"]).to_string();
        assert!(text.contains("\"reboot\" is not a command") && text.contains("init, probe"));
        let text = said(&["sandbox", "--run", "/r", "--max-procs", "8", "--", "init"]).to_string();
        assert!(text.contains("--max-procs \"8\" is not a whole number from 16 to 32768"));
        // Help and the version are not refusals: they print on stdout, exit 0.
        for args in [
            &["--help"][..],
            &["init", "--help"],
            &["-V"],
            &["sandbox", "-h"],
        ] {
            assert!(!said(args).use_stderr(), "{args:?}");
        }
        assert!(
            said(&["sandbox", "--help"])
                .to_string()
                .contains("bubblewrap")
        );
        assert!(
            said(&["init", "--help"])
                .to_string()
                .contains("--own-network")
        );
    }

    #[test]
    fn a_display_started_by_the_provider_round_trips_and_is_checked() {
        let mut init = InitArgs::new(at("2026-12-01T10:00:00Z"), crate::DEFAULT_SOCKET);
        init.display = Some(":0".into());
        round_trip(init.into());
        let said = |args: &[&str]| parse(args).unwrap_err().to_string();
        let t = "2026-12-01T10:00:00Z";
        let text = said(&["init", "--deadline", t, "--display", "remote:0"]);
        assert!(text.contains("is not a local display"), "{text}");
        let text = said(&[
            "init",
            "--deadline",
            t,
            "--display",
            ":0",
            "--xvfb",
            "/usr/bin/Xvfb",
        ]);
        assert!(text.contains("--display and --xvfb"), "{text}");
        assert!(parse(["init", "--deadline", t, "--display", ":12.0"]).is_ok());
    }

    #[test]
    fn a_binary_is_computerd_by_its_word_or_its_name() {
        let v = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let server = v(&[
            "/usr/bin/computer-mcp",
            "computerd",
            "init",
            "--deadline",
            "x",
        ]);
        assert_eq!(daemon_args(&server), Some(&server[2..]));
        let named = v(&["computerd", "guard", "3"]);
        assert_eq!(daemon_args(&named), Some(&named[1..]));
        let both = v(&["/opt/computerd/computerd", "computerd", "stdio"]);
        assert_eq!(daemon_args(&both), Some(&both[2..]));
        assert_eq!(daemon_args(&v(&["/usr/bin/computer-mcp", "serve"])), None);
        assert_eq!(daemon_args(&v(&["/usr/bin/computer-mcp", "init"])), None);
        assert_eq!(daemon_args(&v(&[])), None);
        assert_eq!(
            Program::at("/opt/computerd/computerd"),
            Program::computerd("/opt/computerd/computerd")
        );
        assert_eq!(
            Program::at("/usr/bin/computer-mcp").prefix,
            vec![OsString::from(WORD)]
        );
    }

    #[test]
    fn times_are_rendered_in_utc_and_from_milliseconds() {
        assert_eq!(
            Time::from_unix_ms(1_796_119_200_250).unwrap().to_string(),
            "2026-12-01T10:00:00.25Z"
        );
        assert_eq!(at("2026-12-01T11:00:00+01:00"), at("2026-12-01T10:00:00Z"));
    }
}
