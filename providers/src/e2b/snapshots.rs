//! E2B's own snapshots (e2b.dev/docs/sandbox/snapshots): `computer_snapshot`
//! takes E2B's snapshot of the sandbox, its files and memory, kept by E2B
//! as a template; `computer_new {from}` starts the new sandbox from that
//! template ([`ComputerSpec::from`]); a release or the sweep deletes it
//! (`DELETE /templates/{id}`). The record kept beside it, the fork's
//! cleared daemon and the sweep are [`native`]'s, as for Modal. E2B pauses
//! the sandbox a moment while it snapshots, dropping its connections (a
//! call in flight then fails and may be asked again).

use super::*;
use crate::daemon_backed::native::{self, NativeSnapshots};
use crate::snapshot::{Snapshot, SnapshotStore};

/// The label a sandbox started from a snapshot carries: the snapshot's
/// handle, which [`NativeSnapshots::check_forked`] reads.
pub const FROM_LABEL: &str = "computer-mcp.from-snapshot";

impl E2bProvider {
    /// The template a create starts from: the snapshot's, when the spec
    /// forks from one of E2B's.
    pub(super) fn template_of<'a>(&'a self, spec: &'a ComputerSpec) -> &'a str {
        spec.from
            .as_ref()
            .and_then(|s| s.native.as_deref())
            .unwrap_or(&self.template)
    }

    /// Delete each of E2B's snapshots past its record's deadline.
    pub(super) async fn sweep_native(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        native::sweep(self, cancel).await
    }
}

impl NativeSnapshots for E2bProvider {
    const PROVIDER: &'static str = ID;
    const KEEPS: &'static str = "the whole E2B sandbox: its files and memory";

    fn records(&self) -> Option<&SnapshotStore> {
        self.snapshots.as_ref()
    }

    /// `POST /sandboxes/{id}/snapshots`, of a running sandbox only.
    async fn take(
        &self,
        computer: &ComputerRef,
        _ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        if s.state != "running" {
            return Err(ProviderError::refused(format!(
                "E2B sandbox {} is {}: only a running one is snapshotted",
                s.id, s.state
            )));
        }
        self.control.snapshot(&s.id, cancel).await
    }

    async fn delete(&self, native: &str, cancel: &CancellationToken) -> Result<bool> {
        self.control.delete_snapshot(native, cancel).await
    }

    /// The sandbox carries [`FROM_LABEL`] with the snapshot's handle.
    async fn check_forked(
        &self,
        snapshot: &Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let s = self
            .ours(&into.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", into.id)))?;
        match s.metadata.get(FROM_LABEL) {
            Some(from) if *from == snapshot.id => Ok(()),
            other => Err(ProviderError::failed(format!(
                "E2B sandbox {} was not started from snapshot {} (it reads {})",
                s.id,
                snapshot.id,
                other.map_or("no snapshot", String::as_str)
            ))),
        }
    }
}
