//! Bytes pushed into and pulled out of a computer, counted once, at the
//! server's connection to it: every file and archive call (`files.*`,
//! `tar.*`: write_file, read_file, upload, download, `computer-mcp cp`)
//! goes through [`Metered`], whatever tool or command made it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use computerd::client::{BytesReply, ComputerClient, Result};
use futures::future::BoxFuture;
use serde_json::Value;

/// The counts of one computer's connection.
#[derive(Debug, Default)]
pub struct Meter {
    pushed: AtomicU64,
    pulled: AtomicU64,
}

impl Meter {
    /// A meter that starts from what an earlier server counted.
    pub fn starting_at(pushed: u64, pulled: u64) -> Meter {
        Meter {
            pushed: AtomicU64::new(pushed),
            pulled: AtomicU64::new(pulled),
        }
    }

    /// (pushed, pulled) so far.
    pub fn read(&self) -> (u64, u64) {
        (
            self.pushed.load(Ordering::Relaxed),
            self.pulled.load(Ordering::Relaxed),
        )
    }
}

/// Only file and archive bytes count: a screenshot or a process's output
/// is not what "pushed and pulled" means to a user.
fn counted(method: &str) -> bool {
    method.starts_with("files.") || method.starts_with("tar.")
}

/// The decoded size of a value's `data` (base64 on the wire), without
/// decoding it.
fn data_len(v: &Value) -> u64 {
    let Some(s) = v.get("data").and_then(Value::as_str) else {
        return 0;
    };
    let pad = s.bytes().rev().take_while(|&b| b == b'=').count();
    ((s.len() / 4) * 3).saturating_sub(pad) as u64
}

/// A client that counts the bytes of `files.*` and `tar.*` calls on its
/// [`Meter`] and otherwise is the client it wraps.
pub struct Metered {
    inner: Arc<dyn ComputerClient>,
    meter: Arc<Meter>,
}

impl Metered {
    /// `inner`, counted on `meter`.
    pub fn wrap(inner: Arc<dyn ComputerClient>, meter: Arc<Meter>) -> Arc<dyn ComputerClient> {
        Arc::new(Metered { inner, meter })
    }

    fn count(&self, method: &str, pushed: u64, pulled: u64) {
        if counted(method) {
            self.meter.pushed.fetch_add(pushed, Ordering::Relaxed);
            self.meter.pulled.fetch_add(pulled, Ordering::Relaxed);
        }
    }
}

impl ComputerClient for Metered {
    fn call_value<'a>(&'a self, method: &'a str, params: Value) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let pushed = data_len(&params);
            let result = self.inner.call_value(method, params).await?;
            self.count(method, pushed, data_len(&result));
            Ok(result)
        })
    }

    fn call_bytes<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        data: Option<Vec<u8>>,
        reply_data: bool,
    ) -> BoxFuture<'a, Result<BytesReply>> {
        Box::pin(async move {
            let pushed = data
                .as_ref()
                .map_or_else(|| data_len(&params), |d| d.len() as u64);
            let reply = self
                .inner
                .call_bytes(method, params, data, reply_data)
                .await?;
            let pulled = reply
                .data
                .as_ref()
                .map_or_else(|| data_len(&reply.result), |d| d.len() as u64);
            self.count(method, pushed, pulled);
            Ok(reply)
        })
    }

    fn close(&self) {
        self.inner.close()
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn a_base64_datas_size_is_read_without_decoding() {
        for n in 0..10usize {
            let text = base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
            assert_eq!(data_len(&serde_json::json!({ "data": text })), n as u64);
        }
        assert_eq!(data_len(&serde_json::json!({"path": "/x"})), 0);
    }

    #[test]
    fn only_file_and_archive_calls_count() {
        assert!(counted("files.write") && counted("tar.pull") && !counted("screen.shot"));
    }
}
