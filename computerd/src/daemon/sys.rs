//! Raw system calls and errno words, each in one small function.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

use crate::protocol::{ErrorKind, RpcError};

/// The protocol's error kind for an errno.
pub fn errno_kind(e: Errno) -> ErrorKind {
    match e {
        Errno::ENOENT => ErrorKind::NotFound,
        Errno::EACCES | Errno::EPERM | Errno::EROFS | Errno::ELOOP => ErrorKind::Denied,
        Errno::EEXIST => ErrorKind::Exists,
        Errno::ENOTDIR => ErrorKind::NotDir,
        Errno::EISDIR | Errno::ENOTEMPTY => ErrorKind::IsDir,
        Errno::EXDEV | Errno::EOPNOTSUPP => ErrorKind::Unsupported,
        Errno::ENOSPC | Errno::EDQUOT | Errno::EFBIG | Errno::EMFILE | Errno::ENFILE => {
            ErrorKind::Limit
        }
        Errno::ETIMEDOUT => ErrorKind::Timeout,
        _ => ErrorKind::Invalid,
    }
}

/// An error for `op` on `path` that failed with `e`, in words.
pub fn path_error(op: &str, path: &str, e: Errno) -> RpcError {
    let words = match e {
        Errno::ENOENT => "no such file or directory".to_string(),
        Errno::EACCES | Errno::EPERM => "permission denied".to_string(),
        Errno::EROFS => "read-only file system".to_string(),
        Errno::ELOOP => "a symbolic link is in the way".to_string(),
        Errno::EEXIST => "something is already there".to_string(),
        Errno::ENOTDIR => "a part of the path is not a directory".to_string(),
        Errno::EISDIR => "it is a directory".to_string(),
        Errno::ENOTEMPTY => "the directory is not empty".to_string(),
        Errno::EXDEV => "from and to are on different filesystems".to_string(),
        Errno::ENOSPC => "no space left on the device".to_string(),
        Errno::EDQUOT => "the disk quota is used up".to_string(),
        other => other.desc().to_lowercase(),
    };
    RpcError::new(errno_kind(e), format!("{op} {path}: {words}"))
}

/// Convert an io::Error from std into nix's Errno (EIO when it carries none).
pub fn errno_of(e: &io::Error) -> Errno {
    e.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO)
}

/// Duplicate `fd` to a number at or above `min`, close-on-exec.
pub fn dup_above(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC only reads the descriptor number; the new
    // descriptor it returns is ours alone.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: n is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// A connected pair of unix stream sockets, close-on-exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)
}

/// A pipe, close-on-exec at both ends: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// A pipe for the daemon to read a program's output from: the read end
/// non-blocking (for the runtime), the write end blocking (the program's,
/// which expects a plain pipe). Two system calls, where a plain pipe
/// handed to tokio's checked constructor costs four.
pub fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // The two ends are two open files: clearing the flag on the write end
    // leaves the read end non-blocking.
    fcntl(w.as_fd(), FcntlArg::F_SETFL(OFlag::empty()))?;
    Ok((r, w))
}

/// The foreground process group of a terminal (TIOCGPGRP); None when it has none.
pub fn tcgetpgrp(fd: BorrowedFd<'_>) -> io::Result<Option<i32>> {
    let mut pgrp: libc::pid_t = 0;
    // SAFETY: TIOCGPGRP writes one pid_t to the pointer we pass, which lives
    // for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGPGRP, &mut pgrp) };
    if r < 0 {
        let e = io::Error::last_os_error();
        // ENOTTY: the terminal is no session's controlling terminal any more.
        if e.raw_os_error() == Some(libc::ENOTTY) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok((pgrp > 0).then_some(pgrp))
}

/// Set a terminal's size (TIOCSWINSZ); its foreground group gets SIGWINCH.
pub fn set_winsize(fd: BorrowedFd<'_>, cols: u16, rows: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, valid for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Make the terminal on `fd` the calling session's controlling terminal.
/// Async-signal-safe: used between fork and exec.
pub fn tiocsctty(fd: RawFd) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an int argument, no pointer.
    let r = unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A signal's name without SIG ("TERM"), or its number when it has none.
pub fn signal_name(sig: i32) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(s) => s.as_str().trim_start_matches("SIG").to_string(),
        Err(_) => sig.to_string(),
    }
}

/// (exit code, signal name) from a raw wait status.
pub fn decode_wait_status(status: i32) -> (Option<i32>, Option<String>) {
    if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(signal_name(libc::WTERMSIG(status))))
    } else {
        (None, None)
    }
}

/// Reap one child without waiting: (pid, raw status), or None when no child
/// has ended; Err(ECHILD) when there is no child at all.
pub fn reap_any() -> Result<Option<(i32, i32)>, Errno> {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid writes the status to a local we own.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid < 0 {
        return Err(Errno::last());
    }
    if pid == 0 {
        return Ok(None);
    }
    Ok(Some((pid, status)))
}

/// Send a signal; "no such process" is success.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory arguments.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Whether the effective capability set holds `cap` (by number), read from
/// /proc/self/status. An unreadable status reads as no.
pub fn has_effective_cap(cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|bits| bits & (1u64 << cap) != 0)
}

pub const CAP_SETGID: u32 = 6;
pub const CAP_SETUID: u32 = 7;

/// The names in a directory, without `.` and `..`, sorted by their bytes.
/// Read whole because every walk wants them in order.
pub fn dir_names(dir: &mut nix::dir::Dir) -> Result<Vec<std::ffi::OsString>, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(&name).to_os_string());
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// Run a system call again for as long as a signal interrupts it.
pub fn retry<T>(mut call: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match call() {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// Whether the bounding set still holds capability `cap`.
pub fn bounding_has(cap: u32) -> bool {
    // SAFETY: PR_CAPBSET_READ takes integers only.
    unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) == 1 }
}

/// Drop capability `cap` from the bounding set (needs CAP_SETPCAP).
pub fn bounding_drop(cap: u32) -> Result<(), Errno> {
    // SAFETY: PR_CAPBSET_DROP takes integers only.
    let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Empty the ambient capability set.
pub fn ambient_clear() -> Result<(), Errno> {
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes integers only.
    let r = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

fn ifreq_for(name: &str) -> Result<libc::ifreq, Errno> {
    // SAFETY: ifreq is plain data; all zeros is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return Err(Errno::EINVAL);
    }
    for (dst, &b) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    Ok(req)
}

fn inet_socket() -> Result<OwnedFd, Errno> {
    // SAFETY: socket takes integers only; a non-negative result is ours.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn interface_flags(sock: &OwnedFd, name: &str) -> Result<libc::ifreq, Errno> {
    let mut req = ifreq_for(name)?;
    // SAFETY: SIOCGIFFLAGS fills the ifreq we pass, which lives for the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if r < 0 { Err(Errno::last()) } else { Ok(req) }
}

/// Whether an interface of this network namespace is up.
pub fn interface_is_up(name: &str) -> Result<bool, Errno> {
    let sock = inet_socket()?;
    let req = interface_flags(&sock, name)?;
    // SAFETY: SIOCGIFFLAGS wrote the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(i32::from(flags) & libc::IFF_UP != 0)
}

/// Bring an interface up (`ip link set <name> up`); needs CAP_NET_ADMIN.
pub fn set_interface_up(name: &str) -> Result<(), Errno> {
    let sock = inet_socket()?;
    let mut req = interface_flags(&sock, name)?;
    // SAFETY: the flags member is the one SIOCGIFFLAGS filled and
    // SIOCSIFFLAGS reads; the ifreq lives for the call.
    let r = unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req)
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// The interface names of this network namespace, sorted, from
/// /proc/self/net/dev (which follows the reader's namespace).
pub fn interface_names() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/self/net/dev")?;
    let mut names: Vec<String> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(|n| n.trim().to_string())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// The interfaces that hold an IPv4 or IPv6 address.
pub fn addressed_interfaces() -> Result<Vec<String>, Errno> {
    let mut out: Vec<String> = nix::ifaddrs::getifaddrs()?
        .filter(|a| {
            a.address
                .as_ref()
                .is_some_and(|s| s.as_sockaddr_in().is_some() || s.as_sockaddr_in6().is_some())
        })
        .map(|a| a.interface_name)
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Mark every descriptor from `first` on close-on-exec, so nothing a
/// process was handed at its start reaches the programs it runs.
pub fn cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on
    // descriptor numbers; no memory is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    // Kernels before 5.11: walk the open descriptors instead.
    for e in std::fs::read_dir("/proc/self/fd")?.flatten() {
        if let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
            && fd >= first as i32
        {
            // SAFETY: F_SETFD on a descriptor number; an already-closed one fails harmlessly.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}

/// Every signal back to its default action and none blocked, so whatever
/// the process was started with (a shell's ignored SIGQUIT, a blocked mask)
/// is not handed on to the programs it runs. SIGPIPE stays ignored: Rust
/// writes expect EPIPE, and std gives children the default back.
pub fn reset_signals() {
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || sig == libc::SIGPIPE {
            continue;
        }
        // SAFETY: SIG_DFL is always a valid disposition; no handler is installed.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // The real-time range, through the raw call: libc refuses its own
    // internal signals, whose handlers (never SIG_IGN) are left alone. Only
    // an ignored one is reset, since an ignore survives exec.
    for sig in 32..=64 {
        ignored_to_default(sig);
    }
    // SAFETY: sigemptyset fills a local set; sigprocmask reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// The kernel's sigaction, as rt_sigaction takes it on x86_64 and aarch64.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// Set signal `sig` back to its default action if it is ignored.
/// Async-signal-safe (two raw system calls on locals).
pub fn ignored_to_default(sig: i32) {
    let mut old = KernelSigaction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction reads no action (null) and writes the old one
    // into a local of the kernel's layout; sigsetsize is 8 bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            std::ptr::null::<KernelSigaction>(),
            &mut old,
            8usize,
        )
    };
    if r != 0 || old.handler != libc::SIG_IGN {
        return;
    }
    let dfl = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: as above, setting SIG_DFL, which needs no restorer.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &dfl,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        );
    }
}

/// `struct mount_attr` of `<linux/mount.h>`, which libc does not export.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Mount attributes for [`mount_setattr`] (`MOUNT_ATTR_*` of `<linux/mount.h>`).
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
/// `AT_RECURSIVE` of `<linux/fcntl.h>`: the mount and every mount under it.
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Add the attributes `set` to the mount at `path` (and with `recursive` to
/// every mount under it): `mount_setattr(2)`, Linux 5.12 or later. A final
/// symbolic link is not followed. Attributes can only be added here, so a
/// lock a less privileged user namespace holds is never in the way.
pub fn mount_setattr(path: &std::path::Path, recursive: bool, set: u64) -> Result<(), Errno> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags =
        libc::AT_SYMLINK_NOFOLLOW as libc::c_uint | libc::AT_NO_AUTOMOUNT as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: the path is a NUL-terminated string and the attribute struct a
    // local of the kernel's layout, both alive for the call; its size is given.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Wait up to `timeout` for one of the (blocked) signals in `set`: its
/// number, or None when the time ran out. An interruption is retried.
pub fn sigtimedwait(
    set: &nix::sys::signal::SigSet,
    timeout: std::time::Duration,
) -> Result<Option<i32>, Errno> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    loop {
        // SAFETY: the set and the timespec are locals alive for the call; no
        // siginfo is asked for (null).
        let r = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
        if r >= 0 {
            return Ok(Some(r));
        }
        match Errno::last() {
            Errno::EAGAIN => return Ok(None),
            Errno::EINTR => continue,
            e => return Err(e),
        }
    }
}

/// Set the UTS namespace's hostname (needs CAP_SYS_ADMIN over it). nix has
/// it behind a feature this workspace does not enable.
pub fn sethostname(name: &str) -> Result<(), Errno> {
    // SAFETY: the pointer and length describe `name`, alive for the call;
    // sethostname needs no NUL.
    let r = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// End this process at once, with no exit handler or buffer flush: for a
/// forked child that must not run what its parent's atexit set up.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes an integer and does not return.
    unsafe { libc::_exit(code) }
}

/// A pipe whose both ends are non-blocking and close-on-exec: (read, write).
pub fn pipe_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::OFlag;
    nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(io::Error::from)
}

/// Make the pipe of `fd` `size` bytes where the kernel allows it; the
/// capacity it has then (None when it cannot be read).
pub fn set_pipe_size(fd: BorrowedFd<'_>, size: usize) -> Option<usize> {
    use nix::fcntl::{FcntlArg, fcntl};
    let asked = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    let got =
        fcntl(fd, FcntlArg::F_SETPIPE_SZ(asked)).or_else(|_| fcntl(fd, FcntlArg::F_GETPIPE_SZ));
    got.ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// Move at most `len` bytes from `from` to `to` without copying them
/// through this process, without blocking (one side must be a pipe).
/// (nix has it behind a feature this workspace does not enable.)
pub fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: splice moves bytes between two descriptors borrowed for the
    // call; the offsets are null (sockets and pipes have none).
    let n = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether descriptor `fd` is open.
pub fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only asks whether the descriptor is open.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Put `fd` on descriptor `n` of stdin, stdout and stderr (0, 1 or 2),
/// replacing what was there.
pub fn onto_stdio(fd: BorrowedFd<'_>, n: RawFd) -> io::Result<()> {
    match n {
        0 => nix::unistd::dup2_stdin(fd),
        1 => nix::unistd::dup2_stdout(fd),
        2 => nix::unistd::dup2_stderr(fd),
        _ => Err(Errno::EBADF),
    }
    .map_err(io::Error::from)
}

/// One `sendmsg` of `bytes` with `fds` riding on them as SCM_RIGHTS: how
/// many bytes went (the descriptors go with the first).
pub fn send_fds(
    sock: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[RawFd],
    flags: nix::sys::socket::MsgFlags,
) -> Result<usize, Errno> {
    use nix::sys::socket::{ControlMessage, sendmsg};
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[io::IoSlice::new(bytes)],
        &[ControlMessage::ScmRights(fds)],
        flags,
        None,
    )
}

/// The most descriptors one [`recv_fds`] makes room for.
pub const MAX_RIGHTS: usize = 8;

/// What one [`recv_fds`] got.
pub struct Received {
    /// Bytes read into the buffer; 0 when the peer closed.
    pub bytes: usize,
    /// Every descriptor that came, owned (closed on drop), those of a
    /// truncated control part included.
    pub fds: Vec<OwnedFd>,
    /// More descriptors were sent than there was room for (the kernel
    /// closed the rest).
    pub truncated: bool,
}

/// One `recvmsg` into `buf` with room for `room` descriptors (at most
/// [`MAX_RIGHTS`]), received close-on-exec. `flags` are added to
/// MSG_CMSG_CLOEXEC (MSG_DONTWAIT for a non-blocking socket's reader).
pub fn recv_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    room: usize,
    flags: libc::c_int,
) -> Result<Received, Errno> {
    let room = room.min(MAX_RIGHTS);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s, for the alignment a cmsghdr needs; CMSG_SPACE of MAX_RIGHTS
    // ints is 48 bytes on every 64-bit target.
    let mut space = [0u64; 8];
    // SAFETY: CMSG_SPACE only computes a size.
    let need = unsafe { libc::CMSG_SPACE((room * std::mem::size_of::<libc::c_int>()) as u32) };
    debug_assert!(need as usize <= std::mem::size_of_val(&space));
    // SAFETY: a zeroed msghdr is a valid empty one; its pointers are set
    // below to buffers that outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = need as _;
    // SAFETY: recvmsg writes at most iov_len bytes to `buf` and at most
    // msg_controllen to `space`, both live for the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC | flags) };
    if n < 0 {
        return Err(Errno::last());
    }
    let mut fds = Vec::new();
    // SAFETY: the CMSG_* walk stays within msg_controllen as the kernel
    // set it; each SCM_RIGHTS entry holds descriptors the kernel has just
    // installed in this process, owned by nothing else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                let bytes = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Received {
        bytes: n as usize,
        fds,
        truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

/// A socket's `SOL_SOCKET` integer option (`SO_DOMAIN`, `SO_TYPE`,
/// `SO_PROTOCOL`…), which nix has no typed getter for.
pub fn socket_int(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes to `v`, which lives
    // for the call.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// The kernel's release, as uname(2) gives it (nix has uname behind a
/// feature this workspace does not enable).
pub fn kernel_release() -> Result<String, Errno> {
    // SAFETY: utsname holds only C char arrays, for which all-zero bytes are
    // a valid value; uname writes into the struct we own for the call.
    let (r, u) = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        let r = libc::uname(&mut u);
        (r, u)
    };
    if r != 0 {
        return Err(Errno::last());
    }
    // c_char is i8 or u8 by architecture: take each as its byte.
    let bytes: Vec<u8> = u
        .release
        .iter()
        .map(|c| c.to_ne_bytes()[0])
        .take_while(|&b| b != 0)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A System V shared memory segment of `len` bytes, private to this
/// process's uid (mode 0600), for MIT-SHM.
pub fn shm_create(len: usize) -> io::Result<i32> {
    // SAFETY: shmget takes no pointer; it makes a new private segment.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, len, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(id)
}

/// Map segment `id` into this process, read-write.
pub fn shm_map(id: i32) -> io::Result<*mut u8> {
    // SAFETY: a null address lets the kernel pick where; the mapping is
    // only read through the pointer returned, within the segment's size.
    let p = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    if p as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Mark segment `id` to go once every process has let it go (no one can
/// map it by its id after).
pub fn shm_remove(id: i32) -> io::Result<()> {
    // SAFETY: IPC_RMID reads no buffer, so the null pointer is allowed.
    if unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unmap a segment [`shm_map`] mapped at `p`.
pub fn shm_unmap(p: *mut u8) -> io::Result<()> {
    // SAFETY: p came from shmat and is unmapped once, by its owner's drop.
    if unsafe { libc::shmdt(p.cast()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
