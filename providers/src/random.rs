//! Random names and tokens from the OS's random source, failing closed: a
//! source that cannot be read is an error, never a name of zeros.

use crate::types::{ProviderError, Result};

/// `bytes` random bytes from the OS (getrandom(2)), as lowercase hex.
pub fn random_hex(bytes: usize) -> Result<String> {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).map_err(|e| {
        ProviderError::failed(format!(
            "the OS's random source could not be read ({e}); nothing was made"
        ))
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_hex_of_the_asked_length_and_differ() {
        let a = random_hex(8).unwrap();
        let b = random_hex(8).unwrap();
        assert_eq!(a.len(), 16);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        assert_ne!(a, "0".repeat(16));
    }
}
