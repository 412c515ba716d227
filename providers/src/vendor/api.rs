//! A vendor's REST API ([`Api`]): one bounded request per [`Call`], never
//! retried, whose failure ([`Failure`]) says whether the vendor may have
//! done it, in words that name the call and the HTTP status alone.

use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{BODY_MAX, CALL_WAIT, Secret, Vendor};
use crate::types::{ErrorCode, ProviderError, Result};

/// One vendor request: its words and where it goes.
#[derive(Clone, Debug)]
pub struct Call {
    /// What it does, in words: "create session".
    pub what: &'static str,
    pub method: http::Method,
    /// The route with placeholders, for words: `/v1/sessions/{id}`.
    pub route: &'static str,
    /// The path sent.
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    /// Headers beside the key's (an `Idempotency-Key`).
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Value>,
    /// A body that is not JSON (a file's bytes) and its content type; sent
    /// in place of `body`.
    pub raw: Option<(Bytes, String)>,
    /// This call's bound, the answer's body included; [`CALL_WAIT`] when
    /// none.
    pub bound: Option<Duration>,
}

impl Call {
    pub fn new(what: &'static str, method: http::Method, route: &'static str) -> Self {
        Self {
            what,
            method,
            route,
            path: route.to_string(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            raw: None,
            bound: None,
        }
    }
    /// The route with `{id}` filled in.
    pub fn id(mut self, id: &str) -> Self {
        self.path = self.route.replace("{id}", id);
        self
    }
    pub fn query(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.query.push((k, v.into()));
        self
    }
    pub fn body(mut self, v: Value) -> Self {
        self.body = Some(v);
        self
    }
    /// Send `bytes` as the body, of `content_type`.
    pub fn raw(mut self, bytes: Bytes, content_type: impl Into<String>) -> Self {
        self.raw = Some((bytes, content_type.into()));
        self
    }
    pub fn header(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.headers.push((k, v.into()));
        self
    }
    /// Bound this call by `d` rather than [`CALL_WAIT`].
    pub fn bound(mut self, d: Duration) -> Self {
        self.bound = Some(d);
        self
    }
    fn wait(&self) -> Duration {
        self.bound.unwrap_or(CALL_WAIT)
    }
    fn named(&self, vendor: &str) -> String {
        format!(
            "{vendor}'s {} call ({} {})",
            self.what, self.method, self.route
        )
    }
}

/// A vendor call that failed.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The vendor refused it or it never left (a 4xx, no connection, no
    /// key): nothing was done.
    Refused(ProviderError),
    /// Whether it was done is unknown (a 5xx, a lost or cut answer, a
    /// timeout, a cancel).
    Unknown(ProviderError),
}

impl Failure {
    pub fn error(self) -> ProviderError {
        match self {
            Failure::Refused(e) | Failure::Unknown(e) => e,
        }
    }
}

/// How a vendor's API takes its key.
#[derive(Clone, Copy, Debug)]
pub enum Auth {
    /// In a header of its own (`X-BB-API-Key`).
    Header(&'static str),
    /// `Authorization: Bearer <key>`.
    Bearer,
}

/// One vendor's REST API: its base URL, its key, and calls that are each
/// one bounded request.
pub struct Api {
    /// "Browserbase".
    vendor: &'static str,
    base: String,
    key: Option<Secret>,
    auth: Auth,
    /// Where the key is set, for words: "--browserbase-api-key
    /// (COMPUTER_MCP_BROWSERBASE_API_KEY)".
    key_setting: String,
    /// The API URL's setting, for words: "--browserbase-api-url".
    url_setting: String,
    http: Http,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("vendor", &self.vendor)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// rustls's process-wide provider: ring (no aws-lc, no cmake). Installed
/// once, before the first https client or wss dial.
pub fn install_tls() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: a provider is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The longest `Retry-After` a vendor's 429 is waited for; a longer one is
/// waited this long (E2B, Daytona).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

/// A 429's `Retry-After` in seconds, capped at [`RETRY_AFTER_MAX`]; 1 s
/// when absent or unreadable.
pub fn retry_after(headers: &http::HeaderMap) -> Duration {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs)
        .min(RETRY_AFTER_MAX)
}

/// An HTTP/1.1 client for a vendor's `https://` (checked against this
/// machine's roots) or plain `http://` (a fake's) URLs.
pub fn http_client(vendor: &str, https: bool) -> Result<Http> {
    install_tls();
    let mut plain = HttpConnector::new();
    plain.enforce_http(false);
    plain.set_connect_timeout(Some(Duration::from_secs(10)));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = match hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(Arc::clone(&provider))
    {
        Ok(b) => b,
        Err(_) if !https => {
            // A plain http API (a fake's) needs no roots.
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|_| ProviderError::failed("rustls refused its own defaults"))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
        }
        Err(_) => {
            return Err(ProviderError::failed(format!(
                "no TLS root certificates could be read on this machine, so {vendor}'s https API cannot be checked; install ca-certificates"
            )));
        }
    };
    let connector = builder.https_or_http().enable_http1().wrap_connector(plain);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// The client [`http_client`] makes.
pub type Http = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

impl Api {
    /// `V`'s API at `url` (its default when None), with `key`; its
    /// settings named for words by `V`'s id.
    pub fn of<V: Vendor>(url: Option<&str>, key: Option<Secret>) -> Result<Api> {
        Api::for_provider(
            V::ID,
            V::NAME,
            url.unwrap_or(V::DEFAULT_API_URL),
            key,
            V::AUTH,
        )
    }

    /// The API of the provider `id` (the vendor `name`) at `url`, with
    /// `key`; its settings `--<id>-api-key` and `--<id>-api-url` named
    /// for words.
    pub fn for_provider(
        id: &str,
        name: &'static str,
        url: &str,
        key: Option<Secret>,
        auth: Auth,
    ) -> Result<Api> {
        Api::new(
            name,
            url,
            key,
            auth,
            format!(
                "--{id}-api-key (COMPUTER_MCP_{}_API_KEY)",
                id.to_uppercase().replace('-', "_")
            ),
            format!("--{id}-api-url"),
        )
    }

    fn new(
        vendor: &'static str,
        base: &str,
        key: Option<Secret>,
        auth: Auth,
        key_setting: String,
        url_setting: String,
    ) -> Result<Api> {
        let not_url = || {
            ProviderError::invalid(
                "api_url",
                format!("{url_setting} must be an http:// or https:// URL: http(s)://host[:port]"),
            )
        };
        let uri: http::Uri = base.parse().map_err(|_| not_url())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(not_url()),
        };
        if uri.authority().is_none() {
            return Err(not_url());
        }
        let http = http_client(vendor, https)?;
        Ok(Api {
            vendor,
            base: base.trim_end_matches('/').to_string(),
            key: key.filter(|k| !k.expose().is_empty()),
            auth,
            key_setting,
            url_setting,
            http,
        })
    }

    /// The vendor's name, for words.
    pub fn vendor(&self) -> &'static str {
        self.vendor
    }

    /// One request, never retried. The answer's JSON on a 2xx (`null` for
    /// an empty body).
    pub async fn send(&self, call: &Call, cancel: &CancellationToken) -> Result<Value, Failure> {
        let (status, body) = self.send_raw(call, cancel).await?;
        self.answer(call, status, body)
    }

    /// One request, never retried: its status and body, whatever the
    /// status, for a caller that reads a vendor's error codes before
    /// [`Api::answer`] judges the rest. Fails only where no whole answer
    /// came.
    pub async fn send_raw(
        &self,
        call: &Call,
        cancel: &CancellationToken,
    ) -> Result<(u16, Bytes), Failure> {
        let (status, _, body) = self.send_headed(call, cancel).await?;
        Ok((status, body))
    }

    /// [`Api::send_raw`] with the answer's headers (a paging cursor, a
    /// Retry-After).
    pub async fn send_headed(
        &self,
        call: &Call,
        cancel: &CancellationToken,
    ) -> Result<(u16, http::HeaderMap, Bytes), Failure> {
        let Some(key) = &self.key else {
            return Err(Failure::Refused(
                ProviderError::new(
                    ErrorCode::Unauthorized,
                    format!("{} has no API key: give {}", self.vendor, self.key_setting),
                )
                .with_field("api_key"),
            ));
        };
        let req = self.request(call, key)?;
        self.exchange(call, req, cancel).await
    }

    /// The request `call` is, with the key.
    fn request(&self, call: &Call, key: &Secret) -> Result<http::Request<Full<Bytes>>, Failure> {
        let mut uri = format!("{}{}", self.base, call.path);
        if !call.query.is_empty() {
            uri.push('?');
            uri.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(call.query.iter().map(|(k, v)| (*k, v.as_str())))
                    .finish(),
            );
        }
        let mut req = http::Request::builder()
            .method(call.method.clone())
            .uri(uri)
            .header("accept", "application/json");
        for (k, v) in &call.headers {
            req = req.header(*k, v.as_str());
        }
        req = match self.auth {
            Auth::Header(h) => req.header(h, key.expose()),
            Auth::Bearer => req.header("authorization", format!("Bearer {}", key.expose())),
        };
        let body = match (&call.raw, &call.body) {
            (Some((bytes, kind)), _) => {
                req = req.header("content-type", kind.as_str());
                bytes.clone()
            }
            (None, Some(b)) => {
                req = req.header("content-type", "application/json");
                Bytes::from(b.to_string())
            }
            (None, None) => Bytes::new(),
        };
        req.body(Full::new(body)).map_err(|_| {
            // Never the builder's words: they may hold the key.
            Failure::Refused(
                ProviderError::invalid(
                    "api_key",
                    format!(
                        "{} could not be sent: the key or the URL holds a character no HTTP header or path takes; check {} and {}",
                        call.named(self.vendor),
                        self.key_setting,
                        self.url_setting
                    ),
                ),
            )
        })
    }

    /// Send `req` and read its status and body, bounded by the call's
    /// bound and `cancel`.
    async fn exchange(
        &self,
        call: &Call,
        req: http::Request<Full<Bytes>>,
        cancel: &CancellationToken,
    ) -> Result<(u16, http::HeaderMap, Bytes), Failure> {
        enum Lost {
            Connect,
            Before,
            Cut,
        }
        let named = || call.named(self.vendor);
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| {
                if e.is_connect() {
                    Lost::Connect
                } else {
                    Lost::Before
                }
            })?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = Limited::new(resp.into_body(), BODY_MAX)
                .collect()
                .await
                .map_err(|_| Lost::Cut)?
                .to_bytes();
            Ok::<_, Lost>((status, headers, body))
        };
        tokio::select! {
            r = tokio::time::timeout(call.wait(), exchange) => match r {
                Ok(Ok(done)) => Ok(done),
                Ok(Err(Lost::Connect)) => Err(Failure::Refused(ProviderError::new(
                    ErrorCode::Unreachable,
                    format!(
                        "{} could not connect to {}: check {} and the network",
                        named(), self.vendor, self.url_setting
                    ),
                ))),
                Ok(Err(lost)) => {
                    let how = match lost {
                        Lost::Cut => "its answer was cut short",
                        _ => "the connection failed before an answer",
                    };
                    Err(Failure::Unknown(ProviderError::new(
                        ErrorCode::Unreachable,
                        format!("{}: {how}; try again later", named()),
                    )))
                }
                Err(_) => Err(Failure::Unknown(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{} did not answer within {} ms; try again later",
                        named(),
                        call.wait().as_millis()
                    ),
                ))),
            },
            _ = cancel.cancelled() => Err(Failure::Unknown(ProviderError::new(
                ErrorCode::Aborted,
                format!("{} was cancelled before its answer", named()),
            ))),
        }
    }

    /// The answer read: its JSON on a 2xx, else a failure by its status.
    pub fn answer(&self, call: &Call, status: u16, body: Bytes) -> Result<Value, Failure> {
        let named = || call.named(self.vendor);
        if (200..300).contains(&status) {
            if body.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&body).map_err(|_| {
                Failure::Unknown(ProviderError::failed(format!(
                    "{} answered HTTP {status} with a body that is not JSON: {}",
                    named(),
                    super::quote(&String::from_utf8_lossy(&body), self.key.as_ref())
                )))
            });
        }
        let (code, next) = match status {
            401 => (
                ErrorCode::Unauthorized,
                format!("the API key was refused; check {}", self.key_setting),
            ),
            403 => (
                ErrorCode::Unauthorized,
                format!(
                    "the API key may not do this; check {} and the account",
                    self.key_setting
                ),
            ),
            404 => (ErrorCode::NotFound, "the vendor knows no such thing".into()),
            429 => (
                ErrorCode::Limit,
                format!("{} is rate limiting this key; try again later", self.vendor),
            ),
            s if s >= 500 => (
                ErrorCode::Unreachable,
                format!("{} failed; try again later", self.vendor),
            ),
            _ => (
                ErrorCode::Refused,
                "the vendor refused the request".to_string(),
            ),
        };
        let mut e = ProviderError::new(code, format!("{} answered HTTP {status}: {next}", named()));
        if matches!(status, 401 | 403) {
            e = e.with_field("api_key");
        }
        if status >= 500 {
            Err(Failure::Unknown(e))
        } else {
            Err(Failure::Refused(e))
        }
    }
}

/// A read or an end of something the vendor no longer knows: `None`, not
/// an error.
pub fn not_found_is_none<T>(r: Result<T, Failure>) -> Result<Option<T>> {
    match r {
        Ok(t) => Ok(Some(t)),
        Err(f) => {
            let e = f.error();
            if e.code == ErrorCode::NotFound {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_that_is_not_json_is_quoted_200_bytes_at_most_without_the_key() {
        let key = "dtn_CANARY_quote_5e1f";
        let api = Api::for_provider(
            "daytona",
            "Daytona",
            "http://127.0.0.1:9",
            Some(Secret::new(key)),
            Auth::Bearer,
        )
        .unwrap();
        let call = Call::new("sandbox read", http::Method::GET, "/sandbox");
        let body = format!("<html>oops {key} {}</html>", "é".repeat(300));
        let Err(Failure::Unknown(e)) = api.answer(&call, 200, Bytes::from(body)) else {
            panic!("a body that is not JSON was read");
        };
        assert!(!e.message.contains(key), "{}", e.message);
        assert!(e.message.contains("<html>oops [key] éé"), "{}", e.message);
        let quoted = &e.message[e.message.find('"').unwrap()..];
        assert!(quoted.len() <= 200 + 2 + "…".len(), "{}", quoted.len());
        assert!(quoted.ends_with('…'), "{quoted}");
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_bounded() {
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after(&h), Duration::from_secs(1));
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("3"),
        );
        assert_eq!(retry_after(&h), Duration::from_secs(3));
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("3600"),
        );
        assert_eq!(retry_after(&h), RETRY_AFTER_MAX);
    }
}
