//! Servers as replicas on Kubernetes: two `serve --http` processes over
//! one (fake) Kubernetes API serve one handle, because a computer lives
//! in its pod's labels and annotations, never in one server's memory.

use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_over_one_kubernetes_api_serve_one_handle() {
    let Some(env) = computer_testkit::docker_env().await else {
        return;
    };
    let owner = computer_testkit::marker("k8s-replicas");
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
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let r = loop {
        let r = ca
            .call("exec", json!({"argv": ["true"], "computer": h}))
            .await;
        if jerror(&r) || std::time::Instant::now() > until {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(jerror(&r), "{r}");
    let _ = sb.stop().await;
    let _ = sa.stop().await;
    assert_eq!(fake.pods(), Vec::<String>::new(), "a pod was left");
    assert_eq!(fake.policies(), Vec::<String>::new(), "a policy was left");
    fake.close().await;
    assert!(
        computer_testkit::labelled_containers(
            &env.docker,
            &format!("{}={owner}", computer_fakes::vendor_box::LABEL),
        )
        .await
        .is_empty(),
        "a box was left"
    );
}
