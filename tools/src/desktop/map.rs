//! The one table from what models send to protocol actions: Anthropic's
//! `computer_20251124` input ([`ComputerArgs`], one action per call) and
//! OpenAI's computer tool `actions[]` ([`OpenAiAction`]), each turned into
//! [`Action`]s of `input.actions` with every point already in screen
//! pixels (through a [`Points`]), or into a screenshot, a zoom or a
//! cursor read. Key names of both vendors (xdotool's keysyms, OpenAI's
//! capitals) become the protocol's [`computerd::protocol::KEYS`] here too.

use computerd::protocol::{Action, Button, KEYS, is_key};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{Result, ToolError};

/// Maps a point of the model's screenshot to the screen, refusing one
/// outside it; `field` names the argument in the refusal.
pub trait Points {
    fn to_screen(&self, field: &str, p: [i64; 2]) -> Result<[i64; 2]>;
}

/// What one call asks for once mapped.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Send these (one `input.actions` batch).
    Act(Vec<Action>),
    /// Take a screenshot.
    Screenshot,
    /// Show this region of the screenshot (x0, y0, x1, y1 in its pixels)
    /// at full resolution.
    Zoom([i64; 4]),
    /// Say where the pointer is.
    Cursor,
}

// ------------------------------------------------------------- Anthropic

/// `computer`'s actions, Anthropic's `computer_20251124` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComputerAction {
    Key,
    HoldKey,
    Type,
    CursorPosition,
    MouseMove,
    LeftMouseDown,
    LeftMouseUp,
    LeftClick,
    LeftClickDrag,
    RightClick,
    MiddleClick,
    DoubleClick,
    TripleClick,
    Scroll,
    Wait,
    Screenshot,
    Zoom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// Anthropic's computer-use input, as a `tool_use` block carries it.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerArgs {
    pub action: ComputerAction,
    /// [x, y] in the last screenshot's pixels.
    pub coordinate: Option<[i64; 2]>,
    /// left_click_drag's start, [x, y].
    pub start_coordinate: Option<[i64; 2]>,
    /// type: the text; key/hold_key: keys like "ctrl+a" or "Return"; clicks and scroll: modifiers held, like "shift".
    pub text: Option<String>,
    pub scroll_direction: Option<ScrollDirection>,
    /// Wheel clicks.
    pub scroll_amount: Option<u64>,
    /// Seconds (wait, hold_key).
    pub duration: Option<f64>,
    /// zoom: [x0, y0, x1, y1] of the last screenshot.
    pub region: Option<[i64; 4]>,
}

/// The most seconds `duration` takes (the protocol's batch bound).
pub const MAX_DURATION_S: f64 = 300.0;

fn need<T: Copy>(v: Option<T>, field: &str, action: &str) -> Result<T> {
    v.ok_or_else(|| ToolError::Invalid(format!("{action} needs {field}")))
}

fn seconds(d: Option<f64>, action: &str) -> Result<u64> {
    let d = need(d, "duration", action)?;
    if !(d.is_finite() && (0.0..=MAX_DURATION_S).contains(&d)) {
        return Err(ToolError::Invalid(format!(
            "duration is {d}; give seconds from 0 to {MAX_DURATION_S}"
        )));
    }
    Ok((d * 1000.0).round() as u64)
}

/// Anthropic's input to a plan. Fields an action does not take are
/// refused, so nothing is silently dropped.
pub fn anthropic(a: &ComputerArgs, points: &dyn Points) -> Result<Plan> {
    let action = a.action;
    use ComputerAction as A;
    let name = serde_json::to_value(action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let takes: &[&str] = match action {
        A::Key | A::Type => &["text"],
        A::HoldKey => &["text", "duration"],
        A::CursorPosition | A::Screenshot => &[],
        A::MouseMove => &["coordinate"],
        A::LeftMouseDown | A::LeftMouseUp => &["coordinate"],
        A::LeftClick | A::RightClick | A::MiddleClick | A::DoubleClick | A::TripleClick => {
            &["coordinate", "text"]
        }
        A::LeftClickDrag => &["start_coordinate", "coordinate"],
        A::Scroll => &["coordinate", "text", "scroll_direction", "scroll_amount"],
        A::Wait => &["duration"],
        A::Zoom => &["region"],
    };
    for (field, set) in [
        ("coordinate", a.coordinate.is_some()),
        ("start_coordinate", a.start_coordinate.is_some()),
        ("text", a.text.is_some()),
        ("scroll_direction", a.scroll_direction.is_some()),
        ("scroll_amount", a.scroll_amount.is_some()),
        ("duration", a.duration.is_some()),
        ("region", a.region.is_some()),
    ] {
        if set && !takes.contains(&field) {
            return Err(ToolError::Invalid(format!(
                "{name} takes no {field} (it takes {})",
                if takes.is_empty() {
                    "nothing but action".to_string()
                } else {
                    takes.join(", ")
                }
            )));
        }
    }
    let point = |p: Option<[i64; 2]>| p.map(|p| points.to_screen("coordinate", p)).transpose();
    let mods = || -> Result<Option<Vec<String>>> {
        match a.text.as_deref() {
            None | Some("") => Ok(None),
            Some(t) => combo("text", t, false).map(Some),
        }
    };
    let click = |button: Button, count: u64| -> Result<Plan> {
        Ok(Plan::Act(vec![Action::Click {
            point: point(a.coordinate)?,
            button: Some(button),
            count: Some(count),
            keys: mods()?,
        }]))
    };
    Ok(match action {
        A::Key => {
            let text = need(a.text.as_deref(), "text", &name)?;
            let mut out = Vec::new();
            for part in text.split_whitespace() {
                out.push(Action::Key {
                    keys: combo("text", part, false)?,
                    repeat: None,
                });
            }
            if out.is_empty() {
                return Err(ToolError::Invalid(
                    "text is empty; name the keys, like \"ctrl+a\" or \"Return\"".into(),
                ));
            }
            Plan::Act(out)
        }
        A::HoldKey => Plan::Act(vec![Action::Hold {
            keys: combo("text", need(a.text.as_deref(), "text", &name)?, false)?,
            ms: seconds(a.duration, &name)?,
        }]),
        A::Type => Plan::Act(vec![Action::Type {
            text: need(a.text.as_deref(), "text", &name)?.to_string(),
        }]),
        A::CursorPosition => Plan::Cursor,
        A::MouseMove => Plan::Act(vec![Action::Move {
            point: points.to_screen("coordinate", need(a.coordinate, "coordinate", &name)?)?,
        }]),
        A::LeftMouseDown => Plan::Act(vec![Action::Down {
            point: point(a.coordinate)?,
            button: Some(Button::Left),
        }]),
        A::LeftMouseUp => Plan::Act(vec![Action::Up {
            point: point(a.coordinate)?,
            button: Some(Button::Left),
        }]),
        A::LeftClick => click(Button::Left, 1)?,
        A::RightClick => click(Button::Right, 1)?,
        A::MiddleClick => click(Button::Middle, 1)?,
        A::DoubleClick => click(Button::Left, 2)?,
        A::TripleClick => click(Button::Left, 3)?,
        A::LeftClickDrag => Plan::Act(vec![Action::Drag {
            path: vec![
                points.to_screen(
                    "start_coordinate",
                    need(a.start_coordinate, "start_coordinate", &name)?,
                )?,
                points.to_screen("coordinate", need(a.coordinate, "coordinate", &name)?)?,
            ],
            button: None,
            keys: None,
        }]),
        A::Scroll => {
            let dir = need(a.scroll_direction, "scroll_direction", &name)?;
            let n = need(a.scroll_amount, "scroll_amount", &name)? as i64;
            let (dx, dy) = match dir {
                ScrollDirection::Up => (0, -n),
                ScrollDirection::Down => (0, n),
                ScrollDirection::Left => (-n, 0),
                ScrollDirection::Right => (n, 0),
            };
            Plan::Act(vec![Action::Scroll {
                point: point(a.coordinate)?,
                dx,
                dy,
                unit: None,
                keys: mods()?,
            }])
        }
        A::Wait => Plan::Act(vec![Action::Wait {
            ms: seconds(a.duration, &name)?,
        }]),
        A::Screenshot => Plan::Screenshot,
        A::Zoom => Plan::Zoom(need(a.region, "region", &name)?),
    })
}

// ---------------------------------------------------------------- OpenAI

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpenAiButton {
    Left,
    Right,
    Wheel,
    Back,
    Forward,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenAiPoint {
    pub x: i64,
    pub y: i64,
}

/// An OpenAI computer action as sent; `keys`: modifiers held.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum OpenAiAction {
    Click {
        x: i64,
        y: i64,
        button: Option<OpenAiButton>,
        keys: Option<Vec<String>>,
    },
    DoubleClick {
        x: i64,
        y: i64,
        keys: Option<Vec<String>>,
    },
    Drag {
        path: Vec<OpenAiPoint>,
        keys: Option<Vec<String>>,
    },
    Keypress {
        keys: Vec<String>,
    },
    Move {
        x: i64,
        y: i64,
        keys: Option<Vec<String>>,
    },
    /// scroll_x/scroll_y in pixels, a wheel click per 100.
    Scroll {
        x: i64,
        y: i64,
        #[serde(default)]
        scroll_x: i64,
        #[serde(default)]
        scroll_y: i64,
        keys: Option<Vec<String>>,
    },
    Type {
        text: String,
    },
    /// A second.
    Wait {},
    Screenshot {},
}

/// Pixels of OpenAI's scroll per wheel click.
pub const PX_PER_CLICK: i64 = 100;
/// OpenAI's `wait`, which gives no time.
pub const OPENAI_WAIT_MS: u64 = 1000;

/// Pixels to wheel clicks: a click per [`PX_PER_CLICK`], at least one
/// when the pixels are not zero.
pub fn clicks(px: i64) -> i64 {
    if px == 0 {
        return 0;
    }
    let n = (px.unsigned_abs().div_ceil(PX_PER_CLICK as u64)).min(i64::MAX as u64) as i64;
    n * px.signum()
}

/// One step of an OpenAI batch once mapped.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Act(Action),
    Screenshot,
}

fn held(i: usize, keys: &Option<Vec<String>>) -> Result<Option<Vec<String>>> {
    match keys {
        None => Ok(None),
        Some(k) if k.is_empty() => Ok(None),
        Some(k) => k
            .iter()
            .enumerate()
            .map(|(j, name)| key(&format!("actions[{i}].keys[{j}]"), name, true))
            .collect::<Result<Vec<_>>>()
            .map(Some),
    }
}

/// OpenAI's batch to steps, one per action, in order.
pub fn openai(actions: &[OpenAiAction], points: &dyn Points) -> Result<Vec<Step>> {
    let mut out = Vec::with_capacity(actions.len());
    for (i, a) in actions.iter().enumerate() {
        let pt = |x: i64, y: i64| points.to_screen(&format!("actions[{i}]"), [x, y]);
        out.push(match a {
            OpenAiAction::Click { x, y, button, keys } => Step::Act(Action::Click {
                point: Some(pt(*x, *y)?),
                button: Some(match button.unwrap_or(OpenAiButton::Left) {
                    OpenAiButton::Left => Button::Left,
                    OpenAiButton::Right => Button::Right,
                    OpenAiButton::Wheel => Button::Middle,
                    OpenAiButton::Back => Button::Back,
                    OpenAiButton::Forward => Button::Forward,
                }),
                count: Some(1),
                keys: held(i, keys)?,
            }),
            OpenAiAction::DoubleClick { x, y, keys } => Step::Act(Action::Click {
                point: Some(pt(*x, *y)?),
                button: Some(Button::Left),
                count: Some(2),
                keys: held(i, keys)?,
            }),
            OpenAiAction::Drag { path, keys } => Step::Act(Action::Drag {
                path: path
                    .iter()
                    .enumerate()
                    .map(|(j, p)| {
                        points.to_screen(&format!("actions[{i}].path[{j}]"), [p.x, p.y])
                    })
                    .collect::<Result<_>>()?,
                button: None,
                keys: held(i, keys)?,
            }),
            OpenAiAction::Keypress { keys } => Step::Act(Action::Key {
                keys: held(i, &Some(keys.clone()))?.unwrap_or_default(),
                repeat: None,
            }),
            OpenAiAction::Move { x, y, keys } => {
                if held(i, keys)?.is_some() {
                    return Err(ToolError::Invalid(format!(
                        "actions[{i}].keys: a move holds no keys here; send a keypress or a drag with keys"
                    )));
                }
                Step::Act(Action::Move { point: pt(*x, *y)? })
            }
            OpenAiAction::Scroll {
                x,
                y,
                scroll_x,
                scroll_y,
                keys,
            } => Step::Act(Action::Scroll {
                point: Some(pt(*x, *y)?),
                dx: clicks(*scroll_x),
                dy: clicks(*scroll_y),
                unit: None,
                keys: held(i, keys)?,
            }),
            OpenAiAction::Type { text } => Step::Act(Action::Type { text: text.clone() }),
            OpenAiAction::Wait {} => Step::Act(Action::Wait { ms: OPENAI_WAIT_MS }),
            OpenAiAction::Screenshot {} => Step::Screenshot,
        });
    }
    Ok(out)
}

// ------------------------------------------------------------------ keys

/// Names both vendors use for the protocol's keys (lowercase; xdotool's
/// keysyms, OpenAI's and the browsers' names).
const ALIASES: &[(&str, &str)] = &[
    ("return", "enter"),
    ("kp_enter", "enter"),
    ("back_space", "backspace"),
    ("del", "delete"),
    ("esc", "escape"),
    ("ins", "insert"),
    ("arrowup", "up"),
    ("arrowdown", "down"),
    ("arrowleft", "left"),
    ("arrowright", "right"),
    ("page_up", "pageup"),
    ("prior", "pageup"),
    ("page_down", "pagedown"),
    ("next", "pagedown"),
    ("shift_l", "shift"),
    ("shift_r", "shift"),
    ("control", "ctrl"),
    ("control_l", "ctrl"),
    ("control_r", "ctrl"),
    ("ctl", "ctrl"),
    ("alt_l", "alt"),
    ("alt_r", "alt"),
    ("option", "alt"),
    ("super_l", "super"),
    ("super_r", "super"),
    ("meta", "super"),
    ("cmd", "super"),
    ("command", "super"),
    ("win", "super"),
    ("windows", "super"),
    ("caps_lock", "capslock"),
    ("minus", "-"),
    ("plus", "+"),
    ("equal", "="),
    ("comma", ","),
    ("period", "."),
    ("slash", "/"),
    ("backslash", "\\"),
    ("semicolon", ";"),
    ("apostrophe", "'"),
    ("grave", "`"),
    ("bracketleft", "["),
    ("bracketright", "]"),
];

/// One key name to the protocol's. `capitals` is OpenAI's convention,
/// where letters are named in capitals ("A" is the a key); with xdotool's
/// a capital letter is that character (shift and the letter).
pub fn key(field: &str, name: &str, capitals: bool) -> Result<String> {
    let b = name.as_bytes();
    if b.len() == 1 && is_key(name) {
        return Ok(if capitals {
            name.to_ascii_lowercase()
        } else {
            name.to_string()
        });
    }
    let lower = name.to_ascii_lowercase();
    let found = if KEYS.contains(&lower.as_str()) {
        Some(lower.clone())
    } else {
        ALIASES
            .iter()
            .find(|(a, _)| *a == lower)
            .map(|(_, k)| k.to_string())
    };
    found.ok_or_else(|| {
        ToolError::Invalid(format!(
            "{field}: {name:?} is not a key; a key is one printable ASCII character or one of {} (xdotool names like Return and Page_Down, and ARROWUP, ESC, CMD, work too)",
            KEYS.join(", ")
        ))
    })
}

/// A combination like "ctrl+shift+t" (a lone "+" is the plus key).
pub fn combo(field: &str, text: &str, capitals: bool) -> Result<Vec<String>> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::Invalid(format!(
            "{field} is empty; name a key, like \"ctrl+a\""
        )));
    }
    let mut parts: Vec<&str> = text.split('+').collect();
    // "ctrl++": the last key is "+".
    if text.ends_with("++") || text == "+" {
        parts.retain(|p| !p.is_empty());
        parts.push("+");
    }
    parts
        .iter()
        .map(|p| {
            if p.is_empty() {
                Err(ToolError::Invalid(format!(
                    "{field}: {text:?} has an empty key between +s"
                )))
            } else {
                key(field, p, capitals)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A screenshot at half the screen's size, 640x400 of 1280x800.
    struct Half;
    impl Points for Half {
        fn to_screen(&self, field: &str, p: [i64; 2]) -> Result<[i64; 2]> {
            if !(0..640).contains(&p[0]) || !(0..400).contains(&p[1]) {
                return Err(ToolError::Invalid(format!("{field} is off")));
            }
            Ok([p[0] * 2, p[1] * 2])
        }
    }

    fn a(v: serde_json::Value) -> Result<Plan> {
        anthropic(&serde_json::from_value(v).unwrap(), &Half)
    }

    fn keys(k: &[&str]) -> Option<Vec<String>> {
        Some(k.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn every_anthropic_action_maps_to_its_protocol_actions() {
        use serde_json::json;
        let act = |v| match a(v).unwrap() {
            Plan::Act(x) => x,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            act(json!({"action": "key", "text": "ctrl+a Return"})),
            vec![
                Action::Key {
                    keys: vec!["ctrl".into(), "a".into()],
                    repeat: None
                },
                Action::Key {
                    keys: vec!["enter".into()],
                    repeat: None
                }
            ]
        );
        assert_eq!(
            act(json!({"action": "hold_key", "text": "shift", "duration": 1.5})),
            vec![Action::Hold {
                keys: vec!["shift".into()],
                ms: 1500
            }]
        );
        assert_eq!(
            act(json!({"action": "type", "text": "Hi!"})),
            vec![Action::Type { text: "Hi!".into() }]
        );
        assert_eq!(
            act(json!({"action": "mouse_move", "coordinate": [10, 20]})),
            vec![Action::Move { point: [20, 40] }]
        );
        assert_eq!(
            act(json!({"action": "left_mouse_down"})),
            vec![Action::Down {
                point: None,
                button: Some(Button::Left)
            }]
        );
        assert_eq!(
            act(json!({"action": "left_mouse_up", "coordinate": [1, 1]})),
            vec![Action::Up {
                point: Some([2, 2]),
                button: Some(Button::Left)
            }]
        );
        for (name, button, count) in [
            ("left_click", Button::Left, 1),
            ("right_click", Button::Right, 1),
            ("middle_click", Button::Middle, 1),
            ("double_click", Button::Left, 2),
            ("triple_click", Button::Left, 3),
        ] {
            assert_eq!(
                act(json!({"action": name, "coordinate": [300, 50], "text": "ctrl+shift"})),
                vec![Action::Click {
                    point: Some([600, 100]),
                    button: Some(button),
                    count: Some(count),
                    keys: keys(&["ctrl", "shift"])
                }],
                "{name}"
            );
        }
        assert_eq!(
            act(json!({"action": "left_click"})),
            vec![Action::Click {
                point: None,
                button: Some(Button::Left),
                count: Some(1),
                keys: None
            }]
        );
        assert_eq!(
            act(
                json!({"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [5, 6]})
            ),
            vec![Action::Drag {
                path: vec![[0, 0], [10, 12]],
                button: None,
                keys: None
            }]
        );
        for (dir, dx, dy) in [
            ("up", 0, -3),
            ("down", 0, 3),
            ("left", -3, 0),
            ("right", 3, 0),
        ] {
            assert_eq!(
                act(
                    json!({"action": "scroll", "coordinate": [1, 2], "scroll_direction": dir, "scroll_amount": 3, "text": "shift"})
                ),
                vec![Action::Scroll {
                    point: Some([2, 4]),
                    dx,
                    dy,
                    unit: None,
                    keys: keys(&["shift"])
                }]
            );
        }
        assert_eq!(
            act(json!({"action": "wait", "duration": 2})),
            vec![Action::Wait { ms: 2000 }]
        );
        assert_eq!(
            a(json!({"action": "screenshot"})).unwrap(),
            Plan::Screenshot
        );
        assert_eq!(
            a(json!({"action": "cursor_position"})).unwrap(),
            Plan::Cursor
        );
        assert_eq!(
            a(json!({"action": "zoom", "region": [0, 0, 50, 50]})).unwrap(),
            Plan::Zoom([0, 0, 50, 50])
        );
    }

    #[test]
    fn anthropic_input_that_cannot_be_sent_is_refused_naming_the_field() {
        use serde_json::json;
        let words = |v| a(v).unwrap_err().to_string();
        assert_eq!(
            words(json!({"action": "left_click", "coordinate": [640, 0]})),
            "coordinate is off"
        );
        assert_eq!(
            words(json!({"action": "key", "text": "Hyper"}))
                .split(';')
                .next(),
            Some("text: \"Hyper\" is not a key")
        );
        assert_eq!(
            words(json!({"action": "scroll", "scroll_direction": "up"})),
            "scroll needs scroll_amount"
        );
        assert_eq!(
            words(json!({"action": "wait", "duration": 301})),
            "duration is 301; give seconds from 0 to 300"
        );
        assert_eq!(
            words(json!({"action": "screenshot", "coordinate": [1, 1]})),
            "screenshot takes no coordinate (it takes nothing but action)"
        );
    }

    fn o(v: serde_json::Value) -> Result<Vec<Step>> {
        let actions: Vec<OpenAiAction> = serde_json::from_value(v).unwrap();
        openai(&actions, &Half)
    }

    #[test]
    fn every_openai_action_maps_to_its_protocol_action() {
        use serde_json::json;
        let steps = o(json!([
            {"type": "click", "x": 10, "y": 10, "button": "wheel", "keys": ["CTRL"]},
            {"type": "click", "x": 10, "y": 10, "button": "back"},
            {"type": "double_click", "x": 1, "y": 2},
            {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 3, "y": 4}]},
            {"type": "keypress", "keys": ["CTRL", "A"]},
            {"type": "move", "x": 5, "y": 5},
            {"type": "scroll", "x": 5, "y": 5, "scroll_x": -50, "scroll_y": 250},
            {"type": "type", "text": "hello"},
            {"type": "wait"},
            {"type": "screenshot"}
        ]))
        .unwrap();
        assert_eq!(
            steps,
            vec![
                Step::Act(Action::Click {
                    point: Some([20, 20]),
                    button: Some(Button::Middle),
                    count: Some(1),
                    keys: keys(&["ctrl"])
                }),
                Step::Act(Action::Click {
                    point: Some([20, 20]),
                    button: Some(Button::Back),
                    count: Some(1),
                    keys: None
                }),
                Step::Act(Action::Click {
                    point: Some([2, 4]),
                    button: Some(Button::Left),
                    count: Some(2),
                    keys: None
                }),
                Step::Act(Action::Drag {
                    path: vec![[0, 0], [6, 8]],
                    button: None,
                    keys: None
                }),
                Step::Act(Action::Key {
                    keys: vec!["ctrl".into(), "a".into()],
                    repeat: None
                }),
                Step::Act(Action::Move { point: [10, 10] }),
                Step::Act(Action::Scroll {
                    point: Some([10, 10]),
                    dx: -1,
                    dy: 3,
                    unit: None,
                    keys: None
                }),
                Step::Act(Action::Type {
                    text: "hello".into()
                }),
                Step::Act(Action::Wait { ms: 1000 }),
                Step::Screenshot,
            ]
        );
        let e = o(json!([{"type": "keypress", "keys": ["CTRL", "HYPER"]}])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("actions[0].keys[1]: \"HYPER\" is not a key"),
            "{e}"
        );
        let e = o(json!([{"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 700, "y": 0}]}]))
            .unwrap_err();
        assert_eq!(e.to_string(), "actions[0].path[1] is off");
    }

    #[test]
    fn key_names_of_both_vendors_become_protocol_keys() {
        for (given, capitals, want) in [
            ("Return", false, "enter"),
            ("ENTER", true, "enter"),
            ("Page_Down", false, "pagedown"),
            ("ARROWUP", true, "up"),
            ("ESC", true, "escape"),
            ("super", false, "super"),
            ("CMD", true, "super"),
            ("A", true, "a"),
            ("A", false, "A"),
            ("minus", false, "-"),
            ("F5", true, "f5"),
        ] {
            assert_eq!(key("k", given, capitals).unwrap(), want, "{given}");
        }
        assert_eq!(combo("t", "ctrl++", false).unwrap(), ["ctrl", "+"]);
        assert_eq!(combo("t", "+", false).unwrap(), ["+"]);
        assert!(combo("t", "ctrl+", false).is_err());
        assert_eq!(clicks(0), 0);
        assert_eq!(clicks(1), 1);
        assert_eq!(clicks(-250), -3);
    }
}
