//! The PNG of a shot, 8-bit and non-interlaced, encoded the way that suits
//! what the screen shows ([`Kind`], chosen per shot from how many rows
//! repeat the row above): a plain screen as RGB with adaptive filters and
//! fdeflate, a busy one as unfiltered RGB deflated by miniz_oxide. Written here, not
//! through the png crate, to keep the static daemon small.

use crate::protocol::RpcError;

const CRC_TABLE: [u32; 256] = crc_table();

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[n] = c;
        n += 1;
    }
    t
}

fn crc(parts: &[&[u8]]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for p in parts {
        for b in *p {
            c = CRC_TABLE[((c ^ u32::from(*b)) & 0xff) as usize] ^ (c >> 8);
        }
    }
    c ^ 0xffff_ffff
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc(&[kind, data]).to_be_bytes());
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

/// One row filtered by `kind` (0 none, 1 sub, 2 up, 3 average, 4 paeth)
/// into `out` (the filter byte first); its cost (the sum of the filtered
/// bytes as signed magnitudes, the adaptive heuristic's measure), summed in
/// the same pass. One loop per filter, so each runs without a branch per
/// byte.
fn filter(kind: u8, row: &[u8], prev: &[u8], out: &mut Vec<u8>) -> u64 {
    const BPP: usize = 3;
    let n = row.len();
    out.clear();
    out.resize(n + 1, 0);
    out[0] = kind;
    let o = &mut out[1..];
    let head = BPP.min(n);
    let mag = |d: u8| u64::from((d as i8).unsigned_abs());
    let mut c = 0u64;
    match kind {
        0 => {
            o.copy_from_slice(row);
            c = o.iter().map(|d| mag(*d)).sum();
        }
        1 => {
            o[..head].copy_from_slice(&row[..head]);
            for ((d, x), a) in o[BPP..].iter_mut().zip(&row[BPP..]).zip(&row[..n - BPP]) {
                *d = x.wrapping_sub(*a);
                c += mag(*d);
            }
            c += o[..head].iter().map(|d| mag(*d)).sum::<u64>();
        }
        2 => {
            for ((d, x), b) in o.iter_mut().zip(row).zip(prev) {
                *d = x.wrapping_sub(*b);
                c += mag(*d);
            }
        }
        3 => {
            for i in 0..head {
                o[i] = row[i].wrapping_sub(prev[i] / 2);
                c += mag(o[i]);
            }
            for i in BPP..n {
                o[i] =
                    row[i].wrapping_sub(((u16::from(row[i - BPP]) + u16::from(prev[i])) / 2) as u8);
                c += mag(o[i]);
            }
        }
        _ => {
            for i in 0..head {
                o[i] = row[i].wrapping_sub(prev[i]);
                c += mag(o[i]);
            }
            for i in BPP..n {
                o[i] = row[i].wrapping_sub(paeth(row[i - BPP], prev[i], prev[i - BPP]));
                c += mag(o[i]);
            }
        }
    }
    c
}

/// The order filters are tried in: those that win most on screens first,
/// so a row that one of them makes all zeros stops the trials early.
const TRIALS: [u8; 5] = [2, 1, 0, 4, 3];

/// Every how-many-th pixel of a row the filters' costs are estimated on
/// (the whole row is filtered once, by the winner).
const SAMPLE_EVERY: usize = 4;

/// A filter's cost estimated on every [`SAMPLE_EVERY`]th pixel of the row,
/// from the row and the one above (no filtered row is written).
fn sampled_cost(kind: u8, row: &[u8], prev: &[u8]) -> u64 {
    const BPP: usize = 3;
    let mag = |d: u8| u64::from((d as i8).unsigned_abs());
    let mut c = 0u64;
    let mut px = 0;
    while px * BPP < row.len() {
        for i in px * BPP..(px * BPP + BPP).min(row.len()) {
            let a = if i >= BPP { row[i - BPP] } else { 0 };
            let b = prev[i];
            let up_left = if i >= BPP { prev[i - BPP] } else { 0 };
            let predicted = match kind {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                _ => paeth(a, b, up_left),
            };
            c += mag(row[i].wrapping_sub(predicted));
        }
        px += SAMPLE_EVERY;
    }
    c
}

/// The rows of `rgb` filtered, each with its filter byte first: the
/// stream deflate compresses.
pub fn filtered(rgb: &[u8], w: u32, h: u32) -> Vec<u8> {
    let stride = w as usize * 3;
    let mut out = Vec::with_capacity((stride + 1) * h as usize);
    let zero = vec![0u8; stride];
    let mut best = Vec::with_capacity(stride + 1);
    for y in 0..h as usize {
        let row = &rgb[y * stride..(y + 1) * stride];
        let prev = if y == 0 {
            &zero[..]
        } else {
            &rgb[(y - 1) * stride..y * stride]
        };
        if y > 0 && row == prev {
            // Up makes a row like the one above all zeros: nothing beats it.
            out.push(2);
            out.resize(out.len() + stride, 0);
            continue;
        }
        // The filter whose sampled cost is least (ties to the earlier in
        // TRIALS), then the whole row by it.
        let mut pick = TRIALS[0];
        let mut least = sampled_cost(pick, row, prev);
        for kind in TRIALS[1..].iter().copied() {
            if least == 0 {
                break;
            }
            let c = sampled_cost(kind, row, prev);
            if c < least {
                least = c;
                pick = kind;
            }
        }
        filter(pick, row, prev, &mut best);
        out.extend_from_slice(&best);
    }
    out
}

/// How much of a screen repeats the row above for it to count as plain
/// (a blank desktop, a still terminal): at least this many eighths of its
/// rows.
const PLAIN_EIGHTHS: usize = 7;

/// The deflate level of a busy screen: miniz_oxide's fastest that is
/// smaller than libpng at scrot's settings. On a page of text and a table
/// (1280x800) it gave 204,132 B in 11.3 ms against scrot's 220,220 B;
/// level 1 gave 241,645 B in 4.1 ms, and zlib-rs at level 2 240,544 B in
/// 8.9 ms (RGB) or 212,493 B in 10.9 ms (RGBA), for a larger binary.
const BUSY_LEVEL: u8 = 2;

/// How a shot was encoded, chosen by what it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Most rows repeat the one above: RGB, each row's filter chosen by
    /// its sampled cost, fdeflate (whose run-length path is the fastest on
    /// rows of zeros).
    Plain,
    /// The rest: RGB, no filter but Up for a repeated row, miniz_oxide
    /// at [`BUSY_LEVEL`]. On text, filters only hide the repeats that
    /// deflate finds (Sub, Up and Paeth were each about 17% larger).
    Busy,
}

/// Rows of `row_bytes` in `px` that equal the row above.
fn repeats(px: &[u8], row_bytes: usize) -> usize {
    px.chunks_exact(row_bytes)
        .zip(px.chunks_exact(row_bytes).skip(1))
        .filter(|(a, b)| a == b)
        .count()
}

/// The way a screen of `h` rows, `repeated` of which equal the row above,
/// is encoded.
pub fn kind(repeated: usize, h: u32) -> Kind {
    if repeated * 8 >= (h as usize).saturating_sub(1) * PLAIN_EIGHTHS {
        Kind::Plain
    } else {
        Kind::Busy
    }
}

/// The X server's BGRX pixels as RGB.
pub fn rgb_of(bgrx: &[u8]) -> Vec<u8> {
    let mut rgb = vec![0u8; bgrx.len() / 4 * 3];
    for (d, px) in rgb.chunks_exact_mut(3).zip(bgrx.chunks_exact(4)) {
        d[0] = px[2];
        d[1] = px[1];
        d[2] = px[0];
    }
    rgb
}

/// A PNG of `w` x `h` RGB pixels (a phone's frames), encoded as
/// [`encode_bgrx`] chooses.
pub fn encode(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, RpcError> {
    if rgb.len() != w as usize * h as usize * 3 {
        return Err(RpcError::invalid(format!(
            "the PNG could not be made: {} bytes for {w}x{h} RGB pixels",
            rgb.len()
        )));
    }
    // A plain screen (rows equal in RGB exactly where they are in BGRX) is
    // filtered from its RGB as it is: no round trip through BGRX.
    if w > 0 && h > 0 && kind(repeats(rgb, w as usize * 3), h) == Kind::Plain {
        return Ok(png_of(&plain_idat(rgb, w, h)?, w, h));
    }
    let bgrx: Vec<u8> = rgb
        .chunks_exact(3)
        .flat_map(|p| [p[2], p[1], p[0], 0])
        .collect();
    Ok(encode_bgrx(&bgrx, w, h)?.0)
}

/// A plain screen's image data: RGB rows, adaptive filters, fdeflate.
fn plain_idat(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, RpcError> {
    let fail = |e: std::io::Error| RpcError::invalid(format!("the PNG could not be made: {e}"));
    let mut z = fdeflate::Compressor::new(Vec::with_capacity(rgb.len() / 12)).map_err(fail)?;
    z.write_data(&filtered(rgb, w, h)).map_err(fail)?;
    z.finish().map_err(fail)
}

/// The PNG of `w` x `h` 8-bit RGB pixels whose image data is `idat`.
fn png_of(idat: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(idat.len() + 64);
    out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    // 8-bit, RGB, deflate, adaptive filters, no interlace.
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A PNG of `w` x `h` pixels given as the X server's BGRX (four bytes a
/// pixel, the fourth ignored), and how it was encoded.
pub fn encode_bgrx(bgrx: &[u8], w: u32, h: u32) -> Result<(Vec<u8>, Kind), RpcError> {
    let stride = w as usize * 4;
    if bgrx.len() != stride * h as usize || w == 0 || h == 0 {
        return Err(RpcError::invalid(format!(
            "the PNG could not be made: {} bytes for {w}x{h} BGRX pixels",
            bgrx.len()
        )));
    }
    let kind = kind(repeats(bgrx, stride), h);
    let idat = match kind {
        Kind::Plain => plain_idat(&rgb_of(bgrx), w, h)?,
        Kind::Busy => busy_idat(bgrx, stride),
    };
    Ok((png_of(&idat, w, h), kind))
}

/// The zlib stream of [`Kind::Busy`]: each row RGB unfiltered, or Up
/// (all zeros) when it repeats the row above.
fn busy_idat(bgrx: &[u8], stride: usize) -> Vec<u8> {
    let rows = bgrx.len() / stride;
    let mut lines = Vec::with_capacity((stride / 4 * 3 + 1) * rows);
    let mut prev: Option<&[u8]> = None;
    for row in bgrx.chunks_exact(stride) {
        if prev == Some(row) {
            lines.push(2);
            lines.resize(lines.len() + stride / 4 * 3, 0);
        } else {
            lines.push(0);
            for px in row.chunks_exact(4) {
                lines.extend_from_slice(&[px[2], px[1], px[0]]);
            }
        }
        prev = Some(row);
    }
    miniz_oxide::deflate::compress_to_vec_zlib(&lines, BUSY_LEVEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RGB pixels as the X server gives them (BGRX, the pad byte not 0,
    /// as a server may leave it).
    fn bgrx_of(rgb: &[u8]) -> Vec<u8> {
        rgb.chunks_exact(3)
            .flat_map(|p| [p[2], p[1], p[0], 0x5a])
            .collect()
    }

    /// `rgb` encoded, then decoded by the png crate: its pixels, and how
    /// it was encoded, once the size and colour type (RGB) are held to that.
    fn round_trip(rgb: &[u8], w: u32, h: u32) -> (Vec<u8>, Kind) {
        let (png_bytes, kind) = encode_bgrx(&bgrx_of(rgb), w, h).unwrap();
        let mut r = png::Decoder::new(std::io::Cursor::new(&png_bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (w, h));
        buf.truncate(info.buffer_size());
        assert_eq!(info.color_type, png::ColorType::Rgb);
        (buf, kind)
    }

    #[test]
    fn the_png_decodes_to_its_pixels() {
        let (w, h) = (37u32, 11u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(round_trip(&rgb, w, h), (rgb.clone(), Kind::Busy));
        assert_eq!(crc(&[b"IEND"]), 0xae42_6082);
        assert!(encode_bgrx(&bgrx_of(&rgb), w + 1, h).is_err());
        assert!(encode(&rgb, w + 1, h).is_err());
        assert_eq!(rgb_of(&bgrx_of(&rgb)), rgb);
    }

    #[test]
    fn a_blank_screen_is_plain_and_a_busy_one_busy_and_both_are_lossless() {
        let (w, h) = (40u32, 64u32);
        // A blank screen with a taskbar: plain.
        let blank: Vec<u8> = (0..h)
            .flat_map(|y| {
                (0..w).flat_map(move |_| {
                    if y < 60 {
                        [30, 60, 90]
                    } else {
                        [200, 200, 200]
                    }
                })
            })
            .collect();
        assert_eq!(round_trip(&blank, w, h), (blank.clone(), Kind::Plain));
        // Text-like rows, every row different: busy.
        let text: Vec<u8> = (0..h)
            .flat_map(|y| {
                (0..w).flat_map(move |x| [((x * 13 + y * 7) % 256) as u8, 255, (y * 4) as u8])
            })
            .collect();
        assert_eq!(round_trip(&text, w, h), (text.clone(), Kind::Busy));
        // One row, one pixel.
        assert_eq!(round_trip(&[1, 2, 3], 1, 1), (vec![1, 2, 3], Kind::Plain));
        // From RGB (a phone's frames) the same bytes as from BGRX, plain
        // screens filtered from the RGB directly.
        for (px, w, h) in [(&blank, w, h), (&text, w, h), (&vec![1, 2, 3], 1, 1)] {
            assert_eq!(
                encode(px, w, h).unwrap(),
                encode_bgrx(&bgrx_of(px), w, h).unwrap().0
            );
        }
        assert_eq!(kind(0, 2), Kind::Busy);
        assert_eq!(kind(7, 9), Kind::Plain);
        assert_eq!(kind(6, 9), Kind::Busy);
    }

    /// The decoder's side of each filter, as the PNG specification gives it.
    fn unfilter(f: &[u8], prev: &[u8]) -> Vec<u8> {
        let mut row = vec![0u8; f.len() - 1];
        for i in 0..row.len() {
            let a = if i >= 3 { row[i - 3] } else { 0 };
            let b = prev[i];
            let c = if i >= 3 { prev[i - 3] } else { 0 };
            let x = f[i + 1];
            row[i] = match f[0] {
                0 => x,
                1 => x.wrapping_add(a),
                2 => x.wrapping_add(b),
                3 => x.wrapping_add(((u16::from(a) + u16::from(b)) / 2) as u8),
                _ => x.wrapping_add(paeth(a, b, c)),
            };
        }
        row
    }

    #[test]
    fn every_filter_undoes_and_its_cost_is_its_bytes_magnitudes() {
        let row: Vec<u8> = (0..60u32).map(|i| (i * 37 % 256) as u8).collect();
        let prev: Vec<u8> = (0..60u32).map(|i| (i * 11 % 256) as u8).collect();
        let mut out = Vec::new();
        for kind in 0..=4 {
            let c = filter(kind, &row, &prev, &mut out);
            assert_eq!(out[0], kind);
            assert_eq!(unfilter(&out, &prev), row, "filter {kind}");
            let want: u64 = out[1..]
                .iter()
                .map(|b| u64::from((*b as i8).unsigned_abs()))
                .sum();
            assert_eq!(c, want, "filter {kind}'s cost");
        }
    }

    #[test]
    fn a_screen_of_repeated_flat_and_noisy_rows_decodes_to_its_pixels() {
        // Bands of repeated rows (the Up shortcut), flat rows, gradients
        // and noise: every path of the row loop.
        let (w, h) = (64u32, 48u32);
        let mut rgb = Vec::with_capacity((w * h * 3) as usize);
        let mut seed = 7u32;
        for y in 0..h {
            for x in 0..w {
                let px = match y / 8 {
                    0 => [200, 200, 200],
                    1 => [(x * 4) as u8, 10, 250],
                    2 => [(x + y) as u8, (x * 2 + y) as u8, 7],
                    3 => {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        [(seed >> 24) as u8, (seed >> 16) as u8, (seed >> 8) as u8]
                    }
                    _ => [9, 99, (y * 5) as u8],
                };
                rgb.extend_from_slice(&px);
            }
        }
        assert_eq!(round_trip(&rgb, w, h).0, rgb);
    }
}
