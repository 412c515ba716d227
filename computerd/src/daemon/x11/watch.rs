//! screen.watch: the live view's frames, paced by the caller's ack. A new
//! frame comes only once the screen or the pointer changed; each is a JPEG
//! scaled to maxWidth.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Display, scale};
use crate::daemon::check;
use crate::protocol::{
    ImageFormat, RpcError, ScreenWatchParams, ScreenWatchResult, WatchFrame, limits,
};

/// One connection's watch: the newest frame and what it showed.
#[derive(Default)]
pub struct Watch {
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    seq: u64,
    bgrx: Vec<u8>,
    cursor: Option<[i64; 2]>,
    frame: Option<WatchFrame>,
    jpeg: Arc<Vec<u8>>,
}

/// A frame and its whole JPEG, for the connection to hold for screen.read.
pub type Held = (String, Arc<Vec<u8>>);

/// A changed frame's result, and its JPEG to hold when more than its first
/// chunk is left to read.
fn changed(seq: u64, frame: WatchFrame, jpeg: Arc<Vec<u8>>) -> (ScreenWatchResult, Option<Held>) {
    let held = (!frame.eof).then(|| (frame.id.clone(), jpeg));
    let result = ScreenWatchResult {
        seq,
        changed: true,
        frame: Some(frame),
    };
    (result, held)
}

impl Watch {
    pub async fn next(
        &self,
        display: &Display,
        p: ScreenWatchParams,
        cancel: &CancellationToken,
        new_id: impl Fn() -> String,
    ) -> Result<(ScreenWatchResult, Option<Held>), RpcError> {
        let wait = check::at_most(
            "waitMs",
            p.wait_ms.unwrap_or(limits::DEFAULT_WATCH_WAIT_MS),
            limits::MAX_WATCH_WAIT_MS,
        )?;
        let max_width = p.max_width.unwrap_or(limits::DEFAULT_WATCH_MAX_WIDTH);
        if max_width == 0 {
            return Err(RpcError::invalid_field(
                "maxWidth",
                "maxWidth is 0; give 1 or more",
            ));
        }
        let quality = p.quality.unwrap_or(limits::DEFAULT_WATCH_QUALITY);
        if !(1..=100).contains(&quality) {
            return Err(RpcError::invalid_field(
                "quality",
                format!("quality is {quality}; JPEG quality is 1 to 100"),
            ));
        }
        let Ok(mut st) = self.state.try_lock() else {
            return Err(RpcError::limit(
                "a screen.watch is already waiting on this connection; one watch per connection",
            ));
        };
        if p.after > st.seq {
            return Err(RpcError::invalid_field(
                "after",
                format!(
                    "after is {}, past the newest frame's seq {}",
                    p.after, st.seq
                ),
            ));
        }
        if st.seq > 0
            && p.after < st.seq
            && let Some(frame) = st.frame.clone()
        {
            return Ok(changed(st.seq, frame, Arc::clone(&st.jpeg)));
        }
        let until = Instant::now() + Duration::from_millis(wait);
        loop {
            let g = display.grab(cancel).await?;
            if st.seq == 0 || g.cursor != st.cursor || g.bgrx != st.bgrx {
                let bgrx = g.bgrx;
                let (w, h) = (g.width, g.height);
                let (jpeg, fw, fh, bgrx) = tokio::task::spawn_blocking(move || {
                    let (scaled, fw, fh) = scale::down(&bgrx, w, h, frame_size(w, h, max_width));
                    jpeg(&scaled, fw, fh, quality).map(|j| (j, fw, fh, bgrx))
                })
                .await
                .map_err(|e| {
                    RpcError::invalid(format!("the frame failed inside the daemon: {e}"))
                })??;
                st.seq += 1;
                st.bgrx = bgrx;
                st.cursor = g.cursor;
                let jpeg = Arc::new(jpeg);
                let first = jpeg.len().min(limits::MAX_CHUNK_BYTES as usize);
                let frame = WatchFrame {
                    id: new_id(),
                    format: ImageFormat::Jpeg,
                    data: crate::protocol::Bytes64(jpeg[..first].to_vec()),
                    size: jpeg.len() as u64,
                    eof: first == jpeg.len(),
                    frame_width: fw,
                    frame_height: fh,
                    width: w,
                    height: h,
                    cursor: g.cursor,
                };
                st.frame = Some(frame.clone());
                st.jpeg = Arc::clone(&jpeg);
                return Ok(changed(st.seq, frame, jpeg));
            }
            if Instant::now() >= until {
                return Ok((
                    ScreenWatchResult {
                        seq: st.seq,
                        changed: false,
                        frame: None,
                    },
                    None,
                ));
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(limits::WATCH_POLL_MS)) => {}
                () = cancel.cancelled() => return Err(RpcError::aborted("the watch was cancelled")),
            }
        }
    }
}

/// A frame's size: at most `max_width` wide (never wider than the
/// screen), the height keeping the ratio.
pub fn frame_size(w: u32, h: u32, max_width: u32) -> (u32, u32) {
    if w <= max_width {
        return (w, h);
    }
    let fh = (u64::from(h) * u64::from(max_width)).div_ceil(u64::from(w)) as u32;
    (max_width, fh.max(1))
}

/// A JPEG of BGRX pixels.
pub fn jpeg(bgrx: &[u8], w: u32, h: u32, quality: u8) -> Result<Vec<u8>, RpcError> {
    let mut out = Vec::new();
    let enc = jpeg_encoder::Encoder::new(&mut out, quality);
    enc.encode(bgrx, w as u16, h as u16, jpeg_encoder::ColorType::Bgra)
        .map_err(|e| RpcError::invalid(format!("the JPEG could not be made: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_keeps_the_ratio_and_is_never_wider_than_the_screen() {
        assert_eq!(frame_size(4, 2, 2), (2, 1));
        assert_eq!(frame_size(4, 2, 1), (1, 1));
        assert_eq!(frame_size(1280, 800, 640), (640, 400));
        assert_eq!(frame_size(1280, 801, 640), (640, 401));
        assert_eq!(frame_size(4, 2, 10), (4, 2), "never up");
        let bgrx = [0u8, 0, 0, 0, 255, 255, 255, 0].repeat(4);
        let j = jpeg(&bgrx, 4, 2, 60).unwrap();
        assert_eq!(&j[..2], &[0xff, 0xd8]);
    }
}
