//! How many computers a server holds, for how long unused, and the
//! viewer's links: serve's `--session-idle`, `--max-computers`,
//! `--max-server-computers` and the viewer's options, checked.

use std::time::Duration;

use super::{ServeArgs, viewer};

/// How many computers a server holds, for how long unused, and how long
/// a viewer's link works: serve's options, with their defaults for the
/// other commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetLimits {
    pub idle: Duration,
    pub max_computers: usize,
    pub max_server_computers: usize,
    pub view_link_ttl: Duration,
    /// `--viewer-origin`: the Origins besides its own page's the viewer's
    /// socket takes.
    pub view_origins: Vec<String>,
}

impl Default for FleetLimits {
    fn default() -> Self {
        FleetLimits {
            idle: Duration::from_secs(30 * 60),
            max_computers: 4,
            max_server_computers: 16,
            view_link_ttl: crate::view::grants::LINK_TTL,
            view_origins: Vec::new(),
        }
    }
}

/// serve's fleet options, checked: at least one computer a caller and a
/// server, a caller's most within the server's, the viewer's checks.
pub(super) fn limits(options: &ServeArgs) -> Result<FleetLimits, String> {
    if options.max_computers == 0 || options.max_server_computers == 0 {
        return Err("--max-computers and --max-server-computers must be at least 1".into());
    }
    if options.max_computers > options.max_server_computers {
        return Err(format!(
            "--max-computers ({}) is over --max-server-computers ({})",
            options.max_computers, options.max_server_computers
        ));
    }
    Ok(FleetLimits {
        idle: options.session_idle,
        max_computers: options.max_computers,
        max_server_computers: options.max_server_computers,
        view_link_ttl: viewer::link_ttl(options)?,
        view_origins: viewer::origins(options)?,
    })
}
