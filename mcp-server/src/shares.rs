//! `--share` on a provider that cannot bind a host folder (its
//! capabilities say [`ShareWay::Copy`]: E2B, Daytona, Modal, Kubernetes).
//! The provider never sees the shares: the server takes them out of the
//! spec, checks and places them as a bound share is placed (`/workspace`,
//! or `/workspace/<name>` each), records each in the computer's labels,
//! and once the computer answers copies each in through the daemon's
//! `tar.*` methods ([`crate::cp::push`]). A read-write share is copied
//! back at release and on `computer-mcp cp --sync COMPUTER`; a read-only
//! one never is.
//!
//! A copy-back is unpacked by [`crate::cp::extract`]'s host-safe rules into
//! a private directory inside the host folder first, so a refused or
//! failed copy (over a limit, a link pointing out, a device) leaves the
//! folder as it was; only a whole copy is then merged in ([`merge`]).
//! The merge never deletes a host file, and keeps aside any host file it
//! replaces that changed here after the computer was made: see
//! [`merge`] for the rules.

pub mod merge;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use computer_providers::share::{self, Share, ShareArg};
use computer_providers::{ComputerSpec, Labels, ShareWay};
use computerd::client::ComputerClient;

use crate::cp::extract::Bounds;

/// The labels a copied share is recorded under: `computer-mcp.share.N`,
/// whose value is `rw:` or `ro:` and the host folder's canonical path.
pub const LABEL_PREFIX: &str = "computer-mcp.share.";

/// When the shares were taken, just before the computer was made (RFC 3339,
/// this host's clock, to the nanosecond).
pub const SINCE_LABEL: &str = "computer-mcp.share.since";

/// The most shares one computer may have copied in (each is a label).
pub const MAX_COPIED: usize = 8;

/// The most bytes a label value holds (the providers' label rule).
const LABEL_MAX: usize = 255;

/// The private directory a copy-back is unpacked into, inside the folder
/// (the same file system, so the merge's renames are atomic).
pub const SYNCING_PREFIX: &str = ".computer-mcp-sync-";

/// Stands for the state directory when the server has none (no HOME and
/// no `--state-dir`): a path no share can be or hold.
const NO_STATE: &str = "/proc/computer-mcp-no-state";

/// Take the shares out of `spec` when `way` is [`ShareWay::Copy`]:
/// checked against the host, placed, and recorded in its labels; the
/// shares to copy in once it answers. Any other way leaves `spec` as it
/// is (the provider binds them, or refuses them) and takes nothing.
/// `state_dir` (the server's) is never shared.
pub fn take(
    spec: &mut ComputerSpec,
    way: ShareWay,
    state_dir: Option<&Path>,
) -> Result<Vec<Share>, String> {
    if way != ShareWay::Copy || spec.shares.is_empty() {
        return Ok(Vec::new());
    }
    let state_dir = state_dir.unwrap_or(Path::new(NO_STATE));
    let asked: Vec<ShareArg> = std::mem::take(&mut spec.shares);
    if asked.len() > MAX_COPIED {
        return Err(format!(
            "--share: {} shares; a provider that copies shares takes at most {MAX_COPIED}",
            asked.len()
        ));
    }
    let placed = share::place(&asked, state_dir).map_err(|e| e.message)?;
    // This host's clock, before anything is copied: a host file changed
    // after it is one a copy-back keeps aside before replacing it.
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("the time: {e}"))?;
    spec.labels.insert(SINCE_LABEL.to_string(), now);
    for (i, s) in placed.iter().enumerate() {
        spec.labels
            .insert(format!("{LABEL_PREFIX}{i}"), label_value(s)?);
    }
    Ok(placed)
}

/// What the provider is asked to check: `spec` with the shares it does
/// not see taken out (and checked here).
pub fn for_provider(
    spec: &ComputerSpec,
    way: ShareWay,
    state_dir: Option<&Path>,
) -> Result<ComputerSpec, String> {
    let mut seen = spec.clone();
    take(&mut seen, way, state_dir)?;
    Ok(seen)
}

/// `rw:/path` or `ro:/path`, refused in words when the path cannot be a
/// label's value.
fn label_value(s: &Share) -> Result<String, String> {
    let v = format!(
        "{}:{}",
        if s.read_only { "ro" } else { "rw" },
        s.source.display()
    );
    if v.len() > LABEL_MAX || !v.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(format!(
            "--share {}: a share this provider copies is recorded in the computer's labels, which take a path of printable ASCII of at most {} bytes; share a folder with such a path",
            s.source.display(),
            LABEL_MAX - 3
        ));
    }
    Ok(v)
}

/// The shares recorded in a computer's labels, in their order, placed as
/// they were at its creation. A value that is not one [`take`] writes is
/// left out.
pub fn recorded(labels: &Labels) -> Vec<Share> {
    let mut found: Vec<(usize, bool, PathBuf)> = labels
        .iter()
        .filter_map(|(k, v)| {
            let i = k.strip_prefix(LABEL_PREFIX)?.parse::<usize>().ok()?;
            let (mode, path) = v.split_once(':')?;
            let read_only = match mode {
                "ro" => true,
                "rw" => false,
                _ => return None,
            };
            Some((i, read_only, PathBuf::from(path)))
        })
        .collect();
    found.sort_by_key(|(i, _, _)| *i);
    let count = found.len();
    found
        .into_iter()
        .map(|(_, read_only, source)| Share {
            target: share::target(&source, count),
            source,
            read_only,
        })
        .collect()
}

/// Copy every share into the computer; the words of each copy.
pub async fn copy_in(
    client: &Arc<dyn ComputerClient>,
    shares: &[Share],
) -> Result<Vec<String>, String> {
    let mut notes = Vec::with_capacity(shares.len());
    for s in shares {
        crate::cp::push(client, &s.source, &s.target)
            .await
            .map_err(|e| format!("copying the share {} in: {e}", s.source.display()))?;
        notes.push(format!(
            "the host folder {} is copied in at {} ({})",
            s.source.display(),
            s.target,
            if s.read_only {
                "read-only: never copied back"
            } else {
                "copied back at release and by `computer-mcp cp --sync`"
            }
        ));
    }
    Ok(notes)
}

/// Copy every read-write share of `shares` back into its host folder;
/// `made` is when the computer was made (a host file changed after it is
/// kept aside before it is replaced). The words of each share's outcome;
/// an error when any was refused or failed, naming each (the others are
/// copied back all the same).
pub async fn copy_back(
    client: &Arc<dyn ComputerClient>,
    shares: &[Share],
    made: SystemTime,
    bounds: Bounds,
) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for s in shares.iter().filter(|s| !s.read_only) {
        match sync_one(client, s, made, bounds).await {
            Ok(words) => done.push(words),
            Err(why) => failed.push(format!(
                "{} was not copied back and is as it was: {why}",
                s.source.display()
            )),
        }
    }
    if failed.is_empty() {
        Ok(done)
    } else {
        done.extend(failed);
        Err(done.join("; "))
    }
}

/// One share's copy-back: unpacked aside, then merged.
async fn sync_one(
    client: &Arc<dyn ComputerClient>,
    s: &Share,
    made: SystemTime,
    bounds: Bounds,
) -> Result<String, String> {
    // The folder's own rules again: its path came back from labels.
    let placed = share::place(
        &[ShareArg {
            source: s.source.clone(),
            read_only: false,
        }],
        Path::new(NO_STATE),
    )
    .map_err(|e| e.message)?;
    let folder = placed
        .first()
        .map(|p| p.source.clone())
        .ok_or("no folder")?;
    let private = crate::cp::private_dir(&folder, SYNCING_PREFIX)?;
    let pulled = match crate::cp::pull_into(client, &s.target, &private, bounds).await {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&private);
            return Err(e);
        }
    };
    let (from, into) = (private.clone(), folder.clone());
    let merged = tokio::task::spawn_blocking(move || merge::merge(&from, &into, made))
        .await
        .map_err(|e| format!("the merge failed: {e}"))
        .and_then(|r| r);
    let _ = std::fs::remove_dir_all(&private);
    Ok(format!(
        "copied {} back to {} ({} files, {} B): {}",
        s.target,
        folder.display(),
        pulled.files,
        pulled.bytes,
        merged?.words()
    ))
}

/// Since when a host file counts as changed here: the time the shares
/// were taken ([`SINCE_LABEL`]), else the computer's creation; the epoch
/// when neither can be read, so every host file reads as changed and is
/// kept aside before a copy-back replaces it.
pub fn since(r: &computer_providers::ComputerRef) -> SystemTime {
    use time::format_description::well_known::Rfc3339;
    let read = |t: &str| time::OffsetDateTime::parse(t, &Rfc3339).ok();
    r.labels
        .get(SINCE_LABEL)
        .and_then(|t| read(t))
        .or_else(|| read(&r.created_at))
        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn copied_shares_leave_the_spec_for_labels_and_read_back_placed() {
        let state = tempfile::tempdir().unwrap();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let mut spec = ComputerSpec::sandbox(60_000);
        spec.shares = vec![
            a.path().to_str().unwrap().parse().unwrap(),
            format!("{}:ro", b.path().display()).parse().unwrap(),
        ];
        // A provider that binds keeps its shares.
        let mut bound = spec.clone();
        assert!(
            take(&mut bound, ShareWay::Bind, Some(state.path()))
                .unwrap()
                .is_empty()
        );
        assert_eq!(bound.shares.len(), 2);

        let taken = take(&mut spec, ShareWay::Copy, Some(state.path())).unwrap();
        assert!(spec.shares.is_empty());
        assert_eq!(recorded(&spec.labels), taken);
        assert_eq!(
            spec.labels.get("computer-mcp.share.1").unwrap(),
            &format!("ro:{}", b.path().canonicalize().unwrap().display())
        );
        assert!(taken[1].read_only && !taken[0].read_only);

        // One share alone is /workspace itself.
        let mut one = ComputerSpec::sandbox(60_000);
        one.shares = vec![a.path().to_str().unwrap().parse().unwrap()];
        let taken = take(&mut one, ShareWay::Copy, Some(state.path())).unwrap();
        assert_eq!(taken[0].target, "/workspace");
        assert_eq!(recorded(&one.labels), taken);
    }

    #[test]
    fn a_share_whose_path_no_label_can_hold_is_refused_in_words() {
        let state = tempfile::tempdir().unwrap();
        let top = tempfile::tempdir().unwrap();
        let odd = top.path().join("caf\u{e9}");
        std::fs::create_dir(&odd).unwrap();
        let mut spec = ComputerSpec::sandbox(60_000);
        spec.shares = vec![odd.to_str().unwrap().parse().unwrap()];
        let e = take(&mut spec, ShareWay::Copy, Some(state.path())).unwrap_err();
        assert!(e.contains("printable ASCII of at most 252 bytes"), "{e}");
    }
}
