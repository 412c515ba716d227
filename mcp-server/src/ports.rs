//! Preview ports: for each port a model opens, a loopback listener of this
//! server's whose every connection is carried to that port on the
//! computer's own loopback, through the computer's daemon connection
//! (`port.*`). The URL holds a per-port token, checked on each request
//! ([`head`]); a WebSocket upgrade, once checked, is spliced raw. The
//! listeners end with the port's close, and with the computer (its release
//! closes the daemon connection; its deadline ends the daemon).

pub mod head;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computer_tools::ports::{OpenPort, PortHost};
use computerd::client::{ComputerClient, PortConn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The most ports one computer may have open at once.
pub const MAX_OPEN_PORTS: usize = 16;

/// How long a caller has to send its first request's head.
const HEAD_WAIT: Duration = Duration::from_secs(30);

/// How often a listener looks whether its computer still answers.
const ALIVE_EVERY: Duration = Duration::from_millis(500);

/// One computer's open ports.
pub struct Ports {
    client: Arc<dyn ComputerClient>,
    open: Mutex<BTreeMap<u16, Listening>>,
    /// Fired when the computer is released: every listener ends.
    gone: CancellationToken,
}

struct Listening {
    url: String,
    stop: CancellationToken,
}

impl Ports {
    pub fn new(client: Arc<dyn ComputerClient>) -> Arc<Ports> {
        Arc::new(Ports {
            client,
            open: Mutex::new(BTreeMap::new()),
            gone: CancellationToken::new(),
        })
    }

    fn open_ports(&self) -> std::sync::MutexGuard<'_, BTreeMap<u16, Listening>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every listener ends (the computer is released).
    pub fn shut(&self) {
        self.gone.cancel();
        for (_, l) in std::mem::take(&mut *self.open_ports()) {
            l.stop.cancel();
        }
    }
}

impl PortHost for Ports {
    fn open(&self, port: u16) -> Result<OpenPort, String> {
        if self.gone.is_cancelled() || self.client.is_closed() {
            return Err("the computer is gone: its ports cannot be opened".into());
        }
        let mut open = self.open_ports();
        if let Some(l) = open.get(&port) {
            return Ok(OpenPort {
                port,
                url: l.url.clone(),
            });
        }
        if open.len() >= MAX_OPEN_PORTS {
            return Err(format!(
                "this computer has {MAX_OPEN_PORTS} ports open, the most a computer may have; close one with port_close first"
            ));
        }
        let std_listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("a loopback listener could not be made: {e}"))?;
        let listener = TcpListener::from_std(std_listener)
            .map_err(|e| format!("a loopback listener could not be made: {e}"))?;
        let listen_port = listener
            .local_addr()
            .map_err(|e| format!("the listener's address could not be read: {e}"))?
            .port();
        let token = computer_providers::random::random_hex(16).map_err(|e| e.message)?;
        let url = format!(
            "http://127.0.0.1:{listen_port}/?{}={token}",
            head::TOKEN_PARAM
        );
        let stop = self.gone.child_token();
        let serve = Serve {
            client: Arc::clone(&self.client),
            port,
            listen_port,
            token,
            stop: stop.clone(),
        };
        tokio::spawn(serve.run(listener));
        open.insert(
            port,
            Listening {
                url: url.clone(),
                stop,
            },
        );
        Ok(OpenPort { port, url })
    }

    fn list(&self) -> Vec<OpenPort> {
        let mut open = self.open_ports();
        // A listener that ended with its computer is not listed.
        open.retain(|_, l| !l.stop.is_cancelled());
        open.iter()
            .map(|(port, l)| OpenPort {
                port: *port,
                url: l.url.clone(),
            })
            .collect()
    }

    fn close(&self, port: u16) -> bool {
        match self.open_ports().remove(&port) {
            Some(l) => {
                let was_open = !l.stop.is_cancelled();
                l.stop.cancel();
                was_open
            }
            None => false,
        }
    }
}

/// One port's listener.
struct Serve {
    client: Arc<dyn ComputerClient>,
    port: u16,
    listen_port: u16,
    token: String,
    stop: CancellationToken,
}

impl Serve {
    async fn run(self, listener: TcpListener) {
        let me = Arc::new(self);
        let mut alive = tokio::time::interval(ALIVE_EVERY);
        loop {
            tokio::select! {
                () = me.stop.cancelled() => break,
                _ = alive.tick() => {
                    if me.client.is_closed() {
                        me.stop.cancel();
                        break;
                    }
                }
                accepted = listener.accept() => {
                    let Ok((tcp, _)) = accepted else { continue };
                    let me = Arc::clone(&me);
                    tokio::spawn(async move {
                        let stop = me.stop.clone();
                        tokio::select! {
                            () = stop.cancelled() => {}
                            () = me.carry(tcp) => {}
                        }
                    });
                }
            }
        }
        tracing::debug!(port = me.port, "a preview port's listener ended");
    }

    /// One connection: its first request checked, then carried.
    async fn carry(&self, mut tcp: TcpStream) {
        let _ = tcp.set_nodelay(true);
        let mut buf = Vec::with_capacity(4096);
        let end = tokio::time::timeout(HEAD_WAIT, async {
            let mut chunk = [0u8; 4096];
            loop {
                if let Some(end) = head::head_end(&buf) {
                    return Some(end);
                }
                if buf.len() > head::MAX_HEAD_BYTES {
                    return None;
                }
                match tcp.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await;
        let Ok(Some(end)) = end else {
            if buf.len() > head::MAX_HEAD_BYTES {
                let words = format!("the request's head is over {} bytes", head::MAX_HEAD_BYTES);
                let _ = tcp.write_all(&head::answer(400, &words, &[])).await;
            }
            return;
        };
        let (mut first, redirect) = match head::check(&buf[..end], &self.token, self.listen_port) {
            head::Verdict::Refuse(status, words) => {
                let _ = tcp.write_all(&head::answer(status, &words, &[])).await;
                return;
            }
            head::Verdict::Pass { head, redirect } => (head, redirect),
        };
        if let Some(location) = redirect {
            let cookie = format!(
                "Set-Cookie: {}={}; Path=/; HttpOnly; SameSite=Strict",
                head::cookie_name(self.listen_port),
                self.token
            );
            let extra = [format!("Location: {location}"), cookie];
            let words = format!("see {location}");
            let _ = tcp.write_all(&head::answer(303, &words, &extra)).await;
            return;
        }
        first.extend_from_slice(&buf[end..]);
        let port = self.port;
        let connect: futures::future::BoxFuture<'static, _> =
            Box::pin(PortConn::connect(Arc::clone(&self.client), port));
        match connect.await {
            Ok(conn) => conn.splice(tcp, first).await,
            Err(e) => {
                let words = if computerd::client::nothing_listens(&e) {
                    format!(
                        "nothing listens on port {port} inside the computer: start a server there on 127.0.0.1:{port} (or 0.0.0.0:{port}), then load this page again"
                    )
                } else {
                    format!("port {port} inside the computer could not be reached: {e}")
                };
                let _ = tcp.write_all(&head::answer(502, &words, &[])).await;
            }
        }
    }
}

/// `computer-mcp ports open COMPUTER PORT`: the URL on stdout, then served
/// until Ctrl-C or the computer ends.
pub async fn cli(
    provider: Arc<dyn computer_providers::Provider>,
    command: crate::config::PortsCommand,
) -> anyhow::Result<i32> {
    let crate::config::PortsCommand::Open { computer, port } = command;
    let Some(port) = u16::try_from(port).ok().filter(|p| *p > 0) else {
        eprintln!("computer-mcp: PORT must be 1 to 65535, got {port}");
        return Ok(2);
    };
    let client = match crate::cp::connect(&provider, &computer).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("computer-mcp: {e}");
            return Ok(1);
        }
    };
    let ports = Ports::new(Arc::clone(&client));
    let opened = match ports.open(port) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("computer-mcp: {e}");
            return Ok(1);
        }
    };
    crate::print_out(&format!("{}\n", opened.url));
    eprintln!(
        "computer-mcp: port {port} in {computer} is at the URL above (it holds the port's token) until Ctrl-C or the computer ends"
    );
    let mut alive = tokio::time::interval(ALIVE_EVERY);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = alive.tick() => {
                if client.is_closed() {
                    eprintln!("computer-mcp: the computer {computer} ended; so did its URL");
                    ports.shut();
                    return Ok(1);
                }
            }
        }
    }
    ports.shut();
    Ok(0)
}
