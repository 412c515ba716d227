//! Fakes for computer-mcp's tests, never registered in the providers'
//! table:
//!
//! - [`provider`]: [`FakeProvider`], a scriptable in-process provider whose
//!   computers answer from a script and which records every call, so a
//!   host (the server's sessions, the conformance suite) is tested with no
//!   root, no namespaces and no Docker.
//! - [`vendor`]: [`vendor::FakeVendor`], fake Browserbase and Kernel APIs
//!   on 127.0.0.1 whose browsers are a real headless Chromium.
//! - [`daytona`]: [`daytona::FakeDaytona`], a fake Daytona (control plane
//!   and toolbox) whose sandboxes' commands run in a [`daytona::Machine`]
//!   a test gives, with Daytona's lags, cut log frames and 429s on demand.
//! - [`phone_harness`]: [`phone_harness::FakePhoneHarness`], a fake phone
//!   harness REST API whose phones' adb links are what a test points them
//!   at (a fixture phone), with lost answers, 5xx, refusals, slow
//!   readiness and asynchronous delete on demand.
//! - [`e2b`]: [`e2b::FakeE2b`], a fake E2B control plane and envd whose
//!   sandboxes are vendor boxes, with a lagging listing, slow deletes,
//!   429s, lost creates and cut streams on demand.
//! - [`modal`]: [`modal::FakeModal`], a fake Modal control plane and task
//!   command router (gRPC on loopback) whose sandboxes are vendor boxes,
//!   with lagging listings, slow terminates, short-lived JWTs and lost
//!   creates on demand.
//! - [`kubernetes`]: [`kubernetes::FakeKubernetes`], a fake Kubernetes API
//!   server (pods, pods/exec over v5/v4 channel WebSockets,
//!   NetworkPolicy) whose pods' containers are vendor boxes.
//! - [`vendor_box`]: [`vendor_box::VendorBox`], a fake vendor's sandbox (a
//!   bounded Docker container of the test image) that the fake vendors
//!   whose computers run computerd run their commands in.

pub mod daytona;
pub mod e2b;
pub mod kubernetes;
pub mod modal;
pub mod phone_harness;
pub mod provider;
pub mod vendor;
pub mod vendor_box;

pub use provider::{
    Breaks, FakeCall, FakeProvider, Op, Script, ok_stdout, proc_status, script_has,
};

/// A listener on a free port of 127.0.0.1, and the port: where a fake
/// vendor's API serves.
pub async fn bind_local() -> computer_providers::types::Result<(tokio::net::TcpListener, u16)> {
    let failed = |e: std::io::Error| {
        computer_providers::types::ProviderError::new(
            computer_providers::types::ErrorCode::Failed,
            format!("the fake's port: {e}"),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(failed)?;
    let port = listener.local_addr().map_err(failed)?.port();
    Ok((listener, port))
}

/// Serve `app` on `listener` in the background until `stop`.
pub fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
}
