//! A Chromium inside a computer, driven over its debugging pipe through the
//! computer's daemon (no port opened): how it is started, and the
//! connection that carries it.

use std::path::PathBuf;
use std::sync::Arc;

use computerd::protocol::MachineKind;

use crate::cdp::chromium::{Debugging, Launch, PROFILE};
use crate::provider::Connection;
use crate::types::{ProviderError, Result, SizesReadBack};

/// The proxy a computer with an allowlist reaches its egress by (init's
/// relay on its loopback).
pub const EGRESS_PROXY: &str = "http://127.0.0.1:3128";

/// How the computer's Chromium at `program` starts: headless, or shown on a
/// desktop's screen (`shown`); through the egress relay when the computer
/// has an allowlist.
pub fn launch(program: PathBuf, allowlisted: bool, shown: bool) -> Launch {
    Launch {
        program,
        profile: PROFILE.into(),
        headless: !shown,
        proxy: allowlisted.then(|| EGRESS_PROXY.to_string()),
        debugging: Debugging::Pipe,
    }
}

/// The computer's daemon connection with its browser on it: a browser's
/// started now (it is handed out running), a desktop's when a page tool
/// first needs it (shown on its screen). `computer` names it in words
/// ("the local computer local-…").
pub async fn connect(
    daemon: Connection,
    launch: &Launch,
    desktop: bool,
    bounds: Option<SizesReadBack>,
    computer: &str,
) -> Result<Connection> {
    let client = crate::cdp::BrowserClient::in_computer(
        daemon.client,
        &daemon.hello,
        if desktop {
            daemon.hello.kind
        } else {
            MachineKind::Browser
        },
        launch,
        Default::default(),
    )
    .bounded_by(bounds);
    if !desktop {
        client
            .start()
            .await
            .map_err(|e| ProviderError::new(e.code, format!("{computer}: {}", e.message)))?;
    }
    let hello = client.hello().clone();
    Ok(Connection {
        client: Arc::new(client),
        hello,
    })
}
