//! The forwarder: the process the server started, left outside the
//! computer's namespaces. It passes TERM, INT and HUP on to init, and exits
//! with init's status. No runtime: one loop on `sigtimedwait`.
//!
//! Init is PID 1 of its namespace, and the kernel drops a signal sent to
//! such a process from outside unless it has a handler for it; init installs
//! its handlers only once it is about to listen. So a signal is sent again
//! every 20 ms until init was seen catching it when it was sent. If init has
//! not exited well after its own shutdown could take, it is killed, and its
//! PID namespace with it.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::daemon::sys;
use crate::protocol::limits;

/// From the first forwarded signal to SIGKILL: init's shutdown (starts
/// under way, then TERM and KILL of every program) plus a margin.
pub const KILL_AFTER: Duration =
    Duration::from_millis(limits::SHUTDOWN_START_WAIT_MS + limits::SHUTDOWN_KILL_AFTER_MS + 7_000);

const RESEND_EVERY: Duration = Duration::from_millis(20);
/// A wake-up without any signal, in case a SIGCHLD was merged away.
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// Wait for `child`, forwarding the signals of `set` (blocked), and return
/// its exit code, or 128 + the signal that killed it.
pub fn run(child: Pid, set: &SigSet) -> i32 {
    let mut pending: Option<Signal> = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        match nix::sys::wait::waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                eprintln!("computerd sandbox: lost the computer's first process ({e})");
                return 1;
            }
        }
        let wait = if pending.is_some() {
            RESEND_EVERY
        } else {
            IDLE_WAKE
        };
        match sys::sigtimedwait(set, wait) {
            Ok(Some(n)) if n == libc::SIGCHLD => {}
            Ok(Some(n)) => {
                // HUP (the server's terminal went away) asks for the same
                // orderly end as TERM; init has no handler for HUP.
                let to = match Signal::try_from(n) {
                    Ok(Signal::SIGINT) => Signal::SIGINT,
                    _ => Signal::SIGTERM,
                };
                pending = Some(to);
                kill_at.get_or_insert_with(|| Instant::now() + KILL_AFTER);
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!(
                    "computerd sandbox: could not wait for signals ({e}); ending the computer"
                );
                sys::kill(child.as_raw(), libc::SIGKILL);
                kill_at = Some(Instant::now());
            }
        }
        if let Some(sig) = pending {
            // Caught before the send means the send is delivered.
            let caught = catches(child, sig);
            sys::kill(child.as_raw(), sig as i32);
            if caught {
                pending = None;
            }
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            sys::kill(child.as_raw(), libc::SIGKILL);
        }
    }
}

/// Whether `pid` has a handler for `sig`, from /proc/<pid>/status (SigCgt).
/// Unreadable reads as no, which only means one more send.
fn catches(pid: Pid, sig: Signal) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .as_deref()
        .and_then(sig_caught_mask)
        .is_some_and(|mask| mask & (1u64 << (sig as i32 - 1)) != 0)
}

fn sig_caught_mask(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caught_mask_is_read_from_status() {
        let status = "Name:\tcomputerd\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180000002\n";
        let mask = sig_caught_mask(status).unwrap();
        for (sig, caught) in [
            (Signal::SIGINT, true),
            (Signal::SIGTERM, false),
            (Signal::SIGHUP, false),
        ] {
            assert_eq!(mask & (1u64 << (sig as i32 - 1)) != 0, caught, "{sig}");
        }
        assert_eq!(sig_caught_mask("Name:\tx\n"), None);
    }
}
