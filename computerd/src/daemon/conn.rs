//! One connection: lines in, replies out, in any order.
//!
//! Every request runs at once in its own task. A line over 1 MiB gets an
//! error reply and the connection goes on. `$/cancelRequest` cancels a
//! request by id. When the input ends, the connection's exec.run calls and
//! waits are cancelled (never its processes), its tar pulls and pushes are
//! ended, every request still running gets its reply, and then the
//! connection closes.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{Daemon, exec, files, tar};

mod frame;
use crate::client::{LineRead, read_bounded_line};
use crate::protocol::{
    self, CancelParams, DeadlineExtendParams, DeadlineExtendResult, Empty, Envelope, Group,
    HelloResult, Id, MachineKind, Method, RpcError, TarStreamId, decode_params,
    decode_params_with_bytes, limits, method,
};

struct Conn {
    daemon: Arc<Daemon>,
    inflight: Mutex<HashMap<Id, Inflight>>,
    pulls: Mutex<HashMap<String, Arc<PullSlot>>>,
    pushes: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<tar::Push>>>>>,
    /// The one screen.shot this connection holds: its id and PNG.
    shot: Mutex<Option<(String, Arc<Vec<u8>>)>>,
    /// The connection's screen.watch, and its newest frame held for screen.read.
    watch: super::x11::watch::Watch,
    frame: Mutex<Option<(String, Arc<Vec<u8>>)>>,
}

/// An open pull, and how far it has gone: the bytes returned so far and
/// whether it is done (its end read, failed or ended), watched by reads
/// sent ahead with an `offset`.
struct PullSlot {
    pull: tokio::sync::Mutex<Option<tar::Pull>>,
    at: tokio::sync::watch::Sender<(u64, bool)>,
}

impl PullSlot {
    /// Wake every read waiting ahead: the pull goes no further.
    fn finish(&self) {
        self.at.send_modify(|(_, done)| *done = true);
    }
}

struct Inflight {
    cancel: CancellationToken,
    /// Cancelled when the input ends (runs and waits; never a start).
    on_eof: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One message for the writer: a line, and the bytes frame after it.
struct Out {
    line: String,
    bytes: Option<Vec<u8>>,
}

impl Out {
    fn line(line: String) -> Self {
        Self { line, bytes: None }
    }
}

/// A reply's result and the bytes that follow its line, when it sends them
/// as a frame.
type Answer = (Value, Option<Vec<u8>>);

pub async fn serve(daemon: Arc<Daemon>, stream: UnixStream) {
    let stream = match crate::quiet::QuietStream::from_tokio(stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("a connection could not be set up: {e}");
            return;
        }
    };
    let (read, write) = stream.into_split();
    let (out, out_rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(write_out(write, out_rx));

    let conn = Arc::new(Conn {
        daemon,
        inflight: Mutex::new(HashMap::new()),
        pulls: Mutex::new(HashMap::new()),
        pushes: Mutex::new(HashMap::new()),
        shot: Mutex::new(None),
        watch: Default::default(),
        frame: Mutex::new(None),
    });
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::with_capacity(256 * 1024, read);
    let mut line = Vec::with_capacity(4096);
    let send = |id: Option<Id>, e: RpcError| {
        let _ = out.send(Out::line(Envelope::reply(id, Err(e)).to_line()));
    };
    loop {
        line.clear();
        match read_bounded_line(&mut reader, &mut line, limits::MAX_LINE_BYTES as usize).await {
            Ok(LineRead::Eof) | Err(_) => break,
            Ok(LineRead::TooLong) => {
                let e = RpcError::limit(format!(
                    "a line was longer than {} bytes (1 MiB) and was dropped; send less per call (files and tar take chunks of 512 KiB)",
                    limits::MAX_LINE_BYTES
                ));
                send(None, e);
                continue;
            }
            Ok(LineRead::Line) => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let env: Envelope = match serde_json::from_slice(&line) {
            Ok(env) => env,
            Err(e) => {
                if let Some(why) = frame::unreadable_count(&line) {
                    // Bytes may follow that cannot be counted: nothing after
                    // this line can be read in step, so the connection ends.
                    send(None, RpcError::invalid(why).with_field("bytes"));
                    break;
                }
                let err = RpcError::invalid(format!("the line is not a JSON-RPC message: {e}"))
                    .with_code(protocol::PARSE_ERROR);
                send(None, err);
                continue;
            }
        };
        // A frame's bytes are read before anything else is decided, so
        // whatever becomes of the message the stream stays in step.
        let bytes = match env.bytes {
            None => None,
            Some(n) => match frame::read(&mut reader, n).await {
                Ok(b) => Some(b),
                Err(why) => {
                    send(env.id.clone(), why.with_field("bytes"));
                    break;
                }
            },
        };
        let Some(m) = env.method.clone() else {
            // A reply from the client: nothing is ever asked of it.
            continue;
        };
        if m == method::CANCEL_REQUEST {
            if let Ok(c) = decode_params::<CancelParams>(env.params)
                && let Some(f) = lock(&conn.inflight).get(&c.id)
            {
                f.cancel.cancel();
            }
            continue;
        }
        let Some(id) = env.id else { continue }; // a notification we do not know
        if env.jsonrpc != "2.0" {
            let err =
                RpcError::invalid("jsonrpc must be \"2.0\"").with_code(protocol::INVALID_REQUEST);
            send(Some(id), err);
            continue;
        }
        let Some(cancel) = conn.admit(&id, &m) else {
            let err = RpcError::invalid(format!(
                "id {id} is already in use by a request still running"
            ));
            send(Some(id), err);
            continue;
        };
        let frame = frame::Frame {
            bytes,
            reply_bytes: env.reply_bytes == Some(true),
        };
        let call = Call {
            id,
            method: m,
            params: env.params,
            frame,
            cancel,
        };
        tasks.spawn(answer(Arc::clone(&conn), call, out.clone()));
        // Reap finished tasks so the set does not grow with the connection's age.
        while tasks.try_join_next().is_some() {}
    }

    for f in lock(&conn.inflight).values() {
        if f.on_eof {
            f.cancel.cancel();
        }
    }
    while tasks.join_next().await.is_some() {}
    conn.end_streams();
    drop(out);
    let _ = writer.await;
}

/// The connection's writer: every reply and event line in the order sent,
/// what is already queued gathered into one write.
async fn write_out(mut write: crate::quiet::QuietWrite, mut out_rx: mpsc::UnboundedReceiver<Out>) {
    let mut buf = Vec::with_capacity(256 * 1024);
    while let Some(first) = out_rx.recv().await {
        buf.clear();
        let mut next = Some(first);
        // Gather what is already queued into one write; a frame's bytes
        // go out as they are, after the lines before them.
        while let Some(msg) = next.take() {
            buf.extend_from_slice(msg.line.as_bytes());
            buf.push(b'\n');
            if let Some(bytes) = msg.bytes {
                if bytes.len() <= 64 * 1024 {
                    buf.extend_from_slice(&bytes);
                } else {
                    if write.write_all(&buf).await.is_err()
                        || write.write_all(&bytes).await.is_err()
                    {
                        return;
                    }
                    buf.clear();
                }
            }
            if buf.len() < 256 * 1024 {
                next = out_rx.try_recv().ok();
            }
        }
        if !buf.is_empty() && write.write_all(&buf).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// A request admitted to run: its id, method, params, frame and cancel.
struct Call {
    id: Id,
    method: String,
    params: Option<Value>,
    frame: frame::Frame,
    cancel: CancellationToken,
}

/// Run one call and send its reply, whatever becomes of it.
async fn answer(conn: Arc<Conn>, call: Call, out: mpsc::UnboundedSender<Out>) {
    let Call {
        id,
        method: m,
        params,
        frame,
        cancel,
    } = call;
    // A bug in one method must cost that call, not the connection.
    let outcome = AssertUnwindSafe(dispatch_framed(&conn, &m, params, frame, cancel))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            Err(RpcError::invalid(format!(
                "{m} failed inside the daemon (a bug); the daemon goes on"
            )))
        });
    lock(&conn.inflight).remove(&id);
    let msg = match outcome {
        Ok((result, bytes)) => {
            let mut env = Envelope::reply(Some(id), Ok(result));
            env.bytes = bytes.as_ref().map(|b| b.len() as u64);
            Out {
                line: env.to_line(),
                bytes,
            }
        }
        Err(e) => Out::line(Envelope::reply(Some(id), Err(e)).to_line()),
    };
    let _ = out.send(msg);
}

impl Conn {
    /// Register a request under `id` as in flight: its cancel token, or
    /// None when a request still running has that id.
    fn admit(&self, id: &Id, method: &str) -> Option<CancellationToken> {
        let mut inflight = lock(&self.inflight);
        if inflight.contains_key(id) {
            return None;
        }
        let cancel = CancellationToken::new();
        let on_eof = Method::from_name(method) != Some(Method::ProcessStart);
        inflight.insert(
            id.clone(),
            Inflight {
                cancel: cancel.clone(),
                on_eof,
            },
        );
        Some(cancel)
    }

    /// Pulls and pushes still open when the connection ends are ended with it.
    fn end_streams(&self) {
        for (_, slot) in lock(&self.pulls).drain() {
            slot.finish();
            if let Ok(mut p) = slot.pull.try_lock() {
                p.take();
            }
        }
        for (_, push) in lock(&self.pushes).drain() {
            if let Ok(mut p) = push.try_lock()
                && let Some(p) = p.take()
            {
                p.abort();
            }
        }
    }
}

fn to_value<T: Serialize>(r: Result<T, RpcError>) -> Result<Value, RpcError> {
    r.and_then(|v| {
        serde_json::to_value(v)
            .map_err(|e| RpcError::invalid(format!("the reply could not be encoded: {e}")))
    })
}

async fn blocking<T, F>(f: F) -> Result<T, RpcError>
where
    F: FnOnce() -> Result<T, RpcError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(RpcError::invalid(format!(
            "the call failed inside the daemon: {e}"
        )))
    })
}

/// One request with its bytes frame, if it came with one: the methods
/// whose `data` may travel as a frame are answered here, every other one by
/// [`dispatch`] (which takes no frame).
async fn dispatch_framed(
    conn: &Arc<Conn>,
    m: &str,
    params: Option<Value>,
    frame: frame::Frame,
    cancel: CancellationToken,
) -> Result<Answer, RpcError> {
    let frame::Frame { bytes, reply_bytes } = frame;
    match Method::from_name(m) {
        Some(Method::TarPushWrite) => {
            let p = decode_params_with_bytes(params, bytes)?;
            to_value(conn.push_write(p).await).map(|v| (v, None))
        }
        Some(Method::FilesWrite) => {
            let p = decode_params_with_bytes(params, bytes)?;
            to_value(blocking(move || files::write(p)).await).map(|v| (v, None))
        }
        Some(Method::TarPullRead) if bytes.is_none() => frame::answer(
            conn.pull_read(decode_params(params)?, cancel).await,
            reply_bytes,
        ),
        Some(Method::FilesRead) if bytes.is_none() => {
            let p = decode_params(params)?;
            frame::answer(blocking(move || files::read(p)).await, reply_bytes)
        }
        _ if bytes.is_some() => Err(RpcError::invalid_field(
            "bytes",
            format!(
                "{m} takes no bytes frame (only {} and {} do); its bytes were read and dropped",
                Method::FilesWrite.as_str(),
                Method::TarPushWrite.as_str()
            ),
        )),
        _ => dispatch(conn, m, params, cancel).await.map(|v| (v, None)),
    }
}

/// One request. The match is over every [`Method`]: a method added to the
/// table does not compile until it is answered here.
async fn dispatch(
    conn: &Arc<Conn>,
    m: &str,
    params: Option<Value>,
    cancel: CancellationToken,
) -> Result<Value, RpcError> {
    let d = &conn.daemon;
    match m.parse::<Method>()? {
        Method::Hello => {
            let p: protocol::HelloParams = decode_params(params)?;
            tracing::info!(client = p.client.as_deref().unwrap_or("(unnamed)"), "hello");
            to_value(Ok(hello_with(d.display.groups().await)))
        }
        Method::Ping => {
            let _: protocol::PingParams = decode_params(params)?;
            to_value(Ok(Empty {}))
        }
        Method::ExecRun => to_value(exec::run(d, decode_params(params)?, cancel).await),
        Method::FilesRead => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::read(p)).await)
        }
        Method::FilesWrite => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::write(p)).await)
        }
        Method::FilesStat => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::stat(p)).await)
        }
        Method::FilesList => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::list(p)).await)
        }
        Method::FilesMkdir => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::mkdir(p)).await)
        }
        Method::FilesMove => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::move_(p)).await)
        }
        Method::FilesRemove => {
            let p = decode_params(params)?;
            to_value(blocking(move || files::remove(p)).await)
        }
        Method::TarPullBegin => to_value(conn.pull_begin(decode_params(params)?).await),
        Method::TarPullRead => to_value(conn.pull_read(decode_params(params)?, cancel).await),
        Method::TarPullEnd => to_value(conn.pull_end(decode_params(params)?).await),
        Method::TarPushBegin => to_value(conn.push_begin(decode_params(params)?).await),
        Method::TarPushWrite => to_value(conn.push_write(decode_params(params)?).await),
        Method::TarPushEnd => to_value(conn.push_end(decode_params(params)?).await),
        Method::ProcessStart => {
            to_value(d.processes.start(d, decode_params(params)?, cancel).await)
        }
        Method::ProcessRead => to_value(d.processes.read(decode_params(params)?, cancel).await),
        Method::ProcessWrite => to_value(d.processes.write(decode_params(params)?, cancel).await),
        Method::ProcessSignal => to_value(d.processes.signal(decode_params(params)?).await),
        Method::ProcessResize => to_value(d.processes.resize(decode_params(params)?)),
        Method::ProcessList => to_value(d.processes.list(decode_params(params)?)),
        Method::ProcessWait => to_value(d.processes.wait(decode_params(params)?, cancel).await),
        Method::DeadlineExtend => {
            let p: DeadlineExtendParams = decode_params(params)?;
            to_value(
                d.life
                    .deadline
                    .extend(&p.at)
                    .map(|at| DeadlineExtendResult { at }),
            )
        }
        Method::ScreenShot => to_value(conn.screen_shot(decode_params(params)?, cancel).await),
        Method::ScreenRead => to_value(conn.screen_read(decode_params(params)?)),
        Method::ScreenWatch => {
            let (r, held) = conn
                .watch
                .next(&d.display, decode_params(params)?, &cancel, || {
                    format!("w{}", d.stream_id())
                })
                .await?;
            if r.changed {
                *lock(&conn.frame) = held;
            }
            to_value(Ok(r))
        }
        Method::InputActions => {
            let p: RawActions = decode_params(params)?;
            to_value(d.display.actions(p.actions, cancel).await)
        }
        Method::CdpSend | Method::CdpEvents => Err(RpcError::unsupported(format!(
            "{m} is answered by a browser's provider, not by computerd: this computer declares no cdp"
        ))),
    }
}

/// input.actions' params as they come: each action is decoded by the
/// batch's check, so a bad one fails at its own index.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawActions {
    actions: Vec<Value>,
}

/// hello without a display: kind linux, exec, files and processes.
pub fn hello() -> HelloResult {
    hello_with(Vec::new())
}

/// hello, with the display's groups (kind desktop when there are any).
pub fn hello_with(display: Vec<Group>) -> HelloResult {
    let kind = if display.is_empty() {
        MachineKind::Linux
    } else {
        MachineKind::Desktop
    };
    let mut groups = vec![Group::Exec, Group::Files, Group::Processes];
    groups.extend(display);
    HelloResult {
        version: crate::reported_version(),
        os: "linux".into(),
        kind,
        arch: match std::env::consts::ARCH {
            "x86_64" => "amd64".into(),
            "aarch64" => "arm64".into(),
            other => other.into(),
        },
        groups,
        bytes_frames: Some(limits::MAX_FRAME_BYTES),
    }
}

type Slot<T> = Arc<tokio::sync::Mutex<Option<T>>>;

/// A pipelined tar.pull.read's `offset` against the `at` bytes returned:
/// never a repeat, and at most [`limits::MAX_PULL_AHEAD_BYTES`] ahead.
fn check_pull_offset(offset: u64, at: u64) -> Result<(), RpcError> {
    if offset < at {
        return Err(RpcError::invalid(format!(
            "offset {offset}: the pull has returned {at} bytes already, so this read would repeat some"
        ))
        .with_field("offset"));
    }
    if offset - at > limits::MAX_PULL_AHEAD_BYTES {
        return Err(RpcError::invalid(format!(
            "offset {offset} is {} bytes past the {at} returned, over the {} a read may wait ahead",
            offset - at,
            limits::MAX_PULL_AHEAD_BYTES
        ))
        .with_field("offset"));
    }
    Ok(())
}

fn get_slot<T>(
    map: &Mutex<HashMap<String, Slot<T>>>,
    id: &str,
    what: &str,
) -> Result<Slot<T>, RpcError> {
    lock(map).get(id).cloned().ok_or_else(|| {
        RpcError::not_found(format!(
            "no tar {what} {id:?} is open on this connection (it ended, or never began here)"
        ))
        .with_field("id")
    })
}

impl Conn {
    async fn screen_shot(
        &self,
        p: protocol::ScreenShotParams,
        cancel: CancellationToken,
    ) -> Result<protocol::ScreenShotResult, RpcError> {
        let shot = self.daemon.display.shot(p.region, &cancel).await?;
        let id = format!("s{}", self.daemon.stream_id());
        let png = Arc::new(shot.png);
        let first = png.len().min(limits::MAX_CHUNK_BYTES as usize);
        let eof = first == png.len();
        *lock(&self.shot) = if eof {
            None
        } else {
            Some((id.clone(), Arc::clone(&png)))
        };
        Ok(protocol::ScreenShotResult {
            id,
            format: protocol::ImageFormat::Png,
            data: protocol::Bytes64(png[..first].to_vec()),
            size: png.len() as u64,
            eof,
            width: shot.width,
            height: shot.height,
            screen_width: shot.screen_width,
            screen_height: shot.screen_height,
            scale: 1.0,
            cursor: shot.cursor,
        })
    }

    fn screen_read(
        &self,
        p: protocol::ScreenReadParams,
    ) -> Result<protocol::ScreenReadResult, RpcError> {
        let max = super::check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let slot = if p.id.starts_with('w') {
            &self.frame
        } else {
            &self.shot
        };
        let mut held = lock(slot);
        let png = match held.as_ref() {
            Some((id, png)) if *id == p.id => Arc::clone(png),
            _ => {
                return Err(RpcError::not_found(format!(
                    "no shot or frame {:?} is held on this connection (it was read to its end, or a later one replaced it)",
                    p.id
                ))
                .with_field("id"));
            }
        };
        if p.offset > png.len() as u64 {
            return Err(RpcError::invalid_field(
                "offset",
                format!("offset {} is past the shot's {} bytes", p.offset, png.len()),
            ));
        }
        let from = p.offset as usize;
        let to = from.saturating_add(max as usize).min(png.len());
        let eof = to == png.len();
        if eof {
            *held = None;
        }
        Ok(protocol::ScreenReadResult {
            data: protocol::Bytes64(png[from..to].to_vec()),
            eof,
        })
    }

    async fn pull_begin(&self, p: protocol::TarPullBeginParams) -> Result<TarStreamId, RpcError> {
        if lock(&self.pulls).len() >= limits::MAX_PULLS_PER_CONNECTION {
            return Err(RpcError::limit(format!(
                "{} tar pulls are already open on this connection; end one first",
                limits::MAX_PULLS_PER_CONNECTION
            )));
        }
        let pull = blocking(move || tar::Pull::begin(&p.path)).await?;
        let mut pulls = lock(&self.pulls);
        if pulls.len() >= limits::MAX_PULLS_PER_CONNECTION {
            return Err(RpcError::limit(format!(
                "{} tar pulls are already open on this connection; end one first",
                limits::MAX_PULLS_PER_CONNECTION
            )));
        }
        let id = self.daemon.stream_id();
        pulls.insert(
            id.clone(),
            Arc::new(PullSlot {
                pull: tokio::sync::Mutex::new(Some(pull)),
                at: tokio::sync::watch::Sender::new((0, false)),
            }),
        );
        Ok(TarStreamId { id })
    }

    async fn pull_read(
        &self,
        p: protocol::TarPullReadParams,
        cancel: CancellationToken,
    ) -> Result<protocol::TarPullReadResult, RpcError> {
        let max = super::check::one_to(
            "maxBytes",
            p.max_bytes.unwrap_or(limits::MAX_CHUNK_BYTES),
            limits::MAX_CHUNK_BYTES,
        )?;
        let slot = lock(&self.pulls).get(&p.id).cloned().ok_or_else(|| {
            RpcError::not_found(format!(
                "no tar pull {:?} is open on this connection (it ended, or never began here)",
                p.id
            ))
            .with_field("id")
        })?;
        let ended =
            || RpcError::not_found(format!("tar pull {:?} has ended", p.id)).with_field("id");
        if let Some(offset) = p.offset {
            let (at, done) = *slot.at.borrow();
            check_pull_offset(offset, at)?;
            if offset > at && !done {
                // The reads before it are still on their way: wait for them
                // without holding the pull.
                let mut progress = slot.at.subscribe();
                tokio::select! {
                    r = progress.wait_for(|&(a, d)| a >= offset || d) => {
                        if r.is_err() {
                            return Err(ended());
                        }
                    }
                    _ = cancel.cancelled() => {
                        return Err(RpcError::aborted(format!(
                            "tar.pull.read at offset {offset} was cancelled while it waited for the reads before it"
                        )));
                    }
                }
            }
        }
        let mut guard = slot.pull.lock().await;
        if let Some(offset) = p.offset {
            // Past the end or a failure, a read ahead reads on: it gets
            // the end (no bytes, eof) or the failure again.
            check_pull_offset(offset, slot.at.borrow().0)?;
        }
        let Some(mut pull) = guard.take() else {
            return Err(ended());
        };
        let (pull, r) = tokio::task::spawn_blocking(move || {
            let r = pull.read(max as usize);
            (pull, r)
        })
        .await
        .map_err(|e| RpcError::invalid(format!("the pull failed inside the daemon: {e}")))?;
        *guard = Some(pull);
        let r = r.inspect_err(|_| slot.finish());
        let (data, eof) = r?;
        slot.at.send_modify(|(at, done)| {
            *at += data.len() as u64;
            *done |= eof;
        });
        Ok(protocol::TarPullReadResult {
            data: protocol::Bytes64(data),
            eof,
        })
    }

    async fn pull_end(&self, p: protocol::TarPullEndParams) -> Result<Empty, RpcError> {
        // Ending twice is fine: the second finds nothing and says nothing.
        let slot = lock(&self.pulls).remove(&p.id);
        if let Some(slot) = slot {
            slot.finish();
            slot.pull.lock().await.take();
        }
        Ok(Empty {})
    }

    async fn push_begin(&self, p: protocol::TarPushBeginParams) -> Result<TarStreamId, RpcError> {
        if lock(&self.pushes).len() >= limits::MAX_PUSHES_PER_CONNECTION {
            return Err(RpcError::limit(format!(
                "{} tar pushes are already open on this connection; end one first",
                limits::MAX_PUSHES_PER_CONNECTION
            )));
        }
        let push = blocking(move || tar::Push::begin(&p.path)).await?;
        let mut pushes = lock(&self.pushes);
        if pushes.len() >= limits::MAX_PUSHES_PER_CONNECTION {
            push.abort();
            return Err(RpcError::limit(format!(
                "{} tar pushes are already open on this connection; end one first",
                limits::MAX_PUSHES_PER_CONNECTION
            )));
        }
        let id = self.daemon.stream_id();
        pushes.insert(id.clone(), Arc::new(tokio::sync::Mutex::new(Some(push))));
        Ok(TarStreamId { id })
    }

    async fn push_write(&self, p: protocol::TarPushWriteParams) -> Result<Empty, RpcError> {
        if p.data.len() as u64 > limits::MAX_WRITE_BYTES {
            return Err(RpcError::over_limit(
                "data",
                p.data.len() as u64,
                limits::MAX_WRITE_BYTES,
            ));
        }
        let slot = get_slot(&self.pushes, &p.id, "push")?;
        let ended =
            || RpcError::not_found(format!("tar push {:?} has ended", p.id)).with_field("id");
        let mut data = Some(p.data.into_inner());
        let sent = loop {
            let mut guard = slot.lock().await;
            let push = guard.as_mut().ok_or_else(ended)?;
            if let Some(offset) = p.offset {
                let at = push.received();
                if offset < at {
                    return Err(RpcError::invalid(format!(
                        "offset {offset}: the push has {at} bytes already, so this write would repeat some"
                    ))
                    .with_field("offset"));
                }
                if offset - at > limits::MAX_PUSH_AHEAD_BYTES {
                    return Err(RpcError::invalid(format!(
                        "offset {offset} is {} bytes past the {at} received, over the {} a write may wait ahead",
                        offset - at,
                        limits::MAX_PUSH_AHEAD_BYTES
                    ))
                    .with_field("offset"));
                }
                if offset > at {
                    // The writes before it are still on their way: wait for
                    // them without holding the push.
                    let mut progress = push.progress();
                    drop(guard);
                    if progress.wait_for(|&r| r >= offset).await.is_err() {
                        return Err(ended());
                    }
                    continue;
                }
            }
            break push.send(data.take().unwrap_or_default()).await;
        };
        // Waited for outside the lock, so the next write can go on to the
        // extractor while this one's bytes are used.
        match sent {
            tar::push::Sent::Done(r) => r.map(|()| Empty {}),
            tar::push::Sent::Waiting(w) => {
                if w.consumed().await {
                    return Ok(Empty {});
                }
                match slot.lock().await.as_mut() {
                    Some(push) => push.settle().await.map(|_| Empty {}),
                    None => Err(ended()),
                }
            }
        }
    }

    async fn push_end(
        &self,
        p: protocol::TarPushEndParams,
    ) -> Result<protocol::TarPushEndResult, RpcError> {
        let slot = lock(&self.pushes).remove(&p.id).ok_or_else(|| {
            RpcError::not_found(format!("no tar push {:?} is open on this connection", p.id))
                .with_field("id")
        })?;
        let push = slot.lock().await.take();
        match push {
            Some(push) => push
                .end()
                .await
                .map(|entries| protocol::TarPushEndResult { entries }),
            None => {
                Err(RpcError::not_found(format!("tar push {:?} has ended", p.id)).with_field("id"))
            }
        }
    }
}
