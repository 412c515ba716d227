//! The fake API's NetworkPolicy objects (networking.k8s.io/v1): create,
//! read, list and delete, admitted and stamped as every object is.

use super::*;

pub(super) async fn create_policy(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut v, name) = match admit(&s, &h, &body, "NetworkPolicy") {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let mut policies = lock(&s.policies);
    let key = (ns.clone(), name.clone());
    if policies.contains_key(&key) {
        return exists("networkpolicies.networking.k8s.io", &name);
    }
    stamp(
        &s,
        &mut v,
        &ns,
        &name,
        "NetworkPolicy",
        "networking.k8s.io/v1",
    );
    policies.insert(key, v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

/// A get of `key` from `store` (`resource` as the API names it).
pub(super) async fn read_policy(
    State(s): State<Arc<Shared>>,
    Path(key): Path<(String, String)>,
    h: HeaderMap,
) -> Response {
    let what = "networkpolicies.networking.k8s.io";
    read_in(&s, &h, &s.policies, key, what, itself)
}

pub(super) async fn list_policies(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let kind = ("NetworkPolicyList", "networking.k8s.io/v1");
    list_in(&s, &h, &q, &s.policies, &ns, kind, itself)
}

pub(super) async fn delete_policy(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    h: HeaderMap,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    match lock(&s.policies).remove(&(ns, name.clone())) {
        Some(v) => {
            s.bump();
            deleted(&name, "networking.k8s.io", "networkpolicies", &v)
        }
        None => not_found("networkpolicies.networking.k8s.io", &name),
    }
}
