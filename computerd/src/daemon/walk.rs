//! Paths reached from a directory descriptor, never through a symlink.
//!
//! [`open_dir_beneath`] and [`mkdirs_beneath`] take a path as its names and
//! open it below a descriptor without following a link anywhere on the way:
//! in one `openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)` where the kernel has
//! it, else (and whenever that call fails, so errors always name the step) one
//! name at a time with `openat(O_NOFOLLOW)`. A directory swapped for a symlink
//! between two steps refuses the path instead of redirecting it. `..`, `.`,
//! empty names and names holding `/` are refused before anything is opened.
//!
//! [`Listing`] and [`Tree`] are the depth-first walk of files.list, files.remove
//! and tar.pull: each directory entered from its parent's descriptor.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

use super::sys;

/// Where a walk stopped: the index of the name it could not open (or make),
/// and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stuck {
    pub at: usize,
    pub errno: Errno,
    /// Making the missing directory failed, not opening it.
    pub making: bool,
}

impl Stuck {
    /// A symlink or something not a directory stood where a directory was needed.
    pub fn is_link_or_file(&self) -> bool {
        matches!(self.errno, Errno::ELOOP | Errno::ENOTDIR)
    }
}

/// The names of a `/`-separated path, empty ones (`//`, a leading `/`) dropped.
pub fn names(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// One directory below `at` by name, never a symlink: `O_DIRECTORY|O_NOFOLLOW`
/// with `flags` (`O_PATH` when it only has to be searched, `O_RDONLY` to read
/// or fchmod it).
pub fn dir_at<Fd: AsFd>(at: Fd, name: &OsStr, flags: OFlag) -> Result<OwnedFd, Errno> {
    nix::fcntl::openat(
        at,
        name,
        flags | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// The directory at `names` below `root`, opened with `flags` (the root
/// itself, opened again, for no names).
pub fn open_dir_beneath<N: AsRef<OsStr>>(
    root: BorrowedFd<'_>,
    names: &[N],
    flags: OFlag,
) -> Result<OwnedFd, Stuck> {
    resolve(Resolver::best(), root, names, flags, None, &mut |_| {})
}

/// [`open_dir_beneath`], making each missing directory with `mode` (before
/// the umask) on the way; `made(i)` is told of each one made.
pub fn mkdirs_beneath<N: AsRef<OsStr>>(
    root: BorrowedFd<'_>,
    names: &[N],
    mode: u32,
    flags: OFlag,
    made: &mut dyn FnMut(usize),
) -> Result<OwnedFd, Stuck> {
    resolve(Resolver::best(), root, names, flags, Some(mode), made)
}

/// How a path below a descriptor is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolver {
    /// One `openat2` for the whole path, the steps when it fails.
    Openat2,
    /// One `openat(O_NOFOLLOW)` a name.
    Steps,
}

impl Resolver {
    /// openat2 when this kernel (and whatever filters its system calls) has it;
    /// asked once.
    fn best() -> Resolver {
        static HAS_OPENAT2: OnceLock<bool> = OnceLock::new();
        let has = *HAS_OPENAT2.get_or_init(|| {
            // "." below /: RESOLVE_BENEATH refuses an absolute path itself.
            nix::fcntl::open("/", OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
                .and_then(|root| nix::fcntl::openat2(&root, ".", how(OFlag::O_PATH)))
                .is_ok()
        });
        if has {
            Resolver::Openat2
        } else {
            Resolver::Steps
        }
    }
}

fn how(flags: OFlag) -> OpenHow {
    OpenHow::new()
        .flags(flags | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS)
}

fn resolve<N: AsRef<OsStr>>(
    resolver: Resolver,
    root: BorrowedFd<'_>,
    names: &[N],
    flags: OFlag,
    make: Option<u32>,
    made: &mut dyn FnMut(usize),
) -> Result<OwnedFd, Stuck> {
    for (at, name) in names.iter().enumerate() {
        let name = name.as_ref().as_bytes();
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(Stuck {
                at,
                errno: Errno::EINVAL,
                making: false,
            });
        }
    }
    if resolver == Resolver::Openat2 {
        let mut path = OsString::from(".");
        for name in names {
            path.push("/");
            path.push(name.as_ref());
        }
        // Any failure (missing, a link, a filter refusing openat2) goes on to
        // the steps: they make what is missing and say which name stopped them.
        if let Ok(fd) = nix::fcntl::openat2(root, path.as_os_str(), how(flags)) {
            return Ok(fd);
        }
    }
    let Some(last) = names.len().checked_sub(1) else {
        return dir_at(root, OsStr::new("."), flags).map_err(|errno| Stuck {
            at: 0,
            errno,
            making: false,
        });
    };
    let mut dir: Option<OwnedFd> = None;
    for (i, name) in names.iter().enumerate() {
        // Directories on the way only have to be searched.
        let step_flags = if i == last { flags } else { OFlag::O_PATH };
        let at = dir.as_ref().map_or(root, |d| d.as_fd());
        let stuck = |(errno, making)| Stuck {
            at: i,
            errno,
            making,
        };
        let next = match make {
            Some(mode) => {
                let (fd, was_made) =
                    open_or_make_dir(at, name.as_ref(), mode, step_flags).map_err(stuck)?;
                if was_made {
                    made(i);
                }
                fd
            }
            None => dir_at(at, name.as_ref(), step_flags).map_err(|e| stuck((e, false)))?,
        };
        dir = Some(next);
    }
    dir.ok_or(Stuck {
        at: 0,
        errno: Errno::EINVAL,
        making: false,
    })
}

/// The directory `name` below `at`, made with `mode` first when missing; true
/// when it was made. The error says whether making it failed.
pub fn open_or_make_dir(
    at: BorrowedFd<'_>,
    name: &OsStr,
    mode: u32,
    flags: OFlag,
) -> Result<(OwnedFd, bool), (Errno, bool)> {
    match dir_at(at, name, flags) {
        Ok(fd) => Ok((fd, false)),
        Err(Errno::ENOENT) => {
            let was_made = match nix::sys::stat::mkdirat(at, name, Mode::from_bits_truncate(mode)) {
                Ok(()) => true,
                // Made by someone else since: the open below checks what it is.
                Err(Errno::EEXIST) => false,
                Err(e) => return Err((e, true)),
            };
            let fd = dir_at(at, name, flags).map_err(|e| (e, false))?;
            Ok((fd, was_made))
        }
        Err(e) => Err((e, false)),
    }
}

/// A directory being walked: its names, read whole and sorted by bytes, and
/// how far the walk is through them.
pub struct Listing {
    pub dir: Dir,
    names: Vec<OsString>,
    next: usize,
}

impl Listing {
    /// Read the names of the directory `fd` is open on (O_RDONLY).
    pub fn read(fd: OwnedFd) -> Result<Listing, Errno> {
        let mut dir = Dir::from_fd(fd)?;
        let names = sys::dir_names(&mut dir)?;
        Ok(Listing {
            dir,
            names,
            next: 0,
        })
    }

    /// The directory `name` below `at`, never through a symlink, with its names.
    pub fn open_at<Fd: AsFd>(at: Fd, name: &OsStr) -> Result<Listing, Errno> {
        Listing::read(dir_at(at, name, OFlag::O_RDONLY)?)
    }
}

/// A depth-first walk: the directories it is in, the innermost last, each
/// with what its walker keeps of it.
pub struct Tree<T> {
    levels: Vec<(Listing, T)>,
}

/// The next step of a [`Tree`].
pub enum Step<'a, T> {
    /// A name of the innermost directory.
    Name(&'a Listing, &'a T, OsString),
    /// The innermost directory has no names left and was left; its parent
    /// (None for the first directory) is now the innermost.
    Left(Listing, T, Option<&'a Listing>),
}

impl<T> Tree<T> {
    pub fn new(first: Listing, data: T) -> Tree<T> {
        Tree {
            levels: vec![(first, data)],
        }
    }

    /// Enter a directory: its names come next.
    pub fn push(&mut self, listing: Listing, data: T) {
        self.levels.push((listing, data));
    }

    /// Stop the walk: every descriptor it holds is closed.
    pub fn clear(&mut self) {
        self.levels.clear();
    }

    /// The next name, or the directory just left; None once the walk is over.
    pub fn step(&mut self) -> Option<Step<'_, T>> {
        let (top, _) = self.levels.last()?;
        if top.next >= top.names.len() {
            let (done, data) = self.levels.pop()?;
            return Some(Step::Left(done, data, self.levels.last().map(|(l, _)| l)));
        }
        let (top, data) = self.levels.last_mut()?;
        let name = std::mem::take(&mut top.names[top.next]);
        top.next += 1;
        Some(Step::Name(top, data, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn root(p: &Path) -> OwnedFd {
        nix::fcntl::open(p, OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty()).unwrap()
    }

    fn same_dir(fd: &OwnedFd, p: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let st = nix::sys::stat::fstat(fd).unwrap();
        let meta = std::fs::metadata(p).unwrap();
        (st.st_dev, st.st_ino) == (meta.dev(), meta.ino())
    }

    fn resolvers() -> Vec<Resolver> {
        let mut v = vec![Resolver::Steps];
        if Resolver::best() == Resolver::Openat2 {
            v.push(Resolver::Openat2);
        } else {
            eprintln!("this kernel has no openat2: only the steps are tested");
        }
        v
    }

    fn open(r: Resolver, root: &OwnedFd, names: &[&str]) -> Result<OwnedFd, Stuck> {
        resolve(r, root.as_fd(), names, OFlag::O_RDONLY, None, &mut |_| {})
    }

    #[test]
    fn a_plain_path_opens_with_either_resolver() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
        let r = root(dir.path());
        for how in resolvers() {
            let fd = open(how, &r, &["a", "b", "c"]).unwrap();
            assert!(same_dir(&fd, &dir.path().join("a/b/c")), "{how:?}");
            let fd = open(how, &r, &[]).unwrap();
            assert!(same_dir(&fd, dir.path()), "{how:?}");
        }
    }

    #[test]
    fn a_symlink_in_the_middle_or_at_the_end_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("b")).unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        symlink(outside.path(), dir.path().join("a/link")).unwrap();
        std::fs::write(dir.path().join("a/file"), b"").unwrap();
        let r = root(dir.path());
        for how in resolvers() {
            let err = open(how, &r, &["a", "link", "b"]).unwrap_err();
            assert_eq!(
                (err.at, err.is_link_or_file()),
                (1, true),
                "{how:?} {err:?}"
            );
            let err = open(how, &r, &["a", "link"]).unwrap_err();
            assert_eq!(
                (err.at, err.is_link_or_file()),
                (1, true),
                "{how:?} {err:?}"
            );
            let err = open(how, &r, &["a", "file", "x"]).unwrap_err();
            assert_eq!((err.at, err.errno), (1, Errno::ENOTDIR), "{how:?}");
            let err = open(how, &r, &["a", "none"]).unwrap_err();
            assert_eq!((err.at, err.errno), (1, Errno::ENOENT), "{how:?}");
        }
    }

    #[test]
    fn dotdot_dot_empty_and_slashed_names_are_refused_before_any_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let r = root(dir.path());
        for how in resolvers() {
            for (names, at) in [
                (&["a", ".."][..], 1),
                (&[".."][..], 0),
                (&["a", "."][..], 1),
                (&["", "a"][..], 0),
                (&["a/b"][..], 0),
            ] {
                let err = open(how, &r, names).unwrap_err();
                assert_eq!(
                    err,
                    Stuck {
                        at,
                        errno: Errno::EINVAL,
                        making: false
                    },
                    "{how:?} {names:?}"
                );
            }
        }
    }

    fn mkdirs(
        r: Resolver,
        root: &OwnedFd,
        names: &[&str],
        made: &mut dyn FnMut(usize),
    ) -> Result<OwnedFd, Stuck> {
        resolve(r, root.as_fd(), names, OFlag::O_PATH, Some(0o700), made)
    }

    #[test]
    fn mkdirs_makes_what_is_missing_and_says_which_it_made() {
        for how in resolvers() {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("a")).unwrap();
            let r = root(dir.path());
            let mut made = Vec::new();
            let fd = mkdirs(how, &r, &["a", "b", "c"], &mut |i| made.push(i)).unwrap();
            assert!(same_dir(&fd, &dir.path().join("a/b/c")), "{how:?}");
            assert_eq!(made, vec![1, 2], "{how:?}");
            // Again: all there, nothing made.
            made.clear();
            mkdirs(how, &r, &["a", "b", "c"], &mut |i| made.push(i)).unwrap();
            assert_eq!(made, Vec::<usize>::new());
            // Nothing is made through a link.
            let outside = tempfile::tempdir().unwrap();
            symlink(outside.path(), dir.path().join("a/l")).unwrap();
            let err = mkdirs(how, &r, &["a", "l", "x"], &mut |_| {}).unwrap_err();
            assert_eq!((err.at, err.is_link_or_file()), (1, true));
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn a_tree_walks_depth_first_and_says_what_it_left() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/f"), b"").unwrap();
        std::fs::write(dir.path().join("z"), b"").unwrap();
        let fd = nix::fcntl::open(dir.path(), OFlag::O_RDONLY, Mode::empty()).unwrap();
        let mut tree = Tree::new(Listing::read(fd).unwrap(), String::new());
        let mut seen = Vec::new();
        while let Some(step) = tree.step() {
            match step {
                Step::Name(listing, path, name) => {
                    let path = format!("{path}/{}", name.to_string_lossy());
                    seen.push(path.clone());
                    if let Ok(child) = Listing::open_at(&listing.dir, &name) {
                        tree.push(child, path);
                    }
                }
                Step::Left(_, path, parent) => {
                    seen.push(format!("left {path:?} {}", parent.is_some()))
                }
            }
        }
        assert_eq!(
            seen,
            [
                "/a",
                "/a/b",
                "left \"/a/b\" true",
                "/a/f",
                "left \"/a\" true",
                "/z",
                "left \"\" false"
            ]
        );
    }
}
