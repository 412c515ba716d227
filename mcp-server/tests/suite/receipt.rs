//! A computer's receipt as a model reads it in computer_info, on local (the
//! computer's cgroup) and Docker (the engine's stats): the CPU seconds of a
//! busy loop, the peak memory of a large buffer, the tool calls counted.

use serde_json::{Value, json};

use super::support::{HttpServer, Server, Stateless, TOKEN, jerror, jtext, or_skip};

const MIB: u64 = 1024 * 1024;

async fn receipt(c: &Stateless) -> Value {
    receipt_of(c, "metered").await
}

async fn receipt_of(c: &Stateless, name: &str) -> Value {
    let r = c.call("computer_info", json!({"computer": name})).await;
    assert!(!jerror(&r), "{r}");
    assert!(jtext(&r).contains("\nused: "), "{r}");
    r["structuredContent"]["receipt"].clone()
}

async fn exec_ok(c: &Stateless, command: &str) {
    let r = c
        .call(
            "exec",
            json!({"command": command, "computer": "metered", "timeout_ms": 60_000}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    assert_eq!(r["structuredContent"]["exit_code"], 0, "{r}");
}

async fn metered(server: Server) {
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("metered").await;
    let first = receipt(&c).await;
    assert_eq!(first["tool_calls"], 1, "{first}");

    // A busy loop until it has had two CPU seconds (however busy the
    // host is).
    exec_ok(
        &c,
        "python3 -c 'import time\nwhile time.process_time() < 2: pass'",
    )
    .await;
    let busy = receipt(&c).await;
    let cpu = busy["cpu_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("{busy}"));
    assert!(
        cpu >= 1.5,
        "a 2-second busy loop used {cpu} CPU seconds: {busy}"
    );
    assert_eq!(busy["tool_calls"], 3, "{busy}");

    // A 100 MiB buffer, filled: the peak grows by about as much.
    let before = busy["peak_memory_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("{busy}"));
    exec_ok(
        &c,
        "dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null",
    )
    .await;
    let after = receipt(&c).await;
    let peak = after["peak_memory_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("{after}"));
    assert!(
        peak >= 100 * MIB && peak >= before + 90 * MIB,
        "the peak went from {before} to {peak} bytes across a 100 MiB buffer"
    );
    assert!(after["wall_seconds"].as_u64().is_some(), "{after}");

    // The same, as the resource computer://<computer>/receipt (a read is
    // no tool call).
    let r = c
        .rpc(
            "resources/read",
            Some("computer://metered/receipt"),
            json!({"uri": "computer://metered/receipt"}),
        )
        .await;
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    let read: Value = serde_json::from_str(text).unwrap();
    assert_eq!(read["tool_calls"], after["tool_calls"], "{read}");
    assert!(read["peak_memory_bytes"].as_u64() >= Some(peak), "{read}");
    assert!(
        read["handle"].as_str().is_some_and(|h| h.starts_with("c-")),
        "{read}"
    );

    let r = c
        .call("computer_release", json!({"computer": "metered"}))
        .await;
    assert!(!jerror(&r), "{r}");
    s.stop_leaving_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_computers_receipt_counts_its_cpu_memory_and_calls() {
    metered(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_computers_receipt_counts_its_cpu_memory_and_calls() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    metered(or_skip!(Server::docker())).await;
}

/// `computer-mcp receipts --json` over `server`'s state: its rows.
fn receipts_json(server: &Server) -> Vec<Value> {
    let out = std::process::Command::new(super::support::SERVER)
        .arg("receipts")
        .arg("--json")
        .args(server.args())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["totals"]["computers"].as_u64() >= Some(1), "{v}");
    v["computers"].as_array().unwrap().clone()
}

/// The receipt outlives its server (its computer has a name of its own:
/// Docker's computers are listed to every test's server, all of one
/// token): a written file's size is added to the
/// bytes pushed and a read one's to those pulled; a server started again
/// on the same state goes on from the calls the first counted; once
/// released, `computer-mcp receipts` reads it from the journal.
async fn kept_across_a_restart(server: Server) {
    let s = HttpServer::start_on(server, &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("journaled").await;
    let first = receipt_of(&c, "journaled").await;
    let content = "x".repeat(100_000);
    let r = c
        .call(
            "write_file",
            json!({"computer": "journaled", "path": "/tmp/big.txt", "content": content}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let r = c
        .call(
            "read_file",
            json!({"computer": "journaled", "path": "/tmp/big.txt"}),
        )
        .await;
    assert!(!jerror(&r), "{r}");
    let written = receipt_of(&c, "journaled").await;
    let pushed = |v: &Value| v["bytes_pushed"].as_u64().unwrap_or_else(|| panic!("{v}"));
    let pulled = |v: &Value| v["bytes_pulled"].as_u64().unwrap_or_else(|| panic!("{v}"));
    assert!(
        pushed(&written) >= pushed(&first) + 100_000,
        "a 100,000-byte file: {first} then {written}"
    );
    assert!(pulled(&written) >= pulled(&first) + 100_000, "{written}");
    let calls = written["tool_calls"].as_u64().unwrap();

    // Stopped with --keep and started again on the same state: the kept
    // computer's receipt goes on from the journal's.
    let (server, _) = s.stop().await;
    let s = HttpServer::start_on(server, &["--keep"], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let again = receipt_of(&c, "journaled").await;
    assert_eq!(again["tool_calls"].as_u64(), Some(calls + 1), "{again}");
    assert_eq!(pushed(&again), pushed(&written), "{again}");
    assert!(again["cpu_seconds"].as_f64().is_some(), "{again}");

    // `computer-mcp cp` adds the bytes it carried.
    let here = tempfile::tempdir().unwrap();
    std::fs::write(here.path().join("in.txt"), vec![b'y'; 5000]).unwrap();
    let out = std::process::Command::new(super::support::SERVER)
        .arg("cp")
        .arg(here.path().join("in.txt"))
        .arg("journaled:/tmp/in.txt")
        .args(s.server.args())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let copied = receipt_of(&c, "journaled").await;
    assert!(
        pushed(&copied) >= pushed(&again) + 5000,
        "{again} then {copied}"
    );

    let r = c
        .call("computer_release", json!({"computer": "journaled"}))
        .await;
    assert!(!jerror(&r), "{r}");
    let (server, _) = s.stop().await;
    assert!(server.computers().is_empty(), "{:?}", server.computers());
    let rows = receipts_json(&server);
    let row = rows
        .iter()
        .find(|r| r["name"] == "journaled")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert!(row["released_at"].as_str().is_some(), "{row}");
    assert_eq!(row["running"], false, "{row}");
    assert_eq!(row["provider"], server.provider(), "{row}");
    // A release is no call on the computer.
    assert_eq!(row["tool_calls"], copied["tool_calls"], "{row}");
    assert_eq!(row["bytes_pushed"], copied["bytes_pushed"], "{row}");
    assert!(row["cpu_seconds"].as_f64().is_some(), "{row}");
    assert!(
        row.get("estimated_cost_usd").is_none(),
        "this machine's computers cost nothing: {row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_receipt_outlives_a_restart_and_counts_bytes() {
    kept_across_a_restart(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_receipt_outlives_a_restart_and_counts_bytes() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    kept_across_a_restart(or_skip!(Server::docker())).await;
}
