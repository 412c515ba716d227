//! The Docker provider against a real engine. Each test skips in words
//! without one, and fails instead when COMPUTER_MCP_REQUIRE names docker
//! (as CI does). The image is COMPUTER_MCP_DOCKER_IMAGE (default
//! computer-mcp-test/debian:bookworm, built by fixtures/images/build.sh),
//! the static daemon COMPUTER_MCP_DOCKER_COMPUTERD (default
//! target/x86_64-unknown-linux-gnu/release/computerd).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource, Plan, cache};
use computer_providers::local::cgroup::Limits;
use computer_providers::{
    AttachBy, ComputerSpec, ErrorCode, Labels, NetworkKind, NetworkPolicy, Provider, Release,
    label, release_older, run_labels,
};
use computer_testkit::need;
use computerd::client::ComputerExt;
use computerd::protocol::{ExecParams, ExecResult};
use tokio_util::sync::CancellationToken;

const SOCKET: &str = "/var/run/docker.sock";
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

    /// Remove every container of this test.
    async fn clean(&self) {
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&HashMap::from([(
                "label",
                vec![format!("{TEST_LABEL}={}", self.test)],
            )]))
            .build();
        for c in self.docker.list_containers(Some(opts)).await.unwrap() {
            let _ = self
                .docker
                .remove_container(
                    c.id.as_deref().unwrap(),
                    Some(RemoveContainerOptionsBuilder::new().force(true).build()),
                )
                .await;
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
            user: (1000, 1000),
            network: NetworkKind::None,
            limits: Limits {
                cpus: 1.0,
                memory_mb: 256,
                pids: 64,
            },
            deadline,
            labels,
            daemon: cache::ensure_copy(&self.computerd, self.cache.path()).unwrap(),
            shares: vec![],
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

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The provider and the engine, or None (a skip) without Docker.
async fn env(test: &str) -> Option<Env> {
    let docker = match Docker::connect_with_unix(SOCKET, 30, bollard::API_DEFAULT_VERSION) {
        Ok(d) => Some(d),
        Err(_) => None,
    };
    let up = match &docker {
        Some(d) => d.ping().await.is_ok(),
        None => false,
    };
    if !need(
        "docker",
        up,
        &format!("no Docker engine answers at {SOCKET}"),
    ) {
        return None;
    }
    let docker = docker.unwrap();
    let image = std::env::var("COMPUTER_MCP_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    let have = docker.inspect_image(&image).await.is_ok();
    if !need(
        "docker",
        have,
        &format!(
            "the test image {image} is not on this Docker host (fixtures/images/build.sh makes it)"
        ),
    ) {
        return None;
    }
    let computerd = std::env::var_os("COMPUTER_MCP_DOCKER_COMPUTERD")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/x86_64-unknown-linux-gnu/release/computerd"));
    if !need(
        "docker",
        computerd.exists(),
        &format!(
            "the static computerd {} is not built (RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu -p computerd)",
            computerd.display()
        ),
    ) {
        return None;
    }
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
        test: format!("{test}-{}", std::process::id()),
    };
    e.clean().await;
    Some(e)
}

async fn run(conn: &computer_providers::Connection, script: &str) -> ExecResult {
    conn.client
        .call_typed(&ExecParams {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms: Some(20_000),
            ..Default::default()
        })
        .await
        .unwrap()
}

fn text(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout.0).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_computer_is_made_hardened_reached_found_and_released() {
    let Some(e) = env("made").await else { return };
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.labels.insert(label::SESSION.into(), "s-docker".into());
    let made = e.p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    assert!(c.running && c.id.starts_with("computer-"), "{c:?}");
    assert_eq!(c.user.as_deref(), Some("1000:1000"));
    assert_eq!(made.network.as_ref().unwrap().kind, NetworkKind::None);

    // docker inspect: every hardening flag.
    let i = e
        .docker
        .inspect_container(&c.id, None::<InspectContainerOptions>)
        .await
        .unwrap();
    let h = i.host_config.clone().unwrap();
    assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
    assert!(h.cap_add.unwrap_or_default().is_empty());
    assert_eq!(h.privileged, Some(false));
    assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
    assert_eq!(h.network_mode.as_deref(), Some("none"));
    assert_eq!(h.ipc_mode.as_deref(), Some("private"));
    assert_eq!(
        h.cgroupns_mode,
        Some(bollard::models::HostConfigCgroupnsModeEnum::PRIVATE)
    );
    assert_eq!((h.cpu_period, h.cpu_quota), (Some(100_000), Some(200_000)));
    assert_eq!(h.memory, Some(4096 << 20));
    assert_eq!(h.memory_swap, Some(4096 << 20));
    assert_eq!(h.pids_limit, Some(1024));
    let tmpfs = h.tmpfs.unwrap();
    assert_eq!(
        tmpfs
            .keys()
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>(),
        ["/run/computerd", "/work"].into()
    );
    let mounts = i.mounts.unwrap();
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    assert_eq!(
        mounts[0].destination.as_deref(),
        Some("/opt/computerd/computerd")
    );
    assert_eq!(mounts[0].rw, Some(false));
    let cfg = i.config.unwrap();
    assert_eq!(cfg.user.as_deref(), Some("1000:1000"));
    assert_eq!(
        cfg.entrypoint,
        Some(vec!["/opt/computerd/computerd".into()])
    );
    assert_eq!(
        cfg.cmd.as_ref().unwrap()[..3],
        ["init".to_string(), "--deadline".into(), c.deadline.clone()]
    );
    assert_eq!(cfg.labels.as_ref().unwrap()[label::COMPUTER], "1");
    assert_eq!(cfg.labels.as_ref().unwrap()[label::DEADLINE], c.deadline);

    // Inside: non-root, no capability, no_new_privs, seccomp; only lo.
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(conn.hello.version, computerd::VERSION);
    let r = run(
        &conn,
        "id -u; id -g; grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status; echo HOME=$HOME; pwd",
    )
    .await;
    let out = text(&r);
    let fields: HashMap<&str, &str> = out
        .lines()
        .filter_map(|l| l.split_once(':').or_else(|| l.split_once('=')))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    assert!(out.starts_with("1000\n1000\n"), "{out}");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(fields.get(cap), Some(&"0000000000000000"), "{cap}: {out}");
    }
    assert_eq!(fields.get("NoNewPrivs"), Some(&"1"), "{out}");
    assert_eq!(fields.get("Seccomp"), Some(&"2"), "{out}");
    assert_eq!(fields.get("HOME"), Some(&"/work"), "{out}");
    assert!(out.trim_end().ends_with("/work"), "{out}");
    let r = run(&conn, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").await;
    assert_eq!(text(&r), "lo\n");
    // The host's bridge address is not reached: no route at all.
    let r = run(
        &conn,
        "bash -c 'exec 3<>/dev/tcp/172.17.0.1/2375' 2>&1; echo rc=$?",
    )
    .await;
    let out = text(&r);
    assert!(out.contains("rc=1") && out.contains("unreachable"), "{out}");
    // The daemon is read-only to the computer.
    let r = run(&conn, "echo x > /opt/computerd/computerd 2>&1; echo rc=$?").await;
    assert!(
        text(&r).contains("rc=1") || text(&r).contains("rc=2"),
        "{}",
        text(&r)
    );
    conn.client.close();

    // Found again, by id and labels, and its network read back.
    let by = Labels::from([(label::SESSION.to_string(), "s-docker".to_string())]);
    let listed = e.p.list(&by, &cancel).await.unwrap();
    assert_eq!(listed.iter().map(|r| &r.id).collect::<Vec<_>>(), [&c.id]);
    assert_eq!(
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap()
            .id,
        c.id
    );
    assert_eq!(
        e.p.attach(&AttachBy::Labels(by.clone()), &cancel)
            .await
            .unwrap()
            .id,
        c.id
    );
    let net = e.p.network(&c, None, &cancel).await.unwrap();
    assert_eq!(net.kind, NetworkKind::None);
    let err =
        e.p.network(&c, Some(&NetworkPolicy::Open), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported);

    e.p.release(&c, Release::Stop, &cancel).await.unwrap();
    assert!(!e.p.list(&by, &cancel).await.unwrap()[0].running);
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert!(!e.exists(&c.id).await);
    // Released twice is still ok.
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}
