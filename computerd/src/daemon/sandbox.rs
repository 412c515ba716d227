//! `computerd sandbox`: the local provider's isolation, made by computerd
//! itself with namespaces and mounts (as bubblewrap does, with no other
//! tool), then `computerd init` exec'd as PID 1 inside it.
//!
//! What init and every program see, built from an allowlist on a fresh
//! tmpfs root (read-only once made): the host's `/usr`, `/bin`, `/sbin`,
//! `/lib*` and `/etc`, read-only, nosuid and nodev, and nothing else of the
//! host; `/work`, their HOME, a tmpfs of `--work-size-mib` that is their
//! user's alone (0700); `--run` at `/run/computerd` (init's socket); each
//! `--bind` under `/workspace`; a private `/tmp`; a minimal `/dev` with a pty
//! instance of its own; a `/proc` of their own PID namespace; their own IPC
//! and UTS namespaces; with `--network none` a network namespace with only
//! `lo` up and a sysfs of it at `/sys` (no `/sys` otherwise).
//!
//! Before anything else changes, the sandbox joins each `--cgroup`, so init
//! and everything it starts are bounded from their first instruction.
//!
//! Two paths: as root (euid 0 with CAP_SYS_ADMIN) the namespaces are the
//! host's to make and init is told `--user` so no program runs as root;
//! otherwise a user namespace maps the user's own uid and gid and the
//! bounding set is emptied before exec, so init holds nothing it must drop.
//!
//! The process that was started stays outside the PID and mount
//! namespaces as a small forwarder ([`forward`]): it passes TERM, INT and
//! HUP on and exits with init's status. It shares the network namespace, so
//! `/proc/<its pid>/net` shows the computer's network. Everything runs in
//! plain `fn main`, before any thread exists.
//!
//! - [`plan`]: the flags checked and turned into what to mount, before
//!   anything changes (pure where it can be, unit-tested).
//! - [`root`]: the mounts, in the child, in its own mount namespace.
//! - [`forward`]: the forwarder.

pub mod forward;
pub mod plan;
pub mod root;

use crate::daemon::setup::{SetupError, Step};
use std::convert::Infallible;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::ForkResult;

use super::{isolate, sys};
use crate::launch::SandboxArgs;
pub use plan::{Network, Plan, Share};

/// The name the sandbox gives its UTS namespace.
pub const HOSTNAME: &str = "computer";

/// `computerd sandbox`: init's exit code, or the refusal in words (the
/// caller says it, exit code 1).
pub fn main(args: &SandboxArgs) -> Result<i32, SetupError> {
    let plan = Plan::new(args)?;
    // The first change this process makes: from here on it, init and
    // everything they start are in the computer's cgroups.
    join(std::process::id(), &plan.cgroups)?;
    // A new session before anything else: a Ctrl-C at the server's terminal
    // reaches the server's process group, never the computer (the server
    // ends computers itself). EPERM means this process already leads a
    // group of its own, which the terminal then does not signal unless it
    // is the foreground job, as a shell's user asked.
    let _ = nix::unistd::setsid();
    // The forwarder takes these synchronously (sigtimedwait), so they are
    // blocked from before the fork; the child gets the old mask back before
    // exec.
    let mut forwarded = SigSet::empty();
    for sig in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        forwarded.add(sig);
    }
    let mut old_mask = SigSet::empty();
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&forwarded), Some(&mut old_mask))
        .step("block the signals it forwards")?;
    let netns_before = std::fs::read_link("/proc/self/ns/net").ok();
    enter_namespaces(&plan)?;
    // The child watches this pipe's far end: it reads as closed once the
    // forwarder is gone, which covers the moment before its parent-death
    // signal is set.
    let (alive_r, alive_w) = sys::pipe().step("make the pipe that tells the forwarder is alive")?;
    // SAFETY: this process has one thread (nothing before this point starts
    // one), so the child may run any code after the fork.
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Child) => {
            drop(alive_w);
            let Err(e) = child(&plan, &alive_r, &old_mask, netns_before);
            eprintln!("computerd sandbox: {e}");
            sys::exit_now(1)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(alive_r);
            let code = forward::run(child, &forwarded);
            drop(alive_w);
            Ok(code)
        }
        Err(e) => Err(format!("could not fork the computer's first process ({e})").into()),
    }
}

/// Write `pid` (this process's) into each cgroup's `cgroup.procs` (v1 and
/// v2 alike): it moves there with the threads it has (one), and every
/// process forked after is born in it.
pub fn join(pid: u32, cgroups: &[PathBuf]) -> Result<(), SetupError> {
    let pid = pid.to_string();
    for dir in cgroups {
        let procs = dir.join("cgroup.procs");
        write_proc(&procs, &pid).map_err(|e| {
            format!(
                "--cgroup {}: could not move the sandbox (pid {pid}) into it by writing {} ({e}); the provider makes the cgroup and lets this user write it",
                dir.display(),
                procs.display()
            )
        })?;
    }
    Ok(())
}

/// For a user without CAP_SYS_ADMIN first a user namespace that owns
/// everything made after it, with the user's own uid and gid mapped; then
/// the PID namespace (the next child is its PID 1) and the IPC, UTS and
/// (network none) network namespaces. The forwarder is in these too, so
/// the provider reads the computer's network from its pid
/// (`/proc/<pid>/net`); the mount namespace is the child's alone.
fn enter_namespaces(plan: &Plan) -> Result<(), SetupError> {
    if let Some((uid, gid)) = plan.userns {
        enter_user_namespace(uid, gid)?;
    }
    let mut flags = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS;
    if plan.network == Network::None {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    nix::sched::unshare(flags).step("make the PID, IPC, UTS and network namespaces")
}

fn enter_user_namespace(uid: u32, gid: u32) -> Result<(), SetupError> {
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| {
        let why = match e {
            Errno::EPERM => {
                "the kernel refused to make one (EPERM): kernel.unprivileged_userns_clone=0, an AppArmor or seccomp policy, or a chroot forbids it"
            }
            Errno::ENOSPC => "user.max_user_namespaces is 0 or used up (ENOSPC)",
            Errno::EINVAL => "the kernel was built without user namespaces (EINVAL)",
            Errno::EUSERS => "user namespaces are nested too deep (EUSERS)",
            _ => "it could not make one",
        };
        format!(
            "this host does not allow unprivileged user namespaces ({why}; uid {uid}); run as root, or pass --local-isolation none to the server, which runs computers unisolated and is unsafe"
        )
    })?;
    // The user's own ids, so the work directory's files stay the user's.
    // setgroups must be denied before an unprivileged gid_map is written.
    for (file, text) in [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1\n")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1\n")),
    ] {
        write_proc(file, &text).map_err(|e| {
            format!("could not write {text:?} to {file} for the user namespace ({e})")
        })?;
    }
    Ok(())
}

fn write_proc(file: impl AsRef<std::path::Path>, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    // No O_TRUNC or O_CREAT: these files take one write of the whole text.
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)?
        .write_all(text.as_bytes())
}

/// The computer's first process: its own namespaces and root, then exec
/// of init. Returns only on a failure.
fn child(
    plan: &Plan,
    alive: &OwnedFd,
    old_mask: &SigSet,
    netns_before: Option<PathBuf>,
) -> Result<Infallible, SetupError> {
    // If the forwarder dies, this process dies, and with PID 1 the whole
    // PID namespace. A forwarder that died before this line closed the pipe.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).step("set the parent-death signal")?;
    if forwarder_gone(alive) {
        return Err("the forwarder ended before the computer started".into());
    }
    // The mount namespace is made here, not by the forwarder: pivot_root
    // moves the root of every process of the namespace that has the old
    // one, and the forwarder keeps the host's (and its /proc, where it reads
    // whether init catches a signal yet).
    nix::sched::unshare(CloneFlags::CLONE_NEWNS).step("make a mount namespace")?;
    sys::sethostname(HOSTNAME).step(format!("set the hostname to {HOSTNAME}"))?;
    if plan.network == Network::None {
        // Read back, not assumed: another namespace, lo alone up.
        let now = std::fs::read_link("/proc/self/ns/net").ok();
        if now.is_none() || now == netns_before {
            return Err(
                "--network none: read back, the computer is still in the host's network namespace"
                    .into(),
            );
        }
        sys::set_interface_up("lo").flag_step("--network none", "bring lo up")?;
        isolate::check_only_loopback("--network none")?;
    }
    root::build(plan)?;
    std::env::set_current_dir(plan::WORK)
        .map_err(|e| format!("could not enter {} ({e})", plan::WORK))?;
    if plan.userns.is_some() {
        // In a user namespace this process holds every capability, and the
        // new namespace's bounding set is full. Init runs as the user, so
        // it loses the others at exec but would keep the bounding set,
        // which it cannot empty without CAP_SETPCAP.
        for cap in 0..=plan.last_cap {
            if sys::bounding_has(cap) {
                sys::bounding_drop(cap).map_err(|e| {
                    format!(
                        "could not drop {} from the bounding set ({e})",
                        isolate::cap_name(cap)
                    )
                })?;
            }
        }
    }
    // Nothing the sandbox was handed beyond stdio reaches init.
    sys::cloexec_from(3).step("mark inherited descriptors close-on-exec")?;
    if let Some(n) = plan.max_procs {
        // Set last, inside the namespaces: counted per user namespace (and
        // for a uid of the computer's own), it bounds only the computer.
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, n, n)
            .map_err(|e| format!("--max-procs {n}: could not set RLIMIT_NPROC ({e})"))?;
    }
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(old_mask), None)
        .step("restore the signal mask")?;
    let exe = cstring(plan.exe_inside.as_os_str())?;
    let e = nix::unistd::execve(&exe, &plan.argv, &plan.env).err();
    Err(format!(
        "could not start {} inside the sandbox ({})",
        plan.exe_inside.display(),
        e.map(|e| e.to_string()).unwrap_or_default()
    )
    .into())
}

/// Whether the forwarder's end of the pipe is closed (it has exited).
fn forwarder_gone(alive: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(alive.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        // Readable or hung up: the forwarder never writes, so it is gone.
        Ok(_) => true,
        Err(_) => true,
    }
}

pub(crate) fn cstring(s: &std::ffi::OsStr) -> Result<CString, SetupError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_bytes()).map_err(|_| format!("{s:?} holds a NUL byte").into())
}
