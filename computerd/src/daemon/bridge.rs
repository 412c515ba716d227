//! `computerd stdio`: copy bytes between stdin/stdout and init's socket.
//!
//! A provider runs this inside the computer (docker exec, a vendor's exec)
//! and speaks the protocol over its stdio. It never serves on its own: with
//! no init to reach, it says why on stderr and exits 1.
//!
//! With `--direct` the bytes go another way: a socket of the provider's,
//! bound into the computer, is relayed to init instead of stdio, so they
//! never pass through the engine's exec streams
//! ([`crate::protocol::direct`]).

use std::path::Path;
use std::time::Duration;

use std::io::{Read, Write};
use std::os::fd::AsFd;

use tokio::net::UnixStream;

use super::setup::SetupError;
use crate::protocol::{direct, limits};

/// Each direction copies through a buffer of this size: a tar push or pull
/// goes by in frames of 512 KiB, and fewer, larger reads and writes move
/// them faster than the runtime's 8 KiB copy did.
const COPY_BYTES: usize = 256 * 1024;

/// Which copy ended, and how.
enum Ended {
    Up(std::io::Result<()>),
    Down(std::io::Result<()>),
}

/// Returns the exit code.
pub async fn run(socket: &Path, direct: Option<&Path>) -> i32 {
    let stdin = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("computerd stdio: stdin: {e}");
            return 1;
        }
    };
    // The token comes first, before init is waited for: the provider
    // writes it as soon as the exec is attached.
    let token = match direct {
        Some(_) => match read_token(&stdin) {
            Ok(t) => Some(t),
            Err(why) => {
                eprintln!("computerd stdio: {why}");
                return 1;
            }
        },
        None => None,
    };
    let stream = match connect(socket).await {
        Ok(s) => s,
        Err(why) => {
            eprintln!("computerd stdio: {why}");
            return 1;
        }
    };
    let set_up = |r: std::io::Result<i32>| {
        r.unwrap_or_else(|e| {
            eprintln!("computerd stdio: the bridge could not be set up: {e}");
            1
        })
    };
    let stdout = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("computerd stdio: stdout: {e}");
            return 1;
        }
    };
    if let (Some(path), Some(token)) = (direct, token) {
        match reach_provider(path, &token) {
            Ok(provider) => {
                if let Err(e) = (&stdout).write_all(&[direct::SAID_DIRECT]) {
                    eprintln!("computerd stdio: stdout: {e}");
                    return 1;
                }
                let back = match provider.try_clone() {
                    Ok(b) => b,
                    Err(e) => return set_up(Err(e)),
                };
                return set_up(copy_both_ways(stream, provider, back));
            }
            Err(e) => {
                eprintln!(
                    "computerd stdio: the provider's socket {} cannot be reached ({e}): bridging stdio",
                    path.display()
                );
                if let Err(e) = (&stdout).write_all(&[direct::SAID_STDIO]) {
                    eprintln!("computerd stdio: stdout: {e}");
                    return 1;
                }
            }
        }
    }
    set_up(copy_both_ways(stream, stdin, stdout))
}

/// The token line, read a byte at a time so nothing after it is taken
/// from stdin (with `S`, what follows is the protocol).
fn read_token(mut stdin: &std::fs::File) -> Result<Vec<u8>, SetupError> {
    let mut line = Vec::with_capacity(direct::TOKEN_LINE);
    let mut byte = [0u8; 1];
    while line.len() < direct::TOKEN_LINE && line.last() != Some(&b'\n') {
        match stdin.read(&mut byte) {
            Ok(0) => return Err("stdin ended before the token line (--direct)".into()),
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the token line: {e}").into()),
        }
    }
    if !direct::is_token_line(&line) {
        return Err(format!(
            "stdin's first line is not a token line ({} hex digits and a newline, --direct)",
            direct::TOKEN_HEX
        )
        .into());
    }
    Ok(line)
}

/// Connect to the provider's socket and send the token line.
fn reach_provider(path: &Path, token: &[u8]) -> std::io::Result<std::os::unix::net::UnixStream> {
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    s.write_all(token)?;
    Ok(s)
}

/// The two copies, each on a thread of its own with plain blocking reads
/// and writes: `input` (stdin, or the provider's socket) to init's socket,
/// and init's socket to `output`.
fn copy_both_ways(
    stream: UnixStream,
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
) -> std::io::Result<i32> {
    let to_init = stream.into_std()?;
    to_init.set_nonblocking(false)?;
    let from_init = to_init.try_clone()?;
    let (stdin, stdout) = (input, output);
    let (tx, rx) = std::sync::mpsc::channel();
    let up = tx.clone();
    std::thread::Builder::new()
        .name("stdio-up".into())
        .spawn(move || {
            let r = copy(stdin, &to_init);
            // The client's input ended: let init see EOF, and keep reading its replies.
            let _ = to_init.shutdown(std::net::Shutdown::Write);
            let _ = up.send(Ended::Up(r));
        })?;
    std::thread::Builder::new()
        .name("stdio-down".into())
        .spawn(move || {
            let _ = tx.send(Ended::Down(copy(&from_init, stdout)));
        })?;
    loop {
        match rx.recv() {
            // init closed the connection: we are done whatever stdin does.
            Ok(Ended::Down(Ok(()))) => return Ok(0),
            Ok(Ended::Down(Err(e))) => {
                eprintln!("computerd stdio: the connection to init failed: {e}");
                return Ok(1);
            }
            Ok(Ended::Up(r)) => {
                if let Err(e) = r {
                    eprintln!("computerd stdio: reading stdin failed: {e}");
                }
            }
            Err(_) => return Ok(1),
        }
    }
}

fn copy(mut from: impl Read, mut to: impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; COPY_BYTES];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return to.flush(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
}

/// Connect, waiting up to 3 s for an init that has just started.
async fn connect(socket: &Path) -> Result<UnixStream, SetupError> {
    let until = tokio::time::Instant::now() + Duration::from_millis(limits::BRIDGE_CONNECT_WAIT_MS);
    loop {
        match UnixStream::connect(socket).await {
            Ok(s) => return Ok(s),
            Err(e) => {
                if tokio::time::Instant::now() >= until {
                    let hint = match e.kind() {
                        std::io::ErrorKind::NotFound => {
                            "no socket is there: is computerd init running, and is COMPUTERD_SOCKET right?"
                        }
                        std::io::ErrorKind::ConnectionRefused => {
                            "nothing listens on it: the init that made it is gone"
                        }
                        std::io::ErrorKind::PermissionDenied => {
                            "permission denied: the socket is its user's alone (0600)"
                        }
                        _ => "",
                    };
                    return Err(format!(
                        "could not reach computerd init at {} within {} s ({e}) {hint}",
                        socket.display(),
                        limits::BRIDGE_CONNECT_WAIT_MS / 1000
                    )
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    }
}
