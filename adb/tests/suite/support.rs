//! A real adb server on a free port of the test's own, killed when the
//! test ends, pass or fail.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use computer_adb::{Adb, adb_env};

/// A loopback port nothing listens on (just now), never adb's 5037.
pub fn free_port() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port != 5037 {
            return port;
        }
    }
}

/// The environment a test's adb runs in: the test's own, less adb's
/// pointers, plus the test's marker (so no server outlives it unseen).
pub fn test_env(marker: &str) -> Vec<(OsString, OsString)> {
    let mut env = adb_env(std::env::vars_os());
    env.push((marker.into(), "1".into()));
    env
}

/// `adb -P <port> kill-server`, for a server this test started.
pub fn kill_server(adb: &PathBuf, port: u16) {
    let _ = Command::new(adb)
        .args(["-P", &port.to_string(), "kill-server"])
        .env_clear()
        .envs(adb_env(std::env::vars_os()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Kills the server on `port` when dropped, then checks that nothing the
/// test marked is left.
pub struct Killer {
    pub adb: PathBuf,
    pub port: u16,
    pub marker: String,
}

impl Drop for Killer {
    fn drop(&mut self) {
        kill_server(&self.adb, self.port);
        if !std::thread::panicking() {
            computer_testkit::assert_no_leftovers(&self.marker);
        }
    }
}

/// A real server of the test's own, started with `adb -P <port>
/// start-server`, and the client of it; None (skipped in words) without adb.
pub struct RealServer {
    pub adb: Adb,
    pub killer: Killer,
}

impl RealServer {
    pub fn start() -> Option<RealServer> {
        let path = computer_testkit::need_adb()?;
        let port = free_port();
        let marker = computer_testkit::marker("adb_server");
        let killer = Killer {
            adb: path.clone(),
            port,
            marker: marker.clone(),
        };
        let status = Command::new(&path)
            .args(["-P", &port.to_string(), "start-server"])
            .env_clear()
            .envs(test_env(&marker))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "adb start-server failed: {status}");
        Some(RealServer {
            adb: Adb::new(port),
            killer,
        })
    }
}

/// The version `adb version` prints (41 for "version 1.0.41").
pub fn cli_version(adb: &PathBuf) -> u32 {
    let out = Command::new(adb).arg("version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap();
    line.rsplit('.').next().unwrap().trim().parse().unwrap()
}
