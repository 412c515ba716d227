//! computer-providers' integration tests, one binary: local computers
//! (root), Docker computers (an engine), browsers (Chromium) and the
//! vendors' fakes. Each test skips in words where this machine lacks what
//! it needs, and fails instead when COMPUTER_MCP_REQUIRE names the need.
//! `limits.rs` is a binary of its own: it moves its whole process into a
//! cgroup it makes.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod suite;
