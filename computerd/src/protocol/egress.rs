//! Network allowlists: the list's grammar and its checks, and the address
//! rule every egress proxy applies. Shared by the daemon's proxy
//! (`computerd egress`), the providers (which refuse a bad list before
//! anything is made) and the server (which reads `--network allow:…`).
//!
//! A list holds, in any order:
//! - names, exact (`pypi.org`, two labels or more) or `*.suffix`
//!   (`*.pythonhosted.org`: every name below the suffix, not the suffix
//!   itself; the suffix two labels or more and no public suffix);
//! - CIDRs, IPv4 or IPv6 (`93.184.215.0/24`, `2606:2800::/32`), with host
//!   bits zero and over no range the address rule refuses;
//! - or `*` alone: every public name and address (`--network public`).
//!
//! At most [`MAX_NAMES`] names and [`MAX_CIDRS`] CIDRs, each reached on
//! [`PORTS`] only. Whatever a name resolves to is checked again by the
//! proxy against [`classify`]: a listed name never reaches a private,
//! loopback, link-local, metadata, multicast, reserved or documentation
//! address, nor one of the proxy host's own.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The most names (exact and wildcard together) a list holds.
pub const MAX_NAMES: usize = 256;
/// The most CIDRs a list holds.
pub const MAX_CIDRS: usize = 256;
/// The only ports a listed host is reached on.
pub const PORTS: [u16; 2] = [80, 443];
/// The entry that stands for every public name and address.
pub const PUBLIC: &str = "*";
/// The longest entry read (a name is at most 253 bytes).
pub const MAX_ENTRY_LEN: usize = 256;

/// A list entry refused, with the entry and the rule it broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("network allow entry {entry:?}: {rule}")]
pub struct ListError {
    /// The entry as given (cut to [`MAX_ENTRY_LEN`]), or `""` for the list.
    pub entry: String,
    pub rule: String,
}

impl ListError {
    fn new(entry: &str, rule: impl Into<String>) -> Self {
        let mut entry = entry.to_string();
        if entry.len() > MAX_ENTRY_LEN {
            let mut end = MAX_ENTRY_LEN;
            while !entry.is_char_boundary(end) {
                end -= 1;
            }
            entry.truncate(end);
        }
        Self {
            entry,
            rule: rule.into(),
        }
    }
}

/// An address range, `addr/prefix`, host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    const fn v4(a: [u8; 4], prefix: u8) -> Self {
        Self {
            addr: IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            prefix,
        }
    }

    const fn v6(s: [u16; 8], prefix: u8) -> Self {
        Self {
            addr: IpAddr::V6(Ipv6Addr::new(
                s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
            )),
            prefix,
        }
    }

    /// Whether `ip` is in the range (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = mask32(self.prefix);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = mask128(self.prefix);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.addr) || other.contains(self.addr)
    }

    /// Parse `addr/prefix` strictly: dotted decimal IPv4 or IPv6, a
    /// prefix in range, host bits zero.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let Some((addr, prefix)) = s.split_once('/') else {
            return Err(
                "an address with no prefix: write it as a CIDR (1.2.3.4/32, 2001:db8::1/128)"
                    .into(),
            );
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| "not an IPv4 or IPv6 address before the /".to_string())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = match prefix.parse::<u8>() {
            Ok(p) if p <= max && !prefix.starts_with('+') => p,
            _ => return Err(format!("the prefix must be a number from 0 to {max}")),
        };
        let zero = match addr {
            IpAddr::V4(a) => u32::from(a) & !mask32(prefix) == 0,
            IpAddr::V6(a) => u128::from(a) & !mask128(prefix) == 0,
        };
        if !zero {
            return Err(format!(
                "host bits are set past /{prefix}: write the range's first address"
            ));
        }
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn mask32(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

fn mask128(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix.min(128)))
    }
}

/// What an address is, by the rule every proxy applies. Only
/// [`Class::Public`] is ever dialled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Public,
    Loopback,
    Private,
    LinkLocal,
    Metadata,
    Multicast,
    Unspecified,
    Reserved,
    Documentation,
    /// One of the proxy host's own addresses.
    ThisHost,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Public => "public",
            Class::Loopback => "loopback",
            Class::Private => "private",
            Class::LinkLocal => "link-local",
            Class::Metadata => "metadata",
            Class::Multicast => "multicast",
            Class::Unspecified => "unspecified",
            Class::Reserved => "reserved",
            Class::Documentation => "documentation",
            Class::ThisHost => "this-host",
        }
    }
}

crate::display_as_str!(Class);

/// The ranges the address rule refuses, most specific first (the first
/// that holds an address is its class). An IPv6 address outside 2000::/3
/// is reserved too ([`V6_RESERVED_REST`]). IPv4-mapped, NAT64 and 6to4
/// addresses are classed by the IPv4 address they carry ([`classify`]).
pub const REFUSED: &[(Cidr, Class)] = &[
    (Cidr::v4([0, 0, 0, 0], 8), Class::Unspecified),
    (Cidr::v4([10, 0, 0, 0], 8), Class::Private),
    (Cidr::v4([100, 100, 100, 200], 32), Class::Metadata),
    (Cidr::v4([100, 64, 0, 0], 10), Class::Private),
    (Cidr::v4([127, 0, 0, 0], 8), Class::Loopback),
    (Cidr::v4([169, 254, 169, 254], 32), Class::Metadata),
    (Cidr::v4([169, 254, 0, 0], 16), Class::LinkLocal),
    (Cidr::v4([172, 16, 0, 0], 12), Class::Private),
    (Cidr::v4([192, 0, 0, 0], 24), Class::Reserved),
    (Cidr::v4([192, 0, 2, 0], 24), Class::Documentation),
    (Cidr::v4([192, 88, 99, 0], 24), Class::Reserved),
    (Cidr::v4([192, 168, 0, 0], 16), Class::Private),
    (Cidr::v4([198, 18, 0, 0], 15), Class::Reserved),
    (Cidr::v4([198, 51, 100, 0], 24), Class::Documentation),
    (Cidr::v4([203, 0, 113, 0], 24), Class::Documentation),
    (Cidr::v4([224, 0, 0, 0], 4), Class::Multicast),
    (Cidr::v4([240, 0, 0, 0], 4), Class::Reserved),
    (Cidr::v6([0, 0, 0, 0, 0, 0, 0, 0], 128), Class::Unspecified),
    (Cidr::v6([0, 0, 0, 0, 0, 0, 0, 1], 128), Class::Loopback),
    (Cidr::v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), Class::Reserved),
    (
        Cidr::v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        Class::Documentation,
    ),
    (Cidr::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), Class::Reserved),
    (
        Cidr::v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        Class::Documentation,
    ),
    (
        Cidr::v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128),
        Class::Metadata,
    ),
    (Cidr::v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), Class::Private),
    (
        Cidr::v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        Class::LinkLocal,
    ),
    (Cidr::v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), Class::Private),
    (Cidr::v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), Class::Multicast),
];

/// IPv6 outside global unicast (2000::/3): reserved, as ranges (for the
/// overlap check of a listed CIDR). IPv4-mapped (::ffff:0:0/96) and NAT64
/// (64:ff9b::/96) sit in the first.
pub const V6_RESERVED_REST: &[Cidr] = &[
    Cidr::v6([0, 0, 0, 0, 0, 0, 0, 0], 3),
    Cidr::v6([0x4000, 0, 0, 0, 0, 0, 0, 0], 2),
    Cidr::v6([0x8000, 0, 0, 0, 0, 0, 0, 0], 1),
];

/// 6to4: the IPv4 address sits in bits 16..48.
const SIX_TO_FOUR: Cidr = Cidr::v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);
/// NAT64's well-known prefix: the IPv4 address is the last 32 bits.
const NAT64: Cidr = Cidr::v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);

/// The class of an address by the rule alone (not knowing this host's own).
/// An IPv6 address carrying an IPv4 one (mapped, compatible, NAT64, 6to4)
/// is the class of that IPv4 address, or stricter.
pub fn classify(ip: IpAddr) -> Class {
    let ip = canonical(ip);
    if let IpAddr::V6(v6) = ip {
        let bits = u128::from(v6);
        if NAT64.contains(ip) || SIX_TO_FOUR.contains(ip) {
            let v4 = if NAT64.contains(ip) {
                Ipv4Addr::from(bits as u32)
            } else {
                Ipv4Addr::from((bits >> 80) as u32)
            };
            return classify(IpAddr::V4(v4));
        }
        // ::a.b.c.d, the deprecated IPv4-compatible form.
        if bits >> 32 == 0 && bits > 1 {
            return match classify(IpAddr::V4(Ipv4Addr::from(bits as u32))) {
                Class::Public => Class::Reserved,
                c => c,
            };
        }
    }
    for (range, class) in REFUSED {
        if range.contains(ip) {
            return *class;
        }
    }
    if ip.is_ipv6() && V6_RESERVED_REST.iter().any(|r| r.contains(ip)) {
        return Class::Reserved;
    }
    if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Class::Reserved;
    }
    Class::Public
}

/// The class of an address for a proxy on a host whose own addresses are
/// `own`: [`classify`]'s, and [`Class::ThisHost`] for a public address
/// that is one of them.
pub fn classify_on(ip: IpAddr, own: &[IpAddr]) -> Class {
    let class = classify(ip);
    let c = canonical(ip);
    if class == Class::Public && own.iter().any(|o| canonical(*o) == c) {
        return Class::ThisHost;
    }
    class
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is; every other
/// address as it is.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// What a host in a request is: a name (lower case, no trailing dot) or an
/// address, in any spelling a client may send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// Read a request's host: `[v6]`, an IPv4 address in any form
/// `inet_aton` takes (`127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`),
/// or a name; a trailing dot is dropped. A host whose last label is a
/// number but that is no address, or that is not a name, is refused.
pub fn parse_host(s: &str) -> Result<Host, String> {
    if s.is_empty() || s.len() > 255 {
        return Err("the host is empty or longer than 255 bytes".into());
    }
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| "an IPv6 host must be written [address]".to_string())?;
        return inner
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| format!("[{inner}] is not an IPv6 address (no zone is taken)"));
    }
    if let Ok(v6) = s.parse::<Ipv6Addr>() {
        return Ok(Host::Ip(IpAddr::V6(v6)));
    }
    let t = s.strip_suffix('.').unwrap_or(s);
    let last = t.rsplit('.').next().unwrap_or("");
    let numeric = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || ((last.starts_with("0x") || last.starts_with("0X"))
                && last[2..].bytes().all(|b| b.is_ascii_hexdigit())));
    if numeric {
        return loose_ipv4(t)
            .map(|a| Host::Ip(IpAddr::V4(a)))
            .ok_or_else(|| format!("{s} ends in a number but is not an IPv4 address"));
    }
    check_name(t).map(Host::Name)
}

/// An IPv4 address as `inet_aton` reads it: one to four parts, each
/// decimal, octal (leading 0) or hex (0x); the last fills what is left.
pub fn loose_ipv4(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(4);
    for p in &parts {
        let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or(p.strip_prefix("0X")) {
            (h, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if p.is_empty() || (digits.is_empty() && radix != 16) {
            return None;
        }
        let n = if digits.is_empty() {
            0
        } else {
            if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
                return None;
            }
            u64::from_str_radix(digits, radix).ok()?
        };
        nums.push(n);
    }
    let (last, head) = nums.split_last()?;
    if head.iter().any(|n| *n > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if room < 64 && *last >= (1u64 << room) {
        return None;
    }
    let mut v: u64 = 0;
    for (i, n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i as u32);
    }
    v |= last;
    u32::try_from(v).ok().map(Ipv4Addr::from)
}

/// A DNS name in letters, digits and hyphens (lower-cased, no trailing
/// dot), labels of 1 to 63 bytes, 253 bytes in all.
fn check_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 253 {
        return Err("a name is 1 to 253 bytes".into());
    }
    for label in s.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!(
                "{s} has an empty label or one longer than 63 bytes"
            ));
        }
        let ok = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || label.starts_with('-') || label.ends_with('-') {
            return Err(format!(
                "{s} is not a DNS name (letters, digits and inner hyphens; an international name is written in its xn-- form)"
            ));
        }
    }
    Ok(s.to_ascii_lowercase())
}

/// Suffixes under which anyone registers a name: a wildcard on one lists
/// every stranger's site. The common two-label registries and shared
/// hosting domains; any `co|com|net|org|gov|edu|ac|or|ne|go.<cc>` too.
const PUBLIC_SUFFIXES: &[&str] = &[
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "appspot.com",
    "blogspot.com",
    "cloudfront.net",
    "amazonaws.com",
    "s3.amazonaws.com",
    "elasticbeanstalk.com",
    "azurewebsites.net",
    "azureedge.net",
    "cloudapp.net",
    "trafficmanager.net",
    "windows.net",
    "vercel.app",
    "netlify.app",
    "pages.dev",
    "workers.dev",
    "r2.dev",
    "web.app",
    "firebaseapp.com",
    "fly.dev",
    "onrender.com",
    "ngrok.io",
    "ngrok-free.app",
    "readthedocs.io",
    "glitch.me",
    "repl.co",
    "googleusercontent.com",
    "fastly.net",
    "akamaized.net",
    "edgekey.net",
    "azurefd.net",
    "duckdns.org",
    "no-ip.org",
];

const SECOND_LEVEL_REGISTRIES: &[&str] = &[
    "co", "com", "net", "org", "gov", "edu", "ac", "or", "ne", "go", "ltd", "plc", "me",
];

/// Whether `suffix` (two labels or more, lower case) is a public suffix
/// as this list knows them.
pub fn is_public_suffix(suffix: &str) -> bool {
    if PUBLIC_SUFFIXES.contains(&suffix) {
        return true;
    }
    let labels: Vec<&str> = suffix.split('.').collect();
    labels.len() == 2
        && labels[1].len() == 2
        && labels[1].bytes().all(|b| b.is_ascii_alphabetic())
        && SECOND_LEVEL_REGISTRIES.contains(&labels[0])
}

/// A checked list: names, wildcard suffixes and CIDRs, or every public
/// host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    /// Exact names, lower case, sorted.
    pub names: Vec<String>,
    /// The suffixes of `*.suffix` entries, lower case, sorted.
    pub suffixes: Vec<String>,
    pub cidrs: Vec<Cidr>,
    /// `*`: every public name and address.
    pub public: bool,
}

impl Allowlist {
    /// Check every entry; the first refused is named with its rule.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allowlist, ListError> {
        if entries.is_empty() {
            return Err(ListError::new(
                "",
                "an empty list reaches nothing: ask for network none instead",
            ));
        }
        let mut list = Allowlist::default();
        for e in entries {
            let e = e.as_ref();
            let t = e.trim();
            if t == PUBLIC {
                if entries.len() > 1 {
                    return Err(ListError::new(
                        e,
                        "* (every public host) stands alone: it already holds every other entry",
                    ));
                }
                list.public = true;
                continue;
            }
            list.add(e, t)?;
        }
        if list.names.len() + list.suffixes.len() > MAX_NAMES {
            return Err(ListError::new(
                "",
                format!(
                    "{} names is over the limit of {MAX_NAMES}",
                    list.names.len() + list.suffixes.len()
                ),
            ));
        }
        if list.cidrs.len() > MAX_CIDRS {
            return Err(ListError::new(
                "",
                format!(
                    "{} CIDRs is over the limit of {MAX_CIDRS}",
                    list.cidrs.len()
                ),
            ));
        }
        list.names.sort();
        list.names.dedup();
        list.suffixes.sort();
        list.suffixes.dedup();
        // By their text: no sort of another element type is compiled in.
        let mut texts: Vec<String> = list.cidrs.iter().map(Cidr::to_string).collect();
        texts.sort();
        let mut cidrs: Vec<Cidr> = Vec::with_capacity(texts.len());
        for t in &texts {
            if let Ok(c) = Cidr::parse(t)
                && !cidrs.contains(&c)
            {
                cidrs.push(c);
            }
        }
        list.cidrs = cidrs;
        Ok(list)
    }

    /// The list that allows every public host (`--network public`).
    pub fn public() -> Allowlist {
        Allowlist {
            public: true,
            ..Allowlist::default()
        }
    }

    fn add(&mut self, e: &str, t: &str) -> Result<(), ListError> {
        let refuse = |rule: String| Err(ListError::new(e, rule));
        if t.is_empty() {
            return refuse("an empty entry".into());
        }
        if t.len() > MAX_ENTRY_LEN {
            return refuse(format!("longer than {MAX_ENTRY_LEN} bytes"));
        }
        if t.contains("://") {
            return refuse(
                "a URL: list the host alone (pypi.org), which is reached on ports 80 and 443"
                    .into(),
            );
        }
        if t.contains('/') {
            if t.split('/').count() > 2 {
                return refuse("a URL or path: list the host alone (pypi.org), which is reached on ports 80 and 443".into());
            }
            let cidr = match Cidr::parse(t) {
                Ok(c) => c,
                Err(why)
                    if t.split('/')
                        .next()
                        .is_some_and(|h| h.parse::<IpAddr>().is_err()) =>
                {
                    return refuse(format!(
                        "a URL or path: list the host alone, which is reached on ports 80 and 443 ({why})"
                    ));
                }
                Err(why) => return refuse(why),
            };
            if let Some(why) = refused_overlap(&cidr) {
                return refuse(why);
            }
            self.cidrs.push(cidr);
            return Ok(());
        }
        if t.parse::<IpAddr>().is_ok() || loose_ipv4(t.strip_suffix('.').unwrap_or(t)).is_some() {
            return refuse(format!(
                "an address with no prefix: write it as a CIDR ({}/32 or an IPv6 /128)",
                t
            ));
        }
        if t.starts_with('[') {
            return refuse(
                "an address with no prefix: write it as a CIDR (2001:db8::1/128)".into(),
            );
        }
        if let Some((host, port)) = t.rsplit_once(':')
            && !host.is_empty()
        {
            return refuse(format!(
                "a port (:{port}): list the host alone, which is reached on ports 80 and 443 only"
            ));
        }
        if let Some(suffix) = t.strip_prefix("*.") {
            let suffix = check_name(suffix.strip_suffix('.').unwrap_or(suffix))
                .map_err(|why| ListError::new(e, why))?;
            if !suffix.contains('.') {
                return refuse(format!(
                    "a wildcard on a top-level domain (.{suffix}) lists every site in it: a wildcard needs a suffix of two labels or more (*.example.com)"
                ));
            }
            if is_public_suffix(&suffix) {
                return refuse(format!(
                    "a wildcard on the public suffix {suffix}, under which anyone registers a name: list the names you need under it"
                ));
            }
            self.suffixes.push(suffix);
            return Ok(());
        }
        if t.contains('*') {
            return refuse(
                "a wildcard is written *.suffix, at the start only (*.example.com)".into(),
            );
        }
        let name =
            check_name(t.strip_suffix('.').unwrap_or(t)).map_err(|why| ListError::new(e, why))?;
        if !name.contains('.') {
            return refuse(format!(
                "a name of one label ({name}) is resolved through this host's search domains: list a full name (two labels or more)"
            ));
        }
        self.names.push(name);
        Ok(())
    }

    /// The entries, normalized and sorted: names, wildcards, CIDRs (`*`
    /// alone for every public host). A list read back is compared by these.
    pub fn entries(&self) -> Vec<String> {
        if self.public {
            return vec![PUBLIC.to_string()];
        }
        let mut out: Vec<String> = self.names.clone();
        out.extend(self.suffixes.iter().map(|s| format!("*.{s}")));
        out.extend(self.cidrs.iter().map(Cidr::to_string));
        out
    }

    /// Whether a listed name matches `name` (lower case, no trailing dot):
    /// an exact name, or a name strictly below a wildcard's suffix.
    pub fn allows_name(&self, name: &str) -> bool {
        if self.public {
            return true;
        }
        if self
            .names
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
        {
            return true;
        }
        self.suffixes.iter().any(|s| {
            name.len() > s.len() + 1
                && name.ends_with(s.as_str())
                && name.as_bytes()[name.len() - s.len() - 1] == b'.'
        })
    }

    /// Whether an address written as the host is in a listed CIDR of its
    /// own family (the address rule still applies after).
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.public || self.cidrs.iter().any(|c| c.contains(ip))
    }
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.entries().join(", "))
    }
}

/// Why a listed CIDR is refused: it holds addresses the rule refuses.
fn refused_overlap(cidr: &Cidr) -> Option<String> {
    if let Some((range, class)) = REFUSED.iter().find(|(r, _)| r.overlaps(cidr)) {
        return Some(format!(
            "the range holds {class} addresses ({range}), which are always refused"
        ));
    }
    if cidr.addr.is_ipv6() {
        if let Some(range) = V6_RESERVED_REST.iter().find(|r| r.overlaps(cidr)) {
            return Some(format!(
                "the range holds reserved addresses ({range}: IPv6 outside 2000::/3, IPv4-mapped and NAT64 forms included; list the IPv4 range itself), which are always refused"
            ));
        }
        if SIX_TO_FOUR.overlaps(cidr) {
            return Some(format!(
                "the range holds 6to4 addresses ({SIX_TO_FOUR}): list the IPv4 range itself"
            ));
        }
    }
    if cidr.addr.is_ipv4() && cidr.contains(IpAddr::V4(Ipv4Addr::BROADCAST)) {
        return Some("the range holds the broadcast address 255.255.255.255".into());
    }
    None
}

/// The words a refusal ends with: how to allow the host, when it can be.
pub const DEFAULT_HINT: &str = "ask for a computer whose network allow list names it (network: {allow: [...]}; --network allow:NAME)";

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_refused_class_is_found_in_every_spelling() {
        let cases = [
            ("10.1.2.3", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.0.1", Class::Private),
            ("100.64.0.1", Class::Private),
            ("127.0.0.1", Class::Loopback),
            ("127.255.0.9", Class::Loopback),
            ("::1", Class::Loopback),
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:10.0.0.1", Class::Private),
            ("::127.0.0.1", Class::Loopback),
            ("64:ff9b::7f00:1", Class::Loopback),
            ("64:ff9b::a9fe:a9fe", Class::Metadata),
            ("2002:7f00:1::", Class::Loopback),
            ("2002:a00:1::", Class::Private),
            ("169.254.169.254", Class::Metadata),
            ("::ffff:169.254.169.254", Class::Metadata),
            ("fd00:ec2::254", Class::Metadata),
            ("100.100.100.200", Class::Metadata),
            ("169.254.1.1", Class::LinkLocal),
            ("fe80::1", Class::LinkLocal),
            ("224.0.0.1", Class::Multicast),
            ("ff02::1", Class::Multicast),
            ("0.0.0.0", Class::Unspecified),
            ("::", Class::Unspecified),
            ("240.0.0.1", Class::Reserved),
            ("255.255.255.255", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("2001::1", Class::Reserved),
            ("100::1", Class::Reserved),
            ("4000::1", Class::Reserved),
            ("192.0.2.1", Class::Documentation),
            ("198.51.100.7", Class::Documentation),
            ("203.0.113.9", Class::Documentation),
            ("2001:db8::1", Class::Documentation),
            ("fc00::1", Class::Private),
            ("fd12:3456::1", Class::Private),
            ("93.184.215.14", Class::Public),
            ("2606:4700:4700::1111", Class::Public),
            ("::ffff:93.184.215.14", Class::Public),
            ("64:ff9b::5db8:d70e", Class::Public),
        ];
        for (a, want) in cases {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
        let own = [ip("93.184.215.14")];
        assert_eq!(
            classify_on(ip("::ffff:93.184.215.14"), &own),
            Class::ThisHost
        );
        assert_eq!(classify_on(ip("93.184.215.15"), &own), Class::Public);
    }

    #[test]
    fn hosts_are_read_in_every_spelling_a_client_sends() {
        let v4 = |s: &str| Host::Ip(ip(s));
        let cases = [
            ("127.0.0.1", v4("127.0.0.1")),
            ("127.0.0.1.", v4("127.0.0.1")),
            ("127.1", v4("127.0.0.1")),
            ("2130706433", v4("127.0.0.1")),
            ("0x7f000001", v4("127.0.0.1")),
            ("0x7f.0.0.1", v4("127.0.0.1")),
            ("0177.0.0.01", v4("127.0.0.1")),
            ("017700000001", v4("127.0.0.1")),
            ("0251.0376.0251.0376", v4("169.254.169.254")),
            ("[::ffff:127.0.0.1]", v4("::ffff:127.0.0.1")),
            ("::1", v4("::1")),
            ("PyPI.org.", Host::Name("pypi.org".into())),
        ];
        for (s, want) in cases {
            assert_eq!(parse_host(s).unwrap(), want, "{s}");
        }
        for bad in [
            "",
            "1.2.3.999",
            "256.1.1.1",
            "1.2.3.4.5",
            "[::1",
            "[fe80::1%eth0]",
            "a..b",
            "-a.com",
            "ex ample.com",
            "héllo.com",
            "08.1.1.1",
        ] {
            assert!(parse_host(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn a_list_is_normalized_and_matches_names_below_a_wildcard_only() {
        let l = Allowlist::parse(&[
            "PyPI.org.",
            "*.pythonhosted.org",
            "93.184.215.0/24",
            "2606:2800::/32",
            "pypi.org",
        ])
        .unwrap();
        assert_eq!(
            l.entries(),
            [
                "pypi.org",
                "*.pythonhosted.org",
                "2606:2800::/32",
                "93.184.215.0/24"
            ]
        );
        assert!(l.allows_name("pypi.org"));
        assert!(l.allows_name("files.pythonhosted.org"));
        assert!(l.allows_name("a.b.pythonhosted.org"));
        assert!(!l.allows_name("pythonhosted.org"));
        assert!(!l.allows_name("evilpythonhosted.org"));
        assert!(!l.allows_name("pypi.org.evil.com"));
        assert!(l.allows_ip(ip("93.184.215.14")));
        assert!(l.allows_ip(ip("::ffff:93.184.215.14")));
        assert!(!l.allows_ip(ip("93.184.216.14")));
        assert_eq!(Allowlist::parse(&["*"]).unwrap(), Allowlist::public());
    }

    #[test]
    fn bad_lists_are_refused_naming_the_entry_and_the_rule() {
        let said = |entries: &[&str]| Allowlist::parse(entries).unwrap_err().to_string();
        let cases: &[(&[&str], &str)] = &[
            (&[], "an empty list reaches nothing: ask for network none"),
            (&["pypi.org:443"], "\"pypi.org:443\": a port (:443)"),
            (
                &["https://pypi.org/simple"],
                "\"https://pypi.org/simple\": a URL",
            ),
            (&["pypi.org/simple"], "a URL or path"),
            (&["93.184.215.14"], "an address with no prefix"),
            (&["::1"], "an address with no prefix"),
            (
                &["10.0.0.0/8"],
                "\"10.0.0.0/8\": the range holds private addresses (10.0.0.0/8)",
            ),
            (&["0.0.0.0/0"], "always refused"),
            (&["127.0.0.1/32"], "loopback"),
            (&["169.254.169.254/32"], "metadata"),
            (&["::ffff:0:0/96"], "reserved"),
            (&["2002::/16"], "6to4"),
            (&["93.184.215.1/24"], "host bits are set past /24"),
            (
                &["93.184.215.0/33"],
                "the prefix must be a number from 0 to 32",
            ),
            (&["*.com"], "a wildcard on a top-level domain"),
            (&["*.co.uk"], "a wildcard on the public suffix co.uk"),
            (
                &["*.github.io"],
                "a wildcard on the public suffix github.io",
            ),
            (&["foo.*.com"], "a wildcard is written *.suffix"),
            (&["localhost"], "a name of one label"),
            (&["*", "pypi.org"], "stands alone"),
            (&["ex ample.com"], "is not a DNS name"),
        ];
        for (entries, want) in cases {
            let s = said(entries);
            assert!(s.contains(want), "{entries:?}: {s}");
        }
        let many: Vec<String> = (0..=MAX_NAMES)
            .map(|i| format!("h{i}.example.com"))
            .collect();
        assert_eq!(
            said(&many.iter().map(String::as_str).collect::<Vec<_>>()),
            "network allow entry \"\": 257 names is over the limit of 256"
        );
        let cidrs: Vec<String> = (0..=MAX_CIDRS)
            .map(|i| format!("8.{}.{}.0/24", i / 200, i % 200))
            .collect();
        let s = Allowlist::parse(&cidrs).unwrap_err().to_string();
        assert!(s.contains("257 CIDRs is over the limit of 256"), "{s}");
    }
}
