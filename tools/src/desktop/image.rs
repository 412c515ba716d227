//! Screenshots as the model gets them: the size a screen is shown at
//! ([`fit`]), the daemon's PNG decoded, scaled ([`resize`]: the mean of
//! each output pixel's source box when smaller, the nearest source pixel
//! when larger) and encoded again with the png crate's fast (fdeflate)
//! compressor. A shot already of the size shown is passed on as it came.

use computerd::protocol::{Fit, area_spans as spans};

use crate::error::{Result, ToolError};

/// About what current models see without a downscale of their own.
pub const MAX_PIXELS: u64 = 1_150_000;

/// 8-bit RGB pixels, row after row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// The size a `width` x `height` picture is shown at: within `max` (its
/// long side within max's long side, its short within the short), within
/// [`MAX_PIXELS`] or max's own pixels if more, and at most `max_width`
/// wide. Never larger than the picture unless `grow` (a zoom fills the
/// budget), never smaller than 1x1.
pub fn fit(
    width: u32,
    height: u32,
    max: (u32, u32),
    max_width: Option<u32>,
    grow: bool,
) -> (u32, u32) {
    budget(max, max_width).size(width, height, grow)
}

/// The budget [`fit`] keeps to, as the protocol carries it to a client
/// that scales before it encodes.
pub fn budget(max: (u32, u32), max_width: Option<u32>) -> Fit {
    Fit {
        long: max.0.max(max.1),
        short: max.0.min(max.1),
        pixels: MAX_PIXELS.max(u64::from(max.0) * u64::from(max.1)),
        max_width,
    }
}

/// Decode a PNG of 8-bit RGB (what computerd sends).
pub fn decode(png_bytes: &[u8]) -> Result<Rgb> {
    let broken =
        |e: String| ToolError::Broken(format!("the computer's screenshot could not be read: {e}"));
    let d = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut r = d.read_info().map_err(|e| broken(e.to_string()))?;
    let info = r.info();
    if info.bit_depth != png::BitDepth::Eight || info.color_type != png::ColorType::Rgb {
        return Err(broken(format!(
            "it is {:?} {:?}, not 8-bit RGB",
            info.bit_depth, info.color_type
        )));
    }
    let (width, height) = (info.width, info.height);
    let size = r
        .output_buffer_size()
        .ok_or_else(|| broken("it is too large".into()))?;
    let mut pixels = vec![0; size];
    let frame = r
        .next_frame(&mut pixels)
        .map_err(|e| broken(e.to_string()))?;
    pixels.truncate(frame.buffer_size());
    Ok(Rgb {
        width,
        height,
        pixels,
    })
}

/// Encode as PNG, fast.
pub fn encode(img: &Rgb) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(img.pixels.len() / 8);
    let failed = |e: png::EncodingError| {
        ToolError::Broken(format!("the screenshot could not be encoded: {e}"))
    };
    let mut e = png::Encoder::new(&mut out, img.width, img.height);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    e.set_compression(png::Compression::Fast);
    let mut w = e.write_header().map_err(failed)?;
    w.write_image_data(&img.pixels).map_err(failed)?;
    w.finish().map_err(failed)?;
    Ok(out)
}

/// `img` at `width` x `height`.
pub fn resize(img: &Rgb, width: u32, height: u32) -> Rgb {
    if (width, height) == (img.width, img.height) {
        return img.clone();
    }
    let xs = spans(img.width, width);
    let ys = spans(img.height, height);
    let stride = img.width as usize * 3;
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    let mut sums = vec![0u32; width as usize * 3];
    for &(y0, y1) in &ys {
        sums.iter_mut().for_each(|s| *s = 0);
        for y in y0..y1 {
            let row = &img.pixels[y * stride..(y + 1) * stride];
            for (o, &(x0, x1)) in xs.iter().enumerate() {
                let (mut r, mut g, mut b) = (0u32, 0u32, 0u32);
                for p in row[x0 * 3..x1 * 3].chunks_exact(3) {
                    r += u32::from(p[0]);
                    g += u32::from(p[1]);
                    b += u32::from(p[2]);
                }
                sums[o * 3] += r;
                sums[o * 3 + 1] += g;
                sums[o * 3 + 2] += b;
            }
        }
        for (o, &(x0, x1)) in xs.iter().enumerate() {
            let n = ((x1 - x0) * (y1 - y0)) as u32;
            for c in 0..3 {
                pixels.push(((sums[o * 3 + c] + n / 2) / n) as u8);
            }
        }
    }
    Rgb {
        width,
        height,
        pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_is_shown_within_the_budget_and_never_larger() {
        let d = (1280, 800);
        assert_eq!(fit(1280, 800, d, None, false), (1280, 800));
        assert_eq!(fit(2560, 1600, d, None, false), (1280, 800));
        assert_eq!(fit(1280, 800, d, Some(640), false), (640, 400));
        assert_eq!(fit(1920, 1080, d, None, false), (1280, 720));
        assert_eq!(fit(800, 1280, d, None, false), (800, 1280));
        assert_eq!(fit(640, 480, d, None, false), (640, 480));
        // --screenshot-max 1920x1080 shows a full HD screen whole.
        assert_eq!(fit(1920, 1080, (1920, 1080), None, false), (1920, 1080));
        // A square screen: 1.15 megapixels at most.
        let (w, h) = fit(2000, 2000, (4000, 4000), None, false);
        assert!(u64::from(w) * u64::from(h) <= 16_000_000);
        let (w, h) = fit(2000, 2000, d, None, false);
        assert_eq!((w, h), (800, 800));
        // A zoom grows to the budget.
        assert_eq!(fit(100, 100, d, None, true), (800, 800));
    }

    fn solid(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Rgb {
        let mut pixels = Vec::new();
        for y in 0..h {
            for x in 0..w {
                pixels.extend_from_slice(&f(x, y));
            }
        }
        Rgb {
            width: w,
            height: h,
            pixels,
        }
    }

    #[test]
    fn scaling_keeps_flat_colours_and_averages_the_rest() {
        let quads = solid(200, 200, |x, y| match (x < 100, y < 100) {
            (true, true) => [255, 0, 0],
            (false, true) => [0, 255, 0],
            (false, false) => [0, 0, 255],
            (true, false) => [255, 255, 0],
        });
        let half = resize(&quads, 100, 100);
        let at = |img: &Rgb, x: u32, y: u32| {
            let i = ((y * img.width + x) * 3) as usize;
            [img.pixels[i], img.pixels[i + 1], img.pixels[i + 2]]
        };
        assert_eq!(at(&half, 75, 25), [0, 255, 0]);
        assert_eq!(at(&half, 25, 75), [255, 255, 0]);
        let stripes = solid(4, 1, |x, _| if x % 2 == 0 { [0; 3] } else { [200; 3] });
        assert_eq!(resize(&stripes, 2, 1).pixels, vec![100; 6]);
        let grown = resize(&solid(2, 2, |x, _| [x as u8 * 100; 3]), 4, 4);
        assert_eq!(at(&grown, 3, 3), [100; 3]);
        assert_eq!(at(&grown, 0, 0), [0; 3]);
        // Round trip through PNG.
        let png = encode(&half).unwrap();
        assert_eq!(decode(&png).unwrap(), half);
    }
}
