//! Network none on a cluster, read back two ways: the pod's deny-all
//! NetworkPolicy as the API holds it, and the policy's effect from inside
//! the pod.
//!
//! A pod always has an interface besides `lo` (the CNI's `eth0`), so the
//! Docker-shaped "lo alone" check cannot hold here; what network none
//! means on a cluster is that the pod's egress is blocked. The probe
//! (`computerd probe`, run as the computer's user) therefore tries the
//! usual public targets **and the API server's own Service** by name,
//! [`API_SERVICE`] (resolved by the cluster's DNS, which a deny-all egress
//! policy also blocks). That Service is reachable from every pod of every
//! cluster unless a policy blocks it, so it is the one thing a pod under
//! a deny-all egress policy must not reach even on a cluster with no way
//! out to the internet. (Not the `KUBERNETES_SERVICE_HOST` the kubelet
//! puts in the container's environment: computerd gives the programs it
//! runs an environment of its own.) When it
//! answers, or any target does, the CNI is not enforcing the policy (the
//! Kubernetes docs, "Network Policies": "Posting NetworkPolicy to the API
//! server for a cluster that does not use a network plugin that supports
//! it will have no effect"), and the computer is refused in words saying
//! so. The interfaces are reported, not held to `lo`.

use computerd::launch::ProbeArgs;
use computerd::protocol::{DEFAULT_PROBE_TARGETS, ProbeReport};

use super::{KubernetesProvider, manifest};
use crate::daemon_backed::probe::report_of;
use crate::provider::Connection;
use crate::types::{NetworkKind, NetworkReadBack, ProviderError, Result};

/// The API server's Service as every pod reaches it, by the cluster's
/// DNS (docs, "Accessing the Kubernetes API from a Pod").
pub const API_SERVICE: &str = "kubernetes.default.svc:443";

/// The probe's argv in the pod: the public targets and the API server's
/// Service, last.
pub fn probe_argv(computerd: &str) -> Vec<String> {
    let probe = ProbeArgs {
        connect: DEFAULT_PROBE_TARGETS
            .iter()
            .chain(&[API_SERVICE])
            .map(|t| t.to_string())
            .collect(),
        diagnose: false,
    };
    std::iter::once(computerd.to_string())
        .chain(
            probe
                .to_args()
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned()),
        )
        .collect()
}

/// What a report says of a pod under a deny-all policy: the words of a
/// pass, or why it is refused. `public` is how many targets are the
/// public ones (the rest is the API server's Service).
pub fn verdict(r: &ProbeReport, public: usize) -> std::result::Result<String, String> {
    let service: Vec<&str> = r
        .results
        .iter()
        .skip(public)
        .map(|x| x.target.as_str())
        .collect();
    let wrong: Vec<&String> = r.reached.iter().chain(&r.accepted).collect();
    if wrong.is_empty() {
        let api = match service.first() {
            Some(s) => format!(" (the API server's Service {s} among them)"),
            None => String::new(),
        };
        return Ok(format!(
            "read from inside: egress blocked, none of {} targets answered{api}; its interfaces are {}",
            r.results.len(),
            r.interfaces.join(", ")
        ));
    }
    let named = wrong
        .iter()
        .map(|w| w.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let why = if wrong.iter().any(|w| service.contains(&w.as_str())) {
        "the cluster's CNI does not enforce NetworkPolicy (the API server's Service, which a deny-all policy blocks, was reached)"
    } else {
        "the cluster's CNI does not enforce the deny-all NetworkPolicy"
    };
    Err(format!("{named} answered: {why}"))
}

impl KubernetesProvider {
    /// Network none as read back: the policy, and the probe's words.
    pub(crate) async fn none_read_back(
        &self,
        name: &str,
        inside: Option<&str>,
    ) -> Result<NetworkReadBack> {
        let np = self.read_policy(name).await?;
        if !manifest::denies_all(&np, name) {
            return Err(ProviderError::refused(format!(
                "the pod {name} has no NetworkPolicy denying it all ingress and egress (it was deleted or changed)"
            )));
        }
        let mut detail = format!("NetworkPolicy {name} denies all ingress and egress");
        if let Some(i) = inside {
            detail = format!("{detail}; {i}");
        }
        Ok(NetworkReadBack {
            kind: NetworkKind::None,
            detail,
        })
    }

    /// Network none read from inside the pod: its egress blocked, the
    /// API server's Service included; the connection closed when refused.
    pub(crate) async fn probe(&self, conn: &Connection, name: &str) -> Result<String> {
        let probed = self.probe_once(conn, name).await;
        if probed.is_err() {
            conn.client.close();
        }
        tracing::info!(provider = super::ID, computer = %name, network = %probed.as_ref().map_or("refused", String::as_str), "network none read from inside");
        probed
    }

    async fn probe_once(&self, conn: &Connection, name: &str) -> Result<String> {
        let argv = probe_argv(&self.computerd);
        let report = report_of(&conn.client, argv, &format!("the pod {name}")).await?;
        verdict(&report, DEFAULT_PROBE_TARGETS.len()).map_err(|why| {
            ProviderError::refused(format!(
                "the pod {name} was asked for network none, but read from inside {why}; use a network plugin that enforces NetworkPolicy (Calico, Cilium, kube-router, ...) or network open"
            ))
            .with_field("network")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computerd::protocol::{ProbeOutcome, ProbeProtocol, ProbeResult};

    fn report(targets: &[&str], reached: &[&str]) -> ProbeReport {
        ProbeReport {
            uid: 2510,
            gid: 2510,
            kernel: "6".into(),
            interfaces: vec!["eth0".into(), "lo".into()],
            reached: reached.iter().map(|s| s.to_string()).collect(),
            accepted: Vec::new(),
            results: targets
                .iter()
                .map(|t| ProbeResult {
                    target: t.to_string(),
                    protocol: ProbeProtocol::Tcp,
                    outcome: ProbeOutcome::Refused,
                    bytes: 0,
                    detail: String::new(),
                })
                .collect(),
            verdict: None,
        }
    }

    #[test]
    fn a_pod_with_eth0_and_no_egress_holds_and_a_reached_api_service_names_the_cni() {
        let t = ["1.1.1.1:443", "10.96.0.1:443"];
        assert_eq!(
            verdict(&report(&t, &[]), 1),
            Ok("read from inside: egress blocked, none of 2 targets answered (the API server's Service 10.96.0.1:443 among them); its interfaces are eth0, lo".into())
        );
        assert_eq!(
            verdict(&report(&t, &["10.96.0.1:443"]), 1),
            Err("10.96.0.1:443 answered: the cluster's CNI does not enforce NetworkPolicy (the API server's Service, which a deny-all policy blocks, was reached)".into())
        );
        assert!(
            verdict(&report(&t, &["1.1.1.1:443"]), 1)
                .unwrap_err()
                .ends_with("does not enforce the deny-all NetworkPolicy")
        );
    }

    #[test]
    fn the_probe_tries_the_api_servers_service_last() {
        let a = probe_argv("/opt/computerd/computerd");
        assert_eq!(&a[..2], ["/opt/computerd/computerd", "probe"]);
        assert_eq!(a[a.len() - 2..], ["--connect", API_SERVICE]);
        assert_eq!(a.len(), 2 + 2 * (DEFAULT_PROBE_TARGETS.len() + 1));
    }
}
