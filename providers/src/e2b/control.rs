//! E2B's control plane (vendor-apis.md section 2): create, read, list,
//! kill, the timer, pause and resume (connect), each one [`Api`] call with `X-API-Key`. A 429 is
//! asked again after its Retry-After (capped): a rate-limited call was
//! not done, so asking again never doubles it.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::types::{ErrorCode, Labels, ProviderError, Result};
use crate::vendor::{Api, Call, Failure, Secret};

/// How many times a rate-limited call is asked again.
const RETRIES: u32 = 3;
/// The most sandboxes one listing page asks for (E2B's limit).
pub const PAGE: u32 = 100;

/// A sandbox as GET /sandboxes/{id} or a listing reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sandbox {
    pub id: String,
    pub template: String,
    pub started_at: String,
    pub end_at: String,
    /// running or paused.
    pub state: String,
    pub metadata: Labels,
    /// None where E2B said nothing of it.
    pub allow_internet_access: Option<bool>,
    pub allow_public_traffic: Option<bool>,
    pub on_timeout: Option<String>,
}

impl Sandbox {
    fn of(v: &Value) -> Option<Sandbox> {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let metadata = v["metadata"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Some(Sandbox {
            id: v["sandboxID"].as_str()?.to_string(),
            template: s("templateID"),
            started_at: s("startedAt"),
            end_at: s("endAt"),
            state: s("state"),
            metadata,
            allow_internet_access: v["allowInternetAccess"].as_bool(),
            allow_public_traffic: v["network"]["allowPublicTraffic"].as_bool(),
            on_timeout: v["lifecycle"]["onTimeout"].as_str().map(str::to_string),
        })
    }
}

/// What a create answered.
#[derive(Clone, Debug)]
pub struct Made {
    pub id: String,
    pub domain: Option<String>,
    pub token: Option<Secret>,
}

/// What a create asks for.
pub struct Ask<'a> {
    pub template: &'a str,
    pub timeout_s: u64,
    pub metadata: &'a Labels,
}

pub struct Control {
    pub api: Api,
}

impl Control {
    /// One call, asked again after a 429's Retry-After; the answer's JSON
    /// and headers.
    async fn call(
        &self,
        call: &Call,
        cancel: &CancellationToken,
    ) -> Result<(Value, http::HeaderMap), Failure> {
        let mut tries = 0;
        loop {
            let (status, headers, body) = self.api.send_headed(call, cancel).await?;
            if status == 429 && tries < RETRIES {
                tries += 1;
                let wait = crate::vendor::retry_after(&headers);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = cancel.cancelled() => {
                        return Err(Failure::Refused(ProviderError::new(
                            ErrorCode::Aborted,
                            format!("E2B's {} call was cancelled while rate limited", call.what),
                        )));
                    }
                }
            }
            return Ok((self.api.answer(call, status, body)?, headers));
        }
    }

    pub async fn create(&self, ask: &Ask<'_>, cancel: &CancellationToken) -> Result<Made, Failure> {
        let body = json!({
            "templateID": ask.template,
            "timeout": ask.timeout_s,
            "metadata": ask.metadata,
            "envVars": {},
            "secure": true,
            "allow_internet_access": false,
            "network": {"allowPublicTraffic": false},
            "autoPause": false,
            "lifecycle": {"onTimeout": "kill"},
        });
        let call = Call::new("create sandbox", http::Method::POST, "/sandboxes").body(body);
        let (v, _) = self.call(&call, cancel).await?;
        let Some(id) = v["sandboxID"].as_str() else {
            return Err(Failure::Unknown(ProviderError::failed(
                "E2B's create sandbox call answered with no sandboxID",
            )));
        };
        Ok(Made {
            id: id.to_string(),
            domain: v["domain"].as_str().map(str::to_string),
            token: v["envdAccessToken"].as_str().map(Secret::from),
        })
    }

    /// The sandbox, or None when E2B no longer has it.
    pub async fn info(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Sandbox>> {
        let call = Call::new("read sandbox", http::Method::GET, "/sandboxes/{id}").id(id);
        match self.call(&call, cancel).await {
            Ok((v, _)) => Sandbox::of(&v).map(Some).ok_or_else(|| {
                ProviderError::failed("E2B's read sandbox call answered with no sandboxID")
            }),
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

    /// The envd access token of a sandbox (for one found again).
    pub async fn token(&self, id: &str, cancel: &CancellationToken) -> Result<Option<Secret>> {
        let call = Call::new("read sandbox", http::Method::GET, "/sandboxes/{id}").id(id);
        let (v, _) = self.call(&call, cancel).await.map_err(Failure::error)?;
        Ok(v["envdAccessToken"].as_str().map(Secret::from))
    }

    /// Every running or paused sandbox carrying every one of `labels`,
    /// every page.
    pub async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<Sandbox>> {
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut call = Call::new("list sandboxes", http::Method::GET, "/v2/sandboxes")
                .query("metadata", metadata_filter(labels))
                .query("state", "running")
                .query("state", "paused")
                .query("limit", PAGE.to_string());
            if let Some(n) = &next {
                call = call.query("nextToken", n.clone());
            }
            let (v, headers) = self.call(&call, cancel).await.map_err(Failure::error)?;
            out.extend(
                v.as_array()
                    .map(|a| a.iter().filter_map(Sandbox::of).collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
            next = headers
                .get("x-next-token")
                .and_then(|h| h.to_str().ok())
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if next.is_none() {
                return Ok(out);
            }
        }
    }

    /// Kill the sandbox; one E2B no longer has is killed already.
    pub async fn kill(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        let call = Call::new("kill sandbox", http::Method::DELETE, "/sandboxes/{id}").id(id);
        match self.call(&call, cancel).await {
            Ok(_) => Ok(()),
            Err(f) => {
                let e = f.error();
                if e.code == ErrorCode::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Set the sandbox's timer to `secs` from now.
    pub async fn set_timeout(&self, id: &str, secs: u64, cancel: &CancellationToken) -> Result<()> {
        self.timer(
            "set sandbox timeout",
            "/sandboxes/{id}/timeout",
            id,
            secs,
            cancel,
        )
        .await
    }

    /// Pause the sandbox: its files and memory are kept and nothing in it
    /// runs (E2B's `POST /sandboxes/{id}/pause`, 204).
    pub async fn pause(&self, id: &str, cancel: &CancellationToken) -> Result<()> {
        let call = Call::new("pause sandbox", http::Method::POST, "/sandboxes/{id}/pause").id(id);
        self.done(&call, cancel).await
    }

    /// Resume a paused sandbox with its timer `secs` from now (on a
    /// running one E2B only extends the timer): E2B's resume is its
    /// connect, `POST /sandboxes/{id}/connect`, 201 resumed, 200 running.
    pub async fn connect(&self, id: &str, secs: u64, cancel: &CancellationToken) -> Result<()> {
        self.timer(
            "connect sandbox",
            "/sandboxes/{id}/connect",
            id,
            secs,
            cancel,
        )
        .await
    }

    /// Take E2B's snapshot of the sandbox, its files and memory (it is
    /// paused a moment and goes on running): `POST
    /// /sandboxes/{id}/snapshots`, 201 `{snapshotID, names}`
    /// (e2b.dev/docs/api-reference/sandboxes/post-sandboxes-snapshots).
    /// No name is given: E2B's names are the team's, and a name already
    /// there would take a new build of that template. Its snapshotID, a
    /// template id a create starts from.
    pub async fn snapshot(&self, id: &str, cancel: &CancellationToken) -> Result<String> {
        let call = Call::new(
            "snapshot sandbox",
            http::Method::POST,
            "/sandboxes/{id}/snapshots",
        )
        .id(id)
        .body(json!({}));
        let (v, _) = self.call(&call, cancel).await.map_err(Failure::error)?;
        v["snapshotID"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                ProviderError::failed("E2B's snapshot sandbox call answered with no snapshotID")
            })
    }

    /// Delete a snapshot: it is a template, deleted by E2B's `DELETE
    /// /templates/{templateID}` (the snapshotID without its `:tag`);
    /// false when E2B had none.
    pub async fn delete_snapshot(
        &self,
        snapshot_id: &str,
        cancel: &CancellationToken,
    ) -> Result<bool> {
        let template = snapshot_id.split(':').next().unwrap_or(snapshot_id);
        let call =
            Call::new("delete snapshot", http::Method::DELETE, "/templates/{id}").id(template);
        match self.call(&call, cancel).await {
            Ok(_) => Ok(true),
            Err(f) => {
                let e = f.error();
                if e.code == ErrorCode::NotFound {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// A POST of `{timeout: secs}` to the sandbox's `path`.
    async fn timer(
        &self,
        what: &'static str,
        path: &'static str,
        id: &str,
        secs: u64,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let call = Call::new(what, http::Method::POST, path)
            .id(id)
            .body(json!({"timeout": secs}));
        self.done(&call, cancel).await
    }

    /// A call whose answer says nothing but that it was done.
    async fn done(&self, call: &Call, cancel: &CancellationToken) -> Result<()> {
        self.call(call, cancel)
            .await
            .map(|_| ())
            .map_err(Failure::error)
    }
}

/// The listing's metadata filter: `k=v&k2=v2` with each part URL-encoded;
/// the query encodes the whole once more (E2B's SDK does both).
pub fn metadata_filter(labels: &Labels) -> String {
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    labels
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_filter_encodes_each_part_then_the_query_the_whole() {
        let labels: Labels = [
            ("computer-mcp.name".to_string(), "a b&c=d".to_string()),
            ("k".to_string(), "v".to_string()),
        ]
        .into();
        let f = metadata_filter(&labels);
        assert_eq!(f, "computer-mcp.name=a+b%26c%3Dd&k=v");
        let q = form_urlencoded::Serializer::new(String::new())
            .append_pair("metadata", &f)
            .finish();
        assert_eq!(q, "metadata=computer-mcp.name%3Da%2Bb%2526c%253Dd%26k%3Dv");
    }
}
