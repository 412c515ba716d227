//! Text as a model reads it: numbered lines by offset and limit (fed chunk
//! by chunk, so a large file is never held whole), images by their magic
//! bytes, and the check that tells text from other binary data.

/// The longest line shown; the rest of it is cut with a note.
pub(crate) const MAX_LINE_CHARS: usize = 2000;

/// How much of a file's start decides whether it is text.
pub(crate) const SNIFF_BYTES: usize = 8192;

/// Why a [`LineWindow`] stopped before the file's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `limit` lines were shown.
    Limit,
    /// The next line would not fit the output budget.
    Budget,
}

/// Numbered lines (`cat -n` style) from line `offset` (1-based) on, at most
/// `limit` of them and at most `budget` bytes of text, fed in chunks.
#[derive(Debug)]
pub(crate) struct LineWindow {
    offset: u64,
    limit: u64,
    budget: usize,
    /// The number of the line being read.
    line_no: u64,
    /// The bytes of the current line that may be shown (capped).
    line: Vec<u8>,
    /// Bytes of the current line seen in all (the cap aside).
    line_len: usize,
    pub out: String,
    /// The first and last line shown.
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// Lines cut at [`MAX_LINE_CHARS`].
    pub long_lines: u64,
    pub stop: Option<Stop>,
    /// True once the whole file was seen: `lines` is then its line count.
    pub complete: bool,
    pub lines: u64,
    /// `limit` lines are shown; any byte more means the file goes on.
    full: bool,
}

impl LineWindow {
    pub fn new(offset: u64, limit: u64, budget: usize) -> Self {
        Self {
            offset: offset.max(1),
            limit,
            budget,
            line_no: 1,
            line: Vec::new(),
            line_len: 0,
            out: String::new(),
            first: None,
            last: None,
            long_lines: 0,
            stop: None,
            complete: false,
            lines: 0,
            full: false,
        }
    }

    /// Feed the next bytes of the file. Returns true when the window is
    /// full (no more input is needed).
    pub fn feed(&mut self, mut chunk: &[u8]) -> bool {
        if self.stop.is_some() {
            return true;
        }
        while !chunk.is_empty() {
            if self.full {
                self.stop = Some(Stop::Limit);
                return true;
            }
            let nl = chunk.iter().position(|&b| b == b'\n');
            let (piece, rest) = match nl {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if self.line_no >= self.offset {
                // Four bytes a character at most: enough to show MAX_LINE_CHARS.
                let room = (MAX_LINE_CHARS * 4).saturating_sub(self.line.len());
                self.line.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            self.line_len += piece.len();
            match rest {
                Some(rest) => {
                    self.end_line();
                    if self.stop.is_some() {
                        return true;
                    }
                    chunk = rest;
                }
                None => break,
            }
        }
        false
    }

    /// The input ended (`eof`: at the file's end).
    pub fn finish(&mut self, eof: bool) {
        if self.stop.is_some() {
            return;
        }
        if eof {
            if self.line_len > 0 {
                self.end_line();
            }
            if self.stop.is_none() {
                self.complete = true;
                self.lines = self.line_no - 1;
            }
        }
    }

    fn end_line(&mut self) {
        let no = self.line_no;
        if no >= self.offset {
            let shown = self.render_line(no);
            if self.first.is_some() && self.out.len() + shown.len() > self.budget {
                self.stop = Some(Stop::Budget);
                return;
            }
            self.out.push_str(&shown);
            self.first.get_or_insert(no);
            self.last = Some(no);
        }
        self.line.clear();
        self.line_len = 0;
        self.line_no += 1;
        if let Some(first) = self.first
            && self.line_no - first >= self.limit
        {
            self.full = true;
        }
    }

    fn render_line(&mut self, no: u64) -> String {
        let text = String::from_utf8_lossy(&self.line);
        let mut shown: String = text.chars().take(MAX_LINE_CHARS).collect();
        let chars = if self.line_len > self.line.len() {
            None // more bytes than kept: the line is long whatever they hold
        } else {
            Some(text.chars().count())
        };
        let long = chars.is_none_or(|c| c > MAX_LINE_CHARS);
        if long {
            self.long_lines += 1;
            shown.push_str(&format!(
                " [... line cut at {MAX_LINE_CHARS} characters; it is {} bytes long]",
                self.line_len
            ));
        }
        format!("{no:>6}\t{shown}\n")
    }

    /// The line to ask for next, when the window stopped before the end.
    pub fn next_offset(&self) -> Option<u64> {
        match self.stop {
            Some(Stop::Limit) => self.last.map(|l| l + 1),
            Some(Stop::Budget) => self.last.map(|l| l + 1).or(Some(self.offset)),
            None => None,
        }
    }
}

/// The image types shown to a model as images, by magic bytes.
pub(crate) fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// An image's width and height from its header, when it can be read.
pub(crate) fn image_size(mime: &str, b: &[u8]) -> Option<(u32, u32)> {
    let be32 =
        |i: usize| -> Option<u32> { Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?)) };
    let be16 = |i: usize| -> Option<u32> {
        Some(u16::from_be_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32)
    };
    let le16 = |i: usize| -> Option<u32> {
        Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32)
    };
    let le24 = |i: usize| -> Option<u32> {
        let s = b.get(i..i + 3)?;
        Some(s[0] as u32 | (s[1] as u32) << 8 | (s[2] as u32) << 16)
    };
    match mime {
        "image/png" => (b.get(12..16)? == b"IHDR").then(|| Some((be32(16)?, be32(20)?)))?,
        "image/gif" => Some((le16(6)?, le16(8)?)),
        "image/webp" => match b.get(12..16)? {
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            b"VP8L" => {
                let v = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                Some(((v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1))
            }
            b"VP8 " => Some((le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)),
            _ => None,
        },
        "image/jpeg" => {
            // Walk the segments to the first start-of-frame marker.
            let mut i = 2;
            loop {
                while *b.get(i)? == 0xFF && *b.get(i + 1)? == 0xFF {
                    i += 1;
                }
                if *b.get(i)? != 0xFF {
                    return None;
                }
                let marker = *b.get(i + 1)?;
                let len = be16(i + 2)? as usize;
                let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
                if sof {
                    return Some((be16(i + 7)?, be16(i + 5)?));
                }
                i += 2 + len;
            }
        }
        _ => None,
    }
}

/// Why the start of a file is not text: a NUL byte, or bytes that are not
/// UTF-8 (an incomplete character at the very end does not count).
pub(crate) fn not_text(start: &[u8]) -> Option<&'static str> {
    let sample = &start[..start.len().min(SNIFF_BYTES)];
    if sample.contains(&0) {
        return Some("it holds NUL bytes");
    }
    match std::str::from_utf8(sample) {
        Ok(_) => None,
        // Only a character cut by the sample's end: text so far.
        Err(e) if e.error_len().is_none() => None,
        Err(_) => Some("it is not UTF-8 text"),
    }
}

/// A note for program output that is not all text: what stands in for the
/// other bytes in what the model reads, and how to see them exactly.
/// `None` for UTF-8 text without NUL bytes.
pub(crate) fn binary_note(name: &str, bytes: &[u8]) -> Option<String> {
    let why = if std::str::from_utf8(bytes).is_err() {
        "bytes that are not UTF-8 text are shown as \u{FFFD}"
    } else if bytes.contains(&0) {
        "it holds NUL bytes"
    } else {
        return None;
    };
    Some(format!(
        "{name} is binary, not text ({why}); to see its exact bytes, pipe it through base64 or od -c, or write it to a file and copy that"
    ))
}

/// How many bytes at the end of `data` are an incomplete UTF-8 character
/// (0 to 3), to hold back until the rest of it comes.
pub(crate) fn incomplete_utf8_tail(data: &[u8]) -> usize {
    let n = data.len();
    for back in 1..=3.min(n) {
        let b = data[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let need = if b & 0xE0 == 0xC0 {
            2
        } else if b & 0xF0 == 0xE0 {
            3
        } else if b & 0xF8 == 0xF0 {
            4
        } else {
            return 0;
        };
        return if need > back { back } else { 0 };
    }
    0
}

/// A byte count in words: `512 bytes`, `1.5 KiB`, `3.2 MiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if n < 1024 {
        format!("{n} bytes")
    } else if f < KIB * KIB {
        format!("{:.1} KiB", f / KIB)
    } else if f < KIB * KIB * KIB {
        format!("{:.1} MiB", f / KIB / KIB)
    } else {
        format!("{:.1} GiB", f / KIB / KIB / KIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(text: &str, offset: u64, limit: u64, budget: usize, chunk: usize) -> LineWindow {
        let mut w = LineWindow::new(offset, limit, budget);
        let mut done = false;
        for piece in text.as_bytes().chunks(chunk.max(1)) {
            if w.feed(piece) {
                done = true;
                break;
            }
        }
        if !done {
            w.finish(true);
        }
        w
    }

    #[test]
    fn lines_are_numbered_like_cat_n_whatever_the_chunks() {
        for chunk in [1, 2, 3, 7, 1000] {
            let w = window("one\ntwo\nthree\n", 1, 2000, 10_000, chunk);
            assert_eq!(w.out, "     1\tone\n     2\ttwo\n     3\tthree\n");
            assert_eq!(
                (w.first, w.last, w.complete, w.lines),
                (Some(1), Some(3), true, 3)
            );
            assert_eq!(w.next_offset(), None);
        }
        // A last line without a newline is a line; an empty file has none.
        let w = window("a\nb", 1, 10, 1000, 1);
        assert_eq!(w.out, "     1\ta\n     2\tb\n");
        assert_eq!(w.lines, 2);
        let w = window("", 1, 10, 1000, 1);
        assert_eq!((w.out.as_str(), w.lines, w.first), ("", 0, None));
        // Empty lines are numbered too.
        let w = window("\n\nx\n", 1, 10, 1000, 4);
        assert_eq!(w.out, "     1\t\n     2\t\n     3\tx\n");
    }

    #[test]
    fn offset_and_limit_pick_the_lines_and_say_where_to_go_on() {
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        let w = window(&text, 4, 3, 10_000, 5);
        assert_eq!(w.out, "     4\tl4\n     5\tl5\n     6\tl6\n");
        assert_eq!(w.stop, Some(Stop::Limit));
        assert_eq!(w.next_offset(), Some(7));
        assert!(!w.complete);
        // Past the end: nothing shown, the count is known.
        let w = window(&text, 50, 3, 10_000, 5);
        assert_eq!((w.out.as_str(), w.complete, w.lines), ("", true, 10));
        // The last lines exactly: no stop, the file is complete.
        let w = window(&text, 8, 3, 10_000, 3);
        assert_eq!(w.out, "     8\tl8\n     9\tl9\n    10\tl10\n");
        assert_eq!((w.stop, w.complete, w.lines), (None, true, 10));
        assert_eq!(w.next_offset(), None);
    }

    #[test]
    fn the_budget_stops_the_window_at_a_whole_line() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let w = window(&text, 1, 2000, 60, 13);
        // Each line shows as 6 + 1 + len + 1 bytes: 15 bytes for "line N" (N < 10).
        assert_eq!(w.out.lines().count(), 4);
        assert_eq!(w.stop, Some(Stop::Budget));
        assert_eq!(w.next_offset(), Some(5));
    }

    #[test]
    fn long_lines_are_cut_with_their_length() {
        let long = "y".repeat(5000);
        let w = window(&format!("{long}\nshort\n"), 1, 10, 100_000, 999);
        let first = w.out.lines().next().unwrap();
        assert!(first.starts_with(&format!("     1\t{}", "y".repeat(MAX_LINE_CHARS))));
        assert!(first.ends_with("[... line cut at 2000 characters; it is 5000 bytes long]"));
        assert_eq!(w.long_lines, 1);
        assert!(w.out.ends_with("     2\tshort\n"));
        // Exactly 2000 characters (multi-byte ones) are not cut.
        let w = window(&"ü".repeat(2000), 1, 10, 100_000, 7);
        assert_eq!(w.long_lines, 0);
    }

    #[test]
    fn images_are_known_by_their_magic_bytes_with_their_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(image_mime(&png), Some("image/png"));
        assert_eq!(image_size("image/png", &png), Some((640, 480)));
        let gif = b"GIF89a\x20\x00\x10\x00rest";
        assert_eq!(image_mime(gif), Some("image/gif"));
        assert_eq!(image_size("image/gif", gif), Some((32, 16)));
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, // APP0, 2 bytes of payload
            0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0x2C, 0x00, 0xC8, // SOF0: 300 high, 200 wide
        ];
        assert_eq!(image_mime(&jpeg), Some("image/jpeg"));
        assert_eq!(image_size("image/jpeg", &jpeg), Some((200, 300)));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend_from_slice(&[0; 8]);
        webp.extend_from_slice(&[99, 0, 0, 49, 0, 0]); // 100 x 50, minus one each
        assert_eq!(image_mime(&webp), Some("image/webp"));
        assert_eq!(image_size("image/webp", &webp), Some((100, 50)));
        assert_eq!(image_mime(b"hello"), None);
        assert_eq!(image_mime(b"RIFF\0\0\0\0WAVE"), None);
    }

    #[test]
    fn binary_is_told_from_text() {
        assert_eq!(not_text(b"plain text\n"), None);
        assert_eq!(not_text("grüße".as_bytes()), None);
        assert_eq!(not_text(b"a\0b"), Some("it holds NUL bytes"));
        assert_eq!(not_text(b"\xff\xfe\x41"), Some("it is not UTF-8 text"));
        // A character cut by the sample's end is still text.
        let mut long = "a".repeat(SNIFF_BYTES - 1).into_bytes();
        long.extend_from_slice("ü".as_bytes());
        long.extend_from_slice(b"more");
        assert_eq!(not_text(&long), None);
    }

    #[test]
    fn an_incomplete_character_at_the_end_is_held_back() {
        assert_eq!(incomplete_utf8_tail(b"abc"), 0);
        let u = "ü".as_bytes(); // 2 bytes
        assert_eq!(incomplete_utf8_tail(&[b'a', u[0]]), 1);
        assert_eq!(incomplete_utf8_tail(&[b'a', u[0], u[1]]), 0);
        let e = "€".as_bytes(); // 3 bytes
        assert_eq!(incomplete_utf8_tail(&e[..2]), 2);
        assert_eq!(incomplete_utf8_tail(e), 0);
        let f = "🦀".as_bytes(); // 4 bytes
        assert_eq!(incomplete_utf8_tail(&f[..3]), 3);
        assert_eq!(incomplete_utf8_tail(f), 0);
        assert_eq!(incomplete_utf8_tail(b""), 0);
    }

    #[test]
    fn byte_counts_read_as_words() {
        assert_eq!(human_bytes(12), "12 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
