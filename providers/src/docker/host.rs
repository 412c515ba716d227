//! The Docker host: the engine's answer turned into words, and what the
//! host enforces, read once per provider from `docker info`.

use bollard::errors::Error as DockerError;
use bollard::models::SystemInfo;

use crate::sizing;
use crate::types::{ErrorCode, ProviderError};

/// The oldest engine API a computer can be made on.
pub const MIN_API: (u32, u32) = (1, 41);

/// What a computer's bounds rest on, read from `docker info`.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// `amd64` or `arm64`, as hello says it.
    pub arch: String,
    /// What sizes are checked against.
    pub size: sizing::Host,
    /// The host's AppArmor, when it has it: every container gets
    /// `docker-default`.
    pub apparmor: bool,
    /// The host's SELinux, when it has it: every container gets a label
    /// of type `container_t`.
    pub selinux: bool,
    /// Words for a host that remaps user ids (userns-remap, rootless).
    pub remap: Option<String>,
    /// One sentence per enforcement the host lacks.
    pub missing: Vec<String>,
    /// The engine's version, for notes.
    pub engine: String,
    /// The engine host's name (`docker info`'s Name).
    pub name: String,
}

impl Host {
    /// From `docker info`.
    pub fn of(info: &SystemInfo) -> Host {
        let mut missing = Vec::new();
        let lacks =
            |what: &str, why: &str| format!("this Docker host does not enforce {what}, so {why}");
        if info.memory_limit != Some(true) {
            missing.push(lacks(
                "memory limits",
                "a computer's memory size is only configuration",
            ));
        }
        if info.swap_limit != Some(true) {
            missing.push(lacks(
                "swap limits",
                "a computer could swap past its memory size",
            ));
        }
        if info.pids_limit != Some(true) {
            missing.push(lacks(
                "pids limits",
                "a computer's pids limit is only configuration",
            ));
        }
        if info.cpu_cfs_quota != Some(true) || info.cpu_cfs_period != Some(true) {
            missing.push(lacks(
                "CPU quotas (periods)",
                "a computer's cpus are only configuration",
            ));
        }
        let opts = info.security_options.clone().unwrap_or_default();
        let named = |name: &str| {
            opts.iter()
                .find(|o| o.split(',').any(|kv| kv == format!("name={name}")))
        };
        match named("seccomp") {
            Some(o) if !o.split(',').any(|kv| kv == "profile=unconfined") => {}
            Some(_) => missing.push(
                "this Docker host has no seccomp (its default seccomp profile is unconfined), so a computer could make any system call".into(),
            ),
            None => missing.push(
                "this Docker host has no seccomp, so a computer could make any system call".into(),
            ),
        }
        let remap = if named("rootless").is_some() {
            Some("rootless Docker".to_string())
        } else if named("userns").is_some() {
            Some("userns-remap".to_string())
        } else {
            None
        };
        let arch = match info.architecture.as_deref() {
            Some("x86_64") => "amd64".to_string(),
            Some("aarch64") => "arm64".to_string(),
            Some(a) => a.to_string(),
            None => String::new(),
        };
        let cpus = info.ncpu.unwrap_or(1).max(1) as f64;
        let memory_mb = (info.mem_total.unwrap_or(0).max(0) as u64) / (1024 * 1024);
        Host {
            arch,
            size: sizing::Host { cpus, memory_mb },
            apparmor: named("apparmor").is_some(),
            selinux: named("selinux").is_some(),
            remap,
            missing,
            engine: info.server_version.clone().unwrap_or_default(),
            name: info.name.clone().unwrap_or_default(),
        }
    }

    /// An engine older than API [`MIN_API`] (Docker 20.10) lacks what a
    /// computer is made with (private cgroup namespaces); bollard sends
    /// unversioned paths, so an older engine would silently ignore it.
    pub fn require_api(&mut self, api: &str) {
        let parse = |s: &str| {
            let (a, b) = s.split_once('.')?;
            Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?))
        };
        match parse(api) {
            Some(v) if v >= MIN_API => {}
            _ => self.missing.push(format!(
                "this Docker engine speaks API {api:?}, and a computer needs {}.{} or later (Docker 20.10) for its private cgroup namespace",
                MIN_API.0, MIN_API.1
            )),
        }
    }

    /// Refused in words, naming every enforcement the host lacks.
    pub fn require(&self) -> crate::types::Result<()> {
        if self.missing.is_empty() {
            return Ok(());
        }
        Err(ProviderError::refused(format!(
            "{}; a Docker computer is made only where its bounds are real",
            self.missing.join("; ")
        ))
        .with_field("host"))
    }
}

/// The one sentence for an engine that cannot be reached.
pub fn unreachable(socket: &str) -> ProviderError {
    ProviderError::new(
        ErrorCode::Unreachable,
        format!(
            "the Docker engine at {socket} did not answer: is dockerd running, and may this user reach its socket?"
        ),
    )
    .with_field("socket")
}

/// A Docker call's failure in words: what was being done and the next
/// step, with the engine's own text only in the log.
pub fn docker_error(socket: &str, doing: &str, e: DockerError) -> ProviderError {
    use DockerError::*;
    match e {
        DockerResponseServerError {
            status_code,
            message,
        } => {
            tracing::warn!("Docker refused {doing} ({status_code}): {message}");
            let code = match status_code {
                404 => ErrorCode::NotFound,
                409 => ErrorCode::Refused,
                400 => ErrorCode::Invalid,
                401 | 403 => ErrorCode::Unauthorized,
                _ => ErrorCode::Failed,
            };
            let words = match status_code {
                404 => "Docker has no such object".to_string(),
                409 => "Docker says it conflicts with what is there".to_string(),
                _ => format!("Docker answered {status_code}"),
            };
            // The engine's message names our own request's fault (a bad
            // option, a missing image): it holds no secret, and without
            // it the caller has no next step.
            let short: String = message.chars().take(300).collect();
            ProviderError::new(code, format!("{doing} failed: {words}: {short}"))
        }
        SocketNotFoundError(_)
        | HyperResponseError { .. }
        | HyperLegacyError { .. }
        | IOError { .. } => {
            tracing::warn!("Docker did not answer {doing}: {e}");
            unreachable(socket)
        }
        RequestTimeoutError => ProviderError::new(
            ErrorCode::Timeout,
            format!("{doing}: the Docker engine did not answer in time"),
        ),
        other => {
            tracing::warn!("{doing}: {other}");
            ProviderError::failed(format!("{doing} failed: {other}"))
        }
    }
}

/// Whether a Docker call failed for a missing object.
pub fn is_not_found(e: &DockerError) -> bool {
    matches!(
        e,
        DockerError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> SystemInfo {
        SystemInfo {
            memory_limit: Some(true),
            swap_limit: Some(true),
            pids_limit: Some(true),
            cpu_cfs_quota: Some(true),
            cpu_cfs_period: Some(true),
            security_options: Some(vec!["name=seccomp,profile=default".into()]),
            architecture: Some("x86_64".into()),
            ncpu: Some(2),
            mem_total: Some(8 << 30),
            ..Default::default()
        }
    }

    #[test]
    fn a_host_that_enforces_everything_passes() {
        let h = Host::of(&info());
        assert_eq!(h.arch, "amd64");
        assert_eq!(h.size.memory_mb, 8192);
        assert!(h.missing.is_empty() && h.require().is_ok());
        assert_eq!((h.apparmor, h.selinux, h.remap), (false, false, None));
    }

    #[test]
    fn each_missing_enforcement_is_named() {
        let mut i = info();
        i.swap_limit = Some(false);
        i.pids_limit = None;
        i.security_options = Some(vec![
            "name=seccomp,profile=unconfined".into(),
            "name=apparmor".into(),
            "name=userns".into(),
        ]);
        let mut h = Host::of(&i);
        h.require_api("1.40");
        assert_eq!(
            h.missing,
            vec![
                "this Docker host does not enforce swap limits, so a computer could swap past its memory size",
                "this Docker host does not enforce pids limits, so a computer's pids limit is only configuration",
                "this Docker host has no seccomp (its default seccomp profile is unconfined), so a computer could make any system call",
                "this Docker engine speaks API \"1.40\", and a computer needs 1.41 or later (Docker 20.10) for its private cgroup namespace",
            ]
        );
        assert!(h.apparmor);
        assert_eq!(h.remap.as_deref(), Some("userns-remap"));
        let e = h.require().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("host"));
    }
}
