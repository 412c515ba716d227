//! What a computer is on a cluster: its hardened pod and its deny-all
//! NetworkPolicy, written here, and the hardening read back from a pod
//! the API returns ([`drift`]): a pod that differs is refused, never used.

use computerd::launch::{InitArgs, StdioArgs, Time};
use serde_json::{Value, json};

use crate::types::Labels;

/// Where the `/work` emptyDir is mounted.
pub const WORK: &str = "/work";
/// The programs' HOME: made in `/work` by the container's user before
/// init starts (an emptyDir's own directory is root's).
pub const HOME: &str = "/work/home";
/// The socket's emptyDir; init's socket is in a directory of its own the
/// container's command makes there, mode 0700 (an emptyDir is 0777, which
/// init refuses).
pub const RUN: &str = "/run/computerd";
pub const SOCKET: &str = "/run/computerd/s/computerd.sock";
/// Where a streamed computerd is put (the socket's memory-backed
/// emptyDir, in a 0700 directory of the container's user).
pub const STREAMED: &str = "/run/computerd/bin/computerd";
/// Where a warm pod's waiting shell reads the computer's deadline from,
/// written whole by the provider's exec when the pod is claimed (the
/// socket's 0700 directory: only the container's user writes there).
pub const DEADLINE_FILE: &str = "/run/computerd/s/deadline";
/// The word a warm pod's command holds where init's deadline goes; the
/// waiting shell puts the deadline read from [`DEADLINE_FILE`] there.
pub const DEADLINE_SLOT: &str = "@deadline";
/// The one container's name.
pub const CONTAINER: &str = "computer";
/// The label that selects a computer's pod (its value the pod's name):
/// what its NetworkPolicy's podSelector names.
pub const POD_LABEL: &str = "computer-mcp.pod";
/// A label value that is not one Kubernetes takes is held as this prefix
/// plus a hash (the exact value is the annotation of the same key).
pub const HASHED: &str = "h-";

/// What a pod is made of.
#[derive(Clone, Debug)]
pub struct PodPlan {
    pub name: String,
    pub image: String,
    /// computerd's path in the image.
    pub computerd: String,
    pub uid: u32,
    pub deadline: Time,
    pub lifetime_s: u64,
    /// Every label of ours and the spec's.
    pub labels: Labels,
    pub cpus: f64,
    pub memory_mb: u64,
    pub work_mb: u64,
    /// computerd is streamed in (the container waits for it).
    pub streamed: bool,
    /// A warm pool's pod: its shell waits for [`DEADLINE_FILE`] before
    /// it becomes init (the deadline is the claiming computer's, not
    /// known when the pool makes the pod).
    pub warm: bool,
    /// A sandbox, or a desktop whose init starts the image's Xvfb.
    pub made: crate::daemon_backed::desktop::Made,
    /// An allowlisted computer: its egress proxy pod's address, which
    /// init relays 127.0.0.1:3128 to (`--egress-tcp`).
    pub egress: Option<std::net::SocketAddr>,
}

/// Whether Kubernetes takes `v` as a label value: at most 63 characters
/// of `A-Za-z0-9-_.`, starting and ending alphanumeric, or empty
/// (apimachinery pkg/util/validation `IsValidLabelValue`).
pub fn label_value_ok(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && v.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric()))
}

/// A label's value as Kubernetes holds it: itself, or [`HASHED`] and the
/// first 40 hex digits of its sha256.
pub fn label_value(v: &str) -> String {
    use sha2::Digest;
    if label_value_ok(v) {
        return v.to_string();
    }
    let h = sha2::Sha256::digest(v.as_bytes());
    let hex: String = h.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("{HASHED}{hex}")
}

/// The label selector for `labels` (each by its held value).
pub fn selector(labels: &Labels) -> String {
    let mut parts = vec![crate::types::label::COMPUTER.to_string()];
    parts.extend(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={}", label_value(v))),
    );
    parts.join(",")
}

impl PodPlan {
    /// The container's command: make init's socket directory, then become
    /// `computerd init` (so init is the container's process).
    pub fn command(&self) -> Vec<String> {
        let mut init = self.made.init_args(InitArgs::new(self.deadline, SOCKET));
        init.egress_tcp = self.egress;
        let args = init
            .to_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        self.command_of(args)
    }

    /// The container's command for computerd's `args`: its directories
    /// made (and a streamed computerd waited for), then computerd.
    pub fn command_of(&self, mut args: Vec<String>) -> Vec<String> {
        let made = if self.streamed {
            // Until the provider's exec has put it in place (moved there
            // whole, so it is never run half written).
            "(umask 077 && mkdir -p /run/computerd/s /run/computerd/bin /work/home) && while [ ! -x \"$0\" ]; do sleep 0.05; done"
        } else {
            "(umask 077 && mkdir -p /run/computerd/s /work/home)"
        };
        // A warm pod waits for its deadline (moved into place whole by
        // the claiming provider), then puts it in the deadline's slot.
        let warm = concat!(
            " && while [ ! -s /run/computerd/s/deadline ]; do sleep 0.05; done",
            " && d=$(cat /run/computerd/s/deadline)",
            " && for a; do shift; [ \"$a\" = @deadline ] && a=$d; set -- \"$@\" \"$a\"; done"
        );
        let script = format!(
            "{made}{} && exec \"$0\" \"$@\"",
            if self.warm { warm } else { "" }
        );
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            script,
            self.computerd.clone(),
        ];
        if self.warm
            && let Some(i) = args.iter().position(|a| a == "--deadline")
            && let Some(slot) = args.get_mut(i + 1)
        {
            *slot = DEADLINE_SLOT.to_string();
        }
        argv.extend(args);
        argv
    }

    /// The pod, hardened: its own non-root uid, no capability, no
    /// privilege escalation, seccomp RuntimeDefault, no service account
    /// token, no host namespace, bounded, `/work` and `/workspace` sized
    /// emptyDirs, and
    /// ended by the kubelet at `activeDeadlineSeconds` even if no server
    /// is left.
    pub fn pod(&self) -> Value {
        let labels: serde_json::Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(label_value(v))))
            .chain([(POD_LABEL.to_string(), json!(self.name))])
            .collect();
        let annotations: serde_json::Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let bounds = json!({
            "cpu": format!("{}m", (self.cpus * 1000.0).round() as u64),
            "memory": format!("{}Mi", self.memory_mb),
            "ephemeral-storage": format!("{}Mi", self.work_mb),
        });
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": self.lifetime_s,
                "terminationGracePeriodSeconds": 5,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "hostNetwork": false,
                "hostPID": false,
                "hostIPC": false,
                "securityContext": {
                    "runAsNonRoot": true,
                    "runAsUser": self.uid,
                    "runAsGroup": self.uid,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [{
                    "name": CONTAINER,
                    "image": self.image,
                    "command": self.command(),
                    "env": [{"name": "HOME", "value": HOME}],
                    "workingDir": WORK,
                    // A start that fails says why in the pod's status.
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": {
                        "allowPrivilegeEscalation": false,
                        "privileged": false,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {"requests": bounds.clone(), "limits": bounds},
                    "volumeMounts": [
                        {"name": "work", "mountPath": WORK},
                        {"name": "workspace", "mountPath": crate::share::WORKSPACE},
                        {"name": "run", "mountPath": RUN},
                    ],
                }],
                "volumes": [
                    {"name": "work", "emptyDir": {"sizeLimit": format!("{}Mi", self.work_mb)}},
                    // Where the server copies shares in (an emptyDir is
                    // writable by the container's user); the container's
                    // ephemeral-storage limit bounds it with /work.
                    {"name": "workspace", "emptyDir": {"sizeLimit": format!("{}Mi", self.work_mb)}},
                    {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": if self.streamed { "8Mi" } else { "1Mi" }}},
                ],
            },
        })
    }
}

impl PodPlan {
    /// The pod as a Sandbox's or a SandboxTemplate's `podTemplate` (its
    /// labels, annotations and spec); a warm pod's lacks the pod label,
    /// its name being the pool's to give.
    pub fn pod_template(&self) -> Value {
        let mut p = self.pod();
        let mut meta = json!({
            "labels": p["metadata"]["labels"].take(),
            "annotations": p["metadata"]["annotations"].take(),
        });
        if self.warm
            && let Some(l) = meta["labels"].as_object_mut()
        {
            l.remove(POD_LABEL);
        }
        json!({"metadata": meta, "spec": p["spec"].take()})
    }
}

/// `computerd stdio`'s argv in the pod.
pub fn stdio_argv(computerd: &str) -> Vec<String> {
    let args = StdioArgs {
        socket: SOCKET.into(),
        direct: None,
    };
    std::iter::once(computerd.to_string())
        .chain(
            args.to_args()
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned()),
        )
        .collect()
}

/// The NetworkPolicy that denies the pod `name` every ingress and egress
/// (both policy types, no rule: docs, "Network Policies", default deny).
pub fn deny_all(name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": {crate::types::label::COMPUTER: "1"}},
        "spec": {
            "podSelector": {"matchLabels": {POD_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
        },
    })
}

/// Whether `np` (as read back) denies the pod `name` everything.
pub fn denies_all(np: &Value, name: &str) -> bool {
    let spec = &np["spec"];
    let types: Vec<&str> = spec["policyTypes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let no_rules = |k: &str| spec[k].as_array().is_none_or(Vec::is_empty);
    spec["podSelector"]["matchLabels"][POD_LABEL] == json!(name)
        && spec["podSelector"]["matchExpressions"].is_null()
        && types.contains(&"Ingress")
        && types.contains(&"Egress")
        && no_rules("ingress")
        && no_rules("egress")
}

/// Every way the pod `p` (as the API returns it) differs from the
/// hardening `uid` and a pod of this provider need, in words.
pub fn drift(p: &Value, uid: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut want = |ok: bool, what: &str| {
        if !ok {
            out.push(what.to_string());
        }
    };
    let spec = &p["spec"];
    let psc = &spec["securityContext"];
    let c = &spec["containers"][0];
    let csc = &c["securityContext"];
    let pick = |f: &str| {
        if csc[f].is_null() {
            psc[f].clone()
        } else {
            csc[f].clone()
        }
    };
    want(
        spec["containers"].as_array().map(Vec::len) == Some(1),
        "one container",
    );
    want(
        c["name"] == json!(CONTAINER),
        "the container named computer",
    );
    want(pick("runAsNonRoot") == json!(true), "runAsNonRoot");
    want(pick("runAsUser") == json!(uid), &format!("runAsUser {uid}"));
    want(
        csc["allowPrivilegeEscalation"] == json!(false),
        "allowPrivilegeEscalation false",
    );
    want(csc["privileged"] != json!(true), "not privileged");
    want(
        csc["capabilities"]["drop"] == json!(["ALL"]),
        "capabilities drop ALL",
    );
    want(
        csc["capabilities"]["add"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "no capability added",
    );
    want(
        pick("seccompProfile")["type"] == json!("RuntimeDefault"),
        "seccomp RuntimeDefault",
    );
    want(
        spec["automountServiceAccountToken"] == json!(false),
        "automountServiceAccountToken false",
    );
    for h in ["hostNetwork", "hostPID", "hostIPC"] {
        want(spec[h] != json!(true), &format!("no {h}"));
    }
    want(
        spec["activeDeadlineSeconds"].as_u64().is_some(),
        "activeDeadlineSeconds",
    );
    for r in ["cpu", "memory", "ephemeral-storage"] {
        want(
            !c["resources"]["limits"][r].is_null(),
            &format!("a {r} limit"),
        );
    }
    let work = spec["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|x| x["name"] == json!("work")));
    want(
        work.is_some_and(|w| !w["emptyDir"]["sizeLimit"].is_null()),
        "/work a sized emptyDir",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PodPlan {
        PodPlan {
            name: "cmcp-x".into(),
            image: "img".into(),
            computerd: "/opt/computerd/computerd".into(),
            uid: 2000,
            deadline: Time::from_now(std::time::Duration::from_secs(60)),
            lifetime_s: 60,
            labels: [(
                "computer-mcp.deadline".to_string(),
                "2026-12-07T05:00:00Z".to_string(),
            )]
            .into(),
            cpus: 1.5,
            memory_mb: 512,
            work_mb: 256,
            streamed: false,
            warm: false,
            made: crate::daemon_backed::desktop::Made { screen: None },
            egress: None,
        }
    }

    #[test]
    fn the_pod_we_write_reads_back_with_no_drift_and_a_change_is_named() {
        let mut p = plan().pod();
        assert_eq!(drift(&p, 2000), Vec::<String>::new());
        assert_eq!(drift(&p, 2001), ["runAsUser 2001"]);
        p["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"]);
        p["spec"]["hostPID"] = json!(true);
        assert_eq!(drift(&p, 2000), ["no capability added", "no hostPID"]);
    }

    #[test]
    fn labels_kubernetes_cannot_hold_are_hashed_and_selected_the_same_way() {
        assert_eq!(label_value("abc-1"), "abc-1");
        let h = label_value("2026-12-07T05:00:00Z");
        assert!(h.starts_with(HASHED) && h.len() == 42 && label_value_ok(&h));
        let p = plan().pod();
        assert_eq!(p["metadata"]["labels"]["computer-mcp.deadline"], json!(h));
        assert_eq!(
            p["metadata"]["annotations"]["computer-mcp.deadline"],
            json!("2026-12-07T05:00:00Z")
        );
        let l: Labels = [("a".to_string(), "b c".to_string())].into();
        assert_eq!(
            selector(&l),
            format!("computer-mcp.computer,a={}", label_value("b c"))
        );
    }

    #[test]
    fn a_warm_pod_waits_for_its_deadline_and_holds_its_slot() {
        let mut p = plan();
        p.warm = true;
        let c = p.command();
        assert!(
            c[2].contains("while [ ! -s /run/computerd/s/deadline ]"),
            "{}",
            c[2]
        );
        let i = c.iter().position(|a| a == "--deadline").unwrap();
        assert_eq!(c[i + 1], DEADLINE_SLOT);
        let t = p.pod_template();
        assert!(t["metadata"]["labels"][POD_LABEL].is_null());
        assert_eq!(
            drift(&json!({"spec": t["spec"]}), 2000),
            Vec::<String>::new()
        );
        p.warm = false;
        assert!(!p.command()[2].contains("deadline"));
    }

    #[test]
    fn the_deny_all_policy_reads_back_as_one() {
        assert!(denies_all(&deny_all("p"), "p"));
        assert!(!denies_all(&deny_all("p"), "q"));
        let mut np = deny_all("p");
        np["spec"]["egress"] = json!([{}]);
        assert!(!denies_all(&np, "p"));
    }
}
