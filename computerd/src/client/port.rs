//! A port of the computer's loopback carried to a byte stream here:
//! port.connect, then port.read and port.write in both directions until
//! either side is done. The server's preview listener and the command line
//! use it; the bytes ride the daemon connection's frames.

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{ClientError, ComputerExt, Result};
use crate::protocol::{
    Bytes64, ErrorKind, METHOD_NOT_FOUND, PortCloseParams, PortConnectParams, PortReadParams,
    PortWriteParams, limits,
};

/// Bytes read here before each port.write: enough for a page's request or
/// an upload's chunk, well inside a frame.
const UP_CHUNK: usize = 256 * 1024;

/// Whether `e`, port.connect's failure, says nothing listens on the port
/// (and not that the daemon has no port.connect at all).
pub fn nothing_listens(e: &ClientError) -> bool {
    matches!(e, ClientError::Rpc(r) if r.code != METHOD_NOT_FOUND && r.kind() == Some(ErrorKind::NotFound))
}

/// One connection to a port inside the computer, closed when dropped.
pub struct PortConn<C: ComputerExt> {
    client: C,
    id: String,
}

impl<C: ComputerExt> PortConn<C> {
    /// Connect to `port` on the computer's loopback. Nothing listening is
    /// the daemon's `not_found`, naming the port.
    pub async fn connect(client: C, port: u16) -> Result<Self> {
        let r = client
            .call_typed(&PortConnectParams {
                port: u32::from(port),
            })
            .await?;
        Ok(PortConn { client, id: r.id })
    }

    /// Carry bytes between `stream` and the port until the port's server
    /// closes its side (or this side fails): `first` goes to the server
    /// before anything read from `stream`. The stream's end is passed on
    /// as a close of the sending side, and the reading goes on.
    pub fn splice<S>(self, stream: S, first: Vec<u8>) -> BoxFuture<'static, ()>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let (client, id) = (self.client.clone(), self.id.clone());
        let up = async move {
            let mut data = first;
            let mut buf = vec![0u8; UP_CHUNK];
            loop {
                let end = data.is_empty() && {
                    let n = rd.read(&mut buf).await.unwrap_or(0);
                    data.extend_from_slice(&buf[..n]);
                    n == 0
                };
                let params = PortWriteParams {
                    id: id.clone(),
                    data: Bytes64(std::mem::take(&mut data)),
                    close: end.then_some(true),
                };
                let sent: BoxFuture<'_, _> = Box::pin(client.call_sending_data(params));
                if end || sent.await.is_err() {
                    return;
                }
            }
        };
        let (client, id) = (self.client.clone(), self.id.clone());
        let down = async move {
            loop {
                let params = PortReadParams {
                    id: id.clone(),
                    max_bytes: None,
                    wait_ms: Some(limits::MAX_WAIT_MS),
                };
                let read: BoxFuture<'_, _> = Box::pin(client.call_taking_data(&params));
                let Ok(r) = read.await else { return };
                if !r.data.is_empty() && wr.write_all(&r.data).await.is_err() {
                    return;
                }
                if r.eof {
                    let _ = wr.shutdown().await;
                    return;
                }
            }
        };
        Box::pin(async move {
            // Closed (port.close) when this ends, by the drop.
            let _conn = self;
            // The server's side ending ends it all; this side's end only
            // stops the sending (a client that half-closes still reads the
            // answer).
            tokio::pin!(up, down);
            tokio::select! {
                () = &mut down => {}
                () = &mut up => down.await,
            }
        })
    }
}

impl<C: ComputerExt> Drop for PortConn<C> {
    fn drop(&mut self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let id = std::mem::take(&mut self.id);
        rt.spawn(async move {
            let _ = client.call_typed(&PortCloseParams { id }).await;
        });
    }
}
