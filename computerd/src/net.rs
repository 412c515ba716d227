//! This host's network, read the same way by the daemon's egress proxy and
//! by a provider that runs one (Docker): every unix.

use std::net::IpAddr;

/// Every IPv4 and IPv6 address on this process's interfaces, with the
/// interface's name, in the order the kernel lists them (an address on two
/// interfaces comes twice).
pub fn interface_addresses() -> nix::Result<Vec<(String, IpAddr)>> {
    Ok(nix::ifaddrs::getifaddrs()?
        .filter_map(|i| {
            let s = i.address?;
            let ip = s
                .as_sockaddr_in()
                .map(|v| IpAddr::V4(v.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v| IpAddr::V6(v.ip())))?;
            Some((i.interface_name, ip))
        })
        .collect())
}

/// The distinct addresses of [`interface_addresses`] that `keep` takes,
/// in first-seen order; none when the interfaces cannot be read.
pub fn own_addresses(keep: impl Fn(IpAddr) -> bool) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for (_, ip) in interface_addresses().unwrap_or_default() {
        if keep(ip) && !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_this_hosts_addresses_once() {
        let all = own_addresses(|_| true);
        let lo = IpAddr::from([127, 0, 0, 1]);
        assert_eq!(all.iter().filter(|ip| **ip == lo).count(), 1, "{all:?}");
        assert!(own_addresses(|ip| ip != lo).iter().all(|ip| *ip != lo));
    }
}
