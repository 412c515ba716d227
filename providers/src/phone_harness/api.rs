//! The phone harness's REST API, as the provider uses it: sessions made
//! (`POST /sessions`, with an `Idempotency-Key`), found again by that key
//! (`GET /sessions/requests/{key}`), read, listed and deleted. The
//! service's error codes (`phones_busy`, `session_limit`, credit) are
//! read from its `{error, code}` body and answered in our words: its own
//! words, and anything it echoes, never reach an error.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::types::{ErrorCode, ProviderError, Result};
use crate::vendor::{Api, Call, Failure, Secret, check_id, not_found_is_none};

/// Where a session is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Provisioning,
    Ready,
    Error,
    Closing,
}

impl Phase {
    fn of(s: &str) -> Phase {
        match s {
            "ready" => Phase::Ready,
            "error" | "failed" => Phase::Error,
            "closing" | "closed" | "ended" => Phase::Closing,
            _ => Phase::Provisioning,
        }
    }
    pub fn words(self) -> &'static str {
        match self {
            Phase::Provisioning => "provisioning",
            Phase::Ready => "ready",
            Phase::Error => "error",
            Phase::Closing => "closing",
        }
    }
}

/// A phone's adb link: where the adb server connects, and the unlock
/// code. Both secrets: never in words, a log line or a ref.
#[derive(Clone)]
pub struct AdbLink {
    pub host: Secret,
    pub port: u16,
    pub code: Secret,
}

impl std::fmt::Debug for AdbLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdbLink(<redacted>)")
    }
}

/// A session as the service describes it.
#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    pub phase: Phase,
    /// The Idempotency-Key of the POST that made it, where it says.
    pub request_key: Option<String>,
    pub adb: Option<AdbLink>,
}

/// The session in `v` (the object itself, or under `session`); none when
/// it holds no usable id.
pub fn session_of(v: &Value) -> Option<Session> {
    let v = v.get("session").filter(|s| s.is_object()).unwrap_or(v);
    let id = v.get("id").and_then(Value::as_str)?;
    check_id(id).ok()?;
    let str_at = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    let adb = v.get("adb").and_then(|a| {
        let host = a.get("host").and_then(Value::as_str)?;
        let port = u16::try_from(a.get("port").and_then(Value::as_u64)?).ok()?;
        Some(AdbLink {
            host: Secret::new(host),
            port,
            code: Secret::new(a.get("code").and_then(Value::as_str).unwrap_or_default()),
        })
    });
    Some(Session {
        id: id.to_string(),
        phase: Phase::of(&str_at("state").unwrap_or_default()),
        request_key: str_at("request_key"),
        adb,
    })
}

/// What a create's POST came to.
pub enum Posted {
    /// The service made this session.
    Made(Session),
    /// It refused: nothing was made.
    Refused(ProviderError),
    /// Whether it made one is unknown (no answer, a 5xx, the bound hit,
    /// a 2xx with no session): why, in words.
    Unknown(ProviderError),
}

/// The phone harness's API with this provider's per-request bound.
#[derive(Debug)]
pub struct Sessions {
    pub api: Api,
    /// Each request's bound.
    pub request: Duration,
}

/// A refusal the service names by its code, in our words; none for a
/// code we do not know.
fn refusal_of(status: u16, body: &[u8]) -> Option<ProviderError> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let code = v.get("code").and_then(Value::as_str).unwrap_or_default();
    let at_limit = v.get("available_session_slots").and_then(Value::as_u64) == Some(0);
    let e = match code {
        "phones_busy" => ProviderError::new(
            ErrorCode::Limit,
            "the phone harness has no phone free now (phones_busy); nothing was made: try again in a minute",
        ),
        "session_limit" => ProviderError::new(
            ErrorCode::Limit,
            "the account is at its phone harness session limit (session_limit); nothing was made: release a phone, or raise the limit",
        ),
        _ if at_limit => ProviderError::new(
            ErrorCode::Limit,
            "the account has no session slot left at the phone harness; nothing was made: release a phone, or raise the limit",
        ),
        _ if status == 402 || code.contains("credit") => ProviderError::new(
            ErrorCode::Refused,
            "the phone harness account has no credit left (HTTP 402); nothing was made: add credit to the account",
        )
        .with_field("api_key"),
        _ => return None,
    };
    Some(e)
}

impl Sessions {
    fn call(&self, what: &'static str, method: http::Method, route: &'static str) -> Call {
        Call::new(what, method, route).bound(self.request)
    }

    /// One request; the service's coded refusals read first.
    async fn send(&self, call: &Call, cancel: &CancellationToken) -> Result<Value, Failure> {
        let (status, body) = self.api.send_raw(call, cancel).await?;
        if !(200..300).contains(&status)
            && let Some(e) = refusal_of(status, &body)
        {
            return Err(Failure::Refused(e));
        }
        self.api.answer(call, status, body)
    }

    /// `POST /sessions` for `timeout_s`, under `key`.
    pub async fn create(&self, key: &str, timeout_s: u64, cancel: &CancellationToken) -> Posted {
        let call = self
            .call("create session", http::Method::POST, "/sessions")
            .header("idempotency-key", key)
            .body(json!({ "timeout_seconds": timeout_s }));
        match self.send(&call, cancel).await {
            Ok(v) => match session_of(&v) {
                Some(s) => Posted::Made(s),
                None => Posted::Unknown(ProviderError::failed(
                    "the phone harness's create session call (POST /sessions) answered with no session",
                )),
            },
            Err(Failure::Refused(e)) => Posted::Refused(e),
            Err(Failure::Unknown(e)) => Posted::Unknown(e),
        }
    }

    /// `GET /sessions/requests/{key}`: the session a POST under `key`
    /// made; none when the service knows no request by it.
    pub async fn by_key(&self, key: &str, cancel: &CancellationToken) -> Result<Option<Session>> {
        let call = self
            .call(
                "find session by request",
                http::Method::GET,
                "/sessions/requests/{id}",
            )
            .id(key);
        let v = not_found_is_none(self.send(&call, cancel).await)?;
        Ok(v.as_ref().and_then(session_of))
    }

    /// `GET /sessions/{id}`; none once the service no longer knows it.
    pub async fn get(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Session>> {
        check_id(id)?;
        let call = self
            .call("read session", http::Method::GET, "/sessions/{id}")
            .id(id);
        let v = not_found_is_none(self.send(&call, cancel).await)?;
        Ok(v.as_ref().and_then(session_of))
    }

    /// `GET /sessions`: every session of the account.
    pub async fn list(&self, cancel: &CancellationToken) -> Result<Vec<Session>> {
        let call = self.call("list sessions", http::Method::GET, "/sessions");
        let v = self.send(&call, cancel).await.map_err(Failure::error)?;
        let items = match &v {
            Value::Array(a) => a,
            Value::Object(o) => o.get("sessions").and_then(Value::as_array).ok_or_else(|| {
                ProviderError::failed(
                    "the phone harness's list sessions call (GET /sessions) answered with no list",
                )
            })?,
            _ => {
                return Err(ProviderError::failed(
                    "the phone harness's list sessions call (GET /sessions) answered with no list",
                ));
            }
        };
        Ok(items.iter().filter_map(session_of).collect())
    }

    /// `DELETE /sessions/{id}` (one the service no longer knows is ended).
    pub async fn delete(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        check_id(id)?;
        let call = self
            .call("delete session", http::Method::DELETE, "/sessions/{id}")
            .id(id);
        not_found_is_none(self.send(&call, cancel).await)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_reads_with_its_link_and_without_a_bad_id() {
        let s = session_of(&json!({
            "id": "s-1", "state": "ready", "request_key": "k",
            "adb": {"host": "10.0.0.1", "port": 40001, "code": "9911"}
        }))
        .unwrap();
        assert_eq!((s.id.as_str(), s.phase), ("s-1", Phase::Ready));
        let link = s.adb.unwrap();
        assert_eq!((link.host.expose(), link.port), ("10.0.0.1", 40001));
        assert_eq!(format!("{link:?}"), "AdbLink(<redacted>)");
        assert!(session_of(&json!({"id": "../x"})).is_none());
        assert!(session_of(&json!({"state": "ready"})).is_none());
        let s = session_of(&json!({"session": {"id": "s-2"}})).unwrap();
        assert_eq!(s.phase, Phase::Provisioning);
    }

    #[test]
    fn coded_refusals_are_ours_in_words_and_hold_nothing_of_the_body() {
        let busy = br#"{"error":"no phone for phk_secret","code":"phones_busy"}"#;
        let e = refusal_of(503, busy).unwrap();
        assert_eq!(e.code, ErrorCode::Limit);
        assert!(!e.message.contains("phk_secret"));
        let e = refusal_of(429, br#"{"error":"x","available_session_slots":0}"#).unwrap();
        assert_eq!(e.code, ErrorCode::Limit);
        let e = refusal_of(402, br#"{"error":"pay"}"#).unwrap();
        assert_eq!(e.code, ErrorCode::Refused);
        assert!(refusal_of(500, br#"{"error":"boom"}"#).is_none());
        assert!(refusal_of(400, b"not json").is_none());
    }
}
