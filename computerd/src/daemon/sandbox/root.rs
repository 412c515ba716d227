//! The computer's root, made in the child's own mount namespace:
//!
//! 1. Everything private, so no mount reaches the host or comes from it.
//! 2. A staging tmpfs becomes the root for a moment, with the host's tree
//!    under it at `/oldroot` (bubblewrap's way), so nothing is ever made on
//!    the host and every path below is the host's own, prefixed.
//! 3. `/newroot`: the host's tree bound again, recursively, then made
//!    read-only, nosuid and nodev in one `mount_setattr`.
//! 4. Over it: `/proc` of the new PID namespace (its `sys`, `sysrq-trigger`,
//!    `irq` and `bus` read-only), a minimal `/dev`, then the plan's steps
//!    (the private `/tmp`, the masks, the binds) parents first.
//! 5. `pivot_root` into `/newroot`; the old root (staging and host tree) is
//!    detached.
//!
//! Every path given to a mount call is `/newroot` or `/oldroot` followed by
//! a canonical host path: the parents are the host's and the server's, so no
//! program of any computer can put a symbolic link in the way.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use super::plan::{Kind, Plan, Step};
use crate::daemon::sys::{
    self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

const STAGE: &str = "/tmp";
const NEW: &str = "/newroot";
const OLD: &str = "/oldroot";
/// An empty file in the staging tmpfs, bound over each file mask.
const EMPTY: &str = "/empty";

/// The device nodes bound from the host's /dev: nothing that reaches a disk
/// or the kernel's memory.
pub const DEV_NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Build the root and enter it. Call in the new PID namespace, after the
/// mount namespace was unshared.
pub fn build(plan: &Plan) -> Result<(), String> {
    mount(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
        "make every mount private",
    )?;
    stage()?;
    let new = Path::new(NEW);
    mount(
        Some(Path::new(OLD)),
        new,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
        "bind the host's root",
    )?;
    setattr(
        new,
        true,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        "make the host's root read-only, nosuid and nodev",
    )?;
    proc()?;
    dev(plan)?;
    for (i, step) in plan.steps.iter().enumerate() {
        apply(plan, step, &plan.steps[i + 1..])?;
    }
    enter()
}

/// A staging tmpfs over /tmp, pivoted into: the host's tree moves to
/// /oldroot and /newroot is an empty directory of ours.
fn stage() -> Result<(), String> {
    let stage = Path::new(STAGE);
    mount(
        Some(Path::new("tmpfs")),
        stage,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700,size=64k"),
        "mount the staging tmpfs",
    )?;
    for (name, mode) in [(NEW, 0o755), (OLD, 0o700)] {
        mkdir(&join(stage, Path::new(name)), mode)?;
    }
    make_file(&join(stage, Path::new(EMPTY)))?;
    nix::unistd::pivot_root(stage, &join(stage, Path::new(OLD))).map_err(|e| {
        format!("pivot_root into the staging tmpfs at {STAGE} failed ({e}); a process in a chroot cannot be sandboxed")
    })?;
    std::env::set_current_dir("/")
        .map_err(|e| format!("could not enter the staging root ({e})"))?;
    Ok(())
}

/// /proc of the PID namespace this process is PID 1 of. nosuid, nodev and
/// noexec as the host's /proc may be, which a user namespace requires.
fn proc() -> Result<(), String> {
    let target = PathBuf::from(NEW).join("proc");
    mount(
        Some(Path::new("proc")),
        &target,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
        "mount /proc",
    )?;
    // The kernel's knobs stay readable and are never writable, whatever a
    // program's uid (bubblewrap covers the same four).
    for name in ["sys", "sysrq-trigger", "irq", "bus"] {
        let p = target.join(name);
        if std::fs::symlink_metadata(&p).is_err() {
            continue;
        }
        mount(
            Some(&p),
            &p,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
            "cover a /proc directory",
        )?;
        setattr(
            &p,
            true,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            "make a /proc directory read-only",
        )?;
    }
    Ok(())
}

/// A tmpfs with the harmless device nodes of the host's /dev bound in, a
/// devpts instance of the computer's own, /dev/shm and the usual links;
/// then read-only. Never the host's /dev, which holds its raw disks.
fn dev(plan: &Plan) -> Result<(), String> {
    let dev = PathBuf::from(NEW).join("dev");
    mount(
        Some(Path::new("tmpfs")),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=64k"),
        "mount /dev",
    )?;
    for node in DEV_NODES {
        let from = PathBuf::from(OLD).join("dev").join(node);
        let to = dev.join(node);
        make_file(&to)?;
        mount(
            Some(&from),
            &to,
            None,
            MsFlags::MS_BIND,
            None,
            "bind a device node",
        )?;
        setattr(
            &to,
            false,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
            "make a device node nosuid and noexec",
        )?;
    }
    let pts = dev.join("pts");
    mkdir(&pts, 0o755)?;
    mount(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
        "mount a devpts instance",
    )?;
    let shm = dev.join("shm");
    mkdir(&shm, 0o755)?;
    mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(&format!("mode=1777,size={}m", plan.tmp_size_mib)),
        "mount /dev/shm",
    )?;
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let at = dev.join(link);
        std::os::unix::fs::symlink(to, &at)
            .map_err(|e| format!("could not link /dev/{link} to {to} ({e})"))?;
    }
    setattr(&dev, false, MOUNT_ATTR_RDONLY, "make /dev read-only")
}

/// One step of the plan. `later` are the steps after it, among them the
/// binds whose mount points an overlay must hold.
fn apply(plan: &Plan, step: &Step, later: &[Step]) -> Result<(), String> {
    let target = join(Path::new(NEW), &step.path);
    match &step.kind {
        Kind::Tmp => {
            mount(
                Some(Path::new("tmpfs")),
                &target,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(&format!("mode=1777,size={}m", plan.tmp_size_mib)),
                "mount the private /tmp",
            )?;
            mount_points(step, later)?;
        }
        Kind::MaskDir => {
            // Under an earlier mask, with no bind under it: hidden already.
            if std::fs::symlink_metadata(&target).is_err() {
                return Ok(());
            }
            mount(
                Some(Path::new("tmpfs")),
                &target,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some("mode=0755,size=64k"),
                "mask a directory",
            )?;
            mount_points(step, later)?;
            setattr(&target, false, MOUNT_ATTR_RDONLY, "make a mask read-only")?;
        }
        Kind::MaskFile => {
            if std::fs::symlink_metadata(&target).is_err() {
                return Ok(());
            }
            mount(
                Some(Path::new(EMPTY)),
                &target,
                None,
                MsFlags::MS_BIND,
                None,
                "mask a file",
            )?;
            setattr(
                &target,
                false,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                "make a file mask read-only",
            )?;
        }
        Kind::Bind { writable, .. } => {
            let source = join(Path::new(OLD), &step.path);
            mount(
                Some(&source),
                &target,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
                if *writable {
                    "bind read-write"
                } else {
                    "bind read-only"
                },
            )?;
            let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            if !writable {
                set |= MOUNT_ATTR_RDONLY;
            }
            setattr(&target, true, set, "restrict a bind")?;
        }
    }
    Ok(())
}

/// In a fresh overlay, the directories (and for a file, the empty file) that
/// the binds under it are mounted on.
fn mount_points(overlay: &Step, later: &[Step]) -> Result<(), String> {
    for bind in later {
        let Kind::Bind { dir, .. } = bind.kind else {
            continue;
        };
        let Ok(rel) = bind.path.strip_prefix(&overlay.path) else {
            continue;
        };
        let mut at = join(Path::new(NEW), &overlay.path);
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            if std::fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            if last && !dir {
                make_file(&at)?;
            } else {
                mkdir(&at, 0o755)?;
            }
        }
    }
    Ok(())
}

/// pivot_root into /newroot, detach the old root (the staging tmpfs with the
/// host's tree under it), and start from /.
fn enter() -> Result<(), String> {
    std::env::set_current_dir(NEW).map_err(|e| format!("could not enter the new root ({e})"))?;
    nix::unistd::pivot_root(".", ".")
        .map_err(|e| format!("pivot_root into the new root failed ({e})"))?;
    // The old root now sits over the new one at "."; detaching it takes the
    // host's tree out of this namespace.
    nix::mount::umount2(".", MntFlags::MNT_DETACH)
        .map_err(|e| format!("could not detach the old root ({e})"))?;
    std::env::set_current_dir("/").map_err(|e| format!("could not enter / ({e})"))
}

/// `base` followed by the absolute `path` (whose leading / is dropped).
fn join(base: &Path, path: &Path) -> PathBuf {
    let rel = path.strip_prefix("/").unwrap_or(path);
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

/// What a path means to the computer: /newroot/x is /x, /oldroot/x the
/// host's /x.
fn inside(p: &Path) -> String {
    if let Ok(rest) = p.strip_prefix(NEW) {
        format!("/{}", rest.display())
    } else if let Ok(rest) = p.strip_prefix(OLD) {
        format!("the host's /{}", rest.display())
    } else {
        p.display().to_string()
    }
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
    step: &str,
) -> Result<(), String> {
    nix::mount::mount(source, target, fstype, flags, data).map_err(|e| {
        let from = source
            .filter(|s| s.is_absolute())
            .map(|s| format!(" from {}", inside(s)))
            .unwrap_or_default();
        format!("{step}: mount on {}{from} failed ({e})", inside(target))
    })
}

fn setattr(target: &Path, recursive: bool, set: u64, step: &str) -> Result<(), String> {
    sys::mount_setattr(target, recursive, set).map_err(|e| {
        let hint = if e == nix::errno::Errno::ENOSYS {
            "; mount_setattr needs Linux 5.12 or later"
        } else {
            ""
        };
        format!("{step}: {} ({e}{hint})", inside(target))
    })
}

fn mkdir(p: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(p)
        .map_err(|e| format!("could not make the directory {} ({e})", inside(p)))
}

fn make_file(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(p)
        .map(drop)
        .map_err(|e| format!("could not make the mount point {} ({e})", inside(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_under_a_base_and_named_as_inside() {
        assert_eq!(
            join(Path::new(NEW), Path::new("/home/u")),
            PathBuf::from("/newroot/home/u")
        );
        assert_eq!(join(Path::new(NEW), Path::new("/")), PathBuf::from(NEW));
        assert_eq!(inside(Path::new("/newroot/dev/pts")), "/dev/pts");
        assert_eq!(
            inside(Path::new("/oldroot/dev/null")),
            "the host's /dev/null"
        );
    }
}
