//! Snapshots of a computer's files, kept on this host for the providers
//! whose computers run `computerd` here (local, Docker), and forks made
//! from them.
//!
//! A snapshot is the computer's HOME (`/work`) as one tar archive, read
//! through the daemon's `tar.pull.*` stream, so it holds exactly what the
//! computer's user sees there whatever holds it (a tmpfs in a sandbox or a
//! container: `docker commit` would see none of it). A fork is a new
//! computer whose HOME is filled by `tar.push.*` from that archive before
//! its first call, so two forks share nothing after it. Each snapshot is a
//! directory of the provider's storage:
//!
//! ```text
//! <dir>/s-<32 hex>/meta.json   the Snapshot: labels (whose, name, kind), created, deadline, size
//!                  files.tar   the archive
//! ```
//!
//! A vendor that keeps snapshots itself (E2B) has only a record here:
//! `meta.json` with the vendor's id in [`Snapshot::native`], no archive
//! ([`SnapshotStore::keep_native`]); its provider deletes the vendor's
//! snapshot before the record, and this store's sweep leaves such records
//! to it.
//!
//! Written under a dot-name and renamed into place, so a listing never
//! sees half of one; a server restart finds them again; the provider's
//! sweep deletes each past its own deadline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use computerd::client::{ComputerClient, ComputerExt};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::provider::Provider;
use crate::types::{ComputerRef, ErrorCode, Labels, ProviderError, Result, label};

/// Every snapshot handle begins with this.
pub const SNAPSHOT_PREFIX: &str = "s-";
/// The archive's chunk when it is pushed into a fork.
const CHUNK: usize = 512 * 1024;
/// A computer's HOME where its ref names none.
const HOME: &str = "/work";
const META: &str = "meta.json";
const FILES: &str = "files.tar";

/// A snapshot of a computer's files, as kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Its handle: `s-` and 32 hex digits (128 random bits).
    pub id: String,
    pub provider: String,
    /// Whose it is ([`label::PRINCIPAL`]), its [`label::NAME`], the
    /// [`label::KIND`] of the computer it was taken of, and the
    /// computer's handle ([`label::HANDLE`]).
    pub labels: Labels,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; the sweep deletes it then.
    pub deadline: String,
    /// The archive's bytes.
    pub size_bytes: u64,
    /// The directory it holds (the computer's HOME).
    pub path: String,
    /// The vendor's own snapshot this record labels (E2B's snapshot
    /// template id), kept by the vendor, not here: there is no archive
    /// beside it. None: the archive here is the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
    /// What the vendor's snapshot keeps, in words ("the whole sandbox:
    /// its files and memory"); None: the files of [`Self::path`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keeps: Option<String>,
}

impl Snapshot {
    /// Its size in bytes, where known: a vendor that keeps its own
    /// snapshot gives none.
    pub fn size(&self) -> Option<u64> {
        self.native.is_none().then_some(self.size_bytes)
    }

    /// What it keeps, in words: the vendor's, else the files of its path.
    pub fn kept(&self) -> String {
        match (&self.native, &self.keeps) {
            (Some(_), Some(k)) => k.clone(),
            _ => format!("the files of {}", self.path),
        }
    }

    /// Whether its deadline has passed at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        parse_ms(&self.deadline).is_none_or(|d| d <= now_ms)
    }
}

fn parse_ms(rfc3339: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

fn format_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| ms.to_string())
}

fn io_failed(what: &str, e: impl std::fmt::Display) -> ProviderError {
    ProviderError::failed(format!("{what}: {e}"))
}

/// Whether `text` has a snapshot handle's form.
pub fn is_snapshot_handle(text: &str) -> bool {
    text.strip_prefix(SNAPSHOT_PREFIX)
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One provider's snapshots in a host directory.
pub struct SnapshotStore {
    provider: &'static str,
    dir: PathBuf,
    /// Held from a name's check to its snapshot's rename into place, so two
    /// saves of one name by one caller cannot both pass.
    naming: tokio::sync::Mutex<()>,
}

impl SnapshotStore {
    pub fn new(provider: &'static str, dir: PathBuf) -> Self {
        SnapshotStore {
            provider,
            dir,
            naming: tokio::sync::Mutex::new(()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn of(&self, id: &str) -> Result<PathBuf> {
        if !is_snapshot_handle(id) {
            return Err(ProviderError::not_found(format!("no snapshot {id:?}")));
        }
        Ok(self.dir.join(id))
    }

    /// Every whole snapshot carrying each of `wanted`, oldest first.
    pub fn list(&self, wanted: &Labels) -> Result<Vec<Snapshot>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_failed(&format!("reading {}", self.dir.display()), e)),
        };
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().filter(|n| is_snapshot_handle(n)) else {
                continue;
            };
            let Ok(text) = std::fs::read(self.dir.join(id).join(META)) else {
                continue;
            };
            let Ok(s) = serde_json::from_slice::<Snapshot>(&text) else {
                continue;
            };
            if s.id == id && wanted.iter().all(|(k, v)| s.labels.get(k) == Some(v)) {
                all.push(s);
            }
        }
        all.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Ok(all)
    }

    /// Read `home` of the computer behind `client` into a new snapshot
    /// carrying `labels`, deleted by the sweep `ttl_ms` from now. A name
    /// ([`label::NAME`]) its owner ([`label::PRINCIPAL`]) already gave a
    /// snapshot is refused in words naming `name`, and nothing is kept.
    pub async fn save(
        &self,
        client: &Arc<dyn ComputerClient>,
        home: &str,
        labels: Labels,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Snapshot> {
        let _naming = self.naming.lock().await;
        self.check_name(&labels)?;
        let (id, part) = self.part()?;
        let archive = part.join(FILES);
        let pulled = tokio::select! {
            r = pull_into(client, home, &archive) => r,
            () = cancel.cancelled() => Err(ProviderError { code: ErrorCode::Aborted, message: "the snapshot was cancelled".into(), field: None }),
        };
        let size_bytes = match pulled {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&part);
                return Err(e);
            }
        };
        self.place(id, part, labels, ttl_ms, size_bytes, home, None)
    }

    /// Keep a record labelling the vendor's own snapshot, which `take`
    /// makes (its id) once the name is known to be free; deleted by the
    /// sweep `ttl_ms` from now. A taken name is refused as [`Self::save`]
    /// refuses it, before `take` runs; where the record cannot be written
    /// the error carries the vendor's id, for the caller to delete it.
    pub async fn keep_native<F, Fut>(
        &self,
        home: &str,
        keeps: &str,
        labels: Labels,
        ttl_ms: u64,
        take: F,
    ) -> std::result::Result<Snapshot, (ProviderError, Option<String>)>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<String>>,
    {
        let _naming = self.naming.lock().await;
        self.check_name(&labels).map_err(|e| (e, None))?;
        let (id, part) = self.part().map_err(|e| (e, None))?;
        let native = match take().await {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&part);
                return Err((e, None));
            }
        };
        let native = (native, keeps.to_string());
        self.place(id, part, labels, ttl_ms, 0, home, Some(native.clone()))
            .map_err(|e| (e, Some(native.0)))
    }

    /// Refuse a name ([`label::NAME`]) its owner ([`label::PRINCIPAL`])
    /// already gave a snapshot, in words naming `name`.
    fn check_name(&self, labels: &Labels) -> Result<()> {
        let Some(name) = labels.get(label::NAME) else {
            return Ok(());
        };
        let mine = Labels::from_iter(
            labels
                .iter()
                .filter(|(k, _)| *k == label::PRINCIPAL || *k == label::NAME)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        match self.list(&mine)?.first() {
            Some(taken) => Err(ProviderError::invalid(
                "name",
                format!(
                    "name {name:?} is taken by your snapshot {} (made {}); choose another name, or release that one",
                    taken.id, taken.created_at
                ),
            )),
            None => Ok(()),
        }
    }

    /// A new handle and its directory under a dot-name.
    fn part(&self) -> Result<(String, PathBuf)> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| io_failed(&format!("making {}", self.dir.display()), e))?;
        let id = format!("{SNAPSHOT_PREFIX}{}", crate::random::random_hex(16)?);
        let part = self.dir.join(format!(".{id}"));
        std::fs::create_dir(&part)
            .map_err(|e| io_failed(&format!("making {}", part.display()), e))?;
        Ok((id, part))
    }

    /// Write the snapshot's state into `part` and rename it into place;
    /// on failure nothing is left.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        id: String,
        part: PathBuf,
        labels: Labels,
        ttl_ms: u64,
        size_bytes: u64,
        home: &str,
        native: Option<(String, String)>,
    ) -> Result<Snapshot> {
        let (native, keeps) = native.unzip();
        let now = computerd::now_ms();
        let snapshot = Snapshot {
            id: id.clone(),
            provider: self.provider.to_string(),
            labels,
            created_at: format_ms(now),
            deadline: format_ms(now.saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX))),
            size_bytes,
            path: home.to_string(),
            native,
            keeps,
        };
        let placed = serde_json::to_vec_pretty(&snapshot)
            .map_err(|e| io_failed("writing the snapshot's state", e))
            .and_then(|text| {
                std::fs::write(part.join(META), text)
                    .map_err(|e| io_failed("writing the snapshot's state", e))
            })
            .and_then(|()| {
                std::fs::rename(&part, self.dir.join(&id))
                    .map_err(|e| io_failed("putting the snapshot in place", e))
            });
        if let Err(e) = placed {
            let _ = std::fs::remove_dir_all(&part);
            return Err(e);
        }
        Ok(snapshot)
    }

    /// Fill `home` of the computer behind `client` from `snapshot`.
    pub async fn restore(
        &self,
        snapshot: &Snapshot,
        client: &Arc<dyn ComputerClient>,
        home: &str,
        cancel: &CancellationToken,
    ) -> Result<u64> {
        let path = self.of(&snapshot.id)?.join(FILES);
        let file = tokio::fs::File::open(&path).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ProviderError::not_found(format!("no snapshot {:?} (released?)", snapshot.id))
            } else {
                io_failed(&format!("opening {}", path.display()), e)
            }
        })?;
        let source = futures::stream::unfold(file, |mut f| async move {
            let mut buf = vec![0u8; CHUNK];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<_, std::io::Error>(buf), f))
                }
                Err(e) => Some((Err(e), f)),
            }
        });
        tokio::select! {
            r = client.push_tar(home, source) => r.map_err(|e| {
                ProviderError::failed(format!("filling {home} of the new computer from snapshot {}: {e}", snapshot.id))
            }),
            () = cancel.cancelled() => Err(ProviderError { code: ErrorCode::Aborted, message: "the fork was cancelled".into(), field: None }),
        }
    }

    /// [`Self::save`] of `computer`'s HOME, over a connection of its own.
    pub async fn take<P: Provider + ?Sized>(
        &self,
        provider: &P,
        computer: &ComputerRef,
        labels: &Labels,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Snapshot> {
        let conn = provider.connect(computer, cancel).await?;
        let home = computer.home.as_deref().unwrap_or(HOME);
        let r = self
            .save(&conn.client, home, labels.clone(), ttl_ms, cancel)
            .await;
        conn.client.close();
        r
    }

    /// [`Self::restore`] into `into`'s HOME, over a connection of its own.
    pub async fn fork<P: Provider + ?Sized>(
        &self,
        provider: &P,
        snapshot: &Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let conn = provider.connect(into, cancel).await?;
        let home = into.home.as_deref().unwrap_or(HOME);
        let r = self.restore(snapshot, &conn.client, home, cancel).await;
        conn.client.close();
        r.map(|_| ())
    }

    /// Delete a snapshot; one already gone is not_found.
    pub fn release(&self, id: &str) -> Result<()> {
        let dir = self.of(id)?;
        // Renamed away first, so no listing reads it half deleted.
        let gone = self.dir.join(format!(".{id}.gone"));
        match std::fs::rename(&dir, &gone) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ProviderError::not_found(format!("no snapshot {id:?}")));
            }
            Err(e) => return Err(io_failed(&format!("releasing snapshot {id}"), e)),
        }
        std::fs::remove_dir_all(&gone).map_err(|e| io_failed(&format!("deleting {id}"), e))
    }

    /// Delete every snapshot past its deadline; their ids.
    pub fn sweep(&self) -> Result<Vec<String>> {
        let now = computerd::now_ms();
        let mut released = Vec::new();
        for s in self.list(&Labels::new())? {
            // A vendor's own snapshot is deleted by its provider first.
            if s.expired(now) && s.native.is_none() {
                self.release(&s.id)?;
                tracing::info!(snapshot = %s.id, deadline = %s.deadline, "the sweep deleted a snapshot past its deadline");
                released.push(s.id);
            }
        }
        Ok(released)
    }
}

/// [`SnapshotStore::sweep`] of `provider`'s store; none where it has none.
pub fn sweep_of<P: Provider + ?Sized>(provider: &P) -> Result<Vec<String>> {
    provider
        .snapshot_store()
        .map_or(Ok(Vec::new()), SnapshotStore::sweep)
}

/// The archive of `home` into `to`; its bytes.
async fn pull_into(client: &Arc<dyn ComputerClient>, home: &str, to: &Path) -> Result<u64> {
    let mut pull = client
        .pull_tar(home)
        .await
        .map_err(|e| ProviderError::failed(format!("reading {home} of the computer: {e}")))?;
    let mut out = tokio::fs::File::create(to)
        .await
        .map_err(|e| io_failed(&format!("making {}", to.display()), e))?;
    let mut size = 0u64;
    while let Some(chunk) = pull
        .next()
        .await
        .map_err(|e| ProviderError::failed(format!("reading {home} of the computer: {e}")))?
    {
        size += chunk.len() as u64;
        out.write_all(&chunk)
            .await
            .map_err(|e| io_failed(&format!("writing {}", to.display()), e))?;
    }
    out.sync_all()
        .await
        .map_err(|e| io_failed(&format!("writing {}", to.display()), e))?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(store: &SnapshotStore, id: &str, labels: Labels, deadline: &str) {
        let dir = store.dir.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let s = Snapshot {
            id: id.into(),
            provider: "local".into(),
            labels,
            created_at: "2026-01-01T00:00:00Z".into(),
            deadline: deadline.into(),
            size_bytes: 10,
            path: "/work".into(),
            native: None,
            keeps: None,
        };
        std::fs::write(dir.join(META), serde_json::to_vec(&s).unwrap()).unwrap();
    }

    #[test]
    fn a_listing_filters_by_labels_and_the_sweep_deletes_the_expired_only() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new("local", tmp.path().to_path_buf());
        let a = format!("{SNAPSHOT_PREFIX}{}", "a".repeat(32));
        let b = format!("{SNAPSHOT_PREFIX}{}", "b".repeat(32));
        let mine = Labels::from([(label::PRINCIPAL.to_string(), "p1".to_string())]);
        kept(&store, &a, mine.clone(), "2000-01-01T00:00:00Z");
        kept(&store, &b, Labels::new(), "2999-01-01T00:00:00Z");
        // Half-written and stray entries are not snapshots.
        std::fs::create_dir_all(tmp.path().join(format!(".{a}x"))).unwrap();
        std::fs::create_dir_all(tmp.path().join("s-zz")).unwrap();
        let ids = |v: Vec<Snapshot>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(store.list(&mine).unwrap()), vec![a.clone()]);
        assert_eq!(store.list(&Labels::new()).unwrap().len(), 2);
        assert_eq!(store.sweep().unwrap(), vec![a.clone()]);
        assert_eq!(ids(store.list(&Labels::new()).unwrap()), vec![b.clone()]);
        assert_eq!(store.release(&a).unwrap_err().code, ErrorCode::NotFound);
        store.release(&b).unwrap();
        assert!(store.list(&Labels::new()).unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_native_record_keeps_the_vendors_id_refuses_a_taken_name_first_and_is_left_to_its_provider()
     {
        let tmp = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new("e2b", tmp.path().to_path_buf());
        let labels = Labels::from([
            (label::PRINCIPAL.to_string(), "p1".to_string()),
            (label::NAME.to_string(), "s1".to_string()),
        ]);
        let kept = store
            .keep_native("/work", "the whole sandbox", labels.clone(), 0, || async {
                Ok("abc123:default".to_string())
            })
            .await
            .unwrap();
        assert_eq!(kept.native.as_deref(), Some("abc123:default"));
        // Its words say what the vendor keeps, and no size.
        assert_eq!(
            (kept.kept().as_str(), kept.size()),
            ("the whole sandbox", None)
        );
        assert_eq!(store.list(&Labels::new()).unwrap(), vec![kept.clone()]);
        assert!(!tmp.path().join(&kept.id).join(FILES).exists());
        // A taken name: refused before the vendor is asked.
        let asked = std::sync::atomic::AtomicBool::new(false);
        let (e, native) = store
            .keep_native("/work", "the whole sandbox", labels, 0, || async {
                asked.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok("never".to_string())
            })
            .await
            .unwrap_err();
        assert_eq!((e.field.as_deref(), native), (Some("name"), None));
        assert!(!asked.load(std::sync::atomic::Ordering::SeqCst));
        // Expired (ttl 0), but the vendor's snapshot is its provider's to
        // delete first: the store's sweep leaves the record.
        assert!(store.sweep().unwrap().is_empty());
        assert_eq!(store.list(&Labels::new()).unwrap().len(), 1);
    }

    #[test]
    fn only_a_handles_form_names_a_snapshot() {
        assert!(is_snapshot_handle(&format!("s-{}", "0f".repeat(16))));
        assert!(!is_snapshot_handle("s-../../etc"));
        assert!(!is_snapshot_handle(&format!("c-{}", "0f".repeat(16))));
    }
}
