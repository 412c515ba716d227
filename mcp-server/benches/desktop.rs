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

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::{ComputerExt, DaemonClient};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

#[path = "support.rs"]
mod support;
use support::{computerd, count_from_env, line, ms, server_cmd};

/// The server's flags for a desktop computer of the bench's size.
const DESKTOP: &[&str] = &["--kind", "desktop", "--screen", "1280x800"];

fn call(name: &str, args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// An Xvfb of the host's own, on the display it picks.
struct HostX {
    child: std::process::Child,
    display: String,
}

impl HostX {
    fn start() -> Option<HostX> {
        let mut child = computer_testkit::xvfb(&["-displayfd", "1"])
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut out = child.stdout.take()?;
        let mut said = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).ok()? == 1 && b[0] != b'\n' {
            said.push(b[0]);
        }
        std::mem::forget(out);
        let n = String::from_utf8(said).ok()?;
        Some(HostX {
            child,
            display: format!(":{}", n.trim()),
        })
    }
}

impl Drop for HostX {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
