//! screen.watch: the live view's frames, paced by the caller's ack. A new
//! frame comes only once the screen or the pointer changed; each is a JPEG
//! scaled to maxWidth. A caller that asks `regions` and has the last frame
//! whole gets only the rectangle that changed, when that is at most half
//! the frame (a moving window costs its own pixels, not the screen's).

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
    /// The newest frame's whole picture, scaled: what the next one is
    /// compared with, and what a caller behind by more than one frame is
    /// sent whole.
    scaled: Scaled,
}

/// A frame's pixels (BGRX) at its size.
#[derive(Default)]
struct Scaled {
    bgrx: Vec<u8>,
    width: u32,
    height: u32,
}

/// A frame's result, and its JPEG to hold when more than its first chunk
/// is left to read.
type Answer = (ScreenWatchResult, Option<Held>);

/// A frame and its whole JPEG, for the connection to hold for screen.read.
pub type Held = (String, Arc<Vec<u8>>);

/// A changed frame's result, and its JPEG to hold when more than its first
/// chunk is left to read.
fn changed(seq: u64, frame: WatchFrame, jpeg: Arc<Vec<u8>>) -> Answer {
    let held = (!frame.eof).then(|| (frame.id.clone(), jpeg));
    let result = ScreenWatchResult {
        seq,
        changed: true,
        frame: Some(frame),
    };
    (result, held)
}

/// What one watch asks, checked.
struct Ask {
    wait_ms: u64,
    max_width: u32,
    quality: u8,
}

fn checked(p: &ScreenWatchParams) -> Result<Ask, RpcError> {
    let wait_ms = check::at_most(
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
    Ok(Ask {
        wait_ms,
        max_width,
        quality,
    })
}

/// A picture made in the blocking pool: its JPEG, the region it covers
/// (None: the whole frame), and its whole scaled pixels.
struct Made {
    jpeg: Vec<u8>,
    region: Option<[u32; 4]>,
    scaled: Scaled,
    bgrx: Vec<u8>,
}

impl Watch {
    pub async fn next(
        &self,
        display: &Display,
        p: ScreenWatchParams,
        cancel: &CancellationToken,
        new_id: impl Fn() -> String,
    ) -> Result<Answer, RpcError> {
        let ask = checked(&p)?;
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
        if st.seq > 0 && p.after < st.seq {
            return resend(&mut st, &p, ask.quality, &new_id).await;
        }
        let until = Instant::now() + Duration::from_millis(ask.wait_ms);
        loop {
            let g = display.grab(cancel).await?;
            if st.seq == 0 || g.cursor != st.cursor || g.bgrx != st.bgrx {
                // The last frame is the base of a region only for a
                // caller that asked for regions and has it whole.
                let base = (p.regions && st.seq > 0).then(|| std::mem::take(&mut st.scaled));
                let (w, h, quality) = (g.width, g.height, ask.quality);
                let to = frame_size(w, h, ask.max_width);
                let bgrx = g.bgrx;
                let made = tokio::task::spawn_blocking(move || {
                    let (scaled, fw, fh) = scale::down(&bgrx, w, h, to);
                    let scaled = Scaled {
                        bgrx: scaled,
                        width: fw,
                        height: fh,
                    };
                    picture(&scaled, base.as_ref(), quality).map(|(jpeg, region)| Made {
                        jpeg,
                        region,
                        scaled,
                        bgrx,
                    })
                })
                .await
                .map_err(|e| {
                    RpcError::invalid(format!("the frame failed inside the daemon: {e}"))
                })??;
                st.seq += 1;
                st.bgrx = made.bgrx;
                st.cursor = g.cursor;
                let frame = frame_of(&made.jpeg, &made.scaled, (w, h), g.cursor, new_id());
                let frame = WatchFrame {
                    region: made.region,
                    ..frame
                };
                st.scaled = made.scaled;
                return Ok(hold(&mut st, frame, made.jpeg));
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

/// The newest frame again, for a caller that does not have it: as kept
/// when it is whole, or when it is a region on the frame the caller has;
/// else made whole again from the kept pixels (and kept so).
async fn resend(
    st: &mut State,
    p: &ScreenWatchParams,
    quality: u8,
    new_id: &impl Fn() -> String,
) -> Result<Answer, RpcError> {
    let Some(frame) = st.frame.clone() else {
        return Err(RpcError::invalid("the newest frame was not kept"));
    };
    if frame.region.is_none() || (p.regions && p.after + 1 == st.seq) {
        return Ok(changed(st.seq, frame, Arc::clone(&st.jpeg)));
    }
    let scaled = std::mem::take(&mut st.scaled);
    let (scaled, jpeg) = tokio::task::spawn_blocking(move || {
        let j = jpeg(&scaled.bgrx, scaled.width, scaled.height, quality);
        (scaled, j)
    })
    .await
    .map_err(|e| RpcError::invalid(format!("the frame failed inside the daemon: {e}")))?;
    let jpeg = jpeg?;
    let whole = frame_of(
        &jpeg,
        &scaled,
        (frame.width, frame.height),
        frame.cursor,
        new_id(),
    );
    st.scaled = scaled;
    Ok(hold(st, whole, jpeg))
}

/// Keep `frame` (of the JPEG `jpeg`) as the newest, and answer with it.
fn hold(st: &mut State, frame: WatchFrame, jpeg: Vec<u8>) -> Answer {
    let jpeg = Arc::new(jpeg);
    st.frame = Some(frame.clone());
    st.jpeg = Arc::clone(&jpeg);
    changed(st.seq, frame, jpeg)
}

/// A whole frame's answer: the JPEG's first chunk, its sizes.
fn frame_of(
    jpeg: &[u8],
    scaled: &Scaled,
    screen: (u32, u32),
    cursor: Option<[i64; 2]>,
    id: String,
) -> WatchFrame {
    let first = jpeg.len().min(limits::MAX_CHUNK_BYTES as usize);
    WatchFrame {
        id,
        format: ImageFormat::Jpeg,
        data: crate::protocol::Bytes64(jpeg[..first].to_vec()),
        size: jpeg.len() as u64,
        eof: first == jpeg.len(),
        frame_width: scaled.width,
        frame_height: scaled.height,
        width: screen.0,
        height: screen.1,
        cursor,
        region: None,
    }
}

/// The frame's JPEG: of the rectangle that changed since `base` when
/// that is at most half of it (an empty one when no pixel changed), else
/// of the whole frame.
fn picture(
    now: &Scaled,
    base: Option<&Scaled>,
    quality: u8,
) -> Result<(Vec<u8>, Option<[u32; 4]>), RpcError> {
    let whole = || jpeg(&now.bgrx, now.width, now.height, quality).map(|j| (j, None));
    let Some(base) = base.filter(|b| {
        (b.width, b.height) == (now.width, now.height) && b.bgrx.len() == now.bgrx.len()
    }) else {
        return whole();
    };
    let Some([x, y, w, h]) = changed_box(&base.bgrx, &now.bgrx, now.width) else {
        return Ok((Vec::new(), Some([0, 0, 0, 0])));
    };
    if u64::from(w) * u64::from(h) * 2 > u64::from(now.width) * u64::from(now.height) {
        return whole();
    }
    let stride = now.width as usize * 4;
    let mut cut = Vec::with_capacity(w as usize * h as usize * 4);
    for row in now
        .bgrx
        .chunks_exact(stride)
        .skip(y as usize)
        .take(h as usize)
    {
        cut.extend_from_slice(&row[x as usize * 4..(x + w) as usize * 4]);
    }
    jpeg(&cut, w, h, quality).map(|j| (j, Some([x, y, w, h])))
}

/// The smallest rectangle `[x, y, width, height]` holding every pixel
/// that differs between two pictures `width` pixels wide (BGRX), or None
/// when they are the same.
pub fn changed_box(a: &[u8], b: &[u8], width: u32) -> Option<[u32; 4]> {
    let stride = width as usize * 4;
    let (mut x0, mut x1, mut y0, mut y1) = (usize::MAX, 0usize, usize::MAX, 0usize);
    for (y, (ra, rb)) in a
        .chunks_exact(stride)
        .zip(b.chunks_exact(stride))
        .enumerate()
    {
        if ra == rb {
            continue;
        }
        let first = ra
            .chunks_exact(4)
            .zip(rb.chunks_exact(4))
            .position(|(p, q)| p[..3] != q[..3]);
        let Some(first) = first else {
            continue;
        };
        let last = ra
            .chunks_exact(4)
            .zip(rb.chunks_exact(4))
            .rposition(|(p, q)| p[..3] != q[..3])
            .unwrap_or(first);
        (y0, y1) = (y0.min(y), y);
        (x0, x1) = (x0.min(first), x1.max(last));
    }
    (y0 != usize::MAX).then(|| {
        [
            x0 as u32,
            y0 as u32,
            (x1 - x0 + 1) as u32,
            (y1 - y0 + 1) as u32,
        ]
    })
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

    /// A 16x8 picture of one grey, with the pixels `at` set to white.
    fn pic(at: &[(usize, usize)]) -> Scaled {
        let mut bgrx = [90u8, 90, 90, 0].repeat(16 * 8);
        for &(x, y) in at {
            bgrx[(y * 16 + x) * 4..][..3].copy_from_slice(&[255, 255, 255]);
        }
        Scaled {
            bgrx,
            width: 16,
            height: 8,
        }
    }

    #[test]
    fn the_changed_box_holds_every_changed_pixel_and_no_more() {
        let base = pic(&[]);
        assert_eq!(changed_box(&base.bgrx, &base.bgrx, 16), None);
        let one = pic(&[(3, 2)]);
        assert_eq!(changed_box(&base.bgrx, &one.bgrx, 16), Some([3, 2, 1, 1]));
        let two = pic(&[(5, 1), (2, 6)]);
        assert_eq!(changed_box(&base.bgrx, &two.bgrx, 16), Some([2, 1, 4, 6]));
        // The unused fourth byte is not a change.
        let mut x = base.bgrx.clone();
        x[3] = 7;
        assert_eq!(changed_box(&base.bgrx, &x, 16), None);
    }

    #[test]
    fn a_small_change_is_sent_as_its_region_and_a_big_one_whole() {
        let base = pic(&[]);
        let (j, region) = picture(&pic(&[(3, 2), (4, 3)]), Some(&base), 60).unwrap();
        assert_eq!(region, Some([3, 2, 2, 2]));
        assert_eq!(&j[..2], &[0xff, 0xd8], "a JPEG of the region");
        let (j, region) = picture(&base, Some(&base), 60).unwrap();
        assert_eq!(
            (j.len(), region),
            (0, Some([0, 0, 0, 0])),
            "nothing changed"
        );
        let (_, region) = picture(&pic(&[(0, 0), (15, 7)]), Some(&base), 60).unwrap();
        assert_eq!(region, None, "the whole frame changed");
        let (_, region) = picture(&pic(&[(1, 1)]), None, 60).unwrap();
        assert_eq!(region, None, "no base: whole");
    }
}
