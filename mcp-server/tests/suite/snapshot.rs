//! computer_snapshot and computer_new {from} as a model calls them, on
//! local, Docker, E2B, Modal and Kubernetes (their fakes; E2B keeps its own
//! snapshots, the server a record of each; the server keeps the others'
//! in its state directory): a snapshot keeps /work as it was when taken; two forks
//! of it start with its files and see only their own changes; a taken name
//! is refused naming `name`; another caller's snapshot reads as one that
//! never existed; a second server over the same provider storage (a
//! restart) finds and forks it; `computers list` shows it with its size,
//! `sweep` deletes one past its deadline and `computers release` another.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::support::{
    Backend, HttpServer, SERVER, Server, Stateless, TOKEN, jerror, jtext, or_skip,
};

const OTHER: &str = "other-token-0123456789abcdef";

async fn sh(c: &Stateless, computer: &str, command: &str) -> String {
    let r = c
        .call("exec", json!({"command": command, "computer": computer}))
        .await;
    assert!(!jerror(&r), "{r}");
    r["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn fork(c: &Stateless, name: &str, from: &str) -> Value {
    c.call("computer_new", json!({"name": name, "from": from}))
        .await
}

/// `computer-mcp <words> <the server's flags>`, its stdout and stderr; the
/// command must succeed.
fn run(server: &Server, words: &[&str]) -> String {
    let out = std::process::Command::new(SERVER)
        .args(words)
        .args(server.args())
        .output()
        .unwrap();
    assert!(out.status.success(), "{words:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn store_of(server: &Server) -> PathBuf {
    match server.provider() {
        "docker" => server.state_dir.join("cache").join("snapshots"),
        "local" => server.state_dir.join("snapshots"),
        // Kept by the server, under its --state-dir.
        other => server
            .state_dir
            .join("server")
            .join("snapshots")
            .join(other),
    }
}

/// A fake E2B whose sandboxes are boxes of the test image, and a server
/// over it; `name` marks the boxes.
pub(super) async fn over_a_fake_e2b(
    name: &str,
) -> Option<(
    computer_fakes::e2b::FakeE2b,
    computer_testkit::DockerEnv,
    Server,
)> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let key = format!(
        "e2b-key-{}",
        computer_providers::random::random_hex(8).unwrap()
    );
    let fake = computer_fakes::e2b::FakeE2b::start(&env.docker, &env.image, &key, &owner)
        .await
        .unwrap();
    let url = fake.url().to_string();
    let server = vendor_server(
        "e2b",
        &[
            ("--e2b-api-url", &url),
            ("--e2b-envd-url", &url),
            ("--e2b-api-key", &key),
            ("--e2b-computerd", env.computerd.to_str().unwrap()),
        ],
    );
    Some((fake, env, server))
}

/// A server on vendor `id` with `flags`.
fn vendor_server(id: &'static str, flags: &[(&str, &str)]) -> Server {
    let mut server = Server::new();
    server.backend = Backend::Vendor {
        id,
        flags: flags
            .iter()
            .flat_map(|(k, v)| [k.to_string(), v.to_string()])
            .collect(),
    };
    server
}

/// A fake Modal whose sandboxes are boxes of the test image, and a server
/// over it; `name` marks the boxes.
async fn over_a_fake_modal(name: &str) -> Option<(computer_fakes::modal::FakeModal, Server)> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let (id, secret) = ("ak-snap-token-id", "as-snap-token-secret");
    let fake = computer_fakes::modal::FakeModal::start(&env.docker, &env.image, id, secret, &owner)
        .await
        .unwrap();
    let server = vendor_server(
        "modal",
        &[
            ("--modal-server-url", fake.url()),
            ("--modal-insecure-plaintext-for-tests", "true"),
            ("--modal-token-id", id),
            ("--modal-token-secret", secret),
            ("--modal-computerd", env.computerd.to_str().unwrap()),
        ],
    );
    Some((fake, server))
}

/// `native`: the vendor keeps the snapshot (its size is not known here).
async fn snapshot_and_fork(server: Server, native: bool) {
    let a = HttpServer::start_on(server, &[], &[TOKEN, OTHER]).await;
    let c = a.stateless(TOKEN);
    c.computer_new("base").await;
    sh(
        &c,
        "base",
        "mkdir -p ~/proj && echo v1 > ~/proj/file && echo kept > ~/keep && ln -s proj/file ~/link",
    )
    .await;

    let r = c
        .call(
            "computer_snapshot",
            json!({"computer": "base", "name": "s1"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let s1 = r["structuredContent"].clone();
    let handle = s1["handle"].as_str().unwrap().to_string();
    assert!(handle.starts_with("s-") && handle.len() == 34, "{s1}");
    assert_eq!(s1["name"], "s1");
    assert_eq!(s1["kind"], "sandbox");
    let words = jtext(&r);
    if native {
        // The vendor keeps more than /work and gives no size: said so.
        assert!(s1.get("size_bytes").is_none(), "{s1}");
        let keeps = s1["keeps"].as_str().unwrap();
        assert!(keeps.contains("whole"), "{s1}");
        assert!(
            words.starts_with(&format!(
                "kept {keeps} of base as snapshot s1 ({handle}), until "
            )),
            "{words}"
        );
        assert!(!words.contains("bytes"), "{words}");
    } else {
        assert!(s1["size_bytes"].as_u64().unwrap() >= 3 * 512, "{s1}");
        let path = s1["path"].as_str().unwrap();
        assert_eq!(s1["keeps"], format!("the files of {path}"), "{s1}");
        assert!(
            words.starts_with(&format!(
                "kept the files of {path} of base as snapshot s1 ({handle}), {} bytes, until ",
                s1["size_bytes"]
            )),
            "{words}"
        );
    }

    // A taken name is refused, naming the argument.
    let r = c
        .call(
            "computer_snapshot",
            json!({"computer": "base", "name": "s1"}),
        )
        .await;
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains("name \"s1\" is taken by your snapshot"),
        "{r}"
    );
    // Changed after the snapshot: no fork sees it.
    sh(&c, "base", "echo v2 > ~/proj/file").await;

    let r = fork(&c, "f1", "s1").await;
    assert!(!jerror(&r), "{r}");
    let r = fork(&c, "f2", &handle).await;
    assert!(!jerror(&r), "{r}");
    for f in ["f1", "f2"] {
        assert_eq!(
            sh(&c, f, "cat ~/proj/file ~/keep ~/link; readlink ~/link").await,
            "v1\nkept\nv1\nproj/file\n",
            "{f}"
        );
        sh(
            &c,
            f,
            &format!("echo {f} > ~/proj/file && touch ~/only-{f}"),
        )
        .await;
    }
    for (f, other) in [("f1", "f2"), ("f2", "f1")] {
        assert_eq!(
            sh(
                &c,
                f,
                &format!(
                    "cat ~/proj/file; ls ~ | tr '\\n' ' '; test -e ~/only-{other} || echo own"
                )
            )
            .await,
            format!("{f}\nkeep link only-{f} proj own\n")
        );
    }

    // Another caller: s1 reads exactly as a snapshot that never existed.
    let o = a.stateless(OTHER);
    let never = fork(&o, "x", "never-made").await;
    assert!(jerror(&never), "{never}");
    assert!(
        jtext(&never).contains("you have no snapshot \"never-made\""),
        "{never}"
    );
    for from in ["s1", handle.as_str()] {
        let r = fork(&o, "x", from).await;
        assert!(jerror(&r), "{r}");
        assert_eq!(
            jtext(&r),
            jtext(&never).replace("never-made", from),
            "another caller's snapshot reads differently from none"
        );
    }
    for name in ["f1", "f2", "base"] {
        let r = c.call("computer_release", json!({"computer": name})).await;
        assert!(!jerror(&r), "{r}");
    }
    let (server, _) = a.stop().await;
    assert!(server.computers().is_empty(), "{:?}", server.computers());

    // A restart: another server over the same storage finds and forks it;
    // it keeps its snapshots for 2 s only.
    let b = HttpServer::start_on(
        Server::replica_of(&server),
        &["--snapshot-ttl", "2s"],
        &[TOKEN],
    )
    .await;
    let c = b.stateless(TOKEN);
    let r = fork(&c, "f3", "s1").await;
    assert!(!jerror(&r), "{r}");
    assert_eq!(sh(&c, "f3", "cat ~/proj/file").await, "v1\n");
    let r = c
        .call(
            "computer_snapshot",
            json!({"computer": "f3", "name": "brief"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let brief = r["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.call("computer_release", json!({"computer": "f3"})).await;
    assert!(!jerror(&r), "{r}");
    b.stop_leaving_none().await;

    // From a terminal: both listed with their sizes.
    let listing = run(&server, &["computers", "list"]);
    let line = listing
        .lines()
        .find(|l| l.starts_with(&handle))
        .unwrap_or_else(|| panic!("{listing}"));
    let size = match s1.get("size_bytes") {
        Some(b) => format!(" {b} "),
        None => " - ".to_string(),
    };
    assert!(line.contains(" s1 ") && line.contains(&size), "{line}");
    assert!(listing.contains(&brief), "{listing}");
    // The janitor: past its 2 s, brief is deleted; s1 (24 h) is kept.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let swept = run(&server, &["sweep"]);
    assert!(swept.contains(&format!("released {brief}")), "{swept}");
    assert!(!swept.contains(&handle), "{swept}");
    let listing = run(&server, &["computers", "list"]);
    assert!(
        !listing.contains(&brief) && listing.contains(&handle),
        "{listing}"
    );
    let released = run(&server, &["computers", "release", "s1"]);
    assert!(
        released.contains(&format!("released snapshot {handle}")),
        "{released}"
    );
    let left: Vec<_> = std::fs::read_dir(store_of(&server))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The daemon's paths in a vendor's sandbox (providers' `child`).
const INIT_PID: &str = "/run/computer-mcp-init.pid";
const SOCKET: &str = "/run/computerd/computerd.sock";
const DAEMON: &str = "/opt/computer-mcp/computerd";

/// `script` as root in `b`; its stdout, which must be a success.
async fn as_root(b: &computer_fakes::vendor_box::VendorBox, script: &str) -> String {
    let cmd = computer_fakes::vendor_box::Cmd::new(&["/bin/sh", "-c", script]);
    let ran = b.run(&cmd, None, Duration::from_secs(30)).await.unwrap();
    let out = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert_eq!(
        ran.code,
        0,
        "{script}: {out} {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    out
}

/// A vendor's snapshot that holds a live-looking captured init: the pid
/// file names pid 1 (alive in every sandbox: its main process) and a file
/// sits at the socket's path. The fork's own init starts, its exec works,
/// its pid file and socket are its own, and pid 1 was not ended (the
/// captured pid is ended only when it is the daemon). `alive` lists the
/// vendor's live sandboxes and `box_of` gives one's box.
async fn a_planted_init_is_cleared_in_the_fork(
    server: Server,
    alive: impl Fn() -> Vec<String>,
    box_of: impl Fn(&str) -> Option<std::sync::Arc<computer_fakes::vendor_box::VendorBox>>,
) {
    let a = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = a.stateless(TOKEN);
    c.computer_new("base").await;
    sh(&c, "base", "echo parent > ~/mark").await;
    let parent = alive();
    assert_eq!(parent.len(), 1, "{parent:?}");
    let pb = box_of(&parent[0]).unwrap();
    as_root(
        &pb,
        &format!("printf 1 > {INIT_PID} && rm -f {SOCKET} && printf planted > {SOCKET}"),
    )
    .await;
    let r = c
        .call(
            "computer_snapshot",
            json!({"computer": "base", "name": "planted"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let r = fork(&c, "f1", "planted").await;
    assert!(!jerror(&r), "{r}");
    let forks: Vec<String> = alive().into_iter().filter(|i| *i != parent[0]).collect();
    assert_eq!(forks.len(), 1, "{forks:?}");
    let fb = box_of(&forks[0]).unwrap();
    let seen = as_root(
        &fb,
        &format!(
            "p=$(cat {INIT_PID}); echo $p; tr '\\0' '\\n' < /proc/$p/cmdline | head -n 1; test -S {SOCKET} && echo socket; \
             kill -0 1 && echo one-alive"
        ),
    )
    .await;
    let lines: Vec<&str> = seen.lines().collect();
    assert_ne!(lines[0], "1", "{seen}");
    assert_eq!(lines[1..], [DAEMON, "socket", "one-alive"], "{seen}");
    // The fork's own daemon answers, with the snapshot's files.
    assert_eq!(sh(&c, "f1", "cat ~/mark").await, "parent\n");
    for name in ["f1", "base"] {
        let r = c.call("computer_release", json!({"computer": name})).await;
        assert!(!jerror(&r), "{r}");
    }
    let (server, _) = a.stop().await;
    let released = run(&server, &["computers", "release", "planted"]);
    assert!(released.contains("released snapshot s-"), "{released}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_a_planted_captured_init_is_cleared_in_the_fork() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let Some((fake, _env, server)) = over_a_fake_e2b("e2b-plant").await else {
        return;
    };
    a_planted_init_is_cleared_in_the_fork(server, || fake.alive(), |i| fake.box_of(i)).await;
    fake.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modal_a_planted_captured_init_is_cleared_in_the_fork() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let Some((fake, server)) = over_a_fake_modal("modal-plant").await else {
        return;
    };
    a_planted_init_is_cleared_in_the_fork(server, || fake.running(), |i| fake.box_of(i)).await;
    fake.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_snapshots_fork_apart_outlive_the_server_and_are_swept() {
    snapshot_and_fork(or_skip!(Server::local()), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_snapshots_fork_apart_outlive_the_server_and_are_swept() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    snapshot_and_fork(or_skip!(Server::docker()), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_snapshots_fork_apart_outlive_the_server_and_are_swept() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let Some((fake, _env, server)) = over_a_fake_e2b("e2b-snap").await else {
        return;
    };
    snapshot_and_fork(server, true).await;
    assert_eq!(fake.sandboxes(), Vec::<String>::new(), "a sandbox was left");
    // E2B's own snapshots were taken and deleted: s1 and brief, each once
    // (brief by the sweep, s1 by computers release); none is left.
    let calls = fake.snapshot_calls();
    let (posts, deletes): (Vec<_>, Vec<_>) = calls
        .iter()
        .partition(|c| c.starts_with("POST /sandboxes/"));
    assert_eq!(posts.len(), 2, "{calls:?}");
    assert!(
        deletes.len() == 2 && deletes.iter().all(|d| d.starts_with("DELETE /templates/")),
        "{calls:?}"
    );
    assert_eq!(fake.snapshot_ids(), Vec::<String>::new(), "{calls:?}");
    fake.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_snapshots_fork_apart_outlive_the_server_and_are_swept() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let Some((fake, server)) = super::kubernetes::over_a_fake("k8s-snap").await else {
        return;
    };
    snapshot_and_fork(server, false).await;
    fake.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modal_snapshots_fork_apart_outlive_the_server_and_are_swept() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let Some((fake, server)) = over_a_fake_modal("modal-snap").await else {
        return;
    };
    snapshot_and_fork(server, true).await;
    assert_eq!(fake.running(), Vec::<String>::new(), "a sandbox was left");
    // Modal's own filesystem snapshots: s1 and brief taken, three sandboxes
    // made from s1's image (f1, f2, f3), and both images deleted (brief by
    // the sweep, s1 by computers release); none is left.
    let calls = fake.snapshot_calls();
    let count = |p: &str| calls.iter().filter(|c| c.starts_with(p)).count();
    assert_eq!(count("TaskSnapshotFilesystem "), 2, "{calls:?}");
    assert_eq!(count("SandboxCreate im-"), 3, "{calls:?}");
    assert_eq!(count("ImageDelete im-"), 2, "{calls:?}");
    assert_eq!(fake.snapshot_images(), Vec::<String>::new(), "{calls:?}");
    fake.close().await;
}
