//! The fake's toolbox, at `/toolbox/<id>/…` (the sandbox's
//! `toolboxProxyUrl` plus its id), as vendor-apis.md section 1 reads
//! Daytona's daemon (daytonaio/daytona@b5a5d9e7 apps/daemon/pkg/session/,
//! daytona/clients openapi-specs/toolbox.json):
//!
//! - `POST /files/upload-v2?path=` takes a multipart part `file` or a raw
//!   body; parents are made, a file there is replaced.
//! - `POST /process/execute` runs `{command, timeout}` to its end and
//!   answers `{exitCode, result}` (stdout and stderr together); past the
//!   timeout, 408.
//! - `POST /process/session` opens `{sessionId}` (201; 409 when it
//!   exists). A session runs its commands one after another
//!   (execute.go:23-90): an exec is queued behind the one before.
//! - `POST /process/session/{sid}/exec {command, runAsync,
//!   suppressInputEcho}`: 202 `{cmdId}` at once with runAsync, else the
//!   command's end `{cmdId, exitCode, output}`.
//! - Each output line goes into the command's log behind `01 01 01`
//!   (stdout) or `02 02 02` (stderr) with its newline re-added; NULs are
//!   lost (execute.go:196-236).
//! - `POST …/command/{cid}/input {data}` writes `data` with a newline added
//!   when missing, echoes it into the log as stdout unless
//!   `suppressInputEcho`, and answers 410 once the command has ended
//!   (input.go:47-71).
//! - `GET …/command/{cid}/logs?follow=true` is a WebSocket that replays
//!   the log from its first byte, in binary frames cut anywhere (at most
//!   [`FakeDaytona::frame_max`] bytes, 1024 as Daytona's reads), polls
//!   every 20 ms, and closes ~1 s after the command ends (log.go:43-110,
//!   log_reader.go:15-53). Markers are kept only for a client that sends
//!   `X-Daytona-SDK-Version` >= 0.167.0, or no version and
//!   `X-Daytona-Split-Output: true`; stripped otherwise (common.go:17-33).
//! - `GET …/command/{cid}` reads `{id, command, exitCode}`, the code null
//!   while it runs (toolbox.json 3850).
//! - `DELETE /process/session/{sid}` ends the session's commands (204).
//!
//! [`FakeDaytona::frame_max`]: super::FakeDaytona::frame_max

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::machine::{Attached, Machine};
use super::{FakeDaytona, Shared, enter, lock};

/// The largest upload the fake takes.
const UPLOAD_MAX: usize = 64 * 1024 * 1024;

/// One session command's state.
struct Cmd {
    command: String,
    echo: bool,
    /// The log file: marked lines.
    log: Mutex<Vec<u8>>,
    /// Its stdin once started.
    stdin: tokio::sync::Mutex<Option<Pin<Box<dyn AsyncWrite + Send>>>>,
    /// When it ended, with its code.
    ended: Mutex<Option<(i32, Instant)>>,
    /// Woken on every change (a log line, its start, its end).
    changed: Notify,
    started: Mutex<bool>,
}

impl Cmd {
    fn append(&self, marker: u8, line: &[u8]) {
        let mut log = lock(&self.log);
        log.extend_from_slice(&[marker; 3]);
        log.extend(line.iter().copied().filter(|b| *b != 0 && *b != b'\n'));
        log.push(b'\n');
        drop(log);
        self.changed.notify_waiters();
    }
    fn end(&self, code: i32) {
        let mut e = lock(&self.ended);
        if e.is_none() {
            *e = Some((code, Instant::now()));
        }
        drop(e);
        self.changed.notify_waiters();
    }
    fn is_ended(&self) -> bool {
        lock(&self.ended).is_some()
    }
}

/// One session: its commands and the queue that runs them in order.
struct Session {
    queue: mpsc::UnboundedSender<Arc<Cmd>>,
    cmds: HashMap<String, Arc<Cmd>>,
    /// Ends the command running now.
    kill: Arc<Mutex<Option<Attached>>>,
    ended: tokio_util::sync::CancellationToken,
}

/// Every sandbox's sessions, by sandbox id then session id.
#[derive(Default)]
pub(crate) struct Boxes {
    sessions: Mutex<HashMap<(String, String), Session>>,
    next: AtomicU64,
    pub(crate) frame_max: AtomicU64,
    pub(crate) drop_after: AtomicU64,
    /// Log connections still to be dropped.
    pub(crate) drops: AtomicU64,
}

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/toolbox/{id}/files/upload-v2",
            // A static computerd is a few MiB; axum's default takes 2.
            post(upload).layer(axum::extract::DefaultBodyLimit::max(UPLOAD_MAX)),
        )
        .route("/toolbox/{id}/process/execute", post(execute))
        .route("/toolbox/{id}/process/session", post(open_session))
        .route("/toolbox/{id}/process/session/{sid}", delete(end_session))
        .route("/toolbox/{id}/process/session/{sid}/exec", post(exec))
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}",
            get(read_command),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}/input",
            post(input),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}/logs",
            get(logs),
        )
}

impl FakeDaytona {
    /// Log frames are at most `n` bytes (at least 1), cut at random below.
    pub fn frame_max(&self, n: u64) {
        self.shared
            .toolbox
            .frame_max
            .store(n.max(1), Ordering::Relaxed);
    }
    /// The next `times` log WebSockets are each cut (no close frame) after
    /// `n` bytes: their client must reconnect, and gets a replay from 0.
    pub fn drop_logs_after(&self, n: u64, times: u64) {
        self.shared.toolbox.drop_after.store(n, Ordering::Relaxed);
        self.shared.toolbox.drops.store(times, Ordering::Relaxed);
    }
}

fn error(status: StatusCode, words: &str) -> Response {
    (
        status,
        axum::Json(json!({"statusCode": status.as_u16(), "message": words})),
    )
        .into_response()
}

/// The started sandbox `id`'s machine, or the answer refusing it.
fn machine(sh: &Shared, id: &str) -> Result<Arc<dyn Machine>, Box<Response>> {
    let all = lock(&sh.sandboxes);
    match all.get(id).filter(|s| !s.gone) {
        None => Err(Box::new(error(StatusCode::NOT_FOUND, "sandbox not found"))),
        Some(s) if s.state != "started" => Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "sandbox is not started",
        ))),
        Some(s) => s
            .machine
            .clone()
            .ok_or_else(|| Box::new(error(StatusCode::NOT_FOUND, "sandbox not found"))),
    }
}

macro_rules! enter_box {
    ($sh:expr, $headers:expr, $id:expr, $what:expr) => {{
        if let Some(r) = enter(&$sh, &$headers, format!("toolbox {}", $what)) {
            return r;
        }
        match machine(&$sh, &$id) {
            Ok(m) => m,
            Err(r) => return *r,
        }
    }};
}

/// The part named `file` of a multipart body.
fn multipart_file(content_type: &str, body: &[u8]) -> Option<Vec<u8>> {
    let boundary = content_type.split("boundary=").nth(1)?.trim_matches('"');
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    while let Some(at) = find(rest, delim.as_bytes()) {
        parts.push(&rest[..at]);
        rest = &rest[at + delim.len()..];
    }
    parts.into_iter().skip(1).find_map(|p| {
        let p = p.strip_prefix(b"\r\n")?;
        let head_end = find(p, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&p[..head_end]).to_lowercase();
        let data = &p[head_end + 4..];
        let data = data.strip_suffix(b"\r\n").unwrap_or(data);
        head.contains("name=\"file\"").then(|| data.to_vec())
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn upload(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let m = enter_box!(sh, headers, id, "POST /files/upload-v2");
    let Some(path) = q.get("path").filter(|p| !p.is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "path is required");
    };
    let kind = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let bytes = if kind.starts_with("multipart/form-data") {
        match multipart_file(kind, &body) {
            Some(b) => b,
            None => return error(StatusCode::BAD_REQUEST, "no part named file"),
        }
    } else {
        body.to_vec()
    };
    match m.upload(path, bytes).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("upload failed: {e}"),
        ),
    }
}

async fn execute(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let m = enter_box!(sh, headers, id, "POST /process/execute");
    let Some(command) = body.get("command").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "command is required");
    };
    let secs = body
        .get("timeout")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0)
        .unwrap_or(10);
    match m.run(command, Duration::from_secs(secs)).await {
        Ok(Some((code, out))) => axum::Json(json!({
            "exitCode": code,
            "result": String::from_utf8_lossy(&out),
        }))
        .into_response(),
        Ok(None) => error(StatusCode::REQUEST_TIMEOUT, "command timed out"),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("execute failed: {e}"),
        ),
    }
}

async fn open_session(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let m = enter_box!(sh, headers, id, "POST /process/session");
    let Some(sid) = body
        .get("sessionId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return error(StatusCode::BAD_REQUEST, "sessionId is required");
    };
    let key = (id.clone(), sid.to_string());
    let mut sessions = lock(&sh.toolbox.sessions);
    if sessions.contains_key(&key) {
        return error(StatusCode::CONFLICT, "session already exists");
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let kill = Arc::new(Mutex::new(None));
    let ended = tokio_util::sync::CancellationToken::new();
    tokio::spawn(run_session(m, rx, Arc::clone(&kill), ended.clone()));
    sessions.insert(
        key,
        Session {
            queue: tx,
            cmds: HashMap::new(),
            kill,
            ended,
        },
    );
    StatusCode::CREATED.into_response()
}

/// Copy a command's output into its log, a line at a time.
async fn pump(cmd: Arc<Cmd>, from: Pin<Box<dyn AsyncRead + Send>>, marker: u8) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => cmd.append(marker, &line),
        }
    }
}

/// A session's shell: its commands one after another.
async fn run_session(
    m: Arc<dyn Machine>,
    mut rx: mpsc::UnboundedReceiver<Arc<Cmd>>,
    current: Arc<Mutex<Option<Attached>>>,
    ended: tokio_util::sync::CancellationToken,
) {
    loop {
        let cmd = tokio::select! {
            c = rx.recv() => match c { Some(c) => c, None => return },
            _ = ended.cancelled() => return,
        };
        let mut att = match m.start(&cmd.command).await {
            Ok(a) => a,
            Err(e) => {
                cmd.append(2, format!("sh: {e}").as_bytes());
                cmd.end(127);
                continue;
            }
        };
        let out = tokio::spawn(pump(
            Arc::clone(&cmd),
            std::mem::replace(&mut att.stdout, Box::pin(tokio::io::empty())),
            1,
        ));
        let err = tokio::spawn(pump(
            Arc::clone(&cmd),
            std::mem::replace(&mut att.stderr, Box::pin(tokio::io::empty())),
            2,
        ));
        *cmd.stdin.lock().await = Some(std::mem::replace(
            &mut att.stdin,
            Box::pin(tokio::io::sink()),
        ));
        *lock(&cmd.started) = true;
        cmd.changed.notify_waiters();
        let exit = std::mem::replace(&mut att.exit, Box::pin(async { -1 }));
        *lock(&current) = Some(att);
        let code = tokio::select! {
            c = exit => c,
            _ = ended.cancelled() => -1,
        };
        let _ = out.await;
        let _ = err.await;
        lock(&current).take();
        *cmd.stdin.lock().await = None;
        cmd.end(code);
    }
}

async fn exec(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((id, sid)): Path<(String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let _m = enter_box!(sh, headers, id, "POST /process/session/{sid}/exec");
    let Some(command) = body.get("command").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "command is required");
    };
    let run_async = body
        .get("runAsync")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let echo = !body
        .get("suppressInputEcho")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let n = sh.toolbox.next.fetch_add(1, Ordering::Relaxed);
    let cid = format!("cmd-{n:06}");
    let cmd = Arc::new(Cmd {
        command: command.to_string(),
        echo,
        log: Mutex::new(Vec::new()),
        stdin: tokio::sync::Mutex::new(None),
        ended: Mutex::new(None),
        changed: Notify::new(),
        started: Mutex::new(false),
    });
    {
        let mut sessions = lock(&sh.toolbox.sessions);
        let Some(s) = sessions.get_mut(&(id.clone(), sid.clone())) else {
            return error(StatusCode::NOT_FOUND, "session not found");
        };
        if s.queue.send(Arc::clone(&cmd)).is_err() {
            return error(StatusCode::GONE, "session ended");
        }
        s.cmds.insert(cid.clone(), Arc::clone(&cmd));
    }
    if run_async {
        return (StatusCode::ACCEPTED, axum::Json(json!({"cmdId": cid}))).into_response();
    }
    loop {
        let changed = cmd.changed.notified();
        if let Some((code, _)) = *lock(&cmd.ended) {
            let log = lock(&cmd.log).clone();
            return axum::Json(json!({"cmdId": cid, "exitCode": code, "output": String::from_utf8_lossy(&strip(&log))}))
                .into_response();
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), changed).await;
    }
}

fn command(sh: &Shared, id: &str, sid: &str, cid: &str) -> Option<Arc<Cmd>> {
    lock(&sh.toolbox.sessions)
        .get(&(id.to_string(), sid.to_string()))
        .and_then(|s| s.cmds.get(cid).cloned())
}

/// A command as the toolbox reads it: its exit code once ended.
async fn read_command(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((id, sid, cid)): Path<(String, String, String)>,
) -> Response {
    let _m = enter_box!(sh, headers, id, "GET /process/session/{sid}/command/{cid}");
    let Some(cmd) = command(&sh, &id, &sid, &cid) else {
        return error(StatusCode::NOT_FOUND, "command not found");
    };
    let code = lock(&cmd.ended).map(|(c, _)| c);
    axum::Json(json!({"id": cid, "command": cmd.command, "exitCode": code})).into_response()
}

async fn input(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((id, sid, cid)): Path<(String, String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let _m = enter_box!(
        sh,
        headers,
        id,
        "POST /process/session/{sid}/command/{cid}/input"
    );
    let Some(data) = body.get("data").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "data is required");
    };
    let Some(cmd) = command(&sh, &id, &sid, &cid) else {
        return error(StatusCode::NOT_FOUND, "command not found");
    };
    let mut line = data.as_bytes().to_vec();
    if line.last() != Some(&b'\n') {
        line.push(b'\n');
    }
    // Input sent before the command starts waits for it, as a FIFO would.
    let until = Instant::now() + Duration::from_secs(30);
    while !*lock(&cmd.started) && !cmd.is_ended() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if cmd.is_ended() {
        return error(StatusCode::GONE, "command has exited");
    }
    let mut stdin = cmd.stdin.lock().await;
    let Some(w) = stdin.as_mut() else {
        return error(StatusCode::GONE, "command has exited");
    };
    if w.write_all(&line).await.is_err() || w.flush().await.is_err() {
        return error(StatusCode::GONE, "command has exited");
    }
    drop(stdin);
    if cmd.echo {
        cmd.append(1, &line);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn end_session(
    State(sh): State<Arc<Shared>>,
    headers: HeaderMap,
    Path((id, sid)): Path<(String, String)>,
) -> Response {
    if let Some(r) = enter(
        &sh,
        &headers,
        "toolbox DELETE /process/session/{sid}".into(),
    ) {
        return r;
    }
    let Some(s) = lock(&sh.toolbox.sessions).remove(&(id, sid)) else {
        return error(StatusCode::NOT_FOUND, "session not found");
    };
    s.ended.cancel();
    let running = lock(&s.kill).take();
    if let Some(att) = running {
        (att.kill)().await;
    }
    for c in s.cmds.values() {
        c.end(-1);
    }
    StatusCode::NO_CONTENT.into_response()
}

/// The log without its markers (an old client's view).
fn strip(log: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(log.len());
    let mut at_start = true;
    let mut i = 0;
    while i < log.len() {
        if at_start && (log[i..].starts_with(&[1, 1, 1]) || log[i..].starts_with(&[2, 2, 2])) {
            i += 3;
        }
        at_start = false;
        if let Some(&b) = log.get(i) {
            out.push(b);
            at_start = b == b'\n';
        }
        i += 1;
    }
    out
}

/// Whether the client asked for markers (common.go:17-33).
fn split_asked(headers: &HeaderMap) -> bool {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    match get("x-daytona-sdk-version") {
        Some(v) => {
            let n: Vec<u64> = v
                .trim_start_matches('v')
                .split('.')
                .map(|p| p.parse().unwrap_or(0))
                .collect();
            (
                n.first().copied().unwrap_or(0),
                n.get(1).copied().unwrap_or(0),
            ) >= (0, 167)
        }
        None => get("x-daytona-split-output") == Some("true"),
    }
}

async fn logs(
    State(sh): State<Arc<Shared>>,
    Path((id, sid, cid)): Path<(String, String, String)>,
    mut req: Request,
) -> Response {
    let headers = req.headers().clone();
    let _m = enter_box!(
        sh,
        headers,
        id,
        "GET /process/session/{sid}/command/{cid}/logs"
    );
    let Some(cmd) = command(&sh, &id, &sid, &cid) else {
        return error(StatusCode::NOT_FOUND, "command not found");
    };
    let split = split_asked(&headers);
    let key = headers
        .get("sec-websocket-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
    let (Some(key), Some(upgrade)) = (key, upgrade) else {
        // No upgrade: the log so far, as text.
        let log = lock(&cmd.log).clone();
        return Body::from(if split { log } else { strip(&log) }).into_response();
    };
    let frame_max = sh.toolbox.frame_max.load(Ordering::Relaxed);
    let frame_max = if frame_max == 0 { 1024 } else { frame_max };
    let dropped = sh
        .toolbox
        .drops
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok();
    let drop_after = if dropped {
        sh.toolbox.drop_after.load(Ordering::Relaxed)
    } else {
        0
    };
    let stop = sh.stop.clone();
    tokio::spawn(async move {
        let Ok(up) = upgrade.await else { return };
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(up),
            Role::Server,
            None,
        )
        .await;
        tokio::select! {
            _ = follow(ws, cmd, split, frame_max, drop_after) => {}
            _ = stop.cancelled() => {}
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header(
            "sec-websocket-accept",
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        )
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A small generator for frame sizes: cuts land anywhere, reproducibly.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

async fn follow<S>(
    mut ws: tokio_tungstenite::WebSocketStream<S>,
    cmd: Arc<Cmd>,
    split: bool,
    frame_max: u64,
    drop_after: u64,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut sent = 0usize;
    let mut rand = 0x9e37_79b9_7f4a_7c15u64 ^ (cmd.command.len() as u64);
    loop {
        let changed = cmd.changed.notified();
        let log = lock(&cmd.log).clone();
        let view = if split { log } else { strip(&log) };
        while sent < view.len() {
            let size = (next_rand(&mut rand) % frame_max + 1) as usize;
            let mut end = (sent + size).min(view.len());
            if drop_after > 0 && end as u64 >= drop_after {
                end = (drop_after as usize).max(sent).min(view.len());
                if end > sent {
                    let _ = ws
                        .send(Message::Binary(Bytes::copy_from_slice(&view[sent..end])))
                        .await;
                }
                // Cut with no close frame, as a dropped connection.
                return;
            }
            if ws
                .send(Message::Binary(Bytes::copy_from_slice(&view[sent..end])))
                .await
                .is_err()
            {
                return;
            }
            sent = end;
        }
        let ended = *lock(&cmd.ended);
        if let Some((_, at)) = ended
            && at.elapsed() >= Duration::from_secs(1)
        {
            let _ = ws.close(None).await;
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(20), changed).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_stripped_only_at_line_starts() {
        assert_eq!(
            strip(b"\x01\x01\x01a\x01\x01\x01\n\x02\x02\x02b\n"),
            b"a\x01\x01\x01\nb\n".to_vec()
        );
    }

    #[test]
    fn split_is_asked_by_a_new_sdk_or_the_header() {
        let mut h = HeaderMap::new();
        assert!(!split_asked(&h));
        h.insert("x-daytona-split-output", "true".parse().unwrap());
        assert!(split_asked(&h));
        h.insert("x-daytona-sdk-version", "0.166.9".parse().unwrap());
        assert!(!split_asked(&h));
        h.insert("x-daytona-sdk-version", "0.230.0".parse().unwrap());
        assert!(split_asked(&h));
    }

    #[test]
    fn a_multipart_body_gives_its_file_part() {
        let body = b"--XX\r\ncontent-disposition: form-data; name=\"other\"\r\n\r\nno\r\n--XX\r\ncontent-disposition: form-data; name=\"file\"; filename=\"f\"\r\ncontent-type: application/octet-stream\r\n\r\n\x00bin\r\nary\r\n--XX--\r\n";
        assert_eq!(
            multipart_file("multipart/form-data; boundary=XX", body),
            Some(b"\x00bin\r\nary".to_vec())
        );
    }
}
