//! What `doctor` says of Docker on a server that runs another provider:
//! whether the engine answers, as this provider reads it, and whether the
//! static daemon its computers would bind is there.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{DockerOptions, DockerProvider, cache};
use crate::provider::Preflight;
use crate::settings::{HostDefaults, Table};

/// How long the engine gets to answer doctor.
const ENGINE_WAIT: Duration = Duration::from_secs(10);

/// The engine at the default socket (or the table's `socket`), then the
/// static computerd.
pub async fn survey(table: Option<&Table>, host: &HostDefaults) -> Vec<Preflight> {
    let socket = table
        .and_then(|t| t.get("socket"))
        .and_then(|v| v.as_str())
        .map(String::from);
    vec![engine(socket).await, computerd(host)]
}

fn no(found: impl Into<String>, next: &str) -> Preflight {
    Preflight {
        name: "Docker",
        found: Err((found.into(), next.to_string())),
    }
}

/// The engine and its enforcement, read as the provider reads it.
async fn engine(socket: Option<String>) -> Preflight {
    let mut opts = DockerOptions::new(PathBuf::from("/nonexistent"), std::env::temp_dir());
    if let Some(s) = socket {
        opts.socket = s;
    }
    let p = match DockerProvider::new(opts) {
        Ok(p) => p,
        Err(e) => return no(e.message, "install docker.io and start dockerd"),
    };
    match tokio::time::timeout(ENGINE_WAIT, p.host(&CancellationToken::new())).await {
        Ok(Ok(h)) if h.missing.is_empty() => Preflight {
            name: "Docker",
            found: Ok(format!(
                "engine {} reachable, enforcing memory, pids, CPU and seccomp",
                h.engine
            )),
        },
        Ok(Ok(h)) => no(
            format!("engine {} lacks: {}", h.engine, h.missing.join("; ")),
            "use a Docker host with cgroup limits and seccomp enabled",
        ),
        Ok(Err(e)) => no(
            e.message,
            "start dockerd (systemctl start docker, or dockerd &), and run the server as a user who may reach its socket",
        ),
        Err(_) => no(
            format!(
                "the engine did not answer within {} s",
                ENGINE_WAIT.as_secs()
            ),
            "check that dockerd is running and not hung (docker info)",
        ),
    }
}

/// The static daemon a Docker computer would bind with no
/// `--docker-computerd` given (the provider's own default).
fn computerd(host: &HostDefaults) -> Preflight {
    match cache::default_computerd(host) {
        Some(path) => cache::preflight(&path),
        None => Preflight {
            name: "Docker's computerd",
            found: Err(("not found".to_string(), cache::INSTALL_STATIC.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    /// Doctor prints these words as next steps: the top README's
    /// Troubleshooting says each of them.
    #[test]
    fn the_readme_troubleshooting_names_every_next_step_of_dockers_survey() {
        let readme = include_str!("../../../README.md");
        let section = computer_testkit::markdown_section(readme, "## Troubleshooting");
        let src = include_str!("survey.rs");
        let code = &src[..src.find("#[cfg(test)]").unwrap_or(src.len())];
        let mut steps = computer_testkit::last_literal_args(code, " no(");
        steps.push(super::cache::INSTALL_STATIC.to_string());
        assert_eq!(steps.len(), 5, "{steps:?}");
        assert!(steps.iter().any(|s| s.contains("crt-static")), "{steps:?}");
        for s in steps {
            assert!(
                section.contains(&s),
                "README's Troubleshooting lacks Docker's next step {s:?}"
            );
        }
    }
}
