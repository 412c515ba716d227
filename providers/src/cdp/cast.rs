//! The screen of a browser with no X display (a vendor's cloud browser, a
//! headless one a computer runs): its front tab, cast. A computer's own
//! browser is cast on the model's connection (a second one would start a
//! second browser): [`Cast::stop`] then ends a view's cast, never the page.
//!
//! - `screen.watch` is CDP `Page.startScreencast` (JPEG, at most the asked
//!   width) on the front tab ([`super::front`]), its first frame a shot of
//!   the tab as it is. The browser sends a frame only when the page
//!   changed, and the next only once the last is acked; a frame is acked
//!   (`Page.screencastFrameAck`) only when a watch says its caller has it
//!   whole (`after` is its seq), so frames are pulled by the viewer, never
//!   pushed faster than it draws.
//! - `screen.read` reads the newest frame past what its watch carried.
//! - `input.actions` are CDP input events to the front tab: the pointer's
//!   as `Input.dispatchMouseEvent`, keys as `Input.dispatchKeyEvent`
//!   ([`computerd::protocol::cdp_keys`]), text as `Input.insertText`. The screen's pixels are
//!   the tab's CSS pixels.

use std::time::Duration;

use base64::Engine;
use computerd::client::ClientError;
use computerd::protocol::cdp_keys as keys;
use computerd::protocol::limits::MAX_FRAME_BYTES;
use computerd::protocol::{
    Action, ActionFailure, Button, Bytes64, CdpEventsParams, CheckOptions, ErrorKind, Group,
    ImageFormat, InputActionsParams, InputActionsResult, RpcError, ScreenReadParams,
    ScreenReadResult, ScreenWatchParams, ScreenWatchResult, ScrollUnit, WatchFrame, check_actions,
};
use serde_json::{Value, json};

use super::conn::CdpConn;
use super::front::{Cdp, rpc};

/// Pixels of a wheel click.
const WHEEL_CLICK_PX: i64 = 120;
/// The groups the cast answers for.
pub const GROUPS: &[Group] = &[Group::Screen, Group::InputPointer, Group::InputKeys];

/// The cast of one connection: the watch's and the input's state.
#[derive(Default)]
pub struct Cast {
    watch: tokio::sync::Mutex<Watching>,
    input: tokio::sync::Mutex<Pointer>,
    /// The front tab as last looked at, and when.
    front: std::sync::Mutex<Option<(std::time::Instant, String)>>,
}

/// How long the front tab found is taken as still in front.
const FRONT_FRESH: Duration = Duration::from_millis(500);

/// A tab attached to on this connection.
#[derive(Clone, PartialEq)]
struct Tab {
    target: String,
    session: String,
}

#[derive(Default)]
struct Watching {
    /// The tab cast, and the width and quality it was started with.
    on: Option<(Tab, u32, u8)>,
    /// The events read so far (the next read's `since`).
    since: u64,
    seq: u64,
    held: Option<Held>,
    /// The frame size last found to be the tab's own.
    sized: Option<(u32, u32)>,
}

/// The newest frame.
struct Held {
    seq: u64,
    jpeg: Vec<u8>,
    width: u32,
    height: u32,
    frame_width: u32,
    frame_height: u32,
    /// The browser's id of the frame while it is not acked, and the
    /// session it came on.
    ack: Option<(Value, String)>,
}

/// The pointer as the input left it.
#[derive(Default)]
struct Pointer {
    tab: Option<Tab>,
    at: [i64; 2],
    /// CDP's bits of the buttons down: left 1, right 2, middle 4, back 8,
    /// forward 16.
    buttons: u32,
}

async fn send(
    conn: &CdpConn,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Result<Value, ClientError> {
    conn.cdp(method, params, session).await
}

/// A session on `target`: `held` when it is still that tab's, else a new
/// one (the old one let go).
async fn attach(conn: &CdpConn, target: String, held: Option<&Tab>) -> Result<Tab, ClientError> {
    if let Some(t) = held.filter(|t| t.target == target) {
        return Ok(t.clone());
    }
    if let Some(old) = held {
        detach(conn, old).await;
    }
    let r = send(
        conn,
        "Target.attachToTarget",
        json!({ "targetId": target, "flatten": true }),
        None,
    )
    .await?;
    let session = r["sessionId"].as_str().ok_or_else(|| {
        rpc(RpcError::unsupported(
            "attaching to the tab gave no session",
        ))
    })?;
    Ok(Tab {
        target,
        session: session.to_string(),
    })
}

/// A JPEG's pixels, from its start-of-frame header.
pub fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            let h = u16::from_be_bytes([b[i + 5], b[i + 6]]);
            let w = u16::from_be_bytes([b[i + 7], b[i + 8]]);
            return Some((u32::from(w), u32::from(h)));
        }
        i += 2 + len;
    }
    None
}

impl Held {
    /// A `Page.screencastFrame` event's frame, as frame `seq`.
    fn of(seq: u64, params: &Value, session: &str) -> Result<Held, ClientError> {
        let jpeg = params["data"]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .ok_or_else(|| {
                rpc(RpcError::unsupported(
                    "the browser sent a frame with no image",
                ))
            })?;
        let (frame_width, frame_height) = jpeg_size(&jpeg).ok_or_else(|| {
            rpc(RpcError::unsupported(
                "the browser sent a frame that is no JPEG",
            ))
        })?;
        let css = |k: &str| params["metadata"][k].as_f64().unwrap_or(0.0).round() as u32;
        let (width, height) = match (css("deviceWidth"), css("deviceHeight")) {
            (w, h) if w > 0 && h > 0 => (w, h),
            _ => (frame_width, frame_height),
        };
        Ok(Held {
            seq,
            jpeg,
            width,
            height,
            frame_width,
            frame_height,
            ack: Some((params["sessionId"].clone(), session.to_string())),
        })
    }

    fn id(&self) -> String {
        format!("frame-{}", self.seq)
    }

    fn answer(&self) -> ScreenWatchResult {
        let n = self.jpeg.len().min(MAX_FRAME_BYTES as usize);
        ScreenWatchResult {
            seq: self.seq,
            changed: true,
            frame: Some(WatchFrame {
                id: self.id(),
                format: ImageFormat::Jpeg,
                data: Bytes64(self.jpeg[..n].to_vec()),
                size: self.jpeg.len() as u64,
                eof: n == self.jpeg.len(),
                frame_width: self.frame_width,
                frame_height: self.frame_height,
                width: self.width,
                height: self.height,
                cursor: None,
                region: None,
            }),
        }
    }
}

/// Make the tab of `session` draw now (a shot, let go; with no clip, so
/// the tab is drawn as it is shown): the cast sends its first frame only
/// once the tab draws again.
async fn nudge(conn: &CdpConn, session: &str) -> Result<(), ClientError> {
    let params = json!({ "format": "jpeg", "quality": 1, "optimizeForSpeed": true });
    send(conn, "Page.captureScreenshot", params, Some(session))
        .await
        .map(|_| ())
}

async fn ack(conn: &CdpConn, (id, session): (Value, String)) -> Result<(), ClientError> {
    send(
        conn,
        "Page.screencastFrameAck",
        json!({ "sessionId": id }),
        Some(&session),
    )
    .await
    .map(|_| ())
}

impl Cast {
    /// The front tab's target, looked at again once [`FRONT_FRESH`] passed.
    async fn front(&self, conn: &CdpConn) -> Result<String, ClientError> {
        let now = std::time::Instant::now();
        let fresh = |f: &Option<(std::time::Instant, String)>| {
            f.as_ref()
                .filter(|(at, _)| now.duration_since(*at) < FRONT_FRESH)
                .map(|(_, t)| t.clone())
        };
        if let Some(t) = fresh(&self.front.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(t);
        }
        let t = super::front::front(conn).await?.target;
        *self.front.lock().unwrap_or_else(|p| p.into_inner()) = Some((now, t.clone()));
        Ok(t)
    }

    /// `screen.watch`: the front tab's next frame, once the caller has the
    /// last whole, or `changed: false` when the tab sent none in `waitMs`.
    pub async fn watch(
        &self,
        conn: &CdpConn,
        p: ScreenWatchParams,
    ) -> Result<ScreenWatchResult, ClientError> {
        let ask = p.checked().map_err(rpc)?;
        let (wait, max_width, quality) = (ask.wait_ms, ask.max_width, ask.quality);
        let mut w = self.watch.lock().await;
        if p.after > w.seq {
            return Err(rpc(RpcError::invalid_field(
                "after",
                format!(
                    "after is {}, past the newest frame's seq {}",
                    p.after, w.seq
                ),
            )));
        }
        let target = self.front(conn).await?;
        let was = w.on.clone();
        let same = was
            .as_ref()
            .is_some_and(|(t, mw, q)| t.target == target && (*mw, *q) == (max_width, quality));
        if !same {
            let old = was.as_ref().map(|(t, ..)| t);
            w.start(conn, target, old, max_width, quality).await?;
        }
        if let Some(h) = w.held.as_ref().filter(|h| p.after < h.seq) {
            return Ok(h.answer());
        }
        // The caller has the newest frame whole: the browser may send the next.
        if let Some(a) = w.held.as_mut().and_then(|h| h.ack.take()) {
            ack(conn, a).await?;
        }
        let Some((tab, ..)) = w.on.clone() else {
            return Err(rpc(RpcError::unsupported("the cast did not start")));
        };
        let r = conn
            .events(&CdpEventsParams {
                since: Some(w.since),
                methods: Some(vec!["Page.screencastFrame".into()]),
                session_id: Some(tab.session.clone()),
                wait_ms: Some(wait),
                max: None,
            })
            .await;
        w.since = r.next;
        let Some((last, earlier)) = r.events.split_last() else {
            if let Some(why) = conn.closed() {
                return Err(ClientError::Closed(why));
            }
            if w.held.is_none() {
                nudge(conn, &tab.session).await?;
            }
            return Ok(ScreenWatchResult {
                seq: w.seq,
                changed: false,
                frame: None,
            });
        };
        // Frames the caller will never see are acked at once.
        for e in earlier {
            ack(conn, (e.params["sessionId"].clone(), tab.session.clone())).await?;
        }
        let held = Held::of(w.seq + 1, &last.params, &tab.session)?;
        if !w.tab_sized(conn, &tab, &held).await {
            // A frame of a screenshot's clip or whole page, not of the tab
            // as shown: let go (the person's clicks map by the frame's size).
            if let Some(a) = held.ack {
                ack(conn, a).await?;
            }
            return Ok(ScreenWatchResult {
                seq: w.seq,
                changed: false,
                frame: None,
            });
        }
        w.seq += 1;
        let answer = held.answer();
        w.held = Some(held);
        Ok(answer)
    }

    /// `screen.read`: more of the newest frame.
    pub async fn read(&self, p: ScreenReadParams) -> Result<ScreenReadResult, ClientError> {
        let w = self.watch.lock().await;
        let Some(h) = w.held.as_ref().filter(|h| h.id() == p.id) else {
            return Err(rpc(RpcError::not_found(format!(
                "no frame {}: only the newest frame is held",
                p.id
            ))
            .with_field("id")));
        };
        let max = p.max_bytes.unwrap_or(MAX_FRAME_BYTES).min(MAX_FRAME_BYTES) as usize;
        let from = (p.offset as usize).min(h.jpeg.len());
        let to = (from + max).min(h.jpeg.len());
        Ok(ScreenReadResult {
            data: Bytes64(h.jpeg[from..to].to_vec()),
            eof: to == h.jpeg.len(),
        })
    }

    /// `input.actions` as CDP input events to the front tab, in order; a
    /// batch that stops releases the buttons it pressed.
    pub async fn actions(
        &self,
        conn: &CdpConn,
        p: InputActionsParams,
    ) -> Result<InputActionsResult, ClientError> {
        let options = CheckOptions { pixel_scroll: true };
        if let Err(f) = check_actions(&p.actions, GROUPS, options) {
            return Ok(InputActionsResult::refused(f));
        }
        let mut ptr = self.input.lock().await;
        let target = self.front(conn).await?;
        let tab = attach(conn, target, ptr.tab.as_ref()).await?;
        if ptr.tab.as_ref() != Some(&tab) {
            ptr.buttons = 0;
        }
        ptr.tab = Some(tab.clone());
        let before = ptr.buttons;
        for (i, a) in p.actions.iter().enumerate() {
            if let Err(e) = ptr.run(conn, &tab.session, a).await {
                let (kind, message) = match e {
                    ClientError::Rpc(r) => (r.kind().unwrap_or(ErrorKind::Invalid), r.message),
                    other => (ErrorKind::Aborted, other.to_string()),
                };
                let pressed = ptr.buttons & !before;
                ptr.release(conn, &tab.session, pressed).await;
                return Ok(InputActionsResult {
                    done: i as u64,
                    failed: Some(ActionFailure {
                        index: i as u64,
                        kind,
                        message,
                    }),
                });
            }
        }
        Ok(InputActionsResult {
            done: p.actions.len() as u64,
            failed: None,
        })
    }
}

impl Cast {
    /// The view ended (the cast shares its browser's connection with the
    /// model's page tools): the screencast stops, the frame held is acked
    /// and dropped, and the tabs attached to are let go; the page is left
    /// as it is. A later watch starts again.
    pub async fn stop(&self, conn: &CdpConn) {
        let mut w = self.watch.lock().await;
        if let Some((tab, ..)) = w.on.take() {
            let _ = send(conn, "Page.stopScreencast", json!({}), Some(&tab.session)).await;
            if let Some(a) = w.held.as_mut().and_then(|h| h.ack.take()) {
                let _ = ack(conn, a).await;
            }
            detach(conn, &tab).await;
        }
        w.held = None;
        drop(w);
        let mut ptr = self.input.lock().await;
        if let Some(tab) = ptr.tab.take() {
            detach(conn, &tab).await;
        }
        ptr.buttons = 0;
    }
}

async fn detach(conn: &CdpConn, tab: &Tab) {
    let s = json!({ "sessionId": tab.session });
    let _ = send(conn, "Target.detachFromTarget", s, None).await;
}

impl Watching {
    /// Whether `held` is the size of the tab as shown (its window's inner
    /// size, asked again only when a frame's size is new): a screenshot
    /// with a clip, a scale or beyond the viewport is drawn, and cast, at
    /// its own size for a moment.
    async fn tab_sized(&mut self, conn: &CdpConn, tab: &Tab, held: &Held) -> bool {
        let size = (held.width, held.height);
        if self.sized == Some(size) {
            return true;
        }
        let ask = json!({ "expression": "[innerWidth, innerHeight]", "returnByValue": true });
        let Ok(r) = send(conn, "Runtime.evaluate", ask, Some(&tab.session)).await else {
            return true;
        };
        let v = &r["result"]["value"];
        let inner = (v[0].as_u64(), v[1].as_u64());
        if inner == (Some(u64::from(size.0)), Some(u64::from(size.1))) {
            self.sized = Some(size);
            return true;
        }
        // A page that does not answer in numbers is taken at its frame.
        inner.0.is_none() || inner.1.is_none()
    }

    /// Cast `target` (stopping the cast of `old`) at `max_width` and
    /// `quality`; the frame held stays for a caller behind it, unacked.
    async fn start(
        &mut self,
        conn: &CdpConn,
        target: String,
        old: Option<&Tab>,
        max_width: u32,
        quality: u8,
    ) -> Result<(), ClientError> {
        if let Some(old) = old {
            let _ = send(conn, "Page.stopScreencast", json!({}), Some(&old.session)).await;
        }
        self.on = None;
        let tab = attach(conn, target, old).await?;
        // Frames from here on: read past every event kept.
        self.since = conn
            .events(&CdpEventsParams {
                since: Some(u64::MAX),
                ..Default::default()
            })
            .await
            .next;
        if let Some(h) = self.held.as_mut() {
            h.ack = None;
        }
        send(
            conn,
            "Page.startScreencast",
            json!({
                "format": "jpeg",
                "quality": quality,
                "maxWidth": max_width,
                "maxHeight": max_width.saturating_mul(4),
                "everyNthFrame": 1,
            }),
            Some(&tab.session),
        )
        .await?;
        nudge(conn, &tab.session).await?;
        self.sized = None;
        self.on = Some((tab, max_width, quality));
        Ok(())
    }
}

fn button_of(b: Option<Button>) -> (&'static str, u32) {
    match b.unwrap_or_default() {
        Button::Left => ("left", 1),
        Button::Right => ("right", 2),
        Button::Middle => ("middle", 4),
        Button::Back => ("back", 8),
        Button::Forward => ("forward", 16),
    }
}

fn modifiers(keys: Option<&Vec<String>>) -> Result<u32, ClientError> {
    match keys {
        None => Ok(0),
        Some(k) => keys::modifier_bits("keys", &k.join("+")).map_err(|w| rpc(RpcError::invalid(w))),
    }
}

impl Pointer {
    async fn mouse(
        &mut self,
        conn: &CdpConn,
        session: &str,
        kind: &str,
        extra: Value,
    ) -> Result<(), ClientError> {
        let mut e = json!({
            "type": kind,
            "x": self.at[0],
            "y": self.at[1],
            "buttons": self.buttons,
        });
        if let (Value::Object(e), Value::Object(x)) = (&mut e, extra) {
            e.extend(x);
        }
        send(conn, "Input.dispatchMouseEvent", e, Some(session))
            .await
            .map(|_| ())
    }

    async fn move_to(
        &mut self,
        conn: &CdpConn,
        session: &str,
        point: Option<[i64; 2]>,
    ) -> Result<(), ClientError> {
        match point {
            Some(p) if p != self.at => {
                self.at = p;
                self.mouse(conn, session, "mouseMoved", json!({})).await
            }
            _ => Ok(()),
        }
    }

    /// Press (`down`) or release `button` where the pointer is.
    async fn press(
        &mut self,
        conn: &CdpConn,
        session: &str,
        button: Option<Button>,
        down: bool,
        count: u64,
        mods: u32,
    ) -> Result<(), ClientError> {
        let (name, bit) = button_of(button);
        let kind = if down {
            self.buttons |= bit;
            "mousePressed"
        } else {
            self.buttons &= !bit;
            "mouseReleased"
        };
        let extra = json!({ "button": name, "clickCount": count, "modifiers": mods });
        self.mouse(conn, session, kind, extra).await
    }

    /// Release the buttons of `bits` (best effort: the batch already failed).
    async fn release(&mut self, conn: &CdpConn, session: &str, bits: u32) {
        for b in [
            Button::Left,
            Button::Right,
            Button::Middle,
            Button::Back,
            Button::Forward,
        ] {
            if bits & button_of(Some(b)).1 != 0 {
                let _ = self.press(conn, session, Some(b), false, 1, 0).await;
            }
        }
    }

    async fn keys(
        &mut self,
        conn: &CdpConn,
        session: &str,
        keys: &[String],
        hold: Option<u64>,
    ) -> Result<(), ClientError> {
        let presses =
            keys::parse("keys", &keys.join("+")).map_err(|w| rpc(RpcError::invalid(w)))?;
        for p in presses {
            let [down, up] = p.events();
            send(conn, "Input.dispatchKeyEvent", down, Some(session)).await?;
            if let Some(ms) = hold {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            send(conn, "Input.dispatchKeyEvent", up, Some(session)).await?;
        }
        Ok(())
    }

    /// One action (checked already).
    async fn run(&mut self, conn: &CdpConn, s: &str, a: &Action) -> Result<(), ClientError> {
        match a {
            Action::Move { point } => {
                self.at = *point;
                self.mouse(conn, s, "mouseMoved", json!({})).await
            }
            Action::Down { point, button } => {
                self.move_to(conn, s, *point).await?;
                self.press(conn, s, *button, true, 1, 0).await
            }
            Action::Up { point, button } => {
                self.move_to(conn, s, *point).await?;
                self.press(conn, s, *button, false, 1, 0).await
            }
            Action::Click {
                point,
                button,
                count,
                keys,
            } => {
                let mods = modifiers(keys.as_ref())?;
                self.move_to(conn, s, *point).await?;
                for n in 1..=count.unwrap_or(1) {
                    self.press(conn, s, *button, true, n, mods).await?;
                    self.press(conn, s, *button, false, n, mods).await?;
                }
                Ok(())
            }
            Action::Drag { path, button, keys } => {
                let mods = modifiers(keys.as_ref())?;
                let (Some(first), Some(last)) = (path.first(), path.last()) else {
                    return Ok(());
                };
                self.move_to(conn, s, Some(*first)).await?;
                self.press(conn, s, *button, true, 1, mods).await?;
                for p in &path[1..] {
                    self.at = *p;
                    self.mouse(conn, s, "mouseMoved", json!({ "modifiers": mods }))
                        .await?;
                }
                self.at = *last;
                self.press(conn, s, *button, false, 1, mods).await
            }
            Action::Scroll {
                point,
                dx,
                dy,
                unit,
                keys,
            } => {
                let mods = modifiers(keys.as_ref())?;
                self.move_to(conn, s, *point).await?;
                let per = match unit.unwrap_or_default() {
                    ScrollUnit::Click => WHEEL_CLICK_PX,
                    ScrollUnit::Px => 1,
                };
                let extra = json!({ "deltaX": dx * per, "deltaY": dy * per, "modifiers": mods });
                self.mouse(conn, s, "mouseWheel", extra).await
            }
            Action::Key { keys, repeat } => {
                for _ in 0..repeat.unwrap_or(1) {
                    self.keys(conn, s, keys, None).await?;
                }
                Ok(())
            }
            Action::Hold { keys, ms } => self.keys(conn, s, keys, Some(*ms)).await,
            Action::Type { text } => {
                send(conn, "Input.insertText", json!({ "text": text }), Some(s))
                    .await
                    .map(|_| ())
            }
            Action::Wait { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(())
            }
            other => Err(rpc(RpcError::unsupported(format!(
                "{}: a browser's screen takes the pointer and keys, not touch",
                other.name()
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jpegs_size_is_read_from_its_frame_header() {
        // SOI, an APP0 of 4 bytes, then SOF0: 8 bits, 600 high, 800 wide.
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00];
        b.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 0x08, 0x02, 0x58, 0x03, 0x20, 0x03]);
        assert_eq!(jpeg_size(&b), Some((800, 600)));
        assert_eq!(jpeg_size(b"\x89PNG\r\n\x1a\n0000000000"), None);
    }
}
