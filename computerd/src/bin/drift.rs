//! `computerd-drift`: computerd whose hello reports another version, for
//! the conformance suite's drift case. Built beside computerd; never
//! shipped.

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(computerd::drift::main());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("computerd runs inside Linux computers only");
    std::process::exit(1);
}
