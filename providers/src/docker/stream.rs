//! A connection to a computer's daemon: one exec of `computerd stdio`.
//! Every tool call goes over it; nothing runs one `docker exec` per call.
//!
//! A computer made with a direct directory ([`Plan::direct`]) is reached
//! the direct way first: this process listens on a socket of its own in
//! that directory (bound read-only into the computer at
//! [`DIRECT_MOUNT`]), and the bridge, told of it with `--direct`, connects
//! there and relays it to init, so the bytes never pass through the
//! engine's exec streams (dockerd, the shim and their pipes copy each byte
//! several times). The token line on the exec's stdin is what a
//! connection must open with to be taken ([`computerd::protocol::direct`]).
//! When the bridge cannot reach the socket (an engine in a VM, a policy
//! refusing it) it says so and the exec's stdin and stdout carry the
//! protocol as without it; a bridge that does not speak `--direct` (a
//! daemon of another version) is met with a plain exec, so its hello is
//! read and its version named.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::Bytes;
use computerd::client::DaemonClient;
use computerd::protocol::direct;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::io::StreamReader;

use super::host::docker_error;
use super::plan::{DIRECT_MOUNT, Plan};
use crate::daemon_backed::hello;
use crate::provider::Connection;
use crate::types::{ErrorCode, ProviderError, Result};

/// How long the bridge has to say D or S (it waits up to 3 s for init).
const SAY_WAIT: Duration = Duration::from_secs(5);
/// How long, after D, the bridge's connection has to arrive with its token.
const ACCEPT_WAIT: Duration = Duration::from_secs(3);
/// How long one connection has to send its token line.
const TOKEN_WAIT: Duration = Duration::from_millis(500);

/// Which way a connection's bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Over this process's socket in the computer's direct directory.
    Direct,
    /// Over the exec's stdin and stdout.
    Exec,
}

type Bytestream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

impl super::DockerProvider {
    /// A new connection to `id`'s daemon, its hello heard: a computer that
    /// is gone or stopped is said to be gone.
    pub(super) async fn dial(&self, docker: &Docker, id: &str) -> Result<Connection> {
        let dir = super::direct::dir_of(&self.opts.cache_dir, id);
        let dir = (self.opts.direct && dir.is_dir()).then_some(dir);
        let client = match open(docker, &self.shown_socket(), id, dir.as_deref()).await {
            Ok((c, route)) => {
                tracing::debug!(computer = id, ?route, "connected");
                c
            }
            Err(e) if e.code == ErrorCode::NotFound => {
                return Err(ProviderError::gone(format!(
                    "the Docker computer {id} is gone"
                )));
            }
            Err(e) if e.code == ErrorCode::Refused => {
                // 409: the container is not running.
                return Err(ProviderError::gone(format!(
                    "the Docker computer {id} has stopped"
                )));
            }
            Err(e) => return Err(e),
        };
        hello::call(client).await
    }
}

/// Start `computerd stdio` in `container` and make a client of it, the
/// direct way when `direct` (the computer's direct directory on this
/// host) is given and it works. The exec runs as the container's user,
/// with its capabilities (none).
pub async fn open(
    docker: &Docker,
    socket: &str,
    container: &str,
    direct: Option<&Path>,
) -> Result<(DaemonClient, Route)> {
    if let Some(dir) = direct
        && let Some(opened) = open_direct(docker, socket, container, dir).await?
    {
        return Ok(opened);
    }
    let (output, input) = start(docker, socket, container, Plan::stdio_command()).await?;
    Ok((
        DaemonClient::from_parts(StreamReader::new(output), input),
        Route::Exec,
    ))
}

/// The bridge's exec, attached: its stdout as bytes, and its stdin.
async fn start(
    docker: &Docker,
    socket: &str,
    container: &str,
    argv: Vec<String>,
) -> Result<(Bytestream, Pin<Box<dyn AsyncWrite + Send>>)> {
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(argv),
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(false),
                tty: Some(false),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| docker_error(socket, "starting the daemon's bridge (exec)", e))?;
    let started = docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: Some(64 * 1024),
            }),
        )
        .await
        .map_err(|e| docker_error(socket, "attaching to the daemon's bridge", e))?;
    let StartExecResults::Attached { output, input } = started else {
        return Err(ProviderError::failed(
            "Docker started the daemon's bridge detached",
        ));
    };
    // stdout only: stderr is not attached, and a multiplexed frame of any
    // other kind carries nothing of the protocol.
    let bytes = output.filter_map(|item| async move {
        match item {
            Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                Some(Ok(message))
            }
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e.to_string()))),
        }
    });
    Ok((Box::pin(bytes), input))
}

/// The socket file, removed when the attempt ends either way (a taken
/// connection needs no name).
struct Listening {
    path: PathBuf,
    listener: tokio::net::UnixListener,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The direct way: `None` when it cannot be tried here (no directory) or
/// the bridge does not speak it.
async fn open_direct(
    docker: &Docker,
    socket: &str,
    container: &str,
    dir: &Path,
) -> Result<Option<(DaemonClient, Route)>> {
    let name = format!("{}.sock", crate::random::random_hex(8)?);
    let path = dir.join(&name);
    let listening = match tokio::net::UnixListener::bind(&path) {
        Ok(listener) => Listening { path, listener },
        Err(e) => {
            tracing::debug!(
                computer = container,
                "no direct socket ({e}): over the exec"
            );
            return Ok(None);
        }
    };
    // The computer's user connects; the directory (0711, not listable)
    // and the token keep anyone else out.
    if let Err(e) =
        std::fs::set_permissions(&listening.path, std::fs::Permissions::from_mode(0o666))
    {
        tracing::debug!(
            computer = container,
            "direct socket mode ({e}): over the exec"
        );
        return Ok(None);
    }
    let token = format!("{}\n", crate::random::random_hex(direct::TOKEN_HEX / 2)?);
    let inside = format!("{DIRECT_MOUNT}/{name}");
    let (mut output, mut input) = start(
        docker,
        socket,
        container,
        Plan::stdio_command_direct(&inside),
    )
    .await?;
    if input.write_all(token.as_bytes()).await.is_err() || input.flush().await.is_err() {
        return Ok(None);
    }
    let first = tokio::time::timeout(SAY_WAIT, next_bytes(&mut output)).await;
    let Ok(Some(chunk)) = first else {
        // Ended, failed or silent: not a bridge that speaks --direct.
        return Ok(None);
    };
    match chunk[0] {
        direct::SAID_STDIO => {
            tracing::debug!(
                computer = container,
                "the bridge could not reach the direct socket: over the exec"
            );
            let rest = chunk.slice(1..);
            let output: Bytestream =
                Box::pin(futures::stream::once(async { Ok(rest) }).chain(output));
            Ok(Some((
                DaemonClient::from_parts(StreamReader::new(output), input),
                Route::Exec,
            )))
        }
        direct::SAID_DIRECT if chunk.len() == 1 => {
            let stream = tokio::time::timeout(ACCEPT_WAIT, take(&listening, token.as_bytes()))
                .await
                .map_err(|_| {
                    ProviderError::failed(format!(
                        "the daemon's bridge said it reached this process's socket, but no connection with its token came within {} s",
                        ACCEPT_WAIT.as_secs()
                    ))
                })??;
            drop(listening);
            // The exec's streams carry nothing more: the bridge ends when
            // this socket closes, and with the computer.
            drop((output, input));
            // Registered for reading only: the bridge's reads do not wake
            // this side.
            let stream = computerd::quiet::QuietStream::from_tokio(stream).map_err(|e| {
                ProviderError::failed(format!("setting up the direct connection: {e}"))
            })?;
            Ok(Some((DaemonClient::new(stream), Route::Direct)))
        }
        _ => Ok(None),
    }
}

/// The next non-empty chunk of stdout; None at its end or on an error.
async fn next_bytes(output: &mut Bytestream) -> Option<Bytes> {
    loop {
        match output.next().await {
            Some(Ok(b)) if b.is_empty() => continue,
            Some(Ok(b)) => return Some(b),
            _ => return None,
        }
    }
}

/// The first connection that opens with the token line; any other is
/// closed (a program of the computer may connect to what is in its
/// directory).
async fn take(listening: &Listening, token: &[u8]) -> Result<tokio::net::UnixStream> {
    loop {
        let (mut conn, _) = listening.listener.accept().await.map_err(|e| {
            ProviderError::failed(format!("accepting the bridge's connection: {e}"))
        })?;
        let mut line = vec![0u8; direct::TOKEN_LINE];
        match tokio::time::timeout(TOKEN_WAIT, conn.read_exact(&mut line)).await {
            Ok(Ok(_)) if direct::same_token(&line, token) => return Ok(conn),
            _ => tracing::warn!(
                "a connection to a computer's direct socket did not open with its token: closed"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn only_a_connection_that_opens_with_the_token_is_taken_and_the_socket_goes_with_the_attempt()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let listening = Listening {
            listener: tokio::net::UnixListener::bind(&path).unwrap(),
            path: path.clone(),
        };
        let token = format!("{}\n", "ab".repeat(32));
        // A wrong token, then one that says nothing, then the bridge.
        let mut wrong = tokio::net::UnixStream::connect(&path).await.unwrap();
        wrong
            .write_all(format!("{}\n", "ac".repeat(32)).as_bytes())
            .await
            .unwrap();
        let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
        let mut bridge = tokio::net::UnixStream::connect(&path).await.unwrap();
        bridge.write_all(token.as_bytes()).await.unwrap();
        bridge.write_all(b"after").await.unwrap();
        let mut taken =
            tokio::time::timeout(Duration::from_secs(5), take(&listening, token.as_bytes()))
                .await
                .unwrap()
                .unwrap();
        // The taken one is the bridge: what it sent after the token is there.
        let mut got = [0u8; 5];
        taken.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"after");
        // The others were closed.
        for other in [&mut wrong, &mut silent] {
            let mut b = [0u8; 1];
            assert_eq!(other.read(&mut b).await.unwrap(), 0);
        }
        drop(listening);
        assert!(!path.exists());
    }
}
