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
//!
//! `pull` makes the archive; `push` is the caller's side of a push and
//! `extract` its thread.

mod extract;
mod pull;
pub(crate) mod push;

pub use pull::Pull;
pub use push::Push;

const BLOCK: u64 = 512;
/// Pushed files are copied through a buffer of this size.
const COPY_BYTES: usize = 64 * 1024;
/// A directory the push makes on an entry's way, without an entry of its own, ends with this mode.
const MADE_DIR_MODE: u32 = 0o755;

/// What the tests of pull, push and extraction share: trees, archives, and
/// whole pulls and pushes.
#[cfg(test)]
mod testing {
    use super::{Pull, Push};
    use crate::protocol::RpcError;
    use nix::sys::stat::Mode;
    use std::io::Read;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;
    use tar::{EntryType, Header};

    pub(crate) fn s(p: &Path) -> String {
        p.to_str().unwrap().to_string()
    }

    pub(crate) fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    pub(crate) fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The whole archive, read `step` bytes at a time; every read but the
    /// last is full, and only the last says eof.
    pub(crate) fn pull_all(path: &Path, step: usize) -> Vec<u8> {
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
    pub(crate) struct Item {
        pub path: String,
        pub kind: EntryType,
        pub mode: u32,
        pub data: Vec<u8>,
        pub link: Option<String>,
    }

    pub(crate) fn item(
        path: &str,
        kind: EntryType,
        mode: u32,
        data: &[u8],
        link: Option<&str>,
    ) -> Item {
        Item {
            path: path.into(),
            kind,
            mode,
            data: data.to_vec(),
            link: link.map(Into::into),
        }
    }

    pub(crate) fn parse(archive: &[u8]) -> Vec<Item> {
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

    pub(crate) fn long_name() -> String {
        format!("long/{}", "n".repeat(150))
    }

    /// a.txt (0640), dir/ (0750) with sub/ (0700) and sub/deep.bin (0600),
    /// exec.sh (0755), fifo, link -> a.txt, long/ with a 150-byte name.
    pub(crate) fn tree(root: &Path) {
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

    pub(crate) fn expected_tree() -> Vec<Item> {
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

    /// Run `f` to its end on a runtime of its own.
    pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    pub(crate) fn push_all(dir: &Path, archive: &[u8], step: usize) -> Result<u64, RpcError> {
        block_on(async {
            let mut push = Push::begin(&s(dir))?;
            for chunk in archive.chunks(step) {
                push.write(chunk.to_vec()).await?;
            }
            push.end().await
        })
    }

    /// A hand-made entry: any name (tar::Builder refuses `..` and `/`).
    pub(crate) fn raw_entry(
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

    pub(crate) fn archive(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut out = entries.concat();
        out.extend_from_slice(&[0; 1024]);
        out
    }

    /// The names in a directory, sorted.
    pub(crate) fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::{Pull, Push};
    use computer_testkit::tree_snapshot;
    use std::path::Path;

    #[test]
    fn push_of_a_pulled_tree_recreates_it() {
        let src = tempfile::tempdir().unwrap();
        tree(src.path());
        std::fs::remove_file(src.path().join("fifo")).unwrap();
        let archive = pull_all(src.path(), 4096);
        let dst = tempfile::tempdir().unwrap();
        let target = dst.path().join("made/by/begin");
        assert_eq!(push_all(&target, &archive, 700).unwrap(), 8);
        assert_eq!(tree_snapshot(&target), tree_snapshot(src.path()));
        // Pushed again over itself: files and the symlink are replaced in place.
        assert_eq!(push_all(&target, &archive, 512 * 1024).unwrap(), 8);
        assert_eq!(tree_snapshot(&target), tree_snapshot(src.path()));
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

    #[test]
    fn pulls_and_pushes_move_between_threads() {
        fn send<T: Send + 'static>() {}
        send::<Pull>();
        send::<Push>();
    }
}
