//! A Daytona computer's life: what a create sends, the drift check on
//! Daytona's read of it, and the waits that see a change done (Daytona
//! answers a create, a stop and a delete before it has done them, and its
//! listing trails all three).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::api::{Daytona, Phase, Sandbox};
use crate::types::{ErrorCode, Labels, ProviderError, Result, label};
use crate::wait::{Wait, wait_until};

/// The label holding the image create was asked for ("default" stays
/// "default"): Daytona reports only the snapshot it resolved.
pub const IMAGE_LABEL: &str = "computer-mcp.image";
/// This provider's own labels, refused in a spec.
pub const OWN_LABELS: [&str; 3] = [label::COMPUTER, label::DEADLINE, IMAGE_LABEL];
/// The image that sends no snapshot: Daytona's default one.
pub const DEFAULT_IMAGE: &str = "default";
/// How long a new sandbox may take to read started.
pub const START_WAIT: Duration = Duration::from_secs(180);
/// How long a release (or a failed create's delete) waits to see it done.
pub const GONE_WAIT: Duration = Duration::from_secs(120);
/// How long create waits for the listing to show the new computer.
pub const LISTED_WAIT: Duration = Duration::from_secs(60);
/// Clock skew allowed between Daytona's autoDestroyAt and ours.
const SKEW_SECS: i64 = 120;

/// A computer's name: `computer-` and 12 hex digits.
pub fn is_our_name(name: &str) -> bool {
    name.strip_prefix("computer-")
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether a sandbox is one of this provider's computers.
pub fn is_ours(s: &Sandbox) -> bool {
    s.labels.get(label::COMPUTER).map(String::as_str) == Some("1") && is_our_name(&s.name)
}

/// The pause schedule of every wait here: doubling from 250 ms to 5 s.
fn wait(what: String, bound: Duration) -> Wait {
    Wait::new(what, bound)
}

/// Wait until `id` reads started; a sandbox in error (or gone) fails.
pub async fn started(d: &Daytona, id: &str, cancel: &CancellationToken) -> Result<Sandbox> {
    let got = wait_until(
        &wait(format!("the Daytona sandbox {id} to start"), START_WAIT),
        cancel,
        || d.get(id, cancel),
        |s: &Option<Sandbox>| match s {
            None => true,
            Some(s) => {
                matches!(
                    s.state.as_deref(),
                    Some("started" | "error" | "build_failed")
                ) || s.phase() != Phase::Running
            }
        },
        |s| s.as_ref().map_or("gone".into(), Sandbox::state_words),
    )
    .await?;
    match got {
        Some(s) if s.state.as_deref() == Some("started") => Ok(s),
        Some(s) => Err(ProviderError::failed(format!(
            "the Daytona sandbox {id} did not start: Daytona reads it {}",
            s.state_words()
        ))),
        None => Err(ProviderError::gone(format!(
            "the Daytona sandbox {id} went away while starting"
        ))),
    }
}

/// How a release leaves a computer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    Gone,
    Stopped,
}

/// Wait until Daytona reads `id` as `left`, twice running, by GET and by
/// the label listing alike.
pub async fn settled(
    d: &Daytona,
    id: &str,
    left: Left,
    bound: Duration,
    cancel: &CancellationToken,
) -> Result<()> {
    let mut ours = Labels::new();
    ours.insert(label::COMPUTER.into(), "1".into());
    let in_a_row = std::sync::atomic::AtomicU32::new(0);
    let what = match left {
        Left::Gone => format!("Daytona to read the sandbox {id} as deleted"),
        Left::Stopped => format!("Daytona to read the sandbox {id} as stopped"),
    };
    wait_until(
        &wait(what, bound),
        cancel,
        || async {
            let read = d.get(id, cancel).await?;
            let listed = d.list(&ours, cancel).await?;
            let listed = listed.into_iter().find(|s| s.id == id);
            let done = match left {
                Left::Gone => read.is_none() && listed.is_none(),
                Left::Stopped => {
                    read.as_ref().is_some_and(|s| s.phase() == Phase::Stopped)
                        && listed.as_ref().is_some_and(|s| s.phase() == Phase::Stopped)
                }
            };
            if let Some(s) = &read
                && s.state.as_deref() == Some("error")
            {
                return Err(ProviderError::failed(format!(
                    "Daytona reads the sandbox {id} in error ({}); it was not released",
                    s.state_words()
                )));
            }
            let n = if done {
                in_a_row.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
            } else {
                in_a_row.store(0, std::sync::atomic::Ordering::Relaxed);
                0
            };
            Ok((n, read.map_or("gone".into(), |s| s.state_words())))
        },
        |(n, _)| *n >= 2,
        |(_, words)| words.clone(),
    )
    .await
    .map(|_| ())
}

/// Delete `id` (by id or name) and wait until it is gone: what a release
/// and a failed create do.
pub async fn delete_and_wait(d: &Daytona, id: &str, cancel: &CancellationToken) -> Result<()> {
    let Some(s) = d.get(id, cancel).await? else {
        return Ok(());
    };
    if s.phase() != Phase::Going {
        d.delete(&s.id, cancel).await?;
    }
    settled(d, &s.id, Left::Gone, GONE_WAIT, cancel).await
}

/// After a create that failed or was aborted once the sandbox may exist:
/// delete the name it chose, under a bound of its own, and say so in
/// `why`'s words.
pub async fn undo(d: &Daytona, name: &str, why: ProviderError) -> ProviderError {
    let own = CancellationToken::new();
    let outcome = tokio::time::timeout(
        GONE_WAIT + Duration::from_secs(30),
        delete_and_wait(d, name, &own),
    )
    .await;
    own.cancel();
    let after = match outcome {
        Ok(Ok(())) => "the sandbox it may have made was deleted".to_string(),
        Ok(Err(e)) => format!(
            "deleting the sandbox {name} failed ({}): it may be left; delete it",
            e.message
        ),
        Err(_) => format!("deleting the sandbox {name} took too long: it may be left; delete it"),
    };
    ProviderError {
        code: why.code,
        message: format!("{}; {after}", why.message),
        field: why.field,
    }
}

/// What a new computer must read back as.
#[derive(Clone, Debug)]
pub struct Wanted<'a> {
    pub snapshot: Option<&'a str>,
    pub labels: &'a Labels,
    pub auto_stop: i64,
    pub auto_delete: i64,
    /// Unix seconds.
    pub deadline: i64,
    /// Block-all alone is asked (a new computer); an attached one's
    /// network is read back by `network` instead, which can narrow it.
    pub network: bool,
}

/// Every way Daytona's read of a sandbox differs from what was asked, in
/// words; empty when none.
pub fn drift(s: &Sandbox, want: &Wanted<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(snap) = want.snapshot
        && s.snapshot.as_deref() != Some(snap)
    {
        out.push(format!(
            "snapshot {:?}, not {snap:?}",
            s.snapshot.as_deref().unwrap_or("")
        ));
    }
    let lists = [&s.network_allow_list, &s.domain_allow_list]
        .iter()
        .any(|l| l.as_deref().is_some_and(|l| !l.is_empty()));
    if want.network && s.network_block_all != Some(true)
        || lists
        || s.outbound_proxy_url
            .as_deref()
            .is_some_and(|u| !u.is_empty())
    {
        out.push("a network other than block-all alone".into());
    }
    for (k, v) in want.labels {
        if s.labels.get(k) != Some(v) {
            out.push(format!("label {k} not as written"));
        }
    }
    if s.auto_stop_interval != Some(want.auto_stop) {
        out.push(format!(
            "autoStopInterval {:?}, not {}",
            s.auto_stop_interval, want.auto_stop
        ));
    }
    if s.auto_delete_interval != Some(want.auto_delete) {
        out.push(format!(
            "autoDeleteInterval {:?}, not {}",
            s.auto_delete_interval, want.auto_delete
        ));
    }
    let destroy = s.auto_destroy_at.as_deref().and_then(|t| {
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
    });
    match destroy {
        None => out.push("no autoDestroyAt".into()),
        Some(t) if t.unix_timestamp() > want.deadline + 60 + SKEW_SECS => {
            out.push("autoDestroyAt past the deadline".into());
        }
        Some(_) => {}
    }
    if s.public {
        out.push("public".into());
    }
    out
}

/// A refusal of a sandbox that is not this provider's.
pub fn not_ours(id: &str) -> ProviderError {
    ProviderError::new(
        ErrorCode::NotFound,
        format!(
            "the Daytona sandbox {id} is not a computer of this provider (no computer-mcp label or name)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_computer_name_with_our_label_is_ours() {
        assert!(is_our_name("computer-0123456789ab"));
        for bad in [
            "computer-0123",
            "computer-0123456789abc",
            "box-0123456789ab",
            "computer-xyz456789abc",
        ] {
            assert!(!is_our_name(bad), "{bad}");
        }
        let mut s = Sandbox {
            name: "computer-0123456789ab".into(),
            ..Sandbox::default()
        };
        assert!(!is_ours(&s));
        s.labels.insert(label::COMPUTER.into(), "1".into());
        assert!(is_ours(&s));
    }

    #[test]
    fn a_sandbox_read_as_asked_has_no_drift_and_each_difference_is_named() {
        let mut labels = Labels::new();
        labels.insert("a".into(), "1".into());
        let want = Wanted {
            snapshot: None,
            labels: &labels,
            auto_stop: 0,
            auto_delete: -1,
            deadline: 1_800_000_000,
            network: true,
        };
        let mut s = Sandbox {
            labels: labels.clone(),
            network_block_all: Some(true),
            auto_stop_interval: Some(0),
            auto_delete_interval: Some(-1),
            auto_destroy_at: Some("2027-01-15T08:00:00Z".into()),
            ..Sandbox::default()
        };
        assert_eq!(drift(&s, &want), Vec::<String>::new());
        s.network_allow_list = Some("10.0.0.0/8".into());
        s.auto_stop_interval = Some(15);
        s.public = true;
        s.auto_destroy_at = Some("2030-01-01T00:00:00Z".into());
        assert_eq!(
            drift(&s, &want),
            vec![
                "a network other than block-all alone".to_string(),
                "autoStopInterval Some(15), not 0".into(),
                "autoDestroyAt past the deadline".into(),
                "public".into(),
            ]
        );
    }
}
