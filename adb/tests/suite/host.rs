//! The real adb server's host services.

use computer_adb::AdbError;

use super::support::{RealServer, cli_version, free_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_is_the_one_adb_version_prints() {
    let Some(s) = RealServer::start() else { return };
    let want = cli_version(&s.killer.adb);
    assert_eq!(s.adb.version().await.unwrap(), want);
    assert!(want >= 40, "{want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_lists_no_devices() {
    let Some(s) = RealServer::start() else { return };
    assert_eq!(s.adb.devices().await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_to_a_closed_port_fails_in_words_without_the_endpoint() {
    let Some(s) = RealServer::start() else { return };
    let closed = free_port();
    let e = s.adb.connect("127.0.0.1", closed).await.unwrap_err();
    assert!(
        matches!(&e, AdbError::ConnectFailed { cause: Some(c) } if c == "Connection refused"),
        "{e:?}"
    );
    let words = e.to_string();
    assert_eq!(
        words,
        "adb could not connect to the phone's adb endpoint: Connection refused"
    );
    assert!(!words.contains(&closed.to_string()) && !words.contains("127.0.0.1"));
    // Nothing was added, so there is nothing to disconnect.
    assert!(!s.adb.disconnect("127.0.0.1", closed).await.unwrap());
    assert_eq!(s.adb.devices().await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_id_the_server_never_gave_is_a_device_gone() {
    let Some(s) = RealServer::start() else { return };
    let d = s.adb.device(9999);
    for e in [
        d.shell("echo hi").await.unwrap_err(),
        d.features().await.unwrap_err(),
        d.push(b"x", "/data/local/tmp/x", 0o644).await.unwrap_err(),
    ] {
        assert!(
            matches!(&e, AdbError::DeviceGone { transport_id: 9999, message } if message.contains("9999")),
            "{e:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_server_ends_it_and_the_port_is_then_unreachable() {
    let Some(s) = RealServer::start() else { return };
    s.adb.kill_server().await.unwrap();
    let e = s.adb.version().await.unwrap_err();
    assert!(matches!(e, AdbError::Unreachable { .. }), "{e}");
}
