//! `screen.watch` on a phone: the live view's frames, as PNG (the phone's
//! own encoding, decoded and scaled here as a screenshot is). A phone tells
//! no one when its screen changes, so a watch looks at it every
//! [`POLL`] until the screencap's bytes differ from the last frame's, or
//! its wait ends with no frame.

use std::sync::Arc;
use std::time::Duration;

use computerd::client::Result;
use computerd::protocol::{
    Fit, ImageFormat, RpcError, ScreenShotParams, ScreenWatchParams, ScreenWatchResult, WatchFrame,
    decode_params,
};
use serde_json::Value;

use super::{PhoneClient, gone, rpc, to_value};

/// How often a waiting watch takes a screencap (each costs the phone an
/// encode and the transport its bytes).
const POLL: Duration = Duration::from_millis(250);

/// The last frame a watch on this connection gave.
#[derive(Default)]
pub(super) struct Watched {
    seq: u64,
    screencap: Option<Arc<[u8]>>,
}

impl PhoneClient {
    pub(super) async fn screen_watch(&self, params: Value) -> Result<Value> {
        let p: ScreenWatchParams = decode_params(Some(params)).map_err(rpc)?;
        let ask = p.checked().map_err(rpc)?;
        let (wait, max_width) = (ask.wait_ms, ask.max_width);
        let newest = self.watched().seq;
        if p.after > newest {
            return Err(rpc(RpcError::invalid_field(
                "after",
                format!("after is {}, past the newest frame's seq {newest}", p.after),
            )));
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
        loop {
            let bytes: Arc<[u8]> = self.shell.bytes("screencap -p").await.map_err(gone)?.into();
            let seq = {
                let mut w = self.watched();
                if w.screencap.as_deref() != Some(&*bytes) {
                    w.seq += 1;
                    w.screencap = Some(Arc::clone(&bytes));
                }
                w.seq
            };
            // A change, or a caller behind the newest frame: it gets it now.
            if p.after < seq {
                return self.frame(seq, &bytes, max_width);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return to_value(&ScreenWatchResult {
                    seq,
                    changed: false,
                    frame: None,
                });
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Frame `seq` of the screencap `bytes`, at most `max_width` wide; held
    /// whole for screen.read.
    fn frame(&self, seq: u64, bytes: &[u8], max_width: u32) -> Result<Value> {
        let fit = Fit {
            long: u32::MAX,
            short: u32::MAX,
            pixels: u64::MAX,
            max_width: Some(max_width),
        };
        let params = ScreenShotParams {
            region: None,
            fit: Some(fit),
        };
        let made = self.make(bytes.to_vec(), &params)?;
        let id = format!("frame-{seq}");
        let (data, size, eof) = self.hold(&id, &made.png);
        let frame = WatchFrame {
            id,
            format: ImageFormat::Png,
            data,
            size,
            eof,
            frame_width: made.width,
            frame_height: made.height,
            width: made.screen_width,
            height: made.screen_height,
            cursor: None,
            region: None,
        };
        to_value(&ScreenWatchResult {
            seq,
            changed: true,
            frame: Some(frame),
        })
    }
}
