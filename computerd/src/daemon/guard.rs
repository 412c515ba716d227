//! `computerd guard`: one per run, started by the daemon, never by hand.
//!
//! The guard is a child subreaper, so whatever the program starts stays under
//! it even after a setsid or a double fork: the kernel hands every orphan to
//! its nearest subreaper. It starts the program in a process group of its own
//! (or, with a terminal, a session of its own with the terminal as its
//! controlling terminal), reports the start and the end to the daemon, and
//! when the program ends it kills and reaps every process left under it.
//!
//! The guard is plain blocking code with no async runtime: one `poll` over
//! its control socket and a self-pipe its signal handlers write to. Its
//! descriptors on entry:
//! - 0, 1, 2: `/dev/null`;
//! - the one named by its argument (`computerd guard <fd>`): a unix stream
//!   socket to the daemon. In: the program's stdin, stdout and stderr (or
//!   the terminal, three times) as SCM_RIGHTS with the first bytes of a
//!   [`GuardSpec`] line, then [`GuardCommand`] lines; out: [`GuardEvent`]
//!   lines. When it closes (the daemon is gone) the program is ended with
//!   everything under it.
//!
//! A guard waits, idle, for its run: init keeps a few started ahead of the
//! runs ([`super::runner::pool`]), so a run costs one exec (its program's),
//! not two. An idle guard is what a freshly started one is before its
//! spec arrives (init's credentials, cgroups, namespaces, seccomp filter and
//! rlimits, an empty environment, a group of its own): everything that
//! differs from run to run (the user, cwd, environment, stdio, terminal)
//! comes in the spec and the descriptors and is applied after they arrive.
//! An idle guard whose socket closes, or that gets SIGTERM, SIGINT or
//! SIGHUP, exits 0 having started nothing.
//!
//! SIGTERM, SIGINT and SIGHUP to a guard with a run (init's shutdown) end
//! the run as a timeout does: TERM to everything under the guard, KILL 2 s
//! later.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, poll};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use super::{KILL_GRACE, proctree, sys};

mod idle;
mod lines;

pub use idle::TEMPLATE_NAME;
use idle::{Handed, become_forked, fork_idle, name_template, take_stdio, wait_for_run};
use lines::{BorrowedWriter, LineReader};

/// What the daemon asks the guard to run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GuardSpec {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// (uid, gid) to become; None to run as the guard's own user.
    pub user: Option<(u32, u32)>,
    /// fds 0, 1 and 2 are a terminal: start a session on it.
    pub pty: bool,
    /// Run until every process left in the program's group (session) ends.
    pub wait_group: bool,
    /// Leave what the program started running when it ends.
    pub keep_orphans: bool,
    /// When the run ends clean, go back to idle on the same control
    /// socket, to be handed another run (see [`GuardEvent::Exited`]).
    #[serde(default)]
    pub reuse: bool,
}

/// Daemon to guard. Both ends are this binary, so its lines (and
/// [`GuardEvent`]'s) are serde's plain externally tagged enums
/// (`{"signal":{"sig":15}}`, `"terminate"`): an internally tagged one
/// buffers every field first and holds a copy of each variant's decoding
/// (some 10 KiB of the static daemon for the two).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum GuardCommand {
    /// Send `sig` to the program's group (with waitGroup, to each group of the run).
    Signal { sig: i32 },
    /// Send `sig` to the terminal's foreground group `pgid`, if a process of
    /// the program's session is still in it; answered by `Signalled`.
    SignalForeground { sig: i32, pgid: i32 },
    /// End the run: TERM to everything, KILL what is left after the grace.
    Terminate,
}

/// Guard to daemon (externally tagged, as [`GuardCommand`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum GuardEvent {
    /// The program runs.
    Started { pid: i32 },
    /// The program could not be started: the step that failed (`cwd` or
    /// `exec`) and its errno.
    Failed {
        stage: String,
        errno: i32,
        message: String,
    },
    /// The program has ended (with waitGroup, its group too); raw wait
    /// status. `idle`: the guard is idle again on its control socket and
    /// takes another run (the spec asked for reuse, the run ended clean
    /// with nothing left under the guard); otherwise it exits.
    Exited {
        status: i32,
        #[serde(default)]
        idle: bool,
    },
    /// The reply to a signal command: `note` when it went elsewhere or nowhere.
    Signalled { note: Option<String> },
}

/// How often a guard waiting for a group looks again.
const GROUP_POLL: Duration = Duration::from_millis(50);

/// The most runs one guard takes: after that many it exits at its run's
/// end instead of going idle again.
pub const MAX_RUNS: u32 = 1000;

/// The guard's entry point; returns the exit code.
pub fn main(control: Option<std::ffi::OsString>) -> i32 {
    let fd = control
        .and_then(|a| a.to_str().and_then(|s| s.parse::<RawFd>().ok()))
        .filter(|&fd| fd > 2);
    let Some(fd) = fd else {
        eprintln!(
            "computerd guard: is started by computerd for each run, not by hand (no control socket given)"
        );
        return 2;
    };
    match run(fd) {
        Ok(()) => 0,
        Err(e) => {
            // stderr is the program's: the daemon reads our failure from the
            // control socket, so this is only for a person who ran us by hand.
            eprintln!("computerd guard: {e}");
            2
        }
    }
}

fn run(control: RawFd) -> io::Result<()> {
    // SAFETY: the descriptor is checked to be a socket before it is owned; a
    // guard run by hand without one stops here.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(control, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFSOCK
    };
    if !is_socket {
        return Err(io::Error::other(
            "is started by computerd for each run, not by hand (no control socket)",
        ));
    }
    // SAFETY: the control socket the daemon passed; nothing else owns it.
    let ctl = unsafe { OwnedFd::from_raw_fd(control) };
    // The program must not inherit it.
    nix::fcntl::fcntl(
        ctl.as_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(io::Error::from)?;
    // Nothing the guard inherited reaches the program but its stdio.
    sys::cloexec_from(3)?;
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)?;
    // Not dumpable: a program of the computer runs as this user, and must
    // not ptrace its guard, read or write its memory through /proc, or
    // take its descriptors (a guard, idle or not, serves later runs). Its
    // programs are dumpable again once they exec.
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::from)?;

    // Signals arrive through handlers that write to a pipe. A signalfd would
    // need them blocked, and a blocked mask is inherited by the program
    // (TERM would then never reach it); a handler is not inherited at all.
    sys::reset_signals();
    let wake = install_wakeup()?;

    let mut ctl = ctl;
    let mut wake = wake;
    let mut lines = LineReader::default();
    let mut runs: u32 = 0;
    loop {
        let stdio = loop {
            match wait_for_run(&ctl, &wake, &mut lines)? {
                // The daemon let this idle guard go (shutdown, or init is gone).
                None => return Ok(()),
                Some(Handed::Run(stdio)) => break stdio,
                Some(Handed::Fork(theirs)) => {
                    // Named before the first fork, so that no one ever sees the
                    // template under a guard's name once it has a guard forked.
                    name_template();
                    match fork_idle() {
                        Err(e) => {
                            // No fork (the computer's pids bound, most
                            // often): the template says why with `!errno`
                            // and stays the template.
                            drop(theirs);
                            let line = format!("!{}\n", e.raw_os_error().unwrap_or(libc::EIO));
                            BorrowedWriter(ctl.as_fd()).write_all(line.as_bytes())?;
                        }
                        Ok(Some(pid)) => {
                            // This guard is the template: it says the new one's
                            // pid and waits for the next request.
                            drop(theirs);
                            let line = format!("{pid}\n");
                            BorrowedWriter(ctl.as_fd()).write_all(line.as_bytes())?;
                        }
                        Ok(None) => {
                            // The new guard: init's child (CLONE_PARENT), idle
                            // on the socket that came with the request, with a
                            // group, a subreaper flag and a wake-up pipe of its
                            // own.
                            drop(std::mem::replace(&mut ctl, theirs));
                            lines = LineReader::default();
                            wake = become_forked(wake)?;
                        }
                    }
                }
            }
        };
        let spec: GuardSpec = {
            let line = lines.read_blocking(&ctl)?;
            serde_json::from_slice(&line).map_err(|e| io::Error::other(format!("bad spec: {e}")))?
        };
        take_stdio(stdio)?;
        runs += 1;
        let mut g = Guard::new(ctl, wake, lines, spec, runs < MAX_RUNS);
        g.start()?;
        g.run_loop();
        // Idle again (its Exited said so), or done.
        (ctl, wake, lines) = match g.into_idle() {
            Some(parts) => parts,
            None => return Ok(()),
        };
    }
}

struct Guard {
    ctl: OwnedFd,
    ctl_open: bool,
    /// Read end of the pipe the signal handler writes to.
    wake: OwnedFd,
    lines: LineReader,
    spec: GuardSpec,
    me: i32,
    child: i32,
    status: Option<i32>,
    reported: bool,
    kill_at: Option<Instant>,
    killed: bool,
    /// Below its run limit: may go idle again after this run.
    may_idle: bool,
    /// It said `idle` in its Exited.
    idle: bool,
}

impl Guard {
    fn new(
        ctl: OwnedFd,
        wake: OwnedFd,
        lines: LineReader,
        spec: GuardSpec,
        may_idle: bool,
    ) -> Self {
        Self {
            ctl,
            ctl_open: true,
            wake,
            lines,
            spec,
            me: std::process::id() as i32,
            child: 0,
            status: None,
            reported: false,
            kill_at: None,
            killed: false,
            may_idle,
            idle: false,
        }
    }

    /// After a run that ended with `idle` said: the control socket, the
    /// wake-up pipe and the line reader, to wait for the next run with, the
    /// working directory given back and this run's signals forgotten.
    fn into_idle(self) -> Option<(OwnedFd, OwnedFd, LineReader)> {
        if !self.idle {
            return None;
        }
        // The run's cwd is not held while idle (it may be removed or
        // unmounted); the next run enters its own.
        std::env::set_current_dir("/").ok()?;
        PENDING.fetch_and(!(1 << libc::SIGCHLD), Ordering::SeqCst);
        Some((self.ctl, self.wake, self.lines))
    }

    fn send(&mut self, ev: &GuardEvent) {
        if !self.ctl_open {
            return;
        }
        let mut line = serde_json::to_vec(ev).unwrap_or_default();
        line.push(b'\n');
        let mut f = BorrowedWriter(self.ctl.as_fd());
        if f.write_all(&line).is_err() {
            self.control_lost();
        }
    }

    fn fail(&mut self, stage: &str, errno: i32, message: String) {
        self.send(&GuardEvent::Failed {
            stage: stage.into(),
            errno,
            message,
        });
    }

    fn start(&mut self) -> io::Result<()> {
        let spec = self.spec.clone();
        let Some(program) = spec.argv.first() else {
            self.fail("exec", libc::EINVAL, "argv is empty".into());
            return Ok(());
        };
        // The guard enters the working directory itself: it has no other use
        // for its own.
        if let Err(e) = std::env::set_current_dir(&spec.cwd) {
            self.fail("cwd", e.raw_os_error().unwrap_or(libc::EIO), e.to_string());
            return Ok(());
        }
        let path_var = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        let resolved = resolve_program(program, path_var);
        if !spec.pty && spec.user.is_none() {
            // A `bash -c` line that is one plain command: its program,
            // started as bash would exec it (bash runs when that fails).
            if let Some(p) = super::plain::command(&spec.argv, &spec.env)
                && let Ok(pid) = spawn_plain(&p.program, &p.argv, &p.env)
            {
                self.child = pid;
                self.send(&GuardEvent::Started { pid });
                return to_dev_null();
            }
            // The common case: posix_spawn (vfork) is the cheapest start.
            return match spawn_plain(&resolved, &spec.argv, &spec.env) {
                Ok(pid) => {
                    self.child = pid;
                    self.send(&GuardEvent::Started { pid });
                    // Keep no copy of the program's pipes: its stdin closing
                    // must be seen by a writer, its output ending by a reader.
                    to_dev_null()
                }
                Err(errno) => {
                    self.fail("exec", errno as i32, errno.desc().to_string());
                    Ok(())
                }
            };
        }
        let mut cmd = Command::new(resolved);
        cmd.arg0(program)
            .args(&spec.argv[1..])
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        let pty = spec.pty;
        let user = spec.user;
        // A terminal or a user switch needs steps between fork and exec;
        // glibc's internal signals are reset there too (see spawn_plain).
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe calls (rt_sigaction, setsid, setpgid, ioctl,
        // setgroups, setresgid, setresuid), allocating nothing.
        unsafe {
            cmd.pre_exec(move || {
                for sig in 32..=64 {
                    sys::ignored_to_default(sig);
                }
                if pty {
                    if libc::setsid() < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    sys::tiocsctty(0)?;
                } else if libc::setpgid(0, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some((uid, gid)) = user
                    && (libc::setgroups(0, std::ptr::null()) < 0
                        || libc::setresgid(gid, gid, gid) < 0
                        || libc::setresuid(uid, uid, uid) < 0)
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(child) => {
                self.child = child.id() as i32;
                drop(child);
                drop(cmd);
                self.send(&GuardEvent::Started { pid: self.child });
                if !pty {
                    // Keep no copy of the program's pipes: its stdin closing
                    // must be seen by a writer, its output ending by a reader.
                    to_dev_null()?;
                }
                Ok(())
            }
            Err(e) => {
                self.fail("exec", e.raw_os_error().unwrap_or(libc::EIO), e.to_string());
                Ok(())
            }
        }
    }

    fn run_loop(&mut self) {
        if self.child == 0 {
            return;
        }
        loop {
            self.reap();
            if self.status.is_some() && !self.reported && self.finish_if_done() {
                return;
            }
            if self.reported && self.no_children() {
                return; // kept orphans have all ended
            }
            if let Some(at) = self.kill_at
                && Instant::now() >= at
                && !self.killed
            {
                self.kill_everything();
                self.killed = true;
            }
            let timeout = self.poll_timeout();
            self.wait_for_input(timeout);
        }
    }

    /// The program has ended; returns true when the guard is finished.
    fn finish_if_done(&mut self) -> bool {
        let Some(status) = self.status else {
            return false;
        };
        if self.spec.wait_group && !self.killed && self.group_alive() {
            return false;
        }
        if !self.spec.keep_orphans || !self.ctl_open {
            self.kill_everything();
        }
        if self.spec.pty {
            let _ = to_dev_null();
        }
        // Idle again only after a run that ended by itself, with nothing
        // left under the guard and no terminal, and only when asked.
        let idle = self.may_idle
            && self.spec.reuse
            && !self.spec.pty
            && !self.spec.keep_orphans
            && self.ctl_open
            && self.kill_at.is_none()
            && self.no_children();
        self.send(&GuardEvent::Exited { status, idle });
        // A send that failed lost the control socket (and ended the run).
        self.idle = idle && self.ctl_open;
        self.reported = true;
        !self.spec.keep_orphans || !self.ctl_open || self.no_children()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        let mut t: Option<Duration> = None;
        if let Some(at) = self.kill_at
            && !self.killed
        {
            t = Some(at.saturating_duration_since(Instant::now()));
        }
        if self.status.is_some() && !self.reported {
            t = Some(t.map_or(GROUP_POLL, |x| x.min(GROUP_POLL)));
        }
        t
    }

    fn wait_for_input(&mut self, timeout: Option<Duration>) {
        let ms: i32 = timeout.map_or(-1, |d| d.as_millis().min(60_000) as i32);
        let (ctl_ready, sig_ready) = {
            let mut fds = vec![PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
            if self.ctl_open {
                fds.push(PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN));
            }
            match poll(
                &mut fds,
                nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::NONE),
            ) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => return,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
            let sig = fds[0].any().unwrap_or(false);
            let ctl = fds.get(1).is_some_and(|f| f.any().unwrap_or(false));
            (ctl, sig)
        };
        if sig_ready {
            let mut drain = [0u8; 64];
            while matches!(nix::unistd::read(self.wake.as_fd(), &mut drain), Ok(n) if n > 0) {}
        }
        // Checked on every wake-up, whatever woke it: a signal may land
        // between the poll and here.
        let pending = PENDING.swap(0, Ordering::SeqCst);
        let ends = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
        if ends.iter().any(|&s| pending & (1 << s) != 0) {
            // init's shutdown: nothing may outlive it, kept orphans included.
            self.spec.keep_orphans = false;
            self.terminate();
        }
        if ctl_ready {
            match self.lines.fill(&self.ctl) {
                Ok(true) => {}
                Ok(false) | Err(_) => self.control_lost(),
            }
            while let Some(line) = self.lines.next_line() {
                match serde_json::from_slice::<GuardCommand>(&line) {
                    Ok(cmd) => self.command(cmd),
                    Err(_) => continue,
                }
            }
        }
    }

    fn control_lost(&mut self) {
        if self.ctl_open {
            self.ctl_open = false;
            // With no daemon, nothing may outlive the run, kept orphans included.
            self.spec.keep_orphans = false;
            self.terminate();
        }
    }

    fn command(&mut self, cmd: GuardCommand) {
        match cmd {
            GuardCommand::Terminate => self.terminate(),
            GuardCommand::Signal { sig } => {
                if self.status.is_none() || self.spec.wait_group {
                    let _ = self.signal_groups(sig);
                }
                self.send(&GuardEvent::Signalled { note: None });
            }
            GuardCommand::SignalForeground { sig, pgid } => {
                let session = self.child;
                let still_ours = proctree::all()
                    .iter()
                    .any(|p| !p.is_zombie() && p.pgrp == pgid && p.session == session);
                let note = if still_ours {
                    sys::kill(-pgid, sig);
                    None
                } else {
                    Some(format!(
                        "{} was not sent: the terminal's foreground group {pgid} has no process left in the program's session",
                        sys::signal_name(sig)
                    ))
                };
                self.send(&GuardEvent::Signalled { note });
            }
        }
    }

    /// The program's group, and with waitGroup every group its live processes are in.
    /// Returns the groups signalled.
    fn signal_groups(&self, sig: i32) -> Vec<i32> {
        let mut groups = vec![self.child];
        if self.spec.wait_group {
            for p in proctree::descendants(self.me) {
                if !groups.contains(&p.pgrp) && p.pgrp != self.me {
                    groups.push(p.pgrp);
                }
            }
        }
        for &g in &groups {
            sys::kill(-g, sig);
        }
        groups
    }

    fn terminate(&mut self) {
        if self.kill_at.is_some() {
            return;
        }
        self.kill_at = Some(Instant::now() + KILL_GRACE);
        let mut signalled = Vec::new();
        if self.status.is_none() || self.spec.wait_group {
            signalled = self.signal_groups(libc::SIGTERM);
        }
        // Then every process under the guard that left those groups (a
        // setsid, a job of its own): each gets TERM once.
        for p in proctree::descendants(self.me) {
            if !signalled.contains(&p.pgrp) {
                sys::kill(p.pid, libc::SIGTERM);
            }
        }
    }

    fn group_alive(&self) -> bool {
        if self.spec.pty {
            proctree::group_alive(None, Some(self.child))
        } else {
            proctree::group_alive(Some(self.child), None)
        }
    }

    fn reap(&mut self) {
        while let Ok(Some((pid, status))) = sys::reap_any() {
            if pid == self.child && self.status.is_none() {
                self.status = Some(status);
                if self.spec.pty && self.spec.wait_group {
                    // A terminal hangs up its foreground group when its
                    // session leader goes.
                    if let Ok(Some(fg)) = sys::tcgetpgrp(stdin_fd()) {
                        sys::kill(-fg, libc::SIGHUP);
                    }
                }
            }
        }
    }

    fn no_children(&self) -> bool {
        matches!(sys::reap_any(), Err(nix::errno::Errno::ECHILD))
    }

    /// SIGKILL every process under the guard and reap them, until none is left.
    fn kill_everything(&mut self) {
        for round in 0..10_000 {
            self.reap();
            if self.no_children() {
                return;
            }
            let left = proctree::descendants(self.me);
            for p in &left {
                sys::kill(p.pid, libc::SIGKILL);
            }
            self.reap();
            if round > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Start the program with posix_spawn in a process group of its own, every
/// signal at its default and none blocked. Every signal, glibc's internal
/// 32 and 33 included, goes in the "set to default" set: otherwise glibc's
/// posix_spawn leaves those two ignored in the child, and an ignore
/// survives exec.
fn spawn_plain(
    program: &std::path::Path,
    argv: &[String],
    env: &[(String, String)],
) -> Result<i32, nix::errno::Errno> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use std::ffi::CString;
    let cstr = |s: &str| CString::new(s).map_err(|_| nix::errno::Errno::EINVAL);
    let argv = argv
        .iter()
        .map(|a| cstr(a))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = env
        .iter()
        .map(|(k, v)| cstr(&format!("{k}={v}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_pgroup(nix::unistd::Pid::from_raw(0))?;
    attr.set_sigmask(&nix::sys::signal::SigSet::empty())?;
    // SAFETY: a zeroed sigset_t is a valid empty set; its first 64 bits are
    // signals 1 to 64 on Linux, all of which are set by hand (sigfillset and
    // sigaddset refuse glibc's internal ones).
    let every = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        std::ptr::write((&mut set as *mut libc::sigset_t).cast::<u64>(), u64::MAX);
        nix::sys::signal::SigSet::from_sigset_t_unchecked(set)
    };
    attr.set_sigdefault(&every)?;
    let actions = PosixSpawnFileActions::init()?;
    posix_spawn(program, &actions, &attr, &argv, &envp).map(|p| p.as_raw())
}

/// The program's path: a name without a slash is looked up in the
/// program's own PATH (never the guard's, which has none), as execvp would.
/// A name found nowhere is left for exec to refuse with ENOENT.
fn resolve_program(name: &str, path_var: Option<&str>) -> std::path::PathBuf {
    if name.contains('/') {
        return name.into();
    }
    for dir in path_var
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
    {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = std::path::Path::new(dir).join(name);
        let is_file = std::fs::metadata(&candidate).is_ok_and(|m| m.is_file());
        if is_file && nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok() {
            return candidate;
        }
    }
    name.into()
}

/// Signals seen by the handler, one bit each.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The write end of the wake-up pipe, for the handler.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.fetch_or(1 << (sig as u64 & 63), Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write is async-signal-safe; the buffer is a local byte.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// Install the handlers for SIGCHLD, SIGTERM, SIGINT and SIGHUP; returns the
/// pipe's read end, which becomes readable whenever one arrives.
fn install_wakeup() -> io::Result<OwnedFd> {
    let (r, w) = sys::pipe_nonblocking()?;
    WAKE_FD.store(std::os::fd::IntoRawFd::into_raw_fd(w), Ordering::SeqCst);
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_signal),
        nix::sys::signal::SaFlags::SA_RESTART | nix::sys::signal::SaFlags::SA_NOCLDSTOP,
        nix::sys::signal::SigSet::empty(),
    );
    for sig in [
        nix::sys::signal::Signal::SIGCHLD,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGHUP,
    ] {
        // SAFETY: the handler only touches atomics and calls write(2), both
        // async-signal-safe.
        unsafe { nix::sys::signal::sigaction(sig, &action) }.map_err(io::Error::from)?;
    }
    Ok(r)
}

fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the guard's whole life (a terminal or /dev/null).
    unsafe { BorrowedFd::borrow_raw(0) }
}

/// Point fds 0, 1 and 2 at /dev/null.
fn to_dev_null() -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..3 {
        sys::onto_stdio(null.as_fd(), fd)?;
    }
    Ok(())
}
