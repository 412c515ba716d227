//! The provider's housekeeping and shares: the janitor and release_older
//! end what they should and nothing else; a bind mount shows at
//! /workspace, and a mount a provider does not take is refused.

use std::time::Duration;

use computer_providers::types::AttachBy;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

use super::provider::case_labels;
use crate::ctx::{Ctx, Outcome, bounded, ensure, fail};

pub async fn janitor(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let c = t
        .create(|s| {
            s.lifetime_ms = 5_000;
            s.labels = labels.clone();
        })
        .await?;
    c.conn.client.close();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let swept = bounded(
        "sweep",
        t.bounds.cleanup,
        t.provider.sweep(&CancellationToken::new()),
    )
    .await
    .map_err(|e| Outcome::Fail(format!("sweep failed: {}", e.message)))?;
    let after = t
        .list(&labels)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    // It must be gone. Another sweep on the same provider (a second suite
    // run at once) may have taken it first, so this one need not be the
    // sweep that released it.
    let left = after.iter().any(|r| r.id == c.computer.id);
    ensure(!left, || {
        format!(
            "a sweep after the deadline released {swept:?} and left {}, which is still listed",
            c.computer.id
        )
    })
}

pub async fn release_older(t: &Ctx) -> Result<(), Outcome> {
    use computer_providers::janitor;
    use computer_providers::types::label::{EPOCH, RUN};
    let run = format!("{}-a", t.run_id);
    let other = format!("{}-b", t.run_id);
    let mut made = Vec::new();
    for (r, e) in [(&run, 1), (&run, 2), (&run, 3), (&other, 1)] {
        let c = match t
            .create(|s| {
                s.labels.insert(RUN.into(), r.clone());
                s.labels.insert(EPOCH.into(), e.to_string());
            })
            .await
        {
            Ok(c) => c,
            // A provider of one device (a phone over adb) makes one
            // computer at a time, and says so as a limit.
            Err(Outcome::Fail(words)) if !made.is_empty() && words.contains("(Limit)") => {
                return Err(Outcome::Skip(format!(
                    "the provider makes one computer at a time, and a takeover needs four: {words}"
                )));
            }
            Err(o) => return Err(o),
        };
        c.conn.client.close();
        made.push((r.clone(), e, c.computer));
    }
    let listed = t
        .list(&t.run_labels())
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    for (r, e, c) in &made {
        let back = listed.iter().find(|l| l.id == c.id);
        let ok = back.is_some_and(|b| {
            b.labels.get(RUN) == Some(r) && b.labels.get(EPOCH) == Some(&e.to_string())
        });
        ensure(ok, || {
            format!(
                "{} does not read back {RUN}={r} and {EPOCH}={e}: {:?}",
                c.id,
                back.map(|b| &b.labels)
            )
        })?;
    }
    let scope = t.run_labels();
    let mut released = janitor::release_older(&*t.provider, &run, 3, &t.cancel)
        .await
        .map_err(|e| Outcome::Fail(format!("releaseOlder at epoch 3 failed: {}", e.message)))?
        .released;
    released.sort();
    let mut want = vec![made[0].2.id.clone(), made[1].2.id.clone()];
    want.sort();
    ensure(released == want, || {
        format!("releaseOlder at epoch 3 released {released:?}, want epochs 1 and 2: {want:?}")
    })?;
    let left = t
        .list(&scope)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    let mut ids: Vec<&str> = left
        .iter()
        .filter(|l| l.labels.contains_key(RUN))
        .map(|l| l.id.as_str())
        .collect();
    ids.sort_unstable();
    let mut keep = vec![made[2].2.id.as_str(), made[3].2.id.as_str()];
    keep.sort_unstable();
    ensure(ids == keep, || {
        format!(
            "after releaseOlder at epoch 3 the run's computers are {ids:?}, want epoch 3 and the other run's: {keep:?}"
        )
    })?;
    for (_, _, c) in &made[..2] {
        if t.provider
            .attach(&AttachBy::Id(c.id.clone()), &t.cancel)
            .await
            .is_ok()
        {
            return fail(format!("{} was released, and attach still finds it", c.id));
        }
    }
    match janitor::release_older(&*t.provider, &run, 2, &t.cancel).await {
        Ok(r) => fail(format!(
            "releaseOlder at epoch 2 after epoch 3 was not fenced: it released {:?}",
            r.released
        )),
        Err(e) => {
            let still = t
                .list(&scope)
                .await
                .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
            ensure(
                still.iter().filter(|l| l.labels.contains_key(RUN)).count() == 2,
                || format!("a fenced releaseOlder ({}) released computers", e.message),
            )
        }
    }
}

pub async fn mount_bind(t: &Ctx) -> Result<(), Outcome> {
    use std::os::unix::fs::PermissionsExt;
    let Some(root) = &t.run_folders else {
        return Err(Outcome::Skip("no run folder was given".into()));
    };
    // A fresh folder any computer user may write (its uid is the
    // provider's to choose), removed when the case ends.
    let folder = root.join(format!("{}-{}", t.run_id, t.case_id.replace('.', "-")));
    let made = std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)))
        .and_then(|()| std::fs::write(folder.join("outside.txt"), b"from outside"));
    if let Err(e) = made {
        return fail(format!(
            "could not make the run folder {}: {e}",
            folder.display()
        ));
    }
    let r = mount_bind_in(t, &folder).await;
    let _ = std::fs::remove_dir_all(&folder);
    r
}

async fn mount_bind_in(t: &Ctx, folder: &std::path::Path) -> Result<(), Outcome> {
    use computerd::protocol::{Bytes64, FilesReadParams, FilesWriteParams};
    let c = t
        .create(|s| {
            s.shares = vec![computer_providers::share::ShareArg {
                source: folder.to_path_buf(),
                read_only: false,
            }]
        })
        .await?;
    let inside = t
        .call(
            &c,
            &FilesReadParams {
                path: "/workspace/outside.txt".into(),
                offset: None,
                length: None,
            },
        )
        .await?;
    ensure(inside.data.0 == b"from outside", || {
        format!(
            "a file written outside reads at /workspace as {:?}",
            inside.data.0
        )
    })?;
    t.call(
        &c,
        &FilesWriteParams {
            path: "/workspace/inside.txt".into(),
            data: Bytes64(b"from inside".to_vec()),
            offset: None,
            append: None,
            mode: None,
            parents: None,
        },
    )
    .await?;
    let outside = std::fs::read(folder.join("inside.txt")).unwrap_or_default();
    ensure(outside == b"from inside", || {
        format!("a file written at /workspace reads outside as {outside:?}")
    })?;
    let r = t
        .call(
            &c,
            &ExecParams {
                argv: vec!["cat".into(), "outside.txt".into()],
                cwd: Some("/workspace".into()),
                ..Default::default()
            },
        )
        .await?;
    ensure(r.stdout.0 == b"from outside", || {
        format!(
            "cat in /workspace printed {:?}",
            String::from_utf8_lossy(&r.stdout)
        )
    })
}

/// A mount the provider does not take is refused by check with the field
/// `mount`, and by create with check's words, making nothing.
pub async fn mount_undeclared(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let mut spec = t.spec();
    spec.labels = labels.clone();
    spec.mount = Some(computer_providers::types::MountSpec {
        source: "/computer-mcp-conformance-no-such-folder".into(),
        target: "/workspace".into(),
        read_only: false,
    });
    let checked = match t.provider.check(&spec) {
        Ok(()) => {
            return Err(Outcome::Undeclared {
                need: "an undeclared mount".into(),
                why: "the provider's check takes a bind mount, so there is none to refuse".into(),
            });
        }
        Err(e) => e,
    };
    ensure(checked.field.as_deref() == Some("mount"), || {
        format!(
            "check refused a mount naming the field {:?}, not mount: {}",
            checked.field, checked.message
        )
    })?;
    match t.attempt(&t.provider, &spec).await {
        Ok(c) => fail(format!(
            "create made {} with a mount check refuses ({})",
            c.computer.id, checked.message
        )),
        Err(e) => {
            ensure(e.message == checked.message, || {
                format!(
                    "create refused the mount in other words than check: {:?} vs {:?}",
                    e.message, checked.message
                )
            })?;
            let left = t
                .list(&labels)
                .await
                .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
            ensure(left.is_empty(), || {
                "a refused create left a computer".into()
            })
        }
    }
}
