//! The `browserbase` provider: a computer of kind browser is a Browserbase
//! session (`POST /v1/sessions` with `keepAlive: true`), driven over its
//! CDP URL (`connectUrl`, a secret) and released with `REQUEST_RELEASE`,
//! then read back until it is no longer RUNNING or PENDING.
//!
//! Labels ride the session's `userMetadata`, each key's dots written as
//! `_` (Browserbase refuses a dot in a metadata key), so a label key here
//! has no `_` of its own; the whole metadata stays under Browserbase's 512
//! characters. A session's timeout is its lifetime, 60 s to 6 h, wall
//! clock. Lists ask by status (RUNNING, then PENDING) and by the first
//! label (`q`), and match every label themselves. What the vendor, the
//! create label and the URLs share with Kernel is in [`crate::vendor`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::types::{Labels, ProviderError, Result};
use crate::vendor::{
    Api, Auth, Browser, BrowserVendor, Call, Failure, Secret, State, Vendor, not_found_is_none,
    plus_secs,
};

/// Browserbase's API unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://api.browserbase.com";
/// The header that carries the key.
pub const KEY_HEADER: &str = "X-BB-API-Key";
/// Browserbase's least and most session timeout.
pub const MIN_LIFETIME_MS: u64 = 60_000;
pub const MAX_LIFETIME_MS: u64 = 6 * 3600 * 1000;
/// The most characters of `userMetadata` Browserbase keeps.
pub const METADATA_MAX_CHARS: usize = 512;

/// The Browserbase provider.
pub type BrowserbaseProvider = BrowserVendor<Browserbase>;

/// What a user sets of the Browserbase provider: flags
/// `--browserbase-<key>`, variables `COMPUTER_MCP_BROWSERBASE_<KEY>`, keys
/// of `[providers.browserbase]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Browserbase provider (--provider browserbase)")]
#[serde(deny_unknown_fields)]
pub struct BrowserbaseSettings {
    /// Browserbase's API key (a secret: never printed).
    #[arg(
        id = "browserbase.api_key",
        long = "browserbase-api-key",
        value_name = "KEY",
        env = "COMPUTER_MCP_BROWSERBASE_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<Secret>,
    /// The Browserbase project sessions are made in. [default: the key's own]
    #[arg(
        id = "browserbase.project_id",
        long = "browserbase-project-id",
        value_name = "ID",
        env = "COMPUTER_MCP_BROWSERBASE_PROJECT_ID"
    )]
    pub project_id: Option<String>,
    /// Browserbase's API. [default: https://api.browserbase.com]
    #[arg(
        id = "browserbase.api_url",
        long = "browserbase-api-url",
        value_name = "URL",
        env = "COMPUTER_MCP_BROWSERBASE_API_URL"
    )]
    pub api_url: Option<String>,
}

/// Browserbase's side of [`BrowserVendor`].
#[derive(Debug)]
pub struct Browserbase {
    api: Api,
    project_id: Option<String>,
}

/// Labels as `userMetadata`: each key's dots written as `_`.
pub fn metadata_of(labels: &Labels) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.replace('.', "_"), Value::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

/// `userMetadata` as labels: each `_` read back as a dot; values that are
/// not strings are no label of ours.
pub fn labels_of(metadata: Option<&Value>) -> Labels {
    metadata
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.replace('_', "."), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The list query for one label, where its words need no escaping.
pub fn query_of(key: &str, value: &str) -> Option<String> {
    let plain = |s: &str| !s.contains(['\'', '\\']);
    (plain(key) && plain(value))
        .then(|| format!("user_metadata['{}']:'{value}'", key.replace('.', "_")))
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// A session as the vendor answers it.
fn browser_of(v: &Value) -> Browser {
    let state = match str_of(v, "status") {
        Some("RUNNING") => State::Running,
        Some("PENDING") => State::Pending,
        _ => State::Ended,
    };
    let created_at = str_of(v, "createdAt")
        .map(String::from)
        .unwrap_or_else(crate::vendor::now_rfc3339);
    let deadline = str_of(v, "expiresAt").map(String::from).unwrap_or_else(|| {
        plus_secs(
            &created_at,
            v.get("timeout")
                .and_then(Value::as_u64)
                .unwrap_or(MIN_LIFETIME_MS / 1000),
        )
    });
    Browser {
        id: str_of(v, "id").unwrap_or_default().to_string(),
        state,
        labels: labels_of(v.get("userMetadata")),
        created_at,
        deadline,
        cdp_url: str_of(v, "connectUrl")
            .filter(|u| !u.is_empty())
            .map(Secret::new),
        live_url: None,
    }
}

#[async_trait::async_trait]
impl Vendor for Browserbase {
    const ID: &'static str = "browserbase";
    const NAME: &'static str = "Browserbase";
    const MIN_LIFETIME_MS: u64 = MIN_LIFETIME_MS;
    const MAX_LIFETIME_MS: u64 = MAX_LIFETIME_MS;
    const ISOLATION: &'static str =
        "vm: a Browserbase cloud browser on the vendor's machines, nothing of this host";
    const DEFAULT_API_URL: &'static str = DEFAULT_API_URL;
    const AUTH: Auth = Auth::Header(KEY_HEADER);
    type Settings = BrowserbaseSettings;

    fn configure(settings: BrowserbaseSettings) -> Result<Browserbase> {
        Ok(Browserbase {
            api: Api::of::<Self>(settings.api_url.as_deref(), settings.api_key)?,
            project_id: settings.project_id.filter(|p| !p.is_empty()),
        })
    }

    fn api(&self) -> &Api {
        &self.api
    }

    fn check_labels(&self, labels: &Labels) -> Result<()> {
        if let Some(k) = labels.keys().find(|k| k.contains('_')) {
            return Err(ProviderError::invalid(
                "labels",
                format!(
                    "label key {k:?} has a '_', which Browserbase's metadata keeps for a dot; use '.' or '-'"
                ),
            ));
        }
        let size = metadata_of(labels).to_string().chars().count();
        if size > METADATA_MAX_CHARS {
            return Err(ProviderError::invalid(
                "labels",
                format!(
                    "the labels take {size} characters of Browserbase metadata; the most is {METADATA_MAX_CHARS}"
                ),
            ));
        }
        Ok(())
    }

    async fn create(
        &self,
        labels: &Labels,
        lifetime_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Browser, Failure> {
        let mut body = json!({
            "keepAlive": true,
            "timeout": (lifetime_ms / 1000).max(MIN_LIFETIME_MS / 1000),
            "userMetadata": metadata_of(labels),
        });
        if let Some(p) = &self.project_id {
            body["projectId"] = json!(p);
        }
        let call = Call::new("create session", http::Method::POST, "/v1/sessions").body(body);
        let v = self.api.send(&call, cancel).await?;
        Ok(browser_of(&v))
    }

    async fn list(
        &self,
        first: Option<(&str, &str)>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Browser>> {
        let mut all: Vec<Browser> = Vec::new();
        for status in ["RUNNING", "PENDING"] {
            let mut call = Call::new("list sessions", http::Method::GET, "/v1/sessions")
                .query("status", status);
            if let Some(q) = first.and_then(|(k, v)| query_of(k, v)) {
                call = call.query("q", q);
            }
            let v = self.api.send(&call, cancel).await.map_err(Failure::error)?;
            let Some(items) = v.as_array() else {
                return Err(ProviderError::failed(
                    "Browserbase's list sessions call (GET /v1/sessions) answered with no list",
                ));
            };
            for b in items.iter().map(browser_of) {
                if !b.id.is_empty() && !all.iter().any(|a| a.id == b.id) {
                    all.push(b);
                }
            }
        }
        Ok(all)
    }

    async fn get(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Browser>> {
        let call = Call::new("read session", http::Method::GET, "/v1/sessions/{id}").id(id);
        Ok(not_found_is_none(self.api.send(&call, cancel).await)?.map(|v| browser_of(&v)))
    }

    async fn end(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        let mut body = json!({ "status": "REQUEST_RELEASE" });
        if let Some(p) = &self.project_id {
            body["projectId"] = json!(p);
        }
        let call = Call::new("release session", http::Method::POST, "/v1/sessions/{id}")
            .id(id)
            .body(body);
        not_found_is_none(self.api.send(&call, cancel).await)?;
        Ok(())
    }

    async fn live_view(&self, browser: &Browser, cancel: &CancellationToken) -> Result<Secret> {
        let call = Call::new(
            "read live view",
            http::Method::GET,
            "/v1/sessions/{id}/debug",
        )
        .id(&browser.id);
        let v = self.api.send(&call, cancel).await.map_err(Failure::error)?;
        str_of(&v, "debuggerFullscreenUrl")
            .or_else(|| str_of(&v, "debuggerUrl"))
            .filter(|u| !u.is_empty())
            .map(Secret::new)
            .ok_or_else(|| {
                ProviderError::failed(
                    "Browserbase's read live view call (GET /v1/sessions/{id}/debug) answered with no live view",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_ride_metadata_with_dots_as_underscores() {
        let mut l = Labels::new();
        l.insert("computer-mcp.session".into(), "s1".into());
        let m = metadata_of(&l);
        assert_eq!(m, json!({"computer-mcp_session": "s1"}));
        assert_eq!(labels_of(Some(&m)), l);
        assert_eq!(
            query_of("computer-mcp.session", "s1").as_deref(),
            Some("user_metadata['computer-mcp_session']:'s1'")
        );
        assert_eq!(query_of("a", "it's"), None);
    }

    #[test]
    fn settings_debug_hides_the_key() {
        let s = BrowserbaseSettings {
            api_key: Some("bb_live_SECRET".into()),
            project_id: Some("p".into()),
            api_url: None,
        };
        let d = format!("{s:?}");
        assert!(!d.contains("SECRET"), "{d}");
        assert!(d.contains("<redacted>"), "{d}");
    }
}
