//! Desktops: screen.shot and input.actions against a real Xvfb, with the
//! X11 fixture (fixtures/x11) logging what arrives.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use computerd::client::{ClientError, DaemonClient};
use computerd::protocol::*;
use serde_json::{Value, json};

use super::support::*;

/// The X11 fixture, a crate of its own (`computer-x11-fixture`): built
/// once per run, beside this build's computerd, by the cargo that runs
/// the tests (a no-op when it is up to date).
fn fixture() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let daemon = Path::new(env!("CARGO_BIN_EXE_computerd"));
        let profile_dir = daemon.parent().unwrap();
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(other) => other,
        };
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "computer-x11-fixture",
                "--profile",
                profile,
            ])
            .arg("--target-dir")
            .arg(profile_dir.parent().unwrap())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cargo build -p computer-x11-fixture failed: {status}"
        );
        profile_dir.join("computerd-x11-fixture")
    })
}

/// An Xvfb of its own, on a display number no other test holds, ended
/// when dropped.
pub struct Xvfb {
    pub child: Child,
    pub display: u32,
}

impl Xvfb {
    pub fn start() -> Option<Xvfb> {
        if !computer_testkit::need_xvfb() {
            return None;
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let base = 200 + (std::process::id() % 300) * 10;
        for _ in 0..50 {
            let n = base + NEXT.fetch_add(1, Ordering::Relaxed);
            if let Some(x) = Self::on(n) {
                return Some(x);
            }
        }
        panic!("no display number was free for Xvfb");
    }

    /// Xvfb on display `n`, or None when the number is taken.
    pub fn on(n: u32) -> Option<Xvfb> {
        Self::on_with(n, &[])
    }

    /// Xvfb on display `n` with more flags.
    pub fn on_with(n: u32, flags: &[&str]) -> Option<Xvfb> {
        if PathBuf::from(format!("/tmp/.X{n}-lock")).exists() {
            return None;
        }
        let mut child = Command::new("Xvfb")
            .arg(format!(":{n}"))
            .args([
                "-screen",
                "0",
                "1280x800x24",
                "-nolisten",
                "tcp",
                "-noreset",
            ])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sock = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if child.try_wait().unwrap().is_some() {
                return None;
            }
            if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
                return Some(Xvfb { child, display: n });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("Xvfb :{n} did not listen within 10 s");
    }

    pub fn name(&self) -> String {
        format!(":{}", self.display)
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        computer_testkit::stop_child(&mut self.child, Duration::from_secs(2));
    }
}

/// The fixture window on a display, logging to a file.
pub struct Fixture {
    pub child: Child,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Fixture {
    pub fn start(display: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let child = Command::new(fixture())
            .arg("--log")
            .arg(&log)
            .env_clear()
            .env("DISPLAY", display)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let f = Fixture {
            child,
            log,
            _dir: dir,
        };
        f.wait_for("the fixture's ready line", |e| {
            e.iter().any(|e| e["event"] == "ready")
        });
        f
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The events after the first `from`.
    pub fn since(&self, from: usize) -> Vec<Value> {
        self.events().into_iter().skip(from).collect()
    }

    pub fn wait_for(&self, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut last = Vec::new();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            last = self.events();
            if ok(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{what} did not show in the fixture's log within 10 s: {last:?}");
    }

    /// The text the fixture saw typed after event `from`.
    pub fn text_since(&self, from: usize) -> String {
        self.since(from)
            .iter()
            .filter(|e| e["event"] == "text")
            .map(|e| e["text"].as_str().unwrap().to_string())
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Xvfb, the fixture on it, and an init whose DISPLAY names it.
pub struct Desktop {
    pub init: Init,
    pub fixture: Fixture,
    pub x: Xvfb,
}

impl Desktop {
    pub fn start() -> Option<Desktop> {
        let x = Xvfb::start()?;
        let init = Init::start_with(InitOptions {
            env: vec![("DISPLAY".into(), x.name())],
            ..Default::default()
        })?;
        let fixture = Fixture::start(&x.name());
        Some(Desktop { init, fixture, x })
    }
}

pub async fn actions(c: &DaemonClient, a: Value) -> InputActionsResult {
    c.call_as("input.actions", &json!({ "actions": a }))
        .await
        .unwrap()
}

/// A whole shot: the first chunk and screen.read for the rest.
pub async fn shot(c: &DaemonClient, region: Option<Region>) -> (ScreenShotResult, Vec<u8>) {
    let r = c.call(&ScreenShotParams { region }).await.unwrap();
    let mut png = r.data.0.clone();
    let mut eof = r.eof;
    while !eof {
        let more = c
            .call(&ScreenReadParams {
                id: r.id.clone(),
                offset: png.len() as u64,
                max_bytes: None,
            })
            .await
            .unwrap();
        png.extend_from_slice(&more.data.0);
        eof = more.eof;
    }
    assert_eq!(png.len() as u64, r.size);
    (r, png)
}

/// The PNG's size and RGB pixels.
pub fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let d = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut r = d.read_info().unwrap();
    let info = r.info();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    assert!(!info.interlaced);
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let (w, h) = (info.width, info.height);
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let frame = r.next_frame(&mut buf).unwrap();
    buf.truncate(frame.buffer_size());
    assert_eq!(buf.len() as u64, u64::from(w) * u64::from(h) * 3);
    (w, h, buf)
}

fn pixel(rgb: &[u8], w: u32, x: u32, y: u32) -> [u8; 3] {
    let at = ((y * w + x) * 3) as usize;
    [rgb[at], rgb[at + 1], rgb[at + 2]]
}

const RED: [u8; 3] = [255, 0, 0];
const GREEN: [u8; 3] = [0, 255, 0];
const BLUE: [u8; 3] = [0, 0, 255];
const YELLOW: [u8; 3] = [255, 255, 0];

/// Paint pseudo-random pixels on the root window below the fixture.
fn noise(display: &str) {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{ConnectionExt as _, CreateGCAux, ImageFormat};
    let (conn, n) = x11rb::connect(Some(display)).unwrap();
    let root = conn.setup().roots[n].root;
    let depth = conn.setup().roots[n].root_depth;
    let gc = conn.generate_id().unwrap();
    conn.create_gc(gc, root, &CreateGCAux::new()).unwrap();
    let mut seed: u32 = 0x1234_5678;
    for strip in 0..19 {
        let mut data = Vec::with_capacity(1280 * 32 * 4);
        for _ in 0..1280 * 32 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            data.extend_from_slice(&seed.to_le_bytes());
        }
        conn.put_image(
            ImageFormat::Z_PIXMAP,
            root,
            gc,
            1280,
            32,
            0,
            200 + strip * 32,
            0,
            depth,
            &data,
        )
        .unwrap();
    }
    conn.get_input_focus().unwrap().reply().unwrap();
}

fn rpc(e: ClientError) -> RpcError {
    match e {
        ClientError::Rpc(e) => e,
        other => panic!("not an error reply: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_declares_a_desktop_and_a_shot_shows_the_fixtures_colours() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Desktop);
    assert_eq!(
        hello.groups,
        vec![
            Group::Exec,
            Group::Files,
            Group::Processes,
            Group::Screen,
            Group::InputPointer,
            Group::InputKeys
        ]
    );

    // Programs get no DISPLAY from the daemon: it is given in env.
    let (code, out, _) = sh(&d.init, "echo ${DISPLAY-unset}").await;
    assert_eq!((code, out.trim()), (Some(0), "unset"));

    let (r, bytes) = shot(&c, None).await;
    assert_eq!((r.width, r.height), (1280, 800));
    assert_eq!((r.screen_width, r.screen_height), (1280, 800));
    assert_eq!((r.scale, r.format), (1.0, ImageFormat::Png));
    assert!(r.cursor.is_some());
    let (w, h, rgb) = decode(&bytes);
    assert_eq!((w, h), (1280, 800));
    for (x, y, want) in [
        (5, 5, RED),
        (95, 95, RED),
        (105, 5, GREEN),
        (195, 95, GREEN),
        (150, 150, BLUE),
        (50, 150, YELLOW),
    ] {
        assert_eq!(pixel(&rgb, w, x, y), want, "at ({x}, {y})");
    }
    assert_ne!(pixel(&rgb, w, 300, 300), GREEN);

    // A region: its own size, the screen's space.
    let green = Region {
        x: 100,
        y: 0,
        width: 100,
        height: 100,
    };
    let (r, bytes) = shot(&c, Some(green)).await;
    assert!(r.eof, "a 100x100 region fits one reply");
    assert_eq!((r.width, r.height, r.screen_width), (100, 100, 1280));
    let (w, h, rgb) = decode(&bytes);
    assert_eq!((w, h), (100, 100));
    assert!(rgb.chunks(3).all(|p| p == GREEN));

    // Outside the screen: invalid, naming the region and the screen.
    let e = rpc(c
        .call(&ScreenShotParams {
            region: Some(Region {
                x: 1200,
                y: 0,
                width: 100,
                height: 10,
            }),
        })
        .await
        .unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::Invalid));
    assert!(
        e.message.contains("outside the 1280x800 screen"),
        "{}",
        e.message
    );

    // One shot held per connection: a newer shot lets the older go. Noise
    // below the fixture makes a PNG of more than one reply.
    noise(&d.x.name());
    let first = c.call(&ScreenShotParams { region: None }).await.unwrap();
    assert!(!first.eof);
    let _second = c.call(&ScreenShotParams { region: None }).await.unwrap();
    let e = rpc(c
        .call(&ScreenReadParams {
            id: first.id.clone(),
            offset: first.data.len() as u64,
            max_bytes: None,
        })
        .await
        .unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::NotFound));
    // Read in parts, the PNG is whole.
    let (r, bytes) = shot(&c, None).await;
    assert!(r.size > limits::MAX_CHUNK_BYTES, "{}", r.size);
    let (w, _, rgb) = decode(&bytes);
    assert_eq!(pixel(&rgb, w, 150, 150), BLUE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_drags_and_scrolls_land_where_aimed() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let f = &d.fixture;
    let n = f.events().len();
    let r = actions(
        &c,
        json!([
            {"type": "click", "point": [150, 50]},
            {"type": "wait", "ms": 450},
            {"type": "click", "point": [50, 150], "count": 2},
            {"type": "wait", "ms": 450},
            {"type": "click", "point": [150, 150], "button": "right"},
            {"type": "click", "point": [150, 150], "count": 3},
            {"type": "drag", "path": [[10, 10], [60, 60], [120, 120]]},
            {"type": "scroll", "point": [30, 30], "dy": 2, "dx": -1}
        ]),
    )
    .await;
    assert_eq!(
        r,
        InputActionsResult {
            done: 8,
            failed: None
        }
    );
    let ev = f.wait_for("the wheel", |e| {
        e[n..].iter().filter(|e| e["event"] == "wheel").count() == 3
    });
    let ev: Vec<&Value> = ev[n..].iter().filter(|e| e["event"] != "key").collect();
    let downs: Vec<(i64, i64, i64, i64)> = ev
        .iter()
        .filter(|e| e["event"] == "down")
        .map(|e| {
            (
                e["button"].as_i64().unwrap(),
                e["x"].as_i64().unwrap(),
                e["y"].as_i64().unwrap(),
                e["count"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        downs,
        vec![
            (1, 150, 50, 1),
            (1, 50, 150, 1),
            (1, 50, 150, 2),
            (3, 150, 150, 1),
            (1, 150, 150, 1),
            (1, 150, 150, 2),
            (1, 150, 150, 3),
            (1, 10, 10, 1)
        ]
    );
    // The fixture counts as Chromium does, by the X server's stamps: every
    // press and release stamped after the one before it.
    let stamps: Vec<i64> = ev
        .iter()
        .filter(|e| e["event"] == "down" || e["event"] == "up")
        .map(|e| e["time"].as_i64().unwrap())
        .collect();
    assert_eq!(stamps.len(), 16, "{ev:?}");
    assert!(
        stamps.windows(2).all(|w| w[0] < w[1]),
        "the presses and releases share stamps: {stamps:?}"
    );
    let last_up = ev.iter().rev().find(|e| e["event"] == "up").unwrap();
    assert_eq!(
        (last_up["x"].as_i64(), last_up["y"].as_i64()),
        (Some(120), Some(120))
    );
    let wheel: Vec<(i64, i64)> = ev
        .iter()
        .filter(|e| e["event"] == "wheel")
        .map(|e| (e["dx"].as_i64().unwrap(), e["dy"].as_i64().unwrap()))
        .collect();
    assert_eq!(wheel, vec![(0, 1), (0, 1), (-1, 0)], "vertical first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_text_arrives_exactly_through_shift_caps_lock_and_the_remap() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let f = &d.fixture;

    let n = f.events().len();
    let text = "Hello, agentrun! 123";
    let r = actions(&c, json!([{"type": "type", "text": text}])).await;
    assert_eq!(r.failed, None);
    f.wait_for("the typed text", |_| f.text_since(n) == text);

    // Characters the US map lacks come through the keysym remap.
    for text in ["é", "ß", "中", "naïve café 日本 ß"] {
        let n = f.events().len();
        let r = actions(&c, json!([{"type": "type", "text": text}])).await;
        assert_eq!(r.failed, None, "{text}");
        f.wait_for(&format!("{text:?} typed"), |_| f.text_since(n) == text);
    }

    // Caps Lock on: type still gives exactly its text, and Caps Lock stays on.
    let r = actions(&c, json!([{"type": "key", "keys": ["capslock"]}])).await;
    assert_eq!(r.failed, None);
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "type", "text": "Mixed Case, ok?\tyes"}]),
    )
    .await;
    assert_eq!(r.failed, None);
    f.wait_for("text under Caps Lock", |_| {
        f.text_since(n) == "Mixed Case, ok?\tyes"
    });
    // A key action is a keyboard's: Caps Lock applies to it.
    let n = f.events().len();
    actions(&c, json!([{"type": "key", "keys": ["q"]}, {"type": "key", "keys": ["capslock"]}, {"type": "key", "keys": ["q"]}])).await;
    f.wait_for("keys under Caps Lock", |_| f.text_since(n) == "Qq");

    // A combo: pressed in order, released in reverse, with its modifier held.
    let n = f.events().len();
    actions(&c, json!([{"type": "key", "keys": ["ctrl", "a"]}])).await;
    let ev = f.wait_for("ctrl+a", |e| {
        e[n..].iter().filter(|e| e["event"] == "key").count() >= 4
    });
    let keys: Vec<&Value> = ev[n..].iter().filter(|e| e["event"] == "key").collect();
    assert_eq!(keys[0]["keysym"], 0xffe3, "{keys:?}");
    assert_eq!(keys[1]["keysym"], 0x61);
    assert_eq!(
        keys[1]["state"].as_u64().unwrap() & 4,
        4,
        "ctrl held for the a"
    );
    assert_eq!(
        (keys[2]["up"].as_bool(), keys[3]["up"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(keys[3]["keysym"], 0xffe3, "released in reverse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stops_at_its_first_failure_and_lets_go_of_what_it_pressed() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let f = &d.fixture;

    // Refused whole: nothing runs.
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "click", "point": [20, 20]}, {"type": "key", "keys": ["Hyper_Q"]}]),
    )
    .await;
    let failed = r.failed.clone().unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (0, 1, ErrorKind::Invalid)
    );
    assert!(failed.message.contains("Hyper_Q"), "{}", failed.message);
    let many: Vec<Value> = (0..101).map(|_| json!({"type": "click"})).collect();
    let r = actions(&c, Value::Array(many)).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Limit);
    let r = actions(&c, json!([{"type": "tap", "point": [1, 1]}])).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Unsupported);
    let r = actions(&c, json!([{"type": "scroll", "dy": 3, "unit": "px"}])).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Unsupported);

    // Stopped at the point off the display, with the press released.
    let r = actions(
        &c,
        json!([
            {"type": "move", "point": [20, 20]},
            {"type": "down"},
            {"type": "move", "point": [5000, 5]},
            {"type": "click", "point": [60, 60]}
        ]),
    )
    .await;
    let failed = r.failed.clone().unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (2, 2, ErrorKind::Invalid)
    );
    assert!(failed.message.contains("1280x800"), "{}", failed.message);
    let ev = f.wait_for("the release", |e| e[n..].iter().any(|e| e["event"] == "up"));
    let ev: Vec<&Value> = ev[n..].iter().collect();
    assert_eq!(ev.len(), 2, "one press and its release, no click: {ev:?}");
    assert_eq!(
        (ev[0]["event"].as_str(), ev[0]["x"].as_i64()),
        (Some("down"), Some(20))
    );
    assert_eq!(
        (ev[1]["event"].as_str(), ev[1]["x"].as_i64()),
        (Some("up"), Some(20))
    );

    // Nothing was left held: a later click lands as a click.
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "wait", "ms": 450}, {"type": "click", "point": [150, 150]}]),
    )
    .await;
    assert_eq!(r.failed, None);
    let ev = f.wait_for("the later click", |e| {
        e[n..].iter().any(|e| e["event"] == "up")
    });
    assert_eq!(ev[n]["event"], "down");
    assert_eq!(
        (ev[n]["x"].as_i64(), ev[n]["count"].as_i64()),
        (Some(150), Some(1))
    );
    assert_eq!(
        ev[n]["state"].as_u64().unwrap() & 0x100,
        0,
        "button 1 was not still down"
    );

    // A down with no up stays down into the next batch.
    let n = f.events().len();
    let r = actions(&c, json!([{"type": "down", "point": [40, 40]}])).await;
    assert_eq!(r.failed, None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!f.since(n).iter().any(|e| e["event"] == "up"), "still down");
    actions(&c, json!([{"type": "up"}])).await;
    f.wait_for("the next batch's up", |e| {
        e[n..].iter().any(|e| e["event"] == "up")
    });

    // A cancel stops a long wait at once, answers aborted with what was
    // done, and lets go of what the batch pressed; hello answers meanwhile.
    let n = f.events().len();
    let mut raw = d.init.raw().await;
    raw.request(
        7,
        "input.actions",
        json!({"actions": [{"type": "down", "point": [60, 60]}, {"type": "wait", "ms": 60_000}]}),
    )
    .await;
    f.wait_for("the press", |e| e[n..].iter().any(|e| e["event"] == "down"));
    let t = Instant::now();
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Desktop);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "hello waited for the batch"
    );
    raw.send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}))
        .await;
    let reply = raw.reply_to(7).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    let r: InputActionsResult = serde_json::from_value(reply.result.unwrap()).unwrap();
    let failed = r.failed.unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (1, 1, ErrorKind::Aborted)
    );
    f.wait_for("the release after the cancel", |e| {
        e[n..].iter().any(|e| e["event"] == "up" && e["x"] == 60)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_display_is_linux_and_the_display_is_reached_when_it_comes_and_after_it_goes() {
    // No DISPLAY: kind linux, and the methods say why in words.
    let Some(init) = Init::start() else { return };
    let c = init.client().await;
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Linux);
    assert_eq!(
        hello.groups,
        vec![Group::Exec, Group::Files, Group::Processes]
    );
    let e = rpc(c
        .call(&ScreenShotParams { region: None })
        .await
        .unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported));
    assert!(e.message.contains("no display"), "{}", e.message);
    drop(init);

    // A DISPLAY naming another host is refused before anything is sent.
    let Some(init) = Init::start_with(InitOptions {
        env: vec![("DISPLAY".into(), "198.51.100.7:0".into())],
        ..Default::default()
    }) else {
        return;
    };
    let c = init.client().await;
    let t = Instant::now();
    let e = rpc(c
        .call(&ScreenShotParams { region: None })
        .await
        .unwrap_err());
    assert!(e.message.contains("not this computer"), "{}", e.message);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "no connection was tried"
    );
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Linux);
    drop(init);

    // A display that comes after init, goes, and comes back.
    let Some(x) = Xvfb::start() else { return };
    let n = x.display;
    drop(x);
    let Some(init) = Init::start_with(InitOptions {
        env: vec![("DISPLAY".into(), format!(":{n}"))],
        ..Default::default()
    }) else {
        return;
    };
    let c = init.client().await;
    let kind = |c: DaemonClient| async move {
        let h: HelloResult = c.call(&HelloParams::default()).await.unwrap();
        h.kind
    };
    assert_eq!(kind(c.clone()).await, MachineKind::Linux);
    let e = rpc(c
        .call(&ScreenShotParams { region: None })
        .await
        .unwrap_err());
    assert!(e.message.contains("no display answers"), "{}", e.message);
    let x = Xvfb::on(n).expect("the display number is free again");
    assert_eq!(kind(c.clone()).await, MachineKind::Desktop);
    drop(x);
    assert_eq!(kind(c.clone()).await, MachineKind::Linux);
    let _x = Xvfb::on(n).expect("the display number is free again");
    assert_eq!(kind(c.clone()).await, MachineKind::Desktop);
    let (r, _) = shot(&c, None).await;
    assert_eq!(r.width, 1280);
}

/// A display number no Xvfb holds, reserved by its lock file while held.
struct Reserved {
    n: u32,
    lock: PathBuf,
}

impl Reserved {
    fn take() -> Reserved {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        loop {
            let n = 5000 + (std::process::id() % 300) * 10 + NEXT.fetch_add(1, Ordering::Relaxed);
            let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
                .is_ok()
            {
                let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
                return Reserved { n, lock };
            }
        }
    }
    fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/.X11-unix/X{}", self.n))
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// A setup a server could send, with its length filled in.
fn setup_bytes(edit: impl FnOnce(&mut x11rb::protocol::xproto::Setup)) -> Vec<u8> {
    use x11rb::protocol::xproto::*;
    use x11rb::x11_utils::Serialize;
    let mut s = Setup {
        status: 1,
        protocol_major_version: 11,
        protocol_minor_version: 0,
        length: 0,
        release_number: 1,
        resource_id_base: 0x0020_0000,
        resource_id_mask: 0x001f_ffff,
        motion_buffer_size: 0,
        maximum_request_length: 65535,
        image_byte_order: ImageOrder::LSB_FIRST,
        bitmap_format_bit_order: ImageOrder::LSB_FIRST,
        bitmap_format_scanline_unit: 32,
        bitmap_format_scanline_pad: 32,
        min_keycode: 8,
        max_keycode: 255,
        vendor: b"hostile".to_vec(),
        pixmap_formats: vec![Format {
            depth: 24,
            bits_per_pixel: 32,
            scanline_pad: 32,
        }],
        roots: vec![Screen {
            root: 0x100,
            default_colormap: 0x20,
            white_pixel: 0xffffff,
            black_pixel: 0,
            current_input_masks: EventMask::NO_EVENT,
            width_in_pixels: 1280,
            height_in_pixels: 800,
            width_in_millimeters: 300,
            height_in_millimeters: 200,
            min_installed_maps: 1,
            max_installed_maps: 1,
            root_visual: 0x21,
            backing_stores: BackingStore::NOT_USEFUL,
            save_unders: false,
            root_depth: 24,
            allowed_depths: vec![Depth {
                depth: 24,
                visuals: vec![Visualtype {
                    visual_id: 0x21,
                    class: VisualClass::TRUE_COLOR,
                    bits_per_rgb_value: 8,
                    colormap_entries: 256,
                    red_mask: 0xff0000,
                    green_mask: 0xff00,
                    blue_mask: 0xff,
                }],
            }],
        }],
    };
    edit(&mut s);
    let len = s.serialize().len();
    s.length = ((len - 8) / 4) as u16;
    s.serialize()
}

/// A fake X server on a reserved display: it reads the client's setup
/// request and sends `answer`, then for each request after it, `reply`
/// (when given). The bytes it sent are counted.
fn hostile(answer: Vec<u8>, reply: Option<Vec<u8>>) -> (Reserved, std::thread::JoinHandle<usize>) {
    use std::io::{Read, Write};
    let r = Reserved::take();
    std::fs::create_dir_all("/tmp/.X11-unix").unwrap();
    let l = std::os::unix::net::UnixListener::bind(r.socket()).unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        let n = u16::from_le_bytes([head[6], head[7]]) as usize;
        let d = u16::from_le_bytes([head[8], head[9]]) as usize;
        let mut auth = vec![0u8; n.div_ceil(4) * 4 + d.div_ceil(4) * 4];
        s.read_exact(&mut auth).unwrap();
        let mut sent = 0;
        if s.write_all(&answer).is_err() {
            return sent;
        }
        sent += answer.len();
        if let Some(reply) = reply {
            let mut req = [0u8; 4];
            while s.read_exact(&mut req).is_ok() {
                let words = u16::from_le_bytes([req[2], req[3]]) as usize;
                let mut body = vec![0u8; words.saturating_sub(1) * 4];
                if s.read_exact(&mut body).is_err() || s.write_all(&reply).is_err() {
                    break;
                }
                sent += reply.len();
            }
        }
        sent
    });
    (r, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_x_server_is_refused_in_words_before_the_daemon_allocates_for_it() {
    if !need_root() {
        return;
    }
    // A reply header claiming 4 GiB: the connection ends at the header.
    let mut huge = vec![0u8; 32];
    huge[0] = 1;
    huge[2] = 1; // sequence 1
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    type Case = (&'static str, Vec<u8>, Option<Vec<u8>>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "scanline pad",
            setup_bytes(|s| s.pixmap_formats[0].scanline_pad = 7),
            None,
            "scanline pad of 7",
        ),
        (
            "keycodes",
            setup_bytes(|s| s.min_keycode = 3),
            None,
            "keycodes 3 to 255",
        ),
        (
            "a long setup",
            {
                let mut b = setup_bytes(|_| {});
                b[6..8].copy_from_slice(&u16::MAX.to_le_bytes());
                b
            },
            None,
            "setup of 262148 bytes",
        ),
        (
            "a huge reply",
            setup_bytes(|_| {}),
            Some(huge),
            "reply of 17179869212 bytes",
        ),
    ];
    for (what, answer, reply, words) in cases {
        let (r, server) = hostile(answer, reply);
        let Some(init) = Init::start_with(InitOptions {
            env: vec![("DISPLAY".into(), format!(":{}", r.n))],
            ..Default::default()
        }) else {
            return;
        };
        let c = init.client().await;
        let t = Instant::now();
        let e = rpc(c
            .call(&ScreenShotParams { region: None })
            .await
            .unwrap_err());
        assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{what}");
        assert!(e.message.contains(words), "{what}: {}", e.message);
        assert!(t.elapsed() < Duration::from_secs(4), "{what}");
        drop(init);
        server.join().unwrap();
    }
}

fn xauthority(path: &std::path::Path, display: u32, cookie: &[u8]) {
    let mut v = 0xffffu16.to_be_bytes().to_vec(); // FamilyWild
    let num = display.to_string();
    for f in [&b""[..], num.as_bytes(), b"MIT-MAGIC-COOKIE-1", cookie] {
        v.extend_from_slice(&(f.len() as u16).to_be_bytes());
        v.extend_from_slice(f);
    }
    std::fs::write(path, v).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_comes_from_a_regular_xauthority_file_only() {
    let Some(x) = Xvfb::start() else { return };
    let n = x.display;
    drop(x);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("Xauthority");
    xauthority(&file, n, b"0123456789abcdef");
    let _x = Xvfb::on_with(n, &["-auth", file.to_str().unwrap()]).expect("display free");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let wrong = dir.path().join("wrong");
    xauthority(&wrong, n, b"fedcba9876543210");
    for (path, want) in [
        (&wrong, Some("refused the connection")),
        (&file, None),
        (&link, Some("symbolic link")),
    ] {
        let Some(init) = Init::start_with(InitOptions {
            env: vec![
                ("DISPLAY".into(), format!(":{n}")),
                ("XAUTHORITY".into(), path.to_str().unwrap().into()),
            ],
            ..Default::default()
        }) else {
            return;
        };
        let c = init.client().await;
        let r = c.call(&ScreenShotParams { region: None }).await;
        let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
        match want {
            None => {
                assert_eq!(r.unwrap().width, 1280);
                assert_eq!(hello.kind, MachineKind::Desktop);
            }
            Some(words) => {
                let e = rpc(r.unwrap_err());
                assert!(
                    e.message.contains(words),
                    "{}: {}",
                    path.display(),
                    e.message
                );
                assert_eq!(hello.kind, MachineKind::Linux);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_watch_gives_a_first_frame_then_one_only_after_a_change() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let watch = |after: u64, wait: u64| ScreenWatchParams {
        after,
        wait_ms: Some(wait),
        max_width: Some(640),
        quality: None,
    };
    let r = c.call(&watch(0, 2000)).await.unwrap();
    assert_eq!((r.seq, r.changed), (1, true));
    let f = r.frame.unwrap();
    assert_eq!(f.format, ImageFormat::Jpeg);
    assert_eq!(
        (f.frame_width, f.frame_height, f.width, f.height),
        (640, 400, 1280, 800)
    );
    assert_eq!(&f.data.0[..2], &[0xff, 0xd8], "a JPEG");
    assert!(f.eof && f.size == f.data.len() as u64);

    // Nothing changed: changed false once waitMs is over, and no frame.
    let t = Instant::now();
    let r = c.call(&watch(1, 300)).await.unwrap();
    assert_eq!((r.seq, r.changed, r.frame.is_none()), (1, false, true));
    assert!(t.elapsed() >= Duration::from_millis(300));

    // A pointer move is a change.
    actions(&c, json!([{"type": "move", "point": [700, 500]}])).await;
    let r = c.call(&watch(1, 5000)).await.unwrap();
    assert_eq!((r.seq, r.changed), (2, true));
    assert_eq!(r.frame.as_ref().unwrap().cursor, Some([700, 500]));
    // An older ack gets the newest frame at once.
    let t = Instant::now();
    let again = c.call(&watch(1, 5000)).await.unwrap();
    assert_eq!(again.seq, 2);
    assert_eq!(again.frame, r.frame);
    assert!(t.elapsed() < Duration::from_secs(1));

    // Bounds, and one watch per connection.
    let e = rpc(c.call(&watch(2, 10_001)).await.unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::Limit));
    let e = rpc(c.call(&watch(9, 10)).await.unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::Invalid));
    let c2 = c.clone();
    let waiting = tokio::spawn(async move { c2.call(&watch(2, 1500)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = rpc(c.call(&watch(2, 100)).await.unwrap_err());
    assert_eq!(e.kind(), Some(ErrorKind::Limit));
    assert!(!waiting.await.unwrap().unwrap().changed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remap_reuses_keycodes_once_settled_and_refuses_what_cannot_fit() {
    let Some(d) = Desktop::start() else { return };
    let c = d.init.client().await;
    let f = &d.fixture;
    let cjk =
        |from: u32, n: u32| -> String { (from..from + n).filter_map(char::from_u32).collect() };
    // More distinct characters than the map can lend at once: refused
    // before any key, saying how many it can.
    let n = f.events().len();
    let r = actions(&c, json!([{"type": "type", "text": cjk(0x4e00, 300)}])).await;
    let failed = r.failed.unwrap();
    assert_eq!((r.done, failed.kind), (0, ErrorKind::Limit));
    assert!(
        failed.message.contains("type it in parts"),
        "{}",
        failed.message
    );
    let room: u32 = failed
        .message
        .split("can lend ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(room >= 2, "{}", failed.message);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        f.since(n).iter().all(|e| e["event"] != "key"),
        "no key was sent"
    );

    // As many as it can lend, then as many others: the second batch moves
    // every binding, each once it has settled, and both arrive exactly.
    for from in [0x4e00, 0x4e00 + room] {
        let text = cjk(from, room);
        let n = f.events().len();
        let r = actions(&c, json!([{"type": "type", "text": text}])).await;
        assert_eq!(r.failed, None);
        f.wait_for("the CJK text", |_| f.text_since(n) == text);
    }
}
