//! Labels between a computer and its [`crate::ComputerRef`]: which
//! computers carry the labels a list or an attach asks for, and the one an
//! attach by labels finds, and the wait until a vendor's listing (which
//! trails a create) shows a new computer.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::types::{Labels, ProviderError, Result};
use crate::wait::{Wait, wait_until};

/// Whether a computer whose label `k` reads `held(k)` carries every one of
/// `wanted`.
pub fn carries<'a>(wanted: &Labels, held: impl Fn(&str) -> Option<&'a str>) -> bool {
    wanted.iter().all(|(k, v)| held(k) == Some(v.as_str()))
}

/// The one computer an attach by labels found: not found with `none` when
/// there is none, refused on the labels field with `many(n)` when there
/// are `n`.
pub fn the_one<T>(mut found: Vec<T>, none: &str, many: impl FnOnce(usize) -> String) -> Result<T> {
    match found.len() {
        0 => Err(ProviderError::not_found(none)),
        1 => Ok(found.remove(0)),
        n => Err(ProviderError::invalid("labels", many(n))),
    }
}

/// [`the_one`] in the words of a vendor's computers (`vendor`, as "E2B").
pub fn the_one_of<T>(found: Vec<T>, vendor: &str) -> Result<T> {
    the_one(
        found,
        &format!("no {vendor} computer carries those labels"),
        |n| format!("{n} {vendor} computers carry those labels; give more"),
    )
}

/// Wait, within `bound`, until `shown` (one read of the vendor's label
/// listing: whether it holds the computer `id`) says yes twice running,
/// so a listing that trails a create shows the computer steadily before
/// create returns. `vendor` names the vendor in the words of a timeout.
pub async fn wait_listed<F, Fut>(
    vendor: &str,
    id: &str,
    bound: Duration,
    cancel: &CancellationToken,
    shown: F,
) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let seen = AtomicU32::new(0);
    wait_until(
        &Wait::new(
            format!("{vendor}'s listing to show the computer {id}"),
            bound,
        ),
        cancel,
        || async {
            Ok(if shown().await? {
                seen.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                seen.store(0, Ordering::Relaxed);
                0
            })
        },
        |n| *n >= 2,
        |n| format!("listed {n} time(s) running"),
    )
    .await
    .map(|_| ())
}

/// A set-up that failed after the vendor made the sandbox: its error, and
/// whether ending the sandbox (`ended`: "terminated", "killed") worked.
pub fn set_up_failed(e: ProviderError, ended: &str, how: Result<()>) -> ProviderError {
    let words = match how {
        Ok(()) => format!("was {ended}"),
        Err(k) => format!("could not be {ended}: {}", k.message),
    };
    ProviderError {
        field: e.field,
        ..ProviderError::new(e.code, format!("{}; the sandbox {words}", e.message))
    }
}

/// A vendor whose create marks its sandbox (a tag, a label) and whose
/// listing finds sandboxes by that mark: what [`recover`] asks of it for
/// a create whose answer never came.
pub trait LostCreate: Sync {
    /// How the sandbox is found ("its tag").
    const FOUND_BY: &'static str;
    /// What ending it does ("terminated").
    const ENDED: &'static str;
    /// How long the listing (which trails a create) is asked.
    const WITHIN: Duration;
    /// One read of the listing: the ids of the sandboxes carrying the
    /// create's `mark`.
    fn marked(&self, mark: &str) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// End the sandbox `id` and wait until the vendor reads it ended.
    fn end(&self, id: &str) -> impl Future<Output = Result<()>> + Send;
}

/// A create whose answer never came (`error`): ask `vendor`'s listing for
/// the sandboxes carrying the create's `mark` until it names one, end
/// each, and answer the create's error with what was found and ended.
pub async fn recover<V: LostCreate>(vendor: &V, mark: &str, error: ProviderError) -> ProviderError {
    let cancel = CancellationToken::new();
    let wait = Wait::new("a lost create's sandbox to be listed", V::WITHIN);
    let found = wait_until(
        &wait,
        &cancel,
        || vendor.marked(mark),
        |l: &Vec<String>| !l.is_empty(),
        |_| "none listed".into(),
    )
    .await;
    let Ok(found) = found else {
        return ProviderError::new(
            error.code,
            format!(
                "{}; no sandbox of that create was listed within {} s",
                error.message,
                V::WITHIN.as_secs()
            ),
        );
    };
    let mut words = Vec::new();
    for id in found {
        match vendor.end(&id).await {
            Ok(()) => words.push(format!("{id} {}", V::ENDED)),
            Err(e) => words.push(format!("{id} not {}: {}", V::ENDED, e.message)),
        }
    }
    ProviderError::new(
        error.code,
        format!(
            "{}; the sandbox it made was found by {}: {}",
            error.message,
            V::FOUND_BY,
            words.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computer_carries_every_label_asked_for_and_an_attach_finds_one() {
        let held = Labels::from([("a".into(), "1".into()), ("b".into(), "2".into())]);
        let read = |k: &str| held.get(k).map(String::as_str);
        assert!(carries(&Labels::new(), read));
        assert!(carries(&Labels::from([("a".into(), "1".into())]), read));
        assert!(!carries(&Labels::from([("a".into(), "2".into())]), read));
        assert!(!carries(&Labels::from([("c".into(), "1".into())]), read));
        let many = |n| format!("{n} match");
        assert_eq!(the_one(vec![7], "none", many), Ok(7));
        assert_eq!(
            the_one(Vec::<u8>::new(), "none", many),
            Err(ProviderError::not_found("none"))
        );
        assert_eq!(
            the_one(vec![1, 2], "none", many),
            Err(ProviderError::invalid("labels", "2 match"))
        );
    }
}
