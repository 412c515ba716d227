//! [`ChildHost`] over Modal's command router: how the shared child layer
//! reaches a Modal sandbox. An upload is `cat` with the bytes as stdin;
//! a run reads both outputs to their end and waits; the bridge's stdout is
//! the exec's stdout, resumed by offset, and its stdin one write after
//! another at the running offset, eof when the client closes it (Modal
//! has no kill for an exec: `computerd stdio` ends at its stdin's end).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio_util::io::StreamReader;

use super::proto::{FD_STDERR, FD_STDOUT};
use super::router::{Exit, Router, STDIN_CHUNK};
use crate::daemon_backed::child::{BridgeReader, BridgeWriter, ChildHost, RAN_MAX_BYTES, Ran};
use crate::types::{ErrorCode, ProviderError, Result};

/// How long an upload may take.
pub const UPLOAD_WAIT: Duration = Duration::from_secs(300);

pub struct ModalHost {
    pub router: Arc<Router>,
}

impl ModalHost {
    /// Read stdout and stderr of `exec` to their ends and wait for it.
    async fn collect(&self, exec: &str, within: Duration) -> Result<Ran> {
        let read = |fd| {
            let mut s = Box::pin(self.router.output(exec, fd));
            async move {
                let mut kept = Vec::new();
                while let Some(b) = s.next().await {
                    let b = b?;
                    let room = RAN_MAX_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&b[..b.len().min(room)]);
                }
                Ok::<_, ProviderError>(kept)
            }
        };
        let all = async {
            let (out, err) = tokio::try_join!(read(FD_STDOUT), read(FD_STDERR))?;
            let exit = self.router.wait(exec, within).await?;
            Ok::<_, ProviderError>((out, err, exit))
        };
        let (out, err, exit) = tokio::time::timeout(within, all).await.map_err(|_| {
            ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "a command in the Modal sandbox did not end within {} s (Modal ends it there)",
                    within.as_secs()
                ),
            )
        })??;
        Ok(Ran {
            code: match exit {
                Exit::Code(c) => c,
                Exit::Signal(s) => 128 + s,
            },
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
    }
}

#[async_trait::async_trait]
impl ChildHost for ModalHost {
    fn vendor(&self) -> &str {
        "Modal"
    }

    async fn upload(&self, path: &str, bytes: Bytes) -> Result<()> {
        let argv: Vec<String> = [
            "/bin/sh",
            "-c",
            "umask 077 && mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"",
            "sh",
            path,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let exec = self
            .router
            .start(&argv, Some(UPLOAD_WAIT), HashMap::new())
            .await?;
        self.router.write_all(&exec, 0, &bytes, true).await?;
        let ran = self.collect(&exec, UPLOAD_WAIT).await?;
        if ran.code != 0 {
            return Err(ProviderError::failed(format!(
                "writing {path} in the Modal sandbox failed (exit {}): {}",
                ran.code,
                super::grpc::quote(ran.stderr.trim())
            )));
        }
        Ok(())
    }

    async fn run(&self, argv: &[String], within: Duration) -> Result<Ran> {
        let exec = self
            .router
            .start(argv, Some(within), HashMap::new())
            .await?;
        self.router.write(&exec, 0, &[], true).await?;
        self.collect(&exec, within).await
    }

    async fn spawn(&self, argv: &[String]) -> Result<()> {
        let exec = self.router.start(argv, None, HashMap::new()).await?;
        self.router.write(&exec, 0, &[], true).await
    }

    async fn attach(&self, argv: &[String]) -> Result<(BridgeReader, BridgeWriter)> {
        let exec = self.router.start(argv, None, HashMap::new()).await?;
        let output = self
            .router
            .output(&exec, FD_STDOUT)
            .map(|r| r.map_err(|e| std::io::Error::other(e.message)))
            .boxed();
        let (writer, mut from_client) = tokio::io::duplex(STDIN_CHUNK);
        let router = Arc::clone(&self.router);
        tokio::spawn(async move {
            let mut buf = vec![0u8; STDIN_CHUNK];
            let mut offset = 0u64;
            loop {
                match from_client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => match router.write(&exec, offset, &buf[..n], false).await {
                        Ok(()) => offset += n as u64,
                        Err(e) => {
                            tracing::debug!("the Modal bridge's input failed: {e}");
                            break;
                        }
                    },
                }
            }
            // The client closed: the bridge's stdin ends, and with it the
            // bridge.
            if let Err(e) = router.write(&exec, offset, &[], true).await {
                tracing::debug!("the Modal bridge's stdin could not be closed: {e}");
            }
        });
        Ok((Box::pin(StreamReader::new(output)), Box::pin(writer)))
    }
}
