//! A daemon-backed computer's network is fixed when it is made: a network
//! call may read it back, never change it.

use computerd::protocol::egress::Allowlist;

use crate::types::{NetworkKind, NetworkPolicy, ProviderError, Result};

/// The allowlist `policy` asks for, checked; none for another network.
pub fn allowlist_of(policy: &NetworkPolicy) -> Result<Option<Allowlist>> {
    match policy {
        NetworkPolicy::Allow(entries) => Allowlist::parse(entries)
            .map(Some)
            .map_err(|e| ProviderError::invalid("network", e.to_string())),
        _ => Ok(None),
    }
}

/// Refuse a `policy` other than the network the computer holds (`kind`,
/// and `list` for an allowlist), in words that begin with `fixed` ("a
/// Docker computer's network is fixed when it is made") and end by saying
/// what it is and what to do.
pub fn refuse_change(
    policy: Option<&NetworkPolicy>,
    kind: NetworkKind,
    list: impl FnOnce() -> Vec<String>,
    fixed: &str,
) -> Result<()> {
    let refuse = |is: String| {
        Err(
            ProviderError::unsupported(format!("{fixed} (it is {is}); make another computer"))
                .with_field("network"),
        )
    };
    let Some(policy) = policy else {
        return Ok(());
    };
    if policy.kind() != kind {
        return refuse(kind.to_string());
    }
    if let Some(asked) = allowlist_of(policy)? {
        let held = list();
        if asked.entries() != held {
            return refuse(format!("allow {}", held.join(", ")));
        }
    }
    Ok(())
}

/// Refuse any `policy` but none for a computer (`who`, as "an E2B
/// computer") whose network is none from its making.
pub fn refuse_other_than_none(policy: Option<&NetworkPolicy>, who: &str) -> Result<()> {
    match policy {
        Some(p) if *p != NetworkPolicy::None => Err(ProviderError::unsupported(format!(
            "{who}'s network is fixed at none when it is made"
        ))
        .with_field("network")),
        _ => Ok(()),
    }
}

/// For a none-only vendor's unit tests: `p` takes a ten-minute sandbox,
/// refuses one a millisecond past `max_ms` saying its most (`most`, as
/// "1 h"), and refuses an open network in `who`'s words (as "an E2B
/// computer"). What refuses a sandbox changed by a function, for the
/// vendor's own cases.
#[cfg(test)]
pub(crate) fn none_only_refusals<'a>(
    p: &'a dyn crate::provider::Provider,
    max_ms: u64,
    most: &str,
    who: &str,
) -> impl Fn(&dyn Fn(&mut crate::types::ComputerSpec)) -> ProviderError + 'a {
    let ok = crate::types::ComputerSpec::sandbox(600_000);
    p.check(&ok).unwrap();
    let refused = move |f: &dyn Fn(&mut crate::types::ComputerSpec)| {
        let mut s = ok.clone();
        f(&mut s);
        p.check(&s).unwrap_err()
    };
    let e = refused(&|s| s.lifetime_ms = max_ms + 1);
    let over = format!(
        "lifetime {} ms is over this provider's most, {most}",
        max_ms + 1
    );
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (Some("lifetime"), over.as_str())
    );
    let e = refused(&|s| s.network = NetworkPolicy::Open);
    let none =
        format!("{who}'s network is none: open waits for a proxy out of the daemon's own network");
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (Some("network"), none.as_str())
    );
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_list_is_refused_on_the_network_field() {
        let e = allowlist_of(&NetworkPolicy::Allow(vec!["10.0.0.0/8".into()])).unwrap_err();
        assert_eq!(
            e,
            ProviderError::invalid(
                "network",
                "network allow entry \"10.0.0.0/8\": the range holds private addresses (10.0.0.0/8), which are always refused"
            )
        );
        assert!(allowlist_of(&NetworkPolicy::Open).unwrap().is_none());
    }
}
