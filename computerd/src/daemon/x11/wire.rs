//! The byte stream under the X11 connection, which trusts the server with
//! nothing: the setup and every reply are measured from their headers as
//! they arrive, and one longer than its request can get back ends the
//! connection before the client allocates anything for it; a server that
//! goes silent while an answer is awaited ends it too.

use std::io::{self, IoSlice};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use x11rb::rust_connection::{DefaultStream, PollMode, Stream};
use x11rb::utils::RawFdContainer;

use crate::protocol::limits;

/// How long the server may stay silent while the daemon waits on it.
pub const SILENCE: Duration = Duration::from_secs(5);

/// The most bytes the next reply may hold; the session sets it around a
/// request that can get more back than [`limits::MAX_X11_REPLY_BYTES`].
#[derive(Clone)]
pub struct Allowance(Arc<AtomicU64>);

impl Allowance {
    pub fn new() -> Self {
        Self(Arc::new(AtomicU64::new(limits::MAX_X11_REPLY_BYTES)))
    }
    pub fn set(&self, bytes: u64) {
        self.0
            .store(bytes.max(limits::MAX_X11_REPLY_BYTES), Ordering::SeqCst);
    }
    pub fn reset(&self) {
        self.0.store(limits::MAX_X11_REPLY_BYTES, Ordering::SeqCst);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl Default for Allowance {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Framing {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the reader is in the server's messages.
#[derive(Debug)]
pub struct Framing {
    setup_done: bool,
    head: [u8; 32],
    head_len: usize,
    /// Bytes of the current message still to come, past its header.
    rest: u64,
}

impl Framing {
    pub fn new() -> Self {
        Self {
            setup_done: false,
            head: [0; 32],
            head_len: 0,
            rest: 0,
        }
    }

    /// Account for `bytes` from the server; an error when a message's
    /// header says more than `allowed` (the setup: its own bound).
    pub fn feed(&mut self, mut bytes: &[u8], allowed: u64) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.rest > 0 {
                let n = self.rest.min(bytes.len() as u64);
                self.rest -= n;
                bytes = &bytes[n as usize..];
                continue;
            }
            let need = if self.setup_done { 32 } else { 8 };
            let n = (need - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
            self.head_len += n;
            bytes = &bytes[n..];
            if self.head_len < need {
                continue;
            }
            self.head_len = 0;
            let h = &self.head;
            if !self.setup_done {
                let total = 8 + 4 * u64::from(u16::from_ne_bytes([h[6], h[7]]));
                if total > limits::MAX_X11_SETUP_BYTES {
                    return Err(too_long("setup", total, limits::MAX_X11_SETUP_BYTES));
                }
                self.setup_done = true;
                self.rest = total - 8;
                continue;
            }
            let kind = h[0] & 0x7f;
            // A reply (1) and a generic event (35) say their length; an
            // error or any other event is 32 bytes.
            if kind == 1 || kind == 35 {
                let total = 32 + 4 * u64::from(u32::from_ne_bytes([h[4], h[5], h[6], h[7]]));
                if total > allowed {
                    return Err(too_long("reply", total, allowed));
                }
                self.rest = total - 32;
            }
        }
        Ok(())
    }
}

fn too_long(what: &str, got: u64, most: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the X server sent a {what} of {got} bytes where at most {most} can come; the connection was ended"
        ),
    )
}

/// [`DefaultStream`] with the framing check on every read and a bound on
/// the server's silence.
pub struct Bounded {
    inner: DefaultStream,
    framing: Mutex<Framing>,
    allowance: Allowance,
}

impl Bounded {
    pub fn new(inner: DefaultStream, allowance: Allowance) -> Self {
        Self {
            inner,
            framing: Mutex::new(Framing::new()),
            allowance,
        }
    }
}

impl Stream for Bounded {
    fn poll(&self, mode: PollMode) -> io::Result<()> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut flags = PollFlags::empty();
        if mode.readable() {
            flags |= PollFlags::POLLIN;
        }
        if mode.writable() {
            flags |= PollFlags::POLLOUT;
        }
        let mut fds = [PollFd::new(self.inner.as_fd(), flags)];
        let timeout = PollTimeout::try_from(SILENCE.as_millis() as i32).unwrap_or(PollTimeout::MAX);
        loop {
            match poll(&mut fds, timeout) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the X server did not answer within {} s", SILENCE.as_secs()),
                    ));
                }
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn read(&self, buf: &mut [u8], fd_storage: &mut Vec<RawFdContainer>) -> io::Result<usize> {
        let mut fds = Vec::new();
        let n = self.inner.read(buf, &mut fds)?;
        if !fds.is_empty() {
            // Nothing this client asks for comes with a descriptor.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the X server sent file descriptors nobody asked for; the connection was ended",
            ));
        }
        let _ = fd_storage;
        let mut f = self.framing.lock().unwrap_or_else(|p| p.into_inner());
        f.feed(&buf[..n], self.allowance.get())?;
        Ok(n)
    }

    fn write(&self, buf: &[u8], fds: &mut Vec<RawFdContainer>) -> io::Result<usize> {
        self.inner.write(buf, fds)
    }

    fn write_vectored(
        &self,
        bufs: &[IoSlice<'_>],
        fds: &mut Vec<RawFdContainer>,
    ) -> io::Result<usize> {
        self.inner.write_vectored(bufs, fds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(len_words: u32) -> Vec<u8> {
        let mut h = vec![0u8; 32];
        h[0] = 1;
        h[4..8].copy_from_slice(&len_words.to_ne_bytes());
        h
    }

    #[test]
    fn framing_measures_setup_replies_and_events_in_pieces() {
        let mut f = Framing::new();
        let mut setup = vec![1u8, 0, 11, 0, 0, 0];
        setup.extend_from_slice(&2u16.to_ne_bytes());
        setup.extend_from_slice(&[0; 8]);
        // Byte by byte.
        for b in &setup {
            f.feed(&[*b], 0).unwrap();
        }
        let mut r = reply(2);
        r.extend_from_slice(&[9; 8]);
        r.extend_from_slice(&[2; 32]); // an event (key press)
        r.extend(reply(0));
        f.feed(&r[..5], 40).unwrap();
        f.feed(&r[5..], 40).unwrap();
        assert_eq!((f.head_len, f.rest), (0, 0));
        // A reply longer than allowed ends it at its header.
        let e = f.feed(&reply(3), 40).unwrap_err();
        assert!(e.to_string().contains("44 bytes where at most 40"), "{e}");
    }

    #[test]
    fn a_setup_over_its_bound_is_refused() {
        let mut f = Framing::new();
        let mut setup = vec![1u8, 0, 11, 0, 0, 0];
        setup.extend_from_slice(&u16::MAX.to_ne_bytes());
        let e = f.feed(&setup, 0).unwrap_err();
        assert!(e.to_string().contains("setup"), "{e}");
    }
}
