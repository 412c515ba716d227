//! computer_pause and computer_resume as a model calls them, on local (the
//! cgroup freezer) and Docker (docker pause): a counter stops while its
//! computer is paused and goes on after; calls on a paused computer are
//! refused in words; a paused computer is released like any other; a pause
//! outlives the server that made it (another server over the same provider
//! finds it paused, says so at once, and resumes it). `computer-mcp cp`
//! (and `cp --sync`) from a terminal says a computer is paused at once, too.

use std::time::Duration;

use serde_json::json;

use super::support::{HttpServer, SERVER, Server, Stateless, TOKEN, jerror, jtext, or_skip};

async fn count(c: &Stateless, name: &str) -> u64 {
    let r = c
        .call("exec", json!({"command": "cat ~/count", "computer": name}))
        .await;
    let out = r["structuredContent"]["stdout"].as_str().unwrap_or("");
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no count: {r}"))
}

/// The counter's loop, started in the computer `name`. Each count is
/// written aside and renamed into place, so a read never finds the file
/// emptied by `>` before the number is in it.
async fn start_counter(c: &Stateless, name: &str) {
    let r = c
        .call(
            "process_start",
            json!({"command": "i=0; while :; do i=$((i+1)); echo $i > ~/count.new; mv ~/count.new ~/count; sleep 0.05; done", "computer": name}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// The counter went on from `before` by a few counts at most across a
/// second of pause, and goes on after the resume.
async fn assert_held_then_going(c: &Stateless, name: &str, before: u64) {
    let after = count(c, name).await;
    assert!(
        after >= before && after - before <= 6,
        "the counter went from {before} to {after} across a second of pause"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = count(c, name).await;
    assert!(
        later >= after + 4,
        "the counter did not go on after resume: {after} then {later}"
    );
}

async fn pause_and_resume(server: Server) {
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("counter").await;
    start_counter(&c, "counter").await;
    let before = count(&c, "counter").await;

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
    // From a terminal, `cp` (and `cp --sync`, before anything else is
    // asked of it) says so at once rather than waiting out a hello the
    // stopped daemon cannot answer.
    let here = tempfile::tempdir().unwrap();
    let to = here.path().join("count").display().to_string();
    for words in [
        vec!["cp", "counter:/work/count", &to],
        vec!["cp", "--sync", "counter"],
    ] {
        let out = std::process::Command::new(SERVER)
            .args(&words)
            .args(s.server.args())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && said.contains("is paused (computer_pause); computer_resume it first"),
            "{words:?}: {said}"
        );
    }
    // A second of pause: unpaused, the counter would gain about 20.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let r = c
        .call("computer_resume", json!({"computer": "counter"}))
        .await;
    assert!(!jerror(&r), "{r}");
    assert_held_then_going(&c, "counter", before).await;
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
    s.stop_leaving_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_local_computer_stops_its_programs_until_resumed() {
    pause_and_resume(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_docker_computer_stops_its_programs_until_resumed() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    pause_and_resume(or_skip!(Server::docker())).await;
}

/// Paused through server A, the computer is found paused by server B over
/// the same provider (as by A itself after a restart): B refuses a call on
/// it in words rather than waiting on its stopped daemon, and B's
/// computer_resume resumes it and serves it from then on.
async fn a_pause_outlives_the_server_that_made_it(server: Server) {
    let a = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let b = HttpServer::start_on(Server::replica_of(&a.server), &[], &[TOKEN]).await;
    let (ca, cb) = (a.stateless(TOKEN), b.stateless(TOKEN));
    ca.computer_new("kept").await;
    start_counter(&ca, "kept").await;
    let before = count(&ca, "kept").await;
    let r = ca.call("computer_pause", json!({"computer": "kept"})).await;
    assert!(!jerror(&r), "{r}");

    // The bound is the test's guard against a hang, not a measure.
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        cb.call("exec", json!({"argv": ["true"], "computer": "kept"})),
    )
    .await
    .expect("server B waited on the paused computer's daemon");
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains("kept (c-")
            && jtext(&r).contains("is paused (computer_pause); computer_resume it first"),
        "{r}"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = cb
        .call("computer_resume", json!({"computer": "kept"}))
        .await;
    assert!(!jerror(&r), "{r}");
    assert_held_then_going(&cb, "kept", before).await;

    let r = cb
        .call("computer_release", json!({"computer": "kept"}))
        .await;
    assert!(!jerror(&r), "{r}");
    b.stop_leaving_none().await;
    a.stop_leaving_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_pause_outlives_the_server_that_made_it() {
    a_pause_outlives_the_server_that_made_it(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_pause_outlives_the_server_that_made_it() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    a_pause_outlives_the_server_that_made_it(or_skip!(Server::docker())).await;
}
