//! [`Shell`] over adb: a device of an adb server, by its transport id.
//! Commands go as `shell,v2,raw:` where the device has the shell protocol
//! (stdout and the exit status apart), else as `shell:` with the exit
//! status echoed after a marker; `screencap` goes as `exec:`, byte for byte.

use std::time::Duration;

use computer_adb::{AdbError, Device};
use futures::future::BoxFuture;

use crate::client::{Ran, Shell, ShellError};

/// A command may wait this long: a batch's waits and holds (at most
/// 300 s) and the phone's own time for them.
pub const COMMAND_WAIT: Duration = Duration::from_secs(330);

/// What ends a v1 shell's output: the marker, then the exit status.
const EXIT_MARK: &str = "@@exit ";

pub struct AdbShell {
    device: Device,
    v2: bool,
}

fn words(e: AdbError) -> ShellError {
    ShellError(e.to_string())
}

impl AdbShell {
    /// The device, asked once which shell protocol it has.
    pub async fn new(device: Device) -> Result<AdbShell, ShellError> {
        let features = device.features().await.map_err(words)?;
        Ok(AdbShell {
            v2: features.iter().any(|f| f == "shell_v2"),
            device: device.with_timeout(COMMAND_WAIT),
        })
    }
}

/// A v1 shell's output with its exit status cut off the end.
fn split_exit(out: &str) -> Ran {
    match out.rfind(EXIT_MARK) {
        Some(at) => Ran {
            stdout: out[..at].to_string(),
            exit: out[at + EXIT_MARK.len()..].trim().parse().unwrap_or(255),
        },
        None => Ran {
            stdout: out.to_string(),
            exit: 255,
        },
    }
}

impl Shell for AdbShell {
    fn run<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Ran, ShellError>> {
        Box::pin(async move {
            if self.v2 {
                let out = self.device.shell_v2(command, b"").await.map_err(words)?;
                return Ok(Ran {
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    exit: out.exit_code,
                });
            }
            let line = format!("{command}\necho \"{EXIT_MARK}$?\"");
            let out = self.device.shell(&line).await.map_err(words)?;
            Ok(split_exit(&String::from_utf8_lossy(&out)))
        })
    }

    fn bytes<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ShellError>> {
        Box::pin(async move { self.device.exec(command).await.map_err(words) })
    }

    fn can_push(&self) -> bool {
        true
    }

    fn push<'a>(
        &'a self,
        data: &'a [u8],
        remote: &'a str,
    ) -> BoxFuture<'a, Result<(), ShellError>> {
        Box::pin(async move { self.device.push(data, remote, 0o644).await.map_err(words) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_shells_exit_status_is_read_off_its_end() {
        assert_eq!(
            split_exit("hello\n@@exit 3\n"),
            Ran {
                stdout: "hello\n".into(),
                exit: 3
            }
        );
        assert_eq!(split_exit("cut short").exit, 255);
    }
}
