//! A Docker computer whose network is an allowlist: the computer stays on
//! network mode none (its own loopback, no route, no resolver) and its one
//! way out is its egress proxy, `computerd egress` from the same read-only
//! daemon copy, in a second container the provider makes, reads back and
//! removes with it.
//!
//! - The volume `computer-<hex>-egress`: a tmpfs of 1 MiB owned by the
//!   proxy's uid and the computer's gid (0750). The proxy makes its socket
//!   there (0660, the computer's group); the computer mounts it read-only
//!   at [`MOUNT`], where init's `--egress` hands it each connection made to
//!   127.0.0.1:3128.
//! - The proxy container `computer-<hex>-egress`: the computer's image
//!   (already on the host; its root is read-only and only the daemon runs),
//!   on Docker's default bridge alone with no published port, as [`UID`]
//!   and the computer's gid, every capability dropped, no-new-privileges,
//!   half a CPU, 256 MiB with no swap, 64 pids, 1024 open files, private
//!   IPC and cgroup namespaces and a json-file log of 1m and 2 files. Its
//!   argv holds the list, the computer's deadline (it ends itself then)
//!   and this Docker host's own public addresses (refused as this-host:
//!   from the bridge the host's addresses are reachable, and the proxy's
//!   own interfaces are the container's, not the host's).
//! - Both carry [`LABEL`]`=<computer>` and the computer's deadline (and
//!   the spec's labels), never `computer-mcp.computer`: they are parts of
//!   their computer, found by that label at release and by the sweep,
//!   never listed as computers. The computer carries its list in
//!   [`LIST_LABEL`], fixed at create, which the read-back holds the proxy
//!   to.
//!
//! The host's own addresses are this process's interfaces' only when it
//! runs on the Docker host. In a container (`/.dockerenv`,
//! `/run/.containerenv`, a container's cgroup), an allowlist is refused
//! unless the options name the host's addresses, or the engine is plainly
//! in this network namespace (its name is this host's name and its default
//! bridge's gateway is on one of these interfaces).

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountType, MountVolumeOptions, ResourcesUlimits,
    VolumeCreateRequest,
};
use computerd::launch::{EgressArgs, Time};
use computerd::protocol::egress::{Allowlist, Cidr, Class, classify};
use serde_json::Value;

use super::drift;
use super::host::Host;
use super::plan::{Bounds, DAEMON_PATH, NO_NEW_PRIVILEGES, Runs, daemon_body, hardened};
use crate::types::{Labels, NetworkPolicy, ProviderError, Result, label};

/// Where the proxy's socket directory is, in the computer (read-only) and
/// in the proxy (read-write).
pub const MOUNT: &str = "/run/egress";
/// The socket init's `--egress` names.
pub const SOCKET: &str = "/run/egress/egress.sock";
/// On a proxy container and its volume: the computer they belong to.
pub const LABEL: &str = "computer-mcp.egress";
/// On an allowlisted computer: its list, normalized, comma-separated.
pub const LIST_LABEL: &str = "computer-mcp.egress.allow";
/// The proxy's uid: one below the provider's default computer user, so
/// the proxy never shares its computer's uid.
pub const UID: u32 = 0x6fff_fffe;
/// The proxy's bounds: half a CPU (a fixed quota), 256 MiB, 64 pids,
/// 1024 open files.
pub const CPU_QUOTA_US: i64 = 50_000;
pub const MEMORY_BYTES: i64 = 256 * 1024 * 1024;
pub const PIDS: i64 = 64;
pub const NOFILE: i64 = 1024;
/// Its log: json-file, 1m, 2 files.
pub const LOG_MAX_SIZE: &str = "1m";
pub const LOG_MAX_FILE: &str = "2";
/// The socket volume's tmpfs size.
pub const VOLUME_SIZE: &str = "1m";
/// How long the proxy has to say it is ready.
pub const READY_WAIT: Duration = Duration::from_secs(10);
/// The line `computerd egress` logs once it listens.
pub const READY_LINE: &str = "egress ready on";
/// A part older than this with no computer is a leftover (a create that
/// died between its proxy and its computer): the ready wait and two
/// minutes.
pub const LEFTOVER_AFTER: Duration = Duration::from_secs(10 + 120);
/// The proxy's network: Docker's default bridge.
pub const NETWORK: &str = "bridge";

/// A computer's proxy container and volume name.
pub fn name_of(computer: &str) -> String {
    format!("{computer}-egress")
}

/// The list of an allowlist policy, checked and normalized; None for none
/// and open.
pub fn list_of(policy: &NetworkPolicy) -> Result<Option<Vec<String>>> {
    match policy {
        NetworkPolicy::Allow(entries) => Allowlist::parse(entries)
            .map(|l| Some(l.entries()))
            .map_err(|e| ProviderError::invalid("network", e.to_string())),
        _ => Ok(None),
    }
}

/// The list a computer's [`LIST_LABEL`] holds.
pub fn list_in_label(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Everything a computer's proxy is made with.
#[derive(Clone, Debug, PartialEq)]
pub struct EgressPlan {
    /// The computer's name.
    pub computer: String,
    pub image: String,
    /// The computer's gid: the socket's group.
    pub gid: u32,
    /// The list, normalized.
    pub allow: Vec<String>,
    pub deadline: Time,
    /// Refused as this-host, beside the proxy's own interfaces'.
    pub host_addresses: Vec<IpAddr>,
    /// DNS servers asked instead of the container's resolv.conf (tests).
    pub resolvers: Vec<SocketAddr>,
    /// The provider's daemon copy, bound read-only as in the computer.
    pub daemon: PathBuf,
    /// The spec's labels, then [`LABEL`] and the deadline.
    pub labels: Labels,
}

impl EgressPlan {
    pub fn name(&self) -> String {
        name_of(&self.computer)
    }

    /// The spec's labels with ours: the computer it belongs to and its
    /// deadline (never `computer-mcp.computer`: it is no computer).
    pub fn labels_for(computer: &str, deadline: &Time, spec: &Labels) -> Labels {
        let mut l = spec.clone();
        l.insert(LABEL.into(), computer.into());
        l.insert(label::DEADLINE.into(), deadline.to_string());
        l
    }

    pub fn user_string(&self) -> String {
        format!("{UID}:{}", self.gid)
    }

    /// `egress --allow=… --deadline … --socket … --client-gid …` with
    /// `host_addresses` (the read-back passes the ones the proxy holds).
    pub fn args_with(&self, host_addresses: &[IpAddr]) -> Vec<String> {
        let mut a = EgressArgs::new(self.allow.clone(), self.deadline, SOCKET);
        a.client_gid = Some(self.gid);
        a.host_addresses = host_addresses.to_vec();
        a.resolvers = self.resolvers.clone();
        a.to_args()
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect()
    }

    pub fn args(&self) -> Vec<String> {
        self.args_with(&self.host_addresses)
    }

    /// The tmpfs options of the socket volume.
    pub fn volume_options(&self) -> String {
        format!(
            "size={VOLUME_SIZE},mode=0750,uid={UID},gid={},noexec,nosuid,nodev",
            self.gid
        )
    }

    /// `POST /volumes/create`.
    pub fn volume(&self) -> VolumeCreateRequest {
        VolumeCreateRequest {
            name: Some(self.name()),
            driver: Some("local".into()),
            driver_opts: Some(HashMap::from([
                ("type".to_string(), "tmpfs".to_string()),
                ("device".to_string(), "tmpfs".to_string()),
                ("o".to_string(), self.volume_options()),
            ])),
            labels: Some(self.labels.clone().into_iter().collect()),
            ..Default::default()
        }
    }

    /// The daemon read-only and the socket volume read-write.
    pub fn mounts(&self) -> Vec<Mount> {
        vec![
            Mount {
                target: Some(DAEMON_PATH.into()),
                source: Some(self.daemon.display().to_string()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                bind_options: Some(MountBindOptions {
                    propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE),
                    ..Default::default()
                }),
                ..Default::default()
            },
            volume_mount(&self.name(), false),
        ]
    }

    /// `POST /containers/create` for the proxy: every hardening flag and
    /// bound.
    pub fn body(&self) -> ContainerCreateBody {
        let runs = Runs {
            image: self.image.clone(),
            user: self.user_string(),
            working_dir: "/".into(),
            env: vec!["COMPUTERD_LOG=info".into()],
            cmd: self.args(),
            labels: &self.labels,
        };
        let bounds = Bounds {
            cpu_quota: CPU_QUOTA_US,
            memory: MEMORY_BYTES,
            pids: PIDS,
        };
        ContainerCreateBody {
            // It keeps nothing to flush, and as PID 1 it would ignore TERM.
            stop_signal: Some("SIGKILL".into()),
            ..daemon_body(
                runs,
                HostConfig {
                    readonly_rootfs: Some(true),
                    publish_all_ports: Some(false),
                    ulimits: Some(vec![ResourcesUlimits {
                        name: Some("nofile".into()),
                        soft: Some(NOFILE),
                        hard: Some(NOFILE),
                    }]),
                    log_config: Some(HostConfigLogConfig {
                        typ: Some("json-file".into()),
                        config: Some(HashMap::from([
                            ("max-size".to_string(), LOG_MAX_SIZE.to_string()),
                            ("max-file".to_string(), LOG_MAX_FILE.to_string()),
                        ])),
                    }),
                    ..hardened(NETWORK, bounds, self.mounts())
                },
            )
        }
    }
}

/// The socket volume as a container mounts it: the computer read-only,
/// the proxy read-write; never a copy of the image's files.
pub fn volume_mount(name: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(MOUNT.into()),
        source: Some(name.into()),
        typ: Some(MountType::VOLUME),
        read_only: Some(read_only),
        volume_options: Some(MountVolumeOptions {
            no_copy: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An address the proxy would reach were it not this host's: the ones a
/// proxy must be told of (the others it refuses whatever they are).
fn reachable(ip: IpAddr) -> bool {
    classify(ip) == Class::Public
}

/// This process's interface addresses that are public.
pub fn interface_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            let Some(addr) = a.address else { continue };
            let ip = if let Some(v4) = addr.as_sockaddr_in() {
                IpAddr::V4(v4.ip())
            } else if let Some(v6) = addr.as_sockaddr_in6() {
                IpAddr::V6(v6.ip())
            } else {
                continue;
            };
            if reachable(ip) && !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out.sort();
    out
}

/// What says this process runs in a container, under `root`: a sentence,
/// or None.
pub fn container_sign(root: &Path) -> Option<String> {
    for f in [".dockerenv", "run/.containerenv"] {
        if root.join(f).exists() {
            return Some(format!("{} exists", Path::new("/").join(f).display()));
        }
    }
    let cgroup = std::fs::read_to_string(root.join("proc/self/cgroup")).unwrap_or_default();
    let marks = [
        "/docker/",
        "/docker-",
        "/kubepods",
        "/libpod-",
        "/lxc/",
        "/containerd/",
    ];
    cgroup
        .lines()
        .find(|l| marks.iter().any(|m| l.contains(m)))
        .map(|l| format!("/proc/self/cgroup names a container's cgroup ({l})"))
}

/// What the engine's default bridge network says of itself: its IPAM
/// gateway (a freshly made engine may leave it out), its subnets and the
/// name of its bridge interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bridge {
    pub gateway: Option<IpAddr>,
    pub subnets: Vec<Cidr>,
    pub interface: Option<String>,
}

impl Bridge {
    /// Read from the engine's answer for [`NETWORK`].
    pub fn of(n: &bollard::models::NetworkInspect) -> Bridge {
        let config = n
            .ipam
            .as_ref()
            .and_then(|i| i.config.clone())
            .unwrap_or_default();
        Bridge {
            gateway: config
                .iter()
                .find_map(|c| c.gateway.as_deref())
                .and_then(|g| g.parse::<IpAddr>().ok()),
            subnets: config
                .iter()
                .filter_map(|c| c.subnet.as_deref())
                .filter_map(|s| Cidr::parse(s).ok())
                .collect(),
            interface: n
                .options
                .as_ref()
                .and_then(|o| o.get(BRIDGE_NAME_OPTION))
                .filter(|v| !v.is_empty())
                .cloned(),
        }
    }

    /// The IPAM config and bridge as seen, for words.
    fn seen(&self) -> String {
        let subnets = if self.subnets.is_empty() {
            "none".to_string()
        } else {
            self.subnets
                .iter()
                .map(|c| format!("{}/{}", c.addr, c.prefix))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "subnet {subnets}, gateway {}, bridge interface {}",
            self.gateway.map_or("none".into(), |g| g.to_string()),
            self.interface.as_deref().unwrap_or("none")
        )
    }
}

/// The network option that names a bridge network's interface.
const BRIDGE_NAME_OPTION: &str = "com.docker.network.bridge.name";

/// Whether the engine plainly shares this network namespace: its name is
/// this host's, and its default bridge's gateway is one of this process's
/// interface addresses, or (an engine's IPAM config may leave the gateway
/// out, as a freshly made one does) this process has the bridge's own
/// interface with an address in the bridge's subnet. Err: which of the
/// two it is not, in words.
pub fn engine_is_here(engine_name: &str, bridge: &Bridge) -> Result<(), String> {
    // This UTS namespace's name.
    let ours = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    if ours.is_empty() || ours != engine_name {
        return Err(format!(
            "the engine's host is named {engine_name:?} and this one {ours:?}"
        ));
    }
    let addrs: Vec<(String, IpAddr)> = nix::ifaddrs::getifaddrs()
        .map_err(|e| format!("this process's interfaces could not be read ({e})"))?
        .filter_map(|i| {
            let s = i.address?;
            let ip = s
                .as_sockaddr_in()
                .map(|v| IpAddr::V4(v.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v| IpAddr::V6(v.ip())))?;
            Some((i.interface_name, ip))
        })
        .collect();
    if let Some(gw) = bridge.gateway {
        return if addrs.iter().any(|(_, ip)| *ip == gw) {
            Ok(())
        } else {
            Err(format!(
                "the gateway {gw} of the engine's {NETWORK:?} network is none of this process's addresses"
            ))
        };
    }
    let Some(iface) = bridge.interface.as_deref() else {
        return Err(format!(
            "the engine's {NETWORK:?} network shows no gateway and names no bridge interface ({})",
            bridge.seen()
        ));
    };
    let on_ours = addrs
        .iter()
        .any(|(name, ip)| name == iface && bridge.subnets.iter().any(|c| c.contains(*ip)));
    if on_ours {
        Ok(())
    } else {
        Err(format!(
            "the engine's {NETWORK:?} network shows no gateway, and this process has no interface {iface} with an address in its subnet ({})",
            bridge.seen()
        ))
    }
}

/// The Docker host's own addresses every proxy must refuse now: this
/// process's public interface addresses and `extra`, sorted, deduplicated.
pub fn required_addresses(extra: &[IpAddr]) -> Vec<IpAddr> {
    let mut out = interface_addresses();
    for ip in extra {
        if !out.contains(ip) {
            out.push(*ip);
        }
    }
    out.sort();
    out
}

/// The held `--host-address` values of an argv.
fn held_addresses(cmd: &[String]) -> Vec<IpAddr> {
    cmd.windows(2)
        .filter(|w| w[0] == "--host-address")
        .filter_map(|w| w[1].parse().ok())
        .collect()
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
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
    let null = Value::Null;
    let hc = inspected.get("HostConfig").unwrap_or(&null);
    let cfg = inspected.get("Config").unwrap_or(&null);
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
    // HostConfig, closed.
    let body = serde_json::to_value(plan.body()).unwrap_or(Value::Null);
    let want_hc = &body["HostConfig"];
    let mut checked: BTreeSet<&str> = IRRELEVANT_HOST.iter().copied().collect();
    let mut want = |out: &mut Vec<String>, key: &'static str, ok: bool, must: String| {
        checked.insert(key);
        if !ok {
            out.push(format!(
                "has HostConfig.{key} {}, where it must be {must}",
                hc.get(key).unwrap_or(&null)
            ));
        }
    };
    let h = |k: &str| hc.get(k).unwrap_or(&null);
    let same = |k: &str| h(k) == &want_hc[k];
    want(
        &mut out,
        "CapDrop",
        strs(hc.get("CapDrop")) == ["ALL"],
        "[\"ALL\"]".into(),
    );
    want(
        &mut out,
        "SecurityOpt",
        strs(hc.get("SecurityOpt")) == [NO_NEW_PRIVILEGES],
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
        want(&mut out, k, same(k), must.into());
    }
    let ulimits: Vec<(String, i64, i64)> = h("Ulimits")
        .as_array()
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
    want(
        &mut out,
        "Ulimits",
        ulimits == [("nofile".to_string(), NOFILE, NOFILE)],
        format!("nofile {NOFILE}"),
    );
    let log = h("LogConfig");
    want(
        &mut out,
        "LogConfig",
        log["Type"].as_str() == Some("json-file")
            && log["Config"].as_object().is_some_and(|c| {
                c.len() == 2
                    && c.get("max-size").and_then(Value::as_str) == Some(LOG_MAX_SIZE)
                    && c.get("max-file").and_then(Value::as_str) == Some(LOG_MAX_FILE)
            }),
        format!("json-file of {LOG_MAX_SIZE} and {LOG_MAX_FILE} files"),
    );
    let mounts: Vec<(String, String, String, bool)> = h("Mounts")
        .as_array()
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
        .unwrap_or_default();
    let planned = vec![
        (
            "bind".to_string(),
            plan.daemon.display().to_string(),
            DAEMON_PATH.to_string(),
            true,
        ),
        ("volume".to_string(), plan.name(), MOUNT.to_string(), false),
    ];
    want(
        &mut out,
        "Mounts",
        mounts == planned,
        format!("exactly the computer's daemon read-only and its socket volume ({planned:?})"),
    );
    want(
        &mut out,
        "RestartPolicy",
        h("RestartPolicy")["Name"]
            .as_str()
            .is_none_or(|n| n.is_empty() || n == "no"),
        "no restart".into(),
    );
    want(
        &mut out,
        "Runtime",
        h("Runtime").as_str() == Some("runc"),
        "\"runc\"".into(),
    );
    let masked = strs(hc.get("MaskedPaths"));
    want(
        &mut out,
        "MaskedPaths",
        drift::MASKED.iter().all(|p| masked.iter().any(|m| m == p)),
        "at least Docker's own".into(),
    );
    let ro = strs(hc.get("ReadonlyPaths"));
    want(
        &mut out,
        "ReadonlyPaths",
        drift::READONLY.iter().all(|p| ro.iter().any(|m| m == p)),
        "at least Docker's own".into(),
    );
    want(
        &mut out,
        "Isolation",
        h("Isolation")
            .as_str()
            .is_none_or(|i| i.is_empty() || i == "default"),
        "empty or \"default\"".into(),
    );
    want(
        &mut out,
        "MemorySwappiness",
        h("MemorySwappiness").is_null() || h("MemorySwappiness").as_i64() == Some(-1),
        "null or -1".into(),
    );
    if let Some(o) = hc.as_object() {
        for (k, v) in o {
            if !checked.contains(k.as_str()) && !drift::empty(v) {
                out.push(format!(
                    "has HostConfig.{k} {v}, where a proxy is made without it"
                ));
            }
        }
    }
    // Config.
    let c = |k: &str| cfg.get(k).unwrap_or(&null);
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
    let cmd = strs(cfg.get("Cmd"));
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
    let addresses = held_addresses(&cmd);
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
    out.extend(
        drift::confinement_drift(inspected, host)
            .into_iter()
            .map(|s| format!("has {s}")),
    );
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

/// How many times the engine's bridge network is read before an
/// allowlist is refused for want of the host's addresses.
const ENGINE_READS: u32 = 10;

impl super::DockerProvider {
    /// The Docker host's own addresses a new proxy is given, or a refusal
    /// in words when this process cannot know them.
    pub(super) async fn egress_addresses(
        &self,
        docker: &bollard::Docker,
        host: &Host,
    ) -> Result<Vec<IpAddr>> {
        let extra = &self.opts.egress_host_addresses;
        if extra.is_empty()
            && let Some(sign) = container_sign(&self.opts.egress_host_root)
        {
            // Read again for up to about 4 s: a busy engine's answer (or an
            // engine just restarted, or a network being changed by another
            // container's start) can miss for a moment.
            let mut why = String::new();
            for attempt in 0..ENGINE_READS {
                if attempt > 0 {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
                let bridge = match docker
                    .inspect_network(
                        NETWORK,
                        None::<bollard::query_parameters::InspectNetworkOptions>,
                    )
                    .await
                {
                    Ok(n) => Bridge::of(&n),
                    Err(e) => {
                        why = format!("the engine's {NETWORK:?} network could not be read ({e})");
                        continue;
                    }
                };
                match engine_is_here(&host.name, &bridge) {
                    Ok(()) => {
                        why.clear();
                        break;
                    }
                    // A bridge with neither a gateway nor an interface
                    // here may be one being made: read it again.
                    Err(w) if bridge.gateway.is_none() => {
                        why = format!("{w}, after {} reads", attempt + 1);
                    }
                    // A gateway that is none of ours, or another host's
                    // name, does not change by reading again.
                    Err(w) => {
                        why = w;
                        break;
                    }
                }
            }
            if !why.is_empty() {
                return Err(ProviderError::unsupported(format!(
                    "this process runs in a container ({sign}) and its Docker engine is not plainly in its network namespace ({why}), so it cannot know the Docker host's own addresses, which an egress proxy must refuse: give the server the host's addresses (--docker-host-addresses IP[,IP...], or DockerOptions::egress_host_addresses), or ask for network none or open"
                ))
                .with_field("network"));
            }
        }
        Ok(required_addresses(extra))
    }

    /// The proxy a computer's plan asks for.
    pub(super) fn egress_plan(
        &self,
        computer: &super::Plan,
        host_addresses: Vec<IpAddr>,
    ) -> Option<EgressPlan> {
        let allow = computer.egress.clone()?;
        let spec: Labels = computer
            .labels
            .iter()
            .filter(|(k, _)| {
                ![label::COMPUTER, label::DEADLINE, LIST_LABEL, LABEL].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(EgressPlan {
            computer: computer.name.clone(),
            image: computer.image.clone(),
            gid: computer.user.1,
            allow,
            deadline: computer.deadline,
            host_addresses,
            resolvers: self.opts.egress_resolvers.clone(),
            daemon: computer.daemon.clone(),
            labels: EgressPlan::labels_for(&computer.name, &computer.deadline, &spec),
        })
    }

    /// Make the socket volume and the proxy, and wait for its ready line;
    /// the caller removes the parts on an error.
    pub(super) async fn start_egress(
        &self,
        docker: &bollard::Docker,
        plan: &EgressPlan,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<()> {
        use bollard::query_parameters::{CreateContainerOptionsBuilder, StartContainerOptions};
        let name = plan.name();
        docker
            .create_volume(plan.volume())
            .await
            .map_err(self.err("making the egress proxy's socket volume"))?;
        docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                plan.body(),
            )
            .await
            .map_err(self.err("making the egress proxy's container"))?;
        docker
            .start_container(&name, None::<StartContainerOptions>)
            .await
            .map_err(self.err("starting the egress proxy"))?;
        let until = tokio::time::Instant::now() + READY_WAIT;
        loop {
            if cancel.is_cancelled() {
                return Err(super::aborted("starting the egress proxy"));
            }
            let said = self.proxy_log(docker, &name).await;
            if said.contains(READY_LINE) {
                return Ok(());
            }
            let state = docker
                .inspect_container(
                    &name,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .map_err(self.err("inspecting the egress proxy"))?
                .state
                .unwrap_or_default();
            if state.running != Some(true) {
                return Err(ProviderError::refused(format!(
                    "the egress proxy stopped as it started (exit code {}): {}",
                    state.exit_code.unwrap_or(-1),
                    last_words(&said)
                )));
            }
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::new(
                    crate::types::ErrorCode::Timeout,
                    format!(
                        "the egress proxy did not say it was ready within {} s: {}",
                        READY_WAIT.as_secs(),
                        last_words(&said)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the proxy has logged (its decisions hold no path or header).
    async fn proxy_log(&self, docker: &bollard::Docker, name: &str) -> String {
        use futures::StreamExt;
        let opts = bollard::query_parameters::LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .tail("50")
            .build();
        let mut out = String::new();
        let mut logs = docker.logs(name, Some(opts));
        while let Some(Ok(chunk)) = logs.next().await {
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        out
    }

    /// Stop a computer's proxy (a stopped computer keeps its parts until
    /// it is deleted).
    pub(super) async fn stop_egress(&self, docker: &bollard::Docker, computer: &str) -> Result<()> {
        let (containers, _) = self.removal(docker).parts(computer).await?;
        for c in containers {
            match docker
                .stop_container(
                    &c,
                    Some(
                        bollard::query_parameters::StopContainerOptionsBuilder::new()
                            .t(2)
                            .build(),
                    ),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if super::host::is_not_found(&e) => {}
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304, ..
                }) => {}
                Err(e) => return Err(self.err("stopping the egress proxy")(e)),
            }
        }
        Ok(())
    }

    /// An allowlisted computer's network, read back: network mode none on
    /// Docker's none alone, its socket volume read-only at [`MOUNT`],
    /// init's relay in its command (both held by the drift check too), and
    /// its proxy and volume as create makes them, holding the computer's
    /// list and this host's addresses as they are now. Anything less is
    /// refused in words (`other`).
    pub(super) async fn read_egress(
        &self,
        docker: &bollard::Docker,
        v: &Value,
        plan: &super::Plan,
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
            Err(e) if super::host::is_not_found(&e) => bad.push("is gone".into()),
            Err(e) => return Err(self.err("inspecting the egress proxy")(e)),
        }
        match docker.inspect_volume(&vol).await {
            Ok(i) => {
                let j = serde_json::to_value(&i).unwrap_or(Value::Null);
                bad.extend(volume_drift(&ep, &j));
            }
            Err(e) if super::host::is_not_found(&e) => {
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

    /// Parts with no computer of their own, or past their deadline: a
    /// proxy or volume whose deadline label has passed (or is none a
    /// computer carries), or whose computer is gone and that is older than
    /// a create could take. Returns what it removed.
    pub(super) async fn sweep_egress(&self, now_ms: i64, limit_ms: i64) -> Result<Vec<String>> {
        let docker = self.engine()?;
        let removal = self.removal(&docker);
        let (containers, volumes) = removal.labelled(LABEL.to_string()).await?;
        let mut parts: Vec<(String, Labels, i64)> = Vec::new();
        for c in containers {
            let labels: Labels = c.labels.unwrap_or_default().into_iter().collect();
            parts.push((
                c.id.unwrap_or_default(),
                labels,
                c.created.unwrap_or(0) * 1000,
            ));
        }
        for v in volumes {
            let created = v
                .created_at
                .as_deref()
                .and_then(|t| {
                    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
                .unwrap_or(0);
            parts.push((v.name, v.labels.into_iter().collect(), created));
        }
        let mut computers: Vec<String> = Vec::new();
        let mut removed = Vec::new();
        for (_, labels, created) in &parts {
            let Some(computer) = labels.get(LABEL) else {
                continue;
            };
            if computers.contains(computer) {
                continue;
            }
            let deadline = labels
                .get(label::DEADLINE)
                .and_then(|d| d.parse::<Time>().ok())
                .map(|t| super::deadline_ms(&t));
            let expired = deadline.is_none_or(|d| d <= now_ms || d > limit_ms);
            let orphan = now_ms.saturating_sub(*created) > LEFTOVER_AFTER.as_millis() as i64
                && super::plan::is_computer_name(computer)
                && match docker
                    .inspect_container(
                        computer,
                        None::<bollard::query_parameters::InspectContainerOptions>,
                    )
                    .await
                {
                    Err(e) => super::host::is_not_found(&e),
                    Ok(_) => false,
                };
            if orphan || expired {
                computers.push(computer.clone());
                removal.egress(computer).await?;
                removed.push(name_of(computer));
            }
        }
        Ok(removed)
    }
}

impl super::removal::Removal {
    /// The proxy containers and volumes carrying `label` (`k` or `k=v`),
    /// stopped ones included.
    pub(super) async fn labelled(
        &self,
        label: String,
    ) -> Result<(
        Vec<bollard::models::ContainerSummary>,
        Vec<bollard::models::Volume>,
    )> {
        let docker = &self.docker;
        let filter = HashMap::from([("label", vec![label])]);
        let containers = docker
            .list_containers(Some(
                bollard::query_parameters::ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&filter)
                    .build(),
            ))
            .await
            .map_err(self.err("listing egress proxies"))?;
        let volumes = docker
            .list_volumes(Some(
                bollard::query_parameters::ListVolumesOptionsBuilder::new()
                    .filters(&filter)
                    .build(),
            ))
            .await
            .map_err(self.err("listing egress volumes"))?
            .volumes
            .unwrap_or_default();
        Ok((containers, volumes))
    }

    /// The ids of `computer`'s proxy containers and the names of its
    /// volumes, found by [`LABEL`], never by name alone.
    pub(super) async fn parts(&self, computer: &str) -> Result<(Vec<String>, Vec<String>)> {
        let (containers, volumes) = self.labelled(format!("{LABEL}={computer}")).await?;
        Ok((
            containers.into_iter().filter_map(|c| c.id).collect(),
            volumes.into_iter().map(|v| v.name).collect(),
        ))
    }

    /// Remove a computer's proxy and its volume (after the computer). Gone
    /// is fine.
    pub(super) async fn egress(&self, computer: &str) -> Result<()> {
        let docker = &self.docker;
        let (containers, volumes) = self.parts(computer).await?;
        for c in containers {
            match docker
                .remove_container(
                    &c,
                    Some(
                        bollard::query_parameters::RemoveContainerOptionsBuilder::new()
                            .force(true)
                            .v(true)
                            .build(),
                    ),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if super::host::is_not_found(&e) => {}
                Err(e) => return Err(self.err("removing the egress proxy")(e)),
            }
        }
        for v in volumes {
            match docker
                .remove_volume(
                    &v,
                    Some(
                        bollard::query_parameters::RemoveVolumeOptionsBuilder::new()
                            .force(true)
                            .build(),
                    ),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if super::host::is_not_found(&e) => {}
                Err(e) => return Err(self.err("removing the egress proxy's volume")(e)),
            }
        }
        Ok(())
    }
}

fn last_words(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        "it said nothing".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> EgressPlan {
        let deadline: Time = "2026-12-01T10:00:00Z".parse().unwrap();
        EgressPlan {
            computer: "computer-0123456789ab".into(),
            image: "debian:bookworm".into(),
            gid: 1000,
            allow: vec!["good.eg.test".into(), "11.0.0.0/24".into()],
            deadline,
            host_addresses: vec!["11.0.9.1".parse().unwrap()],
            resolvers: vec![],
            daemon: "/cache/computerd-abc".into(),
            labels: EgressPlan::labels_for("computer-0123456789ab", &deadline, &Labels::new()),
        }
    }

    fn host() -> Host {
        crate::docker::drift::tests::host()
    }

    fn hostname() -> String {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
            .to_string()
    }

    fn bridge(gateway: Option<&str>, subnet: &str, interface: Option<&str>) -> Bridge {
        Bridge {
            gateway: gateway.map(|g| g.parse().unwrap()),
            subnets: vec![Cidr::parse(subnet).unwrap()],
            interface: interface.map(String::from),
        }
    }

    #[test]
    fn a_fresh_engines_bridge_without_a_gateway_is_read_with_its_subnet_and_interface() {
        // What Docker 20.10 answers for "bridge" on its first start: the
        // IPAM config has the subnet alone.
        let n: bollard::models::NetworkInspect = serde_json::from_value(serde_json::json!({
            "Name": "bridge",
            "IPAM": {"Driver": "default", "Config": [{"Subnet": "172.17.0.0/16"}]},
            "Options": {"com.docker.network.bridge.name": "docker0"}
        }))
        .unwrap();
        assert_eq!(
            Bridge::of(&n),
            bridge(None, "172.17.0.0/16", Some("docker0"))
        );
        let n: bollard::models::NetworkInspect = serde_json::from_value(serde_json::json!({
            "IPAM": {"Config": [{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]}
        }))
        .unwrap();
        assert_eq!(
            Bridge::of(&n),
            bridge(Some("172.17.0.1"), "172.17.0.0/16", None)
        );
    }

    #[test]
    fn the_engine_is_here_by_its_gateway_or_by_its_bridge_interface_in_its_subnet() {
        let me = hostname();
        // The gateway on one of this process's interfaces (loopback stands
        // for the bridge: every namespace has it).
        assert_eq!(
            engine_is_here(&me, &bridge(Some("127.0.0.1"), "127.0.0.0/8", None)),
            Ok(())
        );
        let e = engine_is_here(&me, &bridge(Some("192.0.2.77"), "192.0.2.0/24", Some("lo")))
            .unwrap_err();
        assert!(
            e.contains("the gateway 192.0.2.77") && e.contains("none of this process's addresses"),
            "{e}"
        );
        // No gateway: the named interface, with an address in the subnet.
        assert_eq!(
            engine_is_here(&me, &bridge(None, "127.0.0.0/8", Some("lo"))),
            Ok(())
        );
        let e = engine_is_here(&me, &bridge(None, "10.250.0.0/16", Some("lo"))).unwrap_err();
        assert!(
            e.contains("no interface lo with an address in its subnet")
                && e.contains("subnet 10.250.0.0/16"),
            "{e}"
        );
        let e = engine_is_here(&me, &bridge(None, "127.0.0.0/8", Some("cmcp-none0"))).unwrap_err();
        assert!(e.contains("no interface cmcp-none0"), "{e}");
        let e = engine_is_here(&me, &bridge(None, "127.0.0.0/8", None)).unwrap_err();
        assert!(
            e.contains("shows no gateway and names no bridge interface"),
            "{e}"
        );
        // Another host's engine, whatever its bridge says.
        let e = engine_is_here(
            "not-this-host.eg.test",
            &bridge(Some("127.0.0.1"), "127.0.0.0/8", None),
        )
        .unwrap_err();
        assert!(e.contains("not-this-host.eg.test"), "{e}");
    }

    /// What Docker reports for a proxy made from the plan's body.
    fn inspected(p: &EgressPlan) -> Value {
        let body = serde_json::to_value(p.body()).unwrap();
        let mut hc = body["HostConfig"].clone();
        hc["Runtime"] = "runc".into();
        hc["MaskedPaths"] = serde_json::json!(drift::MASKED);
        hc["ReadonlyPaths"] = serde_json::json!(drift::READONLY);
        hc["ShmSize"] = 67108864.into();
        let mut m = hc["Mounts"].clone();
        m[0]["BindOptions"] = serde_json::json!({"Propagation": "rprivate"});
        hc["Mounts"] = m;
        let mut cfg = body.clone();
        cfg.as_object_mut().unwrap().remove("HostConfig");
        serde_json::json!({
            "Name": format!("/{}", p.name()),
            "State": {"Running": true, "Status": "running"},
            "HostConfig": hc,
            "Config": cfg,
            "NetworkSettings": {"Networks": {"bridge": {}}, "Ports": {}},
            "AppArmorProfile": "",
            "ProcessLabel": "",
        })
    }

    #[test]
    fn a_proxy_as_planned_reads_back_clean() {
        let p = plan();
        let req = p.host_addresses.clone();
        assert_eq!(
            proxy_drift(&p, &inspected(&p), &req, &host(), true),
            Vec::<String>::new()
        );
        let cmd = p.args();
        assert_eq!(
            cmd,
            [
                "egress",
                "--allow=good.eg.test",
                "--allow=11.0.0.0/24",
                "--deadline",
                "2026-12-01T10:00:00Z",
                "--socket",
                "/run/egress/egress.sock",
                "--client-gid",
                "1000",
                "--host-address",
                "11.0.9.1"
            ]
        );
    }

    #[test]
    fn a_stopped_proxy_another_list_or_a_new_host_address_is_named() {
        let p = plan();
        let mut i = inspected(&p);
        i["State"] = serde_json::json!({"Running": false, "Status": "exited"});
        let mut other = p.clone();
        other.allow = vec!["evil.example".into()];
        i["Config"]["Cmd"] = serde_json::json!(other.args());
        let req: Vec<IpAddr> = vec!["11.0.9.1".parse().unwrap(), "11.0.8.1".parse().unwrap()];
        assert_eq!(
            proxy_drift(&p, &i, &req, &host(), true),
            vec![
                "is not running (it is exited): the computer reaches nothing",
                "holds another list (evil.example) than the computer's (good.eg.test, 11.0.0.0/24)",
                "does not refuse this Docker host's own addresses 11.0.8.1 (the host has them now)",
            ]
        );
    }

    #[test]
    fn a_published_port_a_writable_root_or_a_capability_is_named() {
        let p = plan();
        let mut i = inspected(&p);
        i["HostConfig"]["ReadonlyRootfs"] = false.into();
        i["HostConfig"]["CapAdd"] = serde_json::json!(["NET_RAW"]);
        i["HostConfig"]["PortBindings"] = serde_json::json!({"80/tcp": [{"HostPort": "8080"}]});
        i["NetworkSettings"]["Ports"] =
            serde_json::json!({"80/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8080"}]});
        let d = proxy_drift(&p, &i, &[], &host(), true);
        assert_eq!(
            d,
            vec![
                "has HostConfig.ReadonlyRootfs false, where it must be true",
                "has HostConfig.CapAdd [\"NET_RAW\"], where a proxy is made without it",
                "has HostConfig.PortBindings {\"80/tcp\":[{\"HostPort\":\"8080\"}]}, where a proxy is made without it",
                "publishes ports ({\"80/tcp\":[{\"HostIp\":\"0.0.0.0\",\"HostPort\":\"8080\"}]})",
            ]
        );
    }

    #[test]
    fn the_volume_is_a_small_tmpfs_of_the_proxy_and_the_computer_group() {
        let p = plan();
        let v = serde_json::to_value(p.volume()).unwrap();
        assert_eq!(
            v["DriverOpts"]["o"],
            "size=1m,mode=0750,uid=1879048190,gid=1000,noexec,nosuid,nodev"
        );
        let read = serde_json::json!({"Driver": "local", "Options": v["DriverOpts"], "Labels": v["Labels"]});
        assert_eq!(volume_drift(&p, &read), Vec::<String>::new());
    }

    #[test]
    fn only_public_addresses_are_passed_and_container_signs_are_read() {
        assert!(!reachable("10.0.0.1".parse().unwrap()));
        assert!(!reachable("fe80::1".parse().unwrap()));
        assert!(reachable("11.0.9.1".parse().unwrap()));
        let d = tempfile::tempdir().unwrap();
        assert_eq!(container_sign(d.path()), None);
        std::fs::create_dir_all(d.path().join("proc/self")).unwrap();
        std::fs::write(
            d.path().join("proc/self/cgroup"),
            "0::/\n4:memory:/docker/0123abcd\n",
        )
        .unwrap();
        assert_eq!(
            container_sign(d.path()).unwrap(),
            "/proc/self/cgroup names a container's cgroup (4:memory:/docker/0123abcd)"
        );
        std::fs::write(d.path().join(".dockerenv"), "").unwrap();
        assert_eq!(container_sign(d.path()).unwrap(), "/.dockerenv exists");
        assert_eq!(
            list_in_label("a.b,*.c.d,1.2.3.0/24"),
            ["a.b", "*.c.d", "1.2.3.0/24"]
        );
    }
}
