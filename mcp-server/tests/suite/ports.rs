//! Preview ports as a model and a person use them, on local and Docker
//! computers with network `none`: `python3 -m http.server` and a small
//! WebSocket echo (Python's standard library only) run in the computer, and
//! `port_open` gives URLs that an HTTP client here loads and the
//! WebSocket echoes through. A wrong or missing token is refused, a port
//! nothing listens on says so, bad input names its field and the limit,
//! and the URLs die with the computer. A real headless Chromium loads a
//! preview the way a person's browser does (the token traded for a
//! cookie) and opens a WebSocket through another, as live reload does.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use computer_providers::cdp::chromium::HostChromium;

use super::support::{HttpServer, Server, Stateless, TOKEN, jerror, jtext, or_skip};
use super::view::Page;

/// A WebSocket echo with only Python's standard library: the handshake,
/// then a first text message with the request line it was given (so the
/// test sees what reached it), then every message back as it came.
const WS_ECHO: &str = r#"
import base64, hashlib, socket, threading
G = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def serve(c):
    h = b""
    while b"\r\n\r\n" not in h:
        d = c.recv(4096)
        if not d:
            return
        h += d
    lines = h.split(b"\r\n")
    key = [l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(b"sec-websocket-key:")][0]
    acc = base64.b64encode(hashlib.sha1(key + G).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    def send(op, data):
        n = len(data)
        head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big"))
        c.sendall(head + data)
    seen = lines[0] + b" cookie=" + b";".join(l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(b"cookie:"))
    send(1, seen)
    f = c.makefile("rb")
    while True:
        b = f.read(2)
        if len(b) < 2:
            return
        n = b[1] & 127
        if n == 126:
            n = int.from_bytes(f.read(2), "big")
        mask = f.read(4)
        data = bytes(x ^ mask[i % 4] for i, x in enumerate(f.read(n)))
        if b[0] & 15 == 8:
            return
        send(b[0] & 15, data)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8765))
s.listen()
while True:
    c, _ = s.accept()
    threading.Thread(target=lambda c=c: (serve(c), c.close()), daemon=True).start()
"#;

const PAGE: &str = "<html><body>preview from inside</body></html>\n";

async fn port(c: &Stateless, action: &str, args: Value) -> Value {
    let mut args = args;
    args["computer"] = json!("web");
    c.call(&format!("port_{action}"), args).await
}

async fn open(c: &Stateless, p: u16) -> String {
    let r = port(c, "open", json!({"port": p})).await;
    assert!(!jerror(&r), "{r}");
    let url = r["structuredContent"]["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("http://127.0.0.1:"), "{r}");
    url.to_string()
}

/// The listener's `host:port` and the target (path and query) of a URL.
fn split(url: &str) -> (String, String) {
    let rest = url.trim_start_matches("http://");
    let (host, target) = rest.split_once('/').unwrap_or((rest, ""));
    (host.to_string(), format!("/{target}"))
}

/// A GET through the preview, retried while the server in the computer
/// is still starting (the preview's own 502 says nothing listens yet).
async fn get_when_up(http: &reqwest::Client, url: &str) -> reqwest::Response {
    let mut last = String::new();
    for _ in 0..100 {
        let r = http.get(url).send().await.unwrap();
        if r.status() != 502 {
            return r;
        }
        last = r.text().await.unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the server in the computer never came up behind {url}: {last}");
}

/// A masked client frame (RFC 6455) of `data`, short.
fn ws_frame(op: u8, data: &[u8]) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let mut f = vec![0x80 | op, 0x80 | data.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(data.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// The next server frame's payload (unmasked, short).
async fn ws_read(tcp: &mut TcpStream) -> Vec<u8> {
    let mut head = [0u8; 2];
    tcp.read_exact(&mut head).await.unwrap();
    let mut n = usize::from(head[1] & 127);
    if n == 126 {
        let mut len = [0u8; 2];
        tcp.read_exact(&mut len).await.unwrap();
        n = usize::from(u16::from_be_bytes(len));
    }
    let mut data = vec![0u8; n];
    tcp.read_exact(&mut data).await.unwrap();
    data
}

/// A WebSocket through the preview at `url` (its token in the query):
/// the upgrade is answered 101, the echo's first message shows the token
/// never reached the computer, and a message comes back as sent.
async fn websocket_echoes(url: &str) {
    let (host, target) = split(url);
    let target = target.replacen("/?", "/ws?room=1&", 1);
    let mut tcp = TcpStream::connect(&host).await.unwrap();
    let req = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nCookie: theme=dark; preview_token_1=other\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tcp.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        "{head}"
    );
    let seen = String::from_utf8(ws_read(&mut tcp).await).unwrap();
    assert_eq!(seen, "GET /ws?room=1 HTTP/1.1 cookie=theme=dark");
    for msg in ["hello through the port", "and again"] {
        tcp.write_all(&ws_frame(1, msg.as_bytes())).await.unwrap();
        assert_eq!(ws_read(&mut tcp).await, msg.as_bytes());
    }
    tcp.write_all(&ws_frame(8, b"")).await.unwrap();
}

/// The listener of `url` refuses connections within `within`.
async fn dies(url: &str, within: Duration) {
    let (host, _) = split(url);
    let t = std::time::Instant::now();
    while TcpStream::connect(&host).await.is_ok() {
        assert!(t.elapsed() < within, "{url} still answers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn previews(server: Server) {
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("web").await;
    let info = c.call("computer_info", json!({"computer": "web"})).await;
    assert!(jtext(&info).contains("network: none"), "{info}");
    serve_page_and_echo(&c).await;

    let url = open(&c, 8000).await;
    assert_eq!(open(&c, 8000).await, url, "opened twice, one URL");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = get_when_up(&http, &url).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.text().await.unwrap(), PAGE.trim_end());

    // A browser's page load is sent to the address without the token,
    // which a cookie then carries.
    let r = http
        .get(&url)
        .header("accept", "text/html,*/*")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let (host, _) = split(&url);
    assert_eq!(r.headers()["location"], "/");
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = http
        .get(format!("http://{host}/index.html"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // A wrong token, and none, are refused in words.
    let wrong = url.replace("preview_token=", "preview_token=0");
    let r = http.get(&wrong).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("wrong token"));
    let r = http.get(format!("http://{host}/")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("needs its token"));

    let ws = open(&c, 8765).await;
    let wait = "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1";
    let r = c
        .call("exec", json!({"command": wait, "computer": "web"}))
        .await;
    assert!(
        r["structuredContent"]["exitCode"] == json!(0) || jtext(&r).contains("exit code: 0"),
        "{r}"
    );
    websocket_echoes(&ws).await;

    // A port nothing listens on: said at open, and by the first request.
    let r = port(&c, "open", json!({"port": 8001})).await;
    assert!(jtext(&r).contains("Nothing listens on port 8001"), "{r}");
    let none = r["structuredContent"]["url"].as_str().unwrap().to_string();
    let r = http.get(&none).send().await.unwrap();
    assert_eq!(r.status(), 502);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("nothing listens on port 8001 inside the computer")
    );

    // Bad input names the field; the limit is named when reached.
    let r = port(&c, "open", json!({"port": 70000})).await;
    assert!(
        jerror(&r) && jtext(&r).contains("port must be 1 to 65535"),
        "{r}"
    );
    let r = port(&c, "open", json!({"port": 0})).await;
    assert!(
        jerror(&r) && jtext(&r).contains("port must be 1 to 65535"),
        "{r}"
    );
    for p in 9001..9014 {
        port(&c, "open", json!({"port": p})).await;
    }
    let r = port(&c, "open", json!({"port": 9100})).await;
    assert!(jerror(&r), "{r}");
    assert!(jtext(&r).contains("16 ports open, the most"), "{r}");

    // Listed by port_list and computer_info; closed, a URL dies.
    let listed = port(&c, "list", json!({})).await;
    assert_eq!(listed["structuredContent"]["ports"][0]["url"], json!(url));
    let info = c.call("computer_info", json!({"computer": "web"})).await;
    assert!(
        jtext(&info).contains(&format!("port 8000: {url}")),
        "{info}"
    );
    let r = port(&c, "close", json!({"port": 8001})).await;
    assert!(
        !jerror(&r) && r["structuredContent"]["closed"] == json!(true),
        "{r}"
    );
    dies(&none, Duration::from_secs(10)).await;

    // The URLs die with the computer.
    let r = c.call("computer_release", json!({"computer": "web"})).await;
    assert!(!jerror(&r), "{r}");
    dies(&url, Duration::from_secs(10)).await;
    dies(&ws, Duration::from_secs(10)).await;
    s.stop_leaving_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_computer_without_network_serves_a_preview_and_a_websocket() {
    previews(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_computer_without_network_serves_a_preview_and_a_websocket() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    previews(or_skip!(Server::docker())).await;
}

/// Starts `python3 -m http.server` on 8000 (serving PAGE) and the
/// WebSocket echo on 8765 in computer "web" of `c`.
async fn serve_page_and_echo(c: &Stateless) {
    let setup = format!(
        "mkdir -p ~/site && printf '%s' '{}' > ~/site/index.html && cat > ~/ws.py <<'EOF'\n{WS_ECHO}\nEOF",
        PAGE.trim_end()
    );
    let r = c
        .call("exec", json!({"command": setup, "computer": "web"}))
        .await;
    assert!(!jerror(&r), "{r}");
    for command in [
        "cd ~/site && exec python3 -m http.server 8000 --bind 127.0.0.1",
        "exec python3 ~/ws.py",
    ] {
        let r = c
            .call(
                "process_start",
                json!({"command": command, "computer": "web"}),
            )
            .await;
        assert!(!jerror(&r), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_loads_in_headless_chromium_and_a_websocket_echoes_from_its_page() {
    if !computer_testkit::need_chromium() {
        return;
    }
    let server = or_skip!(Server::local());
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    c.computer_new("web").await;
    serve_page_and_echo(&c).await;
    let url = open(&c, 8000).await;
    let ws = open(&c, 8765).await;
    let http = reqwest::Client::new();
    get_when_up(&http, &url).await;

    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let page = Page::open(&browser, &url).await;
    page.until(
        "the preview's page loaded",
        "document.body && document.body.textContent.includes('preview from inside')",
    )
    .await;
    let (host, _) = split(&url);
    assert_eq!(
        page.eval("location.href").await,
        json!(format!("http://{host}/")),
        "the token leaves the address bar for a cookie"
    );
    // The cookie is HttpOnly: the page's script never reads the token.
    assert_eq!(page.eval("document.cookie").await, json!(""));

    // From the page, a WebSocket through the echo's own preview.
    let ws_url = ws
        .replacen("http://", "ws://", 1)
        .replacen("/?", "/live?", 1);
    let echo = format!(
        "new Promise((ok, no) => {{ const w = new WebSocket({ws_url:?}); const got = []; \
         w.onmessage = (m) => {{ got.push(m.data); if (got.length === 1) w.send('reload please'); else {{ w.close(); ok(got); }} }}; \
         w.onerror = () => no('websocket error'); setTimeout(() => no('no echo within 10 s'), 10000); }})"
    );
    let got = page.eval(&echo).await;
    assert_eq!(got[1], json!("reload please"), "{got}");
    assert!(
        got[0].as_str().unwrap().starts_with("GET /live HTTP/1.1"),
        "the computer saw the request without the token: {got}"
    );

    let r = c.call("computer_release", json!({"computer": "web"})).await;
    assert!(!jerror(&r), "{r}");
    dies(&url, Duration::from_secs(10)).await;
    drop(page);
    drop(browser);
    drop(chromium);
    s.stop_leaving_none().await;
}
