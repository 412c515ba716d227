//! The `computerd` binary: `init`, `stdio`, `probe` and the per-run `guard`.

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(computerd::daemon::cli::main());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!(
        "computerd runs inside Linux computers only; this platform gets the library (protocol and client)"
    );
    std::process::exit(1);
}
