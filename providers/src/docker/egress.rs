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
//!
//! Here: the names, bounds and [`EgressPlan`]; `addresses` (the host's own
//! addresses), `readback` (the proxy and volume held to their plan),
//! `parts` (making, stopping, removing and sweeping them).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountType, MountVolumeOptions, ResourcesUlimits,
    VolumeCreateRequest,
};
use computerd::launch::{EgressArgs, Time};
use computerd::protocol::egress::Allowlist;

use super::plan::{Bounds, DAEMON_PATH, Runs, daemon_body, hardened};
use crate::types::{Labels, NetworkPolicy, ProviderError, Result, label};

mod addresses;
mod parts;
mod readback;

pub use addresses::{
    Bridge, container_sign, engine_is_here, interface_addresses, required_addresses,
};
pub use readback::{proxy_drift, volume_drift};

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

#[cfg(test)]
mod tests {
    use computerd::protocol::egress::Cidr;
    use serde_json::Value;

    use super::addresses::reachable;
    use super::*;
    use crate::docker::drift;
    use crate::docker::host::Host;

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
