//! The fake's task command router: execs in a sandbox's box, their stdin
//! by offset and their whole output read from any offset (the rules are
//! in the parent module's doc).

use std::pin::Pin;
use std::time::Instant;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::*;

/// The most one stdio message carries.
const READ_CHUNK: usize = 64 * 1024;

/// One exec: its output kept whole, its stdin, its end.
pub struct Exec {
    out: Mutex<[Vec<u8>; 2]>,
    /// Bumped on every change of output or end.
    changed: watch::Sender<u64>,
    /// Output closed (both fds).
    closed: Mutex<bool>,
    exit: Mutex<Option<ExitStatus>>,
    stdin: tokio::sync::Mutex<Stdin>,
}

struct Stdin {
    writer: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Bytes taken so far.
    at: u64,
    eof: bool,
}

impl Exec {
    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }
}

pub fn routes(shared: &Arc<Shared>) -> axum::Router {
    routes!(axum::Router::new(), ROUTER, shared, {
        "TaskExecStart" => exec_start,
        "TaskExecStdinWrite" => stdin_write,
        "TaskExecStdioRead" => stdio_read,
        "TaskExecWait" => exec_wait,
        "TaskExecPoll" => exec_poll,
        "TaskSnapshotFilesystem" => super::snapshots::snapshot_fs,
    })
}

impl Shared {
    /// The JWT's end, checked against `task`.
    pub(super) fn bearer(
        &self,
        md: &tonic::metadata::MetadataMap,
        task: &str,
    ) -> Result<Instant, Status> {
        let auth = serve::meta(md, "authorization");
        let Some(token) = auth.strip_prefix("Bearer ") else {
            return Err(Status::unauthenticated("missing bearer token"));
        };
        let jwts = lock(&self.jwts);
        match jwts.get(token) {
            Some(j) if j.task == task && j.until > Instant::now() => Ok(j.until),
            Some(j) if j.task == task => Err(Status::unauthenticated("token expired")),
            _ => Err(Status::unauthenticated("invalid token")),
        }
    }

    fn exec(&self, task: &str, exec: &str) -> Result<Arc<Exec>, Status> {
        lock(&self.execs)
            .get(&(task.to_string(), exec.to_string()))
            .cloned()
            .ok_or_else(|| Status::not_found(format!("exec {exec} not found")))
    }
}

async fn exec_start(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskExecStartRequest>| async move {
            let m = r.get_ref();
            s.bearer(r.metadata(), &m.task_id)?;
            let m = r.into_inner();
            if m.command_args.is_empty() {
                return Err(Status::invalid_argument("command_args is empty"));
            }
            let boxed = lock(&s.sandboxes)
                .values()
                .find(|sb| sb.task == m.task_id && sb.ended.is_none())
                .map(|sb| Arc::clone(&sb.boxed))
                .ok_or_else(|| Status::not_found("task not running"))?;
            let key = (m.task_id.clone(), m.exec_id.clone());
            if lock(&s.execs).contains_key(&key) {
                return Err(Status::already_exists("exec id in use"));
            }
            let mut cmd = Cmd::new(&m.command_args);
            cmd.env = m.env.into_iter().collect();
            cmd.cwd = m.workdir;
            let mut a = boxed
                .attach(&cmd, true)
                .await
                .map_err(|e| Status::internal(e.0))?;
            let (changed, _) = watch::channel(0);
            let exec = Arc::new(Exec {
                out: Mutex::new([Vec::new(), Vec::new()]),
                changed,
                closed: Mutex::new(false),
                exit: Mutex::new(None),
                stdin: tokio::sync::Mutex::new(Stdin {
                    writer: a.input.take(),
                    at: 0,
                    eof: false,
                }),
            });
            lock(&s.execs).insert(key, Arc::clone(&exec));
            if let Some(t) = m.timeout_secs {
                let (b, pid) = (Arc::clone(&boxed), a.pid);
                let e = Arc::clone(&exec);
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(u64::from(t))).await;
                    if lock(&e.exit).is_none() {
                        let _ = b.signal(pid, "KILL").await;
                    }
                });
            }
            tokio::spawn(async move {
                while let Some(c) = a.output.next().await {
                    let (fd, bytes) = match c {
                        crate::vendor_box::Chunk::Stdout(b) => (0, b),
                        crate::vendor_box::Chunk::Stderr(b) => (1, b),
                    };
                    lock(&exec.out)[fd].extend_from_slice(&bytes);
                    exec.bump();
                }
                *lock(&exec.closed) = true;
                let code = boxed.exit_code(&a.exec).await.unwrap_or(-1);
                // Docker gives 128+n for a command a signal ended.
                let status = if code > 128 {
                    ExitStatus::Signal(code as i32 - 128)
                } else {
                    ExitStatus::Code(code as i32)
                };
                *lock(&exec.exit) = Some(status);
                exec.bump();
            });
            Ok(TaskExecStartResponse {})
        },
    )
    .await
}

async fn stdin_write(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskExecStdinWriteRequest>| async move {
            s.bearer(r.metadata(), &r.get_ref().task_id)?;
            let m = r.into_inner();
            let exec = s.exec(&m.task_id, &m.exec_id)?;
            let mut stdin = exec.stdin.lock().await;
            if m.offset > stdin.at {
                return Err(Status::failed_precondition(format!(
                    "stdin offset {} is past the {} bytes taken",
                    m.offset, stdin.at
                )));
            }
            // What was taken already is taken once.
            let skip = (stdin.at - m.offset) as usize;
            let fresh = m.data.get(skip..).unwrap_or_default();
            if !fresh.is_empty() {
                if stdin.eof {
                    return Err(Status::failed_precondition("stdin is closed"));
                }
                if let Some(w) = stdin.writer.as_mut() {
                    // A command that closed its stdin takes nothing more.
                    if w.write_all(fresh).await.is_err() {
                        stdin.writer = None;
                    }
                }
                stdin.at += fresh.len() as u64;
            }
            if m.eof && !stdin.eof {
                stdin.eof = true;
                if let Some(mut w) = stdin.writer.take() {
                    let _ = w.shutdown().await;
                }
            }
            Ok(TaskExecStdinWriteResponse {})
        },
    )
    .await
}

/// Where one stdio stream is.
struct Read {
    exec: Arc<Exec>,
    fd: usize,
    offset: usize,
    until: Instant,
    rx: watch::Receiver<u64>,
    done: bool,
}

async fn stdio_read(s: Shr, req: Request) -> Response {
    serve::stream(
        req,
        move |r: tonic::Request<TaskExecStdioReadRequest>| async move {
            let until = s.bearer(r.metadata(), &r.get_ref().task_id)?;
            let m = r.into_inner();
            let exec = s.exec(&m.task_id, &m.exec_id)?;
            let fd = match m.file_descriptor {
                FD_STDOUT => 0,
                FD_STDERR => 1,
                other => return Err(Status::invalid_argument(format!("file descriptor {other}"))),
            };
            let rx = exec.changed.subscribe();
            let state = Read {
                exec,
                fd,
                offset: m.offset as usize,
                until,
                rx,
                done: false,
            };
            Ok(futures::stream::unfold(state, |mut st| async move {
                if st.done {
                    return None;
                }
                loop {
                    let chunk = {
                        let out = lock(&st.exec.out);
                        let all = &out[st.fd];
                        (all.len() > st.offset).then(|| {
                            let end = all.len().min(st.offset + READ_CHUNK);
                            all[st.offset..end].to_vec()
                        })
                    };
                    if let Some(data) = chunk {
                        st.offset += data.len();
                        return Some((Ok(TaskExecStdioReadResponse { data }), st));
                    }
                    if *lock(&st.exec.closed) {
                        return None;
                    }
                    let wait = tokio::time::timeout_at(st.until.into(), st.rx.changed());
                    match wait.await {
                        Ok(Ok(())) => continue,
                        Ok(Err(_)) => return None,
                        Err(_) => {
                            st.done = true;
                            return Some((Err(Status::unauthenticated("token expired")), st));
                        }
                    }
                }
            }))
        },
    )
    .await
}

/// The exec's end, waited for until the JWT's end.
async fn ended(exec: &Exec, until: Instant) -> Result<ExitStatus, Status> {
    let mut rx = exec.changed.subscribe();
    loop {
        if let Some(e) = *lock(&exec.exit) {
            return Ok(e);
        }
        match tokio::time::timeout_at(until.into(), rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Status::unavailable("exec gone")),
            Err(_) => return Err(Status::unauthenticated("token expired")),
        }
    }
}

async fn exec_wait(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskExecWaitRequest>| async move {
            let until = s.bearer(r.metadata(), &r.get_ref().task_id)?;
            let m = r.into_inner();
            let exec = s.exec(&m.task_id, &m.exec_id)?;
            Ok(TaskExecWaitResponse {
                exit_status: Some(ended(&exec, until).await?),
            })
        },
    )
    .await
}

async fn exec_poll(s: Shr, req: Request) -> Response {
    serve::unary(
        req,
        move |r: tonic::Request<TaskExecWaitRequest>| async move {
            s.bearer(r.metadata(), &r.get_ref().task_id)?;
            let m = r.into_inner();
            let exec = s.exec(&m.task_id, &m.exec_id)?;
            let exit = *lock(&exec.exit);
            Ok(TaskExecWaitResponse { exit_status: exit })
        },
    )
    .await
}
