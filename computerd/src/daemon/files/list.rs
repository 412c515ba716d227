//! files.list: a directory walked by descriptor, in pages.

use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use crate::daemon::check;
use crate::daemon::sys::path_error;
use crate::daemon::walk::{Listing, Step, Tree};
use crate::protocol::{FilesListParams, FilesListResult, ListEntry, RpcError, clean_path, limits};

use super::{file_stat, is_type, join, lossy};

/// What a files.list reply spends besides its entries: the envelope, the id
/// and `{"entries":[],"truncated":false}`, with room to spare.
const LIST_REPLY_OVERHEAD: u64 = 512;

pub fn list(p: FilesListParams) -> Result<FilesListResult, RpcError> {
    const OP: &str = "files.list";
    let path = clean_path("path", &p.path)?;
    let depth = p.depth.unwrap_or(1);
    check::one_to("depth", depth.into(), limits::MAX_LIST_DEPTH.into())?;
    let offset = p.offset.unwrap_or(0);

    let fd = nix::fcntl::open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ENOTDIR => RpcError::not_dir(format!(
            "{OP} {path}: it is not a directory; files.stat describes a single file"
        )),
        e => path_error(OP, &path, e),
    })?;
    let mut walk = Walk::new(fd, &path, depth)?;

    let mut skipped = 0u64;
    let mut entries = Vec::new();
    let mut bytes = LIST_REPLY_OVERHEAD;
    let mut truncated = false;
    while let Some(entry) = walk.next(skipped >= offset)? {
        let Some(entry) = entry else {
            skipped += 1;
            continue;
        };
        // The entry's JSON and the comma before it.
        let size = serde_json::to_vec(&entry).map_or(8192, |v| v.len() as u64) + 1;
        if entries.len() >= limits::MAX_LIST_ENTRIES
            || (bytes + size > limits::MAX_LIST_REPLY_BYTES && !entries.is_empty())
        {
            truncated = true;
            break;
        }
        bytes += size;
        entries.push(entry);
    }
    Ok(FilesListResult { entries, truncated })
}

/// A files.list walk: pre-order, each directory's names sorted by bytes,
/// symlinks listed and never entered, subdirectories opened from their
/// parent's descriptor.
struct Walk {
    /// Each directory's path, and how deep its entries are: 1 for the listed
    /// directory's own.
    tree: Tree<(String, u32)>,
    depth: u32,
}

impl Walk {
    fn new(fd: OwnedFd, path: &str, depth: u32) -> Result<Walk, RpcError> {
        let top = Listing::read(fd).map_err(|e| path_error("files.list", path, e))?;
        Ok(Walk {
            tree: Tree::new(top, (path.to_string(), 1)),
            depth,
        })
    }

    /// The next entry of the walk: None at its end, Some(None) for an entry
    /// walked past without being described (paging skips those).
    fn next(&mut self, describe: bool) -> Result<Option<Option<ListEntry>>, RpcError> {
        const OP: &str = "files.list";
        loop {
            let (top, (dir_path, level), name) = match self.tree.step() {
                None => return Ok(None),
                Some(Step::Left(..)) => continue,
                Some(Step::Name(top, data, name)) => (top, data, name),
            };
            let level = *level;
            let path = join(dir_path, &name);
            let st = match nix::sys::stat::fstatat(
                &top.dir,
                name.as_os_str(),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(st) => st,
                // Gone since readdir, or in a directory we may read but not
                // search: there is nothing to describe.
                Err(Errno::ENOENT | Errno::EACCES) => continue,
                Err(e) => return Err(path_error(OP, &path, e)),
            };
            let entry = describe.then(|| {
                let target = is_type(&st, libc::S_IFLNK)
                    .then(|| nix::fcntl::readlinkat(&top.dir, name.as_os_str()).ok())
                    .flatten()
                    .map(|t| lossy(&t));
                ListEntry {
                    path: path.clone(),
                    stat: file_stat(&st, target),
                }
            });
            if is_type(&st, libc::S_IFDIR) && level < self.depth {
                match Listing::open_at(&top.dir, &name) {
                    Ok(listing) => self.tree.push(listing, (path, level + 1)),
                    // Listed but not entered: unreadable, gone, or swapped for
                    // a symlink or a file since fstatat.
                    Err(
                        Errno::EACCES
                        | Errno::EPERM
                        | Errno::ENOENT
                        | Errno::ELOOP
                        | Errno::ENOTDIR,
                    ) => {}
                    Err(e) => return Err(path_error(OP, &path, e)),
                }
            }
            return Ok(Some(entry));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::files::testing::*;
    use crate::protocol::ErrorKind;
    use crate::protocol::FileType;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    /// a/ (x, y/ (deep/ (z)), b -> y (a symlink to a directory), c.txt
    fn tree(root: &Path) {
        std::fs::create_dir_all(root.join("a/y/deep")).unwrap();
        std::fs::write(root.join("a/x"), b"x").unwrap();
        std::fs::write(root.join("a/y/deep/z"), b"z").unwrap();
        symlink("a/y", root.join("b")).unwrap();
        std::fs::write(root.join("c.txt"), b"c").unwrap();
    }

    fn list_paths(root: &Path, depth: Option<u32>, offset: Option<u64>) -> (Vec<String>, bool) {
        let r = list(FilesListParams {
            path: s(root),
            depth,
            offset,
        })
        .unwrap();
        let base = s(root);
        let paths = r
            .entries
            .iter()
            .map(|e| e.path.strip_prefix(&base).unwrap().to_string())
            .collect();
        (paths, r.truncated)
    }

    #[test]
    fn list_walks_by_name_with_depth_and_paging_and_never_enters_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        assert_eq!(
            list_paths(dir.path(), None, None),
            (vec!["/a".into(), "/b".into(), "/c.txt".into()], false)
        );
        let all: Vec<String> = [
            "/a",
            "/a/x",
            "/a/y",
            "/a/y/deep",
            "/a/y/deep/z",
            "/b",
            "/c.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(list_paths(dir.path(), Some(16), None), (all.clone(), false));
        assert_eq!(
            list_paths(dir.path(), Some(2), None).0,
            vec!["/a", "/a/x", "/a/y", "/b", "/c.txt"]
        );
        assert_eq!(
            list_paths(dir.path(), Some(16), Some(3)),
            (all[3..].to_vec(), false)
        );
        assert_eq!(list_paths(dir.path(), Some(16), Some(99)), (vec![], false));

        let r = list(FilesListParams {
            path: s(dir.path()),
            depth: None,
            offset: None,
        })
        .unwrap();
        let b = &r.entries[1];
        assert_eq!(
            (b.stat.file_type, b.stat.target.as_deref()),
            (FileType::Symlink, Some("a/y"))
        );
        assert_eq!(
            (r.entries[2].stat.file_type, r.entries[2].stat.size),
            (FileType::File, 1)
        );
        assert_eq!(r.entries[0].stat.file_type, FileType::Dir);
    }

    #[test]
    fn list_pages_at_1000_entries() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..1005 {
            std::fs::write(dir.path().join(format!("f{i:04}")), b"").unwrap();
        }
        let (first, truncated) = list_paths(dir.path(), None, None);
        assert_eq!((first.len(), truncated), (1000, true));
        assert_eq!(
            (first[0].as_str(), first[999].as_str()),
            ("/f0000", "/f0999")
        );
        let (rest, truncated) = list_paths(dir.path(), None, Some(1000));
        assert_eq!(
            (rest, truncated),
            (
                ["/f1000", "/f1001", "/f1002", "/f1003", "/f1004"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                false
            )
        );
    }

    #[test]
    fn list_refuses_files_missing_paths_and_bad_depths() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"").unwrap();
        let l = |path: &Path, depth| {
            list(FilesListParams {
                path: s(path),
                depth,
                offset: None,
            })
        };
        assert_eq!(kind(l(&f, None)), ErrorKind::NotDir);
        assert_eq!(kind(l(&dir.path().join("none"), None)), ErrorKind::NotFound);
        let err = l(dir.path(), Some(0)).unwrap_err();
        assert_eq!(
            (err.kind(), err.data.unwrap().field),
            (Some(ErrorKind::Invalid), Some("depth".into()))
        );
        let err = l(dir.path(), Some(17)).unwrap_err();
        assert_eq!(
            (err.kind(), err.data.unwrap().field),
            (Some(ErrorKind::Limit), Some("depth".into()))
        );
    }
}
