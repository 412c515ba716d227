//! Screenshots as the model gets them: the size a screen is shown at
//! ([`fit`]), the daemon's PNG decoded, scaled ([`resize`]: the mean of
//! each output pixel's source box when smaller, the nearest source pixel
//! when larger) and encoded again with the png crate's fast (fdeflate)
//! compressor. A shot already of the size shown is passed on as it came.

pub mod palette;

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

/// The longest side an image result has: the Claude API refuses an image
/// over 2000 px a side.
pub const MAX_SIDE: u32 = 2000;

/// The most bytes of one image in a result: base64 makes it a third more,
/// and a client drops a result over 1 MB (Claude Desktop).
pub const MAX_RESULT_IMAGE_BYTES: usize = 700 * 1024;

/// An image file as a model may be shown it.
#[derive(Debug)]
pub struct Shown {
    pub bytes: Vec<u8>,
    pub mime: &'static str,
    pub width: u32,
    pub height: u32,
}

/// An image file (`mime`: PNG, JPEG, GIF or WebP) within [`MAX_SIDE`] and
/// [`MAX_RESULT_IMAGE_BYTES`]: None when it already is (shown as it is),
/// else scaled down (the mean of each pixel's source box) and encoded
/// again, as JPEG for a photo (a JPEG or WebP file) or a PNG that would be
/// over the bound, smaller again until it fits.
pub fn fit_for_result(bytes: &[u8], mime: &str, dims: Option<(u32, u32)>) -> Result<Option<Shown>> {
    let within = |(w, h): (u32, u32)| w <= MAX_SIDE && h <= MAX_SIDE;
    if bytes.len() <= MAX_RESULT_IMAGE_BYTES && dims.is_some_and(within) {
        return Ok(None);
    }
    let format = match mime {
        "image/png" => image::ImageFormat::Png,
        "image/jpeg" => image::ImageFormat::Jpeg,
        "image/gif" => image::ImageFormat::Gif,
        "image/webp" => image::ImageFormat::WebP,
        _ => {
            return Err(ToolError::Refused(format!(
                "a {mime} image cannot be scaled"
            )));
        }
    };
    let decoded = image::load_from_memory_with_format(bytes, format)
        .map_err(|e| ToolError::Refused(format!("the {mime} image could not be read: {e}")))?
        .into_rgb8();
    let whole = Rgb {
        width: decoded.width(),
        height: decoded.height(),
        pixels: decoded.into_raw(),
    };
    let photo = matches!(format, image::ImageFormat::Jpeg | image::ImageFormat::WebP);
    let (mut w, mut h) = fit(whole.width, whole.height, (MAX_SIDE, MAX_SIDE), None, false);
    loop {
        let img = resize(&whole, w, h);
        let (bytes, mime) = if photo {
            (encode_jpeg(&img)?, "image/jpeg")
        } else {
            match encode(&img)? {
                png if png.len() <= MAX_RESULT_IMAGE_BYTES => (png, "image/png"),
                _ => (encode_jpeg(&img)?, "image/jpeg"),
            }
        };
        if bytes.len() <= MAX_RESULT_IMAGE_BYTES || (w, h) == (1, 1) {
            return Ok(Some(Shown {
                bytes,
                mime,
                width: w,
                height: h,
            }));
        }
        (w, h) = ((w * 3 / 4).max(1), (h * 3 / 4).max(1));
    }
}

/// Encode as JPEG of quality 85.
fn encode_jpeg(img: &Rgb) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let (w, h) = (
        u16::try_from(img.width).unwrap_or(u16::MAX),
        u16::try_from(img.height).unwrap_or(u16::MAX),
    );
    jpeg_encoder::Encoder::new(&mut out, 85)
        .encode(&img.pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| ToolError::Broken(format!("the image could not be encoded: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `w` x `h` picture of noise (no encoder makes it small), as PNG.
    fn noisy_png(w: u32, h: u32) -> Vec<u8> {
        let mut state = 0x2545_f491_u32;
        let pixels = (0..w * h * 3)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        encode(&Rgb {
            width: w,
            height: h,
            pixels,
        })
        .unwrap()
    }

    #[test]
    fn an_image_over_the_bounds_is_scaled_under_them_and_one_within_is_left() {
        let small = noisy_png(300, 200);
        assert!(
            fit_for_result(&small, "image/png", Some((300, 200)))
                .unwrap()
                .is_none()
        );
        // 2600x1950 of noise: 15 MB of pixels, over either bound.
        let big = noisy_png(2600, 1950);
        let shown = fit_for_result(&big, "image/png", Some((2600, 1950)))
            .unwrap()
            .unwrap();
        assert!(
            shown.width <= MAX_SIDE && shown.height <= MAX_SIDE,
            "{shown:?}"
        );
        assert!(
            shown.bytes.len() <= MAX_RESULT_IMAGE_BYTES,
            "{}",
            shown.bytes.len()
        );
        // The shape is kept.
        let ratio = f64::from(shown.width) / f64::from(shown.height);
        assert!((ratio - 4.0 / 3.0).abs() < 0.01, "{shown:?}");
        let back = image::load_from_memory(&shown.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (shown.width, shown.height));
        // A file that is no image of its kind is refused in words.
        let e = fit_for_result(b"not a png", "image/png", None).unwrap_err();
        assert!(e.to_string().contains("could not be read"), "{e}");
    }

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
