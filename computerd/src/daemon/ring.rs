//! A process stream's ring: its last bytes, with offsets counted from the start.

use std::collections::VecDeque;

use crate::protocol::{RpcError, limits};

/// What one read of a ring gives.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RingRead {
    pub data: Vec<u8>,
    pub next_offset: u64,
    pub dropped: u64,
}

#[derive(Debug)]
pub struct Ring {
    buf: VecDeque<u8>,
    /// Offset of `buf[0]`.
    start: u64,
    /// Bytes seen so far, kept or dropped.
    end: u64,
    /// The most this ring keeps now (shrinks under budget pressure).
    cap: usize,
    /// The ring was let go to keep the budget: nothing is kept any more.
    released: bool,
    /// The stream reached its end.
    pub closed: bool,
}

impl Default for Ring {
    fn default() -> Self {
        Self::new()
    }
}

impl Ring {
    pub fn new() -> Self {
        Self {
            buf: VecDeque::new(),
            start: 0,
            end: 0,
            cap: limits::RING_BYTES as usize,
            released: false,
            closed: false,
        }
    }

    pub fn size(&self) -> u64 {
        self.end
    }

    /// The most this ring keeps now.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes held in memory.
    pub fn kept(&self) -> u64 {
        self.buf.len() as u64
    }

    pub fn is_released(&self) -> bool {
        self.released
    }

    /// Append; returns the change in bytes kept (may be negative when the
    /// oldest bytes fall out).
    pub fn push(&mut self, data: &[u8]) -> i64 {
        let before = self.buf.len() as i64;
        self.end += data.len() as u64;
        if self.released {
            self.start = self.end;
            return 0;
        }
        // Only the last `cap` bytes of a large write can stay.
        let tail = if data.len() > self.cap {
            &data[data.len() - self.cap..]
        } else {
            data
        };
        self.buf.extend(tail);
        self.trim();
        self.buf.len() as i64 - before
    }

    fn trim(&mut self) {
        let over = self.buf.len().saturating_sub(self.cap);
        if over > 0 {
            self.buf.drain(..over);
        }
        self.start = self.end - self.buf.len() as u64;
    }

    /// Keep at most `cap` bytes from now on; returns the bytes freed.
    pub fn shrink_to(&mut self, cap: usize) -> u64 {
        let before = self.buf.len();
        self.cap = cap.min(self.cap);
        self.trim();
        self.buf.shrink_to(self.cap.min(self.buf.len().max(4096)));
        (before - self.buf.len()) as u64
    }

    /// Let go of every byte; returns the bytes freed.
    pub fn release(&mut self) -> u64 {
        let freed = self.buf.len() as u64;
        self.buf = VecDeque::new();
        self.released = true;
        self.start = self.end;
        freed
    }

    /// Read up to `max` bytes from `offset`. An offset below what is kept
    /// starts at the oldest kept byte, and `dropped` says how many were lost;
    /// one past the end is invalid.
    pub fn read(&self, offset: u64, max: usize, what: &str) -> Result<RingRead, RpcError> {
        if offset > self.end {
            return Err(RpcError::invalid_field(
                "offset",
                format!(
                    "offset {offset} is past the end of {what} ({} bytes so far)",
                    self.end
                ),
            ));
        }
        let from = offset.max(self.start);
        let dropped = from - offset;
        let skip = (from - self.start) as usize;
        let n = (self.buf.len() - skip).min(max);
        let (a, b) = self.buf.as_slices();
        let mut data = Vec::with_capacity(n);
        if skip < a.len() {
            let take = n.min(a.len() - skip);
            data.extend_from_slice(&a[skip..skip + take]);
            data.extend_from_slice(&b[..n - take]);
        } else {
            let s = skip - a.len();
            data.extend_from_slice(&b[s..s + n]);
        }
        Ok(RingRead {
            next_offset: from + n as u64,
            dropped,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_below_the_ring_reports_dropped() {
        let mut r = Ring::new();
        r.shrink_to(10);
        r.push(b"0123456789abcdef");
        assert_eq!(r.size(), 16);
        let got = r.read(0, 100, "stdout").unwrap();
        assert_eq!(
            got,
            RingRead {
                data: b"6789abcdef".to_vec(),
                next_offset: 16,
                dropped: 6
            }
        );
        let got = r.read(8, 3, "stdout").unwrap();
        assert_eq!(
            got,
            RingRead {
                data: b"89a".to_vec(),
                next_offset: 11,
                dropped: 0
            }
        );
        assert_eq!(r.read(16, 3, "stdout").unwrap().data, b"");
        let e = r.read(17, 3, "stdout").unwrap_err();
        assert!(
            e.message.contains("past the end of stdout"),
            "{}",
            e.message
        );
    }

    #[test]
    fn wrapped_buffer_reads_across_both_halves() {
        let mut r = Ring::new();
        r.shrink_to(8);
        for chunk in [b"abcde".as_slice(), b"fghij", b"kl"] {
            r.push(chunk);
        }
        assert_eq!(r.read(4, 8, "x").unwrap().data, b"efghijkl");
        assert_eq!(r.read(6, 3, "x").unwrap().data, b"ghi");
    }

    #[test]
    fn a_released_ring_drops_everything_from_the_offset() {
        let mut r = Ring::new();
        r.push(b"hello");
        assert_eq!(r.release(), 5);
        r.push(b"more");
        let got = r.read(2, 100, "x").unwrap();
        assert_eq!(
            got,
            RingRead {
                data: vec![],
                next_offset: 9,
                dropped: 7
            }
        );
    }
}
