//! One viewer's WebSocket: the token first, then frames pulled by the
//! page's acks and, under the control lease, the page's input.
//!
//! The page says, as JSON text: `{"token"}` (first), `{"type":"ack","seq"}`
//! once a frame is drawn, `{"type":"control","on"}` to take or give back
//! control, `{"type":"input","id","event"}`. The server says, as JSON
//! text: `hello` (the computer's name, kind, deadline, the link's end),
//! `control`, `waiting` (a take waits for the model's input batch in
//! flight), `asked` (the model's takeover request: its reason, or null
//! once it ended), `input` (each input's outcome by id), `refused` and `ended`
//! (in words, then the socket closes); and each frame as one binary
//! message: a 4-byte big-endian length, that much JSON
//! (`seq`, `format`, `width`, `height`, `frameWidth`, `frameHeight`), the
//! image (a desktop's JPEG, a phone's PNG).
//!
//! The view reads the computer on a connection of its own (`screen.watch`
//! is one per connection, and a view's end closes only its own). A
//! browser with no X display answers the same calls by casting its front
//! tab over CDP (`computer_providers::cdp::cast`); a computer's own
//! browser (local, Docker) is cast on the model's client, since a second
//! connection would start a second browser and end the model's.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use computer_tools::fleet::Which;
use computerd::client::ComputerClient;
use computerd::protocol::{
    Action, Call, Group, InputActionsParams, ScreenReadParams, ScreenWatchParams,
};

use super::control::{Ask, TAKE_WAIT};
use super::grants::{Grant, rfc3339};
use super::map::{Mapper, event_of};
use super::redact;
use crate::app::{App, Entry};

/// The most inputs a view has sent and not heard back about.
pub const MAX_IN_FLIGHT: usize = 8;
/// The largest message a page may send (a text of 65,536 characters fits).
const MAX_MESSAGE: usize = 1 << 20;
/// The largest frame read (a 1280-wide JPEG is far below).
const MAX_FRAME: u64 = 64 << 20;
/// How long the page has to send its token.
const TOKEN_WAIT: Duration = Duration::from_secs(10);
/// How long one screen.watch waits for a change before asking again.
const WATCH_WAIT_MS: u64 = 2_000;

pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

type Io = hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>;

fn say(v: Value) -> Message {
    Message::text(v.to_string())
}

/// A typed call on a view's connection; failures in words the page may
/// read ([`redact::words`]: no URL, secret, endpoint or host path).
async fn call<P: Call>(client: &dyn ComputerClient, p: &P) -> Result<P::Result, String>
where
    P::Result: DeserializeOwned,
{
    let params = serde_json::to_value(p).map_err(|e| e.to_string())?;
    let v = client
        .call_value(P::METHOD.as_str(), params)
        .await
        .map_err(|e| redact::words(&e.to_string()))?;
    serde_json::from_value(v)
        .map_err(|e| format!("{}'s reply could not be read: {e}", P::METHOD.as_str()))
}

/// What a view opened with: the computer, the link's grant and the view's
/// own connection.
struct Opened {
    entry: Arc<Entry>,
    grant: Grant,
    client: Arc<dyn ComputerClient>,
    /// A touch screen with no pointer (a phone).
    touch: bool,
    /// The model's own client (a computer's own browser), not closed at
    /// the view's end: its cast is stopped instead.
    shared: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct First {
    token: String,
}

async fn open(
    app: &Arc<App>,
    handle: &str,
    stream: &mut futures::stream::SplitStream<WebSocketStream<Io>>,
) -> Result<Opened, String> {
    let first = tokio::time::timeout(TOKEN_WAIT, stream.next())
        .await
        .map_err(|_| "the page sent no token within 10 s".to_string())?;
    let Some(Ok(Message::Text(text))) = first else {
        return Err("the page's first message is not its link's token".into());
    };
    let first: First = serde_json::from_str(&text)
        .map_err(|_| "the page's first message is not its link's token".to_string())?;
    let grant = app.views.grants.check(&first.token, handle)?;
    let entry = app
        .find(&grant.principal, &Which::Handle(handle.to_string()))
        .await
        .map_err(|_| "this computer is gone: it was released, or reached its end".to_string())?;
    // A computer's own browser lives on the model's connection (a second
    // would end it): its view is cast on the model's client, and ends by
    // stopping the cast, never by closing that client.
    if super::on_models_client(app) {
        let hello: computerd::protocol::HelloResult = entry
            .client
            .call_value("hello", Value::Null)
            .await
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| "the computer's browser could not be reached".to_string())?;
        if !computer_providers::cdp::casts(&hello) {
            return Err(no_screen(&entry));
        }
        return Ok(Opened {
            client: Arc::clone(&entry.client),
            entry,
            grant,
            touch: false,
            shared: true,
        });
    }
    let cancel = CancellationToken::new();
    let conn = app
        .provider
        .connect(&entry.computer, &cancel)
        .await
        .map_err(|e| format!("the computer could not be reached ({:?})", e.code))?;
    // A browser with no X display shows its front tab, cast over CDP (its
    // client answers screen.watch and input.actions so).
    let cast = computer_providers::cdp::casts(&conn.hello);
    if !conn.hello.groups.contains(&Group::Screen) && !cast {
        conn.client.close();
        return Err(no_screen(&entry));
    }
    let groups = &conn.hello.groups;
    let touch = groups.contains(&Group::InputTouch) && !groups.contains(&Group::InputPointer);
    Ok(Opened {
        entry,
        grant,
        client: conn.client,
        touch,
        shared: false,
    })
}

/// Why `entry` cannot be viewed, in words.
fn no_screen(entry: &Entry) -> String {
    format!(
        "this computer ({}) has no screen to view",
        entry.kind.as_str()
    )
}

/// Serve one view until the page leaves, the link ends or the computer goes.
pub async fn run(app: Arc<App>, handle: String, id: u64, ws: WebSocketStream<Io>) {
    let (mut sink, mut stream) = ws.split();
    let opened = match open(&app, &handle, &mut stream).await {
        Ok(o) => o,
        Err(why) => {
            let _ = sink
                .send(say(json!({"type": "refused", "message": why})))
                .await;
            let _ = sink.close().await;
            return;
        }
    };
    let (out, mut out_rx) = mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if sink.send(m).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let summary = opened.entry.summary(false);
    let _ = out
        .send(say(json!({
            "type": "hello",
            "name": opened.entry.label(),
            "kind": summary.kind,
            "deadline": summary.deadline,
            "expires": rfc3339(opened.grant.expires),
        })))
        .await;
    let view = View {
        app: Arc::clone(&app),
        handle,
        id,
        client: Arc::clone(&opened.client),
        out: out.clone(),
        touch: opened.touch,
    };
    let ended = view.serve(&mut stream, &opened.grant).await;
    if let Some(why) = ended {
        let _ = out
            .send(say(json!({"type": "ended", "message": why})))
            .await;
    }
    drop(out);
    if opened.shared {
        let _ = opened
            .client
            .call_value(computer_providers::cdp::STOP_CAST, Value::Null)
            .await;
    } else {
        opened.client.close();
    }
    let _ = writer.await;
}

/// An input batch to send: its id (0 for the give-back's ups, answered
/// by no one), its actions, and its place among those in flight.
type Job = (u64, Vec<Action>, Option<OwnedSemaphorePermit>);

/// A take of control under way: whether the model asked for it, or why
/// it was not taken.
type Taking<'a> = Pin<Box<dyn Future<Output = Result<bool, String>> + Send + 'a>>;

/// What the page's messages act on.
struct State<'a> {
    acked: &'a watch::Sender<u64>,
    mapper: &'a mut Mapper,
    control: &'a mut bool,
    inputs: &'a mpsc::Sender<Job>,
    in_flight: &'a Arc<Semaphore>,
}

struct View {
    app: Arc<App>,
    handle: String,
    id: u64,
    client: Arc<dyn ComputerClient>,
    out: mpsc::Sender<Message>,
    touch: bool,
}

impl View {
    /// The view's loop; why it ended, when the page should be told.
    async fn serve(
        &self,
        stream: &mut futures::stream::SplitStream<WebSocketStream<Io>>,
        grant: &Grant,
    ) -> Option<String> {
        let (acked, acked_rx) = watch::channel(0u64);
        let (size_tx, mut size_rx) = watch::channel((0u32, 0u32));
        let stop = CancellationToken::new();
        let mut pump = tokio::spawn(pump(
            Arc::clone(&self.client),
            self.out.clone(),
            acked_rx,
            size_tx,
            stop.clone(),
        ));
        let (inputs, inputs_rx) = mpsc::channel::<Job>(MAX_IN_FLIGHT + 1);
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let (app, handle) = (Arc::clone(&self.app), self.handle.clone());
        let runner = tokio::spawn(run_inputs(
            Arc::clone(&self.client),
            self.out.clone(),
            inputs_rx,
            move || app.views.control.person_sent(&handle),
        ));
        let mut mapper = if self.touch {
            Mapper::touch(0, 0)
        } else {
            Mapper::new(0, 0)
        };
        let mut control = false;
        let until = grant
            .expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let expiry = tokio::time::sleep(until);
        tokio::pin!(expiry);
        let mut changes = self.app.views.control.subscribe();
        let mut told = None;
        self.tell_ask(&mut told).await;
        // A take waiting for the model's input batch in flight to end.
        let mut taking: Option<Taking<'_>> = None;
        let why = loop {
            tokio::select! {
                m = stream.next() => match m {
                    Some(Ok(Message::Text(t))) => {
                        let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                        if v["type"] == "control" && v["on"] == json!(true) {
                            if taking.is_none() {
                                taking = Some(self.begin_take().await);
                            }
                            continue;
                        }
                        if v["type"] == "control" {
                            // Given back before the take came: it is dropped.
                            taking = None;
                        }
                        let state = State { acked: &acked, mapper: &mut mapper, control: &mut control, inputs: &inputs, in_flight: &in_flight };
                        self.message(v, state).await;
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                    Some(Ok(_)) => {}
                },
                r = async { match &mut taking { Some(f) => f.await, None => std::future::pending().await } } => {
                    taking = None;
                    match r {
                        Ok(asked) => {
                            control = true;
                            self.reply(json!({"type": "control", "on": true, "asked": asked})).await;
                        }
                        Err(why) => {
                            self.reply(json!({"type": "control", "on": false, "message": why})).await;
                        }
                    }
                }
                r = changes.changed() => {
                    if r.is_ok() {
                        self.tell_ask(&mut told).await;
                    }
                }
                r = size_rx.changed() => {
                    if r.is_ok() {
                        let (w, h) = *size_rx.borrow_and_update();
                        mapper.resize(w, h);
                    }
                }
                () = grant.ended.cancelled() => break Some("this link was revoked: the view has ended".to_string()),
                () = &mut expiry => break Some(format!("this link ended at {}: ask for a new one (computer_view)", rfc3339(grant.expires))),
                r = &mut pump => break Some(r.unwrap_or_else(|_| "the view stopped".into())),
            }
        };
        stop.cancel();
        pump.abort();
        if control {
            let ups = mapper.release();
            if !ups.is_empty() {
                let _ = inputs.send((0, ups, None)).await;
            }
            self.app.views.control.give_back(&self.handle, self.id);
        }
        drop(inputs);
        let _ = runner.await;
        why
    }

    /// A take of this computer's control, once the model's input batch in
    /// flight (if one is) has ended; the page is told it waits.
    async fn begin_take(&self) -> Taking<'_> {
        let control = &self.app.views.control;
        if control.inputs_running(&self.handle) > 0 {
            self.reply(json!({
                "type": "waiting",
                "message": format!(
                    "the model's input is running: you get control when it ends (waiting up to {} s)",
                    TAKE_WAIT.as_secs()
                ),
            }))
            .await;
        }
        Box::pin(control.take_when_free(&self.handle, self.id, TAKE_WAIT))
    }

    /// Tell the page of the model's takeover request on this computer
    /// (its reason, shown above the screen), or its end, when it changed
    /// from what the page was last told.
    async fn tell_ask(&self, told: &mut Option<Option<Ask>>) {
        let now = self.app.views.control.ask(&self.handle);
        if told.as_ref() == Some(&now) {
            return;
        }
        let v = match &now {
            Some(a) => json!({"type": "asked", "reason": a.reason, "since": rfc3339(a.since)}),
            None => json!({"type": "asked", "reason": null}),
        };
        *told = Some(now);
        self.reply(v).await;
    }

    async fn reply(&self, v: Value) {
        let _ = self.out.send(say(v)).await;
    }

    /// One message of the page.
    async fn message(&self, v: Value, st: State<'_>) {
        let State {
            acked,
            mapper,
            control,
            inputs,
            in_flight,
        } = st;
        match v["type"].as_str() {
            Some("ack") => {
                let seq = v["seq"].as_u64().unwrap_or(0);
                acked.send_if_modified(|a| {
                    let newer = seq > *a;
                    *a = (*a).max(seq);
                    newer
                });
            }
            Some("control") => {
                if *control {
                    let ups = mapper.release();
                    if !ups.is_empty() {
                        let _ = inputs.send((0, ups, None)).await;
                    }
                    self.app.views.control.give_back(&self.handle, self.id);
                    *control = false;
                }
                self.reply(json!({"type": "control", "on": false})).await;
            }
            Some("input") => {
                let id = v["id"].as_u64().unwrap_or(0);
                let refused = |message: String| json!({"type": "input", "id": id, "ok": false, "message": message});
                if !*control {
                    let words =
                        "take control first: input is sent only while you have control".to_string();
                    return self.reply(refused(words)).await;
                }
                let actions = match event_of(v["event"].clone()).and_then(|e| mapper.map(e)) {
                    Ok(a) => a,
                    Err(why) => return self.reply(refused(why)).await,
                };
                if actions.is_empty() {
                    return self
                        .reply(json!({"type": "input", "id": id, "ok": true}))
                        .await;
                }
                let Ok(permit) = Arc::clone(in_flight).try_acquire_owned() else {
                    let words = format!(
                        "{MAX_IN_FLIGHT} inputs are in flight, the most: wait for one to finish; this one was not sent"
                    );
                    return self.reply(refused(words)).await;
                };
                let _ = inputs.send((id, actions, Some(permit))).await;
            }
            _ => {
                self.reply(json!({"type": "refused", "message": "the page sent a message the viewer does not know; nothing was done"}))
                    .await;
            }
        }
    }
}

/// Send each input batch in order, answering each by its id (0: the
/// give-back's ups, answered by no one); `sent` is told of each of the
/// person's that ran.
async fn run_inputs(
    client: Arc<dyn ComputerClient>,
    out: mpsc::Sender<Message>,
    mut rx: mpsc::Receiver<Job>,
    sent: impl Fn(),
) {
    while let Some((id, actions, permit)) = rx.recv().await {
        let r = call(client.as_ref(), &InputActionsParams { actions }).await;
        // Done: no longer in flight once its answer goes (so the page,
        // counting answers, never finds the server one behind).
        drop(permit);
        if id == 0 {
            continue;
        }
        if r.as_ref().is_ok_and(|d| d.done > 0) {
            sent();
        }
        let v = match r {
            Ok(done) => match done.failed {
                None => json!({"type": "input", "id": id, "ok": true}),
                Some(f) => {
                    json!({"type": "input", "id": id, "ok": false, "message": redact::words(&f.message)})
                }
            },
            Err(why) => json!({"type": "input", "id": id, "ok": false, "message": why}),
        };
        if out.send(say(v)).await.is_err() {
            break;
        }
    }
}

/// The frames: the next asked for only once the page acked the last, and
/// none while nothing changes. Returns why it stopped.
async fn pump(
    client: Arc<dyn ComputerClient>,
    out: mpsc::Sender<Message>,
    mut acked: watch::Receiver<u64>,
    size: watch::Sender<(u32, u32)>,
    stop: CancellationToken,
) -> String {
    let mut after = 0u64;
    loop {
        let params = ScreenWatchParams {
            after,
            wait_ms: Some(WATCH_WAIT_MS),
            max_width: None,
            quality: None,
            regions: true,
        };
        let r = tokio::select! {
            r = call(client.as_ref(), &params) => r,
            () = stop.cancelled() => return String::new(),
        };
        let r = match r {
            Ok(r) => r,
            Err(why) => return format!("the computer's screen could not be read: {why}"),
        };
        let Some(frame) = r.frame.filter(|_| r.changed) else {
            continue;
        };
        if frame.size > MAX_FRAME {
            return format!(
                "a frame of {} bytes is past the most, {MAX_FRAME}",
                frame.size
            );
        }
        let mut bytes = frame.data.0;
        let mut eof = frame.eof;
        while !eof && (bytes.len() as u64) < frame.size {
            let read = ScreenReadParams {
                id: frame.id.clone(),
                offset: bytes.len() as u64,
                max_bytes: None,
            };
            match call(client.as_ref(), &read).await {
                Ok(part) => {
                    eof = part.eof;
                    bytes.extend_from_slice(&part.data.0);
                }
                Err(why) => return format!("a frame could not be read whole: {why}"),
            }
        }
        if bytes.len() as u64 != frame.size {
            // Replaced before it was read whole: ask again for the newest.
            after = r.seq.saturating_sub(1);
            continue;
        }
        size.send_if_modified(|s| {
            let new = (frame.width, frame.height);
            let changed = *s != new;
            *s = new;
            changed
        });
        let meta = json!({
            "seq": r.seq,
            "format": frame.format,
            "width": frame.width,
            "height": frame.height,
            "frameWidth": frame.frame_width,
            "frameHeight": frame.frame_height,
            "region": frame.region,
        })
        .to_string();
        let mut msg = Vec::with_capacity(4 + meta.len() + bytes.len());
        msg.extend_from_slice(&(meta.len() as u32).to_be_bytes());
        msg.extend_from_slice(meta.as_bytes());
        msg.extend_from_slice(&bytes);
        if out.send(Message::binary(msg)).await.is_err() {
            return String::new();
        }
        let seq = r.seq;
        tokio::select! {
            r = acked.wait_for(|a| *a >= seq) => if r.is_err() { return String::new() },
            () = stop.cancelled() => return String::new(),
        }
        after = seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use computerd::client::ClientError;
    use computerd::protocol::RpcError;
    use futures::future::BoxFuture;

    /// The secrets a failing computer's words hold.
    const SECRETS: [&str; 4] = [
        "signingKey=SECRET",
        "/var/lib/computer-mcp",
        "10.0.0.7:4000",
        "0123456789abcdef0123456789abcdef",
    ];

    /// A computer whose input fails in words full of secrets, and whose
    /// screen cannot be read, in such words too.
    struct Leaky;

    impl ComputerClient for Leaky {
        fn call_value<'a>(
            &'a self,
            method: &'a str,
            params: Value,
        ) -> BoxFuture<'a, computerd::client::Result<Value>> {
            Box::pin(async move {
                let words = "wss://vendor.example/cdp?signingKey=SECRET closed (see /var/lib/computer-mcp/log, 10.0.0.7:4000, key 0123456789abcdef0123456789abcdef)";
                match (method, params["actions"][0]["type"].as_str()) {
                    ("input.actions", Some("move")) => Ok(json!({
                        "done": 0,
                        "failed": {"index": 0, "kind": "invalid", "message": words},
                    })),
                    _ => Err(ClientError::Rpc(RpcError::unsupported(words))),
                }
            })
        }
        fn close(&self) {}
    }

    fn clean(text: &str) {
        for s in SECRETS {
            assert!(!text.contains(s), "{s} reached the page: {text}");
        }
    }

    #[tokio::test]
    async fn a_failed_input_or_watch_reaches_the_page_with_no_url_secret_endpoint_or_path() {
        let client: Arc<dyn ComputerClient> = Arc::new(Leaky);
        let (out, mut page) = mpsc::channel(8);
        let (jobs, rx) = mpsc::channel::<Job>(4);
        let runner = tokio::spawn(run_inputs(Arc::clone(&client), out.clone(), rx, || {}));
        jobs.send((1, vec![Action::Move { point: [1, 1] }], None))
            .await
            .unwrap();
        jobs.send((2, vec![Action::Type { text: "a".into() }], None))
            .await
            .unwrap();
        drop(jobs);
        runner.await.unwrap();
        for id in [1, 2] {
            let Some(Message::Text(t)) = page.recv().await else {
                panic!("no answer to input {id}");
            };
            let v: Value = serde_json::from_str(&t).unwrap();
            assert_eq!(
                (v["id"].as_u64(), v["ok"].as_bool()),
                (Some(id), Some(false))
            );
            let message = v["message"].as_str().unwrap();
            assert!(message.contains("<url> closed (see <path>"), "{message}");
            clean(message);
        }

        let (_acked, acked_rx) = watch::channel(0u64);
        let (size, _) = watch::channel((0, 0));
        let why = pump(client, out, acked_rx, size, CancellationToken::new()).await;
        assert!(
            why.starts_with("the computer's screen could not be read: <url> closed"),
            "{why}"
        );
        clean(&why);
    }
}
