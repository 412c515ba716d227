//! The PNG of a shot: 8-bit RGB, non-interlaced, each row filtered by the
//! filter that makes it smallest (the adaptive heuristic), deflated by
//! fdeflate's fast compressor. Written here, not through the png crate, to
//! keep the static daemon small.

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
/// into `out` (the filter byte first). One loop per filter, so each runs
/// without a branch per byte.
fn filter(kind: u8, row: &[u8], prev: &[u8], out: &mut Vec<u8>) {
    const BPP: usize = 3;
    let n = row.len();
    out.clear();
    out.resize(n + 1, 0);
    out[0] = kind;
    let o = &mut out[1..];
    let head = BPP.min(n);
    match kind {
        0 => o.copy_from_slice(row),
        1 => {
            o[..head].copy_from_slice(&row[..head]);
            for ((d, x), a) in o[BPP..].iter_mut().zip(&row[BPP..]).zip(&row[..n - BPP]) {
                *d = x.wrapping_sub(*a);
            }
        }
        2 => {
            for ((d, x), b) in o.iter_mut().zip(row).zip(prev) {
                *d = x.wrapping_sub(*b);
            }
        }
        3 => {
            for i in 0..head {
                o[i] = row[i].wrapping_sub(prev[i] / 2);
            }
            for i in BPP..n {
                o[i] =
                    row[i].wrapping_sub(((u16::from(row[i - BPP]) + u16::from(prev[i])) / 2) as u8);
            }
        }
        _ => {
            for i in 0..head {
                o[i] = row[i].wrapping_sub(prev[i]);
            }
            for i in BPP..n {
                o[i] = row[i].wrapping_sub(paeth(row[i - BPP], prev[i], prev[i - BPP]));
            }
        }
    }
}

fn cost(filtered: &[u8]) -> u64 {
    filtered[1..]
        .iter()
        .map(|b| u64::from((*b as i8).unsigned_abs()))
        .sum()
}

/// A PNG of `w` x `h` RGB pixels.
pub fn encode(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, RpcError> {
    let stride = w as usize * 3;
    if rgb.len() != stride * h as usize || w == 0 || h == 0 {
        return Err(RpcError::invalid(format!(
            "the PNG could not be made: {} bytes for {w}x{h} RGB pixels",
            rgb.len()
        )));
    }
    let fail = |e: std::io::Error| RpcError::invalid(format!("the PNG could not be made: {e}"));
    let mut z = fdeflate::Compressor::new(Vec::with_capacity(rgb.len() / 4)).map_err(fail)?;
    let zero = vec![0u8; stride];
    let mut best = Vec::with_capacity(stride + 1);
    let mut trial = Vec::with_capacity(stride + 1);
    for y in 0..h as usize {
        let row = &rgb[y * stride..(y + 1) * stride];
        let prev = if y == 0 {
            &zero[..]
        } else {
            &rgb[(y - 1) * stride..y * stride]
        };
        filter(0, row, prev, &mut best);
        let mut least = cost(&best);
        for kind in 1..=4 {
            filter(kind, row, prev, &mut trial);
            let c = cost(&trial);
            if c < least {
                least = c;
                std::mem::swap(&mut best, &mut trial);
            }
        }
        z.write_data(&best).map_err(fail)?;
    }
    let idat = z.finish().map_err(fail)?;
    let mut out = Vec::with_capacity(idat.len() + 64);
    out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit, RGB, deflate, adaptive filters, no interlace
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_png_decodes_to_its_pixels() {
        let (w, h) = (37u32, 11u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
        let png_bytes = encode(&rgb, w, h).unwrap();
        let mut r = png::Decoder::new(std::io::Cursor::new(&png_bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (w, h));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(&buf[..info.buffer_size()], &rgb[..]);
        assert_eq!(crc(&[b"IEND"]), 0xae42_6082);
        assert!(encode(&rgb, w + 1, h).is_err());
    }
}
