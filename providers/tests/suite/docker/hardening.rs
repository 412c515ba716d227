//! What a Docker computer cannot do: its hardening read back, its daemon's
//! socket out of its programs' reach, a fork bomb and a disk fill held by
//! its bounds, its connection direct or over the exec.

use computer_testkit::or_skip;
use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::InspectContainerOptions;
use computer_providers::{
    AttachBy, ErrorCode, Labels, NetworkKind, NetworkPolicy, Provider, Release, label,
};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

use super::{env, route, run, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_computer_is_made_hardened_reached_found_and_released() {
    let e = or_skip!(env("made").await);
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
        &conn.client,
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
    let r = run(
        &conn.client,
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
    )
    .await;
    assert_eq!(text(&r), "lo\n");
    // The host's bridge address is not reached: no route at all.
    let r = run(
        &conn.client,
        "bash -c 'exec 3<>/dev/tcp/172.17.0.1/2375' 2>&1; echo rc=$?",
    )
    .await;
    let out = text(&r);
    assert!(out.contains("rc=1") && out.contains("unreachable"), "{out}");
    // The daemon is read-only to the computer.
    let r = run(
        &conn.client,
        "echo x > /opt/computerd/computerd 2>&1; echo rc=$?",
    )
    .await;
    assert!(
        text(&r).contains("rc=1") || text(&r).contains("rc=2"),
        "{}",
        text(&r)
    );
    // The connection came the direct way, and the directory it came
    // through can be neither listed nor written from inside.
    assert_eq!(route(&conn, &direct_dir).await, "direct");
    let r = run(
        &conn.client,
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
        &conn.client,
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
    let e = or_skip!(env("direct").await);
    let cancel = CancellationToken::new();
    let c = e.sandbox(&cancel).await;
    let dir = e.cache.path().join("cache/direct").join(&c.id);
    let mode = |m: u32| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).unwrap();
    // The first connect takes the create's own connection, made direct.
    let made = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&made, &dir).await, "direct");
    made.client.close();
    // The computer's user may not reach into it: the bridge says so and
    // bridges the exec's stdio.
    mode(0o700);
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&conn, &dir).await, "exec, told");
    let r = run(&conn.client, "head -c 3000000 /dev/zero | wc -c").await;
    assert_eq!(text(&r).trim(), "3000000");
    conn.client.close();
    // Reachable again: direct again.
    mode(0o711);
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(route(&conn, &dir).await, "direct");
    let r = run(&conn.client, "head -c 3000000 /dev/zero | wc -c").await;
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
    let e = or_skip!(env("own-socket").await);
    let cancel = CancellationToken::new();
    let made = e.p.create(&e.spec(600_000), &cancel).await.unwrap();
    let conn = e.p.connect(&made.computer, &cancel).await.unwrap();
    let r = run(
        &conn.client,
        r#"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"deadline.extend","params":{"at":"2100-01-01T00:00:00Z"}}' | /opt/computerd/computerd stdio"#,
    )
    .await;
    let reply: serde_json::Value = serde_json::from_str(text(&r).trim()).unwrap();
    assert_eq!(reply["error"]["data"]["kind"], "denied", "{reply}");
    assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
    // The provider's connection goes on.
    assert_eq!(text(&run(&conn.client, "echo still").await), "still\n");
    conn.client.close();
    e.p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stays_within_the_pids_limit_and_the_daemon_keeps_answering() {
    let e = or_skip!(env("forkbomb").await);
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
    let r = run(&conn.client, "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids.events").await;
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
    let r = run(&conn.client, "echo still here").await;
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
    let e = or_skip!(env("disk").await);
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
    assert_eq!(
        text(&run(&conn.client, "echo still here").await),
        "still here\n"
    );
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
