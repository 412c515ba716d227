//! The sweep of a vendor whose computers are found by our labels (E2B,
//! Daytona): every computer the provider lists (its listing is ours only,
//! by the `computer-mcp.computer` label) whose deadline has passed, or
//! whose deadline no computer of ours could carry (unreadable), is deleted
//! and waited gone through the provider's own release. A vendor's own
//! timer (E2B's end, Daytona's TTL) ends most of them first; the sweep is
//! for those it left (a stopped one kept, a clock that drifted, a TTL
//! rounded up to the minute). The snapshots the server keeps for the
//! provider ([`crate::snapshot::SnapshotStore`]) past their own deadline
//! are deleted with them.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::provider::Provider;
use crate::types::{ComputerRef, Labels, ProviderError, Release, Result};

/// Whether a listed computer is one the sweep deletes at `now`: its
/// deadline passed, or not an RFC 3339 time.
pub fn expired(c: &ComputerRef, now: OffsetDateTime) -> bool {
    OffsetDateTime::parse(&c.deadline, &Rfc3339).map_or(true, |d| d <= now)
}

/// Delete `provider`'s computers past their deadline; the ids deleted.
/// Every one is tried; any failure makes the whole an error naming each
/// left and what was deleted.
pub async fn sweep(provider: &dyn Provider, cancel: &CancellationToken) -> Result<Vec<String>> {
    let now = OffsetDateTime::now_utc();
    let mut deleted = Vec::new();
    let mut failed = Vec::new();
    for c in provider.list(&Labels::new(), cancel).await? {
        if cancel.is_cancelled() {
            return Err(super::aborted("the sweep"));
        }
        if !expired(&c, now) {
            continue;
        }
        match provider.release(&c, Release::Delete, cancel).await {
            Ok(()) => {
                tracing::info!(id = %c.id, deadline = %c.deadline, "the sweep deleted a computer past its deadline");
                deleted.push(c.id);
            }
            Err(e) => failed.push(format!("{}: {}", c.id, e.message)),
        }
    }
    // The snapshots the server keeps for it, past their own deadline.
    match crate::snapshot::sweep_of(provider) {
        Ok(gone) => deleted.extend(gone),
        Err(e) => failed.push(format!("snapshots: {}", e.message)),
    }
    if !failed.is_empty() {
        return Err(ProviderError::failed(format!(
            "the {} sweep could not delete {} (it deleted {:?})",
            provider.id(),
            failed.join("; "),
            deleted
        )));
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(deadline: &str) -> ComputerRef {
        ComputerRef {
            deadline: deadline.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_passed_or_unreadable_deadline_is_expired_and_a_later_one_is_not() {
        let now = OffsetDateTime::parse("2026-01-02T03:04:05Z", &Rfc3339).unwrap();
        assert!(expired(&at("2026-01-02T03:04:05Z"), now));
        assert!(expired(&at("2026-01-01T00:00:00+01:00"), now));
        assert!(expired(&at(""), now));
        assert!(expired(&at("tomorrow"), now));
        assert!(!expired(&at("2026-01-02T03:04:06Z"), now));
    }
}
