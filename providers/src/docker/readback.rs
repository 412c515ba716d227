//! A Docker computer read back from the engine: found by name or id,
//! inspected, its [`Plan`] read back from its own report and held to what
//! check allows, its ref and its network.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};
use computerd::launch::Time;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use super::lifecycle::deadline_ms;
use super::{DockerProvider, Plan, SKEW_MS, direct, egress, host, plan};
use crate::daemon_backed::aborted;
use crate::daemon_backed::labels::carries;
use crate::share::{Share, WORKSPACE};
use crate::sizing::{CPU_PERIOD_US, Limits};
use crate::types::{
    ComputerRef, Labels, NetworkKind, NetworkReadBack, ProviderError, Result, label,
};

impl DockerProvider {
    /// Find one of our computers by its name or container id, inspected.
    pub(super) async fn find(&self, docker: &Docker, id: &str) -> Result<Value> {
        let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
        let ok = plan::is_computer_name(id) || ((12..=64).contains(&id.len()) && hex(id));
        if !ok {
            return Err(ProviderError::not_found(format!(
                "{id:?} is not a Docker computer's name (computer-<12 hex digits>) or a container id"
            )));
        }
        let i = docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| {
                if host::is_not_found(&e) {
                    ProviderError::not_found(format!("no Docker computer {id}"))
                } else {
                    host::docker_error(&self.shown_socket(), "inspecting the computer", e)
                }
            })?;
        let v = serde_json::to_value(&i)
            .map_err(|e| ProviderError::failed(format!("reading the inspect: {e}")))?;
        let ours = v["Config"]["Labels"][label::COMPUTER].as_str() == Some("1")
            && plan::is_computer_name(name_of(&v));
        if !ours {
            return Err(ProviderError::not_found(format!(
                "the container {id} is not a computer this provider made"
            )));
        }
        Ok(v)
    }

    /// The plan a container was made from, read back from its own report
    /// and held to what check allows.
    pub(super) fn plan_of(&self, v: &Value) -> std::result::Result<Plan, Vec<String>> {
        let mut bad = Vec::new();
        let cfg = &v["Config"];
        let labels = labels_of(v);
        let deadline = deadline_of(&labels, &mut bad);
        let user = match cfg["User"].as_str().map(|u| plan::parse_user("user", u)) {
            Some(Ok(u)) => u,
            _ => {
                bad.push(format!("Config.User is {}, not uid:gid", cfg["User"]));
                (0, 0)
            }
        };
        let egress = egress_of(&labels, &mut bad);
        let network = network_of(&v["HostConfig"], egress.is_some(), &mut bad);
        let direct = self.direct_of(v, &mut bad);
        let display = self.display_of(cfg, &mut bad);
        let p = Plan {
            name: name_of(v).to_string(),
            image: cfg["Image"].as_str().unwrap_or_default().to_string(),
            user,
            network,
            limits: limits_of(&v["HostConfig"]),
            deadline,
            labels,
            daemon: mounted_at(v, plan::DAEMON_PATH)
                .and_then(|m| m["Source"].as_str())
                .map(PathBuf::from)
                .unwrap_or_default(),
            shares: shares_of(v),
            display,
            egress,
            direct,
        };
        self.hold_to_check(&p, v, &mut bad);
        if bad.is_empty() { Ok(p) } else { Err(bad) }
    }

    /// A computer's own direct directory, bound where this provider binds
    /// it.
    fn direct_of(&self, v: &Value, bad: &mut Vec<String>) -> Option<PathBuf> {
        let direct = mounted_at(v, plan::DIRECT_MOUNT)
            .map(|m| PathBuf::from(m["Source"].as_str().unwrap_or_default()));
        if let Some(d) = &direct {
            let own = direct::dir_of(&self.opts.cache_dir, name_of(v));
            if *d != own {
                bad.push(format!(
                    "{} is bound from {}, where this provider binds a computer's own directory {} there",
                    plan::DIRECT_MOUNT,
                    d.display(),
                    own.display()
                ));
            }
        }
        direct
    }

    /// A desktop's display (init's `--display`), where this provider makes
    /// desktops, and none where it makes sandboxes.
    fn display_of(&self, cfg: &Value, bad: &mut Vec<String>) -> Option<String> {
        let cmd: Vec<&str> = cfg["Cmd"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let display = cmd
            .windows(2)
            .find(|w| w[0] == "--display")
            .map(|w| w[1].to_string());
        match (&display, self.opts.desktop) {
            (Some(d), None) => bad.push(format!(
                "it is a desktop (display {d}), where this provider makes sandboxes"
            )),
            (None, Some(_)) => bad.push(
                "it is not a desktop (no DISPLAY), where this provider makes desktops".into(),
            ),
            _ => {}
        }
        display
    }

    /// The sizes as check allows them on this host, and a deadline no
    /// further from its making than this provider lets a computer live.
    fn hold_to_check(&self, p: &Plan, v: &Value, bad: &mut Vec<String>) {
        let size = self.host.get().map(|h| h.size);
        if let Some(size) = size
            && let Err(e) = p.limits.check(&size)
        {
            bad.push(e.message);
        }
        let created = created_ms(v);
        let limit = created.saturating_add(self.opts.max_lifetime_ms as i64 + SKEW_MS);
        if deadline_ms(&p.deadline) > limit {
            bad.push(format!(
                "its deadline {} is more than {} days after it was made",
                p.deadline,
                self.opts.max_lifetime_ms / 86_400_000
            ));
        }
    }

    pub(super) fn to_ref(&self, v: &Value) -> ComputerRef {
        let labels = labels_of(v);
        ComputerRef {
            provider: "docker".into(),
            id: name_of(v).to_string(),
            deadline: labels.get(label::DEADLINE).cloned().unwrap_or_default(),
            labels,
            created_at: format_ms(created_ms(v)),
            running: v["State"]["Running"].as_bool().unwrap_or(false),
            paused: v["State"]["Paused"].as_bool().unwrap_or(false),
            home: Some(plan::HOME.into()),
            user: v["Config"]["User"].as_str().map(String::from),
            sizes: sizes_of(v),
            image: v["Config"]["Image"].as_str().map(String::from),
            network: None,
        }
    }

    /// A computer's network, read back from docker inspect (`v`), and for
    /// an allowlist from its proxy and volume too.
    pub(super) async fn read_net(&self, docker: &Docker, v: &Value) -> Result<NetworkReadBack> {
        if v["Config"]["Labels"][egress::LIST_LABEL].is_null() {
            return read_network(v);
        }
        let plan = self.plan_of(v).map_err(|why| {
            ProviderError::refused(format!(
                "the Docker computer {} has network allow, but it is not what this provider makes: {}",
                name_of(v),
                why.join("; ")
            ))
            .with_field("network")
        })?;
        self.read_egress(docker, v, &plan).await
    }

    /// The computers `list` sees, inspected (50 at a time).
    pub(super) async fn listed(
        &self,
        labels: &Labels,
        cancel: &CancellationToken,
    ) -> Result<Vec<Value>> {
        let docker = self.engine()?;
        let mut filters = vec![format!("{}=1", label::COMPUTER)];
        filters.extend(labels.iter().map(|(k, v)| format!("{k}={v}")));
        let opts = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&HashMap::from([("label", filters)]))
            .build();
        let found = tokio::select! {
            r = docker.list_containers(Some(opts)) => r.map_err(self.err("listing computers"))?,
            _ = cancel.cancelled() => return Err(aborted("listing computers")),
        };
        let mut out = Vec::new();
        for chunk in found.chunks(50) {
            let reads = chunk.iter().filter_map(|c| c.id.clone()).map(|id| {
                let docker = docker.clone();
                async move {
                    docker
                        .inspect_container(&id, None::<InspectContainerOptions>)
                        .await
                }
            });
            for r in futures::future::join_all(reads).await {
                // A computer gone between the list and the inspect is left out.
                let Ok(i) = r else { continue };
                let Ok(v) = serde_json::to_value(&i) else {
                    continue;
                };
                if plan::is_computer_name(name_of(&v))
                    && carries(labels, |k| v["Config"]["Labels"][k].as_str())
                {
                    out.push(v);
                }
            }
        }
        out.sort_by_key(created_ms);
        Ok(out)
    }
}

/// A container's labels, as its inspect shows them.
fn labels_of(v: &Value) -> Labels {
    v["Config"]["Labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The deadline its label holds (now, and a word in `bad`, when none).
fn deadline_of(labels: &Labels, bad: &mut Vec<String>) -> Time {
    match labels
        .get(label::DEADLINE)
        .and_then(|d| d.parse::<Time>().ok())
    {
        Some(d) => d,
        None => {
            bad.push(format!(
                "the label {} is missing or not an RFC 3339 time",
                label::DEADLINE
            ));
            Time::from_now(Duration::ZERO)
        }
    }
}

/// The allowlist its label holds, as create writes one.
fn egress_of(labels: &Labels, bad: &mut Vec<String>) -> Option<Vec<String>> {
    let egress = labels
        .get(egress::LIST_LABEL)
        .map(|l| egress::list_in_label(l));
    if let Some(l) = &egress {
        match computerd::protocol::egress::Allowlist::parse(l) {
            Ok(list) if list.entries() == *l => {}
            _ => bad.push(format!(
                "its label {} holds {:?}, which is no network list create writes",
                egress::LIST_LABEL,
                l.join(",")
            )),
        }
    }
    egress
}

/// The network its mode says: none (an allowlist's too) or the default
/// bridge.
fn network_of(hc: &Value, allowlisted: bool, bad: &mut Vec<String>) -> NetworkKind {
    let network = match hc["NetworkMode"].as_str() {
        Some("none") if allowlisted => NetworkKind::Allow,
        Some("none") => NetworkKind::None,
        Some("bridge") | Some("default") => NetworkKind::Open,
        _ => {
            bad.push(format!(
                "HostConfig.NetworkMode is {}, where a computer is on \"none\" or the default \"bridge\"",
                hc["NetworkMode"]
            ));
            NetworkKind::None
        }
    };
    if allowlisted && network != NetworkKind::Allow {
        bad.push(format!(
            "it carries a network list ({}) but is on network mode {}, where an allowlisted computer is on \"none\"",
            egress::LIST_LABEL,
            hc["NetworkMode"]
        ));
    }
    network
}

/// Its CPU quota, memory and pids limit, as the engine holds them.
fn limits_of(hc: &Value) -> Limits {
    let memory = hc["Memory"].as_i64().unwrap_or(0).max(0) as u64 / (1024 * 1024);
    let quota = hc["CpuQuota"].as_i64().unwrap_or(0);
    Limits {
        cpus: quota as f64 / CPU_PERIOD_US as f64,
        memory_mb: memory,
        pids: hc["PidsLimit"].as_i64().unwrap_or(0).max(0) as u64,
    }
}

/// The mount at `target`.
fn mounted_at<'a>(v: &'a Value, target: &str) -> Option<&'a Value> {
    v["HostConfig"]["Mounts"]
        .as_array()?
        .iter()
        .find(|m| m["Target"].as_str() == Some(target))
}

/// The shares: the mounts at or under /workspace.
fn shares_of(v: &Value) -> Vec<Share> {
    v["HostConfig"]["Mounts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|m| {
                    m["Target"]
                        .as_str()
                        .is_some_and(|t| t == WORKSPACE || t.starts_with(&format!("{WORKSPACE}/")))
                })
                .map(|m| Share {
                    source: m["Source"].as_str().unwrap_or_default().into(),
                    target: m["Target"].as_str().unwrap_or_default().into(),
                    read_only: m["ReadOnly"].as_bool().unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn name_of(v: &Value) -> &str {
    v["Name"].as_str().unwrap_or("").trim_start_matches('/')
}

pub(super) fn created_ms(v: &Value) -> i64 {
    v["Created"]
        .as_str()
        .and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok())
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(0)
}

fn format_ms(ms: i64) -> String {
    Time::from_unix_ms(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The network, read back from docker inspect: none is network mode none
/// on Docker's own none network alone (only lo inside); open the default
/// bridge alone; anything else is refused in words, never a policy.
pub fn read_network(v: &Value) -> Result<NetworkReadBack> {
    if let Some(l) = v["Config"]["Labels"][egress::LIST_LABEL].as_str() {
        return Err(ProviderError::refused(format!(
            "the computer's network is the allowlist {l}, which is read back with its egress proxy (DockerProvider::network), not from its inspect alone"
        ))
        .with_field("network"));
    }
    let mode = v["HostConfig"]["NetworkMode"].as_str().unwrap_or("");
    let nets: Vec<String> = v["NetworkSettings"]["Networks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    match (mode, nets.as_slice()) {
        ("none", [n]) if n == "none" => Ok(NetworkReadBack {
            kind: NetworkKind::None,
            detail: "docker network mode none: only lo inside; no route out".into(),
        }),
        ("bridge" | "default", [n]) if n == "bridge" => Ok(NetworkReadBack {
            kind: NetworkKind::Open,
            detail: "Docker's default bridge alone".into(),
        }),
        _ => Err(ProviderError::refused(format!(
            "the computer's network is network mode {mode:?} on {nets:?}, which is none of the policies"
        ))
        .with_field("network")),
    }
}

/// The bounds an inspect shows the engine holds the container to: its CPU
/// quota, memory (with swap the same, so no swap) and pids limit; none
/// when any is unbounded.
pub(super) fn sizes_of(v: &Value) -> Option<crate::SizesReadBack> {
    let h = &v["HostConfig"];
    let quota = h["CpuQuota"].as_u64().filter(|n| *n > 0)?;
    let period = h["CpuPeriod"].as_u64().filter(|n| *n > 0)?;
    let memory = h["Memory"].as_u64().filter(|m| *m > 0)?;
    let pids = h["PidsLimit"].as_u64().filter(|p| *p > 0)?;
    if h["MemorySwap"].as_u64() != Some(memory) {
        return None;
    }
    Some(crate::SizesReadBack {
        cpus: quota as f64 / period as f64,
        memory_mb: memory / (1024 * 1024),
        pids,
    })
}
