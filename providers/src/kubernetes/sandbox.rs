//! `--kubernetes-api sandbox`: a computer's pod made through agent-sandbox
//! (kubernetes-sigs/agent-sandbox, API v1beta1) instead of by us.
//!
//! - Cold: a `Sandbox` (`agents.x-k8s.io/v1beta1`) named as the computer,
//!   its `podTemplate` our hardened pod; its controller makes the pod of
//!   the Sandbox's name (controllers/sandbox_controller.go, `reconcilePod`)
//!   and `lifecycle.shutdownTime` is the computer's deadline, with
//!   `shutdownPolicy: Delete`.
//! - Warm: every computer's pod, as it would be before its deadline is
//!   known, is a `SandboxTemplate` (`extensions.agents.x-k8s.io/v1beta1`)
//!   named by a hash of it, made once if missing ([`template_name`]). When
//!   a `SandboxWarmPool` names that template, the computer is a
//!   `SandboxClaim` on it (`spec.warmPoolRef`, the claim's shutdownTime
//!   the deadline): the claim controller hands over one of the pool's
//!   ready Sandboxes, whose pod already runs, and the pool makes another
//!   (extensions/controllers/sandboxclaim_controller.go `completeAdoption`,
//!   sandboxwarmpool_controller.go). A warm pod's shell waits for its
//!   deadline before it becomes init ([`super::manifest::DEADLINE_FILE`]);
//!   the provider then labels the pod as ours, lowers its
//!   `activeDeadlineSeconds` to the computer's (an update the API allows
//!   only downwards: core/v1 validation `ValidatePodUpdate`), makes its
//!   deny-all policy, and writes the deadline by exec.
//!
//! An allowlisted computer is always cold: its Sandbox's pod template
//! names its egress proxy's address (`--egress-tcp`), made first, and
//! its pod carries the label both policies select
//! ([`super::egress`]). A warm pod's init was started with no proxy, and
//! the fake's CNI cannot move a running pod onto the pods' network, so a
//! claim with a proxy would be untested; it is not made.
//!
//! Either way the pod is what the provider reads back, connects to and
//! lists, exactly as a bare pod of ours: the hardening, the labels, the
//! deadline and network none hold the same. Releasing deletes the claim
//! or the Sandbox that owns the pod, and the API's garbage collector
//! deletes the rest (docs, "Garbage Collection", owner references).

use std::time::Duration;

use computerd::launch::Time;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::manifest::{DEADLINE_FILE, PodPlan};
use super::{KubernetesProvider, MAX_LIFETIME_MS, api_error};
use crate::daemon_backed::aborted;
use crate::types::{ErrorCode, Labels, ProviderError, Result, label};

/// The core API group: `Sandbox`.
pub const GROUP: &str = "agents.x-k8s.io";
/// The extensions' group: `SandboxTemplate`, `SandboxClaim`,
/// `SandboxWarmPool`.
pub const EXTENSIONS: &str = "extensions.agents.x-k8s.io";
pub const VERSION: &str = "v1beta1";
/// The annotation a Sandbox names its pod by once it adopted a warm one
/// (api/v1beta1 `SandboxPodNameAnnotation`).
pub const POD_NAME: &str = "agents.x-k8s.io/pod-name";

/// (group, kind, plural) of each resource the provider uses.
pub const SANDBOX: (&str, &str, &str) = (GROUP, "Sandbox", "sandboxes");
pub const TEMPLATE: (&str, &str, &str) = (EXTENSIONS, "SandboxTemplate", "sandboxtemplates");
pub const CLAIM: (&str, &str, &str) = (EXTENSIONS, "SandboxClaim", "sandboxclaims");
pub const POOL: (&str, &str, &str) = (EXTENSIONS, "SandboxWarmPool", "sandboxwarmpools");

fn resource((group, kind, plural): (&str, &str, &str)) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, VERSION, kind), plural)
}

/// The plan of the warm pod a pool would hold for `plan`: the same pod,
/// waiting for its deadline, living at most a day, with no computer's
/// label (those are written when it is claimed).
pub fn warm_plan(plan: &PodPlan) -> PodPlan {
    let mut w = plan.clone();
    w.warm = true;
    w.labels = Labels::new();
    w.lifetime_s = MAX_LIFETIME_MS / 1000;
    w.name = String::new();
    w
}

/// The SandboxTemplate of `plan`'s warm pod: `computer-mcp-` and the
/// first 12 hex digits of the sha256 of its podTemplate, so every server
/// that makes the same pod names the same template.
pub fn template_name(plan: &PodPlan) -> String {
    use sha2::Digest;
    let t = warm_plan(plan).pod_template().to_string();
    let h = sha2::Sha256::digest(t.as_bytes());
    let hex: String = h.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("computer-mcp-{hex}")
}

/// What `e` means when the cluster has no such resource: agent-sandbox
/// is not installed (a 404 whose details name no object).
pub(crate) fn missing(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && !s.message.contains('"'))
}

fn not_installed(what: &str) -> ProviderError {
    ProviderError::new(
        ErrorCode::Unsupported,
        format!(
            "the cluster serves no {what} ({GROUP}/{VERSION}): agent-sandbox is not installed; install it (kubernetes-sigs/agent-sandbox: its CRDs and controller) or use --kubernetes-api pods"
        ),
    )
    .with_field("api")
}

fn to_dynamic(v: Value) -> Result<DynamicObject> {
    serde_json::from_value(v).map_err(|e| ProviderError::failed(format!("an object: {e}")))
}

impl KubernetesProvider {
    pub(crate) async fn dynamic(&self, r: (&str, &str, &str)) -> Result<kube::Api<DynamicObject>> {
        let (c, ns) = self.client().await?;
        Ok(kube::Api::namespaced_with(c, &ns, &resource(r)))
    }

    /// The warm pool of `plan`'s template, if one exists (its template
    /// made first when missing, so a pool may be made for it).
    pub(crate) async fn pool_for(&self, plan: &PodPlan) -> Result<Option<String>> {
        let template = template_name(plan);
        self.ensure_template(plan, &template).await?;
        let pools = match self.dynamic(POOL).await?.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) if missing(&e) => return Ok(None),
            Err(e) => return Err(api_error("listing SandboxWarmPools", e)),
        };
        Ok(pools
            .items
            .into_iter()
            .find(|p| p.data["spec"]["sandboxTemplateRef"]["name"] == json!(template))
            .and_then(|p| p.metadata.name))
    }

    /// Make the SandboxTemplate `name` of `plan`'s warm pod unless it
    /// exists (once per server; a cluster without the extensions is
    /// skipped: it has no pools either).
    async fn ensure_template(&self, plan: &PodPlan, name: &str) -> Result<()> {
        if self.known(name) {
            return Ok(());
        }
        let api = self.dynamic(TEMPLATE).await?;
        let found = match api.get_opt(name).await {
            Ok(f) => f.is_some(),
            Err(e) if missing(&e) => return Ok(()),
            Err(e) => return Err(api_error("reading the SandboxTemplate", e)),
        };
        if !found {
            let t = to_dynamic(json!({
                "apiVersion": format!("{EXTENSIONS}/{VERSION}"),
                "kind": "SandboxTemplate",
                "metadata": {"name": name, "labels": {label::COMPUTER: "1"}},
                "spec": {
                    "podTemplate": warm_plan(plan).pod_template(),
                    // The computer's own deny-all policy is ours to make.
                    "networkPolicyManagement": "Unmanaged",
                },
            }))?;
            match api.create(&Default::default(), &t).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) if missing(&e) => return Ok(()),
                Err(e) => return Err(api_error("making the SandboxTemplate", e)),
            }
        }
        self.templates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string());
        Ok(())
    }

    fn known(&self, template: &str) -> bool {
        self.templates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(template)
    }

    /// A cold computer: the Sandbox `plan.name`, whose controller makes
    /// the pod of that name.
    pub(crate) async fn make_sandbox(&self, plan: &PodPlan) -> Result<()> {
        let sb = to_dynamic(json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": "Sandbox",
            "metadata": {"name": plan.name, "labels": {label::COMPUTER: "1"}},
            "spec": {
                "podTemplate": plan.pod_template(),
                "shutdownTime": plan.deadline.to_string(),
                "shutdownPolicy": "Delete",
            },
        }))?;
        match self
            .dynamic(SANDBOX)
            .await?
            .create(&Default::default(), &sb)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if missing(&e) => Err(not_installed("Sandbox")),
            Err(e) => Err(api_error("making the Sandbox", e)),
        }
    }

    /// A warm computer: a SandboxClaim `plan.name` on `pool`, until it is
    /// bound; the name of the pod it got.
    pub(crate) async fn claim(
        &self,
        plan: &PodPlan,
        pool: &str,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let claims = self.dynamic(CLAIM).await?;
        let c = to_dynamic(json!({
            "apiVersion": format!("{EXTENSIONS}/{VERSION}"),
            "kind": "SandboxClaim",
            "metadata": {"name": plan.name, "labels": {label::COMPUTER: "1"}},
            "spec": {
                "warmPoolRef": {"name": pool},
                "lifecycle": {"shutdownTime": plan.deadline.to_string(), "shutdownPolicy": "Delete"},
            },
        }))?;
        claims
            .create(&Default::default(), &c)
            .await
            .map_err(|e| api_error(&format!("claiming from the SandboxWarmPool {pool}"), e))?;
        let until = tokio::time::Instant::now() + self.start;
        let mut said = String::from("it was not bound");
        while tokio::time::Instant::now() < until {
            if cancel.is_cancelled() {
                return Err(aborted("claiming a warm pod"));
            }
            let got = claims
                .get(&plan.name)
                .await
                .map_err(|e| api_error("reading the SandboxClaim", e))?;
            if let Some(sb) = got.data["status"]["sandbox"]["name"].as_str() {
                let sandbox = self
                    .dynamic(SANDBOX)
                    .await?
                    .get(sb)
                    .await
                    .map_err(|e| api_error(&format!("reading the Sandbox {sb}"), e))?;
                let pod = sandbox
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(POD_NAME).cloned())
                    .unwrap_or_else(|| sb.to_string());
                return Ok(pod);
            }
            if let Some(c) = got.data["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            {
                said = format!(
                    "{}: {}",
                    c["reason"].as_str().unwrap_or("?"),
                    c["message"].as_str().unwrap_or("")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the SandboxClaim {} on the pool {pool} was not bound within {} s (--kubernetes-start-s): {said}",
                plan.name,
                self.start.as_secs()
            ),
        ))
    }

    /// The claimed pod `pod` made the computer of `plan`: our labels and
    /// annotations on it, its activeDeadlineSeconds lowered to end at the
    /// deadline, and (after its policy is made) its deadline written.
    pub(crate) async fn own_warm(&self, plan: &PodPlan, pod: &str) -> Result<()> {
        // A claim the pool had no ready pod for got a cold Sandbox: its
        // pod is made and started like any other first.
        self.until_running(pod, &plan.image).await?;
        let mut p = plan.clone();
        p.name = pod.to_string();
        let made = p.pod();
        let pods = self.pods().await?;
        let now = pods
            .get(pod)
            .await
            .map_err(|e| api_error(&format!("reading pod {pod}"), e))?;
        let started = now
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second())
            .unwrap_or_else(|| Time::from_now(Duration::ZERO).get().unix_timestamp());
        let elapsed = (Time::from_now(Duration::ZERO).get().unix_timestamp() - started).max(0);
        let held = now
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .unwrap_or(i64::MAX);
        let lifetime = i64::try_from(plan.lifetime_s).unwrap_or(i64::MAX);
        let patch = json!({
            "metadata": {
                "labels": made["metadata"]["labels"],
                "annotations": made["metadata"]["annotations"],
            },
            "spec": {"activeDeadlineSeconds": elapsed.saturating_add(lifetime).min(held)},
        });
        pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| api_error(&format!("labelling the claimed pod {pod}"), e))?;
        Ok(())
    }

    /// Until the pod `pod` (made by a controller) runs: its own words if
    /// it stays Pending past the start's bound or ends.
    async fn until_running(&self, pod: &str, image: &str) -> Result<()> {
        let until = tokio::time::Instant::now() + self.start;
        let mut last = String::from("it was not made");
        while tokio::time::Instant::now() < until {
            let p = self
                .pods()
                .await?
                .get_opt(pod)
                .await
                .map_err(|e| api_error(&format!("reading pod {pod}"), e))?;
            if let Some(p) = p.map(|p| serde_json::to_value(p).unwrap_or(Value::Null)) {
                match p["status"]["phase"].as_str() {
                    Some("Running") => return Ok(()),
                    Some("Pending") | None => last = super::words::pending_status(&p),
                    Some(_) => return Err(super::words::ended(&p, pod, image, &self.computerd)),
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the claimed pod {pod} did not run within {} s (--kubernetes-start-s): {last}",
                self.start.as_secs()
            ),
        ))
    }

    /// Write `deadline` where the warm pod `pod`'s shell waits for it
    /// (moved into place whole).
    pub(crate) async fn start_warm(&self, pod: &str, deadline: Time) -> Result<()> {
        let when = deadline.to_string();
        // Exactly its length from stdin (v4 has no end of stdin).
        let argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            "umask 077 && head -c \"$1\" > \"$0.part\" && mv -f \"$0.part\" \"$0\"".into(),
            DEADLINE_FILE.into(),
            when.len().to_string(),
        ];
        self.put(
            pod,
            argv,
            when.as_bytes(),
            &format!("starting the claimed pod {pod}"),
        )
        .await
    }

    /// In sandbox mode, delete what owns the pod `name` (the claim that
    /// holds its Sandbox, else the Sandbox), leaving the pod to the
    /// garbage collector; false when nothing owns it (a bare pod) or it
    /// is gone.
    pub(crate) async fn delete_owner(&self, name: &str) -> Result<bool> {
        let Some(pod) = self
            .pods()
            .await?
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("reading pod {name}"), e))?
        else {
            return Ok(false);
        };
        let owner =
            |refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
             kind: &str| {
                refs.into_iter()
                    .flatten()
                    .find(|o| o.controller == Some(true) && o.kind == kind)
                    .map(|o| o.name.clone())
            };
        let Some(sb) = owner(pod.metadata.owner_references.as_ref(), "Sandbox") else {
            return Ok(false);
        };
        let sandboxes = self.dynamic(SANDBOX).await?;
        let held = sandboxes
            .get_opt(&sb)
            .await
            .map_err(|e| api_error(&format!("reading the Sandbox {sb}"), e))?;
        let claim = held.and_then(|s| owner(s.metadata.owner_references.as_ref(), "SandboxClaim"));
        let (api, what, name) = match claim {
            Some(c) => (self.dynamic(CLAIM).await?, "SandboxClaim", c),
            None => (sandboxes, "Sandbox", sb),
        };
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
            Err(e) => Err(api_error(&format!("deleting the {what} {name}"), e)),
        }
    }

    /// In sandbox mode, delete what owns the pod `name`, or else the
    /// Sandbox and the claim of that name (a create that failed before its
    /// pod was made); true when something was deleted, leaving the pod
    /// (if any) to the garbage collector.
    pub(crate) async fn delete_owners(&self, name: &str) -> Result<bool> {
        if self.delete_owner(name).await? {
            return Ok(true);
        }
        let mut deleted = false;
        for (r, what) in [(SANDBOX, "Sandbox"), (CLAIM, "SandboxClaim")] {
            match self
                .dynamic(r)
                .await?
                .delete(name, &DeleteParams::background())
                .await
            {
                Ok(_) => deleted = true,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(&format!("deleting the {what} {name}"), e)),
            }
        }
        Ok(deleted)
    }

    /// Until the Sandbox `name`'s controller has made its pod; past the
    /// start's bound, the Sandbox's own Ready condition in words.
    pub(crate) async fn until_pod(&self, name: &str, cancel: &CancellationToken) -> Result<()> {
        let until = tokio::time::Instant::now() + self.start;
        let pods = self.pods().await?;
        while tokio::time::Instant::now() < until {
            if cancel.is_cancelled() {
                return Err(aborted("making the Sandbox"));
            }
            if pods
                .get_opt(name)
                .await
                .map_err(|e| api_error(&format!("reading pod {name}"), e))?
                .is_some()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let said = match self.dynamic(SANDBOX).await?.get_opt(name).await {
            Ok(Some(sb)) => sb.data["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map(|c| {
                    format!(
                        "its Ready condition: {}: {}",
                        c["reason"].as_str().unwrap_or("?"),
                        c["message"].as_str().unwrap_or("")
                    )
                })
                .unwrap_or_else(|| {
                    "it has no status: is agent-sandbox's controller running?".into()
                }),
            Ok(None) => "the Sandbox is gone".into(),
            Err(e) => api_error("reading the Sandbox", e).message,
        };
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the Sandbox {name} made no pod within {} s (--kubernetes-start-s): {said}",
                self.start.as_secs()
            ),
        ))
    }

    /// For doctor: whether agent-sandbox's resources are served (API
    /// discovery of both groups), in words.
    pub(crate) async fn agent_sandbox(&self) -> Result<String> {
        let (client, _) = self.client().await?;
        let mut found = Vec::new();
        let mut lacking = Vec::new();
        for (group, kinds) in [
            (GROUP, &["Sandbox"][..]),
            (
                EXTENSIONS,
                &["SandboxTemplate", "SandboxClaim", "SandboxWarmPool"][..],
            ),
        ] {
            let served: Vec<String> = match client
                .list_api_group_resources(&format!("{group}/{VERSION}"))
                .await
            {
                Ok(l) => l.resources.into_iter().map(|r| r.kind).collect(),
                Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
                Err(e) => return Err(api_error("asking the API's discovery", e)),
            };
            for k in kinds {
                if served.iter().any(|s| s == k) {
                    found.push(*k);
                } else {
                    lacking.push(*k);
                }
            }
        }
        if lacking.is_empty() {
            return Ok(format!(
                "agent-sandbox's CRDs are installed ({}, {VERSION})",
                found.join(", ")
            ));
        }
        Err(ProviderError::new(
            ErrorCode::Unsupported,
            format!(
                "agent-sandbox's CRDs are not all installed: the cluster serves no {} ({VERSION})",
                lacking.join(", ")
            ),
        ))
    }
}
