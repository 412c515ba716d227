//! Screens made smaller by area averaging: each output pixel is the mean
//! of the source pixels it covers, in integers, on the X server's BGRX
//! pixels as they came (four bytes a pixel), so a scaled shot costs one
//! pass over the screen and encodes a quarter of the pixels at half width.

use crate::protocol::area_spans as spans;

/// `bgrx`, `w` x `h`, at `to` (each side clamped to 1 ..= the source's),
/// as BGRX.
pub fn down(bgrx: &[u8], w: u32, h: u32, to: (u32, u32)) -> (Vec<u8>, u32, u32) {
    let (tw, th) = (to.0.clamp(1, w.max(1)), to.1.clamp(1, h.max(1)));
    if (tw, th) == (w, h) {
        return (bgrx.to_vec(), w, h);
    }
    let xs = spans(w, tw);
    let ys = spans(h, th);
    let stride = w as usize * 4;
    let mut out = Vec::with_capacity(tw as usize * th as usize * 4);
    // One row of sums per output row: three channels a pixel.
    let mut sums = vec![0u32; tw as usize * 3];
    for &(y0, y1) in &ys {
        sums.fill(0);
        for row in bgrx[y0 * stride..y1 * stride].chunks_exact(stride) {
            for (s, &(x0, x1)) in sums.chunks_exact_mut(3).zip(&xs) {
                for px in row[x0 * 4..x1 * 4].chunks_exact(4) {
                    s[0] += u32::from(px[0]);
                    s[1] += u32::from(px[1]);
                    s[2] += u32::from(px[2]);
                }
            }
        }
        for (s, &(x0, x1)) in sums.chunks_exact(3).zip(&xs) {
            let n = ((x1 - x0) * (y1 - y0)) as u32;
            out.extend_from_slice(&[
                ((s[0] + n / 2) / n) as u8,
                ((s[1] + n / 2) / n) as u8,
                ((s[2] + n / 2) / n) as u8,
                0,
            ]);
        }
    }
    (out, tw, th)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let mut v = Vec::new();
        for y in 0..h {
            for x in 0..w {
                let [b, g, r] = f(x, y);
                v.extend_from_slice(&[b, g, r, 0]);
            }
        }
        v
    }

    #[test]
    fn scaling_keeps_flat_colours_and_averages_the_rest() {
        let quads = image(200, 100, |x, y| match (x < 100, y < 50) {
            (true, true) => [255, 0, 0],
            (false, true) => [0, 255, 0],
            (false, false) => [0, 0, 255],
            (true, false) => [255, 255, 0],
        });
        let (half, w, h) = down(&quads, 200, 100, (100, 50));
        assert_eq!((w, h, half.len()), (100, 50, 100 * 50 * 4));
        let at = |x: usize, y: usize| half[(y * 100 + x) * 4..][..3].to_vec();
        assert_eq!(at(75, 10), [0, 255, 0]);
        assert_eq!(at(25, 40), [255, 255, 0]);
        let stripes = image(4, 1, |x, _| if x % 2 == 0 { [0; 3] } else { [201; 3] });
        assert_eq!(
            down(&stripes, 4, 1, (2, 1)).0,
            vec![101, 101, 101, 0, 101, 101, 101, 0]
        );
        // An odd ratio covers every source pixel once: the mean of a
        // gradient's thirds.
        let ramp = image(6, 1, |x, _| [x as u8 * 10; 3]);
        assert_eq!(down(&ramp, 6, 1, (4, 1)).0.len(), 16);
        assert_eq!(down(&ramp, 6, 1, (1, 1)).0, vec![25, 25, 25, 0]);
        // Never larger than the source, never empty.
        assert_eq!(down(&ramp, 6, 1, (12, 3)).1, 6);
        assert_eq!(down(&ramp, 6, 1, (0, 0)).1, 1);
    }
}
