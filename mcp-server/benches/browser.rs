//! Page tools through the whole stack, on the same test page, through
//! computer-mcp (`--kind browser`: Chromium in a local computer, CDP over
//! its debugging pipe) and through `@playwright/mcp` (npm) driving the same
//! Debian Chromium, the two alternating round by round, medians and ratios
//! in one run:
//!
//! - a snapshot right after a navigation (the navigation not timed);
//! - a snapshot of the page at rest;
//! - the bytes of one snapshot's answer (its text, what the model reads);
//! - a snapshot and a click by its ref;
//! - a 10-step task, as a model does one: navigate, snapshot, type into
//!   each of a form's 5 fields by ref, submit, wait for the page's answer,
//!   take a screenshot; the whole task's time, and the bytes of all its
//!   answers (the results as JSON, images included).
//!
//! Run on demand (never part of `cargo test`), as root like the tests, with
//! Debian's chromium and Node's npx (the first run fetches the package):
//!
//!     cargo bench -p computer-mcp --bench browser
//!
//! `CMCP_BENCH_ROUNDS` sets the rounds of each figure (default 50);
//! `CMCP_BENCH_PLAYWRIGHT` the Playwright MCP command (default
//! `npx -y @playwright/mcp@0.0.83`; an installed one is quicker to start:
//! `/work/bench-cache/playwright-mcp/node_modules/.bin/playwright-mcp`);
//! `COMPUTERD_BIN` the daemon.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support.rs"]
mod support;
use support::{answer_bytes, count_from_env, line, ms, server_cmd};

/// The test page: a counter button among enough else that a snapshot is
/// more than a line (a form, fifty links).
fn page() -> String {
    let links: String = (1..=50)
        .map(|i| format!("<li><a href=\"#item{i}\">Item {i}</a></li>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>bench</title></head><body>\
         <h1>Bench page</h1>\
         <form><label>Name <input name=name></label><label>Pass <input type=password name=pw></label>\
         <select name=s><option>a</option><option>b</option></select></form>\
         <p>Count: <span id=n>0</span></p>\
         <button id=add onclick=\"document.getElementById('n').textContent = +document.getElementById('n').textContent + 1\">Add one</button>\
         <ul>{links}</ul></body></html>"
    )
}

/// The task's page: a form of five fields whose submit says thanks.
fn form_page() -> String {
    let fields: String = ["Name", "Email", "City", "Street", "Zip"]
        .iter()
        .map(|f| {
            format!(
                "<p><label>{f} <input name={}></label></p>",
                f.to_lowercase()
            )
        })
        .collect();
    format!(
        "<!doctype html><html><head><title>Order</title></head><body><h1>Order</h1>\
         <form onsubmit=\"event.preventDefault(); document.getElementById('done').textContent = 'Thanks, ' + this.name.value\">\
         {fields}<button type=submit>Order now</button></form><p id=done></p></body></html>"
    )
}

/// The ref on the line of `role "name"` in a snapshot's text.
fn ref_of(snapshot: &str, role: &str, name: &str) -> String {
    let want = format!("{role} \"{name}\"");
    let line = snapshot
        .lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no {want} in the snapshot:\n{snapshot}"));
    let at = line.find("ref=").expect("a ref on the line") + 4;
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}

/// The 10-step task on `client`, in Playwright MCP's words (which both
/// take): its time, the bytes of its answers as JSON, and the bytes of
/// their content.
async fn task(client: &RunningService<RoleClient, ()>, url: &str) -> (Duration, [usize; 2]) {
    let t = Instant::now();
    let mut bytes = [0, 0];
    let mut step = async |name: &'static str, args: Value| {
        let r = ok(client, name, args).await;
        bytes[0] += serde_json::to_string(&r).unwrap().len();
        bytes[1] += answer_bytes(&r);
        r
    };
    step("browser_navigate", json!({ "url": url })).await;
    let snap = text_of(&step("browser_snapshot", json!({})).await);
    for (field, value) in [
        ("Name", "Ada"),
        ("Email", "ada@example.com"),
        ("City", "London"),
        ("Street", "1 Analytical Way"),
        ("Zip", "N1 9GU"),
    ] {
        let r = ref_of(&snap, "textbox", field);
        step(
            "browser_type",
            json!({"target": r, "element": format!("{field} field"), "text": value}),
        )
        .await;
    }
    let submit = ref_of(&snap, "button", "Order now");
    step(
        "browser_click",
        json!({"target": submit, "element": "Order now button"}),
    )
    .await;
    step("browser_wait_for", json!({"text": "Thanks, Ada"})).await;
    step("browser_take_screenshot", json!({})).await;
    (t.elapsed(), bytes)
}

fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone())
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ref of the "Add one" button in a snapshot's text.
fn button_ref(snapshot: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains("button") && l.contains("Add one"))
        .unwrap_or_else(|| panic!("no Add one button in the snapshot:\n{snapshot}"));
    let at = line.find("ref=").expect("a ref on the button's line") + 4;
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}

async fn ok(
    client: &RunningService<RoleClient, ()>,
    name: &'static str,
    args: Value,
) -> CallToolResult {
    let r = client.call_tool(call(name, args)).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{name}: {}", text_of(&r));
    r
}

/// One round of snapshot + click on `client`: the click in Playwright's
/// form (`target`, the ref, and `element`, a description), which both take.
async fn snap_click(client: &RunningService<RoleClient, ()>) -> Duration {
    let t = Instant::now();
    let snap = ok(client, "browser_snapshot", json!({})).await;
    let r = button_ref(&text_of(&snap));
    ok(
        client,
        "browser_click",
        json!({"target": r, "element": "Add one button"}),
    )
    .await;
    t.elapsed()
}

/// One snapshot, timed.
async fn snap(client: &RunningService<RoleClient, ()>) -> Duration {
    let t = Instant::now();
    ok(client, "browser_snapshot", json!({})).await;
    t.elapsed()
}

/// A navigation to `url` (not timed), then a snapshot, timed.
async fn snap_after_nav(client: &RunningService<RoleClient, ()>, url: &str) -> Duration {
    ok(client, "browser_navigate", json!({ "url": url })).await;
    snap(client).await
}

/// One side of the bench: its client and the page's address as it reaches it.
struct Side {
    name: &'static str,
    client: RunningService<RoleClient, ()>,
    url: String,
}

/// Medians of both sides for one figure, `n` rounds alternating, and the
/// ratio (Playwright's time over ours: above 1, ours is faster).
async fn compare<F, Fut>(what: &str, n: usize, sides: &[Side; 2], f: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    let mut took = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for _ in 0..n {
        for (i, t) in took.iter_mut().enumerate() {
            t.push(f(i).await);
        }
    }
    report(what, sides, &mut took);
}

/// Each side's line for `what`, and the ratio of their medians.
fn report(what: &str, sides: &[Side; 2], took: &mut [Vec<Duration>; 2]) {
    let ours = line(&format!("{}: {what}", sides[0].name), &mut took[0]);
    let theirs = line(&format!("{}: {what}", sides[1].name), &mut took[1]);
    println!(
        "ratio {what} (playwright / computer-mcp, medians): {:.2}x ({:.2} ms vs {:.2} ms)",
        ms(theirs) / ms(ours),
        ms(theirs),
        ms(ours)
    );
}

/// A one-page HTTP server on 127.0.0.1 for Playwright's browser.
async fn serve(page: String) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let page = page.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let page = if buf[..n].starts_with(b"GET /form") {
                    form_page()
                } else {
                    page
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(page.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = count_from_env("CMCP_BENCH_ROUNDS", 50);
    let state = tempfile::tempdir()?;
    println!(
        "browser page-tools bench: snapshots and snapshot + click by ref, {n} rounds each, the two sides alternating"
    );

    // Ours: Chromium in a local computer, the page served inside it.
    let cmd = server_cmd(state.path(), &["--kind", "browser"]);
    let ours = ().serve(TokioChildProcess::new(cmd)?).await?;
    ok(
        &ours,
        "write_file",
        json!({"path": "/work/site/index.html", "content": page()}),
    )
    .await;
    ok(
        &ours,
        "write_file",
        json!({"path": "/work/site/form.html", "content": form_page()}),
    )
    .await;
    ok(
        &ours,
        "process_start",
        json!({"command": "cd /work/site && exec python3 -m http.server 8125 --bind 127.0.0.1"}),
    )
    .await;
    ok(
        &ours,
        "exec",
        json!({"command": "for i in $(seq 100); do grep -q ':1FBD 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1"}),
    )
    .await;

    // @playwright/mcp on the same Chromium, the page served on this machine.
    let addr = serve(page()).await;
    let pw_cmd = std::env::var("CMCP_BENCH_PLAYWRIGHT")
        .unwrap_or_else(|_| "npx -y @playwright/mcp@0.0.83".into());
    let chromium = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("Debian's chromium");
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(format!(
        "exec {pw_cmd} --headless --isolated --no-sandbox --browser chromium --executable-path {chromium}"
    ));
    let pw = ().serve(TokioChildProcess::new(cmd)?).await?;

    let sides = [
        Side {
            name: "computer-mcp",
            client: ours,
            url: "http://127.0.0.1:8125/".into(),
        },
        Side {
            name: "@playwright/mcp",
            client: pw,
            url: format!("http://{addr}/"),
        },
    ];
    for s in &sides {
        ok(&s.client, "browser_navigate", json!({ "url": s.url })).await;
        for _ in 0..3 {
            snap_click(&s.client).await;
        }
    }

    // The bytes of one snapshot of the same page (the counter aside).
    let mut bytes = [0usize; 2];
    for (i, s) in sides.iter().enumerate() {
        let t = text_of(&ok(&s.client, "browser_snapshot", json!({})).await);
        bytes[i] = t.len();
        println!("{}: snapshot text {} bytes", s.name, t.len());
    }
    println!(
        "ratio snapshot bytes (computer-mcp / playwright): {:.2}x ({} B vs {} B)",
        bytes[0] as f64 / bytes[1] as f64,
        bytes[0],
        bytes[1]
    );

    let s = &sides;
    compare("snapshot right after a navigation", n, s, |i| {
        snap_after_nav(&s[i].client, &s[i].url)
    })
    .await;
    compare("snapshot at rest", n, s, |i| snap(&s[i].client)).await;
    compare("snapshot + click", n, s, |i| snap_click(&s[i].client)).await;

    // The 10-step task, alternating, its time and its answers' bytes.
    let rounds = n.div_ceil(5).max(3);
    let mut took = [Vec::new(), Vec::new()];
    let mut task_bytes = [[0usize; 2]; 2];
    for _ in 0..rounds {
        for (i, side) in s.iter().enumerate() {
            let (d, b) = task(&side.client, &format!("{}form.html", side.url)).await;
            took[i].push(d);
            task_bytes[i] = b;
        }
    }
    report(
        "10-step task (navigate, snapshot, 5 fields, submit, wait, screenshot)",
        s,
        &mut took,
    );
    for (k, what) in ["results as JSON", "content (text and images)"]
        .iter()
        .enumerate()
    {
        println!(
            "ratio 10-step task bytes, {what} (computer-mcp / playwright): {:.2}x ({} B vs {} B)",
            task_bytes[0][k] as f64 / task_bytes[1][k] as f64,
            task_bytes[0][k],
            task_bytes[1][k]
        );
    }
    for side in sides {
        side.client.cancel().await?;
    }
    Ok(())
}
