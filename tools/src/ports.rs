//! Preview ports: `port_open`, `port_list` and `port_close`, listed as one
//! tool `port`. A port is a TCP port on the computer's own loopback; the
//! server gives it a URL on its host ([`PortHost`], one per computer) whose
//! bytes ride the computer's daemon connection, so a computer with network
//! `none` serves a preview and gains no route out.

use std::sync::Arc;

use computerd::client::ComputerExt;
use computerd::protocol::{PortCloseParams, PortConnectParams};
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContext;
use crate::define::{done, hints, listing};
use crate::error::{Result, ToolError};
use crate::registry::{Needs, ToolDef, ToolSet, handler};
use crate::together::{Members, Together};

/// A port with a URL: what port_open gives and port_list lists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenPort {
    /// The port inside the computer.
    pub port: u16,
    /// Where it is reached from the server's host (it holds the port's token).
    pub url: String,
}

/// The server's previews of one computer's ports: each a listener of the
/// server's that carries every connection it takes to the port, ended with
/// the computer.
pub trait PortHost: Send + Sync {
    /// A URL for `port` (the one already open, if it is); refused in words
    /// when the computer has as many open as the server allows.
    fn open(&self, port: u16) -> std::result::Result<OpenPort, String>;
    /// The open ports, by port.
    fn list(&self) -> Vec<OpenPort>;
    /// Close `port`'s URL; false when it was not open.
    fn close(&self, port: u16) -> bool;
}

/// The port tools, in listed order.
#[rustfmt::skip]
pub const TOOLS: ToolSet = ToolSet {
    name: "ports",
    tools: &[
        ToolDef::new("port_open",  PORTS, open_tool,  handler!(open)),
        ToolDef::new("port_list",  PORTS, list_tool,  handler!(list)),
        ToolDef::new("port_close", PORTS, close_tool, handler!(close)),
    ],
    aliases: &[],
};

/// A port is reached through the daemon, which runs programs: a computer
/// with processes has one.
const PORTS: Needs = Needs::Group(computerd::protocol::Group::Processes);

/// The port tools listed as one, `port` (action open, list, close).
pub const TOGETHER: Together = Together {
    name: "port",
    title: "Preview ports",
    lead: "A URL on the server's host for a TCP server on 127.0.0.1 in this computer (HTTP, WebSockets; network none is fine).",
    members: Members::Named(&["port_open", "port_list", "port_close"]),
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PortArgs {
    /// The TCP port inside the computer, 1 to 65535.
    pub port: u32,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PortListArgs {}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PortListOutput {
    pub ports: Vec<OpenPort>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PortCloseOutput {
    pub port: u16,
    /// False when it was not open.
    pub closed: bool,
}

listing!(
    fn open_tool(_): PortArgs => OpenPort,
    "Open a URL to the port, until closed or the computer ends. \
The URL is on the MCP server's host and holds the port's token; HTTP and WebSockets pass, network none is fine.",
    hints("Open a preview port", false, false, true, false)
);

listing!(
    fn list_tool(_): PortListArgs => PortListOutput,
    "The open ports and their URLs. \
Each URL reaches a TCP port on the computer's own loopback until port_close or the computer ends.",
    hints("List preview ports", true, false, true, false)
);

listing!(
    fn close_tool(_): PortArgs => PortCloseOutput,
    "Close a port's URL. \
Its listener on the server's host ends, and so do the connections through it; the server inside runs on.",
    hints("Close a preview port", false, true, true, false)
);

/// `port` when it is 1 to 65535, else refused naming the field.
fn check_port(port: u32) -> Result<u16> {
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(ToolError::Invalid(format!(
            "port must be 1 to 65535, got {port}"
        ))),
    }
}

fn host(ctx: &ToolContext) -> Result<&Arc<dyn PortHost>> {
    ctx.ports.as_ref().ok_or_else(|| {
        ToolError::Invalid("this server gives no preview ports for this computer".into())
    })
}

async fn open(ctx: &ToolContext, a: PortArgs) -> Result<CallToolResult> {
    let port = check_port(a.port)?;
    let opened = host(ctx)?.open(port).map_err(ToolError::Refused)?;
    // Said now, so the model need not load the URL to learn it: the URL
    // works whenever something listens.
    let tried = ctx
        .client
        .call_typed(&PortConnectParams {
            port: u32::from(port),
        })
        .await;
    let listening = match tried {
        Ok(conn) => {
            let _ = ctx
                .client
                .call_typed(&PortCloseParams { id: conn.id })
                .await;
            String::new()
        }
        Err(e) if computerd::client::nothing_listens(&e) => format!(
            " Nothing listens on port {port} inside the computer yet: the URL answers once a server listens on 127.0.0.1:{port} or 0.0.0.0:{port}."
        ),
        Err(e) => format!(" Port {port} could not be tried: {e}."),
    };
    let text = format!(
        "port {port} inside the computer is at {} (HTTP and WebSockets; the URL holds the port's token, and works until port_close or the computer ends).{listening}",
        opened.url
    );
    Ok(done(text, &opened))
}

async fn list(ctx: &ToolContext, _a: PortListArgs) -> Result<CallToolResult> {
    let ports = host(ctx)?.list();
    let text = if ports.is_empty() {
        "no ports are open; port_open gives one a URL".to_string()
    } else {
        ports
            .iter()
            .map(|p| format!("port {}: {}", p.port, p.url))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(done(text, &PortListOutput { ports }))
}

async fn close(ctx: &ToolContext, a: PortArgs) -> Result<CallToolResult> {
    let port = check_port(a.port)?;
    let closed = host(ctx)?.close(port);
    let text = if closed {
        format!("port {port}'s URL is closed; connections through it end")
    } else {
        format!("port {port} was not open; nothing was done")
    };
    Ok(done(text, &PortCloseOutput { port, closed }))
}
