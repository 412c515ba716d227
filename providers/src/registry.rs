//! The registry: the one place a provider id becomes a provider.

use crate::provider::Provider;
use crate::types::{ErrorCode, ProviderError, Result};

/// Every id the registry holds.
pub const PROVIDER_IDS: &[&str] = &["local"];

/// Build a provider from its id and its options (a JSON object whose shape
/// each provider owns). An unknown id is refused, naming the known ones.
pub fn provider_for(id: &str, options: serde_json::Value) -> Result<Box<dyn Provider>> {
    match id {
        "local" => Ok(Box::new(crate::local::LocalProvider::from_options(
            options,
        )?)),
        other => Err(ProviderError::new(
            ErrorCode::Invalid,
            format!(
                "no provider {other:?}; the providers are: {}",
                PROVIDER_IDS.join(", ")
            ),
        )
        .with_field("provider")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_id_is_refused_naming_the_known_ones() {
        let e = provider_for("fly", serde_json::json!({})).err().unwrap();
        assert_eq!(e.message, "no provider \"fly\"; the providers are: local");
        assert_eq!(e.field.as_deref(), Some("provider"));
    }
}
