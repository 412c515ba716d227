//! Sizes bounded as asked (Full, for a provider whose check takes them):
//! the bounds read back, processes, memory and HOME's size. Every hostile
//! program here runs in a computer made for the case with small bounds, so
//! only that computer's own cgroup holds it.

use computer_providers::types::{AttachBy, ComputerRef};

use crate::ctx::{Computer, Ctx, Outcome, bounded, ensure, fail};

const PIDS: u64 = 64;
const MEMORY_MB: u64 = 256;

async fn bounded_computer(t: &Ctx) -> Result<Computer, Outcome> {
    t.create(|s| {
        s.sizes.pids = Some(PIDS);
        s.sizes.memory_mb = Some(MEMORY_MB);
    })
    .await
}

/// The bounds as create and attach read them back: what was asked.
pub async fn read_back(t: &Ctx) -> Result<(), Outcome> {
    let c = bounded_computer(t).await?;
    let attached = bounded(
        "attach",
        t.bounds.cleanup,
        t.provider
            .attach(&AttachBy::Id(c.computer.id.clone()), &t.cancel),
    )
    .await;
    let attached = match attached {
        Ok(a) => a,
        Err(e) => return fail(format!("attach failed: {}", e.message)),
    };
    let wrong: Vec<String> = [("create", &c.computer), ("attach", &attached)]
        .into_iter()
        .filter_map(|(how, r)| held(how, r).err())
        .collect();
    ensure(wrong.is_empty(), || wrong.join("; "))
}

/// Whether `r` reads back the bounds [`bounded_computer`] asks for; the
/// words of what it read otherwise.
fn held(how: &str, r: &ComputerRef) -> Result<(), String> {
    match r.sizes {
        None => Err(format!(
            "{how} reads no bounds back for a computer asked for pids {PIDS} and {MEMORY_MB} MiB"
        )),
        Some(s) if s.pids != PIDS || s.memory_mb != MEMORY_MB => Err(format!(
            "{how} reads the bounds back as pids {} and {} MiB, not the pids {PIDS} and {MEMORY_MB} MiB asked",
            s.pids, s.memory_mb
        )),
        Some(s) if s.cpus <= 0.0 => Err(format!("{how} reads the CPU bound back as {}", s.cpus)),
        Some(_) => Ok(()),
    }
}

pub async fn pids(t: &Ctx) -> Result<(), Outcome> {
    let c = bounded_computer(t).await?;
    // More sleepers than the bound; the forks past it fail. The count is
    // the shell's own (a glob and arithmetic, no fork), since the bound is
    // full then; the forks run in a subshell, which a failed fork ends.
    let script = format!(
        "(for i in $(seq {}); do sleep 30 >/dev/null 2>&1 & done) 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n",
        PIDS * 3
    );
    let r = t.sh(&c, &script).await?;
    let out = String::from_utf8_lossy(&r.stdout);
    let count: Option<u64> = out
        .trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok());
    ensure(
        count.is_some_and(|n| (PIDS / 4..=PIDS).contains(&n)),
        || {
            format!(
                "{} forks in a computer of pids {PIDS} left {:?} processes running (exit {:?}: {})",
                PIDS * 3,
                out.trim(),
                r.exit_code,
                String::from_utf8_lossy(&r.stderr).trim()
            )
        },
    )
}

pub async fn memory(t: &Ctx) -> Result<(), Outcome> {
    let c = bounded_computer(t).await?;
    // tail holds a line in memory, and /dev/zero has no newline.
    let r = t
        .sh(
            &c,
            &format!(
                "head -c {}M /dev/zero | tail -n 1 >/dev/null; echo survived $?",
                MEMORY_MB * 2
            ),
        )
        .await?;
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    ensure(out.trim() != "survived 0", || {
        format!(
            "an allocation of {} MiB in a computer of {MEMORY_MB} MiB ran to its end",
            MEMORY_MB * 2
        )
    })?;
    // The computer still answers.
    t.sh_ok(&c, "true").await.map(|_| ())
}

pub async fn work_size(t: &Ctx) -> Result<(), Outcome> {
    let c = bounded_computer(t).await?;
    let r = t
        .sh(
            &c,
            &format!("head -c {MEMORY_MB}M /dev/zero > \"$HOME/fill\"; e=$?; rm -f \"$HOME/fill\"; exit $e"),
        )
        .await?;
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    ensure(
        r.exit_code != Some(0) && err.contains("No space left"),
        || {
            format!(
                "writing {MEMORY_MB} MiB to HOME in a computer of {MEMORY_MB} MiB gave exit {:?}: {}",
                r.exit_code,
                err.trim()
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use computer_providers::SizesReadBack;

    /// Bounds read back as pids 64, one CPU and `memory_mb`.
    fn pids_64(memory_mb: u64) -> Option<SizesReadBack> {
        Some(SizesReadBack {
            cpus: 1.0,
            memory_mb,
            pids: 64,
        })
    }

    #[test]
    fn bounds_read_back_short_or_missing_are_named() {
        let mut r = ComputerRef::by_id("p", "c");
        assert_eq!(
            held("attach", &r).unwrap_err(),
            "attach reads no bounds back for a computer asked for pids 64 and 256 MiB"
        );
        r.sizes = pids_64(512);
        assert_eq!(
            held("create", &r).unwrap_err(),
            "create reads the bounds back as pids 64 and 512 MiB, not the pids 64 and 256 MiB asked"
        );
        r.sizes = pids_64(256);
        assert_eq!(held("create", &r), Ok(()));
    }
}
