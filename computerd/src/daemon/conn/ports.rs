//! A connection's port streams: TCP connections to the computer's own
//! loopback, made by the daemon (which is inside the computer's network
//! namespace) and carried as port.read and port.write calls. Each is this
//! connection's alone and ends with it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::*;

/// One open port connection.
pub(super) struct PortSlot {
    read: tokio::sync::Mutex<OwnedReadHalf>,
    write: tokio::sync::Mutex<Option<OwnedWriteHalf>>,
    /// Fired by port.close and at the connection's end: reads waiting stop.
    closed: CancellationToken,
}

impl PortSlot {
    pub(super) fn close(&self) {
        self.closed.cancel();
    }
}

fn ended(id: &str) -> RpcError {
    RpcError::not_found(format!(
        "no port connection {id:?} is open on this connection (it was closed, or never made here)"
    ))
    .with_field("id")
}

impl Conn {
    fn port_slot(&self, id: &str) -> Result<Arc<PortSlot>, RpcError> {
        lock(&self.ports).get(id).cloned().ok_or_else(|| ended(id))
    }

    pub(super) async fn port_connect(
        &self,
        p: protocol::PortConnectParams,
    ) -> Result<protocol::PortStreamId, RpcError> {
        if p.port == 0 || p.port > u32::from(u16::MAX) {
            return Err(RpcError::invalid_field(
                "port",
                format!("port must be 1 to 65535, got {}", p.port),
            ));
        }
        let most = limits::MAX_PORT_STREAMS_PER_CONNECTION;
        if lock(&self.ports).len() >= most {
            return Err(RpcError::limit(format!(
                "{most} port connections are already open on this connection; close one first"
            )));
        }
        let port = p.port as u16;
        let tcp = match tokio::time::timeout(
            Duration::from_secs(10),
            TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port)),
        )
        .await
        {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(RpcError::not_found(format!(
                    "nothing listens on port {port} inside the computer (127.0.0.1:{port} refused the connection); start the server first, listening on 127.0.0.1 or 0.0.0.0"
                ))
                .with_field("port"));
            }
            Ok(Err(e)) => {
                return Err(RpcError::invalid(format!(
                    "connecting to 127.0.0.1:{port} inside the computer failed: {e}"
                ))
                .with_field("port"));
            }
            Err(_) => {
                return Err(RpcError::timeout(format!(
                    "connecting to 127.0.0.1:{port} inside the computer took over 10 s"
                )));
            }
        };
        let _ = tcp.set_nodelay(true);
        let (read, write) = tcp.into_split();
        let id = self.daemon.stream_id();
        lock(&self.ports).insert(
            id.clone(),
            Arc::new(PortSlot {
                read: tokio::sync::Mutex::new(read),
                write: tokio::sync::Mutex::new(Some(write)),
                closed: CancellationToken::new(),
            }),
        );
        Ok(protocol::PortStreamId { id })
    }

    pub(super) async fn port_read(
        &self,
        p: protocol::PortReadParams,
        cancel: CancellationToken,
    ) -> Result<protocol::PortReadResult, RpcError> {
        let max = crate::daemon::check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let wait =
            crate::daemon::check::at_most("waitMs", p.wait_ms.unwrap_or(0), limits::MAX_WAIT_MS)?;
        let slot = self.port_slot(&p.id)?;
        let mut read = slot.read.lock().await;
        let mut buf = vec![0u8; max as usize];
        let got = tokio::select! {
            r = read.read(&mut buf) => r,
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {
                return Ok(protocol::PortReadResult { data: Default::default(), eof: false });
            }
            _ = slot.closed.cancelled() => return Err(ended(&p.id)),
            _ = cancel.cancelled() => {
                return Err(RpcError::aborted("port.read was cancelled"));
            }
        };
        // A reset is the end as the caller sees it: nothing more comes.
        let n = got.unwrap_or(0);
        buf.truncate(n);
        Ok(protocol::PortReadResult {
            data: protocol::Bytes64(buf),
            eof: n == 0,
        })
    }

    pub(super) async fn port_write(&self, p: protocol::PortWriteParams) -> Result<Empty, RpcError> {
        if p.data.len() as u64 > limits::MAX_WRITE_BYTES {
            return Err(RpcError::over_limit(
                "data",
                p.data.len() as u64,
                limits::MAX_WRITE_BYTES,
            ));
        }
        let slot = self.port_slot(&p.id)?;
        let mut write = slot.write.lock().await;
        let Some(w) = write.as_mut() else {
            return Err(RpcError::invalid_field(
                "id",
                format!("port connection {:?} was closed for sending", p.id),
            ));
        };
        if let Err(e) = w.write_all(&p.data).await {
            return Err(RpcError::aborted(format!(
                "the server inside the computer stopped taking bytes: {e}"
            )));
        }
        if p.close == Some(true) {
            let _ = w.shutdown().await;
            write.take();
        }
        Ok(Empty {})
    }

    pub(super) fn port_close(&self, p: protocol::PortCloseParams) -> Empty {
        // Closing twice is fine: the second finds nothing.
        if let Some(slot) = lock(&self.ports).remove(&p.id) {
            slot.close();
        }
        Empty {}
    }
}
