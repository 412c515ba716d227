//! Desktops: screen.shot and input.actions against a real Xvfb, with the
//! X11 fixture (fixtures/x11) logging what arrives.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use computerd::client::{ClientError, ComputerExt, DaemonClient};
use computerd::protocol::*;
use serde_json::{Value, json};

use super::support::*;

mod display;
mod input;

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
        let mut child = computer_testkit::xvfb(&[&format!(":{n}")])
            .args(flags)
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
        let init = on_display(x.name())?;
        let fixture = Fixture::start(&x.name());
        Some(Desktop { init, fixture, x })
    }

    /// [`Desktop::start`] and a client of its init.
    pub async fn with_client() -> Option<(Desktop, DaemonClient)> {
        let d = Self::start()?;
        let c = d.init.client().await;
        Some((d, c))
    }
}

pub async fn actions(c: &DaemonClient, a: Value) -> InputActionsResult {
    c.call_as("input.actions", &json!({ "actions": a }))
        .await
        .unwrap()
}

/// A whole shot: the first chunk and screen.read for the rest.
pub async fn shot(c: &DaemonClient, region: Option<Region>) -> (ScreenShotResult, Vec<u8>) {
    let (r, png) = c.screen_shot(region).await.unwrap();
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

/// An init whose programs (and screen and input) have DISPLAY `display`.
fn on_display(display: impl Into<String>) -> Option<Init> {
    Init::start_with(InitOptions {
        env: vec![("DISPLAY".into(), display.into())],
        ..Default::default()
    })
}

/// A whole-screen screen.shot that must fail: its error.
async fn shot_refused(c: &DaemonClient) -> RpcError {
    rpc(c.call(&ScreenShotParams::default()).await.unwrap_err())
}

fn rpc(e: ClientError) -> RpcError {
    match e {
        ClientError::Rpc(e) => e,
        other => panic!("not an error reply: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_declares_a_desktop_and_a_shot_shows_the_fixtures_colours() {
    let (d, c) = or_skip!(Desktop::with_client().await);
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
            fit: None,
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
    let first = c.call(&ScreenShotParams::default()).await.unwrap();
    assert!(!first.eof);
    let _second = c.call(&ScreenShotParams::default()).await.unwrap();
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
async fn screen_watch_gives_a_first_frame_then_one_only_after_a_change() {
    let (_d, c) = or_skip!(Desktop::with_client().await);
    let watch = |after: u64, wait: u64| ScreenWatchParams {
        after,
        wait_ms: Some(wait),
        max_width: Some(640),
        quality: None,
        regions: false,
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
