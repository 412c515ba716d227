//! Browsers end to end: `computer-mcp serve --kind browser` on the local
//! provider (Debian's Chromium inside the computer, on its debugging pipe),
//! driven by a real MCP client: a form the computer serves itself is filled
//! by refs and posted, and the computer's own server sees what was posted;
//! the password is in no result; a ref from before a navigation is refused.

use serde_json::{Value, json};

use super::support::*;

/// A server, in the computer, that serves a form and writes what is
/// posted to it to /work/posted.txt.
const SITE: &str = r#"import http.server
FORM = b"""<!doctype html><title>Sign up</title>
<form method=post action=/submit>
<label>Name <input name=name></label>
<label>Password <input type=password name=pw></label>
<label>Plan <select name=plan><option>free</option><option>pro</option></select></label>
<button type=submit>Send</button>
</form>"""
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers(); self.wfile.write(FORM)
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        open("/work/posted.txt", "wb").write(body)
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers(); self.wfile.write(b"<title>Thanks</title><p>thanks")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8126), H).serve_forever()
"#;

/// The ref on the first line of `snapshot` that holds every one of `words`.
pub(super) fn ref_of(snapshot: &str, words: &[&str]) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains("ref=") && words.iter().all(|w| l.contains(w)))
        .unwrap_or_else(|| panic!("no line with {words:?} and a ref in:\n{snapshot}"));
    let at = line.find("ref=").unwrap() + 4;
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_skills_example_runs_and_answers_what_it_shows() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    super::skills::run_examples(&client, "browser").await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_fills_and_posts_a_form_by_refs_and_the_password_stays_out() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    let names = tool_names(&client).await;
    // The rarer page acts (select, tabs...) are listed inside `browser`,
    // the process tools inside `process`.
    for want in [
        "browser_navigate",
        "browser_snapshot",
        "browser_click",
        "browser_type",
        "browser",
        "browser_screenshot",
        "exec",
        "write_file",
        "process",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    for not in [
        "screenshot",
        "computer",
        "input",
        "browser_select",
        "process_start",
    ] {
        assert!(!names.iter().any(|n| n == not), "{not} in {names:?}");
    }

    let mut said: Vec<String> = Vec::new();
    let mut ok = async |name: &str, args: Value| {
        let r = call(&client, name, args).await;
        assert!(!is_error(&r), "{name}: {}", text(&r));
        let t = format!("{}\n{}", text(&r), structured(&r));
        said.push(t.clone());
        t
    };
    ok(
        "write_file",
        json!({"path": "/work/site.py", "content": SITE}),
    )
    .await;
    ok(
        "process_start",
        json!({"command": "exec python3 /work/site.py"}),
    )
    .await;
    ok(
        "exec",
        json!({"command": "for i in $(seq 100); do grep -q ':1FBE 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1"}),
    )
    .await;
    let nav = ok("browser_navigate", json!({"url": "http://127.0.0.1:8126/"})).await;
    assert!(nav.contains("Sign up"), "{nav}");
    let snap = ok("browser_snapshot", json!({})).await;
    let name = ref_of(&snap, &["textbox", "Name"]);
    let pw = ref_of(&snap, &["Password"]);
    let plan = ref_of(&snap, &["combobox"]);
    let send = ref_of(&snap, &["button", "Send"]);
    ok("browser_type", json!({"ref": name, "text": "Ada Lovelace"})).await;
    ok(
        "browser_type",
        json!({"ref": pw, "text": "s3cret-horse-42"}),
    )
    .await;
    ok("browser_select", json!({"ref": plan, "values": ["pro"]})).await;
    // The filled form, snapshotted: the password is masked.
    let filled = ok("browser_snapshot", json!({})).await;
    assert!(filled.contains("Ada Lovelace"), "{filled}");
    assert!(!filled.contains("s3cret-horse-42"), "{filled}");
    // Each element keeps its ref across snapshots.
    let send_now = ref_of(&filled, &["button", "Send"]);
    assert_eq!(send_now, send, "{filled}");
    ok("browser_click", json!({"ref": send_now})).await;

    // The computer's server saw the posted values.
    let mut posted = String::new();
    for _ in 0..100 {
        let r = call(&client, "exec", json!({"command": "cat /work/posted.txt"})).await;
        if !is_error(&r) && text(&r).contains("name=") {
            posted = text(&r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        posted.contains("name=Ada+Lovelace")
            && posted.contains("pw=s3cret-horse-42")
            && posted.contains("plan=pro"),
        "{posted}"
    );
    // No result of the page tools carried the password.
    for t in &said {
        assert!(
            !t.contains("s3cret-horse-42"),
            "the password is in a result: {t}"
        );
    }

    // A ref from before the navigation is refused, in words saying to
    // take a new snapshot, and nothing is clicked.
    call_refused(&client, "browser_click", json!({"ref": name}), "snapshot").await;
    // A scheme other than http(s) is refused naming the field.
    call_refused(
        &client,
        "browser_navigate",
        json!({"url": "file:///etc/passwd"}),
        "url",
    )
    .await;
    // The browser still answers.
    let again = call(&client, "browser_snapshot", json!({})).await;
    assert!(text(&again).contains("thanks"), "{}", text(&again));
    client.cancel().await.unwrap();
}

/// A page that allocates until the computer's memory bound leaves its
/// browser answering nothing: the call says the browser was ended, the
/// next page tool starts it again, works, and says so, and no process of
/// the old browser is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_eats_the_computers_memory_leaves_a_browser_the_next_page_tool_starts_again() {
    if !need_root() || !computer_testkit::need_chromium() {
        return;
    }
    // The test's own bound (its server and computer nest below), should
    // the computer's memory limit fail.
    if !computer_testkit::need_own_bound() {
        return;
    }
    a_memory_bomb_leaves_a_browser_started_again(&Server::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_browser_whose_page_eats_its_memory_is_started_again_by_the_next_page_tool() {
    // The desktop test image has Chromium; the container's memory limit
    // is the bomb's bound.
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let server = or_skip!(Server::docker_with_image(&image));
    a_memory_bomb_leaves_a_browser_started_again(&server).await;
}

async fn a_memory_bomb_leaves_a_browser_started_again(server: &Server) {
    // The bomb's bound: the computer's memory, set here.
    let (client, _) = server
        .stdio(&["--kind", "browser", "--memory-mb", "768"])
        .await;
    call_ok(&client, "browser_navigate", json!({"url": "about:blank"})).await;
    let browsers = async || {
        let count = "ps -eo args | grep -c '^/usr/lib/chromium/chromium --user-data-dir' || true";
        stdout_of(&client, count).await.trim().to_string()
    };
    assert_eq!(browsers().await, "1");

    call_refused(
        &client,
        "browser_eval",
        json!({"expression": "const a = []; for (;;) a.push(new Uint8Array(16 << 20).fill(1));"}),
        "it was stuck, and was ended; the next call starts it again",
    )
    .await;

    let r = call_ok(&client, "browser_eval", json!({"expression": "1 + 1"})).await;
    assert_eq!(structured(&r)["value"], 2, "{}", text(&r));
    assert!(
        text(&r).contains("Note: the browser was started again before this call"),
        "{}",
        text(&r)
    );
    // Said once.
    let r = call(&client, "browser_eval", json!({"expression": "2 + 2"})).await;
    assert!(!text(&r).contains("started again"), "{}", text(&r));
    assert_eq!(
        browsers().await,
        "1",
        "the old browser's processes are gone"
    );
    client.cancel().await.unwrap();
}

/// Two MCP sessions on one browser computer (one opens it, the other names
/// it by handle): each has its own page, neither's browser_tabs shows the
/// other's, a click by one lands on its own page only, and the other's
/// tab_id reads as one that never existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_on_one_browser_each_act_on_their_own_page() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    if !computer_testkit::need_chromium() {
        return;
    }
    let s = or_skip!(HttpServer::start_with(&["--kind", "browser"]).await);
    let session = || async {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(s.url.clone())
                .auth_header(s.token.clone()),
        );
        Recorder::default().serve(transport).await.unwrap()
    };
    let (a, b) = (session().await, session().await);
    call_ok(&a, "browser_navigate", json!({"url": "about:blank"})).await;
    let listed = call_ok(&a, "computer_list", json!({})).await;
    let handle = structured(&listed)["computers"][0]["handle"]
        .as_str()
        .unwrap()
        .to_string();
    let on = |mut v: Value| {
        v["computer"] = json!(handle);
        v
    };
    call_ok(&b, "browser_navigate", on(json!({"url": "about:blank"}))).await;
    let page = |who: &str| {
        format!(
            "document.title = 'page {who}'; document.body.innerHTML = '<button onclick=\"document.title = \\'{who} clicked\\'\">Go {who}</button>'; document.title"
        )
    };
    call_ok(&a, "browser_eval", json!({"expression": page("A")})).await;
    call_ok(&b, "browser_eval", on(json!({"expression": page("B")}))).await;
    let tabs = |r: &rmcp::model::CallToolResult| -> Vec<(String, String)> {
        structured(r)["tabs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["tab_id"].as_str().unwrap().to_string(),
                    t["title"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let a_tabs = tabs(&call_ok(&a, "browser_tabs", json!({"action": "list"})).await);
    let b_tabs = tabs(&call_ok(&b, "browser_tabs", on(json!({"action": "list"}))).await);
    assert_eq!(a_tabs.len(), 1, "{a_tabs:?}");
    assert_eq!(a_tabs[0].1, "page A");
    assert_eq!(b_tabs.len(), 1, "{b_tabs:?}");
    assert_eq!(b_tabs[0].1, "page B");
    // B clicks its button by ref: B's page changes, A's does not.
    let snap = call_ok(&b, "browser_snapshot", on(json!({}))).await;
    let t = text(&snap);
    let r = t
        .split("[ref=")
        .nth(1)
        .and_then(|x| x.split(']').next())
        .unwrap_or_else(|| panic!("{t}"));
    assert!(t.contains("Go B") && !t.contains("Go A"), "{t}");
    call_ok(&b, "browser_click", on(json!({"ref": r}))).await;
    let title = |r: rmcp::model::CallToolResult| structured(&r)["value"].clone();
    let b_title = call_ok(
        &b,
        "browser_eval",
        on(json!({"expression": "document.title"})),
    )
    .await;
    assert_eq!(title(b_title), "B clicked");
    let a_title = call_ok(&a, "browser_eval", json!({"expression": "document.title"})).await;
    assert_eq!(title(a_title), "page A");
    // A's tab, named by B, is no tab of B's; A's ref e1 is no ref of B's page.
    let r = call(&b, "browser_snapshot", on(json!({"tab_id": a_tabs[0].0}))).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("is no open tab"), "{}", text(&r));
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// What a client takes: a 3 MB page's snapshot and a 4000x3000 page's
/// full-page screenshot each come back under 1 MB, the snapshot cut into
/// pages and the screenshot scaled, each saying so. (Its 3 MB are 300
/// paragraphs of 10 KB: a page of tens of thousands of elements makes an
/// accessibility tree over the computer's 8 MiB pipe ring, which ends the
/// browser; see issue 41's note.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_mb_pages_snapshot_and_a_4000x3000_screenshot_each_fit_under_1_mb() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    let line = "<p>".to_string() + &"lorem ipsum dolor sit amet ".repeat(370) + "</p>";
    let big = format!(
        "<!doctype html><title>Big</title><div style=\"width:4000px;height:3000px;background:linear-gradient(90deg,#f00,#00f)\">{}</div>",
        line.repeat(3_000_000 / line.len() + 1)
    );
    assert!(big.len() > 3_000_000);
    open_served(&client, "big.html", &big, 8131).await;
    let whole = |r: &rmcp::model::CallToolResult| serde_json::to_string(r).unwrap().len();

    let snap = call_ok(&client, "browser_snapshot", json!({})).await;
    assert!(whole(&snap) < 1_000_000, "{} bytes", whole(&snap));
    let t = text(&snap);
    let first = t.lines().next().unwrap_or_default();
    assert!(first.contains("page 1 of "), "{first}");
    assert!(!first.contains("page 1 of 1,"), "{first}");

    let shot = call_ok(&client, "browser_screenshot", json!({"full_page": true})).await;
    assert!(whole(&shot) < 1_000_000, "{} bytes", whole(&shot));
    let s = structured(&shot);
    let (w, h) = (s["width"].as_u64().unwrap(), s["height"].as_u64().unwrap());
    assert!(w <= 2000 && h <= 2000, "{s}");
    assert!(text(&shot).contains("scale"), "{}", text(&shot));
    client.cancel().await.unwrap();
}

/// A page read in the tools' own world: an open shadow root's button and a
/// same-origin frame's button each get a ref a click lands on, a hidden
/// button is left out, a global the page sets in its own world is never
/// taken for the tools', and a removed element's ref is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_and_frame_elements_are_clicked_by_ref_and_the_page_cannot_forge_refs() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    const PAGE: &str = r#"<!doctype html><title>Parts</title><h1>Parts</h1>
<div id=host></div>
<iframe src="inner.html"></iframe>
<div style="display:none"><button>Hidden away</button></div>
<p id=out>none yet</p>
<script>
const root = document.getElementById('host').attachShadow({mode: 'open'});
root.innerHTML = '<button>Shadow press</button>';
root.querySelector('button').onclick = () => { document.getElementById('out').textContent = 'shadow pressed'; };
// What a page could set to steer the tools: it lives in the page's world.
globalThis.__computerMcpWorld = {find: () => document.body, ids: {get: () => 1}};
globalThis.__computerMcpWalk = () => [[0, 'button', 'Forged', '', [], '', 1, 0]];
</script>"#;
    const INNER: &str = r#"<!doctype html><button onclick="parent.document.getElementById('out').textContent = 'frame pressed'">Frame press</button>"#;
    call_ok(&client, "exec", json!({"command": "mkdir -p /work/site"})).await;
    call_ok(
        &client,
        "write_file",
        json!({"path": "/work/site/inner.html", "content": INNER}),
    )
    .await;
    open_served(&client, "parts.html", PAGE, 8133).await;
    // The frame may still be loading when the page has.
    let mut snap = String::new();
    for _ in 0..50 {
        snap = text(&call_ok(&client, "browser_snapshot", json!({})).await);
        if snap.contains("Frame press") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(snap.contains("- heading \"Parts\" [level=1]"), "{snap}");
    assert!(
        !snap.contains("Hidden away") && !snap.contains("Forged"),
        "{snap}"
    );
    let shadow = ref_of(&snap, &["button", "Shadow press"]);
    let frame = ref_of(&snap, &["button", "Frame press"]);
    let iframe_line = snap.lines().position(|l| l.contains("- Iframe")).unwrap();
    let frame_line = snap
        .lines()
        .position(|l| l.contains("Frame press"))
        .unwrap();
    assert!(frame_line > iframe_line, "{snap}");

    call_ok(&client, "browser_click", json!({"ref": shadow})).await;
    let t = text(&call_ok(&client, "browser_snapshot", json!({})).await);
    assert!(t.contains("shadow pressed"), "{t}");
    // The same elements keep their refs.
    assert_eq!(ref_of(&t, &["button", "Frame press"]), frame, "{t}");
    call_ok(&client, "browser_click", json!({"ref": frame})).await;
    let t = text(&call_ok(&client, "browser_snapshot", json!({})).await);
    assert!(t.contains("frame pressed"), "{t}");

    call_ok(
        &client,
        "browser_evaluate",
        json!({"function": "() => { document.getElementById('host').shadowRoot.innerHTML = ''; return 'gone'; }"}),
    )
    .await;
    call_refused(&client, "browser_click", json!({"ref": shadow}), "removed").await;
    client.cancel().await.unwrap();
}
