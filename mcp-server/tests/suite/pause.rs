//! computer_pause and computer_resume as a model calls them, on local (the
//! cgroup freezer) and Docker (docker pause): a counter stops while its
//! computer is paused and goes on after; calls on a paused computer are
//! refused in words; a paused computer is released like any other.

use std::time::Duration;

use serde_json::json;

use super::support::{HttpServer, Server, Stateless, TOKEN, jerror, jtext, or_skip};

async fn count(c: &Stateless) -> u64 {
    let r = c
        .call(
            "exec",
            json!({"command": "cat ~/count", "computer": "counter"}),
        )
        .await;
    let out = r["structuredContent"]["stdout"].as_str().unwrap_or("");
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no count: {r}"))
}

async fn pause_and_resume(server: Server) {
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("counter").await;
    let r = c
        .call(
            "process_start",
            json!({"command": "i=0; while :; do i=$((i+1)); echo $i > ~/count; sleep 0.05; done", "computer": "counter"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = count(&c).await;

    let r = c
        .call("computer_pause", json!({"computer": "counter"}))
        .await;
    assert!(!jerror(&r), "{r}");
    assert!(jtext(&r).starts_with("paused counter"), "{r}");
    let r = c
        .call("exec", json!({"argv": ["true"], "computer": "counter"}))
        .await;
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains("is paused (computer_pause); computer_resume it first"),
        "{r}"
    );
    let r = c
        .call("computer_pause", json!({"computer": "counter"}))
        .await;
    assert!(jtext(&r).contains("is paused already"), "{r}");
    // A second of pause: unpaused, the counter would gain about 20.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = c
        .call("computer_resume", json!({"computer": "counter"}))
        .await;
    assert!(!jerror(&r), "{r}");
    let after = count(&c).await;
    assert!(
        after >= before && after - before <= 6,
        "the counter went from {before} to {after} across a second of pause"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = count(&c).await;
    assert!(
        later >= after + 4,
        "the counter did not go on after resume: {after} then {later}"
    );
    let r = c
        .call("computer_resume", json!({"computer": "counter"}))
        .await;
    assert!(jtext(&r).contains("is not paused"), "{r}");

    // Paused, then released: it ends like any other.
    c.call("computer_pause", json!({"computer": "counter"}))
        .await;
    let r = c
        .call("computer_release", json!({"computer": "counter"}))
        .await;
    assert!(!jerror(&r), "{r}");
    let (server, _) = s.stop().await;
    assert!(server.computers().is_empty(), "{:?}", server.computers());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_local_computer_stops_its_programs_until_resumed() {
    pause_and_resume(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_docker_computer_stops_its_programs_until_resumed() {
    pause_and_resume(or_skip!(Server::docker())).await;
}
