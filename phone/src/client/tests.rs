use std::sync::Mutex;

use computerd::client::ComputerExt;
use serde_json::json;

use super::*;

/// A phone that answers from a table and records every command; the
/// `fail_after`th `run` (counted from 1) and later ones fail as a phone
/// that went away.
#[derive(Default)]
struct Fake {
    sent: Mutex<Vec<String>>,
    fail_after: Option<usize>,
    packages: Vec<&'static str>,
    /// The raw screen `screencap -p` shows, when not the default gradient.
    screen: Mutex<Option<Vec<u8>>>,
}

fn raw_screen(w: u32, h: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [w, h, 1, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for y in 0..h {
        for x in 0..w {
            b.extend_from_slice(&[(x * 255 / w) as u8, (y * 255 / h) as u8, 7, 255]);
        }
    }
    b
}

/// A raw frame as `screencap -p` gives it: an RGBA PNG.
fn png_screen(raw: &[u8]) -> Vec<u8> {
    let (w, h) = (
        u32::from_le_bytes(raw[0..4].try_into().unwrap()),
        u32::from_le_bytes(raw[4..8].try_into().unwrap()),
    );
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(png::ColorType::Rgba);
    e.set_depth(png::BitDepth::Eight);
    let mut wr = e.write_header().unwrap();
    wr.write_image_data(&raw[16..]).unwrap();
    wr.finish().unwrap();
    out
}

impl Shell for Fake {
    fn run<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Ran, ShellError>> {
        Box::pin(async move {
            let mut sent = self.sent.lock().unwrap();
            sent.push(command.to_string());
            if self.fail_after.is_some_and(|n| sent.len() >= n) {
                return Err(ShellError("the device is offline".into()));
            }
            let stdout = match command {
                "getprop" => "[ro.product.model]: [Fixture]\n[ro.build.version.release]: [14]\n[ro.build.version.sdk]: [34]\n[ro.product.cpu.abi]: [arm64-v8a]\n".to_string(),
                "wm size" => "Physical size: 200x400\n".into(),
                "wm density" => "Physical density: 320\n".into(),
                "pm list packages" => self.packages.iter().map(|p| format!("package:{p}\n")).collect(),
                c if c.starts_with("cmd package resolve-activity") => "com.android.settings/.Settings\n".into(),
                c if c.starts_with("am start") => "Status: ok\nComplete\n".into(),
                "dumpsys activity activities" => "  topResumedActivity=ActivityRecord{1 u0 com.android.settings/.Settings t3}\n".into(),
                // An input script: it ran whole, so it echoes its markers.
                c => c
                    .lines()
                    .filter_map(|l| l.strip_prefix("echo '"))
                    .map(|m| format!("{}\n", m.trim_end_matches('\'')))
                    .collect(),
            };
            Ok(Ran { stdout, exit: 0 })
        })
    }

    fn bytes<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ShellError>> {
        Box::pin(async move {
            self.sent.lock().unwrap().push(command.to_string());
            let screen = self.screen.lock().unwrap().clone();
            Ok(png_screen(&screen.unwrap_or_else(|| raw_screen(200, 400))))
        })
    }
}

async fn phone(fake: Fake) -> (Arc<Fake>, Arc<PhoneClient>) {
    let fake = Arc::new(fake);
    let client = Arc::new(
        PhoneClient::new(fake.clone(), Launched::default())
            .await
            .unwrap(),
    );
    fake.sent.lock().unwrap().clear();
    (fake, client)
}

fn sent(f: &Fake) -> Vec<String> {
    f.sent.lock().unwrap().clone()
}

#[tokio::test]
async fn hello_and_about_say_what_the_phone_is() {
    let (_, c) = phone(Fake::default()).await;
    let hello: HelloResult =
        serde_json::from_value(c.call_value("hello", json!({})).await.unwrap()).unwrap();
    assert_eq!(hello.kind, MachineKind::Android);
    assert_eq!(hello.groups, GROUPS);
    assert_eq!(hello.arch, "arm64");
    assert_eq!(
        (
            c.about().model.as_str(),
            c.about().android.as_str(),
            c.about().width,
            c.about().height,
            c.about().density
        ),
        ("Fixture", "14", 200, 400, 320)
    );
}

#[tokio::test]
async fn a_shot_is_the_whole_screen_or_a_region_as_png() {
    let (_, c) = phone(Fake::default()).await;
    let (shot, png) = c.screen_shot(None).await.unwrap();
    assert_eq!((shot.width, shot.height, shot.scale), (200, 400, 1.0));
    assert_eq!(image_size(&png), (200, 400));
    let (part, png) = c
        .screen_shot(Some(computerd::protocol::Region {
            x: 10,
            y: 20,
            width: 30,
            height: 40,
        }))
        .await
        .unwrap();
    assert_eq!((part.width, part.screen_width), (30, 200));
    assert_eq!(image_size(&png), (30, 40));
    let e = c
        .call_value(
            "screen.shot",
            json!({"region": {"x": 190, "y": 0, "width": 20, "height": 1}}),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside the 200x400 screen"), "{e}");
}

#[tokio::test]
async fn a_shot_within_a_fit_is_scaled_before_it_is_encoded() {
    let (_, c) = phone(Fake::default()).await;
    let fit = json!({"long": 100, "short": 100, "pixels": 1_000_000});
    let r = c
        .call_value("screen.shot", json!({ "fit": fit }))
        .await
        .unwrap();
    let r: ScreenShotResult = serde_json::from_value(r).unwrap();
    // 200x400 within 100x100: 50x100, a quarter of the screen's pixels.
    assert_eq!((r.width, r.height), (50, 100));
    assert_eq!((r.screen_width, r.screen_height), (200, 400));
    assert_eq!(r.scale, 0.25);
    assert_eq!(image_size(&r.data.0), (50, 100));
    // A region is never scaled: its pixels are the screen's.
    let region = json!({"x": 0, "y": 0, "width": 150, "height": 150});
    let r = c
        .call_value("screen.shot", json!({ "region": region, "fit": fit }))
        .await
        .unwrap();
    let r: ScreenShotResult = serde_json::from_value(r).unwrap();
    assert_eq!((r.width, r.height, r.scale), (150, 150, 1.0));
}

/// A PNG's pixel at (x, y), as the png crate reads it.
fn pixel(png: &[u8], x: usize, y: usize) -> Vec<u8> {
    let mut r = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let step = info.line_size / info.width as usize;
    let at = y * info.line_size + x * step;
    buf[at..at + 3].to_vec()
}

#[tokio::test]
async fn a_shot_of_the_same_screen_is_the_same_png_and_a_changed_screen_is_shown() {
    let (f, c) = phone(Fake::default()).await;
    let fit = json!({"long": 100, "short": 100, "pixels": 1_000_000});
    let shot = |params: Value| {
        let c = Arc::clone(&c);
        async move {
            let r = c.call_value("screen.shot", params).await.unwrap();
            serde_json::from_value::<ScreenShotResult>(r).unwrap()
        }
    };
    let first = shot(json!({ "fit": fit })).await;
    let again = shot(json!({ "fit": fit })).await;
    assert_eq!(again.data, first.data);
    assert_ne!(again.id, first.id);
    assert_eq!((again.width, again.height, again.scale), (50, 100, 0.25));
    // The gradient's top left 4x4 box: red 0..=3, green 0, 0, 1, 1, blue 7.
    assert_eq!(pixel(&again.data.0, 0, 0), [2, 1, 7]);
    // The same screen asked another way: that way's answer, not the last.
    let whole = shot(json!({})).await;
    assert_eq!((whole.width, whole.height), (200, 400));
    assert_eq!(image_size(&whole.data.0), (200, 400));
    // The screen turns white at its top left: the next shot shows it.
    let mut white = raw_screen(200, 400);
    for y in 0..4 {
        let at = 16 + y * 200 * 4;
        white[at..at + 16].fill(255);
    }
    *f.screen.lock().unwrap() = Some(white);
    let changed = shot(json!({ "fit": fit })).await;
    assert_ne!(changed.data, first.data);
    assert_eq!(pixel(&changed.data.0, 0, 0), [255, 255, 255]);
    // Each shot asked the phone for its screen.
    assert_eq!(sent(&f), vec!["screencap -p"; 4]);
}

fn image_size(png: &[u8]) -> (u32, u32) {
    (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    )
}

#[tokio::test]
async fn a_batch_runs_as_one_script_and_a_touch_off_the_screen_sends_nothing() {
    let (f, c) = phone(Fake::default()).await;
    let r = c
        .call_value(
            "input.actions",
            json!({"actions": [{"type": "tap", "point": [10, 20]}, {"type": "swipe", "path": [[5, 300], [5, 100]], "ms": 200}, {"type": "type", "text": "Hello, agentrun! 123"}]}),
        )
        .await
        .unwrap();
    assert_eq!(r, json!({"done": 3}));
    let scripts = sent(&f);
    assert_eq!(scripts.len(), 1, "{scripts:?}");
    assert!(scripts[0].contains("input tap 10 20"));
    assert!(scripts[0].contains("input swipe 5 300 5 100 200"));
    assert!(scripts[0].contains("input text 'Hello,%sagentrun!%s123'"));

    f.sent.lock().unwrap().clear();
    let r = c
        .call_value("input.actions", json!({"actions": [{"type": "tap", "point": [1, 1]}, {"type": "tap", "point": [200, 5]}]}))
        .await
        .unwrap();
    assert_eq!(r["done"], 0);
    assert_eq!(r["failed"]["index"], 1);
    assert!(
        r["failed"]["message"]
            .as_str()
            .unwrap()
            .contains("outside the 200x400 screen")
    );
    assert!(
        sent(&f).is_empty(),
        "nothing goes to the phone: {:?}",
        sent(&f)
    );

    for (bad, words) in [
        (
            json!({"type": "swipe", "path": [[1, 1], [2, 2]], "ms": 1001}),
            "0 to 1000 ms",
        ),
        (json!({"type": "swipe", "path": [[1, 1]]}), "at least 2"),
        (json!({"type": "type", "text": "naïve"}), "cannot type"),
        (
            json!({"type": "pinch", "point": [5, 5], "scale": 2.0}),
            "a pinch",
        ),
        (json!({"type": "click", "point": [5, 5]}), "input.pointer"),
    ] {
        let r = c
            .call_value("input.actions", json!({"actions": [bad]}))
            .await
            .unwrap();
        assert_eq!(r["done"], 0);
        let m = r["failed"]["message"].as_str().unwrap();
        assert!(m.contains(words), "{m}");
    }
    assert!(sent(&f).is_empty(), "{:?}", sent(&f));
}

#[tokio::test]
async fn a_phone_that_goes_away_mid_batch_says_what_was_done() {
    // Three runs read what the phone is; the batch's first script is the
    // fourth, and the phone is gone for the fifth.
    let fake = Arc::new(Fake {
        fail_after: Some(5),
        ..Fake::default()
    });
    let c = PhoneClient::new(fake, Launched::default()).await.unwrap();
    let taps: Vec<Value> = (0..100)
        .map(|n| json!({"type": "tap", "point": [n % 200, 1]}))
        .collect();
    let r = c
        .call_value("input.actions", json!({"actions": taps}))
        .await
        .unwrap();
    let done = r["done"].as_u64().unwrap();
    assert!(done > 0 && done < 100, "{r}");
    assert_eq!(r["failed"]["index"].as_u64(), Some(done));
    assert_eq!(r["failed"]["kind"], "aborted");
    assert!(
        r["failed"]["message"]
            .as_str()
            .unwrap()
            .contains("the device is offline"),
        "{r}"
    );
}

#[tokio::test]
async fn apps_launch_only_what_the_phone_has_and_release_ends_what_was_launched() {
    let (f, c) = phone(Fake {
        packages: vec!["com.android.settings", "ai.agentrun.fixture"],
        ..Fake::default()
    })
    .await;
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert_eq!(list["apps"][0]["id"], "ai.agentrun.fixture");
    assert_eq!(list["foreground"], "com.android.settings");

    let e = c
        .call_value("apps.launch", json!({"id": "com.example.none"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("no app com.example.none on this phone"),
        "{e}"
    );
    let e = c
        .call_value("apps.launch", json!({"id": "x; reboot"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("id \"x; reboot\" is not an Android package name"),
        "{e}"
    );
    assert!(
        !sent(&f).iter().any(|c| c.starts_with("am ")),
        "{:?}",
        sent(&f)
    );

    c.call_value("apps.launch", json!({"id": "com.android.settings"}))
        .await
        .unwrap();
    assert!(sent(&f).contains(
        &"am start -W --activity-clear-task -n com.android.settings/.Settings".to_string()
    ));
    assert_eq!(c.launched(), ["com.android.settings"]);
    c.terminate_launched().await.unwrap();
    assert_eq!(
        sent(&f).last().map(String::as_str),
        Some("am force-stop com.android.settings")
    );
}

#[tokio::test]
async fn what_a_phone_has_not_is_refused_in_words() {
    let (f, c) = phone(Fake::default()).await;
    let e = c
        .call_value("exec.run", json!({"argv": ["ls"]}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported));
    assert!(
        e.to_string()
            .starts_with("exec.run: a phone over adb has no shell"),
        "{e}"
    );
    let e = c.call_value("bogus", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("unknown method \"bogus\""), "{e}");
    assert!(sent(&f).is_empty());
    c.close();
    assert!(c.is_closed());
    assert!(c.call_value("hello", json!({})).await.is_err());
}

#[tokio::test]
async fn a_transport_that_writes_no_files_declares_no_install_and_sends_nothing_for_one() {
    let (f, c) = phone(Fake::default()).await;
    assert!(!c.hello().groups.contains(&Group::AppsInstall));
    let e = c
        .call_value("apps.install", json!({"path": "/workspace/app.apk"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("installs no APK"), "{e}");
    assert_eq!(sent(&f), Vec::<String>::new());
    assert_eq!(groups(true).last(), Some(&Group::AppsInstall));
}

#[tokio::test]
async fn a_watch_gives_a_frame_at_once_then_one_only_when_the_screen_changes() {
    use computerd::protocol::ScreenWatchResult;
    let (f, c) = phone(Fake::default()).await;
    let watch = |after: u64, wait_ms: u64| {
        let c = Arc::clone(&c);
        async move {
            let v = c
                .call_value(
                    "screen.watch",
                    json!({"after": after, "waitMs": wait_ms, "maxWidth": 100}),
                )
                .await?;
            Ok::<ScreenWatchResult, ClientError>(serde_json::from_value(v).unwrap())
        }
    };
    let first = watch(0, 2000).await.unwrap();
    assert_eq!((first.seq, first.changed), (1, true));
    let frame = first.frame.unwrap();
    assert_eq!(
        (
            frame.format,
            frame.frame_width,
            frame.frame_height,
            frame.width,
            frame.height,
            frame.eof
        ),
        (ImageFormat::Png, 100, 200, 200, 400, true)
    );
    assert_eq!(image_size(&frame.data.0), (100, 200));

    // Nothing changed: the wait ends with no frame.
    let started = std::time::Instant::now();
    let same = watch(1, 300).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!((same.seq, same.changed, same.frame), (1, false, None));
    // A caller behind the newest frame gets it at once.
    assert_eq!(watch(0, 300).await.unwrap().seq, 1);

    let mut changed = raw_screen(200, 400);
    changed[16] ^= 0xff;
    *f.screen.lock().unwrap() = Some(changed);
    let next = watch(1, 2000).await.unwrap();
    assert_eq!((next.seq, next.changed), (2, true));
    assert!(next.frame.is_some());

    for (params, words) in [
        (
            json!({"after": 5}),
            "after is 5, past the newest frame's seq 2",
        ),
        (json!({"waitMs": 10_001}), "waitMs is 10001; at most 10000"),
        (json!({"maxWidth": 0}), "maxWidth is 0; give 1 or more"),
    ] {
        let e = c.call_value("screen.watch", params).await.unwrap_err();
        assert!(e.to_string().contains(words), "{e}");
    }
}
