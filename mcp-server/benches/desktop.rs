//! Desktops through the whole stack: an rmcp client → stdio → computer-mcp
//! → computerd (GetImage, XTEST) in a local desktop, against what the
//! common computer-use demos do, a process per action on a display of the
//! host's own: `scrot`, `xwd | convert` and `import` to PNG, and
//! `xdotool click`. Medians and ratios in one run; an alternative that is
//! not installed is skipped with a line saying so.
//!
//! Run on demand (never part of `cargo test`), as root like the tests:
//!
//!     cargo bench -p computer-mcp --bench desktop
//!
//! `CMCP_BENCH_CALLS` sets the runs of each figure (default 40);
//! `COMPUTERD_BIN` the daemon. Both screens are 1280x800 and show the same
//! (nothing drawn on them), so the PNGs are alike.
//!
//! Then a busy screen: Chromium (where installed) shows a page of text and
//! a table, made from a fixed seed, on the desktop's own display, and our
//! screenshot through MCP alternates with scrot run in the same computer
//! (timed there, around the process alone): bytes, time and ratios.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::{ComputerExt, DaemonClient};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

#[path = "support.rs"]
mod support;
use support::{HostX, call, computerd, count_from_env, installed, line, ms, server_cmd};

/// The server's flags for a desktop computer of the bench's size.
const DESKTOP: &[&str] = &["--kind", "desktop", "--screen", "1280x800"];

/// Run `sh -c script` `n` times on the host display; the durations.
fn per_process(display: &str, script: &str, n: usize) -> Vec<Duration> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let s = Command::new("sh")
            .args(["-c", script])
            .env("DISPLAY", display)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        v.push(t.elapsed());
        assert!(s.success(), "{script} failed: {s}");
    }
    v
}

fn ratio(name: &str, ours: Duration, theirs: Option<Duration>) {
    match theirs {
        Some(t) => println!(
            "  {name:<50} {:>6.1}x ({:.3} ms vs {:.3} ms)",
            ms(t) / ms(ours).max(1e-9),
            ms(ours),
            ms(t)
        ),
        None => println!("  {name:<50} (not measured)"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = count_from_env("CMCP_BENCH_CALLS", 40);
    if !installed("Xvfb") {
        println!("skipped: Xvfb is not installed (apt-get install xvfb)");
        return Ok(());
    }
    let state = tempfile::tempdir()?;
    println!(
        "computer-mcp desktop bench, 1280x800 (computerd: {})",
        computerd().display()
    );

    // The full stack: the first call makes the desktop.
    let client = ().serve(TokioChildProcess::new(server_cmd(state.path(), DESKTOP))?).await?;
    let t = Instant::now();
    let r = client
        .call_tool(call("screenshot", serde_json::json!({})))
        .await?;
    println!("first screenshot (desktop made): {:.1} ms", ms(t.elapsed()));
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let mut shots = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let r = client
            .call_tool(call("screenshot", serde_json::json!({})))
            .await?;
        shots.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let shot = line("MCP screenshot 1280x800 (PNG, as shown)", &mut shots);
    let mut half = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let r = client
            .call_tool(call("screenshot", serde_json::json!({"max_width": 640})))
            .await?;
        half.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    line("MCP screenshot scaled to 640x400", &mut half);
    let mut clicks = Vec::new();
    for i in 0..n {
        let x = 300 + (i % 50) as i64;
        let t = Instant::now();
        let r = client
            .call_tool(call(
                "computer",
                serde_json::json!({"action": "left_click", "coordinate": [x, 300]}),
            ))
            .await?;
        clicks.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let click = line("MCP computer left_click", &mut clicks);

    // The daemon alone: screen.shot (and screen.read for the rest) on the
    // same desktop's socket, what the stack adds to.
    let sock = std::fs::read_dir(state.path().join("computers"))?
        .flatten()
        .map(|e| e.path().join("run/computerd.sock"))
        .find(|p| p.exists())
        .expect("the desktop's socket");
    let daemon = DaemonClient::new(tokio::net::UnixStream::connect(&sock).await?);
    let mut direct = Vec::new();
    let mut size = 0;
    for _ in 0..n {
        let t = Instant::now();
        let (r, _) = daemon.screen_shot(None).await?;
        direct.push(t.elapsed());
        size = r.size;
    }
    let direct_med = line("daemon only: screen.shot 1280x800 PNG", &mut direct);
    println!(
        "  (a {size}-byte PNG; the MCP stack adds {:.3} ms to it)",
        ms(shot) - ms(direct_med)
    );
    busy(&client, &daemon, n).await?;
    daemon.close();
    client.cancel().await?;

    // The demos' way: a process per action, on a host display.
    let Some(x) = HostX::start() else {
        println!("skipped the alternatives: the host's Xvfb did not start");
        return Ok(());
    };
    let out = state.path().join("shot.png");
    let out = out.display();
    let measure = |program: &str, name: &str, script: String| -> Option<Duration> {
        if !installed(program) {
            println!("skipped {name}: {program} is not installed");
            return None;
        }
        let mut v = per_process(&x.display, &script, n);
        Some(line(name, &mut v))
    };
    let scrot = measure("scrot", "scrot to PNG", format!("scrot -o {out}"));
    let xwd = measure(
        "convert",
        "xwd | convert to PNG",
        format!("xwd -root -silent | convert xwd:- png:{out}"),
    );
    let import = measure(
        "import",
        "import -window root to PNG",
        format!("import -window root {out}"),
    );
    let xdo = measure(
        "xdotool",
        "xdotool mousemove + click",
        "xdotool mousemove 300 300 click 1".into(),
    );
    let xdo0 = measure(
        "xdotool",
        "xdotool mousemove + click --delay 0",
        "xdotool mousemove 300 300 click --delay 0 1".into(),
    );
    drop(x);

    println!("ratios (theirs / ours; above 1 is faster here):");
    ratio("screenshot vs scrot (target >= 2x)", shot, scrot);
    ratio("screenshot vs xwd | convert (target >= 5x)", shot, xwd);
    ratio("screenshot vs import", shot, import);
    ratio("click vs xdotool click", click, xdo);
    ratio(
        "click vs xdotool click --delay 0 (target >= 1x)",
        click,
        xdo0,
    );
    Ok(())
}

/// A page of text and a table, the same on every run (a fixed-seed LCG
/// picks the words).
fn busy_page() -> String {
    const WORDS: &[&str] = &[
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "screen", "table", "row",
        "value", "model", "agent", "computer", "desktop", "shell", "file", "process", "window",
        "click",
    ];
    let mut seed = 42u64;
    let mut word = move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        WORDS[(seed >> 33) as usize % WORDS.len()]
    };
    let mut para = |n: usize| (0..n).map(|_| word()).collect::<Vec<_>>().join(" ");
    let mut rows = String::new();
    for r in 0..18 {
        rows.push_str("<tr>");
        for c in 0..6 {
            rows.push_str(&format!(
                "<td>{} {}</td>",
                para(2),
                (r * 7919 + c * 104_729) % 99_991
            ));
        }
        rows.push_str("</tr>");
    }
    let (top, bottom) = (para(120), para(150));
    format!(
        "<!doctype html><html><head><meta charset=utf-8><style>body{{font-family:sans-serif;margin:16px}} \
         table{{border-collapse:collapse}} td{{border:1px solid #888;padding:3px 6px;font-size:13px}} \
         tr:nth-child(even){{background:#eef}}</style></head><body><h1>Quarterly report</h1>\
         <p>{top}</p><table>{rows}</table><p>{bottom}</p></body></html>"
    )
}

/// `exec.run` of `argv` in the desktop, with `stdin`; its stdout.
async fn run(daemon: &DaemonClient, argv: &[&str], stdin: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let r = daemon
        .call_value(
            "exec.run",
            serde_json::json!({"argv": argv, "stdin": b64.encode(stdin), "timeoutMs": 20_000}),
        )
        .await
        .unwrap();
    assert_eq!(r["exitCode"], 0, "{argv:?}: {r}");
    String::from_utf8(b64.decode(r["stdout"].as_str().unwrap()).unwrap()).unwrap()
}

/// The PNG bytes of a screenshot's answer, checked to be one.
fn png_of(r: &rmcp::model::CallToolResult) -> Vec<u8> {
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let img = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image");
    base64::engine::general_purpose::STANDARD
        .decode(&img.data)
        .unwrap()
}

/// Chromium showing [`busy_page`] on the desktop; our screenshot through
/// MCP (full and 640 wide) against scrot in the same computer, alternating.
async fn busy(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    daemon: &DaemonClient,
    n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|p| installed(p));
    let (Some(chromium), true) = (chromium, installed("scrot")) else {
        println!("skipped the busy screen: it needs chromium and scrot");
        return Ok(());
    };
    run(
        daemon,
        &["sh", "-c", "cat > /tmp/busy.html"],
        busy_page().as_bytes(),
    )
    .await;
    // Started as a process of its own: a background job of an exec.run
    // would end with the run (a run's end takes what it started).
    let started = daemon
        .call_value(
            "process.start",
            serde_json::json!({"argv": [
                chromium, "--no-sandbox", "--user-data-dir=/tmp/busy-profile", "--kiosk",
                "--window-size=1280,800", "--window-position=0,0", "--no-first-run",
                "--disable-gpu", "file:///tmp/busy.html",
            ]}),
        )
        .await
        .unwrap();
    assert!(
        started["id"].is_string(),
        "Chromium did not start: {started}"
    );
    // Shown once the screen stops changing and is no longer blank.
    let (mut last, t0) = (Vec::new(), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let png = png_of(
            &client
                .call_tool(call("screenshot", serde_json::json!({})))
                .await?,
        );
        if png.len() > 50_000 && png == last {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Chromium did not show the page"
        );
        last = png;
    }
    let scrot = "s=$EPOCHREALTIME; scrot -o /tmp/busy.png; e=$EPOCHREALTIME; echo \"$s $e $(stat -c %s /tmp/busy.png)\"";
    let (mut ours, mut theirs, mut small) = (Vec::new(), Vec::new(), Vec::new());
    let (mut our_bytes, mut their_bytes, mut small_width) = (0, 0, 0);
    for _ in 0..n {
        let t = Instant::now();
        let r = client
            .call_tool(call("screenshot", serde_json::json!({})))
            .await?;
        ours.push(t.elapsed());
        our_bytes = png_of(&r).len();
        let out = run(daemon, &["bash", "-c", scrot], b"").await;
        let f: Vec<f64> = out.split_whitespace().map(|v| v.parse().unwrap()).collect();
        theirs.push(Duration::from_secs_f64(f[1] - f[0]));
        their_bytes = f[2] as usize;
        let t = Instant::now();
        let r = client
            .call_tool(call("screenshot", serde_json::json!({"max_width": 640})))
            .await?;
        small.push(t.elapsed());
        let png = png_of(&r);
        small_width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    }
    println!("busy screen: Chromium with text and a table, 1280x800");
    let ours = line("  MCP screenshot 1280x800, to the client", &mut ours);
    let theirs = line("  scrot in the computer (the process alone)", &mut theirs);
    let small = line("  MCP screenshot max_width 640, to the client", &mut small);
    println!(
        "  PNG bytes: ours {our_bytes} vs scrot {their_bytes}: {:.3}x scrot's (target <= 1.0x)",
        our_bytes as f64 / their_bytes as f64
    );
    println!(
        "  speed: {:.2}x scrot's end to end (target >= 3x)",
        ms(theirs) / ms(ours)
    );
    println!(
        "  {small_width}-wide shot: {:.2}x the full one's time (target <= 1.0x)",
        ms(small) / ms(ours)
    );
    Ok(())
}
