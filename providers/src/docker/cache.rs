//! The provider's own copy of the daemon, the one a computer binds.
//!
//! The configured computerd may have any mode this process can read and
//! may change under it (a rebuild); a computer binds
//! `<cache>/computerd-<sha256 of its bytes>`, mode 0755, so every
//! computer's user may run it, and the same bytes give the same path in
//! every process (attach and the drift check compare it). The copy is
//! written to a temporary file and renamed into place, and hashed again
//! before each bind. The configured daemon's own hash is kept per server
//! ([`Sums`]) for as long as the file is the same one (its device, inode,
//! size, mtime and ctime), so a create hashes the 4 MB once (the copy it
//! binds), not twice. The directory is made 0700 if missing and never
//! changed: a link, another user's directory, another mode, or a directory
//! above it another user may write is refused in words.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::types::{ProviderError, Result};

/// The sha256 of a file's bytes, in hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    sha256_reader(std::fs::File::open(path)?)
}

fn sha256_reader(mut f: std::fs::File) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// One version of a file: a write, a rename over it or a `touch` changes
/// at least one of these (the ctime moves on every change, and only root
/// can set it back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileId {
    fn of(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// A file changed this recently is not kept: a change within the same
/// tick of the file system's clock could leave every field of [`FileId`]
/// as it was (git's "racy" index entries).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// The sha256 of one file, kept while the file stays the same version
/// (a server's configured daemon, hashed on every create otherwise).
#[derive(Debug, Default)]
pub struct Sums {
    kept: std::sync::Mutex<Option<(PathBuf, FileId, String)>>,
    /// How many times a file was read whole (each miss).
    reads: std::sync::atomic::AtomicU64,
}

impl Sums {
    /// The sha256 of `path`'s bytes: the one kept when `path` is still the
    /// version it was of, else read (and kept when the file had settled
    /// before and did not change while it was read).
    pub fn of(&self, path: &Path) -> std::io::Result<String> {
        let f = std::fs::File::open(path)?;
        let meta = f.metadata()?;
        let before = FileId::of(&meta);
        {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((p, id, sum)) = kept.as_ref()
                && p == path
                && *id == before
            {
                return Ok(sum.clone());
            }
        }
        let now = std::time::SystemTime::now();
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sum = sha256_reader(f)?;
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(before.ctime.0.max(0) as u64, before.ctime.1 as u32);
        let settled = changed.max(meta.modified()?) + SETTLED <= now;
        let after = FileId::of(&std::fs::metadata(path)?);
        if settled && after == before {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            *kept = Some((path.to_path_buf(), before, sum.clone()));
        }
        Ok(sum)
    }

    /// How many times a file was read whole.
    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

pub fn sha256_bytes(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Refuse a daemon that is not a static Linux ELF executable for this
/// machine: a computer's image may have no libc at all.
pub fn check_static(path: &Path) -> Result<()> {
    let shown = path.display();
    let bad = |why: String| Err(ProviderError::invalid("computerd", why));
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| {
            ProviderError::invalid(
                "computerd",
                format!("cannot read the computerd at {shown}: {e}"),
            )
        })?;
    head.truncate(n);
    if n < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return bad(format!(
            "{shown} is not a 64-bit little-endian ELF executable: give the static Linux computerd (--docker-computerd)"
        ));
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as usize;
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[o..o + 8]);
        u64::from_le_bytes(b) as usize
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > head.len() {
            break;
        }
        // PT_INTERP: the binary needs a dynamic loader the image may lack.
        if u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]) == 3 {
            return bad(format!(
                "the computerd at {shown} is dynamically linked, and a computer's image may have no libc: build the static one (RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile daemon --target x86_64-unknown-linux-gnu -p computerd) and give it with --docker-computerd"
            ));
        }
    }
    Ok(())
}

/// The computerd a Docker computer binds when none is given: the host's
/// (beside the server) when it is static; else, for a server run from a
/// checkout (`target/<profile>/computer-mcp`), the static build the README
/// makes there (`target/<arch>-unknown-linux-gnu/daemon`, then `release`);
/// else the host's, which [`check_static`] then refuses in words.
pub fn default_computerd(host: &crate::HostDefaults) -> Option<PathBuf> {
    let beside = host.computerd.clone()?;
    if check_static(&beside).is_ok() {
        return Some(beside);
    }
    let target = beside.parent().and_then(Path::parent);
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let built = ["daemon", "release"].into_iter().find_map(|profile| {
        let p = target?.join(&triple).join(profile).join("computerd");
        (p.is_file() && check_static(&p).is_ok()).then_some(p)
    });
    Some(built.unwrap_or(beside))
}

/// Doctor's line for the computerd Docker computers bind.
pub fn preflight(computerd: &Path) -> crate::Preflight {
    crate::Preflight {
        name: "Docker's computerd",
        found: match check_static(computerd) {
            Ok(()) => Ok(format!(
                "{} is static (for Docker computers)",
                computerd.display()
            )),
            Err(e) => Err((
                format!("{} (needed for Docker computers only)", e.message),
                INSTALL_STATIC.to_string(),
            )),
        },
    }
}

/// How to put the static computerd beside an installed server.
pub const INSTALL_STATIC: &str = "install the static computerd beside this binary: RUSTFLAGS='-C target-feature=+crt-static' cargo install --locked --profile daemon --path computerd --bin computerd --target x86_64-unknown-linux-gnu (or give --docker-computerd)";

/// The cache directory, made 0700 if missing and checked as the module
/// says.
pub fn check_dir(dir: &Path) -> Result<()> {
    let shown = dir.display();
    let refuse = |why: String| Err(ProviderError::invalid("cache_dir", why));
    if !dir.is_absolute() {
        return refuse(format!("the daemon cache {shown} must be an absolute path"));
    }
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    ProviderError::failed(format!("could not make {}: {e}", parent.display()))
                })?;
            }
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| ProviderError::failed(format!("could not make {shown}: {e}")))?;
        }
        Err(e) => return refuse(format!("the daemon cache {shown} cannot be read: {e}")),
        Ok(_) => {}
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| ProviderError::failed(format!("the daemon cache {shown}: {e}")))?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        return refuse(format!(
            "the daemon cache {shown} is a symlink: give the directory itself"
        ));
    }
    if !meta.is_dir() {
        return refuse(format!("the daemon cache {shown} is not a directory"));
    }
    if meta.uid() != me {
        return refuse(format!(
            "the daemon cache {shown} belongs to uid {}, not this process's {me}",
            meta.uid()
        ));
    }
    if meta.mode() & 0o777 != 0o700 {
        return refuse(format!(
            "the daemon cache {shown} has mode {:04o}; it must be 0700 (this provider never changes it)",
            meta.mode() & 0o777
        ));
    }
    let mut up = dir.parent();
    while let Some(d) = up {
        if let Ok(m) = std::fs::metadata(d) {
            let others_write = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
            if (m.uid() != me && m.uid() != 0) || others_write {
                return refuse(format!(
                    "{} above the daemon cache {shown} may be written by another user (owner {}, mode {:04o}), who could swap the daemon computers run",
                    d.display(),
                    m.uid(),
                    m.mode() & 0o7777
                ));
            }
        }
        up = d.parent();
    }
    Ok(())
}

/// The path of the cached copy of `daemon` (its hash kept in `sums`),
/// made if missing, and hashed again so a changed copy is never bound.
pub fn ensure_copy(daemon: &Path, dir: &Path, sums: &Sums) -> Result<PathBuf> {
    check_dir(dir)?;
    let sum = sums.of(daemon).map_err(|e| {
        ProviderError::invalid(
            "computerd",
            format!("cannot read the computerd at {}: {e}", daemon.display()),
        )
    })?;
    let target = dir.join(format!("computerd-{sum}"));
    let ok = |p: &Path| -> bool {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o777 == 0o755)
            && sha256_file(p).is_ok_and(|s| s == sum)
    };
    if ok(&target) {
        return Ok(target);
    }
    // A name of its own per writer: two creates may copy at once.
    let tmp = dir.join(format!(
        ".computerd-{sum}.{}.{}",
        std::process::id(),
        crate::random::random_hex(4)?
    ));
    let copied = (|| -> std::io::Result<()> {
        let mut src = std::fs::File::open(daemon)?;
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o755)
            .open(&tmp)?;
        std::io::copy(&mut src, &mut dst)?;
        dst.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        dst.flush()?;
        dst.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        if ok(&target) {
            return Ok(target);
        }
        return Err(ProviderError::failed(format!(
            "could not copy the daemon into {}: {e}",
            dir.display()
        )));
    }
    if !ok(&target) {
        return Err(ProviderError::failed(format!(
            "the daemon's copy {} does not hash to {sum} after it was written",
            target.display()
        )));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF header with no program header: static, as check_static reads it.
    fn static_elf() -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..6].copy_from_slice(b"\x7fELF\x02\x01");
        h
    }

    #[test]
    fn with_none_given_a_checkouts_static_build_is_found_beside_a_dynamic_one() {
        let root = tempfile::tempdir().unwrap();
        let debug = root.path().join("target/debug");
        let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let daemon = root.path().join("target").join(&triple).join("daemon");
        let release = root.path().join("target").join(&triple).join("release");
        for d in [&debug, &daemon, &release] {
            std::fs::create_dir_all(d).unwrap();
        }
        // The test binary itself is dynamically linked.
        let beside = debug.join("computerd");
        std::fs::copy(std::env::current_exe().unwrap(), &beside).unwrap();
        let host = crate::HostDefaults {
            computerd: Some(beside.clone()),
            ..Default::default()
        };
        // Nothing static built: the one beside, which create refuses in words.
        assert_eq!(default_computerd(&host), Some(beside.clone()));
        assert!(
            preflight(&beside)
                .found
                .unwrap_err()
                .0
                .contains("is dynamically linked")
        );
        std::fs::write(release.join("computerd"), static_elf()).unwrap();
        assert_eq!(default_computerd(&host), Some(release.join("computerd")));
        // The daemon profile (what the README builds) comes first.
        std::fs::write(daemon.join("computerd"), static_elf()).unwrap();
        assert_eq!(default_computerd(&host), Some(daemon.join("computerd")));
        assert_eq!(
            preflight(&daemon.join("computerd")).found,
            Ok(format!(
                "{} is static (for Docker computers)",
                daemon.join("computerd").display()
            ))
        );
        // A static one beside the server (an installed pair) wins.
        std::fs::write(&beside, static_elf()).unwrap();
        assert_eq!(default_computerd(&host), Some(beside));
    }

    #[test]
    fn the_copy_is_named_by_its_hash_and_made_once() {
        let src = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(src.path(), b"daemon bytes").unwrap();
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let dir = base.path().join("cache");
        let sums = Sums::default();
        let a = ensure_copy(src.path(), &dir, &sums).unwrap();
        assert_eq!(
            a.file_name().unwrap().to_str().unwrap(),
            format!("computerd-{}", sha256_bytes(b"daemon bytes"))
        );
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o755);
        assert_eq!(ensure_copy(src.path(), &dir, &sums).unwrap(), a);
        // A copy changed behind us is made again.
        std::fs::write(&a, b"other").unwrap();
        assert_eq!(ensure_copy(src.path(), &dir, &sums).unwrap(), a);
        assert_eq!(std::fs::read(&a).unwrap(), b"daemon bytes");
        // The daemon rebuilt in place (same size, same inode): its new
        // bytes get a copy of their own, not the kept hash's.
        std::fs::write(src.path(), b"daemon BYTES").unwrap();
        let b = ensure_copy(src.path(), &dir, &sums).unwrap();
        assert_eq!(
            b.file_name().unwrap().to_str().unwrap(),
            format!("computerd-{}", sha256_bytes(b"daemon BYTES"))
        );
        assert_eq!(std::fs::read(&b).unwrap(), b"daemon BYTES");
    }

    #[test]
    fn a_kept_sum_holds_while_the_file_is_the_same_version() {
        // A file that settled long ago is read once.
        let old = std::fs::canonicalize("/bin/sh").unwrap();
        let sums = Sums::default();
        let want = sha256_file(&old).unwrap();
        assert_eq!(sums.of(&old).unwrap(), want);
        assert_eq!(sums.of(&old).unwrap(), want);
        assert_eq!(sums.reads(), 1);
        // Files just written are read each time, and each version's sum
        // is its own: replaced by a rename (a new inode), written in place
        // (same size and inode).
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d");
        std::fs::write(&p, b"one").unwrap();
        assert_eq!(sums.of(&p).unwrap(), sha256_bytes(b"one"));
        let q = dir.path().join("e");
        std::fs::write(&q, b"two").unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert_eq!(sums.of(&p).unwrap(), sha256_bytes(b"two"));
        std::fs::write(&p, b"TWO").unwrap();
        assert_eq!(sums.of(&p).unwrap(), sha256_bytes(b"TWO"));
        assert_eq!(sums.reads(), 4);
        // The settled one's sum is not another path's.
        assert_eq!(sums.of(&old).unwrap(), want);
        assert!(sums.of(&dir.path().join("gone")).is_err());
    }

    #[test]
    fn a_cache_of_another_mode_or_a_link_is_refused() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let wide = base.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = check_dir(&wide).unwrap_err();
        assert!(
            e.message
                .ends_with("has mode 0755; it must be 0700 (this provider never changes it)"),
            "{}",
            e.message
        );
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&wide, &link).unwrap();
        assert!(
            check_dir(&link)
                .unwrap_err()
                .message
                .contains("is a symlink")
        );
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_dir(&open.join("cache")).unwrap_err();
        assert!(
            e.message.contains("may be written by another user"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_dynamic_daemon_is_refused() {
        // This test binary is dynamically linked (a normal cargo build).
        let me = std::env::current_exe().unwrap();
        let e = check_static(&me).unwrap_err();
        assert!(e.message.contains("dynamically linked"), "{}", e.message);
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), b"#!/bin/sh\n").unwrap();
        assert!(
            check_static(f.path())
                .unwrap_err()
                .message
                .contains("not a 64-bit")
        );
    }
}
