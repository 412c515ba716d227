//! The live viewer against x11vnc with noVNC, on a screen that changes
//! without a pause: a real X window (a 160x160 red square the bench makes
//! with its own X connection) moved across a 1280x800 Xvfb.
//!
//! - ours: a stdio server with `--viewer`, its local desktop (the window is
//!   made on the computer's own Xvfb, reached through that process's
//!   /proc/PID/root), and the page `computer_view` links to;
//! - theirs: a host Xvfb started as a desktop computer's is (same size and
//!   flags), `x11vnc` on it and `websockify` serving noVNC's
//!   `vnc_lite.html`, all with their defaults.
//!
//! Both pages are opened in the same headless Chromium, and one script is
//! injected in each: at every animation frame it reads the canvas's row of
//! pixels through the window's path and counts the frames where it changed.
//!
//! - change to drawn: a move of the window (stamped before the request,
//!   answered by a round trip) until the animation frame whose canvas shows
//!   red where the window now is; the page's clock is set against ours over
//!   CDP (the fastest of 10 round trips);
//! - frames per second: changed canvas frames while the window moves 8 px
//!   every 10 ms;
//! - CPU per frame: utime+stime (/proc/PID/stat) over the same seconds of
//!   every process under the server (server, computerd init and the
//!   connection's daemon) against x11vnc and websockify with its children,
//!   divided by the frames drawn. Xvfb is counted apart, on each side (it
//!   serves the window's moves and the screen reads), and Chromium on
//!   neither.
//!
//! Run on demand, as root like the tests (Xvfb and Chromium installed;
//! `apt-get install x11vnc novnc` for the other side):
//!
//!     cargo bench -p computer-mcp --bench viewer
//!
//! `CMCP_BENCH_CALLS` sets the moves timed (default 30),
//! `CMCP_BENCH_SECONDS` the seconds of moving (default 10).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use computer_providers::cdp::BrowserClient;
use computer_providers::cdp::chromium::HostChromium;
use computerd::client::ComputerClient;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    ConfigureWindowAux, ConnectionExt as _, CreateWindowAux, Window as Xid, WindowClass,
};
use x11rb::rust_connection::{DefaultStream, RustConnection};
use x11rb::wrapper::ConnectionExt as _;

#[path = "support.rs"]
mod support;
use support::{HostX, call, count_from_env, cpu_spent, cpu_tree, installed, line, ms, server_cmd};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The window's side, its top edge, and the two places it is timed at.
const SIDE: u16 = 160;
const TOP: i32 = 320;
const SPOTS: [i32; 2] = [100, 700];
const NOVNC: &str = "/usr/share/novnc";

/// Counts changed canvas frames and stamps the first frame showing red at
/// `bench.watch` (a screen x), on the page's clock in ms since the epoch.
const PROBE: &str = r#"(() => {
  const m = window.bench = { changes: 0, watch: -1, seen: 0, last: null };
  function tick() {
    const c = [...document.querySelectorAll("canvas")].find(c => c.width > 0);
    if (c) {
      const y = Math.floor(400 * c.height / 800), s = c.width / 1280;
      const d = c.getContext("2d").getImageData(0, y, c.width, 1).data;
      let h = 0;
      for (let i = 0; i < d.length; i += 16) h = (Math.imul(h, 31) + d[i] + (d[i + 1] << 8) + (d[i + 2] << 16)) | 0;
      if (m.last !== null && h !== m.last) m.changes++;
      m.last = h;
      const i = Math.floor(m.watch * s) * 4;
      if (m.watch >= 0 && !m.seen && d[i] > 200 && d[i + 1] < 80 && d[i + 2] < 80)
        m.seen = performance.timeOrigin + performance.now();
    }
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
})()"#;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// The moving window, on its own X connection to a display's socket.
struct Window {
    conn: RustConnection,
    id: Xid,
}

impl Window {
    fn open(socket: &Path) -> Res<Window> {
        let (stream, _) = DefaultStream::from_unix_stream(UnixStream::connect(socket)?)?;
        let conn = RustConnection::connect_to_stream(stream, 0)?;
        let id = conn.generate_id()?;
        let root = conn.setup().roots[0].root;
        let aux = CreateWindowAux::new()
            .background_pixel(0xff_0000)
            .override_redirect(1);
        let (x, y) = (SPOTS[0] as i16, TOP as i16);
        conn.create_window(
            0,
            id,
            root,
            x,
            y,
            SIDE,
            SIDE,
            0,
            WindowClass::INPUT_OUTPUT,
            0,
            &aux,
        )?;
        conn.map_window(id)?;
        conn.sync()?;
        Ok(Window { conn, id })
    }

    /// Move it; returns once the X server has done it (a round trip).
    fn move_to(&self, x: i32) -> Res<()> {
        self.conn
            .configure_window(self.id, &ConfigureWindowAux::new().x(x).y(TOP))?;
        self.conn.sync()?;
        Ok(())
    }
}

/// Move the window 8 px every 10 ms, back and forth, until `stop`.
fn keep_moving(w: Arc<Window>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut moves = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let span = 2 * (1280 - SIDE as i64);
            let x = (moves as i64 * 8) % span;
            w.move_to(x.min(span - x) as i32).unwrap();
            moves += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        moves
    })
}

/// A page of the headless Chromium, on its own CDP session.
struct Page<'a> {
    b: &'a BrowserClient,
    target: Value,
    session: String,
    /// The page's clock minus ours, in ms.
    offset: f64,
}

async fn cdp(b: &BrowserClient, method: &str, params: Value, session: Option<&str>) -> Value {
    let mut p = json!({"method": method, "params": params});
    if let Some(s) = session {
        p["sessionId"] = json!(s);
    }
    b.call_value("cdp.send", p).await.unwrap()["result"].clone()
}

impl<'a> Page<'a> {
    async fn open(b: &'a BrowserClient, url: &str) -> Page<'a> {
        let t = cdp(
            b,
            "Target.createTarget",
            json!({"url": "about:blank"}),
            None,
        )
        .await;
        let a = json!({"targetId": t["targetId"], "flatten": true});
        let a = cdp(b, "Target.attachToTarget", a, None).await;
        let session = a["sessionId"].as_str().unwrap().to_string();
        let page = Page {
            b,
            target: t["targetId"].clone(),
            session,
            offset: 0.0,
        };
        let size = json!({"width": 1300, "height": 900, "deviceScaleFactor": 1, "mobile": false});
        page.send("Emulation.setDeviceMetricsOverride", size).await;
        page.send("Page.navigate", json!({ "url": url })).await;
        page
    }

    async fn send(&self, method: &str, params: Value) -> Value {
        cdp(self.b, method, params, Some(&self.session)).await
    }

    async fn eval(&self, expr: &str) -> Value {
        let p = json!({"expression": expr, "returnByValue": true});
        self.send("Runtime.evaluate", p).await["result"]["value"].clone()
    }

    /// Look for the window's middle at `x`, from now.
    async fn watch(&self, x: i32) {
        let mid = x + SIDE as i32 / 2;
        self.eval(&format!("bench.seen = 0; bench.watch = {mid}"))
            .await;
    }

    /// Poll `expr` until it is truthy (not false, 0 or null); its value.
    async fn until(&self, expr: &str, what: &str, within: Duration) -> Value {
        let t = Instant::now();
        loop {
            let v = self.eval(expr).await;
            if !(v.is_null() || v == json!(false) || v == json!(0)) {
                return v;
            }
            assert!(t.elapsed() < within, "{what}: not within {within:?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// The page's clock against ours: the fastest of 10 round trips.
    async fn set_clock(&mut self) {
        let mut best = f64::MAX;
        for _ in 0..10 {
            let t0 = now_ms();
            let page = self
                .eval("performance.timeOrigin + performance.now()")
                .await;
            let t1 = now_ms();
            if t1 - t0 < best {
                best = t1 - t0;
                self.offset = page.as_f64().unwrap() - (t0 + t1) / 2.0;
            }
        }
    }

    async fn close(self) {
        cdp(
            self.b,
            "Target.closeTarget",
            json!({"targetId": self.target}),
            None,
        )
        .await;
    }
}

/// One figure of a side, for the table.
type Get = fn(&Figures) -> f64;

/// Frames per second; change to drawn and CPU per frame in ms.
struct Figures {
    fps: f64,
    median: f64,
    p99: f64,
    cpu_ms: f64,
    xvfb_ms: f64,
}

/// One side, measured the same way: its page at `url`, its window, the
/// processes whose CPU is counted (`roots`, with Xvfb's apart: `xvfb`).
async fn measure(b: &BrowserClient, url: &str, w: Window, roots: &[u32], xvfb: u32) -> Figures {
    let n = count_from_env("CMCP_BENCH_CALLS", 30);
    let secs = count_from_env("CMCP_BENCH_SECONDS", 10) as u64;
    let opened = Instant::now();
    let mut page = Page::open(b, url).await;
    let first = "(() => { const c = [...document.querySelectorAll('canvas')].find(c => c.width >= 640); return !!c; })()";
    page.until(first, "a canvas with the screen", Duration::from_secs(30))
        .await;
    page.eval(PROBE).await;
    page.watch(SPOTS[0]).await;
    page.until("bench.seen", "the window drawn", Duration::from_secs(30))
        .await;
    println!(
        "  window first drawn {:.0} ms after the page was asked for",
        ms(opened.elapsed())
    );
    page.set_clock().await;

    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let x = SPOTS[(i + 1) % 2];
        page.watch(x).await;
        let t = now_ms();
        w.move_to(x).unwrap();
        let seen = page
            .until("bench.seen", "a move drawn", Duration::from_secs(10))
            .await;
        let took = seen.as_f64().unwrap() - page.offset - t;
        lat.push(Duration::from_secs_f64(took.max(0.0) / 1000.0));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let median = ms(line("  change (window moved) to drawn", &mut lat));
    let p99 = ms(support::pct(&mut lat, 0.99));

    let (w, stop) = (Arc::new(w), Arc::new(AtomicBool::new(false)));
    let mover = keep_moving(w.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut all = roots.to_vec();
    all.push(xvfb);
    let (c0, before, t) = (
        page.eval("bench.changes").await,
        cpu_tree(&all),
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (c1, after, took) = (
        page.eval("bench.changes").await,
        cpu_tree(&all),
        t.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    let moves = mover.join().unwrap();
    page.close().await;
    let frames = (c1.as_u64().unwrap() - c0.as_u64().unwrap()).max(1);
    let (cpu, xvfb_cpu) = cpu_spent(&before, &after, "Xvfb");
    let fps = frames as f64 / took.as_secs_f64();
    println!(
        "  {frames} changed frames in {:.1} s: {fps:.1} per second ({moves} moves); CPU {cpu:.2} s, Xvfb {xvfb_cpu:.2} s",
        took.as_secs_f64()
    );
    Figures {
        fps,
        median,
        p99,
        cpu_ms: cpu * 1000.0 / frames as f64,
        xvfb_ms: xvfb_cpu * 1000.0 / frames as f64,
    }
}

/// x11vnc and websockify serving noVNC on a host Xvfb, ended when dropped.
struct Peer {
    x: HostX,
    procs: Vec<Child>,
    port: u16,
}

impl Drop for Peer {
    fn drop(&mut self) {
        for c in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Peer {
    async fn start() -> Result<Peer, String> {
        if !(installed("x11vnc") && installed("websockify") && Path::new(NOVNC).is_dir()) {
            return Err("x11vnc or noVNC is not installed (apt-get install x11vnc novnc)".into());
        }
        let x = HostX::start().ok_or("the host Xvfb did not start")?;
        let port = || std::net::TcpListener::bind("127.0.0.1:0")?.local_addr();
        let (rfb, web) = (
            port().map_err(|e| e.to_string())?,
            port().map_err(|e| e.to_string())?,
        );
        let mut p = Peer {
            x,
            procs: Vec::new(),
            port: web.port(),
        };
        let rfb_port = rfb.port().to_string();
        let vnc = [
            "-display",
            &p.x.display,
            "-rfbport",
            &rfb_port,
            "-localhost",
            "-nopw",
            "-forever",
            "-shared",
            "-quiet",
        ];
        let ws = ["--web", NOVNC, &web.to_string(), &rfb.to_string()];
        for (program, args) in [("x11vnc", &vnc[..]), ("websockify", &ws[..])] {
            let mut cmd = Command::new(program);
            cmd.args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            p.procs
                .push(cmd.spawn().map_err(|e| format!("{program}: {e}"))?);
        }
        for addr in [rfb, web] {
            let t = Instant::now();
            while tokio::net::TcpStream::connect(addr).await.is_err() {
                if t.elapsed() > Duration::from_secs(20) {
                    return Err(format!("nothing listens on {addr} after 20 s"));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(p)
    }
}

/// The server's Xvfb (a process under it) and its display's socket there.
async fn our_display(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    server: u32,
) -> Res<(u32, PathBuf)> {
    let r = client
        .call_tool(call("exec", json!({"command": "echo $DISPLAY"})))
        .await?;
    let out = r.structured_content.as_ref().map(|s| s["stdout"].clone());
    let display = out.as_ref().and_then(Value::as_str).unwrap_or("").trim();
    let n = display
        .strip_prefix(':')
        .ok_or(format!("DISPLAY is {display:?}"))?;
    let xvfb = cpu_tree(&[server])
        .into_iter()
        .find(|(_, (c, _))| c == "Xvfb")
        .ok_or("no Xvfb under the server")?
        .0;
    Ok((
        xvfb,
        PathBuf::from(format!("/proc/{xvfb}/root/tmp/.X11-unix/X{n}")),
    ))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    if !installed("Xvfb") {
        println!("skipped: Xvfb is not installed (apt-get install xvfb)");
        return Ok(());
    }
    let chromium = match HostChromium::start().await {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no headless Chromium ({})", e.message);
            return Ok(());
        }
    };
    let b = chromium.client().await?;
    println!(
        "computer-mcp viewer next to x11vnc + noVNC: a {SIDE}x{SIDE} window moving on a 1280x800 Xvfb"
    );

    println!("computer-mcp (stdio server, --viewer, a local desktop):");
    let state = tempfile::tempdir()?;
    let flags = "--kind desktop --screen 1280x800 --viewer 127.0.0.1:0";
    let flags: Vec<&str> = flags.split(' ').collect();
    let transport = TokioChildProcess::new(server_cmd(state.path(), &flags))?;
    let server = transport.id().ok_or("the server has no pid")?;
    let client = ().serve(transport).await?;
    // The first call (exec) makes the desktop.
    let (xvfb, socket) = our_display(&client, server).await?;
    let r = client.call_tool(call("computer_view", json!({}))).await?;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let url = r.structured_content.as_ref().unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let ours = measure(&b, &url, Window::open(&socket)?, &[server], xvfb).await;
    client.cancel().await?;

    let theirs = match Peer::start().await {
        Ok(p) => {
            println!("x11vnc + websockify + noVNC vnc_lite.html (defaults), on a host Xvfb:");
            let w = Window::open(Path::new(&format!("/tmp/.X11-unix/X{}", &p.x.display[1..])))?;
            let url = format!("http://127.0.0.1:{}/vnc_lite.html", p.port);
            let roots: Vec<u32> = p.procs.iter().map(|c| c.id()).collect();
            Some(measure(&b, &url, w, &roots, p.x.pid()).await)
        }
        Err(why) => {
            println!("skipped: the other side: {why}");
            None
        }
    };

    println!(
        "\n{:<36} {:>12} {:>14} {:>12}",
        "", "computer-mcp", "x11vnc+noVNC", "ours/theirs"
    );
    let rows: [(&str, Get); 5] = [
        ("frames drawn per second", |f| f.fps),
        ("change to drawn, median (ms)", |f| f.median),
        ("change to drawn, p99 (ms)", |f| f.p99),
        ("server CPU per frame (ms)", |f| f.cpu_ms),
        ("Xvfb CPU per frame (ms), apart", |f| f.xvfb_ms),
    ];
    for (name, get) in rows {
        match theirs.as_ref().map(get) {
            Some(t) => println!(
                "{name:<36} {:>12.1} {t:>14.1} {:>12.2}",
                get(&ours),
                get(&ours) / t
            ),
            None => println!("{name:<36} {:>12.1} {:>14} {:>12}", get(&ours), "-", "-"),
        }
    }
    let met = |ok: bool| if ok { "met" } else { "not met" };
    println!(
        "target: at least 15 frames per second ({}), a change drawn within 100 ms at the median ({})",
        met(ours.fps >= 15.0),
        met(ours.median <= 100.0)
    );
    Ok(())
}
