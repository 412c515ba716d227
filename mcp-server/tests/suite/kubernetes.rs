//! Servers as replicas on Kubernetes: two `serve --http` processes over
//! one (fake) Kubernetes API serve one handle, because a computer lives
//! in its pod's labels and annotations, never in one server's memory.

use serde_json::json;

use super::support::*;

/// A fake Kubernetes API whose pods are boxes of the test image carrying
/// the static computerd, and a server over it; `name` marks the boxes.
pub(super) async fn over_a_fake(name: &str) -> Option<(Fake, Server)> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let fake = computer_fakes::kubernetes::FakeKubernetes::start(
        &env.docker,
        &env.image,
        "k8s-replicas-token-7c2a",
        &owner,
    )
    .await
    .unwrap();
    fake.carry("/opt/computerd/computerd", env.computerd.clone());
    let mut a = Server::new();
    let kubeconfig = a.state_dir.join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig("replicas")).unwrap();
    a.backend = Backend::Kubernetes {
        kubeconfig,
        image: env.image.clone(),
    };
    Some((Fake { fake, env, owner }, a))
}

pub(super) struct Fake {
    fake: computer_fakes::kubernetes::FakeKubernetes,
    env: computer_testkit::DockerEnv,
    owner: String,
}

impl Fake {
    /// Nothing is left: no pod, no policy, no box.
    pub(super) async fn close(self) {
        self.fake.assert_nothing_left();
        self.fake.close().await;
        assert!(
            computer_testkit::labelled_containers(
                &self.env.docker,
                &format!("{}={}", computer_fakes::vendor_box::LABEL, self.owner),
            )
            .await
            .is_empty(),
            "a box was left"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_over_one_kubernetes_api_serve_one_handle() {
    let Some((fake, a)) = over_a_fake("k8s-replicas").await else {
        return;
    };
    let b = Server::replica_of(&a);
    let sa = HttpServer::start_on(a, &[], &[TOKEN]).await;
    let sb = HttpServer::start_on(b, &[], &[TOKEN]).await;
    let (ca, cb) = (sa.stateless(TOKEN), sb.stateless(TOKEN));

    let h = ca.computer_new("shared").await;
    let w = ca
        .call(
            "write_file",
            json!({"path": "/work/f", "content": "from-a\n", "computer": h}),
        )
        .await;
    assert!(!jerror(&w), "{w}");
    let r = cb
        .call("read_file", json!({"path": "/work/f", "computer": h}))
        .await;
    assert!(!jerror(&r), "{r}");
    assert_eq!(jhandle(&r), h);
    assert!(r.to_string().contains("from-a"), "{r}");
    // By its name too, and released through B it is gone for A.
    let r = cb
        .call(
            "read_file",
            json!({"path": "/work/f", "computer": "shared"}),
        )
        .await;
    assert_eq!(jhandle(&r), h);
    cb.call("computer_release", json!({"computer": h})).await;
    // The release answers before the provider is done (its pod's delete
    // runs on); A finds the computer gone soon after.
    ca.gone_soon(&h).await;
    let _ = sb.stop().await;
    let _ = sa.stop().await;
    fake.close().await;
}

/// A server with `--keep` leaves its computers at its end; restarted on
/// the same state, it reaches them again by handle and by name, since a
/// computer lives in its pod's labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_pod_is_reached_again_after_a_restart() {
    let Some((fake, server)) = over_a_fake("k8s-keep").await else {
        return;
    };
    let s = HttpServer::start_on(server, &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let h = c.computer_new("keeper").await;
    let w = c
        .call(
            "write_file",
            json!({"path": "/work/note", "content": "still-here\n", "computer": h}),
        )
        .await;
    assert!(!jerror(&w), "{w}");
    let (server, _) = s.stop().await;
    assert_eq!(fake.fake.pods().len(), 1, "kept at the server's end");

    let s = HttpServer::start_on(server, &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    for by in [h.as_str(), "keeper"] {
        let r = c
            .call("read_file", json!({"path": "/work/note", "computer": by}))
            .await;
        assert!(!jerror(&r), "{r}");
        assert_eq!(jhandle(&r), h);
        assert!(r.to_string().contains("still-here"), "{r}");
    }
    let r = c.call("computer_release", json!({"computer": h})).await;
    assert!(!jerror(&r), "{r}");
    // Its pod's delete runs on after the answer; the server waits for it
    // at its stop.
    let _ = s.stop().await;
    fake.close().await;
}

/// `computer-mcp cp` as a user runs it beside the server.
fn cp(server: &Server, args: &[&str]) -> std::process::Output {
    std::process::Command::new(SERVER)
        .arg("cp")
        .args(args)
        .args(server.args())
        .output()
        .unwrap()
}

/// Every file under `root` (outside a copy-back's own folders) and its
/// bytes.
fn files(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A pod sees no host folder, so `--share` is a copy: in at creation
/// (the bytes really cross the pod's exec stream), a read-write one back
/// by `cp --sync` and at release, a `:ro` one never; a copy-back refused
/// for its bound leaves the folder as it was and says why; a file deleted
/// in the pod is kept here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_folder_is_copied_into_a_pod_and_a_read_write_one_back() {
    let Some((fake, server)) = over_a_fake("k8s-share").await else {
        return;
    };
    copied_share(server).await;
    fake.close().await;
}

/// The same on E2B (its fake's sandboxes): the copy crosses envd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_folder_is_copied_into_an_e2b_sandbox_and_a_read_write_one_back() {
    let _shared = DOCKER_ENGINE.read().await;
    let Some((fake, _env, server)) = super::snapshot::over_a_fake_e2b("e2b-share").await else {
        return;
    };
    copied_share(server).await;
    assert_eq!(fake.sandboxes(), Vec::<String>::new(), "a sandbox was left");
    fake.close().await;
}

/// A computer of `server` (a provider that copies shares) with a
/// read-write and a `:ro` share: copied in, counted as bytes pushed,
/// copied back by `cp --sync` and at release, whose answer says so.
async fn copied_share(server: Server) {
    let top = tempfile::tempdir().unwrap();
    let (rw, ro) = (top.path().join("proj"), top.path().join("refs"));
    std::fs::create_dir_all(rw.join("src")).unwrap();
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(rw.join("src/in.txt"), "from the host\n").unwrap();
    std::fs::write(rw.join("gone.txt"), "deleted in the pod\n").unwrap();
    std::fs::write(ro.join("ref.txt"), "read only\n").unwrap();
    let shares = [
        "--share".to_string(),
        rw.display().to_string(),
        "--share".to_string(),
        format!("{}:ro", ro.display()),
    ];
    let extra: Vec<&str> = shares.iter().map(String::as_str).collect();
    let s = HttpServer::start_on(server, &extra, &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let h = c.computer_new("shared").await;
    // Changed here after the copy, and in the pod too below.
    std::fs::write(rw.join("both.txt"), "edited here\n").unwrap();
    // The copy-in is the receipt's bytes pushed: two folders' archives.
    let r = c.call("computer_info", json!({"computer": h})).await;
    assert!(!jerror(&r), "{r}");
    let pushed = r["structuredContent"]["receipt"]["bytes_pushed"].as_u64();
    assert!(pushed.is_some_and(|b| b >= 2 * 1024), "{r}");

    // Copied in: both folders are there, under /workspace/<name>.
    for (path, want) in [
        ("/workspace/proj/src/in.txt", "from the host"),
        ("/workspace/refs/ref.txt", "read only"),
    ] {
        let r = c
            .call("read_file", json!({"path": path, "computer": h}))
            .await;
        assert!(!jerror(&r), "{r}");
        assert!(r.to_string().contains(want), "{path}: {r}");
    }
    let run = |command: &str| c.call("exec", json!({"command": command, "computer": h}));
    let r = run("echo made in the pod > /workspace/proj/out.txt && echo changed > /workspace/proj/src/in.txt && echo edited in the pod > /workspace/proj/both.txt && echo never > /workspace/refs/ref.txt && rm /workspace/proj/gone.txt").await;
    assert!(!jerror(&r), "{r}");

    // cp --sync: the read-write share comes back, the read-only one not;
    // nothing here is lost: a file deleted in the pod is kept, one
    // changed on both sides is kept aside before it is replaced.
    let out = cp(&s.server, &["--sync", &h]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("deleted in the computer and kept here (gone.txt)"),
        "{said}"
    );
    assert!(
        said.contains("1 changed here since the computer was made and replaced"),
        "{said}"
    );
    let mut got = files(&rw);
    let aside = got.remove(0);
    assert!(
        aside.0.starts_with(".computer-mcp-replaced-") && aside.0.ends_with("/both.txt"),
        "{aside:?}"
    );
    assert_eq!(aside.1, "edited here\n");
    assert_eq!(
        got,
        vec![
            ("both.txt".into(), "edited in the pod\n".into()),
            ("gone.txt".into(), "deleted in the pod\n".into()),
            ("out.txt".into(), "made in the pod\n".into()),
            ("src/in.txt".into(), "changed\n".into()),
        ]
    );
    assert_eq!(files(&ro), vec![("ref.txt".into(), "read only\n".into())]);

    // Refused for its bound: the folder is exactly as it was.
    let r = run("head -c 5000 /dev/zero > /workspace/proj/big.bin").await;
    assert!(!jerror(&r), "{r}");
    let before = files(&rw);
    let out = cp(&s.server, &["--sync", &h, "--max-bytes", "4096"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("was not copied back and is as it was")
            && said.contains("over 4096 bytes, the most allowed (--max-bytes)"),
        "{said}"
    );
    assert_eq!(files(&rw), before);
    assert_eq!(
        std::fs::read_dir(&rw).unwrap().count(),
        5,
        "nothing left behind"
    );

    // At release: what the pod wrote since comes back.
    let r = run("rm /workspace/proj/big.bin && echo at release > /workspace/proj/last.txt").await;
    assert!(!jerror(&r), "{r}");
    let r = c.call("computer_release", json!({"computer": h})).await;
    assert!(!jerror(&r), "{r}");
    // Its answer says what came back, the copy-back done before it.
    assert_eq!(
        std::fs::read_to_string(rw.join("last.txt")).unwrap(),
        "at release\n"
    );
    let back = &r["structuredContent"]["copied_back"];
    assert_eq!(back["done"], true, "{r}");
    let words = back["words"].as_str().unwrap();
    assert!(
        words.contains(&format!("copied /workspace/proj back to {}", rw.display()))
            && words.contains(" files, ")
            && words.contains("written"),
        "{words}"
    );
    assert!(
        jtext(&r).contains("after the copy-back of its read-write shares"),
        "{r}"
    );

    // A copy-back refused at release (a link out of the folder): the
    // answer says so and why, the folder is as it was, and the computer is
    // kept; `computers release` keeps it too, unless told to discard.
    let before = files(&rw);
    let h2 = c.computer_new("second").await;
    let r = c
        .call(
            "exec",
            json!({"command": "ln -s /etc /workspace/proj/escape", "computer": h2}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let r = c.call("computer_release", json!({"computer": h2})).await;
    assert!(!jerror(&r), "{r}");
    let back = &r["structuredContent"]["copied_back"];
    assert_eq!(back["done"], false, "{r}");
    assert!(
        back["words"]
            .as_str()
            .unwrap()
            .contains("points outside the copy"),
        "{r}"
    );
    assert!(jtext(&r).contains("were NOT copied back"), "{r}");
    assert!(jtext(&r).contains(&format!("cp --sync {h2}")), "{r}");
    assert_eq!(files(&rw), before);
    let release = |extra: &[&str]| {
        std::process::Command::new(SERVER)
            .args(["computers", "release"])
            .args(extra)
            .arg(&h2)
            .args(s.server.args())
            .output()
            .unwrap()
    };
    let out = release(&[]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && said.contains("was not released, so its work is not lost"),
        "{said}"
    );
    let out = release(&["--discard-shares"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(files(&rw), before);
    let _ = s.stop().await;
    assert_eq!(files(&ro), vec![("ref.txt".into(), "read only\n".into())]);
}
