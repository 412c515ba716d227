//! A local computer's life: made (its directory, uid, cgroup and
//! computerd), waited for until init answers hello, connected to (with its
//! browser), its network read back from its own namespace, and ended.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use computerd::client::DaemonClient;
use computerd::launch::{InitArgs, Network, Program, SandboxArgs, Share, Time, UserSpec};
use computerd::protocol::{Group, HelloResult, MachineKind};
use tokio_util::sync::CancellationToken;

use super::spare::Spare;
use super::state::{self, Meta, Process};
use super::{
    Isolation, LocalProvider, RELEASE_WAIT, SANDBOX_HOME, SANDBOX_RUN, START_WAIT,
    UNBOUNDED_TMPFS_MIB, browser, cgroup, desktop, egress,
};
use crate::daemon_backed::hello::{self, Drift};
use crate::daemon_backed::{browser as in_computer, network, share_note, up};
use crate::provider::{Connection, Provider};
use crate::types::{
    ComputerSpec, Created, ErrorCode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError,
    Result,
};

/// What computerd is started as.
pub(super) enum Launch {
    Sandbox(SandboxArgs),
    Init(InitArgs),
}

/// computerd's environment and output, the same for every start: a clean
/// environment, logs to `log`, a process group of its own (a Ctrl-C at the
/// server's terminal is the server's to handle, not every computer's).
pub(super) fn computerd_env(cmd: &mut tokio::process::Command, log: std::fs::File) -> Result<()> {
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
pub(super) struct Prepared {
    pub(super) user: (u32, u32),
    pub(super) cgroup_dirs: Vec<PathBuf>,
    /// Half of memoryMb each: a full /work fails writes with ENOSPC
    /// before the OOM killer would take init (tmpfs pages count as the
    /// computer's memory).
    pub(super) work_size_mib: u64,
    pub(super) tmp_size_mib: u64,
    pub(super) shares: Vec<crate::share::Share>,
    /// RLIMIT_NPROC, where no cgroup bounds the computer's processes.
    pub(super) max_procs: Option<u64>,
}

impl LocalProvider {
    /// Make a computer: its directory, uid and cgroup (a spare's where
    /// one is ready), computerd started in them, and what it says read
    /// back. On a failure, everything taken is given back.
    pub(super) async fn make(
        &self,
        spec: &ComputerSpec,
        cancel: &CancellationToken,
    ) -> Result<Created> {
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
            granted: Vec::new(),
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
        let prep = self.prepare(spec, meta, dir, spare.as_ref()).await?;
        let list = network::allowlist_of(&spec.network)?;
        if list.is_some() {
            self.make_egress_dir(dir)?;
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
        Ok(Created {
            computer: self.to_ref(meta),
            network: Some(network),
            notes: self.notes(meta, &prep, window_manager),
        })
    }

    /// What the computer is given beyond its spec: its shares checked, its
    /// directories, its cgroup (the spare's, or made) with the limits read
    /// back from it, and its state written.
    async fn prepare(
        &self,
        spec: &ComputerSpec,
        meta: &mut Meta,
        dir: &Path,
        spare: Option<&Spare>,
    ) -> Result<Prepared> {
        let user = meta.user.unwrap_or((0, 0));
        if self.opts.isolation == Isolation::Namespaces {
            meta.granted = crate::share::grant(&spec.shares, user)?;
        }
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
        let cg = match (meta.limits, spare) {
            (Some(l), Some(s)) => {
                s.cgroup.set_limits(&l)?;
                Some(s.cgroup.clone())
            }
            (Some(l), None) => self.make_cgroup(&meta.id, l).await?,
            (None, _) => None,
        };
        let half = meta
            .limits
            .map_or(UNBOUNDED_TMPFS_MIB, |l| l.work_size_mib());
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
        Ok(prep)
    }

    /// The directory of an allowlist's proxy socket.
    fn make_egress_dir(&self, dir: &Path) -> Result<()> {
        let edir = egress::dir_of(dir);
        std::fs::create_dir_all(&edir).map_err(|e| {
            ProviderError::failed(format!("could not make {}: {e}", edir.display()))
        })?;
        // Root's, passable by the computer's user to reach the socket
        // (0660, its group); with no root, the server's alone.
        let mode = if self.root { 0o711 } else { 0o700 };
        std::fs::set_permissions(&edir, std::os::unix::fs::PermissionsExt::from_mode(mode)).map_err(
            |e| ProviderError::failed(format!("could not set {}'s mode: {e}", edir.display())),
        )
    }

    /// A new computer's notes: its isolation, limits, screen, window
    /// manager, browser and shares.
    fn notes(&self, meta: &Meta, prep: &Prepared, window_manager: Option<String>) -> Vec<String> {
        let half = prep.work_size_mib;
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
        notes.extend(prep.shares.iter().map(share_note));
        notes
    }

    /// The words computerd left on stderr, for a start that failed.
    pub(super) fn last_words(&self, id: &str) -> String {
        log_words(
            &self
                .dir_of(id)
                .map(|d| d.join("daemon.log"))
                .unwrap_or_default(),
        )
    }

    /// What computerd is started with: init's flags, and with namespaces
    /// the sandbox around it.
    pub(super) fn command_of(
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

    pub(super) async fn spawn(
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

    pub(super) async fn wait_until_up(
        &self,
        id: &str,
        child: &mut tokio::process::Child,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let mut starting = Starting {
            provider: self,
            socket: self.socket_of(id)?,
            id,
            child,
        };
        up::wait_until_up(&mut starting, cancel).await
    }

    pub(super) async fn hello(&self, stream: tokio::net::UnixStream) -> Result<Connection> {
        // Registered for reading only: init's reads do not wake this side.
        let stream = computerd::quiet::QuietStream::from_tokio(stream).map_err(|e| {
            ProviderError::new(
                ErrorCode::Unreachable,
                format!("could not set up the computer's connection: {e}"),
            )
        })?;
        let conn = hello::call(DaemonClient::new(stream)).await?;
        self.check_hello(&conn.hello)?;
        Ok(conn)
    }

    /// A daemon of another build (the drift check), or not of the kind
    /// and groups this provider makes: never handed out.
    pub(super) fn check_hello(&self, said: &HelloResult) -> Result<()> {
        let mut groups = vec![Group::Exec];
        let kind = match &self.desktop {
            Some(_) => {
                groups.extend_from_slice(desktop::GROUPS);
                MachineKind::Desktop
            }
            None => MachineKind::Linux,
        };
        let expect = hello::Expect {
            kind,
            groups: &groups,
            exact: false,
            arch: None,
        };
        let drift = hello::drift(said, &expect);
        if drift.iter().any(|d| matches!(d, Drift::Version { .. })) {
            return Err(ProviderError::refused(format!(
                "the computer's daemon is computerd {}, and this server is built with {}: a computer of another daemon is not handed out",
                said.version,
                computerd::VERSION
            )));
        }
        // Its os is this machine's: only the kind and groups are its own.
        if !drift
            .iter()
            .any(|d| matches!(d, Drift::Kind { .. } | Drift::Groups { .. }))
        {
            return Ok(());
        }
        let groups: Vec<&str> = said.groups.iter().map(|g| g.as_str()).collect();
        Err(ProviderError::refused(match &self.desktop {
            Some(_) => format!(
                "the computer's daemon says kind {} with groups {groups:?}; a local desktop is kind desktop with exec, screen, input.pointer and input.keys (its Xvfb may have failed: see the computer's daemon.log)",
                said.kind
            ),
            None => format!(
                "the computer's daemon says kind {} with groups {groups:?}; a local computer is linux with exec, files and processes",
                said.kind
            ),
        }))
    }

    /// A browser's connection: the computer's daemon, with the browser
    /// started inside it on its pipe.
    pub(super) async fn with_browser(&self, daemon: Connection, meta: &Meta) -> Result<Connection> {
        let Some(b) = &self.browser else {
            return Ok(daemon);
        };
        let desktop = self.desktop.is_some();
        in_computer::connect(
            daemon,
            &b.launch(meta.network, desktop),
            desktop,
            meta.limits.map(Into::into),
            &format!("the local computer {}", meta.id),
        )
        .await
    }

    /// The network of a running computer, read from its processes' namespace.
    pub(super) fn read_network(&self, meta: &Meta) -> Result<NetworkReadBack> {
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

    pub(super) async fn end(&self, meta: &mut Meta) -> Result<()> {
        let child = self.children.lock().await.remove(&meta.id);
        let Some(p) = meta.process.clone() else {
            return Ok(());
        };
        if p.alive() {
            // TERM: init shuts down in order (programs get TERM, then KILL).
            p.signal(libc::SIGTERM);
        }
        let until = tokio::time::Instant::now() + RELEASE_WAIT;
        let ended = match child {
            // Our own child: its exit is awaited, not polled for.
            Some(mut c) => match tokio::time::timeout_at(until, c.wait()).await {
                Ok(_) => true,
                Err(_) => {
                    p.signal(libc::SIGKILL);
                    let _ = c.wait().await;
                    false
                }
            },
            // One a server before this one started: looked at until gone.
            None => loop {
                if !p.alive() {
                    break true;
                }
                if tokio::time::Instant::now() >= until {
                    p.signal(libc::SIGKILL);
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            },
        };
        if !ended {
            tracing::warn!(
                computer = meta.id,
                "did not end in order within {} s; killed it",
                RELEASE_WAIT.as_secs()
            );
        }
        meta.process = None;
        Ok(())
    }
}

pub(super) fn random_id() -> Result<String> {
    Ok(format!("local-{}", crate::random::random_hex(8)?))
}

/// The last words a computerd wrote to its log `path`.
pub(super) fn log_words(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    crate::daemon_backed::last_words(&lines, 3, "it said nothing")
}

/// A local computer being started: its computerd child, and init's socket.
struct Starting<'a> {
    provider: &'a LocalProvider,
    id: &'a str,
    child: &'a mut tokio::process::Child,
    socket: PathBuf,
}

#[async_trait::async_trait]
impl up::Starting for Starting<'_> {
    const WITHIN: Duration = START_WAIT;
    const EVERY: Duration = Duration::from_millis(5);

    async fn ended(&mut self) -> Result<Option<ProviderError>> {
        Ok(match self.child.try_wait() {
            Ok(Some(status)) => Some(ProviderError::refused(format!(
                "the local computer could not start ({status}): {}",
                self.provider.last_words(self.id)
            ))),
            _ => None,
        })
    }

    async fn attempt(&mut self) -> up::Try {
        match tokio::net::UnixStream::connect(&self.socket).await {
            Ok(stream) => match self.provider.hello(stream).await {
                Ok(c) => up::Try::Up(c),
                Err(e) => up::Try::Failed(e),
            },
            Err(e) => up::Try::NotYet(ProviderError::new(
                ErrorCode::Unreachable,
                format!("init's socket does not answer yet: {e}"),
            )),
        }
    }

    fn late(&self, _last: ProviderError) -> ProviderError {
        ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the local computer did not answer within {} s: {}",
                START_WAIT.as_secs(),
                self.provider.last_words(self.id)
            ),
        )
    }
}
