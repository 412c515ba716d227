//! The viewer as an MCP App (the MCP Apps extension, SEP-1865): the same
//! page as `/view/<handle>`, offered as the resource `ui://computer-mcp/view`
//! (`text/html;profile=mcp-app`) and named by the screenshot tools'
//! `_meta.ui.resourceUri`, so a host that renders apps shows the live
//! screen next to a screenshot's result.
//!
//! In a host the page has no link in its address: it reads the link from
//! the tool result the host hands it (`ui/notifications/tool-result`),
//! where a screenshot's result carries one in its `_meta` (under
//! [`META_LINK`]) for a client that declared the extension. Frames and
//! input then go between the page and the viewer's socket, never through
//! the model's context.

use rmcp::model::{MetaObject, Resource, ResourceContents};
use rmcp::{Peer, RoleServer};
use serde_json::json;

use super::Views;

pub use computer_tools::fleet::{APP_SHOWN_BY as SHOWN_BY, APP_URI, tie_app as tie};

/// Its MIME type, as the extension names an app's HTML.
pub const APP_MIME: &str = "text/html;profile=mcp-app";
/// The extension's name among a client's capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// Where a screenshot's result carries the app's link.
pub const META_LINK: &str = "computer-mcp/view";

/// The resource as listed.
pub fn resource() -> Resource {
    Resource::new(APP_URI, "computer-mcp viewer")
        .with_title("Live screen")
        .with_description(
            "The computer's screen live, with Take control: an MCP App shown with screenshot results",
        )
        .with_mime_type(APP_MIME)
}

/// The resource's contents: the viewer's page, and where it may connect
/// (the viewer's address, for the host's Content-Security-Policy).
pub fn contents(views: &Views) -> ResourceContents {
    let base = views.base.get().cloned().unwrap_or_default();
    let ws = base.replacen("http://", "ws://", 1);
    let mut meta = MetaObject::default();
    meta.0.insert(
        "ui".into(),
        json!({"csp": {"connectDomains": [base, ws]}, "prefersBorder": true}),
    );
    ResourceContents::TextResourceContents {
        uri: APP_URI.to_string(),
        mime_type: Some(APP_MIME.into()),
        text: super::PAGE.to_string(),
        meta: Some(meta),
    }
}

/// Whether the client renders apps (declared the extension).
pub fn client_renders_apps(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info().is_some_and(|i| {
        i.capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(EXTENSION))
    })
}
