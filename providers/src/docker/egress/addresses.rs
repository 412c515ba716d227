//! The Docker host's own addresses, which every proxy must refuse: this
//! process's public interface addresses when it runs on the Docker host,
//! and how it tells (a container's signs, the engine's default bridge)
//! whether it does.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use computerd::protocol::egress::{Cidr, Class, classify};

use super::NETWORK;
use crate::docker::host::Host;
use crate::types::{ProviderError, Result};

/// An address the proxy would reach were it not this host's: the ones a
/// proxy must be told of (the others it refuses whatever they are).
pub(super) fn reachable(ip: IpAddr) -> bool {
    classify(ip) == Class::Public
}

/// This process's interface addresses that are public.
pub fn interface_addresses() -> Vec<IpAddr> {
    let mut out = computerd::net::own_addresses(reachable);
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
    let addrs = computerd::net::interface_addresses()
        .map_err(|e| format!("this process's interfaces could not be read ({e})"))?;
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

/// How many times the engine's bridge network is read before an
/// allowlist is refused for want of the host's addresses.
const ENGINE_READS: u32 = 10;

impl crate::docker::DockerProvider {
    /// The Docker host's own addresses a new proxy is given, or a refusal
    /// in words when this process cannot know them.
    pub(in crate::docker) async fn egress_addresses(
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
}
