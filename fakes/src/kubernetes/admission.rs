//! What the API server refuses before a pod is stored, and what it tells
//! of a pod afterwards. The rules, with their sources:
//!
//! - Authorization comes first: a create of pods in a namespace the fake
//!   was told the account may not use ([`super::Knobs::forbidden`])
//!   answers 403 `Forbidden` with RBAC's words, `pods is forbidden: User
//!   "…" cannot create resource "pods" in API group "" in the namespace
//!   "…"` and `details.kind: pods` (apiserver
//!   pkg/endpoints/handlers/responsewriters/errors.go `forbiddenMessage`;
//!   apimachinery pkg/api/errors `NewForbidden`).
//! - Then admission's LimitRanger, for every LimitRange of the namespace
//!   and every item of `type: Container`: a container whose limit of a
//!   resource is above the item's `max` is refused with `maximum <res>
//!   usage per Container is <max>, but limit is <limit>`, and one whose
//!   request is below `min` with `minimum <res> usage per Container is
//!   <min>, but request is <request>`; all of a pod's refusals are joined
//!   (`[a, b]` when more than one) into `pods "<name>" is forbidden: …`,
//!   403 `Forbidden` (plugin/pkg/admission/limitranger/admission.go
//!   `minConstraint`, `maxConstraint`, `admission.NewForbidden`). The
//!   fake applies no `default` or `defaultRequest` and no `type: Pod`
//!   item: the provider always sets both requests and limits itself.
//! - LimitRanges (`/api/v1/namespaces/{ns}/limitranges`) are listed and
//!   read as stored by [`super::FakeKubernetes::limit_range`].
//! - Events (`/api/v1/namespaces/{ns}/events`): listed with
//!   `?fieldSelector=` over `involvedObject.kind`, `involvedObject.name`,
//!   `involvedObject.namespace`, `reason` and `type`, equality only (the
//!   fields core/v1 events select by: pkg/registry/core/event/strategy.go
//!   `ToSelectableFields`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::select::Selector;
use super::{Shared, gate, itself, list_in, list_of, lock, now, status, uid};

type Q = Query<BTreeMap<String, String>>;

/// The user RBAC's words name.
pub const USER: &str = "system:serviceaccount:computers:computer-mcp";

/// A quantity in base units (bytes, cores, count): `512Mi`, `1Gi`,
/// `1500m`, `2`, `1e3`, `64M` (apimachinery pkg/api/resource
/// quantity.go's suffixes); None when it is not one.
pub fn quantity(q: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let q = q.trim();
    for (s, f) in SUFFIXES {
        if let Some(n) = q.strip_suffix(s) {
            return n.parse::<f64>().ok().map(|n| n * f);
        }
    }
    q.parse::<f64>().ok()
}

/// The 403 RBAC gives a create of `resource` in `ns`.
pub fn forbidden_create(resource: &str, ns: &str) -> Response {
    let message = format!(
        "{resource} is forbidden: User \"{USER}\" cannot create resource \"{resource}\" in API group \"\" in the namespace \"{ns}\""
    );
    forbidden(&message, json!({"kind": resource}))
}

fn forbidden(message: &str, details: Value) -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Forbidden",
            "details": details,
            "code": 403,
        })),
    )
        .into_response()
}

/// LimitRanger's refusals of `pod` (named `name`) in `ns`, as one 403.
pub(crate) fn limit_ranges(s: &Shared, ns: &str, name: &str, pod: &Value) -> Option<Response> {
    let ranges: Vec<Value> = lock(&s.limit_ranges)
        .iter()
        .filter(|((n, _), _)| n == ns)
        .map(|(_, v)| v.clone())
        .collect();
    let mut wrong = Vec::new();
    let containers = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for item in ranges
        .iter()
        .filter_map(|r| r["spec"]["limits"].as_array())
        .flatten()
        .filter(|i| i["type"] == "Container")
    {
        for c in &containers {
            let res = &c["resources"];
            for (bound, held, word, over) in [
                ("max", "limits", "maximum", "limit"),
                ("min", "requests", "minimum", "request"),
            ] {
                let Some(bounds) = item[bound].as_object() else {
                    continue;
                };
                for (r, b) in bounds {
                    let (Some(b), Some(given)) = (b.as_str(), res[held][r].as_str()) else {
                        continue;
                    };
                    let (Some(bq), Some(gq)) = (quantity(b), quantity(given)) else {
                        continue;
                    };
                    if (bound == "max" && gq > bq) || (bound == "min" && gq < bq) {
                        wrong.push(format!(
                            "{word} {r} usage per Container is {b}, but {over} is {given}"
                        ));
                    }
                }
            }
        }
    }
    if wrong.is_empty() {
        return None;
    }
    let joined = if wrong.len() == 1 {
        wrong.remove(0)
    } else {
        format!("[{}]", wrong.join(", "))
    };
    Some(forbidden(
        &format!("pods \"{name}\" is forbidden: {joined}"),
        json!({"name": name, "kind": "pods"}),
    ))
}

/// Record a Warning event of `reason` about the pod `name` in `ns`, as a
/// scheduler or kubelet writes one.
pub(crate) fn event(s: &Shared, ns: &str, name: &str, reason: &str, message: &str, from: &str) {
    let at = now();
    let id = uid();
    let version = s.bump();
    lock(&s.events).push(json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": format!("{name}.{}", &id[..8]),
            "namespace": ns,
            "uid": id,
            "resourceVersion": version,
            "creationTimestamp": at,
            "labels": {},
        },
        "involvedObject": {"kind": "Pod", "name": name, "namespace": ns, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "source": {"component": from},
    }));
}

/// The fields of an event a `?fieldSelector=` may name.
fn fields(e: &Value) -> BTreeMap<String, String> {
    let o = &e["involvedObject"];
    [
        ("involvedObject.kind", &o["kind"]),
        ("involvedObject.name", &o["name"]),
        ("involvedObject.namespace", &o["namespace"]),
        ("reason", &e["reason"]),
        ("type", &e["type"]),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v.as_str()?.to_string())))
    .collect()
}

pub(super) async fn list_events(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    let sel = match Selector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or("")) {
        Ok(x) => x,
        Err(e) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("unable to parse field selector: {e}"),
            );
        }
    };
    let items = lock(&s.events)
        .iter()
        .filter(|e| e["metadata"]["namespace"] == json!(ns) && sel.matches(&fields(e)))
        .cloned()
        .collect();
    let version = s
        .version
        .load(std::sync::atomic::Ordering::SeqCst)
        .to_string();
    list_of("EventList", "v1", version, items)
}

pub(super) async fn list_limit_ranges(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let kind = ("LimitRangeList", "v1");
    list_in(&s, &h, &q, &s.limit_ranges, &ns, kind, itself)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn quantities_read_as_the_api_reads_them() {
        assert_eq!(quantity("512Mi"), Some(512.0 * 1048576.0));
        assert_eq!(quantity("1Gi"), Some(1073741824.0));
        assert_eq!(quantity("1500m"), Some(1.5));
        assert_eq!(quantity("2"), Some(2.0));
        assert_eq!(quantity("64M"), Some(64e6));
        assert_eq!(quantity("lots"), None);
    }
}
