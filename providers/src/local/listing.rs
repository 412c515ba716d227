//! The brief listing a count asks for ([`Provider::list_brief`]): each
//! computer's `meta.json` parsed once and again only when the file changed
//! (`write_meta` writes beside and renames, so a change is a new inode),
//! and whether it runs asked of our own child where this server started
//! it (a `waitpid` that does not wait) rather than read from `/proc`. A
//! create that counts its caller's computers then costs a directory read
//! and a `stat` per computer alive, not a read, a parse and the cgroup's
//! and network's read-back of each.
//!
//! [`Provider::list_brief`]: crate::provider::Provider::list_brief

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::LocalProvider;
use super::state::{self, Meta};
use crate::daemon_backed::labels;
use crate::types::{ComputerRef, Labels, Result};

/// What identifies one version of a `meta.json`: inode, size, change and
/// modification times.
type Version = (u64, u64, i64, i64, i64, i64);

fn version_of(md: &std::fs::Metadata) -> Version {
    (
        md.ino(),
        md.size(),
        md.mtime(),
        md.mtime_nsec(),
        md.ctime(),
        md.ctime_nsec(),
    )
}

/// The states read so far, by computer id.
#[derive(Default)]
pub(super) struct Metas {
    known: Mutex<HashMap<String, (Version, Arc<Meta>)>>,
}

impl Metas {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Version, Arc<Meta>)>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state at `path` of the computer `id`, parsed again only when
    /// the file changed since it was last read.
    fn read(&self, id: &str, path: &Path) -> std::io::Result<Arc<Meta>> {
        let version = version_of(&std::fs::metadata(path)?);
        if let Some((v, meta)) = self.lock().get(id)
            && *v == version
        {
            return Ok(Arc::clone(meta));
        }
        let meta = Arc::new(state::read_meta(path)?);
        self.lock()
            .insert(id.to_string(), (version, Arc::clone(&meta)));
        Ok(meta)
    }

    /// Keep only the ids `alive` names (the computers' directories now).
    fn keep_only(&self, alive: &std::collections::HashSet<String>) {
        self.lock().retain(|id, _| alive.contains(id));
    }
}

impl LocalProvider {
    /// The computers carrying `wanted`, each with its id, labels, creation,
    /// deadline, home and user and whether it runs; no sizes, network or
    /// pause read back.
    pub(super) async fn list_brief_of(&self, wanted: &Labels) -> Result<Vec<ComputerRef>> {
        let Ok(entries) = std::fs::read_dir(self.computers_dir()) else {
            return Ok(Vec::new());
        };
        let mut seen = std::collections::HashSet::new();
        let mut found = Vec::new();
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            // Not a computer's directory, or one whose state is not
            // written yet (being made): not listed, as `list` does.
            let Ok(path) = self.meta_path(&id) else {
                continue;
            };
            let Ok(meta) = self.metas.read(&id, &path) else {
                continue;
            };
            seen.insert(id);
            if labels::carries(wanted, |k| meta.labels.get(k).map(String::as_str)) {
                found.push(meta);
            }
        }
        self.metas.keep_only(&seen);
        let mut out = Vec::with_capacity(found.len());
        let mut children = self.children.lock().await;
        for meta in found {
            let running = match (&meta.process, children.get_mut(&meta.id)) {
                (None, _) => false,
                // Our own child, not yet waited for: its pid is its own.
                (Some(_), Some(child)) => matches!(child.try_wait(), Ok(None)),
                (Some(p), None) => p.alive(),
            };
            out.push(ComputerRef {
                provider: "local".into(),
                id: meta.id.clone(),
                labels: meta.labels.clone(),
                created_at: state::format_ms(meta.created_ms),
                deadline: state::format_ms(meta.deadline_ms),
                running,
                paused: false,
                home: Some(meta.work_dir.clone()),
                user: meta.user.map(|(u, g)| format!("{u}:{g}")),
                sizes: None,
                image: None,
                network: None,
            });
        }
        drop(children);
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(out)
    }
}
