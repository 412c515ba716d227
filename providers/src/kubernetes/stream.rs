//! computerd streamed into a pod through exec, for an image with `/bin/sh`
//! and no computerd of its own (`--kubernetes-stream-computerd`). The
//! container's shell makes a 0700 directory in the socket's memory-backed
//! emptyDir and waits for an executable computerd there; once the pod
//! runs, one exec (as the container's user) reads exactly the binary's
//! length from stdin (`head -c`, so no end of stdin is needed: v4
//! servers have none), checks the length, and moves it into place whole,
//! so the waiting shell never runs half a file. The exec's Status (channel
//! 3) says whether it did.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachParams;
use tokio::io::AsyncWriteExt;

use super::manifest::{CONTAINER, STREAMED};
use super::{KubernetesProvider, api_error};
use crate::types::{ProviderError, Result};

/// The exec that puts `n` bytes of stdin at [`STREAMED`].
pub fn put_argv(n: usize) -> Vec<String> {
    let script = concat!(
        "set -e; umask 077; d=${0%/*}; mkdir -p \"$d\"; ",
        "head -c \"$1\" > \"$d/.part\"; ",
        "test \"$(wc -c < \"$d/.part\")\" -eq \"$1\"; ",
        "chmod 0700 \"$d/.part\"; mv -f \"$d/.part\" \"$0\""
    );
    vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
        STREAMED.into(),
        n.to_string(),
    ]
}

impl KubernetesProvider {
    /// Stream this host's computerd into the running pod `name` (nothing
    /// when the image carries it).
    pub(crate) async fn stream_in(&self, name: &str) -> Result<()> {
        let Some(host) = &self.stream else {
            return Ok(());
        };
        let bytes = tokio::fs::read(host).await.map_err(|e| {
            ProviderError::invalid(
                "stream_computerd",
                format!(
                    "cannot read --kubernetes-stream-computerd {}: {e}",
                    host.display()
                ),
            )
        })?;
        self.put(
            name,
            put_argv(bytes.len()),
            &bytes,
            &format!("streaming computerd into pod {name}"),
        )
        .await
    }

    /// Run `argv` in the pod `name` (as the container's user) with `input`
    /// on its stdin, and hold it to its Status: Success, or words of
    /// `doing` that failed.
    pub(crate) async fn put(
        &self,
        name: &str,
        argv: Vec<String>,
        input: &[u8],
        doing: &str,
    ) -> Result<()> {
        let ap = AttachParams {
            container: Some(CONTAINER.into()),
            stdin: true,
            stdout: false,
            stderr: false,
            tty: false,
            max_stdin_buf_size: Some(1 << 20),
            ..AttachParams::default()
        };
        let mut proc = self
            .pods()
            .await?
            .exec(name, argv, &ap)
            .await
            .map_err(|e| api_error(doing, e))?;
        let status = proc.take_status();
        let mut stdin = proc
            .stdin()
            .ok_or_else(|| ProviderError::failed("the exec gave no stdin"))?;
        stdin
            .write_all(input)
            .await
            .map_err(|e| ProviderError::failed(format!("{doing}: {e}")))?;
        stdin.flush().await.ok();
        let said: Option<Status> = match status {
            Some(s) => tokio::time::timeout(self.start, s).await.map_err(|_| {
                ProviderError::new(
                    crate::types::ErrorCode::Timeout,
                    format!(
                        "{doing}: no end within {} s (--kubernetes-start-s)",
                        self.start.as_secs()
                    ),
                )
            })?,
            None => None,
        };
        match said {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(()),
            Some(s) => Err(ProviderError::failed(format!(
                "{doing} failed: {}",
                s.message.unwrap_or_default()
            ))),
            None => Err(ProviderError::failed(format!(
                "{doing}: the exec ended with no status"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_put_reads_exactly_the_length_and_moves_it_whole() {
        let a = put_argv(4_000_000);
        assert_eq!(&a[..2], ["/bin/sh", "-c"]);
        assert_eq!(a[3], STREAMED);
        assert_eq!(a[4], "4000000");
        assert!(a[2].contains("head -c \"$1\"") && a[2].ends_with("mv -f \"$d/.part\" \"$0\""));
    }
}
