//! A PNG of few colours, said again as an indexed PNG: the same pixels,
//! exactly, in a third to a half of the bytes. A page of text and forms
//! is often within 256 colours (the browser's own PNG of one is RGB,
//! deflated fast); a photo or a gradient is not, and is left as it came.

use png::{BitDepth, ColorType, Compression, Transformations};

/// The most colours an indexed PNG holds.
const MAX_COLOURS: usize = 256;

/// Slots of the colour table: a power of two, well over [`MAX_COLOURS`]
/// so that probes stay short.
const SLOTS: usize = 1024;

/// `png` as an indexed PNG with the same pixels, when it has at most 256
/// colours, is 8-bit RGB or opaque RGBA, and the indexed one is smaller.
/// `None` otherwise (the caller keeps what it has).
pub fn fewer_colours(png_bytes: &[u8]) -> Option<Vec<u8>> {
    let mut d = png::Decoder::new(std::io::Cursor::new(png_bytes));
    d.set_transformations(Transformations::IDENTITY);
    let mut r = d.read_info().ok()?;
    let info = r.info();
    let channels = match (info.bit_depth, info.color_type) {
        (BitDepth::Eight, ColorType::Rgb) => 3,
        (BitDepth::Eight, ColorType::Rgba) => 4,
        _ => return None,
    };
    if info.interlaced {
        return None;
    }
    let (width, height) = (info.width, info.height);
    // Row by row, so a picture of many colours is given up early.
    let mut ix = Indexer::new(width as usize * height as usize);
    while let Ok(Some(row)) = r.next_row() {
        ix.add(row.data(), channels)?;
    }
    if ix.indices.len() != width as usize * height as usize {
        return None;
    }
    let (palette, indices) = (ix.palette, ix.indices);
    let out = encode_indexed(width, height, &palette, &indices)?;
    (out.len() < png_bytes.len()).then_some(out)
}

/// The palette (RGB triples, in order of first use) and one index a
/// pixel, built as rows come.
struct Indexer {
    /// Keys are 0xRRGGBB + 1, so 0 marks an empty slot.
    keys: [u32; SLOTS],
    slot_index: [u8; SLOTS],
    palette: Vec<u8>,
    indices: Vec<u8>,
    last: (u32, u8),
}

impl Indexer {
    fn new(pixels: usize) -> Indexer {
        Indexer {
            keys: [0; SLOTS],
            slot_index: [0; SLOTS],
            palette: Vec::with_capacity(MAX_COLOURS * 3),
            indices: Vec::with_capacity(pixels),
            last: (0, 0),
        }
    }

    /// Index a row of pixels; `None` at the 257th colour or, for RGBA,
    /// at a pixel that is not opaque.
    fn add(&mut self, row: &[u8], channels: usize) -> Option<()> {
        for px in row.chunks_exact(channels) {
            if channels == 4 && px[3] != 255 {
                return None;
            }
            let key = (u32::from(px[0]) << 16 | u32::from(px[1]) << 8 | u32::from(px[2])) + 1;
            if key != self.last.0 {
                let i = lookup(&mut self.keys, &mut self.slot_index, &mut self.palette, key)?;
                self.last = (key, i);
            }
            self.indices.push(self.last.1);
        }
        Some(())
    }
}

/// The index of `key`'s colour, added to the palette when new; `None`
/// when it would be colour 257.
fn lookup(
    keys: &mut [u32; SLOTS],
    slot_index: &mut [u8; SLOTS],
    palette: &mut Vec<u8>,
    key: u32,
) -> Option<u8> {
    // Fibonacci hashing onto the table's 10 bits.
    let mut slot = (key.wrapping_mul(0x9E37_79B9) >> 22) as usize;
    loop {
        match keys[slot] {
            k if k == key => return Some(slot_index[slot]),
            0 => {
                let n = palette.len() / 3;
                if n == MAX_COLOURS {
                    return None;
                }
                let rgb = key - 1;
                palette.extend_from_slice(&[(rgb >> 16) as u8, (rgb >> 8) as u8, rgb as u8]);
                keys[slot] = key;
                slot_index[slot] = n as u8;
                return Some(n as u8);
            }
            _ => slot = (slot + 1) % SLOTS,
        }
    }
}

/// The indexed PNG, at the fewest bits a pixel that hold the palette.
fn encode_indexed(width: u32, height: u32, palette: &[u8], indices: &[u8]) -> Option<Vec<u8>> {
    let colours = palette.len() / 3;
    let bits: u8 = match colours {
        0..=2 => 1,
        3..=4 => 2,
        5..=16 => 4,
        _ => 8,
    };
    let data = if bits == 8 {
        indices.to_vec()
    } else {
        pack(indices, width as usize, bits)
    };
    let mut out = Vec::with_capacity(data.len() / 8);
    let mut e = png::Encoder::new(&mut out, width, height);
    e.set_color(ColorType::Indexed);
    e.set_depth(match bits {
        1 => BitDepth::One,
        2 => BitDepth::Two,
        4 => BitDepth::Four,
        _ => BitDepth::Eight,
    });
    e.set_palette(palette.to_vec());
    // Fast (fdeflate) is made for filtered RGB and does worse here than
    // the PNG it replaces; High takes longer for no fewer bytes.
    e.set_compression(Compression::Balanced);
    e.set_filter(png::Filter::NoFilter);
    let mut w = e.write_header().ok()?;
    w.write_image_data(&data).ok()?;
    w.finish().ok()?;
    Some(out)
}

/// Rows of 8-bit indices packed `bits` a pixel, each row starting on a
/// byte, high bits first (as PNG packs them).
fn pack(indices: &[u8], width: usize, bits: u8) -> Vec<u8> {
    let per_byte = usize::from(8 / bits);
    let row_bytes = width.div_ceil(per_byte);
    let mut out = Vec::with_capacity(row_bytes * indices.len() / width.max(1));
    for row in indices.chunks_exact(width) {
        for group in row.chunks(per_byte) {
            let mut b = 0u8;
            for (i, &ix) in group.iter().enumerate() {
                b |= ix << (8 - bits as usize * (i + 1));
            }
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RGB or RGBA PNG of `pixels`.
    fn png_of(width: u32, height: u32, channels: usize, pixels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, width, height);
        e.set_color(if channels == 4 {
            ColorType::Rgba
        } else {
            ColorType::Rgb
        });
        e.set_depth(BitDepth::Eight);
        e.set_compression(Compression::Fast);
        let mut w = e.write_header().unwrap();
        w.write_image_data(pixels).unwrap();
        w.finish().unwrap();
        out
    }

    /// A PNG's pixels as RGBA, whatever its colour type (the png crate
    /// expanding palettes and low bit depths).
    fn rgba_of(png_bytes: &[u8]) -> Vec<u8> {
        let mut d = png::Decoder::new(std::io::Cursor::new(png_bytes));
        d.set_transformations(Transformations::EXPAND | Transformations::ALPHA);
        let mut r = d.read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let f = r.next_frame(&mut buf).unwrap();
        buf.truncate(f.buffer_size());
        buf
    }

    /// Text-like pixels: `colours` colours in runs, over a white ground.
    fn page(width: u32, height: u32, colours: u32, channels: usize) -> Vec<u8> {
        let mut px = Vec::new();
        for y in 0..height {
            for x in 0..width {
                let c = if (x / 3 + y) % 7 == 0 {
                    (x * 31 + y * 17) % colours
                } else {
                    0
                };
                let v = 255 - (c * 255 / colours.max(1)) as u8;
                px.extend_from_slice(&[v, v.wrapping_mul(3), (c * 7) as u8]);
                if channels == 4 {
                    px.push(255);
                }
            }
        }
        px
    }

    #[test]
    fn few_colours_come_back_smaller_with_the_same_pixels_at_every_depth() {
        for colours in [2, 4, 9, 16, 17, 200, 256] {
            for channels in [3, 4] {
                let (w, h) = (301, 97);
                let px = page(w, h, colours, channels);
                let png = png_of(w, h, channels, &px);
                let small = fewer_colours(&png)
                    .unwrap_or_else(|| panic!("{colours} colours, {channels} channels"));
                assert!(
                    small.len() < png.len(),
                    "{colours}: {} vs {}",
                    small.len(),
                    png.len()
                );
                assert_eq!(rgba_of(&small), rgba_of(&png), "{colours} colours");
            }
        }
    }

    #[test]
    fn over_256_colours_or_any_transparency_is_left_as_it_came() {
        let (w, h) = (64, 64);
        let mut px = Vec::new();
        for i in 0..w * h {
            px.extend_from_slice(&[(i % 256) as u8, (i / 256) as u8, 9]);
        }
        assert_eq!(fewer_colours(&png_of(w, h, 3, &px)), None, "4096 colours");
        let mut px = page(w, h, 4, 4);
        px[4 * 100 + 3] = 254;
        assert_eq!(
            fewer_colours(&png_of(w, h, 4, &px)),
            None,
            "one pixel not opaque"
        );
        assert_eq!(fewer_colours(b"not a png"), None);
    }
}
