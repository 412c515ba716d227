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

/// What the fake's CNI gives a pod, from the policies that select it (by
/// `podSelector.matchLabels`) when its box is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// An egress rule names an `ipBlock`: on Docker's default bridge.
    pub world: bool,
    /// An egress or ingress rule names a `podSelector`: on the pods'
    /// network.
    pub pods: bool,
}

/// The reach the policies of `pod`'s namespace give it.
pub fn reach_of(s: &Shared, pod: &Value) -> Reach {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let labels = labels_of(pod);
    let mut r = Reach::default();
    for ((pns, _), np) in lock(&s.policies).iter() {
        let sel: BTreeMap<String, String> =
            serde_json::from_value(np["spec"]["podSelector"]["matchLabels"].clone())
                .unwrap_or_default();
        if pns != ns || !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            continue;
        }
        let peers = |rules: &str, side: &str| -> Vec<Value> {
            np["spec"][rules]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|rule| rule[side].as_array().cloned().unwrap_or_default())
                .collect()
        };
        for p in peers("egress", "to") {
            r.world |= !p["ipBlock"].is_null();
            r.pods |= !p["podSelector"].is_null() && p["namespaceSelector"].is_null();
        }
        for p in peers("ingress", "from") {
            r.pods |= !p["podSelector"].is_null();
        }
    }
    r
}

/// The pods' network (internal), made once.
pub async fn pod_network(s: &Shared) -> std::result::Result<String, String> {
    s.pod_net
        .get_or_try_init(|| async {
            let name = format!("computer-mcp-fake-pods-{}", &uid().replace('-', "")[..12]);
            s.docker
                .create_network(bollard::models::NetworkCreateRequest {
                    name: name.clone(),
                    internal: Some(true),
                    labels: Some([(crate::vendor_box::LABEL.to_string(), s.owner.clone())].into()),
                    ..Default::default()
                })
                .await
                .map_err(|e| format!("making the pods' network: {e}"))?;
            Ok(name)
        })
        .await
        .cloned()
}

impl FakeKubernetes {
    /// The NetworkPolicy `ns/name`, as stored.
    pub fn policy(&self, ns: &str, name: &str) -> Option<Value> {
        lock(&self.shared.policies)
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }
}
