//! The phone client against the fixture phone, through Debian's real adb
//! server on a port of the test's own: what a model's tools will do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use computer_phone::adb::AdbShell;
use computer_phone::client::PhoneClient;
use computer_phone_fixture::phone::screen;
use computer_phone_fixture::rig::Rig;
use computerd::client::{ComputerClient, ComputerExt};
use serde_json::{Value, json};

struct Test {
    rig: Rig,
    client: Arc<PhoneClient>,
    _dir: tempfile::TempDir,
}

async fn rig() -> Option<Test> {
    let adb_path = computer_testkit::need_adb()?;
    let dir = tempfile::tempdir().unwrap();
    let rig = Rig::start(&adb_path, dir.path().join("phone.log"))
        .await
        .unwrap();
    let shell = AdbShell::new(rig.adb.device(rig.transport_id))
        .await
        .unwrap();
    let client = Arc::new(
        PhoneClient::new(Arc::new(shell), Default::default())
            .await
            .unwrap(),
    );
    Some(Test {
        rig,
        client,
        _dir: dir,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_finds_the_button_in_the_tree_taps_it_and_the_phone_sees_the_tap_there() {
    let Some(r) = rig().await else { return };
    let c = &r.client;
    assert_eq!(
        (c.about().width, c.about().height, c.about().density),
        (screen::WIDTH as u32, screen::HEIGHT as u32, screen::DENSITY)
    );
    let tree = c.call_value("apps.ui_tree", json!({})).await.unwrap();
    let found =
        find(&tree["root"], "ai.agentrun.fixture:id/button").expect("the button is in the tree");
    assert_eq!(found["text"], "agentrun fixture");
    let b = &found["bounds"];
    let (x, y) = (
        b["x"].as_i64().unwrap() + b["width"].as_i64().unwrap() / 2,
        b["y"].as_i64().unwrap() + b["height"].as_i64().unwrap() / 2,
    );
    let done = c
        .call_value(
            "input.actions",
            json!({"actions": [{"type": "tap", "point": [x, y]}]}),
        )
        .await
        .unwrap();
    assert_eq!(done, json!({"done": 1}));
    let touches = r.rig.events("touch");
    assert!(
        touches
            .iter()
            .any(|t| t["phase"] == "down" && t["x"] == x && t["y"] == y),
        "no touch down at ({x}, {y}): {touches:?}"
    );

    // The screenshot shows the button's colour where the tree says it is.
    let (shot, png) = c.screen_shot(None).await.unwrap();
    assert_eq!(
        (shot.width, shot.height),
        (screen::WIDTH as u32, screen::HEIGHT as u32)
    );
    assert_eq!(&png[1..4], b"PNG");
}

fn find<'a>(node: &'a Value, id: &str) -> Option<&'a Value> {
    if node["id"] == id {
        return Some(node);
    }
    node["children"]
        .as_array()?
        .iter()
        .find_map(|c| find(c, id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_text_and_a_swipe_arrive_exactly() {
    let Some(r) = rig().await else { return };
    let c = &r.client;
    let done = c
        .call_value(
            "input.actions",
            json!({"actions": [
                {"type": "tap", "point": [540, 325]},
                {"type": "type", "text": "Hello, agentrun! 123"},
                {"type": "swipe", "path": [[540, 1800], [540, 900]], "ms": 300}
            ]}),
        )
        .await
        .unwrap();
    assert_eq!(done, json!({"done": 3}));
    let texts: String = r
        .rig
        .events("text")
        .iter()
        .filter_map(|t| t["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(texts, "Hello, agentrun! 123");
    let touches = r.rig.events("touch");
    let down = touches.iter().rfind(|t| t["phase"] == "down").unwrap();
    let up = touches.iter().rfind(|t| t["phase"] == "up").unwrap();
    assert_eq!(
        (down["x"].as_i64(), down["y"].as_i64()),
        (Some(540), Some(1800))
    );
    assert_eq!((up["x"].as_i64(), up["y"].as_i64()), (Some(540), Some(900)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_are_listed_launched_and_terminated() {
    let Some(r) = rig().await else { return };
    let c = &r.client;
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert_eq!(list["foreground"], "ai.agentrun.fixture");
    assert!(
        list["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == "com.android.settings")
    );
    c.call_value("apps.launch", json!({"id": "com.android.settings"}))
        .await
        .unwrap();
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert_eq!(list["foreground"], "com.android.settings");
    c.call_value("apps.terminate", json!({"id": "com.android.settings"}))
        .await
        .unwrap();
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert_ne!(list["foreground"], "com.android.settings");
    let e = c
        .call_value("apps.launch", json!({"id": "com.example.none"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no app com.example.none"), "{e}");
}

/// The fixture's test APK (fixtures/phone/README.md: a manifest line the
/// fixture reads in place of a binary AndroidManifest.xml).
const NOTES_APK: &[u8] = b"fixture-apk package=com.example.notes activity=.Notes label=Notes\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apk_from_a_shared_folder_is_pushed_installed_named_and_launched() {
    let Some(r) = rig().await else { return };
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("notes.apk"), NOTES_APK).unwrap();
    let shell = AdbShell::new(r.rig.adb.device(r.rig.transport_id))
        .await
        .unwrap();
    let c = PhoneClient::new(Arc::new(shell), Default::default())
        .await
        .unwrap()
        .with_folders(vec![computer_phone::install::Folder {
            inside: "/workspace".into(),
            host: std::fs::canonicalize(shared.path()).unwrap(),
        }]);
    assert!(c.hello().groups.iter().any(|g| g == "apps.install"));
    // Installed twice: a reinstall is named as well as a first install.
    for _ in 0..2 {
        let got = c
            .call_value("apps.install", json!({"path": "/workspace/notes.apk"}))
            .await
            .unwrap();
        assert_eq!(got, json!({"id": "com.example.notes"}));
    }
    // The pushed copy is gone from the phone.
    assert_eq!(
        r.rig.phone.fs_list("/data/local/tmp"),
        Vec::<(String, u32, u64)>::new()
    );
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert!(
        list["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == "com.example.notes"),
        "{list}"
    );
    c.call_value("apps.launch", json!({"id": "com.example.notes"}))
        .await
        .unwrap();
    let list = c.call_value("apps.list", json!({})).await.unwrap();
    assert_eq!(list["foreground"], "com.example.notes");

    // What pm refuses comes back in its words.
    std::fs::write(shared.path().join("bad.apk"), b"PK\x03\x04 not ours").unwrap();
    let e = c
        .call_value("apps.install", json!({"path": "/workspace/bad.apk"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("INSTALL_PARSE_FAILED_NOT_APK"),
        "{e}"
    );
    // A path outside the shared folder is refused naming the field.
    let e = c
        .call_value("apps.install", json!({"path": "/etc/notes.apk"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("outside the computer's files"),
        "{e}"
    );
}
