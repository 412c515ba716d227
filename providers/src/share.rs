//! Host directories shared into a computer on purpose, at `/workspace`:
//! the one way a host file enters a local computer. Every rule here runs
//! before anything is made, and every refusal names the path and the rule.
//!
//! One share is bound at `/workspace`; several at `/workspace/<basename>`
//! each (two with one basename are refused). A share is bound as it is: no
//! chown, no chmod; the computer's user must already be able to write it,
//! unless it is read-only.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::types::{ProviderError, Result};

#[cfg(target_os = "linux")]
pub mod acl;

/// Where shares appear inside every computer.
pub const WORKSPACE: &str = "/workspace";

/// One host directory to share, as the user wrote it (`DIR` or `DIR:ro`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShareArg {
    pub source: PathBuf,
    pub read_only: bool,
}

impl std::str::FromStr for ShareArg {
    type Err = String;

    /// `DIR`, `DIR:ro` or `DIR:rw`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (path, read_only) = match s.rsplit_once(':') {
            Some((p, "ro")) => (p, true),
            Some((p, "rw")) => (p, false),
            _ => (s, false),
        };
        if path.is_empty() {
            return Err(format!(
                "--share {s:?}: give a host directory, as DIR or DIR:ro"
            ));
        }
        Ok(ShareArg {
            source: PathBuf::from(path),
            read_only,
        })
    }
}

/// A share checked and placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// The canonical host directory.
    pub source: PathBuf,
    /// Where it appears inside: `/workspace` or `/workspace/<name>`.
    pub target: String,
    pub read_only: bool,
}

/// Check every share against the host and place it under `/workspace`.
/// `state_dir` is the provider's own (never shared, nor anything above or
/// below it); `user` is the computer's uid and gid, who must be able to
/// write a read-write share.
pub fn plan(shares: &[ShareArg], state_dir: &Path, user: (u32, u32)) -> Result<Vec<Share>> {
    let placed = place(shares, state_dir)?;
    for s in placed.iter().filter(|s| !s.read_only) {
        check_writable(&s.source, user)?;
    }
    Ok(placed)
}

/// Check every share against the host (every rule but who may write it)
/// and place it under `/workspace`: one at `/workspace`, several at
/// `/workspace/<basename>` each. What a share copied into a computer
/// needs, since the computer's user never touches the host's folder.
pub fn place(shares: &[ShareArg], state_dir: &Path) -> Result<Vec<Share>> {
    let mut out: Vec<Share> = Vec::with_capacity(shares.len());
    for s in shares {
        let source = check_source(&s.source)?;
        check_not_state(&source, state_dir)?;
        let target = target(&source, shares.len());
        if let Some(twin) = out.iter().find(|o| o.target == target) {
            return Err(ProviderError::invalid(
                "share",
                format!(
                    "the shares {} and {} would both be {target}: share directories with different names",
                    twin.source.display(),
                    source.display()
                ),
            ));
        }
        out.push(Share {
            source,
            target,
            read_only: s.read_only,
        });
    }
    Ok(out)
}

/// Where the share `source`, one of `count`, appears inside a computer:
/// `/workspace` when it is the only one, else `/workspace/<basename>`.
pub fn target(source: &Path, count: usize) -> String {
    if count == 1 {
        return WORKSPACE.to_string();
    }
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{WORKSPACE}/{name}")
}

/// For a root server: give `user` an ACL entry on every read-write share
/// its mode bits keep it out of (no `chmod` asked of anyone), for the
/// computer's life; the shares granted, for [`acl::revoke`] at release.
/// Nothing for a server that is not root (it cannot give what it has not),
/// nor for a computer running as root.
#[cfg(target_os = "linux")]
pub fn grant(shares: &[ShareArg], user: (u32, u32)) -> Result<Vec<PathBuf>> {
    let mut granted = Vec::new();
    if !nix::unistd::geteuid().is_root() || user.0 == 0 {
        return Ok(granted);
    }
    for s in shares.iter().filter(|s| !s.read_only) {
        let source = check_source(&s.source)?;
        if check_writable(&source, user).is_ok() {
            continue;
        }
        if let Err(e) = acl::grant(&source, user.0) {
            for g in &granted {
                let _ = acl::revoke(g, user.0, owner_of(g));
            }
            return Err(ProviderError::refused(format!(
                "the share {} could not be opened to the computer's user {}:{} with an ACL ({e}); give that user write access, or share it read-only ({}:ro)",
                source.display(),
                user.0,
                user.1,
                source.display()
            ))
            .with_field("share"));
        }
        granted.push(source);
    }
    Ok(granted)
}

/// A share's owner (uid, gid), whom what a computer made there is given.
pub fn owner_of(dir: &Path) -> (u32, u32) {
    std::fs::metadata(dir).map_or((0, 0), |m| (m.uid(), m.gid()))
}

/// What can be checked before the computer's user is known (every rule
/// but writability): a provider's `check` runs it, so a bad share is
/// refused when the server starts, not at the first tool call.
pub fn check(shares: &[ShareArg], state_dir: &Path) -> Result<()> {
    for s in shares {
        check_not_state(&check_source(&s.source)?, state_dir)?;
    }
    Ok(())
}

/// Absolute, canonical (its own real path: no symlink anywhere in it, no
/// `.` or `..`), an existing directory, and not `/`.
fn check_source(path: &Path) -> Result<PathBuf> {
    let shown = path.display();
    let refuse = |why: String| Err(ProviderError::invalid("share", why));
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return refuse(format!("the share {shown:?} holds a NUL byte"));
    }
    if !path.is_absolute() {
        return refuse(format!(
            "the share {shown:?} is a relative path: give the host directory's absolute path"
        ));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return refuse(format!(
            "the share {shown} has a . or .. part: give its canonical path"
        ));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return refuse(format!("the share {shown} does not exist"));
        }
        Err(e) => return refuse(format!("the share {shown} cannot be read: {e}")),
    };
    if meta.file_type().is_symlink() {
        return refuse(format!(
            "the share {shown} is a symlink: give the directory it points to"
        ));
    }
    if !meta.is_dir() {
        return refuse(format!("the share {shown} is not a directory"));
    }
    let real = std::fs::canonicalize(path)
        .map_err(|e| ProviderError::invalid("share", format!("the share {shown}: {e}")))?;
    if real != path {
        return refuse(format!(
            "the share {shown} is not canonical (a symlink is on its way): its real path is {}",
            real.display()
        ));
    }
    if real == Path::new("/") {
        return refuse("the share / is the host's whole filesystem: share a directory".into());
    }
    Ok(real)
}

/// The state directory holds every computer's files: it is never shared,
/// and neither is a directory inside it or one that holds it.
fn check_not_state(source: &Path, state_dir: &Path) -> Result<()> {
    let state = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    if source.starts_with(&state) || state.starts_with(source) {
        return Err(ProviderError::invalid(
            "share",
            format!(
                "the share {} is or holds the state directory {} (every computer's files): share another directory",
                source.display(),
                state.display()
            ),
        ));
    }
    Ok(())
}

/// As the kernel will decide for a user with no capability: the owner's,
/// the group's or others' bits, by the user's uid and gid, must allow
/// write and search.
fn check_writable(source: &Path, (uid, gid): (u32, u32)) -> Result<()> {
    let meta = std::fs::metadata(source).map_err(|e| {
        ProviderError::invalid("share", format!("the share {}: {e}", source.display()))
    })?;
    let mode = meta.mode() & 0o7777;
    let bits = if meta.uid() == uid {
        (mode >> 6) & 0o7
    } else if meta.gid() == gid {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    };
    if bits & 0o3 == 0o3 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    if acl::names(source, uid).unwrap_or(false) {
        return Ok(());
    }
    Err(ProviderError::invalid(
        "share",
        format!(
            "the share {} is not writable by the computer's user {uid}:{gid}: it is owned by {}:{} with mode {mode:04o}; give that user write access, or share it read-only ({}:ro)",
            source.display(),
            meta.uid(),
            meta.gid(),
            source.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn arg(s: &str) -> ShareArg {
        s.parse().unwrap()
    }

    fn dir(mode: u32) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    fn me() -> (u32, u32) {
        (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    }

    fn refusal(shares: &[ShareArg], state: &Path, user: (u32, u32)) -> String {
        let e = plan(shares, state, user).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("share"));
        e.message
    }

    #[test]
    fn share_flags_read_as_written() {
        assert_eq!(
            arg("/srv/data:ro"),
            ShareArg {
                source: "/srv/data".into(),
                read_only: true
            }
        );
        assert_eq!(arg("/srv/data:rw"), arg("/srv/data"));
        assert!(!arg("/srv/data").read_only);
        assert!("".parse::<ShareArg>().is_err());
        assert!(":ro".parse::<ShareArg>().is_err());
    }

    #[test]
    fn one_share_is_the_workspace_and_several_are_under_it() {
        let state = tempfile::tempdir().unwrap();
        let a = dir(0o755);
        let b = dir(0o755);
        let one = plan(&[arg(a.path().to_str().unwrap())], state.path(), me()).unwrap();
        assert_eq!(
            one,
            vec![Share {
                source: a.path().canonicalize().unwrap(),
                target: "/workspace".into(),
                read_only: false
            }]
        );
        let ro = format!("{}:ro", b.path().display());
        let two = plan(
            &[arg(a.path().to_str().unwrap()), arg(&ro)],
            state.path(),
            me(),
        )
        .unwrap();
        let name =
            |d: &tempfile::TempDir| d.path().file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(two[0].target, format!("/workspace/{}", name(&a)));
        assert_eq!(two[1].target, format!("/workspace/{}", name(&b)));
        assert!(two[1].read_only && !two[0].read_only);
        let same = plan(
            &[
                arg(a.path().to_str().unwrap()),
                arg(a.path().to_str().unwrap()),
            ],
            state.path(),
            me(),
        );
        assert!(same.unwrap_err().message.contains("would both be"));
    }

    #[test]
    fn each_bad_share_is_refused_naming_the_rule() {
        let state = tempfile::tempdir().unwrap();
        let d = dir(0o755);
        let p = d.path().display().to_string();
        assert_eq!(
            refusal(&[arg("work/src")], state.path(), me()),
            "the share \"work/src\" is a relative path: give the host directory's absolute path"
        );
        assert_eq!(
            refusal(&[arg(&format!("{p}/missing"))], state.path(), me()),
            format!("the share {p}/missing does not exist")
        );
        std::fs::write(d.path().join("f"), "x").unwrap();
        assert_eq!(
            refusal(&[arg(&format!("{p}/f"))], state.path(), me()),
            format!("the share {p}/f is not a directory")
        );
        std::fs::create_dir(d.path().join("real")).unwrap();
        std::os::unix::fs::symlink(d.path().join("real"), d.path().join("link")).unwrap();
        assert_eq!(
            refusal(&[arg(&format!("{p}/link"))], state.path(), me()),
            format!("the share {p}/link is a symlink: give the directory it points to")
        );
        assert!(
            refusal(&[arg(&format!("{p}/real/../real"))], state.path(), me())
                .contains("has a . or .. part")
        );
        std::fs::create_dir(d.path().join("real/sub")).unwrap();
        assert!(
            refusal(&[arg(&format!("{p}/link/sub"))], state.path(), me())
                .contains("is not canonical")
        );
        assert_eq!(
            refusal(&[arg("/")], state.path(), me()),
            "the share / is the host's whole filesystem: share a directory"
        );
        let s = state.path().canonicalize().unwrap();
        std::fs::create_dir(s.join("computers")).unwrap();
        for bad in [
            s.clone(),
            s.join("computers"),
            s.parent().unwrap().to_path_buf(),
        ] {
            let m = refusal(&[arg(bad.to_str().unwrap())], state.path(), me());
            assert!(m.contains("holds the state directory"), "{m}");
        }
    }

    #[test]
    fn a_read_write_share_must_be_writable_by_the_computers_user() {
        let state = tempfile::tempdir().unwrap();
        let d = dir(0o755);
        let p = d.path().canonicalize().unwrap();
        let (uid, gid) = me();
        // Another user, not in the group: others' bits r-x.
        let m = refusal(
            &[arg(p.to_str().unwrap())],
            state.path(),
            (uid + 4242, gid + 4242),
        );
        assert_eq!(
            m,
            format!(
                "the share {0} is not writable by the computer's user {1}:{2}: it is owned by {uid}:{gid} with mode 0755; give that user write access, or share it read-only ({0}:ro)",
                p.display(),
                uid + 4242,
                gid + 4242
            )
        );
        // Read-only needs no write bits; the owner has them; 0777 lets anyone.
        let ro = format!("{}:ro", p.display());
        assert!(plan(&[arg(&ro)], state.path(), (uid + 4242, gid + 4242)).is_ok());
        assert!(plan(&[arg(p.to_str().unwrap())], state.path(), (uid, gid)).is_ok());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(
            plan(
                &[arg(p.to_str().unwrap())],
                state.path(),
                (uid + 4242, gid + 4242)
            )
            .is_ok()
        );
        // The group's bits count for a user of the directory's group.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(plan(&[arg(p.to_str().unwrap())], state.path(), (uid + 4242, gid)).is_ok());
    }
}
