//! The adb server's start: when nothing answers on the port, `adb -P
//! <port> start-server` forks one (adb's own way), from an environment with
//! nothing in it that points adb at another server or device.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::error::{AdbError, Result};
use crate::host::Adb;
use crate::limits;

/// What [`ensure_server`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// A server already answered, with this version.
    Running { version: u32 },
    /// This call started it; it answers with this version.
    Started { version: u32 },
}

/// Whether a variable may pass to a spawned adb: none of `ADB_*` (its
/// server's address and port, its trace, its vendor keys),
/// `ANDROID_ADB_*` (its server port) or `ANDROID_SERIAL` (the device a
/// command picks).
pub fn keeps_var(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    !(n.starts_with(b"ADB_") || n.starts_with(b"ANDROID_ADB_") || n == b"ANDROID_SERIAL")
}

/// `env` without what [`keeps_var`] drops.
pub fn adb_env(env: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env.into_iter().filter(|(k, _)| keeps_var(k)).collect()
}

/// The server on 127.0.0.1:`port`, started with the program at `adb_path`
/// when nothing answers host:version there. The program gets `env` (the
/// caller's choice of environment: this crate reads none of its own) less
/// what [`keeps_var`] drops, and only `-P <port> start-server` as its
/// arguments. Bounded by [`limits::SERVER_START_WAIT`] in all.
pub async fn ensure_server(
    adb_path: &Path,
    port: u16,
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Server> {
    let adb = Adb::new(port).with_timeout(Duration::from_secs(5));
    match adb.version().await {
        Ok(version) => return Ok(Server::Running { version }),
        Err(AdbError::Unreachable { .. }) => {}
        Err(e) => return Err(e),
    }
    let start = |reason: String| AdbError::Start { port, reason };
    let mut cmd = tokio::process::Command::new(adb_path);
    cmd.arg("-P")
        .arg(port.to_string())
        .arg("start-server")
        .env_clear()
        .envs(adb_env(env))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    tracing::info!(port, adb = %adb_path.display(), "starting an adb server");
    let waited = tokio::time::timeout(limits::SERVER_START_WAIT, async {
        let mut child = cmd
            .spawn()
            .map_err(|e| start(format!("{} did not run: {e}", adb_path.display())))?;
        // The forked server keeps the pipe's write end only until it has
        // said it is up, so this read ends with start-server.
        let mut said = Vec::new();
        if let Some(err) = child.stderr.take() {
            let _ = err
                .take(limits::MAX_START_STDERR_BYTES as u64)
                .read_to_end(&mut said)
                .await;
        }
        let status = child.wait().await.map_err(|e| start(e.to_string()))?;
        if !status.success() {
            let said = String::from_utf8_lossy(&said);
            return Err(start(format!(
                "adb start-server ended with {status}: {}",
                said.trim()
            )));
        }
        // start-server returns once the server is up; ask until it answers
        // all the same, in case another start raced this one.
        loop {
            match adb.version().await {
                Ok(version) => return Ok(Server::Started { version }),
                Err(AdbError::Unreachable { .. }) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await;
    waited.unwrap_or_else(|_| {
        Err(start(format!(
            "it did not answer within {} s",
            limits::SERVER_START_WAIT.as_secs()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_loses_every_adb_pointer_and_keeps_the_rest() {
        let env = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("ADB_SERVER_SOCKET", "tcp:10.0.0.1:5037"),
            ("ADB_VENDOR_KEYS", "/k"),
            ("ADB_TRACE", "all"),
            ("ANDROID_ADB_SERVER_PORT", "6000"),
            ("ANDROID_SERIAL", "10.0.0.9:5555"),
            ("ANDROID_HOME", "/sdk"),
            ("MY_ADB_THING", "kept"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<String> = adb_env(env)
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["PATH", "HOME", "ANDROID_HOME", "MY_ADB_THING"]);
    }
}
