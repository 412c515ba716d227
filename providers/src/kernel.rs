//! The `kernel` provider: a computer of kind browser is a Kernel browser
//! (`POST /browsers`), driven over its CDP URL (`cdp_ws_url`, a secret)
//! and released with `DELETE /browsers/{id}`, then read back until the
//! vendor answers 404 or the browser carries `deleted_at`.
//!
//! Labels ride the browser's tags. Kernel's `timeout_seconds` (10 s to
//! 72 h) is an idle timeout, not a wall clock: a browser in use lives on,
//! so the deadline a ref shows is the earliest the vendor may end it.
//! Lists read `status=all` page by page and drop the deleted (Kernel's
//! filter takes one value, and `active` may leave out a browser still
//! starting), then match every label themselves.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::types::{Labels, ProviderError, Result};
use crate::vendor::{
    Api, Auth, Browser, BrowserVendor, Call, Failure, Secret, State, Vendor, not_found_is_none,
    plus_secs,
};

/// Kernel's API unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://api.onkernel.com";
/// Kernel's least and most timeout.
pub const MIN_LIFETIME_MS: u64 = 10_000;
pub const MAX_LIFETIME_MS: u64 = 72 * 3600 * 1000;
/// Browsers asked for per page of a list, and the most pages read.
const PAGE: usize = 100;
const MAX_PAGES: usize = 50;

/// The Kernel provider.
pub type KernelProvider = BrowserVendor<Kernel>;

/// What a user sets of the Kernel provider: flags `--kernel-<key>`,
/// variables `COMPUTER_MCP_KERNEL_<KEY>`, keys of `[providers.kernel]`.
#[derive(Clone, Debug, Default, clap::Args, Serialize, Deserialize)]
#[command(next_help_heading = "The Kernel provider (--provider kernel)")]
#[serde(deny_unknown_fields)]
pub struct KernelSettings {
    /// Kernel's API key (a secret: never printed).
    #[arg(
        id = "kernel.api_key",
        long = "kernel-api-key",
        value_name = "KEY",
        env = "COMPUTER_MCP_KERNEL_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<Secret>,
    /// Kernel's API. [default: https://api.onkernel.com]
    #[arg(
        id = "kernel.api_url",
        long = "kernel-api-url",
        value_name = "URL",
        env = "COMPUTER_MCP_KERNEL_API_URL"
    )]
    pub api_url: Option<String>,
}

/// Kernel's side of [`BrowserVendor`].
#[derive(Debug)]
pub struct Kernel {
    api: Api,
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A browser as the vendor answers it.
fn browser_of(v: &Value) -> Browser {
    let deleted = v.get("deleted_at").is_some_and(|d| !d.is_null());
    let created_at = str_of(v, "created_at")
        .map(String::from)
        .unwrap_or_else(crate::vendor::now_rfc3339);
    let timeout = v
        .get("timeout_seconds")
        .and_then(Value::as_u64)
        .unwrap_or(MIN_LIFETIME_MS / 1000);
    let labels = v
        .get("tags")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Browser {
        id: str_of(v, "session_id").unwrap_or_default().to_string(),
        state: if deleted {
            State::Ended
        } else {
            State::Running
        },
        labels,
        deadline: plus_secs(&created_at, timeout),
        created_at,
        cdp_url: str_of(v, "cdp_ws_url").map(Secret::new),
        live_url: str_of(v, "browser_live_view_url").map(Secret::new),
    }
}

#[async_trait::async_trait]
impl Vendor for Kernel {
    const ID: &'static str = "kernel";
    const NAME: &'static str = "Kernel";
    const MIN_LIFETIME_MS: u64 = MIN_LIFETIME_MS;
    const MAX_LIFETIME_MS: u64 = MAX_LIFETIME_MS;
    const ISOLATION: &'static str =
        "vm: a Kernel cloud browser on the vendor's machines, nothing of this host";
    const DEFAULT_API_URL: &'static str = DEFAULT_API_URL;
    const AUTH: Auth = Auth::Bearer;
    type Settings = KernelSettings;

    fn configure(settings: KernelSettings) -> Result<Kernel> {
        Ok(Kernel {
            api: Api::of::<Self>(settings.api_url.as_deref(), settings.api_key)?,
        })
    }

    fn api(&self) -> &Api {
        &self.api
    }

    fn check_labels(&self, _labels: &Labels) -> Result<()> {
        Ok(())
    }

    async fn create(
        &self,
        labels: &Labels,
        lifetime_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<Browser, Failure> {
        let tags: Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let call = Call::new("create browser", http::Method::POST, "/browsers").body(json!({
            "timeout_seconds": (lifetime_ms / 1000).max(MIN_LIFETIME_MS / 1000),
            "tags": tags,
        }));
        let v = self.api.send(&call, cancel).await?;
        Ok(browser_of(&v))
    }

    async fn list(
        &self,
        _first: Option<(&str, &str)>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Browser>> {
        let mut all = Vec::new();
        for page in 0..MAX_PAGES {
            let call = Call::new("list browsers", http::Method::GET, "/browsers")
                .query("status", "all")
                .query("limit", PAGE.to_string())
                .query("offset", (page * PAGE).to_string());
            let v = self.api.send(&call, cancel).await.map_err(Failure::error)?;
            let items = match &v {
                Value::Array(a) => a.clone(),
                Value::Object(o) => o
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                _ => {
                    return Err(ProviderError::failed(
                        "Kernel's list browsers call (GET /browsers) answered with no list",
                    ));
                }
            };
            let n = items.len();
            all.extend(
                items
                    .iter()
                    .map(browser_of)
                    .filter(|b| !b.id.is_empty() && b.state != State::Ended),
            );
            if n < PAGE {
                break;
            }
        }
        Ok(all)
    }

    async fn get(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Browser>> {
        let call = Call::new("read browser", http::Method::GET, "/browsers/{id}").id(id);
        Ok(not_found_is_none(self.api.send(&call, cancel).await)?.map(|v| browser_of(&v)))
    }

    async fn end(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        let call = Call::new("delete browser", http::Method::DELETE, "/browsers/{id}").id(id);
        not_found_is_none(self.api.send(&call, cancel).await)?;
        Ok(())
    }

    async fn live_view(&self, browser: &Browser, _cancel: &CancellationToken) -> Result<Secret> {
        browser.live_url.clone().ok_or_else(|| {
            ProviderError::unsupported(format!(
                "the Kernel browser {} has no live view (a headless browser has none)",
                browser.id
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_browser_reads_as_ended_and_its_deadline_is_its_idle_timeout() {
        let b = browser_of(&json!({
            "session_id": "k1",
            "created_at": "2026-01-01T00:00:00Z",
            "timeout_seconds": 600,
            "cdp_ws_url": "wss://x/cdp?token=t",
            "tags": {"a.b": "c", "n": 1},
            "deleted_at": null
        }));
        assert_eq!(b.state, State::Running);
        assert_eq!(b.deadline, "2026-01-01T00:10:00Z");
        assert_eq!(b.labels.len(), 1);
        let b = browser_of(&json!({"session_id": "k1", "deleted_at": "2026-01-01T00:00:00Z"}));
        assert_eq!(b.state, State::Ended);
    }
}
