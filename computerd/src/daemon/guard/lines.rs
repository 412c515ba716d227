//! The control socket's lines: written whole, read into lines with a
//! sanity cap.

use super::*;

pub(super) struct BorrowedWriter<'a>(pub(super) BorrowedFd<'a>);

impl Write for BorrowedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        nix::unistd::write(self.0, buf).map_err(io::Error::from)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Lines from the control socket; commands are small, so no bound is needed
/// beyond a sanity cap.
#[derive(Default)]
pub(super) struct LineReader {
    buf: Vec<u8>,
}

impl LineReader {
    const CAP: usize = 4 << 20;

    /// Read what is there; false at EOF.
    pub(super) fn fill(&mut self, fd: &OwnedFd) -> io::Result<bool> {
        let mut chunk = [0u8; 4096];
        let n = BorrowedReader(fd.as_fd()).read(&mut chunk)?;
        if n == 0 {
            return Ok(false);
        }
        if self.buf.len() + n > Self::CAP {
            return Err(io::Error::other("control line too long"));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(true)
    }

    /// Bytes read by another way (the first of the spec, with the stdio).
    pub(super) fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() > Self::CAP {
            return Err(io::Error::other("control line too long"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    pub(super) fn next_line(&mut self) -> Option<Vec<u8>> {
        let i = self.buf.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.buf.drain(..=i).collect();
        line.pop();
        Some(line)
    }

    pub(super) fn read_blocking(&mut self, fd: &OwnedFd) -> io::Result<Vec<u8>> {
        loop {
            if let Some(line) = self.next_line() {
                return Ok(line);
            }
            if !self.fill(fd)? {
                return Err(io::Error::other(
                    "the daemon closed the control socket before the spec",
                ));
            }
        }
    }
}

struct BorrowedReader<'a>(BorrowedFd<'a>);

impl Read for BorrowedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match nix::unistd::read(self.0, buf) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
