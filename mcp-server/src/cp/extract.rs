//! A tar archive a computer made, unpacked on this host. The computer is
//! not trusted, so neither is a byte of its archive: every member is
//! checked before anything is written, and the first one that breaks a
//! rule stops the copy with words naming it (the caller then removes the
//! private directory it extracted into, so nothing is left behind).
//!
//! The rules:
//! - names: relative, no `..`, no NUL; at most 4095 bytes a path;
//! - kinds: regular files, directories and symbolic links; a hard link, a
//!   device, a pipe or a socket is refused;
//! - a symbolic link stays inside the copy: its target is relative and,
//!   read from the link's own directory, never climbs above the copy;
//! - nothing is written through a link: every directory on a member's way
//!   is a real directory made by this extraction;
//! - a path is written once (a directory may be named again);
//! - modes are capped at 0755 (no setuid, setgid, sticky, group or world
//!   write), and files are owned by whoever runs the copy;
//! - at most `max_bytes` of member data and `max_files` members.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The bounds of one extraction.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_bytes: u64,
    pub max_files: u64,
}

/// What an extraction wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    pub files: u64,
    pub dirs: u64,
    pub links: u64,
    pub bytes: u64,
}

const MAX_PATH_BYTES: usize = 4095;

/// Unpack `archive` under `root`, a directory this process made for it
/// and nobody else writes. On an error, what was written stays under
/// `root` for the caller to remove.
pub fn extract(archive: impl Read, root: &Path, bounds: Bounds) -> Result<Extracted, String> {
    let mut ar = tar::Archive::new(archive);
    let mut done = Extracted::default();
    let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
    let entries = ar
        .entries()
        .map_err(|e| format!("the archive could not be read: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("the archive could not be read: {e}"))?;
        let raw = entry
            .path()
            .map_err(|e| format!("a member's name could not be read: {e}"))?
            .into_owned();
        let Some(rel) = safe_name(&raw)? else {
            continue; // "." or "./": the copy's own root
        };
        let members = done.files + done.dirs + done.links + 1;
        if members > bounds.max_files {
            return Err(format!(
                "the copy has over {} members, the most allowed (--max-files); nothing was kept",
                bounds.max_files
            ));
        }
        let size = entry.header().entry_size().unwrap_or(0);
        if done.bytes + size > bounds.max_bytes {
            return Err(format!(
                "the copy is over {} bytes, the most allowed (--max-bytes), at {}; nothing was kept",
                bounds.max_bytes,
                rel.display()
            ));
        }
        let at = real_parent_dirs(root, &rel)?;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o755;
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {}
                Ok(_) => return Err(twice(&rel)),
                Err(_) => {
                    std::fs::create_dir(&at).map_err(|e| host_failed(&rel, &e))?;
                    done.dirs += 1;
                }
            }
            dir_modes.push((at, mode));
            continue;
        }
        if std::fs::symlink_metadata(&at).is_ok() {
            return Err(twice(&rel));
        }
        if kind.is_file() || kind == tar::EntryType::Continuous {
            write_file(&mut entry, &at, mode, &rel)?;
            done.files += 1;
            done.bytes += size;
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| format!("the link {}'s target could not be read: {e}", rel.display()))?
                .ok_or_else(|| format!("the link {} names no target", rel.display()))?
                .into_owned();
            link_stays_inside(&rel, &target)?;
            std::os::unix::fs::symlink(&target, &at).map_err(|e| host_failed(&rel, &e))?;
            done.links += 1;
        } else {
            return Err(format!(
                "{} is {}, which a copy never makes; nothing was kept",
                rel.display(),
                kind_words(kind)
            ));
        }
    }
    // Directory modes last (deepest first), so a read-only directory in
    // the archive did not stop its own members from being written.
    for (dir, mode) in dir_modes.iter().rev() {
        set_mode(dir, *mode)?;
    }
    Ok(done)
}

/// A member's name as a relative path of normal parts; `None` for the
/// root itself.
fn safe_name(raw: &Path) -> Result<Option<PathBuf>, String> {
    let shown = raw.display();
    if raw.as_os_str().len() > MAX_PATH_BYTES {
        return Err(format!(
            "a member's name is over {MAX_PATH_BYTES} bytes; nothing was kept"
        ));
    }
    let mut rel = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(p) => rel.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "the member {shown} climbs out of the copy with ..; nothing was kept"
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "the member {shown} is an absolute path; nothing was kept"
                ));
            }
        }
    }
    Ok((!rel.as_os_str().is_empty()).then_some(rel))
}

/// `root/rel`, once every directory above it is checked to be a real
/// directory (never a link: nothing is written through one).
fn real_parent_dirs(root: &Path, rel: &Path) -> Result<PathBuf, String> {
    let mut at = root.to_path_buf();
    let parts: Vec<Component> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        at.push(c);
        if i + 1 == parts.len() {
            break;
        }
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "the member {} would be written through the link {}; nothing was kept",
                    rel.display(),
                    at.strip_prefix(root).unwrap_or(&at).display()
                ));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "the member {} is under {}, which is a file; nothing was kept",
                    rel.display(),
                    at.strip_prefix(root).unwrap_or(&at).display()
                ));
            }
            Err(_) => std::fs::create_dir(&at).map_err(|e| host_failed(rel, &e))?,
        }
    }
    Ok(at)
}

/// A link at `rel` whose `target` stays inside the copy.
fn link_stays_inside(rel: &Path, target: &Path) -> Result<(), String> {
    let out = || {
        format!(
            "the link {} points outside the copy ({}); nothing was kept",
            rel.display(),
            target.display()
        )
    };
    // Depth below the copy's root of the link's own directory.
    let mut depth = rel.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return Err(out());
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(out()),
        }
    }
    if target.as_os_str().is_empty() {
        return Err(out());
    }
    Ok(())
}

fn write_file(entry: &mut impl Read, at: &Path, mode: u32, rel: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(at)
        .map_err(|e| host_failed(rel, &e))?;
    std::io::copy(entry, &mut f).map_err(|e| {
        format!(
            "{} could not be copied: {e}; nothing was kept",
            rel.display()
        )
    })?;
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| host_failed(rel, &e))
}

fn set_mode(dir: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    // The owner keeps write and search, so the copy can be removed.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

fn twice(rel: &Path) -> String {
    format!(
        "the archive names {} twice, or as both a file and a directory; nothing was kept",
        rel.display()
    )
}

fn host_failed(rel: &Path, e: &std::io::Error) -> String {
    format!("{} could not be written here: {e}", rel.display())
}

fn kind_words(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Link => "a hard link",
        tar::EntryType::Char => "a character device",
        tar::EntryType::Block => "a block device",
        tar::EntryType::Fifo => "a named pipe",
        _ => "a member of a kind other than file, directory or link",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        max_bytes: 1 << 20,
        max_files: 100,
    };

    /// A raw ustar header for `name` of `kind`, with `link` and `size`
    /// (the tar crate's builder refuses the hostile names these tests need).
    fn member(name: &str, kind: u8, link: &str, data: &[u8]) -> Vec<u8> {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[108..115].copy_from_slice(b"0000000");
        h[116..123].copy_from_slice(b"0000000");
        let size = format!("{:011o}", data.len());
        h[124..135].copy_from_slice(size.as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = kind;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let mut out = h.to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    fn archive(members: &[Vec<u8>]) -> Vec<u8> {
        let mut out: Vec<u8> = members.concat();
        out.extend_from_slice(&[0u8; 1024]);
        out
    }

    fn run(members: &[Vec<u8>]) -> (tempfile::TempDir, Result<Extracted, String>) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("copy");
        std::fs::create_dir(&root).unwrap();
        let r = extract(archive(members).as_slice(), &root, BOUNDS);
        (dir, r)
    }

    #[test]
    fn a_tree_of_files_dirs_and_inner_links_comes_out_whole() {
        let (dir, r) = run(&[
            member("./", b'5', "", b""),
            member("a/", b'5', "", b""),
            member("a/one.txt", b'0', "", b"one\n"),
            member("a/up", b'2', "../top.txt", b""),
            member("top.txt", b'0', "", b"top\n"),
        ]);
        let got = r.unwrap();
        assert_eq!(
            got,
            Extracted {
                files: 2,
                dirs: 1,
                links: 1,
                bytes: 8
            }
        );
        let root = dir.path().join("copy");
        assert_eq!(std::fs::read(root.join("a/one.txt")).unwrap(), b"one\n");
        assert_eq!(std::fs::read(root.join("a/up")).unwrap(), b"top\n");
    }

    #[test]
    fn hostile_members_are_refused_naming_them() {
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            (
                vec![member("../escape", b'0', "", b"x")],
                "the member ../escape climbs out of the copy with ..",
            ),
            (
                vec![member("/etc/evil", b'0', "", b"x")],
                "the member /etc/evil is an absolute path",
            ),
            (
                vec![
                    member("out", b'2', "/etc", b""),
                    member("out/passwd", b'0', "", b"x"),
                ],
                "the link out points outside the copy (/etc)",
            ),
            (
                vec![
                    member("d/", b'5', "", b""),
                    member("d/up", b'2', "../../x", b""),
                ],
                "the link d/up points outside the copy (../../x)",
            ),
            (
                vec![member("null", b'3', "", b"")],
                "null is a character device, which a copy never makes",
            ),
            (vec![member("pipe", b'6', "", b"")], "pipe is a named pipe"),
            (
                vec![member("f", b'0', "", b"x"), member("hard", b'1', "f", b"")],
                "hard is a hard link",
            ),
            (
                vec![member("f", b'0', "", b"x"), member("f", b'0', "", b"y")],
                "the archive names f twice",
            ),
            (
                vec![member("big", b'0', "", &vec![7u8; (1 << 20) + 1])],
                "the copy is over 1048576 bytes, the most allowed (--max-bytes), at big",
            ),
        ];
        for (members, want) in cases {
            let (_dir, r) = run(&members);
            let e = r.unwrap_err();
            assert!(e.contains(want), "{e:?} does not say {want:?}");
        }
    }

    #[test]
    fn a_file_through_an_inner_link_to_a_directory_is_refused() {
        let (_dir, r) = run(&[
            member("real/", b'5', "", b""),
            member("alias", b'2', "real", b""),
            member("alias/f", b'0', "", b"x"),
        ]);
        let e = r.unwrap_err();
        assert!(
            e.contains("the member alias/f would be written through the link alias"),
            "{e}"
        );
    }

    #[test]
    fn too_many_members_are_refused_naming_the_limit() {
        let many: Vec<Vec<u8>> = (0..101)
            .map(|i| member(&format!("f{i}"), b'0', "", b""))
            .collect();
        let (_dir, r) = run(&many);
        let e = r.unwrap_err();
        assert!(
            e.contains("over 100 members, the most allowed (--max-files)"),
            "{e}"
        );
    }

    #[test]
    fn modes_are_capped_at_0755() {
        let mut m = member("s", b'0', "", b"x");
        m[100..107].copy_from_slice(b"0006777");
        // Fix the checksum for the changed mode.
        m[148..156].copy_from_slice(b"        ");
        let sum: u32 = m[..512].iter().map(|b| u32::from(*b)).sum();
        m[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let (dir, r) = run(&[m]);
        r.unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("copy/s"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755);
    }
}
