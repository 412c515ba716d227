//! The conformance suite through the command on phones: the fixture phone
//! over a real adb server, directly and through the fake phone harness.

use computer_phone_fixture::rig::Rig;

use super::*;

/// The cases a phone over adb passes on the fixture phone.
const PHONE_CASES: &[&str] = &[
    "health.hello",
    "health.kind-consistent",
    "touch.tap",
    "touch.swipe",
    "input.phone-type-text",
    "input.phone-key-table-refuses-unknown",
    "apps.launch-terminate",
    "apps.ui-tree-shape",
    "apps.install-launch",
];

/// The fixture phone's test APK (fixtures/phone/README.md), written in `dir`.
fn notes_apk(dir: &Path) -> std::path::PathBuf {
    let apk = dir.join("notes.apk");
    std::fs::write(
        &apk,
        "fixture-apk package=ai.agentrun.conformance.notes activity=.Notes label=Notes\n",
    )
    .unwrap();
    apk
}

/// `--kind phone` on the provider `provider` names, with the fixture APK
/// `apk`, off the test's runtime (the fixture phone answers on it): every
/// phone case passes.
async fn passes(provider: &[&str], apk: &Path, what: &str) -> std::process::Output {
    let mut args: Vec<String> = provider.iter().map(|a| a.to_string()).collect();
    let apk = apk.to_str().unwrap();
    args.extend(["--kind", "phone", "--fixture", apk, "--json"].map(String::from));
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        conformance(None, &args)
    })
    .await
    .unwrap();
    assert_kind_passes(&out, what, PHONE_CASES);
    out
}

/// The run installed the fixture APK on the phone.
fn assert_notes_installed(rig: &Rig) {
    assert!(
        rig.phone
            .state()
            .apps
            .packages
            .contains_key("ai.agentrun.conformance.notes"),
        "the fixture APK was not installed"
    );
}

/// `--provider adb --kind phone` on the fixture phone, through Debian's
/// adb server on a port of the test's own: every touch, keys and apps
/// case passes, the fixture APK is installed from the run's shared
/// folder, and a pinch is skipped in the phone's own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adb_passes_the_phone_kind_on_the_fixture_phone() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let apk = notes_apk(dir.path());
    let port = rig.adb.port().to_string();
    let provider = [
        "--provider",
        "adb",
        "--adb-port",
        &port,
        "--adb-serial",
        &rig.serial,
    ];
    let out = passes(&provider, &apk, "adb phone").await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pinch = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "touch.pinch")
        .cloned()
        .unwrap();
    assert_eq!(pinch["status"], "skip", "{pinch}");
    assert!(
        pinch["reason"]
            .as_str()
            .unwrap()
            .starts_with("the phone refuses a pinch: "),
        "{pinch}"
    );
    // The installed app was launched on the phone, and the run's serial
    // (an endpoint) is in no word of the report.
    assert_notes_installed(&rig);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&rig.serial));
}

/// `--provider phone-harness --kind phone` against the fake phone harness,
/// whose sessions' adb links reach the fixture phone (locked, as a cloud
/// phone is, until the session's code unlocks it) through Debian's adb
/// server on a port of the test's own: every touch, keys and apps case
/// passes (the fixture APK installed from the run's shared folder, pushed
/// over the session's link), every phone the run rented is ended, and
/// neither the key, the unlock code, a watch URL nor the phone's endpoint
/// is in a word of the report or the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_harness_passes_the_phone_kind_against_its_fake() {
    let dir = tempfile::tempdir().unwrap();
    let code = "CANARY4471";
    let Some(rig) = Rig::of_test(dir.path(), Some(code)).await else {
        return;
    };
    let adb = computer_testkit::need_adb().unwrap();
    let key = format!(
        "phk_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    );
    let fake = computer_fakes::phone_harness::FakePhoneHarness::start(&key)
        .await
        .unwrap();
    fake.point_adb("127.0.0.1", rig.phone_port, code);
    let apk = notes_apk(dir.path());
    let port = rig.adb.port().to_string();
    let ledger = dir.path().join("ledger.json");
    let provider = [
        "--provider",
        "phone-harness",
        "--phone-harness-api-url",
        fake.api_url(),
        "--phone-harness-api-key",
        &key,
        "--phone-harness-adb-port",
        &port,
        "--phone-harness-adb-program",
        adb.to_str().unwrap(),
        "--phone-harness-ledger",
        ledger.to_str().unwrap(),
    ];
    let out = passes(&provider, &apk, "phone harness").await;
    assert_notes_installed(&rig);
    assert_eq!(fake.session_ids(), Vec::<String>::new(), "phones left");
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        for secret in [key.as_str(), code, fake.canary(), &rig.serial] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
}
