//! A computer's receipt as a model reads it in computer_info, on local (the
//! computer's cgroup) and Docker (the engine's stats): the CPU seconds of a
//! busy loop, the peak memory of a large buffer, the tool calls counted.

use serde_json::{Value, json};

use super::support::{HttpServer, Server, Stateless, TOKEN, jerror, jtext, or_skip};

const MIB: u64 = 1024 * 1024;

async fn receipt(c: &Stateless) -> Value {
    let r = c
        .call("computer_info", json!({"computer": "metered"}))
        .await;
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
    metered(or_skip!(Server::docker())).await;
}
