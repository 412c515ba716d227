//! E2B's own snapshots (e2b.dev/docs/sandbox/snapshots): `computer_snapshot`
//! takes E2B's snapshot of the sandbox, its files and memory, kept by E2B
//! as a template; `computer_new {from}` starts the new sandbox from that
//! template ([`ComputerSpec::from`]); a release or the sweep deletes it.
//!
//! E2B's snapshot carries no labels of ours, so beside it this server
//! keeps a record in its snapshot directory (a [`SnapshotStore`] entry with
//! no archive: the labels, the deadline, and E2B's snapshotID as
//! [`Snapshot::native`]). A record older than this (an archive, taken
//! through the daemon's `tar.*`) still forks the server-kept way.
//!
//! The fork's daemon is a new one: the snapshot captured the old init
//! (running, where E2B restores memory) with its pid file and socket, and
//! [`child::clear_captured`] ends it before the new init starts with the
//! fork's own deadline, so the fork keeps the snapshot's files, not its
//! programs. E2B pauses the sandbox a moment while it snapshots, dropping
//! its connections (a call in flight then fails and may be asked again).

use super::*;
use crate::snapshot::{Snapshot, SnapshotStore};

/// The label a sandbox started from a snapshot carries: the snapshot's
/// handle, which [`E2bProvider::restore_native`] checks.
pub const FROM_LABEL: &str = "computer-mcp.from-snapshot";

impl E2bProvider {
    fn store(&self) -> Result<&SnapshotStore> {
        self.snapshots.as_ref().ok_or_else(|| {
            ProviderError::unsupported(
                "the e2b provider keeps its snapshots' labels in the server's state directory: give --state-dir",
            )
        })
    }

    /// The template a create starts from: the snapshot's, when the spec
    /// forks from one of E2B's.
    pub(super) fn template_of<'a>(&'a self, spec: &'a ComputerSpec) -> &'a str {
        spec.from
            .as_ref()
            .and_then(|s| s.native.as_deref())
            .unwrap_or(&self.template)
    }

    /// E2B's snapshot of `computer`, with a record of `labels` here.
    pub(super) async fn take_native(
        &self,
        computer: &ComputerRef,
        labels: &Labels,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Snapshot> {
        let store = self.store()?;
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
        let home = computer.home.as_deref().unwrap_or(child::HOME);
        let kept = store
            .keep_native(home, labels.clone(), ttl_ms, || {
                self.control.snapshot(&s.id, cancel)
            })
            .await;
        match kept {
            Ok(k) => Ok(k),
            Err((e, native)) => {
                if let Some(n) = native {
                    let _ = self
                        .control
                        .delete_snapshot(&n, &CancellationToken::new())
                        .await;
                }
                Err(e)
            }
        }
    }

    /// A fork from one of E2B's snapshots was made from it at create:
    /// check that `into` was; a server-kept archive is pushed in.
    pub(super) async fn restore_native(
        &self,
        snapshot: &Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let store = self.store()?;
        if snapshot.native.is_none() {
            return store.fork(self, snapshot, into, cancel).await;
        }
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

    /// Delete E2B's snapshot, then its record.
    pub(super) async fn release_native(
        &self,
        snapshot: &Snapshot,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let store = self.store()?;
        if let Some(n) = &snapshot.native
            && !self.control.delete_snapshot(n, cancel).await?
        {
            tracing::info!(snapshot = %snapshot.id, "E2B had already deleted the snapshot");
        }
        store.release(&snapshot.id)
    }

    /// Delete each of E2B's snapshots past its record's deadline (the
    /// server-kept archives are swept with the rest); their handles.
    pub(super) async fn sweep_native(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let Some(store) = self.snapshots.as_ref() else {
            return Ok(Vec::new());
        };
        let now = computerd::now_ms();
        let mut gone = Vec::new();
        for s in store.list(&Labels::new())? {
            if s.native.is_some() && s.expired(now) {
                self.release_native(&s, cancel).await?;
                tracing::info!(snapshot = %s.id, deadline = %s.deadline, "the sweep deleted an E2B snapshot past its deadline");
                gone.push(s.id);
            }
        }
        Ok(gone)
    }
}
