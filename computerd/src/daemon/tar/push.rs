//! tar.push.*: the caller's side of a push, and the archive on its way to
//! the extractor.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use tokio::sync::{mpsc, oneshot, watch};

use crate::daemon::sys::path_error;
use crate::protocol::{RpcError, clean_path, limits};

use super::extract::Extractor;
use super::{BLOCK, MADE_DIR_MODE};

/// What the pushing side hands the extractor.
enum Msg {
    /// The next bytes, numbered so a write knows its own were consumed.
    Data(u64, Vec<u8>),
    /// The caller ended the archive.
    End,
}

/// A push: bytes are extracted as they come.
pub struct Push {
    path: String,
    tx: mpsc::Sender<Msg>,
    /// The number of the last chunk the extractor used up.
    consumed: watch::Receiver<u64>,
    /// How many bytes were handed on so far: where the next write's
    /// `offset` must be.
    received: watch::Sender<u64>,
    result: Option<oneshot::Receiver<Result<u64, RpcError>>>,
    /// How the extraction ended, once it has.
    outcome: Option<Result<u64, RpcError>>,
    seq: u64,
}

impl Push {
    pub fn begin(path: &str) -> Result<Push, RpcError> {
        const OP: &str = "tar.push.begin";
        let path = clean_path("path", path)?;
        crate::daemon::files::make_dirs(OP, &path, MADE_DIR_MODE)?;
        // Opened once: every entry is reached from this descriptor, so
        // whatever later happens to the path by name changes nothing.
        // O_PATH: it only has to be searchable.
        let root = nix::fcntl::open(
            path.as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| path_error(OP, &path, e))?;

        let (tx, rx) = mpsc::channel(1);
        let (consumed_tx, consumed) = watch::channel(0);
        let (result_tx, result_rx) = oneshot::channel();
        let abandoned = Arc::new(AtomicBool::new(false));
        let reader = ChannelReader {
            rx,
            consumed: consumed_tx,
            chunk: Vec::new(),
            at: 0,
            holding: None,
            ended: false,
            abandoned: Arc::clone(&abandoned),
        };
        let extractor = Extractor::new(root, abandoned);
        std::thread::Builder::new()
            .name("tar-push".into())
            .spawn(move || {
                let _ = result_tx.send(extractor.run(reader));
            })
            .map_err(|e| {
                RpcError::limit(format!(
                    "{OP} {path}: no thread could be started to extract: {e}"
                ))
            })?;
        Ok(Push {
            path,
            tx,
            consumed,
            received: watch::Sender::new(0),
            result: Some(result_rx),
            outcome: None,
            seq: 0,
        })
    }

    /// Hand the next bytes; returns once they were consumed by the extractor
    /// (or it failed: then the error, e.g. denied for a bad entry; entries
    /// before it stay).
    pub async fn write(&mut self, data: Vec<u8>) -> Result<(), RpcError> {
        match self.send(data).await {
            Sent::Done(r) => r,
            Sent::Waiting(w) => {
                if w.consumed().await {
                    Ok(())
                } else {
                    self.settle().await.map(drop)
                }
            }
        }
    }

    /// How many bytes were handed on so far.
    pub fn received(&self) -> u64 {
        *self.received.borrow()
    }

    /// Watches [`Push::received`] (it closes when the push is dropped).
    pub fn progress(&self) -> watch::Receiver<u64> {
        self.received.subscribe()
    }

    /// Hand the next bytes on, in order; what to wait for comes back, so a
    /// caller holding the push under a lock can wait without it and let the
    /// next write in (pipelined writes).
    pub async fn send(&mut self, data: Vec<u8>) -> Sent {
        let len = data.len() as u64;
        if len > limits::MAX_WRITE_BYTES {
            return Sent::Done(Err(RpcError::over_limit(
                "data",
                len,
                limits::MAX_WRITE_BYTES,
            )));
        }
        if let Some(outcome) = &self.outcome {
            // After a good end of the archive, what follows (tar pads to a
            // record) is ignored; after a failure, the failure repeats.
            return Sent::Done(outcome.clone().map(drop));
        }
        if data.is_empty() {
            return Sent::Done(Ok(()));
        }
        self.seq += 1;
        let seq = self.seq;
        self.received.send_modify(|r| *r += len);
        if self.tx.send(Msg::Data(seq, data)).await.is_err() {
            return Sent::Done(self.settle().await.map(drop));
        }
        Sent::Waiting(Consumed {
            seq,
            consumed: self.consumed.clone(),
        })
    }
    /// End of the archive: waits for extraction to finish, applies directory
    /// modes deepest first, returns the number of entries extracted.
    pub async fn end(mut self) -> Result<u64, RpcError> {
        if self.outcome.is_none() {
            // Fails only when the extractor already ended; settle says how.
            let _ = self.tx.send(Msg::End).await;
        }
        self.settle().await
    }

    /// Abandon (connection ended): stop the extractor; no half-written file
    /// may remain. Dropping the sender makes the extractor's next read fail:
    /// it removes the temporary file it was writing, gives the directories it
    /// made their modes and ends, on its own thread.
    pub fn abort(self) {
        drop(self);
    }

    pub async fn settle(&mut self) -> Result<u64, RpcError> {
        if let Some(outcome) = &self.outcome {
            return outcome.clone();
        }
        let outcome = match self.result.take() {
            Some(rx) => rx.await.unwrap_or_else(|_| {
                Err(RpcError::invalid(format!(
                    "tar.push {}: the extraction stopped unexpectedly",
                    self.path
                )))
            }),
            None => Err(RpcError::invalid(format!(
                "tar.push {}: the extraction has no result",
                self.path
            ))),
        };
        self.outcome = Some(outcome.clone());
        outcome
    }
}

/// What a [`Push::send`] leaves to wait for.
pub enum Sent {
    /// Nothing: its outcome.
    Done(Result<(), RpcError>),
    /// The extractor using the bytes up.
    Waiting(Consumed),
}

/// One write's bytes on their way through the extractor.
pub struct Consumed {
    seq: u64,
    consumed: watch::Receiver<u64>,
}

impl Consumed {
    /// True once the extractor used the bytes up; false when it ended
    /// first (then [`Push::settle`]'s outcome says how).
    pub async fn consumed(mut self) -> bool {
        let seq = self.seq;
        self.consumed.wait_for(|&n| n >= seq).await.is_ok()
    }
}

/// The archive as the extractor reads it: chunks from [`Push::send`].
pub(super) struct ChannelReader {
    rx: mpsc::Receiver<Msg>,
    consumed: watch::Sender<u64>,
    chunk: Vec<u8>,
    at: usize,
    /// The number of the chunk being read, until it is used up.
    holding: Option<u64>,
    /// The caller ended the archive: end of file from here on.
    ended: bool,
    abandoned: Arc<AtomicBool>,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.at < self.chunk.len() || buf.is_empty() {
                let n = buf.len().min(self.chunk.len() - self.at);
                buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if self.ended {
                return Ok(0);
            }
            // The chunk is used up and more is wanted: its write returns now.
            if let Some(seq) = self.holding.take() {
                self.consumed.send_replace(seq);
            }
            match self.rx.blocking_recv() {
                Some(Msg::Data(seq, data)) => {
                    self.chunk = data;
                    self.at = 0;
                    self.holding = Some(seq);
                }
                Some(Msg::End) => self.ended = true,
                None => {
                    self.abandoned.store(true, Ordering::SeqCst);
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the push was abandoned",
                    ));
                }
            }
        }
    }
}

/// The most bytes a metadata entry (GNU long name or link, PAX header) may
/// hold. The tar crate reads such an entry whole into memory, so a hostile
/// archive could otherwise make the daemon allocate whatever its header says.
const MAX_META_ENTRY_BYTES: u64 = 1 << 20;

/// Watches the archive go by, block by block, and refuses a metadata entry
/// over [`MAX_META_ENTRY_BYTES`] before the tar crate allocates for it.
pub(super) struct MetaBound<R> {
    inner: R,
    header: [u8; BLOCK as usize],
    have: usize,
    /// Bytes of the current entry's data (with padding) still to pass.
    skip: u64,
}

impl<R> MetaBound<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            header: [0; BLOCK as usize],
            have: 0,
            skip: 0,
        }
    }

    fn on_header(&mut self) -> io::Result<()> {
        let h = &self.header;
        if h.iter().all(|&b| b == 0) {
            return Ok(());
        }
        let size = header_size(&h[124..136]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "an entry's size field is not a number",
            )
        })?;
        let meta = matches!(h[156], b'L' | b'K' | b'x' | b'g');
        if meta && size > MAX_META_ENTRY_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a long-name or PAX entry of {size} bytes is over the {MAX_META_ENTRY_BYTES} bytes tar.push reads"
                ),
            ));
        }
        self.skip = size.div_ceil(BLOCK).saturating_mul(BLOCK);
        Ok(())
    }
}

/// A header's size field: octal ASCII, or GNU base-256 when its top bit is set.
fn header_size(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut n: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            n = n.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(n);
    }
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .filter(|b| !matches!(b, 0 | b' '))
        .collect();
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(std::str::from_utf8(&digits).ok()?, 8).ok()
}

impl<R: Read> Read for MetaBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut i = 0;
        while i < n {
            if self.skip > 0 {
                let k = (self.skip.min((n - i) as u64)) as usize;
                self.skip -= k as u64;
                i += k;
                continue;
            }
            let k = (self.header.len() - self.have).min(n - i);
            self.header[self.have..self.have + k].copy_from_slice(&buf[i..i + k]);
            self.have += k;
            i += k;
            if self.have == self.header.len() {
                self.have = 0;
                self.on_header()?;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::tar::testing::*;
    use crate::protocol::ErrorKind;
    use std::time::{Duration, Instant};
    use tar::{EntryType, Header};

    #[test]
    fn push_abandoned_mid_file_leaves_no_half_file() {
        let dst = tempfile::tempdir().unwrap();
        let ar = archive(&[raw_entry(
            "big",
            EntryType::Regular,
            0o644,
            &vec![7u8; 300_000],
            None,
        )]);
        block_on(async {
            let mut push = Push::begin(&s(dst.path())).unwrap();
            push.write(ar[..100_000].to_vec()).await.unwrap();
            // The extractor consumed the bytes: the file is being written beside its name.
            let now = names(dst.path());
            assert_eq!(now.len(), 1);
            assert!(now[0].starts_with(".big.computerd-"), "{now:?}");
            push.abort();
        });
        let until = Instant::now() + Duration::from_secs(5);
        while !names(dst.path()).is_empty() {
            assert!(
                Instant::now() < until,
                "left behind: {:?}",
                names(dst.path())
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn push_refuses_a_huge_long_name_entry_before_reading_it() {
        let dst = tempfile::tempdir().unwrap();
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::GNULongName);
        h.set_path("././@LongLink").unwrap();
        h.set_mode(0o644);
        h.set_size(8 << 30);
        h.set_cksum();
        let mut ar = h.as_bytes().to_vec();
        ar.extend(std::iter::repeat_n(b'a', 4096));
        let e = push_all(dst.path(), &ar, 1000).unwrap_err();
        assert!(
            e.message.contains("over the 1048576 bytes tar.push reads"),
            "{}",
            e.message
        );
        assert_eq!(header_size(b"00000001750\0"), Some(1000));
        assert_eq!(
            header_size(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]),
            Some(256)
        );
    }

    #[test]
    fn push_ignores_bytes_after_the_end_and_repeats_a_failure() {
        let dst = tempfile::tempdir().unwrap();
        let mut ar = archive(&[raw_entry("a", EntryType::Regular, 0o644, b"a", None)]);
        ar.resize(10240, 0);
        assert_eq!(push_all(dst.path(), &ar, 1024).unwrap(), 1);

        block_on(async {
            let mut push = Push::begin(&s(dst.path())).unwrap();
            let bad = archive(&[raw_entry("../x", EntryType::Regular, 0o644, b"x", None)]);
            assert_eq!(
                push.write(bad).await.unwrap_err().kind(),
                Some(ErrorKind::Denied)
            );
            assert_eq!(
                push.write(vec![0; 10]).await.unwrap_err().kind(),
                Some(ErrorKind::Denied)
            );
            assert_eq!(
                push.end().await.unwrap_err().kind(),
                Some(ErrorKind::Denied)
            );
            let empty = Push::begin(&s(dst.path())).unwrap();
            assert_eq!(empty.end().await.unwrap(), 0);
            let mut big = Push::begin(&s(dst.path())).unwrap();
            let err = big
                .write(vec![0; limits::MAX_WRITE_BYTES as usize + 1])
                .await
                .unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::Limit));
            big.abort();
        });
        assert_eq!(names(dst.path()), vec!["a"]);
    }

    #[test]
    fn push_begin_makes_the_directory_and_refuses_a_file() {
        let top = tempfile::tempdir().unwrap();
        let f = top.path().join("file");
        std::fs::write(&f, b"").unwrap();
        assert_eq!(
            Push::begin(&s(&f.join("sub"))).err().unwrap().kind(),
            Some(ErrorKind::NotDir)
        );
        assert_eq!(
            Push::begin(&s(&f)).err().unwrap().kind(),
            Some(ErrorKind::NotDir)
        );
        assert_eq!(
            Push::begin("relative").err().unwrap().kind(),
            Some(ErrorKind::Invalid)
        );
        let made = top.path().join("a/b");
        Push::begin(&s(&made)).unwrap().abort();
        assert!(made.is_dir());
    }
}
