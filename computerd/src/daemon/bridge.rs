//! `computerd stdio`: copy bytes between stdin/stdout and init's socket.
//!
//! A provider runs this inside the computer (docker exec, a vendor's exec)
//! and speaks the protocol over its stdio. It never serves on its own: with
//! no init to reach, it says why on stderr and exits 1.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use crate::protocol::limits;

/// Returns the exit code.
pub async fn run(socket: &Path) -> i32 {
    let stream = match connect(socket).await {
        Ok(s) => s,
        Err(why) => {
            eprintln!("computerd stdio: {why}");
            return 1;
        }
    };
    let (mut sock_r, mut sock_w) = stream.into_split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        let r = tokio::io::copy(&mut stdin, &mut sock_w).await;
        // The client's input ended: let init see EOF, and keep reading its replies.
        let _ = sock_w.shutdown().await;
        r
    };
    let down = async {
        let r = tokio::io::copy(&mut sock_r, &mut stdout).await;
        let _ = stdout.flush().await;
        r
    };
    tokio::pin!(up);
    tokio::pin!(down);
    tokio::select! {
        // init closed the connection: we are done whatever stdin does.
        r = &mut down => if let Err(e) = r { eprintln!("computerd stdio: the connection to init failed: {e}"); return 1; },
        r = &mut up => {
            if let Err(e) = r {
                eprintln!("computerd stdio: reading stdin failed: {e}");
            }
            if let Err(e) = down.await {
                eprintln!("computerd stdio: the connection to init failed: {e}");
                return 1;
            }
        }
    }
    0
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
