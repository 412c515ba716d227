//! `computer-mcp cp SRC DST`: a file or a tree copied between this host and
//! a computer of the provider, in either direction, streamed through the
//! daemon's `tar.*` methods, so it works for every provider (a cloud
//! computer has no bind mount).
//!
//! One side is `COMPUTER:/absolute/path`, COMPUTER a handle, a name or a
//! provider id as `computers list` shows them; the other is a path here.
//! DST is the path the source becomes. Into a computer, a tree is merged
//! into a directory that is there already. Onto this host, DST must not
//! exist: the copy is unpacked into a private directory beside it by
//! [`extract`]'s rules (the computer is not trusted) and renamed into
//! place only when whole, so a refused or failed copy leaves nothing.
//!
//! `cp --sync COMPUTER` copies back the read-write shares a provider that
//! cannot bind them had copied in ([`crate::shares`]).

pub mod extract;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use computer_providers::{ComputerRef, Labels, Provider, label};
use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::{FileStat, FileType, FilesStatParams};
use tokio_util::sync::CancellationToken;

/// The bounds of a copy onto this host unless `--max-bytes` and
/// `--max-files` say others (a copy-back at release has these).
pub const DEFAULT_BOUNDS: extract::Bounds = extract::Bounds {
    max_bytes: 1 << 30,
    max_files: 100_000,
};

#[derive(Args, Debug, Clone)]
pub struct CpArgs {
    /// What to copy: a path here, or COMPUTER:/path in a computer (COMPUTER
    /// is a handle, name or provider id from `computers list`).
    #[arg(required_unless_present = "sync")]
    pub src: Option<String>,
    /// Where it goes: the path the source becomes, here or COMPUTER:/path.
    #[arg(required_unless_present = "sync")]
    pub dst: Option<String>,
    /// Copy every read-write share copied into COMPUTER (on a provider that copies shares rather than binding them) back to its host folder, as a release does: host files it deleted are kept, host files changed since it was made are moved aside before they are replaced.
    #[arg(long, value_name = "COMPUTER", conflicts_with_all = ["src", "dst"])]
    pub sync: Option<String>,
    /// The most bytes of file data a copy onto this host may hold.
    #[arg(long, default_value_t = DEFAULT_BOUNDS.max_bytes)]
    pub max_bytes: u64,
    /// The most files, directories and links a copy onto this host may hold.
    #[arg(long, default_value_t = DEFAULT_BOUNDS.max_files)]
    pub max_files: u64,
}

/// One side of a copy.
#[derive(Debug, PartialEq)]
enum Side {
    Here(PathBuf),
    There { computer: String, path: String },
}

/// `COMPUTER:/path` or a path here. A path here with a colon in its first
/// part is written `./a:b`.
fn side(arg: &str) -> Result<Side, String> {
    let first = arg.split('/').next().unwrap_or("");
    match first.split_once(':') {
        Some((computer, _)) if !computer.is_empty() => {
            let path = &arg[computer.len() + 1..];
            if !path.starts_with('/') {
                return Err(format!(
                    "{arg}: the path in a computer must be absolute (COMPUTER:/work/dir)"
                ));
            }
            Ok(Side::There {
                computer: computer.to_string(),
                path: path.to_string(),
            })
        }
        _ if arg.is_empty() => Err("an empty path".into()),
        _ => Ok(Side::Here(PathBuf::from(arg))),
    }
}

/// Run the copy; the words of the outcome, or of why it was refused. The
/// bytes it carried are added to the computer's receipt in `book`.
pub async fn run(
    provider: Arc<dyn Provider>,
    args: CpArgs,
    book: &crate::receipts::Book,
) -> Result<String, String> {
    let bounds = extract::Bounds {
        max_bytes: args.max_bytes,
        max_files: args.max_files,
    };
    if let Some(which) = &args.sync {
        return sync(provider, which, bounds, book).await;
    }
    let (src, dst) = match (&args.src, &args.dst) {
        (Some(s), Some(d)) => (s, d),
        _ => return Err("give SRC and DST, or --sync COMPUTER".into()),
    };
    match (side(src)?, side(dst)?) {
        (Side::Here(src), Side::There { computer, path }) => {
            let (r, client) = connect_ref(&provider, &computer).await?;
            let meter = Arc::new(crate::receipts::meter::Meter::default());
            let client = crate::receipts::meter::Metered::wrap(client, Arc::clone(&meter));
            let done = push(&client, &src, &path).await;
            book.add_bytes(&r, &meter);
            done
        }
        (Side::There { computer, path }, Side::Here(dst)) => {
            let (r, client) = connect_ref(&provider, &computer).await?;
            let meter = Arc::new(crate::receipts::meter::Meter::default());
            let client = crate::receipts::meter::Metered::wrap(client, Arc::clone(&meter));
            let done = pull(client, &path, &dst, bounds).await;
            book.add_bytes(&r, &meter);
            done
        }
        (Side::Here(_), Side::Here(_)) => {
            Err("both paths are on this host; one of SRC and DST must be COMPUTER:/path".into())
        }
        (Side::There { .. }, Side::There { .. }) => {
            Err("both paths are in computers; copy to this host first, then on".into())
        }
    }
}

/// `cp --sync COMPUTER`: its read-write shares copied back.
async fn sync(
    provider: Arc<dyn Provider>,
    which: &str,
    bounds: extract::Bounds,
    book: &crate::receipts::Book,
) -> Result<String, String> {
    // As every cp: a paused computer is named at once.
    let (r, client) = connect_ref(&provider, which).await?;
    let shares = crate::shares::recorded(&r.labels);
    if shares.iter().all(|s| s.read_only) {
        client.close();
        return Err(format!(
            "the computer {which:?} has no read-write share copied in, so nothing to copy back (a provider that binds shares, such as local or Docker, writes the host folder itself)"
        ));
    }
    let meter = Arc::new(crate::receipts::meter::Meter::default());
    let client = crate::receipts::meter::Metered::wrap(client, Arc::clone(&meter));
    let made = crate::shares::since(&r);
    let done = crate::shares::copy_back(&client, &shares, made, bounds).await;
    book.add_bytes(&r, &meter);
    client.close();
    done.map(|w| w.join("; "))
}

/// Before `computers release` ends `r`: its read-write shares copied back
/// as a server's release does; their words, or none where it has no such
/// share. An error is a copy-back refused or failed, each folder as it
/// was (the computer is then not released).
pub async fn back_before_release(
    provider: Arc<dyn Provider>,
    r: &ComputerRef,
    book: &crate::receipts::Book,
) -> Result<Option<String>, String> {
    if crate::shares::recorded(&r.labels)
        .iter()
        .all(|s| s.read_only)
    {
        return Ok(None);
    }
    sync(provider, &r.id, DEFAULT_BOUNDS, book).await.map(Some)
}

/// The computers `which` names: by provider id, handle or name.
pub fn named<'a>(all: &'a [ComputerRef], which: &str) -> Vec<&'a ComputerRef> {
    all.iter()
        .filter(|r| {
            r.id == which
                || r.labels.get(label::HANDLE).map(String::as_str) == Some(which)
                || r.labels.get(label::NAME).map(String::as_str) == Some(which)
        })
        .collect()
}

/// The one running computer `which` names (handle, name or provider id).
pub async fn find(provider: &Arc<dyn Provider>, which: &str) -> Result<ComputerRef, String> {
    let all = provider
        .list(&Labels::new(), &CancellationToken::new())
        .await
        .map_err(|e| format!("listing the computers: {}", e.message))?;
    match named(&all, which).as_slice() {
        [] => Err(format!(
            "no computer {which:?}: it is gone (released, or past its deadline) or was never made; nothing was copied (see `computer-mcp computers list`)"
        )),
        [one] if !one.running => Err(format!(
            "the computer {which:?} ({}) has ended: it is gone, and nothing was copied",
            one.id
        )),
        [one] => Ok((*one).clone()),
        many => {
            let ids: Vec<&str> = many.iter().map(|r| r.id.as_str()).collect();
            Err(format!(
                "{} computers are named {which:?} (of different callers): {}; name one by handle or id",
                many.len(),
                ids.join(", ")
            ))
        }
    }
}

pub(crate) async fn connect(
    provider: &Arc<dyn Provider>,
    which: &str,
) -> Result<Arc<dyn ComputerClient>, String> {
    Ok(connect_ref(provider, which).await?.1)
}

/// The computer `which` names, and a connection to it.
async fn connect_ref(
    provider: &Arc<dyn Provider>,
    which: &str,
) -> Result<(ComputerRef, Arc<dyn ComputerClient>), String> {
    let r = find(provider, which).await?;
    if r.paused {
        // Its daemon is stopped with its programs: a hello would only
        // wait out its bound and blame the daemon.
        return Err(format!(
            "the computer {which:?} ({}) is paused (computer_pause); computer_resume it first: nothing in it answers until then",
            r.id
        ));
    }
    let conn = provider
        .connect(&r, &CancellationToken::new())
        .await
        .map_err(|e| format!("reaching the computer {which:?}: {}", e.message))?;
    Ok((r, conn.client))
}

async fn stat(client: &Arc<dyn ComputerClient>, path: &str) -> Result<FileStat, String> {
    client
        .call_typed(&FilesStatParams {
            path: path.to_string(),
            follow: Some(true),
        })
        .await
        .map_err(|e| format!("{path} in the computer: {e}"))
}

/// A computer's file or tree onto this host at `dst`.
async fn pull(
    client: Arc<dyn ComputerClient>,
    path: &str,
    dst: &Path,
    bounds: extract::Bounds,
) -> Result<String, String> {
    if std::fs::symlink_metadata(dst).is_ok() {
        return Err(format!(
            "{} is there already; cp never overwrites (remove it, or name a new path)",
            dst.display()
        ));
    }
    let kind = stat(&client, path).await?.file_type;
    if !matches!(kind, FileType::File | FileType::Dir) {
        return Err(format!(
            "{path} in the computer is neither a file nor a directory"
        ));
    }
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let private = private_dir(&parent, ".computer-mcp-cp-")?;
    let done = match pull_into(&client, path, &private, bounds).await {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&private);
            return Err(e);
        }
    };
    let whole = if kind == FileType::File {
        let name = Path::new(path).file_name().unwrap_or_default();
        private.join(name)
    } else {
        private.clone()
    };
    let placed = std::fs::rename(&whole, dst)
        .map_err(|e| format!("{} could not be put in place: {e}", dst.display()));
    let _ = std::fs::remove_dir_all(&private);
    placed?;
    Ok(format!(
        "copied {path} to {}: {} files, {} directories, {} links, {} bytes",
        dst.display(),
        done.files,
        done.dirs,
        done.links,
        done.bytes
    ))
}

/// The computer's `path` (a file, or a directory's contents) unpacked by
/// [`extract`]'s rules into `root`, a directory this process made for it.
/// On an error, what was written stays under `root` for the caller to
/// remove.
pub(crate) async fn pull_into(
    client: &Arc<dyn ComputerClient>,
    path: &str,
    root: &Path,
    bounds: extract::Bounds,
) -> Result<extract::Extracted, String> {
    let mut tar = client
        .pull_tar(path)
        .await
        .map_err(|e| format!("reading {path} from the computer: {e}"))?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(8);
    let into = root.to_path_buf();
    let unpack = tokio::task::spawn_blocking(move || {
        extract::extract(ChannelReader::new(rx), &into, bounds)
    });
    let mut fed = Ok(());
    loop {
        match tar.next().await {
            Ok(Some(chunk)) => {
                if tx.send(chunk).is_err() {
                    break; // the extraction stopped: its words say why
                }
            }
            Ok(None) => break,
            Err(e) => {
                fed = Err(format!("reading {path} from the computer: {e}"));
                break;
            }
        }
    }
    drop(tx);
    let unpacked = unpack
        .await
        .map_err(|e| format!("the extraction failed: {e}"));
    match (fed, unpacked) {
        (Ok(()), Ok(Ok(done))) => Ok(done),
        (Err(e), _) | (_, Err(e)) | (_, Ok(Err(e))) => Err(e),
    }
}

/// A directory beside `dst` that only this process writes (0700, a random
/// name), on the same file system so the final rename is atomic.
pub(crate) fn private_dir(parent: &Path, prefix: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let suffix = computer_providers::random::random_hex(8).map_err(|e| e.message)?;
    let dir = parent.join(format!("{prefix}{suffix}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    Ok(dir)
}

/// A file or tree here into a computer at `path`.
pub(crate) async fn push(
    client: &Arc<dyn ComputerClient>,
    src: &Path,
    path: &str,
) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let (dir, name) = if meta.is_dir() {
        (path.to_string(), None)
    } else if meta.is_file() {
        let p = Path::new(path);
        let name = p
            .file_name()
            .ok_or_else(|| format!("{path}: names no file"))?
            .to_owned();
        let parent = p.parent().unwrap_or(Path::new("/"));
        (parent.display().to_string(), Some(PathBuf::from(name)))
    } else {
        return Err(format!(
            "{} is neither a file nor a directory",
            src.display()
        ));
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(8);
    let source = src.to_path_buf();
    let pack = tokio::task::spawn_blocking(move || pack(&source, name.as_deref(), tx));
    let mut rx = rx;
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let pushed = client.push_tar(&dir, stream).await;
    let packed = pack
        .await
        .map_err(|e| format!("packing {} failed: {e}", src.display()))?;
    // A packing failure is sent down the stream too, so the push stops
    // there (the computer never takes a cut archive for a whole one).
    let skipped = packed?;
    let entries = pushed.map_err(|e| format!("writing into the computer at {path}: {e}"))?;
    let mut words = format!("copied {} to {path}: {entries} entries", src.display());
    if skipped > 0 {
        words.push_str(&format!(" ({skipped} sockets, pipes or devices left out)"));
    }
    Ok(words)
}

/// Pack `src` as a tar into `tx`: a tree's entries relative to it, or one
/// file named `name`. Links are packed as links, never followed; sockets,
/// pipes and devices are left out and counted.
fn pack(
    src: &Path,
    name: Option<&Path>,
    tx: tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>,
) -> Result<u64, String> {
    let report = tx.clone();
    let packed = pack_into(src, name, ChannelWriter::new(tx));
    if let Err(e) = &packed {
        let _ = report.blocking_send(Err(std::io::Error::other(e.clone())));
    }
    packed
}

fn pack_into(src: &Path, name: Option<&Path>, w: ChannelWriter) -> Result<u64, String> {
    let mut b = tar::Builder::new(w);
    b.follow_symlinks(false);
    let failed = |e: std::io::Error| format!("packing {} failed: {e}", src.display());
    let mut skipped = 0u64;
    match name {
        Some(n) => b.append_path_with_name(src, n).map_err(failed)?,
        None => {
            for entry in walk(src).map_err(failed)? {
                let (rel, ft) = entry;
                if ft.is_dir() || ft.is_file() || ft.is_symlink() {
                    b.append_path_with_name(src.join(&rel), &rel)
                        .map_err(failed)?;
                } else {
                    skipped += 1;
                }
            }
        }
    }
    let mut w = b.into_inner().map_err(failed)?;
    w.flush_rest().map_err(failed)?;
    Ok(skipped)
}

/// Every path under `root`, parents before children, links not followed.
pub(crate) fn walk(root: &Path) -> std::io::Result<Vec<(PathBuf, std::fs::FileType)>> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut names: Vec<(PathBuf, std::fs::FileType)> = std::fs::read_dir(root.join(&rel))?
            .map(|e| e.and_then(|e| Ok((rel.join(e.file_name()), e.file_type()?))))
            .collect::<std::io::Result<_>>()?;
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (p, ft) in names {
            if ft.is_dir() {
                todo.push(p.clone());
            }
            out.push((p, ft));
        }
    }
    Ok(out)
}

/// The chunks of a channel as a `Read` (the extraction's side of a pull).
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl ChannelReader {
    fn new(rx: std::sync::mpsc::Receiver<Vec<u8>>) -> Self {
        Self {
            rx,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.at = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A `Write` that sends 256 KiB chunks down a channel (the packing side of
/// a push).
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>,
    buf: Vec<u8>,
}

const CHUNK: usize = 256 * 1024;

impl ChannelWriter {
    fn new(tx: tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>) -> Self {
        Self {
            tx,
            buf: Vec::with_capacity(CHUNK),
        }
    }
    fn flush_rest(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the computer stopped taking the copy"))
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush_rest()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sides_are_read_as_a_user_writes_them() {
        assert_eq!(side("./out").unwrap(), Side::Here("./out".into()));
        assert_eq!(side("./a:b").unwrap(), Side::Here("./a:b".into()));
        assert_eq!(
            side("build:/work/dir").unwrap(),
            Side::There {
                computer: "build".into(),
                path: "/work/dir".into()
            }
        );
        let e = side("build:work").unwrap_err();
        assert!(e.contains("must be absolute"), "{e}");
    }
}
