//! Phones end to end: `computer-mcp serve --provider adb --kind phone`
//! holding the fixture phone (fixtures/phone) through Debian's adb server
//! on a port of the test's own, driven by a real MCP client as a model
//! would: read the elements, tap by ref and by a point of a scaled
//! screenshot, swipe and type, with the phone's own log as the witness.

use base64::Engine;
use computer_phone_fixture::phone::screen::{self, BUTTON};
use computer_phone_fixture::rig::Rig;
use serde_json::json;

use super::support::*;

/// The server's options for the rig's phone, as the instance `tphone`.
fn phone_args(rig: &Rig) -> Vec<String> {
    let mut args: Vec<String> = ["--instance", "tphone", "--log", "warn"]
        .map(String::from)
        .to_vec();
    args.extend(rig.adb_provider_args());
    args
}

/// Ends the server and waits for it to exit (its release of the phone
/// reaches the adb server) before the rig kills its adb server, then checks
/// that nothing listens on the rig's adb port. A server still releasing
/// after the rig's end started a fresh adb server on that port and left it
/// running; that one comes up later than this check can see, so the wait
/// for the server's exit is the fix and the check only the rig's half.
async fn end(client: Client, rig: Rig) {
    let port = rig.adb.port();
    client.cancel().await.unwrap();
    drop(rig);
    let gone = (0..40).any(|_| {
        let closed = std::net::TcpStream::connect(("127.0.0.1", port)).is_err();
        if !closed {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        closed
    });
    assert!(
        gone,
        "an adb server still listens on port {port} after the test"
    );
}

fn touches(rig: &Rig, phase: &str) -> Vec<[i64; 2]> {
    rig.events("touch")
        .iter()
        .filter(|t| t["phase"] == phase)
        .filter_map(|t| Some([t["x"].as_i64()?, t["y"].as_i64()?]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_taps_by_element_and_by_a_scaled_screenshots_point_and_the_phone_sees_each() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let (client, _rec) = stdio_serve(&phone_args(&rig)).await;
    let names = tool_names(&client).await;
    for t in [
        "screenshot",
        "list_elements",
        "tap",
        "swipe",
        "type",
        "app_launch",
    ] {
        assert!(names.contains(&t.to_string()), "{t} not in {names:?}");
    }
    assert!(!names.contains(&"exec".to_string()), "{names:?}");
    let info = text(&call(&client, "computer_info", json!({})).await);
    for fact in [
        "provider: adb",
        "kind: android (android amd64)",
        "Android 13 (SDK 33)",
        "screen 1080x2400 at density 420",
        "network: open",
    ] {
        assert!(info.contains(fact), "{fact} not in {info}");
    }
    assert!(!info.contains("127.0.0.1"), "the serial stays out: {info}");
    assert!(!info.contains("work directory"), "{info}");

    // By element: the button's ref from list_elements.
    let listed = call(&client, "list_elements", json!({})).await;
    assert!(!is_error(&listed), "{}", text(&listed));
    let line = text(&listed)
        .lines()
        .find(|l| l.contains("#button"))
        .unwrap_or_else(|| panic!("no button in {}", text(&listed)))
        .to_string();
    assert!(line.contains("\"agentrun fixture\""), "{line}");
    let reference = line.split_whitespace().next().unwrap();
    let tapped = call(&client, "tap", json!({"ref": reference})).await;
    assert!(!is_error(&tapped), "{}", text(&tapped));
    let centre = [
        i64::from((BUTTON.l + BUTTON.r) / 2),
        i64::from((BUTTON.t + BUTTON.b) / 2),
    ];
    assert_eq!(touches(&rig, "down").last(), Some(&centre));

    // By a point read off a screenshot 360 px wide.
    let shot = call(&client, "screenshot", json!({"max_width": 360})).await;
    let out = structured(&shot);
    assert_eq!(out["width"], 360, "{out}");
    let png = shot
        .content
        .iter()
        .find_map(|c| c.as_image().map(|i| i.data.clone()))
        .expect("an image");
    let png = base64::engine::general_purpose::STANDARD
        .decode(png)
        .unwrap();
    std::fs::write(dir.path().join("shot.png"), &png).unwrap();
    if let Ok(keep) = std::env::var("CMCP_KEEP_SHOTS") {
        let _ = std::fs::write(std::path::Path::new(&keep).join("phone-360.png"), &png);
    }
    let (w, h, rgb) = decode(&png);
    assert_eq!(w, 360);
    // The button's centre in the screenshot, found by its colour.
    let (x, y) = find_colour(w, h, &rgb, screen::BUTTON_COLOUR).expect("the button shows");
    let tapped = call(&client, "tap", json!({"x": x, "y": y})).await;
    assert!(!is_error(&tapped), "{}", text(&tapped));
    let [dx, dy] = *touches(&rig, "down").last().unwrap();
    let scale = f64::from(screen::WIDTH) / 360.0;
    assert!(
        (dx as f64 - (x as f64 + 0.5) * scale).abs() <= scale / 2.0 + 0.5
            && (dy as f64 - (y as f64 + 0.5) * scale).abs() <= scale / 2.0 + 0.5,
        "screenshot ({x}, {y}) landed at ({dx}, {dy})"
    );
    assert!(BUTTON.contains(dx as i32, dy as i32));

    // A tap outside the screenshot is refused and nothing reaches the phone.
    let before = rig.events("touch").len();
    let out = call(&client, "tap", json!({"x": 360, "y": 5})).await;
    assert!(is_error(&out));
    assert!(
        text(&out).contains("outside the 360x800 screenshot"),
        "{}",
        text(&out)
    );
    assert_eq!(rig.events("touch").len(), before);
    end(client, rig).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swipe_and_typed_text_arrive_exactly_and_bad_input_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let (client, _rec) = stdio_serve(&phone_args(&rig)).await;
    let shot = call(&client, "screenshot", json!({"max_width": 540})).await;
    assert_eq!(structured(&shot)["width"], 540);
    // Half size: each screenshot pixel is 2x2 of the phone's.
    let swiped = call(
        &client,
        "swipe",
        json!({"from": [270, 900], "to": [270, 450], "ms": 300}),
    )
    .await;
    assert!(!is_error(&swiped), "{}", text(&swiped));
    assert_eq!(touches(&rig, "down").last(), Some(&[541, 1801]));
    assert_eq!(touches(&rig, "up").last(), Some(&[541, 901]));

    let listed = text(&call(&client, "list_elements", json!({})).await);
    let search = listed
        .lines()
        .find(|l| l.contains("EditText"))
        .unwrap_or_else(|| panic!("no field in {listed}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let typed = call(
        &client,
        "type",
        json!({"text": "Hello, agentrun! 123", "ref": search}),
    )
    .await;
    assert!(!is_error(&typed), "{}", text(&typed));
    let texts: String = rig
        .events("text")
        .iter()
        .filter_map(|t| t["text"].as_str().map(String::from))
        .collect();
    assert_eq!(texts, "Hello, agentrun! 123");

    let before = rig.events("touch").len() + rig.events("text").len();
    for (tool, args, words) in [
        ("type", json!({"text": "naïve"}), "'ï' (U+00EF)"),
        (
            "swipe",
            json!({"from": [1, 1], "to": [2, 2], "ms": 1001}),
            "0 to 1000 ms",
        ),
        (
            "swipe",
            json!({"direction": "up", "from": [1, 1]}),
            "not both",
        ),
        // One point is no swipe.
        (
            "swipe",
            json!({"from": [1, 1]}),
            "a swipe is 2 points, from and to (in the last screenshot's pixels), or a direction; only from was given",
        ),
        // The screenshot is 540 wide: x goes 0 to 539.
        (
            "tap",
            json!({"x": 540, "y": 10}),
            "is outside the 540x1200 screenshot",
        ),
        (
            "tap",
            json!({"ref": "e9999"}),
            "not in the last list_elements",
        ),
        (
            "app_launch",
            json!({"app": "com.example.none"}),
            "no app com.example.none",
        ),
    ] {
        let out = call(&client, tool, args).await;
        assert!(is_error(&out), "{tool}: {}", text(&out));
        assert!(text(&out).contains(words), "{tool}: {}", text(&out));
    }
    assert_eq!(rig.events("touch").len() + rig.events("text").len(), before);
    end(client, rig).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_open_by_a_view_intent_the_screen_turns_and_a_volume_key_is_pressed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let (client, _rec) = stdio_serve(&phone_args(&rig)).await;

    let url = "https://example.com/search?q=it's&n=1";
    let opened = call(&client, "open_url", json!({ "url": url })).await;
    assert!(!is_error(&opened), "{}", text(&opened));
    let views = rig.events("view");
    assert_eq!(views.len(), 1, "{views:?}");
    assert_eq!(views[0]["url"], "https://example.com/search?q=it%27s&n=1");
    for (bad, words) in [
        ("javascript:alert(1)", "only http and https"),
        ("https://exa mple.com/", "no spaces"),
        ("example.com/page", "is not a URL"),
    ] {
        let out = call(&client, "open_url", json!({ "url": bad })).await;
        assert!(is_error(&out), "{bad}: {}", text(&out));
        assert!(text(&out).contains(words), "{bad}: {}", text(&out));
    }
    assert_eq!(
        rig.events("view").len(),
        1,
        "a refused URL reached the phone"
    );

    let read = call(&client, "orientation", json!({})).await;
    assert!(!is_error(&read), "{}", text(&read));
    assert_eq!(structured(&read)["orientation"], "portrait");
    assert_eq!(structured(&read)["auto_rotate"], true);
    // The fixture app (in front since the URL) fixes itself in portrait:
    // the lock is set, but the display, read from the phone, stays.
    let set = call(&client, "orientation", json!({"set": "landscape"})).await;
    assert!(!is_error(&set), "{}", text(&set));
    assert_eq!(
        structured(&set)["orientation"],
        "portrait",
        "{}",
        text(&set)
    );
    assert_eq!(structured(&set)["auto_rotate"], false);
    assert!(
        text(&set).contains("fixes its own orientation"),
        "{}",
        text(&set)
    );
    // Settings follows the lock: the display turns.
    let settings = call(
        &client,
        "app_launch",
        json!({"app": "com.android.settings"}),
    )
    .await;
    assert!(!is_error(&settings), "{}", text(&settings));
    let read = call(&client, "orientation", json!({})).await;
    assert_eq!(
        structured(&read)["orientation"],
        "landscape",
        "{}",
        text(&read)
    );
    let back = call(&client, "orientation", json!({"set": "portrait"})).await;
    assert_eq!(structured(&back)["orientation"], "portrait");
    let puts: Vec<(String, String)> = rig
        .events("setting")
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().into(),
                e["value"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        puts.contains(&("user_rotation".into(), "1".into())),
        "{puts:?}"
    );
    assert_eq!(puts.last(), Some(&("user_rotation".into(), "0".into())));

    let pressed = call(&client, "press_button", json!({"button": "volume_up"})).await;
    assert!(!is_error(&pressed), "{}", text(&pressed));
    let keys = rig.events("key");
    assert_eq!(
        keys.last().unwrap()["name"],
        "KEYCODE_VOLUME_UP",
        "{keys:?}"
    );
    let out = call(&client, "press_button", json!({"button": "power"})).await;
    assert!(is_error(&out));
    for valid in [
        "back",
        "home",
        "app_switch",
        "enter",
        "volume_up",
        "volume_down",
    ] {
        assert!(text(&out).contains(valid), "{valid} not in {}", text(&out));
    }
    assert_eq!(rig.events("key").len(), keys.len());
    end(client, rig).await;
}

fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
    let d = png::Decoder::new(std::io::Cursor::new(png));
    let mut r = d.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(px)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, rgb)
}

/// The centre of the pixels of `colour` (within a small tolerance: the
/// scaled image blends edges).
fn find_colour(w: u32, h: u32, rgb: &[u8], colour: [u8; 3]) -> Option<(u32, u32)> {
    let (mut n, mut sx, mut sy) = (0u64, 0u64, 0u64);
    for y in 0..h {
        for x in 0..w {
            let i = ((y * w + x) * 3) as usize;
            if rgb[i..i + 3]
                .iter()
                .zip(colour)
                .all(|(a, b)| a.abs_diff(b) <= 4)
            {
                n += 1;
                sx += u64::from(x);
                sy += u64::from(y);
            }
        }
    }
    (n > 0).then(|| ((sx / n) as u32, (sy / n) as u32))
}

/// `app_install` takes an APK from a folder shared with the server (the
/// phone's files, at /workspace): the fixture installs it and it opens;
/// a path outside is refused in words before anything reaches the phone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_installs_an_apk_from_the_shared_folder_and_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let shared = tempfile::tempdir().unwrap();
    let shared_path = std::fs::canonicalize(shared.path()).unwrap();
    std::fs::write(
        shared_path.join("notes.apk"),
        "fixture-apk package=com.example.notes activity=.Notes label=Notes\n",
    )
    .unwrap();
    let mut args = phone_args(&rig);
    args.extend([
        "--share".to_string(),
        format!("{}:ro", shared_path.display()),
    ]);
    let (client, _rec) = stdio_serve(&args).await;
    let out = call(
        &client,
        "app_install",
        json!({"path": "/workspace/notes.apk"}),
    )
    .await;
    assert!(!is_error(&out), "{}", text(&out));
    assert!(text(&out).contains("com.example.notes"), "{}", text(&out));
    let out = call(&client, "app_launch", json!({"app": "com.example.notes"})).await;
    assert!(!is_error(&out), "{}", text(&out));
    assert_eq!(rig.phone.state().apps.front(), "com.example.notes");
    let out = call(&client, "app_install", json!({"path": "/etc/notes.apk"})).await;
    assert!(is_error(&out));
    assert!(
        text(&out).contains("outside the computer's files"),
        "{}",
        text(&out)
    );
    end(client, rig).await;
}

/// The fixture phone in the live viewer (with `--viewer`), in a real
/// headless Chromium: its PNG frames drawn on the canvas at the phone's
/// own size, and a click on the canvas over the fixture's button, under a
/// control lease, landing on the phone as a tap inside the button.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_the_phone_in_the_viewer_and_taps_its_button() {
    use super::view::Page;
    use computer_providers::cdp::chromium::HostChromium;
    if !computer_testkit::need_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let mut args = phone_args(&rig);
    args.extend(["--viewer", "127.0.0.1:0"].map(String::from));
    let (client, _rec) = stdio_serve(&args).await;
    // The phone is taken by a first call.
    let shot = call(&client, "screenshot", json!({"max_width": 360})).await;
    assert!(!is_error(&shot), "{}", text(&shot));
    let r = call(&client, "computer_view", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let url = structured(&r)["url"].as_str().unwrap().to_string();

    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let page = Page::drawing(&browser, &url).await;
    assert_eq!(
        page.eval("[window.viewer.width, window.viewer.height]")
            .await,
        json!([screen::WIDTH, screen::HEIGHT])
    );
    let facts = page
        .eval("document.getElementById('facts').textContent")
        .await;
    assert!(facts.as_str().unwrap().starts_with("phone · "), "{facts}");
    let (cx, cy) = ((BUTTON.l + BUTTON.r) / 2, (BUTTON.t + BUTTON.b) / 2);
    let (cx, cy) = (cx as u32, cy as u32);
    let drawn = page.pixels(&[[cx, cy]]).await[0];
    assert_eq!(drawn, screen::BUTTON_COLOUR, "the button on the canvas");

    page.eval("document.getElementById('take').click()").await;
    page.until("control taken", "window.viewer.control === true")
        .await;
    let ups = touches(&rig, "up").len();
    let at = page.at(cx, cy).await;
    page.mouse("mousePressed", at).await;
    page.mouse("mouseReleased", at).await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while touches(&rig, "up").len() == ups {
        assert!(
            std::time::Instant::now() < until,
            "no touch within 20 s: {:?}",
            page.eval("window.viewer.refused").await
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let [x, y] = *touches(&rig, "down").last().unwrap();
    assert!(
        BUTTON.contains(x as i32, y as i32)
            && (x - i64::from(cx)).abs() <= 3
            && (y - i64::from(cy)).abs() <= 3,
        "the click over ({cx}, {cy}) landed at ({x}, {y})"
    );
    assert_eq!(
        touches(&rig, "up").last(),
        Some(&[x, y]),
        "a tap, not a swipe"
    );
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;
    end(client, rig).await;
}
