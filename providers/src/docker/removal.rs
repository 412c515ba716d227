//! Removing a computer and its parts (an allowlist's proxy and socket
//! volume), owned: the engine and its socket's name, so a create dropped
//! part-way can still have it done after its future is gone ([`Unmade`]).

use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{InspectContainerOptions, RemoveContainerOptionsBuilder};
use tokio_util::sync::CancellationToken;

use super::{REMOVE_WAIT, host};
use crate::types::{ProviderError, Result};

/// What removes a computer, and its proxy and volume, by its name.
#[derive(Clone)]
pub(super) struct Removal {
    pub(super) docker: Docker,
    /// The engine's socket as words show it (`unix://…`).
    pub(super) socket: String,
    /// The provider's cache, where a computer's direct directory is.
    pub(super) cache: std::path::PathBuf,
}

impl Removal {
    pub(super) fn err(&self, doing: &str) -> impl Fn(bollard::errors::Error) -> ProviderError + '_ {
        let doing = doing.to_string();
        move |e| host::docker_error(&self.socket, &doing, e)
    }

    /// Remove the container `name` (gone is fine) and wait until the
    /// engine has let its name go.
    pub(super) async fn computer(&self, name: &str) -> Result<()> {
        let docker = &self.docker;
        match docker
            .remove_container(
                name,
                Some(
                    RemoveContainerOptionsBuilder::new()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await
        {
            Ok(()) => {}
            Err(e) if host::is_not_found(&e) => return Ok(()),
            Err(e) => return Err(self.err("removing the computer")(e)),
        }
        // Read back: the name is free only once Docker has let it go.
        let wait = crate::wait::Wait::new(format!("{name} to be removed"), REMOVE_WAIT);
        crate::wait::wait_until(
            &wait,
            &CancellationToken::new(),
            || async {
                match docker
                    .inspect_container(name, None::<InspectContainerOptions>)
                    .await
                {
                    Err(e) if host::is_not_found(&e) => Ok(true),
                    Ok(_) => Ok(false),
                    Err(e) => Err(self.err("inspecting")(e)),
                }
            },
            |gone| *gone,
            |_| "it is still there".into(),
        )
        .await
        .map(|_| ())
    }

    /// Remove a computer, then its direct directory, egress proxy and
    /// volume (none is fine).
    pub(super) async fn with_parts(&self, name: &str) -> Result<()> {
        let computer = self.computer(name).await;
        if computer.is_ok() {
            super::direct::remove(&self.cache, name);
        }
        let parts = self.egress(name).await;
        computer.and(parts)
    }

    /// What a create dropped part-way made, removed: a pass at once, then
    /// more after [`AFTER_DROP`]'s pauses, since an engine call the drop
    /// cut off (a container or volume being made) may still finish after
    /// the first pass found nothing.
    async fn after_drop(&self, name: &str) {
        let mut last = Ok(());
        for pause in AFTER_DROP {
            tokio::time::sleep(*pause).await;
            last = self.with_parts(name).await;
        }
        match last {
            Ok(()) => tracing::info!(
                computer = name,
                "a create dropped part-way: what it made is removed"
            ),
            Err(e) => tracing::warn!(
                computer = name,
                "a create dropped part-way: what it made could not all be removed ({}); `computer-mcp sweep` deletes it after its deadline",
                e.message
            ),
        }
    }
}

/// The pauses before each removal pass after a create's future is dropped
/// (the first at once): about 5 s in all.
const AFTER_DROP: &[Duration] = &[
    Duration::ZERO,
    Duration::from_millis(500),
    Duration::from_millis(1500),
    Duration::from_secs(3),
];

/// Held by a create from before the first thing it makes until it returns:
/// dropped armed (its future dropped part-way: an MCP call cancelled, a
/// session gone, a timeout around create), it spawns the removal of the
/// computer and its parts by name on the runtime, so nothing waits for
/// the sweep. A create that returns disarms it first: on success, or after
/// its own removal of a failed computer ran to its end.
pub(super) struct Unmade {
    armed: Option<(Removal, String)>,
}

impl Unmade {
    pub(super) fn arm(removal: Removal, name: &str) -> Self {
        Self {
            armed: Some((removal, name.to_string())),
        }
    }

    pub(super) fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for Unmade {
    fn drop(&mut self) {
        let Some((removal, name)) = self.armed.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                tracing::info!(
                    computer = name,
                    "a create was dropped part-way: removing what it made"
                );
                rt.spawn(async move { removal.after_drop(&name).await });
            }
            Err(_) => tracing::warn!(
                computer = name,
                "a create was dropped part-way with no runtime to remove what it made: `computer-mcp sweep` deletes it after its deadline, or docker rm -f {name}"
            ),
        }
    }
}
