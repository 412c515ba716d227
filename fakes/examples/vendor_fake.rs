//! A fake Browserbase or Kernel API on 127.0.0.1, standalone, for a run of
//! the server or the conformance CLI against it:
//!
//! ```text
//! cargo run -p computer-fakes --example vendor_fake -- browserbase
//! ```
//!
//! prints the flags to give (`--browserbase-api-url ... --browserbase-api-key ...`)
//! and serves until interrupted. Needs Debian's chromium.

#![allow(clippy::print_stdout)]

use computer_fakes::vendor::{FakeVendor, Kind};

#[tokio::main]
async fn main() -> Result<(), String> {
    let which = std::env::args().nth(1).unwrap_or_default();
    let kind = match which.as_str() {
        "browserbase" => Kind::Browserbase,
        "kernel" => Kind::Kernel,
        _ => return Err("say which fake: browserbase or kernel".into()),
    };
    let fake = FakeVendor::start(kind).await.map_err(|e| e.message)?;
    println!(
        "--{which}-api-url {} --{which}-api-key {}",
        fake.api_url(),
        fake.key()
    );
    // Ended by ^C or TERM alike, so the fake's Chromium is dropped too.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| e.to_string())?,
        _ = term.recv() => {}
    }
    drop(fake);
    Ok(())
}
