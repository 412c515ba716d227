//! The `daytona` provider: a computer of kind sandbox is a Daytona
//! sandbox made through Daytona's v0 REST API, with `computerd` pushed in
//! through the sandbox's toolbox and run as a child of it.
//!
//! - [`api`]: the control plane and a sandbox's toolbox, over the shared
//!   vendor [`Api`](crate::vendor::Api), with Daytona's states read as a
//!   computer's phase.
//! - [`split`]: Daytona's split output (a marker before each line) read
//!   back into stdout and stderr, across frames cut anywhere.
//! - [`bridge`]: `computerd stdio` reached as a [`DaemonClient`]: input
//!   by POST, output from the log WebSocket.
//!
//! [`DaemonClient`]: computerd::client::DaemonClient

pub mod api;
pub mod bridge;
pub mod split;

pub use api::{DEFAULT_API_URL, Daytona, ID, NAME, Phase, Sandbox, Toolbox};
