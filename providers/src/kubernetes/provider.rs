//! The Kubernetes provider's [`Provider`] impl.

use std::time::Duration;

use computerd::launch::Time;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::egress;
use super::manifest::{self, PodPlan};
use super::words::{self, Refusal};
use super::{GONE_WAIT, ID, KubernetesApi, KubernetesProvider, api_error, checked};
use crate::daemon_backed::{aborted, check_kind};
use crate::provider::{Connection, Provider};
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, ErrorCode, Labels, NetworkKind,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result, check_labels, check_lifetime,
    label,
};

/// How long a pod whose daemon hung up may still read Running before
/// its kubelet reports why.
const STATUS_LAG: Duration = Duration::from_secs(5);

fn to_value<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

impl KubernetesProvider {
    /// The pod `name` as the API holds it; None once gone.
    pub(crate) async fn read(&self, name: &str) -> Result<Option<Value>> {
        let pods = self.pods().await?;
        let p = pods
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("reading pod {name}"), e))?;
        Ok(p.map(|p| to_value(&p)))
    }

    /// The pod `name`, ours and hardened as we made it, or refused.
    async fn ours(&self, name: &str) -> Result<Value> {
        crate::vendor::check_id(name)?;
        let p = self.read(name).await?.ok_or_else(|| {
            ProviderError::new(ErrorCode::Gone, format!("the pod {name} is gone"))
        })?;
        if p["metadata"]["labels"][label::COMPUTER].is_null() {
            return Err(ProviderError::not_found(format!(
                "the pod {name} is not a computer of computer-mcp"
            )));
        }
        let drift = manifest::drift(&p, self.uid);
        if !drift.is_empty() {
            return Err(ProviderError::refused(format!(
                "the pod {name} is not as it was made (hardening changed behind our back): it lacks {}; delete it",
                drift.join(", ")
            )));
        }
        Ok(p)
    }

    /// Until the pod runs and its daemon answers hello (init may still
    /// be starting when the pod reads Running).
    async fn until_up(
        &self,
        name: &str,
        image: &str,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let until = tokio::time::Instant::now() + self.start;
        let mut pending = true;
        let mut streamed = self.stream.is_none();
        let mut last = String::from("it did not start");
        while tokio::time::Instant::now() < until {
            if cancel.is_cancelled() {
                return Err(aborted("making the pod"));
            }
            let p = self.read(name).await?.ok_or_else(|| {
                ProviderError::new(
                    ErrorCode::Gone,
                    format!("the pod {name} vanished while starting"),
                )
            })?;
            pending = matches!(p["status"]["phase"].as_str(), Some("Pending") | None);
            match p["status"]["phase"].as_str() {
                Some("Running") if !streamed => match self.stream_in(name).await {
                    Ok(()) => {
                        streamed = true;
                        continue;
                    }
                    Err(e) => last = e.message,
                },
                Some("Running") => match self.open(name).await {
                    Ok(c) => match crate::daemon_backed::hello::call(c).await {
                        Ok(conn) => return checked(conn, name, self.made),
                        Err(e) => last = e.message,
                    },
                    Err(e) => last = e.message,
                },
                Some("Pending") | None => last = words::pending_status(&p),
                Some(_) => return Err(words::ended(&p, name, image, &self.computerd)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let events = self.events(name).await;
        let (state, events) = if events.is_empty() {
            (last, String::new())
        } else {
            (last, format!("; its events: {events}"))
        };
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the pod {name} did not {} within {} s (--kubernetes-start-s): {state}{events}",
                if pending { "leave Pending" } else { "come up" },
                self.start.as_secs()
            ),
        ))
    }

    fn plan(&self, spec: &ComputerSpec) -> Result<PodPlan> {
        let image = spec
            .image
            .clone()
            .or_else(|| self.image.clone())
            .ok_or_else(|| {
                ProviderError::invalid(
                    "image",
                    "no image: name one in the spec or give --kubernetes-image (an image that carries computerd)",
                )
            })?;
        let name = format!("cmcp-{}", crate::random::random_hex(6)?);
        let lifetime_s = spec.lifetime_ms.div_ceil(1000);
        let deadline = Time::from_now(Duration::from_millis(spec.lifetime_ms));
        let mut labels = spec.labels.clone();
        labels.insert(label::COMPUTER.into(), "1".into());
        labels.insert(label::DEADLINE.into(), deadline.to_string());
        Ok(PodPlan {
            name,
            image,
            computerd: self.computerd.clone(),
            uid: self.uid,
            deadline,
            lifetime_s,
            labels,
            cpus: spec.sizes.cpus.unwrap_or(1.0),
            memory_mb: spec.sizes.memory_mb.unwrap_or(1024),
            work_mb: self.work_mb,
            streamed: self.stream.is_some(),
            warm: false,
            made: self.made,
            egress: None,
        })
    }

    /// Delete the pod and its policy (and its egress proxy pod and
    /// policy), and wait until both pods are gone.
    async fn delete_and_wait(&self, name: &str, cancel: &CancellationToken) -> Result<()> {
        self.delete_egress(name).await?;
        let policies = self.policies().await?;
        match policies.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(api_error(&format!("deleting the NetworkPolicy {name}"), e)),
        }
        // What owns the pod goes, and the garbage collector takes the pod.
        let owned = self.api == KubernetesApi::Sandbox && self.delete_owners(name).await?;
        let pods = self.pods().await?;
        if !owned {
            match pods
                .delete(name, &DeleteParams::default().grace_period(5))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(&format!("deleting pod {name}"), e)),
            }
        }
        let proxy = egress::name_of(name);
        let wait = crate::wait::Wait::new(format!("pod {name} to be gone"), GONE_WAIT);
        crate::wait::wait_until(
            &wait,
            cancel,
            || async { Ok(self.read(name).await?.is_none() && self.read(&proxy).await?.is_none()) },
            |gone| *gone,
            |_| "still there".into(),
        )
        .await
        .map(|_| ())
    }

    /// `e`, or Gone in the kubelet's words once the pod `id` reads as
    /// not running (or is gone). A kubelet kills a container before its
    /// status manager reports the pod's phase (an eviction's
    /// `killPodFunc`, then the status sync), so a pod whose daemon just
    /// hung up may read Running a while: it is read again for up to
    /// [`STATUS_LAG`].
    async fn gone_or(&self, id: &str, e: ProviderError) -> ProviderError {
        let until = tokio::time::Instant::now() + STATUS_LAG;
        loop {
            match self.ours(id).await {
                Ok(p) => {
                    if let Some(gone) = not_running(&p, id) {
                        return gone;
                    }
                }
                Err(g) if g.code == ErrorCode::Gone => return g,
                Err(_) => return e,
            }
            if tokio::time::Instant::now() >= until {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The deny-all NetworkPolicy of the pod `name`.
    async fn make_policy(&self, name: &str) -> Result<()> {
        self.create_policy(manifest::deny_all(name), "the deny-all NetworkPolicy")
            .await
    }

    /// The NetworkPolicy `np` (`what`, in words) made.
    pub(crate) async fn create_policy(&self, np: Value, what: &str) -> Result<()> {
        let np: k8s_openapi::api::networking::v1::NetworkPolicy = serde_json::from_value(np)
            .map_err(|e| ProviderError::failed(format!("{what}: {e}")))?;
        let ns = self.namespace().await?;
        self.policies()
            .await?
            .create(&PostParams::default(), &np)
            .await
            .map_err(|e| match Refusal::of(&e) {
                Some(r) if r.code == 403 => words::forbidden("create", "networkpolicies", &ns, &r),
                _ => api_error(&format!("making {what}"), e),
            })?;
        Ok(())
    }

    /// The pod of `plan`: made by us, or (sandbox mode) by the Sandbox's
    /// controller, waited for until the API holds it.
    async fn make_pod(&self, plan: &PodPlan, cancel: &CancellationToken) -> Result<()> {
        if self.api == KubernetesApi::Sandbox {
            self.make_sandbox(plan).await?;
            return self.until_pod(&plan.name, cancel).await;
        }
        self.create_pod(plan, plan.pod()).await
    }

    /// The pod `pod` (of `plan`, for the words of a refusal) made.
    pub(crate) async fn create_pod(&self, plan: &PodPlan, pod: Value) -> Result<()> {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod)
            .map_err(|e| ProviderError::failed(format!("the pod: {e}")))?;
        let Err(e) = self
            .pods()
            .await?
            .create(&PostParams::default(), &pod)
            .await
        else {
            return Ok(());
        };
        let ns = self.namespace().await?;
        Err(match Refusal::of(&e) {
            Some(r) if r.is_limit_range() => self.limit_range_words(plan, &r).await,
            Some(r) if r.code == 403 => words::forbidden("create", "pods", &ns, &r),
            _ => api_error("making the pod", e),
        })
    }

    /// A claimed warm pod made the computer of `plan` (named as the pod
    /// now): ours by its labels, its policy made, its deadline given.
    async fn start_claimed(&self, plan: &PodPlan, none: bool) -> Result<()> {
        self.own_warm(plan, &plan.name).await?;
        if none {
            self.make_policy(&plan.name).await?;
        }
        self.ours(&plan.name).await?;
        self.start_warm(&plan.name, plan.deadline).await
    }

    /// Everything after the pod is made; on failure the caller deletes.
    async fn set_up(
        &self,
        plan: &PodPlan,
        none: bool,
        cancel: &CancellationToken,
    ) -> Result<(ComputerRef, NetworkReadBack)> {
        // The hardening read back from the pod the API holds.
        self.ours(&plan.name).await?;
        let conn = self.until_up(&plan.name, &plan.image, cancel).await?;
        let network = if let Some(at) = plan.egress {
            let listens = self
                .until_proxy_listens(&conn, &plan.name, at, cancel)
                .await;
            if let Err(e) = listens {
                conn.client.close();
                return Err(e);
            }
            self.allow_read_back(&plan.name).await?
        } else if none {
            let inside = self.probe(&conn, &plan.name).await?;
            self.none_read_back(&plan.name, Some(&inside)).await?
        } else {
            NetworkReadBack {
                kind: NetworkKind::Open,
                detail: "no NetworkPolicy: the cluster's default".into(),
            }
        };
        conn.client.close();
        let p = self.ours(&plan.name).await?;
        Ok((self.to_ref(&p), network))
    }
}

#[async_trait::async_trait]
impl Provider for KubernetesProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        self.caps()
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        check_lifetime(spec.lifetime_ms, &self.caps())?;
        check_labels(&spec.labels)?;
        for k in spec.labels.keys() {
            if k == label::COMPUTER || k == label::DEADLINE || k == manifest::POD_LABEL {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the provider's own; leave it out"),
                ));
            }
        }
        check_kind(
            "the Kubernetes provider",
            spec.kind,
            self.made.setting(),
            Some("an image that has Xvfb (/usr/bin/Xvfb)"),
        )?;
        egress::list_of(&spec.network)?;
        let refusals = [
            (
                spec.mount.is_some(),
                "mount",
                "a pod sees no host directory: leave mount out",
            ),
            (
                !spec.shares.is_empty(),
                "share",
                "a pod sees no host directory: leave share out",
            ),
            (
                spec.user.is_some(),
                "user",
                "a pod's user is --kubernetes-uid: leave user out",
            ),
            (
                spec.sizes.pids.is_some() || spec.sizes.disk_mb.is_some(),
                "sizes",
                "a pod cannot set a pids or disk bound of its own: its pids are bounded by the node's kubelet (podPidsLimit; a LimitRange cannot name pids) and its disk by --kubernetes-work-mb (the /work emptyDir's sizeLimit and the ephemeral-storage limit): leave pids and diskMb out",
            ),
        ];
        if let Some((_, field, why)) = refusals.into_iter().find(|r| r.0) {
            return Err(ProviderError::unsupported(why).with_field(field));
        }
        self.plan(spec).map(|_| ())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        let mut plan = self.plan(spec)?;
        let none = spec.network == NetworkPolicy::None;
        let allow = egress::list_of(&spec.network)?;
        let mut how = "pod";
        // An allowlisted computer is a Sandbox of its own, its proxy's
        // address in its pod's command from the start: a warm pod's init
        // was started with none, and the fake's CNI cannot put a running
        // pod on the pods' network, so a claim with a proxy is untested
        // and not made.
        if self.api == KubernetesApi::Sandbox
            && allow.is_none()
            && let Some(pool) = self.pool_for(&plan).await?
        {
            // Warm: the pod is the pool's; it is ours once claimed.
            let claimed = self.claim(&plan, &pool, cancel).await;
            let pod = match claimed {
                Ok(p) => p,
                Err(e) => {
                    let _ = self.delete_and_wait(&plan.name, cancel).await;
                    return Err(e);
                }
            };
            plan.name = pod;
            how = "pod claimed from the SandboxWarmPool";
            let started = self.start_claimed(&plan, none).await;
            if let Err(e) = started {
                let removed = self
                    .delete_and_wait(&plan.name, &CancellationToken::new())
                    .await;
                return Err(crate::daemon_backed::labels::set_up_failed(
                    e, "deleted", removed,
                ));
            }
        } else {
            if none {
                self.make_policy(&plan.name).await?;
            }
            if let Some(allow) = &allow {
                match self.make_egress(&plan, allow, cancel).await {
                    Ok(at) => plan.egress = Some(at),
                    Err(e) => {
                        let _ = self.delete_and_wait(&plan.name, cancel).await;
                        return Err(e);
                    }
                }
            }
            if let Err(e) = self.make_pod(&plan, cancel).await {
                let _ = self.delete_and_wait(&plan.name, cancel).await;
                return Err(e);
            }
            if self.api == KubernetesApi::Sandbox {
                how = "pod of the Sandbox";
            }
        }
        match self.set_up(&plan, none, cancel).await {
            Ok((computer, network)) => Ok(Created {
                computer,
                network: Some(network),
                notes: vec![format!(
                    "{how} {} in namespace {}, image {}",
                    plan.name,
                    self.namespace().await.unwrap_or_default(),
                    plan.image
                )],
            }),
            Err(e) => {
                let removed = self
                    .delete_and_wait(&plan.name, &CancellationToken::new())
                    .await;
                Err(crate::daemon_backed::labels::set_up_failed(
                    e, "deleted", removed,
                ))
            }
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        let c = match by {
            AttachBy::Id(id) => self.to_ref(&self.ours(id).await?),
            AttachBy::Labels(l) => {
                let found = self.list(l, cancel).await?;
                crate::daemon_backed::labels::the_one_of(found, "pod")?
            }
        };
        let p = self.ours(&c.id).await?;
        if !c.running {
            return Ok(self.to_ref(&p));
        }
        let mut c = c;
        let held = self.network(&c, None, cancel).await?;
        if held.kind == NetworkKind::None {
            let conn = self.connect(&c, cancel).await?;
            let words = self.probe(&conn, &c.id).await?;
            conn.client.close();
            c.network = Some(crate::types::NetworkRead::Policy(
                self.none_read_back(&c.id, Some(&words)).await?,
            ));
        } else {
            c.network = Some(crate::types::NetworkRead::Policy(held));
        }
        Ok(c)
    }

    async fn list(&self, labels: &Labels, _cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let lp = ListParams::default().labels(&manifest::selector(labels));
        let l = self
            .pods()
            .await?
            .list(&lp)
            .await
            .map_err(|e| api_error("listing pods", e))?;
        Ok(l.items
            .iter()
            .map(|p| self.to_ref(&to_value(p)))
            .filter(|c| {
                crate::daemon_backed::labels::carries(labels, |k| {
                    c.labels.get(k).map(String::as_str)
                })
            })
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        let np = self
            .policies()
            .await?
            .get_opt(&computer.id)
            .await
            .map_err(|e| api_error("reading the NetworkPolicy", e))?;
        let allowlisted = np.as_ref().is_some_and(|np| {
            np.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(egress::LABEL))
        });
        let (kind, list) = match np {
            Some(_) if allowlisted => (NetworkKind::Allow, self.proxy_list(&computer.id).await?),
            Some(_) => (NetworkKind::None, Vec::new()),
            None => (NetworkKind::Open, Vec::new()),
        };
        crate::daemon_backed::network::refuse_change(
            policy,
            kind,
            || list,
            "a pod's network is fixed when it is made",
        )?;
        match kind {
            NetworkKind::Allow => self.allow_read_back(&computer.id).await,
            NetworkKind::None => self.none_read_back(&computer.id, None).await,
            _ => Ok(NetworkReadBack {
                kind: NetworkKind::Open,
                detail: "no NetworkPolicy: the cluster's default".into(),
            }),
        }
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        _cancel: &CancellationToken,
    ) -> Result<Connection> {
        let p = self.ours(&computer.id).await?;
        if let Some(e) = not_running(&p, &computer.id) {
            return Err(e);
        }
        // A pod evicted or stopped between that read and the exec refuses
        // the exec's upgrade: Gone in the kubelet's words, as below.
        let c = match self.open(&computer.id).await {
            Ok(c) => c,
            Err(e) => return Err(self.gone_or(&computer.id, e).await),
        };
        match crate::daemon_backed::hello::call(c).await {
            Ok(hello) => checked(hello, &computer.id, self.made),
            // A daemon that hangs up is often a pod being evicted or
            // stopped between our read and the dial: say so when the pod
            // now reads as not running, rather than "unreachable".
            Err(e) if e.code == ErrorCode::Unreachable => Err(self.gone_or(&computer.id, e).await),
            Err(e) => Err(e),
        }
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        crate::vendor::check_id(&computer.id)?;
        if how == Release::Stop {
            return Err(ProviderError::unsupported(
                "a pod cannot be stopped and kept: release it with delete",
            ));
        }
        // Its policy too when the pod is already gone.
        self.delete_and_wait(&computer.id, cancel).await
    }

    /// Whether agent-sandbox's CRDs are installed (API discovery), and
    /// what that means for `--kubernetes-api`.
    async fn service_checks(&self, _cancel: &CancellationToken) -> Vec<crate::Preflight> {
        // No cluster to ask: making the first computer says why.
        if self.client().await.is_err() {
            return Vec::new();
        }
        let sandbox = self.api == KubernetesApi::Sandbox;
        let found = match self.agent_sandbox().await {
            Ok(w) if sandbox => Ok(format!(
                "{w}: computers are Sandboxes, or claims on a SandboxWarmPool of their SandboxTemplate"
            )),
            Ok(w) => Ok(format!("{w}: --kubernetes-api sandbox would use them")),
            Err(e) if sandbox => Err((
                e.message,
                "install agent-sandbox (kubernetes-sigs/agent-sandbox: its CRDs and controller), or use --kubernetes-api pods".into(),
            )),
            Err(e) => Ok(format!("{}; --kubernetes-api pods needs none", e.message)),
        };
        vec![crate::Preflight {
            name: "agent-sandbox",
            found,
        }]
    }

    /// Every pod of ours past its deadline (the kubelet's
    /// `activeDeadlineSeconds` ends its containers but keeps the object), and
    /// every deny-all policy of ours whose pod is gone (one deleted behind
    /// our back), deleted. The ids are the computers' (a policy is no
    /// computer: its delete is logged).
    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        self.snapshots.as_ref()
    }

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let deleted = crate::daemon_backed::sweep::sweep(self, cancel).await?;
        if self.api == KubernetesApi::Sandbox {
            // Claims and Sandboxes whose pod vanished (their names are
            // no computer's: each delete is logged).
            self.sweep_sandboxes(cancel).await?;
        }
        let ours = ListParams::default().labels(&format!("{}=1", label::COMPUTER));
        let mut pods: std::collections::HashSet<String> = self
            .pods()
            .await?
            .list(&ours)
            .await
            .map_err(|e| api_error("listing pods", e))?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        // A proxy pod whose computer is gone, then every policy whose pod
        // is gone (a proxy's policy is named as its pod).
        let proxies = self.sweep_egress(&pods, cancel).await?;
        pods.extend(proxies);
        let policies = self.policies().await?;
        let listed = policies
            .list(&ours)
            .await
            .map_err(|e| api_error("listing NetworkPolicies", e))?;
        for name in listed.items.into_iter().filter_map(|np| np.metadata.name) {
            if pods.contains(&name) {
                continue;
            }
            if cancel.is_cancelled() {
                return Err(aborted("the sweep"));
            }
            match policies.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(api_error(&format!("deleting the NetworkPolicy {name}"), e)),
            }
            tracing::info!(%name, "the sweep deleted a NetworkPolicy whose pod is gone");
        }
        Ok(deleted)
    }
}

/// The Gone error for a pod whose phase is not Running, in the kubelet's
/// own words (phase, reason: message); None while it runs.
fn not_running(p: &serde_json::Value, id: &str) -> Option<ProviderError> {
    if p["status"]["phase"] == "Running" {
        return None;
    }
    let why = [&p["status"]["reason"], &p["status"]["message"]]
        .iter()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(": ");
    Some(ProviderError::new(
        ErrorCode::Gone,
        format!(
            "the pod {id} is not running ({}{})",
            p["status"]["phase"].as_str().unwrap_or("?"),
            if why.is_empty() {
                String::new()
            } else {
                format!(", {}", why.trim())
            }
        ),
    ))
}
