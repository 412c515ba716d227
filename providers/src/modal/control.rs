//! Modal's control plane, `modal.client.ModalClient` (vendor-apis.md
//! section 3): app and image get-or-create, sandbox create, list, wait,
//! terminate, its task and the task's command router. Every call carries
//! the token pair and the client's kind (js/src/client.ts:428-472), and
//! every call but AuthTokenGet the auth token AuthTokenGet gave, asked
//! again past half its life (js/src/auth_token_manager.ts).

use std::sync::OnceLock;
use std::time::Duration;

use tonic::transport::Channel;

use super::grpc;
use super::proto::*;
use crate::types::{ErrorCode, ProviderError, Result};
use crate::vendor::{Failure, RETRY_AFTER_MAX, Secret};

/// Each control call's bound.
pub const CALL_WAIT: Duration = Duration::from_secs(30);
/// An image build's bound.
pub const IMAGE_WAIT: Duration = Duration::from_secs(600);
/// The client kind sent: Modal knows its own SDKs only (api.proto:87-97),
/// and this speaks what its JS SDK speaks (LIBMODAL_JS).
const CLIENT_TYPE: &str = "8";
/// The SDK version Modal checks the client against (the JS SDK sends the
/// Python release it mimics).
const CLIENT_VERSION: &str = "1.0.0";
/// The Dockerfile builder version of the JS SDK (image.ts).
pub const BUILDER_VERSION: &str = "2024.10";

/// The token pair, both secrets.
#[derive(Clone)]
pub struct Tokens {
    pub id: Secret,
    pub secret: Secret,
}

struct AuthToken {
    token: Secret,
    /// Ask again after this (seconds since the epoch).
    renew_at: f64,
}

pub struct Control {
    url: String,
    plaintext: bool,
    tokens: Option<Tokens>,
    channel: OnceLock<Channel>,
    auth: tokio::sync::Mutex<Option<AuthToken>>,
}

impl Control {
    pub fn new(url: String, plaintext: bool, tokens: Option<Tokens>) -> Self {
        Self {
            url,
            plaintext,
            tokens,
            channel: OnceLock::new(),
            auth: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether plaintext h2 is allowed (the router's URL too).
    pub fn plaintext(&self) -> bool {
        self.plaintext
    }

    fn channel(&self) -> Result<Channel> {
        if let Some(c) = self.channel.get() {
            return Ok(c.clone());
        }
        let c = grpc::channel(&self.url, self.plaintext, "server URL")?;
        Ok(self.channel.get_or_init(|| c).clone())
    }

    fn tokens(&self) -> Result<&Tokens> {
        self.tokens.as_ref().ok_or_else(|| {
            ProviderError::new(
                ErrorCode::Unauthorized,
                "Modal has no token: give --modal-token-id and --modal-token-secret (COMPUTER_MCP_MODAL_TOKEN_ID, COMPUTER_MCP_MODAL_TOKEN_SECRET)",
            )
        })
    }

    /// Every secret this client holds, for scrubbing words.
    pub fn secrets(&self) -> Vec<&Secret> {
        self.tokens
            .as_ref()
            .map(|t| vec![&t.id, &t.secret])
            .unwrap_or_default()
    }

    fn request<T>(&self, msg: T, auth: Option<&Secret>) -> Result<tonic::Request<T>> {
        let t = self.tokens()?;
        let mut req = tonic::Request::new(msg);
        grpc::set(&mut req, "x-modal-token-id", t.id.expose())?;
        grpc::set(&mut req, "x-modal-token-secret", t.secret.expose())?;
        grpc::set(&mut req, "x-modal-client-type", CLIENT_TYPE)?;
        grpc::set(&mut req, "x-modal-client-version", CLIENT_VERSION)?;
        grpc::set(
            &mut req,
            "x-modal-libmodal-version",
            concat!("computer-mcp/", env!("CARGO_PKG_VERSION")),
        )?;
        if let Some(a) = auth {
            grpc::set(&mut req, "x-modal-auth-token", a.expose())?;
        }
        Ok(req)
    }

    /// The auth token, asked for when there is none or it is past half
    /// its life.
    async fn auth_token(&self) -> Result<Secret> {
        let mut held = self.auth.lock().await;
        if let Some(a) = held.as_ref()
            && grpc::now_s() < a.renew_at
        {
            return Ok(a.token.clone());
        }
        let req = self.request(AuthTokenGetRequest {}, None)?;
        let got: AuthTokenGetResponse = grpc::unary(
            &self.channel()?,
            grpc::path(CLIENT, "AuthTokenGet"),
            req,
            CALL_WAIT,
        )
        .await
        .map_err(|s| grpc::error("AuthTokenGet", &s, &self.secrets()))?;
        if got.token.is_empty() {
            return Err(ProviderError::failed(
                "Modal's AuthTokenGet call answered with no token",
            ));
        }
        let now = grpc::now_s();
        // No readable expiry: ask again in five minutes.
        let renew_at = grpc::jwt_exp(&got.token)
            .map(|exp| now + (exp - now) / 2.0)
            .unwrap_or(now + 300.0);
        let token = Secret::new(got.token);
        *held = Some(AuthToken {
            token: token.clone(),
            renew_at,
        });
        Ok(token)
    }

    /// One call of `method`, the status left as it is (a create tells a
    /// refusal from a lost answer by it). A throttled call
    /// (RESOURCE_EXHAUSTED: refused, so not done) is asked again after the
    /// wait Modal asks for ([`grpc::pushback`]), for at most
    /// [`RETRY_AFTER_MAX`] in all, as the 429s of the REST vendors are.
    async fn call_raw<Req, Res>(
        &self,
        method: &str,
        msg: Req,
        within: Duration,
    ) -> std::result::Result<Res, Failure>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Res: prost::Message + Default + Send + Sync + 'static,
    {
        let mut waited = Duration::ZERO;
        let answer = loop {
            let auth = self.auth_token().await.map_err(Failure::Refused)?;
            let req = self
                .request(msg.clone(), Some(&auth))
                .map_err(Failure::Refused)?;
            let channel = self.channel().map_err(Failure::Refused)?;
            let answer = grpc::unary(&channel, grpc::path(CLIENT, method), req, within).await;
            match &answer {
                Err(s)
                    if s.code() == tonic::Code::ResourceExhausted && waited < RETRY_AFTER_MAX =>
                {
                    let wait = grpc::pushback(s).min(RETRY_AFTER_MAX - waited);
                    tracing::debug!(method, ?wait, "Modal throttled the call; asking again");
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
                _ => break answer,
            }
        };
        answer.map_err(|s| {
            let e = grpc::error(method, &s, &self.secrets());
            if lost(&s) {
                Failure::Unknown(e)
            } else {
                Failure::Refused(e)
            }
        })
    }

    async fn call<Req, Res>(&self, method: &str, msg: Req) -> Result<Res>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Res: prost::Message + Default + Send + Sync + 'static,
    {
        self.call_raw(method, msg, CALL_WAIT)
            .await
            .map_err(Failure::error)
    }

    /// The app named `name`, made when missing.
    pub async fn app(&self, name: &str) -> Result<String> {
        let r: AppGetOrCreateResponse = self
            .call(
                "AppGetOrCreate",
                AppGetOrCreateRequest {
                    app_name: name.into(),
                    environment_name: String::new(),
                    object_creation_type: ObjectCreationType::CreateIfMissing as i32,
                },
            )
            .await?;
        nonempty(r.app_id, "AppGetOrCreate", "app_id")
    }

    /// The app named `name` when it exists, never made (doctor's read).
    pub async fn app_lookup(&self, name: &str) -> Result<Option<String>> {
        let r: Result<AppGetOrCreateResponse> = self
            .call(
                "AppGetOrCreate",
                AppGetOrCreateRequest {
                    app_name: name.into(),
                    environment_name: String::new(),
                    object_creation_type: ObjectCreationType::Unspecified as i32,
                },
            )
            .await;
        match r {
            Ok(r) => Ok(Some(r.app_id).filter(|a| !a.is_empty())),
            Err(e) if e.code == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The image of registry tag `tag` in `app`, built when it is new,
    /// waiting for the build to end (ImageJoinStreaming until a result).
    pub async fn image(&self, app: &str, tag: &str) -> Result<String> {
        let r: ImageGetOrCreateResponse = self
            .call(
                "ImageGetOrCreate",
                ImageGetOrCreateRequest {
                    image: Some(Image {
                        dockerfile_commands: vec![format!("FROM {tag}")],
                    }),
                    app_id: app.into(),
                    builder_version: BUILDER_VERSION.into(),
                },
            )
            .await?;
        let id = nonempty(r.image_id, "ImageGetOrCreate", "image_id")?;
        let result = match r.result {
            Some(res) if res.status != GenericStatus::Unspecified as i32 => res,
            _ => self.join_image(&id).await?,
        };
        if result.status != GenericStatus::Success as i32 {
            return Err(ProviderError::refused(format!(
                "Modal could not build the image {tag} ({}): {}",
                status_name(result.status),
                grpc::quote(&result.exception)
            )));
        }
        Ok(id)
    }

    async fn join_image(&self, id: &str) -> Result<GenericResult> {
        let started = std::time::Instant::now();
        let mut last_entry = String::new();
        while started.elapsed() < IMAGE_WAIT {
            let auth = self.auth_token().await?;
            let req = self.request(
                ImageJoinStreamingRequest {
                    image_id: id.into(),
                    timeout: 55.0,
                    last_entry_id: last_entry.clone(),
                },
                Some(&auth),
            )?;
            let mut s = grpc::stream::<_, ImageJoinStreamingResponse>(
                &self.channel()?,
                grpc::path(CLIENT, "ImageJoinStreaming"),
                req,
                CALL_WAIT,
            )
            .await
            .map_err(|s| grpc::error("ImageJoinStreaming", &s, &self.secrets()))?;
            // Until the stream ends or is cut: then joined again from the
            // last entry.
            while let Ok(Ok(Some(m))) =
                tokio::time::timeout(Duration::from_secs(70), s.message()).await
            {
                if !m.entry_id.is_empty() {
                    last_entry = m.entry_id.clone();
                }
                if let Some(r) = m.result
                    && r.status != GenericStatus::Unspecified as i32
                {
                    return Ok(r);
                }
                if m.eof {
                    break;
                }
            }
        }
        Err(ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "Modal's image {id} did not finish building within {} s",
                IMAGE_WAIT.as_secs()
            ),
        ))
    }

    /// Make a sandbox; a lost answer is [`Failure::Unknown`].
    pub async fn create(&self, req: SandboxCreateRequest) -> std::result::Result<String, Failure> {
        let r: SandboxCreateResponse = self.call_raw("SandboxCreate", req, CALL_WAIT).await?;
        if r.sandbox_id.is_empty() {
            return Err(Failure::Unknown(ProviderError::failed(
                "Modal's SandboxCreate call answered with no sandbox_id",
            )));
        }
        Ok(r.sandbox_id)
    }

    /// Every running sandbox of `app` carrying every one of `tags`, every
    /// page (newest first; the next page is what was made before the
    /// oldest of this one).
    pub async fn list(&self, app: &str, tags: &[SandboxTag]) -> Result<Vec<SandboxInfo>> {
        let mut out: Vec<SandboxInfo> = Vec::new();
        let mut before = 0.0;
        loop {
            let r: SandboxListResponse = self
                .call(
                    "SandboxList",
                    SandboxListRequest {
                        app_id: app.into(),
                        before_timestamp: before,
                        include_finished: false,
                        tags: tags.to_vec(),
                    },
                )
                .await?;
            let Some(oldest) = r.sandboxes.iter().map(|s| s.created_at).reduce(f64::min) else {
                return Ok(out);
            };
            let fresh: Vec<SandboxInfo> = r
                .sandboxes
                .into_iter()
                .filter(|s| !out.iter().any(|o| o.id == s.id))
                .collect();
            if fresh.is_empty() || (before != 0.0 && oldest >= before) {
                out.extend(fresh);
                return Ok(out);
            }
            out.extend(fresh);
            before = oldest;
        }
    }

    /// The sandbox's end: None while it runs (SandboxWait with timeout 0,
    /// js/src/sandbox.ts:1796-1801); Err not_found once Modal forgot it.
    pub async fn poll(&self, id: &str) -> Result<Option<GenericResult>> {
        let r: SandboxWaitResponse = self
            .call(
                "SandboxWait",
                SandboxWaitRequest {
                    sandbox_id: id.into(),
                    timeout: 0.0,
                },
            )
            .await?;
        Ok(r.result
            .filter(|r| r.status != GenericStatus::Unspecified as i32))
    }

    /// Ask Modal to end the sandbox (it ends it asynchronously).
    pub async fn terminate(&self, id: &str) -> Result<()> {
        let r: Result<SandboxTerminateResponse> = self
            .call(
                "SandboxTerminate",
                SandboxTerminateRequest {
                    sandbox_id: id.into(),
                },
            )
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.code == ErrorCode::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Delete the image `id` (a snapshot's): false when Modal has no such
    /// image. ImageDelete answers google.protobuf.Empty and NOT_FOUND for
    /// an unknown image (api.proto:4823; go/image.go `Delete`).
    pub async fn image_delete(&self, id: &str) -> Result<bool> {
        let r: Result<Empty> = self
            .call(
                "ImageDelete",
                ImageDeleteRequest {
                    image_id: id.into(),
                },
            )
            .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if e.code == ErrorCode::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The sandbox's task, waiting up to `wait_s` for it to be scheduled.
    pub async fn task_id(&self, id: &str, wait_s: f32) -> Result<String> {
        let r: SandboxGetTaskIdResponse = self
            .call_raw(
                "SandboxGetTaskId",
                SandboxGetTaskIdRequest {
                    sandbox_id: id.into(),
                    timeout: Some(wait_s),
                    wait_until_ready: false,
                },
                CALL_WAIT + Duration::from_secs_f32(wait_s),
            )
            .await
            .map_err(Failure::error)?;
        match (r.task_id, r.task_result) {
            (Some(t), _) if !t.is_empty() => Ok(t),
            (_, Some(res)) => Err(ProviderError::gone(format!(
                "Modal sandbox {id} has ended ({}, exit code {})",
                status_name(res.status),
                res.exitcode
            ))),
            _ => Err(ProviderError::new(
                ErrorCode::Unreachable,
                format!("Modal sandbox {id} has no task yet"),
            )),
        }
    }

    /// The command router's URL and a fresh JWT for `task`.
    pub async fn router_access(&self, task: &str) -> Result<(String, Secret)> {
        let r: TaskGetCommandRouterAccessResponse = self
            .call(
                "TaskGetCommandRouterAccess",
                TaskGetCommandRouterAccessRequest {
                    task_id: task.into(),
                },
            )
            .await?;
        if r.url.is_empty() || r.jwt.is_empty() {
            return Err(ProviderError::failed(
                "Modal's TaskGetCommandRouterAccess call answered with no url or no jwt",
            ));
        }
        Ok((r.url, Secret::new(r.jwt)))
    }
}

/// A status after which the call may have been done: its answer was lost.
fn lost(s: &tonic::Status) -> bool {
    use tonic::Code;
    matches!(
        s.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Internal
            | Code::Cancelled
    )
}

fn nonempty(v: String, call: &str, field: &str) -> Result<String> {
    if v.is_empty() {
        Err(ProviderError::failed(format!(
            "Modal's {call} call answered with no {field}"
        )))
    } else {
        Ok(v)
    }
}

/// A [`GenericStatus`] in words.
pub fn status_name(status: i32) -> String {
    GenericStatus::try_from(status)
        .map(|s| format!("{s:?}").to_lowercase())
        .unwrap_or_else(|_| format!("status {status}"))
}
