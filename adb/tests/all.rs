//! The adb client's tests: against scripted fake servers (anywhere), and
//! against Debian's real adb server on a port of each test's own (where
//! `adb` is installed; `COMPUTER_MCP_REQUIRE=adb` makes its absence a
//! failure).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
