//! What the browser vendors' providers share: a computer of kind browser
//! is a vendor's cloud browser that answers CDP, made and ended over the
//! vendor's REST API ([`Api`]), with no daemon (the in-process
//! [`BrowserClient`] answers hello, ping and the group cdp).
//!
//! [`BrowserVendor`] is the whole provider; a [`Vendor`] says only how
//! its API names a browser, its labels and its states. The rules here:
//!
//! - A vendor call is one request, never retried: a retried create could
//!   open a second paid browser. A failure names the call and the HTTP
//!   status alone (never the vendor's words, never a URL) and the next
//!   step.
//! - Every create carries one more label, [`CREATE_LABEL`], with a random
//!   value. A create whose outcome is unknown (its answer lost or cut, a
//!   5xx, no browser in the answer, cancelled) sends no second create: it
//!   finds the browsers carrying that label (bounded by [`RECOVER`]),
//!   releases each, and its failure says so. A 4xx made nothing.
//! - The CDP URL and the live view are secrets ([`Secret`]): held in
//!   memory by browser id, never in a [`ComputerRef`], a list, an error or
//!   a log line. (tungstenite writes a dialled request, path and query
//!   included, to the `log` crate at trace: a host that bridges `log` into
//!   its logs must keep `tungstenite` below trace.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use computerd::protocol::{Group, MachineKind, SettingKind};
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use crate::cdp::BrowserClient;
use crate::provider::Configure;
use crate::provider::{Connection, Provider};
use crate::settings::HostDefaults;
use crate::types::{
    AttachBy, Capabilities, ComputerRef, ComputerSpec, Created, DaemonMode, ErrorCode, Labels,
    LifetimeMode, NetworkKind, NetworkPolicy, NetworkReadBack, ProviderError, Release, Result,
    check_labels, check_lifetime, human_ms,
};
use crate::wait::{Wait, wait_until};

mod api;

pub use api::{
    Api, Auth, Call, Failure, Http, RETRY_AFTER_MAX, http_client, install_tls, not_found_is_none,
    retry_after,
};

/// The label every create writes beside the spec's, its value random: how
/// a create whose answer was lost finds what it made. The provider's own:
/// refused in a spec, hidden from every list and attach.
pub const CREATE_LABEL: &str = "computer-mcp.create";
/// The one image a vendor browser is: the vendor's Chromium.
pub const BROWSER_IMAGE: &str = "chromium";
/// How long a create whose outcome is unknown looks for what it made.
pub const RECOVER: Duration = Duration::from_secs(30);
/// Every vendor call's bound, the answer's body included.
pub const CALL_WAIT: Duration = Duration::from_secs(30);
/// How long a browser may stay pending before a connect gives up.
pub const START_WAIT: Duration = Duration::from_secs(60);
/// The most of an answer's body read.
pub const BODY_MAX: usize = 4 * 1024 * 1024;
/// How long a released browser may take to read back as ended.
pub const RELEASE_WAIT: Duration = Duration::from_secs(60);

/// A secret string (a CDP URL, a live view, a key): its Debug says only
/// that it is one. As a setting it is read and written as the string.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself, to dial or to send; never to print.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a vendor's browser is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Made, not answering yet.
    Pending,
    Running,
    /// Released, timed out, failed or deleted.
    Ended,
}

/// A vendor's browser as its API describes it.
#[derive(Clone, Debug)]
pub struct Browser {
    pub id: String,
    pub state: State,
    /// Decoded from the vendor's metadata or tags, [`CREATE_LABEL`] among
    /// them when it carries one.
    pub labels: Labels,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub deadline: String,
    pub cdp_url: Option<Secret>,
    pub live_url: Option<Secret>,
}

/// How one vendor's API names browsers, their labels and states.
#[async_trait::async_trait]
pub trait Vendor: Send + Sync + Sized + 'static {
    /// The registry id.
    const ID: &'static str;
    /// The vendor's name, for words.
    const NAME: &'static str;
    const MIN_LIFETIME_MS: u64;
    const MAX_LIFETIME_MS: u64;
    /// What keeps a browser from this host, in words.
    const ISOLATION: &'static str;
    /// The vendor's API unless told otherwise.
    const DEFAULT_API_URL: &'static str;
    /// How its API takes the key.
    const AUTH: Auth;

    /// What a user sets of this vendor's provider: flags `--<id>-<key>`,
    /// variables `COMPUTER_MCP_<ID>_<KEY>`, keys of `[providers.<id>]`.
    type Settings: clap::Args + clap::FromArgMatches + serde::Serialize + DeserializeOwned;

    /// The vendor's side, from its settings (its [`Api`] by [`Api::of`]).
    fn configure(settings: Self::Settings) -> Result<Self>;

    fn api(&self) -> &Api;

    /// The vendor's own rules on labels (a key's characters, a size).
    fn check_labels(&self, labels: &Labels) -> Result<()>;

    /// Make a browser carrying `labels` for `lifetime_ms`.
    async fn create(
        &self,
        labels: &Labels,
        lifetime_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Browser, Failure>;

    /// The browsers that have not ended, asked by the first label where
    /// the vendor can (every label is matched again by the caller).
    async fn list(
        &self,
        first: Option<(&str, &str)>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Browser>>;

    /// One browser; `None` when the vendor does not know it.
    async fn get(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Browser>>;

    /// Ask the vendor to end it (one unknown to the vendor is ended).
    async fn end(&self, id: &str, cancel: &CancellationToken) -> Result<()>;

    /// Its live view (a secret).
    async fn live_view(&self, browser: &Browser, cancel: &CancellationToken) -> Result<Secret>;
}

/// A browser vendor as a [`Provider`].
pub struct BrowserVendor<V: Vendor> {
    vendor: V,
    /// CDP URLs by browser id: what create (or a read) said, for connect.
    urls: Mutex<HashMap<String, Secret>>,
}

impl<V: Vendor> std::fmt::Debug for BrowserVendor<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserVendor")
            .field("id", &V::ID)
            .finish_non_exhaustive()
    }
}

/// A browser id as it goes into a path: letters, digits, `-` and `_`.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 128
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ProviderError::invalid(
            "id",
            "a browser id is 1 to 128 letters, digits, '-' and '_'",
        ));
    }
    Ok(())
}

/// For `doctor`: what a read of the account of the provider `id` (named
/// `name`) found, or what is wrong with the next step, naming its
/// `--<id>-api-key` and `--<id>-api-url` settings.
pub fn account_preflight(
    name: &'static str,
    id: &str,
    found: Result<String>,
) -> crate::provider::Preflight {
    let var = format!(
        "COMPUTER_MCP_{}_API_KEY",
        id.to_uppercase().replace('-', "_")
    );
    preflight(
        name,
        found,
        &format!("give a valid key: --{id}-api-key ({var})"),
        &format!("--{id}-api-url"),
    )
}

/// For `doctor`: what a read of `name`'s account found, or the next step:
/// `give_key` when the vendor refused the credentials, a check of the
/// setting `url` when it was not reached.
pub fn preflight(
    name: &'static str,
    found: Result<String>,
    give_key: &str,
    url: &str,
) -> crate::provider::Preflight {
    let found = found.map_err(|e| match e.code {
        ErrorCode::Unauthorized => (format!("unauthorized: {}", e.message), give_key.into()),
        ErrorCode::Unreachable | ErrorCode::Timeout => (
            format!("unreachable: {}", e.message),
            format!("check {url} and this host's network"),
        ),
        _ => (e.message, "do what the words say".into()),
    });
    crate::provider::Preflight { name, found }
}

/// The most of a vendor's unexpected words an error quotes.
pub const QUOTE_MAX: usize = 200;

/// `text` as an error quotes it: at most [`QUOTE_MAX`] bytes (cut on a
/// character), `secret` put out of it first, escaped, "…" after a cut.
pub fn quote(text: &str, secret: Option<&Secret>) -> String {
    let mut t = text.to_string();
    if let Some(k) = secret.map(Secret::expose).filter(|k| !k.is_empty()) {
        t = t.replace(k, "[key]");
    }
    let mut end = t.len().min(QUOTE_MAX);
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < t.len() { "…" } else { "" };
    format!("{:?}{more}", &t[..end])
}

/// How many of a thing, in words: "1 phone", "2 phones".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A browser's state as a wait names it last.
fn state_words(b: &Option<Browser>) -> String {
    match b {
        Some(b) => format!("{:?}", b.state).to_lowercase(),
        None => "unknown".into(),
    }
}

/// Now, RFC 3339.
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// `at` (RFC 3339, or now when unreadable) plus `secs`, RFC 3339.
pub fn plus_secs(at: &str, secs: u64) -> String {
    let t = OffsetDateTime::parse(at, &Rfc3339).unwrap_or_else(|_| OffsetDateTime::now_utc());
    (t + time::Duration::seconds(secs.min(i64::MAX as u64) as i64))
        .format(&Rfc3339)
        .unwrap_or_default()
}

impl<V: Vendor> BrowserVendor<V> {
    pub fn new(vendor: V) -> Self {
        Self {
            vendor,
            urls: Mutex::new(HashMap::new()),
        }
    }

    /// The vendor behind it.
    pub fn vendor(&self) -> &V {
        &self.vendor
    }

    fn remember(&self, b: &Browser) {
        if let Some(u) = &b.cdp_url
            && let Ok(mut urls) = self.urls.lock()
        {
            urls.insert(b.id.clone(), u.clone());
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut urls) = self.urls.lock() {
            urls.remove(id);
        }
    }

    fn held(&self, id: &str) -> Option<Secret> {
        self.urls.lock().ok().and_then(|u| u.get(id).cloned())
    }

    fn to_ref(&self, b: &Browser) -> ComputerRef {
        let mut labels = b.labels.clone();
        labels.remove(CREATE_LABEL);
        ComputerRef {
            provider: V::ID.to_string(),
            id: b.id.clone(),
            labels,
            created_at: b.created_at.clone(),
            deadline: b.deadline.clone(),
            running: b.state != State::Ended,
            paused: false,
            home: None,
            user: None,
            sizes: None,
            image: None,
            network: None,
        }
    }

    fn need_labels(labels: &Labels) -> Result<()> {
        if labels.is_empty() {
            return Err(ProviderError::invalid(
                "labels",
                format!(
                    "give at least one label: a {} account holds browsers no provider made",
                    V::NAME
                ),
            ));
        }
        if labels.contains_key(CREATE_LABEL) {
            return Err(ProviderError::invalid(
                "labels",
                format!("{CREATE_LABEL} is this provider's own label; find by the others"),
            ));
        }
        Ok(())
    }

    /// Every browser not ended that carries each of `labels` (the create
    /// label among them, when asked).
    async fn find(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<Browser>> {
        let first = labels.iter().next().map(|(k, v)| (k.as_str(), v.as_str()));
        let all = self.vendor.list(first, cancel).await?;
        Ok(all
            .into_iter()
            .filter(|b| b.state != State::Ended)
            .filter(|b| labels.iter().all(|(k, v)| b.labels.get(k) == Some(v)))
            .collect())
    }

    /// End `id` and read it back until it has ended or is unknown.
    async fn release_id(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        match self.vendor.get(id, cancel).await? {
            None => {
                self.forget(id);
                return Ok(());
            }
            Some(b) if b.state == State::Ended => {
                self.forget(id);
                return Ok(());
            }
            Some(_) => {}
        }
        self.vendor.end(id, cancel).await?;
        self.forget(id);
        wait_until(
            &Wait::new(format!("the {} browser {id} to end", V::NAME), RELEASE_WAIT),
            cancel,
            || self.vendor.get(id, cancel),
            |b| b.as_ref().is_none_or(|b| b.state == State::Ended),
            state_words,
        )
        .await?;
        Ok(())
    }

    /// After a create whose outcome is unknown: find what it may have made
    /// by its create label and release each, under a bound of its own.
    async fn recover(&self, token: &str, why: ProviderError) -> ProviderError {
        let own = CancellationToken::new();
        let mut by = Labels::new();
        by.insert(CREATE_LABEL.to_string(), token.to_string());
        let sweep = async {
            let mut released = 0usize;
            // A listing may show a new browser late: look twice.
            for round in 0..2 {
                if round > 0 {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                for b in self.find(&by, &own).await? {
                    self.release_id(&b.id, &own).await?;
                    released += 1;
                }
                if released > 0 {
                    break;
                }
            }
            Ok::<_, ProviderError>(released)
        };
        let outcome = tokio::time::timeout(RECOVER, sweep).await;
        own.cancel();
        let after = match outcome {
            Ok(Ok(0)) => "no second create was sent, and no browser carrying its create label was found, so none was left".to_string(),
            Ok(Ok(n)) => format!(
                "no second create was sent; {n} browser{} carrying its create label {} found and released",
                if n == 1 { "" } else { "s" },
                if n == 1 { "was" } else { "were" }
            ),
            Ok(Err(e)) => format!(
                "no second create was sent; looking for what it made failed ({}): a browser may be left, carrying the label {CREATE_LABEL}={token}; release it",
                e.message
            ),
            Err(_) => format!(
                "no second create was sent; looking for what it made took over {} s: a browser may be left, carrying the label {CREATE_LABEL}={token}; release it",
                RECOVER.as_secs()
            ),
        };
        ProviderError {
            code: why.code,
            message: format!(
                "{}; whether a browser was made is unknown: {after}",
                why.message
            ),
            field: why.field,
        }
    }

    /// The browser, refused as gone when it ended or the vendor forgot it.
    async fn read_live(&self, id: &str, cancel: &CancellationToken) -> Result<Browser> {
        match self.vendor.get(id, cancel).await? {
            None => {
                self.forget(id);
                Err(ProviderError::gone(format!(
                    "{} no longer knows the browser {id}; make a new one",
                    V::NAME
                )))
            }
            Some(b) if b.state == State::Ended => {
                self.forget(id);
                Err(ProviderError::gone(format!(
                    "the {} browser {id} has ended; make a new one",
                    V::NAME
                )))
            }
            Some(b) => Ok(b),
        }
    }
}

impl<V: Vendor> Configure for BrowserVendor<V> {
    type Settings = V::Settings;

    fn configure(settings: V::Settings, _host: &HostDefaults) -> Result<Self> {
        Ok(BrowserVendor::new(V::configure(settings)?))
    }
}

#[async_trait::async_trait]
impl<V: Vendor> Provider for BrowserVendor<V> {
    fn id(&self) -> &'static str {
        V::ID
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kind: MachineKind::Browser,
            os: "linux".into(),
            daemon: DaemonMode::None,
            groups: vec![Group::Cdp, Group::Stream],
            lifetime: LifetimeMode::Enforced,
            release: vec![Release::Delete],
            max_lifetime_ms: V::MAX_LIFETIME_MS,
            networks: vec![NetworkKind::Open],
            network_read_back: false,
            isolation: V::ISOLATION.into(),
            extend: false,
            shares: crate::types::ShareWay::None,
        }
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        if spec.kind != SettingKind::Browser {
            return Err(ProviderError::invalid(
                "kind",
                format!("{} makes browsers only; ask for kind browser", V::NAME),
            ));
        }
        if let Some(i) = spec.image.as_deref()
            && i != BROWSER_IMAGE
        {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "a {} browser is the vendor's {BROWSER_IMAGE}; leave image out or give {BROWSER_IMAGE:?}",
                    V::NAME
                ),
            ));
        }
        check_lifetime(spec.lifetime_ms, &self.capabilities())?;
        if spec.lifetime_ms < V::MIN_LIFETIME_MS {
            return Err(ProviderError::invalid(
                "lifetime",
                format!(
                    "lifetime {} is under {}'s least, {}",
                    human_ms(spec.lifetime_ms),
                    V::NAME,
                    human_ms(V::MIN_LIFETIME_MS)
                ),
            ));
        }
        if spec.network != NetworkPolicy::Open {
            return Err(ProviderError::invalid(
                "network",
                format!(
                    "a {} browser reaches the internet as the vendor lets it; ask for network open",
                    V::NAME
                ),
            ));
        }
        crate::types::refuse_host_parts(spec, &format!("a {} browser", V::NAME))?;
        if spec.labels.contains_key(CREATE_LABEL) {
            return Err(ProviderError::invalid(
                "labels",
                format!("{CREATE_LABEL} is this provider's own label; leave it out"),
            ));
        }
        check_labels(&spec.labels)?;
        let mut with = spec.labels.clone();
        with.insert(CREATE_LABEL.into(), "0".repeat(16));
        self.vendor.check_labels(&with)
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        let token = crate::random::random_hex(8)?;
        let mut labels = spec.labels.clone();
        labels.insert(CREATE_LABEL.into(), token.clone());
        match self.vendor.create(&labels, spec.lifetime_ms, cancel).await {
            Ok(b) if !b.id.is_empty() && b.cdp_url.is_some() && check_id(&b.id).is_ok() => {
                self.remember(&b);
                tracing::info!(provider = V::ID, computer = %b.id, "made a browser");
                Ok(Created {
                    computer: self.to_ref(&b),
                    network: None,
                    notes: Vec::new(),
                })
            }
            Ok(_) => {
                let why = ProviderError::failed(format!(
                    "{}'s create call answered with no browser (no id or no CDP URL)",
                    V::NAME
                ));
                Err(self.recover(&token, why).await)
            }
            Err(Failure::Refused(e)) => Err(e),
            Err(Failure::Unknown(e)) => Err(self.recover(&token, e).await),
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                check_id(id)?;
                match self.vendor.get(id, cancel).await? {
                    None => Err(ProviderError::not_found(format!(
                        "{} knows no browser {id}",
                        V::NAME
                    ))),
                    Some(b) if b.state == State::Ended => Err(ProviderError::gone(format!(
                        "the {} browser {id} has ended",
                        V::NAME
                    ))),
                    Some(b) => {
                        self.remember(&b);
                        Ok(self.to_ref(&b))
                    }
                }
            }
            AttachBy::Labels(labels) => {
                Self::need_labels(labels)?;
                let mut found = self.find(labels, cancel).await?;
                match found.len() {
                    0 => Err(ProviderError::not_found(format!(
                        "no {} browser carries those labels",
                        V::NAME
                    ))),
                    1 => {
                        let b = found.remove(0);
                        self.remember(&b);
                        Ok(self.to_ref(&b))
                    }
                    n => Err(ProviderError::invalid(
                        "labels",
                        format!("{n} browsers match those labels; attach by id"),
                    )),
                }
            }
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        Self::need_labels(labels)?;
        Ok(self
            .find(labels, cancel)
            .await?
            .iter()
            .map(|b| self.to_ref(b))
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        if let Some(p) = policy
            && *p != NetworkPolicy::Open
        {
            return Err(ProviderError::unsupported(format!(
                "a {} browser's network is the vendor's and stays open; the browser {} is unchanged",
                V::NAME,
                computer.id
            )));
        }
        Ok(NetworkReadBack {
            kind: NetworkKind::Open,
            detail: format!(
                "the vendor's network, not read back ({} sets no policy)",
                V::NAME
            ),
        })
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        check_id(&computer.id)?;
        let id = computer.id.as_str();
        let mut b = self.read_live(id, cancel).await?;
        if b.state == State::Pending {
            b = wait_until(
                &Wait::new(format!("the {} browser {id} to start", V::NAME), START_WAIT),
                cancel,
                || self.vendor.get(id, cancel),
                |b| b.as_ref().is_none_or(|b| b.state != State::Pending),
                state_words,
            )
            .await?
            .filter(|b| b.state == State::Running)
            .ok_or_else(|| {
                ProviderError::gone(format!(
                    "the {} browser {id} ended before it started; make a new one",
                    V::NAME
                ))
            })?;
        }
        self.remember(&b);
        let Some(url) = b.cdp_url.or_else(|| self.held(id)) else {
            return Err(ProviderError::gone(format!(
                "{} gives the browser {id}'s CDP URL only to the server that made it; make a new one",
                V::NAME
            )));
        };
        install_tls();
        let client = tokio::select! {
            c = BrowserClient::websocket(url.expose(), vec![Group::Stream]) => c?,
            _ = cancel.cancelled() => {
                return Err(ProviderError::new(
                    ErrorCode::Aborted,
                    format!("connecting to the {} browser {id} was cancelled", V::NAME),
                ));
            }
        };
        let hello = client.hello().clone();
        Ok(Connection {
            client: Arc::new(client),
            hello,
        })
    }

    /// A browser's live view (group stream): a secret, to hand to a
    /// person and never to print.
    async fn live_view(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Secret> {
        check_id(&computer.id)?;
        let b = self.read_live(&computer.id, cancel).await?;
        self.vendor.live_view(&b, cancel).await
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        if how != Release::Delete {
            return Err(ProviderError::unsupported(format!(
                "a {} browser cannot be stopped and kept; release it with delete",
                V::NAME
            )));
        }
        check_id(&computer.id)?;
        self.release_id(&computer.id, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_debugs_its_value() {
        let s = Secret::new("wss://connect.example/?signingKey=abc");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(s.expose(), "wss://connect.example/?signingKey=abc");
    }

    #[test]
    fn ids_that_could_leave_their_path_are_refused() {
        assert!(check_id("abc-123_X").is_ok());
        for bad in ["", "../x", "a/b", "a?b", "a b"] {
            let e = check_id(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("id"), "{bad}");
        }
    }

    #[test]
    fn times_add_up_in_rfc3339() {
        assert_eq!(
            plus_secs("2026-01-01T00:00:00Z", 3600),
            "2026-01-01T01:00:00Z"
        );
    }
}
