//! Key names as models send them, and the CDP key events each press is:
//! the protocol's table ([`computerd::protocol::cdp_keys`], which a
//! viewer's keys on a browser with no X display use too), its words as
//! tool errors.

pub use computerd::protocol::cdp_keys::{MAX_PRESSES, Press};

use crate::error::{Result, ToolError};

/// Every press of `text` (see [`computerd::protocol::cdp_keys::parse`]).
pub fn parse(field: &str, text: &str) -> Result<Vec<Press>> {
    computerd::protocol::cdp_keys::parse(field, text).map_err(ToolError::Invalid)
}

/// The CDP modifier bits of `text`, modifier names joined by `+`.
pub fn modifier_bits(field: &str, text: &str) -> Result<u32> {
    computerd::protocol::cdp_keys::modifier_bits(field, text).map_err(ToolError::Invalid)
}
