//! The fake Modal's filesystem snapshots, as Modal's SDKs call them
//! (modal-labs/modal-client@69519aef):
//!
//! - TaskSnapshotFilesystem on the router (task_command_router.proto:
//!   338-357, 414; js/src/sandbox.ts `snapshotFilesystem`): the task's
//!   filesystem as a new image `im-…`. `snapshot_id` makes a repeated ask
//!   one snapshot (the same image); `ttl_seconds` must be set, -1 is no
//!   expiry and 0 or another negative is INVALID_ARGUMENT (the proto's
//!   words); past its ttl the image is gone. The task of a sandbox that
//!   has ended is NOT_FOUND, as TaskGetCommandRouterAccess answers it (a
//!   terminated sandbox has no task to snapshot; the router's own status
//!   for it is not documented: our choice).
//! - SandboxCreate with that image's id as `definition.image_id` starts
//!   from its files; ImageDelete (api.proto:2684, 4823) deletes it and
//!   answers Empty, NOT_FOUND when unknown (go/image.go `Delete`).
//!
//! Modal keeps the whole filesystem and no memory; the fake keeps the
//! files of [`KEPT`] (HOME, and the daemon's install and state, so a fork
//! sees the captured daemon's pid file and socket as on Modal), read with
//! Docker's archive call: no program of the snapshot runs in a fork.

use super::*;
use crate::vendor_box::KEPT;

/// One snapshot image: its files and its end.
pub(super) struct Snap {
    pub(super) files: Vec<(String, bytes::Bytes)>,
    until: Option<Instant>,
    /// The client's `snapshot_id` it answered.
    asked_as: String,
}

impl Shared {
    /// The files of the snapshot image `id`, when it is one and alive.
    pub(super) fn snap_files(&self, id: &str) -> Option<Vec<(String, bytes::Bytes)>> {
        let mut snaps = lock(&self.snaps);
        if snaps
            .get(id)
            .is_some_and(|s| s.until.is_some_and(|u| u <= Instant::now()))
        {
            snaps.remove(id);
            lock(&self.images).remove(id);
        }
        snaps.get(id).map(|s| s.files.clone())
    }
}

pub(super) async fn snapshot_fs(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskSnapshotFilesystemRequest>| async move {
            s.bearer(r.metadata(), &r.get_ref().task_id)?;
            let m = r.into_inner();
            let until = match m.ttl_seconds {
                None => return Err(Status::invalid_argument("ttl_seconds must be set")),
                Some(-1) => None,
                Some(t) if t > 0 => Some(Instant::now() + Duration::from_secs(t as u64)),
                Some(t) => {
                    return Err(Status::invalid_argument(format!(
                        "ttl_seconds {t} is invalid: give a positive number of seconds, or -1"
                    )));
                }
            };
            if let Some((id, _)) = lock(&s.snaps)
                .iter()
                .find(|(_, n)| n.asked_as == m.snapshot_id)
            {
                return Ok(TaskSnapshotFilesystemResponse {
                    image_id: id.clone(),
                });
            }
            let (boxed, base) = {
                let sbs = lock(&s.sandboxes);
                let sb = sbs
                    .values()
                    .find(|sb| sb.task == m.task_id && sb.ended.is_none())
                    .ok_or_else(|| Status::not_found(format!("Task {} not found", m.task_id)))?;
                (Arc::clone(&sb.boxed), sb.definition.image_id.clone())
            };
            let files = boxed.pack(&KEPT).await.map_err(|e| Status::internal(e.0))?;
            let id = random_id("im");
            let cmds = lock(&s.images).get(&base).cloned().unwrap_or_default();
            lock(&s.images).insert(id.clone(), cmds);
            lock(&s.calls).push(format!("TaskSnapshotFilesystem {}", m.task_id));
            lock(&s.snaps).insert(
                id.clone(),
                Snap {
                    files,
                    until,
                    asked_as: m.snapshot_id,
                },
            );
            Ok(TaskSnapshotFilesystemResponse { image_id: id })
        },
    )
    .await
}

pub(super) async fn image_delete(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<ImageDeleteRequest>| async move {
            s.auth(r.metadata(), false)?;
            let id = r.into_inner().image_id;
            lock(&s.calls).push(format!("ImageDelete {id}"));
            let _ = s.snap_files(&id);
            lock(&s.snaps).remove(&id);
            match lock(&s.images).remove(&id) {
                Some(_) => Ok(Empty {}),
                None => Err(Status::not_found(format!("Image '{id}' not found"))),
            }
        },
    )
    .await
}
