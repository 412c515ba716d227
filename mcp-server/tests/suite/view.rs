//! The live viewer end to end: a stdio server with `--viewer`, a local
//! desktop running the X11 fixture, and the viewer's page opened by
//! `computer_view`'s link in a real headless Chromium driven over CDP: the
//! first frame drawn on the canvas, a click and typed text through a
//! control lease landing where the fixture logs them, refusals in the
//! page's words, and links for another computer or revoked refused.

use std::time::{Duration, Instant};

use computer_providers::cdp::BrowserClient;
use computer_providers::cdp::chromium::HostChromium;
use computerd::client::ComputerClient;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::desktop::{events, fixture_bin, fixture_share, image_of, start_fixture, wait_for};
use super::support::*;

/// One page of the headless browser, attached over CDP.
pub(super) struct Page<'a> {
    browser: &'a BrowserClient,
    session: String,
}

async fn cdp(b: &BrowserClient, method: &str, params: Value, session: Option<&str>) -> Value {
    let mut p = json!({"method": method, "params": params});
    if let Some(s) = session {
        p["sessionId"] = json!(s);
    }
    let r = b
        .call_value("cdp.send", p)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    r["result"].clone()
}

impl<'a> Page<'a> {
    /// A new tab on `url`, laid out 1400x1000 so a 1280x800 canvas shows
    /// at its own size (a CSS pixel is a screen pixel).
    pub(super) async fn open(browser: &'a BrowserClient, url: &str) -> Page<'a> {
        let t = cdp(
            browser,
            "Target.createTarget",
            json!({"url": "about:blank"}),
            None,
        )
        .await;
        let target = t["targetId"].as_str().unwrap().to_string();
        let a = cdp(
            browser,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
            None,
        )
        .await;
        let page = Page {
            browser,
            session: a["sessionId"].as_str().unwrap().to_string(),
        };
        page.send(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
        page.send("Page.navigate", json!({ "url": url })).await;
        page
    }

    /// [`Page::open`], once its first frame is drawn.
    pub(super) async fn drawing(browser: &'a BrowserClient, url: &str) -> Page<'a> {
        let page = Page::open(browser, url).await;
        page.until("the first frame drawn", "window.viewer.frames >= 1")
            .await;
        page
    }

    pub(super) async fn send(&self, method: &str, params: Value) -> Value {
        cdp(self.browser, method, params, Some(&self.session)).await
    }

    pub(super) async fn eval(&self, expression: &str) -> Value {
        let r = self
            .send(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        r["result"]["value"].clone()
    }

    /// Wait (bounded) until `expression` is true in the page.
    pub(super) async fn until(&self, what: &str, expression: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if self.eval(expression).await == json!(true) {
                return;
            }
            let state = self
                .eval("JSON.stringify(window.viewer || null) + ' ' + document.getElementById('status')?.textContent")
                .await;
            assert!(
                Instant::now() < until,
                "{what} did not happen within 20 s: {state}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The canvas's RGB at screen pixels `points`.
    pub(super) async fn pixels(&self, points: &[[u32; 2]]) -> Vec<[u8; 3]> {
        let js = format!(
            "JSON.stringify({}.map(([x, y]) => Array.from(document.getElementById('screen').getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))))",
            serde_json::to_string(points).unwrap()
        );
        let v = self.eval(&js).await;
        serde_json::from_str(v.as_str().unwrap()).unwrap()
    }

    /// Where screen pixel (x, y)'s centre is on the page, in CSS pixels.
    pub(super) async fn at(&self, x: u32, y: u32) -> (f64, f64) {
        let r = self
            .eval("(() => { const c = document.getElementById('screen'), r = c.getBoundingClientRect(); return [r.left, r.top, r.width / c.width]; })()")
            .await;
        let (left, top, k) = (
            r[0].as_f64().unwrap(),
            r[1].as_f64().unwrap(),
            r[2].as_f64().unwrap(),
        );
        (
            left + (f64::from(x) + 0.5) * k,
            top + (f64::from(y) + 0.5) * k,
        )
    }

    pub(super) async fn mouse(&self, kind: &str, (x, y): (f64, f64)) {
        self.send(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
        )
        .await;
    }

    async fn key(&self, key: &str, code: &str, modifiers: u32, text: Option<&str>) {
        let mut down = json!({"type": "keyDown", "key": key, "code": code, "modifiers": modifiers});
        if let Some(t) = text {
            down["text"] = json!(t);
        }
        self.send("Input.dispatchKeyEvent", down).await;
        self.send(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": code, "modifiers": modifiers}),
        )
        .await;
    }

    /// Type `text` one character at a time, as keys pressed.
    pub(super) async fn type_text(&self, text: &str) {
        for c in text.chars() {
            let s = c.to_string();
            self.key(&s, "", 0, Some(&s)).await;
        }
    }

    async fn status(&self) -> String {
        self.eval("document.getElementById('status').textContent")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_local_desktop_and_takes_control_in_a_real_browser() {
    if !need_root() || !computer_testkit::need_xvfb() || !computer_testkit::need_chromium() {
        return;
    }
    watches_and_takes_control(&Server::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_docker_desktop_and_takes_control_in_a_real_browser() {
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    if !computer_testkit::need_chromium() {
        return;
    }
    let _engine = DOCKER_ENGINE.read().await;
    let server = or_skip!(Server::docker_with_image(&image));
    watches_and_takes_control(&server).await;
}

/// A stdio server of `server`'s provider serving the viewer on a loopback
/// port, its desktop running the X11 fixture, and the first link
/// computer_view gave (with its text); None where the fixture is not built.
pub(super) struct Viewing {
    pub(super) client: Client,
    /// The server's stderr.
    log: tempfile::NamedTempFile,
    _share: tempfile::TempDir,
    pub(super) url: String,
    said: String,
}

/// A stdio server with `args`, serving the viewer on a loopback port
/// (so computer_view is listed), and its stderr.
pub(super) async fn serving_the_viewer(args: &[String]) -> (Client, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = tokio::process::Command::new(SERVER);
    cmd.arg("serve")
        .args(args)
        .args(["--viewer", "127.0.0.1:0"]);
    let (proc, _) = TokioChildProcess::builder(cmd)
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let client = Recorder::default().serve(proc).await.unwrap();
    assert!(
        tool_names(&client)
            .await
            .iter()
            .any(|n| n == "computer_view")
    );
    (client, log)
}

pub(super) async fn viewing(server: &Server) -> Option<Viewing> {
    let bin = fixture_bin()?;
    let share = fixture_share(&bin);
    let mut args = server.args_logging("debug");
    args.extend(["--kind".into(), "desktop".into()]);
    args.extend(["--share".into(), format!("{}:ro", share.path().display())]);
    let (client, log) = serving_the_viewer(&args).await;
    start_fixture(&client).await;

    let r = call_ok(&client, "computer_view", json!({})).await;
    let url = structured(&r)["url"].as_str().unwrap().to_string();
    Some(Viewing {
        client,
        log,
        _share: share,
        url,
        said: text(&r),
    })
}

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A viewer's socket for the link `url`, opened with its token, as the page
/// opens it.
pub(super) async fn socket_of(url: &str) -> Socket {
    let (page, token) = url.split_once("#t=").unwrap();
    let ws_url = format!("{}/socket", page.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    send(&mut ws, json!({ "token": token })).await;
    ws
}

/// The socket's next text message of `kind` (frames and others skipped),
/// within 20 s.
pub(super) async fn said(ws: &mut Socket, kind: &str) -> Value {
    said_within(ws, kind, Duration::from_secs(20), false).await
}

/// The socket's next text message of `kind` within `within`, others
/// skipped; each frame acked as the page acks it when `ack` (the server
/// sends the next frame only then).
pub(super) async fn said_within(ws: &mut Socket, kind: &str, within: Duration, ack: bool) -> Value {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let m = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {kind} message within {} s", within.as_secs()));
        match m {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == kind {
                    return v;
                }
            }
            Some(Ok(Message::Binary(b))) if ack => {
                let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                let meta: Value = serde_json::from_slice(&b[4..4 + n]).unwrap();
                send(ws, json!({"type": "ack", "seq": meta["seq"]})).await;
            }
            Some(Ok(_)) => {}
            other => panic!("the socket ended before a {kind} message: {other:?}"),
        }
    }
}

/// One message to the socket, as the page sends it.
pub(super) async fn send(ws: &mut Socket, v: Value) {
    use futures::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::text(v.to_string()))
        .await
        .unwrap();
}

/// The fixture's logged text events, joined.
pub(super) fn texts(ev: &[Value]) -> String {
    ev.iter()
        .filter(|e| e["event"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect()
}

/// The whole check on a desktop of `server`'s provider.
/// The canvas shows what a screenshot of the same computer shows
/// (roughly: a JPEG at quality 60 against a PNG), on a grid over the
/// whole screen.
async fn canvas_matches_a_screenshot(client: &Client, page: &Page<'_>) {
    let shot = call_ok(client, "screenshot", json!({"max_width": 1280})).await;
    let (w, _, rgb) = image_of(&shot);
    assert_eq!(w, 1280);
    let grid: Vec<[u32; 2]> = (0..16)
        .flat_map(|i| (0..10).map(move |j| [i * 80 + 20, j * 80 + 20]))
        .collect();
    let drawn = page.pixels(&grid).await;
    let mut diff = 0u64;
    for (p, d) in grid.iter().zip(&drawn) {
        let at = ((p[1] * 1280 + p[0]) * 3) as usize;
        for c in 0..3 {
            diff += u64::from(rgb[at + c].abs_diff(d[c]));
        }
    }
    let mean = diff as f64 / (grid.len() * 3) as f64;
    assert!(
        mean < 12.0,
        "the canvas differs from the screenshot by {mean} a channel on average"
    );
}

async fn watches_and_takes_control(server: &Server) {
    let Viewing {
        client,
        log,
        _share,
        url,
        said,
    } = or_skip!(viewing(server).await);
    let (page_url, token) = url.split_once("#t=").unwrap();
    assert!(
        page_url.starts_with("http://127.0.0.1:") && page_url.contains("/view/c-"),
        "{url}"
    );
    assert_eq!(token.len(), 64);
    assert!(said.contains("until they give control back"), "{said}");

    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let page = Page::drawing(&browser, &url).await;
    assert_eq!(
        page.eval("location.hash").await,
        json!(""),
        "the token leaves the address bar"
    );
    let title = page
        .eval("document.getElementById('name').textContent")
        .await;
    assert!(
        title.as_str().unwrap().starts_with("default (c-"),
        "{title}"
    );
    let facts = page
        .eval("document.getElementById('facts').textContent")
        .await;
    assert!(
        facts.as_str().unwrap().starts_with("desktop · ends "),
        "{facts}"
    );

    // The canvas shows what a screenshot of the same computer shows
    // (roughly: a JPEG at quality 60 against a PNG).
    canvas_matches_a_screenshot(&client, &page).await;
    let green = page.pixels(&[[149, 49]]).await[0];
    assert!(
        green[1] > 200 && green[0] < 60 && green[2] < 60,
        "green at (149, 49): {green:?}"
    );

    // The fixture's window changes colour (a middle press turns each
    // quarter to its opposite): the next frame drawn shows it, and back.
    for (what, want) in [("magenta", [255, 0, 255]), ("green again", [0, 255, 0])] {
        call_ok(
            &client,
            "input",
            json!({"actions": [{"type": "click", "x": 149, "y": 49, "button": "wheel"}]}),
        )
        .await;
        page.until(
            &format!("the window turned {what} on the canvas"),
            &format!(
                "(() => {{ const d = document.getElementById('screen').getContext('2d').getImageData(149, 49, 1, 1).data; const w = {want:?}; return [0, 1, 2].every(i => Math.abs(d[i] - w[i]) < 60); }})()"
            ),
        )
        .await;
    }
    // Those changes came as the changed region only, drawn in place: the
    // whole canvas still matches a screenshot.
    let regions = page.eval("window.viewer.regions || 0").await;
    assert!(
        regions.as_u64().unwrap() >= 2,
        "region frames drawn: {regions}"
    );
    canvas_matches_a_screenshot(&client, &page).await;

    // Input before control: refused in words, nothing sent.
    let n = events(&client).await.len();
    page.mouse("mousePressed", page.at(149, 49).await).await;
    page.mouse("mouseReleased", page.at(149, 49).await).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        events(&client).await[n..]
            .iter()
            .all(|e| e["event"] != "down")
    );

    // Take control; a click on the green quadrant lands at its pixel.
    page.eval("document.getElementById('take').click()").await;
    page.until("control taken", "window.viewer.control === true")
        .await;
    let n = events(&client).await.len();
    let at = page.at(149, 49).await;
    page.mouse("mouseMoved", at).await;
    page.mouse("mousePressed", at).await;
    page.mouse("mouseReleased", at).await;
    let ev = wait_for(&client, n, "the click", |e| {
        e.iter().any(|e| e["event"] == "up")
    })
    .await;
    let down = ev.iter().find(|e| e["event"] == "down").unwrap();
    assert_eq!(
        (
            down["x"].as_i64(),
            down["y"].as_i64(),
            down["button"].as_i64()
        ),
        (Some(149), Some(49), Some(1)),
        "{down}"
    );

    // A model's input meanwhile is refused in words.
    call_refused(
        &client,
        "input",
        json!({"actions": [{"type": "click", "x": 10, "y": 10}]}),
        "a person has control of this screen until they give it back",
    )
    .await;

    // Typed text reaches the fixture exactly.
    let n = events(&client).await.len();
    let typed = "Hello, agentrun! 123";
    page.type_text(typed).await;
    let ev = wait_for(&client, n, "the typed text", |e| {
        texts(e).len() >= typed.len()
    })
    .await;
    assert_eq!(texts(&ev), typed);

    // ctrl+alt+backspace would end the X display: refused in the page's words.
    let n = events(&client).await.len();
    page.key("Backspace", "Backspace", 2 | 1, None).await;
    page.until(
        "the refusal",
        "window.viewer.refused.some(w => w.includes('ctrl+alt+backspace is not sent'))",
    )
    .await;
    assert!(
        page.status()
            .await
            .contains("would end or switch the computer's X display")
    );
    assert!(
        events(&client).await[n..]
            .iter()
            .all(|e| e["event"] != "key" || e["keysym"] != 0xff08)
    );

    // A button held at give-back is let go.
    let n = events(&client).await.len();
    page.mouse("mousePressed", page.at(50, 50).await).await;
    wait_for(&client, n, "the press", |e| {
        e.iter().any(|e| e["event"] == "down")
    })
    .await;
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;
    wait_for(&client, n, "the release", |e| {
        e.iter().any(|e| e["event"] == "up")
    })
    .await;
    call_ok(
        &client,
        "input",
        json!({"actions": [{"type": "move", "x": 5, "y": 5}]}),
    )
    .await;

    page.eval("document.getElementById('take').click()").await;
    page.until("control taken again", "window.viewer.control === true")
        .await;
    // Nine inputs in flight: the ninth is refused as the limit. The page
    // keeps to 8 itself, so these go straight on its socket: a long text
    // first, which holds the computer while the rest queue. (Last of the
    // checks on the fixture's log: its 400 letters take the log past what
    // exec shows.)
    let sent = page.eval(
        "(() => { ws.send(JSON.stringify({type: 'input', id: 1001, event: {type: 'text', text: 'a'.repeat(400)}})); \
         for (let i = 2; i <= 9; i++) ws.send(JSON.stringify({type: 'input', id: 1000 + i, event: {type: 'move', x: i, y: 300}})); return 'sent'; })()",
    )
    .await;
    assert_eq!(sent, json!("sent"));
    page.until(
        "the ninth refused",
        "window.viewer.refused.some(w => w.startsWith('8 inputs are in flight, the most'))",
    )
    .await;
    page.until("every input answered", "inFlight === 0").await;
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;

    // The next frame shows a change: the fixture ends, its window goes.
    call_ok(
        &client,
        "exec",
        json!({"command": "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = fixture ] && kill ${p#/proc/}; done; true"}),
    )
    .await;
    page.until(
        "the window's end drawn",
        "(() => { const d = document.getElementById('screen').getContext('2d').getImageData(149, 49, 1, 1).data; return d[1] < 100; })()",
    )
    .await;

    // A link for another computer, a made-up token, and a revoked link:
    // each refused in words on the page, never a blank page.
    let other = page_url.replace(
        &page_url[page_url.len() - 32..],
        "0123456789abcdef0123456789abcdef",
    );
    for (url, words) in [
        (
            format!("{other}#t={token}"),
            "this link is for another computer",
        ),
        (
            format!("{page_url}#t={}", "0".repeat(64)),
            "this link is not valid",
        ),
    ] {
        let p = Page::open(&browser, &url).await;
        p.until(
            "the refusal",
            "window.viewer && window.viewer.ended !== null",
        )
        .await;
        assert!(
            p.status().await.starts_with(words),
            "{url}: {}",
            p.status().await
        );
    }
    let r = call_ok(&client, "computer_view", json!({"revoke": true})).await;
    assert_eq!(structured(&r)["revoked"], 1);
    page.until("the view's end", "window.viewer.ended !== null")
        .await;
    assert!(
        page.status().await.contains("revoked"),
        "{}",
        page.status().await
    );
    let again = Page::open(&browser, &url).await;
    again
        .until(
            "the refusal",
            "window.viewer && window.viewer.ended !== null",
        )
        .await;
    assert!(again.status().await.starts_with("this link is not valid"));

    // The page's address is public; its token is never in a log or a word.
    let plain = reqwest::get(page_url).await.unwrap();
    assert_eq!(plain.status(), 200);
    assert_eq!(plain.headers()["referrer-policy"], "no-referrer");
    let bad = reqwest::get(format!(
        "{}/view/not-a-handle",
        &page_url[..page_url.find("/view/").unwrap()]
    ))
    .await
    .unwrap();
    assert_eq!(bad.status(), 404);
    assert!(
        bad.text()
            .await
            .unwrap()
            .contains("No computer has this address")
    );
    client.cancel().await.unwrap();
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(!logged.is_empty());
    assert!(!logged.contains(token), "the token is in the server's log");
}

/// Over HTTP the viewer is on the transport's own address: its page takes
/// no bearer token (a person's browser has none) while /mcp still does; a
/// caller gets links to its own computers only, a sandbox has no screen to
/// watch, and the socket refuses a made-up token and another site's page
/// in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_the_viewer_is_public_but_its_socket_and_links_are_the_callers() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    const OTHER: &str = "other-token-0123456789abcdef";
    let Some(server) = Server::local() else {
        return;
    };
    let http = HttpServer::start_on(
        server,
        &["--viewer-origin", "https://apps.example.com"],
        &[TOKEN, OTHER],
    )
    .await;
    let a = http.stateless(TOKEN);
    let b = http.stateless(OTHER);
    let listed = a.rpc("tools/list", None, json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"computer_view"), "{names:?}");

    let handle = a.computer_new("box").await;
    let r = a.call("computer_view", json!({"computer": "box"})).await;
    assert!(jerror(&r), "{r}");
    assert!(
        jtext(&r).contains("has no screen to watch (a sandbox computer)"),
        "{r}"
    );
    let r = b.call("computer_view", json!({ "computer": handle })).await;
    assert!(jerror(&r) && !jtext(&r).contains("/view/"), "{r}");

    let base = http.url.trim_end_matches("/mcp").to_string();
    let page = reqwest::get(format!("{base}/view/{handle}")).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Take control"));
    let mcp = reqwest::Client::new().post(&http.url).send().await.unwrap();
    assert_eq!(mcp.status(), 403, "/mcp keeps its bearer token");

    let ws_url = format!("{}/view/{handle}/socket", base.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    ws.send(Message::text(json!({"token": "f".repeat(64)}).to_string()))
        .await
        .unwrap();
    let said = match ws.next().await {
        Some(Ok(Message::Text(t))) => serde_json::from_str::<Value>(&t).unwrap(),
        other => panic!("no refusal: {other:?}"),
    };
    assert_eq!(said["type"], "refused");
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .starts_with("this link is not valid"),
        "{said}"
    );

    // A host's sandboxed frame (the MCP App) has an opaque Origin, and a
    // host named with --viewer-origin its own: their socket opens, and
    // still does nothing without the computer's token.
    for origin in ["null", "https://apps.example.com"] {
        let mut req = ws_url.as_str().into_client_request().unwrap();
        req.headers_mut().insert("origin", origin.parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        ws.send(Message::text(json!({"token": "0".repeat(64)}).to_string()))
            .await
            .unwrap();
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                let said: Value = serde_json::from_str(&t).unwrap();
                assert_eq!(said["type"], "refused", "{origin}: {said}");
            }
            other => panic!("{origin}: no refusal: {other:?}"),
        }
    }

    // Another site's page, a look-alike of the named host included.
    for origin in ["http://evil.example", "https://evil.apps.example.com"] {
        let foreign = reqwest::Client::new()
            .get(format!("{base}/view/{handle}/socket"))
            .header("origin", origin)
            .header("upgrade", "websocket")
            .header("connection", "upgrade")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403, "{origin}");
        assert!(
            foreign
                .text()
                .await
                .unwrap()
                .contains("only by the viewer's own page")
        );
    }
    http.stop_leaving_none().await;
}
