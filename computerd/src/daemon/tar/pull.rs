//! tar.pull.*: a tree out as a tar stream, made only as it is read.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat as RawStat, Mode};
use tar::{EntryType, Header};

use crate::daemon::sys::{errno_of, path_error};
use crate::daemon::walk::{self, Listing, Step, Tree};
use crate::protocol::{RpcError, clean_path};

use super::BLOCK;

/// The two zero blocks that end an archive.
const END_BYTES: usize = 1024;
/// The longest link target a plain header holds; longer ones get a GNU long-link entry.
const HEADER_LINK_BYTES: usize = 100;

/// A pull: the archive is produced only as it is read.
pub struct Pull {
    /// What was pulled, for messages.
    root: String,
    /// A single file was pulled (its entry's name is the root's basename).
    single: bool,
    /// The directories the walk is in, each with its name in the archive
    /// (empty for the pulled directory).
    tree: Option<Tree<PathBuf>>,
    /// The file whose bytes come after `pending`.
    body: Option<Body>,
    /// A header (or padding, or the end blocks) made and not yet read in full.
    pending: Vec<u8>,
    /// How much of `pending` was read.
    sent: usize,
    /// The end blocks were made: the walk is over.
    ended: bool,
    /// What the pull failed with; every later read answers it again.
    failed: Option<RpcError>,
    /// Makes header bytes (GNU long names included); its output is taken
    /// out after every header, so it never holds more than one.
    headers: tar::Builder<Vec<u8>>,
}

struct Body {
    file: File,
    /// Bytes of the entry still to give: the header's size, whatever the file does.
    left: u64,
    /// Zeros after the data, to the next block.
    padding: usize,
    /// The file gave less than its header said: zeros stand in for the rest.
    shrunk: bool,
    path: String,
}

/// An entry the walk found, opened and described from its descriptor.
enum Found {
    File(RawStat, OwnedFd),
    Dir(RawStat, Listing),
    Link(RawStat, OsString),
}

impl Pull {
    pub fn begin(path: &str) -> Result<Pull, RpcError> {
        const OP: &str = "tar.pull.begin";
        let path = clean_path("path", path)?;
        // A FIFO at the path answers at once and is refused below.
        let (fd, st) = crate::daemon::files::open_to_read(OP, &path)?;
        let mut pull = Pull {
            root: path.clone(),
            single: st.st_mode & libc::S_IFMT != libc::S_IFDIR,
            tree: None,
            body: None,
            pending: Vec::new(),
            sent: 0,
            ended: false,
            failed: None,
            headers: tar::Builder::new(Vec::new()),
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => {
                let listing = Listing::read(fd).map_err(|e| path_error(OP, &path, e))?;
                pull.tree = Some(Tree::new(listing, PathBuf::new()));
            }
            libc::S_IFREG => {
                let Some(name) = Path::new(&path).file_name() else {
                    return Err(RpcError::invalid(format!(
                        "{OP} {path}: the file has no name"
                    )));
                };
                let rel = PathBuf::from(name);
                pull.start_file(&st, fd, &rel, path.clone())?;
            }
            _ => {
                return Err(RpcError::invalid(format!(
                    "{OP} {path}: it is not a regular file or a directory; FIFOs, sockets and devices cannot be pulled"
                )));
            }
        }
        Ok(pull)
    }

    /// Up to `max` bytes of the archive (fewer only at its end); eof true once
    /// everything, the two zero end blocks included, was returned.
    pub fn read(&mut self, max: usize) -> Result<(Vec<u8>, bool), RpcError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut out = Vec::with_capacity(max);
        if let Err(e) = self.fill(&mut out, max) {
            // The archive cannot go on past a broken entry; free what is held.
            self.tree = None;
            self.body = None;
            self.failed = Some(e.clone());
            return Err(e);
        }
        let eof = self.ended && self.body.is_none() && self.sent >= self.pending.len();
        Ok((out, eof))
    }

    fn fill(&mut self, out: &mut Vec<u8>, max: usize) -> Result<(), RpcError> {
        while out.len() < max {
            if self.sent < self.pending.len() {
                let n = (max - out.len()).min(self.pending.len() - self.sent);
                out.extend_from_slice(&self.pending[self.sent..self.sent + n]);
                self.sent += n;
                continue;
            }
            if let Some(body) = self.body.as_mut() {
                if body.left == 0 {
                    let padding = body.padding;
                    self.body = None;
                    self.set_pending(vec![0; padding]);
                    continue;
                }
                let want = usize::try_from(body.left)
                    .unwrap_or(usize::MAX)
                    .min(max - out.len());
                let start = out.len();
                out.resize(start + want, 0);
                let got = if body.shrunk {
                    want
                } else {
                    match read_some(&mut body.file, &mut out[start..]) {
                        // The file shrank since its header was made: the
                        // header's size stands, so the zeros already in `out` fill it.
                        Ok(0) => {
                            body.shrunk = true;
                            want
                        }
                        Ok(n) => {
                            out.truncate(start + n);
                            n
                        }
                        Err(e) => return Err(path_error("tar.pull", &body.path, errno_of(&e))),
                    }
                };
                // A file that grew is cut at the header's size: `want` never passes `left`.
                body.left -= got as u64;
                continue;
            }
            if self.ended {
                break;
            }
            if !self.next_entry()? {
                self.ended = true;
                self.set_pending(vec![0; END_BYTES]);
            }
        }
        Ok(())
    }

    fn set_pending(&mut self, bytes: Vec<u8>) {
        self.pending = bytes;
        self.sent = 0;
    }

    /// Make the next entry's header; false when the walk is over.
    fn next_entry(&mut self) -> Result<bool, RpcError> {
        let Some(tree) = self.tree.as_mut() else {
            return Ok(false);
        };
        loop {
            let (listing, rel, name) = match tree.step() {
                None => return Ok(false),
                Some(Step::Left(..)) => continue,
                Some(Step::Name(listing, dir_rel, name)) => (listing, dir_rel.join(&name), name),
            };
            let found = match look(&listing.dir, &name) {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(e) => return Err(path_error("tar.pull", &self.shown(&rel), e)),
            };
            match found {
                Found::File(st, fd) => {
                    let path = self.shown(&rel);
                    self.start_file(&st, fd, &rel, path)?;
                }
                Found::Dir(st, listing) => {
                    let mut header = header_for(&st, EntryType::Directory, 0);
                    // A trailing slash, as tar writes a directory's name.
                    let mut slashed = rel.clone().into_os_string();
                    slashed.push("/");
                    self.emit(&mut header, Path::new(&slashed), None)?;
                    if let Some(tree) = self.tree.as_mut() {
                        tree.push(listing, rel);
                    }
                }
                Found::Link(st, target) => {
                    let mut header = header_for(&st, EntryType::Symlink, 0);
                    self.emit(&mut header, &rel, Some(&target))?;
                }
            }
            return Ok(true);
        }
    }

    fn start_file(
        &mut self,
        st: &RawStat,
        fd: OwnedFd,
        rel: &Path,
        path: String,
    ) -> Result<(), RpcError> {
        let size = u64::try_from(st.st_size).unwrap_or(0);
        let mut header = header_for(st, EntryType::Regular, size);
        self.emit(&mut header, rel, None)?;
        if size > 0 {
            let padding = ((BLOCK - size % BLOCK) % BLOCK) as usize;
            self.body = Some(Body {
                file: File::from(fd),
                left: size,
                padding,
                shrunk: false,
                path,
            });
        }
        Ok(())
    }

    /// Put the header (and any GNU long-name entry before it) in `pending`.
    fn emit(
        &mut self,
        header: &mut Header,
        rel: &Path,
        link: Option<&OsStr>,
    ) -> Result<(), RpcError> {
        let made = match link {
            // set_link_name would tidy the target ("a//b" to "a/b"); a short
            // one goes in as it is.
            Some(target) if target.len() <= HEADER_LINK_BYTES => header
                .set_link_name_literal(target.as_bytes())
                .and_then(|()| self.headers.append_data(header, rel, io::empty())),
            Some(target) => self.headers.append_link(header, rel, target),
            // Size set, no data: only the header is written; the data and its
            // padding follow from `body`.
            None => self.headers.append_data(header, rel, io::empty()),
        };
        let bytes = std::mem::take(self.headers.get_mut());
        made.map_err(|e| {
            RpcError::invalid(format!(
                "tar.pull {}: no tar header can be made for it: {e}",
                self.shown(rel)
            ))
        })?;
        self.set_pending(bytes);
        Ok(())
    }

    fn shown(&self, rel: &Path) -> String {
        if self.single {
            return self.root.clone();
        }
        let root = self.root.trim_end_matches('/');
        format!("{root}/{}", rel.to_string_lossy())
    }
}

/// Open and describe one name of a directory being pulled; None for what the
/// pull leaves out (sockets, devices, FIFOs, and whatever vanished or changed
/// type since readdir).
fn look(dir: &Dir, name: &OsStr) -> Result<Option<Found>, Errno> {
    // Look before opening: a device or FIFO is never opened (opening a device
    // can act, as a tape rewinds), and a symlink is archived as a link.
    let st = match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => match nix::fcntl::readlinkat(dir, name) {
            Ok(target) => Ok(Some(Found::Link(st, target))),
            // Gone, or no longer a symlink.
            Err(Errno::ENOENT | Errno::EINVAL) => Ok(None),
            Err(e) => Err(e),
        },
        libc::S_IFREG => {
            // O_NOFOLLOW and O_NONBLOCK: something swapped in since fstatat
            // (a symlink, a FIFO) fails or opens at once, and the fstat of
            // this descriptor leaves it out. The header comes from that
            // fstat, so it describes the bytes read.
            let fd = match nix::fcntl::openat(
                dir,
                name,
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(Errno::ENOENT | Errno::ELOOP | Errno::ENXIO) => return Ok(None),
                Err(e) => return Err(e),
            };
            let st = nix::sys::stat::fstat(&fd)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Ok(None);
            }
            Ok(Some(Found::File(st, fd)))
        }
        libc::S_IFDIR => {
            let fd = match walk::dir_at(dir, name, OFlag::O_RDONLY) {
                Ok(fd) => fd,
                Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR) => return Ok(None),
                Err(e) => return Err(e),
            };
            let st = nix::sys::stat::fstat(&fd)?;
            Ok(Some(Found::Dir(st, Listing::read(fd)?)))
        }
        _ => Ok(None),
    }
}

fn header_for(st: &RawStat, kind: EntryType, size: u64) -> Header {
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(st.st_mode & 0o7777);
    header.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
    header.set_uid(st.st_uid.into());
    header.set_gid(st.st_gid.into());
    header
}

fn read_some(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::tar::testing::*;
    use crate::protocol::ErrorKind;
    use std::io::Write;
    use std::os::unix::fs::symlink;

    #[test]
    fn pull_of_a_tree_in_small_reads_is_a_whole_archive() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let archive = pull_all(dir.path(), 1000);
        assert_eq!(parse(&archive), expected_tree());
        // The same archive whatever the read size.
        assert_eq!(pull_all(dir.path(), 512 * 1024), archive);
        assert_eq!(pull_all(dir.path(), 1), archive);
    }

    #[test]
    fn pull_of_a_file_is_one_entry_by_its_basename() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("one.txt");
        std::fs::write(&f, b"just this").unwrap();
        chmod(&f, 0o604);
        assert_eq!(
            parse(&pull_all(&f, 100)),
            vec![item(
                "one.txt",
                EntryType::Regular,
                0o604,
                b"just this",
                None
            )]
        );
        // Through a symlink: the file's name is the link's, as given.
        let link = dir.path().join("alias");
        symlink(&f, &link).unwrap();
        assert_eq!(parse(&pull_all(&link, 100))[0].path, "alias");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        assert_eq!(
            Pull::begin(&s(&fifo)).err().unwrap().kind(),
            Some(ErrorKind::Invalid)
        );
        let none = Pull::begin(&s(&dir.path().join("none"))).err().unwrap();
        assert_eq!(none.kind(), Some(ErrorKind::NotFound));
    }

    #[test]
    fn pull_keeps_the_header_size_when_a_file_grows_or_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, vec![b'a'; 1000]).unwrap();
        let mut pull = Pull::begin(&s(&f)).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .unwrap()
            .write_all(&[b'b'; 700])
            .unwrap();
        let (archive, eof) = pull.read(512 * 1024).unwrap();
        assert!(eof);
        assert_eq!(parse(&archive)[0].data, vec![b'a'; 1000]);

        std::fs::write(&f, vec![b'c'; 1000]).unwrap();
        let mut pull = Pull::begin(&s(&f)).unwrap();
        let (head, _) = pull.read(600).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(10)
            .unwrap();
        let (rest, eof) = pull.read(512 * 1024).unwrap();
        assert!(eof);
        let mut want = vec![b'c'; 88];
        want.extend_from_slice(&[0; 912]);
        assert_eq!(parse(&[head, rest].concat())[0].data, want);
    }
}
