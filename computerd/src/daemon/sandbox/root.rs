//! The computer's root, made in the child's own mount namespace from an
//! allowlist, never from the host's root with masks over it:
//!
//! 1. Everything private, so no mount reaches the host or comes from it.
//! 2. A staging tmpfs becomes the root for a moment, with the host's tree
//!    under it at `/oldroot` (bubblewrap's way), so nothing is ever made on
//!    the host and every host path below is the host's own, prefixed.
//! 3. `/newroot`: a fresh tmpfs. In it, and nothing else: the host's OS
//!    directories (`/usr`, `/etc`, `/lib*`…) bound read-only, nosuid and
//!    nodev, or their links made again; `/proc` of the new PID namespace; a
//!    minimal `/dev`; `/tmp` and `/work` (HOME) tmpfs of bounded size; `--run`
//!    at `/run/computerd`; the shares under `/workspace`; computerd itself at
//!    `/opt/computerd/computerd` where no OS directory shows it; with
//!    `--network none` a sysfs of the computer's own network namespace.
//!    Then the root tmpfs itself goes read-only.
//! 4. `pivot_root` into `/newroot`; the old root (staging and host tree) is
//!    detached, so no `/old_root` or `/oldroot` is left.
//!
//! A host path given to a mount call is `/oldroot` followed by a canonical
//! host path whose parents are the host's or the server's, except the
//! shares': a share's directory is reached from `/oldroot` one name at a
//! time without following a link, and bound from that descriptor, so a host
//! user who swaps a part of its path for a link after the server checked it
//! binds nothing else.

use crate::daemon::setup::{SetupError, Step};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{MntFlags, MsFlags};
use nix::sys::stat::Mode;

use super::plan::{self, Network, OsEntry, Plan};
use crate::daemon::sys::{
    self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

const STAGE: &str = "/tmp";
const NEW: &str = "/newroot";
const OLD: &str = "/oldroot";

/// The device nodes bound from the host's /dev: nothing that reaches a disk
/// or the kernel's memory.
pub const DEV_NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Build the root and enter it. Call in the new PID namespace, after the
/// mount namespace was unshared.
pub fn build(plan: &Plan) -> Result<(), SetupError> {
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
    fresh(
        "tmpfs",
        new,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m"),
        "mount the computer's root tmpfs",
    )?;
    for entry in &plan.os {
        os_entry(entry)?;
    }
    proc()?;
    dev(plan)?;
    tmp(plan)?;
    work(plan)?;
    run(plan)?;
    if let Some(dir) = &plan.egress {
        egress(dir)?;
    }
    for share in &plan.shares {
        share_dir(share)?;
    }
    if plan.binds_exe() {
        exe(plan)?;
    }
    if plan.network == Network::None {
        sysfs(plan.userns.is_some())?;
    }
    setattr(new, false, MOUNT_ATTR_RDONLY, "make the root read-only")?;
    enter()
}

/// A staging tmpfs over /tmp, pivoted into: the host's tree moves to
/// /oldroot and /newroot is an empty directory of ours.
fn stage() -> Result<(), SetupError> {
    let stage = Path::new(STAGE);
    fresh(
        "tmpfs",
        stage,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700,size=64k"),
        "mount the staging tmpfs",
    )?;
    for (name, mode) in [(NEW, 0o755), (OLD, 0o700)] {
        mkdir(&join(stage, Path::new(name)), mode)?;
    }
    nix::unistd::pivot_root(stage, &join(stage, Path::new(OLD))).map_err(|e| {
        format!("pivot_root into the staging tmpfs at {STAGE} failed ({e}); a process in a chroot cannot be sandboxed")
    })?;
    std::env::set_current_dir("/").step("enter the staging root")?;
    Ok(())
}

/// One OS directory of the host, bound read-only, nosuid and nodev with
/// whatever is mounted under it; or its link, made again.
fn os_entry(entry: &OsEntry) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), entry.path());
    match entry {
        OsEntry::Link { target: to, .. } => std::os::unix::fs::symlink(to, &target).step(format!(
            "link {} to {}",
            inside(&target),
            to.display()
        )),
        OsEntry::Dir(d) => {
            mkdir(&target, 0o755)?;
            mount(
                Some(&join(Path::new(OLD), d)),
                &target,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
                "bind an OS directory",
            )?;
            setattr(
                &target,
                true,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                "make an OS directory read-only, nosuid and nodev",
            )
        }
    }
}

/// /proc of the PID namespace this process is PID 1 of. nosuid, nodev and
/// noexec as the host's /proc may be, which a user namespace requires.
fn proc() -> Result<(), SetupError> {
    let target = PathBuf::from(NEW).join("proc");
    mkdir(&target, 0o555)?;
    fresh(
        "proc",
        &target,
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
fn dev(plan: &Plan) -> Result<(), SetupError> {
    let dev = PathBuf::from(NEW).join("dev");
    mkdir(&dev, 0o755)?;
    fresh(
        "tmpfs",
        &dev,
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
    fresh(
        "devpts",
        &pts,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
        "mount a devpts instance",
    )?;
    scratch(plan, &dev.join("shm"), "mount /dev/shm")?;
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let at = dev.join(link);
        std::os::unix::fs::symlink(to, &at).step(format!("link /dev/{link} to {to}"))?;
    }
    setattr(&dev, false, MOUNT_ATTR_RDONLY, "make /dev read-only")
}

/// The private /tmp: a tmpfs anyone may write, `--tmp-size-mib` large.
fn tmp(plan: &Plan) -> Result<(), SetupError> {
    scratch(
        plan,
        &PathBuf::from(NEW).join("tmp"),
        "mount the private /tmp",
    )
}

/// A tmpfs anyone may write, `--tmp-size-mib` large, on a new directory
/// `target` (the private /tmp, and /dev/shm).
fn scratch(plan: &Plan, target: &Path, step: &str) -> Result<(), SetupError> {
    mkdir(target, 0o755)?;
    fresh(
        "tmpfs",
        target,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(&format!("mode=1777,size={}m", plan.tmp_size_mib)),
        step,
    )
}

/// HOME: a tmpfs of `--work-size-mib`, the computer's user's alone. A full
/// /work fails a write with ENOSPC; its pages are charged to the cgroup of
/// the program that writes them, the computer's.
fn work(plan: &Plan) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), Path::new(plan::WORK));
    mkdir(&target, 0o755)?;
    let (uid, gid) = plan.owner;
    fresh(
        "tmpfs",
        &target,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(&format!(
            "mode=0700,uid={uid},gid={gid},size={}m",
            plan.work_size_mib
        )),
        "mount /work",
    )
}

/// `--run` at /run/computerd, read-write: init's socket, reached by the
/// host at the same file.
fn run(plan: &Plan) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), Path::new(plan::RUN));
    mkdir_all(Path::new(NEW), Path::new(plan::RUN))?;
    mount(
        Some(&join(Path::new(OLD), &plan.run)),
        &target,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
        "bind --run",
    )?;
    setattr(
        &target,
        true,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        "make --run nosuid and nodev",
    )
}

/// `--egress` at /run/egress, read-only: the egress proxy's socket (a
/// socket on a read-only mount is still connected to; nothing there can
/// be made, moved or removed from inside).
fn egress(dir: &Path) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), Path::new(plan::EGRESS));
    mkdir_all(Path::new(NEW), Path::new(plan::EGRESS))?;
    mount(
        Some(&join(Path::new(OLD), dir)),
        &target,
        None,
        MsFlags::MS_BIND,
        None,
        "bind --egress",
    )?;
    setattr(
        &target,
        false,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        "make --egress read-only",
    )
}

/// One share under /workspace, bound from a descriptor reached without
/// following any link; read-only for `:ro`, and nosuid, nodev either way,
/// for it and every mount under it.
fn share_dir(share: &plan::Share) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), &share.inside);
    mkdir_all(Path::new(NEW), &share.inside)?;
    let fd = open_beneath(Path::new(OLD), &share.source).map_err(|e| {
        format!(
            "--bind {share}: could not open {} without following a link ({e}); a part of it changed since it was checked",
            share.source.display()
        )
    })?;
    // The host's /proc names this process's descriptor; the mount follows
    // that link to the directory opened, not to a path.
    let by_fd = PathBuf::from(format!("{OLD}/proc/self/fd/{}", fd.as_raw_fd()));
    nix::mount::mount(
        Some(&by_fd),
        &target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| {
        format!(
            "--bind {share}: mount on {} failed ({e})",
            share.inside.display()
        )
    })?;
    drop(fd);
    let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if share.read_only {
        set |= MOUNT_ATTR_RDONLY;
    }
    setattr(&target, true, set, "restrict a share")
}

/// computerd at [`crate::DAEMON_PATH`], read-only: init runs from it and
/// starts every run's guard from it (`/proc/self/exe` names it inside).
fn exe(plan: &Plan) -> Result<(), SetupError> {
    let target = join(Path::new(NEW), &plan.exe_inside);
    if let Some(parent) = plan.exe_inside.parent() {
        mkdir_all(Path::new(NEW), parent)?;
    }
    make_file(&target)?;
    mount(
        Some(&join(Path::new(OLD), &plan.exe)),
        &target,
        None,
        MsFlags::MS_BIND,
        None,
        "bind computerd",
    )?;
    setattr(
        &target,
        false,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        "make computerd read-only",
    )
}

/// /sys: a sysfs mounted from the computer's own network namespace (so
/// `/sys/class/net` lists its interfaces only), read-only. In a user
/// namespace the kernel may refuse it (it wants a fully visible sysfs
/// already); then there is no /sys at all, never the host's.
fn sysfs(in_userns: bool) -> Result<(), SetupError> {
    let target = PathBuf::from(NEW).join("sys");
    mkdir(&target, 0o555)?;
    let made = fresh(
        "sysfs",
        &target,
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
        "mount /sys",
    );
    match made {
        Ok(()) => Ok(()),
        Err(_) if in_userns => {
            std::fs::remove_dir(&target).step("remove /sys after sysfs was refused")
        }
        Err(e) => Err(e),
    }
}

/// pivot_root into /newroot, detach the old root (the staging tmpfs with the
/// host's tree under it), and start from /.
fn enter() -> Result<(), SetupError> {
    std::env::set_current_dir(NEW).step("enter the new root")?;
    nix::unistd::pivot_root(".", ".")
        .map_err(|e| format!("pivot_root into the new root failed ({e})"))?;
    // The old root now sits over the new one at "."; detaching it takes the
    // host's tree out of this namespace, and leaves no directory behind.
    nix::mount::umount2(".", MntFlags::MNT_DETACH).step("detach the old root")?;
    std::env::set_current_dir("/").step("enter /")
}

/// `path` (absolute, canonical) under the directory `base`, opened one name
/// at a time with `O_NOFOLLOW`: a link anywhere on the way is refused.
fn open_beneath(base: &Path, path: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = nix::fcntl::open(base, flags, Mode::empty())?;
    for part in path.components().skip(1) {
        dir = nix::fcntl::openat(dir.as_fd(), part.as_os_str(), flags, Mode::empty())?;
    }
    Ok(dir)
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

/// Mount a new instance of the kernel's filesystem `fstype` (tmpfs, proc,
/// devpts, sysfs) at `target`, its source named for its type as mount(8)
/// names it.
fn fresh(
    fstype: &str,
    target: &Path,
    flags: MsFlags,
    data: Option<&str>,
    step: &str,
) -> Result<(), SetupError> {
    mount(
        Some(Path::new(fstype)),
        target,
        Some(fstype),
        flags,
        data,
        step,
    )
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
    step: &str,
) -> Result<(), SetupError> {
    nix::mount::mount(source, target, fstype, flags, data).map_err(|e| {
        let from = source
            .filter(|s| s.is_absolute())
            .map(|s| format!(" from {}", inside(s)))
            .unwrap_or_default();
        SetupError::from(format!(
            "{step}: mount on {}{from} failed ({e})",
            inside(target)
        ))
    })
}

fn setattr(target: &Path, recursive: bool, set: u64, step: &str) -> Result<(), SetupError> {
    sys::mount_setattr(target, recursive, set).map_err(|e| {
        let hint = if e == nix::errno::Errno::ENOSYS {
            "; mount_setattr needs Linux 5.12 or later"
        } else {
            ""
        };
        SetupError::from(format!("{step}: {} ({e}{hint})", inside(target)))
    })
}

fn mkdir(p: &Path, mode: u32) -> Result<(), SetupError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(p)
        .step(format!("make the directory {}", inside(p)))
}

/// The directories of the absolute `path` under `base` that are missing,
/// each 0755: mount points in the root tmpfs, which holds no link.
fn mkdir_all(base: &Path, path: &Path) -> Result<(), SetupError> {
    let mut at = base.to_path_buf();
    for part in path.components().skip(1) {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_err() {
            mkdir(&at, 0o755)?;
        }
    }
    Ok(())
}

fn make_file(p: &Path) -> Result<(), SetupError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(p)
        .map(drop)
        .step(format!("make the mount point {}", inside(p)))
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

    #[test]
    fn a_link_on_the_way_to_a_share_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("real/inner")).unwrap();
        std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
        assert!(open_beneath(d.path(), Path::new("/real/inner")).is_ok());
        assert_eq!(
            open_beneath(d.path(), Path::new("/link/inner")).err(),
            Some(nix::errno::Errno::ENOTDIR)
        );
        assert_eq!(
            open_beneath(d.path(), Path::new("/link")).err(),
            Some(nix::errno::Errno::ENOTDIR)
        );
    }
}
