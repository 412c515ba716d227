//! The Kubernetes provider (`--provider kubernetes`, cargo feature
//! `kubernetes`): a computer is one hardened pod whose container's
//! process is `computerd init`, reached by `pods/exec` of `computerd
//! stdio` over the API server's WebSocket (`kube` with its `ws` feature,
//! which offers `v5.channel.k8s.io` first).
//!
//! - [`manifest`]: the pod and its deny-all NetworkPolicy as written, and
//!   the hardening read back from the pod the API returns.
//! - `provider` (the [`Provider`] impl): create, attach, list, connect,
//!   release, network.
//!
//! The rules. computerd reaches the pod one of two ways: the image
//! carries the static binary at `--kubernetes-computerd` (two lines of
//! Dockerfile: `FROM <any image with /bin/sh>` and `COPY computerd
//! /opt/computerd/computerd`), the default; or, with
//! `--kubernetes-stream-computerd PATH`, this host's static computerd is
//! streamed into the pod's memory-backed emptyDir through exec once the
//! pod runs, while the container's shell waits for it ([`stream`]). The
//! image needs `/bin/sh`, which makes init's socket directory
//! 0700 (an emptyDir is 0777, which init refuses) and then becomes init.
//! The hardening is read back at create and at attach, and a pod that
//! differs is refused. Our labels are Kubernetes labels where Kubernetes
//! takes the value, else a hash of it, and always annotations holding the
//! exact value; a list selects by label on the server and checks the
//! annotations. Network none is a NetworkPolicy denying the pod all
//! ingress and egress, read back, and the daemon's probe from inside;
//! open is no policy; an allowlist is a proxy pod of the computer's own
//! and two policies ([`egress`]).
//! The deadline is init's and the pod's `activeDeadlineSeconds`, so a
//! computer ends even when no server is left. The credentials (the
//! kubeconfig's or the service account's) never reach words or logs.

pub mod egress;
pub mod manifest;
pub mod network;
mod orphans;
pub mod sandbox;
pub mod stream;
pub mod words;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::daemon_backed::desktop::Made;
use computerd::client::DaemonClient;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy as KPolicy;
use kube::Api;
use kube::api::AttachParams;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

use crate::provider::{Configure, Connection};
use crate::settings::HostDefaults;
use crate::types::{
    Capabilities, ComputerRef, DaemonMode, ErrorCode, Labels, LifetimeMode, NetworkKind,
    ProviderError, Release, Result, label,
};

pub const ID: &str = "kubernetes";
/// computerd's path in an image that carries it: where a Docker computer
/// has it too, so `computerd probe` is found at the same place.
pub const DEFAULT_COMPUTERD: &str = computerd::DAEMON_PATH;
pub const DEFAULT_NAMESPACE: &str = "default";
/// The uid a computer's programs run as: none of the image's.
pub const DEFAULT_UID: u32 = 2510;
/// The longest life a computer may be given: a day (a pod's
/// `activeDeadlineSeconds` holds it too).
pub const MAX_LIFETIME_MS: u64 = 24 * 3600 * 1000;
/// How long a new pod may take to run and its daemon to answer, unless
/// `--kubernetes-start-s` says otherwise, and a deleted one to disappear
/// (its grace is 5 s; a kubelet may lag).
pub const UP_WAIT: Duration = Duration::from_secs(120);
pub const GONE_WAIT: Duration = UP_WAIT;
/// The in-cluster service account's token (Kubernetes docs, "Accessing
/// the Kubernetes API from a Pod").
pub const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// What a user sets of the Kubernetes provider: flags `--kubernetes-<key>`,
/// variables `COMPUTER_MCP_KUBERNETES_<KEY>`, keys of
/// `[providers.kubernetes]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Kubernetes provider (--provider kubernetes)")]
#[serde(deny_unknown_fields)]
pub struct KubernetesSettings {
    /// The kubeconfig naming the cluster and the credentials. [default:
    /// ~/.kube/config, else the in-cluster service account]
    #[arg(
        id = "kubernetes.kubeconfig",
        long = "kubernetes-kubeconfig",
        value_name = "PATH",
        env = "COMPUTER_MCP_KUBERNETES_KUBECONFIG"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace computers are made in. [default: the kubeconfig
    /// context's, else default]
    #[arg(
        id = "kubernetes.namespace",
        long = "kubernetes-namespace",
        value_name = "NAME",
        env = "COMPUTER_MCP_KUBERNETES_NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// The image every computer runs; it must carry the static computerd
    /// at --kubernetes-computerd and have /bin/sh.
    #[arg(
        id = "kubernetes.image",
        long = "kubernetes-image",
        value_name = "IMAGE",
        env = "COMPUTER_MCP_KUBERNETES_IMAGE"
    )]
    pub image: Option<String>,
    /// computerd's path in the image. [default: /opt/computerd/computerd]
    #[arg(
        id = "kubernetes.computerd",
        long = "kubernetes-computerd",
        value_name = "PATH",
        env = "COMPUTER_MCP_KUBERNETES_COMPUTERD"
    )]
    pub computerd: Option<String>,
    /// This host's static computerd, streamed into every pod through exec
    /// (for an image with /bin/sh and no computerd of its own) instead of
    /// taken from the image. [default: taken from the image]
    #[arg(
        id = "kubernetes.stream_computerd",
        long = "kubernetes-stream-computerd",
        value_name = "PATH",
        env = "COMPUTER_MCP_KUBERNETES_STREAM_COMPUTERD"
    )]
    pub stream_computerd: Option<PathBuf>,
    /// The uid (and gid) a computer's programs run as. [default: 2510]
    #[arg(
        id = "kubernetes.uid",
        long = "kubernetes-uid",
        value_name = "UID",
        env = "COMPUTER_MCP_KUBERNETES_UID"
    )]
    pub uid: Option<u32>,
    /// The size of a computer's /work (an emptyDir), in MiB. [default: 1024]
    #[arg(
        id = "kubernetes.work_mb",
        long = "kubernetes-work-mb",
        value_name = "MIB",
        env = "COMPUTER_MCP_KUBERNETES_WORK_MB"
    )]
    pub work_mb: Option<u64>,
    /// How long a new pod may take to leave Pending and its daemon to
    /// answer, in seconds; past it the pod is deleted and its events
    /// quoted. [default: 120]
    #[arg(
        id = "kubernetes.start_s",
        long = "kubernetes-start-s",
        value_name = "SECONDS",
        env = "COMPUTER_MCP_KUBERNETES_START_S"
    )]
    pub start_s: Option<u64>,
    /// How a computer's pod is made: pods (a bare pod of ours), or
    /// sandbox (agent-sandbox's resources: a Sandbox, or a SandboxClaim on
    /// a SandboxWarmPool of the computer's SandboxTemplate when one
    /// exists). [default: pods]
    #[arg(
        id = "kubernetes.api",
        long = "kubernetes-api",
        value_name = "API",
        value_enum,
        env = "COMPUTER_MCP_KUBERNETES_API"
    )]
    pub api: Option<KubernetesApi>,
}

/// How the Kubernetes provider makes a computer's pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KubernetesApi {
    /// A bare pod, made and deleted by the provider.
    #[default]
    Pods,
    /// agent-sandbox (kubernetes-sigs/agent-sandbox): a `Sandbox` whose
    /// controller makes the pod, or a `SandboxClaim` on a warm pool.
    Sandbox,
}

/// Where the provider's credentials come from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    Kubeconfig(Box<kube::config::Kubeconfig>),
    InCluster,
}

pub struct KubernetesProvider {
    /// `--kubernetes-kubeconfig`, absolute.
    kubeconfig: Option<PathBuf>,
    home: Option<PathBuf>,
    /// `--kubernetes-namespace`; else the kubeconfig context's.
    namespace: Option<String>,
    image: Option<String>,
    computerd: String,
    /// `--kubernetes-stream-computerd`, absolute.
    stream: Option<PathBuf>,
    uid: u32,
    work_mb: u64,
    /// `--kubernetes-start-s`.
    start: Duration,
    /// `--kubernetes-api`.
    api: KubernetesApi,
    /// The SandboxTemplates known to exist (made or found once).
    templates: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Sandboxes, or desktops of a screen (the server's `--kind desktop`:
    /// init starts the image's Xvfb).
    made: Made,
    /// The client and the namespace, found at the first call (a server
    /// configured for Kubernetes starts without reaching a cluster).
    client: tokio::sync::OnceCell<(kube::Client, String)>,
    /// Snapshots, kept by this server through the daemon's `tar.*`.
    snapshots: Option<crate::snapshot::SnapshotStore>,
    /// The API server's address when the client's URL names it by IP
    /// (set with the client): the egress proxy's policy excepts it.
    api_ip: std::sync::OnceLock<Option<std::net::IpAddr>>,
}

impl std::fmt::Debug for KubernetesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProvider")
            .field("kubeconfig", &self.kubeconfig)
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

/// The kubeconfig to read, or the in-cluster account, in the order
/// looked at; refused in one line naming every place looked.
pub(crate) fn find_source(
    given: Option<&Path>,
    home: Option<&Path>,
    account: &Path,
) -> Result<Source> {
    let read = |p: &Path| {
        kube::config::Kubeconfig::read_from(p)
            .map(|k| Source::Kubeconfig(Box::new(k)))
            .map_err(|e| {
                ProviderError::invalid(
                    "kubeconfig",
                    format!("cannot read the kubeconfig {}: {e}", p.display()),
                )
            })
    };
    if let Some(p) = given {
        return read(p);
    }
    let default = home.map(|h| h.join(".kube/config"));
    if let Some(p) = default.as_deref().filter(|p| p.exists()) {
        return read(p);
    }
    if account.exists() {
        return Ok(Source::InCluster);
    }
    Err(ProviderError::invalid(
        "kubeconfig",
        format!(
            "no cluster to use: no --kubernetes-kubeconfig (COMPUTER_MCP_KUBERNETES_KUBECONFIG), no {}, and no in-cluster service account at {}",
            default.map_or("~/.kube/config (no HOME)".to_string(), |p| p
                .display()
                .to_string()),
            account.display()
        ),
    ))
}

impl Configure for KubernetesProvider {
    type Settings = KubernetesSettings;

    fn configure(s: KubernetesSettings, host: &HostDefaults) -> Result<Self> {
        let given = match s.kubeconfig {
            Some(p) => Some(
                host.absolute("--kubernetes-kubeconfig", p)
                    .map_err(|e| ProviderError::invalid("kubeconfig", e))?,
            ),
            None => None,
        };
        if let Some(ns) = &s.namespace {
            check_namespace(ns)?;
        }
        let stream = match s.stream_computerd {
            Some(p) => Some(
                host.absolute("--kubernetes-stream-computerd", p)
                    .map_err(|e| ProviderError::invalid("stream_computerd", e))?,
            ),
            None => None,
        };
        if stream.is_some() && s.computerd.is_some() {
            return Err(ProviderError::invalid(
                "computerd",
                "--kubernetes-computerd names computerd in the image and --kubernetes-stream-computerd streams one in: give one",
            ));
        }
        let computerd = match &stream {
            Some(_) => manifest::STREAMED.to_string(),
            None => s.computerd.unwrap_or_else(|| DEFAULT_COMPUTERD.into()),
        };
        crate::daemon_backed::check_computerd(Path::new(&computerd))?;
        let work_mb = s.work_mb.unwrap_or(1024);
        if !(16..=1_048_576).contains(&work_mb) {
            return Err(ProviderError::invalid(
                "work_mb",
                "--kubernetes-work-mb is 16 to 1048576 MiB",
            ));
        }
        let start_s = s.start_s.unwrap_or(UP_WAIT.as_secs());
        if !(1..=3600).contains(&start_s) {
            return Err(ProviderError::invalid(
                "start_s",
                "--kubernetes-start-s is 1 to 3600 seconds",
            ));
        }
        let uid = s.uid.unwrap_or(DEFAULT_UID);
        if uid == 0 {
            return Err(ProviderError::invalid(
                "uid",
                "--kubernetes-uid must not be 0: computers run as non-root",
            ));
        }
        Ok(KubernetesProvider {
            kubeconfig: given,
            home: host.home.clone(),
            namespace: s.namespace,
            image: s.image,
            computerd,
            stream,
            uid,
            work_mb,
            start: Duration::from_secs(start_s),
            api: s.api.unwrap_or_default(),
            templates: std::sync::Mutex::default(),
            made: Made {
                screen: host.desktop(),
            },
            client: tokio::sync::OnceCell::new(),
            snapshots: host.snapshot_store(ID),
            api_ip: std::sync::OnceLock::new(),
        })
    }
}

fn check_namespace(ns: &str) -> Result<()> {
    if manifest::label_value_ok(ns) && !ns.is_empty() {
        return Ok(());
    }
    Err(ProviderError::invalid(
        "namespace",
        "--kubernetes-namespace is a DNS label: 1 to 63 of a-z, 0-9 and -",
    ))
}

/// The namespace a kubeconfig's current context names, if it names one.
fn context_namespace(source: &Source) -> Option<String> {
    let Source::Kubeconfig(k) = source else {
        return None;
    };
    let current = k.current_context.clone().unwrap_or_default();
    k.contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.namespace.clone())
}

/// A failure of the API in words: its Status's message and reason (never
/// a credential), or the transport's.
pub(crate) fn api_error(doing: &str, e: kube::Error) -> ProviderError {
    match e {
        kube::Error::Api(s) => {
            let code = match s.code {
                401 => ErrorCode::Unauthorized,
                403 => ErrorCode::Refused,
                404 => ErrorCode::NotFound,
                409 => ErrorCode::Refused,
                422 | 400 => ErrorCode::Invalid,
                429 => ErrorCode::Limit,
                _ => ErrorCode::Failed,
            };
            ProviderError::new(
                code,
                format!(
                    "{doing}: the API server said {} ({}): {}",
                    s.code, s.reason, s.message
                ),
            )
        }
        other => ProviderError::new(
            ErrorCode::Unreachable,
            format!("{doing}: the API server was not reached: {other}"),
        ),
    }
}

impl KubernetesProvider {
    /// The client and the namespace, made once from the kubeconfig or
    /// the in-cluster account.
    pub(crate) async fn client(&self) -> Result<(kube::Client, String)> {
        self.client
            .get_or_try_init(|| async {
                let source = find_source(
                    self.kubeconfig.as_deref(),
                    self.home.as_deref(),
                    Path::new(SERVICE_ACCOUNT),
                )?;
                let namespace = self
                    .namespace
                    .clone()
                    .or_else(|| context_namespace(&source))
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.into());
                check_namespace(&namespace)?;
                let config = match &source {
                    Source::Kubeconfig(k) => kube::Config::from_custom_kubeconfig(
                        (**k).clone(),
                        &kube::config::KubeConfigOptions::default(),
                    )
                    .await
                    .map_err(|e| {
                        ProviderError::invalid("kubeconfig", format!("the kubeconfig: {e}"))
                    })?,
                    Source::InCluster => kube::Config::incluster().map_err(|e| {
                        ProviderError::invalid(
                            "kubeconfig",
                            format!("the in-cluster service account: {e}"),
                        )
                    })?,
                };
                let host = config.cluster_url.host().unwrap_or_default();
                let _ = self.api_ip.set(host.trim_matches(['[', ']']).parse().ok());
                let client = kube::Client::try_from(config).map_err(|e| {
                    ProviderError::failed(format!("cannot make a Kubernetes client: {e}"))
                })?;
                Ok::<_, ProviderError>((client, namespace))
            })
            .await
            .cloned()
    }

    /// The API server's address, when the client names it by IP.
    pub(crate) async fn api_address(&self) -> Result<Option<std::net::IpAddr>> {
        self.client().await?;
        Ok(self.api_ip.get().copied().flatten())
    }

    /// The namespace computers are made in.
    pub(crate) async fn namespace(&self) -> Result<String> {
        Ok(self.client().await?.1)
    }

    pub(crate) async fn pods(&self) -> Result<Api<Pod>> {
        let (c, ns) = self.client().await?;
        Ok(Api::namespaced(c, &ns))
    }

    pub(crate) async fn policies(&self) -> Result<Api<KPolicy>> {
        let (c, ns) = self.client().await?;
        Ok(Api::namespaced(c, &ns))
    }

    pub(crate) fn caps(&self) -> Capabilities {
        Capabilities {
            kind: self.made.kind(),
            os: "linux".into(),
            daemon: DaemonMode::Pid1,
            groups: self.made.groups(),
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Delete],
            max_lifetime_ms: MAX_LIFETIME_MS,
            networks: vec![NetworkKind::None, NetworkKind::Open, NetworkKind::Allow],
            network_read_back: true,
            isolation: format!(
                "a pod of its own: uid {} (runAsNonRoot), no capability, no privilege escalation, seccomp RuntimeDefault, no service account token, no host namespace, cpu/memory/ephemeral-storage limits, /work a sized emptyDir",
                self.uid
            ),
            extend: false,
            shares: crate::types::ShareWay::Copy,
        }
    }

    /// The ref of the pod `p`, as read back: our labels from its
    /// annotations (exact), running while its phase is Running and no
    /// delete is under way.
    pub(crate) fn to_ref(&self, p: &Value) -> ComputerRef {
        let meta = &p["metadata"];
        let labels: Labels = meta["annotations"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.starts_with("computer-mcp.") && *k != label::COMPUTER)
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        ComputerRef {
            provider: ID.into(),
            id: meta["name"].as_str().unwrap_or_default().to_string(),
            deadline: labels.get(label::DEADLINE).cloned().unwrap_or_default(),
            labels,
            created_at: meta["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            running: p["status"]["phase"] == "Running" && meta["deletionTimestamp"].is_null(),
            paused: false,
            home: Some(manifest::HOME.into()),
            user: Some(format!("{0}:{0}", self.uid)),
            sizes: None,
            image: p["spec"]["containers"][0]["image"]
                .as_str()
                .map(str::to_string),
            network: None,
        }
    }

    /// A connection to the pod `name`'s daemon: an exec of `computerd
    /// stdio`, its stdin and stdout the protocol's bytes.
    pub(crate) async fn open(&self, name: &str) -> Result<DaemonClient> {
        let pods = self.pods().await?;
        let ap = AttachParams {
            container: Some(manifest::CONTAINER.into()),
            stdin: true,
            stdout: true,
            stderr: false,
            tty: false,
            max_stdin_buf_size: Some(1 << 20),
            max_stdout_buf_size: Some(1 << 20),
            ..AttachParams::default()
        };
        let mut proc = pods
            .exec(name, manifest::stdio_argv(&self.computerd), &ap)
            .await
            .map_err(|e| api_error(&format!("exec of computerd stdio in pod {name}"), e))?;
        let (Some(stdin), Some(stdout)) = (proc.stdin(), proc.stdout()) else {
            return Err(ProviderError::failed("the exec gave no stdin or stdout"));
        };
        Ok(DaemonClient::from_parts(
            Held {
                inner: stdout,
                _proc: proc,
            },
            stdin,
        ))
    }
}

/// The exec's stdout, holding the exec: kube ends its stream when the
/// process handle is dropped.
struct Held<R> {
    inner: R,
    _proc: kube::api::AttachedProcess,
}

impl<R: AsyncRead + Unpin> AsyncRead for Held<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// The hello a computer's daemon must give, checked.
/// `conn`, once its daemon answers as what `made` makes, exactly.
pub(crate) fn checked(conn: Connection, name: &str, made: Made) -> Result<Connection> {
    let drift = made.drift(&conn.hello);
    crate::daemon_backed::hello::refuse_drift(conn, drift, &format!("the pod {name}"))
}

#[path = "kubernetes/provider.rs"]
mod provider_impl;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_no_cluster_to_use_it_says_every_place_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let e = find_source(None, Some(dir.path()), &dir.path().join("sa/token")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("kubeconfig"));
        assert_eq!(
            e.message,
            format!(
                "no cluster to use: no --kubernetes-kubeconfig (COMPUTER_MCP_KUBERNETES_KUBECONFIG), no {}/.kube/config, and no in-cluster service account at {}/sa/token",
                dir.path().display(),
                dir.path().display()
            )
        );
        std::fs::create_dir_all(dir.path().join("sa")).unwrap();
        std::fs::write(dir.path().join("sa/token"), "t").unwrap();
        assert!(matches!(
            find_source(None, Some(dir.path()), &dir.path().join("sa/token")),
            Ok(Source::InCluster)
        ));
    }
}
