//! What a Docker computer is made with, decided before anything is made,
//! and the container it becomes. [`Plan`] is the one source of both the
//! `docker create` body ([`Plan::body`]) and what the drift check holds the
//! container to, so the two cannot disagree.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigCgroupnsModeEnum, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountType, RestartPolicy, RestartPolicyNameEnum,
};
use computerd::launch::{InitArgs, StdioArgs, Time};

use super::egress;
use crate::share::Share;
use crate::sizing::{CPU_PERIOD_US, Limits};
use crate::types::{Labels, NetworkKind, ProviderError, Result, label};

/// Where the daemon is bound inside every computer (read-only), and run
/// from as PID 1.
pub const DAEMON_PATH: &str = computerd::DAEMON_PATH;
/// The computer's HOME and working directory: a tmpfs of its own.
pub const HOME: &str = "/work";
/// Init's socket directory: a tmpfs of the computer's user alone.
pub const RUN_DIR: &str = "/run/computerd";
/// /run/computerd holds only the socket.
pub const RUN_SIZE: &str = "1m";
/// A size in MiB for a memoryMb.
pub type MibOf = fn(u64) -> u64;

/// The root filesystem is read-only, so that nothing a computer writes
/// lands in its container's layer on the host's disk (`--storage-opt size=`
/// would bound that layer, but only on xfs with project quotas). These are
/// the places any program may write besides HOME, each a tmpfs charged to
/// the computer's memory bound: `(path, size in MiB for a memoryMb)`.
pub const SCRATCH: &[(&str, MibOf)] = &[
    // A quarter: a Chromium run with --disable-dev-shm-usage keeps its
    // shared memory here.
    ("/tmp", |mb| mb / 4),
    ("/var/tmp", |mb| mb / 16),
    ("/run/lock", |_| 1),
];
/// Where a computer's direct directory is bound, read-only: the sockets
/// this host's provider listens on for the daemon's bridge
/// ([`super::stream`]).
pub const DIRECT_MOUNT: &str = "/run/computerd-host";
/// The only security option a computer is made with.
pub const NO_NEW_PRIVILEGES: &str = "no-new-privileges";

/// Everything a new computer is made with.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// `computer-<12 hex digits>`.
    pub name: String,
    pub image: String,
    /// uid:gid, numbers.
    pub user: (u32, u32),
    /// None, Open or Allow (then on network mode none, with `egress`).
    pub network: NetworkKind,
    pub limits: Limits,
    pub deadline: Time,
    /// Every label the container carries: the spec's and ours.
    pub labels: Labels,
    /// The provider's cached copy of the daemon on the Docker host.
    pub daemon: PathBuf,
    /// Host directories at /workspace (checked by [`crate::share::plan`]).
    pub shares: Vec<Share>,
    /// A desktop's X display, which init is told of (`--display`) and the
    /// provider starts an X server on.
    pub display: Option<String>,
    /// An allowlist's entries, normalized: the computer mounts its proxy's
    /// socket volume read-only and init hands connections to it
    /// (`--egress`); the list is in its label [`egress::LIST_LABEL`].
    pub egress: Option<Vec<String>>,
    /// The computer's direct directory on this host (`<cache>/direct/<name>`,
    /// 0711), bound read-only at [`DIRECT_MOUNT`]; None for a computer
    /// reached over the exec's streams only.
    pub direct: Option<PathBuf>,
}

impl Plan {
    /// The labels every computer carries besides the spec's.
    pub fn own_labels(deadline: &Time) -> [(&'static str, String); 2] {
        [
            (label::COMPUTER, "1".to_string()),
            (label::DEADLINE, deadline.to_string()),
        ]
    }

    /// init's command line: `init --deadline <the deadline label> --socket
    /// /run/computerd/computerd.sock`, from the launch contract.
    pub fn init_args(&self) -> Vec<String> {
        let mut init = InitArgs::new(self.deadline, format!("{RUN_DIR}/computerd.sock"));
        init.display = self.display.clone();
        if self.egress.is_some() {
            init.egress = Some(egress::SOCKET.into());
        }
        strings(init.to_args())
    }

    /// `computerd stdio`'s, the bridge a connection runs as an exec.
    pub fn stdio_command() -> Vec<String> {
        let mut argv = vec![DAEMON_PATH.to_string()];
        argv.extend(strings(
            StdioArgs {
                socket: format!("{RUN_DIR}/computerd.sock").into(),
                direct: None,
            }
            .to_args(),
        ));
        argv
    }

    /// `computerd stdio --direct <inside>`: the bridge reaches this
    /// process's socket at `inside` (under [`DIRECT_MOUNT`]).
    pub fn stdio_command_direct(inside: &str) -> Vec<String> {
        let mut argv = vec![DAEMON_PATH.to_string()];
        argv.extend(strings(
            StdioArgs {
                socket: format!("{RUN_DIR}/computerd.sock").into(),
                direct: Some(inside.into()),
            }
            .to_args(),
        ));
        argv
    }

    pub fn user_string(&self) -> String {
        format!("{}:{}", self.user.0, self.user.1)
    }

    /// /work's size: half of memoryMb, so a full /work fails a write with
    /// "No space left on device" before the memory limit kills PID 1.
    pub fn work_size_mib(&self) -> u64 {
        self.limits.work_size_mib()
    }

    /// Each [`SCRATCH`] place and its size in MiB (at least 1): with HOME's
    /// half and Docker's 64 MiB /dev/shm, all of them full leave an eighth
    /// of a computer of 1 GiB or more to its processes (and the memory
    /// cgroup bounds them together in any case).
    pub fn scratch_mib(&self) -> Vec<(&'static str, u64)> {
        SCRATCH
            .iter()
            .map(|(path, size)| (*path, size(self.limits.memory_mb).max(1)))
            .collect()
    }

    /// Which bound holds what the computer writes, for its notes, with
    /// /dev/shm's size as docker inspect read it back.
    pub fn disk_note(&self, shm_bytes: Option<i64>) -> String {
        let places: Vec<String> = [(HOME, self.work_size_mib())]
            .into_iter()
            .chain(self.scratch_mib())
            .map(|(path, mib)| format!("{path} {mib} MiB"))
            .collect();
        let shm = match shm_bytes {
            Some(b) if b > 0 => format!("{} MiB", b >> 20),
            _ => "Docker's default size".into(),
        };
        format!(
            "disk: the root filesystem is read-only; the writable places are tmpfs ({}, /dev/shm {shm}), all charged to the memory bound ({} MiB), so nothing written in the computer lands on this host's disk",
            places.join(", "),
            self.limits.memory_mb
        )
    }

    /// HOME and the daemon's run directory, each the computer user's alone
    /// (0700), and the scratch places anyone may write (1777, sticky).
    pub fn tmpfs(&self) -> HashMap<String, String> {
        let (u, g) = self.user;
        let scratch = self.scratch_mib().into_iter().map(|(path, mib)| {
            (
                path.to_string(),
                format!("mode=1777,nosuid,nodev,size={mib}m"),
            )
        });
        HashMap::from([
            (
                HOME.to_string(),
                format!(
                    "uid={u},gid={g},mode=0700,nosuid,nodev,exec,size={}m",
                    self.work_size_mib()
                ),
            ),
            (
                RUN_DIR.to_string(),
                format!("uid={u},gid={g},mode=0700,noexec,nosuid,nodev,size={RUN_SIZE}"),
            ),
        ])
        .into_iter()
        .chain(scratch)
        .collect()
    }

    /// The daemon read-only, then the direct directory read-only, then
    /// every share, then an allowlist's socket volume read-only; nothing
    /// else.
    pub fn mounts(&self) -> Vec<Mount> {
        let bind = |source: String, target: String, read_only: bool| Mount {
            target: Some(target),
            source: Some(source),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            bind_options: Some(MountBindOptions {
                propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut out = vec![bind(
            self.daemon.display().to_string(),
            DAEMON_PATH.to_string(),
            true,
        )];
        if let Some(d) = &self.direct {
            out.push(bind(
                d.display().to_string(),
                DIRECT_MOUNT.to_string(),
                true,
            ));
        }
        for s in &self.shares {
            out.push(bind(
                s.source.display().to_string(),
                s.target.clone(),
                s.read_only,
            ));
        }
        if self.egress.is_some() {
            out.push(egress::volume_mount(&egress::name_of(&self.name), true));
        }
        out
    }

    pub fn network_mode(&self) -> &'static str {
        match self.network {
            NetworkKind::Open => "bridge",
            _ => "none",
        }
    }

    pub fn cpu_quota(&self) -> i64 {
        self.limits.quota_us() as i64
    }

    pub fn memory_bytes(&self) -> i64 {
        self.limits.memory_bytes() as i64
    }

    /// The body of `POST /containers/create`: every hardening flag.
    pub fn body(&self) -> ContainerCreateBody {
        daemon_body(
            Runs {
                image: self.image.clone(),
                user: self.user_string(),
                working_dir: HOME.to_string(),
                env: vec![format!("HOME={HOME}")],
                cmd: self.init_args(),
                labels: &self.labels,
            },
            HostConfig {
                tmpfs: Some(self.tmpfs()),
                readonly_rootfs: Some(true),
                ..hardened(
                    self.network_mode(),
                    Bounds {
                        cpu_quota: self.cpu_quota(),
                        memory: self.memory_bytes(),
                        pids: self.limits.pids as i64,
                    },
                    self.mounts(),
                )
            },
        )
    }
}

/// What a container of ours runs: the daemon, as `user`, with `cmd`.
pub struct Runs<'a> {
    pub image: String,
    pub user: String,
    pub working_dir: String,
    pub env: Vec<String>,
    pub cmd: Vec<String>,
    pub labels: &'a Labels,
}

/// A container's CPU quota (per [`CPU_PERIOD_US`]), memory (swap the
/// same: none) and pids limit.
pub struct Bounds {
    pub cpu_quota: i64,
    pub memory: i64,
    pub pids: i64,
}

/// `POST /containers/create` for a container that runs the daemon bound
/// at [`DAEMON_PATH`] (a computer, or its egress proxy), nothing attached.
pub fn daemon_body(runs: Runs<'_>, host_config: HostConfig) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(runs.image),
        user: Some(runs.user),
        working_dir: Some(runs.working_dir),
        env: Some(runs.env),
        entrypoint: Some(vec![DAEMON_PATH.to_string()]),
        cmd: Some(runs.cmd),
        labels: Some(runs.labels.clone().into_iter().collect()),
        attach_stdin: Some(false),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        tty: Some(false),
        open_stdin: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// The hardening every container of ours is made with: no capability,
/// no-new-privileges, never privileged, private IPC and cgroup
/// namespaces, its bounds, `mounts` and no restart.
pub fn hardened(network_mode: &str, bounds: Bounds, mounts: Vec<Mount>) -> HostConfig {
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec![NO_NEW_PRIVILEGES.into()]),
        privileged: Some(false),
        ipc_mode: Some("private".into()),
        cgroupns_mode: Some(HostConfigCgroupnsModeEnum::PRIVATE),
        network_mode: Some(network_mode.into()),
        cpu_period: Some(CPU_PERIOD_US as i64),
        cpu_quota: Some(bounds.cpu_quota),
        memory: Some(bounds.memory),
        memory_swap: Some(bounds.memory),
        pids_limit: Some(bounds.pids),
        mounts: Some(mounts),
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::NO),
            maximum_retry_count: None,
        }),
        ..Default::default()
    }
}

fn strings(args: Vec<OsString>) -> Vec<String> {
    args.into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `uid` or `uid:gid` in numbers (a uid alone is its own gid); a name is
/// refused, since the image may not have it.
pub fn parse_user(field: &str, s: &str) -> Result<(u32, u32)> {
    let bad = || {
        ProviderError::invalid(
            field,
            format!(
                "{field} {s:?} is not a uid or uid:gid in numbers (a name is refused: the image may not have it)"
            ),
        )
    };
    let (u, g) = match s.split_once(':') {
        Some((u, g)) => (u, g),
        None => (s, s),
    };
    let num = |t: &str| {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse::<u32>().ok())
            .flatten()
    };
    match (num(u), num(g)) {
        (Some(u), Some(g)) => Ok((u, g)),
        _ => Err(bad()),
    }
}

/// A computer's name: `computer-` and 12 hex digits.
pub fn is_computer_name(name: &str) -> bool {
    name.strip_prefix("computer-")
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The init command of [`plan`]'s container.
    const INIT_CMD: [&str; 5] = [
        "init",
        "--deadline",
        "2026-12-01T10:00:00Z",
        "--socket",
        "/run/computerd/computerd.sock",
    ];

    /// A plan as create makes one, for the tests of plan and drift.
    pub(crate) fn plan() -> Plan {
        let deadline: Time = "2026-12-01T10:00:00Z".parse().unwrap();
        let mut labels = Labels::new();
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        Plan {
            name: "computer-0123456789ab".into(),
            image: "debian:bookworm".into(),
            user: (1000, 1000),
            network: NetworkKind::None,
            limits: Limits::default(),
            deadline,
            labels,
            daemon: "/cache/computerd-abc".into(),
            shares: vec![],
            display: None,
            egress: None,
            direct: None,
        }
    }

    #[test]
    fn a_direct_directory_is_bound_read_only_after_the_daemon_and_named_to_the_bridge() {
        let mut p = plan();
        p.direct = Some("/cache/direct/computer-0123456789ab".into());
        let m = p.mounts();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].target.as_deref(), Some("/opt/computerd/computerd"));
        assert_eq!(m[1].typ, Some(MountType::BIND));
        assert_eq!(
            m[1].source.as_deref(),
            Some("/cache/direct/computer-0123456789ab")
        );
        assert_eq!(m[1].target.as_deref(), Some("/run/computerd-host"));
        assert_eq!(m[1].read_only, Some(true));
        assert_eq!(
            Plan::stdio_command_direct("/run/computerd-host/ab.sock"),
            vec![
                "/opt/computerd/computerd",
                "stdio",
                "--socket",
                "/run/computerd/computerd.sock",
                "--direct",
                "/run/computerd-host/ab.sock"
            ]
        );
    }

    #[test]
    fn the_body_carries_every_hardening_flag() {
        let b = plan().body();
        let h = b.host_config.clone().unwrap();
        assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert_eq!(h.network_mode.as_deref(), Some("none"));
        assert_eq!(h.ipc_mode.as_deref(), Some("private"));
        assert_eq!(h.cgroupns_mode, Some(HostConfigCgroupnsModeEnum::PRIVATE));
        assert_eq!((h.cpu_period, h.cpu_quota), (Some(100_000), Some(200_000)));
        assert_eq!(h.memory, Some(4096 * 1024 * 1024));
        assert_eq!(h.memory_swap, h.memory);
        assert_eq!(h.pids_limit, Some(1024));
        assert_eq!(
            h.tmpfs.unwrap(),
            HashMap::from([
                (
                    "/work".to_string(),
                    "uid=1000,gid=1000,mode=0700,nosuid,nodev,exec,size=2048m".to_string()
                ),
                (
                    "/run/computerd".to_string(),
                    "uid=1000,gid=1000,mode=0700,noexec,nosuid,nodev,size=1m".to_string()
                ),
                (
                    "/tmp".to_string(),
                    "mode=1777,nosuid,nodev,size=1024m".to_string()
                ),
                (
                    "/var/tmp".to_string(),
                    "mode=1777,nosuid,nodev,size=256m".to_string()
                ),
                (
                    "/run/lock".to_string(),
                    "mode=1777,nosuid,nodev,size=1m".to_string()
                ),
            ])
        );
        assert_eq!(h.readonly_rootfs, Some(true));
        assert_eq!(b.user.as_deref(), Some("1000:1000"));
        assert_eq!(b.entrypoint, Some(vec!["/opt/computerd/computerd".into()]));
        assert_eq!(b.cmd.unwrap(), INIT_CMD);
        assert_eq!(
            Plan::stdio_command(),
            vec![
                "/opt/computerd/computerd",
                "stdio",
                "--socket",
                "/run/computerd/computerd.sock"
            ]
        );
    }

    #[test]
    fn an_allowlisted_computer_is_on_none_with_its_socket_volume_and_init_relaying() {
        let mut p = plan();
        p.network = NetworkKind::Allow;
        p.egress = Some(vec!["good.eg.test".into()]);
        let b = p.body();
        let h = b.host_config.clone().unwrap();
        assert_eq!(h.network_mode.as_deref(), Some("none"));
        let m = h.mounts.unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].typ, Some(MountType::VOLUME));
        assert_eq!(m[1].source.as_deref(), Some("computer-0123456789ab-egress"));
        assert_eq!(m[1].target.as_deref(), Some("/run/egress"));
        assert_eq!(m[1].read_only, Some(true));
        assert_eq!(
            b.cmd.unwrap(),
            [&INIT_CMD[..], &["--egress", "/run/egress/egress.sock"]].concat()
        );
    }

    #[test]
    fn users_are_numbers() {
        assert_eq!(parse_user("user", "1000").unwrap(), (1000, 1000));
        assert_eq!(parse_user("user", "1000:0").unwrap(), (1000, 0));
        let e = parse_user("user", "www-data").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("user"));
        assert!(parse_user("user", "1:").is_err());
        assert!(parse_user("user", "+1").is_err());
    }

    #[test]
    fn names_are_ours_only() {
        assert!(is_computer_name("computer-0123456789ab"));
        assert!(!is_computer_name("computer-0123"));
        assert!(!is_computer_name("web-0123456789ab"));
    }
}
