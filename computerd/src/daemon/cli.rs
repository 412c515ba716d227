//! computerd's command line: `init`, `stdio`, `probe`, `sandbox` (parsed
//! by [`crate::launch`], the types every launcher renders) and the per-run
//! `guard`.

use std::ffi::OsString;

use crate::daemon::setup::SetupError;
use crate::daemon::{self, Daemon, Identity, Lifecycle, init, isolate, sandbox};
use crate::launch::{self, Command, InitArgs};

/// The standalone computerd's entry point; returns the exit code. The word
/// `computerd` before the subcommand is accepted here too, so a caller that
/// takes this binary for a multi-call one still reaches it.
pub fn main() -> i32 {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let args = launch::daemon_args(&argv)
        .or_else(|| argv.get(1..))
        .unwrap_or_default();
    run(args)
}

/// Run computerd with `args`: what follows the program (and the word), the
/// subcommand first. A multi-call binary calls this once
/// [`launch::daemon_args`] says it was started as computerd.
pub fn run(args: &[OsString]) -> i32 {
    // The guard is started once per run: keep its path short, before any
    // argument parsing or logging is set up.
    if args.first().is_some_and(|a| a == "guard") {
        return daemon::guard::main(args.get(1).cloned());
    }
    let command = match launch::parse(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            e.print();
            return code;
        }
    };
    let outcome = match command {
        Command::Init(a) => init_main(a),
        Command::Probe(a) => Ok(daemon::probe::main(&a.connect, a.diagnose)),
        Command::Sandbox(a) => sandbox::main(&a).map_err(StartError::Sandbox),
        Command::Spare(a) => spare_main(a),
        Command::Stdio(a) => {
            // The bridge runs as the computer's user, beside its programs,
            // and carries the whole connection (with --direct, its token
            // too): like init and the guards, not theirs to trace or read.
            if let Err(e) = nix::sys::prctl::set_dumpable(false) {
                eprintln!("computerd stdio: could not make the bridge non-dumpable ({e})");
                return 1;
            }
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| StartError::Runtime("stdio", e))
                .map(|rt| rt.block_on(daemon::bridge::run(&a.socket, a.direct.as_deref())))
        }
        Command::Egress(a) => {
            init_logging();
            daemon::egress::main(a).map_err(StartError::Egress)
        }
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("{e}");
        1
    })
}

/// Why computerd did not start serving. Its words are said here, in one
/// place, and on stderr with exit code 1 by [`run`]; each names the
/// subcommand and the step.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The deadline is past, or the maximum is before it.
    #[error("computerd init: {0}")]
    Times(SetupError),
    /// The flags against who init is (`--user`, `--own-network`), or the
    /// privilege drop failing or not reading back.
    #[error("computerd init: {0}")]
    Isolate(SetupError),
    /// The socket's directory or a socket already there.
    #[error("computerd init: {0}")]
    Socket(SetupError),
    #[error("computerd init: could not mark inherited descriptors close-on-exec: {0}")]
    Cloexec(std::io::Error),
    #[error("computerd init: could not open /dev/null for fds 0-2: {0}")]
    Stdio(std::io::Error),
    #[error("computerd init: could not become a child subreaper: {0}")]
    Subreaper(nix::Error),
    #[error("computerd init: cannot find its own binary through /proc/self/exe: {0}")]
    OwnBinary(std::io::Error),
    /// The sandbox could not be made (its flags against this host, a
    /// namespace, a mount, a cgroup to join): nothing of it is left.
    #[error("computerd sandbox: {0}")]
    Sandbox(SetupError),
    /// The desktop's Xvfb (`--xvfb`) did not start.
    #[error("computerd init: {0}")]
    Desktop(SetupError),
    /// The egress proxy's flags (its list, its hint).
    #[error("computerd egress: {0}")]
    Egress(SetupError),
    /// The async runtime of `init` or `stdio`.
    #[error("computerd {0}: could not start the runtime: {1}")]
    Runtime(&'static str, std::io::Error),
}

/// `computerd spare`: join the cgroups, wait for the sandbox's arguments,
/// then be that sandbox.
fn spare_main(a: launch::SpareArgs) -> Result<i32, StartError> {
    sandbox::join(std::process::id(), &a.cgroups).map_err(StartError::Sandbox)?;
    let mut sent = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut sent).map_err(|e| {
        StartError::Sandbox(format!("spare: could not read its arguments ({e})").into())
    })?;
    if sent.is_empty() {
        // Its provider went away before it was needed: leave its cgroups
        // for their parent and remove them (best effort: a v2 parent with
        // controllers takes no process, and the provider's sweep is there).
        let me = std::process::id().to_string();
        for dir in &a.cgroups {
            if let Some(parent) = dir.parent()
                && std::fs::write(parent.join("cgroup.procs"), &me).is_ok()
            {
                let _ = std::fs::remove_dir(dir);
            }
        }
        return Ok(0);
    }
    let argv: Vec<OsString> = sent
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| {
            // The bytes are what `SpareArgs::go` encoded from OsStrs.
            use std::os::unix::ffi::OsStrExt;
            std::ffi::OsStr::from_bytes(a).to_os_string()
        })
        .collect();
    let mut args = match launch::parse(&argv) {
        Ok(Command::Sandbox(s)) => s,
        Ok(_) => {
            return Err(StartError::Sandbox(
                "spare: its arguments must be a sandbox's".into(),
            ));
        }
        Err(e) => return Err(StartError::Sandbox(format!("spare: {e}").into())),
    };
    // Joined already; what the sandbox starts is born in them.
    args.cgroups.clear();
    // The provider's pipe is done with: init's stdin is /dev/null.
    let null = std::fs::File::open("/dev/null")
        .map_err(|e| StartError::Sandbox(format!("spare: /dev/null: {e}").into()))?;
    nix::unistd::dup2_stdin(null)
        .map_err(|e| StartError::Sandbox(format!("spare: could not reset stdin ({e})").into()))?;
    sandbox::main(&args).map_err(StartError::Sandbox)
}

fn init_main(args: InitArgs) -> Result<i32, StartError> {
    let InitArgs {
        deadline,
        max_deadline,
        socket,
        user,
        own_network,
        xvfb,
        screen,
        display,
        egress,
        egress_tcp,
    } = args;
    let egress = match (egress, egress_tcp) {
        (Some(path), _) => Some(daemon::egress::relay::To::Socket(path)),
        (None, Some(at)) => Some(daemon::egress::relay::To::Tcp(at)),
        (None, None) => None,
    };
    let (deadline, max) = (deadline.get(), max_deadline.map(launch::Time::get));
    init::check_times(deadline, max).map_err(StartError::Times)?;
    let user = user.map(|u| (u.uid, u.gid));
    let mut plan = isolate::Plan {
        user,
        own_network,
        user_dirs: Vec::new(),
    };
    if user.is_some() {
        if let Some(home) = std::env::var_os("HOME").filter(|h| h != "/" && !h.is_empty()) {
            plan.user_dirs.push(home.into());
        }
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            plan.user_dirs.push(dir.to_path_buf());
        }
    }
    isolate::check(&plan).map_err(StartError::Isolate)?;
    // Whatever init was started with (ignored signals, a blocked mask, a
    // umask) is not handed on to its programs: they start as on a fresh
    // login, files made 0644 and directories 0755 unless asked.
    daemon::sys::reset_signals();
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    // Whatever init was handed beyond stdio is not its programs' to see.
    daemon::sys::cloexec_from(3).map_err(StartError::Cloexec)?;
    ensure_stdio().map_err(StartError::Stdio)?;
    nix::sys::prctl::set_child_subreaper(true).map_err(StartError::Subreaper)?;
    let exe = std::fs::read_link("/proc/self/exe").map_err(StartError::OwnBinary)?;
    // Everything that must hold for every thread happens here, while
    // init has one thread: the runtime's threads inherit it.
    let outcome = isolate::apply(&plan).map_err(StartError::Isolate)?;
    init::check_socket_dir(&socket).map_err(StartError::Socket)?;
    let relay = egress
        .as_ref()
        .map(|_| daemon::egress::relay::listen())
        .transpose()
        .map_err(StartError::Isolate)?;
    init_logging();
    tracing::info!(
        uid = outcome.uid,
        gid = outcome.gid,
        threads = outcome.threads,
        own_network,
        "no capability in any set, no_new_privs and the seccomp filter, read back"
    );
    if !outcome.idle_interfaces.is_empty() {
        tracing::info!(
            "the network namespace also holds {} (down, no address; no program can bring one up)",
            outcome.idle_interfaces.join(", ")
        );
    }
    let mut identity = identity();
    let desktop = start_desktop(xvfb.as_deref(), screen)?;
    identity.display = desktop.as_ref().map(|x| x.display.clone());
    if let Some(d) = display {
        // SAFETY: init has one thread here (the runtime starts below), so
        // nothing reads the environment while it changes.
        unsafe { std::env::set_var("DISPLAY", &d) };
        identity.display = Some(d);
    }
    if egress.is_some() {
        identity.extra_env = daemon::egress::relay::proxy_env();
    }
    let daemon = Daemon::new(
        identity,
        exe,
        Lifecycle::new(init::Deadline::new(deadline, max)),
    );
    // One thread runs every task: a run's steps (its request, hand-over,
    // events, output and reply) then never wake another thread, which
    // costs each run about three context switches less than two workers
    // (measured: 4.7 against 7.4 a run, and 6% of exec.run's time). Work
    // that blocks or takes long (files, tar, screenshots, forks of guards)
    // runs on the blocking pool, never on this thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StartError::Runtime("init", e))?;
    if let Some(x) = &desktop {
        daemon.reaper.adopt(x.pid);
    }
    if let (Some(listener), Some(to)) = (relay, egress) {
        let _guard = rt.enter();
        daemon::egress::spawn(daemon::egress::relay::serve(listener, to));
    }
    let code = rt.block_on(init::serve(daemon, socket));
    drop(desktop);
    Ok(code)
}

/// With `--xvfb`: the desktop's X server, started as init's user before
/// the daemon is made, and DISPLAY set for the daemon's own display.
fn start_desktop(
    xvfb: Option<&std::path::Path>,
    screen: launch::Screen,
) -> Result<Option<daemon::desktop::Xvfb>, StartError> {
    let Some(path) = xvfb else {
        return Ok(None);
    };
    let x = daemon::desktop::start(path, screen).map_err(StartError::Desktop)?;
    // SAFETY: init has one thread here (the runtime starts later; Xvfb's
    // display number was read by a poll on this thread), so nothing reads
    // the environment while it changes.
    unsafe { std::env::set_var("DISPLAY", &x.display) };
    Ok(Some(x))
}

/// Who the daemon is, for the programs it starts as itself.
fn identity() -> Identity {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let entry = daemon::users::by_uid(uid);
    let name = entry
        .as_ref()
        .map(|e| e.0.clone())
        .unwrap_or_else(|| uid.to_string());
    let home = std::env::var("HOME")
        .ok()
        .filter(|h| h.starts_with('/'))
        .or_else(|| entry.map(|e| e.1))
        .unwrap_or_else(|| "/".into());
    let path = std::env::var("PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    Identity {
        uid,
        gid,
        name,
        home,
        path,
        display: None,
        extra_env: Vec::new(),
    }
}

/// fds 0-2 must be open, so pipes and sockets never get those numbers.
fn ensure_stdio() -> std::io::Result<()> {
    for fd in 0..3 {
        if !daemon::sys::is_open(fd) {
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?;
            if std::os::fd::AsRawFd::as_raw_fd(&null) == fd {
                // It took the free number itself: keep it open there.
                let _ = std::os::fd::IntoRawFd::into_raw_fd(null);
            } else {
                daemon::sys::onto_stdio(std::os::fd::AsFd::as_fd(&null), fd)?;
            }
        }
    }
    Ok(())
}

/// Logs go to stderr (stdout is the protocol's, for `stdio`), at the
/// level COMPUTERD_LOG names: error, warn, info (default), debug, trace
/// or off.
fn init_logging() {
    let level = match std::env::var("COMPUTERD_LOG").as_deref().map(str::trim) {
        Ok("off") => tracing_subscriber::filter::LevelFilter::OFF,
        Ok("error") => tracing_subscriber::filter::LevelFilter::ERROR,
        Ok("warn") => tracing_subscriber::filter::LevelFilter::WARN,
        Ok("debug") => tracing_subscriber::filter::LevelFilter::DEBUG,
        Ok("trace") => tracing_subscriber::filter::LevelFilter::TRACE,
        _ => tracing_subscriber::filter::LevelFilter::INFO,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_errors_name_the_subcommand_and_the_step() {
        let io = || std::io::Error::from_raw_os_error(libc::EMFILE);
        let said: Vec<String> = [
            StartError::Times("--deadline 2001-01-01T00:00:00Z is in the past".into()),
            StartError::Cloexec(io()),
            StartError::Subreaper(nix::Error::EPERM),
            StartError::Runtime("stdio", io()),
        ]
        .iter()
        .map(|e| e.to_string())
        .collect();
        assert_eq!(
            said,
            [
                "computerd init: --deadline 2001-01-01T00:00:00Z is in the past",
                "computerd init: could not mark inherited descriptors close-on-exec: Too many open files (os error 24)",
                "computerd init: could not become a child subreaper: EPERM: Operation not permitted",
                "computerd stdio: could not start the runtime: Too many open files (os error 24)",
            ]
        );
    }
}
