//! tar.pull.* and tar.push.*: whole trees out and in as a tar stream, a chunk a call.
//!
//! A [`Pull`] writes its archive only as it is read: it holds the directories
//! it is in (one descriptor each), the file it is reading and at most one
//! header besides the bytes of the read under way, never the archive.
//!
//! A [`Push`] extracts as bytes come, on a thread of its own that reads the
//! archive from a channel. It confines every write to its directory at the
//! moment of the write: the directory is opened once, and each entry is
//! reached from that descriptor one name at a time with O_NOFOLLOW, so a
//! directory swapped for a symlink between two steps refuses the entry instead
//! of redirecting it. Files are written beside their name and renamed into
//! place, so a failed or abandoned push leaves no half file.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat as RawStat, Mode};
use nix::sys::time::TimeSpec;
use nix::unistd::UnlinkatFlags;
use tar::{EntryType, Header};
use tokio::sync::{mpsc, oneshot};

use super::sys::{errno_of, path_error};
use super::walk::{self, Listing, Step, Stuck, Tree};
use crate::protocol::{RpcError, clean_path, limits};

const BLOCK: u64 = 512;
/// The two zero blocks that end an archive.
const END_BYTES: usize = 1024;
/// The longest link target a plain header holds; longer ones get a GNU long-link entry.
const HEADER_LINK_BYTES: usize = 100;
/// Pushed files are copied through a buffer of this size.
const COPY_BYTES: usize = 64 * 1024;
/// A directory the push makes on an entry's way, without an entry of its own, ends with this mode.
const MADE_DIR_MODE: u32 = 0o755;

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
        // O_NONBLOCK: a FIFO at the path answers at once and is refused below.
        let fd = nix::fcntl::open(
            path.as_str(),
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| path_error(OP, &path, e))?;
        let st = nix::sys::stat::fstat(&fd).map_err(|e| path_error(OP, &path, e))?;
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
            let (listing, rel, name) = match tree.next() {
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
    /// The number of each chunk the extractor used up.
    consumed: mpsc::UnboundedReceiver<u64>,
    result: Option<oneshot::Receiver<Result<u64, RpcError>>>,
    /// How the extraction ended, once it has.
    outcome: Option<Result<u64, RpcError>>,
    seq: u64,
}

impl Push {
    pub fn begin(path: &str) -> Result<Push, RpcError> {
        const OP: &str = "tar.push.begin";
        let path = clean_path("path", path)?;
        super::files::make_dirs(OP, &path, MADE_DIR_MODE)?;
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
        let (consumed_tx, consumed) = mpsc::unbounded_channel();
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
        let extractor = Extractor {
            root,
            dir_modes: BTreeMap::new(),
            entries: 0,
            abandoned,
        };
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
            result: Some(result_rx),
            outcome: None,
            seq: 0,
        })
    }

    /// Hand the next bytes; returns once they were consumed by the extractor
    /// (or it failed: then the error, e.g. denied for a bad entry; entries
    /// before it stay).
    pub async fn write(&mut self, data: Vec<u8>) -> Result<(), RpcError> {
        let len = data.len() as u64;
        if len > limits::MAX_WRITE_BYTES {
            return Err(RpcError::over_limit("data", len, limits::MAX_WRITE_BYTES));
        }
        if let Some(outcome) = &self.outcome {
            // After a good end of the archive, what follows (tar pads to a
            // record) is ignored; after a failure, the failure repeats.
            return outcome.clone().map(drop);
        }
        if data.is_empty() {
            return Ok(());
        }
        self.seq += 1;
        let seq = self.seq;
        if self.tx.send(Msg::Data(seq, data)).await.is_err() {
            return self.settle().await.map(drop);
        }
        loop {
            match self.consumed.recv().await {
                Some(n) if n >= seq => return Ok(()),
                // An earlier write's chunk, whose caller stopped waiting.
                Some(_) => continue,
                None => return self.settle().await.map(drop),
            }
        }
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

    async fn settle(&mut self) -> Result<u64, RpcError> {
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

/// The archive as the extractor reads it: chunks from [`Push::write`].
struct ChannelReader {
    rx: mpsc::Receiver<Msg>,
    consumed: mpsc::UnboundedSender<u64>,
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
                let _ = self.consumed.send(seq);
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
struct MetaBound<R> {
    inner: R,
    header: [u8; BLOCK as usize],
    have: usize,
    /// Bytes of the current entry's data (with padding) still to pass.
    skip: u64,
}

impl<R> MetaBound<R> {
    fn new(inner: R) -> Self {
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

/// The extraction, on its own thread.
struct Extractor {
    /// The push's directory, opened once (O_PATH).
    root: OwnedFd,
    /// Directories that get their mode at the end, by their names from the root.
    dir_modes: BTreeMap<Vec<OsString>, u32>,
    entries: u64,
    abandoned: Arc<AtomicBool>,
}

type Entry<'a> = tar::Entry<'a, MetaBound<ChannelReader>>;

impl Extractor {
    fn run(mut self, reader: ChannelReader) -> Result<u64, RpcError> {
        let mut archive = tar::Archive::new(MetaBound::new(reader));
        let outcome = self.extract_all(&mut archive);
        // After a failure too: the entries before it stay, with their modes.
        self.apply_dir_modes();
        outcome.map(|()| self.entries)
    }

    fn extract_all(
        &mut self,
        archive: &mut tar::Archive<MetaBound<ChannelReader>>,
    ) -> Result<(), RpcError> {
        let entries = archive.entries().map_err(|e| self.archive_error(&e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.archive_error(&e))?;
            self.extract(&mut entry)?;
        }
        Ok(())
    }

    fn archive_error(&self, e: &io::Error) -> RpcError {
        if self.abandoned.load(Ordering::SeqCst) {
            RpcError::aborted("tar.push was abandoned before its archive ended")
        } else {
            RpcError::invalid(format!("tar.push: the archive could not be read: {e}"))
        }
    }

    fn extract(&mut self, entry: &mut Entry<'_>) -> Result<(), RpcError> {
        // path_bytes: the GNU long name or PAX path when there is one.
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        if kind == EntryType::XGlobalHeader {
            // Global PAX records describe the archive, not a file.
            return Ok(());
        }
        let parts = entry_parts(&raw, &shown)?;
        let mode = entry
            .header()
            .mode()
            .map_err(|e| RpcError::invalid(format!("tar.push entry {shown}: its mode cannot be read: {e}")))?
            // Never setuid or setgid; the sticky bit may stay.
            & 0o1777;
        let refuse = |what: &str| {
            RpcError::invalid(format!(
                "tar.push entry {shown}: it is {what}; tar.push extracts files, directories and symlinks only"
            ))
        };
        match kind {
            EntryType::Directory => self.directory(&parts, mode, &shown)?,
            // Old archives mark a directory with a trailing slash only.
            EntryType::Regular if raw.ends_with(b"/") => self.directory(&parts, mode, &shown)?,
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mtime = entry.header().mtime().ok();
                self.file(&parts, mode, mtime, entry, &shown)?;
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                if target.is_empty() {
                    return Err(RpcError::invalid(format!(
                        "tar.push entry {shown}: a symlink without a target"
                    )));
                }
                self.symlink(&parts, &target, &shown)?;
            }
            EntryType::Link => return Err(refuse("a hard link")),
            EntryType::Char | EntryType::Block => return Err(refuse("a device")),
            EntryType::Fifo => return Err(refuse("a pipe (FIFO)")),
            other => {
                let what = format!("of entry type {:?}", char::from(other.as_byte()));
                return Err(refuse(&what));
            }
        }
        self.entries += 1;
        Ok(())
    }

    fn directory(&mut self, parts: &[OsString], mode: u32, shown: &str) -> Result<(), RpcError> {
        // The root itself ("./") keeps its mode: it may be a shared directory
        // such as /tmp, which an archive's idea of its mode must not change.
        let Some(name) = parts.last() else {
            return Ok(());
        };
        let parent = self.parent(parts, shown)?;
        let (fd, found) = match open_dir(&parent, name) {
            Ok(fd) => (fd, true),
            Err(e) => {
                match e {
                    Errno::ENOENT => {}
                    // A symlink or a file at the directory's own name is
                    // replaced, never followed (unlink never removes a directory).
                    Errno::ELOOP | Errno::ENOTDIR => {
                        match nix::unistd::unlinkat(
                            &parent,
                            name.as_os_str(),
                            UnlinkatFlags::NoRemoveDir,
                        ) {
                            Ok(()) | Err(Errno::ENOENT) => {}
                            Err(e) => return Err(entry_error(shown, e)),
                        }
                    }
                    e => return Err(entry_error(shown, e)),
                }
                match nix::sys::stat::mkdirat(
                    &parent,
                    name.as_os_str(),
                    Mode::from_bits_truncate(0o700),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(entry_error(shown, e)),
                }
                let fd = open_dir(&parent, name).map_err(|e| way_error(shown, parts, e))?;
                (fd, false)
            }
        };
        // Owner access until the archive ends, so the entries after it go in.
        match nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode | 0o700)) {
            Ok(()) => {}
            // A directory found there and owned by someone else keeps its mode.
            Err(Errno::EPERM) if found => {}
            Err(e) => return Err(entry_error(shown, e)),
        }
        self.dir_modes.insert(parts.to_vec(), mode);
        Ok(())
    }

    fn file(
        &mut self,
        parts: &[OsString],
        mode: u32,
        mtime: Option<u64>,
        entry: &mut Entry<'_>,
        shown: &str,
    ) -> Result<(), RpcError> {
        let Some(name) = parts.last() else {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: a file cannot take the name of the directory itself"
            )));
        };
        let parent = self.parent(parts, shown)?;
        // Written beside its name and renamed over it: the name never holds
        // half a file, and a symlink there is replaced, never followed.
        let (tmp, fd) = create_temp(&parent, name).map_err(|e| entry_error(shown, e))?;
        let placed = self
            .write_file(fd, mode, mtime, entry, shown)
            .and_then(|()| {
                nix::fcntl::renameat(&parent, tmp.as_os_str(), &parent, name.as_os_str())
                    .map_err(|e| entry_error(shown, e))
            });
        if placed.is_err() {
            let _ = nix::unistd::unlinkat(&parent, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        placed
    }

    fn write_file(
        &self,
        fd: OwnedFd,
        mode: u32,
        mtime: Option<u64>,
        entry: &mut Entry<'_>,
        shown: &str,
    ) -> Result<(), RpcError> {
        let mut file = File::from(fd);
        let mut buf = vec![0u8; COPY_BYTES];
        let mut copied = 0u64;
        loop {
            let n = match entry.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.archive_error(&e)),
            };
            file.write_all(&buf[..n])
                .map_err(|e| entry_error(shown, errno_of(&e)))?;
            copied += n as u64;
        }
        // The tar crate reads an entry's data as a plain `take`: an archive
        // that ends inside it looks like a short entry, not an error.
        if copied < entry.size() {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: the archive ended {copied} bytes into its {} bytes",
                entry.size()
            )));
        }
        nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(mode))
            .map_err(|e| entry_error(shown, e))?;
        if let Some(mtime) = mtime.and_then(|m| i64::try_from(m).ok()) {
            // The archive's time, as tar gives it; the access time is left alone.
            nix::sys::stat::futimens(&file, &TimeSpec::UTIME_OMIT, &TimeSpec::new(mtime, 0))
                .map_err(|e| entry_error(shown, e))?;
        }
        Ok(())
    }

    fn symlink(&mut self, parts: &[OsString], target: &[u8], shown: &str) -> Result<(), RpcError> {
        let Some(name) = parts.last() else {
            return Err(RpcError::invalid(format!(
                "tar.push entry {shown}: a symlink cannot take the name of the directory itself"
            )));
        };
        let parent = self.parent(parts, shown)?;
        // Made beside its name and renamed over it, so whatever is there (a
        // symlink included) is replaced, never followed.
        let mut made = None;
        for _ in 0..TEMP_TRIES {
            let tmp = temp_name(name);
            match nix::unistd::symlinkat(OsStr::from_bytes(target), &parent, tmp.as_os_str()) {
                Ok(()) => {
                    made = Some(tmp);
                    break;
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(entry_error(shown, e)),
            }
        }
        let Some(tmp) = made else {
            return Err(entry_error(shown, Errno::EEXIST));
        };
        if let Err(e) = nix::fcntl::renameat(&parent, tmp.as_os_str(), &parent, name.as_os_str()) {
            let _ = nix::unistd::unlinkat(&parent, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(entry_error(shown, e));
        }
        Ok(())
    }

    /// The directory an entry goes in, reached from the root one name at a
    /// time, never through a symlink. A missing one is made 0700, and gets
    /// 0755 at the end unless an entry of its own says otherwise.
    fn parent(&mut self, parts: &[OsString], shown: &str) -> Result<OwnedFd, RpcError> {
        let dirs = parts.split_last().map_or(&[][..], |(_, dirs)| dirs);
        let dir_modes = &mut self.dir_modes;
        walk::mkdirs_beneath(self.root.as_fd(), dirs, 0o700, OFlag::O_PATH, &mut |i| {
            dir_modes
                .entry(parts[..=i].to_vec())
                .or_insert(MADE_DIR_MODE);
        })
        .map_err(|stuck| match stuck {
            Stuck {
                making: true,
                errno,
                ..
            } => entry_error(shown, errno),
            Stuck { at, errno, .. } => way_error(shown, &parts[..=at], errno),
        })
    }

    /// Give every directory its mode, deepest first: each is reached through
    /// its parents, which still have owner access. Best effort: the entries
    /// are in place, and a directory gone or changed since is left alone.
    fn apply_dir_modes(&mut self) {
        let mut dirs: Vec<(Vec<OsString>, u32)> =
            std::mem::take(&mut self.dir_modes).into_iter().collect();
        dirs.sort_by_key(|(parts, _)| std::cmp::Reverse(parts.len()));
        for (parts, mode) in dirs {
            let set = self
                .reach(&parts)
                .and_then(|fd| nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode)));
            if let Err(e) = set {
                let shown = parts
                    .iter()
                    .map(|p| p.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                tracing::warn!("tar.push: directory {shown} could not get mode {mode:o}: {e}");
            }
        }
    }

    /// A directory below the root, opened for fchmod.
    fn reach(&self, parts: &[OsString]) -> Result<OwnedFd, Errno> {
        walk::open_dir_beneath(self.root.as_fd(), parts, OFlag::O_RDONLY).map_err(|s| s.errno)
    }
}

/// How many temporary names a file or symlink tries before giving up.
const TEMP_TRIES: usize = 16;

/// Create a temporary file beside `name`: O_EXCL and O_NOFOLLOW, so nothing
/// already there (a symlink planted under a guessed name) is ever opened.
fn create_temp(parent: &OwnedFd, name: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    for _ in 0..TEMP_TRIES {
        let tmp = temp_name(name);
        match nix::fcntl::openat(
            parent,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EEXIST)
}

/// `.<name>.computerd-<16 hex digits>`, within NAME_MAX (255 bytes).
fn temp_name(name: &OsStr) -> OsString {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let random = std::collections::hash_map::RandomState::new()
        .hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
    let keep = &name.as_bytes()[..name.len().min(200)];
    let mut tmp = OsString::from(".");
    tmp.push(OsStr::from_bytes(keep));
    tmp.push(format!(".computerd-{random:016x}"));
    tmp
}

/// An entry's names below the root. Absolute names and `..` parts are
/// denied: an entry never leaves the directory, whatever its name says.
fn entry_parts(raw: &[u8], shown: &str) -> Result<Vec<OsString>, RpcError> {
    if raw.starts_with(b"/") {
        return Err(RpcError::denied(format!(
            "tar.push entry {shown}: it is an absolute path; entries must be relative to the directory"
        )));
    }
    let mut parts = Vec::new();
    for part in raw.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                return Err(RpcError::denied(format!(
                    "tar.push entry {shown}: it has a .. part; entries must stay inside the directory"
                )));
            }
            part => parts.push(OsStr::from_bytes(part).to_os_string()),
        }
    }
    Ok(parts)
}

/// A directory opened so fchmod works on it (O_PATH descriptors refuse it).
fn open_dir(at: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    walk::dir_at(at, name, OFlag::O_RDONLY)
}

fn entry_error(shown: &str, e: Errno) -> RpcError {
    path_error("tar.push", &format!("entry {shown}"), e)
}

/// Something on an entry's way that is not a directory: denied, whatever it is.
fn way_error(shown: &str, way: &[OsString], e: Errno) -> RpcError {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            let way = way
                .iter()
                .map(|p| p.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            RpcError::denied(format!(
                "tar.push entry {shown}: {way} is a symlink or a file, and an entry may not pass through either"
            ))
        }
        e => entry_error(shown, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorKind;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::time::{Duration, Instant};

    fn s(p: &Path) -> String {
        p.to_str().unwrap().to_string()
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The whole archive, read `step` bytes at a time; every read but the
    /// last is full, and only the last says eof.
    fn pull_all(path: &Path, step: usize) -> Vec<u8> {
        let mut pull = Pull::begin(&s(path)).unwrap();
        let mut all = Vec::new();
        loop {
            let (chunk, eof) = pull.read(step).unwrap();
            all.extend_from_slice(&chunk);
            if eof {
                assert!(chunk.len() <= step);
                break;
            }
            assert_eq!(chunk.len(), step, "a short read before the end");
        }
        assert_eq!(all.len() % 512, 0);
        assert!(all.ends_with(&[0u8; 1024]));
        all
    }

    #[derive(Debug, PartialEq)]
    struct Item {
        path: String,
        kind: EntryType,
        mode: u32,
        data: Vec<u8>,
        link: Option<String>,
    }

    fn item(path: &str, kind: EntryType, mode: u32, data: &[u8], link: Option<&str>) -> Item {
        Item {
            path: path.into(),
            kind,
            mode,
            data: data.to_vec(),
            link: link.map(Into::into),
        }
    }

    fn parse(archive: &[u8]) -> Vec<Item> {
        let mut ar = tar::Archive::new(archive);
        let mut items = Vec::new();
        for entry in ar.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            items.push(Item {
                path: String::from_utf8(entry.path_bytes().into_owned()).unwrap(),
                kind: entry.header().entry_type(),
                mode: entry.header().mode().unwrap(),
                data,
                link: entry
                    .link_name_bytes()
                    .map(|l| String::from_utf8(l.into_owned()).unwrap()),
            });
        }
        items
    }

    fn long_name() -> String {
        format!("long/{}", "n".repeat(150))
    }

    /// a.txt (0640), dir/ (0750) with sub/ (0700) and sub/deep.bin (0600),
    /// exec.sh (0755), fifo, link -> a.txt, long/ with a 150-byte name.
    fn tree(root: &Path) {
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        chmod(&root.join("a.txt"), 0o640);
        std::fs::create_dir_all(root.join("dir/sub")).unwrap();
        let deep: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join("dir/sub/deep.bin"), &deep).unwrap();
        chmod(&root.join("dir/sub/deep.bin"), 0o600);
        chmod(&root.join("dir/sub"), 0o700);
        chmod(&root.join("dir"), 0o750);
        std::fs::write(root.join("exec.sh"), b"#!/bin/sh\n").unwrap();
        chmod(&root.join("exec.sh"), 0o755);
        nix::unistd::mkfifo(&root.join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        symlink("a.txt", root.join("link")).unwrap();
        std::fs::create_dir(root.join("long")).unwrap();
        chmod(&root.join("long"), 0o755);
        std::fs::write(root.join(long_name()), b"L").unwrap();
        chmod(&root.join(long_name()), 0o644);
    }

    fn expected_tree() -> Vec<Item> {
        let deep: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        vec![
            item("a.txt", EntryType::Regular, 0o640, b"hello", None),
            item("dir/", EntryType::Directory, 0o750, b"", None),
            item("dir/sub/", EntryType::Directory, 0o700, b"", None),
            item("dir/sub/deep.bin", EntryType::Regular, 0o600, &deep, None),
            item("exec.sh", EntryType::Regular, 0o755, b"#!/bin/sh\n", None),
            item("link", EntryType::Symlink, 0o777, b"", Some("a.txt")),
            item("long/", EntryType::Directory, 0o755, b"", None),
            item(&long_name(), EntryType::Regular, 0o644, b"L", None),
        ]
    }

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

    fn push_all(dir: &Path, archive: &[u8], step: usize) -> Result<u64, RpcError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut push = Push::begin(&s(dir))?;
            for chunk in archive.chunks(step) {
                push.write(chunk.to_vec()).await?;
            }
            push.end().await
        })
    }

    /// Every path below `root` with its type, mode and content or target.
    fn snapshot(root: &Path) -> Vec<(String, String, u32, Vec<u8>)> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String, u32, Vec<u8>)>) {
            let mut names: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            for p in names {
                let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                let mode = meta.permissions().mode() & 0o7777;
                if meta.file_type().is_symlink() {
                    let t = std::fs::read_link(&p)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .as_bytes()
                        .to_vec();
                    out.push((rel, "link".into(), 0, t));
                } else if meta.is_dir() {
                    out.push((rel, "dir".into(), mode, vec![]));
                    walk(root, &p, out);
                } else if meta.is_file() {
                    out.push((rel, "file".into(), mode, std::fs::read(&p).unwrap()));
                } else {
                    out.push((rel, "other".into(), mode, vec![]));
                }
            }
        }
        let mut out = Vec::new();
        walk(root, root, &mut out);
        out
    }

    #[test]
    fn push_of_a_pulled_tree_recreates_it() {
        let src = tempfile::tempdir().unwrap();
        tree(src.path());
        std::fs::remove_file(src.path().join("fifo")).unwrap();
        let archive = pull_all(src.path(), 4096);
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("made/by/begin");
        assert_eq!(push_all(&target, &archive, 700).unwrap(), 8);
        assert_eq!(snapshot(&target), snapshot(src.path()));
        // Pushed again over itself: files and the symlink are replaced in place.
        assert_eq!(push_all(&target, &archive, 512 * 1024).unwrap(), 8);
        assert_eq!(snapshot(&target), snapshot(src.path()));
        let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        assert_eq!(
            mtime(&target.join("a.txt"))
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            mtime(&src.path().join("a.txt"))
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        );
    }

    /// A hand-made entry: any name (tar::Builder refuses `..` and `/`).
    fn raw_entry(
        name: &str,
        kind: EntryType,
        mode: u32,
        data: &[u8],
        link: Option<&str>,
    ) -> Vec<u8> {
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        if let Some(link) = link {
            h.set_link_name_literal(link).unwrap();
        }
        h.set_cksum();
        let mut out = h.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    fn archive(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut out = entries.concat();
        out.extend_from_slice(&[0; 1024]);
        out
    }

    /// The names in a directory, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn push_denies_dotdot_and_absolute_entries_and_keeps_those_before() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("t");
        for bad in ["../x", "a/../../x", "/abs", "ok/../../x"] {
            let ar = archive(&[
                raw_entry("before", EntryType::Regular, 0o644, b"1", None),
                raw_entry(bad, EntryType::Regular, 0o644, b"evil", None),
                raw_entry("after", EntryType::Regular, 0o644, b"2", None),
            ]);
            let err = push_all(&target, &ar, 512 * 1024).unwrap_err();
            assert_eq!(
                err.kind(),
                Some(ErrorKind::Denied),
                "{bad}: {}",
                err.message
            );
            assert_eq!(names(&target), vec!["before"], "{bad}");
            assert_eq!(names(top.path()), vec!["t"], "{bad}");
        }
        assert!(!Path::new("/abs").exists());
    }

    #[test]
    fn push_denies_an_entry_under_a_symlink_and_leaves_no_temporary_file() {
        let outside = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let ar = archive(&[
            raw_entry(
                "l",
                EntryType::Symlink,
                0o777,
                b"",
                Some(&s(outside.path())),
            ),
            raw_entry("l/f", EntryType::Regular, 0o644, b"evil", None),
        ]);
        let err = push_all(dst.path(), &ar, 300).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Denied), "{}", err.message);
        assert!(err.message.contains("l/f"), "{}", err.message);
        assert_eq!(names(outside.path()), Vec::<String>::new());
        assert_eq!(names(dst.path()), vec!["l"]);
        assert_eq!(
            std::fs::read_link(dst.path().join("l")).unwrap(),
            outside.path()
        );

        // A file on the way is denied too.
        let ar = archive(&[
            raw_entry("file", EntryType::Regular, 0o644, b"x", None),
            raw_entry("file/g", EntryType::Regular, 0o644, b"y", None),
        ]);
        assert_eq!(
            push_all(dst.path(), &ar, 512 * 1024).unwrap_err().kind(),
            Some(ErrorKind::Denied)
        );
        assert_eq!(names(dst.path()), vec!["file", "l"]);
    }

    #[test]
    fn push_replaces_a_symlink_at_an_entry_name_without_following_it() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"safe").unwrap();
        let dst = tempfile::tempdir().unwrap();
        symlink(&victim, dst.path().join("f")).unwrap();
        symlink(outside.path(), dst.path().join("d")).unwrap();
        symlink(&victim, dst.path().join("s")).unwrap();
        let ar = archive(&[
            raw_entry("f", EntryType::Regular, 0o600, b"new", None),
            raw_entry("d/", EntryType::Directory, 0o755, b"", None),
            raw_entry("d/inside", EntryType::Regular, 0o644, b"in", None),
            raw_entry("s", EntryType::Symlink, 0o777, b"", Some("f")),
        ]);
        assert_eq!(push_all(dst.path(), &ar, 512 * 1024).unwrap(), 4);
        assert_eq!(std::fs::read(&victim).unwrap(), b"safe");
        assert_eq!(names(outside.path()), vec!["victim"]);
        assert_eq!(std::fs::read(dst.path().join("f")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(dst.path().join("d"))
                .unwrap()
                .is_dir()
        );
        assert_eq!(
            std::fs::read_link(dst.path().join("s")).unwrap(),
            Path::new("f")
        );
        assert_eq!(names(dst.path()), vec!["d", "f", "s"]);
    }

    #[test]
    fn push_refuses_hard_links_devices_and_pipes_as_invalid() {
        for (kind, what) in [
            (EntryType::Link, "hard link"),
            (EntryType::Char, "device"),
            (EntryType::Block, "device"),
            (EntryType::Fifo, "pipe"),
        ] {
            let dst = tempfile::tempdir().unwrap();
            let ar = archive(&[
                raw_entry("ok", EntryType::Regular, 0o644, b"1", None),
                raw_entry("bad", kind, 0o644, b"", Some("ok")),
            ]);
            let err = push_all(dst.path(), &ar, 512 * 1024).unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::Invalid));
            assert!(err.message.contains(what), "{}", err.message);
            assert_eq!(names(dst.path()), vec!["ok"]);
        }
    }

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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
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
    fn push_of_an_archive_cut_short_fails_and_leaves_no_half_file() {
        let dst = tempfile::tempdir().unwrap();
        let ar = archive(&[
            raw_entry("whole", EntryType::Regular, 0o644, b"w", None),
            raw_entry("half", EntryType::Regular, 0o644, &vec![7u8; 5000], None),
        ]);
        let err = push_all(dst.path(), &ar[..3000], 1000).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Invalid), "{}", err.message);
        assert!(err.message.contains("half"), "{}", err.message);
        assert_eq!(names(dst.path()), vec!["whole"]);
    }

    #[test]
    fn push_gives_directories_their_modes_at_the_end() {
        let dst = tempfile::tempdir().unwrap();
        chmod(dst.path(), 0o751);
        std::fs::create_dir(dst.path().join("found")).unwrap();
        chmod(&dst.path().join("found"), 0o700);
        let ar = archive(&[
            raw_entry("./", EntryType::Directory, 0o700, b"", None),
            raw_entry("ro/", EntryType::Directory, 0o555, b"", None),
            raw_entry("ro/f", EntryType::Regular, 0o444, b"f", None),
            raw_entry("ro/inner/", EntryType::Directory, 0o500, b"", None),
            raw_entry("ro/inner/g", EntryType::Regular, 0o4755, b"g", None),
            raw_entry("found/", EntryType::Directory, 0o2711, b"", None),
            raw_entry("implied/by/h", EntryType::Regular, 0o640, b"h", None),
        ]);
        // Every entry counts, the root's own too.
        assert_eq!(push_all(dst.path(), &ar, 512 * 1024).unwrap(), 7);
        let d = dst.path();
        assert_eq!(
            [
                d,
                &d.join("ro"),
                &d.join("ro/f"),
                &d.join("ro/inner"),
                &d.join("ro/inner/g"),
                &d.join("found"),
                &d.join("implied"),
                &d.join("implied/by"),
                &d.join("implied/by/h")
            ]
            .map(mode_of),
            // The root keeps its mode; setuid and setgid bits are dropped.
            [
                0o751, 0o555, 0o444, 0o500, 0o755, 0o711, 0o755, 0o755, 0o640
            ]
        );
        assert_eq!(std::fs::read(d.join("ro/inner/g")).unwrap(), b"g");
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
    fn push_reads_gnu_long_names_and_pax_paths() {
        let dst = tempfile::tempdir().unwrap();
        let long = format!("deep/{}", "x".repeat(180));
        let mut builder = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(4);
        builder.append_data(&mut h, &long, &b"long"[..]).unwrap();
        let mut gnu = builder.into_inner().unwrap();
        gnu.truncate(gnu.len() - 1024);

        let pax_path = format!("pax/{}", "p".repeat(200));
        let record = |k: &str, v: &str| {
            let body = format!(" {k}={v}\n");
            let mut n = body.len() + 1;
            while format!("{n}{body}").len() != n {
                n += 1;
            }
            format!("{n}{body}")
        };
        let pax = record("path", &pax_path);
        let ar = archive(&[
            gnu,
            raw_entry(
                "PaxHeader/x",
                EntryType::XGlobalHeader,
                0o644,
                record("comment", "hi").as_bytes(),
                None,
            ),
            raw_entry(
                "PaxHeader/x",
                EntryType::XHeader,
                0o644,
                pax.as_bytes(),
                None,
            ),
            raw_entry("truncated-name", EntryType::Regular, 0o600, b"pax", None),
        ]);
        assert_eq!(push_all(dst.path(), &ar, 333).unwrap(), 2);
        assert_eq!(std::fs::read(dst.path().join(&long)).unwrap(), b"long");
        assert_eq!(std::fs::read(dst.path().join(&pax_path)).unwrap(), b"pax");
        assert_eq!(names(dst.path()), vec!["deep", "pax"]);
    }

    #[test]
    fn push_ignores_bytes_after_the_end_and_repeats_a_failure() {
        let dst = tempfile::tempdir().unwrap();
        let mut ar = archive(&[raw_entry("a", EntryType::Regular, 0o644, b"a", None)]);
        ar.resize(10240, 0);
        assert_eq!(push_all(dst.path(), &ar, 1024).unwrap(), 1);

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
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

    #[test]
    fn pulls_and_pushes_move_between_threads() {
        fn send<T: Send + 'static>() {}
        send::<Pull>();
        send::<Push>();
    }
}
