//! A computer whose daemon runs as a child of the vendor's own agent
//! (daemon mode `child`: E2B's envd, Daytona's toolbox). The vendor's
//! agent is the sandbox's first process and runs commands as root; the
//! provider pushes the static computerd in through it, starts `computerd
//! init` as a long-lived command, and reaches the daemon through one more
//! long-lived command, `computerd stdio`, whose stdin and stdout are the
//! protocol's byte stream.
//!
//! A vendor implements [`ChildHost`] over its process API; everything
//! else is here and the same for every such vendor:
//!
//! - [`install`]: upload the binary to a random name under /tmp, then one
//!   script, as root, moves it to [`DAEMON`] and holds the whole path
//!   (`/`, `/opt`, [`DAEMON_DIR`], the binary) to the root-only rule:
//!   owned by root, writable by no group and no other user, read with
//!   `ls -ldn` so a symbolic link or an ACL on the way fails it. Only root
//!   can change an owner or a mode, so once it holds it holds until root
//!   changes it. The script prints the installed file's sha256, which must
//!   be the uploaded bytes'.
//! - [`start_init`]: `computerd init` in a clean environment, in the
//!   background; the vendor's command outlives the call.
//! - [`connect`]: the bridge, then hello. Init and the bridge check the
//!   daemon's path against the same rule before it runs as root, so a
//!   binary anyone but root could have swapped is never run.
//! - [`Booting`]: [`super::up::Starting`] over a host, for
//!   [`super::up::wait_until_up`], with init's last words when it died.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use computerd::client::DaemonClient;
use computerd::launch::{InitArgs, StdioArgs, Time, UserSpec};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite};

use super::up::{Starting, Try};
use crate::provider::Connection;
use crate::types::{ErrorCode, ProviderError, Result};

/// The directory the daemon is installed in, root's alone.
pub const DAEMON_DIR: &str = "/opt/computer-mcp";
/// The installed daemon.
pub const DAEMON: &str = "/opt/computer-mcp/computerd";
/// The daemon's user's home and the programs' working directory.
pub const HOME: &str = "/work";
/// The socket's directory; init makes it the daemon's user's alone.
pub const RUN_DIR: &str = "/run/computerd";
/// Init's socket.
pub const SOCKET: &str = "/run/computerd/computerd.sock";
/// Where init's own words go (the vendor keeps no output of a command in
/// the background), read back when it dies while starting.
pub const INIT_LOG: &str = "/var/log/computer-mcp-init.log";
/// Init's pid, written by the shell that execs it.
pub const INIT_PID: &str = "/run/computer-mcp-init.pid";
/// The daemon's user on every vendor: a uid no image gives anyone.
pub const DAEMON_USER: UserSpec = UserSpec {
    uid: 2510,
    gid: 2510,
};
/// Init's PATH, beside HOME ([`HOME`], which init makes the daemon's
/// user's): nothing else of the vendor agent's environment (its tokens
/// among them) reaches the computer.
pub const CLEAN_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long the install script may take.
pub const INSTALL_WITHIN: Duration = Duration::from_secs(60);
/// How long one short command (init's state, a check) may take.
pub const CHECK_WITHIN: Duration = Duration::from_secs(20);
/// The most of a command's stdout or stderr a host keeps for [`Ran`].
pub const RAN_MAX_BYTES: usize = 64 * 1024;

/// A command run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    pub code: i32,
    /// At most [`RAN_MAX_BYTES`], lossily decoded.
    pub stdout: String,
    /// At most [`RAN_MAX_BYTES`], lossily decoded.
    pub stderr: String,
}

/// The bridge's stdout, as the host delivers it.
pub type BridgeReader = Pin<Box<dyn AsyncRead + Send>>;
/// The bridge's stdin; shutting it down (or dropping it) ends the bridge
/// and nothing else.
pub type BridgeWriter = Pin<Box<dyn AsyncWrite + Send>>;

/// A vendor's process API inside one sandbox, as root. Each argv is run
/// as it is (no shell around it unless the vendor's API adds one; a host
/// whose API takes a command line quotes it with [`shell_line`]).
#[async_trait::async_trait]
pub trait ChildHost: Send + Sync {
    /// The vendor's name, for words ("E2B").
    fn vendor(&self) -> &str;
    /// Write `bytes` to `path` in the sandbox as root, replacing it.
    async fn upload(&self, path: &str, bytes: Bytes) -> Result<()>;
    /// Run `argv` as root to its end, within `within`.
    async fn run(&self, argv: &[String], within: Duration) -> Result<Ran>;
    /// Start `argv` as root in the background; it outlives this call and
    /// any connection of this process's.
    async fn spawn(&self, argv: &[String]) -> Result<()>;
    /// Start `argv` as root with its stdout and stdin as a byte stream
    /// pair, for as long as the pair is held.
    async fn attach(&self, argv: &[String]) -> Result<(BridgeReader, BridgeWriter)>;
}

/// `argv` as one POSIX shell line, each word single-quoted.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The shell function both scripts hold a path to the root-only rule
/// with: `held PATH TYPE` (TYPE `d` or `-`) succeeds when `ls -ldn` shows
/// that type, owner uid 0, no group or other write bit, and nothing after
/// the mode but an SELinux context's `.` (an ACL's `+` fails it).
const HELD: &str = r#"
held() {
  line=$(ls -ldn -- "$1" 2>/dev/null) || return 1
  set -- "$2" $line
  case $2 in
    "$1"????-??-? | "$1"????-??-?.) ;;
    *) return 1 ;;
  esac
  [ "$4" = 0 ]
}
"#;

/// The install script: `sh -c SCRIPT sh UPLOADED ROOT OWNER` (ROOT empty
/// but in this module's tests, which install under a temporary directory;
/// OWNER the daemon's user as uid:gid, given `/workspace`).
const INSTALL: &str = r#"
set -uf
up=$1
root=$2
owner=$3
dir=$root/opt/computer-mcp
bin=$dir/computerd
refuse() { rm -f -- "$up"; echo "$*" >&2; exit 3; }
[ "$(id -u)" = 0 ] || refuse "the install runs as uid $(id -u), not root"
[ -f "$up" ] && [ ! -L "$up" ] || refuse "the uploaded daemon $up is not a regular file"
[ -L "$dir" ] && refuse "$dir is a symbolic link"
mkdir -p -- "$dir" "$root/work" "$root/run/computerd" || refuse "could not make $dir, $root/work and $root/run/computerd"
chown 0:0 "$dir" && chmod 755 "$dir" || refuse "could not make $dir root's, mode 755"
for p in "${root:-/}" "$root/opt" "$dir"; do
  held "$p" d || refuse "$p is not root's alone (owned by root, writable by no group or other user, no symbolic link or ACL): $(ls -ldn -- "$p" 2>&1)"
done
rm -rf -- "$bin" || refuse "could not remove what was at $bin"
if ! { mv -f -- "$up" "$bin" && chown 0:0 "$bin" && chmod 755 "$bin"; }; then
  rm -f -- "$bin"; refuse "could not move the daemon to $bin, root's, mode 755"
fi
held "$bin" - || { rm -f -- "$bin"; refuse "$bin is not root's alone after the install: $(ls -ldn -- "$bin" 2>&1)"; }
sum=$(sha256sum -- "$bin") || { rm -f -- "$bin"; refuse "sha256sum could not read $bin"; }
[ -L "$root/workspace" ] && refuse "$root/workspace is a symbolic link"
mkdir -p -- "$root/workspace" && chown "$owner" "$root/workspace" && chmod 755 "$root/workspace" || refuse "could not make $root/workspace the daemon user's"
echo "sha256 ${sum%% *}"
"#;

/// What every command that runs the daemon as root checks first:
/// `sh -c SCRIPT sh DAEMON ARGS…` runs DAEMON only when it and every
/// directory above it hold to the rule.
const GUARDED: &str = r#"
set -f
for p in / /opt /opt/computer-mcp; do
  held "$p" d || { echo "$p is not root's alone: the daemon is not run" >&2; exit 3; }
done
held "$1" - || { echo "$1 is not root's alone: the daemon is not run" >&2; exit 3; }
"#;

/// Upload `daemon` (the static computerd's bytes) and install it at
/// [`DAEMON`], making [`HOME`] and [`RUN_DIR`] beside it, and
/// `/workspace` the daemon's user's (where the server copies shares in).
pub async fn install(host: &dyn ChildHost, daemon: Bytes) -> Result<()> {
    install_under(host, daemon, "").await
}

async fn install_under(host: &dyn ChildHost, daemon: Bytes, root: &str) -> Result<()> {
    let want = hex(&Sha256::digest(&daemon));
    let up = format!(
        "/tmp/computer-mcp-computerd-{}",
        crate::random::random_hex(8)?
    );
    let vendor = host.vendor().to_string();
    host.upload(&up, daemon).await?;
    let script = format!("{HELD}{INSTALL}");
    let owner = format!("{}:{}", DAEMON_USER.uid, DAEMON_USER.gid);
    let argv: Vec<String> = ["/bin/sh", "-c", &script, "sh", &up, root, &owner]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let ran = host.run(&argv, INSTALL_WITHIN).await?;
    if ran.code != 0 {
        return Err(ProviderError::refused(format!(
            "installing the daemon in the {vendor} sandbox was refused: {}",
            last_line(&ran.stderr, "the install script said nothing")
        )));
    }
    let got = ran
        .stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("sha256 "))
        .map(str::trim);
    match got {
        Some(g) if g.eq_ignore_ascii_case(&want) => Ok(()),
        Some(g) => Err(ProviderError::failed(format!(
            "the daemon installed in the {vendor} sandbox is not the one uploaded: its sha256 is {g}, the upload's {want}"
        ))),
        None => Err(ProviderError::failed(format!(
            "the install in the {vendor} sandbox printed no sha256 of the daemon"
        ))),
    }
}

/// Init's flags on every child-daemon vendor: its deadline and the latest
/// one extend may reach, [`SOCKET`], [`DAEMON_USER`] and a network
/// namespace of its own (no program of the computer's user reaches the
/// vendor's agent).
pub fn init_args(deadline: Time, max_deadline: Time) -> InitArgs {
    let mut init = InitArgs::new(deadline, SOCKET);
    init.max_deadline = Some(max_deadline);
    init.user = Some(DAEMON_USER);
    init.own_network = true;
    init
}

/// The argv [`start_init`] hands the host.
pub fn init_argv(init: &InitArgs) -> Vec<String> {
    let start = format!(
        "{HELD}{GUARDED}umask 077\necho $$ > {INIT_PID}\ncd {HOME}\nexec /usr/bin/env -i {CLEAN_PATH} HOME={HOME} \"$@\" >> {INIT_LOG} 2>&1 < /dev/null\n"
    );
    guarded_argv(&start, init.to_args())
}

/// The argv [`connect`] hands the host: `computerd stdio` on [`SOCKET`].
pub fn bridge_argv() -> Vec<String> {
    let start = format!("{HELD}{GUARDED}exec /usr/bin/env -i {CLEAN_PATH} \"$@\"\n");
    let stdio = StdioArgs {
        socket: SOCKET.into(),
        direct: None,
    };
    guarded_argv(&start, stdio.to_args())
}

fn guarded_argv(script: &str, args: Vec<std::ffi::OsString>) -> Vec<String> {
    let mut argv: Vec<String> = ["/bin/sh", "-c", script, "sh", DAEMON]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(args.into_iter().map(|a| a.to_string_lossy().into_owned()));
    argv
}

/// Start `computerd init` in the background.
pub async fn start_init(host: &dyn ChildHost, init: &InitArgs) -> Result<()> {
    host.spawn(&init_argv(init)).await
}

/// Clear the daemon a vendor's snapshot captured, in a computer started
/// from it, before its own init starts: the captured init (still running
/// where the vendor kept memory, as E2B does; named by [`INIT_PID`] and
/// checked to be [`DAEMON`]) is ended, ending the captured programs with
/// it, and its pid file and [`SOCKET`] removed, so neither
/// [`init_ended`] nor a hello reads the captured daemon for the new one.
/// The captured files (HOME's above all) stay.
pub async fn clear_captured(host: &dyn ChildHost) -> Result<()> {
    let script = format!(
        r#"set -u
pid=$(cat {INIT_PID} 2>/dev/null) || pid=
case $pid in ''|*[!0-9]*) pid= ;; esac
if [ -n "$pid" ] && [ "$(readlink /proc/$pid/exe 2>/dev/null)" = {DAEMON} ]; then
  kill -TERM "$pid" 2>/dev/null
  n=0
  while [ -d /proc/$pid ] && [ $n -lt 50 ]; do sleep 0.2; n=$((n+1)); done
  [ -d /proc/$pid ] && kill -KILL "$pid" 2>/dev/null
  echo "ended the captured init $pid"
fi
rm -f -- {INIT_PID} {SOCKET} || exit 3
"#
    );
    let argv: Vec<String> = vec!["/bin/sh".into(), "-c".into(), script];
    let ran = host.run(&argv, CHECK_WITHIN).await?;
    if ran.code != 0 {
        return Err(ProviderError::failed(format!(
            "clearing the snapshot's daemon in the {} sandbox failed: {}",
            host.vendor(),
            last_line(&ran.stderr, "it said nothing")
        )));
    }
    if let Some(l) = ran.stdout.lines().find(|l| l.starts_with("ended")) {
        tracing::info!(vendor = host.vendor(), "{l}");
    }
    Ok(())
}

/// What a vendor's computer offers whose daemon is a child of the
/// vendor's agent, which the vendor only deletes, whose lifetime init
/// enforces and whose network is none: the rest as each vendor says.
pub fn capabilities(
    kind: computerd::protocol::MachineKind,
    groups: Vec<computerd::protocol::Group>,
    max_lifetime_ms: u64,
    network_read_back: bool,
    isolation: &str,
    extend: bool,
) -> crate::types::Capabilities {
    use crate::types::{DaemonMode, LifetimeMode, NetworkKind, Release};
    crate::types::Capabilities {
        kind,
        os: "linux".into(),
        daemon: DaemonMode::Child,
        groups,
        lifetime: LifetimeMode::Enforced,
        release: vec![Release::Delete],
        max_lifetime_ms,
        networks: vec![NetworkKind::None],
        network_read_back,
        isolation: isolation.into(),
        extend,
        shares: crate::types::ShareWay::Copy,
    }
}

/// Open the bridge and say hello over it.
pub async fn connect(host: &dyn ChildHost) -> Result<Connection> {
    let (reader, writer) = host.attach(&bridge_argv()).await?;
    super::hello::call(DaemonClient::from_parts(reader, writer)).await
}

/// Init's last words when it is no longer running (`None` while it runs).
pub async fn init_ended(host: &dyn ChildHost) -> Result<Option<String>> {
    let script = format!(
        "pid=$(cat {INIT_PID} 2>/dev/null) && kill -0 \"$pid\" 2>/dev/null && exit 0\ntail -n 5 {INIT_LOG} 2>/dev/null\nexit 3\n"
    );
    let argv: Vec<String> = vec!["/bin/sh".into(), "-c".into(), script];
    let ran = host.run(&argv, CHECK_WITHIN).await?;
    Ok(match ran.code {
        0 => None,
        _ => Some(super::last_words(
            &ran.stdout.lines().collect::<Vec<_>>(),
            3,
            "it said nothing",
        )),
    })
}

/// A child daemon being started, for [`super::up::wait_until_up`].
pub struct Booting<'a> {
    pub host: &'a dyn ChildHost,
}

#[async_trait::async_trait]
impl Starting for Booting<'_> {
    const WITHIN: Duration = Duration::from_secs(60);
    const EVERY: Duration = Duration::from_millis(500);

    async fn ended(&mut self) -> Result<Option<ProviderError>> {
        Ok(init_ended(self.host).await?.map(|words| {
            ProviderError::failed(format!(
                "the daemon in the {} sandbox ended while starting: {words}",
                self.host.vendor()
            ))
        }))
    }

    async fn attempt(&mut self) -> Try {
        match connect(self.host).await {
            Ok(c) => Try::Up(c),
            Err(e) if e.code == ErrorCode::Unreachable => Try::NotYet(e),
            // The host's own refusal (a key, a gone sandbox) is no better
            // on the next try.
            Err(e)
                if matches!(
                    e.code,
                    ErrorCode::Gone | ErrorCode::Refused | ErrorCode::Unauthorized
                ) =>
            {
                Try::Failed(e)
            }
            Err(e) => Try::NotYet(e),
        }
    }

    fn late(&self, last: ProviderError) -> ProviderError {
        ProviderError::new(
            ErrorCode::Unreachable,
            format!(
                "the daemon in the {} sandbox did not answer within {} s: {}",
                self.host.vendor(),
                Self::WITHIN.as_secs(),
                last.message
            ),
        )
    }
}

fn last_line<'a>(s: &'a str, none: &'a str) -> &'a str {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(none)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
#[path = "child/tests.rs"]
mod tests;
