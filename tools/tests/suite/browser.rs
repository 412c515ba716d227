//! The browser family against a real headless Chromium (Debian's, started
//! on this machine by the providers' `HostChromium`, driven through its
//! `BrowserClient`), on pages a tiny HTTP server of the test serves on
//! 127.0.0.1. Skips without Chromium unless COMPUTER_MCP_REQUIRE names
//! chromium.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_providers::cdp::HostChromium;
use computer_testkit::need_chromium;
use computer_tools::{ComputerState, ToolContext, registry};
use computerd::protocol::SettingKind;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::text;

const SECRET: &str = "hunter2-very-secret";

const FORM: &str = r#"<!doctype html><html><head><title>Sign up</title></head><body>
<h1>Sign up</h1>
<form action="/submit" method="post">
<label>Name <input name="name" id="name"></label>
<label>Password <input type="password" name="pw" id="pw"></label>
<label>Colour <select name="color" id="color"><option value="r">Red</option><option value="g">Green</option><option value="b">Blue</option></select></label>
<label><input type="checkbox" name="agree" id="agree"> I agree</label>
<button type="submit">Send</button>
</form>
<a href="/other">Other page</a>
</body></html>"#;

const OTHER: &str = r#"<!doctype html><html><head><title>Other</title></head><body><p>The other page.</p><button>Nothing</button></body></html>"#;

/// A page that records every click: where and on what.
const CLICKS: &str = r#"<!doctype html><html><head><title>Clicks</title>
<style>body{margin:0} #pad{position:absolute; left:300px; top:200px; width:120px; height:80px; background:#c33}</style></head>
<body><div id="pad">pad</div>
<script>window.clicks=[]; document.addEventListener('click', e => window.clicks.push([e.clientX, e.clientY, e.target.id]));</script>
</body></html>"#;

/// A button with an overlay on top of it.
const COVERED: &str = r#"<!doctype html><html><head><title>Covered</title>
<style>#go{position:absolute; left:20px; top:20px; width:100px; height:40px}
.overlay{position:fixed; left:0; top:0; width:100%; height:100%; background:rgba(0,0,0,.3)}</style></head>
<body><button id="go" onclick="window.hit=1">Go</button><div class="overlay"></div></body></html>"#;

/// A button that opens an alert.
const DIALOG: &str = r#"<!doctype html><html><head><title>Dialog</title></head>
<body><button onclick="alert('hello there'); window.after = 1">Alert me</button></body></html>"#;

/// The benchmark's page: fifty links and a button that counts its clicks.
fn bench_page() -> String {
    let mut links = String::new();
    for i in 0..50 {
        links.push_str(&format!(
            "<li><a href=\"#item{i}\">Item number {i}</a></li>"
        ));
    }
    format!(
        "<!doctype html><html><head><title>Bench</title></head><body><h1>Bench</h1><ul>{links}</ul><button onclick=\"document.getElementById('n').textContent = ++window.count\">Count</button><p id=\"n\">0</p><script>window.count = 0</script></body></html>"
    )
}

/// A tall page with a list that scrolls on its own, and a button at its foot.
fn scroll_page() -> String {
    let items: String = (1..=40)
        .map(|i| format!("<button style=\"display:block;height:40px\">Item {i}</button>"))
        .collect();
    format!(
        r#"<!doctype html><html><head><title>Scroll</title>
<style>body{{margin:0}} #list{{height:200px; width:300px; overflow:auto}}</style></head>
<body><div id="list">{items}</div><div style="height:3000px"></div>
<button id="bottom" onclick="window.bottom = 1">Bottom</button></body></html>"#
    )
}

/// An HTML drag and drop, a knob moved by plain mouse events, and a button
/// out of view.
const DRAG: &str = r#"<!doctype html><html><head><title>Drag</title>
<style>body{margin:0} div{position:absolute}
#item{left:20px; top:20px; width:80px; height:40px; background:#36c}
#zone{left:300px; top:20px; width:150px; height:100px; background:#eee}
#knob{left:20px; top:200px; width:30px; height:30px; background:#c63}
#after{position:absolute; left:400px; top:300px}
#far{position:absolute; left:20px; top:4000px}</style></head>
<body>
<div id="item" draggable="true" role="button" aria-label="Item">Item</div>
<div id="zone" role="button" aria-label="Zone">Drop here</div>
<div id="knob" role="slider" aria-label="Knob" aria-valuenow="0" tabindex="0"></div>
<button id="after" onclick="window.afterClicks = (window.afterClicks || 0) + 1">After</button>
<button id="far">Far</button>
<script>
document.getElementById('item').addEventListener('dragstart', e => e.dataTransfer.setData('text/plain', 'payload-7'));
const zone = document.getElementById('zone');
zone.addEventListener('dragover', e => e.preventDefault());
zone.addEventListener('drop', e => { e.preventDefault(); window.dropped = e.dataTransfer.getData('text/plain'); });
const knob = document.getElementById('knob'); let down = null;
knob.addEventListener('mousedown', e => { down = e.clientX; });
document.addEventListener('mousemove', e => { if (down !== null) knob.style.left = (e.clientX - 15) + 'px'; });
document.addEventListener('mouseup', e => { if (down !== null) { window.knob = [down, e.clientX]; down = null; } });
</script></body></html>"#;

/// A page whose button is inside a same-site iframe.
const FRAMED: &str = r#"<!doctype html><html><head><title>Framed</title></head>
<body><p>Outside.</p><iframe id="f" src="/inner" style="position:absolute; left:150px; top:120px; width:300px; height:150px"></iframe></body></html>"#;

const INNER: &str = r#"<!doctype html><html><body><button onclick="parent.inner = (parent.inner || 0) + 1">Inside</button></body></html>"#;

/// What the test server saw: each request's line and body.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, String)>>);

/// A server on 127.0.0.1 for the pages above; `/hang` never answers.
async fn serve() -> (String, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut c, _)) = l.accept().await else {
                return;
            };
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body_start) = loop {
                    let Ok(n) = c.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (String::from_utf8_lossy(&buf[..i]).to_string(), i + 4);
                    }
                };
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < body_start + len {
                    let Ok(n) = c.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[body_start..]).to_string();
                let line = head.lines().next().unwrap_or("").to_string();
                let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                s.0.lock().unwrap().push((line, body));
                let page = match path.as_str() {
                    "/" => FORM.to_string(),
                    "/submit" => "<!doctype html><title>Thanks</title><p>Thanks.</p>".into(),
                    "/other" => OTHER.into(),
                    "/clicks" => CLICKS.into(),
                    "/covered" => COVERED.into(),
                    "/dialog" => DIALOG.into(),
                    "/bench" => bench_page(),
                    "/framed" => FRAMED.into(),
                    "/inner" => INNER.into(),
                    "/scroll" => scroll_page(),
                    "/drag" => DRAG.into(),
                    "/hang" => {
                        tokio::time::sleep(Duration::from_secs(120)).await;
                        return;
                    }
                    _ => {
                        let _ = c
                            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                            .await;
                        return;
                    }
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = c.write_all(reply.as_bytes()).await;
            });
        }
    });
    (base, seen)
}

/// A browser and the tool context around its client; every result any
/// call got, to hold the password to.
struct Browser {
    _chromium: Option<HostChromium>,
    ctx: ToolContext,
    results: Mutex<Vec<String>>,
}

impl Browser {
    async fn start() -> Option<Browser> {
        if !need_chromium() {
            return None;
        }
        let chromium = HostChromium::start().await.unwrap();
        let client = chromium.client().await.unwrap();
        let ctx = ToolContext {
            client: Arc::new(client),
            facts: Default::default(),
            settings: Default::default(),
            progress: None,
            extend: None,
            state: ComputerState::new(),
            cancel: Default::default(),
            resources: None,
        };
        Some(Browser {
            _chromium: Some(chromium),
            ctx,
            results: Mutex::new(Vec::new()),
        })
    }

    async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let Value::Object(m) = args else {
            panic!("arguments are an object")
        };
        let m: Map<String, Value> = m;
        let r = tokio::time::timeout(
            Duration::from_secs(90),
            registry()
                .family(SettingKind::Browser)
                .expect("the browser family")
                .call(name, Some(m), &self.ctx),
        )
        .await
        .expect("the tool answered within 90 s")
        .expect("a known tool");
        self.results.lock().unwrap().push(format!(
            "{} {}",
            serde_json::to_string(&r.content).unwrap(),
            r.structured_content
                .as_ref()
                .map(|v| v.to_string())
                .unwrap_or_default()
        ));
        r
    }

    async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args.clone()).await;
        let t = text(&r);
        assert_eq!(r.is_error, Some(false), "{name} {args} failed: {t}");
        (t, r.structured_content.unwrap_or(Value::Null))
    }

    async fn err(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args.clone()).await;
        let t = text(&r);
        assert_eq!(r.is_error, Some(true), "{name} {args} should fail: {t}");
        t
    }

    /// The ref on the snapshot line that contains `needle`.
    fn ref_of(snapshot: &str, needle: &str) -> String {
        let line = snapshot
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{snapshot}"));
        let i = line.find("[ref=").expect("a ref on the line") + 5;
        line[i..].split(']').next().unwrap().to_string()
    }

    /// Wait (up to 20 s) until the tab's title is `title`.
    async fn wait_title(&self, title: &str) {
        for _ in 0..200 {
            let r = self
                .call("browser_eval", json!({"expression": "document.title"}))
                .await;
            if text(&r) == format!("{title:?}") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the page never got the title {title:?}");
    }

    /// An expression's value in the page, as the tool shows it.
    async fn js(&self, expression: &str) -> String {
        self.ok("browser_eval", json!({"expression": expression}))
            .await
            .0
    }

    /// The browser still answers.
    async fn answers(&self) {
        let (t, _) = self
            .ok("browser_eval", json!({"expression": "1 + 1"}))
            .await;
        assert_eq!(t, "2");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_by_refs_and_submitted_and_the_password_never_shows() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let (base, seen) = serve().await;
    let (t, out) = b
        .ok("browser_navigate", json!({"url": format!("{base}/")}))
        .await;
    assert_eq!(out["title"], "Sign up", "{t}");
    assert!(t.contains("browser_snapshot"), "{t}");

    let (snap, out) = b.ok("browser_snapshot", json!({})).await;
    assert_eq!(out["snapshot"], 1, "{snap}");
    let name = Browser::ref_of(&snap, "textbox \"Name\"");
    let pw = Browser::ref_of(&snap, "textbox \"Password\"");
    let colour = Browser::ref_of(&snap, "combobox");
    let agree = Browser::ref_of(&snap, "checkbox \"I agree\"");
    let send = Browser::ref_of(&snap, "button \"Send\"");
    assert!(snap.contains("- heading \"Sign up\" [level=1]"), "{snap}");
    assert!(snap.contains("link \"Other page\""), "{snap}");
    assert!(
        snap.contains(&format!(
            "- textbox \"Password\" [ref={pw}]: (password, empty)"
        )),
        "{snap}"
    );

    let (t, _) = b
        .ok("browser_type", json!({"ref": name, "text": "Ada"}))
        .await;
    assert!(t.contains("it now holds \"Ada\""), "{t}");
    let (t, _) = b
        .ok("browser_type", json!({"ref": pw, "text": SECRET}))
        .await;
    assert!(t.contains("password field"), "{t}");
    let (t, _) = b
        .ok(
            "browser_select",
            json!({"target": colour, "values": ["Green"]}),
        )
        .await;
    assert!(t.contains("\"Green\" selected"), "{t}");
    // `element` (a description, as Playwright's MCP tools take it) rides along.
    let (t, _) = b
        .ok(
            "browser_click",
            json!({"ref": agree, "element": "the agree box"}),
        )
        .await;
    assert!(t.starts_with(&format!("clicked {agree} (checkbox")), "{t}");

    // The snapshot after filling shows the values, the password masked.
    let (snap2, _) = b.ok("browser_snapshot", json!({})).await;
    assert!(snap2.contains("(password, not shown)"), "{snap2}");
    assert!(snap2.contains(": Ada"), "{snap2}");
    assert!(snap2.contains("[checked]"), "{snap2}");
    // The first snapshot's refs are older now: refused, never retargeted.
    let e = b.err("browser_click", json!({"ref": send})).await;
    assert!(e.contains("older snapshot"), "{e}");
    assert!(e.contains("take a new snapshot"), "{e}");

    let send = Browser::ref_of(&snap2, "button \"Send\"");
    let (t, out) = b.ok("browser_click", json!({"ref": send})).await;
    // Seen when it starts within the click's short look (a loaded machine
    // may be slower; the refusal below holds either way).
    if out["navigated"] == true {
        assert!(t.contains("/submit"), "{t}");
    }
    b.wait_title("Thanks").await;
    let posted = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .find(|(l, _)| l.starts_with("POST /submit"))
        .map(|(_, body)| body.clone())
        .expect("the form was posted");
    assert_eq!(posted, format!("name=Ada&pw={SECRET}&color=g&agree=on"));

    // A ref from before the navigation is refused with the next step.
    let e = b
        .err("browser_type", json!({"ref": name, "text": "x"}))
        .await;
    assert!(e.contains("take a new snapshot"), "{e}");
    let (only, _) = b
        .ok(
            "browser_snapshot",
            json!({"page": 1, "filter": "interactive"}),
        )
        .await;
    assert!(!only.contains("heading"), "{only}");
    let (snap3, _) = b.ok("browser_snapshot", json!({})).await;
    assert!(snap3.contains("Thanks"), "{snap3}");

    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");
    assert!(!all.contains('•'), "a masked value's bullets showed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_from_before_a_navigation_is_refused_and_bad_input_is_named() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let (base, _) = serve().await;
    b.ok("browser_navigate", json!({"url": format!("{base}/")}))
        .await;
    let (only, _) = b
        .ok("browser_snapshot", json!({"filter": "interactive"}))
        .await;
    assert!(!only.contains("heading"), "{only}");
    assert!(only.contains("\n- textbox \"Name\" [ref=e1]"), "{only}");
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let link = Browser::ref_of(&snap, "link \"Other page\"");
    let name = Browser::ref_of(&snap, "textbox \"Name\"");
    // A select refuses an option it lacks, naming those it has; a field
    // that is no select says what to use.
    let colour = Browser::ref_of(&snap, "combobox");
    let e = b
        .err(
            "browser_select",
            json!({"ref": colour, "values": ["Purple"]}),
        )
        .await;
    assert!(
        e.ends_with("has no option \"Purple\"; its options are: Red (value r); Green (value g); Blue (value b); nothing was changed"),
        "{e}"
    );
    let e = b
        .err("browser_select", json!({"ref": name, "values": ["x"]}))
        .await;
    assert!(
        e.contains("is a <input>, not a <select>: type into it with browser_type"),
        "{e}"
    );
    let (t, out) = b.ok("browser_click", json!({"ref": link})).await;
    if out["navigated"] == true {
        assert!(t.contains("/other"), "{t}");
    }
    b.wait_title("Other").await;
    let e = b.err("browser_click", json!({"ref": name})).await;
    assert!(
        e.contains("taken before the page navigated") && e.contains("take a new snapshot"),
        "{e}"
    );
    assert!(e.ends_with("nothing was done"), "{e}");

    // Back and forward.
    let (t, out) = b.ok("browser_navigate", json!({"action": "back"})).await;
    assert_eq!(out["title"], "Sign up", "{t}");
    let (_, out) = b.ok("browser_navigate", json!({"url": "forward"})).await;
    assert_eq!(out["title"], "Other");

    // Bad schemes are refused naming url, and nothing is sent.
    for bad in [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "chrome://version",
        "data:text/html,x",
    ] {
        let e = b.err("browser_navigate", json!({"url": bad})).await;
        assert!(e.starts_with("url has the scheme "), "{e}");
    }
    // An unknown ref, a ref that is no ref.
    let e = b.err("browser_click", json!({"ref": "e999"})).await;
    assert!(e.contains("is no ref of any snapshot"), "{e}");
    let e = b
        .err("browser_click", json!({"ref": "submit-button"}))
        .await;
    assert!(e.contains("is not a ref"), "{e}");
    // An expression past its bound.
    let big = "1;".repeat(40 * 1024);
    let e = b.err("browser_eval", json!({"expression": big})).await;
    assert!(
        e.starts_with("expression is 81920 bytes; at most 64 KiB"),
        "{e}"
    );
    // An expression that throws says so.
    let e = b
        .err(
            "browser_eval",
            json!({"expression": "throw new Error('boom')"}),
        )
        .await;
    assert!(e.contains("boom"), "{e}");

    // A server that is not there: the browser's words, and it answers.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let e = b.err("browser_navigate", json!({"url": gone})).await;
    assert!(
        e.starts_with(&format!("{gone} did not open: net::ERR_CONNECTION_REFUSED")),
        "{e}"
    );
    b.answers().await;
    // A timeout past its bound is named.
    let e = b
        .err(
            "browser_navigate",
            json!({"url": base, "timeout_ms": 90_000}),
        )
        .await;
    assert!(
        e.starts_with("timeout_ms is 90000; give 1000 to 60000"),
        "{e}"
    );

    // A page that never loads ends within its bound, the browser answering.
    let e = b
        .err(
            "browser_navigate",
            json!({"url": format!("{base}/hang"), "timeout_ms": 2000}),
        )
        .await;
    assert!(
        e.starts_with("the page did not finish loading within 2 s"),
        "{e}"
    );
    assert!(e.contains("the browser still answers"), "{e}");
    b.answers().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_at_screenshot_coordinates_lands_and_a_covered_ref_is_not_clicked() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let (base, _) = serve().await;
    b.ok("browser_navigate", json!({"url": format!("{base}/clicks")}))
        .await;
    // A scaled screenshot: its pixels are not the viewport's.
    let r = b
        .call("browser_screenshot", json!({"max_width": 400}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let img = r.content[0].as_image().expect("an image first");
    assert_eq!(img.mime_type, "image/png");
    let out = r.structured_content.clone().unwrap();
    assert_eq!(out["frame"], "b1");
    let (w, vw, vh) = (
        out["width"].as_f64().unwrap(),
        out["viewport_width"].as_f64().unwrap(),
        out["viewport_height"].as_f64().unwrap(),
    );
    assert_eq!(w, 400.0, "{out}");
    let scale = out["scale"].as_f64().unwrap();
    // The pad is at 300..420 x 200..280 in the viewport: its middle, in image pixels.
    let (x, y) = ((360.0 * scale) as i64, (240.0 * scale) as i64);
    let (t, _) = b.ok("browser_click", json!({"x": x, "y": y})).await;
    assert!(t.contains("frame b1"), "{t}");
    assert!(t.contains("id=pad"), "{t}");
    let (clicks, _) = b
        .ok(
            "browser_eval",
            json!({"expression": "JSON.stringify(window.clicks)"}),
        )
        .await;
    let clicks: Value =
        serde_json::from_str(&serde_json::from_str::<String>(&clicks).unwrap()).unwrap();
    assert_eq!(clicks.as_array().unwrap().len(), 1, "{clicks}");
    assert_eq!(clicks[0][2], "pad", "{clicks}");
    let (cx, cy) = (
        clicks[0][0].as_f64().unwrap(),
        clicks[0][1].as_f64().unwrap(),
    );
    assert!(
        (cx - 360.0).abs() <= 2.0 / scale && (cy - 240.0).abs() <= 2.0 / scale,
        "{clicks}"
    );
    // Outside the frame: refused, nothing clicked.
    let e = b.err("browser_click", json!({"x": 400, "y": 10})).await;
    assert!(e.contains("is outside the 400x"), "{e}");
    assert!(vw > 0.0 && vh > 0.0);

    // A covered button: what was confirmed, and that nothing was clicked.
    b.ok(
        "browser_navigate",
        json!({"url": format!("{base}/covered")}),
    )
    .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let go = Browser::ref_of(&snap, "button \"Go\"");
    let e = b.err("browser_click", json!({"ref": go})).await;
    assert!(
        e.starts_with(&format!(
            "scrolled {go} (button \"Go\") into view; the point"
        )),
        "{e}"
    );
    assert!(e.contains("covered by <div class=overlay>"), "{e}");
    assert!(e.contains("nothing was clicked"), "{e}");
    let (hit, _) = b
        .ok(
            "browser_eval",
            json!({"expression": "window.hit === undefined"}),
        )
        .await;
    assert_eq!(hit, "true");

    // A click that opens an alert: the alert is dismissed, and said so.
    b.ok("browser_navigate", json!({"url": format!("{base}/dialog")}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let alert = Browser::ref_of(&snap, "button \"Alert me\"");
    let (t, _) = b.ok("browser_click", json!({"ref": alert})).await;
    assert!(
        t.contains("the page opened an alert dialog saying \"hello there\", which was dismissed"),
        "{t}"
    );
    let (after, _) = b
        .ok("browser_eval", json!({"expression": "window.after"}))
        .await;
    assert_eq!(after, "1");
    b.ok(
        "browser_navigate",
        json!({"url": format!("{base}/covered")}),
    )
    .await;

    // A button inside a same-site iframe: shown under it, clicked by ref.
    b.ok("browser_navigate", json!({"url": format!("{base}/framed")}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert!(
        snap.contains("- Iframe\n  - button \"Inside\" [ref="),
        "{snap}"
    );
    let inside = Browser::ref_of(&snap, "button \"Inside\"");
    b.ok("browser_click", json!({"ref": inside})).await;
    let (n, _) = b
        .ok("browser_eval", json!({"expression": "window.inner"}))
        .await;
    assert_eq!(n, "1");
    b.ok(
        "browser_navigate",
        json!({"url": format!("{base}/covered")}),
    )
    .await;

    // Anthropic's typed target.
    let (t, _) = b
        .ok(
            "browser_hover",
            json!({"target": {"type": "coordinate", "x": 5, "y": 5}}),
        )
        .await;
    assert!(t.starts_with("the pointer is over (5, 5)"), "{t}");

    // Keys, hover, text, console, network, tabs.
    b.ok("browser_press", json!({"key": "Tab"})).await;
    let (t, _) = b.ok("browser_get_text", json!({})).await;
    assert!(t.contains("Go"), "{t}");
    b.ok(
        "browser_eval",
        json!({"expression": "console.warn('careful', 3)"}),
    )
    .await;
    let (t, _) = b.ok("browser_console", json!({})).await;
    assert!(t.contains("warning: careful 3"), "{t}");
    let (t, _) = b.ok("browser_network", json!({})).await;
    assert!(t.contains("/covered -> 200 text/html"), "{t}");
    let (t, out) = b
        .ok(
            "browser_tabs",
            json!({"action": "new", "url": format!("{base}/other")}),
        )
        .await;
    assert_eq!(out["tabs"].as_array().unwrap().len(), 2, "{t}");
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert!(snap.contains("The other page."), "{snap}");
    let tabs = out["tabs"].as_array().unwrap().clone();
    let at = |end: &str| {
        tabs.iter()
            .find(|t| t["url"].as_str().unwrap().ends_with(end))
            .unwrap_or_else(|| panic!("no tab at {end}: {tabs:?}"))["index"]
            .clone()
    };
    let (covered, other) = (at("/covered"), at("/other"));
    // Anthropic's tab_id: the call acts in that tab, which becomes current.
    let covered_id = tabs[covered.as_u64().unwrap() as usize]["tab_id"].clone();
    let (t, _) = b
        .ok("browser_get_text", json!({"tab_id": covered_id}))
        .await;
    assert!(t.contains("Go"), "{t}");
    let e = b.err("browser_get_text", json!({"tab_id": "NOPE"})).await;
    assert!(e.starts_with("tab_id \"NOPE\" is no open tab"), "{e}");
    b.ok("browser_tabs", json!({"action": "switch", "index": other}))
        .await;
    let (_, out) = b
        .ok(
            "browser_tabs",
            json!({"action": "switch", "index": covered}),
        )
        .await;
    let i = covered.as_u64().unwrap() as usize;
    assert_eq!(out["tabs"][i]["current"], true, "{out}");
    // The other tab's snapshot refs are refused here.
    let nothing = Browser::ref_of(&snap, "button \"Nothing\"");
    let e = b.err("browser_click", json!({"ref": nothing})).await;
    assert!(e.contains("another tab"), "{e}");
    let (_, out) = b
        .ok("browser_tabs", json!({"action": "close", "index": other}))
        .await;
    assert_eq!(out["tabs"].as_array().unwrap().len(), 1);
    // A tab the page closes itself: one call says so, the next acts in
    // another tab.
    b.ok(
        "browser_eval",
        json!({"expression": "window.open('/other') !== null"}),
    )
    .await;
    let mut popup = None;
    for _ in 0..50 {
        let (_, out) = b.ok("browser_tabs", json!({"action": "list"})).await;
        popup = out["tabs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["url"].as_str().unwrap().ends_with("/other"))
            .map(|t| t["index"].clone());
        if popup.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.ok(
        "browser_tabs",
        json!({"action": "switch", "index": popup.expect("the popup")}),
    )
    .await;
    let _ = b
        .call("browser_eval", json!({"expression": "window.close()"}))
        .await;
    let (mut said, mut words) = (false, String::new());
    for _ in 0..50 {
        let r = b
            .call("browser_eval", json!({"expression": "location.pathname"}))
            .await;
        words = text(&r);
        said |= r.is_error == Some(true) && words.contains("the tab is gone");
        if words == "\"/covered\"" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(said, "no call said the tab is gone; the last: {words}");
    assert_eq!(words, "\"/covered\"");
    b.answers().await;
}

/// The wheel scrolls the area under it and says where it stands; at an
/// end it says nothing moved; a ref alone is scrolled into view, and refs
/// stay valid across scrolls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wheel_scrolls_the_area_under_it_and_says_where_it_stands() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let (base, _) = serve().await;
    b.ok("browser_navigate", json!({"url": format!("{base}/scroll")}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let item1 = Browser::ref_of(&snap, "button \"Item 1\"");
    let bottom = Browser::ref_of(&snap, "button \"Bottom\"");

    // The viewport's middle is below the list: the page scrolls.
    let (t, out) = b
        .ok(
            "browser_scroll",
            json!({"direction": "down", "amount": 500}),
        )
        .await;
    assert!(t.contains("the page scrolled to y 500 of"), "{t}");
    assert_eq!(out["navigated"], false);
    assert_eq!(b.js("window.scrollY").await, "500");
    let (t, _) = b
        .ok(
            "browser_scroll",
            json!({"direction": "up", "amount": 100000}),
        )
        .await;
    assert!(t.contains("the page scrolled to y 0 of"), "{t}");
    let (t, _) = b.ok("browser_scroll", json!({"direction": "up"})).await;
    assert!(
        t.contains("nothing moved: the page stands at y 0 of") && t.contains("cannot scroll up"),
        "{t}"
    );

    // Over the list: the list scrolls, the page does not.
    let (t, _) = b
        .ok(
            "browser_scroll",
            json!({"ref": item1, "direction": "down", "amount": 120}),
        )
        .await;
    assert!(
        t.contains("the area <div id=list> scrolled to y 120 of"),
        "{t}"
    );
    assert!(!t.contains("the page scrolled"), "{t}");
    assert_eq!(
        b.js("document.getElementById('list').scrollTop").await,
        "120"
    );
    assert_eq!(b.js("window.scrollY").await, "0");

    // A ref alone: into view; the same snapshot's refs still act.
    let (t, _) = b.ok("browser_scroll", json!({"ref": bottom})).await;
    assert!(
        t.starts_with(&format!("scrolled {bottom} (button \"Bottom\") into view")),
        "{t}"
    );
    assert_ne!(b.js("window.scrollY").await, "0");
    b.ok("browser_click", json!({"ref": bottom})).await;
    assert_eq!(b.js("window.bottom").await, "1");

    // Bad input, named; nothing scrolled.
    let y = b.js("window.scrollY").await;
    let e = b
        .err("browser_scroll", json!({"direction": "down", "amount": 0}))
        .await;
    assert!(e.contains("amount is 0; give 1 to 100000"), "{e}");
    let e = b.err("browser_scroll", json!({})).await;
    assert!(
        e.contains("give direction (up, down, left or right)"),
        "{e}"
    );
    let e = b
        .err("browser_scroll", json!({"direction": "sideways"}))
        .await;
    assert!(e.contains("direction"), "{e}");
    let e = b
        .err("browser_scroll", json!({"ref": bottom, "amount": 10}))
        .await;
    assert!(e.contains("amount needs a direction"), "{e}");
    assert_eq!(b.js("window.scrollY").await, y);
    b.answers().await;
}

/// A drag by refs: an HTML drag and drop carries its data to the drop
/// target; a knob of plain mouse events follows the pointer; the mouse is
/// free after; an end out of view is refused with nothing done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drag_drops_by_refs_and_moves_a_knob_and_an_end_out_of_view_is_refused() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let (base, _) = serve().await;
    b.ok("browser_navigate", json!({"url": format!("{base}/drag")}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let item = Browser::ref_of(&snap, "\"Item\"");
    let zone = Browser::ref_of(&snap, "\"Zone\"");
    let knob = Browser::ref_of(&snap, "\"Knob\"");
    let after = Browser::ref_of(&snap, "button \"After\"");
    let far = Browser::ref_of(&snap, "button \"Far\"");

    let (t, out) = b
        .ok("browser_drag", json!({"start_ref": item, "end_ref": zone}))
        .await;
    assert!(t.contains("the page took it as a drag and drop"), "{t}");
    assert_eq!(out["at"][0], 375.0, "{out}");
    assert_eq!(b.js("window.dropped").await, "\"payload-7\"");

    let (t, _) = b
        .ok("browser_drag", json!({"start_ref": knob, "end_ref": after}))
        .await;
    assert!(t.contains("the page started no drag and drop"), "{t}");
    let (k, _) = b
        .ok(
            "browser_eval",
            json!({"expression": "JSON.stringify(window.knob)"}),
        )
        .await;
    let k: Value = serde_json::from_str(&serde_json::from_str::<String>(&k).unwrap()).unwrap();
    assert_eq!(k[0], 35, "the press was at the knob's middle: {k}");
    assert!(k[1].as_f64().unwrap() > 400.0, "released at After: {k}");

    // The mouse is not left pressed: a click lands as a click.
    b.ok("browser_click", json!({"ref": after})).await;
    assert_eq!(b.js("window.afterClicks").await, "1");

    // An end out of view: refused, nothing dragged.
    let e = b
        .err("browser_drag", json!({"start_ref": item, "end_ref": far}))
        .await;
    assert!(
        e.contains("was left where it is, but it has no box inside the viewport")
            && e.contains("nothing was dragged"),
        "{e}"
    );
    let e = b.err("browser_drag", json!({"start_ref": item})).await;
    assert!(
        e.contains("give end_ref (from browser_snapshot), or end_x and end_y"),
        "{e}"
    );
    let e = b
        .err(
            "browser_drag",
            json!({"start_ref": item, "end_ref": zone, "end_x": 3, "end_y": 4}),
        )
        .await;
    assert!(
        e.contains("give end_ref or end_x and end_y, not both"),
        "{e}"
    );
    assert_eq!(b.js("window.afterClicks").await, "1");
    b.answers().await;
}

/// Two file inputs: one plain, one hidden behind a button that opens its
/// chooser; what each gets is read back in the page (the title counts it).
const UPLOAD: &str = r#"<!doctype html><html><head><title>Upload</title></head><body>
<label>One <input type="file" id="one"></label>
<input type="file" id="many" multiple style="display:none">
<button id="pick" onclick="document.getElementById('many').click()">Choose files</button>
<script>
window.read = [];
for (const id of ['one', 'many']) {
  document.getElementById(id).addEventListener('change', async e => {
    for (const f of e.target.files) window.read.push([id, f.name, await f.text()]);
    document.title = 'Read ' + window.read.length;
  });
}
</script></body></html>"#;

const INSIDE_SERVER: &str = r#"import http.server
FORM = open('/tmp/site/form.html', 'rb').read()
THANKS = b'<!doctype html><title>Thanks</title><p>Thanks.</p>'
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, page):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def do_GET(self):
        if self.path == '/':
            self.reply(FORM)
        else:
            self.reply(open('/tmp/site/' + self.path.strip('/').replace('..', ''), 'rb').read())
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open('/tmp/site/posted.txt', 'ab') as f:
            f.write(body + b'\n')
        self.reply(THANKS)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', 8125), H).serve_forever()
"#;

/// The whole stack on a local computer of kind browser: Chromium inside it
/// on its pipe, a page the computer serves itself (network none), written
/// and started with the sandbox tools the family lists beside the page
/// tools, filled by refs and posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_browser_computer_fills_and_posts_a_form_it_serves_itself() {
    use computer_providers::local::{LocalOptions, LocalProvider};
    use computer_providers::{ComputerSpec, Provider, Release};
    use computer_testkit::{computerd_bin, need, need_root};
    use computer_tools::Offer;

    if !need_root() || !need_chromium() {
        return;
    }
    let Some(bin) = computerd_bin() else {
        need("root", false, "the computerd binary is not built");
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let p = LocalProvider::new(LocalOptions {
        browser: true,
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.path().to_path_buf(), bin)
    })
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Browser;
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let family = registry().family(SettingKind::Browser).unwrap();
    // cdp is the provider's to declare; the daemon's groups come in hello.
    let mut groups = p.capabilities().groups.clone();
    groups.extend(conn.hello.groups.iter().copied());
    let offer = Offer {
        groups: &groups,
        extend: false,
    };
    let names = family.names(&offer);
    for n in ["browser_snapshot", "write_file", "process_start", "exec"] {
        assert!(names.contains(&n), "{n} is not listed: {names:?}");
    }
    let b = Browser {
        _chromium: None,
        ctx: ToolContext {
            client: conn.client.clone(),
            facts: Default::default(),
            settings: Default::default(),
            progress: None,
            extend: None,
            state: ComputerState::new(),
            cancel: Default::default(),
            resources: None,
        },
        results: Mutex::new(Vec::new()),
    };
    b.ok(
        "write_file",
        json!({"path": "/tmp/site/form.html", "content": FORM}),
    )
    .await;
    b.ok(
        "write_file",
        json!({"path": "/tmp/site/server.py", "content": INSIDE_SERVER}),
    )
    .await;
    b.ok(
        "process_start",
        json!({"command": "exec python3 /tmp/site/server.py"}),
    )
    .await;
    b.ok(
        "exec",
        json!({"command": "for i in $(seq 100); do grep -q ':1FBD 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1"}),
    )
    .await;

    b.ok("browser_navigate", json!({"url": "http://127.0.0.1:8125/"}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let name = Browser::ref_of(&snap, "textbox \"Name\"");
    let pw = Browser::ref_of(&snap, "textbox \"Password\"");
    let colour = Browser::ref_of(&snap, "combobox");
    let agree = Browser::ref_of(&snap, "checkbox \"I agree\"");
    b.ok("browser_type", json!({"ref": name, "text": "Grace"}))
        .await;
    b.ok("browser_type", json!({"ref": pw, "text": SECRET}))
        .await;
    b.ok("browser_select", json!({"ref": colour, "value": "Blue"}))
        .await;
    b.ok("browser_select", json!({"ref": agree, "value": true}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert!(snap.contains("(password, not shown)"), "{snap}");
    let send = Browser::ref_of(&snap, "button \"Send\"");
    b.ok("browser_click", json!({"ref": send})).await;
    b.wait_title("Thanks").await;
    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");

    // What the computer's server got (read past the page tools).
    let (posted, _) = b
        .ok("exec", json!({"command": "cat /tmp/site/posted.txt"}))
        .await;
    assert!(
        posted.contains(&format!("name=Grace&pw={SECRET}&color=b&agree=on")),
        "{posted}"
    );

    // Files of the computer chosen in file inputs: one directly, two
    // through the chooser a button opens; the page reads them back.
    assert!(names.contains(&"browser_upload"), "{names:?}");
    b.ok(
        "write_file",
        json!({"path": "/tmp/site/upload.html", "content": UPLOAD}),
    )
    .await;
    b.ok(
        "write_file",
        json!({"path": "/tmp/up/a.txt", "content": "alpha"}),
    )
    .await;
    b.ok(
        "write_file",
        json!({"path": "/tmp/up/b.txt", "content": "bravo-bravo"}),
    )
    .await;
    b.ok(
        "browser_navigate",
        json!({"url": "http://127.0.0.1:8125/upload.html"}),
    )
    .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let one = Browser::ref_of(&snap, "\"One\"");
    let pick = Browser::ref_of(&snap, "button \"Choose files\"");
    let e = b
        .err(
            "browser_upload",
            json!({"ref": one, "paths": ["/tmp/up/a.txt", "/tmp/up/b.txt"]}),
        )
        .await;
    assert!(e.contains("takes one file (it has no `multiple`)"), "{e}");
    let e = b
        .err(
            "browser_upload",
            json!({"ref": one, "paths": ["/tmp/up/none.txt"]}),
        )
        .await;
    assert!(
        e.contains("paths[0] /tmp/up/none.txt") && e.contains("write the file first"),
        "{e}"
    );
    let e = b
        .err("browser_upload", json!({"ref": one, "paths": ["a.txt"]}))
        .await;
    assert!(e.contains("paths[0] must be an absolute path"), "{e}");
    let e = b
        .err("browser_upload", json!({"ref": one, "paths": ["/tmp/up"]}))
        .await;
    assert!(e.contains("paths[0] /tmp/up is a directory"), "{e}");
    let (t, _) = b
        .ok(
            "browser_upload",
            json!({"ref": one, "paths": ["/tmp/up/a.txt"]}),
        )
        .await;
    assert!(t.ends_with("now holds a.txt (5 bytes)"), "{t}");
    let (t, _) = b
        .ok(
            "browser_upload",
            json!({"ref": pick, "paths": ["/tmp/up/a.txt", "/tmp/up/b.txt"]}),
        )
        .await;
    assert!(
        t.contains("clicked it and answered the file chooser")
            && t.contains("now holds a.txt (5 bytes), b.txt (11 bytes)"),
        "{t}"
    );
    b.wait_title("Read 3").await;
    let (read, _) = b
        .ok(
            "browser_eval",
            json!({"expression": "JSON.stringify(window.read)"}),
        )
        .await;
    assert_eq!(
        read,
        serde_json::to_string(
            r#"[["one","a.txt","alpha"],["many","a.txt","alpha"],["many","b.txt","bravo-bravo"]]"#
        )
        .unwrap()
    );
    drop(b);
    drop(conn);
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

/// The page tools on a vendor's browser: the Browserbase fake
/// (computer-fakes), whose sessions are a real headless Chromium behind a CDP URL
/// that is a secret. Only the page tools are listed (no sandbox), the form
/// is filled and posted, and the URL shows in no result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_tools_drive_a_vendors_browser_through_its_fake() {
    use computer_fakes::vendor::{FakeVendor, Kind};
    use computer_providers::{
        BrowserbaseProvider, BrowserbaseSettings, ComputerSpec, Configure, HostDefaults,
        NetworkPolicy, Provider, Release,
    };
    use computer_tools::Offer;

    if !need_chromium() {
        return;
    }
    let fake = FakeVendor::start(Kind::Browserbase).await.unwrap();
    let p = BrowserbaseProvider::configure(
        BrowserbaseSettings {
            api_key: Some(fake.key().into()),
            project_id: None,
            api_url: Some(fake.api_url().into()),
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(10 * 60_000);
    spec.kind = SettingKind::Browser;
    spec.network = NetworkPolicy::Open;
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let mut groups = p.capabilities().groups.clone();
    groups.extend(conn.hello.groups.iter().copied());
    let names = registry()
        .family(SettingKind::Browser)
        .unwrap()
        .names(&Offer {
            groups: &groups,
            extend: false,
        });
    assert_eq!(names.len(), 16, "{names:?}");
    assert!(!names.contains(&"browser_upload"), "{names:?}");
    assert!(!names.contains(&"exec"), "{names:?}");

    let b = Browser {
        _chromium: None,
        ctx: ToolContext {
            client: conn.client.clone(),
            facts: Default::default(),
            settings: Default::default(),
            progress: None,
            extend: None,
            state: ComputerState::new(),
            cancel: Default::default(),
            resources: None,
        },
        results: Mutex::new(Vec::new()),
    };
    let (base, seen) = serve().await;
    b.ok("browser_navigate", json!({"url": format!("{base}/")}))
        .await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let name = Browser::ref_of(&snap, "textbox \"Name\"");
    let pw = Browser::ref_of(&snap, "textbox \"Password\"");
    b.ok("browser_type", json!({"ref": name, "text": "Lin"}))
        .await;
    b.ok(
        "browser_type",
        json!({"ref": pw, "text": SECRET, "submit": true}),
    )
    .await;
    b.wait_title("Thanks").await;
    let posted = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .find(|(l, _)| l.starts_with("POST /submit"))
        .map(|(_, body)| body.clone())
        .expect("the form was posted");
    assert!(
        posted.starts_with(&format!("name=Lin&pw={SECRET}&")),
        "{posted}"
    );
    let (shot, _) = b.ok("browser_screenshot", json!({})).await;
    assert!(shot.starts_with("frame b1: "), "{shot}");
    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");
    assert!(
        !all.contains(fake.canary()),
        "the CDP URL showed in a result"
    );
    drop(b);
    drop(conn);
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}
