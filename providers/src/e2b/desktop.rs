//! E2B desktops (`--provider e2b --kind desktop`): a sandbox made from a
//! template that has X (E2B's own is `desktop`, whose SDK starts Xvfb in
//! it), with the daemon's init starting the X server itself, as the local
//! desktop does (`computerd init --xvfb /usr/bin/Xvfb --screen WxH`): the
//! X server runs as the daemon's user, on a display it picks, in the
//! daemon's own network namespace, held by init and ended with the
//! computer. Before init starts, the template is asked for its Xvfb, so a
//! template without X is refused in words, not by a daemon that died.

use std::time::Duration;

use crate::daemon_backed::child::ChildHost;
pub use crate::daemon_backed::desktop::{Made, XVFB};
use crate::types::{ProviderError, Result};

/// E2B's own desktop template.
pub const DEFAULT_TEMPLATE: &str = "desktop";
/// How long asking the template for its X server may take.
const CHECK_WITHIN: Duration = Duration::from_secs(20);

/// Refuse a template with no X server before init is started.
pub async fn check_template(made: Made, host: &dyn ChildHost, template: &str) -> Result<()> {
    if made.screen.is_none() {
        return Ok(());
    }
    let argv: Vec<String> = [
        "/bin/sh",
        "-c",
        "[ -x \"$1\" ] && [ -f \"$1\" ]",
        "sh",
        XVFB,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ran = host.run(&argv, CHECK_WITHIN).await?;
    if ran.code == 0 {
        return Ok(());
    }
    Err(ProviderError::unsupported(format!(
        "the E2B template {template} has no X server ({XVFB}): a desktop needs a template with X, such as E2B's {DEFAULT_TEMPLATE} (--e2b-desktop-template)"
    ))
    .with_field("kind"))
}
