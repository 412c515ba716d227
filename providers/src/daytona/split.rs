//! Daytona's split output, read back into stdout and stderr.
//!
//! With `X-Daytona-Split-Output: true` the toolbox writes each line of a
//! session command's output behind a 3-byte marker, `01 01 01` for
//! stdout and `02 02 02` for stderr, and re-adds the newline
//! (daytonaio/daytona@b5a5d9e7 apps/daemon/pkg/session/execute.go:196-236,
//! common.go:17-33). Its log WebSocket sends frames of up to 1024 bytes cut
//! anywhere, so a marker may straddle two frames: [`Split`] keeps what it
//! has seen of one until the next frame decides it (the SDK does the same,
//! daytona/clients sdk-typescript/src/utils/Stream.ts:116-305).
//!
//! A line that starts with no marker (a toolbox that strips them) is
//! stdout's: the bridge then still gets its bytes.

/// The marker before a stdout line.
pub const STDOUT: [u8; 3] = [1, 1, 1];
/// The marker before a stderr line.
pub const STDERR: [u8; 3] = [2, 2, 2];

/// Which stream a byte belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Stdout,
    Stderr,
}

/// The demuxer's state between frames.
#[derive(Clone, Debug)]
pub struct Split {
    /// At a line's start: the bytes of a marker seen so far (0 to 2).
    /// Inside a line: `None`.
    head: Option<Vec<u8>>,
    /// The stream of the line under way.
    which: Which,
}

impl Default for Split {
    fn default() -> Self {
        Self {
            head: Some(Vec::new()),
            which: Which::Stdout,
        }
    }
}

impl Split {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one frame; every byte decided is passed to `out` with its
    /// stream, in order (runs of one stream together).
    pub fn feed(&mut self, frame: &[u8], mut out: impl FnMut(Which, &[u8])) {
        let mut i = 0;
        while i < frame.len() {
            if let Some(head) = self.head.as_mut() {
                head.push(frame[i]);
                i += 1;
                let marker = match head.first() {
                    Some(1) => STDOUT,
                    _ => STDERR,
                };
                if head.iter().zip(marker).all(|(a, b)| *a == b) {
                    if head.len() == 3 {
                        self.which = if marker == STDOUT {
                            Which::Stdout
                        } else {
                            Which::Stderr
                        };
                        self.head = None;
                    }
                    continue;
                }
                // Not a marker: the bytes held are an unmarked line's.
                let held = std::mem::take(head);
                out(Which::Stdout, &held);
                self.which = Which::Stdout;
                if held.last() != Some(&b'\n') {
                    self.head = None;
                }
                continue;
            }
            let rest = &frame[i..];
            let end = rest
                .iter()
                .position(|b| *b == b'\n')
                .map_or(rest.len(), |p| p + 1);
            out(self.which, &rest[..end]);
            i += end;
            if rest[end - 1] == b'\n' {
                self.head = Some(Vec::new());
            }
        }
    }

    /// At the stream's end: the bytes of a marker cut short, which were
    /// no marker after all (stdout's).
    pub fn finish(&mut self, mut out: impl FnMut(Which, &[u8])) {
        if let Some(head) = self.head.as_mut()
            && !head.is_empty()
        {
            out(Which::Stdout, head);
            head.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(frames: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let mut s = Split::new();
        for f in frames {
            s.feed(f, |w, b| match w {
                Which::Stdout => o.extend_from_slice(b),
                Which::Stderr => e.extend_from_slice(b),
            });
        }
        s.finish(|_, b| o.extend_from_slice(b));
        (o, e)
    }

    fn marked(lines: &[(Which, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        for (w, l) in lines {
            v.extend_from_slice(if *w == Which::Stdout {
                &STDOUT
            } else {
                &STDERR
            });
            v.extend_from_slice(l);
            v.push(b'\n');
        }
        v
    }

    #[test]
    fn a_stream_cut_at_every_byte_reads_the_same() {
        let stream = marked(&[
            (Which::Stdout, b"{\"jsonrpc\":\"2.0\",\"id\":1}"),
            (Which::Stderr, b"warning: \x01\x01 not a marker"),
            (Which::Stdout, b""),
            (Which::Stderr, b"\x02"),
            (Which::Stdout, b"last"),
        ]);
        let whole = run(&[&stream]);
        assert_eq!(
            whole,
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1}\n\nlast\n".to_vec(),
                b"warning: \x01\x01 not a marker\n\x02\n".to_vec()
            )
        );
        for cut in 0..=stream.len() {
            assert_eq!(
                run(&[&stream[..cut], &stream[cut..]]),
                whole,
                "cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(&bytes), whole);
    }

    #[test]
    fn unmarked_lines_are_stdout() {
        assert_eq!(
            run(&[b"plain\n\x01x\n", b"\x02\x02"]),
            (b"plain\n\x01x\n\x02\x02".to_vec(), Vec::new())
        );
    }

    proptest! {
        #[test]
        fn any_cuts_of_any_lines_read_the_same(
            lines in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40)), 0..12),
            cuts in proptest::collection::vec(0usize..2000, 0..12),
        ) {
            let lines: Vec<(Which, &[u8])> = lines
                .iter()
                .map(|(out, l)| (if *out { Which::Stdout } else { Which::Stderr }, l.as_slice()))
                .collect();
            let stream = marked(&lines);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut frames = Vec::new();
            let mut at = 0;
            for p in points {
                frames.push(&stream[at..p]);
                at = p;
            }
            frames.push(&stream[at..]);
            let (mut want_o, mut want_e) = (Vec::new(), Vec::new());
            for (w, l) in &lines {
                let into = if *w == Which::Stdout { &mut want_o } else { &mut want_e };
                into.extend_from_slice(l);
                into.push(b'\n');
            }
            prop_assert_eq!(run(&frames), (want_o, want_e));
        }
    }
}
