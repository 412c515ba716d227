//! An allowlisted computer's egress read back: its proxy container and
//! socket volume held to their [`EgressPlan`], one sentence per way they
//! are not what create makes.

use std::net::IpAddr;

use computerd::protocol::egress::Allowlist;
use serde_json::Value;

use super::{
    EgressPlan, LABEL, LOG_MAX_FILE, LOG_MAX_SIZE, MOUNT, NETWORK, NOFILE, SOCKET, name_of,
};
use crate::docker::drift::{self, Section, Whose, strs};
use crate::docker::host::Host;
use crate::docker::plan::{DAEMON_PATH, NO_NEW_PRIVILEGES};
use crate::types::{ProviderError, Result, label};

/// The held `--host-address` values of an argv.
fn held_addresses(cmd: &[String]) -> Vec<IpAddr> {
    cmd.windows(2)
        .filter(|w| w[0] == "--host-address")
        .filter_map(|w| w[1].parse().ok())
        .collect()
}

/// HostConfig fields a proxy may hold beside those checked: Docker's own
/// fills and what cannot widen it.
const IRRELEVANT_HOST: &[&str] = &["ConsoleSize", "ContainerIDFile", "ShmSize"];

/// The proxy container (`inspected`, docker inspect as JSON) against its
/// plan, `required` the host addresses it must refuse now, on `host`; one
/// sentence per way it is not what create makes. `running`: whether its
/// computer runs (the proxy must then run too).
pub fn proxy_drift(
    plan: &EgressPlan,
    inspected: &Value,
    required: &[IpAddr],
    host: &Host,
    running: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let name = inspected
        .get("Name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_start_matches('/');
    if name != plan.name() {
        out.push(format!("is named {name:?}, not {:?}", plan.name()));
    }
    if running && inspected["State"]["Running"].as_bool() != Some(true) {
        out.push(format!(
            "is not running (it is {}): the computer reaches nothing",
            inspected["State"]["Status"].as_str().unwrap_or("gone")
        ));
    }
    out.extend(proxy_host_config(plan, inspected));
    out.extend(proxy_config(plan, inspected, required));
    out.extend(proxy_network(inspected));
    out.extend(
        drift::confinement_drift(inspected, host)
            .into_iter()
            .map(|s| format!("has {s}")),
    );
    out
}

/// HostConfig, closed: every hardening flag and bound of the plan's body.
fn proxy_host_config(plan: &EgressPlan, inspected: &Value) -> Vec<String> {
    let mut hc = Section::new(inspected, "HostConfig", Whose::Proxy, IRRELEVANT_HOST);
    let body = serde_json::to_value(plan.body()).unwrap_or(Value::Null);
    let want_hc = &body["HostConfig"];
    let cap_drop = strs(hc.get("CapDrop")) == ["ALL"];
    hc.want("CapDrop", cap_drop, "[\"ALL\"]");
    let security = strs(hc.get("SecurityOpt")) == [NO_NEW_PRIVILEGES];
    hc.want(
        "SecurityOpt",
        security,
        format!("[\"{NO_NEW_PRIVILEGES}\"]"),
    );
    for (k, must) in [
        ("ReadonlyRootfs", "true"),
        ("IpcMode", "\"private\""),
        ("CgroupnsMode", "\"private\""),
        ("NetworkMode", "\"bridge\""),
        ("CpuPeriod", "100000"),
        ("CpuQuota", "50000 (half a CPU)"),
        ("Memory", "268435456 (256 MiB)"),
        ("MemorySwap", "268435456 (no swap)"),
        ("PidsLimit", "64"),
    ] {
        let same = hc.get(k).unwrap_or(&Value::Null) == &want_hc[k];
        hc.want(k, same, must);
    }
    want_proxy_limits(&mut hc);
    let mounts = proxy_mounts(hc.get("Mounts"));
    let planned = vec![
        (
            "bind".to_string(),
            plan.daemon.display().to_string(),
            DAEMON_PATH.to_string(),
            true,
        ),
        ("volume".to_string(), plan.name(), MOUNT.to_string(), false),
    ];
    hc.want(
        "Mounts",
        mounts == planned,
        format!("exactly the computer's daemon read-only and its socket volume ({planned:?})"),
    );
    let no_restart = hc
        .get("RestartPolicy")
        .and_then(|r| r["Name"].as_str())
        .is_none_or(|n| n.is_empty() || n == "no");
    hc.want("RestartPolicy", no_restart, "no restart");
    let runc = hc.get("Runtime").and_then(Value::as_str) == Some("runc");
    hc.want("Runtime", runc, "\"runc\"");
    let masked = strs(hc.get("MaskedPaths"));
    let masked = drift::MASKED.iter().all(|p| masked.iter().any(|m| m == p));
    hc.want("MaskedPaths", masked, "at least Docker's own");
    let ro = strs(hc.get("ReadonlyPaths"));
    let ro = drift::READONLY.iter().all(|p| ro.iter().any(|m| m == p));
    hc.want("ReadonlyPaths", ro, "at least Docker's own");
    hc.want_defaults();
    hc.finish()
}

/// Its open files and its log, bounded.
fn want_proxy_limits(hc: &mut Section) {
    let ulimits: Vec<(String, i64, i64)> = hc
        .get("Ulimits")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|u| {
                    (
                        u["Name"].as_str().unwrap_or("").to_string(),
                        u["Soft"].as_i64().unwrap_or(0),
                        u["Hard"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    hc.want(
        "Ulimits",
        ulimits == [("nofile".to_string(), NOFILE, NOFILE)],
        format!("nofile {NOFILE}"),
    );
    let log = hc.get("LogConfig").unwrap_or(&Value::Null);
    let json_file = log["Type"].as_str() == Some("json-file")
        && log["Config"].as_object().is_some_and(|c| {
            c.len() == 2
                && c.get("max-size").and_then(Value::as_str) == Some(LOG_MAX_SIZE)
                && c.get("max-file").and_then(Value::as_str) == Some(LOG_MAX_FILE)
        });
    hc.want(
        "LogConfig",
        json_file,
        format!("json-file of {LOG_MAX_SIZE} and {LOG_MAX_FILE} files"),
    );
}

/// Its mounts as compared: type, source, target, read-only.
fn proxy_mounts(mounts: Option<&Value>) -> Vec<(String, String, String, bool)> {
    mounts
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|m| {
                    (
                        m["Type"].as_str().unwrap_or("").to_string(),
                        m["Source"].as_str().unwrap_or("").to_string(),
                        m["Target"].as_str().unwrap_or("").to_string(),
                        m["ReadOnly"].as_bool().unwrap_or(false),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Config: its user, image and entrypoint, the computer's list and this
/// host's addresses in its argv, and its labels.
fn proxy_config(plan: &EgressPlan, inspected: &Value, required: &[IpAddr]) -> Vec<String> {
    let mut out = Vec::new();
    let cfg = inspected.get("Config").unwrap_or(&Value::Null);
    let c = |k: &str| cfg.get(k).unwrap_or(&Value::Null);
    let user = plan.user_string();
    if c("User").as_str() != Some(user.as_str()) {
        out.push(format!("runs as {}, not {user}", c("User")));
    }
    if c("Image").as_str() != Some(plan.image.as_str()) {
        out.push(format!(
            "is of the image {}, not {:?}",
            c("Image"),
            plan.image
        ));
    }
    if strs(cfg.get("Entrypoint")) != [DAEMON_PATH] {
        out.push(format!(
            "has the entrypoint {}, not [{DAEMON_PATH:?}]",
            c("Entrypoint")
        ));
    }
    out.extend(proxy_argv(plan, &strs(cfg.get("Cmd")), required));
    let labels = c("Labels");
    for (k, v) in [
        (LABEL, plan.computer.clone()),
        (label::DEADLINE, plan.deadline.to_string()),
    ] {
        if labels[k].as_str() != Some(v.as_str()) {
            out.push(format!("does not carry the label {k}={v}"));
        }
    }
    if !c("Volumes").is_null() && !drift::empty(c("Volumes")) {
        out.push(format!("declares the volumes {}", c("Volumes")));
    }
    out
}

/// The proxy's argv: the computer's list, the `required` host addresses,
/// and then nothing but what create gives it.
fn proxy_argv(plan: &EgressPlan, cmd: &[String], required: &[IpAddr]) -> Vec<String> {
    let mut out = Vec::new();
    let held: Vec<String> = cmd
        .iter()
        .filter_map(|a| a.strip_prefix("--allow="))
        .map(String::from)
        .collect();
    let held_list = Allowlist::parse(&held).map(|l| l.entries());
    match &held_list {
        Ok(l) if *l == plan.allow => {}
        Ok(l) => out.push(format!(
            "holds another list ({}) than the computer's ({})",
            l.join(", "),
            plan.allow.join(", ")
        )),
        Err(e) => out.push(format!("holds no list the proxy takes ({e})")),
    }
    let addresses = held_addresses(cmd);
    let missing: Vec<String> = required
        .iter()
        .filter(|a| !addresses.contains(a))
        .map(IpAddr::to_string)
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "does not refuse this Docker host's own addresses {} (the host has them now)",
            missing.join(", ")
        ));
    }
    if held_list.is_ok_and(|l| l == plan.allow) && cmd != plan.args_with(&addresses) {
        out.push(format!(
            "runs {cmd:?}, where it must run {:?}",
            plan.args_with(&addresses)
        ));
    }
    out
}

/// On Docker's default bridge alone, publishing no port.
fn proxy_network(inspected: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let networks: Vec<String> = inspected["NetworkSettings"]["Networks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if networks != [NETWORK] {
        out.push(format!(
            "is on the networks {networks:?}, where it must be on {NETWORK:?} alone"
        ));
    }
    let ports = inspected["NetworkSettings"]["Ports"]
        .as_object()
        .map(|m| m.values().any(|v| !v.is_null() && !drift::empty(v)))
        .unwrap_or(false);
    if ports {
        out.push(format!(
            "publishes ports ({})",
            inspected["NetworkSettings"]["Ports"]
        ));
    }
    out
}

/// The socket volume (docker volume inspect as JSON) against its plan.
pub fn volume_drift(plan: &EgressPlan, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if v["Driver"].as_str() != Some("local") {
        out.push(format!("its volume's driver is {}, not local", v["Driver"]));
    }
    let opts = &v["Options"];
    let ok = opts.as_object().is_some_and(|o| o.len() == 3)
        && opts["type"].as_str() == Some("tmpfs")
        && opts["device"].as_str() == Some("tmpfs")
        && opts["o"].as_str() == Some(plan.volume_options().as_str());
    if !ok {
        out.push(format!(
            "its volume has the options {opts}, where it is a tmpfs with {}",
            plan.volume_options()
        ));
    }
    if v["Labels"][LABEL].as_str() != Some(plan.computer.as_str()) {
        out.push(format!(
            "its volume does not carry the label {LABEL}={}",
            plan.computer
        ));
    }
    out
}

impl crate::docker::DockerProvider {
    /// An allowlisted computer's network, read back: network mode none on
    /// Docker's none alone, its socket volume read-only at [`MOUNT`],
    /// init's relay in its command (both held by the drift check too), and
    /// its proxy and volume as create makes them, holding the computer's
    /// list and this host's addresses as they are now. Anything less is
    /// refused in words (`other`).
    pub(in crate::docker) async fn read_egress(
        &self,
        docker: &bollard::Docker,
        v: &Value,
        plan: &crate::docker::Plan,
    ) -> Result<crate::types::NetworkReadBack> {
        let other = |why: String| {
            ProviderError::refused(format!(
                "the Docker computer {} has network allow, but its egress proxy {why}: make another computer",
                plan.name
            ))
            .with_field("network")
        };
        let host = self
            .host
            .get()
            .cloned()
            .ok_or_else(|| other("cannot be read (the Docker host is not read yet)".into()))?;
        let mut bad = Vec::new();
        let mode = v["HostConfig"]["NetworkMode"].as_str().unwrap_or("");
        let nets: Vec<String> = v["NetworkSettings"]["Networks"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        if mode != "none" || nets != ["none"] {
            bad.push(format!(
                "is no way out: the computer is on network mode {mode:?} on {nets:?}, not none"
            ));
        }
        let vol = name_of(&plan.name);
        let mounted = v["HostConfig"]["Mounts"].as_array().is_some_and(|a| {
            a.iter().any(|m| {
                m["Type"].as_str() == Some("volume")
                    && m["Source"].as_str() == Some(vol.as_str())
                    && m["Target"].as_str() == Some(MOUNT)
                    && m["ReadOnly"].as_bool() == Some(true)
            })
        });
        if !mounted {
            bad.push(format!(
                "socket volume {vol} is not mounted read-only at {MOUNT}"
            ));
        }
        let cmd = strs(v["Config"].get("Cmd"));
        if !cmd.windows(2).any(|w| w[0] == "--egress" && w[1] == SOCKET) {
            bad.push(format!(
                "is not relayed to: init's command has no --egress {SOCKET}"
            ));
        }
        let required = self.egress_addresses(docker, &host).await;
        let required = match required {
            Ok(r) => r,
            Err(e) => {
                return Err(other(format!(
                    "cannot be held to this host's addresses ({})",
                    e.message
                )));
            }
        };
        let Some(ep) = self.egress_plan(plan, required.clone()) else {
            return Err(other("was never asked for".into()));
        };
        match docker
            .inspect_container(
                &vol,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(i) => {
                let p = serde_json::to_value(&i).unwrap_or(Value::Null);
                if p["Config"]["Labels"][LABEL].as_str() != Some(plan.name.as_str()) {
                    bad.push(format!(
                        "container {vol} is not its (no label {LABEL}={})",
                        plan.name
                    ));
                } else {
                    let running = v["State"]["Running"].as_bool() == Some(true);
                    bad.extend(proxy_drift(&ep, &p, &required, &host, running));
                }
            }
            Err(e) if crate::docker::host::is_not_found(&e) => bad.push("is gone".into()),
            Err(e) => return Err(self.err("inspecting the egress proxy")(e)),
        }
        match docker.inspect_volume(&vol).await {
            Ok(i) => {
                let j = serde_json::to_value(&i).unwrap_or(Value::Null);
                bad.extend(volume_drift(&ep, &j));
            }
            Err(e) if crate::docker::host::is_not_found(&e) => {
                bad.push(format!("socket volume {vol} is gone"))
            }
            Err(e) => return Err(self.err("inspecting the egress proxy's volume")(e)),
        }
        if !bad.is_empty() {
            return Err(other(bad.join("; ")));
        }
        let list = if ep.allow == [computerd::protocol::egress::PUBLIC] {
            "* (every public host)".to_string()
        } else {
            ep.allow.join(", ")
        };
        Ok(crate::types::NetworkReadBack {
            kind: crate::types::NetworkKind::Allow,
            detail: format!(
                "allow {list}: docker network mode none (only lo inside, no route out), whose one way out is its egress proxy {vol} on Docker's default bridge, read back holding that list (ports 80 and 443; private, loopback, link-local, metadata and this Docker host's addresses always refused)"
            ),
        })
    }
}
