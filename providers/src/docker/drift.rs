//! The drift check: a computer's own report (docker inspect, and its
//! daemon's hello) held to its [`Plan`], one sentence per mismatch.
//!
//! The check is closed. Every field of `HostConfig` and `Config` is one
//! create asks for, one with a stated default, or one that widens nothing
//! the computer's bounds rest on (named in [`IRRELEVANT_HOST`] and
//! [`IRRELEVANT_CONFIG`]); any other field must be empty (absent, null,
//! "", 0, false, [] or {}), or it is drift naming it. The inspect is read
//! through bollard's model (API 1.53), so every field that model knows is
//! held, including those a Docker newer than this host's would fill.

use std::collections::{BTreeMap, BTreeSet};

use computerd::protocol::{Group, HelloResult, MachineKind};
use serde_json::Value;

use super::host::Host;
use super::plan::{DAEMON_PATH, HOME, NO_NEW_PRIVILEGES, Plan, RUN_DIR};
use crate::daemon_backed::hello::{self, Drift, Expect};
use crate::sizing::CPU_PERIOD_US;

/// Docker's own masked paths since 20.10; a newer Docker's extra are fine.
pub const MASKED: &[&str] = &[
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];
pub const READONLY: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// HostConfig fields that cannot widen a computer: the host's log driver,
/// the console size, a client-side file, /dev/shm (charged to its memory),
/// rlimits (which cannot raise a cgroup limit).
pub const IRRELEVANT_HOST: &[&str] = &[
    "LogConfig",
    "ConsoleSize",
    "ContainerIDFile",
    "ShmSize",
    "Ulimits",
];
/// Config fields that are the image's settings and act only inside.
pub const IRRELEVANT_CONFIG: &[&str] = &[
    "Hostname",
    "Domainname",
    "AttachStdin",
    "AttachStdout",
    "AttachStderr",
    "Tty",
    "OpenStdin",
    "StdinOnce",
    "ExposedPorts",
    "Healthcheck",
    "ArgsEscaped",
    "OnBuild",
    "StopSignal",
    "StopTimeout",
    "Shell",
    "MacAddress",
    "NetworkDisabled",
];

/// The groups a Docker computer's daemon answers, no more, no fewer.
pub const GROUPS: &[Group] = &[Group::Exec, Group::Files, Group::Processes];

/// Absent, null, "", 0, false, [] or {}.
pub(crate) fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

pub(crate) fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn show(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "nothing".into(),
        Some(v) => v.to_string(),
    }
}

/// Tmpfs options as a set, order aside.
fn options(s: &str) -> BTreeSet<String> {
    s.split(',')
        .filter(|o| !o.is_empty())
        .map(String::from)
        .collect()
}

/// Whose inspect a [`Section`] reads: its words differ.
#[derive(Clone, Copy)]
pub(crate) enum Whose {
    Computer,
    Proxy,
}

/// One closed section of an inspect (`HostConfig`, `Config`): each field
/// held is named as it is checked, and [`Section::finish`] names every
/// other field that is not empty.
pub(crate) struct Section<'a> {
    name: &'static str,
    fields: &'a Value,
    whose: Whose,
    checked: BTreeSet<&'static str>,
    out: Vec<String>,
}

impl<'a> Section<'a> {
    /// `inspected[name]`, with `irrelevant` fields left unchecked.
    pub(crate) fn new(
        inspected: &'a Value,
        name: &'static str,
        whose: Whose,
        irrelevant: &[&'static str],
    ) -> Self {
        Section {
            name,
            fields: inspected.get(name).unwrap_or(&Value::Null),
            whose,
            checked: irrelevant.iter().copied().collect(),
            out: Vec::new(),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.fields.get(key)
    }

    /// `key` is held, and named unless `ok`, as what it `must` be.
    pub(crate) fn want(&mut self, key: &'static str, ok: bool, must: impl std::fmt::Display) {
        self.checked.insert(key);
        if ok {
            return;
        }
        let name = self.name;
        self.out.push(match self.whose {
            Whose::Computer => format!(
                "{name}.{key} is {}, where it must be {must}",
                show(self.get(key))
            ),
            Whose::Proxy => format!(
                "has {name}.{key} {}, where it must be {must}",
                self.get(key).unwrap_or(&Value::Null)
            ),
        });
    }

    /// Each of `held`: a key, whether it is as it must be, and what it
    /// must be.
    pub(crate) fn want_all(
        &mut self,
        held: impl IntoIterator<Item = (&'static str, bool, String)>,
    ) {
        for (key, ok, must) in held {
            self.want(key, ok, must);
        }
    }

    /// Docker's defaults that nothing here asks to change.
    pub(crate) fn want_defaults(&mut self) {
        let isolation = self
            .get("Isolation")
            .and_then(Value::as_str)
            .is_none_or(|i| i.is_empty() || i == "default");
        self.want("Isolation", isolation, "empty or \"default\"");
        let swappiness = self
            .get("MemorySwappiness")
            .is_none_or(|v| v.is_null() || v.as_i64() == Some(-1));
        self.want("MemorySwappiness", swappiness, "null or -1");
    }

    /// Every mismatch, then every field held that was not checked and is
    /// not empty.
    pub(crate) fn finish(mut self) -> Vec<String> {
        let name = self.name;
        if let Some(o) = self.fields.as_object() {
            for (k, v) in o {
                if self.checked.contains(k.as_str()) || empty(v) {
                    continue;
                }
                self.out.push(match self.whose {
                    Whose::Computer => format!(
                        "{name}.{k} is {v}, where it must be empty: a computer is made without it"
                    ),
                    Whose::Proxy => {
                        format!("has {name}.{k} {v}, where a proxy is made without it")
                    }
                });
            }
        }
        self.out
    }
}

/// The inspect half: every mismatch between `inspected` (docker inspect
/// as JSON) and `plan`, on `host`.
pub fn inspect_drift(plan: &Plan, inspected: &Value, host: &Host) -> Vec<String> {
    let mut hc = Section::new(inspected, "HostConfig", Whose::Computer, IRRELEVANT_HOST);
    want_confined(&mut hc);
    want_bounds(&mut hc, plan);
    want_storage(&mut hc, plan);
    let mode = plan.network_mode();
    let on_mode = hc.get("NetworkMode").and_then(Value::as_str) == Some(mode);
    hc.want("NetworkMode", on_mode, format!("{mode:?}"));
    let no_restart = hc
        .get("RestartPolicy")
        .and_then(|r| r.get("Name"))
        .and_then(Value::as_str)
        .is_none_or(|n| n.is_empty() || n == "no");
    hc.want(
        "RestartPolicy",
        no_restart,
        "no restart (a restart would bring a computer back after its deadline)",
    );
    hc.want_defaults();
    let mut out = hc.finish();
    out.extend(config_drift(plan, inspected));

    // The network it is on, and the host's own confinement.
    let networks: Vec<String> = inspected
        .get("NetworkSettings")
        .and_then(|n| n.get("Networks"))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if networks != [mode] {
        out.push(format!(
            "the computer is on the networks {networks:?}, where it must be on {mode:?} alone"
        ));
    }
    out.extend(confinement_drift(inspected, host));
    out
}

/// No capability, no privilege, no new privileges, private namespaces,
/// runc, and Docker's masked and read-only paths.
fn want_confined(hc: &mut Section) {
    let h = |k: &str| hc.get(k);
    let private = |k: &str| h(k).and_then(Value::as_str) == Some("private");
    let masked = strs(h("MaskedPaths"));
    let ro = strs(h("ReadonlyPaths"));
    let held = [
        ("CapDrop", strs(h("CapDrop")) == ["ALL"], "[\"ALL\"]".into()),
        (
            "CapAdd",
            h("CapAdd").is_none_or(empty),
            "nothing (no capability is added)".into(),
        ),
        (
            "Privileged",
            h("Privileged").is_none_or(empty),
            "false".into(),
        ),
        (
            "SecurityOpt",
            strs(h("SecurityOpt")) == [NO_NEW_PRIVILEGES],
            format!("exactly [\"{NO_NEW_PRIVILEGES}\"]"),
        ),
        ("IpcMode", private("IpcMode"), "\"private\"".into()),
        (
            "CgroupnsMode",
            private("CgroupnsMode"),
            "\"private\"".into(),
        ),
        (
            "Runtime",
            h("Runtime").and_then(Value::as_str) == Some("runc"),
            "\"runc\"".into(),
        ),
        (
            "MaskedPaths",
            MASKED.iter().all(|p| masked.iter().any(|m| m == p)),
            format!("at least Docker's own {MASKED:?}"),
        ),
        (
            "ReadonlyPaths",
            READONLY.iter().all(|p| ro.iter().any(|m| m == p)),
            format!("at least Docker's own {READONLY:?}"),
        ),
    ];
    hc.want_all(held);
}

/// The plan's pids, memory (no swap) and CPU.
fn want_bounds(hc: &mut Section, plan: &Plan) {
    let num = |k: &str| hc.get(k).and_then(Value::as_i64);
    let memory = plan.memory_bytes();
    let held = [
        (
            "PidsLimit",
            num("PidsLimit") == Some(plan.limits.pids as i64),
            plan.limits.pids.to_string(),
        ),
        (
            "Memory",
            num("Memory") == Some(memory),
            format!("{memory} ({} MiB)", plan.limits.memory_mb),
        ),
        (
            "MemorySwap",
            num("MemorySwap") == Some(memory),
            format!("{memory} (the memory: no swap)"),
        ),
        (
            "CpuPeriod",
            num("CpuPeriod") == Some(CPU_PERIOD_US as i64),
            CPU_PERIOD_US.to_string(),
        ),
        (
            "CpuQuota",
            num("CpuQuota") == Some(plan.cpu_quota()),
            format!("{} ({} CPUs)", plan.cpu_quota(), plan.limits.cpus),
        ),
    ];
    hc.want_all(held);
}

/// The plan's tmpfs places, a read-only root, and its mounts exactly.
fn want_storage(hc: &mut Section, plan: &Plan) {
    let tmpfs: BTreeMap<String, BTreeSet<String>> = hc
        .get("Tmpfs")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), options(v.as_str().unwrap_or_default())))
                .collect()
        })
        .unwrap_or_default();
    let planned: BTreeMap<String, BTreeSet<String>> = plan
        .tmpfs()
        .into_iter()
        .map(|(k, v)| (k, options(&v)))
        .collect();
    hc.want(
        "Tmpfs",
        tmpfs == planned,
        format!("exactly {HOME}, {RUN_DIR} and the scratch places as planned ({planned:?})"),
    );
    let ro_root = hc.get("ReadonlyRootfs").and_then(Value::as_bool) == Some(true);
    hc.want(
        "ReadonlyRootfs",
        ro_root,
        "true (what a computer writes outside its tmpfs would land on this host's disk)",
    );
    let mounts = mounts_held(hc.get("Mounts"));
    let planned_mounts = mounts_planned(plan);
    hc.want(
        "Mounts",
        mounts == planned_mounts,
        format!(
            "exactly the daemon at {DAEMON_PATH} read-only, its direct directory read-only, the shares asked for and an allowlist's socket volume read-only ({planned_mounts:?})"
        ),
    );
}

/// A mount as compared: its type, `source -> target`, read-only, and its
/// bind propagation.
type MountSeen = (String, String, bool, String);

/// The mounts an inspect holds.
fn mounts_held(mounts: Option<&Value>) -> Vec<MountSeen> {
    mounts
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|m| {
                    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    (
                        s("Type"),
                        format!("{} -> {}", s("Source"), s("Target")),
                        m.get("ReadOnly").and_then(Value::as_bool).unwrap_or(false),
                        m.get("BindOptions")
                            .and_then(|b| b.get("Propagation"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The mounts the plan asks for, as an inspect shows them.
fn mounts_planned(plan: &Plan) -> Vec<MountSeen> {
    plan.mounts()
        .iter()
        .map(|m| {
            let bind = m.typ == Some(bollard::models::MountType::BIND);
            (
                if bind { "bind" } else { "volume" }.to_string(),
                format!(
                    "{} -> {}",
                    m.source.clone().unwrap_or_default(),
                    m.target.clone().unwrap_or_default()
                ),
                m.read_only.unwrap_or(false),
                if bind { "rprivate" } else { "" }.to_string(),
            )
        })
        .collect()
}

/// The Config half: its user, image, home, entrypoint, init's argv and
/// labels as planned, and nothing else that acts.
fn config_drift(plan: &Plan, inspected: &Value) -> Vec<String> {
    let mut cfg = Section::new(inspected, "Config", Whose::Computer, IRRELEVANT_CONFIG);
    let c = |k: &str| cfg.get(k);
    let user = plan.user_string();
    let as_user = c("User").and_then(Value::as_str) == Some(user.as_str());
    let of_image = c("Image").and_then(Value::as_str) == Some(plan.image.as_str());
    let in_home = c("WorkingDir").and_then(Value::as_str) == Some(HOME);
    let env = strs(c("Env"));
    let homes: Vec<&String> = env.iter().filter(|e| e.starts_with("HOME=")).collect();
    let one_home = homes.len() == 1 && homes[0] == &format!("HOME={HOME}");
    let no_display = !env.iter().any(|e| e.starts_with("DISPLAY="));
    let entrypoint = strs(c("Entrypoint")) == [DAEMON_PATH];
    let cmd = strs(c("Cmd")) == plan.init_args();
    let labels = c("Labels").and_then(Value::as_object);
    let missing: Vec<String> = plan
        .labels
        .iter()
        .filter(|(k, v)| labels.and_then(|l| l.get(*k)).and_then(Value::as_str) != Some(v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let no_volumes = c("Volumes").is_none_or(empty);
    let held = [
        ("User", as_user, format!("{user:?}")),
        ("Image", of_image, format!("{:?}", plan.image)),
        ("WorkingDir", in_home, format!("{HOME:?}")),
        ("Env", one_home, format!("one HOME, HOME={HOME}")),
        // A desktop's display comes by init's --display (in Cmd), never
        // by a DISPLAY the daemon would take from its environment.
        (
            "Env",
            no_display,
            "no DISPLAY (a desktop's display is init's --display)".into(),
        ),
        ("Entrypoint", entrypoint, format!("[{DAEMON_PATH:?}]")),
        ("Cmd", cmd, format!("{:?}", plan.init_args())),
        (
            "Labels",
            missing.is_empty(),
            format!("holding {missing:?} as written"),
        ),
        (
            "Volumes",
            no_volumes,
            "empty (an image's VOLUME is a mount the computer was not asked for)".into(),
        ),
    ];
    cfg.want_all(held);
    cfg.finish()
}

/// The host's own confinement of a container: AppArmor's docker-default
/// where the host has AppArmor, an SELinux label of type container_t where
/// it has SELinux.
pub(crate) fn confinement_drift(inspected: &Value, host: &Host) -> Vec<String> {
    let mut out = Vec::new();
    let apparmor = inspected
        .get("AppArmorProfile")
        .and_then(Value::as_str)
        .unwrap_or("");
    let want_apparmor = if host.apparmor { "docker-default" } else { "" };
    if apparmor != want_apparmor {
        out.push(format!(
            "AppArmorProfile is {apparmor:?}, where this host gives every container {want_apparmor:?}"
        ));
    }
    let label = inspected
        .get("ProcessLabel")
        .and_then(Value::as_str)
        .unwrap_or("");
    if host.selinux != label.contains(":container_t:") {
        out.push(format!(
            "ProcessLabel is {label:?}, where it must be {}",
            if host.selinux {
                "of type container_t (this host has SELinux)"
            } else {
                "empty"
            }
        ));
    }
    out
}

/// The hello half: the provider's version, linux (or desktop), exactly
/// [`GROUPS`] (with the screen groups on a desktop), and the host's
/// architecture.
pub fn hello_drift(hello: &HelloResult, host: &Host, desktop: bool) -> Vec<String> {
    let mut groups = GROUPS.to_vec();
    if desktop {
        groups.extend_from_slice(super::desktop::GROUPS);
    }
    let expect = Expect {
        kind: if desktop {
            MachineKind::Desktop
        } else {
            MachineKind::Linux
        },
        groups: &groups,
        exact: true,
        arch: Some(&host.arch),
    };
    let what = if desktop { "desktop" } else { "computer" };
    hello::drift(hello, &expect)
        .into_iter()
        .map(|d| match d {
            Drift::Version { got } => format!(
                "the daemon is version {got}, where this provider is {}",
                computerd::VERSION
            ),
            Drift::Os { got } => format!("the daemon says os {got}, not linux"),
            Drift::Kind { got, .. } if desktop && got == MachineKind::Linux => {
                "the daemon says kind linux, not desktop: the desktop's X server has gone".into()
            }
            Drift::Kind { got, want } => format!("the daemon says kind {got}, not {want}"),
            Drift::Groups { got, want } => format!(
                "the daemon answers the groups {got:?}, where a Docker {what} answers exactly {want:?}"
            ),
            Drift::Arch { got, want } => {
                format!("the daemon says arch {got}, where the Docker host is {want}")
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sizing::Host as Size;

    fn plan() -> Plan {
        crate::docker::plan::tests::plan()
    }

    pub(crate) fn host() -> Host {
        Host {
            arch: "amd64".into(),
            size: Size {
                cpus: 2.0,
                memory_mb: 8192,
            },
            apparmor: false,
            selinux: false,
            remap: None,
            missing: vec![],
            engine: "20.10".into(),
            name: "host".into(),
        }
    }

    /// What Docker reports for a container made from the plan's body.
    fn inspected(p: &Plan) -> Value {
        let body = serde_json::to_value(p.body()).unwrap();
        let mut hc = body["HostConfig"].clone();
        hc["Runtime"] = "runc".into();
        hc["MaskedPaths"] = serde_json::json!(MASKED);
        hc["ReadonlyPaths"] = serde_json::json!(READONLY);
        hc["LogConfig"] = serde_json::json!({"Type": "json-file"});
        hc["ShmSize"] = 67108864.into();
        hc["BlkioWeight"] = 0.into();
        hc["Tmpfs"]["/work"] = "size=2048m,exec,uid=1000,gid=1000,mode=0700,nosuid,nodev".into();
        let mut cfg = body.clone();
        cfg.as_object_mut().unwrap().remove("HostConfig");
        cfg["Env"] = serde_json::json!(["PATH=/usr/bin:/bin", "HOME=/work"]);
        cfg["Hostname"] = "abc".into();
        serde_json::json!({
            "HostConfig": hc,
            "Config": cfg,
            "NetworkSettings": {"Networks": {"none": {}}},
            "AppArmorProfile": "",
            "ProcessLabel": "",
        })
    }

    #[test]
    fn a_computer_as_planned_has_no_drift() {
        let p = plan();
        assert_eq!(
            inspect_drift(&p, &inspected(&p), &host()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_allowlisted_computer_holds_its_socket_volume_and_init_relay() {
        let mut p = plan();
        p.network = crate::types::NetworkKind::Allow;
        p.egress = Some(vec!["good.eg.test".into()]);
        let i = inspected(&p);
        assert_eq!(inspect_drift(&p, &i, &host()), Vec::<String>::new());
        // The volume writable, or init not relaying, is drift.
        let mut w = i.clone();
        w["HostConfig"]["Mounts"][1]["ReadOnly"] = false.into();
        let d = inspect_drift(&p, &w, &host());
        assert!(d[0].starts_with("HostConfig.Mounts is"), "{d:?}");
        let mut n = p.clone();
        n.egress = None;
        n.network = crate::types::NetworkKind::None;
        let d = inspect_drift(&n, &i, &host());
        assert!(d.iter().any(|m| m.starts_with("Config.Cmd is")), "{d:?}");
        assert!(
            d.iter().any(|m| m.starts_with("HostConfig.Mounts is")),
            "{d:?}"
        );
    }

    #[test]
    fn a_desktop_holds_its_display_and_a_sandbox_none() {
        let mut p = plan();
        p.display = Some(":0".into());
        let mut i = inspected(&p);
        assert_eq!(inspect_drift(&p, &i, &host()), Vec::<String>::new());
        assert!(p.init_args().windows(2).any(|w| w == ["--display", ":0"]));
        // Another display in init's command, or a DISPLAY in the
        // environment, is drift.
        let mut other = p.clone();
        other.display = Some(":1".into());
        let d = inspect_drift(&other, &i, &host());
        assert!(d.iter().any(|m| m.starts_with("Config.Cmd is")), "{d:?}");
        i["Config"]["Env"] = serde_json::json!(["HOME=/work", "DISPLAY=:1"]);
        let d = inspect_drift(&p, &i, &host());
        assert!(
            d.iter()
                .any(|m| m.contains("no DISPLAY (a desktop's display is init's --display)")),
            "{d:?}"
        );
        // A desktop's hello must be kind desktop with the screen groups.
        let hello = HelloResult {
            version: computerd::VERSION.into(),
            os: "linux".into(),
            kind: MachineKind::Linux,
            arch: "amd64".into(),
            groups: GROUPS.to_vec(),
            bytes_frames: None,
        };
        assert_eq!(
            hello_drift(&hello, &host(), true)[0],
            "the daemon says kind linux, not desktop: the desktop's X server has gone"
        );
    }

    #[test]
    fn privilege_an_extra_capability_or_the_host_network_is_named() {
        let p = plan();
        let mut i = inspected(&p);
        i["HostConfig"]["Privileged"] = true.into();
        i["HostConfig"]["CapAdd"] = serde_json::json!(["NET_ADMIN"]);
        i["HostConfig"]["NetworkMode"] = "host".into();
        i["NetworkSettings"]["Networks"] = serde_json::json!({"host": {}});
        i["HostConfig"]["PidMode"] = "host".into();
        i["Config"]["Volumes"] = serde_json::json!({"/data": {}});
        let d = inspect_drift(&p, &i, &host());
        assert_eq!(
            d,
            vec![
                "HostConfig.CapAdd is [\"NET_ADMIN\"], where it must be nothing (no capability is added)",
                "HostConfig.Privileged is true, where it must be false",
                "HostConfig.NetworkMode is \"host\", where it must be \"none\"",
                "HostConfig.PidMode is \"host\", where it must be empty: a computer is made without it",
                "Config.Volumes is {\"/data\":{}}, where it must be empty (an image's VOLUME is a mount the computer was not asked for)",
                "the computer is on the networks [\"host\"], where it must be on \"none\" alone",
            ]
        );
    }

    #[test]
    fn a_writable_root_or_an_unbounded_scratch_place_is_drift() {
        let p = plan();
        let mut i = inspected(&p);
        i["HostConfig"]["ReadonlyRootfs"] = false.into();
        i["HostConfig"]["Tmpfs"]
            .as_object_mut()
            .unwrap()
            .remove("/var/tmp");
        let d = inspect_drift(&p, &i, &host());
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("HostConfig.Tmpfs is "), "{d:?}");
        assert_eq!(
            d[1],
            "HostConfig.ReadonlyRootfs is false, where it must be true (what a computer writes outside its tmpfs would land on this host's disk)"
        );
        let mut i = inspected(&p);
        i["HostConfig"]["Tmpfs"]["/tmp"] = "mode=1777,nosuid,nodev,size=8g".into();
        let d = inspect_drift(&p, &i, &host());
        assert!(
            d.len() == 1 && d[0].starts_with("HostConfig.Tmpfs is "),
            "{d:?}"
        );
    }

    #[test]
    fn a_hello_of_another_version_or_groups_is_drift() {
        let hello = HelloResult {
            version: "0.0.1".into(),
            os: "linux".into(),
            kind: MachineKind::Linux,
            arch: "amd64".into(),
            groups: vec![Group::Exec, Group::Files, Group::Processes, Group::Screen],
            bytes_frames: None,
        };
        assert_eq!(
            hello_drift(&hello, &host(), false),
            vec![
                format!(
                    "the daemon is version 0.0.1, where this provider is {}",
                    computerd::VERSION
                ),
                "the daemon answers the groups {\"exec\", \"files\", \"processes\", \"screen\"}, where a Docker computer answers exactly {\"exec\", \"files\", \"processes\"}".into(),
            ]
        );
    }
}
