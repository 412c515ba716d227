//! screen.watch: the live view's frames, paced by the caller's ack. A new
//! frame comes only once the screen or the pointer changed; each is a JPEG
//! scaled to maxWidth.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Display;
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
    rgb: Vec<u8>,
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
            if st.seq == 0 || g.cursor != st.cursor || g.rgb != st.rgb {
                let rgb = g.rgb;
                let (w, h) = (g.width, g.height);
                let (jpeg, fw, fh, rgb) = tokio::task::spawn_blocking(move || {
                    let (scaled, fw, fh) = scale(&rgb, w, h, max_width);
                    jpeg(&scaled, fw, fh, quality).map(|j| (j, fw, fh, rgb))
                })
                .await
                .map_err(|e| {
                    RpcError::invalid(format!("the frame failed inside the daemon: {e}"))
                })??;
                st.seq += 1;
                st.rgb = rgb;
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

/// RGB scaled down to at most `max_width` (never up), each pixel the mean
/// of the pixels it covers; the height keeps the ratio.
pub fn scale(rgb: &[u8], w: u32, h: u32, max_width: u32) -> (Vec<u8>, u32, u32) {
    if w <= max_width {
        return (rgb.to_vec(), w, h);
    }
    let fw = max_width;
    let fh = ((u64::from(h) * u64::from(fw)).div_ceil(u64::from(w)) as u32).max(1);
    let mut out = Vec::with_capacity((fw * fh * 3) as usize);
    for fy in 0..fh {
        let y0 = (u64::from(fy) * u64::from(h) / u64::from(fh)) as u32;
        let y1 = ((u64::from(fy + 1) * u64::from(h) / u64::from(fh)) as u32).max(y0 + 1);
        for fx in 0..fw {
            let x0 = (u64::from(fx) * u64::from(w) / u64::from(fw)) as u32;
            let x1 = ((u64::from(fx + 1) * u64::from(w) / u64::from(fw)) as u32).max(x0 + 1);
            let mut sum = [0u64; 3];
            for y in y0..y1 {
                let row = (y * w * 3) as usize;
                for x in x0..x1 {
                    let at = row + (x * 3) as usize;
                    for (c, s) in sum.iter_mut().enumerate() {
                        *s += u64::from(rgb[at + c]);
                    }
                }
            }
            let n = u64::from((y1 - y0) * (x1 - x0));
            out.extend(sum.iter().map(|s| (s / n) as u8));
        }
    }
    (out, fw, fh)
}

pub fn jpeg(rgb: &[u8], w: u32, h: u32, quality: u8) -> Result<Vec<u8>, RpcError> {
    let mut out = Vec::new();
    let enc = jpeg_encoder::Encoder::new(&mut out, quality);
    enc.encode(rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| RpcError::invalid(format!("the JPEG could not be made: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_the_ratio_and_averages() {
        // 4x2: left half black, right half white.
        let mut rgb = Vec::new();
        for _ in 0..2 {
            for x in 0..4 {
                rgb.extend_from_slice(&[if x < 2 { 0 } else { 255 }; 3]);
            }
        }
        let (out, w, h) = scale(&rgb, 4, 2, 2);
        assert_eq!((w, h), (2, 1));
        assert_eq!(out, vec![0, 0, 0, 255, 255, 255]);
        let (out, w, h) = scale(&rgb, 4, 2, 1);
        assert_eq!((w, h, out[0]), (1, 1, 127));
        assert_eq!(scale(&rgb, 4, 2, 10).1, 4, "never up");
        let j = jpeg(&rgb, 4, 2, 60).unwrap();
        assert_eq!(&j[..2], &[0xff, 0xd8]);
    }
}
