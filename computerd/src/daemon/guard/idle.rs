//! The idle guard: waiting for its run, and the template every idle
//! guard after the first is forked from (with CLONE_PARENT, so init stays
//! the parent that reaps it).

use super::*;

/// What the daemon hands an idle guard.
pub(super) enum Handed {
    /// A run: the program's stdin, stdout and stderr.
    Run([OwnedFd; 3]),
    /// `fork`: make another idle guard, whose control socket this is.
    Fork(OwnedFd),
}

/// Wait, idle, for the daemon to hand over a run: the program's stdin,
/// stdout and stderr arrive as SCM_RIGHTS with the first bytes of the spec,
/// which are left in `lines`. Or a `fork` line with one descriptor: the
/// daemon's way to get another idle guard without an exec. None when the
/// socket closes first or init's shutdown signals this guard: it then has
/// nothing to end.
pub(super) fn wait_for_run(
    ctl: &OwnedFd,
    wake: &OwnedFd,
    lines: &mut LineReader,
) -> io::Result<Option<Handed>> {
    loop {
        let mut fds = [
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
            PollFd::new(ctl.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let ctl_ready = fds[1].any().unwrap_or(false);
        let pending = PENDING.load(Ordering::SeqCst);
        if [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
            .iter()
            .any(|&s| pending & (1 << s) != 0)
        {
            return Ok(None);
        }
        let mut drain = [0u8; 64];
        while matches!(nix::unistd::read(wake.as_fd(), &mut drain), Ok(n) if n > 0) {}
        if !ctl_ready {
            continue;
        }
        let mut buf = [0u8; 4096];
        let (n, mut got) = match sys::recv_fds(ctl.as_fd(), &mut buf, 3, 0) {
            // A truncated control part is refused; the daemon sends
            // exactly three descriptors, and room is made for three.
            Ok(msg) if msg.truncated => return Err(nix::errno::Errno::ENOBUFS.into()),
            Ok(msg) => (msg.bytes, msg.fds),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(None);
        }
        lines.push(&buf[..n])?;
        let count = got.len();
        if count == 1 {
            // A fork request is one line by itself, sent alone.
            if lines.next_line().as_deref() != Some(b"fork".as_slice()) {
                return Err(io::Error::other("a descriptor came without a fork request"));
            }
            return Ok(got.pop().map(Handed::Fork));
        }
        let stdio: [OwnedFd; 3] = got.try_into().map_err(|_| {
            io::Error::other(format!(
                "the run came with {count} descriptors; its stdin, stdout and stderr are 3"
            ))
        })?;
        return Ok(Some(Handed::Run(stdio)));
    }
}

/// Fork this idle guard with CLONE_PARENT, so the new one is init's child
/// (init reaps it and sweeps its orphans, as for any guard). Some(pid) in
/// this guard, None in the new one.
pub(super) fn fork_idle() -> io::Result<Option<i32>> {
    // SAFETY: an idle guard has one thread and holds no lock, so the child
    // may go on running any of its code, as after fork(2). The raw call
    // (glibc's fork has no CLONE_PARENT) passes no stack, so the child runs
    // on a copy of this one; both argument orders (x86_64, aarch64) are
    // zero past the flags.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match pid {
        p if p < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        p => Ok(Some(p as i32)),
    }
}

/// The name (comm) a guard had before it became the template, given back to
/// each guard forked from it.
static OWN_NAME: std::sync::Mutex<Option<std::ffi::CString>> = std::sync::Mutex::new(None);

/// What the template is called in ps and /proc/PID/comm (its command line
/// stays `computerd guard <fd>`): it never takes a run.
pub const TEMPLATE_NAME: &str = "guard template";

pub(super) fn name_template() {
    let mut own = OWN_NAME.lock().unwrap_or_else(|p| p.into_inner());
    if own.is_none() {
        *own = nix::sys::prctl::get_name().ok();
        if let Ok(name) = std::ffi::CString::new(TEMPLATE_NAME) {
            let _ = nix::sys::prctl::set_name(&name);
        }
    }
}

/// In a guard just forked from the template: what is per guard and not
/// inherited, or inherited but shared, made its own.
pub(super) fn become_forked(template_wake: OwnedFd) -> io::Result<OwnedFd> {
    drop(template_wake);
    let old = WAKE_FD.swap(-1, Ordering::SeqCst);
    if old >= 0 {
        // SAFETY: the write end of the template's wake-up pipe, inherited
        // by this process and owned by no Rust object (its number lives in
        // WAKE_FD alone).
        unsafe { libc::close(old) };
    }
    // Its own process group, as a guard started by init gets one.
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))
        .map_err(io::Error::from)?;
    if let Some(name) = OWN_NAME.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        let _ = nix::sys::prctl::set_name(name);
    }
    // The subreaper flag is not inherited across fork.
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)?;
    install_wakeup()
}

/// Put the program's stdio on 0, 1 and 2 (in place of /dev/null), and
/// close the descriptors they came in on.
pub(super) fn take_stdio(stdio: [OwnedFd; 3]) -> io::Result<()> {
    // The received descriptors are all above 2 (0 to 2 were open when
    // they arrived), so none is replaced before it is put in place.
    for (n, fd) in (0..).zip(&stdio) {
        sys::onto_stdio(fd.as_fd(), n)?;
    }
    Ok(())
}
