//! The Docker provider against a real engine. Each test skips in words
//! without one, and fails instead when COMPUTER_MCP_REQUIRE names docker
//! (as CI does). The image is CMCP_TEST_DOCKER_IMAGE (default
//! computer-mcp-test/debian:bookworm, built by fixtures/images/build.sh),
//! the static daemon CMCP_TEST_DOCKER_COMPUTERD (default
//! target/x86_64-unknown-linux-gnu/daemon/computerd).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::ContainerSummaryStateEnum;
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
use computer_testkit::{
    DockerEnv, docker_env, labelled_containers, labelled_volumes, need, remove_labelled,
};
use computerd::client::ComputerExt;
use computerd::protocol::{ExecParams, ExecResult};
use tokio_util::sync::CancellationToken;

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
            daemon: cache::ensure_copy(&self.computerd, &self.cache.path().join("cache")).unwrap(),
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
        last = text(&run(conn, &script).await).trim().to_string();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_computer_is_made_hardened_reached_found_and_released() {
    let Some(e) = env("made").await else { return };
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.labels.insert(label::SESSION.into(), "s-docker".into());
    let made = e.p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    assert!(c.running && c.id.starts_with("computer-"), "{c:?}");
    assert_eq!(c.user.as_deref(), Some("1879048191:1879048191"));
    assert_eq!(c.image.as_deref(), Some(e.image.as_str()));
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
        ["/run/computerd", "/run/lock", "/tmp", "/var/tmp", "/work"].into()
    );
    assert_eq!(h.readonly_rootfs, Some(true));
    let mounts = i.mounts.unwrap();
    assert_eq!(mounts.len(), 2, "{mounts:?}");
    let at = |d: &str| {
        mounts
            .iter()
            .find(|m| m.destination.as_deref() == Some(d))
            .unwrap_or_else(|| panic!("no mount at {d}: {mounts:?}"))
    };
    assert_eq!(at("/opt/computerd/computerd").rw, Some(false));
    // The direct directory: this computer's own, read-only.
    let direct_dir = e.cache.path().join("cache/direct").join(&c.id);
    let d = at("/run/computerd-host");
    assert_eq!(d.rw, Some(false));
    assert_eq!(
        d.source.as_deref(),
        Some(direct_dir.to_str().unwrap()),
        "{d:?}"
    );
    let cfg = i.config.unwrap();
    assert_eq!(cfg.user.as_deref(), Some("1879048191:1879048191"));
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
    assert!(out.starts_with("1879048191\n1879048191\n"), "{out}");
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
    // The connection came the direct way, and the directory it came
    // through can be neither listed nor written from inside.
    assert_eq!(route(&conn, &direct_dir).await, "direct");
    let r = run(
        &conn,
        "ls /run/computerd-host >/dev/null 2>&1; echo ls=$?; touch /run/computerd-host/x 2>&1; echo touch=$?",
    )
    .await;
    let out = text(&r);
    assert!(out.contains("ls=2") && out.contains("touch=1"), "{out}");
    assert!(
        out.contains("Read-only file system") || out.contains("Permission denied"),
        "{out}"
    );
    // The bridge carries the connection and read its token: a program of
    // the same user can neither read its environment nor take its
    // descriptors (nor trace it or read its memory: it is not dumpable).
    let r = run(
        &conn,
        "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in '/opt/computerd/computerd stdio '*) b=$p;; esac; done; \
         ls $b/fd >/dev/null 2>&1; echo fd=$?; cat $b/environ >/dev/null 2>&1; echo environ=$?",
    )
    .await;
    assert_eq!(text(&r), "fd=2\nenviron=1\n");
    conn.client.close();

    // Found again, by id and labels, and its network read back.
    let by = Labels::from([(label::SESSION.to_string(), "s-docker".to_string())]);
    let listed = e.p.list(&by, &cancel).await.unwrap();
    assert_eq!(listed.iter().map(|r| &r.id).collect::<Vec<_>>(), [&c.id]);
    let attached =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap();
    assert_eq!(attached.id, c.id);
    // The image as the engine holds it (Config.Image), not as create said.
    assert_eq!(attached.image.as_deref(), Some(e.image.as_str()));
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
    assert!(!direct_dir.exists(), "its direct directory goes with it");
    // Released twice is still ok.
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_whose_direct_socket_cannot_be_reached_is_reached_over_the_exec() {
    use std::os::unix::fs::PermissionsExt;
    let Some(e) = env("direct").await else { return };
    let cancel = CancellationToken::new();
    let c =
        e.p.create(&e.spec(600_000), &cancel)
            .await
            .unwrap()
            .computer;
    let dir = e.cache.path().join("cache/direct").join(&c.id);
    let mode = |m: u32| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).unwrap();
    // The computer's user may not reach into it: the bridge says so and
    // bridges the exec's stdio.
    mode(0o700);
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&conn, &dir).await, "exec, told");
    let r = run(&conn, "head -c 3000000 /dev/zero | wc -c").await;
    assert_eq!(text(&r).trim(), "3000000");
    conn.client.close();
    // Reachable again: direct again.
    mode(0o711);
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&conn, &dir).await, "direct");
    let r = run(&conn, "head -c 3000000 /dev/zero | wc -c").await;
    assert_eq!(text(&r).trim(), "3000000");
    conn.client.close();
    // The directory gone from this host (a cleaned cache): over the exec,
    // with a bridge that is not told of it.
    std::fs::remove_dir(&dir).unwrap();
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&conn, &dir).await, "exec");
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

/// A program of the computer runs as init's user, and the daemon's binary
/// is there at /opt/computerd: still it cannot use init's socket, even
/// through the bridge the provider uses; the provider's own connection
/// (a bridge the engine execs) is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_of_the_computer_cannot_use_the_daemons_socket() {
    let Some(e) = env("own-socket").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = e.p.create(&e.spec(600_000), &cancel).await.unwrap();
    let conn = e.p.connect(&made.computer, &cancel).await.unwrap();
    let r = run(
        &conn,
        r#"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"deadline.extend","params":{"at":"2100-01-01T00:00:00Z"}}' | /opt/computerd/computerd stdio"#,
    )
    .await;
    let reply: serde_json::Value = serde_json::from_str(text(&r).trim()).unwrap();
    assert_eq!(reply["error"]["data"]["kind"], "denied", "{reply}");
    assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
    // The provider's connection goes on.
    assert_eq!(text(&run(&conn, "echo still").await), "still\n");
    conn.client.close();
    e.p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stays_within_the_pids_limit_and_the_daemon_keeps_answering() {
    let Some(e) = env("forkbomb").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // The bound is the container's own pids cgroup (64), written by the
    // provider and again by the test below, and the bomb runs as a uid no
    // host account has.
    let mut spec = e.spec(600_000);
    spec.sizes.pids = Some(64);
    spec.sizes.memory_mb = Some(512);
    spec.sizes.cpus = Some(1.0);
    spec.user = Some("61000:61000".into());
    let c = e.p.create(&spec, &cancel).await.unwrap().computer;
    // A bound of the test's own, whatever the provider set: the test writes
    // the container's pids.max itself (found from its first process's
    // cgroup), and runs no bomb where it cannot.
    let pid = e
        .docker
        .inspect_container(&c.id, None::<InspectContainerOptions>)
        .await
        .unwrap()
        .state
        .and_then(|s| s.pid)
        .unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let max = cgroups
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            match ctl {
                "pids" => Some(format!("/sys/fs/cgroup/pids{path}/pids.max")),
                "" => Some(format!("/sys/fs/cgroup{path}/pids.max")),
                _ => None,
            }
        })
        .expect("the container's pids cgroup");
    std::fs::write(&max, "64")
        .unwrap_or_else(|e| panic!("no bound of the test's own ({max}): {e}"));
    assert_eq!(std::fs::read_to_string(&max).unwrap().trim(), "64");
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let params = ExecParams {
        argv: vec![
            "bash".into(),
            "-c".into(),
            "b() { b | b & }; b; sleep 3".into(),
        ],
        timeout_ms: Some(4_000),
        ..Default::default()
    };
    let bomb = conn.client.call_typed(&params);
    let r = tokio::time::timeout(Duration::from_secs(30), bomb)
        .await
        .expect("the bomb's run ends at its timeout");
    drop(r);
    // The cgroup held it: never above 64, and the daemon still answers.
    let r = run(&conn, "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids.events").await;
    let out = text(&r);
    assert!(out.starts_with("64\n"), "{out}");
    let hit: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("max "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(hit > 0, "the bomb never reached the limit: {out}");
    let r = run(&conn, "echo still here").await;
    assert_eq!(text(&r), "still here\n");
    // Everything the run started ended with it.
    computer_testkit::wait_until("the bomb's processes end", Duration::from_secs(10), || {
        !std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read_to_string(p.path().join("status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.contains("61000"))
                    && s.contains("Name:\tbash")
            })
        })
    });
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

/// Every directory the computer's user may write, with what a write of up
/// to 1 GiB left in it (bytes, or none when no file could be made) and
/// the filesystem it is on; `fill` false only lists them.
async fn writable_dirs(
    conn: &computer_providers::Connection,
    fill: bool,
) -> Vec<(String, u64, String)> {
    let write = if fill {
        "head -c 1073741824 /dev/zero > \"$d/.fill\" 2>/dev/null; n=$(stat -c %s \"$d/.fill\" 2>/dev/null || echo 0)"
    } else {
        "n=0"
    };
    let script = format!(
        "find / \\( -path /proc -o -path /sys \\) -prune -o -type d -writable -print 2>/dev/null | while read -r d; do {write}; echo \"$d $n $(stat -f -c %T \"$d\")\"; done"
    );
    let r = conn
        .client
        .call_typed(&ExecParams {
            argv: vec!["sh".into(), "-c".into(), script],
            timeout_ms: Some(300_000),
            ..Default::default()
        })
        .await
        .unwrap();
    text(&r)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l:?}");
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect()
}

/// Issue 34: what a computer writes is bounded by its memory, and none of
/// it lands in the container's layer on this host's disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_filling_every_writable_directory_stops_at_its_bound_off_the_hosts_disk() {
    let Some(e) = env("disk").await else { return };
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.sizes.memory_mb = Some(1024);
    let made = e.p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    assert!(
        made.notes.contains(&"disk: the root filesystem is read-only; the writable places are tmpfs (/work 512 MiB, /tmp 256 MiB, /var/tmp 64 MiB, /run/lock 1 MiB, /dev/shm 64 MiB), all charged to the memory bound (1024 MiB), so nothing written in the computer lands on this host's disk".to_string()),
        "{:?}",
        made.notes
    );
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let dirs = writable_dirs(&conn, true).await;
    let names: Vec<&str> = dirs.iter().map(|d| d.0.as_str()).collect();
    for d in ["/tmp", "/var/tmp", "/run/lock", "/work", "/dev/shm"] {
        assert!(names.contains(&d), "{d} is not writable: {dirs:?}");
    }
    let total: u64 = dirs.iter().map(|d| d.1).sum();
    let bound = 1024 << 20;
    for (dir, bytes, fs) in &dirs {
        // (A file in /dev/mqueue is a message queue, in the kernel's memory.)
        assert!(
            fs == "tmpfs" || fs == "mqueue",
            "{dir} is on {fs}: {dirs:?}"
        );
        assert!(*bytes < bound, "{dir} took {bytes} bytes: {dirs:?}");
    }
    assert!(total < bound, "{total} bytes went in: {dirs:?}");
    // Everything is still written (nothing removed): the container's own
    // layer on the host's disk, as the engine measures it.
    let i = e
        .docker
        .inspect_container(
            &c.id,
            Some(
                bollard::query_parameters::InspectContainerOptionsBuilder::new()
                    .size(true)
                    .build(),
            ),
        )
        .await
        .unwrap();
    let layer = i.size_rw.unwrap_or_default();
    assert!(
        layer < 1 << 20,
        "the container's layer on this host's disk grew by {layer} bytes: {dirs:?}"
    );
    assert_eq!(text(&run(&conn, "echo still here").await), "still here\n");
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();

    // A computer asked to run as root may write no directory of the image
    // either (root owns them all; only the tmpfs places are writable).
    spec.user = Some("0".into());
    let c = e.p.create(&spec, &cancel).await.unwrap().computer;
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let dirs = writable_dirs(&conn, false).await;
    let on_disk: Vec<&(String, u64, String)> = dirs
        .iter()
        .filter(|d| !["tmpfs", "mqueue", "devpts"].contains(&d.2.as_str()))
        .collect();
    assert!(on_disk.is_empty(), "root may write {on_disk:?}");
    assert!(dirs.iter().any(|d| d.0 == "/tmp"), "{dirs:?}");
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

/// sweep releases every expired computer of the engine, so the two tests
/// that sweep take turns (one's expired computer is the other's to find).
static SWEEPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_its_deadline_the_computer_stops_by_itself() {
    let Some(e) = env("deadline").await else {
        return;
    };
    let _turn = SWEEPS.lock().await;
    let cancel = CancellationToken::new();
    let c = e.p.create(&e.spec(4_000), &cancel).await.unwrap().computer;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let i = e
            .docker
            .inspect_container(&c.id, None::<InspectContainerOptions>)
            .await
            .unwrap();
        let st = i.state.unwrap();
        if st.running != Some(true) {
            assert_eq!(st.exit_code, Some(0), "init ends in order at its deadline");
            break;
        }
        assert!(
            Instant::now() < until,
            "still running 16 s past its deadline"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Gone, "{err:?}");
    // A stopped computer is checked by its inspect alone, and attaches.
    let found =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap();
    assert!(!found.running);
    // The janitor deletes it; a live computer is kept.
    let live =
        e.p.create(&e.spec(600_000), &cancel)
            .await
            .unwrap()
            .computer;
    let swept = e.p.sweep(&cancel).await.unwrap();
    assert!(swept.contains(&c.id), "{swept:?}");
    assert!(!swept.contains(&live.id), "{swept:?}");
    assert!(!e.exists(&c.id).await && e.exists(&live.id).await);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refuses_a_container_with_our_labels_made_wider_naming_the_field() {
    let Some(e) = env("drift").await else { return };
    let cancel = CancellationToken::new();
    type Widen = fn(&mut bollard::models::HostConfig);
    let cases: [(&str, Widen, &str); 3] = [
        (
            "computer-00000000d001",
            |h| h.privileged = Some(true),
            "HostConfig.Privileged is true",
        ),
        (
            "computer-00000000d002",
            |h| h.cap_add = Some(vec!["NET_ADMIN".into()]),
            "HostConfig.CapAdd is [\"NET_ADMIN\"]",
        ),
        (
            "computer-00000000d003",
            |h| h.network_mode = Some("host".into()),
            "HostConfig.NetworkMode is \"host\"",
        ),
    ];
    for (name, widen, words) in cases {
        let plan = e.plan(name, 600_000, &Labels::new());
        let mut body = plan.body();
        widen(body.host_config.as_mut().unwrap());
        e.make(body, name, true).await;
        let err =
            e.p.attach(&AttachBy::Id(name.into()), &cancel)
                .await
                .unwrap_err();
        assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
        assert!(err.message.contains(words), "{name}: {}", err.message);
        // attach did not make it, so it does not delete it.
        assert!(e.exists(name).await);
    }
    // The same container as planned attaches.
    let name = "computer-00000000d004";
    e.make(e.plan(name, 600_000, &Labels::new()).body(), name, true)
        .await;
    let r = e.p.attach(&AttachBy::Id(name.into()), &cancel).await;
    assert_eq!(r.unwrap().id, name);
    // A container that is not ours is not found.
    let err =
        e.p.attach(&AttachBy::Id("computer-nothex".into()), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_older_deletes_lower_epochs_keeps_its_own_and_another_runs_and_is_fenced() {
    let Some(e) = env("epochs").await else { return };
    let cancel = CancellationToken::new();
    // Containers made (not started) with our labels: list sees them.
    let made = [
        ("computer-0000000e0001", "r1", "1"),
        ("computer-0000000e0002", "r1", "2"),
        ("computer-0000000e0003", "r1", "3"),
        ("computer-0000000e0004", "r2", "1"),
        ("computer-0000000e0005", "r1", "x"),
    ];
    for (name, run, epoch) in made {
        let labels = Labels::from([
            (label::RUN.to_string(), run.to_string()),
            (label::EPOCH.to_string(), epoch.to_string()),
        ]);
        e.make(e.plan(name, 600_000, &labels).body(), name, false)
            .await;
    }
    let r = release_older(&e.p, "r1", 3, &cancel).await.unwrap();
    assert_eq!(
        r.released,
        ["computer-0000000e0001", "computer-0000000e0002"]
    );
    assert_eq!(r.kept, ["computer-0000000e0003"]);
    assert_eq!(r.unproven.len(), 1);
    assert_eq!(r.unproven[0].0, "computer-0000000e0005");
    assert!(e.exists("computer-0000000e0003").await && e.exists("computer-0000000e0004").await);
    assert!(!e.exists("computer-0000000e0001").await);
    // A later claim holds the run: nothing is released.
    let err = release_older(&e.p, "r1", 2, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused);
    assert!(
        err.message.starts_with(
            "fenced: run \"r1\" has computer-0000000e0003 at epoch 3, above this claim's epoch 2"
        ),
        "{}",
        err.message
    );
    assert!(e.exists("computer-0000000e0003").await);
    assert_eq!(run_labels("r1", 4).unwrap().len(), 2);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_in_words_with_nothing_left_behind() {
    let Some(e) = env("bad").await else { return };
    let _turn = SWEEPS.lock().await;
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.image = Some("computer-mcp-test/none:missing".into());
    let err = e.p.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (err.code, err.field.as_deref()),
        (ErrorCode::NotFound, Some("image"))
    );
    assert!(
        err.message
            .starts_with("the image computer-mcp-test/none:missing is not on this Docker host"),
        "{}",
        err.message
    );
    let err =
        e.p.create(&e.spec(31 * 24 * 3_600_000), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("lifetime"));
    // A list the egress proxy does not take (allowlists themselves are
    // tests/docker_egress.rs's).
    let mut spec = e.spec(600_000);
    spec.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "10.0.0.0/8".into()]);
    assert_eq!(
        e.p.create(&spec, &cancel)
            .await
            .unwrap_err()
            .field
            .as_deref(),
        Some("network")
    );
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
    for (share, words) in [
        ("rel/dir".to_string(), "is a relative path"),
        (format!("{}/link", dir.path().display()), "is a symlink"),
        (
            format!("{}/missing", dir.path().display()),
            "does not exist",
        ),
        (
            real.display().to_string(),
            "is not writable by the computer's user 1879048191:1879048191",
        ),
    ] {
        let mut spec = e.spec(600_000);
        spec.shares = vec![share.parse().unwrap()];
        let err = e.p.create(&spec, &cancel).await.unwrap_err();
        assert_eq!(err.field.as_deref(), Some("share"), "{share}");
        assert!(err.message.contains(words), "{share}: {}", err.message);
    }
    // An image with a VOLUME (a mount the computer was not asked for).
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(format!(
        "FROM {}\nVOLUME /data\n",
        e.image
    )));
    let with_volume = DockerProvider::new(opts).unwrap();
    let err = with_volume
        .create(&e.spec(600_000), &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("image"));
    assert!(
        err.message.contains("declares VOLUME [\"/data\"]"),
        "{}",
        err.message
    );
    assert_eq!(e.ours().await.len(), 0);
    // A container with a computer's name but not our label is not ours:
    // attach does not find it, release and sweep never touch it.
    let name = "computer-00000000aa01";
    let mut body = e.plan(name, -60_000, &Labels::new()).body();
    body.labels = Some(HashMap::from([(TEST_LABEL.to_string(), e.test.clone())]));
    e.make(body, name, false).await;
    let err =
        e.p.attach(&AttachBy::Id(name.into()), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound, "{err:?}");
    assert!(
        !e.p.sweep(&cancel)
            .await
            .unwrap()
            .contains(&name.to_string())
    );
    assert!(e.exists(name).await);
    e.clean().await;
    // An engine that is not there.
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("c2"));
    opts.socket = "/nonexistent/docker.sock".into();
    opts.image = Some(ImageSource::Name(e.image.clone()));
    let p = DockerProvider::new(opts).unwrap();
    let err = p.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unreachable);
    assert_eq!(
        err.message,
        "the Docker engine at unix:///nonexistent/docker.sock did not answer: is dockerd running, and may this user reach its socket?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_is_bound_at_workspace_and_a_busybox_image_works() {
    let Some(e) = env("share").await else { return };
    let cancel = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("ws");
    std::fs::create_dir(&shared).unwrap();
    nix::unistd::chown(&shared, Some(1879048191.into()), Some(1879048191.into())).unwrap();
    let mut spec = e.spec(600_000);
    spec.shares = vec![shared.display().to_string().parse().unwrap()];
    let busybox = std::env::var("CMCP_TEST_DOCKER_BUSYBOX")
        .unwrap_or_else(|_| "computer-mcp-test/busybox:latest".into());
    let have_busybox = e.docker.inspect_image(&busybox).await.is_ok();
    if need(
        "docker",
        have_busybox,
        &format!("the busybox image {busybox} is not built"),
    ) {
        spec.image = Some(busybox);
    }
    let made = e.p.create(&spec, &cancel).await.unwrap();
    assert!(
        made.notes.iter().any(|n| n.starts_with("share: ")),
        "{:?}",
        made.notes
    );
    let c = made.computer;
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let r = run(&conn, "echo hi > /workspace/from-inside && id -u").await;
    assert_eq!(text(&r), "1879048191\n");
    assert_eq!(
        std::fs::read_to_string(shared.join("from-inside")).unwrap(),
        "hi\n"
    );
    conn.client.close();
    // attach reads the share back and holds the computer to it.
    assert_eq!(
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap()
            .id,
        c.id
    );
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_removed_from_outside_is_gone_on_the_next_call_within_5_s() {
    let Some(e) = env("killed").await else { return };
    let cancel = CancellationToken::new();
    let c =
        e.p.create(&e.spec(600_000), &cancel)
            .await
            .unwrap()
            .computer;
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn, "echo up").await), "up\n");
    e.docker
        .remove_container(
            &c.id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
        .unwrap();
    let t = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        conn.client.call_typed(&ExecParams {
            argv: vec!["true".into()],
            ..Default::default()
        }),
    )
    .await
    .expect("the next call answers within 5 s");
    assert!(r.is_err(), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Gone, "{err:?}");
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipe_is_built_once_by_one_flight_and_tagged_by_its_hash() {
    let Some(e) = env("recipe").await else { return };
    let cancel = CancellationToken::new();
    // A recipe unique to this run, so the build really happens.
    let recipe = format!(
        "FROM {}\nRUN echo {} > /etc/recipe-run\n",
        e.image,
        std::process::id()
    );
    let tag = computer_providers::docker::image::recipe_tag(&recipe);
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(recipe.clone()));
    let p = DockerProvider::new(opts).unwrap();
    // Two concurrent creates share one build.
    let spec = e.spec(600_000);
    let (a, b) = tokio::join!(p.create(&spec, &cancel), p.create(&spec, &cancel));
    let (a, b) = (a.unwrap().computer, b.unwrap().computer);
    let img = e.docker.inspect_image(&tag).await.unwrap();
    let labels = img.config.unwrap().labels.unwrap();
    assert_eq!(
        labels[label::RECIPE],
        cache::sha256_bytes(recipe.as_bytes())
    );
    let conn = p.connect(&a, &cancel).await.unwrap();
    assert_eq!(
        text(&run(&conn, "cat /etc/recipe-run").await),
        format!("{}\n", std::process::id())
    );
    conn.client.close();
    for c in [&a, &b] {
        p.release(c, Release::Delete, &cancel).await.unwrap();
    }
    // A recipe that fails says which step, in its own words.
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(format!(
        "FROM {}\nRUN exit 3\n",
        e.image
    )));
    let p = DockerProvider::new(opts).unwrap();
    let err = p.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.field.as_deref(), Some("recipe"));
    assert!(err.message.contains("exit 3"), "{}", err.message);
    // The failed step's container is not left behind.
    let all = e
        .docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).build()))
        .await
        .unwrap();
    assert!(
        !all.iter()
            .any(|c| c.command.as_deref().is_some_and(|c| c.contains("exit 3"))),
        "{all:?}"
    );
    let _ = e
        .docker
        .remove_image(
            &tag,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_of_another_version_is_refused() {
    let Some(e) = env("version").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // A stand-in daemon: init sleeps, stdio answers hello as version 0.0.0.
    let fake = e.cache.path().join("fake-computerd");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\ninit) exec sleep 600;;\nstdio) read -r line; id=$(echo \"$line\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"version\":\"0.0.0\",\"os\":\"linux\",\"kind\":\"linux\",\"arch\":\"amd64\",\"groups\":[\"exec\",\"files\",\"processes\"]}}\\n' \"$id\"; cat >/dev/null;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let name = "computer-00000000fe01";
    let mut plan = e.plan(name, 600_000, &Labels::new());
    plan.daemon = fake.clone();
    e.make(plan.body(), name, true).await;
    let c = computer_providers::ComputerRef {
        provider: "docker".into(),
        id: name.into(),
        labels: Labels::new(),
        created_at: String::new(),
        deadline: String::new(),
        running: true,
        home: None,
        user: None,
        sizes: None,
        image: None,
        network: None,
    };
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.contains(&format!(
            "the daemon is version 0.0.0, where this provider is {}",
            computerd::VERSION
        )),
        "{}",
        err.message
    );
    // attach names the daemon it binds, which is not the provider's copy.
    let err =
        e.p.attach(&AttachBy::Id(name.into()), &cancel)
            .await
            .unwrap_err();
    assert!(
        err.message.contains("it binds the daemon"),
        "{}",
        err.message
    );
    assert!(e.exists(name).await);
    e.clean().await;
}

/// A static x86-64 Linux program of `code` alone: the smallest ELF
/// executable (one loadable segment, no interpreter), so the provider's
/// static check takes it as a daemon.
#[cfg(target_arch = "x86_64")]
fn tiny_elf(code: &[u8]) -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    let size = (64 + 56 + code.len()) as u64;
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    f.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&(BASE + 64 + 56).to_le_bytes()); // entry
    f.extend_from_slice(&64u64.to_le_bytes()); // program headers
    f.extend_from_slice(&0u64.to_le_bytes()); // no sections
    f.extend_from_slice(&0u32.to_le_bytes());
    for h in [64u16, 56, 1, 0, 0, 0] {
        f.extend_from_slice(&h.to_le_bytes());
    }
    f.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // read, execute
    for v in [0, BASE, BASE, size, size, 0x1000] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(code);
    f
}

/// A provider whose daemon is `program` (a stand-in made by the test).
#[cfg(target_arch = "x86_64")]
fn provider_with_daemon(e: &Env, name: &str, program: &[u8]) -> DockerProvider {
    let path = e.cache.path().join(name);
    std::fs::write(&path, program).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut opts = DockerOptions::new(path, e.cache.path().join(format!("cache-{name}")));
    opts.image = Some(ImageSource::Name(e.image.clone()));
    DockerProvider::new(opts).unwrap()
}

#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_daemon_never_answers_hello_deletes_its_container_and_names_the_step() {
    let Some(e) = env("no-hello").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // A daemon that exits at once with code 3 (mov eax, 60; mov edi, 3;
    // syscall): the container stops before any hello.
    let exits = provider_with_daemon(
        &e,
        "exits-at-once",
        &tiny_elf(&[0xb8, 0x3c, 0, 0, 0, 0xbf, 3, 0, 0, 0, 0x0f, 0x05]),
    );
    let err = exits.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
    assert!(
        err.message.starts_with(
            "creating the Docker computer failed at waiting for its daemon's hello: the computer stopped as it started (exit code 3)"
        ),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(" was deleted") && !err.message.contains("could not be deleted"),
        "{}",
        err.message
    );
    let left = e.ours().await;
    assert!(left.is_empty(), "left behind: {left:?}");

    // A daemon that runs and never answers (pause in a loop): its hello
    // times out, and the running container goes too.
    let hangs = provider_with_daemon(
        &e,
        "never-answers",
        &tiny_elf(&[0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7]),
    );
    let err = hangs.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout, "{err:?}");
    assert!(
        err.message.starts_with(
            "creating the Docker computer failed at waiting for its daemon's hello: the computer's daemon did not answer within 30 s: the computer's daemon did not answer hello within 10 s"
        ),
        "{}",
        err.message
    );
    let name = err
        .message
        .split("the container ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_string();
    assert!(name.starts_with("computer-"), "{}", err.message);
    assert!(!e.exists(&name).await, "{name} is still there");
    let left = e.ours().await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `create` driven until `made` holds of what this test has left (the
/// create still running), then dropped there; fails if create returns
/// first or nothing appears within 40 s.
async fn drop_when<F>(e: &Env, p: &DockerProvider, spec: &ComputerSpec, what: &str, made: F)
where
    F: Fn(&(Vec<String>, Vec<String>)) -> bool,
{
    let cancel = CancellationToken::new();
    let mut create = p.create(spec, &cancel);
    let watch = async {
        loop {
            if made(&e.left().await) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        r = &mut create => panic!("{what}: create returned before the drop: {:?}", r.map(|c| c.computer.id)),
        w = tokio::time::timeout(Duration::from_secs(40), watch) => {
            assert!(w.is_ok(), "{what}: never appeared within 40 s");
        }
    }
    drop(create);
}

fn allowlisted(mut s: ComputerSpec) -> ComputerSpec {
    s.network = NetworkPolicy::Allow(vec!["pypi.org".into()]);
    s
}

/// A create whose future is dropped once it has made its container (or an
/// allowlist's proxy and volume) removes them at once, not at the sweep:
/// a daemon that never answers holds create in its wait for hello (30 s),
/// and, as the proxy too, in its wait for the proxy's ready line (10 s),
/// so each drop lands there.
#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_dropped_while_it_waits_for_its_daemon_or_proxy_leaves_nothing_within_5_s() {
    let Some(e) = env("dropped-waiting").await else {
        return;
    };
    let hangs = provider_with_daemon(
        &e,
        "never-answers",
        &tiny_elf(&[0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7]),
    );
    let running = |n: &String| n.ends_with('*');
    drop_when(&e, &hangs, &e.spec(600_000), "the computer", |(c, _)| {
        c.iter().any(running)
    })
    .await;
    let took = e.gone_within(Duration::from_secs(5), "the computer").await;
    eprintln!("the computer was removed {took:?} after the drop");
    drop_when(
        &e,
        &hangs,
        &allowlisted(e.spec(600_000)),
        "the egress proxy",
        |(c, v)| c.iter().any(running) && !v.is_empty(),
    )
    .await;
    let took = e
        .gone_within(Duration::from_secs(5), "the egress proxy")
        .await;
    eprintln!("the egress proxy and volume were removed {took:?} after the drop");
    // Nothing comes back from an engine call the drop cut off.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(e.left().await, (vec![], vec![]));
}

/// A create dropped at any point (a timeout around it at fractions of
/// how long a whole create takes here, or the moment its container
/// appears) leaves no container, proxy or volume within 5 s; one that
/// returns keeps its computer (and an allowlist its proxy and volume).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_dropped_at_any_point_leaves_nothing_and_one_that_returns_keeps_its_computer() {
    let Some(e) = env("dropped").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // A create that returns keeps what it made after the drop guard's
    // removal would have run; how long each took sets the drops' bounds.
    let t = Instant::now();
    let c =
        e.p.create(&e.spec(600_000), &cancel)
            .await
            .unwrap()
            .computer;
    let took = t.elapsed();
    let t = Instant::now();
    let a =
        e.p.create(&allowlisted(e.spec(600_000)), &cancel)
            .await
            .unwrap()
            .computer;
    let took_allowlisted = t.elapsed();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (containers, volumes) = e.left().await;
    assert_eq!(containers.len(), 3, "{containers:?}");
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn, "echo up").await), "up\n");
    conn.client.close();
    for c in [c, a] {
        e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    assert_eq!(e.left().await, (vec![], vec![]));

    let (mut dropped, mut dropped_with_parts, mut finished) = (0, 0, 0);
    for (spec, whole) in [
        (e.spec(600_000), took),
        (allowlisted(e.spec(600_000)), took_allowlisted),
    ] {
        for part in [0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97] {
            let bound = whole.mul_f64(part);
            let what = format!("{:?} dropped after {bound:?}", spec.network.kind());
            match tokio::time::timeout(bound, e.p.create(&spec, &cancel)).await {
                Ok(made) => {
                    // Done within the bound: it is kept.
                    let c = made.unwrap().computer;
                    assert!(e.exists(&c.id).await, "{what}: {} is gone", c.id);
                    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
                    finished += 1;
                }
                Err(_) => {
                    dropped += 1;
                    if e.left().await != (vec![], vec![]) {
                        dropped_with_parts += 1;
                    }
                }
            }
            e.gone_within(Duration::from_secs(5), &what).await;
        }
    }
    eprintln!(
        "a create took {took:?} ({took_allowlisted:?} allowlisted); {dropped} dropped ({dropped_with_parts} with something made), {finished} finished"
    );
    // Dropped the moment the container (or the proxy) appears: in the
    // engine's create or start, or the wait for hello.
    drop_when(&e, &e.p, &e.spec(600_000), "the computer", |(c, _)| {
        !c.is_empty()
    })
    .await;
    e.gone_within(
        Duration::from_secs(5),
        "the computer dropped at its appearance",
    )
    .await;
    drop_when(
        &e,
        &e.p,
        &allowlisted(e.spec(600_000)),
        "the egress proxy",
        |(c, _)| !c.is_empty(),
    )
    .await;
    e.gone_within(
        Duration::from_secs(5),
        "the proxy dropped at its appearance",
    )
    .await;
    // Nothing comes back from an engine call a drop cut off.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(e.left().await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_may_ask_for_root_which_holds_no_capability() {
    let Some(e) = env("root").await else { return };
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.user = Some("0".into());
    let c = e.p.create(&spec, &cancel).await.unwrap().computer;
    assert_eq!(c.user.as_deref(), Some("0:0"));
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let out = text(
        &run(
            &conn,
            "id -u; grep -E '^Cap(Eff|Bnd)' /proc/self/status; touch /etc/x 2>&1 && echo wrote",
        )
        .await,
    );
    assert!(out.starts_with("0\n"), "{out}");
    assert!(
        out.ends_with("touch: cannot touch '/etc/x': Read-only file system\n"),
        "{out}"
    );
    assert!(
        out.contains("CapEff:\t0000000000000000") && out.contains("CapBnd:\t0000000000000000"),
        "{out}"
    );
    conn.client.close();
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

/// The desktop image (fixtures/images/build.sh), or None (a skip).
async fn desktop_image(e: &Env) -> Option<String> {
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    let have = e.docker.inspect_image(&image).await.is_ok();
    need(
        "docker",
        have,
        &format!("the desktop image {image} is not on this Docker host (fixtures/images/build.sh makes it)"),
    )
    .then_some(image)
}

fn desktop_provider(e: &Env, image: &str, screen: &str) -> DockerProvider {
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image.into()));
    opts.desktop = Some(screen.parse().unwrap());
    DockerProvider::new(opts).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_desktop_starts_its_x_server_through_the_daemon_and_declares_the_screen() {
    let Some(e) = env("desktop").await else {
        return;
    };
    let Some(image) = desktop_image(&e).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = desktop_provider(&e, &image, "1024x768");
    let caps = p.capabilities();
    assert_eq!(caps.kind, computerd::protocol::MachineKind::Desktop);
    let mut spec = e.spec(600_000);
    // A desktop provider makes desktops only, and says so before any call.
    let e_kind = p.check(&spec).unwrap_err();
    assert_eq!(e_kind.field.as_deref(), Some("kind"), "{}", e_kind.message);
    spec.kind = computerd::protocol::SettingKind::Desktop;
    let made = p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    let conn = p.connect(&c, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, computerd::protocol::MachineKind::Desktop);
    for g in computer_providers::docker::desktop::GROUPS {
        assert!(conn.hello.groups.contains(g), "{:?}", conn.hello.groups);
    }
    // The screen is the size asked for, shot through the daemon's X11.
    let shot = conn
        .client
        .call_typed(&computerd::protocol::ScreenShotParams::default())
        .await
        .unwrap();
    assert_eq!((shot.screen_width, shot.screen_height), (1024, 768));
    assert_eq!(&shot.data.0[1..4], b"PNG");
    // The X server is one process of the daemon's table, the computer's user's.
    let r = run(
        &conn,
        "ps -o user=,args= -C Xvfb 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
    )
    .await;
    assert!(
        text(&r).contains("Xvfb :0 -screen 0 1024x768x24"),
        "{}",
        text(&r)
    );
    let listed = conn
        .client
        .call_typed(&computerd::protocol::ProcessListParams::default())
        .await
        .unwrap();
    let x = listed
        .processes
        .iter()
        .find(|p| p.argv.first().map(String::as_str) == Some("Xvfb") && p.running)
        .expect("Xvfb in the process table");
    // docker inspect holds the display in init's command, and a sandbox
    // provider refuses to attach a desktop, naming why.
    let i = e
        .docker
        .inspect_container(&c.id, None::<InspectContainerOptions>)
        .await
        .unwrap();
    let cmd = i.config.unwrap().cmd.unwrap();
    assert!(cmd.windows(2).any(|w| w == ["--display", ":0"]), "{cmd:?}");
    // Programs get DISPLAY, so a GUI program started from a shell finds it.
    let r = run(&conn, "printf %s \"$DISPLAY\"").await;
    assert_eq!(text(&r), ":0");
    let refused =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap_err();
    assert!(
        refused.message.contains("it is a desktop (display :0)"),
        "{}",
        refused.message
    );
    // Its X server gone, the desktop is refused at connect in words.
    conn.client
        .call_value(
            "process.signal",
            serde_json::json!({"id": x.id, "signal": "KILL"}),
        )
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let gone = loop {
        match p.connect(&c, &cancel).await {
            Err(e) => break e,
            Ok(_) if Instant::now() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(_) => panic!("a desktop whose X server was killed still connects"),
        }
    };
    assert!(
        gone.message.contains("the desktop's X server has gone"),
        "{}",
        gone.message
    );
    p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert!(!e.exists(&c.id).await);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_on_an_image_without_xvfb_is_refused_in_words_and_deleted() {
    let Some(e) = env("desktop-no-x").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // The plain Debian image has no X server.
    let p = desktop_provider(&e, &e.image, "1280x800");
    let mut spec = e.spec(600_000);
    spec.kind = computerd::protocol::SettingKind::Desktop;
    let err = p.create(&spec, &cancel).await.unwrap_err();
    assert!(
        err.message
            .contains("Xvfb :0 -screen 0 1280x800x24 -nolisten tcp")
            && err.message.contains("xvfb"),
        "{}",
        err.message
    );
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&HashMap::from([(
            "label",
            vec![format!("{TEST_LABEL}=desktop-no-x")],
        )]))
        .build();
    let left = e.docker.list_containers(Some(opts)).await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_browser_bounded_below_what_chromium_needs_names_the_bound_and_the_setting() {
    let Some(e) = env("browser-pids").await else {
        return;
    };
    let Some(image) = desktop_image(&e).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image));
    opts.browser = true;
    let p = DockerProvider::new(opts).unwrap();
    let mut spec = e.spec(600_000);
    spec.kind = computerd::protocol::SettingKind::Browser;
    spec.sizes.pids = Some(32);
    let made = p.create(&spec, &cancel).await.unwrap();
    assert_eq!(made.computer.sizes.map(|s| s.pids), Some(32));
    // Connect starts the browser, which cannot run in 32 tasks.
    let err = match p.connect(&made.computer, &cancel).await {
        Ok(_) => panic!("a browser started within 32 pids"),
        Err(err) => err,
    };
    assert!(
        err.message.contains(&format!(
            "the computer's browser did not start: the computer's pids bound (32 processes and threads) is too low for Chromium, which needs about {} of them with a page open: raise it with the server's --pids or COMPUTER_MCP_PIDS",
            computer_providers::cdp::chromium::NEEDS_PIDS
        )),
        "{}",
        err.message
    );
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    e.clean().await;
}
