//! Labels between a computer and its [`crate::ComputerRef`]: which
//! computers carry the labels a list or an attach asks for, and the one an
//! attach by labels finds.

use crate::types::{Labels, ProviderError, Result};

/// Whether a computer whose label `k` reads `held(k)` carries every one of
/// `wanted`.
pub fn carries<'a>(wanted: &Labels, held: impl Fn(&str) -> Option<&'a str>) -> bool {
    wanted.iter().all(|(k, v)| held(k) == Some(v.as_str()))
}

/// The one computer an attach by labels found: not found with `none` when
/// there is none, refused on the labels field with `many(n)` when there
/// are `n`.
pub fn the_one<T>(mut found: Vec<T>, none: &str, many: impl FnOnce(usize) -> String) -> Result<T> {
    match found.len() {
        0 => Err(ProviderError::not_found(none)),
        1 => Ok(found.remove(0)),
        n => Err(ProviderError::invalid("labels", many(n))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computer_carries_every_label_asked_for_and_an_attach_finds_one() {
        let held = Labels::from([("a".into(), "1".into()), ("b".into(), "2".into())]);
        let read = |k: &str| held.get(k).map(String::as_str);
        assert!(carries(&Labels::new(), read));
        assert!(carries(&Labels::from([("a".into(), "1".into())]), read));
        assert!(!carries(&Labels::from([("a".into(), "2".into())]), read));
        assert!(!carries(&Labels::from([("c".into(), "1".into())]), read));
        let many = |n| format!("{n} match");
        assert_eq!(the_one(vec![7], "none", many), Ok(7));
        assert_eq!(
            the_one(Vec::<u8>::new(), "none", many),
            Err(ProviderError::not_found("none"))
        );
        assert_eq!(
            the_one(vec![1, 2], "none", many),
            Err(ProviderError::invalid("labels", "2 match"))
        );
    }
}
