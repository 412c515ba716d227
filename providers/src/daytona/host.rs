//! [`ChildHost`] over one sandbox's toolbox: the vendor half of a
//! computer whose computerd is a child of Daytona's toolbox daemon.
//!
//! - A run is `/process/execute` (the command piped to the sandbox's
//!   shell, stdout and stderr merged, so both of [`Ran`]'s fields hold
//!   the merged text).
//! - A start in the background is a `runAsync` command in a session of
//!   its own that is never deleted: deleting it would end init.
//! - An attached start is a `runAsync` command with `suppressInputEcho`
//!   in a session of its own, its halves joined by [`bridge::open`]; the
//!   client's close deletes that session, which ends the bridge and
//!   nothing else.
//!
//! Every command runs as root: as it is where the toolbox's user is root,
//! else through `sudo -n` (the default snapshot's user has passwordless
//! sudo); a sandbox with neither is refused in the shell's words.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::api::Toolbox;
use super::bridge::{self, Command};
use crate::daemon_backed::child::{
    BridgeReader, BridgeWriter, ChildHost, RAN_MAX_BYTES, Ran, shell_line,
};
use crate::types::{ErrorCode, ProviderError, Result};

/// What a background command says first, so its start is seen.
const STARTED: &str = "computer-mcp: started";
/// How long a background command may take to begin.
const START_WAIT: Duration = Duration::from_secs(30);

/// A sandbox's toolbox as a [`ChildHost`].
pub struct SandboxHost {
    toolbox: Arc<Toolbox>,
    /// Ends every call under way (the caller's cancel).
    cancel: CancellationToken,
}

impl SandboxHost {
    pub fn new(toolbox: Arc<Toolbox>, cancel: CancellationToken) -> Self {
        Self { toolbox, cancel }
    }

    async fn session_command(&self, prefix: &str, line: &str) -> Result<Command> {
        let session = format!("{prefix}-{}", crate::random::random_hex(6)?);
        self.toolbox.session(&session, &self.cancel).await?;
        let command = self.toolbox.start(&session, line, &self.cancel).await?;
        Ok(Command { session, command })
    }
}

/// `argv` as root: itself under uid 0, else through `sudo -n`.
pub fn as_root(argv: &[String]) -> String {
    let line = shell_line(argv);
    format!("if [ \"$(id -u)\" = 0 ]; then exec {line}; else exec sudo -n -- {line}; fi")
}

fn cap(s: String) -> String {
    if s.len() <= RAN_MAX_BYTES {
        return s;
    }
    let mut at = s.len() - RAN_MAX_BYTES;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    s[at..].to_string()
}

#[async_trait::async_trait]
impl ChildHost for SandboxHost {
    fn vendor(&self) -> &str {
        "Daytona"
    }

    async fn upload(&self, path: &str, bytes: Bytes) -> Result<()> {
        self.toolbox.upload(path, bytes, &self.cancel).await
    }

    async fn run(&self, argv: &[String], within: Duration) -> Result<Ran> {
        let ran = self
            .toolbox
            .execute(&as_root(argv), within, &self.cancel)
            .await?;
        let text = cap(ran.result);
        Ok(Ran {
            code: i32::try_from(ran.exit_code).unwrap_or(-1),
            stdout: text.clone(),
            stderr: text,
        })
    }

    /// Returns once the command has begun: a session runs its commands
    /// when its shell gets to them, and the caller reads the command's
    /// state next.
    async fn spawn(&self, argv: &[String]) -> Result<()> {
        let line = format!("echo {STARTED}; {}", as_root(argv));
        let cmd = self.session_command("computer-mcp-init", &line).await?;
        let until = tokio::time::Instant::now() + START_WAIT;
        loop {
            let log = self
                .toolbox
                .log_text(&cmd.session, &cmd.command, &self.cancel)
                .await?;
            if log.contains(STARTED) {
                return Ok(());
            }
            if let Some(code) = self
                .toolbox
                .exit_code(&cmd.session, &cmd.command, &self.cancel)
                .await?
            {
                return Err(ProviderError::failed(format!(
                    "a command in the Daytona sandbox ended at once with code {code}: {}",
                    log.lines().last().unwrap_or("it said nothing")
                )));
            }
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "a command in the Daytona sandbox did not begin within {} s",
                        START_WAIT.as_secs()
                    ),
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = self.cancel.cancelled() => return Err(crate::daemon_backed::aborted("starting a command in the Daytona sandbox")),
            }
        }
    }

    async fn attach(&self, argv: &[String]) -> Result<(BridgeReader, BridgeWriter)> {
        let cmd = self
            .session_command("computer-mcp-bridge", &as_root(argv))
            .await?;
        let (read, write) = bridge::open(Arc::clone(&self.toolbox), cmd, CancellationToken::new());
        Ok((Box::pin(read), Box::pin(write)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_run_as_root_through_sudo_only_when_needed() {
        assert_eq!(
            as_root(&["/bin/echo".into(), "it's".into()]),
            r#"if [ "$(id -u)" = 0 ]; then exec '/bin/echo' 'it'\''s'; else exec sudo -n -- '/bin/echo' 'it'\''s'; fi"#
        );
    }
}
