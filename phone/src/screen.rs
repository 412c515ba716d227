//! A phone's screen: what `screencap` gives (its raw frame, which costs the
//! phone no PNG encoding), read and bounded here, cut to a region and made
//! the protocol's PNG by the daemon's own fast encoder.

use computerd::protocol::Region;

mod inflate;

/// The largest screen side and pixel count read: past them a frame is a
/// lie of its header, not a phone.
pub const MAX_SIDE: u32 = 16_384;
pub const MAX_PIXELS: u64 = 1 << 25;

/// `screencap`'s pixel formats this reader takes (AOSP's
/// `android_pixel_format_t` values; screencap writes the display's format).
const RGBA_8888: u32 = 1;
const RGBX_8888: u32 = 2;
const BGRA_8888: u32 = 5;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScreenError {
    #[error("the phone's screencap gave {0} bytes, too few for its header")]
    Short(usize),
    #[error(
        "the phone's screencap says {width}x{height}, past the {MAX_SIDE} px side or 2^25 pixels this reads"
    )]
    TooLarge { width: u32, height: u32 },
    #[error(
        "the phone's screencap uses pixel format {0}, which this does not read (RGBA, RGBX or BGRA 8888)"
    )]
    Format(u32),
    #[error("the phone's screencap PNG could not be read: {0}")]
    Png(String),
    #[error(
        "the phone's screencap gave {got} bytes for {width}x{height} pixels; a whole frame is {want} after its header"
    )]
    Length {
        got: usize,
        want: usize,
        width: u32,
        height: u32,
    },
}

/// One frame of the screen, as RGB bytes, row after row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    rgb: Vec<u8>,
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// How a screen's pixels are laid out: 3 or 4 bytes each, red first or
/// (BGRA) blue first.
#[derive(Clone, Copy, Debug)]
struct Layout {
    width: u32,
    height: u32,
    /// Bytes a pixel: 4, or 3 for a PNG without alpha.
    step: usize,
    /// BGRA, not RGBA.
    swap: bool,
}

impl Layout {
    fn checked(width: u32, height: u32, step: usize, swap: bool) -> Result<Layout, ScreenError> {
        if width == 0
            || height == 0
            || width > MAX_SIDE
            || height > MAX_SIDE
            || u64::from(width) * u64::from(height) > MAX_PIXELS
        {
            return Err(ScreenError::TooLarge { width, height });
        }
        Ok(Layout {
            width,
            height,
            step,
            swap,
        })
    }

    fn stride(&self) -> usize {
        self.width as usize * self.step
    }

    /// `pixels`' RGB, pushed onto `rgb`.
    fn push_rgb(&self, pixels: &[u8], rgb: &mut Vec<u8>) {
        match (self.step, self.swap) {
            (4, false) => pixels
                .chunks_exact(4)
                .for_each(|px| rgb.extend_from_slice(&px[..3])),
            (4, true) => pixels
                .chunks_exact(4)
                .for_each(|px| rgb.extend_from_slice(&[px[2], px[1], px[0]])),
            _ => rgb.extend_from_slice(pixels),
        }
    }
}

/// A source of a screen's rows, top to bottom, each `stride` bytes.
trait Rows {
    fn next(&mut self) -> Result<&[u8], ScreenError>;
    /// The next row and how many rows in a row (at most `most`, at least
    /// one) are that same row: a source that knows its repeats says so.
    /// The row's identity (the same for the rows that repeat it), where the
    /// source knows it.
    fn run(&mut self, most: usize) -> Result<(&[u8], usize, Option<u32>), ScreenError> {
        let _ = most;
        self.next().map(|row| (row, 1, None))
    }
}

/// What is made of a screen: all of it, a region of it (already checked
/// inside the screen), or all of it scaled to a size.
#[derive(Clone, Copy, Debug)]
enum Want {
    Whole,
    Crop(Region),
    Scaled(u32, u32),
}

/// Make `want` of the screen, reading its rows once, top to bottom, and
/// none past the last one it needs: a crop's rows alone are made RGB, a
/// scale adds each row into its band's sums as it comes, so no whole
/// frame is ever held besides what the source holds.
fn render(l: Layout, rows: &mut impl Rows, want: Want) -> Result<Frame, ScreenError> {
    let region = match want {
        Want::Scaled(w, h) => {
            let (w, h) = (w.clamp(1, l.width), h.clamp(1, l.height));
            if (w, h) != (l.width, l.height) {
                let rgb = match (l.step, l.swap) {
                    (4, false) => boxes::<4, 0, 2>(l, rows, w, h)?,
                    (4, true) => boxes::<4, 2, 0>(l, rows, w, h)?,
                    _ => boxes::<3, 0, 2>(l, rows, w, h)?,
                };
                return Ok(Frame {
                    width: w,
                    height: h,
                    rgb,
                });
            }
            None
        }
        Want::Crop(r) => Some(r),
        Want::Whole => None,
    };
    let r = region.unwrap_or(Region {
        x: 0,
        y: 0,
        width: l.width,
        height: l.height,
    });
    let (x0, x1) = (r.x as usize * l.step, (r.x + r.width) as usize * l.step);
    let mut rgb = Vec::with_capacity(r.width as usize * r.height as usize * 3);
    let mut skip = r.y as usize;
    while skip > 0 {
        skip -= rows.run(skip)?.1;
    }
    for _ in 0..r.height {
        l.push_rgb(&rows.next()?[x0..x1], &mut rgb);
    }
    Ok(Frame {
        width: r.width,
        height: r.height,
        rgb,
    })
}

/// Each output pixel's box mean, for pixels of `STEP` bytes with red at
/// `R` and blue at `B`, a band of rows at a time: the band's rows added up
/// byte by byte as they come (a loop the compiler makes SIMD, where most of
/// the work is), then each output column's box of those sums (the boxes
/// are contiguous and cover the screen).
fn boxes<const STEP: usize, const R: usize, const B: usize>(
    l: Layout,
    rows: &mut impl Rows,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, ScreenError> {
    let xs = spans(l.width, width);
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    let mut column = vec![0u32; l.stride()];
    // Each output column's divisor, by the band's height (a band is one
    // of two heights, the ratio's floor or ceiling): made once, not a
    // division per pixel.
    let mut divisors: Vec<(usize, Vec<Divisor>)> = Vec::new();
    let mut last_pure: Option<u32> = None;
    for (y0, y1) in spans(l.height, height) {
        let band = y1 - y0;
        let out_row = width as usize * 3;
        // A run of rows that repeat one row is added once, times its length;
        // the band's first run sets the sums. A band that is one run of the
        // row the band before was is that band's pixels again, whatever the
        // two bands' heights: a box of `k` copies of a row's `w` pixels
        // rounds `(k s + k w / 2) / (k w)`, which is `(s + w / 2) / w` for
        // every `k` (PNG's 2400 rows to 1280 make bands of 1 and 2 rows).
        let (row, n, id) = rows.run(band)?;
        let pure = id.filter(|_| n == band);
        if pure.is_some() && pure == last_pure {
            rgb.extend_from_within(rgb.len() - out_row..);
            continue;
        }
        last_pure = pure;
        let k = n as u32;
        column
            .iter_mut()
            .zip(row)
            .for_each(|(c, &v)| *c = u32::from(v) * k);
        let mut left = band - n;
        while left > 0 {
            let (row, n, _) = rows.run(left)?;
            let k = n as u32;
            if n == 1 {
                column
                    .iter_mut()
                    .zip(row)
                    .for_each(|(c, &v)| *c += u32::from(v));
            } else {
                column
                    .iter_mut()
                    .zip(row)
                    .for_each(|(c, &v)| *c += u32::from(v) * k);
            }
            left -= n;
        }
        let at = match divisors.iter().position(|(h, _)| *h == band) {
            Some(at) => at,
            None => {
                let each = xs.iter().map(|&(x0, x1)| Divisor::new((x1 - x0) * band));
                divisors.push((band, each.collect()));
                divisors.len() - 1
            }
        };
        for (&(x0, x1), d) in xs.iter().zip(&divisors[at].1) {
            let mut sum = [0u64; 3];
            for p in column[x0 * STEP..x1 * STEP].chunks_exact(STEP) {
                sum[0] += u64::from(p[R]);
                sum[1] += u64::from(p[1]);
                sum[2] += u64::from(p[B]);
            }
            rgb.extend(sum.map(|c| d.mean(c)));
        }
    }
    Ok(rgb)
}

/// A box's pixel count `n`, and the rounded mean of `n` bytes' sum by a
/// multiply: with `m = ceil(2^32 / n)`, `(s * m) >> 32` is `s / n` exactly
/// for every `s < 2^32 / n`, so for every sum of bytes plus `n / 2` while
/// `n <= 4096` (`256 n < 2^32 / n`); a larger box divides.
#[derive(Clone, Copy, Debug)]
struct Divisor {
    n: u64,
    m: u64,
}

impl Divisor {
    const EXACT_UP_TO: u64 = 4096;

    fn new(n: usize) -> Divisor {
        let n = n.max(1) as u64;
        let m = if n <= Self::EXACT_UP_TO {
            (1u64 << 32).div_ceil(n)
        } else {
            0
        };
        Divisor { n, m }
    }

    /// `(sum + n / 2) / n`, for a sum of `n` bytes.
    fn mean(&self, sum: u64) -> u8 {
        let s = sum + self.n / 2;
        if self.m == 0 {
            (s / self.n) as u8
        } else {
            ((s * self.m) >> 32) as u8
        }
    }
}

/// `screencap`'s raw output, its header read and checked: 4 bytes a pixel.
pub struct Raw<'a> {
    layout: Layout,
    pixels: &'a [u8],
}

struct Slices<'a> {
    pixels: &'a [u8],
    stride: usize,
}

impl Rows for Slices<'_> {
    fn next(&mut self) -> Result<&[u8], ScreenError> {
        let (row, rest) = self.pixels.split_at(self.stride.min(self.pixels.len()));
        self.pixels = rest;
        Ok(row)
    }
}

impl<'a> Raw<'a> {
    /// Read the header: width, height and format (and, from Android 9 on,
    /// a colour space), then 4 bytes a pixel. The header's length is told
    /// from the total, so both versions read.
    pub fn read(bytes: &'a [u8]) -> Result<Raw<'a>, ScreenError> {
        if bytes.len() < 12 {
            return Err(ScreenError::Short(bytes.len()));
        }
        let (width, height, format) = (word(bytes, 0), word(bytes, 4), word(bytes, 8));
        let mut layout = Layout::checked(width, height, 4, false)?;
        layout.swap = match format {
            RGBA_8888 | RGBX_8888 => false,
            BGRA_8888 => true,
            other => return Err(ScreenError::Format(other)),
        };
        let pixels = width as usize * height as usize * 4;
        match bytes.len().checked_sub(pixels) {
            Some(h @ (12 | 16)) => Ok(Raw {
                layout,
                pixels: &bytes[h..],
            }),
            _ => Err(ScreenError::Length {
                got: bytes.len(),
                want: pixels,
                width,
                height,
            }),
        }
    }

    pub fn width(&self) -> u32 {
        self.layout.width
    }

    pub fn height(&self) -> u32 {
        self.layout.height
    }

    fn render(&self, want: Want) -> Result<Frame, ScreenError> {
        let mut rows = Slices {
            pixels: self.pixels,
            stride: self.layout.stride(),
        };
        render(self.layout, &mut rows, want)
    }

    /// Every pixel, as RGB.
    pub fn frame(&self) -> Result<Frame, ScreenError> {
        self.render(Want::Whole)
    }

    /// The pixels inside `region` (already checked inside the screen), as
    /// RGB: only its rows and columns are read.
    pub fn crop(&self, region: Region) -> Result<Frame, ScreenError> {
        self.render(Want::Crop(region))
    }

    /// The screen at `width` x `height` (at most its own size), each pixel
    /// the mean of the screen's pixels it covers.
    pub fn scaled(&self, width: u32, height: u32) -> Result<Frame, ScreenError> {
        self.render(Want::Scaled(width, height))
    }
}

/// `screencap -p`'s PNG, its header read and checked against the same
/// bounds as a raw frame, decoded a row at a time as a frame is made of it
/// (see [`render`]): the whole decoded screen (10 MB for 1080x2400) is never
/// built, and a crop stops inflating after its last row.
pub struct Png<'a> {
    layout: Layout,
    reader: png::Reader<std::io::Cursor<&'a [u8]>>,
}

struct PngRows<'r, 'a>(&'r mut png::Reader<std::io::Cursor<&'a [u8]>>);

impl Rows for PngRows<'_, '_> {
    fn next(&mut self) -> Result<&[u8], ScreenError> {
        match self.0.next_row() {
            Ok(Some(row)) => Ok(row.data()),
            Ok(None) => Err(ScreenError::Png("it ended before its last row".into())),
            Err(e) => Err(ScreenError::Png(e.to_string())),
        }
    }
}

impl<'a> Png<'a> {
    /// Read the PNG's header: 8-bit (or 16-bit, stripped) RGB or RGBA,
    /// not interlaced (screencap never interlaces).
    pub fn read(bytes: &'a [u8]) -> Result<Png<'a>, ScreenError> {
        let bad = |e: String| ScreenError::Png(e);
        let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
        d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let reader = d.read_info().map_err(|e| bad(e.to_string()))?;
        let (width, height) = (reader.info().width, reader.info().height);
        if reader.info().interlaced {
            return Err(bad(format!(
                "it is interlaced ({width}x{height}), which screencap never writes"
            )));
        }
        let step = match reader.output_color_type().0 {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => return Err(bad(format!("it is {other:?}, not RGB or RGBA"))),
        };
        let layout = Layout::checked(width, height, step, false)?;
        Ok(Png { layout, reader })
    }

    pub fn width(&self) -> u32 {
        self.layout.width
    }

    pub fn height(&self) -> u32 {
        self.layout.height
    }

    fn render(mut self, want: Want) -> Result<Frame, ScreenError> {
        render(self.layout, &mut PngRows(&mut self.reader), want)
    }

    /// Every pixel, as RGB.
    pub fn frame(self) -> Result<Frame, ScreenError> {
        self.render(Want::Whole)
    }

    /// The pixels inside `region` (already checked inside the screen).
    pub fn crop(self, region: Region) -> Result<Frame, ScreenError> {
        self.render(Want::Crop(region))
    }

    /// The screen at `width` x `height` (at most its own size), each pixel
    /// the mean of the screen's pixels it covers.
    pub fn scaled(self, width: u32, height: u32) -> Result<Frame, ScreenError> {
        self.render(Want::Scaled(width, height))
    }
}

/// `screencap -p`'s PNG as a shot reads it: 8-bit RGB or RGBA inflated
/// into a buffer the caller keeps for the next shot, the rows that repeat
/// the row above counted rather than unfiltered (see `inflate`); any
/// other PNG through the png crate ([`Png`]). Either way the same frame.
pub struct Screencap<'a>(Source<'a>);

enum Source<'a> {
    Inflated(inflate::Unfiltered<'a>),
    /// Boxed: the png crate's reader is large, and the rarer path.
    Crate(Box<Png<'a>>),
}

impl<'a> Screencap<'a> {
    /// Read `bytes`' header and (for 8-bit RGB or RGBA) inflate it into
    /// `buf`, checked against the same bounds as [`Png::read`].
    pub fn read(bytes: &'a [u8], buf: &'a mut Vec<u8>) -> Result<Screencap<'a>, ScreenError> {
        Self::read_rows(bytes, buf, None)
    }

    /// [`Screencap::read`] of the first `rows` rows only (a region's last
    /// row and those above it), or all of them.
    pub fn read_rows(
        bytes: &'a [u8],
        buf: &'a mut Vec<u8>,
        rows: Option<u32>,
    ) -> Result<Screencap<'a>, ScreenError> {
        Ok(Screencap(match inflate::parts(bytes) {
            Some(parts) => Source::Inflated(inflate::Unfiltered::read(&parts, buf, rows)?),
            None => Source::Crate(Box::new(Png::read(bytes)?)),
        }))
    }

    fn layout(&self) -> Layout {
        match &self.0 {
            Source::Inflated(u) => u.layout,
            Source::Crate(p) => p.layout,
        }
    }

    pub fn width(&self) -> u32 {
        self.layout().width
    }

    pub fn height(&self) -> u32 {
        self.layout().height
    }

    fn render(self, want: Want) -> Result<Frame, ScreenError> {
        match self.0 {
            Source::Inflated(mut u) => render(u.layout, &mut u, want),
            Source::Crate(p) => p.render(want),
        }
    }

    /// Every pixel, as RGB.
    pub fn frame(self) -> Result<Frame, ScreenError> {
        self.render(Want::Whole)
    }

    /// The pixels inside `region` (already checked inside the screen).
    pub fn crop(self, region: Region) -> Result<Frame, ScreenError> {
        self.render(Want::Crop(region))
    }

    /// The screen at `width` x `height` (at most its own size), each pixel
    /// the mean of the screen's pixels it covers.
    pub fn scaled(self, width: u32, height: u32) -> Result<Frame, ScreenError> {
        self.render(Want::Scaled(width, height))
    }
}

/// The source pixels `[start, end)` each of `out` pixels covers along a
/// side of `src` (out <= src: none is empty).
fn spans(src: u32, out: u32) -> Vec<(usize, usize)> {
    let at = |o: u32| (u64::from(o) * u64::from(src) / u64::from(out)) as usize;
    (0..out)
        .map(|o| (at(o), at(o + 1).max(at(o) + 1)))
        .collect()
}

impl Frame {
    /// Read `screencap`'s raw output whole (see [`Raw::read`]).
    pub fn from_raw(bytes: &[u8]) -> Result<Frame, ScreenError> {
        Raw::read(bytes)?.frame()
    }

    /// The frame's pixels inside `region` (already checked inside the screen).
    pub fn crop(&self, region: Region) -> Frame {
        let stride = self.width as usize * 3;
        let mut rgb = Vec::with_capacity(region.width as usize * region.height as usize * 3);
        for y in region.y..region.y + region.height {
            let start = y as usize * stride + region.x as usize * 3;
            rgb.extend_from_slice(&self.rgb[start..start + region.width as usize * 3]);
        }
        Frame {
            width: region.width,
            height: region.height,
            rgb,
        }
    }

    /// The frame as a PNG (8-bit RGB, non-interlaced), as computerd makes it.
    pub fn png(&self) -> Result<Vec<u8>, computerd::protocol::RpcError> {
        computerd::daemon::x11::png::encode(&self.rgb, self.width, self.height)
    }

    /// The colour at a point (for tests and checks).
    pub fn at(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        Some([self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]])
    }

    /// Whether two frames show the same pixels (a watch sends a frame only
    /// when they differ).
    pub fn same_as(&self, other: &Frame) -> bool {
        self == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(width: u32, height: u32, format: u32, colour_space: bool, px: [u8; 4]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [width, height, format] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        if colour_space {
            b.extend_from_slice(&1u32.to_le_bytes());
        }
        for _ in 0..width * height {
            b.extend_from_slice(&px);
        }
        b
    }

    #[test]
    fn both_header_lengths_and_both_byte_orders_read() {
        let old = Frame::from_raw(&raw(3, 2, RGBA_8888, false, [10, 20, 30, 255])).unwrap();
        assert_eq!(
            (old.width, old.height, old.at(2, 1)),
            (3, 2, Some([10, 20, 30]))
        );
        let new = Frame::from_raw(&raw(3, 2, RGBX_8888, true, [10, 20, 30, 0])).unwrap();
        assert_eq!(new, old);
        let bgra = Frame::from_raw(&raw(3, 2, BGRA_8888, true, [30, 20, 10, 255])).unwrap();
        assert_eq!(bgra, old);
    }

    #[test]
    fn a_lying_header_is_refused_before_anything_is_allocated() {
        let mut b = raw(1, 1, RGBA_8888, false, [0; 4]);
        b[0..4].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(matches!(
            Frame::from_raw(&b),
            Err(ScreenError::TooLarge { .. })
        ));
        let cut = raw(4, 4, RGBA_8888, true, [0; 4]);
        let e = Frame::from_raw(&cut[..cut.len() - 5]).unwrap_err();
        assert!(e.to_string().contains("4x4"), "{e}");
        assert_eq!(Frame::from_raw(&[0; 8]), Err(ScreenError::Short(8)));
        let e = Frame::from_raw(&raw(1, 1, 4, false, [0; 4])).unwrap_err();
        assert_eq!(e, ScreenError::Format(4));
    }

    #[test]
    fn a_region_is_cut_and_the_png_decodes_to_its_size() {
        let mut b = raw(4, 4, RGBA_8888, false, [0, 0, 0, 255]);
        // One red pixel at (2, 1).
        let at = 12 + (4 + 2) * 4;
        b[at..at + 4].copy_from_slice(&[255, 0, 0, 255]);
        let f = Frame::from_raw(&b).unwrap();
        let region = Region {
            x: 1,
            y: 1,
            width: 2,
            height: 3,
        };
        let part = f.crop(region);
        // Cut from the raw pixels, not the whole frame made RGB first.
        assert_eq!(Raw::read(&b).unwrap().crop(region).unwrap(), part);
        assert_eq!((part.width, part.height), (2, 3));
        assert_eq!(part.at(1, 0), Some([255, 0, 0]));
        assert_eq!(part.at(0, 0), Some([0, 0, 0]));
        let png = part.png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 2);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 3);
    }

    #[test]
    fn a_scaled_frame_is_each_boxs_mean_in_rgb_whatever_the_byte_order() {
        // 4x2, BGRA: the left half black, the right half pure red, and
        // the bottom-right pixel white.
        let mut b = raw(4, 2, BGRA_8888, true, [0, 0, 0, 255]);
        for (x, y, px) in [
            (2, 0, [0, 0, 255, 255]),
            (3, 0, [0, 0, 255, 255]),
            (2, 1, [0, 0, 255, 255]),
            (3, 1, [255, 255, 255, 255]),
        ] {
            let at = 16 + (y * 4 + x) * 4;
            b[at..at + 4].copy_from_slice(&px);
        }
        let r = Raw::read(&b).unwrap();
        let half = r.scaled(2, 1).unwrap();
        assert_eq!((half.width, half.height), (2, 1));
        assert_eq!(half.at(0, 0), Some([0, 0, 0]));
        // (255 * 3 + 255) / 4 red, 255 / 4 green and blue, rounded.
        assert_eq!(half.at(1, 0), Some([255, 64, 64]));
        // Its own size, or larger, is the frame as it is.
        assert_eq!(r.scaled(4, 2), r.frame());
        assert_eq!(r.scaled(9, 9), r.frame());
        // Uneven boxes still cover every pixel once: 4 columns as 1, 1
        // and 2, the last the red and the white.
        let third = r.scaled(3, 2).unwrap();
        assert_eq!(third.at(1, 1), Some([0, 0, 0]));
        assert_eq!(third.at(2, 1), Some([255, 128, 128]));
    }

    #[test]
    fn a_box_mean_by_multiply_is_the_mean_by_division() {
        for n in (1..=5000u64).chain([65_536, 1 << 25]) {
            let d = Divisor::new(n as usize);
            for sum in [0, 1, n / 2, n - 1, n, 127 * n + n / 2, 200 * n + 7, 255 * n] {
                let sum = sum.min(255 * n);
                assert_eq!(u64::from(d.mean(sum)), (sum + n / 2) / n, "{sum} / {n}");
            }
        }
    }

    #[test]
    fn screencaps_png_decodes_with_or_without_alpha_and_scales_like_raw() {
        let encode = |colour: png::ColorType, px: &[u8]| {
            let mut out = Vec::new();
            let mut e = png::Encoder::new(&mut out, 2, 2);
            e.set_color(colour);
            e.set_depth(png::BitDepth::Eight);
            let mut w = e.write_header().unwrap();
            w.write_image_data(px).unwrap();
            w.finish().unwrap();
            out
        };
        let rgba = encode(
            png::ColorType::Rgba,
            &[255, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255],
        );
        let rgb = encode(png::ColorType::Rgb, &[255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        for bytes in [rgba, rgb] {
            let f = Png::read(&bytes).unwrap().frame().unwrap();
            assert_eq!((f.width, f.height, f.at(0, 0)), (2, 2, Some([255, 0, 0])));
            let one = Png::read(&bytes).unwrap().scaled(1, 1).unwrap();
            assert_eq!(one.at(0, 0), Some([64, 0, 0]));
            let cut = Region {
                x: 0,
                y: 0,
                width: 1,
                height: 1,
            };
            let cut = Png::read(&bytes).unwrap().crop(cut).unwrap();
            assert_eq!(
                (cut.width, cut.height, cut.at(0, 0)),
                (1, 1, Some([255, 0, 0]))
            );
        }
        let e = Png::read(b"not a png").err().unwrap();
        assert!(e.to_string().contains("PNG could not be read"), "{e}");
    }
}
