//! Network none, read from inside: a vendor that reads back no network
//! policy we can trust to the port (E2B's `allowInternetAccess: false` is
//! IPv4's 0.0.0.0/0 alone; Daytona's block is its own word) has the
//! daemon's `computerd probe` run inside the computer, as the computer's
//! user, at create and at attach. The computer holds network none only
//! when no target answered, none accepted a connection, and its programs'
//! namespace has the loopback alone; anything else refuses it in words
//! naming what answered.

use std::sync::Arc;

use computerd::client::{ComputerClient, ComputerExt};
use computerd::launch::ProbeArgs;
use computerd::protocol::{DEFAULT_PROBE_TARGETS, ExecParams, PROBE_TOTAL_MS, ProbeReport};

use tokio_util::sync::CancellationToken;

use super::child::DAEMON;
use crate::provider::Provider;
use crate::types::{ComputerRef, NetworkKind, NetworkRead, NetworkReadBack, ProviderError, Result};

/// The probe's exec.run bound: above its longest run.
pub const PROBE_RUN_MS: u64 = PROBE_TOTAL_MS + 10_000;

/// What a report says of network none: the words of a pass, or what
/// answered.
pub fn verdict(r: &ProbeReport) -> std::result::Result<String, String> {
    let mut wrong = Vec::new();
    if !r.reached.is_empty() {
        wrong.push(format!("{} answered", r.reached.join(", ")));
    }
    if !r.accepted.is_empty() {
        wrong.push(format!(
            "{} accepted a connection (nothing came back)",
            r.accepted.join(", ")
        ));
    }
    if r.interfaces != ["lo"] {
        wrong.push(format!(
            "its interfaces are {}, not lo alone",
            r.interfaces.join(", ")
        ));
    }
    if wrong.is_empty() {
        Ok(format!(
            "read from inside: none of {} answered, lo alone",
            r.results.len()
        ))
    } else {
        Err(wrong.join("; "))
    }
}

/// Run the probe in the computer `id` of `vendor` through `client` and
/// hold it to network none: the words of the read-back, or refused.
pub async fn none_from_inside(
    client: &Arc<dyn ComputerClient>,
    vendor: &str,
    id: &str,
) -> Result<String> {
    none_from_inside_with(client, DAEMON, vendor, id).await
}

/// [`none_from_inside`] with computerd at `daemon` in the computer (an
/// image that carries it where the provider was told).
pub async fn none_from_inside_with(
    client: &Arc<dyn ComputerClient>,
    daemon: &str,
    vendor: &str,
    id: &str,
) -> Result<String> {
    let probe = ProbeArgs {
        connect: DEFAULT_PROBE_TARGETS
            .iter()
            .map(|t| t.to_string())
            .collect(),
        diagnose: false,
    };
    let mut argv = vec![daemon.to_string()];
    argv.extend(
        probe
            .to_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    let report = report_of(client, argv, &format!("the {vendor} computer {id}")).await?;
    verdict(&report).map_err(|why| {
        ProviderError::refused(format!(
            "the {vendor} computer {id} was asked for network none, but read from inside {why}"
        ))
        .with_field("network")
    })
}

/// Run the probe's `argv` in `what` ("the pod x") through `client`: its
/// report, or why there is none.
pub async fn report_of(
    client: &Arc<dyn ComputerClient>,
    argv: Vec<String>,
    what: &str,
) -> Result<ProbeReport> {
    let ran = client
        .call_typed(&ExecParams {
            argv,
            timeout_ms: Some(PROBE_RUN_MS),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            ProviderError::failed(format!("the network probe could not run in {what}: {e}"))
        })?;
    let out = String::from_utf8_lossy(&ran.stdout.0);
    serde_json::from_str(out.trim()).map_err(|e| {
        ProviderError::failed(format!(
            "the network probe in {what} printed no report ({e}): exit {:?}, {}",
            ran.exit_code,
            crate::vendor::quote(&String::from_utf8_lossy(&ran.stderr.0), None)
        ))
    })
}

/// A create's probe: the new computer `id` of `vendor` (provider
/// `provider`), reached by `conn`, held to network none from inside; the
/// words of the read-back, or refused with `conn` closed.
pub async fn at_create(
    conn: &crate::provider::Connection,
    provider: &str,
    vendor: &str,
    id: &str,
) -> Result<String> {
    let probed = none_from_inside(&conn.client, vendor, id).await;
    if probed.is_err() {
        conn.client.close();
    }
    tracing::info!(provider, computer = %id, network = %probed.as_ref().map_or("refused", String::as_str), "network none at create");
    probed
}

/// An attach's probe: a running computer `c` of `provider` is reached and
/// held to network none from inside before it is handed back; a stopped
/// or paused one is handed back as it is (it runs nothing to probe, or
/// answers nothing until resumed). The read is the ref's network.
pub async fn at_attach(
    provider: &dyn Provider,
    mut c: ComputerRef,
    vendor: &str,
    cancel: &CancellationToken,
) -> Result<ComputerRef> {
    if !c.running || c.paused {
        return Ok(c);
    }
    let conn = provider.connect(&c, cancel).await?;
    let probed = none_from_inside(&conn.client, vendor, &c.id).await;
    conn.client.close();
    let words = probed?;
    tracing::info!(provider = provider.id(), computer = %c.id, network = %words, "network none at attach");
    c.network = Some(NetworkRead::Policy(NetworkReadBack {
        kind: NetworkKind::None,
        detail: words,
    }));
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(interfaces: &[&str], reached: &[&str], accepted: &[&str]) -> ProbeReport {
        serde_json::from_value(serde_json::json!({
            "uid": 2510, "gid": 2510, "kernel": "6.1",
            "interfaces": interfaces, "reached": reached, "accepted": accepted,
            "results": [],
        }))
        .unwrap()
    }

    #[test]
    fn none_holds_only_with_nothing_answering_and_lo_alone() {
        assert!(verdict(&report(&["lo"], &[], &[])).is_ok());
        let e = verdict(&report(&["eth0", "lo"], &["1.1.1.1:443"], &["8.8.8.8:443"])).unwrap_err();
        assert_eq!(
            e,
            "1.1.1.1:443 answered; 8.8.8.8:443 accepted a connection (nothing came back); its interfaces are eth0, lo, not lo alone"
        );
        assert!(verdict(&report(&[], &[], &[])).is_err());
    }
}
