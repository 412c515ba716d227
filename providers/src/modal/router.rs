//! Modal's task command router, `modal.task_command_router.TaskCommandRouter`
//! (task_command_router.proto:373-421), at the URL the control plane
//! gives with a JWT for one task (TaskGetCommandRouterAccess). What the
//! SDK does and this does too (js/src/task_command_router_client.ts):
//!
//! - Every call carries `authorization: Bearer <jwt>`. The JWT is asked
//!   for again before it expires ([`REFRESH_BEFORE`], or half its life
//!   when it lives shorter), and once more on an UNAUTHENTICATED answer,
//!   after which the call is made again (:854-912).
//! - Stdin is TaskExecStdinWrite at the offset of the bytes sent before,
//!   so a write sent twice is taken once, in chunks of [`STDIN_CHUNK`],
//!   and eof closes it (sandbox.ts:1915-1926, 3126-3154).
//! - Stdout and stderr are TaskExecStdioRead streams from an offset: a
//!   stream cut (a lost connection, an expired JWT) is opened again from
//!   the bytes already read, so nothing is lost or read twice (:915-1000).
//! - There is no kill or signal of an exec (:397-448): an exec ends by
//!   itself, by its `timeout_secs`, or with its sandbox.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tonic::transport::Channel;

use super::control::Control;
use super::grpc;
use super::proto::*;
use crate::types::{ErrorCode, ProviderError, Result};
use crate::vendor::Secret;

/// A JWT with less than this to live is asked for again (the SDK's 30 s).
pub const REFRESH_BEFORE: f64 = 30.0;
/// The SDK's stdin chunk.
pub const STDIN_CHUNK: usize = 256 * 1024;
/// The most argv the SDK sends (seed): a bigger one is refused here.
pub const ARGV_MAX: usize = 64 * 1024;
/// Each unary router call's bound.
pub const CALL_WAIT: Duration = Duration::from_secs(30);
/// A filesystem snapshot's bound (the SDKs' default budget, 55 s).
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(55);
/// How many times in a row a cut output stream is opened again.
const REOPENS: u32 = 10;

struct Jwt {
    token: Secret,
    /// Seconds since the epoch, when readable.
    exp: Option<f64>,
    /// When it was given.
    got: f64,
}

impl Jwt {
    fn new(token: Secret) -> Self {
        let exp = grpc::jwt_exp(token.expose());
        Self {
            token,
            exp,
            got: grpc::now_s(),
        }
    }

    /// Whether it should be asked for again before a call.
    fn stale(&self) -> bool {
        let Some(exp) = self.exp else {
            return false;
        };
        let now = grpc::now_s();
        let margin = REFRESH_BEFORE.min((exp - self.got) / 2.0);
        exp - now < margin
    }
}

/// The command router of one task.
pub struct Router {
    control: Arc<Control>,
    task: String,
    url: String,
    channel: OnceLock<Channel>,
    jwt: tokio::sync::Mutex<Jwt>,
    /// How many JWTs it was given (for tests and words).
    refreshed: std::sync::atomic::AtomicU32,
}

/// How an exec ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Router {
    /// The router of `task`, its access asked of the control plane.
    pub async fn open(control: Arc<Control>, task: &str) -> Result<Self> {
        let (url, jwt) = control.router_access(task).await?;
        // Checked now: a router URL that would be plaintext is refused
        // before any JWT is sent to it.
        let channel = grpc::channel(&url, control.plaintext(), "command router URL")?;
        Ok(Self {
            control,
            task: task.into(),
            url,
            channel: OnceLock::from(channel),
            jwt: tokio::sync::Mutex::new(Jwt::new(jwt)),
            refreshed: std::sync::atomic::AtomicU32::new(0),
        })
    }

    pub fn task(&self) -> &str {
        &self.task
    }

    /// How many times the JWT was asked for again.
    pub fn refreshes(&self) -> u32 {
        self.refreshed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn channel(&self) -> Result<Channel> {
        match self.channel.get() {
            Some(c) => Ok(c.clone()),
            None => grpc::channel(&self.url, self.control.plaintext(), "command router URL"),
        }
    }

    /// The JWT to send: asked for again when stale, or when `force` (an
    /// UNAUTHENTICATED answer to `used`) and no other call has already.
    async fn jwt(&self, force: Option<&Secret>) -> Result<Secret> {
        let mut held = self.jwt.lock().await;
        let replaced = force.is_some_and(|used| used != &held.token);
        if replaced || (force.is_none() && !held.stale()) {
            return Ok(held.token.clone());
        }
        let (url, jwt) = self.control.router_access(&self.task).await?;
        if url != self.url {
            tracing::warn!("Modal moved the command router of task {}", self.task);
        }
        *held = Jwt::new(jwt);
        self.refreshed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(held.token.clone())
    }

    fn secrets<'a>(&'a self, jwt: &'a Secret) -> Vec<&'a Secret> {
        let mut s = self.control.secrets();
        s.push(jwt);
        s
    }

    fn request<T>(&self, msg: T, jwt: &Secret) -> Result<tonic::Request<T>> {
        let mut req = tonic::Request::new(msg);
        grpc::set(
            &mut req,
            "authorization",
            &format!("Bearer {}", jwt.expose()),
        )?;
        Ok(req)
    }

    /// One unary call, made again once with a new JWT on UNAUTHENTICATED.
    async fn call<Req, Res>(&self, method: &str, msg: Req, within: Duration) -> Result<Res>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Res: prost::Message + Default + Send + Sync + 'static,
    {
        let mut jwt = self.jwt(None).await?;
        let mut again = true;
        loop {
            let req = self.request(msg.clone(), &jwt)?;
            match grpc::unary(&self.channel()?, grpc::path(ROUTER, method), req, within).await {
                Ok(r) => return Ok(r),
                Err(s) if s.code() == tonic::Code::Unauthenticated && again => {
                    again = false;
                    jwt = self.jwt(Some(&jwt)).await?;
                }
                Err(s) => return Err(grpc::error(method, &s, &self.secrets(&jwt))),
            }
        }
    }

    /// Start `argv` (as root, Modal's user) with stdout and stderr piped;
    /// the exec's id. `timeout` ends it there at Modal.
    pub async fn start(
        &self,
        argv: &[String],
        timeout: Option<Duration>,
        env: HashMap<String, String>,
    ) -> Result<String> {
        let size: usize = argv.iter().map(|a| a.len() + 1).sum();
        if size > ARGV_MAX {
            return Err(ProviderError::invalid(
                "argv",
                format!("a Modal exec's argv is {size} bytes, over the {ARGV_MAX} Modal takes"),
            ));
        }
        let exec_id = uuid()?;
        let _: TaskExecStartResponse = self
            .call(
                "TaskExecStart",
                TaskExecStartRequest {
                    task_id: self.task.clone(),
                    exec_id: exec_id.clone(),
                    command_args: argv.to_vec(),
                    stdout_config: PIPE,
                    stderr_config: PIPE,
                    timeout_secs: timeout.map(|t| t.as_secs().clamp(1, u32::MAX as u64) as u32),
                    workdir: None,
                    env,
                },
                CALL_WAIT,
            )
            .await?;
        Ok(exec_id)
    }

    /// The task's whole filesystem as a new image (its id), which Modal
    /// deletes `ttl_s` after it is made: TaskSnapshotFilesystem, the call
    /// Modal's SDKs make for `snapshotFilesystem` (modal-client 69519aef
    /// js/src/sandbox.ts, go/sandbox.go `SnapshotFilesystem`,
    /// py/modal/sandbox.py `snapshot_filesystem`; the control plane's
    /// SandboxSnapshotFs is their legacy path, behind
    /// MODAL_USE_LEGACY_FILESYSTEM_SNAPSHOT in Python only). Memory and
    /// programs are not kept.
    pub async fn snapshot_fs(&self, ttl_s: i64) -> Result<String> {
        let r: TaskSnapshotFilesystemResponse = self
            .call(
                "TaskSnapshotFilesystem",
                TaskSnapshotFilesystemRequest {
                    task_id: self.task.clone(),
                    snapshot_id: uuid()?,
                    ttl_seconds: Some(ttl_s.max(1)),
                },
                SNAPSHOT_WAIT,
            )
            .await?;
        if r.image_id.is_empty() {
            return Err(ProviderError::failed(
                "Modal's TaskSnapshotFilesystem call answered with no image_id",
            ));
        }
        Ok(r.image_id)
    }

    /// Write `data` at `offset` of the exec's stdin, closing it with `eof`.
    pub async fn write(&self, exec: &str, offset: u64, data: &[u8], eof: bool) -> Result<()> {
        let _: TaskExecStdinWriteResponse = self
            .call(
                "TaskExecStdinWrite",
                TaskExecStdinWriteRequest {
                    task_id: self.task.clone(),
                    exec_id: exec.into(),
                    offset,
                    data: data.to_vec(),
                    eof,
                },
                CALL_WAIT,
            )
            .await?;
        Ok(())
    }

    /// Write all of `data` from `offset` in [`STDIN_CHUNK`]s; the offset
    /// after it. With `eof`, the last write closes stdin.
    pub async fn write_all(
        &self,
        exec: &str,
        mut offset: u64,
        data: &[u8],
        eof: bool,
    ) -> Result<u64> {
        let mut chunks = data.chunks(STDIN_CHUNK).peekable();
        if chunks.peek().is_none() {
            if eof {
                self.write(exec, offset, &[], true).await?;
            }
            return Ok(offset);
        }
        while let Some(c) = chunks.next() {
            let last = chunks.peek().is_none();
            self.write(exec, offset, c, eof && last).await?;
            offset += c.len() as u64;
        }
        Ok(offset)
    }

    /// How the exec ended, waiting for it; a wait cut by an expired JWT
    /// or a lost connection is asked again.
    pub async fn wait(&self, exec: &str, within: Duration) -> Result<Exit> {
        let started = std::time::Instant::now();
        loop {
            let left = within.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "a command in the Modal sandbox did not end within {} s",
                        within.as_secs()
                    ),
                ));
            }
            let r: Result<TaskExecWaitResponse> = self
                .call(
                    "TaskExecWait",
                    TaskExecWaitRequest {
                        task_id: self.task.clone(),
                        exec_id: exec.into(),
                    },
                    left,
                )
                .await;
            match r {
                Ok(r) => {
                    return match r.exit_status {
                        Some(ExitStatus::Code(c)) => Ok(Exit::Code(c)),
                        Some(ExitStatus::Signal(s)) => Ok(Exit::Signal(s)),
                        None => Err(ProviderError::failed(
                            "Modal's TaskExecWait call answered with no exit status",
                        )),
                    };
                }
                Err(e) if matches!(e.code, ErrorCode::Unreachable | ErrorCode::Unauthorized) => {
                    tracing::debug!("Modal's exec wait was cut, asked again: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The exec's output on `fd` ([`FD_STDOUT`] or [`FD_STDERR`]) from its
    /// start to its end, opened again from the bytes read when cut.
    pub fn output(
        self: &Arc<Self>,
        exec: &str,
        fd: i32,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        self.output_from(exec, fd, 0)
    }

    /// The exec's output on `fd` from byte `offset` on (a reader that has
    /// the bytes before it).
    pub fn output_from(
        self: &Arc<Self>,
        exec: &str,
        fd: i32,
        offset: u64,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        let state = Reading {
            router: Arc::clone(self),
            exec: exec.to_string(),
            fd,
            offset,
            open: None,
            reopens: 0,
            ended: false,
        };
        futures::stream::unfold(state, |mut s| async move {
            if s.ended {
                return None;
            }
            match s.next().await {
                Ok(Some(b)) => Some((Ok(b), s)),
                Ok(None) => None,
                Err(e) => {
                    s.ended = true;
                    Some((Err(e), s))
                }
            }
        })
    }
}

/// One output stream being read, with where it is.
struct Reading {
    router: Arc<Router>,
    exec: String,
    fd: i32,
    offset: u64,
    open: Option<(tonic::Streaming<TaskExecStdioReadResponse>, Secret)>,
    reopens: u32,
    ended: bool,
}

impl Reading {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        loop {
            let (stream, jwt) = match self.open.as_mut() {
                Some(o) => o,
                None => {
                    let jwt = self.router.jwt(None).await?;
                    let req = self.router.request(
                        TaskExecStdioReadRequest {
                            task_id: self.router.task.clone(),
                            exec_id: self.exec.clone(),
                            offset: self.offset,
                            file_descriptor: self.fd,
                        },
                        &jwt,
                    )?;
                    let opened = grpc::stream(
                        &self.router.channel()?,
                        grpc::path(ROUTER, "TaskExecStdioRead"),
                        req,
                        CALL_WAIT,
                    )
                    .await;
                    match opened {
                        Ok(s) => self.open.insert((s, jwt)),
                        Err(s) => {
                            self.cut(&s, &jwt).await?;
                            continue;
                        }
                    }
                }
            };
            match stream.message().await {
                Ok(Some(m)) => {
                    self.reopens = 0;
                    if m.data.is_empty() {
                        continue;
                    }
                    self.offset += m.data.len() as u64;
                    return Ok(Some(Bytes::from(m.data)));
                }
                Ok(None) => return Ok(None),
                Err(s) => {
                    let jwt = jwt.clone();
                    self.open = None;
                    self.cut(&s, &jwt).await?;
                }
            }
        }
    }

    /// A stream cut by `s`: Ok when it may be opened again from the
    /// offset (a new JWT asked for on UNAUTHENTICATED).
    async fn cut(&mut self, s: &tonic::Status, jwt: &Secret) -> Result<()> {
        use tonic::Code;
        let again = matches!(
            s.code(),
            Code::Unauthenticated | Code::Unavailable | Code::Unknown | Code::Internal
        );
        if !again || self.reopens >= REOPENS {
            return Err(grpc::error(
                "TaskExecStdioRead",
                s,
                &self.router.secrets(jwt),
            ));
        }
        self.reopens += 1;
        if s.code() == Code::Unauthenticated {
            self.router.jwt(Some(jwt)).await?;
        } else {
            tokio::time::sleep(Duration::from_millis(10 << self.reopens.min(8))).await;
        }
        Ok(())
    }
}

/// A random UUID (v4), an exec's id as the SDK makes it.
fn uuid() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| ProviderError::failed(format!("no randomness: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}
