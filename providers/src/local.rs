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
//!
//! - [`settings`]: what a user sets, the options, and how the registry
//!   makes the provider from them.
//! - `lifecycle`: a computer made, waited for, connected to, its network
//!   read back, and ended; `spare`: the sandbox made ahead of the next.
//! - [`cgroup`], [`uids`], [`egress`], [`desktop`], [`browser`]: its
//!   bounds, users, allowlist proxy, screen and Chromium.
//!
//! The hello, waiting until up, the browser's connection and the fixed
//! network are [`crate::daemon_backed`]'s; sizes are [`crate::sizing`]'s.

mod bounds;
pub mod browser;
pub mod cgroup;
pub mod desktop;
pub mod egress;
mod lease;
mod lifecycle;
mod listing;
pub mod settings;
mod spare;
mod state;
pub mod uids;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use computerd::protocol::{self, Group, MachineKind};
use tokio_util::sync::CancellationToken;

use crate::daemon_backed::{labels, network};
use crate::provider::{Connection, Provider};
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkRead, NetworkReadBack, ProviderError, Release,
    Result, Used, check_labels, check_lifetime, human_ms,
};
use settings::parse_uid_gid;
pub use settings::{Isolation, LocalOptions, LocalSettings};
use spare::Spare;
use state::{Meta, Process};

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
    /// The computers' states as the brief listing last read them.
    metas: listing::Metas,
    /// Children this server started, reaped on release.
    children: tokio::sync::Mutex<std::collections::HashMap<String, tokio::process::Child>>,
    /// The desktop's Xvfb and screen, when the provider makes desktops.
    desktop: Option<desktop::Desktop>,
    /// The Chromium, when the provider makes browsers.
    browser: Option<browser::Browser>,
    /// Its hold on the state directory's cgroup group (none without
    /// cgroups).
    lease: Option<lease::Lease>,
    /// Its snapshots, under `<state>/snapshots`.
    snapshots: crate::snapshot::SnapshotStore,
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

impl LocalProvider {
    pub fn new(opts: LocalOptions) -> Result<Self> {
        if !opts.state_dir.is_absolute() {
            return Err(ProviderError::invalid(
                "state_dir",
                "the state directory must be an absolute path",
            ));
        }
        crate::daemon_backed::check_computerd(&opts.computerd)?;
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
        let opts_state_dir = opts.state_dir.clone();
        Ok(Self {
            opts,
            root,
            cgroups,
            host: cgroup::Host::read()?,
            uids,
            spare: Arc::new(std::sync::Mutex::new(None)),
            refilling: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            metas: listing::Metas::default(),
            children: tokio::sync::Mutex::new(Default::default()),
            desktop,
            browser,
            lease,
            snapshots: crate::snapshot::SnapshotStore::new(
                "local",
                opts_state_dir.join("snapshots"),
            ),
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
        let cgroup = self
            .cgroups
            .as_ref()
            .ok()
            .and_then(|c| c.open(&meta.id).ok());
        ComputerRef {
            provider: "local".into(),
            id: meta.id.clone(),
            labels: meta.labels.clone(),
            created_at: state::format_ms(meta.created_ms),
            deadline: state::format_ms(meta.deadline_ms),
            running: meta.process.as_ref().is_some_and(Process::alive),
            paused: cgroup.as_ref().is_some_and(|cg| cg.frozen()),
            home: Some(meta.work_dir.clone()),
            user: meta.user.map(|(u, g)| format!("{u}:{g}")),
            // Read from the cgroup's files now, not from what create wrote.
            sizes: cgroup
                .as_ref()
                .and_then(|cg| cg.read_back().ok())
                .map(Into::into),
            // It runs this machine's own system: no image (check refuses one).
            image: None,
            network: None,
        }
    }

    fn socket_of(&self, id: &str) -> Result<PathBuf> {
        Ok(self.dir_of(id)?.join("run").join("computerd.sock"))
    }
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
            shares: crate::types::ShareWay::Bind,
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
        network::allowlist_of(&spec.network)?;
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
        self.make(spec, cancel).await
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        let meta = match by {
            AttachBy::Id(id) => self.read_meta(id)?,
            AttachBy::Labels(wanted) => {
                let mut found = self.list(wanted, cancel).await?;
                found.retain(|r| r.running);
                let one = labels::the_one(
                    found,
                    "no running local computer carries those labels",
                    |n| format!("{n} running local computers carry those labels; attach by id"),
                )?;
                self.read_meta(&one.id)?
            }
        };
        Ok(self.to_ref(&meta))
    }

    async fn list(&self, wanted: &Labels, _cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let Ok(entries) = std::fs::read_dir(self.computers_dir()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = self.read_meta(&id) else {
                continue;
            };
            if labels::carries(wanted, |k| meta.labels.get(k).map(String::as_str)) {
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

    async fn list_brief(
        &self,
        wanted: &Labels,
        _cancel: &CancellationToken,
    ) -> Result<Vec<ComputerRef>> {
        self.list_brief_of(wanted).await
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        let meta = self.read_meta(&computer.id)?;
        network::refuse_change(
            policy,
            meta.network,
            || {
                meta.egress
                    .as_ref()
                    .map(|e| e.allow.clone())
                    .unwrap_or_default()
            },
            "a local computer's network is set when it is made and cannot change",
        )?;
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
        // A paused computer is let run first, so init can shut down in
        // order (no cgroup, nothing to thaw).
        let _ = self.freeze(&meta, false).await;
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

    fn can_pause(&self) -> bool {
        self.cgroups.as_ref().is_ok_and(|c| c.can_freeze())
    }

    async fn pause(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<()> {
        let meta = self.read_meta(&computer.id)?;
        self.freeze(&meta, true).await
    }

    async fn resume(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<()> {
        let meta = self.read_meta(&computer.id)?;
        self.freeze(&meta, false).await
    }

    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        Some(&self.snapshots)
    }

    async fn used(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<Used> {
        let Ok(cgroups) = self.cgroups.clone() else {
            return Ok(Used::default());
        };
        let id = computer.id.clone();
        let usage = tokio::task::spawn_blocking(move || cgroups.open(&id)?.usage())
            .await
            .map_err(|e| ProviderError::failed(format!("reading what it used failed: {e}")))??;
        Ok(Used {
            cpu_seconds: usage.cpu_ns.map(|ns| ns as f64 / 1e9),
            peak_memory_bytes: usage.peak_memory_bytes,
        })
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
        // Snapshots past their own deadline (not a computer's).
        released.extend(self.snapshots.sweep()?);
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
