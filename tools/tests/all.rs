//! computer-tools' integration tests: each starts a real `computerd init` on
//! a temporary socket and drives the sandbox tools through the registry's
//! sandbox family (`Family::call`) with a `DaemonClient` as the computer.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

mod suite;
