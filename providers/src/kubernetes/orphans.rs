//! The sweep in sandbox mode: a `SandboxClaim` or `Sandbox` of ours whose
//! computer's pod vanished, or past its shutdown time, is deleted.
//!
//! agent-sandbox's controller makes a Sandbox's pod again when it is gone
//! (sandbox_controller.go `reconcilePod`), so a pod deleted behind our
//! back or evicted does not stay gone: a claimed warm pod comes back as
//! the pool's blueprint (no label of ours, its shell waiting for a
//! deadline no one writes, for a day), a cold one as a fresh computer
//! whose files are lost. Either is the computer vanished: the pod of an
//! owner is its computer only while it carries our label and was made no
//! later than the owner and the start bound. An owner younger than that
//! bound may be a create under way and is left alone; past its shutdown
//! time it goes whatever its pod (as the controller would delete it,
//! should no controller run).

use computerd::launch::Time;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::sandbox::{CLAIM, POD_NAME, SANDBOX, missing};
use super::{KubernetesProvider, api_error, egress};
use crate::daemon_backed::aborted;
use crate::types::{Result, label};

fn time_at(v: &Value) -> Option<OffsetDateTime> {
    v.as_str()?.parse::<Time>().ok().map(Time::get)
}

impl KubernetesProvider {
    /// Every claim and Sandbox of ours whose pod vanished or whose
    /// shutdown time passed, deleted (its pod then the garbage
    /// collector's); their names.
    pub(crate) async fn sweep_sandboxes(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let ours = ListParams::default().labels(&format!("{}=1", label::COMPUTER));
        let mut deleted = Vec::new();
        for (r, what, shutdown) in [
            (CLAIM, "SandboxClaim", "/spec/lifecycle/shutdownTime"),
            (SANDBOX, "Sandbox", "/spec/shutdownTime"),
        ] {
            let api = self.dynamic(r).await?;
            let listed = match api.list(&ours).await {
                Ok(l) => l,
                Err(e) if missing(&e) => return Ok(deleted),
                Err(e) => return Err(api_error(&format!("listing {what}s"), e)),
            };
            let now = OffsetDateTime::now_utc();
            for o in listed.items {
                let name = o.metadata.name.clone().unwrap_or_default();
                let made = o.metadata.creation_timestamp.as_ref().map(|t| {
                    OffsetDateTime::from_unix_timestamp(t.0.as_second())
                        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
                });
                let expired = time_at(o.data.pointer(shutdown).unwrap_or(&Value::Null))
                    .is_some_and(|t| t <= now);
                let settled = made.is_none_or(|m| m + self.start + egress::LEFTOVER_AFTER < now);
                let vanished = settled && !self.holds_its_pod(&o, r == CLAIM, made).await?;
                if !(expired || vanished) {
                    continue;
                }
                if cancel.is_cancelled() {
                    return Err(aborted("the sweep"));
                }
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => continue,
                    Err(e) => return Err(api_error(&format!("deleting the {what} {name}"), e)),
                }
                let why = if expired {
                    "past its shutdown time"
                } else {
                    "its computer's pod vanished"
                };
                tracing::info!(%name, kind = what, why, "the sweep deleted an agent-sandbox object");
                deleted.push(name);
            }
        }
        Ok(deleted)
    }

    /// Whether the owner `o` (a claim when `claim`) still holds its
    /// computer's pod: its Sandbox's pod exists, carries our label and was
    /// made no later than the owner (`made`) and the start bound.
    async fn holds_its_pod(
        &self,
        o: &DynamicObject,
        claim: bool,
        made: Option<OffsetDateTime>,
    ) -> Result<bool> {
        let sandbox = if claim {
            let Some(sb) = o.data["status"]["sandbox"]["name"].as_str() else {
                return Ok(false);
            };
            match self.dynamic(SANDBOX).await?.get_opt(sb).await {
                Ok(Some(s)) => s,
                Ok(None) => return Ok(false),
                Err(e) => return Err(api_error(&format!("reading the Sandbox {sb}"), e)),
            }
        } else {
            o.clone()
        };
        let pod = sandbox
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_NAME).cloned())
            .or(sandbox.metadata.name.clone())
            .unwrap_or_default();
        let Some(p) = self.read(&pod).await? else {
            return Ok(false);
        };
        let remade = match (made, time_at(&p["metadata"]["creationTimestamp"])) {
            (Some(m), Some(at)) => at > m + self.start + egress::LEFTOVER_AFTER,
            _ => false,
        };
        Ok(!p["metadata"]["labels"][label::COMPUTER].is_null() && !remade)
    }
}
