//! Servers as replicas on Kubernetes: two `serve --http` processes over
//! one (fake) Kubernetes API serve one handle, because a computer lives
//! in its pod's labels and annotations, never in one server's memory.

use serde_json::json;

use super::support::*;

/// A fake Kubernetes API whose pods are boxes of the test image carrying
/// the static computerd, and a server over it; `name` marks the boxes.
async fn over_a_fake(name: &str) -> Option<(Fake, Server)> {
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

struct Fake {
    fake: computer_fakes::kubernetes::FakeKubernetes,
    env: computer_testkit::DockerEnv,
    owner: String,
}

impl Fake {
    /// Nothing is left: no pod, no policy, no box.
    async fn close(self) {
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
