//! `computerd probe`: what the computer's network answers, read from inside.
//!
//! The probe prints one JSON line, a [`ProbeReport`]. A provider whose vendor
//! reads no network policy back runs it through exec.run and parses that line
//! with these types, on whatever platform the provider runs; the daemon's
//! side (Linux) is `daemon::probe`.
//!
//! The rule every provider shares: network none holds only when nothing
//! answers. A target counts as reached only when bytes come back from it; a
//! TCP connection that is accepted and then stays silent is recorded as
//! accepted, never hidden and never counted as reached.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Each target gets this long to connect (a name's resolution included).
pub const PROBE_CONNECT_MS: u64 = 10_000;
/// Each target gets this long from its request to an answer.
pub const PROBE_ANSWER_MS: u64 = 10_000;
/// The most bytes read from one target (or check).
pub const PROBE_READ_BYTES: usize = 4096;
/// The longest a probe takes: every target runs at once, so one connect and
/// one answer bound. A provider bounds the probe's exec.run above this.
pub const PROBE_TOTAL_MS: u64 = PROBE_CONNECT_MS + PROBE_ANSWER_MS;

/// `--diagnose`: each check gets this long to connect.
pub const DIAGNOSE_CONNECT_MS: u64 = 3_000;
/// `--diagnose`: each check gets this long from its request to an answer.
pub const DIAGNOSE_ANSWER_MS: u64 = 3_000;
/// `--diagnose`: every check together ends within this.
pub const DIAGNOSE_TOTAL_MS: u64 = 15_000;

/// The targets Modal and E2B probe unless told otherwise (their `probeTargets`):
/// TCP to two IPv4 and one IPv6 address, and DNS over UDP, the classic path
/// out of a sandbox that drops TCP.
pub const DEFAULT_PROBE_TARGETS: &[&str] = &[
    "1.1.1.1:443",
    "8.8.8.8:443",
    "[2606:4700:4700::1111]:443",
    "1.1.1.1:53/udp",
    "[2606:4700:4700::1111]:53/udp",
];

/// `--diagnose`'s checks: 1.1.1.1, 8.8.8.8, 9.9.9.9 and 151.101.1.57
/// (Fastly's anycast edge, which is no resolver) on 443/tcp, 80/tcp and 53/udp.
pub const DIAGNOSE_TARGETS: &[&str] = &[
    "1.1.1.1:443",
    "1.1.1.1:80",
    "1.1.1.1:53/udp",
    "8.8.8.8:443",
    "8.8.8.8:80",
    "8.8.8.8:53/udp",
    "9.9.9.9:443",
    "9.9.9.9:80",
    "9.9.9.9:53/udp",
    "151.101.1.57:443",
    "151.101.1.57:80",
    "151.101.1.57:53/udp",
];

/// The one line `computerd probe` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// The uid the probe ran as.
    pub uid: u32,
    /// The gid the probe ran as.
    pub gid: u32,
    /// The kernel's release (uname -r).
    pub kernel: String,
    /// The interfaces of the probe's network namespace that are up or hold an
    /// address, sorted: `["lo"]` alone under `--own-network`.
    pub interfaces: Vec<String>,
    /// The targets that answered (any byte came back), in the order given.
    pub reached: Vec<String>,
    /// The targets that accepted a TCP connection and sent nothing back.
    pub accepted: Vec<String>,
    /// Every target's result, in the order given (`--diagnose`'s checks last).
    pub results: Vec<ProbeResult>,
    /// `--diagnose` only: what its checks add up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<ProbeVerdict>,
}

/// One target's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    /// The target as `host:port`, `[v6]:port`, with `/udp` for UDP.
    pub target: String,
    pub protocol: ProbeProtocol,
    pub outcome: ProbeOutcome,
    /// The bytes that came back (at most [`PROBE_READ_BYTES`]).
    pub bytes: u64,
    /// What happened, in words: what came back, or why nothing did.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ProbeProtocol {
    Tcp,
    Udp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ProbeOutcome {
    /// No connection; for UDP no reply within the bound, or ICMP port unreachable.
    Refused,
    /// A TCP connection, then nothing back within the bound, closed or held open.
    Accepted,
    /// Any byte came back: the target is reached.
    Answered,
}

/// `--diagnose`'s verdict over its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ProbeVerdict {
    /// At least one check answered.
    Egress,
    /// No check answered; at least one TCP connection was accepted.
    AcceptedOnly,
    /// Every check was refused.
    None,
}

impl ProbeVerdict {
    /// The verdict over some results: egress when any answered, else
    /// accepted-only when any was accepted, else none.
    pub fn of(results: &[ProbeResult]) -> Self {
        if results.iter().any(|r| r.outcome == ProbeOutcome::Answered) {
            ProbeVerdict::Egress
        } else if results.iter().any(|r| r.outcome == ProbeOutcome::Accepted) {
            ProbeVerdict::AcceptedOnly
        } else {
            ProbeVerdict::None
        }
    }
}

/// The targets of `results` with this outcome, in order, each once.
pub fn targets_with(results: &[ProbeResult], outcome: ProbeOutcome) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in results.iter().filter(|r| r.outcome == outcome) {
        if !out.contains(&r.target) {
            out.push(r.target.clone());
        }
    }
    out
}

/// A parsed target: `host:port`, `[v6]:port`, either with `/udp`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeTarget {
    /// An IPv4 address, an IPv6 address (without brackets) or a DNS name.
    pub host: String,
    pub port: u16,
    pub protocol: ProbeProtocol,
}

impl ProbeTarget {
    /// The host as an address, when it is an IP literal rather than a name.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

/// The canonical form, which [`parse_target`] reads back to the same target.
impl fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)?;
        } else {
            write!(f, "{}:{}", self.host, self.port)?;
        }
        if self.protocol == ProbeProtocol::Udp {
            f.write_str("/udp")?;
        }
        Ok(())
    }
}

impl FromStr for ProbeTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_target(s)
    }
}

/// Read a target: `host:port` (TCP) or `host:port/udp`, where host is an IPv4
/// address, a DNS name or an IPv6 address in brackets, and port is 1-65535.
/// Anything else is refused in words naming the target and the form.
pub fn parse_target(s: &str) -> Result<ProbeTarget, String> {
    let refuse = |why: String| format!("{s:?} is not host:port[/udp]: {why}");
    if s.is_empty() {
        return Err(refuse("it is empty".into()));
    }
    let (body, protocol) = match s.split_once('/') {
        None => (s, ProbeProtocol::Tcp),
        Some((body, "udp")) => (body, ProbeProtocol::Udp),
        Some((_, suffix)) => {
            return Err(refuse(format!(
                "the only suffix is /udp (TCP takes none), got /{suffix}"
            )));
        }
    };
    let (host, port) = if let Some(rest) = body.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(refuse("the [ of an IPv6 address has no ]".into()));
        };
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(refuse(format!("{host} is not an IPv6 address")));
        }
        let Some(port) = after.strip_prefix(':') else {
            return Err(refuse("it has no port after the ]".into()));
        };
        (host, port)
    } else {
        let Some((host, port)) = body.rsplit_once(':') else {
            return Err(refuse("it has no port".into()));
        };
        if host.contains(':') {
            return Err(refuse(
                "an IPv6 address goes in brackets, as [::1]:53".into(),
            ));
        }
        if host.is_empty() {
            return Err(refuse("the host is empty".into()));
        }
        if host.parse::<Ipv4Addr>().is_err() && !is_host_name(host) {
            return Err(refuse(format!(
                "{host} is neither an IPv4 address nor a host name (dot-separated labels of letters, digits, - and _)"
            )));
        }
        (host, port)
    };
    let port = parse_port(port)
        .ok_or_else(|| refuse(format!("the port must be 1 to 65535, got {port:?}")))?;
    Ok(ProbeTarget {
        host: host.to_string(),
        port,
        protocol,
    })
}

/// 1-65535 in plain digits, no sign and no leading zero (so the target's
/// canonical form is the one it was given).
fn parse_port(s: &str) -> Option<u16> {
    if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A DNS name: labels of 1-63 letters, digits, `-` or `_`, not starting or
/// ending with `-`, at most 253 characters, the last label not all digits
/// (that would be a malformed IPv4 address, which resolvers read oddly).
fn is_host_name(host: &str) -> bool {
    if host.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    labels.iter().all(label_ok)
        && labels
            .last()
            .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> ProbeTarget {
        ProbeTarget {
            host: host.into(),
            port,
            protocol: ProbeProtocol::Tcp,
        }
    }

    fn udp(host: &str, port: u16) -> ProbeTarget {
        ProbeTarget {
            protocol: ProbeProtocol::Udp,
            ..tcp(host, port)
        }
    }

    #[test]
    fn parse_target_reads_every_good_form_and_prints_it_back() {
        let cases = [
            ("host:1", tcp("host", 1)),
            ("1.2.3.4:80", tcp("1.2.3.4", 80)),
            ("[::1]:53/udp", udp("::1", 53)),
            ("example.com:443", tcp("example.com", 443)),
            ("1.1.1.1:53/udp", udp("1.1.1.1", 53)),
            (
                "[2606:4700:4700::1111]:443",
                tcp("2606:4700:4700::1111", 443),
            ),
            ("a-b.c_d.example:65535", tcp("a-b.c_d.example", 65535)),
            ("localhost:8080", tcp("localhost", 8080)),
        ];
        for (s, want) in cases {
            let got = parse_target(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(got, want, "{s}");
            assert_eq!(got.to_string(), s, "canonical form of {s}");
            assert_eq!(s.parse::<ProbeTarget>(), Ok(want));
        }
        assert_eq!(tcp("1.2.3.4", 1).ip(), Some("1.2.3.4".parse().unwrap()));
        assert_eq!(udp("::1", 53).ip(), Some("::1".parse().unwrap()));
        assert_eq!(tcp("example.com", 443).ip(), None);
    }

    #[test]
    fn parse_target_refuses_in_words_naming_target_and_form() {
        let cases = [
            ("", r#""" is not host:port[/udp]: it is empty"#),
            (
                "example.com",
                r#""example.com" is not host:port[/udp]: it has no port"#,
            ),
            (
                "1.2.3.4:0",
                r#""1.2.3.4:0" is not host:port[/udp]: the port must be 1 to 65535, got "0""#,
            ),
            (
                "1.2.3.4:70000",
                r#""1.2.3.4:70000" is not host:port[/udp]: the port must be 1 to 65535, got "70000""#,
            ),
            (
                "1.2.3.4:",
                r#""1.2.3.4:" is not host:port[/udp]: the port must be 1 to 65535, got """#,
            ),
            (
                "1.2.3.4:+80",
                r#""1.2.3.4:+80" is not host:port[/udp]: the port must be 1 to 65535, got "+80""#,
            ),
            (
                "1.2.3.4:080",
                r#""1.2.3.4:080" is not host:port[/udp]: the port must be 1 to 65535, got "080""#,
            ),
            (
                "1.1.1.1:53/tcp",
                r#""1.1.1.1:53/tcp" is not host:port[/udp]: the only suffix is /udp (TCP takes none), got /tcp"#,
            ),
            (
                "1.1.1.1:53/",
                r#""1.1.1.1:53/" is not host:port[/udp]: the only suffix is /udp (TCP takes none), got /"#,
            ),
            (
                "1.1.1.1:53/udp/udp",
                r#""1.1.1.1:53/udp/udp" is not host:port[/udp]: the only suffix is /udp (TCP takes none), got /udp/udp"#,
            ),
            (
                "::1:53",
                r#""::1:53" is not host:port[/udp]: an IPv6 address goes in brackets, as [::1]:53"#,
            ),
            (
                "[::1]",
                r#""[::1]" is not host:port[/udp]: it has no port after the ]"#,
            ),
            (
                "[::1:53",
                r#""[::1:53" is not host:port[/udp]: the [ of an IPv6 address has no ]"#,
            ),
            (
                "[1.2.3.4]:53",
                r#""[1.2.3.4]:53" is not host:port[/udp]: 1.2.3.4 is not an IPv6 address"#,
            ),
            (":80", r#"":80" is not host:port[/udp]: the host is empty"#),
            (
                "1.2.3:80",
                r#""1.2.3:80" is not host:port[/udp]: 1.2.3 is neither an IPv4 address nor a host name (dot-separated labels of letters, digits, - and _)"#,
            ),
            (
                "a b:80",
                r#""a b:80" is not host:port[/udp]: a b is neither an IPv4 address nor a host name (dot-separated labels of letters, digits, - and _)"#,
            ),
            (
                "example..com:80",
                r#""example..com:80" is not host:port[/udp]: example..com is neither an IPv4 address nor a host name (dot-separated labels of letters, digits, - and _)"#,
            ),
        ];
        for (s, want) in cases {
            assert_eq!(parse_target(s), Err(want.to_string()), "{s}");
        }
    }

    #[test]
    fn every_default_and_diagnose_target_parses_canonically() {
        for s in DEFAULT_PROBE_TARGETS.iter().chain(DIAGNOSE_TARGETS) {
            assert_eq!(parse_target(s).map(|t| t.to_string()), Ok(s.to_string()));
        }
        assert_eq!(DIAGNOSE_TARGETS.len(), 12);
    }

    fn result(target: &str, outcome: ProbeOutcome) -> ProbeResult {
        ProbeResult {
            target: target.into(),
            protocol: ProbeProtocol::Tcp,
            outcome,
            bytes: 0,
            detail: String::new(),
        }
    }

    #[test]
    fn verdict_is_egress_on_any_answer_then_accepted_only_then_none() {
        use ProbeOutcome::*;
        let refused = result("a:1", Refused);
        let accepted = result("b:1", Accepted);
        let answered = result("c:1", Answered);
        assert_eq!(ProbeVerdict::of(&[]), ProbeVerdict::None);
        assert_eq!(
            ProbeVerdict::of(std::slice::from_ref(&refused)),
            ProbeVerdict::None
        );
        assert_eq!(
            ProbeVerdict::of(&[refused.clone(), accepted.clone()]),
            ProbeVerdict::AcceptedOnly
        );
        assert_eq!(
            ProbeVerdict::of(&[accepted.clone(), refused.clone(), answered.clone()]),
            ProbeVerdict::Egress
        );
        assert_eq!(ProbeVerdict::of(&[answered]), ProbeVerdict::Egress);
    }

    #[test]
    fn targets_with_keeps_order_and_names_each_once() {
        use ProbeOutcome::*;
        let results = [
            result("b:1", Accepted),
            result("a:1", Answered),
            result("b:1", Accepted),
            result("c:1", Accepted),
        ];
        assert_eq!(targets_with(&results, Accepted), ["b:1", "c:1"]);
        assert_eq!(targets_with(&results, Answered), ["a:1"]);
        assert!(targets_with(&results, Refused).is_empty());
    }

    #[test]
    fn report_travels_with_the_wire_names() {
        let report = ProbeReport {
            uid: 1000,
            gid: 1000,
            kernel: "6.1.0".into(),
            interfaces: vec!["lo".into()],
            reached: vec!["1.1.1.1:53/udp".into()],
            accepted: vec!["8.8.8.8:443".into()],
            results: vec![
                ProbeResult {
                    target: "1.1.1.1:443".into(),
                    protocol: ProbeProtocol::Tcp,
                    outcome: ProbeOutcome::Refused,
                    bytes: 0,
                    detail: "the connection was refused".into(),
                },
                ProbeResult {
                    target: "8.8.8.8:443".into(),
                    protocol: ProbeProtocol::Tcp,
                    outcome: ProbeOutcome::Accepted,
                    bytes: 0,
                    detail: "accepted, then closed with nothing sent back".into(),
                },
                ProbeResult {
                    target: "1.1.1.1:53/udp".into(),
                    protocol: ProbeProtocol::Udp,
                    outcome: ProbeOutcome::Answered,
                    bytes: 45,
                    detail: "DNS response with the query's id".into(),
                },
            ],
            verdict: Some(ProbeVerdict::AcceptedOnly),
        };
        let want = serde_json::json!({
            "uid": 1000,
            "gid": 1000,
            "kernel": "6.1.0",
            "interfaces": ["lo"],
            "reached": ["1.1.1.1:53/udp"],
            "accepted": ["8.8.8.8:443"],
            "results": [
                {"target": "1.1.1.1:443", "protocol": "tcp", "outcome": "refused", "bytes": 0,
                 "detail": "the connection was refused"},
                {"target": "8.8.8.8:443", "protocol": "tcp", "outcome": "accepted", "bytes": 0,
                 "detail": "accepted, then closed with nothing sent back"},
                {"target": "1.1.1.1:53/udp", "protocol": "udp", "outcome": "answered", "bytes": 45,
                 "detail": "DNS response with the query's id"},
            ],
            "verdict": "accepted-only",
        });
        assert_eq!(serde_json::to_value(&report).unwrap(), want);
        let back: ProbeReport = serde_json::from_value(want).unwrap();
        assert_eq!(back, report);

        // Without --diagnose there is no verdict on the wire at all.
        let plain = ProbeReport {
            verdict: None,
            ..report
        };
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v.get("verdict").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<ProbeReport>(v).unwrap(), plain);
        assert_eq!(
            serde_json::to_value([ProbeVerdict::Egress, ProbeVerdict::None]).unwrap(),
            serde_json::json!(["egress", "none"])
        );
    }
}
