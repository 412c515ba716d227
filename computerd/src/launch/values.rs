//! The typed values of computerd's flags: times, users, and the sandbox's
//! network and shares, each parsed with the words the daemon refuses bad
//! input in.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A time on computerd's command line: RFC 3339 (such as
/// 2026-12-01T10:00:00Z), held and rendered in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(OffsetDateTime);

impl Time {
    pub fn new(t: OffsetDateTime) -> Self {
        Self(t.to_offset(time::UtcOffset::UTC))
    }

    /// Milliseconds since the epoch; None outside the years time can hold.
    pub fn from_unix_ms(ms: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .ok()
            .map(Self::new)
    }

    /// Now plus `d` (saturating at the latest time that can be held).
    pub fn from_now(d: Duration) -> Self {
        let now = OffsetDateTime::now_utc();
        Self::new(
            now.checked_add(d.try_into().unwrap_or(time::Duration::MAX))
                .unwrap_or(now),
        )
    }

    pub fn get(self) -> OffsetDateTime {
        self.0
    }
}

impl From<OffsetDateTime> for Time {
    fn from(t: OffsetDateTime) -> Self {
        Self::new(t)
    }
}

impl FromStr for Time {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OffsetDateTime::parse(s, &Rfc3339)
            .map(Self::new)
            .map_err(|e| {
                format!("{s:?} is not an RFC 3339 time such as 2026-12-01T10:00:00Z ({e})")
            })
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.format(&Rfc3339) {
            Ok(s) => f.write_str(&s),
            // Only a year outside 0..=9999 cannot be written as RFC 3339.
            Err(_) => write!(f, "{}", self.0.unix_timestamp()),
        }
    }
}

/// `--user UID:GID`: the ids init becomes (with no supplementary groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UserSpec {
    pub uid: u32,
    pub gid: u32,
}

impl FromStr for UserSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--user {s:?} is not uid:gid (two numbers, such as 1000:1000)");
        // u32::MAX is (uid_t)-1, "no change" to set*id: never an id.
        let (uid, gid) = two_numbers(s, &[':'], |n| n != u32::MAX).ok_or_else(bad)?;
        Ok(Self { uid, gid })
    }
}

/// `A<sep>B` as two numbers, each written plainly (no sign) and taken by `ok`.
fn two_numbers(s: &str, sep: &[char], ok: impl Fn(u32) -> bool) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(sep)?;
    let num = |x: &str| {
        x.parse::<u32>()
            .ok()
            .filter(|&n| !x.starts_with('+') && ok(n))
    };
    Some((num(a)?, num(b)?))
}

impl fmt::Display for UserSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

/// The sandbox's `--network`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Network {
    /// A network namespace of the computer's own, with only `lo` up.
    #[default]
    None,
    /// The host's network, shared.
    Host,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

impl FromStr for Network {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Network::None),
            "host" => Ok(Network::Host),
            _ => Err(format!(
                "--network is none (only the computer's own loopback) or host (the host's network); {s:?} is neither"
            )),
        }
    }
}

crate::display_as_str!(Network);

/// `--bind HOST_DIR:INSIDE[:ro|:rw]`: a host directory shown at `INSIDE`
/// (under `/workspace`), read-write unless `:ro`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    pub source: PathBuf,
    pub inside: PathBuf,
    pub read_only: bool,
}

impl FromStr for Share {
    type Err = String;
    /// The syntax only; the sandbox checks the paths.
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let (source, inside, read_only) = match parts[..] {
            [source, inside] => (source, inside, false),
            [source, inside, "ro"] => (source, inside, true),
            [source, inside, "rw"] => (source, inside, false),
            [_, _, mode] => {
                return Err(format!(
                    "--bind {s:?}: the mode after the second ':' is ro or rw, not {mode:?}"
                ));
            }
            _ => {
                return Err(format!(
                    "--bind {s:?} is not HOST_DIR:INSIDE[:ro] (a path holding ':' cannot be shared)"
                ));
            }
        };
        if source.is_empty() || inside.is_empty() {
            return Err(format!(
                "--bind {s:?} is not HOST_DIR:INSIDE[:ro]: a path is empty"
            ));
        }
        Ok(Share {
            source: source.into(),
            inside: inside.into(),
            read_only,
        })
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source.display(), self.inside.display())?;
        if self.read_only {
            f.write_str(":ro")?;
        }
        Ok(())
    }
}

/// `--screen WxH`: a desktop's screen in pixels, each side from
/// [`Screen::MIN_SIDE`] to [`Screen::MAX_SIDE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Screen {
    pub width: u32,
    pub height: u32,
}

impl Screen {
    /// The smallest side a screen may have.
    pub const MIN_SIDE: u32 = 64;
    /// The largest side a screen may have (8K is 7680 wide).
    pub const MAX_SIDE: u32 = 8192;
    /// The screen a desktop gets unless told otherwise.
    pub const DEFAULT: Screen = Screen {
        width: 1280,
        height: 800,
    };
}

impl Default for Screen {
    fn default() -> Self {
        Screen::DEFAULT
    }
}

impl FromStr for Screen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "screen {s:?} is not WIDTHxHEIGHT in pixels (such as 1280x800), each side {} to {}",
                Screen::MIN_SIDE,
                Screen::MAX_SIDE
            )
        };
        let sides = Screen::MIN_SIDE..=Screen::MAX_SIDE;
        let (width, height) =
            two_numbers(s, &['x', 'X'], |n| sides.contains(&n)).ok_or_else(bad)?;
        Ok(Self { width, height })
    }
}

impl fmt::Display for Screen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// As its flag is written, `1280x800`.
impl serde::Serialize for Screen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Screen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
