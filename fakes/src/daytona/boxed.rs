//! [`Machine`] over a [`VendorBox`]: a fake Daytona sandbox's inside as a
//! bounded Docker container of the test image, root inside as on Daytona
//! (whose default snapshot's user has passwordless sudo). Commands go to
//! `sh -c` as Daytona's toolbox pipes them to the sandbox's shell.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::io::AsyncWriteExt;

use super::machine::{Attached, Machine, Machines};
use crate::vendor_box::{BoxSpec, Chunk, Cmd, VendorBox};

fn shell(command: &str) -> Cmd {
    Cmd::new(&["/bin/sh", "-c", command])
}

fn io(e: crate::vendor_box::BoxError) -> io::Error {
    io::Error::other(e.0)
}

/// A box shared by the fake's tasks; removed when the last is dropped, if
/// not before.
pub struct BoxMachine(pub Arc<VendorBox>);

#[async_trait::async_trait]
impl Machine for BoxMachine {
    async fn upload(&self, path: &str, bytes: Vec<u8>) -> io::Result<()> {
        self.0.upload(path, &bytes).await.map_err(io)
    }

    async fn run(&self, command: &str, timeout: Duration) -> io::Result<Option<(i32, Vec<u8>)>> {
        match self.0.run(&shell(command), None, timeout).await {
            Ok(ran) => {
                let mut out = ran.stdout;
                out.extend_from_slice(&ran.stderr);
                Ok(Some((ran.code as i32, out)))
            }
            Err(e) if e.0.contains("did not end within") => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    async fn start(&self, command: &str) -> io::Result<Attached> {
        let mut a = self.0.attach(&shell(command), true).await.map_err(io)?;
        let (mut out_w, out_r) = tokio::io::duplex(256 * 1024);
        let (mut err_w, err_r) = tokio::io::duplex(64 * 1024);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let mut output = a.output;
        tokio::spawn(async move {
            while let Some(c) = output.next().await {
                let _ = match c {
                    Chunk::Stdout(b) => out_w.write_all(&b).await,
                    Chunk::Stderr(b) => err_w.write_all(&b).await,
                };
            }
            let _ = done_tx.send(());
        });
        let exec = a.exec.clone();
        let pid = a.pid;
        let this = Arc::clone(&self.0);
        let waiter = Arc::clone(&self.0);
        let stdin = a
            .input
            .take()
            .ok_or_else(|| io::Error::other("the box gave no stdin"))?;
        Ok(Attached {
            stdin,
            stdout: Box::pin(out_r),
            stderr: Box::pin(err_r),
            exit: async move {
                let _ = done_rx.await;
                waiter.exit_code(&exec).await.map_or(-1, |c| c as i32)
            }
            .boxed(),
            kill: Box::new(move || {
                async move {
                    let _ = this.signal(pid, "KILL").await;
                }
                .boxed()
            }),
        })
    }

    async fn remove(&self) {
        // A box that could not be removed now is removed on its drop.
        let _ = self.0.remove().await;
    }
}

/// Each sandbox a [`VendorBox`] of one spec.
pub struct BoxMachines {
    docker: Docker,
    spec: BoxSpec,
}

impl BoxMachines {
    pub fn new(docker: Docker, spec: BoxSpec) -> Self {
        Self { docker, spec }
    }

    /// Boxes of `spec` on this host's engine (its unix socket).
    pub fn local(spec: BoxSpec) -> io::Result<Self> {
        let docker =
            Docker::connect_with_unix_defaults().map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Self::new(docker, spec))
    }
}

impl Machines for BoxMachines {
    fn make(
        &self,
        _id: &str,
        _snapshot: Option<&str>,
    ) -> BoxFuture<'static, io::Result<Arc<dyn Machine>>> {
        let (docker, spec) = (self.docker.clone(), self.spec.clone());
        async move {
            let b = VendorBox::start(&docker, &spec).await.map_err(io)?;
            Ok(Arc::new(BoxMachine(Arc::new(b))) as Arc<dyn Machine>)
        }
        .boxed()
    }
}
