//! The shell protocol (`shell,v2,raw:`): every message is a packet of one
//! id byte, a little-endian u32 length and the bytes, so stdout, stderr and
//! the exit status arrive apart. A device has it when its features name
//! `shell_v2`.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::device::Device;
use crate::error::{AdbError, Result};
use crate::limits;
use crate::wire;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const EXIT: u8 = 3;
const CLOSE_STDIN: u8 = 4;

const REQUEST: &str = "shell v2";

/// A command's output and exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: u8,
}

impl Device {
    /// `shell,v2,raw:<command>` with `stdin` as its input (then closed):
    /// its stdout, stderr and exit status. stdout and stderr together are
    /// bounded by the device's max output.
    pub async fn shell_v2(&self, command: &str, stdin: &[u8]) -> Result<ShellOutput> {
        wire::bounded(REQUEST, self.timeout(), async {
            let mut s = self
                .open(REQUEST, &format!("shell,v2,raw:{command}"))
                .await?;
            let (mut r, mut w) = s.split();
            // The input is written while the output is read, and let go
            // once the exit status is in: a command may answer, or end,
            // before it has read all of it.
            let write = write_stdin(&mut w, stdin);
            let read = read_packets(&mut r, self.max_output());
            tokio::pin!(write, read);
            let mut writing = true;
            let read = loop {
                tokio::select! {
                    r = &mut read => break r,
                    _ = &mut write, if writing => writing = false,
                }
            };
            read?.ok_or_else(|| self.gone("the shell's stream ended before its exit status"))
        })
        .await
    }
}

async fn write_stdin<W: AsyncWrite + Unpin>(w: &mut W, stdin: &[u8]) -> Result<()> {
    let chunk = limits::SYNC_DATA_MAX;
    for part in stdin.chunks(chunk) {
        w.write_all(&header(STDIN, part.len()))
            .await
            .map_err(wire::io(REQUEST))?;
        w.write_all(part).await.map_err(wire::io(REQUEST))?;
    }
    w.write_all(&header(CLOSE_STDIN, 0))
        .await
        .map_err(wire::io(REQUEST))
}

fn header(id: u8, len: usize) -> [u8; 5] {
    let n = (len as u32).to_le_bytes();
    [id, n[0], n[1], n[2], n[3]]
}

/// Packets to the exit status; None when the stream ends first.
async fn read_packets<R: AsyncRead + Unpin>(
    r: &mut R,
    max_output: u64,
) -> Result<Option<ShellOutput>> {
    let mut out = ShellOutput {
        stdout: Vec::new(),
        stderr: Vec::new(),
        exit_code: 0,
    };
    loop {
        let mut head = [0u8; 5];
        match r.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(wire::io(REQUEST)(e)),
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        if len > limits::MAX_SHELL_PACKET_BYTES {
            return Err(AdbError::Protocol {
                request: REQUEST,
                detail: format!(
                    "a packet says it holds {len} bytes; at most {} come in one",
                    limits::MAX_SHELL_PACKET_BYTES
                ),
            });
        }
        let held = (out.stdout.len() + out.stderr.len()) as u64;
        if held + u64::from(len) > max_output {
            return Err(AdbError::TooLarge {
                request: REQUEST,
                limit: max_output,
            });
        }
        let mut body = vec![0u8; len as usize];
        match r.read_exact(&mut body).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(wire::io(REQUEST)(e)),
        }
        match head[0] {
            STDOUT => out.stdout.extend_from_slice(&body),
            STDERR => out.stderr.extend_from_slice(&body),
            EXIT => {
                let [code] = body[..] else {
                    return Err(AdbError::Protocol {
                        request: REQUEST,
                        detail: format!("the exit packet holds {len} bytes, not 1"),
                    });
                };
                out.exit_code = code;
                return Ok(Some(out));
            }
            // Window sizes and ids a newer adbd adds carry nothing we keep.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(id: u8, body: &[u8]) -> Vec<u8> {
        let mut p = header(id, body.len()).to_vec();
        p.extend_from_slice(body);
        p
    }

    #[tokio::test]
    async fn packets_give_stdout_stderr_and_the_exit_status_apart() {
        let bytes = [
            packet(STDOUT, b"he"),
            packet(STDERR, b"oops\n"),
            packet(5, b"\x00\x01"),
            packet(STDOUT, b"llo\n"),
            packet(EXIT, &[3]),
            packet(STDOUT, b"after the end"),
        ]
        .concat();
        let out = read_packets(&mut &bytes[..], 1024).await.unwrap().unwrap();
        assert_eq!(
            out,
            ShellOutput {
                stdout: b"hello\n".to_vec(),
                stderr: b"oops\n".to_vec(),
                exit_code: 3
            }
        );
    }

    #[tokio::test]
    async fn a_cut_stream_a_huge_length_and_too_much_output_are_told_apart() {
        let cut = packet(STDOUT, b"partial");
        assert_eq!(read_packets(&mut &cut[..], 1024).await.unwrap(), None);
        let huge = header(STDOUT, limits::MAX_SHELL_PACKET_BYTES as usize + 1);
        let e = read_packets(&mut &huge[..], u64::MAX).await.unwrap_err();
        assert!(e.to_string().contains("at most 1048576"), "{e}");
        let much = [packet(STDOUT, &[0; 600]), packet(STDERR, &[0; 600])].concat();
        let e = read_packets(&mut &much[..], 1000).await.unwrap_err();
        assert!(matches!(e, AdbError::TooLarge { limit: 1000, .. }), "{e}");
    }

    #[tokio::test]
    async fn stdin_goes_in_packets_and_is_closed() {
        let mut sent = Vec::new();
        write_stdin(&mut sent, &vec![9u8; limits::SYNC_DATA_MAX + 1])
            .await
            .unwrap();
        let mut want = packet(STDIN, &vec![9u8; limits::SYNC_DATA_MAX]);
        want.extend(packet(STDIN, &[9]));
        want.extend(packet(CLOSE_STDIN, &[]));
        assert_eq!(sent, want);
    }
}
