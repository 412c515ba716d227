//! What both of Modal's services share here: a channel to a URL (TLS
//! against this machine's roots, or plaintext h2 only under the explicit
//! insecure-test setting), one call with a bound and its metadata, a
//! gRPC status turned into words (at most [`QUOTE_MAX`] bytes of the
//! vendor's own, never a secret), and the expiry a JWT carries.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::uri::PathAndQuery;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::types::{ErrorCode, ProviderError, Result};
use crate::vendor::Secret;

/// The most of a vendor's own words quoted in an error.
pub const QUOTE_MAX: usize = 200;
/// Modal's message cap (js/src/client.ts:204-211).
pub const MESSAGE_MAX: usize = 100 * 1024 * 1024;
/// The SDK's keepalive (client.ts:204-211).
pub const KEEPALIVE: Duration = Duration::from_secs(30);

/// A channel to `url`, dialled on first use. `http://` only when
/// `plaintext` (the insecure-test setting) allows it.
pub fn channel(url: &str, plaintext: bool, what: &str) -> Result<Channel> {
    let https = url.starts_with("https://");
    if !(https || (plaintext && url.starts_with("http://"))) {
        return Err(ProviderError::refused(format!(
            "Modal's {what} is not an https:// URL; plaintext is only for a test's fake (--modal-insecure-plaintext-for-tests)"
        )));
    }
    crate::vendor::install_tls();
    let bad = |_| ProviderError::invalid("server_url", format!("Modal's {what} is not a URL"));
    let mut ep = Endpoint::from_shared(url.to_string())
        .map_err(bad)?
        .connect_timeout(Duration::from_secs(10))
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_while_idle(true);
    if https {
        ep = ep
            .tls_config(ClientTlsConfig::new().with_native_roots())
            .map_err(|e| ProviderError::failed(format!("TLS for Modal's {what}: {e}")))?;
    }
    Ok(ep.connect_lazy())
}

/// The path of `method` on `service` (a [`super::proto`] prefix).
pub fn path(service: &str, method: &str) -> PathAndQuery {
    // A service prefix and a method name are ASCII without spaces.
    PathAndQuery::try_from(format!("{service}{method}"))
        .unwrap_or_else(|_| PathAndQuery::from_static("/"))
}

/// How long a throttled call (RESOURCE_EXHAUSTED) is to wait before it is
/// asked again: the server's `grpc-retry-pushback-ms` (gRPC's retry design,
/// A6), else a second.
pub fn pushback(s: &tonic::Status) -> Duration {
    s.metadata()
        .get("grpc-retry-pushback-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

/// One unary call on `channel`, within `within`.
pub async fn unary<Req, Res>(
    channel: &Channel,
    path: PathAndQuery,
    req: tonic::Request<Req>,
    within: Duration,
) -> std::result::Result<Res, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Res: prost::Message + Default + Send + Sync + 'static,
{
    bounded(within, "answer", async {
        ready(channel)
            .await?
            .unary(req, path, tonic_prost::ProstCodec::default())
            .await
            .map(tonic::Response::into_inner)
    })
    .await
}

/// A server stream on `channel` (opened within `within`).
pub async fn stream<Req, Res>(
    channel: &Channel,
    path: PathAndQuery,
    req: tonic::Request<Req>,
    within: Duration,
) -> std::result::Result<tonic::Streaming<Res>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Res: prost::Message + Default + Send + Sync + 'static,
{
    bounded(within, "stream", async {
        ready(channel)
            .await?
            .server_streaming(req, path, tonic_prost::ProstCodec::default())
            .await
            .map(tonic::Response::into_inner)
    })
    .await
}

/// A gRPC client on `channel` at Modal's message cap, once the channel
/// is ready for a call.
async fn ready(
    channel: &Channel,
) -> std::result::Result<tonic::client::Grpc<Channel>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone())
        .max_decoding_message_size(MESSAGE_MAX)
        .max_encoding_message_size(MESSAGE_MAX);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("not reached: {e}")))?;
    Ok(grpc)
}

/// `call` within `within`, else a deadline status saying no `what` came.
async fn bounded<T>(
    within: Duration,
    what: &str,
    call: impl Future<Output = std::result::Result<T, tonic::Status>>,
) -> std::result::Result<T, tonic::Status> {
    match tokio::time::timeout(within, call).await {
        Ok(r) => r,
        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
            "no {what} within {} s",
            within.as_secs()
        ))),
    }
}

/// Put `value` in `req`'s metadata as `key` (a secret's value is never
/// printed: a value that is no header is refused by name alone).
pub fn set<T>(req: &mut tonic::Request<T>, key: &'static str, value: &str) -> Result<()> {
    let v = value.parse().map_err(|_| {
        ProviderError::invalid(
            "token",
            format!("the value for Modal's {key} holds bytes no header may hold"),
        )
    })?;
    req.metadata_mut().insert(key, v);
    Ok(())
}

/// A failed call of `what` in words, with the vendor's own words cut to
/// [`QUOTE_MAX`] bytes and every one of `secrets` taken out.
pub fn error(what: &str, status: &tonic::Status, secrets: &[&Secret]) -> ProviderError {
    use tonic::Code;
    let code = match status.code() {
        Code::Unauthenticated | Code::PermissionDenied => ErrorCode::Unauthorized,
        Code::NotFound => ErrorCode::NotFound,
        Code::Unavailable => ErrorCode::Unreachable,
        Code::DeadlineExceeded => ErrorCode::Timeout,
        Code::ResourceExhausted => ErrorCode::Limit,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => ErrorCode::Refused,
        Code::Cancelled => ErrorCode::Aborted,
        _ => ErrorCode::Failed,
    };
    let mut said = status.message().to_string();
    for s in secrets {
        if !s.expose().is_empty() {
            said = said.replace(s.expose(), "<redacted>");
        }
    }
    ProviderError::new(
        code,
        format!(
            "Modal's {what} call failed ({:?}): {}",
            status.code(),
            quote(&said)
        ),
    )
}

/// At most [`QUOTE_MAX`] bytes of `s`, cut on a character boundary.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        return s.to_string();
    }
    let mut end = QUOTE_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Seconds since the epoch, now.
pub fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The `exp` claim of a JWT (seconds since the epoch), read without
/// checking its signature (the issuer checks it; we only time a refresh,
/// as js/src/task_command_router_client.ts:73-95 does).
pub fn jwt_exp(jwt: &str) -> Option<f64> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["exp"].as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwts_expiry_is_read_from_its_payload_and_a_bad_one_is_none() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"exp":1700000123,"sub":"ta-1"}"#);
        assert_eq!(jwt_exp(&format!("h.{payload}.s")), Some(1_700_000_123.0));
        assert_eq!(jwt_exp("not-a-jwt"), None);
        assert_eq!(jwt_exp("h.!!!.s"), None);
    }

    #[test]
    fn a_status_quotes_at_most_200_bytes_and_never_a_secret() {
        let secret = Secret::new("as-canary-secret");
        let long = format!("token as-canary-secret refused {}", "x".repeat(400));
        let e = error(
            "SandboxCreate",
            &tonic::Status::unauthenticated(long),
            &[&secret],
        );
        assert_eq!(e.code, ErrorCode::Unauthorized);
        assert!(!e.message.contains("canary"), "{}", e.message);
        assert!(e.message.len() < 300, "{}", e.message.len());
    }

    #[test]
    fn plaintext_is_refused_without_the_insecure_test_setting() {
        let e = channel("http://127.0.0.1:1", false, "server").unwrap_err();
        assert!(
            e.message.contains("--modal-insecure-plaintext-for-tests"),
            "{}",
            e.message
        );
    }
}
