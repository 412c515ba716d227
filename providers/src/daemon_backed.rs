//! What every daemon-backed provider shares: a provider whose computers run
//! `computerd init` and are reached through the daemon's protocol (local,
//! Docker, and any later one of that shape).
//!
//! - [`hello`]: the one bounded hello, and what every such computer must
//!   say at it (our version, its kind, its groups, the host's arch).
//! - [`up`]: waiting until a new computer's daemon answers, with the last
//!   words of one that died on the way.
//! - [`handover`]: a new computer's first connection, kept for the
//!   `connect` that follows its create.
//! - [`browser`]: a Chromium started inside the computer on its debugging
//!   pipe, through the egress relay when the computer has an allowlist.
//! - [`child`]: a daemon started as a child of the vendor's own agent
//!   (E2B, Daytona) over the vendor's process API.
//! - [`desktop`]: a desktop whose init starts its own X server (E2B,
//!   Kubernetes), and the groups every desktop declares.
//! - [`labels`]: which computers carry the labels a list or an attach
//!   asks for, and the one an attach by labels finds.
//! - [`network`]: a network fixed when the computer is made, and the
//!   allowlist a spec asks for.
//! - [`probe`]: network none read from inside (`computerd probe`).
//! - [`sweep`]: a labelled vendor's computers past their deadline deleted.
//!
//! Sizes are [`crate::sizing`]'s, the same for every provider the host's
//! kernel bounds.

pub mod browser;
pub mod child;
pub mod desktop;
pub mod handover;
pub mod hello;
pub mod labels;
pub mod native;
pub mod network;
pub mod probe;
pub mod sweep;
pub mod up;

use computerd::protocol::SettingKind;

use crate::types::{ErrorCode, ProviderError};

/// A call's own cancellation, in words naming what was cancelled.
pub fn aborted(what: &str) -> ProviderError {
    ProviderError::new(ErrorCode::Aborted, format!("{what} was cancelled"))
}

/// Refuse a computerd path that is not absolute: a provider starts or
/// binds the binary it was given, never one found on a PATH.
pub fn check_computerd(path: &std::path::Path) -> crate::types::Result<()> {
    if path.is_absolute() {
        return Ok(());
    }
    Err(ProviderError::invalid(
        "computerd",
        "the computerd path must be absolute",
    ))
}

/// A release of a computer its vendor only deletes: a stop refused in
/// the words `why`; a computer the vendor no longer holds (`held` says
/// no) forgotten (`forget`) and released; else `end` (delete and wait).
pub async fn release_deleted(
    how: crate::types::Release,
    why: &str,
    held: impl Future<Output = crate::types::Result<bool>>,
    forget: impl FnOnce(),
    end: impl Future<Output = crate::types::Result<()>>,
) -> crate::types::Result<()> {
    if how == crate::types::Release::Stop {
        return Err(ProviderError::unsupported(why));
    }
    if !held.await? {
        forget();
        return Ok(());
    }
    end.await
}

/// A new computer's note of one share.
pub fn share_note(s: &crate::share::Share) -> String {
    format!(
        "share: {} at {}{}",
        s.source.display(),
        s.target,
        if s.read_only { " (read-only)" } else { "" }
    )
}

/// Refuse a computer of `kind` from a provider (`who`, as "the local
/// provider") that makes `made` computers here. `needs` is what a kind
/// needs there besides a server started with its `--kind` (for Docker, an
/// image that has Xvfb or Chromium).
pub fn check_kind(
    who: &str,
    kind: SettingKind,
    made: SettingKind,
    needs: Option<&str>,
) -> crate::types::Result<()> {
    if kind == made {
        return Ok(());
    }
    let how = match made {
        SettingKind::Sandbox => format!(
            "a {} needs a server started with --kind {}{}",
            kind.as_str(),
            kind.as_str(),
            needs.map(|n| format!(" and {n}")).unwrap_or_default()
        ),
        m => format!("this server makes {} (--kind {})", plural(m), m.as_str()),
    };
    Err(ProviderError::unsupported(format!(
        "{who} makes {} here, not a {}: {how}",
        plural(made),
        kind.as_str()
    ))
    .with_field("kind"))
}

fn plural(k: SettingKind) -> &'static str {
    match k {
        SettingKind::Sandbox => "sandboxes",
        SettingKind::Desktop => "desktops",
        SettingKind::Browser => "browsers",
        SettingKind::Phone => "phones",
    }
}

/// The last `n` non-empty lines a computer's daemon wrote, joined, or
/// `none` when it wrote nothing: what a computer that died while starting
/// said last.
pub fn last_words<S: AsRef<str>>(lines: &[S], n: usize, none: &str) -> String {
    let said: Vec<&str> = lines
        .iter()
        .map(|l| l.as_ref().trim())
        .filter(|l| !l.is_empty())
        .collect();
    let tail = said[said.len().saturating_sub(n)..].join(" / ");
    if tail.is_empty() {
        none.to_string()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_refused_only_where_another_is_made() {
        for k in [
            SettingKind::Sandbox,
            SettingKind::Desktop,
            SettingKind::Browser,
        ] {
            assert!(check_kind("the local provider", k, k, None).is_ok());
            assert!(check_kind("the Docker provider", k, k, Some("an image")).is_ok());
        }
        let e = check_kind(
            "the Docker provider",
            SettingKind::Desktop,
            SettingKind::Sandbox,
            Some("an image that has Xvfb"),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("kind"));
        assert_eq!(
            e.message,
            "the Docker provider makes sandboxes here, not a desktop: a desktop needs a server started with --kind desktop and an image that has Xvfb"
        );
    }

    #[test]
    fn last_words_are_the_last_lines_said_or_the_word_for_nothing() {
        assert_eq!(
            last_words(&["a", "", "b", "c", " d "], 3, "nothing"),
            "b / c / d"
        );
        assert_eq!(
            last_words::<&str>(&[], 3, "it said nothing"),
            "it said nothing"
        );
        assert_eq!(last_words(&["  ", ""], 3, "nothing"), "nothing");
    }
}
