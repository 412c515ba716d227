//! Desktops end to end: `computer-mcp serve --kind desktop` on the local
//! provider, the X11 fixture (fixtures/x11) running inside the computer,
//! and the desktop tools driven by a real MCP client with what Anthropic's
//! and OpenAI's models send.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::support::*;

const GREEN: [u8; 3] = [0, 255, 0];

/// The fixture beside the server (`cargo test --workspace` builds it).
pub fn fixture_bin() -> Option<PathBuf> {
    let p = Path::new(SERVER).with_file_name("computerd-x11-fixture");
    computer_testkit::need(
        "xvfb",
        p.is_file(),
        "the X11 fixture is not built (cargo build -p computer-x11-fixture)",
    )
    .then_some(p)
}

/// The fixture in a directory the computer sees read-only at /workspace.
pub fn fixture_share(bin: &Path) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("cmcp-x11")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let to = dir.path().join("fixture");
    std::fs::copy(bin, &to).unwrap();
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The image of a result, decoded: width, height, RGB.
pub fn image_of(r: &CallToolResult) -> (u32, u32, Vec<u8>) {
    let img = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .unwrap_or_else(|| panic!("no image in {r:?}"));
    assert_eq!(img.mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&img.data)
        .unwrap();
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    // An indexed PNG (a page of few colours) comes out as RGB too.
    d.set_transformations(png::Transformations::EXPAND);
    let mut reader = d.read_info().unwrap();
    let (w, h) = (reader.info().width, reader.info().height);
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut buf).unwrap();
    buf.truncate(frame.buffer_size());
    (w, h, buf)
}

/// The centre of the pixels of `colour` in an image.
pub fn centre_of(w: u32, rgb: &[u8], colour: [u8; 3]) -> [i64; 2] {
    let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
    for (i, p) in rgb.chunks(3).enumerate() {
        if p == colour {
            let (x, y) = (i as u32 % w, i as u32 / w);
            x0 = x0.min(x);
            y0 = y0.min(y);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    assert!(x0 <= x1, "no pixel of {colour:?}");
    [i64::from((x0 + x1) / 2), i64::from((y0 + y1) / 2)]
}

/// The fixture (shared at /workspace) started in the computer like any
/// program (it gets DISPLAY), once it says it is ready; its log is
/// /tmp/events.jsonl.
pub async fn start_fixture(client: &Client) {
    call_ok(
        client,
        "process",
        json!({"action": "start", "args": {"argv": ["/workspace/fixture", "--log", "/tmp/events.jsonl"]}}),
    )
    .await;
    wait_for(client, 0, "the ready line", |e| {
        e.iter().any(|e| e["event"] == "ready")
    })
    .await;
}

pub async fn events(client: &Client) -> Vec<Value> {
    stdout_of(client, "cat /tmp/events.jsonl 2>/dev/null")
        .await
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Wait (bounded) until the fixture's log after event `from` satisfies `ok`.
pub async fn wait_for(
    client: &Client,
    from: usize,
    what: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let ev = events(client).await;
        let since: Vec<Value> = ev.into_iter().skip(from).collect();
        if ok(&since) {
            return since;
        }
        assert!(
            Instant::now() < until,
            "{what} did not show in the fixture's log within 15 s: {since:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn downs(ev: &[Value]) -> Vec<&Value> {
    ev.iter().filter(|e| e["event"] == "down").collect()
}

fn in_green(e: &Value) -> bool {
    let (x, y) = (e["x"].as_i64().unwrap(), e["y"].as_i64().unwrap());
    (100..200).contains(&x) && (0..100).contains(&y)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_clicks_where_it_saw_through_screenshot_computer_and_input() {
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let bin = or_skip!(fixture_bin());
    let share = fixture_share(&bin);
    let server = Server::new();
    let share_arg = format!("{}:ro", share.path().display());
    let (client, _) = server
        .stdio(&["--kind", "desktop", "--share", &share_arg])
        .await;

    let names = tool_names(&client).await;
    for want in ["screenshot", "computer", "input", "exec", "process"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }

    // The fixture, started in the computer like any program: it gets
    // DISPLAY. `process` lists process_start and the others as its acts.
    start_fixture(&client).await;
    let info = call(&client, "computer_info", json!({})).await;
    assert_eq!(structured(&info)["kind"], "desktop");

    // A screenshot 640 wide: half the 1280x800 screen.
    let shot = call_ok(&client, "screenshot", json!({"max_width": 640})).await;
    let s = structured(&shot);
    assert_eq!(
        (
            &s["width"],
            &s["height"],
            &s["scale"],
            &s["screen_width"],
            &s["frame"]
        ),
        (
            &json!(640),
            &json!(400),
            &json!(0.5),
            &json!(1280),
            &json!("f1")
        )
    );
    let (w, h, rgb) = image_of(&shot);
    assert_eq!((w, h), (640, 400));
    let green = centre_of(w, &rgb, GREEN);
    assert_eq!(green, [74, 24], "the green quadrant's centre at half size");

    // input: a click at the scaled point lands in green at full resolution.
    let n = events(&client).await.len();
    let r = call_ok(
        &client,
        "input",
        json!({"actions": [{"type": "click", "x": green[0], "y": green[1]}]}),
    )
    .await;
    assert_eq!(structured(&r)["done"], 1);
    assert!(text(&r).contains("frame f1"), "{}", text(&r));
    let ev = wait_for(&client, n, "the click", |e| !downs(e).is_empty()).await;
    let d = downs(&ev)[0];
    assert!(in_green(d), "{d}");
    assert_eq!(
        (d["x"].as_i64(), d["button"].as_i64()),
        (Some(149), Some(1))
    );

    // computer: Anthropic's left_click with shift held, at the same point.
    let n = events(&client).await.len();
    call_ok(
        &client,
        "computer",
        json!({"action": "left_click", "coordinate": green, "text": "shift"}),
    )
    .await;
    let ev = wait_for(&client, n, "the shift click", |e| !downs(e).is_empty()).await;
    let d = downs(&ev)[0];
    assert!(in_green(d), "{d}");
    assert_eq!(
        d["state"].as_i64().unwrap() & 1,
        1,
        "shift held during the click: {d}"
    );

    // computer: a zoom of the green quadrant (in the screenshot's pixels)
    // is green, grown to the budget; the frame stays f1.
    let r = call_ok(
        &client,
        "computer",
        json!({"action": "zoom", "region": [50, 0, 100, 50]}),
    )
    .await;
    let (zw, zh, zrgb) = image_of(&r);
    assert_eq!((zw, zh), (800, 800));
    assert!(zrgb.chunks(3).all(|p| p == GREEN), "the zoom is all green");
    assert_eq!(structured(&r)["frame"], "f1");

    // input: OpenAI's drag path and keypress ["CTRL", "A"].
    let n = events(&client).await.len();
    let r = call_ok(
        &client,
        "input",
        json!({"actions": [
            {"type": "drag", "path": [{"x": 10, "y": 10}, {"x": 40, "y": 40}, {"x": 80, "y": 30}]},
            {"type": "keypress", "keys": ["CTRL", "A"]}
        ]}),
    )
    .await;
    assert_eq!(structured(&r)["done"], 2);
    let ev = wait_for(&client, n, "the drag and the keys", |e| {
        e.iter().any(|e| e["event"] == "up")
            && e.iter()
                .any(|e| e["event"] == "key" && e["keysym"] == 0x61 && e["up"] == false)
    })
    .await;
    let d = downs(&ev)[0];
    assert_eq!((d["x"].as_i64(), d["y"].as_i64()), (Some(21), Some(21)));
    let up = ev.iter().find(|e| e["event"] == "up").unwrap();
    assert_eq!((up["x"].as_i64(), up["y"].as_i64()), (Some(161), Some(61)));
    assert!(in_green(up), "the drag ends in green: {up}");
    let a = ev
        .iter()
        .find(|e| e["event"] == "key" && e["keysym"] == 0x61 && e["up"] == false)
        .unwrap();
    assert_eq!(a["state"].as_i64().unwrap() & 4, 4, "ctrl held with a: {a}");

    // The same screen again, if_changed: a note, no image.
    let again = call(
        &client,
        "screenshot",
        json!({"max_width": 640, "if_changed": true}),
    )
    .await;
    let s = structured(&again);
    assert_eq!((&s["unchanged"], &s["frame"]), (&json!(true), &json!("f1")));
    assert!(again.content.iter().all(|c| c.as_image().is_none()));
    assert!(
        text(&again).starts_with(
            "unchanged since frame f1: the screen is as in that screenshot (no new image); its points still apply"
        ),
        "{}",
        text(&again)
    );

    // Bad input: refused in words naming the field and the limit, nothing sent.
    let many: Vec<Value> = (0..101).map(|_| json!({"type": "wait"})).collect();
    for (tool, args, words) in [
        (
            "input",
            json!({"actions": many}),
            "actions holds 101 actions; at most 100 go in one batch",
        ),
        (
            "computer",
            json!({"action": "key", "text": "ctrl+Hyper"}),
            "text: \"Hyper\" is not a key",
        ),
        (
            "computer",
            json!({"action": "left_click", "coordinate": [640, 10]}),
            "coordinate [640, 10] is outside the 640x400 screenshot",
        ),
        (
            "input",
            json!({"actions": [{"type": "click", "x": 10, "y": 400}]}),
            "actions[0] [10, 400] is outside the 640x400 screenshot",
        ),
        (
            "input",
            json!({"actions": [{"type": "wait"}, {"type": "type", "text": "a\u{7}b"}]}),
            "actions[1].text holds the control character U+0007",
        ),
        (
            "input",
            json!({"actions": [{"type": "keypress", "keys": ["CTRL", "HYPER"]}]}),
            "actions[0].keys[1]: \"HYPER\" is not a key",
        ),
        (
            "computer",
            json!({"action": "zoom", "region": [600, 0, 700, 10]}),
            "region [600, 0, 700, 10] is not inside the 640x400 screenshot",
        ),
        (
            "screenshot",
            json!({"max_width": 10}),
            "max_width is 10; give at least 64",
        ),
    ] {
        let n = events(&client).await.len();
        call_refused(&client, tool, args, words).await;
        let later = events(&client).await;
        assert!(
            later[n..]
                .iter()
                .all(|e| e["event"] != "down" && e["event"] != "text"),
            "{tool} sent something: {:?}",
            &later[n..]
        );
    }

    // A computer whose display is gone: the screenshot says so.
    let r = call(
        &client,
        "exec",
        json!({"command": "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = Xvfb ] && kill ${p#/proc/}; done; sleep 0.5"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = call(&client, "screenshot", json!({})).await;
    assert!(is_error(&r));
    assert!(
        text(&r).starts_with("taking the screenshot: ")
            && text(&r).contains("the computer's display is not answering"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_server_lists_no_desktop_tool() {
    let Some((_server, client, _)) = Server::local_stdio(&[]).await else {
        return;
    };
    let names = tool_names(&client).await;
    for not in ["screenshot", "computer", "input"] {
        assert!(!names.iter().any(|n| n == not), "{not} in {names:?}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktops_page_tools_drive_the_browser_its_screen_shows() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(
            &[computer_testkit::need_xvfb, computer_testkit::need_chromium],
            &["--kind", "desktop"]
        )
        .await
    );
    let names = tool_names(&client).await;
    // The page tools are listed inside `browser`; each still answers to
    // its own name (open_served calls browser_navigate).
    assert_eq!(
        names[..12],
        [
            "screenshot",
            "computer",
            "input",
            "exec",
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "process",
            "port",
            "browser",
            "computer_info",
        ]
    );
    let nav = open_served(
        &client,
        "green.html",
        "<!doctype html><title>Green</title><body style=\"margin:0;background:#00ff00;height:100vh\"></body>",
        8127,
    )
    .await;
    assert!(text(&nav).contains("Green"), "{}", text(&nav));
    // The page is on the desktop's screen: the screenshot's middle is the
    // page's green.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let shot = call_ok(&client, "screenshot", json!({})).await;
        let (w, h, rgb) = image_of(&shot);
        let at = ((h / 2 * w + w / 2) * 3) as usize;
        let px = [rgb[at], rgb[at + 1], rgb[at + 2]];
        if px == GREEN {
            break;
        }
        assert!(
            Instant::now() < until,
            "the screen's middle is {px:?}, not the page's green"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.cancel().await.unwrap();
}

/// `computer://<computer>/screen`: a desktop's screen now, a PNG at its own
/// size, listed once the desktop exists; a sandbox has none, said in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktops_screen_is_a_resource() {
    use rmcp::model::ResourceContents;
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(
            &[computer_testkit::need_xvfb],
            &["--kind", "desktop", "--screen", "640x400"]
        )
        .await
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "computer://{computer}/screen"),
        "{templates:?}"
    );
    let e = read_refused(&client, "computer://default/screen").await;
    assert!(e.contains("no default computer yet"), "{e}");
    call_ok(&client, "exec", json!({"command": "true"})).await;
    let listed: Vec<String> = resource_uris(&client)
        .await
        .into_iter()
        .filter(|u| u.ends_with("/screen"))
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    for uri in ["computer://default/screen", listed[0].as_str()] {
        let got = read(&client, uri).await;
        let ResourceContents::BlobResourceContents {
            blob, mime_type, ..
        } = &got.contents[0]
        else {
            panic!("{got:?}");
        };
        assert_eq!(mime_type.as_deref(), Some("image/png"));
        let png = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap();
        let info = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap()
            .info()
            .clone();
        assert_eq!((info.width, info.height), (640, 400), "{uri}");
    }
    client.cancel().await.unwrap();

    let sandbox = Server::new();
    let (client, _) = sandbox.stdio(&[]).await;
    call(&client, "exec", json!({"command": "true"})).await;
    let e = read_refused(&client, "computer://default/screen").await;
    assert!(e.contains("which has no screen"), "{e}");
    client.cancel().await.unwrap();
}
