//! What runs a fake Daytona sandbox's commands. The fake's HTTP side
//! never runs a program itself: it hands every command to a [`Machine`],
//! which in the end-to-end tests is a bounded container of the test image
//! (root inside, as on Daytona; pids and memory capped by Docker) and in
//! the fake's own tests a scripted one that runs nothing.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

/// A command started attached: its three streams and its end.
pub struct Attached {
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    pub stderr: Pin<Box<dyn AsyncRead + Send>>,
    /// Its exit code once it ends (-1 when unknown).
    pub exit: BoxFuture<'static, i32>,
    /// Ends it and everything it started (a session's delete).
    pub kill: Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>,
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached").finish_non_exhaustive()
    }
}

/// One fake sandbox's inside.
#[async_trait::async_trait]
pub trait Machine: Send + Sync {
    /// Write `bytes` at `path` (parents made, overwritten).
    async fn upload(&self, path: &str, bytes: Vec<u8>) -> io::Result<()>;
    /// Run `command` through `sh -c` until it ends or `timeout`: its exit
    /// code and its stdout and stderr together (`None` on the timeout).
    async fn run(&self, command: &str, timeout: Duration) -> io::Result<Option<(i32, Vec<u8>)>>;
    /// Start `command` through `sh -c`, attached.
    async fn start(&self, command: &str) -> io::Result<Attached>;
    /// End it, everything in it gone.
    async fn remove(&self);
}

/// Makes the inside of each sandbox the fake creates.
pub trait Machines: Send + Sync {
    /// The inside of the sandbox `id`, made of `snapshot` (None: the
    /// default).
    fn make(
        &self,
        id: &str,
        snapshot: Option<&str>,
    ) -> BoxFuture<'static, io::Result<Arc<dyn Machine>>>;
}
