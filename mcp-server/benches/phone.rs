//! Phones through the whole stack, against mobile-mcp
//! (`@mobilenext/mobile-mcp`, what such users pick today), both driving the
//! same fixture phone (fixtures/phone) through the same adb server: an rmcp
//! client → stdio → computer-mcp (`--provider adb --kind phone`) → the adb
//! server's socket, and the same client → stdio → mobile-mcp (node) → an
//! `adb` process per action. Medians and ratios of a tap, a screenshot and
//! a list of the screen's elements in one run, and the bytes of the two
//! element lists for the same screen.
//!
//! Run on demand (never part of `cargo test`):
//!
//!     npm install --prefix /tmp/mobile-mcp @mobilenext/mobile-mcp@1.0.4
//!     CMCP_BENCH_MOBILE_MCP=/tmp/mobile-mcp/node_modules/@mobilenext/mobile-mcp/lib/index.js \
//!         cargo bench -p computer-mcp --bench phone
//!
//! Without CMCP_BENCH_MOBILE_MCP (or node) only computer-mcp's figures are
//! printed, with a line saying why. `CMCP_BENCH_CALLS` sets the runs of each
//! figure (default 30). Needs Debian's `adb` on PATH.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use computer_phone_fixture::rig::Rig;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

// The desktop benches' server and daemon helpers are not used here.
#[allow(dead_code)]
#[path = "support.rs"]
mod support;
use support::{SERVER, answer_bytes, line, ms};

type Client = RunningService<rmcp::RoleClient, ()>;

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

/// `runs` timed calls of one tool; the median, and the last answer's bytes.
async fn time(
    client: &Client,
    label: &str,
    name: &str,
    args: Value,
    runs: usize,
) -> (Duration, usize) {
    let mut v = Vec::with_capacity(runs);
    let mut bytes = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let r = client.call_tool(call(name, args.clone())).await.unwrap();
        v.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{label}: {r:?}");
        bytes = answer_bytes(&r);
    }
    (line(label, &mut v), bytes)
}

struct Figures {
    tap: Duration,
    shot: Duration,
    elements: Duration,
    element_bytes: usize,
    /// A screenshot decoded each time (ours; mobile-mcp's is `shot`).
    decoded: Duration,
}

/// `runs` calls of each of a server's tap, screenshot and element list
/// (`who` names the server in each line), after one screenshot that
/// holds the phone.
async fn figures(client: &Client, who: &str, calls: [(&str, Value); 3], runs: usize) -> Figures {
    let shot = &calls[1];
    client
        .call_tool(call(shot.0, shot.1.clone()))
        .await
        .unwrap();
    let mut out = Vec::with_capacity(3);
    for (name, args) in calls {
        out.push(time(client, &format!("{who} {name}"), name, args, runs).await);
    }
    Figures {
        tap: out[0].0,
        shot: out[1].0,
        elements: out[2].0,
        element_bytes: out[2].1,
        decoded: out[1].0,
    }
}

async fn ours(rig: &Rig, runs: usize) -> Figures {
    let mut cmd = tokio::process::Command::new(SERVER);
    cmd.arg("serve")
        .args(rig.adb_provider_args())
        .args(["--log", "error"]);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let calls = [
        ("tap", json!({"x": 10, "y": 300})),
        ("screenshot", json!({})),
        ("list_elements", json!({})),
    ];
    let f = figures(&client, "computer-mcp", calls, runs).await;
    // The screenshots above are of one screen, whose PNG the phone client
    // keeps: after the first, each is that PNG again. Two widths in turn
    // make every shot decoded, scaled and encoded, as after the screen
    // changed (mobile-mcp does the same work either way).
    let mut v = Vec::with_capacity(runs);
    for i in 0..runs {
        let args = json!({"max_width": 575 + (i % 2)});
        let t = Instant::now();
        let r = client.call_tool(call("screenshot", args)).await.unwrap();
        v.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let decoded = line("computer-mcp screenshot, decoded each time", &mut v);
    let _ = client.cancel().await;
    Figures { decoded, ..f }
}

async fn theirs(rig: &Rig, index_js: &str, runs: usize) -> Figures {
    let mut cmd = tokio::process::Command::new("node");
    // mobile-mcp runs `adb -s <serial> …` from PATH; the variable points
    // that adb at the bench's own server.
    cmd.arg(index_js)
        .env("ANDROID_ADB_SERVER_PORT", rig.adb.port().to_string());
    // mobile-mcp's adb robot: an `adb` process per action, as its README
    // describes. Its default robot since 1.0 drives the phone through its
    // own `mobilecli` helper, which on the fixture phone spends about 5 s
    // in each element list: CMCP_BENCH_MOBILECLI=1 measures that one.
    if std::env::var_os("CMCP_BENCH_MOBILECLI").is_none() {
        cmd.env("MOBILEMCP_LEGACY_ROBOT", "1");
    }
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let device = json!(rig.serial);
    // The same point of the phone: mobile-mcp takes the phone's pixels.
    let calls = [
        (
            "mobile_click_on_screen_at_coordinates",
            json!({"device": device, "x": 20, "y": 600}),
        ),
        ("mobile_take_screenshot", json!({"device": device})),
        ("mobile_list_elements_on_screen", json!({"device": device})),
    ];
    let f = figures(&client, "mobile-mcp", calls, runs).await;
    let _ = client.cancel().await;
    f
}

fn ratio(label: &str, ours: Duration, theirs: Duration) {
    println!(
        "{label:<52} {:>8.1}x faster ({:.1} ms against {:.1} ms)",
        theirs.as_secs_f64() / ours.as_secs_f64().max(1e-9),
        ms(ours),
        ms(theirs)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::var("CMCP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let Some(adb) = computer_testkit::need_adb() else {
        println!("skipped: adb is not on PATH (apt-get install adb)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&adb, dir.path().join("phone.log"))
        .await
        .unwrap();
    println!(
        "fixture phone {} ({}x{}), adb server on port {}, {runs} runs a figure\n",
        rig.serial,
        computer_phone_fixture::phone::screen::WIDTH,
        computer_phone_fixture::phone::screen::HEIGHT,
        rig.adb.port()
    );
    let a = ours(&rig, runs).await;
    let index_js = std::env::var("CMCP_BENCH_MOBILE_MCP").ok();
    let node = std::process::Command::new("node").arg("--version").output();
    match (index_js, node) {
        (Some(js), Ok(o)) if o.status.success() => {
            println!();
            let b = theirs(&rig, &js, runs).await;
            println!();
            ratio("tap", a.tap, b.tap);
            ratio("screenshot", a.shot, b.shot);
            ratio("screenshot, ours decoded each time", a.decoded, b.shot);
            ratio("list elements", a.elements, b.elements);
            ratio(
                "tap + screenshot + list elements",
                a.tap + a.shot + a.elements,
                b.tap + b.shot + b.elements,
            );
            println!(
                "{:<52} {} bytes against {} ({:.0}% of mobile-mcp's)",
                "list elements' answer, same screen",
                a.element_bytes,
                b.element_bytes,
                100.0 * a.element_bytes as f64 / b.element_bytes.max(1) as f64
            );
        }
        _ => println!(
            "\nmobile-mcp not run: set CMCP_BENCH_MOBILE_MCP to its lib/index.js (npm install @mobilenext/mobile-mcp) and have node on PATH"
        ),
    }
}
