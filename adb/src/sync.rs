//! The sync service (`sync:`): requests and answers are a four-letter id
//! and a little-endian u32, then that many bytes (for DATA, the bytes; for
//! DONE and OKAY, a number and none).

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::device::Device;
use crate::error::{AdbError, Result};
use crate::limits;
use crate::wire;

/// A regular file's type bits, which a SEND's mode carries as adb's does.
const S_IFREG: u32 = 0o100_000;

impl Device {
    /// Write `data` to the device's `remote` (an absolute path) with the
    /// permission bits of `mode` (such as 0o644), as `adb push` does:
    /// SEND, DATA in 64 KiB chunks, DONE, and the device's OKAY or FAIL.
    pub async fn push(&self, data: &[u8], remote: &str, mode: u32) -> Result<()> {
        let request = "sync push";
        check_remote(remote)?;
        wire::bounded(request, self.timeout(), async {
            let mut s = self.open(request, "sync:").await?;
            let target = format!("{remote},{}", S_IFREG | (mode & 0o7777));
            let (mut r, mut w) = s.split();
            let sent = send_file(&mut w, &target, data).await;
            // A device that refuses the file may say so before it has read
            // it all; its FAIL is the answer, whatever the writes met.
            match (read_answer(&mut r, request).await, sent) {
                (Ok(()), _) => {}
                (Err(e @ AdbError::Refused { .. }), _) => return Err(e),
                (Err(_), Err(e)) | (Err(e), Ok(())) => return Err(self.lost(e)),
            }
            let _ = w.write_all(&packet(b"QUIT", 0)).await;
            Ok(())
        })
        .await
    }

    /// Read the device's `remote` file whole (RECV), at most the device's
    /// max output.
    pub async fn pull(&self, remote: &str) -> Result<Vec<u8>> {
        let request = "sync pull";
        check_remote(remote)?;
        wire::bounded(request, self.timeout(), async {
            let mut s = self.open(request, "sync:").await?;
            s.write_all(&packet(b"RECV", remote.len() as u32))
                .await
                .map_err(|e| self.lost(wire::io(request)(e)))?;
            s.write_all(remote.as_bytes())
                .await
                .map_err(|e| self.lost(wire::io(request)(e)))?;
            let out = recv_file(&mut s, self.max_output())
                .await
                .map_err(|e| self.lost(e))?;
            let _ = s.write_all(&packet(b"QUIT", 0)).await;
            Ok(out)
        })
        .await
    }

    /// A stream that broke is the device gone; the rest keep their kind.
    fn lost(&self, e: AdbError) -> AdbError {
        match e {
            AdbError::Io { .. } => self.gone(e.to_string()),
            AdbError::Protocol { ref detail, .. } if detail.contains("closed the connection") => {
                self.gone(e.to_string())
            }
            other => other,
        }
    }
}

fn check_remote(remote: &str) -> Result<()> {
    if !remote.starts_with('/')
        || remote.contains('\0')
        || remote.len() > limits::MAX_SYNC_PATH_BYTES
    {
        return Err(AdbError::Invalid {
            field: "remote",
            message: format!(
                "a device path is absolute, holds no NUL byte and is at most {} bytes",
                limits::MAX_SYNC_PATH_BYTES
            ),
        });
    }
    Ok(())
}

fn packet(id: &[u8; 4], n: u32) -> [u8; 8] {
    let n = n.to_le_bytes();
    [id[0], id[1], id[2], id[3], n[0], n[1], n[2], n[3]]
}

async fn send_file<W: AsyncWrite + Unpin>(w: &mut W, target: &str, data: &[u8]) -> Result<()> {
    let request = "sync push";
    let e = wire::io(request);
    let mut head = packet(b"SEND", target.len() as u32).to_vec();
    head.extend_from_slice(target.as_bytes());
    w.write_all(&head).await.map_err(e)?;
    for chunk in data.chunks(limits::SYNC_DATA_MAX) {
        w.write_all(&packet(b"DATA", chunk.len() as u32))
            .await
            .map_err(wire::io(request))?;
        w.write_all(chunk).await.map_err(wire::io(request))?;
    }
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0);
    w.write_all(&packet(b"DONE", mtime))
        .await
        .map_err(wire::io(request))
}

/// An answer's id and number.
async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    request: &'static str,
) -> Result<([u8; 4], u32)> {
    let mut head = [0u8; 8];
    r.read_exact(&mut head).await.map_err(wire::io(request))?;
    let id = [head[0], head[1], head[2], head[3]];
    Ok((id, u32::from_le_bytes([head[4], head[5], head[6], head[7]])))
}

/// A FAIL's message of `n` bytes, as [`AdbError::Refused`].
async fn fail<R: AsyncRead + Unpin>(r: &mut R, request: &'static str, n: u32) -> AdbError {
    if n > limits::MAX_SYNC_MESSAGE_BYTES {
        return AdbError::Protocol {
            request,
            detail: format!(
                "a FAIL says it holds {n} bytes; at most {} come",
                limits::MAX_SYNC_MESSAGE_BYTES
            ),
        };
    }
    let mut msg = vec![0u8; n as usize];
    match r.read_exact(&mut msg).await {
        Ok(_) => AdbError::Refused {
            request,
            message: String::from_utf8_lossy(&msg).into_owned(),
        },
        Err(e) => wire::io(request)(e),
    }
}

async fn read_answer<R: AsyncRead + Unpin>(r: &mut R, request: &'static str) -> Result<()> {
    match read_head(r, request).await? {
        (id, _) if &id == b"OKAY" => Ok(()),
        (id, n) if &id == b"FAIL" => Err(fail(r, request, n).await),
        (id, _) => Err(AdbError::Protocol {
            request,
            detail: format!("{:?} is not OKAY or FAIL", String::from_utf8_lossy(&id)),
        }),
    }
}

async fn recv_file<R: AsyncRead + Unpin>(r: &mut R, max_output: u64) -> Result<Vec<u8>> {
    let request = "sync pull";
    let mut out = Vec::new();
    loop {
        match read_head(r, request).await? {
            (id, _) if &id == b"DONE" => return Ok(out),
            (id, n) if &id == b"FAIL" => return Err(fail(r, request, n).await),
            (id, n) if &id == b"DATA" => {
                if n as usize > limits::SYNC_DATA_MAX {
                    return Err(AdbError::Protocol {
                        request,
                        detail: format!(
                            "a DATA says it holds {n} bytes; at most {} come in one",
                            limits::SYNC_DATA_MAX
                        ),
                    });
                }
                if out.len() as u64 + u64::from(n) > max_output {
                    return Err(AdbError::TooLarge {
                        request,
                        limit: max_output,
                    });
                }
                let at = out.len();
                out.resize(at + n as usize, 0);
                r.read_exact(&mut out[at..])
                    .await
                    .map_err(wire::io(request))?;
            }
            (id, _) => {
                return Err(AdbError::Protocol {
                    request,
                    detail: format!(
                        "{:?} is not DATA, DONE or FAIL",
                        String::from_utf8_lossy(&id)
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_push_is_send_data_in_64_kib_chunks_and_done() {
        let data = vec![1u8; limits::SYNC_DATA_MAX + 10];
        let mut sent = Vec::new();
        send_file(&mut sent, "/data/local/tmp/a.apk,33188", &data)
            .await
            .unwrap();
        let mut want = packet(b"SEND", 27).to_vec();
        want.extend_from_slice(b"/data/local/tmp/a.apk,33188");
        want.extend(packet(b"DATA", 65536));
        want.extend(&data[..65536]);
        want.extend(packet(b"DATA", 10));
        want.extend(&data[65536..]);
        assert_eq!(&sent[..want.len()], &want[..]);
        assert_eq!(&sent[want.len()..want.len() + 4], b"DONE");
        assert_eq!(sent.len(), want.len() + 8);
        assert_eq!(S_IFREG | 0o644, 33188);
    }

    #[tokio::test]
    async fn answers_are_okay_or_the_devices_words() {
        read_answer(&mut &packet(b"OKAY", 0)[..], "sync push")
            .await
            .unwrap();
        let mut fail = packet(b"FAIL", 17).to_vec();
        fail.extend_from_slice(b"Permission denied");
        let e = read_answer(&mut &fail[..], "sync push").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "the adb server refused sync push: Permission denied"
        );
        let e = read_answer(&mut &packet(b"FAIL", u32::MAX)[..], "sync push")
            .await
            .unwrap_err();
        assert!(matches!(e, AdbError::Protocol { .. }), "{e}");
    }

    #[tokio::test]
    async fn a_pull_joins_data_to_done_and_bounds_it() {
        let mut bytes = packet(b"DATA", 3).to_vec();
        bytes.extend_from_slice(b"abc");
        bytes.extend(packet(b"DATA", 2));
        bytes.extend_from_slice(b"de");
        bytes.extend(packet(b"DONE", 0));
        assert_eq!(recv_file(&mut &bytes[..], 100).await.unwrap(), b"abcde");
        let e = recv_file(&mut &bytes[..], 4).await.unwrap_err();
        assert!(matches!(e, AdbError::TooLarge { limit: 4, .. }), "{e}");
        let huge = packet(b"DATA", 65537);
        assert!(matches!(
            recv_file(&mut &huge[..], u64::MAX).await,
            Err(AdbError::Protocol { .. })
        ));
    }

    #[test]
    fn remote_paths_are_absolute_and_bounded() {
        assert!(check_remote("/data/local/tmp/x").is_ok());
        for bad in ["rel/x", "/a\0b", &format!("/{}", "a".repeat(1024))] {
            assert!(
                matches!(
                    check_remote(bad),
                    Err(AdbError::Invalid {
                        field: "remote",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }
}
