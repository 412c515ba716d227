//! The `docker` provider: hardened containers with `computerd init` as
//! PID 1, made and read back through the engine's API (bollard; the docker
//! CLI is never run).
//!
//! A computer is a container named `computer-<12 hex digits>` carrying
//! `computer-mcp.computer=1` and its deadline, made as its [`Plan`] says:
//! a non-root user, every capability dropped, no-new-privileges, private
//! IPC and cgroup namespaces, network `none` (only lo) or the default
//! bridge, a CPU quota, memory with swap the same, a pids limit, tmpfs
//! /work (HOME) and /run/computerd (init's socket) of the user's alone, a
//! read-only root whose other writable places are sized tmpfs (so nothing
//! written lands on the host's disk), and the provider's cached copy of the static daemon bound read-only at
//! /opt/computerd/computerd as the entrypoint. After it starts, the drift
//! check holds the whole inspect and the daemon's hello to the plan; a
//! computer that drifted is deleted at create and refused (never deleted)
//! at attach. Every connection is one exec of `computerd stdio`.
//!
//! - [`settings`]: what a user sets, the options, and how the registry
//!   makes the provider from them.
//! - `spec`: what a spec may ask, checked with no engine call.
//! - `lifecycle`: create in named steps, from the plan to the drift check
//!   of the started computer.
//! - `readback`: a computer found, inspected, and its plan, ref and
//!   network read back.
//! - [`plan`]: what a computer is made with, and the create body.
//! - [`drift`]: the closed check of inspect and hello against the plan.
//! - [`host`]: the host's enforcement from `docker info`, and the engine's
//!   failures in words.
//! - [`cache`]: the daemon's copy the computers bind.
//! - [`image`]: an image by name or from a recipe, one flight per image.
//! - [`stream`]: the exec that carries a connection.
//! - [`egress`]: an allowlist's proxy container and socket volume, made,
//!   read back and removed with their computer.
//! - `removal`: a computer and its parts removed, also when a create's
//!   future is dropped part-way.
//! - `survey`: what `doctor` says of Docker when another provider runs.
//!
//! The hello, waiting until up, the browser inside and the fixed network
//! are [`crate::daemon_backed`]'s, shared with every daemon-backed
//! provider; sizes are [`crate::sizing`]'s.

pub mod cache;
pub mod desktop;
pub mod direct;
pub mod drift;
pub mod egress;
pub mod host;
pub mod image;
mod lifecycle;
pub mod plan;
mod readback;
mod removal;
pub mod settings;
mod spec;
pub mod stream;
mod survey;

use std::sync::Mutex;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{StatsOptionsBuilder, StopContainerOptionsBuilder};
use computerd::launch::Time;
use computerd::protocol::{Group, MachineKind};
use tokio_util::sync::CancellationToken;

use crate::daemon_backed::{aborted, browser as in_computer, hello, labels, network};
use crate::provider::{Connection, Provider};
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkRead, NetworkReadBack, ProviderError, Release,
    Result, Used, label,
};
pub use host::Host;
pub use image::ImageSource;
use lifecycle::{deadline_ms, now_ms};
pub use plan::Plan;
pub use readback::read_network;
use readback::{name_of, sizes_of};
pub use settings::{DockerOptions, DockerSettings, parse_host_addresses};

/// Docker's cap on a computer's life: 30 days (its deadline is a label,
/// fixed at create, so there is no extend).
pub const MAX_LIFETIME_MS: u64 = 30 * 24 * 3600 * 1000;
/// The engine's socket unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// A root server's computers run as this user unless told otherwise: one
/// below the local provider's own range (0x70000000 up), so no account of
/// a host (uid 1000 is often a person's) shares it.
pub const DEFAULT_USER: (u32, u32) = (0x6fff_ffff, 0x6fff_ffff);
/// Every engine call's bound until its answer begins (a build's or a
/// pull's stream, and an exec's attached stream, go on past it).
const ENGINE_TIMEOUT_S: u64 = 30;
/// The create step that makes the container (which may then not exist).
const MAKING: &str = "making the container";
/// How long a new computer gets until its daemon answers hello.
const START_WAIT: Duration = Duration::from_secs(30);
/// A janitor's allowance for clock skew on a deadline label.
const SKEW_MS: i64 = 60_000;
/// How long a removed computer may take to be gone from the engine.
const REMOVE_WAIT: Duration = Duration::from_secs(10);
/// Seconds `docker stop` waits before KILL (init ends in order in 2 s).
const STOP_WAIT_S: i32 = 5;

pub struct DockerProvider {
    opts: DockerOptions,
    /// The engine client, made on first use (the engine may start later).
    engine: Mutex<Option<Docker>>,
    /// The host, read once (a failed read is not kept).
    host: tokio::sync::OnceCell<Host>,
    images: image::Flights,
    /// Each new computer's first connection, for the connect after create.
    handover: crate::daemon_backed::handover::Handover,
    /// Its snapshots, under `<cache dir>/snapshots` (beside the daemon's
    /// copy the computers bind).
    snapshots: crate::snapshot::SnapshotStore,
    /// The configured daemon's sha256, kept while the file is unchanged.
    daemon_sums: std::sync::Arc<cache::Sums>,
}

impl DockerProvider {
    pub fn new(opts: DockerOptions) -> Result<Self> {
        crate::daemon_backed::check_computerd(&opts.computerd)?;
        if let Some((u, g)) = opts.user
            && (u == 0 || g == 0)
        {
            return Err(ProviderError::invalid(
                "user",
                format!(
                    "--docker-user {u}:{g} is root or root's group: the provider's user never is (a spec may ask for root itself)"
                ),
            ));
        }
        if let Some(i) = &opts.image {
            i.check()?;
        }
        let snapshots =
            crate::snapshot::SnapshotStore::new("docker", opts.cache_dir.join("snapshots"));
        Ok(Self {
            opts,
            engine: Mutex::new(None),
            host: tokio::sync::OnceCell::new(),
            images: image::Flights::default(),
            handover: Default::default(),
            snapshots,
            daemon_sums: Default::default(),
        })
    }

    fn socket(&self) -> &str {
        &self.opts.socket
    }

    fn shown_socket(&self) -> String {
        let s = self.socket();
        if s.starts_with("unix://") {
            s.to_string()
        } else {
            format!("unix://{s}")
        }
    }

    /// The engine client.
    pub fn engine(&self) -> Result<Docker> {
        let mut slot = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let d = Docker::connect_with_unix(
            self.socket(),
            ENGINE_TIMEOUT_S,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|_| host::unreachable(&self.shown_socket()))?;
        *slot = Some(d.clone());
        Ok(d)
    }

    fn err(&self, doing: &str) -> impl Fn(bollard::errors::Error) -> ProviderError + '_ {
        let doing = doing.to_string();
        move |e| host::docker_error(&self.shown_socket(), &doing, e)
    }

    /// The host's enforcement, read once per provider.
    pub async fn host(&self, cancel: &CancellationToken) -> Result<Host> {
        let docker = self.engine()?;
        let read = self.host.get_or_try_init(|| async {
            let info = docker
                .info()
                .await
                .map_err(self.err("reading docker info"))?;
            let version = docker
                .version()
                .await
                .map_err(self.err("reading docker version"))?;
            let mut host = Host::of(&info);
            host.require_api(version.api_version.as_deref().unwrap_or(""));
            Ok::<_, ProviderError>(host)
        });
        tokio::select! {
            h = read => h.cloned(),
            _ = cancel.cancelled() => Err(aborted("reading the Docker host")),
        }
    }

    /// What removes a computer and its parts, owned.
    fn removal(&self, docker: &Docker) -> removal::Removal {
        removal::Removal {
            docker: docker.clone(),
            socket: self.shown_socket(),
            cache: self.opts.cache_dir.clone(),
        }
    }

    /// Remove a computer, then its egress proxy and volume (none is fine).
    async fn remove_with_parts(&self, docker: &Docker, name: &str) -> Result<()> {
        self.removal(docker).with_parts(name).await
    }
}

#[async_trait::async_trait]
impl Provider for DockerProvider {
    fn id(&self) -> &'static str {
        "docker"
    }

    fn capabilities(&self) -> Capabilities {
        let mut groups = drift::GROUPS.to_vec();
        if self.opts.desktop.is_some() {
            groups.extend_from_slice(desktop::GROUPS);
        }
        if self.runs_chromium() {
            groups.push(Group::Cdp);
        }
        Capabilities {
            kind: match (self.opts.desktop, self.opts.browser) {
                (Some(_), _) => MachineKind::Desktop,
                (None, true) => MachineKind::Browser,
                (None, false) => MachineKind::Linux,
            },
            os: "linux".into(),
            daemon: DaemonMode::Pid1,
            groups,
            lifetime: LifetimeMode::Janitor,
            release: vec![Release::Stop, Release::Delete],
            max_lifetime_ms: self.opts.max_lifetime_ms,
            networks: vec![NetworkKind::None, NetworkKind::Open, NetworkKind::Allow],
            network_read_back: true,
            isolation: "a Docker container: a non-root user (unless the spec asks for root), no capability, no-new-privileges, Docker's seccomp profile, private IPC and cgroup namespaces, bounded CPU, memory (no swap) and pids, read back after create".into(),
            extend: false,
            shares: crate::types::ShareWay::Bind,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        self.check_spec(spec, self.host.get())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.make(spec, cancel).await
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        let docker = self.engine()?;
        let host = self.host(cancel).await?;
        host.require()?;
        let v = match by {
            AttachBy::Id(id) => self.find(&docker, id).await?,
            AttachBy::Labels(labels) => labels::the_one(
                self.listed(labels, cancel).await?,
                "no Docker computer carries those labels",
                |n| format!("{n} computers match those labels; attach by id"),
            )?,
        };
        let name = name_of(&v).to_string();
        let refuse = |why: Vec<String>| {
            ProviderError::refused(format!(
                "the Docker computer {name} is not what this provider makes, so it was not attached (and left as it is): {}",
                why.join("; ")
            ))
        };
        let plan = self.plan_of(&v).map_err(refuse)?;
        let mut drift = drift::inspect_drift(&plan, &v, &host);
        // The daemon it binds is this provider's own copy (the same bytes
        // give the same path in every process).
        let own = self.daemon_copy().await?;
        if plan.daemon != own {
            drift.push(format!(
                "it binds the daemon {}, where this provider's is {}",
                plan.daemon.display(),
                own.display()
            ));
        }
        let mut network = None;
        if drift.is_empty() {
            let read = self.read_net(&docker, &v).await;
            if let (Some(_), Err(e)) = (&plan.egress, &read) {
                drift.push(e.message.clone());
            }
            network = Some(NetworkRead::of(read));
        }
        if drift.is_empty() && v["State"]["Running"].as_bool() == Some(true) {
            let dir = plan
                .direct
                .as_deref()
                .filter(|d| self.opts.direct && d.is_dir());
            let (client, _) = stream::open(&docker, &self.shown_socket(), &name, dir).await?;
            let conn = hello::call(client).await?;
            conn.client.close();
            drift.extend(drift::hello_drift(
                &conn.hello,
                &host,
                plan.display.is_some(),
            ));
        }
        if !drift.is_empty() {
            return Err(refuse(drift));
        }
        let mut r = self.to_ref(&v);
        r.network = network;
        Ok(r)
    }

    /// Each computer with its network read back as `network` reads it (an
    /// allowlist from its proxy and volume too, in one more inspect each).
    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let listed = self.listed(labels, cancel).await?;
        let docker = self.engine()?;
        if listed
            .iter()
            .any(|v| !v["Config"]["Labels"][egress::LIST_LABEL].is_null())
        {
            // An allowlist's read-back holds its proxy to the host; a host
            // that cannot be read leaves those computers `other`, in words.
            let _ = self.host(cancel).await;
        }
        let reads = listed.iter().map(|v| {
            let docker = &docker;
            async move {
                let mut r = self.to_ref(v);
                r.network = Some(NetworkRead::of(self.read_net(docker, v).await));
                r
            }
        });
        Ok(futures::future::join_all(reads).await)
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        let docker = self.engine()?;
        let v = self.find(&docker, &computer.id).await?;
        self.host(cancel).await?;
        let read = self.read_net(&docker, &v).await?;
        network::refuse_change(
            policy,
            read.kind,
            || {
                v["Config"]["Labels"][egress::LIST_LABEL]
                    .as_str()
                    .map(egress::list_in_label)
                    .unwrap_or_default()
            },
            "a Docker computer's network is fixed when it is made",
        )?;
        Ok(read)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        if !plan::is_computer_name(&computer.id) {
            return Err(ProviderError::not_found(format!(
                "{:?} is not a Docker computer's name (computer-<12 hex digits>)",
                computer.id
            )));
        }
        let docker = self.engine()?;
        let host = self.host(cancel).await?;
        // The one its create left, else a new one.
        let conn = match self.handover.take(&computer.id) {
            Some(c) => c,
            None => self.dial(&docker, &computer.id).await?,
        };
        let drift = drift::hello_drift(&conn.hello, &host, self.opts.desktop.is_some());
        if !drift.is_empty() {
            conn.client.close();
            return Err(ProviderError::refused(format!(
                "the computer's daemon is not this provider's: {}",
                drift.join("; ")
            )));
        }
        if !self.runs_chromium() {
            return Ok(conn);
        }
        // An allowlisted computer's browser goes through its proxy's relay.
        let (allowlisted, bounds) = match self.find(&docker, &computer.id).await {
            Ok(v) => (
                !v["Config"]["Labels"][egress::LIST_LABEL].is_null(),
                sizes_of(&v),
            ),
            Err(e) => {
                conn.client.close();
                return Err(e);
            }
        };
        let desktop = self.opts.desktop.is_some();
        let Some(program) = crate::cdp::chromium::find_in_computer(&conn.client).await else {
            conn.client.close();
            return Err(ProviderError::refused(format!(
                "the Docker computer {} has no Chromium any more (none at {})",
                computer.id,
                crate::cdp::chromium::CHROMIUM_PATHS.join(", ")
            )));
        };
        in_computer::connect(
            conn,
            &in_computer::launch(program.into(), allowlisted, desktop),
            desktop,
            bounds,
            &format!("the Docker computer {}", computer.id),
        )
        .await
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        _cancel: &CancellationToken,
    ) -> Result<()> {
        self.handover.close(&computer.id);
        let docker = self.engine()?;
        // Only our own: a name of ours with our label.
        match self.find(&docker, &computer.id).await {
            Ok(v) => {
                // A paused computer is let run first, so it stops in order.
                if v["State"]["Paused"].as_bool() == Some(true) {
                    let _ = docker.unpause_container(&computer.id).await;
                }
            }
            Err(e) if e.code == ErrorCode::NotFound && plan::is_computer_name(&computer.id) => {
                // Its parts, should any be left.
                direct::remove(&self.opts.cache_dir, &computer.id);
                return self.removal(&docker).egress(&computer.id).await;
            }
            Err(e) => return Err(e),
        }
        match how {
            Release::Delete => self.remove_with_parts(&docker, &computer.id).await,
            Release::Stop => match docker
                .stop_container(
                    &computer.id,
                    Some(StopContainerOptionsBuilder::new().t(STOP_WAIT_S).build()),
                )
                .await
            {
                Ok(()) => Ok(()),
                Err(e) if host::is_not_found(&e) => Ok(()),
                // 304: already stopped.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304, ..
                }) => Ok(()),
                Err(e) => Err(host::docker_error(
                    &self.shown_socket(),
                    "stopping the computer",
                    e,
                )),
            }
            .and(self.stop_egress(&docker, &computer.id).await),
        }
    }

    fn preflight(&self) -> Vec<crate::Preflight> {
        vec![cache::preflight(&self.opts.computerd)]
    }

    fn can_pause(&self) -> bool {
        true
    }

    async fn pause(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<()> {
        self.handover.close(&computer.id);
        let docker = self.engine()?;
        self.find(&docker, &computer.id).await?;
        docker
            .pause_container(&computer.id)
            .await
            .map_err(self.err("pausing the computer"))
    }

    async fn resume(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<()> {
        let docker = self.engine()?;
        let v = self.find(&docker, &computer.id).await?;
        if v["State"]["Paused"].as_bool() != Some(true) {
            return Ok(());
        }
        docker
            .unpause_container(&computer.id)
            .await
            .map_err(self.err("resuming the computer"))
    }

    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        Some(&self.snapshots)
    }

    async fn used(&self, computer: &ComputerRef, _cancel: &CancellationToken) -> Result<Used> {
        use futures::StreamExt as _;
        let docker = self.engine()?;
        let opts = StatsOptionsBuilder::new()
            .stream(false)
            .one_shot(true)
            .build();
        let Some(stats) = docker.stats(&computer.id, Some(opts)).next().await else {
            return Ok(Used::default());
        };
        let stats = stats.map_err(self.err("reading what the computer used"))?;
        let cpu = stats
            .cpu_stats
            .and_then(|c| c.cpu_usage)
            .and_then(|u| u.total_usage);
        Ok(Used {
            cpu_seconds: cpu.map(|ns| ns as f64 / 1e9),
            // max_usage is cgroup v1's; v2 engines give no peak.
            peak_memory_bytes: stats.memory_stats.and_then(|m| m.max_usage),
        })
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let now = now_ms();
        let limit = now.saturating_add(self.opts.max_lifetime_ms as i64 + SKEW_MS);
        let mut deleted = Vec::new();
        let mut failed = Vec::new();
        for v in self.listed(&Labels::new(), cancel).await? {
            if cancel.is_cancelled() {
                return Err(aborted("the sweep"));
            }
            let name = name_of(&v).to_string();
            let deadline = v["Config"]["Labels"][label::DEADLINE]
                .as_str()
                .and_then(|d| d.parse::<Time>().ok())
                .map(|t| deadline_ms(&t));
            // Past its deadline, or a deadline no computer of ours carries.
            let expired = deadline.is_none_or(|d| d <= now || d > limit);
            if !expired {
                continue;
            }
            let docker = self.engine()?;
            match self.remove_with_parts(&docker, &name).await {
                Ok(()) => deleted.push(name),
                Err(e) => failed.push(format!("{name}: {}", e.message)),
            }
        }
        // Snapshots past their own deadline (not a computer's).
        match self.snapshots.sweep() {
            Ok(ids) => deleted.extend(ids),
            Err(e) => failed.push(format!("snapshots: {}", e.message)),
        }
        // Direct directories with no computer (the computers listed, less
        // those just deleted).
        let live: Vec<String> = self
            .listed(&Labels::new(), cancel)
            .await?
            .iter()
            .map(|v| name_of(v).to_string())
            .collect();
        let dirs = direct::sweep(&self.opts.cache_dir, &live);
        if !dirs.is_empty() {
            tracing::info!("the sweep removed direct directories left behind: {dirs:?}");
        }
        // Proxies and volumes left with no computer (not computers: not
        // counted in what the sweep deleted).
        match self.sweep_egress(now, limit).await {
            Ok(parts) if !parts.is_empty() => {
                tracing::info!("the sweep removed egress proxies left behind: {parts:?}");
            }
            Ok(_) => {}
            Err(e) => failed.push(e.message),
        }
        if !failed.is_empty() {
            return Err(ProviderError::failed(format!(
                "the sweep could not delete {} (it deleted {:?})",
                failed.join("; "),
                deleted
            )));
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::{Share, WORKSPACE};
    use crate::sizing::Limits;

    fn provider() -> DockerProvider {
        let mut o =
            DockerOptions::new("/usr/bin/computerd".into(), "/tmp/cmcp-docker-cache".into());
        o.image = Some(ImageSource::Name("debian:bookworm".into()));
        DockerProvider::new(o).unwrap()
    }

    #[test]
    fn host_addresses_are_ip_addresses_and_a_bad_one_is_refused_naming_the_flag() {
        assert_eq!(
            parse_host_addresses(" 203.0.113.7,2001:db8::7 ,203.0.113.7").unwrap(),
            [
                "203.0.113.7".parse::<std::net::IpAddr>().unwrap(),
                "2001:db8::7".parse().unwrap()
            ]
        );
        for bad in ["", "203.0.113.7,", "example.com", "203.0.113.0/24"] {
            let e = parse_host_addresses(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("host_addresses"), "{bad}");
            assert!(
                e.message.starts_with("--docker-host-addresses: ")
                    && e.message.contains("is not an IP address"),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn a_desktop_declares_the_page_tools_only_when_told_its_image_has_chromium() {
        let made = |desktop: bool, desktop_browser: bool, browser: bool| {
            let mut o = DockerOptions::new("/c".into(), "/tmp/x".into());
            o.desktop = desktop.then(|| "1280x800".parse().unwrap());
            o.desktop_browser = desktop_browser;
            o.browser = browser;
            let caps = DockerProvider::new(o).unwrap().capabilities();
            (caps.kind, caps.groups.contains(&Group::Cdp))
        };
        assert_eq!(made(true, false, false), (MachineKind::Desktop, false));
        assert_eq!(made(true, true, false), (MachineKind::Desktop, true));
        assert_eq!(made(false, false, true), (MachineKind::Browser, true));
        // Without a desktop the setting means nothing.
        assert_eq!(made(false, true, false), (MachineKind::Linux, false));
    }

    fn refused(spec: &ComputerSpec) -> ProviderError {
        provider().check(spec).unwrap_err()
    }

    #[test]
    fn check_refuses_in_words_with_no_docker_call() {
        let mut s = ComputerSpec::sandbox(MAX_LIFETIME_MS + 1);
        let e = refused(&s);
        assert_eq!(e.field.as_deref(), Some("lifetime"));
        assert_eq!(
            e.message,
            "lifetime 2592000001 ms is over this provider's most, 30 d"
        );
        s.lifetime_ms = 60_000;
        assert!(provider().check(&s).is_ok());
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "*.pythonhosted.org".into()]);
        assert!(provider().check(&s).is_ok());
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "10.0.0.0/8".into()]);
        let e = refused(&s);
        assert_eq!(e.field.as_deref(), Some("network"));
        assert!(
            e.message
                .contains("\"10.0.0.0/8\": the range holds private"),
            "{}",
            e.message
        );
        s.network = NetworkPolicy::Allow(vec![]);
        assert_eq!(refused(&s).field.as_deref(), Some("network"));
        s.network = NetworkPolicy::Allow(vec!["pypi.org".into()]);
        s.user = Some(format!("{}", egress::UID));
        assert_eq!(refused(&s).field.as_deref(), Some("user"));
        s.user = None;
        s.labels.insert(egress::LIST_LABEL.into(), "x.y".into());
        assert_eq!(refused(&s).field.as_deref(), Some("labels"));
        s.labels.clear();
        s.network = NetworkPolicy::None;
        s.user = Some("root".into());
        assert_eq!(refused(&s).field.as_deref(), Some("user"));
        s.user = None;
        s.sizes.disk_mb = Some(10);
        assert_eq!(refused(&s).field.as_deref(), Some("diskMb"));
        s.sizes.disk_mb = None;
        s.shares = vec!["relative/dir".parse().unwrap()];
        assert!(refused(&s).message.contains("is a relative path"));
        s.shares = vec![];
        s.labels.insert(label::DEADLINE.into(), "x".into());
        assert_eq!(refused(&s).field.as_deref(), Some("labels"));
    }

    #[test]
    fn with_no_image_anywhere_check_says_where_to_give_one() {
        let p = DockerProvider::new(DockerOptions::new("/c".into(), "/tmp/x".into())).unwrap();
        let e = p.check(&ComputerSpec::sandbox(60_000)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("image"));
    }

    #[test]
    fn the_provider_user_is_never_root() {
        let mut o = DockerOptions::new("/c".into(), "/tmp/x".into());
        o.user = Some((1000, 0));
        assert_eq!(
            DockerProvider::new(o).err().unwrap().field.as_deref(),
            Some("user")
        );
    }

    #[test]
    fn attach_reads_the_plan_back_from_the_inspect() {
        let p = provider();
        let deadline: Time = "2026-12-01T10:00:00Z".parse().unwrap();
        let mut labels = Labels::from([("k".to_string(), "v".to_string())]);
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        let plan = Plan {
            name: "computer-0123456789ab".into(),
            image: "debian:bookworm".into(),
            user: (1000, 1001),
            network: NetworkKind::Open,
            limits: Limits {
                cpus: 1.5,
                memory_mb: 512,
                pids: 100,
            },
            deadline,
            labels,
            daemon: "/cache/computerd-abc".into(),
            display: None,
            egress: None,
            direct: Some("/tmp/cmcp-docker-cache/direct/computer-0123456789ab".into()),
            shares: vec![Share {
                source: "/srv/ws".into(),
                target: WORKSPACE.into(),
                read_only: true,
            }],
        };
        let body = serde_json::to_value(plan.body()).unwrap();
        let mut config = body.clone();
        config.as_object_mut().unwrap().remove("HostConfig");
        let v = serde_json::json!({
            "Name": "/computer-0123456789ab",
            "Created": "2026-12-01T09:00:00Z",
            "HostConfig": body["HostConfig"],
            "Config": config,
        });
        assert_eq!(p.plan_of(&v).unwrap(), plan);
        // A deadline further than 30 days from creation is not ours.
        let mut far = v.clone();
        far["Created"] = "2026-10-01T09:00:00Z".into();
        let bad = p.plan_of(&far).unwrap_err();
        assert!(
            bad[0].contains("more than 30 days after it was made"),
            "{bad:?}"
        );
        // A direct directory that is not this computer's own is not ours.
        let mut wide = v.clone();
        wide["HostConfig"]["Mounts"][1]["Source"] = "/".into();
        let bad = p.plan_of(&wide).unwrap_err();
        assert!(
            bad[0].starts_with("/run/computerd-host is bound from /, where this provider binds a computer's own directory /tmp/cmcp-docker-cache/direct/computer-0123456789ab there"),
            "{bad:?}"
        );
    }

    #[test]
    fn the_network_reads_back_from_inspect() {
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "none"}, "NetworkSettings": {"Networks": {"none": {}}}});
        assert_eq!(read_network(&v).unwrap().kind, NetworkKind::None);
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "bridge"}, "NetworkSettings": {"Networks": {"bridge": {}}}});
        assert_eq!(read_network(&v).unwrap().kind, NetworkKind::Open);
        let v = serde_json::json!({"HostConfig": {"NetworkMode": "host"}, "NetworkSettings": {"Networks": {"host": {}}}});
        assert_eq!(read_network(&v).unwrap_err().code, ErrorCode::Refused);
    }
}
