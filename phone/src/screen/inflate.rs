//! `screencap -p`'s PNG (8-bit RGB or RGBA, not interlaced) inflated a few
//! rows at a time into a small window, its rows unfiltered into a buffer a
//! client reuses, except the rows that repeat the row above (filter Up,
//! every byte zero: most of a phone's flat screen): those are neither
//! unfiltered nor kept, only counted, so a scale adds a run of them in one
//! pass ([`Rows::run`]). Any other PNG is
//! read by the png crate instead ([`super::Png`]).

use super::{Layout, Rows, ScreenError};

/// A PNG's header and image data, when this reader takes it.
pub(super) struct Parts {
    pub layout: Layout,
    pub idat: Vec<u8>,
}

fn be(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The PNG's header and its IDAT chunks joined, when it is 8-bit RGB or
/// RGBA, not interlaced; `None` for any other PNG (or a broken one: the png
/// crate then says what is wrong with it).
pub(super) fn parts(bytes: &[u8]) -> Option<Parts> {
    if bytes.len() < 8 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" {
        return None;
    }
    let mut at = 8;
    let mut header = None;
    let mut idat = Vec::new();
    while at + 12 <= bytes.len() {
        let len = be(bytes, at) as usize;
        let kind = &bytes[at + 4..at + 8];
        // A chunk cut short by the end gives what it has (its inflating
        // then says so).
        let data = &bytes[at + 8..(at + 8).saturating_add(len).min(bytes.len())];
        match kind {
            b"IHDR" if len == 13 => header = Some(data),
            b"IDAT" => idat.extend_from_slice(data),
            // A palette, transparency or an unknown critical chunk: the png
            // crate's reading applies them.
            b"PLTE" | b"tRNS" => return None,
            b"IEND" => break,
            k if k[0].is_ascii_uppercase() && k != b"IHDR" => return None,
            _ => {}
        }
        at += 12 + len;
    }
    let h = header?;
    let (width, height) = (be(h, 0), be(h, 4));
    let step = match (h[8], h[9], h[10], h[11], h[12]) {
        (8, 2, 0, 0, 0) => 3,
        (8, 6, 0, 0, 0) => 4,
        _ => return None,
    };
    let layout = Layout::checked(width, height, step, false).ok()?;
    Some(Parts { layout, idat })
}

/// A PNG's rows, unfiltered into `buf`, the rows that repeat the row above
/// left out; `source[y]` is the kept row that row `y` shows.
pub(super) struct Unfiltered<'b> {
    pub layout: Layout,
    buf: &'b [u8],
    source: Vec<u32>,
    next: usize,
}

fn bad(words: impl std::fmt::Display) -> ScreenError {
    ScreenError::Png(words.to_string())
}

/// Whether every byte is zero (a loop the compiler makes SIMD).
fn all_zero(bytes: &[u8]) -> bool {
    bytes
        .chunks(64)
        .all(|c| c.iter().fold(0u8, |a, &b| a | b) == 0)
}

/// PNG's Paeth predictor: of left `a`, above `b` and above-left `c`, the
/// one nearest `a + b - c` (whose distances to them are |b - c|, |a - c|
/// and |a + b - 2c|), ties to `a`, then `b`.
fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let (a16, b16, c16) = (i16::from(a), i16::from(b), i16::from(c));
    let to_a = (b16 - c16).abs();
    let to_b = (a16 - c16).abs();
    let to_c = (a16 + b16 - 2 * c16).abs();
    match (to_a <= to_b && to_a <= to_c, to_b <= to_c) {
        (true, _) => a,
        (false, true) => b,
        (false, false) => c,
    }
}

/// Undo one row's filter (PNG's five) in place, `prev` the row above's
/// bytes (zeros above the first), `bpp` bytes a pixel.
fn unfilter(kind: u8, row: &mut [u8], prev: &[u8], bpp: usize) -> Result<(), ScreenError> {
    let n = row.len();
    match kind {
        0 => {}
        1 => {
            for i in bpp..n {
                row[i] = row[i].wrapping_add(row[i - bpp]);
            }
        }
        2 => row
            .iter_mut()
            .zip(prev)
            .for_each(|(x, b)| *x = x.wrapping_add(*b)),
        3 => {
            for i in 0..bpp.min(n) {
                row[i] = row[i].wrapping_add(prev[i] / 2);
            }
            for i in bpp..n {
                let mean = (u16::from(row[i - bpp]) + u16::from(prev[i])) / 2;
                row[i] = row[i].wrapping_add(mean as u8);
            }
        }
        4 => {
            for i in 0..bpp.min(n) {
                row[i] = row[i].wrapping_add(prev[i]);
            }
            for i in bpp..n {
                row[i] = row[i].wrapping_add(paeth(row[i - bpp], prev[i], prev[i - bpp]));
            }
        }
        other => return Err(bad(format!("a row has filter {other}, which PNG has not"))),
    }
    Ok(())
}

/// Deflate's window: how far back its copies reach.
const WINDOW: usize = 32 * 1024;

/// Image data inflated a few rows at a time into a small buffer (it stays
/// in the CPU's cache, where a whole 1080x2400 screen's 10 MB would not).
struct Window<'a> {
    z: fdeflate::Decompressor,
    idat: &'a [u8],
    win: Vec<u8>,
    /// Inflated bytes not yet read as rows: win[start..end].
    start: usize,
    end: usize,
    /// Image data bytes read, and bytes made, so far.
    taken: usize,
    made: usize,
    line: usize,
}

impl<'a> Window<'a> {
    fn new(idat: &'a [u8], line: usize) -> Window<'a> {
        Window {
            z: fdeflate::Decompressor::new(),
            idat,
            win: vec![0u8; WINDOW + 2 * line + 64 * 1024],
            start: 0,
            end: 0,
            taken: 0,
            made: 0,
            line,
        }
    }

    /// Inflate until `need` bytes wait to be read: false when the data
    /// ends first.
    fn fill(&mut self, need: usize) -> Result<bool, ScreenError> {
        while self.end - self.start < need {
            if self.win.len() - self.end < self.line {
                // Keep what deflate may copy from, and what is not read.
                let keep = self.start.min(self.end.saturating_sub(WINDOW));
                self.win.copy_within(keep..self.end, 0);
                self.start -= keep;
                self.end -= keep;
            }
            let (used, out) = self
                .z
                .read(&self.idat[self.taken..], &mut self.win, self.end, true)
                .map_err(|e| bad(format!("its image data does not inflate ({e:?})")))?;
            self.taken += used;
            self.made += out;
            self.end += out;
            if used == 0 && out == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The next row: its filter and its bytes (call [`Window::fill`] first).
    fn row(&mut self) -> (u8, &[u8]) {
        let at = self.start;
        self.start += self.line;
        (self.win[at], &self.win[at + 1..at + self.line])
    }
}

impl<'b> Unfiltered<'b> {
    /// Inflate `parts`' data (see [`Window`]) and unfilter its first
    /// `rows` rows (a region needs no more), or all of them, into `buf`
    /// (its bytes reused): only the rows that are not a repeat of the row
    /// above are kept.
    pub fn read(
        parts: &Parts,
        buf: &'b mut Vec<u8>,
        rows: Option<u32>,
    ) -> Result<Unfiltered<'b>, ScreenError> {
        let l = parts.layout;
        let (stride, line) = (l.stride(), l.stride() + 1);
        let height = rows.map_or(l.height, |r| r.clamp(1, l.height));
        let want = line * height as usize;
        let size = format!("{}x{} pixels", l.width, l.height);
        let mut w = Window::new(&parts.idat, line);
        buf.clear();
        let zero = vec![0u8; stride];
        let mut source = Vec::with_capacity(height as usize);
        let mut kept = 0u32;
        for _ in 0..height {
            if !w.fill(line)? {
                return Err(bad(format!(
                    "its image data inflates to {} bytes, short of the {want} of {size}",
                    w.made
                )));
            }
            let (kind, row) = w.row();
            if kept > 0 && kind == 2 && all_zero(row) {
                source.push(kept - 1);
                continue;
            }
            buf.extend_from_slice(row);
            let at = buf.len() - stride;
            let (above, row) = buf.split_at_mut(at);
            let prev = match kept {
                0 => &zero[..],
                _ => &above[at - stride..],
            };
            unfilter(kind, row, prev, l.step)?;
            source.push(kept);
            kept += 1;
        }
        if height == l.height && (w.fill(1)? || !w.z.is_done()) {
            return Err(bad(format!(
                "its image data holds more than the {want} bytes of {size}"
            )));
        }
        Ok(Unfiltered {
            layout: l,
            buf,
            source,
            next: 0,
        })
    }

    fn row(&self, y: usize) -> &'b [u8] {
        let stride = self.layout.stride();
        let s = self.source[y] as usize;
        &self.buf[s * stride..(s + 1) * stride]
    }
}

impl Rows for Unfiltered<'_> {
    fn next(&mut self) -> Result<&[u8], ScreenError> {
        self.run(1).map(|(row, _, _)| row)
    }

    fn run(&mut self, most: usize) -> Result<(&[u8], usize, Option<u32>), ScreenError> {
        let y = self.next;
        if y >= self.source.len() {
            return Err(bad("it ended before its last row"));
        }
        let s = self.source[y];
        let mut n = 1;
        while n < most && self.source.get(y + n) == Some(&s) {
            n += 1;
        }
        self.next += n;
        Ok((self.row(y), n, Some(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Png, Screencap};
    use computerd::protocol::Region;

    /// A `w` x `h` screen of bands of rows that repeat (as a phone's flat
    /// screen) and rows of noise (as text), `step` bytes a pixel.
    fn screen(w: u32, h: u32, step: usize) -> Vec<u8> {
        let mut px = Vec::new();
        let mut seed = 7u32;
        for y in 0..h {
            for x in 0..w {
                for c in 0..step {
                    let v = if y % 9 < 5 {
                        // A band: one colour, its rows all alike.
                        (y / 9 * 40 + c as u32 * 70) as u8
                    } else {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        ((seed >> 16) as u8) ^ (x as u8)
                    };
                    px.push(v);
                }
            }
        }
        px
    }

    fn encode(w: u32, h: u32, step: usize, filter: png::Filter, px: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, w, h);
        e.set_color(if step == 4 {
            png::ColorType::Rgba
        } else {
            png::ColorType::Rgb
        });
        e.set_depth(png::BitDepth::Eight);
        e.set_filter(filter);
        let mut wr = e.write_header().unwrap();
        wr.write_image_data(px).unwrap();
        wr.finish().unwrap();
        out
    }

    #[test]
    fn every_filter_reads_as_the_png_crate_reads_it_whole_cut_and_scaled() {
        let (w, h) = (23u32, 40u32);
        let region = Region {
            x: 3,
            y: 11,
            width: 9,
            height: 20,
        };
        let mut buf = Vec::new();
        for step in [3, 4] {
            let px = screen(w, h, step);
            for filter in [
                png::Filter::NoFilter,
                png::Filter::Sub,
                png::Filter::Up,
                png::Filter::Avg,
                png::Filter::Paeth,
                png::Filter::Adaptive,
            ] {
                let bytes = encode(w, h, step, filter, &px);
                assert!(super::parts(&bytes).is_some(), "{filter:?}");
                let ours = Screencap::read(&bytes, &mut buf).unwrap();
                assert_eq!((ours.width(), ours.height()), (w, h));
                let want = Png::read(&bytes).unwrap().frame().unwrap();
                assert_eq!(ours.frame().unwrap(), want, "{step} {filter:?}");
                // The first pixel of a noise row, as drawn.
                let at = (5 * w as usize) * step;
                assert_eq!(want.at(0, 5), Some([px[at], px[at + 1], px[at + 2]]));
                // Bands of 1 and 2 rows (40 to 27, 26), some of them all one
                // row repeated, next to each other.
                for (sw, sh) in [(7, 13), (11, 40), (11, 27), (5, 26), (23, 9), (1, 1)] {
                    let ours = Screencap::read(&bytes, &mut buf).unwrap().scaled(sw, sh);
                    let want = Png::read(&bytes).unwrap().scaled(sw, sh);
                    assert_eq!(ours, want, "{step} {filter:?} {sw}x{sh}");
                }
                let want = Png::read(&bytes).unwrap().crop(region);
                let ours = Screencap::read(&bytes, &mut buf).unwrap().crop(region);
                assert_eq!(ours, want);
                // Inflated only down to the region's last row: the same.
                let rows = Some(region.y + region.height);
                let part = Screencap::read_rows(&bytes, &mut buf, rows).unwrap();
                assert_eq!(part.height(), h);
                assert_eq!(part.crop(region), want);
            }
        }
    }

    #[test]
    fn a_screen_larger_than_the_window_reads_as_the_png_crate_reads_it() {
        // 640x240 RGBA: 614 KB of rows, the window about 101 KB, so it is
        // moved many times, with copies reaching back across each move.
        let (w, h) = (640u32, 240u32);
        let mut buf = Vec::new();
        for step in [3, 4] {
            let px = screen(w, h, step);
            for filter in [png::Filter::Up, png::Filter::Paeth, png::Filter::Adaptive] {
                let bytes = encode(w, h, step, filter, &px);
                let ours = Screencap::read(&bytes, &mut buf).unwrap().frame();
                assert_eq!(ours, Png::read(&bytes).unwrap().frame(), "{filter:?}");
                let ours = Screencap::read(&bytes, &mut buf).unwrap().scaled(341, 128);
                assert_eq!(ours, Png::read(&bytes).unwrap().scaled(341, 128));
            }
        }
    }

    #[test]
    fn other_pngs_go_to_the_png_crate_and_broken_ones_are_refused_in_words() {
        let mut buf = Vec::new();
        // 16-bit RGB: the png crate's reading, the same frame.
        let px: Vec<u8> = (0..4 * 3 * 2).map(|i| (i * 10) as u8).collect();
        let mut sixteen = Vec::new();
        let mut e = png::Encoder::new(&mut sixteen, 2, 2);
        e.set_color(png::ColorType::Rgb);
        e.set_depth(png::BitDepth::Sixteen);
        let mut wr = e.write_header().unwrap();
        wr.write_image_data(&px).unwrap();
        wr.finish().unwrap();
        assert!(super::parts(&sixteen).is_none());
        let f = Screencap::read(&sixteen, &mut buf)
            .unwrap()
            .frame()
            .unwrap();
        assert_eq!(f.at(0, 0), Some([0, 20, 40]));
        // Image data cut short, or longer than its rows: refused, nothing
        // read past the buffer.
        let good = encode(4, 4, 4, png::Filter::Sub, &screen(4, 4, 4));
        let idat_len = u32::from_be_bytes(good[33..37].try_into().unwrap()) as usize;
        let mut cut = good[..41].to_vec();
        cut.extend_from_slice(&good[41..41 + idat_len / 2]);
        let e = Screencap::read(&cut, &mut buf).err().unwrap();
        assert!(e.to_string().contains("PNG could not be read"), "{e}");
        let mut tall = good.clone();
        // The header says 3 rows; the data holds 4.
        tall[20..24].copy_from_slice(&3u32.to_be_bytes());
        let e = Screencap::read(&tall, &mut buf).err().unwrap();
        assert!(
            e.to_string().contains("more than the 51 bytes of 4x3"),
            "{e}"
        );
        // A row with filter 9.
        let mut raw = vec![9u8];
        raw.extend_from_slice(&[0; 16]);
        let z = fdeflate::compress_to_vec(&raw);
        let mut odd = Vec::new();
        odd.extend_from_slice(&good[..33]);
        odd[20..24].copy_from_slice(&1u32.to_be_bytes());
        odd.extend_from_slice(&(z.len() as u32).to_be_bytes());
        odd.extend_from_slice(b"IDAT");
        odd.extend_from_slice(&z);
        odd.extend_from_slice(&[0; 4]);
        let e = Screencap::read(&odd, &mut buf).err().unwrap();
        assert!(e.to_string().contains("filter 9"), "{e}");
    }
}
