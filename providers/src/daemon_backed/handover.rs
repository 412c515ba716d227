//! A new computer's first connection, handed to the `connect` that follows
//! its create.
//!
//! Create already opened a connection and heard the daemon's hello (that is
//! how it knows the computer is up); closing it only for the caller's
//! `connect` to open another costs a second bridge start (an exec through
//! the engine: the slowest step of a Docker create after the container's
//! own start). So create leaves it here, keyed by the computer's id, and
//! the first `connect` takes it. What nobody takes is closed after
//! [`KEPT`]; a release or a pause closes its computer's at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::provider::Connection;

/// How long a handed-over connection waits for its `connect`.
pub const KEPT: Duration = Duration::from_secs(10);

/// The connections waiting, by computer id; each with its number, so the
/// expiry of one never closes a later one of the same id.
#[derive(Clone, Default)]
pub struct Handover {
    waiting: Arc<Mutex<HashMap<String, (u64, Connection)>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Handover {
    /// Leave `conn` for the next `take(id)`; closed after [`KEPT`] if none
    /// comes. Must be called on a tokio runtime.
    pub fn leave(&self, id: &str, conn: Connection) {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let before = self.lock().insert(id.to_string(), (n, conn));
        if let Some((_, old)) = before {
            old.client.close();
        }
        let (waiting, id) = (Arc::clone(&self.waiting), id.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(KEPT).await;
            let mut map = waiting.lock().unwrap_or_else(|p| p.into_inner());
            if map.get(&id).is_some_and(|(m, _)| *m == n)
                && let Some((_, conn)) = map.remove(&id)
            {
                drop(map);
                conn.client.close();
            }
        });
    }

    /// The connection left for `id`, when one is and it is still open.
    pub fn take(&self, id: &str) -> Option<Connection> {
        let (_, conn) = self.lock().remove(id)?;
        if conn.client.is_closed() {
            return None;
        }
        Some(conn)
    }

    /// Close the connection left for `id`, if any.
    pub fn close(&self, id: &str) {
        if let Some((_, conn)) = self.lock().remove(id) {
            conn.client.close();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, Connection)>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computerd::client::DaemonClient;

    /// A connection over one end of a pipe; the other end is returned so
    /// the test can see it closed (its read ends).
    fn conn() -> (Connection, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (r, w) = tokio::io::split(ours);
        let client = DaemonClient::from_parts(r, w);
        let hello = computerd::protocol::HelloResult {
            version: computerd::VERSION.into(),
            os: "linux".into(),
            kind: computerd::protocol::MachineKind::Linux,
            arch: "amd64".into(),
            groups: vec![],
            bytes_frames: None,
        };
        (
            Connection {
                client: Arc::new(client),
                hello,
            },
            theirs,
        )
    }

    /// Whether the daemon's end (`far`) sees the end of its input: the
    /// connection was closed from our side.
    async fn input_ended(far: &mut tokio::io::DuplexStream) -> bool {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), far.read(&mut buf)).await;
        matches!(read, Ok(Ok(0)))
    }

    #[tokio::test]
    async fn a_left_connection_is_taken_once_then_gone() {
        let h = Handover::default();
        let (c, _far) = conn();
        h.leave("computer-a", c);
        assert!(h.take("computer-b").is_none());
        assert!(h.take("computer-a").is_some());
        assert!(h.take("computer-a").is_none());
    }

    #[tokio::test]
    async fn a_connection_whose_daemon_hung_up_is_not_handed_over() {
        let h = Handover::default();
        let (c, far) = conn();
        drop(far);
        for _ in 0..1000 {
            if c.client.is_closed() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(c.client.is_closed());
        h.leave("computer-a", c);
        assert!(h.take("computer-a").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn one_nobody_takes_is_closed_after_its_wait_and_a_later_one_is_kept() {
        let h = Handover::default();
        let (first, mut first_far) = conn();
        h.leave("computer-a", first);
        tokio::time::sleep(KEPT / 2).await;
        // A second one for the same id closes the first and gets a wait of
        // its own: the first's expiry leaves it alone.
        let (second, _far2) = conn();
        h.leave("computer-a", second);
        assert!(input_ended(&mut first_far).await);
        tokio::time::sleep(KEPT / 2 + Duration::from_millis(1)).await;
        assert!(h.take("computer-a").is_some());
        let (third, mut third_far) = conn();
        h.leave("computer-a", third);
        tokio::time::sleep(KEPT + Duration::from_millis(1)).await;
        assert!(input_ended(&mut third_far).await);
        assert!(h.take("computer-a").is_none());
    }

    #[tokio::test]
    async fn close_closes_the_one_left() {
        let h = Handover::default();
        let (c, mut far) = conn();
        h.leave("computer-a", c);
        h.close("computer-a");
        assert!(input_ended(&mut far).await);
        assert!(h.take("computer-a").is_none());
    }
}
