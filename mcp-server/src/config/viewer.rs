//! The viewer's options of `serve`, checked: `--viewer` (a stdio server's
//! loopback address for the viewer) and `--viewer-link-ttl` (how long a
//! `computer_view` link works). The options themselves are fields of
//! [`ServeArgs`], the one struct that is both serve's flags and the file's
//! `[http]` table (whose refusal of an unknown key names every known one).

use std::net::SocketAddr;
use std::time::Duration;

use super::{ServeArgs, listen_address};

/// `--viewer-link-ttl`'s least and most.
pub const VIEW_LINK_TTL_MIN: Duration = Duration::from_secs(10);
pub const VIEW_LINK_TTL_MAX: Duration = Duration::from_secs(24 * 3600);

/// `--viewer-link-ttl`, within its least and most.
pub(super) fn link_ttl(options: &ServeArgs) -> Result<Duration, String> {
    let ttl = options.viewer_link_ttl;
    if !(VIEW_LINK_TTL_MIN..=VIEW_LINK_TTL_MAX).contains(&ttl) {
        return Err(format!(
            "--viewer-link-ttl {} s is out of range; a link works 10s to 24h",
            ttl.as_secs()
        ));
    }
    Ok(ttl)
}

/// `--viewer`: a loopback address, for a stdio server (over HTTP the
/// viewer is on the HTTP address).
pub(super) fn address(options: &ServeArgs) -> Result<Option<SocketAddr>, String> {
    let Some(text) = options.viewer.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if options.listen.is_some() {
        return Err("--viewer is for a stdio server: over --http the viewer is served at /view on the HTTP address already".into());
    }
    let addr = listen_address(text).map_err(|e| e.replacen("--http", "--viewer", 1))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--viewer {addr} is not a loopback address: the viewer of a stdio server listens on 127.0.0.1 or ::1 only"
        ));
    }
    Ok(Some(addr))
}
