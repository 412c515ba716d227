//! Run and epoch labels, and [`release_older`]: the claim epoch is the one
//! fence for runs and computers. Every computer of a run carries
//! `computer-mcp.run` (the run's id) and `computer-mcp.epoch` (the claim
//! epoch of the runner that made it, in decimal). A new claim is epoch + 1,
//! and its first step is to release the run's computers of a lower epoch.
//! The labels are a caller's labels to every provider: none has code of
//! its own for them.

use tokio_util::sync::CancellationToken;

use crate::provider::Provider;
use crate::types::{ComputerRef, ErrorCode, Labels, ProviderError, Release, Result, label};

/// The largest epoch: 2^53 - 1, so every client reads it exactly.
pub const MAX_EPOCH: u64 = (1 << 53) - 1;

/// The two labels of a run's computer, for [`crate::ComputerSpec::labels`].
pub fn run_labels(run: &str, epoch: u64) -> Result<Labels> {
    check_run(run)?;
    if epoch > MAX_EPOCH {
        return Err(ProviderError::invalid(
            "epoch",
            format!("epoch {epoch} is over the most, {MAX_EPOCH}"),
        ));
    }
    Ok(Labels::from([
        (label::RUN.to_string(), run.to_string()),
        (label::EPOCH.to_string(), epoch.to_string()),
    ]))
}

fn check_run(run: &str) -> Result<()> {
    if run.is_empty() || run.len() > 255 || !run.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(ProviderError::invalid(
            "run",
            "a run id is 1 to 255 printable ASCII characters",
        ));
    }
    Ok(())
}

/// A computer's epoch: decimal digits, no sign, leading zero or space, at
/// most [`MAX_EPOCH`]. A missing label is not_found; anything else invalid.
pub fn epoch_of(labels: &Labels) -> Result<u64> {
    let Some(v) = labels.get(label::EPOCH) else {
        return Err(ProviderError::not_found(format!(
            "it has no {} label",
            label::EPOCH
        )));
    };
    let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    let n = if digits && (v == "0" || !v.starts_with('0')) {
        v.parse::<u64>().ok().filter(|n| *n <= MAX_EPOCH)
    } else {
        None
    };
    n.ok_or_else(|| {
        ProviderError::invalid(
            "epoch",
            format!("its {} label reads {v:?}, not an epoch", label::EPOCH),
        )
    })
}

/// What [`release_older`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReleasedOlder {
    /// Deleted: a lower epoch.
    pub released: Vec<String>,
    /// This epoch's, kept.
    pub kept: Vec<String>,
    /// Deleted too, since their epoch could not be read: id and why.
    pub unproven: Vec<(String, String)>,
}

/// Delete the run's computers of a lower epoch (and those whose epoch is
/// unreadable), keep this epoch's. Fenced: a computer of the run at a
/// higher epoch means a later claim holds the run, and nothing is
/// released. Every release is tried; any failure makes the whole an error
/// naming each computer left and what was released.
pub async fn release_older(
    provider: &dyn Provider,
    run: &str,
    epoch: u64,
    cancel: &CancellationToken,
) -> Result<ReleasedOlder> {
    run_labels(run, epoch)?;
    let by_run = Labels::from([(label::RUN.to_string(), run.to_string())]);
    let listed = provider.list(&by_run, cancel).await?;
    // Held to the run again, whatever list gave.
    let of_run: Vec<ComputerRef> = listed
        .into_iter()
        .filter(|c| c.labels.get(label::RUN).map(String::as_str) == Some(run))
        .collect();
    let mut doomed: Vec<(ComputerRef, Option<String>)> = Vec::new();
    let mut out = ReleasedOlder::default();
    for c in of_run {
        match epoch_of(&c.labels) {
            Ok(e) if e > epoch => {
                return Err(ProviderError::refused(format!(
                    "fenced: run {run:?} has {} at epoch {e}, above this claim's epoch {epoch}; a later claim holds the run",
                    c.id
                ))
                .with_field("epoch"));
            }
            Ok(e) if e == epoch => out.kept.push(c.id),
            Ok(_) => doomed.push((c, None)),
            Err(why) => doomed.push((c, Some(why.message))),
        }
    }
    let mut left = Vec::new();
    for (c, unproven) in doomed {
        if cancel.is_cancelled() {
            return Err(ProviderError::new(
                ErrorCode::Aborted,
                format!(
                    "release_older was cancelled after releasing {:?}",
                    out.released
                ),
            ));
        }
        match provider.release(&c, Release::Delete, cancel).await {
            Ok(()) => match unproven {
                Some(why) => out.unproven.push((c.id, why)),
                None => out.released.push(c.id),
            },
            Err(e) => left.push(format!("{}: {}", c.id, e.message)),
        }
    }
    if !left.is_empty() {
        return Err(ProviderError::failed(format!(
            "release_older left {} (it released {:?})",
            left.join("; "),
            out.released
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_read_as_written_and_nothing_else() {
        let l = |v: &str| Labels::from([(label::EPOCH.to_string(), v.to_string())]);
        assert_eq!(epoch_of(&l("0")).unwrap(), 0);
        assert_eq!(epoch_of(&l("42")).unwrap(), 42);
        for bad in ["", "042", "+1", " 1", "1.0", "9007199254740992"] {
            assert_eq!(
                epoch_of(&l(bad)).unwrap_err().code,
                ErrorCode::Invalid,
                "{bad:?}"
            );
        }
        assert_eq!(
            epoch_of(&Labels::new()).unwrap_err().code,
            ErrorCode::NotFound
        );
        assert!(run_labels("", 1).is_err());
        assert!(run_labels("r1", MAX_EPOCH + 1).is_err());
        assert_eq!(run_labels("r1", 3).unwrap()[label::EPOCH], "3");
    }
}
