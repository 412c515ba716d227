//! ensure_server against the real adb: it starts one where none answers,
//! reuses one that does, and the server it starts has none of adb's
//! pointers in its environment.

use std::ffi::OsString;

use computer_adb::{Server, ensure_server};

use super::support::{Killer, cli_version, free_port, test_env};

/// The pid of the adb server listening on `port` (`adb -L tcp:<port>
/// fork-server server ...`).
fn server_pid(port: u16) -> Option<i32> {
    let want = format!("tcp:{port}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        (args.contains(&b"fork-server".as_slice()) && args.contains(&want.as_bytes()))
            .then_some(pid)
    })
}

fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_server_starts_one_with_a_clean_environment_and_then_reuses_it() {
    let Some(adb) = computer_testkit::need_adb() else {
        return;
    };
    let port = free_port();
    let marker = computer_testkit::marker("adb_ensure");
    let _killer = Killer {
        adb: adb.clone(),
        port,
        marker: marker.clone(),
    };
    let mut env = test_env(&marker);
    for (k, v) in [
        ("ADB_TRACE", "all"),
        ("ADB_SERVER_SOCKET", "tcp:127.0.0.1:1"),
        ("ANDROID_ADB_SERVER_PORT", "1"),
        ("ANDROID_SERIAL", "10.9.8.7:5555"),
    ] {
        env.push((OsString::from(k), OsString::from(v)));
    }
    let version = cli_version(&adb);
    assert_eq!(
        ensure_server(&adb, port, env.clone()).await.unwrap(),
        Server::Started { version }
    );
    assert_eq!(
        ensure_server(&adb, port, env).await.unwrap(),
        Server::Running { version }
    );

    let pid = server_pid(port).expect("the started server is running");
    let vars = environ(pid);
    assert!(vars.contains(&format!("{marker}=1")), "{vars:?}");
    let leaked: Vec<&String> = vars
        .iter()
        .filter(|v| {
            v.starts_with("ADB_")
                || v.starts_with("ANDROID_ADB_")
                || v.starts_with("ANDROID_SERIAL=")
        })
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(!cmdline.contains("10.9.8.7"), "{cmdline}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_adb_program_is_a_start_error_in_words() {
    let port = free_port();
    let e = ensure_server(
        std::path::Path::new("/nonexistent/adb"),
        port,
        std::env::vars_os(),
    )
    .await
    .unwrap_err();
    let words = e.to_string();
    assert!(
        words.starts_with(&format!(
            "could not start an adb server on port {port}: /nonexistent/adb did not run"
        )),
        "{words}"
    );
}
