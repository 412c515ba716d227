//! The raw system calls the cgroup module makes: a pidfd, so that a pid read
//! from `cgroup.procs` is signalled only while it is still the process that
//! was read (a pid freed and reused by a host process is never hit).

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// `pidfd_open(pid, 0)`: a descriptor that names this process, not its pid.
#[cfg(target_os = "linux")]
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new
    // descriptor or -1; no memory is shared with the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd =
        i32::try_from(fd).map_err(|_| io::Error::other("pidfd_open: descriptor out of range"))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
pub fn pidfd_open(_pid: i32) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// `pidfd_send_signal(fd, sig, NULL, 0)`.
#[cfg(target_os = "linux")]
pub fn pidfd_send_signal(fd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is borrowed for the call; a null siginfo is
    // allowed (the kernel fills in a kill()-like one) and flags are 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn pidfd_send_signal(_fd: BorrowedFd<'_>, _sig: i32) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// `kill(pid, sig)`, for kernels without pidfds (before 5.3).
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes two integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
