//! The adb provider on the fixture phone, through Debian's adb server on a
//! port of the test's own.

use computer_phone_fixture::rig::Rig;
use computer_providers::adb::{AdbProvider, AdbSettings};
use computer_providers::settings::HostDefaults;
use computer_providers::{ComputerSpec, Configure, ErrorCode, NetworkPolicy, Provider, Release};
use computerd::client::ComputerClient;
use computerd::protocol::{MachineKind, SettingKind};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn phone_spec() -> ComputerSpec {
    ComputerSpec {
        kind: SettingKind::Phone,
        network: NetworkPolicy::Open,
        ..ComputerSpec::sandbox(600_000)
    }
}

fn provider(port: u16, serial: Option<String>) -> AdbProvider {
    AdbProvider::configure(
        AdbSettings {
            serial,
            port: Some(port),
            ..AdbSettings::default()
        },
        &HostDefaults::default(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_phone_is_held_by_one_computer_and_let_go_as_it_was_but_for_its_apps() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let cancel = CancellationToken::new();
    // The only phone attached is taken when none is named.
    let p = provider(rig.adb.port(), None);
    let made = p.create(&phone_spec(), &cancel).await.unwrap();
    assert!(made.computer.id.starts_with("adb-"), "{}", made.computer.id);
    assert!(!made.computer.id.contains("127.0.0.1"));
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, MachineKind::Android);

    // A second computer on the same phone hears which holds it.
    let again = p.create(&phone_spec(), &cancel).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::Limit);
    assert!(
        again.message.contains(&made.computer.id),
        "{}",
        again.message
    );

    conn.client
        .call_value("apps.launch", json!({"id": "com.android.settings"}))
        .await
        .unwrap();
    let front = conn
        .client
        .call_value("apps.list", json!({}))
        .await
        .unwrap();
    assert_eq!(front["foreground"], "com.android.settings");
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    let running = rig.phone.state().apps.running.clone();
    assert!(
        !running.contains("com.android.settings"),
        "release terminates what the computer launched"
    );
    assert!(
        running.contains("ai.agentrun.fixture"),
        "and leaves the rest"
    );
    // Let go, the phone can be held again.
    let made = p.create(&phone_spec(), &cancel).await.unwrap();
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(
        p.list(&Default::default(), &cancel)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn what_a_phone_cannot_be_is_refused_before_anything_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let p = provider(rig.adb.port(), Some("emulator-5554".into()));
    for (spec, field) in [
        (ComputerSpec::sandbox(600_000), "kind"),
        (
            ComputerSpec {
                network: NetworkPolicy::None,
                ..phone_spec()
            },
            "network",
        ),
        (
            ComputerSpec {
                image: Some("android".into()),
                ..phone_spec()
            },
            "image",
        ),
        (
            ComputerSpec {
                user: Some("1:1".into()),
                ..phone_spec()
            },
            "user",
        ),
    ] {
        let e = p.create(&spec, &cancel).await.unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{}", e.message);
    }
    let e = p.create(&phone_spec(), &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{}", e.message);
    assert!(e.message.contains("--adb-serial"), "{}", e.message);
}

/// Whether anything on this machine is an adb server of `port`: one
/// answering on it, or a process whose arguments name it (`adb -P <port>
/// start-server` forks `adb -L tcp:<port> fork-server server`).
fn an_adb_server_of(port: u16) -> Option<String> {
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        return Some(format!("something answers on port {port}"));
    }
    let names = [format!("tcp:{port}"), port.to_string()];
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let args = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = args
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let adb = args.first().is_some_and(|a| a.ends_with("adb"));
        let named = args
            .iter()
            .any(|a| names.contains(a) || a.ends_with(&format!(":{port}")));
        (adb && named).then(|| args.join(" "))
    })
}

#[tokio::test]
async fn a_release_starts_no_adb_server_where_none_runs() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let port = rig.adb.port();
    let p = provider(port, Some(rig.serial.clone()));
    let made = p.create(&phone_spec(), &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    conn.client
        .call_value("apps.launch", json!({"id": "com.android.settings"}))
        .await
        .unwrap();
    drop(conn);
    // The server goes (a user's `adb kill-server`, a reboot of the host's
    // adb): its connection closes once it is gone.
    rig.adb.kill_server().await.unwrap();
    for _ in 0..50 {
        if an_adb_server_of(port).is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(an_adb_server_of(port), None, "the server did not end");

    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    // Release starts none: it waits for a server it starts to answer, so
    // one started would be here now; a moment more for a late fork.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        an_adb_server_of(port),
        None,
        "release started an adb server"
    );
    // The hold ended all the same.
    assert!(
        p.list(&Default::default(), &cancel)
            .await
            .unwrap()
            .is_empty()
    );
}
