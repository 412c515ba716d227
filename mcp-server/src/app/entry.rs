//! One computer the server holds ([`Entry`]), under the handle the server
//! minted for it, and whose it is ([`Principal`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use computer_providers::ComputerRef;
use computer_tools::fleet::{self, ComputerSummary};
use computer_tools::{ComputerFacts, ComputerState};
use computerd::client::ComputerClient;
use computerd::protocol::SettingKind;

/// Who is calling, as HTTP's auth layer found it (a request extension).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    /// A bearer token's principal: a hash of it (the token itself is never
    /// kept in a label or a log).
    pub fn of_token(token: &str) -> Principal {
        Principal(format!("t{}", digest("computer-mcp token", token)))
    }

    /// A stdio server's principal: its instance name's hash, so a server
    /// started again with the same `--instance` is the same caller.
    pub fn of_stdio(instance: &str) -> Principal {
        Principal(format!("s{}", digest("computer-mcp stdio", instance)))
    }
}

fn digest(domain: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    let out = h.finalize();
    out.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// A fresh handle: `c-` and 32 hex digits from the OS's random source.
pub(super) fn mint_handle() -> Result<String, String> {
    let hex = computer_providers::random::random_hex(16).map_err(|e| e.message)?;
    Ok(format!("{}{hex}", fleet::HANDLE_PREFIX))
}

/// Which default computer a computer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One MCP session's (stdio, or HTTP with sessions).
    Session,
    /// A principal's, for the calls of stateless clients that name none.
    Principal,
}

impl Scope {
    pub(super) fn as_label(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Principal => "principal",
        }
    }
}

/// One computer the server holds.
pub struct Entry {
    pub handle: String,
    /// The name the model gave it, if any.
    pub name: Option<String>,
    /// Which default computer it is, if it is one.
    pub default: Option<Scope>,
    pub principal: Principal,
    pub kind: SettingKind,
    pub computer: ComputerRef,
    pub client: Arc<dyn ComputerClient>,
    /// What the tools remember about it: made with it, gone with it.
    pub state: Arc<ComputerState>,
    pub(super) facts: Mutex<ComputerFacts>,
    /// Made by this server's instance (what shutdown releases).
    pub(super) made_here: bool,
    /// When this server made or found it.
    pub(super) since: Instant,
    pub(super) last_used: Mutex<Option<Instant>>,
    pub(super) in_use: AtomicUsize,
    /// Tool calls on it through this server (its receipt's count).
    pub(super) calls: std::sync::atomic::AtomicU64,
    /// Why it was released, once it was.
    pub(super) released: Mutex<Option<String>>,
    /// Paused by computer_pause: its calls are refused until resumed.
    pub(super) paused: std::sync::atomic::AtomicBool,
    /// Its preview ports' listeners, ended with it.
    pub ports: Arc<crate::ports::Ports>,
    /// The file and archive bytes through its connection.
    pub(super) meter: Arc<crate::receipts::meter::Meter>,
    /// Its receipt as an earlier server left it in the journal (a kept
    /// computer found again): the counts go on from there.
    pub(super) earlier: Option<crate::receipts::journal::Line>,
    /// (calls, pushed, pulled) when its receipt was last journaled.
    pub(super) journaled: Mutex<Option<(u64, u64, u64)>>,
}

impl Entry {
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn facts(&self) -> ComputerFacts {
        self.facts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn set_deadline(&self, deadline: String) {
        self.facts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .deadline = Some(deadline);
    }

    /// How it is named to the model: `build`, `default`, or none.
    pub fn shown_name(&self) -> Option<String> {
        match (&self.name, self.default) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(_)) => Some(fleet::DEFAULT_NAME.to_string()),
            (None, None) => None,
        }
    }

    /// `build (c-…)`, or the handle alone: what the model reads.
    pub fn label(&self) -> String {
        match self.shown_name() {
            Some(n) => format!("{n} ({})", self.handle),
            None => self.handle.clone(),
        }
    }

    /// How logs name it: its name and provider id, never its handle.
    pub fn log_name(&self) -> String {
        format!(
            "{} ({})",
            self.shown_name().unwrap_or_else(|| "unnamed".into()),
            self.computer.id
        )
    }

    pub fn released_why(&self) -> Option<String> {
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lost: released, or its connection ended.
    pub(super) fn lost(&self) -> Option<String> {
        if let Some(why) = self.released_why() {
            return Some(format!(
                "the computer {} was released ({why})",
                self.label()
            ));
        }
        if self.client.is_closed() {
            return Some(format!("the computer {} stopped answering", self.label()));
        }
        None
    }

    /// Mark a call on it: busy until the guard drops, then used now.
    /// Count a tool call on it (its receipt's `tool_calls`).
    pub fn count_call(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    /// (calls, pushed, pulled) now: what tells whether its receipt changed.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        let (pushed, pulled) = self.meter.read();
        (self.calls.load(Ordering::SeqCst), pushed, pulled)
    }

    pub fn begin_use(self: &Arc<Self>) -> InUse {
        self.in_use.fetch_add(1, Ordering::SeqCst);
        InUse(Arc::clone(self))
    }

    pub(super) fn idle_for(&self) -> Option<Duration> {
        if self.in_use.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = *self.last_used.lock().unwrap_or_else(|p| p.into_inner());
        Some(last.unwrap_or(self.since).elapsed())
    }

    pub fn summary(&self, default_here: bool) -> ComputerSummary {
        let idle_seconds = self
            .last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed().as_secs());
        ComputerSummary {
            handle: self.handle.clone(),
            name: if self.name.is_some() || default_here {
                self.shown_name()
            } else {
                None
            },
            kind: self.kind.as_str().to_string(),
            default: default_here,
            age_seconds: age_seconds(&self.computer.created_at),
            idle_seconds,
            deadline: self
                .facts()
                .deadline
                .unwrap_or_else(|| self.computer.deadline.clone()),
        }
    }
}

/// A call in progress on an entry.
pub struct InUse(Arc<Entry>);

impl Drop for InUse {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.0.in_use.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) fn age_seconds(created_at: &str) -> u64 {
    let Ok(t) =
        time::OffsetDateTime::parse(created_at, &time::format_description::well_known::Rfc3339)
    else {
        return 0;
    };
    let age = time::OffsetDateTime::now_utc() - t;
    age.whole_seconds().max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_hashes_never_the_token() {
        let token = "a-secret-token-of-mine";
        let p = Principal::of_token(token);
        assert!(!p.0.contains(token));
        assert_eq!(p.0.len(), 33);
        assert_eq!(p, Principal::of_token(token));
        assert_ne!(p, Principal::of_token("another-secret-token"));
        // A stdio instance named like a token is still another principal.
        assert_ne!(p.0[1..], Principal::of_stdio(token).0[1..]);
    }

    #[test]
    fn handles_are_128_random_bits_in_the_handle_form() {
        let a = mint_handle().unwrap();
        let b = mint_handle().unwrap();
        assert_ne!(a, b);
        assert!(fleet::is_handle(&a), "{a}");
        assert_eq!(a.len(), 2 + 32);
    }

    #[test]
    fn ages_read_from_rfc3339() {
        let t = time::OffsetDateTime::now_utc() - time::Duration::seconds(90);
        let s = t
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let a = age_seconds(&s);
        assert!((89..=92).contains(&a), "{a}");
        assert_eq!(age_seconds("not a time"), 0);
    }
}
