//! The viewer's events (in the screen's pixels) to a desktop's input
//! actions, or on a touch screen (a phone) to taps, swipes and buttons, or
//! a refusal in words: one [`Mapper`] per take-over. It never panics on
//! what a page sends.

use std::collections::BTreeMap;

use computerd::protocol::{Action, Button, PhoneButton, is_key};
use serde::Deserialize;

/// A typed text's most characters.
pub const MAX_TEXT_CHARS: usize = 65_536;
/// A wheel event's most clicks.
pub const MAX_WHEEL_CLICKS: i64 = 20;
/// Pixels of a browser's wheel delta per click.
pub const WHEEL_PX_PER_CLICK: i64 = 120;
/// How far (in screen pixels, each way) a touch may move and still be a
/// tap rather than a swipe.
pub const TAP_SLOP: i64 = 16;
/// The modifiers a press may hold.
const MODIFIERS: [&str; 4] = ["shift", "ctrl", "alt", "super"];

/// What the page sends, in the screen's pixels.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ViewerEvent {
    Move {
        x: i64,
        y: i64,
    },
    Down {
        x: i64,
        y: i64,
        button: u8,
        #[serde(default)]
        mods: Vec<String>,
    },
    Up {
        x: i64,
        y: i64,
        button: u8,
    },
    /// A wheel turn in the browser's pixels (about 120 a click).
    Wheel {
        x: i64,
        y: i64,
        #[serde(default)]
        dx: i64,
        #[serde(default)]
        dy: i64,
    },
    /// A key (a protocol key name) with modifiers held.
    Key {
        key: String,
        #[serde(default)]
        mods: Vec<String>,
    },
    Text {
        text: String,
    },
}

/// How a button's press is sent, decided at the down for the up too.
#[derive(Clone, Debug, PartialEq)]
enum Press {
    /// A down now, an up at the release.
    Plain,
    /// With modifiers held: the down only moves, the up is one click with
    /// those keys.
    Click(Vec<String>),
}

/// One take-over's mapping: the screen's size and the buttons pressed.
pub struct Mapper {
    width: u32,
    height: u32,
    pressed: BTreeMap<u8, Press>,
    /// A touch screen: a press and its release are one tap or swipe.
    touch: bool,
    /// The touch's first point, while the left button is down.
    touching: Option<[i64; 2]>,
}

fn button(b: u8) -> Result<Button, String> {
    Ok(match b {
        0 => Button::Left,
        1 => Button::Middle,
        2 => Button::Right,
        3 => Button::Back,
        4 => Button::Forward,
        _ => {
            return Err(format!(
                "button {b} is not one; 0 to 4 (left, middle, right, back, forward)"
            ));
        }
    })
}

fn check_mods(mods: &[String]) -> Result<(), String> {
    match mods.iter().find(|m| !MODIFIERS.contains(&m.as_str())) {
        Some(m) => Err(format!(
            "{m:?} is not a modifier; shift, ctrl, alt or super"
        )),
        None => Ok(()),
    }
}

/// A combo that ends or switches the X display, never sent.
fn ends_the_display(key: &str, mods: &[String]) -> bool {
    let held = |m: &str| mods.iter().any(|x| x == m);
    let fkey = key
        .strip_prefix('f')
        .and_then(|n| n.parse::<u8>().ok())
        .is_some_and(|n| (1..=12).contains(&n));
    held("ctrl") && held("alt") && (key == "backspace" || fkey)
}

impl Mapper {
    pub fn new(width: u32, height: u32) -> Mapper {
        Mapper {
            width,
            height,
            pressed: BTreeMap::new(),
            touch: false,
            touching: None,
        }
    }

    /// The same for a touch screen (a phone): the left button touches, a
    /// release near its press is a tap, farther a swipe; escape is the
    /// phone's back button; there is no wheel.
    pub fn touch(width: u32, height: u32) -> Mapper {
        Mapper {
            touch: true,
            ..Mapper::new(width, height)
        }
    }

    /// A touch screen's actions for `ev`; None where it maps as a desktop's.
    fn map_touch(&mut self, ev: &ViewerEvent) -> Option<Result<Vec<Action>, String>> {
        Some(match ev {
            ViewerEvent::Move { x, y } => self.point(*x, *y).map(|_| Vec::new()),
            ViewerEvent::Down { x, y, button, .. } => {
                self.point(*x, *y).and_then(|p| match button {
                    0 => {
                        self.touching = Some(p);
                        Ok(Vec::new())
                    }
                    b => Err(format!(
                        "a phone's screen takes touches: press the left button to touch (button {b} is none)"
                    )),
                })
            }
            ViewerEvent::Up { x, y, button } => {
                self.point(*x, *y).map(|end| match (button, self.touching.take()) {
                    (0, Some(start)) => {
                        let near = (end[0] - start[0]).abs() <= TAP_SLOP
                            && (end[1] - start[1]).abs() <= TAP_SLOP;
                        vec![if near {
                            Action::Tap { point: start }
                        } else {
                            Action::Swipe {
                                path: vec![start, end],
                                ms: None,
                            }
                        }]
                    }
                    // Pressed before control was taken, or another button.
                    _ => Vec::new(),
                })
            }
            ViewerEvent::Wheel { .. } => {
                Err("a phone has no wheel: drag on its screen to swipe".to_string())
            }
            ViewerEvent::Key { key, mods } if key == "escape" && mods.is_empty() => {
                Ok(vec![Action::Button {
                    button: PhoneButton::Back,
                }])
            }
            _ => return None,
        })
    }

    /// The screen's size changed (a new frame says so).
    pub fn resize(&mut self, width: u32, height: u32) {
        (self.width, self.height) = (width, height);
    }

    fn point(&self, x: i64, y: i64) -> Result<[i64; 2], String> {
        let (w, h) = (i64::from(self.width), i64::from(self.height));
        if w == 0 || h == 0 {
            return Err(
                "the screen's size is not known yet (no frame has come): wait for the first frame"
                    .into(),
            );
        }
        if !(0..w).contains(&x) || !(0..h).contains(&y) {
            return Err(format!(
                "the point ({x}, {y}) is off the screen, which is {w}x{h} (0 to {}, 0 to {})",
                w - 1,
                h - 1
            ));
        }
        Ok([x, y])
    }

    /// The actions for one event, or why none.
    pub fn map(&mut self, ev: ViewerEvent) -> Result<Vec<Action>, String> {
        if self.touch
            && let Some(r) = self.map_touch(&ev)
        {
            return r;
        }
        match ev {
            ViewerEvent::Move { x, y } => Ok(vec![Action::Move {
                point: self.point(x, y)?,
            }]),
            ViewerEvent::Down {
                x,
                y,
                button: b,
                mods,
            } => {
                let point = self.point(x, y)?;
                let which = button(b)?;
                check_mods(&mods)?;
                if mods.is_empty() {
                    self.pressed.insert(b, Press::Plain);
                    Ok(vec![Action::Down {
                        point: Some(point),
                        button: Some(which),
                    }])
                } else {
                    self.pressed.insert(b, Press::Click(mods));
                    Ok(vec![Action::Move { point }])
                }
            }
            ViewerEvent::Up { x, y, button: b } => {
                let point = self.point(x, y)?;
                let which = button(b)?;
                Ok(match self.pressed.remove(&b) {
                    Some(Press::Plain) => vec![Action::Up {
                        point: Some(point),
                        button: Some(which),
                    }],
                    Some(Press::Click(keys)) => vec![Action::Click {
                        point: Some(point),
                        button: Some(which),
                        count: Some(1),
                        keys: Some(keys),
                    }],
                    // Pressed before control was taken: nothing to let go.
                    None => vec![Action::Move { point }],
                })
            }
            ViewerEvent::Wheel { x, y, dx, dy } => {
                let point = self.point(x, y)?;
                let clicks = |px: i64| -> Result<i64, String> {
                    let c = px / WHEEL_PX_PER_CLICK;
                    let c = if c == 0 { px.signum() } else { c };
                    if c.abs() > MAX_WHEEL_CLICKS {
                        return Err(format!(
                            "a wheel turn of {} clicks is past the most, {MAX_WHEEL_CLICKS} an event",
                            c.abs()
                        ));
                    }
                    Ok(c)
                };
                let (dx, dy) = (clicks(dx)?, clicks(dy)?);
                if dx == 0 && dy == 0 {
                    return Ok(Vec::new());
                }
                Ok(vec![Action::Scroll {
                    point: Some(point),
                    dx,
                    dy,
                    unit: None,
                    keys: None,
                }])
            }
            ViewerEvent::Key { key, mods } => {
                check_mods(&mods)?;
                if !is_key(&key) {
                    return Err(format!(
                        "{key:?} is not a key the computer takes (a named key such as enter or f5, or one printable character)"
                    ));
                }
                if ends_the_display(&key, &mods) {
                    let mut combo = mods.clone();
                    combo.push(key);
                    return Err(format!(
                        "{} is not sent: it would end or switch the computer's X display",
                        combo.join("+")
                    ));
                }
                let mut keys = mods;
                keys.push(key);
                Ok(vec![Action::Key { keys, repeat: None }])
            }
            ViewerEvent::Text { text } => {
                let n = text.chars().count();
                if n == 0 {
                    return Err("the text is empty; nothing to type".into());
                }
                if n > MAX_TEXT_CHARS {
                    return Err(format!(
                        "the text is {n} characters; at most {MAX_TEXT_CHARS} are typed at a time"
                    ));
                }
                Ok(vec![Action::Type { text }])
            }
        }
    }

    /// The ups of every button pressed and not let go, then forgotten (on
    /// give-back, a lost focus, or the socket's end).
    pub fn release(&mut self) -> Vec<Action> {
        // A touch is sent whole at its release: nothing on the phone is down.
        self.touching = None;
        std::mem::take(&mut self.pressed)
            .into_iter()
            .filter(|(_, p)| *p == Press::Plain)
            .filter_map(|(b, _)| button(b).ok())
            .map(|b| Action::Up {
                point: None,
                button: Some(b),
            })
            .collect()
    }
}

/// An event from the page's JSON, or why it is not one.
pub fn event_of(v: serde_json::Value) -> Result<ViewerEvent, String> {
    serde_json::from_value(v).map_err(|e| format!("the event is not one the viewer sends: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(m: &mut Mapper, v: serde_json::Value) -> Result<Vec<Action>, String> {
        m.map(event_of(v)?)
    }

    #[test]
    fn a_plain_press_is_a_down_and_an_up_and_give_back_lets_go_of_what_is_held() {
        let mut m = Mapper::new(1280, 800);
        let down = map(
            &mut m,
            json!({"type": "down", "x": 149, "y": 49, "button": 0}),
        )
        .unwrap();
        assert_eq!(
            down,
            [Action::Down {
                point: Some([149, 49]),
                button: Some(Button::Left)
            }]
        );
        map(&mut m, json!({"type": "down", "x": 1, "y": 2, "button": 2})).unwrap();
        let up = map(
            &mut m,
            json!({"type": "up", "x": 150, "y": 49, "button": 0}),
        )
        .unwrap();
        assert_eq!(
            up,
            [Action::Up {
                point: Some([150, 49]),
                button: Some(Button::Left)
            }]
        );
        assert_eq!(
            m.release(),
            [Action::Up {
                point: None,
                button: Some(Button::Right)
            }]
        );
        assert!(m.release().is_empty(), "forgotten once released");
    }

    #[test]
    fn a_press_with_a_modifier_is_one_click_at_the_up_with_the_keys_held_at_the_down() {
        let mut m = Mapper::new(100, 100);
        let d = map(
            &mut m,
            json!({"type": "down", "x": 5, "y": 6, "button": 0, "mods": ["shift"]}),
        );
        assert_eq!(d.unwrap(), [Action::Move { point: [5, 6] }]);
        let u = map(&mut m, json!({"type": "up", "x": 5, "y": 6, "button": 0})).unwrap();
        assert_eq!(
            u,
            [Action::Click {
                point: Some([5, 6]),
                button: Some(Button::Left),
                count: Some(1),
                keys: Some(vec!["shift".into()])
            }]
        );
        assert!(m.release().is_empty(), "a click holds nothing");
    }

    #[test]
    fn keys_text_and_wheel_map_and_what_would_end_the_display_is_refused() {
        let mut m = Mapper::new(100, 100);
        assert_eq!(
            map(
                &mut m,
                json!({"type": "key", "key": "s", "mods": ["ctrl", "shift"]})
            )
            .unwrap(),
            [Action::Key {
                keys: vec!["ctrl".into(), "shift".into(), "s".into()],
                repeat: None
            }]
        );
        for (key, mods) in [
            ("backspace", json!(["ctrl", "alt"])),
            ("f7", json!(["alt", "ctrl", "shift"])),
        ] {
            let e = map(&mut m, json!({"type": "key", "key": key, "mods": mods})).unwrap_err();
            assert!(
                e.ends_with("is not sent: it would end or switch the computer's X display"),
                "{e}"
            );
        }
        assert!(map(&mut m, json!({"type": "key", "key": "f7", "mods": ["alt"]})).is_ok());
        assert_eq!(
            map(
                &mut m,
                json!({"type": "text", "text": "Hello, agentrun! 123"})
            )
            .unwrap(),
            [Action::Type {
                text: "Hello, agentrun! 123".into()
            }]
        );
        assert_eq!(
            map(&mut m, json!({"type": "wheel", "x": 1, "y": 1, "dy": 240})).unwrap(),
            [Action::Scroll {
                point: Some([1, 1]),
                dx: 0,
                dy: 2,
                unit: None,
                keys: None
            }]
        );
        let small = map(&mut m, json!({"type": "wheel", "x": 1, "y": 1, "dy": -3})).unwrap();
        assert!(
            matches!(small[0], Action::Scroll { dy: -1, .. }),
            "{small:?}"
        );
    }

    #[test]
    fn fields_out_of_range_are_refused_in_words() {
        let mut m = Mapper::new(1280, 800);
        let cases = [
            (
                json!({"type": "move", "x": 1280, "y": 0}),
                "the point (1280, 0) is off the screen, which is 1280x800 (0 to 1279, 0 to 799)",
            ),
            (
                json!({"type": "wheel", "x": 0, "y": 0, "dy": 120_000}),
                "a wheel turn of 1000 clicks is past the most, 20 an event",
            ),
            (
                json!({"type": "down", "x": 0, "y": 0, "button": 9}),
                "button 9 is not one; 0 to 4 (left, middle, right, back, forward)",
            ),
            (
                json!({"type": "key", "key": "ctrl+c"}),
                "\"ctrl+c\" is not a key the computer takes (a named key such as enter or f5, or one printable character)",
            ),
            (
                json!({"type": "key", "key": "c", "mods": ["hyper"]}),
                "\"hyper\" is not a modifier; shift, ctrl, alt or super",
            ),
            (
                json!({"type": "text", "text": "x".repeat(65_537)}),
                "the text is 65537 characters; at most 65536 are typed at a time",
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(map(&mut m, ev).unwrap_err(), want);
        }
        let e = map(&mut m, json!({"type": "fly"})).unwrap_err();
        assert!(
            e.starts_with("the event is not one the viewer sends: "),
            "{e}"
        );
        assert!(map(&mut m, json!({"type": "text", "text": "x".repeat(65_536)})).is_ok());
    }

    #[test]
    fn on_a_touch_screen_a_press_and_release_is_a_tap_or_a_swipe_and_escape_is_back() {
        let mut m = Mapper::touch(1080, 2400);
        assert_eq!(
            map(
                &mut m,
                json!({"type": "down", "x": 100, "y": 200, "button": 0})
            ),
            Ok(vec![])
        );
        assert_eq!(
            map(&mut m, json!({"type": "move", "x": 105, "y": 210})),
            Ok(vec![])
        );
        assert_eq!(
            map(
                &mut m,
                json!({"type": "up", "x": 110, "y": 210, "button": 0})
            ),
            Ok(vec![Action::Tap { point: [100, 200] }])
        );
        map(
            &mut m,
            json!({"type": "down", "x": 500, "y": 1800, "button": 0}),
        )
        .unwrap();
        assert_eq!(
            map(
                &mut m,
                json!({"type": "up", "x": 500, "y": 600, "button": 0})
            ),
            Ok(vec![Action::Swipe {
                path: vec![[500, 1800], [500, 600]],
                ms: None
            }])
        );
        assert_eq!(
            map(&mut m, json!({"type": "up", "x": 5, "y": 5, "button": 0})),
            Ok(vec![]),
            "a release with no press touches nothing"
        );
        assert_eq!(
            map(&mut m, json!({"type": "key", "key": "escape"})),
            Ok(vec![Action::Button {
                button: PhoneButton::Back
            }])
        );
        assert_eq!(
            map(&mut m, json!({"type": "text", "text": "hi"})),
            Ok(vec![Action::Type { text: "hi".into() }])
        );
        for (ev, words) in [
            (
                json!({"type": "wheel", "x": 1, "y": 1, "dy": 120}),
                "a phone has no wheel: drag on its screen to swipe",
            ),
            (
                json!({"type": "down", "x": 1, "y": 1, "button": 2}),
                "a phone's screen takes touches: press the left button to touch (button 2 is none)",
            ),
            (
                json!({"type": "down", "x": 1080, "y": 1, "button": 0}),
                "the point (1080, 1) is off the screen, which is 1080x2400 (0 to 1079, 0 to 2399)",
            ),
        ] {
            assert_eq!(map(&mut m, ev), Err(words.to_string()));
        }
        map(&mut m, json!({"type": "down", "x": 9, "y": 9, "button": 0})).unwrap();
        assert_eq!(m.release(), vec![], "nothing is down on the phone");
        assert_eq!(
            map(&mut m, json!({"type": "up", "x": 9, "y": 9, "button": 0})),
            Ok(vec![])
        );
        assert_eq!(
            map(
                &mut Mapper::new(0, 0),
                json!({"type": "move", "x": 0, "y": 0})
            ),
            Err(
                "the screen's size is not known yet (no frame has come): wait for the first frame"
                    .into()
            )
        );
    }
}
