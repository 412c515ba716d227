//! Fakes for computer-mcp's tests, never registered in the providers'
//! table:
//!
//! - [`provider`]: [`FakeProvider`], a scriptable in-process provider whose
//!   computers answer from a script and which records every call, so a
//!   host (the server's sessions, the conformance suite) is tested with no
//!   root, no namespaces and no Docker.
//! - [`vendor`]: [`vendor::FakeVendor`], fake Browserbase and Kernel APIs
//!   on 127.0.0.1 whose browsers are a real headless Chromium.

pub mod provider;
pub mod vendor;

pub use provider::{
    Breaks, FakeCall, FakeProvider, Op, Script, ok_stdout, proc_status, script_has,
};
