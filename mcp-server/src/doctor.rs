//! `computer-mcp doctor`: what this host can give, each line a check that
//! ran, and for each thing that does not work the one next step. It never
//! fails on a host that lacks something: it says so.
//!
//! The last word is a real one: it makes a computer with the configured
//! provider and runs `true` in it, which is what the first tool call does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use computer_providers::{Provider, Release, survey_others};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// What was found.
    pub found: String,
    /// For a failed check, what to do next.
    pub next: Option<String>,
}

impl Check {
    fn ok(name: &'static str, found: impl Into<String>) -> Check {
        Check {
            name,
            ok: true,
            found: found.into(),
            next: None,
        }
    }
    fn no(name: &'static str, found: impl Into<String>, next: impl Into<String>) -> Check {
        Check {
            name,
            ok: false,
            found: found.into(),
            next: Some(next.into()),
        }
    }

    pub fn line(&self) -> String {
        let mark = if self.ok { "ok " } else { "NO " };
        match &self.next {
            Some(n) => format!("{mark} {:<20} {}\n    next: {n}", self.name, self.found),
            None => format!("{mark} {:<20} {}", self.name, self.found),
        }
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The host checks that need no provider.
pub fn host_checks() -> Vec<Check> {
    let mut out = Vec::new();
    let root = nix::unistd::geteuid().is_root();
    out.push(if root {
        Check::ok("user", "root: local computers get a uid of their own each")
    } else {
        Check::no(
            "user",
            format!("uid {} (not root)", nix::unistd::geteuid()),
            "run the server as root for local computers with their own uids and cgroups, or use --provider docker",
        )
    });
    out.push(match read("/proc/sys/user/max_user_namespaces") {
        Some(n) if n != "0" => Check::ok("user namespaces", format!("enabled (max {n})")),
        Some(_) => Check::no(
            "user namespaces",
            "disabled (user.max_user_namespaces is 0)",
            "sysctl -w user.max_user_namespaces=15000",
        ),
        None => Check::no(
            "user namespaces",
            "this kernel has none (/proc/sys/user/max_user_namespaces is missing)",
            "use a kernel with CONFIG_USER_NS, or --provider docker",
        ),
    });
    out.push(if Path::new("/proc/self/ns/net").exists() {
        Check::ok("network namespaces", "present (/proc/self/ns/net)")
    } else {
        Check::no(
            "network namespaces",
            "missing",
            "use a kernel with CONFIG_NET_NS: without it a computer cannot be kept off the network",
        )
    });
    let seccomp = read("/proc/self/status").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("Seccomp:"))
            .map(|l| l.to_string())
    });
    out.push(match seccomp {
        Some(l) => Check::ok("seccomp", format!("supported ({})", l.replace('\t', " "))),
        None => Check::no(
            "seccomp",
            "not in this kernel",
            "use a kernel with CONFIG_SECCOMP_FILTER: computerd refuses to run programs without it",
        ),
    });
    out.push(cgroups());
    out.push(match on_path(&["Xvfb"]) {
        Some(p) => Check::ok("Xvfb", format!("{} (for desktops)", p.display())),
        None => Check::no(
            "Xvfb",
            "not found (needed for desktop computers only)",
            "apt-get install xvfb",
        ),
    });
    out.push(
        match on_path(&["chromium", "chromium-browser", "google-chrome"]) {
            Some(p) => Check::ok("Chromium", format!("{} (for browsers)", p.display())),
            None => Check::no(
                "Chromium",
                "not found (needed for browser computers only)",
                "apt-get install chromium",
            ),
        },
    );
    out
}

fn cgroups() -> Check {
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
    if let Some(list) = v2
        .exists()
        .then(|| read(v2.to_str().unwrap_or_default()))
        .flatten()
    {
        let have: Vec<&str> = list.split_whitespace().collect();
        let missing: Vec<&str> = ["cpu", "memory", "pids"]
            .into_iter()
            .filter(|c| !have.contains(c))
            .collect();
        return if missing.is_empty() {
            Check::ok("cgroups", format!("v2 with {list}"))
        } else {
            Check::no(
                "cgroups",
                format!("v2 without {}", missing.join(", ")),
                "enable the controllers for this server's cgroup (cgroup.subtree_control), or run it as root",
            )
        };
    }
    let v1: Vec<&str> = ["cpu", "memory", "pids"]
        .into_iter()
        .filter(|c| Path::new("/sys/fs/cgroup").join(c).exists())
        .collect();
    if v1.len() == 3 {
        Check::ok("cgroups", "v1 with cpu, memory, pids")
    } else if v1.is_empty() {
        Check::no(
            "cgroups",
            "none mounted at /sys/fs/cgroup",
            "mount cgroup2 at /sys/fs/cgroup: without it a computer's CPU, memory and processes are unbounded",
        )
    } else {
        Check::no(
            "cgroups",
            format!("v1 with only {}", v1.join(", ")),
            "mount the cpu, memory and pids hierarchies",
        )
    }
}

impl From<computer_providers::Preflight> for Check {
    fn from(p: computer_providers::Preflight) -> Check {
        match p.found {
            Ok(found) => Check::ok(p.name, found),
            Err((wrong, next)) => Check::no(p.name, wrong, next),
        }
    }
}

/// Make a computer with the configured provider and run `true` in it.
pub async fn first_computer(provider: Arc<dyn Provider>, config: &Config) -> Check {
    let name = "a computer";
    let spec = match config.spec() {
        Ok(s) => s,
        Err(e) => return Check::no(name, e, "fix the option named"),
    };
    if let Err(e) = provider.check(&spec) {
        return Check::no(
            name,
            e.message,
            "fix the option named, or pick another --provider",
        );
    }
    let cancel = CancellationToken::new();
    let t = Instant::now();
    let created = match tokio::time::timeout(
        Duration::from_secs(60),
        provider.create(&spec, &cancel),
    )
    .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let next = match e.code {
                computer_providers::ErrorCode::Unreachable => {
                    "start the engine (systemctl start docker, or dockerd &), or fix --docker-socket; the server's user must reach the socket"
                }
                computer_providers::ErrorCode::NotFound => {
                    "make or name the image or binary the words name (--docker-image, --local-computerd)"
                }
                _ => "do what the words say, or see the NO lines above for what this host lacks",
            };
            return Check::no(
                name,
                format!(
                    "the {} provider could not make one: {}",
                    provider.id(),
                    e.message
                ),
                next,
            );
        }
        Err(_) => {
            return Check::no(
                name,
                "making one took over 60 s",
                "see the server's log (--log debug)",
            );
        }
    };
    let ran = async {
        let conn = provider
            .connect(&created.computer, &cancel)
            .await
            .map_err(|e| e.message)?;
        let r = conn
            .client
            .call_typed(&ExecParams {
                argv: vec!["true".into()],
                timeout_ms: Some(10_000),
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string());
        conn.client.close();
        r
    }
    .await;
    let took = t.elapsed();
    let _ = provider
        .release(&created.computer, Release::Delete, &cancel)
        .await;
    match ran {
        Ok(r) if r.exit_code == Some(0) => Check::ok(
            name,
            format!(
                "made by the {} provider, ran `true`, released ({} ms); network {}",
                provider.id(),
                took.as_millis(),
                created
                    .network
                    .as_ref()
                    .map_or_else(|| "not read back".to_string(), ToString::to_string)
            ),
        ),
        Ok(r) => Check::no(
            name,
            format!("`true` answered {r:?}"),
            "see the server's log (--log debug)",
        ),
        Err(e) => Check::no(
            name,
            format!("made, but could not run a program: {e}"),
            "see the server's log (--log debug)",
        ),
    }
}

/// Run every check; the text report and whether the configured provider
/// made a working computer.
pub async fn run(provider: Arc<dyn Provider>, config: &Config) -> (String, bool) {
    let mut checks = host_checks();
    // What this host could give the other providers (the engine Docker
    // would use, its static daemon), then what the configured one needs.
    let others = survey_others(
        &config.provider,
        Some(&config.providers),
        &crate::config::host_defaults(),
    )
    .await;
    checks.extend(others.into_iter().map(Check::from));
    checks.extend(provider.preflight().into_iter().map(Check::from));
    // A service's optional parts (a cluster's CRDs), asked, not made.
    if let Ok(found) = tokio::time::timeout(
        Duration::from_secs(60),
        provider.service_checks(&CancellationToken::new()),
    )
    .await
    {
        checks.extend(found.into_iter().map(Check::from));
    }
    // A vendor's account, asked without renting anything. A provider
    // that has one bills what it makes (a phone by the minute), so doctor
    // makes nothing with it: the account's answer is the verdict.
    let asked = tokio::time::timeout(
        Duration::from_secs(60),
        provider.test_connection(&CancellationToken::new()),
    )
    .await;
    let account = match asked {
        Ok(Some(p)) => Some(Check::from(p)),
        Ok(None) => None,
        Err(_) => Some(Check::no(
            "account",
            format!(
                "the {} provider's account did not answer within 60 s",
                provider.id()
            ),
            "check the provider's API URL and this host's network",
        )),
    };
    let works = match account {
        Some(a) => {
            let works = a.ok;
            checks.push(a);
            works
        }
        None => {
            let first = first_computer(provider, config).await;
            let works = first.ok;
            checks.push(first);
            works
        }
    };
    let mut text: String = checks.iter().map(|c| c.line() + "\n").collect();
    text.push_str(if works {
        "\nThe server can make computers here: plug it into a client (README, \"Plug it in\").\n"
    } else {
        "\nThe server cannot make a computer here yet: do the first `next:` above, then run doctor again.\n"
    });
    (text, works)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_what_was_found_and_the_next_step() {
        let c = Check::no("Docker", "not answering", "start dockerd");
        assert_eq!(
            c.line(),
            "NO  Docker               not answering\n    next: start dockerd"
        );
        assert_eq!(
            Check::ok("seccomp", "yes").line(),
            "ok  seccomp              yes"
        );
    }

    #[test]
    fn the_host_checks_run_on_any_host() {
        let checks = host_checks();
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "user",
                "user namespaces",
                "network namespaces",
                "seccomp",
                "cgroups",
                "Xvfb",
                "Chromium"
            ]
        );
        for c in &checks {
            assert_eq!(c.ok, c.next.is_none(), "{c:?}");
        }
    }
}
