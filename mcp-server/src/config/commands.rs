//! The command line's shape: the subcommands and their own arguments. The
//! options every command shares are [`Config`]'s, beside this module.

use clap::{Args, Parser, Subcommand};

use super::{Config, ServeArgs};

const ABOUT: &str = "An MCP server that gives a model a computer: a shell, files and processes in an isolated computer made on the first tool call.";

const LONG_ABOUT: &str = "\
An MCP server that gives a model a computer: a shell, files and background
processes in an isolated computer that is made on the first tool call and
released when the session ends or after --session-idle unused. A model may
make more with computer_new and name them; `computer-mcp computers` lists
and releases them from a terminal.

Plug it into an MCP client over stdio (the default: `computer-mcp`, or
`computer-mcp serve`), or over streamable HTTP (`computer-mcp serve --http
127.0.0.1:8700`, which requires a bearer token).

Every option can be given as a flag, as a COMPUTER_MCP_* variable (named
under each flag), or in a TOML file (--config; keys are the flags' names
with '_' for '-', `[http]` for serve's, and `[providers.<id>]` for a
provider's, without the `<id>-` of its flags), in that order of precedence.
A provider's options are refused unless it is the --provider.";

#[derive(Parser, Debug)]
#[command(name = "computer-mcp", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: Config,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve MCP over stdio (the default), or over streamable HTTP with --http.
    Serve(ServeArgs),
    /// Make a computer, run one program in it, print its output, release it.
    /// For trying the server's computers from a terminal.
    Exec(ExecArgs),
    /// Release every computer of the provider whose deadline has passed;
    /// with --run and --epoch, also the run's computers of lower epochs.
    Sweep(SweepArgs),
    /// Check what this host can give (namespaces, seccomp, cgroups, Docker,
    /// Xvfb, Chromium), make one computer with the configured provider, and
    /// say the next step for each thing that does not work.
    Doctor,
    /// List or release the provider's computers from a terminal: kept
    /// ones, those of a server that is gone, or any other.
    #[command(subcommand)]
    Computers(ComputersCommand),
    /// Copy a file or a tree between this host and a computer, either way:
    /// `cp ./src build:/work/src`, `cp build:/work/out ./out`. DST is the
    /// path the source becomes; onto this host it must not exist, and the
    /// computer's archive is unpacked by rules that keep it inside DST.
    Cp(crate::cp::CpArgs),
    /// Reach a server a computer runs on its own loopback: `ports open
    /// build 8000` prints a URL on this host (with its token) and carries
    /// its connections to port 8000 in the computer until Ctrl-C or the
    /// computer ends.
    #[command(subcommand)]
    Ports(PortsCommand),
    /// What every computer used (wall time, CPU seconds, peak memory, tool
    /// calls, bytes pushed and pulled, and for a vendor's an estimated
    /// cost), per computer and in total: the provider's running computers
    /// read now, and every other one the receipts journal of --state-dir
    /// keeps.
    Receipts(ReceiptsArgs),
    /// Run the conformance suite against the provider: the contract every
    /// provider must pass. Exits 0 when Core passes, 1 when it fails, 2 on a
    /// usage error, 3 on a partial run (--only).
    Conformance(ConformanceArgs),
}

#[derive(Args, Debug, Default, Clone)]
pub struct ConformanceArgs {
    /// The image every computer of the run starts from. [default: the provider's own]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Run only these groups' cases (comma list: health, exec, files, tar, process, provider, drift, isolation, lifetime, mount, limits, screen, input, browser); a run that leaves a Core case out is partial, never a pass.
    #[arg(long, value_name = "GROUPS", value_delimiter = ',')]
    pub only: Vec<String>,
    /// The root `--kind`, when given: run that setting kind's cases and
    /// give its verdict (sandbox, desktop, phone or browser).
    #[arg(skip)]
    pub kind: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// A computerd built to report another version, for the drift case (`cargo build -p computerd --bin computerd-drift`). [default: computerd-drift beside this binary]
    #[arg(long, value_name = "PATH")]
    pub drifted_computerd: Option<std::path::PathBuf>,
    /// The fixture the screen and input cases use: for a desktop the static computerd-x11-fixture, written into the computer and its log read [default: computerd-x11-fixture beside this binary]; for a phone the APK apps.install-launch installs from the run's shared folder (no default).
    #[arg(long, value_name = "PATH")]
    pub fixture: Option<std::path::PathBuf>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ReceiptsArgs {
    /// Print the receipts and totals as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct SweepArgs {
    /// A run's name (its computers carry it in the label computer-mcp.run): release the run's computers of an epoch below --epoch, keep --epoch's; refused, releasing nothing, when the run has a computer of a higher epoch (a later claim holds it).
    #[arg(long, value_name = "RUN", requires = "epoch")]
    pub run: Option<String>,
    /// The claim epoch of --run (a whole number).
    #[arg(long, value_name = "N", requires = "run")]
    pub epoch: Option<u64>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ComputersCommand {
    /// Every computer of the provider: its handle and name, whose it is
    /// (a hash of the caller), kind, age, deadline, and whether it is kept;
    /// then every snapshot, with its size.
    List,
    /// Release computers or snapshots now, each named by handle, name or provider id. A computer's read-write shares copied in (cloud, Kubernetes) are copied back first, as a server's release does; a refused copy-back keeps the computer, unless --discard-shares.
    Release {
        /// Handles (c-... or s-...), names, or provider ids.
        #[arg(required = true, value_name = "COMPUTER")]
        which: Vec<String>,
        /// Release without copying read-write shares back: what the computer wrote there is lost.
        #[arg(long)]
        discard_shares: bool,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum PortsCommand {
    /// Print a URL for PORT inside COMPUTER and serve it until Ctrl-C.
    Open {
        /// A handle (c-...), name, or provider id.
        #[arg(value_name = "COMPUTER")]
        computer: String,
        /// The TCP port inside the computer, 1 to 65535.
        #[arg(value_name = "PORT")]
        port: u32,
    },
}

#[derive(Args, Debug, Default, Clone)]
pub struct ExecArgs {
    /// The program and its arguments (after --).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGV"
    )]
    pub argv: Vec<String>,
    /// The program's timeout. [default: the exec timeout]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}
