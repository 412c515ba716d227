//! `computerd`: the daemon inside every computer, its wire protocol and its client.
//!
//! - [`protocol`] (every platform): the method table ([`protocol::Method`]),
//!   params and results, the error object and its kinds, machine kinds and
//!   capability groups, and every limit. The daemon and every client share it.
//! - [`launch`] (every platform): the launch contract, computerd's command
//!   line as types (`init`, `sandbox`, `stdio`, `probe`), rendered by every
//!   launcher and parsed by the daemon.
//! - [`client`] (every platform): [`client::DaemonClient`], JSON-RPC over any
//!   byte stream, with many calls in flight, cancel on drop, and helpers that
//!   page files, tar archives and process output.
//! - [`net`] (every unix): this host's interface addresses, for the
//!   egress proxy and the providers that run one.
//! - [`now_ms`]: the protocol's timestamps, milliseconds since the epoch.
//! - `daemon` (Linux only): `init` and its socket, the `stdio` bridge, the per-run
//!   `guard`, the `sandbox`, the `probe`, and the exec, process, files and tar
//!   methods.
//! - [`display_as_str!`]: `Display` for the enums that name themselves.

/// `Display` for types that name themselves with `as_str` (a word of the
/// wire or of a command line), so what is printed is what is sent.
#[macro_export]
macro_rules! display_as_str {
    ($($t:ty),+ $(,)?) => {$(
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )+};
}

pub mod client;
pub mod launch;
#[cfg(unix)]
pub mod net;
pub mod protocol;
#[cfg(unix)]
pub mod quiet;

#[cfg(target_os = "linux")]
pub mod daemon;
#[cfg(all(test, target_os = "linux"))]
mod fuzz_tests;

/// Milliseconds since the epoch, now (0 on a clock before it): the
/// protocol's timestamps (`startedAt`, an event's `at`).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The daemon's version, reported by hello.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version hello reports: [`VERSION`], except in the drift build
/// (the `computerd-drift` binary, for tests), which reports another so the
/// conformance suite can see a provider refuse it.
pub fn reported_version() -> String {
    if drift::DRIFTED.load(std::sync::atomic::Ordering::Relaxed) {
        return format!("{VERSION}-drift");
    }
    VERSION.to_string()
}

/// The drift build's switch, set once by `computerd-drift`'s main and by
/// nothing else: the `computerd` binary (and the server, which is computerd
/// too) has no flag, variable or method that sets it.
pub mod drift {
    pub static DRIFTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// Run computerd as the drift build: every hello of this process
    /// reports another version.
    #[cfg(target_os = "linux")]
    pub fn main() -> i32 {
        DRIFTED.store(true, std::sync::atomic::Ordering::Relaxed);
        crate::daemon::cli::main()
    }
}

/// Where init listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/computerd/computerd.sock";

/// The variable the bridge (`computerd stdio`) reads for the socket's path.
pub const SOCKET_ENV: &str = "COMPUTERD_SOCKET";

/// Where a provider puts the daemon inside a computer.
pub const DAEMON_PATH: &str = "/opt/computerd/computerd";
