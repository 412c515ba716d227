//! A computer whose network is an allowlist, on a cluster. A sidecar
//! cannot be enforced (a NetworkPolicy selects whole pods, and a pod's
//! containers share one network namespace; init's `--own-network` needs
//! capabilities the hardening drops), so the proxy is a pod of its own:
//!
//! - The proxy pod `<computer>-egress`: the computer's image, hardened as
//!   the computer's pod is (read back with the same [`manifest::drift`]),
//!   as a uid of its own ([`proxy_uid`]), half a CPU, 256 MiB, running
//!   `computerd egress --listen 0.0.0.0:3128` (the TCP form of the proxy)
//!   with the list and the computer's deadline; its
//!   `activeDeadlineSeconds` is the computer's. It carries [`LABEL`]`=<computer>`
//!   and never `computer-mcp.computer`: it is part of its computer, never
//!   listed as one.
//! - The computer's pod runs init with `--egress-tcp <proxy IP>:3128`:
//!   init listens on 127.0.0.1:3128 in the pod, gives every program the
//!   proxy variables as on Docker, and relays each connection to the proxy.
//! - Two NetworkPolicies ([`computer_policy`], [`proxy_policy`]): the
//!   computer's pod may send only to its proxy pod's port 3128 and takes
//!   nothing in; the proxy pod takes in only its computer's connections
//!   on 3128, and sends only to the cluster's DNS (port 53) and to ports
//!   80 and 443 of the world less [`EXCEPT_V4`] and [`EXCEPT_V6`] (every
//!   private, shared, loopback and link-local range: the cluster's pod
//!   and service CIDRs and its nodes' addresses on every cluster whose
//!   addresses are private, and 169.254.169.254) and the API server's
//!   address when the kubeconfig names it by IP. The proxy refuses every
//!   such address itself too (`computerd::protocol::egress::classify_on`).
//!
//! Release deletes both pods and both policies; the sweep deletes a proxy
//! pod whose computer is gone ([`LEFTOVER_AFTER`] after it was made) and
//! a policy whose pod is gone.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use computerd::launch::{EgressArgs, Time};
use kube::api::{DeleteParams, ListParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::manifest::{self, POD_LABEL, PodPlan};
use super::{KubernetesProvider, api_error, words};
use crate::daemon_backed::aborted;
use crate::daemon_backed::probe::report_of;
use crate::types::{
    ErrorCode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Result, label,
};

/// The port the proxy listens on, in its pod.
pub const PORT: u16 = 3128;
/// On a proxy pod and its policy: the computer they belong to.
pub const LABEL: &str = "computer-mcp.egress";
/// The proxy's bounds.
pub const CPUS: f64 = 0.5;
pub const MEMORY_MB: u64 = 256;
pub const WORK_MB: u64 = 16;
/// A proxy pod with no computer pod this long past the provider's start
/// bound (`--kubernetes-start-s`) after it was made is a leftover: a
/// create makes the computer's pod as soon as its proxy has an address,
/// within that bound, and deletes the proxy when it fails.
pub const LEFTOVER_AFTER: Duration = Duration::from_secs(10);
/// How often a create asks whether the proxy listens yet.
const LISTEN_POLL: Duration = Duration::from_millis(300);
/// What the proxy's policy keeps it from, of IPv4: private (RFC 1918),
/// shared (RFC 6598), loopback and link-local (169.254.169.254 among
/// them).
pub const EXCEPT_V4: &[&str] = &[
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
];
/// Of IPv6: unique local, link-local, loopback and IPv4-mapped.
pub const EXCEPT_V6: &[&str] = &["::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10"];

/// A computer's proxy pod and its policy's name.
pub fn name_of(computer: &str) -> String {
    format!("{computer}-egress")
}

/// The proxy's uid: one past the computer's (never the computer's own).
pub fn proxy_uid(uid: u32) -> u32 {
    uid.checked_add(1).unwrap_or(uid - 1)
}

/// The list of an allowlist policy, checked and normalized; None for none
/// and open.
pub fn list_of(policy: &NetworkPolicy) -> Result<Option<Vec<String>>> {
    Ok(crate::daemon_backed::network::allowlist_of(policy)?.map(|l| l.entries()))
}

/// The proxy pod of the computer `plan` for the list `allow`: the
/// computer's pod made again with the proxy's name, uid, bounds, labels
/// and command.
pub fn proxy_pod(plan: &PodPlan, allow: &[String]) -> Value {
    let p = proxy_plan(plan);
    let listen = SocketAddr::from(([0, 0, 0, 0], PORT));
    let args = EgressArgs::tcp(allow.to_vec(), plan.deadline, listen)
        .to_args()
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut pod = p.pod();
    pod["spec"]["containers"][0]["command"] = json!(p.command_of(args));
    pod["spec"]["containers"][0]["env"] = json!([{"name": "COMPUTERD_LOG", "value": "info"}]);
    pod
}

/// The computer `plan`'s proxy as a plan of its own (its name, uid,
/// bounds and labels).
pub fn proxy_plan(plan: &PodPlan) -> PodPlan {
    let mut p = plan.clone();
    p.name = name_of(&plan.name);
    p.uid = proxy_uid(plan.uid);
    p.cpus = CPUS;
    p.memory_mb = MEMORY_MB;
    p.work_mb = WORK_MB;
    p.warm = false;
    p.egress = None;
    p.labels = [
        (LABEL.to_string(), plan.name.clone()),
        (label::DEADLINE.to_string(), plan.deadline.to_string()),
    ]
    .into();
    p.made = crate::daemon_backed::desktop::Made { screen: None };
    p
}

/// The list a proxy pod's command holds (its `--allow=` words).
pub fn list_in(pod: &Value) -> Vec<String> {
    pod["spec"]["containers"][0]["command"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str()?.strip_prefix("--allow="))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn selects(name: &str) -> Value {
    json!({"matchLabels": {POD_LABEL: name}})
}

fn tcp(port: u16) -> Value {
    json!({"protocol": "TCP", "port": port})
}

fn metadata(name: &str, computer: &str) -> Value {
    json!({"name": name, "labels": {label::COMPUTER: "1", LABEL: computer}})
}

/// The computer's policy (named as its pod): no ingress, and egress to
/// its proxy pod's port alone.
pub fn computer_policy(computer: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(computer, computer),
        "spec": {
            "podSelector": selects(computer),
            "policyTypes": ["Ingress", "Egress"],
            "egress": [{"to": [{"podSelector": selects(&name_of(computer))}], "ports": [tcp(PORT)]}],
        },
    })
}

/// The proxy's policy (named as its pod): ingress from its computer's
/// pod on its port alone; egress to the cluster's DNS, and to ports 80
/// and 443 of the world less the private ranges and `api` (the API
/// server's address, when known as one).
pub fn proxy_policy(computer: &str, api: Option<IpAddr>) -> Value {
    let mut v4: Vec<String> = EXCEPT_V4.iter().map(|s| s.to_string()).collect();
    let mut v6: Vec<String> = EXCEPT_V6.iter().map(|s| s.to_string()).collect();
    match api_except(api) {
        Some(IpAddr::V4(a)) => v4.push(format!("{a}/32")),
        Some(IpAddr::V6(a)) => v6.push(format!("{a}/128")),
        None => {}
    }
    let proxy = name_of(computer);
    // The cluster's DNS, as every cluster labels it (kube-dns, CoreDNS
    // included) in kube-system.
    let dns = json!({
        "to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }],
        "ports": [{"protocol": "UDP", "port": 53}, tcp(53)],
    });
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(&proxy, computer),
        "spec": {
            "podSelector": selects(&proxy),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": selects(computer)}], "ports": [tcp(PORT)]}],
            "egress": [
                dns,
                {
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}},
                        {"ipBlock": {"cidr": "::/0", "except": v6}},
                    ],
                    "ports": [tcp(80), tcp(443)],
                },
            ],
        },
    })
}

/// The API server's address as an exception of its own: None when a
/// range of [`EXCEPT_V4`] or [`EXCEPT_V6`] already holds it.
pub fn api_except(api: Option<IpAddr>) -> Option<IpAddr> {
    let a = api?;
    let held = EXCEPT_V4
        .iter()
        .chain(EXCEPT_V6)
        .any(|c| computerd::protocol::egress::Cidr::parse(c).is_ok_and(|c| c.contains(a)));
    (!held).then_some(a)
}

/// Whether `np` (as read back) is `want` (as written): the same selector,
/// types and rules.
pub fn holds(np: &Value, want: &Value) -> bool {
    np["spec"] == want["spec"]
}

/// The proxy pod `p` (as read back) differs from what its computer needs:
/// the hardening, its computer, a list, and running; in words.
pub fn proxy_drift(p: &Value, computer: &str, uid: u32) -> Vec<String> {
    let mut d = manifest::drift(p, proxy_uid(uid));
    if p["metadata"]["labels"][LABEL] != json!(computer) {
        d.push(format!("the label {LABEL}={computer}"));
    }
    if list_in(p).is_empty() {
        d.push("a list in its command".into());
    }
    if p["status"]["phase"] != json!("Running") || !p["metadata"]["deletionTimestamp"].is_null() {
        d.push(format!(
            "running (it is {})",
            p["status"]["phase"].as_str().unwrap_or("unknown")
        ));
    }
    d
}

impl KubernetesProvider {
    /// The proxy of the computer `plan` for `allow`: both policies, then
    /// its pod, up with an address: the address init relays to. On
    /// failure the caller deletes (release takes the proxy with it).
    pub(crate) async fn make_egress(
        &self,
        plan: &PodPlan,
        allow: &[String],
        cancel: &CancellationToken,
    ) -> Result<SocketAddr> {
        let api = self.api_address().await?;
        self.create_policy(
            computer_policy(&plan.name),
            "the computer's egress NetworkPolicy",
        )
        .await?;
        self.create_policy(
            proxy_policy(&plan.name, api),
            "the egress proxy's NetworkPolicy",
        )
        .await?;
        let pp = proxy_plan(plan);
        self.create_pod(&pp, proxy_pod(plan, allow)).await?;
        let ip = self.until_address(&pp.name, &pp.image, cancel).await?;
        Ok(SocketAddr::new(ip, PORT))
    }

    /// Until the proxy at `at` answers on its port, read from inside the
    /// computer `name` (reached by `conn`): `computerd probe` sends it an
    /// HTTP HEAD, which the proxy answers (refusing it). A pod reads
    /// Running once its process starts, not once it listens, and init's
    /// relay answers 502 until the proxy does; so a create returns only
    /// once the first connection would be served. Bounded by
    /// `--kubernetes-start-s` from the computer's hello.
    pub(crate) async fn until_proxy_listens(
        &self,
        conn: &crate::provider::Connection,
        name: &str,
        at: SocketAddr,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let until = tokio::time::Instant::now() + self.start;
        let proxy = name_of(name);
        let argv = vec![
            self.computerd.clone(),
            "probe".into(),
            "--connect".into(),
            at.to_string(),
        ];
        let mut last = String::from("it was not asked");
        loop {
            if cancel.is_cancelled() {
                return Err(aborted("waiting for the egress proxy to listen"));
            }
            let r = report_of(&conn.client, argv.clone(), &format!("the pod {name}")).await?;
            if !r.reached.is_empty() {
                return Ok(());
            }
            if let Some(x) = r.results.first() {
                last = x.detail.clone();
            }
            if tokio::time::Instant::now() + LISTEN_POLL >= until {
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the egress proxy pod {proxy} runs but did not answer on {at} within {} s (--kubernetes-start-s), read from inside the computer {name}: {last}",
                        self.start.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(LISTEN_POLL).await;
        }
    }

    /// The pod `name`'s address once it runs (computerd streamed in
    /// first, when it is).
    async fn until_address(
        &self,
        name: &str,
        image: &str,
        cancel: &CancellationToken,
    ) -> Result<IpAddr> {
        let until = tokio::time::Instant::now() + self.start;
        let mut streamed = self.stream.is_none();
        let mut last = String::from("it did not start");
        while tokio::time::Instant::now() < until {
            if cancel.is_cancelled() {
                return Err(aborted("making the egress proxy pod"));
            }
            let p = self.read(name).await?.ok_or_else(|| {
                ProviderError::new(
                    ErrorCode::Gone,
                    format!("the egress proxy pod {name} vanished while starting"),
                )
            })?;
            match p["status"]["phase"].as_str() {
                Some("Running") if !streamed => {
                    self.stream_in(name).await?;
                    streamed = true;
                    continue;
                }
                Some("Running") => match p["status"]["podIP"].as_str().map(str::parse) {
                    Some(Ok(ip)) => return Ok(ip),
                    _ => last = "it runs with no address yet".into(),
                },
                Some("Pending") | None => last = words::pending_status(&p),
                Some(_) => return Err(words::ended(&p, name, image, &self.computerd)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the egress proxy pod {name} did not come up within {} s (--kubernetes-start-s): {last}",
                self.start.as_secs()
            ),
        ))
    }

    /// The policy `name` as the API holds it (Null when there is none).
    pub(crate) async fn read_policy(&self, name: &str) -> Result<Value> {
        let np = self
            .policies()
            .await?
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("reading the NetworkPolicy {name}"), e))?;
        Ok(np
            .map(|n| serde_json::to_value(&n).unwrap_or(Value::Null))
            .unwrap_or(Value::Null))
    }

    /// The list of the computer's proxy pod, as read back and held to
    /// what it was made; refused in words when it is not.
    pub(crate) async fn proxy_list(&self, computer: &str) -> Result<Vec<String>> {
        let proxy = name_of(computer);
        let p = self.read(&proxy).await?.ok_or_else(|| {
            ProviderError::refused(format!(
                "the egress proxy pod {proxy} of the computer {computer} is gone: its network reaches nothing; delete the computer"
            ))
        })?;
        let d = proxy_drift(&p, computer, self.uid);
        if !d.is_empty() {
            return Err(ProviderError::refused(format!(
                "the egress proxy pod {proxy} is not as it was made (changed behind our back): it lacks {}; delete the computer",
                d.join(", ")
            )));
        }
        Ok(list_in(&p))
    }

    /// An allowlist as read back: both policies as written, and the
    /// proxy pod hardened, running and holding the list.
    pub(crate) async fn allow_read_back(&self, computer: &str) -> Result<NetworkReadBack> {
        let proxy = name_of(computer);
        let api = self.api_address().await?;
        for (name, want) in [
            (computer, computer_policy(computer)),
            (proxy.as_str(), proxy_policy(computer, api)),
        ] {
            if !holds(&self.read_policy(name).await?, &want) {
                return Err(ProviderError::refused(format!(
                    "the NetworkPolicy {name} of the allowlisted computer {computer} is not as it was made (deleted or changed): its network is not what was asked; delete the computer"
                )));
            }
        }
        let list = self.proxy_list(computer).await?;
        let api = api_except(api)
            .map(|a| format!(" and the API server's {a}"))
            .unwrap_or_default();
        Ok(NetworkReadBack {
            kind: NetworkKind::Allow,
            detail: format!(
                "NetworkPolicy {computer} lets the pod send only to its egress proxy pod {proxy} on port {PORT}, which reaches {} on ports 80 and 443; NetworkPolicy {proxy} lets the proxy reach the cluster's DNS and the world less the private, shared, loopback and link-local ranges{api}",
                list.join(", ")
            ),
        })
    }

    /// The proxy pod and policy of the computer `name` deleted (none is
    /// no error).
    pub(crate) async fn delete_egress(&self, name: &str) -> Result<()> {
        let proxy = name_of(name);
        match self
            .policies()
            .await?
            .delete(&proxy, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(api_error(&format!("deleting the NetworkPolicy {proxy}"), e)),
        }
        match self
            .pods()
            .await?
            .delete(&proxy, &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_error(
                &format!("deleting the egress proxy pod {proxy}"),
                e,
            )),
        }
    }

    /// Every proxy pod whose computer pod is not in `computers` (and is
    /// older than the start bound and [`LEFTOVER_AFTER`], or ended)
    /// deleted with its policy; the names of those left.
    pub(crate) async fn sweep_egress(
        &self,
        computers: &HashSet<String>,
        cancel: &CancellationToken,
    ) -> Result<HashSet<String>> {
        let listed = self
            .pods()
            .await?
            .list(&ListParams::default().labels(LABEL))
            .await
            .map_err(|e| api_error("listing egress proxy pods", e))?;
        let mut kept = HashSet::new();
        for p in listed.items {
            let p = serde_json::to_value(&p).unwrap_or(Value::Null);
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let of = p["metadata"]["labels"][LABEL].as_str().unwrap_or_default();
            let made: Option<Time> = p["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok());
            let old = made.is_none_or(|m| {
                m.get() + self.start + LEFTOVER_AFTER < time::OffsetDateTime::now_utc()
            });
            let ended = matches!(p["status"]["phase"].as_str(), Some("Failed" | "Succeeded"));
            if computers.contains(of) || !(old || ended) {
                kept.insert(name);
                continue;
            }
            if cancel.is_cancelled() {
                return Err(aborted("the sweep"));
            }
            self.delete_egress(of).await?;
            tracing::info!(%name, computer = %of, "the sweep deleted an egress proxy pod whose computer is gone");
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon_backed::desktop::Made;
    use computerd::launch::Time;

    fn plan() -> PodPlan {
        PodPlan {
            name: "cmcp-0a1b2c3d4e5f".into(),
            image: "img".into(),
            computerd: "/opt/computerd/computerd".into(),
            uid: 2510,
            deadline: "2026-12-07T05:00:00Z".parse::<Time>().unwrap(),
            lifetime_s: 600,
            labels: Default::default(),
            cpus: 1.0,
            memory_mb: 1024,
            work_mb: 256,
            streamed: false,
            warm: false,
            made: Made { screen: None },
            egress: Some("10.244.1.7:3128".parse().unwrap()),
        }
    }

    #[test]
    fn the_proxy_pod_is_hardened_as_a_computer_and_runs_the_tcp_proxy_with_the_list() {
        let mut pod = proxy_pod(&plan(), &["good.eg.test".into(), "*.pypi.org".into()]);
        pod["status"]["phase"] = json!("Running");
        pod["metadata"]["labels"][LABEL] = json!("cmcp-0a1b2c3d4e5f");
        assert_eq!(
            proxy_drift(&pod, "cmcp-0a1b2c3d4e5f", 2510),
            Vec::<String>::new()
        );
        assert_eq!(pod["metadata"]["name"], "cmcp-0a1b2c3d4e5f-egress");
        assert!(pod["metadata"]["labels"][label::COMPUTER].is_null());
        assert_eq!(
            pod["metadata"]["labels"][POD_LABEL],
            "cmcp-0a1b2c3d4e5f-egress"
        );
        assert_eq!(pod["spec"]["securityContext"]["runAsUser"], 2511);
        assert_eq!(pod["spec"]["activeDeadlineSeconds"], 600);
        let cmd: Vec<&str> = pod["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            cmd[3..],
            [
                "/opt/computerd/computerd",
                "egress",
                "--allow=good.eg.test",
                "--allow=*.pypi.org",
                "--deadline",
                "2026-12-07T05:00:00Z",
                "--listen",
                "0.0.0.0:3128"
            ]
        );
        assert_eq!(list_in(&pod), ["good.eg.test", "*.pypi.org"]);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"],
            json!({"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "16Mi"})
        );
        // A computer of uid 2511 is not this proxy's: its uid is named.
        assert_eq!(
            proxy_drift(&pod, "cmcp-0a1b2c3d4e5f", 2511),
            ["runAsUser 2512"]
        );
        pod["status"]["phase"] = json!("Failed");
        assert_eq!(
            proxy_drift(&pod, "other", 2510),
            [
                "the label computer-mcp.egress=other",
                "running (it is Failed)"
            ]
        );
    }

    #[test]
    fn the_computer_relays_to_its_proxy() {
        let c = plan().command();
        let i = c.iter().position(|a| a == "--egress-tcp").unwrap();
        assert_eq!(c[i + 1], "10.244.1.7:3128");
    }

    #[test]
    fn a_policy_differing_from_what_was_written_does_not_hold() {
        let p = computer_policy("c");
        assert!(holds(&p, &computer_policy("c")));
        assert!(!holds(&p, &computer_policy("d")));
        let mut wider = proxy_policy("c", None);
        wider["spec"]["egress"][1]["ports"] = json!([]);
        assert!(!holds(&wider, &proxy_policy("c", None)));
        // The API server's address is excepted once, unless a private
        // range already holds it.
        let with = proxy_policy("c", Some("203.0.113.9".parse().unwrap()));
        let except = &with["spec"]["egress"][1]["to"][0]["ipBlock"]["except"];
        assert_eq!(except.as_array().unwrap().last().unwrap(), "203.0.113.9/32");
        assert_eq!(
            proxy_policy("c", Some("10.96.0.1".parse().unwrap())),
            proxy_policy("c", None)
        );
    }
}
