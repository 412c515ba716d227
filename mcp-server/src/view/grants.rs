//! View links' tokens: each short-lived, for one computer, revocable. Only
//! a hash of a token is kept; the token itself lives in the link's
//! fragment, which a browser never sends to a server.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::app::Principal;

/// How long a link works from when computer_view gave it.
pub const LINK_TTL: Duration = Duration::from_secs(30 * 60);

/// How long an ended link is still known as ended (for its words).
const KEEP_ENDED: Duration = Duration::from_secs(60 * 60);

/// What a token allows.
#[derive(Clone, Debug)]
pub struct Grant {
    pub handle: String,
    pub principal: Principal,
    pub expires: SystemTime,
    /// Fired when the link is revoked: its open views close.
    pub ended: CancellationToken,
}

/// A new link's token and when it ends.
pub struct Minted {
    pub token: String,
    pub expires: SystemTime,
}

/// Every link given, by its token's hash.
#[derive(Default)]
pub struct Grants {
    by_hash: Mutex<HashMap<String, Grant>>,
}

fn hash(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"computer-mcp view\0");
    h.update(token.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Grants {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Grant>> {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new token for `handle`, working for `ttl`: 256 bits from the OS's
    /// random source (failing closed).
    pub fn mint(
        &self,
        handle: &str,
        principal: &Principal,
        ttl: Duration,
    ) -> Result<Minted, String> {
        let token = computer_providers::random::random_hex(32).map_err(|e| e.message)?;
        let now = SystemTime::now();
        let expires = now + ttl;
        let mut map = self.map();
        map.retain(|_, g| g.expires + KEEP_ENDED > now);
        map.insert(
            hash(&token),
            Grant {
                handle: handle.to_string(),
                principal: principal.clone(),
                expires,
                ended: CancellationToken::new(),
            },
        );
        Ok(Minted { token, expires })
    }

    /// End every link to `handle`, closing its open views: how many.
    pub fn revoke(&self, handle: &str) -> u64 {
        let mut map = self.map();
        let mut n = 0;
        map.retain(|_, g| {
            if g.handle != handle {
                return true;
            }
            g.ended.cancel();
            n += 1;
            false
        });
        n
    }

    /// What `token` allows on `handle`, or why nothing, in words that
    /// never hold the token.
    pub fn check(&self, token: &str, handle: &str) -> Result<Grant, String> {
        let map = self.map();
        let Some(g) = map.get(&hash(token)) else {
            return Err(
                "this link is not valid: it was revoked, or never given by this server. Ask for a new one (computer_view)"
                    .into(),
            );
        };
        if g.handle != handle {
            return Err(
                "this link is for another computer: open the link exactly as it was given".into(),
            );
        }
        if g.expires <= SystemTime::now() {
            return Err(format!(
                "this link ended at {}. Ask for a new one (computer_view)",
                rfc3339(g.expires)
            ));
        }
        Ok(g.clone())
    }
}

/// A time as RFC 3339, in UTC.
pub fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "c-0123456789abcdef0123456789abcdef";
    const B: &str = "c-fedcba9876543210fedcba9876543210";

    #[test]
    fn a_token_opens_its_own_computer_until_it_ends_or_is_revoked() {
        let g = Grants::default();
        let p = Principal("t1".into());
        let m = g.mint(A, &p, LINK_TTL).unwrap();
        assert_eq!(m.token.len(), 64);
        let ok = g.check(&m.token, A).unwrap();
        assert_eq!((ok.handle.as_str(), &ok.principal), (A, &p));

        let e = g.check(&m.token, B).unwrap_err();
        assert!(e.starts_with("this link is for another computer"), "{e}");
        let e = g.check("not-a-token", A).unwrap_err();
        assert!(e.starts_with("this link is not valid"), "{e}");

        let other = g.mint(B, &p, LINK_TTL).unwrap();
        assert_eq!(g.revoke(A), 1);
        assert!(ok.ended.is_cancelled(), "its open views close");
        assert!(g.check(&m.token, A).unwrap_err().contains("revoked"));
        assert!(g.check(&other.token, B).is_ok(), "another computer's stays");

        let gone = g.mint(A, &p, Duration::ZERO).unwrap();
        let e = g.check(&gone.token, A).unwrap_err();
        assert!(e.starts_with("this link ended at "), "{e}");
        for words in [e, g.check(&m.token, A).unwrap_err()] {
            assert!(!words.contains(&m.token) && !words.contains(&gone.token));
        }
    }
}
