//! The live viewer through the whole stack: a stdio server with
//! `--viewer`, a local 1280x800 desktop, and the viewer's page open in a
//! headless Chromium (driven over CDP). Figures:
//!
//! - change to drawn: from a model's `input` move (the pointer moved is a
//!   changed screen to screen.watch) until the page has drawn a new frame,
//!   read by polling the page (so a few ms of CDP are in it);
//! - frames per second drawn while the pointer moves without a pause.
//!
//! Run on demand, as root like the tests (Xvfb and Chromium installed):
//!
//!     cargo bench -p computer-mcp --bench viewer
//!
//! `CMCP_BENCH_CALLS` sets the changes timed (default 30).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use computer_providers::cdp::BrowserClient;
use computer_providers::cdp::chromium::HostChromium;
use computerd::client::ComputerClient;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

#[path = "support.rs"]
mod support;
use support::{count_from_env, line, ms, server_cmd};

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

async fn cdp(b: &BrowserClient, method: &str, params: Value, session: Option<&str>) -> Value {
    let mut p = json!({"method": method, "params": params});
    if let Some(s) = session {
        p["sessionId"] = json!(s);
    }
    b.call_value("cdp.send", p).await.unwrap()["result"].clone()
}

async fn frames(b: &BrowserClient, session: &str) -> u64 {
    let r = cdp(
        b,
        "Runtime.evaluate",
        json!({"expression": "window.viewer ? window.viewer.frames : 0", "returnByValue": true}),
        Some(session),
    )
    .await;
    r["result"]["value"].as_u64().unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = count_from_env("CMCP_BENCH_CALLS", 30);
    let state = tempfile::tempdir()?;
    let flags = [
        "--kind",
        "desktop",
        "--screen",
        "1280x800",
        "--viewer",
        "127.0.0.1:0",
    ];
    let client = ().serve(TokioChildProcess::new(server_cmd(state.path(), &flags))?).await?;
    // The default computer is made by a first tool call without `computer`.
    let r = client.call_tool(call("screenshot", json!({}))).await?;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let r = client.call_tool(call("computer_view", json!({}))).await?;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let url = r.structured_content.as_ref().unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let chromium = match HostChromium::start().await {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no headless Chromium ({})", e.message);
            return Ok(());
        }
    };
    let b = chromium.client().await?;
    let t = cdp(
        &b,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        None,
    )
    .await;
    let a = cdp(
        &b,
        "Target.attachToTarget",
        json!({"targetId": t["targetId"], "flatten": true}),
        None,
    )
    .await;
    let session = a["sessionId"].as_str().unwrap().to_string();
    cdp(&b, "Page.navigate", json!({ "url": url }), Some(&session)).await;
    let opened = Instant::now();
    while frames(&b, &session).await == 0 {
        assert!(opened.elapsed() < Duration::from_secs(30), "no first frame");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "computer-mcp viewer bench, 1280x800: first frame drawn {:.0} ms after the page was asked for",
        ms(opened.elapsed())
    );

    let mut latencies = Vec::new();
    for i in 0..n {
        let before = frames(&b, &session).await;
        let x = 200 + (i % 2) as i64 * 400;
        let t = Instant::now();
        let r = client
            .call_tool(call(
                "input",
                json!({"actions": [{"type": "move", "x": x, "y": 400}]}),
            ))
            .await?;
        assert_ne!(r.is_error, Some(true), "{r:?}");
        while frames(&b, &session).await == before {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "no frame for a change"
            );
        }
        latencies.push(t.elapsed());
        // Let the frame's ack settle before the next change.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let med = line("change (input move) to frame drawn", &mut latencies);

    let before = frames(&b, &session).await;
    let t = Instant::now();
    let mut i = 0i64;
    while t.elapsed() < Duration::from_secs(5) {
        i += 1;
        let x = 100 + (i % 100) * 10;
        client
            .call_tool(call(
                "input",
                json!({"actions": [{"type": "move", "x": x, "y": 300}]}),
            ))
            .await?;
    }
    let drawn = frames(&b, &session).await - before;
    let fps = drawn as f64 / t.elapsed().as_secs_f64();
    println!(
        "frames drawn while the pointer moves: {fps:.1} per second ({drawn} in 5 s, {i} moves)"
    );
    println!(
        "target: at least 15 frames per second ({}), a change drawn within 100 ms at the median ({})",
        if fps >= 15.0 { "met" } else { "not met" },
        if ms(med) <= 100.0 { "met" } else { "not met" }
    );
    client.cancel().await?;
    Ok(())
}
