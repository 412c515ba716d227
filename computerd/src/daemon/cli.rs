//! computerd's command line: `init`, `stdio`, `probe`, `sandbox` and the
//! per-run `guard`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::daemon::{self, Daemon, Identity, Lifecycle, init, isolate, sandbox};
use clap::{Parser, Subcommand};

/// `computerd sandbox --help`: what the sandbox gives, and its security model.
const SANDBOX_ABOUT: &str = "\
Run `computerd init` on this host, isolated with namespaces, as bubblewrap
does but with no other tool. Its root is a fresh tmpfs (read-only once made)
holding only this; nothing else of the host is there, whatever the host adds:

  - /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32 and /etc of the host
    (those it has), read-only, nosuid and nodev; a host link such as
    /bin -> usr/bin is made again as a link;
  - /work, their HOME and init's working directory: a tmpfs of
    --work-size-mib, owned by the computer's user (init's --user, or the
    user who runs the sandbox), mode 0700, nosuid, nodev;
  - /run/computerd: --run, read-write (init's socket; the host reaches it in
    --run);
  - /workspace: each --bind HOST_DIR:INSIDE[:ro], read-write or read-only,
    nosuid and nodev;
  - /tmp and /dev/shm, private tmpfs of --tmp-size-mib; a minimal /dev
    (null, zero, full, random, urandom, tty and a pty instance of their
    own; never the host's disks);
  - their own /proc, PID (init is PID 1), IPC and UTS (hostname computer)
    namespaces; with --network none, a network namespace with only lo up
    and at /sys a read-only sysfs of it (no /sys where the kernel refuses
    one, and none with --network host);
  - /opt/computerd/computerd: this binary, read-only, when no directory above
    shows it; init and its guards run from there.

Before anything else, the sandbox writes its pid into each --cgroup
DIR/cgroup.procs, so init and all it starts are bounded from the start.
As root (with CAP_SYS_ADMIN) init must be given --user UID:GID, a uid other
than 0, so no program runs as root. Any other user gets a user namespace
mapping only its own uid and gid and init starts with an empty bounding set;
a host that forbids unprivileged user namespaces is refused in words. Init's
--socket must be in /run/computerd (its default is). This process stays
outside as a forwarder: it passes TERM, INT and HUP to init, exits with
init's status (128+signal if killed), and if it is killed the computer dies
with it. Every failure is a refusal on stderr with exit code 1.

Example:
  computerd sandbox --run /srv/c1/run --work-size-mib 2048 \\
    --bind /srv/project:/workspace/project --cgroup /sys/fs/cgroup/pids/c1 -- \\
    init --deadline 2026-12-01T10:00:00Z --user 1000:1000";

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
    /// Run init isolated on this host (the local provider): a root of
    /// the host's OS directories only (read-only), a tmpfs HOME at /work,
    /// shares under /workspace, private /tmp, /dev, /proc, PID, IPC, UTS and
    /// network namespaces, joined to its cgroups first.
    #[command(long_about = SANDBOX_ABOUT)]
    Sandbox {
        /// The directory of init's socket on the host (absolute, existing),
        /// bound read-write at /run/computerd inside.
        #[arg(long, value_name = "DIR")]
        run: PathBuf,
        /// none: a network namespace of the computer's own with only lo
        /// up, so it reaches nothing; host: the host's network, shared.
        #[arg(long, value_name = "MODE", default_value = "none")]
        network: sandbox::Network,
        /// The size of the private /tmp, and of /dev/shm, in MiB.
        #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        tmp_size_mib: u64,
        /// The size of /work (HOME, a tmpfs), in MiB: a write past it fails
        /// with "No space left on device".
        #[arg(long, value_name = "N", default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        work_size_mib: u64,
        /// Show the host directory HOST_DIR (absolute, existing) at INSIDE,
        /// /workspace or a path under it, read-write, or read-only with
        /// :ro. Shares may not nest. Repeatable.
        #[arg(long = "bind", value_name = "HOST_DIR:INSIDE[:ro]")]
        binds: Vec<sandbox::Share>,
        /// A cgroup directory the sandbox joins (writes its pid into its
        /// cgroup.procs) before it does anything else; one per cgroup v1
        /// hierarchy. Repeatable.
        #[arg(long = "cgroup", value_name = "DIR")]
        cgroups: Vec<PathBuf>,
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
            run,
            network,
            tmp_size_mib,
            work_size_mib,
            binds,
            cgroups,
            command,
        } => sandbox::main(sandbox::Options {
            run,
            network,
            tmp_size_mib,
            work_size_mib,
            binds,
            cgroups,
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
