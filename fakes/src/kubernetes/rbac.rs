//! Every request as RBAC authorizes it: its API group, resource (with
//! subresource) and verb, recorded for [`super::FakeKubernetes::verbs`].

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::{Shared, lock};

/// The (API group, resource, verbs) RBAC reads of a `method` on `path`
/// (`?watch=true` in `query`); None for a path outside a namespace's API.
pub fn rbac_of(method: &str, path: &str, query: &str) -> Option<(String, String, Vec<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", "namespaces", _, rest @ ..] => ("", rest),
        ["apis", g, _, "namespaces", _, rest @ ..] => (*g, rest),
        _ => return None,
    };
    let (resource, named) = match rest {
        [r] => (r.to_string(), false),
        [r, _] => (r.to_string(), true),
        [r, _, sub] => (format!("{r}/{sub}"), true),
        _ => return None,
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verbs: &[&str] = match (method, named) {
        ("GET", _) if resource.ends_with("/exec") || resource.ends_with("/attach") => {
            &["get", "create"]
        }
        ("GET", _) if watch => &["watch"],
        ("GET", true) => &["get"],
        ("GET", false) => &["list"],
        ("POST", _) => &["create"],
        ("PUT", _) => &["update"],
        ("PATCH", _) => &["patch"],
        ("DELETE", true) => &["delete"],
        ("DELETE", false) => &["deletecollection"],
        _ => return None,
    };
    Some((
        group.to_string(),
        resource,
        verbs.iter().map(|v| v.to_string()).collect(),
    ))
}

pub(super) async fn record(
    State(s): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let uri = req.uri();
    if let Some((g, r, verbs)) =
        rbac_of(req.method().as_str(), uri.path(), uri.query().unwrap_or(""))
    {
        let mut seen = lock(&s.verbs);
        for v in verbs {
            seen.insert((g.clone(), r.clone(), v));
        }
    }
    next.run(req).await
}
