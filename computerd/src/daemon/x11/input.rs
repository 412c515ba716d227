//! input.actions on X11: the batch after its check, run in order through
//! XTEST, stopping at the first failure and letting go of what it pressed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use x11rb::protocol::xproto::{
    BUTTON_PRESS_EVENT, BUTTON_RELEASE_EVENT, KEY_PRESS_EVENT, KEY_RELEASE_EVENT, KeyButMask,
    MOTION_NOTIFY_EVENT,
};

use super::keys::{self, Stroke, XK_CAPS_LOCK, XK_SHIFT_L};
use super::session::Session;
use crate::protocol::{
    Action, ActionFailure, Button, ErrorKind, InputActionsResult, RpcError, ScrollUnit,
};

/// The pauses that let a program take the input as a person's. X stamps
/// each event with the server's millisecond clock when it processes it,
/// so events sent together share a stamp: Chromium then takes a double
/// click's second press for the first one again (no dblclick), and counts
/// clicks only when the presses' stamps differ by under 500 ms and 4 px.
/// Each pause first waits for the server to have processed what came
/// before it (a round trip), so the next event is stamped later.
mod pace {
    /// After the pointer moves to a new point, before a button goes down
    /// or up there: the program has seen the motion (its hover, its hit
    /// test) before the button.
    pub const SETTLE_MS: u64 = 30;
    /// A button held down in a click.
    pub const HOLD_MS: u64 = 15;
    /// Between the clicks of a double or triple click (well inside the
    /// 400-500 ms every toolkit counts a double click within).
    pub const CLICK_GAP_MS: u64 = 50;
    /// Between the points of a drag, at most; a drag's steps together
    /// pause at most [`DRAG_MS`], and at least 1 ms each.
    pub const DRAG_STEP_MS: u64 = 10;
    pub const DRAG_MS: u64 = 500;
}

fn button_code(b: Option<Button>) -> u8 {
    match b.unwrap_or_default() {
        Button::Left => 1,
        Button::Middle => 2,
        Button::Right => 3,
        Button::Back => 8,
        Button::Forward => 9,
    }
}

/// What X11 refuses on top of the shared check, before anything runs:
/// keys and characters the map cannot give a keycode to, all at once.
pub fn precheck(s: &Session, actions: &[Action]) -> Result<(), ActionFailure> {
    let room = s.keymap.remap_room();
    for (i, a) in actions.iter().enumerate() {
        let need: BTreeSet<u32> = match a {
            Action::Type { text } => text.chars().map(keys::char_keysym).collect(),
            Action::Key { keys: k, .. } | Action::Hold { keys: k, .. } => {
                k.iter().filter_map(|k| keys::key_keysym(k)).collect()
            }
            Action::Click { keys: Some(k), .. }
            | Action::Drag { keys: Some(k), .. }
            | Action::Scroll { keys: Some(k), .. } => {
                k.iter().filter_map(|k| keys::key_keysym(k)).collect()
            }
            _ => BTreeSet::new(),
        };
        let missing = need
            .iter()
            .filter(|ks| s.keymap.stroke(**ks).is_none())
            .count();
        if missing > room {
            return Err(ActionFailure {
                index: i as u64,
                kind: ErrorKind::Limit,
                message: format!(
                    "actions[{i}] needs {missing} characters the keyboard map has no key for, and the map can lend {room} keycodes at once; type it in parts"
                ),
            });
        }
    }
    Ok(())
}

struct Run<'a> {
    s: &'a mut Session,
    cancel: &'a CancellationToken,
    index: usize,
    buttons: Vec<u8>,
    keys: Vec<u8>,
}

/// Run a checked batch.
pub fn run(s: &mut Session, actions: &[Action], cancel: &CancellationToken) -> InputActionsResult {
    let mut r = Run {
        s,
        cancel,
        index: 0,
        buttons: Vec::new(),
        keys: Vec::new(),
    };
    for (i, a) in actions.iter().enumerate() {
        r.index = i;
        if let Err(e) = r.live().and_then(|()| r.step(a)) {
            r.release_all();
            return InputActionsResult {
                done: i as u64,
                failed: Some(ActionFailure {
                    index: i as u64,
                    kind: e.kind().unwrap_or(ErrorKind::Invalid),
                    message: e.message,
                }),
            };
        }
    }
    InputActionsResult {
        done: actions.len() as u64,
        failed: None,
    }
}

impl Run<'_> {
    fn live(&self) -> Result<(), RpcError> {
        if self.cancel.is_cancelled() {
            return Err(RpcError::aborted(format!(
                "the batch was cancelled before actions[{}]; what it held was released",
                self.index
            )));
        }
        Ok(())
    }

    fn sleep(&self, ms: u64) -> Result<(), RpcError> {
        let until = Instant::now() + Duration::from_millis(ms);
        loop {
            self.live()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    /// Wait for the server to have processed every event sent so far,
    /// then `ms` more (see [`pace`]).
    fn pause(&self, ms: u64) -> Result<(), RpcError> {
        self.s.sync()?;
        self.sleep(ms)
    }

    /// Move to `p` when given, and let the program see it arrive there.
    fn arrive(&mut self, p: Option<[i64; 2]>) -> Result<(), RpcError> {
        let Some(p) = p else { return Ok(()) };
        self.move_to(p)?;
        self.pause(pace::SETTLE_MS)
    }

    fn move_to(&mut self, p: [i64; 2]) -> Result<(), RpcError> {
        self.live()?;
        let (w, h) = (i64::from(self.s.width), i64::from(self.s.height));
        let [x, y] = p;
        if !(0..w).contains(&x) || !(0..h).contains(&y) {
            return Err(RpcError::invalid_field(
                "point",
                format!(
                    "actions[{}]: the point ({x}, {y}) is off the {w}x{h} display (x 0 to {}, y 0 to {})",
                    self.index,
                    w - 1,
                    h - 1
                ),
            ));
        }
        self.s.fake(MOTION_NOTIFY_EVENT, 0, x as i16, y as i16)
    }

    fn press_button(&mut self, b: u8) -> Result<(), RpcError> {
        self.s.fake(BUTTON_PRESS_EVENT, b, 0, 0)?;
        self.buttons.push(b);
        Ok(())
    }

    fn release_button(&mut self, b: u8) -> Result<(), RpcError> {
        self.s.fake(BUTTON_RELEASE_EVENT, b, 0, 0)?;
        self.buttons.retain(|x| *x != b);
        Ok(())
    }

    fn press_key(&mut self, code: u8) -> Result<(), RpcError> {
        self.s.fake(KEY_PRESS_EVENT, code, 0, 0)?;
        self.keys.push(code);
        self.s.keymap.touch(code);
        Ok(())
    }

    fn release_key(&mut self, code: u8) -> Result<(), RpcError> {
        self.s.fake(KEY_RELEASE_EVENT, code, 0, 0)?;
        if let Some(at) = self.keys.iter().rposition(|k| *k == code) {
            self.keys.remove(at);
        }
        self.s.keymap.touch(code);
        Ok(())
    }

    fn release_all(&mut self) {
        for code in std::mem::take(&mut self.keys).into_iter().rev() {
            let _ = self.s.fake(KEY_RELEASE_EVENT, code, 0, 0);
        }
        for b in std::mem::take(&mut self.buttons).into_iter().rev() {
            let _ = self.s.fake(BUTTON_RELEASE_EVENT, b, 0, 0);
        }
        let _ = self.s.sync();
    }

    /// The stroke for a keysym, binding a free keycode to it when the map
    /// has none (the binding stays, so it has a key from then on).
    fn stroke(&mut self, ks: u32) -> Result<Stroke, RpcError> {
        if let Some(s) = self.s.keymap.stroke(ks) {
            return Ok(s);
        }
        let Some((code, wait)) = self.s.keymap.pick_for_remap() else {
            return Err(RpcError::limit(format!(
                "actions[{}]: the keyboard map has no keycode to lend for keysym 0x{ks:x}; type it in parts",
                self.index
            )));
        };
        if !wait.is_zero() {
            // Let clients read the events bound to the keycode first.
            self.s.flush()?;
            self.sleep(wait.as_millis() as u64)?;
        }
        self.s.remap(code, ks)?;
        Ok(Stroke {
            keycode: code,
            shift: false,
        })
    }

    fn shift_code(&mut self) -> Result<u8, RpcError> {
        Ok(self.stroke(XK_SHIFT_L)?.keycode)
    }

    /// Press named keys in order (with shift where one needs it); the
    /// keycodes pressed, to release in reverse.
    fn press_names(&mut self, names: &[String]) -> Result<Vec<u8>, RpcError> {
        let mut pressed = Vec::new();
        for n in names {
            let ks = keys::key_keysym(n).ok_or_else(|| {
                RpcError::invalid(format!("actions[{}]: {n:?} is not a key", self.index))
            })?;
            let st = self.stroke(ks)?;
            if st.shift {
                let sh = self.shift_code()?;
                if !pressed.contains(&sh) {
                    self.press_key(sh)?;
                    pressed.push(sh);
                }
            }
            self.press_key(st.keycode)?;
            pressed.push(st.keycode);
        }
        Ok(pressed)
    }

    fn release_codes(&mut self, codes: &[u8]) -> Result<(), RpcError> {
        for c in codes.iter().rev() {
            self.release_key(*c)?;
        }
        Ok(())
    }

    fn type_text(&mut self, text: &str) -> Result<(), RpcError> {
        let (_, _, _, mask) = self.s.pointer()?;
        let caps = mask.contains(KeyButMask::LOCK);
        let caps_code = if caps {
            let c = self.stroke(XK_CAPS_LOCK)?.keycode;
            self.press_key(c)?;
            self.release_key(c)?;
            Some(c)
        } else {
            None
        };
        for ch in text.chars() {
            self.live()?;
            let st = self.stroke(keys::char_keysym(ch))?;
            let shift = if st.shift {
                let sh = self.shift_code()?;
                self.press_key(sh)?;
                Some(sh)
            } else {
                None
            };
            self.press_key(st.keycode)?;
            self.release_key(st.keycode)?;
            if let Some(sh) = shift {
                self.release_key(sh)?;
            }
        }
        if let Some(c) = caps_code {
            self.press_key(c)?;
            self.release_key(c)?;
        }
        Ok(())
    }

    /// `count` clicks where the pointer is, each press and release and
    /// each click stamped apart (see [`pace`]).
    fn clicks(&mut self, b: u8, count: u64) -> Result<(), RpcError> {
        for n in 0..count {
            if n > 0 {
                self.pause(pace::CLICK_GAP_MS)?;
            }
            self.live()?;
            self.press_button(b)?;
            self.pause(pace::HOLD_MS)?;
            self.release_button(b)?;
        }
        Ok(())
    }

    /// One wheel click: press and release together (no program counts them).
    fn wheel(&mut self, b: u8) -> Result<(), RpcError> {
        self.live()?;
        self.press_button(b)?;
        self.release_button(b)
    }

    fn step(&mut self, a: &Action) -> Result<(), RpcError> {
        match a {
            // Settled too: a down or up without a point may come next.
            Action::Move { point } => return self.arrive(Some(*point)),
            Action::Down { point, button } => {
                self.arrive(*point)?;
                self.press_button(button_code(*button))?;
            }
            Action::Up { point, button } => {
                self.arrive(*point)?;
                self.release_button(button_code(*button))?;
            }
            Action::Click {
                point,
                button,
                count,
                keys,
            } => {
                self.arrive(*point)?;
                let held = self.press_names(keys.as_deref().unwrap_or(&[]))?;
                self.clicks(button_code(*button), count.unwrap_or(1))?;
                self.release_codes(&held)?;
            }
            Action::Drag { path, button, keys } => {
                let b = button_code(*button);
                let Some((first, rest)) = path.split_first() else {
                    return Ok(());
                };
                self.arrive(Some(*first))?;
                let held = self.press_names(keys.as_deref().unwrap_or(&[]))?;
                self.press_button(b)?;
                let step = (pace::DRAG_MS / rest.len().max(1) as u64).clamp(1, pace::DRAG_STEP_MS);
                for p in rest {
                    self.pause(step)?;
                    self.move_to(*p)?;
                }
                self.pause(pace::SETTLE_MS)?;
                self.release_button(b)?;
                self.release_codes(&held)?;
            }
            Action::Scroll {
                point,
                dx,
                dy,
                unit,
                keys,
            } => {
                if unit.unwrap_or_default() == ScrollUnit::Px {
                    return Err(RpcError::unsupported(
                        "the X wheel turns in clicks; scroll with unit click",
                    ));
                }
                self.arrive(*point)?;
                let held = self.press_names(keys.as_deref().unwrap_or(&[]))?;
                let vertical = if *dy > 0 { 5 } else { 4 };
                for _ in 0..dy.unsigned_abs() {
                    self.wheel(vertical)?;
                }
                let horizontal = if *dx > 0 { 7 } else { 6 };
                for _ in 0..dx.unsigned_abs() {
                    self.wheel(horizontal)?;
                }
                self.release_codes(&held)?;
            }
            Action::Key { keys, repeat } => {
                for _ in 0..repeat.unwrap_or(1) {
                    self.live()?;
                    let held = self.press_names(keys)?;
                    self.release_codes(&held)?;
                }
            }
            Action::Hold { keys, ms } => {
                let held = self.press_names(keys)?;
                self.s.flush()?;
                self.sleep(*ms)?;
                self.release_codes(&held)?;
            }
            Action::Type { text } => self.type_text(text)?,
            Action::Wait { ms } => return self.sleep(*ms),
            Action::Tap { .. }
            | Action::LongPress { .. }
            | Action::Swipe { .. }
            | Action::Pinch { .. }
            | Action::Button { .. } => {
                return Err(RpcError::unsupported(format!(
                    "a {} is a touch action, and X11 has no touch",
                    a.name()
                )));
            }
        }
        self.s.sync()
    }
}
