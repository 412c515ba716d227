//! The hello every connection to a computer's daemon starts with, bounded,
//! and what a provider's computer must say at it. A daemon of another
//! build, kind or set of groups is never handed out: each provider says so
//! in its own words, from the one list of what differs ([`Drift`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use computerd::client::DaemonClient;
use computerd::protocol::{Group, HelloParams, HelloResult, MachineKind};

use crate::provider::Connection;
use crate::types::{ErrorCode, ProviderError, Result};

/// How long hello may take on a live connection.
pub const HELLO_WAIT: Duration = Duration::from_secs(10);

/// `conn`, unless its daemon differs from this server's (`drift`, what
/// differs): then closed, and refused in words naming `sandbox` (as "the
/// E2B sandbox").
pub fn refuse_drift(conn: Connection, drift: Vec<String>, sandbox: &str) -> Result<Connection> {
    if drift.is_empty() {
        return Ok(conn);
    }
    conn.client.close();
    Err(ProviderError::refused(format!(
        "the daemon in {sandbox} is not this server's: {}",
        drift.join("; ")
    )))
}

/// `conn`, once its daemon is this server's build on a Linux computer
/// answering exactly `groups`; else closed and refused naming `sandbox`.
pub fn checked_linux(conn: Connection, groups: &[Group], sandbox: &str) -> Result<Connection> {
    let expect = Expect {
        kind: MachineKind::Linux,
        groups,
        exact: true,
        arch: None,
    };
    let d = drift(&conn.hello, &expect)
        .iter()
        .map(|d| format!("{d:?}"))
        .collect();
    refuse_drift(conn, d, sandbox)
}

/// Say hello on `client`, within [`HELLO_WAIT`].
pub async fn call(client: DaemonClient) -> Result<Connection> {
    let hello = tokio::time::timeout(
        HELLO_WAIT,
        client.call(&HelloParams {
            client: Some(format!("computer-mcp {}", env!("CARGO_PKG_VERSION"))),
        }),
    )
    .await
    .map_err(|_| {
        ProviderError::new(
            ErrorCode::Unreachable,
            format!(
                "the computer's daemon did not answer hello within {} s",
                HELLO_WAIT.as_secs()
            ),
        )
    })?
    .map_err(|e| {
        ProviderError::new(
            ErrorCode::Unreachable,
            format!("the computer's daemon did not answer hello: {e}"),
        )
    })?;
    Ok(Connection {
        client: Arc::new(client),
        hello,
    })
}

/// What a provider's computer must say at hello.
#[derive(Clone, Debug)]
pub struct Expect<'a> {
    pub kind: MachineKind,
    /// The groups it must answer.
    pub groups: &'a [Group],
    /// Exactly those groups (a computer made by the provider), or at least
    /// them.
    pub exact: bool,
    /// The host's architecture, where the provider knows it.
    pub arch: Option<&'a str>,
}

/// One way a hello differs from what the provider expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    /// The daemon is another build than this server's.
    Version {
        got: String,
    },
    /// Not linux.
    Os {
        got: String,
    },
    Kind {
        got: MachineKind,
        want: MachineKind,
    },
    Groups {
        got: BTreeSet<&'static str>,
        want: BTreeSet<&'static str>,
    },
    Arch {
        got: String,
        want: String,
    },
}

/// Every way `hello` differs from `expect`, in this order: version, os,
/// kind, groups, arch.
pub fn drift(hello: &HelloResult, expect: &Expect<'_>) -> Vec<Drift> {
    let mut out = Vec::new();
    if hello.version != computerd::VERSION {
        out.push(Drift::Version {
            got: hello.version.clone(),
        });
    }
    if hello.os != "linux" {
        out.push(Drift::Os {
            got: hello.os.clone(),
        });
    }
    if hello.kind != expect.kind {
        out.push(Drift::Kind {
            got: hello.kind,
            want: expect.kind,
        });
    }
    let got: BTreeSet<&'static str> = hello.groups.iter().map(|g| g.as_str()).collect();
    let want: BTreeSet<&'static str> = expect.groups.iter().map(|g| g.as_str()).collect();
    let fits = if expect.exact {
        got == want
    } else {
        got.is_superset(&want)
    };
    if !fits {
        out.push(Drift::Groups { got, want });
    }
    if let Some(arch) = expect.arch.filter(|a| !a.is_empty())
        && hello.arch != arch
    {
        out.push(Drift::Arch {
            got: hello.arch.clone(),
            want: arch.to_string(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> HelloResult {
        HelloResult {
            version: computerd::VERSION.into(),
            os: "linux".into(),
            kind: MachineKind::Linux,
            arch: "amd64".into(),
            groups: vec![Group::Exec, Group::Files, Group::Processes],
            bytes_frames: None,
        }
    }

    #[test]
    fn a_hello_as_expected_differs_in_nothing_and_each_difference_is_named() {
        let linux = Expect {
            kind: MachineKind::Linux,
            groups: &[Group::Exec, Group::Files, Group::Processes],
            exact: true,
            arch: Some("amd64"),
        };
        assert_eq!(drift(&hello(), &linux), vec![]);
        let at_least = Expect {
            groups: &[Group::Exec],
            exact: false,
            ..linux.clone()
        };
        assert_eq!(drift(&hello(), &at_least), vec![]);
        let mut other = hello();
        other.version = "0.0.1".into();
        other.arch = "arm64".into();
        other.groups.push(Group::Screen);
        assert_eq!(
            drift(&other, &linux),
            vec![
                Drift::Version {
                    got: "0.0.1".into()
                },
                Drift::Groups {
                    got: ["exec", "files", "processes", "screen"].into(),
                    want: ["exec", "files", "processes"].into(),
                },
                Drift::Arch {
                    got: "arm64".into(),
                    want: "amd64".into()
                },
            ]
        );
        assert_eq!(drift(&other, &at_least).len(), 2);
    }
}
