//! Modal's own filesystem snapshots ([`native`]): `computer_snapshot`
//! asks the sandbox's command router for TaskSnapshotFilesystem, which
//! turns the whole filesystem (no memory, no programs) into an image
//! `im-…` ([`Router::snapshot_fs`]; its Modal-side end is the snapshot's
//! deadline); `computer_new {from}` is a SandboxCreate with that image
//! as the definition's `image_id` (js/src/sandbox.ts `snapshotFilesystem`:
//! "an Image ... which can be used to spawn a new Sandbox with the same
//! filesystem"); a release or the sweep deletes the image with ImageDelete
//! (api.proto:4823, go/image.go `Delete`). Sources: modal-labs/
//! modal-client@69519aef `modal_proto/api.proto`,
//! `modal_proto/task_command_router.proto:338-357,414`, and the SDKs named.
//!
//! The image holds the old daemon's pid file and socket (no running
//! init: Modal keeps no memory here); the fork clears them with
//! [`child::clear_captured`] before its own init starts. A sandbox that has
//! ended has no task, so Modal refuses its snapshot (SandboxGetTaskId
//! answers its end, not a task), as this provider does before asking.

use super::*;
use crate::daemon_backed::native::{self, NativeSnapshots};
use crate::snapshot::{Snapshot, SnapshotStore};

impl ModalProvider {
    /// The image a create starts from: the snapshot's, when the spec
    /// forks from one of Modal's; else the registry image, built once.
    pub(super) async fn image_of(&self, app: &str, spec: &ComputerSpec) -> Result<String> {
        match spec.from.as_ref().and_then(|s| s.native.clone()) {
            Some(im) => Ok(im),
            None => {
                let image = spec.image.as_deref().unwrap_or(&self.image);
                self.image_id(app, image).await
            }
        }
    }

    /// Delete each of Modal's snapshot images past its record's deadline.
    pub(super) async fn sweep_native(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        native::sweep(self, cancel).await
    }
}

impl NativeSnapshots for ModalProvider {
    const PROVIDER: &'static str = ID;
    const KEEPS: &'static str = "the Modal sandbox's whole filesystem (not its memory)";

    fn records(&self) -> Option<&SnapshotStore> {
        self.snapshots.as_ref()
    }

    async fn take(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        _cancel: &CancellationToken,
    ) -> Result<String> {
        self.find(&computer.id).await?.ok_or_else(|| {
            ProviderError::gone(format!(
                "Modal sandbox {} has ended: only a running one is snapshotted",
                computer.id
            ))
        })?;
        let router = self.router(&computer.id).await?;
        let ttl_s = i64::try_from(ttl_ms.div_ceil(1000)).unwrap_or(i64::MAX);
        router.snapshot_fs(ttl_s).await
    }

    async fn delete(&self, native: &str, _cancel: &CancellationToken) -> Result<bool> {
        self.control.image_delete(native).await
    }

    /// The running sandbox's image is the snapshot's.
    async fn check_forked(
        &self,
        snapshot: &Snapshot,
        into: &ComputerRef,
        _cancel: &CancellationToken,
    ) -> Result<()> {
        let s = self
            .find(&into.id)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("Modal sandbox {} has ended", into.id)))?;
        if Some(&s.image_id) == snapshot.native.as_ref() {
            Ok(())
        } else {
            Err(ProviderError::failed(format!(
                "Modal sandbox {} was not made from snapshot {} (its image is {}, not {})",
                s.id,
                snapshot.id,
                s.image_id,
                snapshot.native.as_deref().unwrap_or_default()
            )))
        }
    }
}
