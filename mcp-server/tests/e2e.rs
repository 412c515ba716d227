//! End to end: the real `computer-mcp` binary driven by rmcp's client over
//! stdio and over streamable HTTP, making real local computers.

#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    dead_code
)]

mod suite;
