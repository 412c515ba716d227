//! computerd's command line: `init`, `stdio`, `probe`, `sandbox` and the
//! per-run `guard`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::daemon::{self, Daemon, Identity, Lifecycle, init, isolate, sandbox};
use clap::{Parser, Subcommand};

/// `computerd sandbox --help`: what the sandbox gives, and its security model.
const SANDBOX_ABOUT: &str = "\
Run `computerd init` on this host, isolated with namespaces, as bubblewrap
does but with no other tool. Init and every program it starts see:

  - the host's root read-only, nosuid and nodev;
  - --work (their HOME) and --run (the socket's directory) read-write, at
    the same paths;
  - a private /tmp and /dev/shm, a minimal /dev (null, zero, full, random,
    urandom, tty and a pty instance of their own; never the host's disks);
  - their own /proc, PID (init is PID 1), IPC and UTS (hostname computer)
    namespaces; with --network none, a network namespace with only lo up;
  - empty read-only directories over /run, /var/run, /root, /home and each
    --hide, with --work and --run still showing under them.

As root (with CAP_SYS_ADMIN) init must be given --user UID:GID, a uid other
than 0, so no program runs as root. Any other user gets a user namespace
mapping only its own uid and gid (files in --work stay its own) and init
starts with an empty bounding set; a host that forbids unprivileged user
namespaces is refused in words. This process stays outside as a forwarder:
it passes TERM, INT and HUP to init, exits with init's status (128+signal if
killed), and if it is killed the computer dies with it. Every failure is a
refusal on stderr with exit code 1.

Example:
  computerd sandbox --work /srv/c1/home --run /srv/c1/run -- \\
    init --deadline 2026-12-01T10:00:00Z --socket /srv/c1/run/computerd.sock --user 1000:1000";

/// computerd: the daemon inside a computer of computer-mcp.
///
/// It speaks JSON-RPC 2.0, one JSON object per line, on a unix socket
/// (init) or over stdin/stdout (stdio, a bridge to init's socket). See
/// computerd/README.md for the wire reference.
#[derive(Parser)]
#[command(name = "computerd", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run as the computer's first process: listen on the socket, run
    /// programs under guards, end everything at the deadline.
    Init {
        /// When the computer ends (RFC 3339, e.g. 2026-12-01T10:00:00Z).
        /// At the deadline every program gets TERM, then KILL.
        #[arg(long, value_name = "TIME")]
        deadline: String,
        /// The latest time deadline.extend may move the deadline to.
        /// Without it the deadline cannot move.
        #[arg(long, value_name = "TIME")]
        max_deadline: Option<String>,
        /// The unix socket to listen on. Its directory must exist, be
        /// this user's alone (0700) and writable; init never makes it
        /// (with --user, init makes it that user's).
        #[arg(long, value_name = "PATH", default_value = crate::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Start as root and become uid:gid with no groups, making $HOME
        /// and the socket's directory that user's alone (0700). 0:0 is
        /// root with no capability.
        #[arg(long, value_name = "UID:GID")]
        user: Option<String>,
        /// Move init and every program into a network namespace of their
        /// own with only loopback up: they reach nothing outside. Needs
        /// root with CAP_SYS_ADMIN and CAP_NET_ADMIN, and a --user other
        /// than 0 that no other process holds.
        #[arg(long)]
        own_network: bool,
    },
    /// Print one JSON line: the uid, gid, kernel and interfaces, and what
    /// each target answered (refused, accepted or answered). Exit 0 when
    /// the probe ran, whatever the targets answered. Only bytes that come
    /// back count as reaching a target.
    Probe {
        /// A target: host:port is tried over TCP (with a request by port:
        /// TLS ClientHello on 443, DNS on 53, HTTP HEAD otherwise),
        /// host:port/udp is sent a DNS query. Repeat for more; all are
        /// tried at once, 10 s to connect and 10 s to answer.
        #[arg(long, value_name = "HOST:PORT[/udp]")]
        connect: Vec<String>,
        /// Also check 1.1.1.1, 8.8.8.8, 9.9.9.9 and 151.101.1.57 on
        /// 443/tcp, 80/tcp and 53/udp (3 s each way) and give a verdict:
        /// egress, accepted-only or none.
        #[arg(long)]
        diagnose: bool,
    },
    /// Run init isolated on this host (the local provider): a read-only
    /// view of the host, private /tmp, /dev, /proc, PID, IPC, UTS and
    /// network namespaces, masks over other users' files.
    #[command(long_about = SANDBOX_ABOUT)]
    Sandbox {
        /// The computer's work directory and HOME (absolute, existing),
        /// bound read-write at the same path; init starts in it.
        #[arg(long, value_name = "DIR")]
        work: PathBuf,
        /// The directory of init's socket (absolute, existing), bound
        /// read-write at the same path so the server reaches the socket.
        #[arg(long, value_name = "DIR")]
        run: PathBuf,
        /// none: a network namespace of the computer's own with only lo
        /// up, so it reaches nothing; host: the host's network, shared.
        #[arg(long, value_name = "MODE", default_value = "none")]
        network: sandbox::Network,
        /// Another path to hide behind an empty read-only directory (or
        /// file), such as the server's HOME or its state directory. It
        /// must exist. Repeatable.
        #[arg(long, value_name = "PATH")]
        hide: Vec<PathBuf>,
        /// The size of the private /tmp, and of /dev/shm, in MiB.
        #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        tmp_size_mib: u64,
        /// `init` and its flags, after `--`.
        #[arg(last = true, required = true, value_name = "INIT")]
        command: Vec<OsString>,
    },
    /// Bridge stdin/stdout to init's socket (waits up to 3 s for it).
    Stdio {
        /// The socket to reach.
        #[arg(long, value_name = "PATH", env = crate::SOCKET_ENV, default_value = crate::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
}

/// The subcommands of computerd, for a binary that is computerd among other
/// things (computer-mcp runs as computerd when called with one of these).
pub const SUBCOMMANDS: &[&str] = &["init", "guard", "sandbox", "stdio", "probe"];

/// computerd's entry point; returns the exit code.
pub fn main() -> i32 {
    // The guard is started once per run: keep its path short, before any
    // argument parsing or logging is set up.
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == "guard") {
        return daemon::guard::main(args.next());
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Init {
            deadline,
            max_deadline,
            socket,
            user,
            own_network,
        } => init_main(InitArgs {
            deadline,
            max_deadline,
            socket,
            user,
            own_network,
        }),
        Command::Probe { connect, diagnose } => daemon::probe::main(&connect, diagnose),
        Command::Sandbox {
            work,
            run,
            network,
            hide,
            tmp_size_mib,
            command,
        } => sandbox::main(sandbox::Options {
            work,
            run,
            network,
            hide,
            tmp_size_mib,
            command,
        }),
        Command::Stdio { socket } => {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("computerd stdio: {e}");
                    return 1;
                }
            };
            rt.block_on(daemon::bridge::run(&socket))
        }
    }
}

fn refuse(why: impl std::fmt::Display) -> i32 {
    eprintln!("computerd init: {why}");
    1
}

struct InitArgs {
    deadline: String,
    max_deadline: Option<String>,
    socket: PathBuf,
    user: Option<String>,
    own_network: bool,
}

fn init_main(args: InitArgs) -> i32 {
    let InitArgs {
        deadline,
        max_deadline,
        socket,
        user,
        own_network,
    } = args;
    let deadline = match init::parse_time("--deadline", &deadline) {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    let max = match max_deadline
        .as_deref()
        .map(|m| init::parse_time("--max-deadline", m))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    if let Err(e) = init::check_times(deadline, max) {
        return refuse(e);
    }
    let user = match user.as_deref().map(isolate::parse_user).transpose() {
        Ok(u) => u,
        Err(e) => return refuse(e),
    };
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
    if let Err(e) = isolate::check(&plan) {
        return refuse(e);
    }
    // Whatever init was started with (ignored signals, a blocked mask, a
    // umask) is not handed on to its programs: they start as on a fresh
    // login, files made 0644 and directories 0755 unless asked.
    daemon::sys::reset_signals();
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    // Whatever init was handed beyond stdio is not its programs' to see.
    if let Err(e) = daemon::sys::cloexec_from(3) {
        return refuse(format!(
            "could not mark inherited descriptors close-on-exec: {e}"
        ));
    }
    if let Err(e) = ensure_stdio() {
        return refuse(format!("could not open /dev/null for fds 0-2: {e}"));
    }
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        return refuse(format!("could not become a child subreaper: {e}"));
    }
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => {
            return refuse(format!(
                "cannot find its own binary through /proc/self/exe: {e}"
            ));
        }
    };
    // Everything that must hold for every thread happens here, while
    // init has one thread: the runtime's threads inherit it.
    let outcome = match isolate::apply(&plan) {
        Ok(o) => o,
        Err(e) => return refuse(e),
    };
    if let Err(e) = init::check_socket_dir(&socket) {
        return refuse(e);
    }
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
    let identity = identity();
    let daemon = Daemon::new(
        identity,
        exe,
        Lifecycle::new(init::Deadline::new(deadline, max)),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return refuse(format!("could not start the runtime: {e}")),
    };
    rt.block_on(init::serve(daemon, socket))
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
    }
}

/// fds 0-2 must be open, so pipes and sockets never get those numbers.
fn ensure_stdio() -> std::io::Result<()> {
    for fd in 0..3 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
        if !open {
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?;
            let raw = std::os::fd::IntoRawFd::into_raw_fd(null);
            if raw != fd {
                // SAFETY: dup2 onto a closed low descriptor; raw is ours and closed after.
                unsafe {
                    libc::dup2(raw, fd);
                    libc::close(raw);
                }
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
