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
    ProviderError::new(e.code, format!("{}; the sandbox {words}", e.message))
}

/// What a vendor made for a create whose answer never came, and how it
/// is found and ended: see [`recover_lost`].
pub struct Lost<'a> {
    /// The create's own error, kept as the answer's code and first words.
    pub error: ProviderError,
    /// How long the listing (which trails a create) is asked.
    pub within: Duration,
    /// How the sandbox was found ("its tag").
    pub found_by: &'a str,
    /// What ending it did ("terminated").
    pub ended: &'a str,
}

/// A create whose answer never came: ask `list` (the sandboxes carrying
/// the create's own mark) until it names one, end each with `end` (by id),
/// and answer the create's error with what was found and ended.
pub async fn recover_lost<L, LFut, E, EFut>(lost: Lost<'_>, list: L, end: E) -> ProviderError
where
    L: FnMut() -> LFut,
    LFut: Future<Output = Result<Vec<String>>>,
    E: Fn(String) -> EFut,
    EFut: Future<Output = Result<()>>,
{
    let cancel = CancellationToken::new();
    let wait = Wait::new("a lost create's sandbox to be listed", lost.within);
    let found = wait_until(
        &wait,
        &cancel,
        list,
        |l: &Vec<String>| !l.is_empty(),
        |_| "none listed".into(),
    )
    .await;
    let Ok(found) = found else {
        return ProviderError::new(
            lost.error.code,
            format!(
                "{}; no sandbox of that create was listed within {} s",
                lost.error.message,
                lost.within.as_secs()
            ),
        );
    };
    let mut words = Vec::new();
    for id in found {
        match end(id.clone()).await {
            Ok(()) => words.push(format!("{id} {}", lost.ended)),
            Err(e) => words.push(format!("{id} not {}: {}", lost.ended, e.message)),
        }
    }
    ProviderError::new(
        lost.error.code,
        format!(
            "{}; the sandbox it made was found by {}: {}",
            lost.error.message,
            lost.found_by,
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
