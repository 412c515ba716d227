//! API discovery, so a client that maps kinds to resources (kubectl) can
//! be pointed at the fake: the legacy documents `/api` (`APIVersions`),
//! `/apis` (`APIGroupList`) and one `APIResourceList` per group version
//! (docs, "API discovery": the unaggregated endpoints, which clients fall
//! back to when the aggregated `APIGroupDiscoveryList` is not served).
//! Only the kinds the provider and deploy/kubernetes/ use are listed, and
//! agent-sandbox's two groups once it is installed.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::sandbox::{EXTENSIONS, GROUP};
use super::{Shared, lock, not_found};

/// A resource: its name, its kind, whether it is namespaced.
type Resource = (&'static str, &'static str, bool);

/// (group, version, its resources).
const GROUPS: &[(&str, &str, &[Resource])] = &[
    (
        "",
        "v1",
        &[
            ("pods", "Pod", true),
            ("services", "Service", true),
            ("serviceaccounts", "ServiceAccount", true),
            ("events", "Event", true),
            ("limitranges", "LimitRange", true),
            ("namespaces", "Namespace", false),
        ],
    ),
    ("apps", "v1", &[("deployments", "Deployment", true)]),
    (GROUP, "v1beta1", &[("sandboxes", "Sandbox", true)]),
    (
        EXTENSIONS,
        "v1beta1",
        &[
            ("sandboxtemplates", "SandboxTemplate", true),
            ("sandboxclaims", "SandboxClaim", true),
            ("sandboxwarmpools", "SandboxWarmPool", true),
        ],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        &[
            ("roles", "Role", true),
            ("rolebindings", "RoleBinding", true),
        ],
    ),
    (
        "networking.k8s.io",
        "v1",
        &[("networkpolicies", "NetworkPolicy", true)],
    ),
];

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Whether the fake serves `group` now (agent-sandbox's only once
/// installed).
fn served(s: &Shared, group: &str) -> bool {
    (group != GROUP && group != EXTENSIONS) || lock(&s.knobs).agent_sandbox
}

fn resources(group: &str, version: &str) -> Option<Value> {
    let (g, v, rs) = GROUPS
        .iter()
        .find(|(g, v, _)| *g == group && *v == version)?;
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": rs.iter().map(|(name, kind, namespaced)| json!({
            "name": name,
            "singularName": kind.to_lowercase(),
            "namespaced": namespaced,
            "kind": kind,
            "verbs": VERBS,
        })).collect::<Vec<_>>(),
    }))
}

pub(super) async fn core() -> Response {
    axum::Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}))
        .into_response()
}

pub(super) async fn core_v1() -> Response {
    axum::Json(resources("", "v1")).into_response()
}

pub(super) async fn groups(State(s): State<Arc<Shared>>) -> Response {
    let groups: Vec<Value> = GROUPS
        .iter()
        .filter(|(g, _, _)| !g.is_empty() && served(&s, g))
        .map(|(g, v, _)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv], "preferredVersion": gv})
        })
        .collect();
    axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        .into_response()
}

pub(super) async fn group_version(
    State(s): State<Arc<Shared>>,
    Path((g, v)): Path<(String, String)>,
) -> Response {
    match resources(&g, &v).filter(|_| served(&s, &g)) {
        Some(r) => axum::Json(r).into_response(),
        None => not_found(
            "the server could not find the requested resource",
            &format!("{g}/{v}"),
        ),
    }
}
