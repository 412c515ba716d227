//! The browser family against a real headless Chromium (Debian's, started
//! on this machine by the providers' `HostChromium`, driven through its
//! `BrowserClient`), on pages a tiny HTTP server of the test serves on
//! 127.0.0.1. Skips without Chromium unless COMPUTER_MCP_REQUIRE names
//! chromium.

mod computers;
mod forms;
mod pointer;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_providers::cdp::HostChromium;
use computer_testkit::need_chromium;
use computer_tools::{ToolContext, registry};

use super::support::{Calls, assert_ends, assert_has, assert_starts, or_skip};
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

impl Seen {
    /// The body of the first request whose line starts with `line`.
    fn body_of(&self, line: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(l, _)| l.starts_with(line))
            .map(|(_, body)| body.clone())
    }
}

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
        let ctx = ToolContext::new(Arc::new(client));
        Some(Browser {
            _chromium: Some(chromium),
            ctx,
            results: Mutex::new(Vec::new()),
        })
    }

    /// A browser on the test server's page `path`, and the server's base
    /// address.
    async fn at(path: &str) -> Option<(Browser, String)> {
        let b = Browser::start().await?;
        let (base, _) = serve().await;
        b.go(&format!("{base}{path}")).await;
        Some((b, base))
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

    /// The ref on the snapshot line that contains `needle`.
    fn ref_of(snapshot: &str, needle: &str) -> String {
        let line = snapshot
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{snapshot}"));
        let i = line.find("[ref=").expect("a ref on the line") + 5;
        line[i..].split(']').next().unwrap().to_string()
    }

    /// The refs on the snapshot lines that contain each of `needles`.
    fn refs_of<const N: usize>(snapshot: &str, needles: [&str; N]) -> [String; N] {
        needles.map(|n| Browser::ref_of(snapshot, n))
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

    /// Open `url` in the current tab.
    async fn go(&self, url: &str) {
        self.ok("browser_navigate", json!({"url": url})).await;
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

impl Calls for Browser {
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
}
