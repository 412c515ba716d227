//! Daytona's v0 REST API as this provider calls it: the control plane
//! (`/sandbox`) and a sandbox's toolbox (`<toolboxProxyUrl>/<id>/…`),
//! both with `Authorization: Bearer <key>` (vendor-apis.md section 1;
//! daytona/clients@8006f63e openapi-specs/api.json, toolbox.json).
//!
//! Reads, uploads and deletes are tried three times with a doubling pause
//! when the answer is lost or a 5xx; creates, session commands, input and
//! network changes are sent once (a second create could make a second
//! sandbox). A 429 is refused work, so any call waits its `Retry-After`
//! (bounded) and asks again.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::types::{ErrorCode, Labels, ProviderError, Result};
use crate::vendor::{Api, Auth, Call, Failure, Secret};

/// The registry id, and the settings' prefix.
pub const ID: &str = "daytona";
/// The vendor's name, for words.
pub const NAME: &str = "Daytona";
/// Daytona's API unless `--daytona-api-url` says otherwise.
pub const DEFAULT_API_URL: &str = "https://app.daytona.io/api";
/// Tries of a call that may be repeated.
const TRIES: u32 = 3;
/// How many 429s one call waits out before it gives up.
const LIMITED_TRIES: u32 = 5;
/// A listing's page size (Daytona's most is 200).
const PAGE: u32 = 100;
/// The most pages one listing reads: 100,000 sandboxes.
const PAGES_MAX: usize = 1000;

/// A sandbox as Daytona reads it back (api.json:12295-12593). Fields the
/// provider does not read are left out; a missing one is its default.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sandbox {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub state: Option<String>,
    pub desired_state: Option<String>,
    pub error_reason: Option<String>,
    pub snapshot: Option<String>,
    pub public: bool,
    pub network_block_all: Option<bool>,
    pub network_allow_list: Option<String>,
    pub domain_allow_list: Option<String>,
    pub outbound_proxy_url: Option<String>,
    pub auto_stop_interval: Option<i64>,
    pub auto_delete_interval: Option<i64>,
    pub auto_destroy_at: Option<String>,
    pub sandbox_class: Option<String>,
    pub toolbox_proxy_url: Option<String>,
    pub cpu: Option<f64>,
    /// GiB.
    pub memory: Option<f64>,
    pub created_at: Option<String>,
}

/// Where a sandbox is in its life, as a computer's `running` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Started, on the way to it, or on the way from it (stopping,
    /// pausing): a stopping computer is stopped only once read stopped.
    Running,
    /// Stopped, archived, paused, in error, or a state not known here.
    Stopped,
    /// Being destroyed, or asked to be: left out of every listing.
    Going,
}

impl Sandbox {
    /// Its phase, from its state and desired state (api.json:11704).
    pub fn phase(&self) -> Phase {
        let state = self.state.as_deref().unwrap_or("");
        if matches!(state, "destroying" | "destroyed")
            || self.desired_state.as_deref() == Some("destroyed")
        {
            return Phase::Going;
        }
        match state {
            "started" | "creating" | "restoring" | "pulling_snapshot" | "starting"
            | "pending_build" | "building_snapshot" | "stopping" | "pausing" | "resizing" => {
                Phase::Running
            }
            _ => Phase::Stopped,
        }
    }

    /// Its state in words, for a wait's last read.
    pub fn state_words(&self) -> String {
        let state = self.state.as_deref().unwrap_or("unknown");
        match &self.error_reason {
            Some(r) if state == "error" => format!("error ({})", short(r)),
            _ => state.to_string(),
        }
    }
}

/// A vendor's words cut to one short line, for an error read back.
fn short(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(160).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// One page of a listing.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Page {
    items: Vec<Sandbox>,
    next_cursor: Option<String>,
}

/// What a create sends (api.json:12069-12208).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBody {
    pub name: String,
    /// None: Daytona's default snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    pub labels: Labels,
    pub public: bool,
    pub network_block_all: bool,
    pub ttl_minutes: u64,
    pub auto_stop_interval: i64,
    pub auto_delete_interval: i64,
}

/// Daytona's control plane with one key.
#[derive(Debug)]
pub struct Daytona {
    api: Api,
    /// The base URL, to tell whether a toolbox URL may carry the key.
    base: String,
    key: Option<Secret>,
}

/// Send `call` on `api`: 429s waited out by their `Retry-After`; lost
/// answers and 5xx tried again when `again` (at most [`TRIES`]).
async fn send(
    api: &Api,
    call: &Call,
    again: bool,
    cancel: &CancellationToken,
) -> Result<Value, Failure> {
    let mut tries = 0;
    let mut limited = 0;
    let mut pause = Duration::from_millis(500);
    loop {
        tries += 1;
        let wait = match api.send_headed(call, cancel).await {
            Ok((429, headers, body)) if limited < LIMITED_TRIES => {
                limited += 1;
                tries -= 1;
                let wait = crate::vendor::retry_after(&headers);
                tracing::info!(
                    call = call.what,
                    wait_ms = wait.as_millis() as u64,
                    "Daytona is rate limiting; waiting its Retry-After"
                );
                drop(body);
                wait
            }
            Ok((status, _, body)) => match api.answer(call, status, body) {
                Err(Failure::Unknown(_)) if again && tries < TRIES => pause,
                done => return done,
            },
            Err(Failure::Unknown(e)) if again && tries < TRIES && e.code != ErrorCode::Aborted => {
                pause
            }
            Err(f) => return Err(f),
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => {
                return Err(Failure::Unknown(ProviderError::new(
                    ErrorCode::Aborted,
                    format!("Daytona's {} call was cancelled", call.what),
                )));
            }
        }
        pause *= 2;
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|_| {
        ProviderError::failed(format!(
            "Daytona's {what} answer is not the sandbox shape this provider reads"
        ))
    })
}

/// A sandbox id or name as it goes into a path.
pub fn check_id(id: &str) -> Result<()> {
    crate::vendor::check_id(id).map_err(|_| {
        ProviderError::invalid(
            "id",
            "a Daytona sandbox id or name is 1 to 128 letters, digits, '-' and '_'",
        )
    })
}

impl Daytona {
    /// The API at `url` (Daytona's own when None) with `key`.
    pub fn new(url: Option<&str>, key: Option<Secret>) -> Result<Self> {
        let base = url
            .unwrap_or(DEFAULT_API_URL)
            .trim_end_matches('/')
            .to_string();
        let api = Api::for_provider(ID, NAME, &base, key.clone(), Auth::Bearer)?;
        Ok(Self {
            api,
            base,
            key: key.filter(|k| !k.expose().is_empty()),
        })
    }

    /// Make a sandbox: sent once, never again.
    pub async fn create(
        &self,
        body: &CreateBody,
        cancel: &CancellationToken,
    ) -> Result<Sandbox, Failure> {
        let body = serde_json::to_value(body).map_err(|_| {
            Failure::Refused(ProviderError::failed("a create body could not be written"))
        })?;
        let call = Call::new("create sandbox", http::Method::POST, "/sandbox").body(body);
        let v = send(&self.api, &call, false, cancel).await?;
        parse("create sandbox", v).map_err(Failure::Unknown)
    }

    /// One sandbox by id or name; `None` when Daytona knows none.
    pub async fn get(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Sandbox>> {
        check_id(id)?;
        let call = Call::new("read sandbox", http::Method::GET, "/sandbox/{id}").id(id);
        match crate::vendor::not_found_is_none(send(&self.api, &call, true, cancel).await)? {
            Some(v) => Ok(Some(parse("read sandbox", v)?)),
            None => Ok(None),
        }
    }

    /// Every sandbox carrying each of `labels`, every page.
    pub async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<Sandbox>> {
        let filter = serde_json::to_string(labels)
            .map_err(|_| ProviderError::failed("a label filter could not be written"))?;
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..PAGES_MAX {
            let mut call = Call::new("list sandboxes", http::Method::GET, "/sandbox")
                .query("labels", filter.clone())
                .query("limit", PAGE.to_string());
            if let Some(c) = &cursor {
                call = call.query("cursor", c.clone());
            }
            let page: Page = parse(
                "list sandboxes",
                send(&self.api, &call, true, cancel)
                    .await
                    .map_err(Failure::error)?,
            )?;
            all.extend(page.items);
            match page.next_cursor.filter(|c| !c.is_empty()) {
                Some(c) if Some(&c) != cursor.as_ref() => cursor = Some(c),
                _ => return Ok(all),
            }
        }
        Err(ProviderError::failed(format!(
            "Daytona's listing went on past {PAGES_MAX} pages; it was not read to its end"
        )))
    }

    /// Ask Daytona to destroy it; `None` when it knows none.
    pub async fn delete(&self, id: &str, cancel: &CancellationToken) -> Result<Option<()>> {
        check_id(id)?;
        let call = Call::new("delete sandbox", http::Method::DELETE, "/sandbox/{id}").id(id);
        Ok(
            crate::vendor::not_found_is_none(send(&self.api, &call, true, cancel).await)?
                .map(|_| ()),
        )
    }

    /// Ask Daytona to stop it (`force`: SIGKILL); `None` when it knows
    /// none.
    pub async fn stop(
        &self,
        id: &str,
        force: bool,
        cancel: &CancellationToken,
    ) -> Result<Option<()>> {
        check_id(id)?;
        let mut call = Call::new("stop sandbox", http::Method::POST, "/sandbox/{id}/stop").id(id);
        if force {
            call = call.query("force", "true");
        }
        Ok(
            crate::vendor::not_found_is_none(send(&self.api, &call, false, cancel).await)?
                .map(|_| ()),
        )
    }

    /// Block every outside network (network none), sent once.
    pub async fn block_network(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        check_id(id)?;
        let call = Call::new(
            "change network",
            http::Method::POST,
            "/sandbox/{id}/network-settings",
        )
        .id(id)
        .body(json!({"networkBlockAll": true}));
        send(&self.api, &call, false, cancel)
            .await
            .map_err(Failure::error)?;
        Ok(())
    }

    /// The toolbox of `sandbox`, which must give its toolbox URL: https,
    /// or http only when the API itself is http (a test's fake), so the key
    /// never crosses a plain connection to a host the API did not name.
    pub fn toolbox(&self, sandbox: &Sandbox) -> Result<Toolbox> {
        check_id(&sandbox.id)?;
        let Some(url) = sandbox
            .toolbox_proxy_url
            .as_deref()
            .filter(|u| !u.is_empty())
        else {
            return Err(ProviderError::failed(format!(
                "Daytona gave no toolbox URL for the sandbox {}; try again later",
                sandbox.id
            )));
        };
        let plain_ok = self.base.starts_with("http://");
        if !(url.starts_with("https://") || (plain_ok && url.starts_with("http://"))) {
            return Err(ProviderError::failed(format!(
                "Daytona's toolbox URL for the sandbox {} is not https; the key is not sent there",
                sandbox.id
            )));
        }
        let base = format!("{}/{}", url.trim_end_matches('/'), sandbox.id);
        let api = Api::for_provider(ID, NAME, &base, self.key.clone(), Auth::Bearer)?;
        Ok(Toolbox {
            api,
            base,
            key: self.key.clone(),
        })
    }

    /// The key, for a toolbox's WebSocket handshake.
    pub fn key(&self) -> Option<&Secret> {
        self.key.as_ref()
    }
}

/// One sandbox's toolbox: its files and process API (toolbox.json).
#[derive(Debug)]
pub struct Toolbox {
    api: Api,
    /// `<toolboxProxyUrl>/<id>`, http(s).
    base: String,
    key: Option<Secret>,
}

/// What `/process/execute` answered.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Executed {
    pub exit_code: i64,
    /// stdout and stderr together.
    pub result: String,
}

impl Toolbox {
    /// Write `bytes` to `path` in the sandbox (parents made, overwritten).
    pub async fn upload(&self, path: &str, bytes: Bytes, cancel: &CancellationToken) -> Result<()> {
        let call = Call::new("upload file", http::Method::POST, "/files/upload-v2")
            .query("path", path)
            .raw(bytes, "application/octet-stream")
            .bound(Duration::from_secs(120));
        send(&self.api, &call, true, cancel)
            .await
            .map_err(Failure::error)?;
        Ok(())
    }

    /// Run `command` through the sandbox's shell until it ends, within
    /// `timeout`: its exit code and its output.
    pub async fn execute(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Executed> {
        let secs = timeout.as_secs().max(1);
        let call = Call::new("run command", http::Method::POST, "/process/execute")
            .body(json!({"command": command, "timeout": secs}))
            .bound(timeout + Duration::from_secs(15));
        let v = send(&self.api, &call, false, cancel)
            .await
            .map_err(Failure::error)?;
        serde_json::from_value(v)
            .map_err(|_| ProviderError::failed("Daytona's run command answer has no exit code"))
    }

    /// Open the session `sid` (a shell of its own).
    pub async fn session(&self, sid: &str, cancel: &CancellationToken) -> Result<()> {
        check_id(sid)?;
        let call = Call::new("open session", http::Method::POST, "/process/session")
            .body(json!({"sessionId": sid}));
        send(&self.api, &call, false, cancel)
            .await
            .map_err(Failure::error)?;
        Ok(())
    }

    /// Start `command` in the session `sid`, detached (runAsync), with its
    /// input not echoed: its command id.
    pub async fn start(
        &self,
        sid: &str,
        command: &str,
        cancel: &CancellationToken,
    ) -> Result<String> {
        check_id(sid)?;
        let mut call = Call::new(
            "start command",
            http::Method::POST,
            "/process/session/{id}/exec",
        )
        .id(sid)
        .body(json!({"command": command, "runAsync": true, "suppressInputEcho": true}));
        call.path = format!("/process/session/{sid}/exec");
        let v = send(&self.api, &call, false, cancel)
            .await
            .map_err(Failure::error)?;
        let cid = v
            .get("cmdId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        check_id(&cid).map_err(|_| {
            ProviderError::failed("Daytona started a command but gave no usable command id")
        })?;
        Ok(cid)
    }

    /// Send one whole line to a session command's input.
    pub async fn input(
        &self,
        sid: &str,
        cid: &str,
        line: &str,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let mut call = Call::new(
            "send input",
            http::Method::POST,
            "/process/session/{sid}/command/{cid}/input",
        )
        .body(json!({"data": line}));
        call.path = format!("/process/session/{sid}/command/{cid}/input");
        send(&self.api, &call, false, cancel)
            .await
            .map_err(Failure::error)?;
        Ok(())
    }

    /// A session command's exit code: `None` while it runs.
    pub async fn exit_code(
        &self,
        sid: &str,
        cid: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<i64>> {
        let mut call = Call::new(
            "read command",
            http::Method::GET,
            "/process/session/{sid}/command/{cid}",
        );
        call.path = format!("/process/session/{sid}/command/{cid}");
        let v = send(&self.api, &call, true, cancel)
            .await
            .map_err(Failure::error)?;
        Ok(v.get("exitCode").and_then(Value::as_i64))
    }

    /// A session command's output so far, markers stripped (no follow).
    pub async fn log_text(
        &self,
        sid: &str,
        cid: &str,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let mut call = Call::new(
            "read command log",
            http::Method::GET,
            "/process/session/{sid}/command/{cid}/logs",
        );
        call.path = format!("/process/session/{sid}/command/{cid}/logs");
        match self
            .api
            .send_headed(&call, cancel)
            .await
            .map_err(Failure::error)?
        {
            (200, _, body) => Ok(String::from_utf8_lossy(&body).into_owned()),
            (status, _, body) => Err(self.api.answer(&call, status, body).err().map_or_else(
                || ProviderError::failed("Daytona's read command log call failed"),
                Failure::error,
            )),
        }
    }

    /// End the session `sid` and its processes; one already gone is ended.
    pub async fn end_session(&self, sid: &str, cancel: &CancellationToken) -> Result<()> {
        let mut call = Call::new("end session", http::Method::DELETE, "/process/session/{id}");
        call.path = format!("/process/session/{sid}");
        crate::vendor::not_found_is_none(send(&self.api, &call, true, cancel).await)?;
        Ok(())
    }

    /// The log WebSocket's request of a session command: follow, split
    /// output, the key in the handshake's header.
    pub fn logs_request(&self, sid: &str, cid: &str) -> Result<http::Request<()>> {
        let ws = if let Some(rest) = self.base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = self.base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            return Err(ProviderError::failed("a toolbox URL that is not http(s)"));
        };
        let url = format!("{ws}/process/session/{sid}/command/{cid}/logs?follow=true");
        let key = self.key.as_ref().ok_or_else(|| {
            ProviderError::new(
                ErrorCode::Unauthorized,
                "Daytona has no API key: give --daytona-api-key (COMPUTER_MCP_DAYTONA_API_KEY)",
            )
            .with_field("api_key")
        })?;
        let uri: http::Uri = url
            .parse()
            .map_err(|_| ProviderError::failed("the toolbox's log URL could not be formed"))?;
        let host = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        http::Request::builder()
            .method("GET")
            .uri(uri)
            .header("host", host)
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header(
                "sec-websocket-key",
                tokio_tungstenite::tungstenite::handshake::client::generate_key(),
            )
            .header("authorization", format!("Bearer {}", key.expose()))
            .header("x-daytona-split-output", "true")
            .body(())
            .map_err(|_| {
                ProviderError::invalid(
                    "api_key",
                    "the key holds a character no HTTP header takes; check --daytona-api-key",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(state: &str, desired: Option<&str>) -> Phase {
        Sandbox {
            state: Some(state.into()),
            desired_state: desired.map(str::to_string),
            ..Sandbox::default()
        }
        .phase()
    }

    #[test]
    fn states_are_classified_as_the_listing_reports_them() {
        for s in [
            "started",
            "creating",
            "starting",
            "pulling_snapshot",
            "restoring",
            "stopping",
            "pausing",
        ] {
            assert_eq!(at(s, None), Phase::Running, "{s}");
        }
        for s in [
            "stopped",
            "archived",
            "paused",
            "error",
            "build_failed",
            "archiving",
            "something_new",
        ] {
            assert_eq!(at(s, None), Phase::Stopped, "{s}");
        }
        for s in ["destroying", "destroyed"] {
            assert_eq!(at(s, None), Phase::Going, "{s}");
        }
        assert_eq!(at("started", Some("destroyed")), Phase::Going);
        assert_eq!(at("stopping", Some("stopped")), Phase::Running);
    }

    #[test]
    fn a_create_body_sends_no_snapshot_for_the_default() {
        let body = CreateBody {
            name: "computer-0123456789ab".into(),
            snapshot: None,
            labels: Labels::new(),
            public: false,
            network_block_all: true,
            ttl_minutes: 10,
            auto_stop_interval: 0,
            auto_delete_interval: -1,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"name": "computer-0123456789ab", "labels": {}, "public": false,
                   "networkBlockAll": true, "ttlMinutes": 10, "autoStopInterval": 0,
                   "autoDeleteInterval": -1})
        );
    }
}
