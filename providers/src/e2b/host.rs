//! [`ChildHost`] over envd: how the shared child layer reaches an E2B
//! sandbox. The bridge's stdout is the stream's stdout data; its stdin is
//! one SendInput after another, in order; closing it kills the bridge
//! (and nothing else).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio_util::io::StreamReader;

use super::envd::{Envd, Event};
use crate::daemon_backed::child::{BridgeReader, BridgeWriter, ChildHost, RAN_MAX_BYTES, Ran};
use crate::types::{ErrorCode, ProviderError, Result};

/// How much of the bridge's input one SendInput carries at most.
const INPUT_CHUNK: usize = 256 * 1024;

pub struct E2bHost {
    pub envd: Envd,
}

#[async_trait::async_trait]
impl ChildHost for E2bHost {
    fn vendor(&self) -> &str {
        "E2B"
    }

    async fn upload(&self, path: &str, bytes: Bytes) -> Result<()> {
        self.envd.upload(path, bytes).await
    }

    async fn run(&self, argv: &[String], within: Duration) -> Result<Ran> {
        // A run has a bound of its own: envd kills it there too.
        let (pid, mut stream) = self.envd.start(argv, false, Some(within)).await?;
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let read = async {
            loop {
                match stream.next().await? {
                    Some(Event::Stdout(b)) => keep(&mut stdout, &b),
                    Some(Event::Stderr(b)) => keep(&mut stderr, &b),
                    Some(Event::End { exit_code, .. }) => return Ok(exit_code),
                    Some(_) => {}
                    None => {
                        return Err(ProviderError::new(
                            ErrorCode::Unreachable,
                            "envd's stream ended before the command did",
                        ));
                    }
                }
            }
        };
        let code = match tokio::time::timeout(within, read).await {
            Ok(r) => r?,
            Err(_) => {
                let _ = self.envd.kill(pid).await;
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "a command in the E2B sandbox did not end within {} s and was killed",
                        within.as_secs()
                    ),
                ));
            }
        };
        Ok(Ran {
            code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }

    async fn spawn(&self, argv: &[String]) -> Result<()> {
        // No lifetime: envd keeps a process whose stream ends.
        let (_pid, stream) = self.envd.start(argv, false, None).await?;
        drop(stream);
        Ok(())
    }

    async fn attach(&self, argv: &[String]) -> Result<(BridgeReader, BridgeWriter)> {
        let (pid, stream) = self.envd.start(argv, true, None).await?;
        let output = futures::stream::unfold(stream, |mut s| async move {
            loop {
                match s.next().await {
                    Ok(Some(Event::Stdout(b))) => return Some((Ok(b), s)),
                    Ok(Some(Event::End { .. })) | Ok(None) => return None,
                    Ok(Some(_)) => continue,
                    Err(e) => return Some((Err(std::io::Error::other(e.message)), s)),
                }
            }
        })
        .boxed();
        let (writer, mut from_client) = tokio::io::duplex(INPUT_CHUNK);
        let envd = self.envd.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; INPUT_CHUNK];
            loop {
                match from_client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Err(e) = envd.send_input(pid, &buf[..n]).await {
                            tracing::debug!("the E2B bridge's input failed: {e}");
                            break;
                        }
                    }
                }
            }
            // The client closed (or input failed): the bridge goes.
            let _ = envd.kill(pid).await;
        });
        Ok((Box::pin(StreamReader::new(output)), Box::pin(writer)))
    }
}

fn keep(to: &mut Vec<u8>, b: &[u8]) {
    let room = RAN_MAX_BYTES.saturating_sub(to.len());
    to.extend_from_slice(&b[..b.len().min(room)]);
}
