//! `computerd stdio`: copy bytes between stdin/stdout and init's socket.
//!
//! A provider runs this inside the computer (docker exec, a vendor's exec)
//! and speaks the protocol over its stdio. It never serves on its own: with
//! no init to reach, it says why on stderr and exits 1.

use std::path::Path;
use std::time::Duration;

use std::io::{Read, Write};
use std::os::fd::AsFd;

use tokio::net::UnixStream;

use crate::protocol::limits;

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
pub async fn run(socket: &Path) -> i32 {
    let stream = match connect(socket).await {
        Ok(s) => s,
        Err(why) => {
            eprintln!("computerd stdio: {why}");
            return 1;
        }
    };
    match copy_both_ways(stream) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("computerd stdio: the bridge could not be set up: {e}");
            1
        }
    }
}

/// The two copies, each on a thread of its own with plain blocking reads
/// and writes: stdin to the socket, and the socket to stdout.
fn copy_both_ways(stream: UnixStream) -> std::io::Result<i32> {
    let to_init = stream.into_std()?;
    to_init.set_nonblocking(false)?;
    let from_init = to_init.try_clone()?;
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
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
async fn connect(socket: &Path) -> Result<UnixStream, String> {
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
                    ));
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    }
}
