//! What the tests of this binary share: the test hosts of the egress tests
//! ([`net`]), the turns tests take where one would disturb another, and a
//! CDP call.

pub mod net;

use std::io::Write;
use std::sync::Mutex;

use std::sync::Arc;

use bollard::Docker;
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::CdpSendParams;
use serde_json::Value;

/// A sweep releases every expired computer of the engine, so the tests
/// that sweep take turns (one's expired computer is the other's to find).
pub static SWEEPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Docker egress tests run one at a time, and never beside a local
/// egress test: a test host's address is this machine's own, which every
/// proxy must then refuse. The local egress tests share it (read), the
/// Docker ones hold it alone (write).
pub static EGRESS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A CDP command to the computer's browser (to a page with `session`),
/// and its result.
pub async fn send(
    c: &Arc<dyn ComputerClient>,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Result<Value, ClientError> {
    c.call_typed(&CdpSendParams {
        method: method.into(),
        params: Some(params),
        session_id: session.map(str::to_string),
        timeout_ms: None,
    })
    .await
    .map(|r| r.result)
}

/// A container removed from outside, as a user would (`docker rm -f`).
pub async fn remove_by_force(docker: &Docker, id: &str) {
    docker
        .remove_container(
            id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
        .unwrap();
}

/// A log writer the test reads back.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Every log line of this thread, at every level, into the returned
/// writer (the tests run on one thread, so every task logs here).
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let w = Captured::default();
    let w2 = w.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || w2.clone())
        .finish();
    (w, tracing::subscriber::set_default(sub))
}
