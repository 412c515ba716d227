//! Snapshots for the fleet tools: `computer_snapshot` keeps a caller's
//! computer's files under a name, labelled with whose they are; `computer_new
//! {from}` finds one of the caller's own by name or handle (another
//! caller's reads exactly as one that never existed) and fills the new
//! computer's HOME from it before the model gets its handle.

use std::sync::Arc;

use computer_providers::{Labels, Snapshot, label};
use computer_tools::fleet::{SnapshotSummary, is_snapshot_handle};
use tokio_util::sync::CancellationToken;

use super::{App, Entry, Principal};
use crate::session::words;

/// A snapshot as the model reads it.
pub fn summary(s: &Snapshot) -> SnapshotSummary {
    let l = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
    SnapshotSummary {
        handle: s.id.clone(),
        name: l(label::NAME),
        kind: l(label::KIND),
        path: s.path.clone(),
        keeps: s.kept(),
        size_bytes: s.size(),
        deadline: s.deadline.clone(),
    }
}

impl App {
    /// Keep `entry`'s files as `principal`'s snapshot `name`.
    pub async fn snapshot(
        &self,
        principal: &Principal,
        entry: &Arc<Entry>,
        name: &str,
    ) -> Result<Snapshot, String> {
        if entry.is_paused() {
            return Err(format!(
                "the computer {} is paused (computer_pause); computer_resume it first",
                entry.label()
            ));
        }
        let labels = Labels::from([
            (label::PRINCIPAL.to_string(), principal.0.clone()),
            (label::NAME.to_string(), name.to_string()),
            (label::KIND.to_string(), entry.kind.as_str().to_string()),
            (label::HANDLE.to_string(), entry.handle.clone()),
            (label::INSTANCE.to_string(), self.config.instance.clone()),
        ]);
        let ttl_ms = u64::try_from(self.config.snapshot_ttl.as_millis()).unwrap_or(u64::MAX);
        let cancel = CancellationToken::new();
        let s = self
            .provider
            .snapshot(&entry.computer, &labels, ttl_ms, &cancel)
            .await
            .map_err(|e| words(&e, "snapshotting the computer"))?;
        tracing::info!(
            computer = entry.log_name(),
            snapshot = %s.id,
            bytes = ?s.size(),
            "snapshot kept"
        );
        Ok(s)
    }

    /// `principal`'s snapshot named or handled `from`; another's, or none,
    /// in the same words.
    pub async fn own_snapshot(
        &self,
        principal: &Principal,
        from: &str,
    ) -> Result<Snapshot, String> {
        let mut labels = Labels::from([(label::PRINCIPAL.to_string(), principal.0.clone())]);
        if !is_snapshot_handle(from) {
            labels.insert(label::NAME.to_string(), from.to_string());
        }
        let cancel = CancellationToken::new();
        let all = self
            .provider
            .snapshots(&labels, &cancel)
            .await
            .map_err(|e| words(&e, "listing your snapshots"))?;
        all.into_iter()
            .find(|s| !is_snapshot_handle(from) || s.id == from)
            .ok_or_else(|| {
                format!(
                    "computer_new: from: you have no snapshot {from:?} (computer_snapshot makes one; a snapshot past its deadline is deleted)"
                )
            })
    }

    /// Fill a new computer from `snapshot`; on failure it is released.
    pub async fn fill_from(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        snapshot: &Snapshot,
    ) -> Result<(), String> {
        let cancel = CancellationToken::new();
        let filled = self
            .provider
            .restore(snapshot, &entry.computer, &cancel)
            .await;
        if let Err(e) = filled {
            self.retire_now_release_later(entry, "its fork from a snapshot failed", false);
            return Err(words(&e, "filling the new computer from the snapshot"));
        }
        tracing::info!(computer = entry.log_name(), snapshot = %snapshot.id, "forked from a snapshot");
        Ok(())
    }
}
