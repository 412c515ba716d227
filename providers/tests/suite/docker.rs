//! The Docker provider against a real engine. Each test skips in words
//! without one, and fails instead when COMPUTER_MCP_REQUIRE names docker
//! (as CI does). The image is CMCP_TEST_DOCKER_IMAGE (default
//! computer-mcp-test/debian:bookworm, built by fixtures/images/build.sh),
//! the static daemon CMCP_TEST_DOCKER_COMPUTERD (default
//! target/x86_64-unknown-linux-gnu/daemon/computerd).

mod create;
mod desktop;
mod hardening;
mod lifecycle;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{CreateContainerOptionsBuilder, InspectContainerOptions};
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource, Plan, cache};
use computer_providers::local::cgroup::Limits;
use computer_providers::{ComputerRef, ComputerSpec, Labels, NetworkKind, Provider};
use computer_testkit::{
    DockerEnv, docker_env, labelled_containers, labelled_volumes, remove_labelled,
};
use tokio_util::sync::CancellationToken;

use super::support::{run, text};
/// Every container a test makes carries this label, with the test's name.
const TEST_LABEL: &str = "computer-mcp.test";

struct Env {
    p: DockerProvider,
    docker: Docker,
    image: String,
    computerd: PathBuf,
    cache: tempfile::TempDir,
    test: String,
}

impl Env {
    fn spec(&self, lifetime_ms: u64) -> ComputerSpec {
        let mut s = ComputerSpec::sandbox(lifetime_ms);
        s.labels.insert(TEST_LABEL.into(), self.test.clone());
        s
    }

    /// A sandbox of this test, for ten minutes.
    async fn sandbox(&self, cancel: &CancellationToken) -> ComputerRef {
        self.p
            .create(&self.spec(600_000), cancel)
            .await
            .unwrap()
            .computer
    }

    fn label(&self) -> String {
        format!("{TEST_LABEL}={}", self.test)
    }

    /// Every container of this test, running or not.
    async fn ours(&self) -> Vec<bollard::models::ContainerSummary> {
        labelled_containers(&self.docker, &self.label()).await
    }

    /// Remove every container and volume of this test.
    async fn clean(&self) {
        remove_labelled(&self.docker, &self.label()).await;
    }

    /// The names of this test's containers (with `*` after a running
    /// one) and volumes: computers, egress proxies and socket volumes.
    async fn left(&self) -> (Vec<String>, Vec<String>) {
        let mut c: Vec<String> = self
            .ours()
            .await
            .into_iter()
            .map(|c| {
                let running = c.state == Some(ContainerSummaryStateEnum::RUNNING);
                let name = c.names.unwrap_or_default().join(",");
                format!(
                    "{}{}",
                    name.trim_start_matches('/'),
                    if running { "*" } else { "" }
                )
            })
            .collect();
        let v = labelled_volumes(&self.docker, &self.label()).await;
        c.sort();
        (c, v)
    }

    /// Wait until nothing of this test is left (no container, proxy or
    /// volume), failing past `within`; how long it took.
    async fn gone_within(&self, within: Duration, what: &str) -> Duration {
        let t = Instant::now();
        loop {
            let left = self.left().await;
            if left.0.is_empty() && left.1.is_empty() {
                return t.elapsed();
            }
            assert!(
                t.elapsed() < within,
                "{what}: still there after {within:?}: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn exists(&self, name: &str) -> bool {
        self.docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
            .is_ok()
    }

    /// A plan as the provider makes one, for containers a test makes by
    /// hand with our labels.
    fn plan(&self, name: &str, deadline_in_ms: i64, extra: &Labels) -> Plan {
        let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
        let deadline = computerd::launch::Time::from_unix_ms(now + deadline_in_ms).unwrap();
        let mut labels: Labels = extra.clone();
        labels.insert(TEST_LABEL.into(), self.test.clone());
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        Plan {
            name: name.into(),
            image: self.image.clone(),
            user: (1879048191, 1879048191),
            network: NetworkKind::None,
            limits: Limits {
                cpus: 1.0,
                memory_mb: 256,
                pids: 64,
            },
            deadline,
            labels,
            daemon: cache::ensure_copy(
                &self.computerd,
                &self.cache.path().join("cache"),
                &cache::Sums::default(),
            )
            .unwrap(),
            shares: vec![],
            display: None,
            egress: None,
            direct: None,
        }
    }

    async fn make(&self, body: bollard::models::ContainerCreateBody, name: &str, start: bool) {
        self.docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(name).build()),
                body,
            )
            .await
            .unwrap();
        if start {
            self.docker
                .start_container(
                    name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await
                .unwrap();
        }
    }
}

/// The provider and the engine, or None (a skip) without Docker.
async fn env(test: &str) -> Option<Env> {
    let DockerEnv {
        docker,
        image,
        computerd,
    } = docker_env().await?;
    let cache = tempfile::tempdir().unwrap();
    let mut opts = DockerOptions::new(computerd.clone(), cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image.clone()));
    let p = DockerProvider::new(opts).unwrap();
    let e = Env {
        p,
        docker,
        image,
        computerd,
        cache,
        test: test.to_string(),
    };
    e.clean().await;
    Some(e)
}

/// How the computer's one connection goes: `direct` when an accepted
/// socket of the computer's direct directory is open (the kernel makes
/// the accepted end in the connecting side's namespace, so the computer's
/// /proc/net/unix lists it, by the host path it was accepted on), else
/// `exec` and whether its bridge was told of a direct socket (`exec,
/// told`: it could not reach it). A closed connection's bridge may take
/// a moment to end: asked again until one bridge is left.
async fn route(conn: &computer_providers::Connection, direct_dir: &std::path::Path) -> String {
    let script = format!(
        "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in '/opt/computerd/computerd stdio '*--direct*) echo told;; '/opt/computerd/computerd stdio '*) echo plain;; esac; done; echo held=$(grep -c '{}/' /proc/net/unix)",
        direct_dir.display()
    );
    let mut last = String::new();
    for _ in 0..40 {
        last = text(&run(&conn.client, &script).await).trim().to_string();
        let lines: Vec<&str> = last.lines().collect();
        if lines.len() == 2 {
            return match (lines[0], lines[1]) {
                ("told", "held=1") => "direct".into(),
                ("told", "held=0") => "exec, told".into(),
                ("plain", "held=0") => "exec".into(),
                other => format!("{other:?}"),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not one bridge: {last:?}")
}
