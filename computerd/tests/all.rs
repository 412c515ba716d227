//! computerd's integration tests: each starts a real `computerd init` on a
//! temporary socket and speaks the protocol to it.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

mod suite;
