//! Checks of the numbers a request gives, shared by the methods.

use crate::protocol::RpcError;

/// `value` when it is 1 to `max`: 0 is invalid and more is over the limit,
/// either naming `field`.
pub fn one_to(field: &str, value: u64, max: u64) -> Result<u64, RpcError> {
    if value == 0 {
        return Err(RpcError::invalid_field(
            field,
            format!("{field} must be 1 to {max}"),
        ));
    }
    at_most(field, value, max)
}

/// `value` when it is at most `max`, else over the limit naming `field`.
pub fn at_most(field: &str, value: u64, max: u64) -> Result<u64, RpcError> {
    if value > max {
        return Err(RpcError::over_limit(field, value, max));
    }
    Ok(value)
}

/// A start's `queueMs`: 0 when absent, at most [`limits::MAX_QUEUE_MS`].
pub fn queue_ms(value: Option<u64>) -> Result<u64, RpcError> {
    at_most(
        "queueMs",
        value.unwrap_or(0),
        crate::protocol::limits::MAX_QUEUE_MS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorKind;

    #[test]
    fn zero_is_invalid_and_past_the_most_is_over_the_limit_naming_the_field() {
        assert_eq!(one_to("maxBytes", 1, 10).unwrap(), 1);
        assert_eq!(one_to("maxBytes", 10, 10).unwrap(), 10);
        for (value, kind) in [(0, ErrorKind::Invalid), (11, ErrorKind::Limit)] {
            let err = one_to("maxBytes", value, 10).unwrap_err();
            assert_eq!(err.kind(), Some(kind));
            assert_eq!(err.data.and_then(|d| d.field).as_deref(), Some("maxBytes"));
            assert!(err.message.contains("maxBytes"), "{}", err.message);
        }
    }
}
