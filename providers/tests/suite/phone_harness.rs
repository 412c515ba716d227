//! The phone-harness provider against the fake phone harness
//! (`computer_fakes::phone_harness`): lost and 5xx creates found by their
//! key and never posted twice, refusals that leave nothing, cancelled
//! creates and slow or failed boots ended, the ledger across a restart,
//! the janitor, release that waits, and a canary key in no output. The
//! connect test drives a locked fixture phone through Debian's adb
//! server (skips without adb unless COMPUTER_MCP_REQUIRE has `adb`).

use std::path::PathBuf;
use std::time::Duration;

use computer_fakes::phone_harness::{FakePhoneHarness, Lose, Refusal};
use computer_phone_fixture::rig::Rig;
use computer_providers::phone_harness::ledger::{Entry, Ledger};
use computer_providers::phone_harness::{PhoneHarnessProvider, PhoneHarnessSettings};
use computer_providers::{
    AttachBy, ComputerSpec, Configure, ErrorCode, HostDefaults, Labels, NetworkPolicy, Provider,
    ProviderError, Release, Sources, provider_for, with_provider_flags,
};
use computerd::client::ComputerClient;
use computerd::protocol::{MachineKind, SettingKind};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::capture;

/// A key no output may hold.
fn canary_key() -> String {
    format!(
        "phk_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    )
}

fn spec(lifetime_ms: u64, labels: &[(&str, &str)]) -> ComputerSpec {
    ComputerSpec {
        kind: SettingKind::Phone,
        network: NetworkPolicy::Open,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ComputerSpec::sandbox(lifetime_ms)
    }
}

struct Setup {
    fake: FakePhoneHarness,
    key: String,
    ledger: PathBuf,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let key = canary_key();
    let dir = tempfile::tempdir().unwrap();
    Setup {
        fake: FakePhoneHarness::start(&key).await.unwrap(),
        ledger: dir.path().join("state/phone-harness/ledger.json"),
        key,
        _dir: dir,
    }
}

impl Setup {
    fn settings(&self) -> PhoneHarnessSettings {
        PhoneHarnessSettings {
            api_key: Some(self.key.as_str().into()),
            api_url: Some(self.fake.api_url().into()),
            ledger: Some(self.ledger.clone()),
            ready_ms: Some(10_000),
            request_ms: Some(2_000),
            // No adb server of these tests is ever on 5037, nor started
            // where a test does not stop it: connect's own test gives the
            // rig's.
            adb_port: Some(computer_phone_fixture::rig::free_port().unwrap()),
            adb_program: Some("/nonexistent/adb".into()),
        }
    }
    fn provider(&self) -> PhoneHarnessProvider {
        PhoneHarnessProvider::configure(self.settings(), &HostDefaults::default()).unwrap()
    }
    fn entries(&self) -> Vec<(String, Entry)> {
        Ledger::new(self.ledger.clone())
            .all()
            .unwrap()
            .into_iter()
            .collect()
    }
    /// The one key POSTed, with its count.
    fn one_post(&self) -> (String, u32) {
        let posts = self.fake.posts();
        assert_eq!(posts.len(), 1, "{posts:?}");
        posts.into_iter().next().unwrap()
    }
}

/// Wait (at most 20 s) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not happen within 20 s");
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_by_its_key_and_posted_once() {
    for lose in [Lose::Hang, Lose::Cut, Lose::Empty, Lose::Status500] {
        let s = setup().await;
        let p = s.provider();
        s.fake.lose_next_post(lose);
        let made = p
            .create(&spec(600_000, &[("t", "lost")]), &CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{lose:?}: {e}"));
        let (key, count) = s.one_post();
        assert_eq!(count, 1, "{lose:?}: the POST was sent once");
        assert_eq!(s.fake.session_ids(), vec![made.computer.id.clone()]);
        let entries = s.entries();
        assert_eq!(entries.len(), 1, "{lose:?}");
        assert_eq!(entries[0].0, made.computer.id, "pending replaced by id");
        assert_eq!(entries[0].1.key, key);
        assert_eq!(made.computer.labels["t"], "lost");
    }
}

#[tokio::test]
async fn a_create_whose_answer_and_recovery_are_lost_is_found_by_list_and_released() {
    let s = setup().await;
    let p = s.provider();
    let cancel = CancellationToken::new();
    s.fake.lose_next_post(Lose::Status500);
    s.fake.fail_by_key(10);
    let e = p
        .create(&spec(600_000, &[("t", "twice-lost")]), &cancel)
        .await
        .unwrap_err();
    assert!(
        e.message.contains("no second create was sent"),
        "{}",
        e.message
    );
    let (key, count) = s.one_post();
    assert_eq!(count, 1);
    let entries = s.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0, format!("pending-{key}"), "the key is kept");
    // list takes the account's session made under that key as its phone.
    let listed = p.list(&Labels::new(), &cancel).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].labels["t"], "twice-lost");
    assert_eq!(s.fake.session_ids(), vec![listed[0].id.clone()]);
    p.release(&listed[0], Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(s.fake.session_ids().is_empty());
    assert!(s.entries().is_empty());
}

#[tokio::test]
async fn refusals_make_nothing_and_leave_no_ledger_entry() {
    let s = setup().await;
    let p = s.provider();
    for (how, code, word) in [
        (Refusal::PhonesBusy, ErrorCode::Limit, "phones_busy"),
        (Refusal::SessionLimit, ErrorCode::Limit, "session_limit"),
        (Refusal::NoCredit, ErrorCode::Refused, "credit"),
    ] {
        s.fake.refuse_next_post(how);
        let e = p
            .create(&spec(600_000, &[]), &CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(e.code, code, "{how:?}: {}", e.message);
        assert!(e.message.contains(word), "{}", e.message);
        assert!(e.message.contains("nothing was made"), "{}", e.message);
        assert!(!e.message.contains(&s.key), "{}", e.message);
        assert!(s.entries().is_empty(), "{how:?} left a ledger entry");
    }
    assert!(s.fake.session_ids().is_empty());
    assert!(s.fake.deletes().is_empty());
}

#[tokio::test]
async fn a_cancelled_or_dropped_create_ends_the_phone_it_made() {
    let s = setup().await;
    let p = std::sync::Arc::new(
        PhoneHarnessProvider::configure(
            PhoneHarnessSettings {
                request_ms: Some(30_000),
                ..s.settings()
            },
            &HostDefaults::default(),
        )
        .unwrap(),
    );
    // Cancelled by its signal while its POST has no answer yet.
    s.fake.lose_next_post(Lose::Hang);
    let cancel = CancellationToken::new();
    let task = {
        let (p, c) = (std::sync::Arc::clone(&p), cancel.clone());
        tokio::spawn(async move { p.create(&spec(600_000, &[]), &c).await })
    };
    eventually("the POST", || !s.fake.session_ids().is_empty()).await;
    let id = s.fake.session_ids().remove(0);
    cancel.cancel();
    let e = task.await.unwrap().unwrap_err();
    assert_eq!(e.code, ErrorCode::Aborted, "{}", e.message);
    eventually("the phone's end", || s.fake.deletes() == vec![id.clone()]).await;
    eventually("the ledger's forgetting", || s.entries().is_empty()).await;
    assert_eq!(s.fake.state(&id), None);

    // Dropped (a caller's timeout) while its phone boots.
    s.fake.ready_after(1_000);
    let dropped = tokio::time::timeout(
        Duration::from_millis(1_500),
        p.create(&spec(600_000, &[]), &CancellationToken::new()),
    )
    .await;
    assert!(dropped.is_err(), "the create was still waiting");
    let id2 = s.fake.session_ids().into_iter().find(|i| *i != id).unwrap();
    eventually("the dropped create's phone's end", || {
        s.fake.deletes().contains(&id2)
    })
    .await;
    eventually("the ledger's forgetting", || s.entries().is_empty()).await;
    assert!(s.fake.posts().values().all(|n| *n == 1));
}

#[tokio::test]
async fn a_phone_not_ready_in_time_or_failing_its_boot_is_ended() {
    let s = setup().await;
    let p = PhoneHarnessProvider::configure(
        PhoneHarnessSettings {
            ready_ms: Some(1_500),
            ..s.settings()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    s.fake.ready_after(1_000);
    let e = p
        .create(&spec(600_000, &[]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout, "{}", e.message);
    assert!(e.message.contains("so it was ended"), "{}", e.message);
    assert_eq!(s.fake.deletes().len(), 1);
    s.fake.ready_after(2);
    s.fake.fail_boot(true);
    let e = p
        .create(&spec(600_000, &[]), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Failed, "{}", e.message);
    assert!(e.message.contains("is error"), "{}", e.message);
    assert_eq!(s.fake.deletes().len(), 2);
    assert!(s.fake.session_ids().is_empty());
    assert!(s.entries().is_empty());
}

#[tokio::test]
async fn the_ledger_survives_a_restart_and_the_janitor_ends_an_expired_phone() {
    let s = setup().await;
    let cancel = CancellationToken::new();
    let kept = s
        .provider()
        .create(&spec(600_000, &[("who", "kept")]), &cancel)
        .await
        .unwrap();
    let short = s
        .provider()
        .create(&spec(1_000, &[("who", "short")]), &cancel)
        .await
        .unwrap();
    let foreign = s.fake.add_foreign();
    // A new provider over the same ledger: the server restarted.
    let again = s.provider();
    let mut listed: Vec<String> = again
        .list(&Labels::new(), &cancel)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    listed.sort();
    let mut want = vec![kept.computer.id.clone(), short.computer.id.clone()];
    want.sort();
    assert_eq!(listed, want, "only the ledger's phones, never {foreign}");
    let by_label = again
        .attach(
            &AttachBy::Labels(Labels::from([("who".into(), "kept".into())])),
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(by_label, kept.computer);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let swept = again.sweep(&cancel).await.unwrap();
    assert_eq!(swept, vec![short.computer.id.clone()]);
    assert_eq!(s.fake.deletes(), vec![short.computer.id.clone()]);
    assert_eq!(s.fake.state(&short.computer.id), None);
    let left: Vec<String> = s.entries().into_iter().map(|(k, _)| k).collect();
    assert_eq!(left, vec![kept.computer.id.clone()]);
    assert_eq!(s.fake.state(&foreign).as_deref(), Some("ready"));
}

#[tokio::test]
async fn release_waits_for_the_service_and_an_unknown_id_sends_no_delete() {
    let s = setup().await;
    let p = s.provider();
    let cancel = CancellationToken::new();
    let foreign = s.fake.add_foreign();
    let mut foreign_ref = p
        .create(&spec(600_000, &[]), &cancel)
        .await
        .unwrap()
        .computer;
    let own = foreign_ref.clone();
    foreign_ref.id = foreign.clone();
    let e = p
        .release(&foreign_ref, Release::Delete, &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{}", e.message);
    let e = p
        .attach(&AttachBy::Id(foreign.clone()), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{}", e.message);
    assert!(
        s.fake.deletes().is_empty(),
        "no DELETE for a phone not ours"
    );
    foreign_ref.id = "ph-nobody".into();
    p.release(&foreign_ref, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(s.fake.deletes().is_empty());

    s.fake.delete_lag(3);
    p.release(&own, Release::Delete, &cancel).await.unwrap();
    assert_eq!(s.fake.deletes(), vec![own.id.clone()]);
    assert_eq!(s.fake.state(&own.id), None, "release waited for the 404");
    assert!(s.entries().is_empty());
    p.release(&own, Release::Delete, &cancel).await.unwrap();
    assert_eq!(s.fake.deletes().len(), 1, "a second release sends nothing");
    let e = p.connect(&own, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{}", e.message);
}

/// The phone harness provider as the registry makes it from flags.
#[tokio::test]
async fn the_registry_makes_it_from_its_flags_and_the_state_directory() {
    let s = setup().await;
    let m = with_provider_flags(clap::Command::new("t").no_binary_name(true))
        .try_get_matches_from([
            "--phone-harness-api-url",
            s.fake.api_url(),
            "--phone-harness-api-key",
            &s.key,
            "--phone-harness-ready-ms",
            "5000",
        ])
        .unwrap();
    let state = s.ledger.parent().unwrap().parent().unwrap().to_path_buf();
    let p = provider_for(
        "phone-harness",
        &Sources {
            matches: &m,
            tables: None,
        },
        &HostDefaults {
            state_dir: Some(state),
            ..HostDefaults::default()
        },
    )
    .unwrap();
    assert_eq!(p.capabilities().kind, MachineKind::Android);
    let made = p
        .create(&spec(600_000, &[]), &CancellationToken::new())
        .await
        .unwrap();
    // The ledger is under the state directory by default.
    assert_eq!(s.entries()[0].0, made.computer.id);
    for (bad, field) in [
        (ComputerSpec::sandbox(600_000), "kind"),
        (
            ComputerSpec {
                image: Some("ios".into()),
                ..spec(600_000, &[])
            },
            "image",
        ),
        (spec(31 * 60_000, &[]), "lifetime"),
        (
            ComputerSpec {
                network: NetworkPolicy::None,
                ..spec(600_000, &[])
            },
            "network",
        ),
    ] {
        let e = p.create(&bad, &CancellationToken::new()).await.unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{}", e.message);
    }
    assert_eq!(s.fake.posts().len(), 1, "a refused spec sends nothing");
}

/// No canary (the key, the unlock code, the watch URL's word) in `text`.
fn clean(s: &Setup, code: &str, what: &str, text: &str) {
    for secret in [s.key.as_str(), code, s.fake.canary()] {
        assert!(!text.contains(secret), "{what} holds a secret: {text}");
    }
}

fn clean_error(s: &Setup, code: &str, e: &ProviderError) {
    clean(s, code, "an error", &e.message);
}

#[tokio::test]
async fn the_canary_key_is_in_no_error_log_note_or_doctor_line() {
    let (log, _guard) = capture();
    let s = setup().await;
    let code = "CANARYCODE4711";
    s.fake.point_adb("127.0.0.1", 1, code);
    let p = s.provider();
    let cancel = CancellationToken::new();
    let made = p.create(&spec(600_000, &[]), &cancel).await.unwrap();
    for n in &made.notes {
        clean(&s, code, "a note", n);
    }
    clean(&s, code, "a ref", &format!("{:?}", made.computer));
    clean(&s, code, "the provider", &format!("{p:?}"));
    s.fake.lose_next_post(Lose::Status500);
    p.create(&spec(600_000, &[]), &cancel).await.unwrap();
    s.fake.refuse_next_post(Refusal::PhonesBusy);
    clean_error(
        &s,
        code,
        &p.create(&spec(600_000, &[]), &cancel).await.unwrap_err(),
    );
    // Connect reaches the link (nothing answers at port 1): its words
    // hold neither the endpoint's code nor the key.
    if let Err(e) = p.connect(&made.computer, &cancel).await {
        clean_error(&s, code, &e);
    }
    let ok = p.test_connection(&cancel).await.unwrap();
    assert_eq!(
        ok.found,
        Ok("reached; 2 phones of this server's ledger".into())
    );

    let wrong = PhoneHarnessProvider::configure(
        PhoneHarnessSettings {
            api_key: Some(format!("{}x", s.key).as_str().into()),
            ..s.settings()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let e = wrong
        .create(&spec(600_000, &[]), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized, "{}", e.message);
    clean_error(&s, code, &e);
    let (said, next) = wrong
        .test_connection(&cancel)
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert!(said.starts_with("unauthorized: "), "{said}");
    clean(&s, code, "doctor", &format!("{said} {next}"));
    let gone = PhoneHarnessProvider::configure(
        PhoneHarnessSettings {
            api_url: Some("http://127.0.0.1:1".into()),
            ..s.settings()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let (said, _) = gone
        .test_connection(&cancel)
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert!(said.starts_with("unreachable: "), "{said}");
    for c in p.list(&Labels::new(), &cancel).await.unwrap() {
        p.release(&c, Release::Delete, &cancel).await.unwrap();
    }
    assert!(s.fake.session_ids().is_empty());
    let text = log.text();
    assert!(
        text.contains("rented a phone"),
        "the log was captured: {text}"
    );
    clean(&s, code, "the log", &text);
}

/// The fixture phone, locked by `code`, the fake pointed at it, and a
/// provider on the rig's adb server. None where adb is missing.
async fn on_a_fixture_phone(s: &Setup, code: &str) -> Option<(Rig, PhoneHarnessProvider)> {
    let dir = s.ledger.ancestors().nth(3).unwrap();
    let rig = Rig::of_test(dir, Some(code)).await?;
    s.fake.point_adb("127.0.0.1", rig.phone_port, code);
    let p = PhoneHarnessProvider::configure(
        PhoneHarnessSettings {
            adb_port: Some(rig.adb.port()),
            adb_program: computer_testkit::need_adb(),
            ..s.settings()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    Some((rig, p))
}

/// The port of the newest session's own adb endpoint.
fn session_port(s: &Setup) -> u16 {
    let ids = s.fake.session_ids();
    let newest = ids
        .iter()
        .max_by_key(|id| id.trim_start_matches("ph-").parse::<u64>().unwrap_or(0));
    s.fake.adb_port(newest.unwrap()).unwrap()
}

#[tokio::test]
async fn connect_unlocks_the_phone_and_a_tap_and_a_screenshot_work() {
    let s = setup().await;
    let code = "CANARY9911";
    let Some((rig, p)) = on_a_fixture_phone(&s, code).await else {
        return;
    };
    let (log, _guard) = capture();
    s.fake.ready_after(2);
    let cancel = CancellationToken::new();
    let locked = rig
        .adb
        .device(rig.transport_id)
        .shell("getprop")
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&locked).contains("locked"),
        "the fixture starts locked"
    );
    let made = p.create(&spec(600_000, &[]), &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, MachineKind::Android);
    let shot = conn
        .client
        .call_value("screen.shot", json!({}))
        .await
        .unwrap();
    assert!(shot["width"].as_u64().unwrap() > 0, "{shot}");
    conn.client
        .call_value(
            "input.actions",
            json!({"actions": [{"type": "tap", "point": [100, 200]}]}),
        )
        .await
        .unwrap();
    let touches = rig.events("touch");
    assert!(!touches.is_empty(), "the tap reached the phone");
    let own = format!("127.0.0.1:{}", session_port(&s));
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    let devices = rig.adb.devices().await.unwrap();
    assert!(
        devices.iter().all(|d| d.serial != own),
        "release let the adb server's transport go"
    );
    assert!(
        devices.iter().any(|d| d.serial == rig.serial),
        "and only its own: the rig's link to the phone stays"
    );
    // The fixture phone runs in this process and logs what its shells
    // are asked, as the phone's own log would: ours is the rest.
    let text = log.text();
    let ours = text
        .lines()
        .filter(|l| !l.contains(" computer_phone_fixture::"));
    let held: Vec<&str> = ours.filter(|l| l.contains(code)).collect();
    assert!(held.is_empty(), "the log holds the unlock code: {held:?}");
    assert!(!text.contains(&s.key), "the log holds the key");
}

#[tokio::test]
async fn each_session_has_its_own_adb_link_and_one_release_leaves_the_other_working() {
    let s = setup().await;
    let code = "CANARY4242";
    let Some((rig, p)) = on_a_fixture_phone(&s, code).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let first = p.create(&spec(600_000, &[]), &cancel).await.unwrap();
    let first_port = session_port(&s);
    let second = p.create(&spec(600_000, &[]), &cancel).await.unwrap();
    let second_port = session_port(&s);
    assert_ne!(
        first_port, second_port,
        "the sessions share an adb endpoint"
    );
    let a = p.connect(&first.computer, &cancel).await.unwrap();
    let b = p.connect(&second.computer, &cancel).await.unwrap();
    for conn in [&a, &b] {
        let apps = conn
            .client
            .call_value("apps.list", json!({}))
            .await
            .unwrap();
        assert!(
            apps["apps"].as_array().is_some_and(|a| !a.is_empty()),
            "{apps}"
        );
    }
    drop(a);
    p.release(&first.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    let serials: Vec<String> = rig
        .adb
        .devices()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.serial)
        .collect();
    assert!(
        !serials.contains(&format!("127.0.0.1:{first_port}")),
        "{serials:?}"
    );
    assert!(
        serials.contains(&format!("127.0.0.1:{second_port}")),
        "{serials:?}"
    );
    // The other session's link works on: a shot and a tap reach the phone.
    let taps = rig.events("touch").len();
    let shot = b.client.call_value("screen.shot", json!({})).await.unwrap();
    assert!(shot["width"].as_u64().is_some_and(|w| w > 0), "{shot}");
    b.client
        .call_value(
            "input.actions",
            json!({"actions": [{"type": "tap", "point": [100, 200]}]}),
        )
        .await
        .unwrap();
    assert!(
        rig.events("touch").len() > taps,
        "the tap did not reach the phone"
    );
    drop(b);
    p.release(&second.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}
