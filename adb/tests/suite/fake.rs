//! Scripted servers: a silent one, one that speaks no adb, and a closed
//! port. These run anywhere.

use std::time::Duration;

use computer_adb::{Adb, AdbError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::free_port;

/// A server on a fresh port that reads each request and answers `answer`
/// (nothing at all when None, keeping the connection open).
async fn scripted(answer: Option<&'static [u8]>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                match answer {
                    Some(a) => {
                        let _ = s.write_all(a).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(60)).await,
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_says_how_to_start_a_server() {
    let port = free_port();
    let e = Adb::new(port).version().await.unwrap_err();
    assert!(
        matches!(e, AdbError::Unreachable { port: p, .. } if p == port),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("adb -P {port} start-server")),
        "{e}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_is_a_timeout_at_the_callers_bound() {
    let port = scripted(None).await;
    let adb = Adb::new(port).with_timeout(Duration::from_millis(300));
    let t = std::time::Instant::now();
    let e = adb.devices().await.unwrap_err();
    assert!(
        matches!(e, AdbError::Timeout { request: "host:devices-l", after } if after == Duration::from_millis(300)),
        "{e}"
    );
    assert_eq!(e.to_string(), "host:devices-l had no answer within 300 ms");
    assert!(t.elapsed() < Duration::from_secs(5));
    let e = adb.device(3).shell("echo hi").await.unwrap_err();
    assert!(
        matches!(
            e,
            AdbError::Timeout {
                request: "shell",
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn bytes_that_are_not_adb_are_a_protocol_error() {
    let port = scripted(Some(b"HTTP/1.1 400 Bad Request\r\n\r\n")).await;
    let e = Adb::new(port).version().await.unwrap_err();
    assert!(
        matches!(
            e,
            AdbError::Protocol {
                request: "host:version",
                ..
            }
        ),
        "{e}"
    );
    let port = scripted(Some(b"OKAY0004zz")).await;
    let e = Adb::new(port).version().await.unwrap_err();
    assert!(e.to_string().contains("closed the connection"), "{e}");
    let port = scripted(Some(b"OKAY0004zzzz")).await;
    let e = Adb::new(port).version().await.unwrap_err();
    assert!(e.to_string().contains("\"zzzz\" is not a version"), "{e}");
}

#[tokio::test]
async fn a_failed_connect_from_a_server_never_carries_the_endpoint() {
    // What adb 29 answers when the name does not resolve.
    let port = scripted(Some(
        b"OKAY0049failed to resolve host: 'phone-s3cr3t.example': Name or service not known",
    ))
    .await;
    let e = Adb::new(port)
        .connect("phone-s3cr3t.example", 40111)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "adb could not connect to the phone's adb endpoint: Name or service not known"
    );
    let port = scripted(Some(b"FAIL0027no such device 'phone-s3cr3t.example:1'")).await;
    assert!(
        !Adb::new(port)
            .disconnect("phone-s3cr3t.example", 1)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_transport_the_server_does_not_have_is_a_device_gone() {
    let port = scripted(Some(b"FAIL0020no device with transport id '42'")).await;
    let e = Adb::new(port)
        .device(42)
        .exec("screencap")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            AdbError::DeviceGone {
                transport_id: 42,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the device with transport id 42 is gone: no device with transport id '42'"
    );
}
