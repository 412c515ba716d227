//! A share's copy-back, once the computer's tree is whole and host-safe
//! in a private directory inside the host folder: merged into the folder.
//!
//! The rules, chosen so that no file is lost on either side without a
//! word:
//! - a file, link or directory only the computer has is added;
//! - one that is the same on both sides is left alone;
//! - one that differs is replaced by the computer's (each replacement is
//!   one rename, so a file is never seen half written); but when the
//!   host's was changed after the computer was made (its mtime is later),
//!   or is a directory where the computer has a file, the host's is first
//!   moved aside into `.computer-mcp-replaced-<time>/` at the folder's
//!   top, and the words name it;
//! - a file deleted in the computer is never deleted here: it is kept,
//!   and the words count and name the first few (delete them by hand if
//!   the deletion was meant);
//! - for a root server, what is added is given to the folder's owner.
//!
//! Every path here is under the folder, and the private tree was made by
//! [`crate::cp::extract`]: no name climbs out, no link points out, and a
//! directory of the tree met as a host link or file is moved aside rather
//! than written through.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where host files a copy-back replaced are kept, at the folder's top.
pub const REPLACED_PREFIX: &str = ".computer-mcp-replaced-";

/// How many names the words list of files kept or moved aside.
const NAMED: usize = 5;

/// What a merge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// Files, links and directories added or replaced.
    pub written: u64,
    /// The same on both sides.
    pub unchanged: u64,
    /// Host entries moved aside before they were replaced.
    pub moved_aside: Vec<PathBuf>,
    /// Where they are.
    pub aside: Option<PathBuf>,
    /// Host entries the computer no longer has, kept.
    pub kept: Vec<PathBuf>,
}

impl Merged {
    /// The outcome in words.
    pub fn words(&self) -> String {
        let mut w = format!("{} written, {} unchanged", self.written, self.unchanged);
        if let Some(aside) = &self.aside {
            w.push_str(&format!(
                "; {} changed here since the computer was made and replaced, kept in {} ({})",
                self.moved_aside.len(),
                aside.display(),
                named(&self.moved_aside)
            ));
        }
        if !self.kept.is_empty() {
            w.push_str(&format!(
                "; {} deleted in the computer and kept here ({})",
                self.kept.len(),
                named(&self.kept)
            ));
        }
        w
    }
}

fn named(paths: &[PathBuf]) -> String {
    let mut shown: Vec<String> = paths
        .iter()
        .take(NAMED)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > NAMED {
        shown.push(format!("and {} more", paths.len() - NAMED));
    }
    shown.join(", ")
}

/// Merge the tree at `from` (inside `into`, made by the extraction) into
/// the host folder `into`; `made` is when the computer was made.
pub fn merge(from: &Path, into: &Path, made: SystemTime) -> Result<Merged, String> {
    let theirs = crate::cp::walk(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let owner = root_gives_to(into);
    let mut m = Merged::default();
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let aside_dir = into.join(format!("{REPLACED_PREFIX}{stamp}"));
    for (rel, ft) in &theirs {
        let src = from.join(rel);
        let dst = into.join(rel);
        let here = std::fs::symlink_metadata(&dst).ok();
        if ft.is_dir() {
            match &here {
                Some(h) if h.is_dir() => continue,
                Some(_) => move_aside(&dst, rel, &aside_dir, &mut m)?,
                None => {}
            }
            let mode = std::fs::metadata(&src).map_or(0o755, |s| s.mode() & 0o755);
            std::fs::create_dir(&dst).map_err(|e| failed(rel, &e))?;
            set_mode(&dst, mode, rel)?;
            give(&dst, owner, rel)?;
            m.written += 1;
            continue;
        }
        if let Some(h) = &here {
            if same(&src, &dst, h) {
                m.unchanged += 1;
                continue;
            }
            let changed_here = h.modified().is_ok_and(|t| t > made);
            if h.is_dir() || changed_here {
                move_aside(&dst, rel, &aside_dir, &mut m)?;
            }
        }
        std::fs::rename(&src, &dst).map_err(|e| failed(rel, &e))?;
        give(&dst, owner, rel)?;
        m.written += 1;
    }
    m.kept = only_here(into, &theirs)?;
    Ok(m)
}

/// Move the host's `dst` (at `rel`) into the aside directory.
fn move_aside(dst: &Path, rel: &Path, aside_dir: &Path, m: &mut Merged) -> Result<(), String> {
    let to = aside_dir.join(rel);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| failed(rel, &e))?;
    }
    std::fs::rename(dst, &to).map_err(|e| failed(rel, &e))?;
    m.aside = Some(aside_dir.to_path_buf());
    m.moved_aside.push(rel.to_path_buf());
    Ok(())
}

/// Whether the computer's `src` and the host's `dst` are the same: both
/// files of equal bytes, or both links to one target.
fn same(src: &Path, dst: &Path, here: &std::fs::Metadata) -> bool {
    let Ok(theirs) = std::fs::symlink_metadata(src) else {
        return false;
    };
    if theirs.file_type().is_symlink() && here.file_type().is_symlink() {
        return std::fs::read_link(src).ok() == std::fs::read_link(dst).ok();
    }
    if theirs.is_file() && here.is_file() && theirs.len() == here.len() {
        return same_bytes(src, dst).unwrap_or(false)
            && theirs.mode() & 0o777 == here.mode() & 0o777;
    }
    false
}

fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// The host's entries (outside this module's own directories) that the
/// computer's tree does not have, sorted.
fn only_here(into: &Path, theirs: &[(PathBuf, std::fs::FileType)]) -> Result<Vec<PathBuf>, String> {
    let known: std::collections::HashSet<&Path> = theirs.iter().map(|(p, _)| p.as_path()).collect();
    let ours = crate::cp::walk(into).map_err(|e| format!("{}: {e}", into.display()))?;
    let mut out: Vec<PathBuf> = ours
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !own_dir(p) && !known.contains(p.as_path()))
        // A directory kept names itself, not each file under it.
        .collect();
    out.sort();
    let mut tops: Vec<PathBuf> = Vec::with_capacity(out.len());
    for p in out {
        if !tops.last().is_some_and(|t| p.starts_with(t)) {
            tops.push(p);
        }
    }
    Ok(tops)
}

/// Whether `rel` is in a directory of this module's (a copy-back under
/// way, host files moved aside).
pub fn own_dir(rel: &Path) -> bool {
    rel.components().next().is_some_and(|c| {
        let n = c.as_os_str().to_string_lossy();
        n.starts_with(super::SYNCING_PREFIX) || n.starts_with(REPLACED_PREFIX)
    })
}

/// The folder's owner, when this server is root and the folder is not
/// root's: what is added is given to them.
fn root_gives_to(folder: &Path) -> Option<(u32, u32)> {
    let owner = computer_providers::share::owner_of(folder);
    (nix::unistd::geteuid().is_root() && owner.0 != 0).then_some(owner)
}

fn give(p: &Path, owner: Option<(u32, u32)>, rel: &Path) -> Result<(), String> {
    match owner {
        Some((uid, gid)) => {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| failed(rel, &e))
        }
        None => Ok(()),
    }
}

fn set_mode(p: &Path, mode: u32, rel: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o700))
        .map_err(|e| failed(rel, &e))
}

fn failed(rel: &Path, e: &std::io::Error) -> String {
    format!("{} could not be put in place here: {e}", rel.display())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn a_merge_adds_replaces_keeps_deleted_files_and_moves_host_changes_aside() {
        let d = tempfile::tempdir().unwrap();
        let into = d.path().join("share");
        write(&into.join("same.txt"), "same\n");
        write(&into.join("old.txt"), "old\n");
        write(&into.join("gone.txt"), "deleted in the computer\n");
        let made = SystemTime::now();
        std::thread::sleep(Duration::from_millis(20));
        // Changed here after the computer was made.
        write(&into.join("both.txt"), "host edit\n");
        let from = into.join(format!("{}t", super::super::SYNCING_PREFIX));
        write(&from.join("same.txt"), "same\n");
        write(&from.join("old.txt"), "new\n");
        write(&from.join("both.txt"), "computer edit\n");
        write(&from.join("sub/added.txt"), "added\n");
        std::os::unix::fs::symlink("sub/added.txt", from.join("link")).unwrap();
        // Equal modes, so "same" reads as unchanged.
        let mode = std::fs::metadata(into.join("same.txt"))
            .unwrap()
            .permissions();
        std::fs::set_permissions(from.join("same.txt"), mode).unwrap();

        let m = merge(&from, &into, made).unwrap();
        let read = |r: &str| std::fs::read_to_string(into.join(r)).unwrap();
        assert_eq!(read("old.txt"), "new\n");
        assert_eq!(read("both.txt"), "computer edit\n");
        assert_eq!(read("sub/added.txt"), "added\n");
        assert_eq!(read("link"), "added\n");
        assert_eq!(read("gone.txt"), "deleted in the computer\n");
        let aside = m.aside.clone().unwrap();
        assert_eq!(
            std::fs::read_to_string(aside.join("both.txt")).unwrap(),
            "host edit\n"
        );
        assert_eq!(m.moved_aside, vec![PathBuf::from("both.txt")]);
        assert_eq!(m.kept, vec![PathBuf::from("gone.txt")]);
        assert_eq!((m.written, m.unchanged), (5, 1));
        let w = m.words();
        assert!(
            w.contains("1 deleted in the computer and kept here (gone.txt)"),
            "{w}"
        );
        assert!(
            w.contains("1 changed here since the computer was made"),
            "{w}"
        );
    }

    #[test]
    fn a_host_link_where_the_computer_has_a_directory_is_moved_aside_not_written_through() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let into = d.path().join("share");
        std::fs::create_dir(&into).unwrap();
        std::os::unix::fs::symlink(&outside, into.join("dir")).unwrap();
        let made = SystemTime::now();
        let from = into.join(format!("{}t", super::super::SYNCING_PREFIX));
        write(&from.join("dir/f"), "x\n");
        let m = merge(&from, &into, made).unwrap();
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        assert!(
            !std::fs::symlink_metadata(into.join("dir"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(into.join("dir/f")).unwrap(), "x\n");
        assert_eq!(m.moved_aside, vec![PathBuf::from("dir")]);
    }
}
