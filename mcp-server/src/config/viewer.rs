//! The viewer's options of `serve`, checked: `--viewer` (a stdio server's
//! loopback address for the viewer), `--viewer-link-ttl` (how long a
//! `computer_view` link works) and `--viewer-origin` (the hosts' pages,
//! besides the viewer's own, that may open its socket). The options themselves are fields of
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

/// `--viewer-origin`: each an exact origin, `http(s)://host[:port]`, with
/// no path and no wildcard (a wildcard would let every page of a domain's
/// tenants open the socket), kept in lower case as browsers send it.
pub(super) fn origins(options: &ServeArgs) -> Result<Vec<String>, String> {
    options
        .viewer_origins
        .iter()
        .filter(|o| !o.trim().is_empty())
        .map(|o| {
            let bad = |why: &str| {
                format!(
                    "--viewer-origin {o:?} is not an origin ({why}): give scheme://host[:port], e.g. https://apps.example.com"
                )
            };
            let o = o.trim().to_ascii_lowercase();
            let Some((scheme, rest)) = o.split_once("://") else {
                return Err(bad("no scheme"));
            };
            // A browser sends no trailing slash.
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            if scheme != "https" && scheme != "http" {
                return Err(bad("its scheme is not http or https"));
            }
            if rest.is_empty() {
                return Err(bad("no host"));
            }
            if let Some(c) = rest.chars().find(|c| !(c.is_ascii_alphanumeric() || "-.:[]".contains(*c))) {
                return Err(bad(&format!("{c:?} has no place in a host and port; no path, no wildcard")));
            }
            Ok(format!("{scheme}://{rest}"))
        })
        .collect()
}
