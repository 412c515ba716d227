//! Desktop speed: screen.shot and a click through DaemonClient, beside the
//! way computer-use demos do it, a process per action: `xwd | convert` and
//! `scrot` to PNG, and `xdotool click` (default and `--delay 0`).
//!
//! Run on demand (never part of `cargo test`), with Xvfb, x11-apps (xwd),
//! imagemagick, scrot and xdotool installed:
//!
//!     cargo bench -p computerd --bench desktop
//!
//! `COMPUTERD_BENCH_CALLS` sets the calls per case (default 40), and
//! `COMPUTERD_BIN` the daemon to measure (default: the bench profile's).
//! The screen is 1280x800x24 with a desktop-like picture painted on it.

#![allow(clippy::print_stdout)] // a bench prints its figures

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::{ComputerExt, DaemonClient};
use computerd::launch::{InitArgs, Program, Time};
use computerd::protocol::InputActionsResult;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ConnectionExt as _, CreateGCAux, ImageFormat};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn line(name: &str, d: Duration) {
    println!("{name:<52} median {:>8.2} ms", ms(d));
}

/// Time `n` runs of a shell line (a process per action, as the demos do).
fn shell(n: usize, display: &str, script: &str) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n + 3 {
        let t = Instant::now();
        let st = Command::new("sh")
            .args(["-c", script])
            .env("DISPLAY", display)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        v.push(t.elapsed());
        if !st.success() {
            return Err(format!("{script:?} failed: {st}").into());
        }
    }
    Ok(median(v.split_off(3)))
}

/// Windows, text-like stripes and flat areas: what a desktop looks like to a
/// PNG encoder, painted on the root window.
fn paint(display: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (conn, n) = x11rb::connect(Some(display))?;
    let root = conn.setup().roots[n].root;
    let depth = conn.setup().roots[n].root_depth;
    let gc = conn.generate_id()?;
    conn.create_gc(gc, root, &CreateGCAux::new())?;
    for strip in 0..25u32 {
        let mut data = Vec::with_capacity(1280 * 32 * 4);
        for y in strip * 32..strip * 32 + 32 {
            for x in 0..1280u32 {
                let window = (200..900).contains(&x) && (100..600).contains(&y);
                let text =
                    window && y % 16 < 10 && (x / 6 + y / 16) % 7 != 0 && (x * 7 + y * 3) % 5 < 2;
                let px: u32 = if text {
                    0x202020
                } else if window {
                    0xf4f4f4
                } else if y < 28 {
                    0x303848
                } else {
                    0x2060a0 + ((y / 4) & 0x1f)
                };
                data.extend_from_slice(&px.to_le_bytes());
            }
        }
        conn.put_image(
            ImageFormat::Z_PIXMAP,
            root,
            gc,
            1280,
            32,
            0,
            (strip * 32) as i16,
            0,
            depth,
            &data,
        )?;
    }
    conn.get_input_focus()?.reply()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls: usize = std::env::var("COMPUTERD_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let n = 900 + std::process::id() % 90;
    let display = format!(":{n}");
    let mut xvfb = computer_testkit::xvfb(&[&display]).spawn()?;
    let sock = format!("/tmp/.X11-unix/X{n}");
    let until = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        if Instant::now() > until {
            let _ = xvfb.kill();
            return Err("Xvfb did not come up".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let result = bench(calls, &display);
    let _ = xvfb.kill();
    let _ = xvfb.wait();
    result
}

fn bench(calls: usize, display: &str) -> Result<(), Box<dyn std::error::Error>> {
    paint(display)?;
    let dir = tempfile::tempdir()?;
    let run = dir.path().join("run");
    std::fs::create_dir(&run)?;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))?;
    let socket = run.join("computerd.sock");
    let bin = std::env::var("COMPUTERD_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_computerd").to_string());
    println!("daemon: {bin}");
    let mut init = Program::at(&bin)
        .command(InitArgs::new(
            Time::from_now(Duration::from_secs(3600)),
            &socket,
        ))
        .env("COMPUTERD_LOG", "warn")
        .env("DISPLAY", display)
        .stdin(Stdio::null())
        .spawn()?;
    let until = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if Instant::now() > until {
            return Err("computerd init did not come up".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (shot, size, click) = rt.block_on(async {
        let c = DaemonClient::new(tokio::net::UnixStream::connect(&socket).await?);
        let mut shots = Vec::with_capacity(calls);
        let mut size = 0;
        for i in 0..calls + 3 {
            let t = Instant::now();
            let (_, png) = c.screen_shot(None).await?;
            if i >= 3 {
                shots.push(t.elapsed());
            }
            size = png.len() as u64;
        }
        let click = serde_json::json!({"actions": [{"type": "click", "point": [150, 50]}]});
        let mut clicks = Vec::with_capacity(calls);
        for i in 0..calls + 3 {
            let t = Instant::now();
            let r: InputActionsResult = c.call_as("input.actions", &click).await?;
            if i >= 3 {
                clicks.push(t.elapsed());
            }
            assert!(r.failed.is_none(), "{r:?}");
        }
        Ok::<_, Box<dyn std::error::Error>>((median(shots), size, median(clicks)))
    })?;
    computer_testkit::stop_child(&mut init, Duration::from_secs(3));

    let out = dir.path().join("shot.png");
    let out = out.display();
    let xwd = shell(
        calls,
        display,
        &format!("xwd -root -silent | /usr/bin/convert xwd:- png:{out}"),
    )?;
    let scrot = shell(calls, display, &format!("scrot -o {out}"))?;
    let xdo = shell(calls, display, "xdotool mousemove 150 50 click 1")?;
    let xdo0 = shell(calls, display, "xdotool mousemove 150 50 click --delay 0 1")?;

    println!("1280x800 desktop-like screen, {calls} calls each");
    line(
        &format!("screen.shot via DaemonClient (PNG, {size} bytes)"),
        shot,
    );
    line("xwd -root | convert xwd:- png (a process each)", xwd);
    line("scrot (a process each)", scrot);
    line("input.actions click via DaemonClient", click);
    line("xdotool mousemove + click 1", xdo);
    line("xdotool mousemove + click --delay 0 1", xdo0);
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "ratio xwd|convert / screen.shot      {:>6.1}x",
        r(xwd, shot)
    );
    println!(
        "ratio scrot / screen.shot            {:>6.1}x",
        r(scrot, shot)
    );
    println!(
        "ratio xdotool --delay 0 / click      {:>6.1}x",
        r(xdo0, click)
    );
    println!(
        "ratio xdotool / click                {:>6.1}x",
        r(xdo, click)
    );
    Ok(())
}
