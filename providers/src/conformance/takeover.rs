//! A takeover by label: a host that starts again (a new epoch of one run)
//! releases the computers its older epochs left, and an older epoch that
//! comes back after a newer one is fenced. Stateless: the epochs are read
//! from the computers' labels, so any host over the same provider agrees.

use tokio_util::sync::CancellationToken;

use crate::provider::Provider;
use crate::types::{Labels, ProviderError, Release, Result};

/// The label naming the run (the host) a computer belongs to.
pub const RUN: &str = "computer-mcp.run";
/// The label naming the run's epoch that made it (a whole number).
pub const EPOCH: &str = "computer-mcp.epoch";

/// Release (delete) every computer of `run` whose epoch is below `epoch`,
/// among those carrying `scope` too; returns their ids. Refused as fenced,
/// deleting nothing, when a computer of the run carries a later epoch. A
/// computer whose epoch label is not a number is left alone.
pub async fn release_older(
    provider: &dyn Provider,
    scope: &Labels,
    run: &str,
    epoch: u64,
    cancel: &CancellationToken,
) -> Result<Vec<String>> {
    let mut labels = scope.clone();
    labels.insert(RUN.into(), run.into());
    let found = provider.list(&labels, cancel).await?;
    let with_epoch: Vec<(u64, &crate::types::ComputerRef)> = found
        .iter()
        .filter_map(|c| Some((c.labels.get(EPOCH)?.parse().ok()?, c)))
        .collect();
    if let Some((newer, c)) = with_epoch.iter().find(|(e, _)| *e > epoch) {
        return Err(ProviderError::refused(format!(
            "fenced: epoch {epoch} of run {run} is older than epoch {newer} (computer {}), which took over; nothing was released",
            c.id
        )));
    }
    let mut released = Vec::new();
    for (_, c) in with_epoch.iter().filter(|(e, _)| *e < epoch) {
        provider.release(c, Release::Delete, cancel).await?;
        released.push(c.id.clone());
    }
    released.sort();
    Ok(released)
}
