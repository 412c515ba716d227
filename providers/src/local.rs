//! The `local` provider: computers on this machine, no Docker needed.
//!
//! Each computer is a `computerd sandbox` (namespaces set up by computerd
//! itself, as bubblewrap does: a root of its own holding only the host's OS
//! directories, read-only; a tmpfs HOME at /work and a tmpfs /tmp, each
//! half of its memory; its own /proc, /sys and process space; with network
//! none only its own loopback) running `computerd init`, reached over
//! init's unix socket. It is bounded by a cgroup of its own ([`cgroup`]:
//! cpus, memoryMb, pids; killed whole on release) and, with a root server,
//! runs as a uid of its own ([`uids`]). Host directories enter only as
//! shares at /workspace. A computer's files live under the state directory
//! the server owns:
//!
//! ```text
//! <state>/computers/<id>/meta.json   what it was made from, its deadline, uid, limits, its process
//!                        work/       HOME with isolation none only (a sandbox's is its tmpfs)
//!                        run/        init's socket (/run/computerd inside)
//!                        daemon.log  computerd's stderr
//! <state>/uids/<uid>                 the lock that holds a computer's uid
//! ```
//!
//! The deadline is init's: a computer ends itself then, whether or not the
//! server is still there.

pub mod browser;
pub mod cgroup;
pub mod desktop;
pub mod egress;
mod lease;
mod state;
pub mod uids;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use computerd::client::DaemonClient;
use computerd::launch::{
    InitArgs, Network, Program, SandboxArgs, Screen, Share, SpareArgs, Time, UserSpec,
};
use computerd::protocol::{self, Group, HelloParams, MachineKind};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::provider::{Connection, Provider};
use crate::registry::Configure;
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkRead, NetworkReadBack, ProviderError, Release,
    Result, check_labels, check_lifetime, human_ms,
};
use state::{Meta, Process};

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

pub struct LocalProvider {
    opts: LocalOptions,
    root: bool,
    /// Where computers' cgroups are made, found once; the words say why
    /// there are none.
    cgroups: std::result::Result<cgroup::Cgroups, String>,
    /// This machine's CPUs and memory, which sizes are checked against.
    host: cgroup::Host,
    /// A uid per computer, for a root server with no forced --run-as.
    uids: Option<uids::UidAllocator>,
    /// The sandbox made ahead of the next computer, and whether one is
    /// being made.
    spare: Arc<std::sync::Mutex<Option<Spare>>>,
    refilling: Arc<std::sync::atomic::AtomicBool>,
    /// Children this server started, reaped on release.
    children: tokio::sync::Mutex<std::collections::HashMap<String, tokio::process::Child>>,
    /// The desktop's Xvfb and screen, when the provider makes desktops.
    desktop: Option<desktop::Desktop>,
    /// The Chromium, when the provider makes browsers.
    browser: Option<browser::Browser>,
    /// Its hold on the state directory's cgroup group (none without
    /// cgroups).
    lease: Option<lease::Lease>,
}

/// How long a new computer gets to answer on its socket.
const START_WAIT: Duration = Duration::from_secs(15);
/// How long a release waits for init's orderly shutdown (3 s for starts,
/// 5 s to KILL, a little more) before it kills what is left.
const RELEASE_WAIT: Duration = Duration::from_secs(10);
const DEFAULT_RUN_AS: &str = "65534:65534";
/// Where a sandbox shows its run directory (init's socket) inside.
const SANDBOX_RUN: &str = "/run/computerd";
/// HOME inside a sandbox: a tmpfs of its own.
const SANDBOX_HOME: &str = "/work";
/// /work and /tmp when no memory bound sizes them (no cgroup).
const UNBOUNDED_TMPFS_MIB: u64 = 1024;

/// What computerd is started as.
enum Launch {
    Sandbox(SandboxArgs),
    Init(InitArgs),
}

/// A `computerd spare` made ahead of the next computer: already in a fresh
/// cgroup (so the kernel's wait for a first move into one is paid off the
/// call's path), waiting on its stdin for its sandbox's arguments.
struct Spare {
    id: String,
    child: tokio::process::Child,
    cgroup: cgroup::ComputerCgroup,
    /// Its stderr until it is a computer's (renamed to daemon.log then).
    log: PathBuf,
}

/// computerd's environment and output, the same for every start: a clean
/// environment, logs to `log`, a process group of its own (a Ctrl-C at the
/// server's terminal is the server's to handle, not every computer's).
fn computerd_env(cmd: &mut tokio::process::Command, log: std::fs::File) -> Result<()> {
    let log2 = log
        .try_clone()
        .map_err(|e| ProviderError::failed(format!("could not open the daemon's log: {e}")))?;
    cmd.env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("COMPUTERD_LOG", "warn")
        .stdout(log)
        .stderr(log2)
        .kill_on_drop(false)
        .process_group(0);
    Ok(())
}

/// What a computer is given beyond its spec, decided before it starts.
struct Prepared {
    user: (u32, u32),
    cgroup_dirs: Vec<PathBuf>,
    /// Half of memoryMb each: a full /work fails writes with ENOSPC
    /// before the OOM killer would take init (tmpfs pages count as the
    /// computer's memory).
    work_size_mib: u64,
    tmp_size_mib: u64,
    shares: Vec<crate::share::Share>,
    /// RLIMIT_NPROC, where no cgroup bounds the computer's processes.
    max_procs: Option<u64>,
}

impl LocalProvider {
    pub fn new(opts: LocalOptions) -> Result<Self> {
        if !opts.state_dir.is_absolute() {
            return Err(ProviderError::invalid(
                "state_dir",
                "the state directory must be an absolute path",
            ));
        }
        if !opts.computerd.is_absolute() {
            return Err(ProviderError::invalid(
                "computerd",
                "the computerd path must be absolute",
            ));
        }
        if let Some(u) = &opts.run_as {
            parse_uid_gid(u)?;
        }
        let desktop = opts.desktop.map(desktop::Desktop::find).transpose()?;
        // A browser needs Chromium; a desktop drives its own where
        // there is one.
        let browser = match (&desktop, opts.browser) {
            (Some(_), true) => {
                return Err(ProviderError::invalid(
                    "kind",
                    "a local provider makes desktops or browsers, not both",
                ));
            }
            (None, true) => Some(browser::Browser::find()?),
            (Some(_), false) => browser::Browser::find().ok(),
            (None, false) => None,
        };
        let root = nix::unistd::geteuid().is_root();
        let wants_cgroups = opts.isolation == Isolation::Namespaces && opts.cgroups;
        // Taken before the group is found (and made), so that a provider
        // ending alone cannot remove it between.
        let (lease, alone) = match wants_cgroups.then(|| lease::Lease::take(&opts.state_dir)) {
            Some(Ok((l, alone))) => (Some(l), alone),
            Some(Err(e)) => {
                tracing::warn!(
                    "no hold on the state directory {} ({e}): this server removes neither its cgroup group nor leftover cgroups",
                    opts.state_dir.display()
                );
                (None, false)
            }
            None => (None, false),
        };
        let cgroups = match opts.isolation {
            Isolation::Namespaces if !opts.cgroups => Err("cgroups were turned off".into()),
            Isolation::Namespaces => {
                cgroup::Cgroups::detect(&cgroup::group_for(&opts.state_dir)).map_err(|e| e.message)
            }
            Isolation::None => Err("isolation none makes no cgroup".into()),
        };
        match &cgroups {
            Ok(c) => tracing::debug!("computers' cgroups: {}", c.layout()),
            Err(why) => tracing::warn!(
                "local computers get no cgroup, so their memory and CPU are not bounded: {why}"
            ),
        }
        if let (Ok(c), true) = (&cgroups, alone) {
            // Cgroups left by a server that was killed (a spare's, or a
            // computer's whose state is gone) go now rather than at a sweep;
            // only when no other provider uses the state directory, whose
            // spare or computer being made would look the same.
            let computers = opts.state_dir.join("computers");
            for id in c.list_existing() {
                if !computers.join(egress::computer_of(&id)).exists()
                    && let Ok(cg) = c.open(&id)
                {
                    let _ = cg.release();
                }
            }
        }
        if let Some(Err(e)) = lease.as_ref().map(lease::Lease::share) {
            return Err(ProviderError::failed(format!(
                "cannot share the hold on the state directory {}: {e}",
                opts.state_dir.display()
            )));
        }
        let uids = (root && opts.isolation == Isolation::Namespaces && opts.run_as.is_none())
            .then(|| uids::UidAllocator::new(&opts.state_dir))
            .transpose()?;
        Ok(Self {
            opts,
            root,
            cgroups,
            host: cgroup::Host::read()?,
            uids,
            spare: Arc::new(std::sync::Mutex::new(None)),
            refilling: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            children: tokio::sync::Mutex::new(Default::default()),
            desktop,
            browser,
            lease,
        })
    }

    fn computers_dir(&self) -> PathBuf {
        self.opts.state_dir.join("computers")
    }

    fn dir_of(&self, id: &str) -> Result<PathBuf> {
        let ok = id.starts_with("local-")
            && id.len() <= 64
            && id[6..].bytes().all(|b| b.is_ascii_hexdigit());
        if !ok {
            return Err(ProviderError::not_found(format!(
                "no local computer {id:?}"
            )));
        }
        Ok(self.computers_dir().join(id))
    }

    /// The setting kind this provider's computers are.
    fn made_kind(&self) -> computerd::protocol::SettingKind {
        use computerd::protocol::SettingKind;
        match (&self.desktop, &self.browser) {
            (Some(_), _) => SettingKind::Desktop,
            (None, Some(_)) => SettingKind::Browser,
            (None, None) => SettingKind::Sandbox,
        }
    }

    fn isolation_words(&self) -> String {
        match (self.opts.isolation, self.root) {
            (Isolation::None, _) => "none: programs run on this machine as the server's user (unsafe)".into(),
            (Isolation::Namespaces, true) => format!(
                "namespaces (mount, pid, ipc, uts, network) set up by computerd as root: of the host only its OS directories (/usr, /bin, /sbin, /lib*, /etc), read-only; HOME /work and /tmp are sized tmpfs of the computer's own; programs run as {} with no capability, no_new_privs and seccomp",
                match &self.opts.run_as {
                    Some(u) => u.clone(),
                    None => "a uid of their own (no host account or other computer has it)".into(),
                }
            ),
            (Isolation::Namespaces, false) => "a user namespace with mount, pid, ipc, uts and network namespaces set up by computerd: of the host only its OS directories (/usr, /bin, /sbin, /lib*, /etc), read-only; HOME /work and /tmp are sized tmpfs of the computer's own; programs run as the server's user with no capability, no_new_privs and seccomp".into(),
        }
    }

    /// The uid:gid a new computer's programs run as, and whether it was
    /// allocated for it alone.
    fn user_for(&self, id: &str) -> Result<((u32, u32), bool)> {
        if !(self.root && self.opts.isolation == Isolation::Namespaces) {
            return Ok((
                (
                    nix::unistd::getuid().as_raw(),
                    nix::unistd::getgid().as_raw(),
                ),
                false,
            ));
        }
        if let Some(u) = &self.opts.run_as {
            return Ok((parse_uid_gid(u)?, false));
        }
        match &self.uids {
            Some(a) => {
                let uid = a.allocate(id)?;
                Ok(((uid, uid), true))
            }
            None => Ok((parse_uid_gid(DEFAULT_RUN_AS)?, false)),
        }
    }

    /// The limits a spec gets: its sizes checked against this machine, the
    /// defaults for the rest; None where no cgroup can be made, which
    /// refuses an explicit size naming what is missing.
    fn limits_for(&self, spec: &ComputerSpec) -> Result<Option<cgroup::Limits>> {
        match &self.cgroups {
            Ok(_) => cgroup::Limits::from_sizes(&spec.sizes, &self.host).map(Some),
            Err(why) => {
                // pids is still bounded, by RLIMIT_NPROC (Prepared::max_procs).
                if let Some(n) = spec.sizes.pids
                    && !(cgroup::MIN_PIDS..=cgroup::MAX_PIDS).contains(&n)
                {
                    return Err(ProviderError::invalid(
                        "pids",
                        format!(
                            "pids {n} is out of range: from {} to {}",
                            cgroup::MIN_PIDS,
                            cgroup::MAX_PIDS
                        ),
                    ));
                }
                for (field, set) in [
                    ("cpus", spec.sizes.cpus.is_some()),
                    ("memoryMb", spec.sizes.memory_mb.is_some()),
                ] {
                    if set {
                        return Err(ProviderError::unsupported(format!(
                            "this host cannot bound a local computer's {field}: {why}; leave {field} out"
                        ))
                        .with_field(field));
                    }
                }
                Ok(None)
            }
        }
    }

    /// The computer's cgroup, made with its limits (blocking file writes,
    /// off the runtime's threads).
    async fn make_cgroup(
        &self,
        id: &str,
        limits: cgroup::Limits,
    ) -> Result<Option<cgroup::ComputerCgroup>> {
        let Ok(cgroups) = &self.cgroups else {
            return Ok(None);
        };
        let cgroups = cgroups.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || cgroups.create(&id, &limits))
            .await
            .map_err(|e| {
                ProviderError::failed(format!("making the computer's cgroup failed: {e}"))
            })?
            .map(Some)
    }

    /// Kill whatever is left in the computer's cgroup and remove it, and
    /// give back its uid. Nothing of the computer survives this, whatever
    /// it forked.
    async fn release_bounds(&self, meta: &Meta) -> Result<()> {
        self.end_egress(meta).await?;
        if meta.limits.is_some()
            && let Ok(cgroups) = &self.cgroups
        {
            let cgroups = cgroups.clone();
            let id = meta.id.clone();
            tokio::task::spawn_blocking(move || match cgroups.open(&id) {
                Ok(cg) => cg.release(),
                Err(e) if e.code == ErrorCode::NotFound => Ok(()),
                Err(e) => Err(e),
            })
            .await
            .map_err(|e| {
                ProviderError::failed(format!("releasing the computer's cgroup failed: {e}"))
            })??;
        }
        if meta.own_uid
            && let (Some(a), Some((uid, _))) = (&self.uids, meta.user)
        {
            a.release(uid)?;
        }
        Ok(())
    }

    /// The part of create that can fail after the uid is taken: shares
    /// checked, the cgroup made, computerd started and its limits and
    /// network read back. The caller cleans up on an error.
    async fn start(
        &self,
        spec: &ComputerSpec,
        meta: &mut Meta,
        dir: &Path,
        spare: Option<Spare>,
        cancel: &CancellationToken,
    ) -> Result<Created> {
        let id = meta.id.clone();
        let user = meta.user.unwrap_or((0, 0));
        let shares = crate::share::plan(&spec.shares, &self.opts.state_dir, user)?;
        if !shares.is_empty() && self.opts.isolation == Isolation::None {
            return Err(ProviderError::unsupported(
                "with isolation none a computer sees this whole machine: there is nothing to share; leave share out",
            )
            .with_field("share"));
        }
        // With isolation none, programs run in work/ on the host; in a
        // sandbox HOME is the sandbox's own tmpfs and work/ stays empty.
        for sub in ["", "work", "run"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(|e| {
                ProviderError::failed(format!("could not make {}: {e}", d.display()))
            })?;
            state::make_private(&d).map_err(|e| {
                ProviderError::failed(format!("could not make {} private: {e}", d.display()))
            })?;
        }
        let cg = match (meta.limits, &spare) {
            (Some(l), Some(s)) => {
                s.cgroup.set_limits(&l)?;
                Some(s.cgroup.clone())
            }
            (Some(l), None) => self.make_cgroup(&id, l).await?,
            (None, _) => None,
        };
        let half = meta
            .limits
            .map_or(UNBOUNDED_TMPFS_MIB, |l| (l.memory_mb / 2).max(1));
        let prep = Prepared {
            user,
            cgroup_dirs: cg.as_ref().map(|c| c.dirs()).unwrap_or_default(),
            work_size_mib: half,
            tmp_size_mib: spec.sizes.disk_mb.unwrap_or(half),
            shares,
            max_procs: match (&cg, self.opts.isolation) {
                (None, Isolation::Namespaces) => {
                    Some(spec.sizes.pids.unwrap_or(cgroup::DEFAULT_PIDS))
                }
                _ => None,
            },
        };
        if let Some(cg) = &cg {
            let read = cg.read_back()?;
            meta.limits = Some(read);
        }
        state::write_meta(&dir.join("meta.json"), meta).map_err(|e| {
            ProviderError::failed(format!("could not write the computer's state: {e}"))
        })?;
        let list = egress::list_of(&spec.network)?;
        if list.is_some() {
            let edir = egress::dir_of(dir);
            std::fs::create_dir_all(&edir).map_err(|e| {
                ProviderError::failed(format!("could not make {}: {e}", edir.display()))
            })?;
            // Root's, passable by the computer's user to reach the socket
            // (0660, its group); with no root, the server's alone.
            let mode = if self.root { 0o711 } else { 0o700 };
            std::fs::set_permissions(&edir, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .map_err(|e| {
                    ProviderError::failed(format!("could not set {}'s mode: {e}", edir.display()))
                })?;
        }
        let mut child = match spare {
            Some(s) => self.start_spare(s, dir, meta, spec, &prep).await?,
            None => self.spawn(&id, dir, meta, spec, &prep).await?,
        };
        meta.process = child.id().and_then(|pid| Process::of(pid as i32));
        let proxied = match (&list, child.id()) {
            (Some(list), Some(pid)) => self.start_egress(meta, dir, list, pid).await,
            _ => Ok(()),
        };
        if let Err(e) = proxied {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(e);
        }
        let written = state::write_meta(&dir.join("meta.json"), meta);
        let up = match written {
            Ok(()) => self.wait_until_up(&id, &mut child, cancel).await,
            Err(e) => Err(ProviderError::failed(format!(
                "could not write the computer's state: {e}"
            ))),
        };
        // Held from here, so a failure below ends it.
        self.children.lock().await.insert(id.clone(), child);
        let up = up?;
        let window_manager = match &self.desktop {
            Some(_) => Some(crate::window_manager::start(&up.client).await),
            None => None,
        };
        up.client.close();
        let network = self.read_network(meta)?;
        let mut notes = vec![format!("isolation: {}", self.isolation_words())];
        notes.push(match (&meta.limits, &self.cgroups) {
            (Some(l), Ok(c)) => format!(
                "limits: {l} (read back from its cgroup, {}); /work and /tmp are {half} MiB each and count as its memory",
                match c.version() {
                    cgroup::Version::V1 => "cgroup v1",
                    cgroup::Version::V2 => "cgroup v2",
                }
            ),
            (_, Err(why)) => match prep.max_procs {
                Some(n) => format!(
                    "limits: at most {n} processes (RLIMIT_NPROC); memory and CPU are NOT bounded ({why}); /work and /tmp are {half} MiB each"
                ),
                None => format!(
                    "limits: none on memory, CPU or processes ({why}); /work and /tmp are {half} MiB each"
                ),
            },
            (None, Ok(_)) => "limits: none".into(),
        });
        if let Some(d) = &self.desktop {
            notes.push(format!(
                "desktop: a {} screen (Xvfb, started by the computer's init as its user); programs get DISPLAY",
                d.screen
            ));
        }
        notes.extend(window_manager);
        match (&self.browser, &self.desktop) {
            (Some(b), None) => notes.push(format!(
                "browser: {} started headless in the computer as its user when it is connected, its profile in {}, driven over its debugging pipe through the computer's daemon (no port opened); Chromium's own sandbox is off, the computer is the boundary",
                b.chromium.display(),
                browser::PROFILE
            )),
            (Some(b), Some(_)) => notes.push(format!(
                "browser: {} shown on the screen when a page tool first needs it, as the computer's user, its profile in {}, driven over its debugging pipe (no port opened); Chromium's own sandbox is off, the computer is the boundary",
                b.chromium.display(),
                browser::PROFILE
            )),
            (None, Some(_)) => notes.push(
                "browser: none (this machine has no Chromium: apt-get install chromium gives the desktop page tools)".into(),
            ),
            (None, None) => {}
        }
        for s in &prep.shares {
            notes.push(format!(
                "share: {} at {}{}",
                s.source.display(),
                s.target,
                if s.read_only { " (read-only)" } else { "" }
            ));
        }
        Ok(Created {
            computer: self.to_ref(meta),
            network: Some(network),
            notes,
        })
    }

    /// The spare, if one is ready and still waiting.
    fn take_spare(&self) -> Option<Spare> {
        let mut spare = self
            .spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        match spare.child.try_wait() {
            Ok(None) => Some(spare),
            _ => {
                // It ended (a sweep, a kill): its cgroup goes too.
                let _ = spare.cgroup.release();
                let _ = std::fs::remove_file(&spare.log);
                None
            }
        }
    }

    /// Make the next spare in the background, unless one is ready or being
    /// made (only where computers get cgroups).
    fn refill(&self) {
        use std::sync::atomic::Ordering;
        let (Ok(cgroups), Isolation::Namespaces) = (&self.cgroups, self.opts.isolation) else {
            return;
        };
        if self
            .spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
            || self.refilling.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let (cgroups, host) = (cgroups.clone(), self.host);
        let (computerd, state) = (self.opts.computerd.clone(), self.opts.state_dir.clone());
        let (slot, refilling) = (Arc::clone(&self.spare), Arc::clone(&self.refilling));
        tokio::spawn(async move {
            match make_spare(cgroups, host, &computerd, &state).await {
                Ok(spare) => {
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.is_none() {
                        *slot = Some(spare);
                    }
                }
                Err(e) => tracing::debug!("no spare sandbox: {}", e.message),
            }
            refilling.store(false, Ordering::Release);
        });
    }

    fn meta_path(&self, id: &str) -> Result<PathBuf> {
        Ok(self.dir_of(id)?.join("meta.json"))
    }

    fn read_meta(&self, id: &str) -> Result<Meta> {
        let path = self.meta_path(id)?;
        state::read_meta(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ProviderError::not_found(format!("no local computer {id}"))
            }
            _ => ProviderError::failed(format!(
                "could not read the local computer {id}'s state: {e}"
            )),
        })
    }

    fn to_ref(&self, meta: &Meta) -> ComputerRef {
        ComputerRef {
            provider: "local".into(),
            id: meta.id.clone(),
            labels: meta.labels.clone(),
            created_at: state::format_ms(meta.created_ms),
            deadline: state::format_ms(meta.deadline_ms),
            running: meta.process.as_ref().is_some_and(Process::alive),
            home: Some(meta.work_dir.clone()),
            user: meta.user.map(|(u, g)| format!("{u}:{g}")),
            // Read from the cgroup's files now, not from what create wrote.
            sizes: self
                .cgroups
                .as_ref()
                .ok()
                .and_then(|c| c.open(&meta.id).ok())
                .and_then(|cg| cg.read_back().ok())
                .map(sizes_read_back),
            // It runs this machine's own system: no image (check refuses one).
            image: None,
            network: None,
        }
    }

    fn socket_of(&self, id: &str) -> Result<PathBuf> {
        Ok(self.dir_of(id)?.join("run").join("computerd.sock"))
    }

    /// The words computerd left on stderr, for a start that failed.
    fn last_words(&self, id: &str) -> String {
        let log = self.dir_of(id).map(|d| d.join("daemon.log")).ok();
        let text = log
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
        if tail.is_empty() {
            "it said nothing".into()
        } else {
            tail
        }
    }

    /// What computerd is started with: init's flags, and with namespaces
    /// the sandbox around it.
    fn command_of(
        &self,
        dir: &Path,
        meta: &Meta,
        spec: &ComputerSpec,
        prep: &Prepared,
    ) -> Result<Launch> {
        let run = dir.join("run");
        let socket = run.join("computerd.sock");
        let time = |field: &str, ms: i64| {
            Time::from_unix_ms(ms).ok_or_else(|| {
                ProviderError::invalid(
                    field,
                    format!("{field} {ms} ms is not a time computerd can hold"),
                )
            })
        };
        // Inside a sandbox the run directory is /run/computerd; without
        // one, init listens at its host path.
        let socket_arg = match self.opts.isolation {
            Isolation::Namespaces => Path::new(SANDBOX_RUN).join("computerd.sock"),
            Isolation::None => socket.clone(),
        };
        let mut init = InitArgs::new(time("deadline", meta.deadline_ms)?, socket_arg);
        init.max_deadline = Some(time("maxDeadline", meta.max_deadline_ms)?);
        if let Some(d) = &self.desktop {
            d.launch(&mut init);
        }
        Ok(match self.opts.isolation {
            Isolation::Namespaces => {
                if self.root {
                    let (uid, gid) = prep.user;
                    init.user = Some(UserSpec { uid, gid });
                }
                if matches!(spec.network, NetworkPolicy::Allow(_)) {
                    // No route of its own; its one way out is the proxy's
                    // socket, bound read-only.
                    init.egress = Some(egress::SOCKET_INSIDE.into());
                }
                let mut sandbox = SandboxArgs::new(&run, init);
                sandbox.network = match spec.network {
                    NetworkPolicy::Open => Network::Host,
                    _ => Network::None,
                };
                if matches!(spec.network, NetworkPolicy::Allow(_)) {
                    sandbox.egress = Some(egress::dir_of(dir));
                }
                sandbox.work_size_mib = prep.work_size_mib;
                sandbox.tmp_size_mib = prep.tmp_size_mib;
                sandbox.cgroups = prep.cgroup_dirs.clone();
                sandbox.max_procs = prep.max_procs;
                sandbox.binds = prep
                    .shares
                    .iter()
                    .map(|s| Share {
                        source: s.source.clone(),
                        inside: s.target.clone().into(),
                        read_only: s.read_only,
                    })
                    .collect();
                Launch::Sandbox(sandbox)
            }
            Isolation::None => Launch::Init(init),
        })
    }

    async fn spawn(
        &self,
        id: &str,
        dir: &Path,
        meta: &Meta,
        spec: &ComputerSpec,
        prep: &Prepared,
    ) -> Result<tokio::process::Child> {
        let work = dir.join("work");
        let log = std::fs::File::create(dir.join("daemon.log"))
            .map_err(|e| ProviderError::failed(format!("could not make the daemon's log: {e}")))?;
        let program = Program::at(&self.opts.computerd);
        let cmd = match self.command_of(dir, meta, spec, prep)? {
            Launch::Sandbox(sandbox) => program.command(sandbox),
            Launch::Init(init) => program.command(init),
        };
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.env("HOME", &work)
            .current_dir(&work)
            .stdin(Stdio::null());
        computerd_env(&mut cmd, log)?;
        cmd.spawn()
            .map_err(|e| {
                ProviderError::failed(format!(
                    "could not start computerd ({}): {e}",
                    self.opts.computerd.display()
                ))
            })
            .inspect(|_c| {
                tracing::debug!(computer = id, "computerd started");
            })
    }

    /// Hand a spare its sandbox: the computer starts from there, its
    /// cgroups joined long before.
    async fn start_spare(
        &self,
        mut spare: Spare,
        dir: &Path,
        meta: &Meta,
        spec: &ComputerSpec,
        prep: &Prepared,
    ) -> Result<tokio::process::Child> {
        use tokio::io::AsyncWriteExt;
        let Launch::Sandbox(sandbox) = self.command_of(dir, meta, spec, prep)? else {
            return Err(ProviderError::failed("a spare is a sandbox's"));
        };
        // Its log becomes the computer's.
        let _ = std::fs::rename(&spare.log, dir.join("daemon.log"));
        let go = SpareArgs::go(&sandbox);
        let mut stdin = spare
            .child
            .stdin
            .take()
            .ok_or_else(|| ProviderError::failed("the spare sandbox has no stdin"))?;
        let sent = async {
            stdin.write_all(&go).await?;
            stdin.shutdown().await
        }
        .await;
        drop(stdin);
        if let Err(e) = sent {
            let _ = spare.child.start_kill();
            let _ = spare.child.wait().await;
            return Err(ProviderError::failed(format!(
                "the spare sandbox did not take its arguments: {e}"
            )));
        }
        Ok(spare.child)
    }

    async fn wait_until_up(
        &self,
        id: &str,
        child: &mut tokio::process::Child,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let socket = self.socket_of(id)?;
        let until = tokio::time::Instant::now() + START_WAIT;
        loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::new(
                    ErrorCode::Aborted,
                    "creating the computer was cancelled",
                ));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(ProviderError::refused(format!(
                    "the local computer could not start ({status}): {}",
                    self.last_words(id)
                )));
            }
            if let Ok(stream) = tokio::net::UnixStream::connect(&socket).await {
                return self.hello(stream).await;
            }
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the local computer did not answer within {} s: {}",
                        START_WAIT.as_secs(),
                        self.last_words(id)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn hello(&self, stream: tokio::net::UnixStream) -> Result<Connection> {
        // Registered for reading only: init's reads do not wake this side.
        let stream = computerd::quiet::QuietStream::from_tokio(stream).map_err(|e| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("could not set up the computer's connection: {e}"),
            )
        })?;
        let client = DaemonClient::new(stream);
        let hello = tokio::time::timeout(
            Duration::from_secs(10),
            client.call(&HelloParams {
                client: Some(format!("computer-mcp {}", env!("CARGO_PKG_VERSION"))),
            }),
        )
        .await
        .map_err(|_| {
            ProviderError::new(
                ErrorCode::Unreachable,
                "the computer's daemon did not answer hello within 10 s",
            )
        })?
        .map_err(|e| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("the computer's daemon did not answer hello: {e}"),
            )
        })?;
        // A daemon of another build (the drift check): never handed out.
        if hello.version != computerd::VERSION {
            return Err(ProviderError::refused(format!(
                "the computer's daemon is computerd {}, and this server is built with {}: a computer of another daemon is not handed out",
                hello.version,
                computerd::VERSION
            )));
        }
        if let Some(d) = &self.desktop {
            d.check_hello(&hello)?;
        } else if hello.kind != MachineKind::Linux || !hello.groups.contains(&Group::Exec) {
            let groups: Vec<&str> = hello.groups.iter().map(|g| g.as_str()).collect();
            return Err(ProviderError::refused(format!(
                "the computer's daemon says kind {} with groups {groups:?}; a local computer is linux with exec, files and processes",
                hello.kind
            )));
        }
        Ok(Connection {
            client: Arc::new(client),
            hello,
        })
    }

    /// A browser's connection: the computer's daemon, with the browser
    /// started inside it on its pipe.
    async fn with_browser(&self, daemon: Connection, meta: &Meta) -> Result<Connection> {
        let Some(b) = &self.browser else {
            return Ok(daemon);
        };
        let desktop = self.desktop.is_some();
        let client = crate::cdp::BrowserClient::in_computer(
            daemon.client,
            &daemon.hello,
            if desktop {
                daemon.hello.kind
            } else {
                MachineKind::Browser
            },
            &b.launch(meta.network, desktop),
            Default::default(),
        )
        .bounded_by(meta.limits.map(sizes_read_back));
        // A browser is handed out running; a desktop's starts when a page
        // tool first needs it.
        if !desktop {
            client.start().await.map_err(|e| {
                ProviderError::new(
                    e.code,
                    format!("the local computer {}: {}", meta.id, e.message),
                )
            })?;
        }
        let hello = client.hello().clone();
        Ok(Connection {
            client: Arc::new(client),
            hello,
        })
    }

    /// The network of a running computer, read from its processes' namespace.
    fn read_network(&self, meta: &Meta) -> Result<NetworkReadBack> {
        if self.opts.isolation == Isolation::None || meta.network == NetworkKind::Open {
            return Ok(NetworkReadBack {
                kind: NetworkKind::Open,
                detail: "the host's own network".into(),
            });
        }
        let Some(p) = meta.process.as_ref().filter(|p| p.alive()) else {
            return Err(ProviderError::gone(format!(
                "the local computer {} is not running",
                meta.id
            )));
        };
        let read = |name: &str| std::fs::read_to_string(format!("/proc/{}/net/{name}", p.pid));
        let dev = read("dev").map_err(|e| {
            ProviderError::failed(format!("could not read the computer's interfaces: {e}"))
        })?;
        let names: Vec<String> = dev
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(|n| n.trim().to_string())
            .collect();
        let routes = read("route").unwrap_or_default();
        let v4_routes = routes
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .count();
        let v6_addrs: Vec<String> = read("if_inet6")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().last().map(String::from))
            .filter(|n| n != "lo")
            .collect();
        if v4_routes > 0 || !v6_addrs.is_empty() {
            return Err(ProviderError::refused(format!(
                "the local computer {} was asked for network none, but its namespace has {v4_routes} IPv4 routes and IPv6 addresses on {:?}",
                meta.id, v6_addrs
            )));
        }
        if meta.network == NetworkKind::Allow {
            let list = self.read_egress(meta)?;
            return Ok(NetworkReadBack {
                kind: NetworkKind::Allow,
                detail: format!(
                    "allow {}: a network namespace of its own (interfaces {}; no route out) whose one way out is its egress proxy, outside it, read back holding that list (ports 80 and 443; private, loopback, link-local, metadata and this machine's addresses always refused)",
                    list.join(", "),
                    names.join(", ")
                ),
            });
        }
        Ok(NetworkReadBack {
            kind: NetworkKind::None,
            detail: format!(
                "a network namespace of its own: interfaces {}; no route out",
                names.join(", ")
            ),
        })
    }

    async fn end(&self, meta: &mut Meta) -> Result<()> {
        let child = self.children.lock().await.remove(&meta.id);
        let Some(p) = meta.process.clone() else {
            return Ok(());
        };
        if p.alive() {
            // TERM: init shuts down in order (programs get TERM, then KILL).
            p.signal(libc::SIGTERM);
        }
        let until = tokio::time::Instant::now() + RELEASE_WAIT;
        let mut child = child;
        loop {
            if let Some(c) = child.as_mut()
                && let Ok(Some(_)) = c.try_wait()
            {
                break;
            }
            if child.is_none() && !p.alive() {
                break;
            }
            if tokio::time::Instant::now() >= until {
                tracing::warn!(
                    computer = meta.id,
                    "did not end in order within {} s; killing it",
                    RELEASE_WAIT.as_secs()
                );
                p.signal(libc::SIGKILL);
                if let Some(c) = child.as_mut() {
                    let _ = c.wait().await;
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        meta.process = None;
        Ok(())
    }
}

/// A spare: a fresh cgroup with the default limits and `computerd spare`
/// in it, its log under `<state>/spares`.
async fn make_spare(
    cgroups: cgroup::Cgroups,
    host: cgroup::Host,
    computerd: &Path,
    state: &Path,
) -> Result<Spare> {
    let id = random_id()?;
    let limits = cgroup::Limits::from_sizes(&Default::default(), &host)?;
    let cg = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || cgroups.create(&id, &limits))
            .await
            .map_err(|e| ProviderError::failed(format!("making a spare's cgroup failed: {e}")))??
    };
    let made = async {
        let dir = state.join("spares");
        std::fs::create_dir_all(&dir)
            .and_then(|()| state::make_private(&dir))
            .map_err(|e| ProviderError::failed(format!("could not make {}: {e}", dir.display())))?;
        let log_path = dir.join(format!("{id}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| ProviderError::failed(format!("could not make a spare's log: {e}")))?;
        let mut cmd = tokio::process::Command::from(
            Program::at(computerd).command(SpareArgs { cgroups: cg.dirs() }),
        );
        cmd.current_dir("/").stdin(Stdio::piped());
        computerd_env(&mut cmd, log)?;
        let child = cmd.spawn().map_err(|e| {
            ProviderError::failed(format!("could not start a spare computerd: {e}"))
        })?;
        Ok::<_, ProviderError>((child, log_path))
    }
    .await;
    match made {
        Ok((child, log)) => Ok(Spare {
            id,
            child,
            cgroup: cg,
            log,
        }),
        Err(e) => {
            let _ = cg.release();
            Err(e)
        }
    }
}

fn parse_uid_gid(s: &str) -> Result<(u32, u32)> {
    let bad = || {
        ProviderError::invalid(
            "run_as",
            format!("--local-run-as {s:?} is not uid:gid (two numbers)"),
        )
    };
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

fn random_id() -> Result<String> {
    Ok(format!("local-{}", crate::random::random_hex(8)?))
}

impl Drop for LocalProvider {
    fn drop(&mut self) {
        if let Some(mut s) = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Its stdin closes with it, so it would end by itself; kill it
            // so that its cgroup can go now.
            let _ = s.child.start_kill();
            let _ = s.cgroup.release();
            let _ = std::fs::remove_file(&s.log);
        }
        // The state directory's cgroup group goes when no other provider
        // uses it and it holds no computer (rmdir refuses a group with kept
        // computers in it).
        if let (Some(lease), Ok(c)) = (self.lease.take(), &self.cgroups) {
            lease.end(|| c.remove_group());
        }
    }
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

#[async_trait::async_trait]
impl Provider for LocalProvider {
    fn id(&self) -> &'static str {
        "local"
    }

    fn capabilities(&self) -> Capabilities {
        let networks = match self.opts.isolation {
            Isolation::Namespaces => vec![NetworkKind::None, NetworkKind::Open, NetworkKind::Allow],
            Isolation::None => vec![NetworkKind::Open],
        };
        let mut groups = vec![Group::Exec, Group::Files, Group::Processes];
        if self.desktop.is_some() {
            groups.extend_from_slice(desktop::GROUPS);
        }
        if self.browser.is_some() {
            groups.extend_from_slice(browser::GROUPS);
        }
        Capabilities {
            kind: match (&self.desktop, &self.browser) {
                (Some(_), _) => MachineKind::Desktop,
                (None, Some(_)) => MachineKind::Browser,
                (None, None) => MachineKind::Linux,
            },
            os: "linux".into(),
            daemon: match self.opts.isolation {
                Isolation::Namespaces => DaemonMode::Pid1,
                Isolation::None => DaemonMode::Child,
            },
            groups,
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Stop, Release::Delete],
            max_lifetime_ms: self.opts.max_lifetime_ms,
            networks,
            network_read_back: true,
            isolation: self.isolation_words(),
            extend: true,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        let caps = self.capabilities();
        check_lifetime(spec.lifetime_ms, &caps)?;
        check_labels(&spec.labels)?;
        desktop::check_kind(spec.kind, self.made_kind())?;
        if let Some(image) = &spec.image {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "the local provider runs this machine's own system and takes no image (asked for {image:?}); leave image out"
                ),
            ));
        }
        if !caps.networks.contains(&spec.network.kind()) {
            let offered: Vec<String> = caps.networks.iter().map(|n| n.to_string()).collect();
            let why = if self.opts.isolation == Isolation::None {
                "; with isolation none a computer shares this machine's network, so ask for network open"
            } else {
                ""
            };
            return Err(ProviderError::unsupported(format!(
                "network {} is not offered by the local provider, which offers: {}{why}",
                spec.network.kind(),
                offered.join(", ")
            ))
            .with_field("network"));
        }
        egress::list_of(&spec.network)?;
        if spec.mount.is_some() {
            return Err(ProviderError::unsupported(
                "the local provider mounts nothing yet; leave mount out",
            )
            .with_field("mount"));
        }
        if spec.user.is_some() {
            return Err(ProviderError::unsupported(
                "the local provider sets the programs' user itself (its --local-run-as option); leave user out",
            )
            .with_field("user"));
        }
        self.limits_for(spec)?;
        crate::share::check(&spec.shares, &self.opts.state_dir)?;
        Ok(())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        if let Ok(c) = &self.cgroups {
            // The kernel's wait for a first cgroup move, begun now so that
            // it overlaps the rest of the creation (see `Cgroups::warm`).
            let c = c.clone();
            std::thread::spawn(move || c.warm());
        }
        let limits = self.limits_for(spec)?;
        std::fs::create_dir_all(self.computers_dir()).map_err(|e| {
            ProviderError::failed(format!(
                "could not make the state directory {}: {e}",
                self.computers_dir().display()
            ))
        })?;
        state::make_private(&self.opts.state_dir).map_err(|e| {
            ProviderError::failed(format!(
                "could not make {} private: {e}",
                self.opts.state_dir.display()
            ))
        })?;
        let spare = match limits {
            Some(_) => self.take_spare(),
            None => None,
        };
        let id = match &spare {
            Some(s) => s.id.clone(),
            None => random_id()?,
        };
        let dir = self.dir_of(&id)?;
        let (user, own_uid) = match self.user_for(&id) {
            Ok(u) => u,
            Err(e) => {
                if let Some(s) = spare {
                    let _ = s.cgroup.release();
                }
                return Err(e);
            }
        };
        let now = state::now_ms();
        let mut meta = Meta {
            id: id.clone(),
            labels: spec.labels.clone(),
            created_ms: now,
            deadline_ms: now.saturating_add(spec.lifetime_ms as i64),
            // Init's --max-deadline: the most the server lets a computer
            // live (the spec's max_lifetime_ms, its --lifetime), never the
            // provider's own cap of days; no deadline.extend, the
            // provider's or anyone's, moves the computer past it.
            max_deadline_ms: now.saturating_add(
                spec.max_lifetime_ms.unwrap_or(spec.lifetime_ms).clamp(
                    spec.lifetime_ms,
                    self.opts.max_lifetime_ms.max(spec.lifetime_ms),
                ) as i64,
            ),
            network: spec.network.kind(),
            process: None,
            work_dir: match self.opts.isolation {
                Isolation::Namespaces => SANDBOX_HOME.to_string(),
                Isolation::None => dir.join("work").display().to_string(),
            },
            user: Some(user),
            own_uid,
            limits,
            egress: None,
        };
        // From here on a failure gives back what was taken: the uid, the
        // cgroup (with whatever runs in it), the directory.
        let made = self.start(spec, &mut meta, &dir, spare, cancel).await;
        // The next computer's sandbox, made while this one is used.
        self.refill();
        match made {
            Ok(created) => Ok(created),
            Err(e) => {
                if let Some(mut child) = self.children.lock().await.remove(&id) {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                if let Err(more) = self.release_bounds(&meta).await {
                    tracing::warn!(
                        computer = id,
                        "cleaning up a failed start: {}",
                        more.message
                    );
                }
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        let meta = match by {
            AttachBy::Id(id) => self.read_meta(id)?,
            AttachBy::Labels(labels) => {
                let mut found = self.list(labels, cancel).await?;
                found.retain(|r| r.running);
                match found.len() {
                    0 => {
                        return Err(ProviderError::not_found(
                            "no running local computer carries those labels",
                        ));
                    }
                    1 => self.read_meta(&found[0].id)?,
                    n => {
                        return Err(ProviderError::invalid(
                            "labels",
                            format!("{n} running local computers carry those labels; attach by id"),
                        ));
                    }
                }
            }
        };
        Ok(self.to_ref(&meta))
    }

    async fn list(&self, labels: &Labels, _cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let Ok(entries) = std::fs::read_dir(self.computers_dir()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = self.read_meta(&id) else {
                continue;
            };
            if labels.iter().all(|(k, v)| meta.labels.get(k) == Some(v)) {
                // The network as read back from the computer itself (its
                // namespace's interfaces and routes, an allowlist's proxy),
                // as attach and network read it.
                let mut r = self.to_ref(&meta);
                r.network = Some(NetworkRead::of(self.read_network(&meta)));
                out.push(r);
            }
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(out)
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        let meta = self.read_meta(&computer.id)?;
        if let Some(p) = policy
            && p.kind() != meta.network
        {
            return Err(ProviderError::unsupported(format!(
                "a local computer's network is set when it is made and cannot change (it is {}); make another computer",
                meta.network
            ))
            .with_field("network"));
        }
        if let Some(list) = policy.map(egress::list_of).transpose()?.flatten() {
            let held = meta
                .egress
                .as_ref()
                .map(|e| e.allow.clone())
                .unwrap_or_default();
            if list.entries() != held {
                return Err(ProviderError::unsupported(format!(
                    "a local computer's network is set when it is made and cannot change (it is allow {}); make another computer",
                    held.join(", ")
                ))
                .with_field("network"));
            }
        }
        self.read_network(&meta)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        _cancel: &CancellationToken,
    ) -> Result<Connection> {
        let meta = self.read_meta(&computer.id)?;
        if !meta.process.as_ref().is_some_and(Process::alive) {
            return Err(ProviderError::gone(format!(
                "the local computer {} has ended",
                computer.id
            )));
        }
        let stream = tokio::net::UnixStream::connect(self.socket_of(&computer.id)?)
            .await
            .map_err(|e| {
                ProviderError::new(
                    ErrorCode::Unreachable,
                    format!("could not reach the local computer {}: {e}", computer.id),
                )
            })?;
        let daemon = self.hello(stream).await?;
        self.with_browser(daemon, &meta).await
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        _cancel: &CancellationToken,
    ) -> Result<()> {
        let mut meta = self.read_meta(&computer.id)?;
        self.end(&mut meta).await?;
        // Whatever escaped init's shutdown (a fork racing it) is killed
        // with the cgroup.
        self.release_bounds(&meta).await?;
        let dir = self.dir_of(&computer.id)?;
        match how {
            Release::Delete => std::fs::remove_dir_all(&dir).map_err(|e| {
                ProviderError::failed(format!("could not remove {}: {e}", dir.display()))
            }),
            Release::Stop => state::write_meta(&dir.join("meta.json"), &meta).map_err(|e| {
                ProviderError::failed(format!("could not write the computer's state: {e}"))
            }),
        }
    }

    async fn extend(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let mut meta = self.read_meta(&computer.id)?;
        let want = state::now_ms().saturating_add(ttl_ms.min(i64::MAX as u64) as i64);
        if want < meta.deadline_ms {
            return Err(ProviderError::invalid(
                "ttl",
                format!(
                    "that would end the computer at {}, before its deadline {}; an extend never shortens a life",
                    state::format_ms(want),
                    state::format_ms(meta.deadline_ms)
                ),
            ));
        }
        if want > meta.max_deadline_ms {
            return Err(ProviderError::new(
                ErrorCode::Limit,
                format!(
                    "that is past the most this computer may live, {} from its creation (until {}): the server's lifetime bound (--lifetime)",
                    human_ms(meta.max_deadline_ms.saturating_sub(meta.created_ms).max(0) as u64),
                    state::format_ms(meta.max_deadline_ms)
                ),
            )
            .with_field("ttl"));
        }
        let conn = self.connect(computer, cancel).await?;
        let at = state::format_ms(want);
        let r = computerd::client::ComputerExt::call_typed(
            &conn.client,
            &protocol::DeadlineExtendParams { at },
        )
        .await
        .map_err(|e| ProviderError::refused(format!("the computer refused the new deadline: {e}")));
        conn.client.close();
        let r = r?;
        meta.deadline_ms = want;
        let dir = self.dir_of(&computer.id)?;
        state::write_meta(&dir.join("meta.json"), &meta).map_err(|e| {
            ProviderError::failed(format!("could not write the computer's state: {e}"))
        })?;
        Ok(r.at)
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let now = state::now_ms();
        let mut released = Vec::new();
        let mut known = std::collections::HashSet::new();
        for r in self.list(&Labels::new(), cancel).await? {
            known.insert(r.id.clone());
            let Ok(meta) = self.read_meta(&r.id) else {
                continue;
            };
            // Past its deadline, or its init is gone (killed, crashed, the
            // host rebooted): nothing of it will answer again.
            let dead = !meta.process.as_ref().is_some_and(Process::alive);
            if meta.deadline_ms <= now || dead {
                self.release(&r, Release::Delete, cancel).await?;
                released.push(r.id);
            }
        }
        // Cgroups and uids whose computer's state is gone (the spare's
        // cgroup is not one of them).
        if let Some(s) = self
            .spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            known.insert(s.id.clone());
        }
        // Only with no other provider on this state directory: another's
        // spare, or a computer it is making, has a cgroup and a uid and no
        // state yet, like a dead server's.
        let alone = self.lease.as_ref().is_some_and(lease::Lease::exclusive_now);
        if !alone && self.lease.is_some() {
            tracing::info!(
                "other servers use the state directory {}: cgroups and uids with no computer's state are left to the last of them",
                self.opts.state_dir.display()
            );
        }
        if let (Ok(cgroups), true) = (&self.cgroups, alone) {
            let cgroups = cgroups.clone();
            let known = known.clone();
            let left = tokio::task::spawn_blocking(move || {
                let mut left = Vec::new();
                for id in cgroups.list_existing() {
                    if !known.contains(egress::computer_of(&id))
                        && let Ok(cg) = cgroups.open(&id)
                    {
                        if let Err(e) = cg.release() {
                            tracing::warn!(computer = id, "a leftover cgroup: {}", e.message);
                        }
                        left.push(id);
                    }
                }
                left
            })
            .await
            .unwrap_or_default();
            released.extend(left);
        }
        if let Some(a) = &self.uids {
            for (uid, owner) in a.held() {
                let owner = egress::computer_of(&owner).to_string();
                if (alone && !known.contains(&owner)) || released.contains(&owner) {
                    let _ = a.release(uid);
                }
            }
        }
        if let Some(Err(e)) = self.lease.as_ref().map(lease::Lease::share) {
            tracing::warn!("the hold on the state directory was not taken again: {e}");
        }
        released.sort();
        released.dedup();
        Ok(released)
    }
}

/// A cgroup's limits as a ref shows them.
fn sizes_read_back(l: cgroup::Limits) -> crate::SizesReadBack {
    crate::SizesReadBack {
        cpus: l.cpus,
        memory_mb: l.memory_mb,
        pids: l.pids,
    }
}
