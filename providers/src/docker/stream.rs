//! A connection to a computer's daemon: one exec of `computerd stdio`,
//! whose attached stdin and stdout are the [`DaemonClient`]'s byte stream.
//! Every tool call goes over it; nothing runs one `docker exec` per call.

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use computerd::client::DaemonClient;
use futures::StreamExt;
use tokio_util::io::StreamReader;

use super::host::docker_error;
use super::plan::Plan;
use crate::types::{ProviderError, Result};

/// Start `computerd stdio` in `container` and make a client of it. The
/// exec runs as the container's user, with its capabilities (none).
pub async fn open(docker: &Docker, socket: &str, container: &str) -> Result<DaemonClient> {
    let argv = Plan::stdio_command();
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
    let reader = StreamReader::new(Box::pin(bytes));
    Ok(DaemonClient::from_parts(reader, input))
}
