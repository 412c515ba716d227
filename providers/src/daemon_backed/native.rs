//! A vendor's own snapshots (E2B's of files and memory, Modal's of the
//! filesystem), the same way for each: `computer_snapshot` asks the vendor
//! for one and keeps a record beside it in the provider's
//! [`SnapshotStore`] (the labels, the deadline, the vendor's id as
//! [`Snapshot::native`], no archive); `computer_new {from}` creates the
//! new sandbox from it ([`crate::types::ComputerSpec::from`]) and
//! [`restore`] only checks that it was; a release or the sweep deletes
//! the vendor's snapshot, then the record. A record with no vendor id (an
//! archive, taken through the daemon's `tar.*`) still forks the
//! server-kept way.
//!
//! The fork's daemon is a new one: the vendor's snapshot holds the old
//! init's pid file and socket (and, where it keeps memory, the running
//! init), which [`super::child::clear_captured`] clears before the fork's
//! own init starts.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::snapshot::{Snapshot, SnapshotStore};
use crate::types::{ComputerRef, Labels, ProviderError, Result};

/// A vendor whose snapshots are its own.
pub trait NativeSnapshots: Sync {
    /// The provider's id ("e2b").
    const PROVIDER: &'static str;
    /// What its snapshot keeps, in the words `computer_snapshot` answers
    /// ("the whole sandbox: its files and memory").
    const KEEPS: &'static str;

    /// The records' store, when the server has a state directory.
    fn records(&self) -> Option<&SnapshotStore>;

    /// Take the vendor's snapshot of the running `computer`, kept at
    /// least `ttl_ms`: its id.
    fn take(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<String>> + Send;

    /// Delete the vendor's snapshot `native`: false when the vendor had
    /// none such.
    fn delete(
        &self,
        native: &str,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Check that `into` was made from `snapshot` (a native one).
    fn check_forked(
        &self,
        snapshot: &Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<()>> + Send;
}

fn store<V: NativeSnapshots>(v: &V) -> Result<&SnapshotStore> {
    v.records().ok_or_else(|| {
        ProviderError::unsupported(format!(
            "the {} provider keeps its snapshots' labels in the server's state directory: give --state-dir",
            V::PROVIDER
        ))
    })
}

/// The vendor's snapshot of `computer`, with a record of `labels` here,
/// deleted by the sweep `ttl_ms` from now. A taken name is refused before
/// the vendor is asked; a record that cannot be written deletes the
/// vendor's snapshot again.
pub async fn take<V: NativeSnapshots>(
    v: &V,
    computer: &ComputerRef,
    labels: &Labels,
    ttl_ms: u64,
    cancel: &CancellationToken,
) -> Result<Snapshot> {
    let store = store(v)?;
    let home = computer.home.as_deref().unwrap_or(super::child::HOME);
    let kept = store
        .keep_native(home, V::KEEPS, labels.clone(), ttl_ms, || {
            v.take(computer, ttl_ms, cancel)
        })
        .await;
    match kept {
        Ok(k) => Ok(k),
        Err((e, native)) => {
            if let Some(n) = native {
                let _ = v.delete(&n, &CancellationToken::new()).await;
            }
            Err(e)
        }
    }
}

/// A fork from a vendor's snapshot was made from it at create: check that
/// `into` was; a server-kept archive is pushed in.
pub async fn restore<V: NativeSnapshots + crate::provider::Provider>(
    v: &V,
    snapshot: &Snapshot,
    into: &ComputerRef,
    cancel: &CancellationToken,
) -> Result<()> {
    let store = store(v)?;
    if snapshot.native.is_none() {
        return store.fork(v, snapshot, into, cancel).await;
    }
    v.check_forked(snapshot, into, cancel).await
}

/// Delete the vendor's snapshot, then its record.
pub async fn release<V: NativeSnapshots>(
    v: &V,
    snapshot: &Snapshot,
    cancel: &CancellationToken,
) -> Result<()> {
    let store = store(v)?;
    if let Some(n) = &snapshot.native
        && !v.delete(n, cancel).await?
    {
        tracing::info!(provider = V::PROVIDER, snapshot = %snapshot.id, "the vendor had already deleted the snapshot");
    }
    store.release(&snapshot.id)
}

/// Delete each of the vendor's snapshots past its record's deadline (the
/// server-kept archives are swept with the rest); their handles.
pub async fn sweep<V: NativeSnapshots>(v: &V, cancel: &CancellationToken) -> Result<Vec<String>> {
    let Some(store) = v.records() else {
        return Ok(Vec::new());
    };
    let now = computerd::now_ms();
    let mut gone = Vec::new();
    for s in store.list(&Labels::new())? {
        if s.native.is_some() && s.expired(now) {
            release(v, &s, cancel).await?;
            tracing::info!(provider = V::PROVIDER, snapshot = %s.id, deadline = %s.deadline, "the sweep deleted a vendor's snapshot past its deadline");
            gone.push(s.id);
        }
    }
    Ok(gone)
}
