//! The fake E2B's snapshots, as E2B documents them:
//!
//! - `POST /sandboxes/{id}/snapshots` with an optional `{name}` answers
//!   201 `{snapshotID, names}` (e2b.dev/docs/api-reference/sandboxes/
//!   post-sandboxes-snapshots); the sandbox goes on running
//!   (e2b.dev/docs/sandbox/snapshots: "briefly paused ... then continues
//!   running"). An unknown or killed sandbox is 404; a paused one 409.
//! - `GET /snapshots?sandboxID=` lists them, filtered by the sandbox taken
//!   (the same page: "Filter by sandbox").
//! - A snapshot is a template: `POST /sandboxes` with `templateID` set to
//!   its id starts a sandbox with its files ("the snapshot ID can be used
//!   directly with Sandbox.create()"); `DELETE /templates/{id}` deletes
//!   it, 204, or 404 when unknown (the SDK's `deleteSnapshot` answers false
//!   for "not found").
//!
//! E2B keeps the whole disk and memory; the fake keeps the files of
//! [`KEPT`] (the computer's HOME and the daemon's install and state, so a
//! fork sees the captured daemon's pid file and socket as on E2B), read
//! with Docker's archive call, and no memory: no program of the snapshot
//! runs in a fork.

use super::*;
use crate::vendor_box::KEPT;

/// One kept snapshot.
pub(super) struct Snap {
    sandbox: String,
    names: Vec<String>,
    image: String,
    /// Each kept path's parent and its archive.
    files: Vec<(String, Bytes)>,
}

/// The id without its `:tag`.
fn bare(id: &str) -> &str {
    id.split(':').next().unwrap_or(id)
}

/// The image and files of the snapshot `template`, if it is one.
pub(super) fn of_template(s: &Shared, template: &str) -> Option<(String, Vec<(String, Bytes)>)> {
    lock(&s.snaps)
        .get(bare(template))
        .map(|n| (n.image.clone(), n.files.clone()))
}

pub(super) async fn create_snapshot(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    expire(&s);
    let name = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["name"].as_str().map(str::to_string));
    let (boxed, template) = match lock(&s.sandboxes).get(&id) {
        Some(b) if b.killed.is_none() && b.paused => {
            return status(StatusCode::CONFLICT, "sandbox is paused");
        }
        Some(b) if b.killed.is_none() => (Arc::clone(&b.boxed), b.template.clone()),
        _ => return status(StatusCode::NOT_FOUND, "sandbox not found"),
    };
    let image = of_template(&s, &template).map_or_else(|| image_of(&s, &template), |(i, _)| i);
    let files = match boxed.pack(&KEPT).await {
        Ok(f) => f,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, &e.0),
    };
    let raw = computer_providers::random::random_hex(10).unwrap_or_default();
    let snapshot_id = match &name {
        Some(n) => format!("fake-team/{n}:default"),
        None => format!("{raw}:default"),
    };
    lock(&s.calls).push(format!("POST /sandboxes/{id}/snapshots"));
    lock(&s.snaps).insert(
        bare(&snapshot_id).to_string(),
        Snap {
            sandbox: id,
            names: vec![snapshot_id.clone()],
            image,
            files,
        },
    );
    (
        StatusCode::CREATED,
        axum::Json(json!({"snapshotID": snapshot_id, "names": [snapshot_id]})),
    )
        .into_response()
}

pub(super) async fn list_snapshots(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    let all: Vec<Value> = lock(&s.snaps)
        .iter()
        .filter(|(_, n)| q.get("sandboxID").is_none_or(|w| *w == n.sandbox))
        .map(|(id, n)| json!({"snapshotID": format!("{id}:default"), "names": n.names, "sandboxID": n.sandbox}))
        .collect();
    axum::Json(Value::Array(all)).into_response()
}

pub(super) async fn delete_template(
    State(s): State<Arc<Shared>>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = gate(&s, &h) {
        return r;
    }
    lock(&s.calls).push(format!("DELETE /templates/{id}"));
    match lock(&s.snaps).remove(bare(&id)) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => status(StatusCode::NOT_FOUND, "template not found"),
    }
}
