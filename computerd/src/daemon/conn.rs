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
mod ports;
mod streams;
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
    ports: Mutex<HashMap<String, Arc<ports::PortSlot>>>,
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
        ports: Mutex::new(HashMap::new()),
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

    /// Pulls, pushes and port connections still open when the connection
    /// ends are ended with it.
    fn end_streams(&self) {
        for (_, slot) in lock(&self.ports).drain() {
            slot.close();
        }
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

/// Work that blocks, on the blocking pool. Every call runs as the same
/// task type (the work and its result boxed), so the runtime's task code
/// is not copied per call site (a copy is some 2 KiB of the static daemon).
async fn blocking<T, F>(f: F) -> Result<T, RpcError>
where
    F: FnOnce() -> Result<T, RpcError> + Send + 'static,
    T: Send + 'static,
{
    let work: BlockingWork = Box::new(move || Box::new(f()));
    run_blocking(work)
        .await?
        .downcast::<Result<T, RpcError>>()
        .map_err(|_| RpcError::invalid("the call's result was lost inside the daemon (a bug)"))
        .and_then(|r| *r)
}

type BlockingWork = Box<dyn FnOnce() -> Box<dyn std::any::Any + Send> + Send>;

async fn run_blocking(work: BlockingWork) -> Result<Box<dyn std::any::Any + Send>, RpcError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RpcError::invalid(format!("the call failed inside the daemon: {e}")))
}

/// A method whose work blocks (the file system's calls), run on the
/// blocking pool once its params are read. A macro, not a generic async
/// fn: inline in the dispatch future as written out by hand, where a fn
/// of its own per method cost the static daemon some 14 KiB.
macro_rules! on_blocking {
    ($params:expr, $work:path) => {{
        let p = decode_params($params)?;
        to_value(blocking(move || $work(p)).await)
    }};
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
        Some(Method::PortWrite) => {
            let p = decode_params_with_bytes(params, bytes)?;
            to_value(conn.port_write(p).await).map(|v| (v, None))
        }
        Some(Method::PortRead) if bytes.is_none() => frame::answer(
            conn.port_read(decode_params(params)?, cancel).await,
            reply_bytes,
        ),
        Some(Method::FilesRead) if bytes.is_none() => {
            let p = decode_params(params)?;
            frame::answer(blocking(move || files::read(p)).await, reply_bytes)
        }
        _ if bytes.is_some() => Err(RpcError::invalid_field(
            "bytes",
            format!(
                "{m} takes no bytes frame (only {}, {} and {} do); its bytes were read and dropped",
                Method::FilesWrite.as_str(),
                Method::TarPushWrite.as_str(),
                Method::PortWrite.as_str()
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
        Method::FilesRead => on_blocking!(params, files::read),
        Method::FilesWrite => on_blocking!(params, files::write),
        Method::FilesStat => on_blocking!(params, files::stat),
        Method::FilesList => on_blocking!(params, files::list),
        Method::FilesMkdir => on_blocking!(params, files::mkdir),
        Method::FilesMove => on_blocking!(params, files::move_),
        Method::FilesRemove => on_blocking!(params, files::remove),
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
        Method::PortConnect => to_value(conn.port_connect(decode_params(params)?).await),
        Method::PortRead => to_value(conn.port_read(decode_params(params)?, cancel).await),
        Method::PortWrite => to_value(conn.port_write(decode_params(params)?).await),
        Method::PortClose => to_value(Ok(conn.port_close(decode_params(params)?))),
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
        Method::AppsList | Method::AppsLaunch | Method::AppsTerminate | Method::AppsOpenUrl => {
            Err(no_apps(m, Group::Apps))
        }
        Method::ScreenOrientation => Err(RpcError::unsupported(format!(
            "{m} is answered by a phone's provider, not by computerd: a desktop's screen has no orientation to set"
        ))),
        Method::AppsInstall => Err(no_apps(m, Group::AppsInstall)),
        Method::AppsUiTree => Err(no_apps(m, Group::AppsUiTree)),
    }
}

/// The refusal of an apps method: a phone's provider answers them in its
/// own process, and no computerd computer has apps.
fn no_apps(m: &str, group: Group) -> RpcError {
    RpcError::unsupported(format!(
        "{m} is answered by a phone's provider, not by computerd: this computer declares no {group}"
    ))
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
