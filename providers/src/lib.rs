//! computer-mcp's providers: who makes, finds and ends computers.
//!
//! - [`types`]: the spec a computer is made from, its ref, a provider's
//!   capabilities, [`ProviderError`], labels and [`check_lifetime`].
//! - [`provider`]: the [`Provider`] trait and [`Connection`].
//! - [`registry`]: [`provider_for`], the one place an id becomes a provider.
//! - [`local`]: computers on this machine, isolated by `computerd sandbox`.
//!
//! A provider never depends on MCP; a tool never knows which provider made
//! its computer. Settings come in as options only: no provider reads the
//! environment.

pub mod local;
pub mod provider;
pub mod registry;
pub mod share;
pub mod types;

pub use provider::{Connection, Provider};
pub use registry::{PROVIDER_IDS, provider_for};
pub use types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
    Sizes, check_labels, check_lifetime, label,
};
