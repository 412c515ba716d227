//! A cluster's refusals in words a model can act on: RBAC's 403 (the verb
//! and the resource), LimitRanger's 403 (the bound and the range), a pod
//! left Pending (its own events), and an image that cannot start
//! computerd (the two ways to fix it).

use k8s_openapi::api::core::v1::{Event, LimitRange};
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use super::manifest::PodPlan;
use super::{KubernetesProvider, api_error};
use crate::types::{ErrorCode, ProviderError};

/// What the API server's Status of a refused call says.
pub struct Refusal {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl Refusal {
    pub fn of(e: &kube::Error) -> Option<Refusal> {
        match e {
            kube::Error::Api(s) => Some(Refusal {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            }),
            _ => None,
        }
    }

    /// LimitRanger's refusal (`… usage per Container is …`), not RBAC's.
    pub fn is_limit_range(&self) -> bool {
        self.code == 403 && self.message.contains(" usage per ")
    }
}

/// RBAC's 403 of `verb` on `resource` in `ns`, in words naming both.
pub fn forbidden(verb: &str, resource: &str, ns: &str, r: &Refusal) -> ProviderError {
    ProviderError::new(
        ErrorCode::Refused,
        format!(
            "the account may not {verb} {resource} in the namespace {ns}: it lacks the verb \"{verb}\" on the resource \"{resource}\" (the API server said 403 {}: {}); bind it a Role with the verbs deploy/kubernetes/role.yaml lists, or name another namespace with --kubernetes-namespace",
            r.reason, r.message
        ),
    )
    .with_field("namespace")
}

/// Our bound of a resource as the pod asks it, and where it came from.
fn ours(plan: &PodPlan, resource: &str) -> String {
    match resource {
        "memory" => format!(
            "memory {}Mi (sizes.memoryMb {})",
            plan.memory_mb, plan.memory_mb
        ),
        "cpu" => format!("cpu {} (sizes.cpus)", plan.cpus),
        "ephemeral-storage" => format!(
            "ephemeral-storage {}Mi (--kubernetes-work-mb {})",
            plan.work_mb, plan.work_mb
        ),
        other => other.to_string(),
    }
}

/// The resources LimitRanger's words name (`maximum memory usage per …`).
fn named(message: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in ["maximum ", "minimum "] {
        for part in message.split(w).skip(1) {
            if let Some(r) = part.split(' ').next()
                && !out.iter().any(|o| o == r)
            {
                out.push(r.to_string());
            }
        }
    }
    out
}

/// Each LimitRange's Container range of `resource`: "<name>: min X, max Y".
fn ranges(items: &[Value], resource: &str) -> Vec<String> {
    let mut out = Vec::new();
    for lr in items {
        let name = lr["metadata"]["name"].as_str().unwrap_or("?");
        let limits = lr["spec"]["limits"].as_array().cloned().unwrap_or_default();
        for item in limits.iter().filter(|i| i["type"] == "Container") {
            let b: Vec<String> = ["min", "max"]
                .iter()
                .filter_map(|k| Some(format!("{k} {}", item[*k][resource].as_str()?)))
                .collect();
            if !b.is_empty() {
                out.push(format!("LimitRange {name}: {}", b.join(", ")));
            }
        }
    }
    out
}

/// The last few events' reason and message, oldest first.
fn event_words(items: &[Value]) -> String {
    let start = items.len().saturating_sub(3);
    items[start..]
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or("").trim()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why the pod `p` has not started, from its own status: a container
/// waiting (ErrImagePull…) or its scheduling condition.
pub fn pending_status(p: &Value) -> String {
    let waiting = &p["status"]["containerStatuses"][0]["state"]["waiting"];
    if let Some(r) = waiting["reason"].as_str() {
        return format!("{r}: {}", waiting["message"].as_str().unwrap_or(""));
    }
    p["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["status"] == "False"))
        .and_then(|c| {
            Some(format!(
                "{}: {}",
                c["reason"].as_str()?,
                c["message"].as_str().unwrap_or("")
            ))
        })
        .unwrap_or_else(|| "the pod is Pending".into())
}

/// A pod that ended before its daemon answered: the image's fault (no
/// shell, no computerd: the two ways to fix it named), or the pod's end
/// in its own words.
pub fn ended(p: &Value, name: &str, image: &str, computerd: &str) -> ProviderError {
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    let code = t["exitCode"].as_i64();
    let reason = t["reason"].as_str().or(p["status"]["reason"].as_str());
    let said = t["message"]
        .as_str()
        .or(p["status"]["message"].as_str())
        .unwrap_or("")
        .trim()
        .to_string();
    if reason == Some("StartError") || matches!(code, Some(126 | 127)) {
        return ProviderError::invalid(
            "image",
            format!(
                "the image {image} cannot start computerd: it has no /bin/sh, or no executable computerd at {computerd} (the pod {name} ended: {}{}). Fix it one of two ways: build an image that carries the static computerd (FROM {image} and COPY computerd /opt/computerd/computerd, the README's two lines; or name its path with --kubernetes-computerd), or use an image with /bin/sh and stream this host's computerd in with --kubernetes-stream-computerd PATH",
                reason.unwrap_or("exit"),
                code.map_or(String::new(), |c| format!(" {c}"))
                    + &if said.is_empty() {
                        String::new()
                    } else {
                        format!(", \"{said}\"")
                    },
            ),
        );
    }
    ProviderError::failed(format!(
        "the pod {name} ended while starting ({}, {}): {said}",
        p["status"]["phase"].as_str().unwrap_or("?"),
        reason.unwrap_or("no reason given")
    ))
}

impl KubernetesProvider {
    /// LimitRanger's refusal of the pod `plan` in words: our bound, and
    /// each range the namespace's LimitRanges set for it.
    pub(crate) async fn limit_range_words(&self, plan: &PodPlan, r: &Refusal) -> ProviderError {
        let (client, ns) = match self.client().await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let api: Api<LimitRange> = Api::namespaced(client, &ns);
        let items: Vec<Value> = match api.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .iter()
                .map(|x| serde_json::to_value(x).unwrap_or(Value::Null))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %api_error("listing LimitRanges", e).message, "LimitRanges not read");
                Vec::new()
            }
        };
        let parts: Vec<String> = named(&r.message)
            .iter()
            .map(|res| {
                let range = ranges(&items, res);
                let range = if range.is_empty() {
                    "its range was not readable".to_string()
                } else {
                    range.join("; ")
                };
                format!("{} is outside the range ({range})", ours(plan, res))
            })
            .collect();
        ProviderError::invalid(
            "sizes",
            format!(
                "the namespace {ns}'s LimitRange refuses this computer: {} (the API server said 403 {}: {})",
                parts.join("; "),
                r.reason,
                r.message
            ),
        )
    }

    /// The pod `name`'s own events, in words (empty when none or not
    /// readable).
    pub(crate) async fn events(&self, name: &str) -> String {
        let Ok((client, ns)) = self.client().await else {
            return String::new();
        };
        let api: Api<Event> = Api::namespaced(client, &ns);
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={name}"
        ));
        match api.list(&lp).await {
            Ok(l) => {
                let items: Vec<Value> = l
                    .items
                    .iter()
                    .map(|x| serde_json::to_value(x).unwrap_or(Value::Null))
                    .collect();
                event_words(&items)
            }
            Err(e) => format!(
                "(its events were not readable: {})",
                api_error("", e).message
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limit_ranges_words_name_the_resource_and_each_range() {
        let m = "pods \"p\" is forbidden: [maximum memory usage per Container is 512Mi, but limit is 1Gi, minimum cpu usage per Container is 2, but request is 1]";
        assert_eq!(named(m), ["memory", "cpu"]);
        let lr = json!({"metadata": {"name": "small"}, "spec": {"limits": [
            {"type": "Container", "max": {"memory": "512Mi"}, "min": {"memory": "64Mi"}},
            {"type": "Pod", "max": {"memory": "1Gi"}},
        ]}});
        assert_eq!(
            ranges(&[lr], "memory"),
            ["LimitRange small: min 64Mi, max 512Mi"]
        );
    }

    #[test]
    fn an_image_without_a_shell_or_computerd_is_refused_naming_two_fixes() {
        let p = json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
            "exitCode": 127, "reason": "Error", "message": "sh: 1: exec: /opt/computerd/computerd: not found"
        }}}]}});
        let e = ended(&p, "cmcp-1", "debian", "/opt/computerd/computerd");
        assert_eq!(e.field.as_deref(), Some("image"));
        assert!(
            e.message
                .contains("COPY computerd /opt/computerd/computerd"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("--kubernetes-computerd"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("\"sh: 1: exec: /opt/computerd/computerd: not found\"")
        );
    }
}
