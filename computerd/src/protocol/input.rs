//! input.actions: pointer, keys and touch, as one ordered batch, and the
//! check every batch passes before anything is sent ([`check_actions`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::envelope::ErrorKind;
use super::kinds::Group;
use super::limits;

/// The named keys. A key is one of these or one printable ASCII character
/// (0x21-0x7e); see [`is_key`].
pub const KEYS: &[&str] = &[
    "enter",
    "tab",
    "space",
    "backspace",
    "delete",
    "escape",
    "insert",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    "f1",
    "f2",
    "f3",
    "f4",
    "f5",
    "f6",
    "f7",
    "f8",
    "f9",
    "f10",
    "f11",
    "f12",
    "shift",
    "ctrl",
    "alt",
    "super",
    "capslock",
];

/// Whether `name` is a key: a name in [`KEYS`] or one printable ASCII
/// character other than space (0x21-0x7e).
pub fn is_key(name: &str) -> bool {
    let b = name.as_bytes();
    (b.len() == 1 && (0x21..=0x7e).contains(&b[0])) || KEYS.contains(&name)
}

/// A pointer button.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Button {
    #[default]
    Left,
    Middle,
    Right,
    Back,
    Forward,
}

/// What a scroll's amounts count: wheel clicks (default) or pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ScrollUnit {
    #[default]
    Click,
    Px,
}

/// A phone's hardware button.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PhoneButton {
    Back,
    Home,
    AppSwitch,
    VolumeUp,
    VolumeDown,
}

/// The action enum, and its twin the decoder reads. [`Action`] is on the
/// wire internally tagged (`{"type": "move", "point": [1, 2]}`), but serde's
/// derive for that buffers every field first (its own copy of every
/// variant's decoding, some 50 KiB of the static daemon); the twin is
/// externally tagged (`{"move": {"point": [1, 2]}}`), which reads the
/// fields straight, so [`Action`]'s `Deserialize` moves `type` out and
/// reads the twin. One list of variants makes both.
macro_rules! actions {
    ($(
        $(#[$vattr:meta])*
        $variant:ident { $( $(#[$fattr:meta])* $field:ident : $ty:ty ),* $(,)? },
    )*) => {
        /// One action. Points are `[x, y]` in the screen's pixels, origin top left.
        /// A pointer action without a point acts where the pointer is.
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
        #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Action {
            $( $(#[$vattr])* $variant { $( $(#[$fattr])* $field: $ty ),* }, )*
        }

        /// [`Action`] externally tagged: what its `Deserialize` reads.
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case", deny_unknown_fields)]
        enum Tagged {
            $( $variant { $( $(#[$fattr])* $field: $ty ),* }, )*
        }

        impl From<Tagged> for Action {
            fn from(t: Tagged) -> Self {
                match t {
                    $( Tagged::$variant { $($field),* } => Action::$variant { $($field),* }, )*
                }
            }
        }
    };
}

actions! {
    /// Move the pointer.
    Move { point: [i64; 2] },
    /// Press a button (at a point, moving there first), and keep it pressed.
    Down {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<[i64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        button: Option<Button>,
    },
    /// Release a button.
    Up {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<[i64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        button: Option<Button>,
    },
    /// Click `count` times (1-3), with `keys` held around the clicks.
    Click {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<[i64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        button: Option<Button>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keys: Option<Vec<String>>,
    },
    /// Press at the path's first point, move through the rest, release at the last.
    Drag {
        path: Vec<[i64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        button: Option<Button>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keys: Option<Vec<String>>,
    },
    /// Turn the wheel: dy above 0 down, below 0 up; dx right and left.
    Scroll {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<[i64; 2]>,
        #[serde(default)]
        dx: i64,
        #[serde(default)]
        dy: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unit: Option<ScrollUnit>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keys: Option<Vec<String>>,
    },
    /// Press the keys in order and release them in reverse (a combo), `repeat` times.
    Key {
        keys: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeat: Option<u64>,
    },
    /// Press the keys, keep them down for `ms`, release them in reverse.
    Hold { keys: Vec<String>, ms: u64 },
    /// Type exactly this text, whatever Caps Lock says.
    Type { text: String },
    /// Do nothing for `ms`.
    Wait { ms: u64 },
    /// Touch: a tap at a point.
    Tap { point: [i64; 2] },
    /// Touch: a press held `ms` at a point (at most 10 000; the phone's
    /// long-press time when absent).
    LongPress {
        point: [i64; 2],
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// Touch: one finger down at the path's first point, through the rest
    /// (2 to 100 points), up at the last, in `ms` (0 to 1000; the phone
    /// client's own pace when absent).
    Swipe {
        path: Vec<[i64; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// Touch: two fingers about a point, apart (scale above 1) or together.
    Pinch { point: [i64; 2], scale: f64 },
    /// A phone's button.
    Button { button: PhoneButton },
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        action_of(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// An action from its JSON object: `type` names the variant, the other
/// fields are its fields. The refusals are serde's words for an internally
/// tagged enum. (Serde's derive would also take an array led by the type,
/// its fields in order: no client sends one, the schema says object, and
/// it is refused.)
fn action_of(v: Value) -> Result<Action, serde_json::Error> {
    use serde::de::Error as _;
    let mut fields = match v {
        Value::Object(o) => o,
        other => {
            return Err(serde_json::Error::invalid_type(
                unexpected(&other),
                &"internally tagged enum Action",
            ));
        }
    };
    let name = match fields.remove("type") {
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(serde_json::Error::invalid_type(
                unexpected(&other),
                &"variant identifier",
            ));
        }
        None => return Err(serde_json::Error::missing_field("type")),
    };
    let tagged = serde_json::Map::from_iter([(name, Value::Object(fields))]);
    Tagged::deserialize(Value::Object(tagged)).map(Action::from)
}

/// A JSON value as serde names what it got instead of what it expected.
fn unexpected(v: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            (_, _, f) => Unexpected::Float(f.unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl Action {
    /// The action's name on the wire (its `type`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Move { .. } => "move",
            Action::Down { .. } => "down",
            Action::Up { .. } => "up",
            Action::Click { .. } => "click",
            Action::Drag { .. } => "drag",
            Action::Scroll { .. } => "scroll",
            Action::Key { .. } => "key",
            Action::Hold { .. } => "hold",
            Action::Type { .. } => "type",
            Action::Wait { .. } => "wait",
            Action::Tap { .. } => "tap",
            Action::LongPress { .. } => "long_press",
            Action::Swipe { .. } => "swipe",
            Action::Pinch { .. } => "pinch",
            Action::Button { .. } => "button",
        }
    }

    /// The group a computer must declare to take this action (none for wait).
    pub fn group(&self) -> Option<Group> {
        match self {
            Action::Move { .. }
            | Action::Down { .. }
            | Action::Up { .. }
            | Action::Click { .. }
            | Action::Drag { .. }
            | Action::Scroll { .. } => Some(Group::InputPointer),
            Action::Key { .. } | Action::Hold { .. } | Action::Type { .. } => {
                Some(Group::InputKeys)
            }
            Action::Wait { .. } => None,
            Action::Tap { .. }
            | Action::LongPress { .. }
            | Action::Swipe { .. }
            | Action::Pinch { .. }
            | Action::Button { .. } => Some(Group::InputTouch),
        }
    }

    /// How long the action waits or holds on purpose, in ms.
    fn waits_ms(&self) -> u64 {
        match self {
            Action::Hold { ms, .. } | Action::Wait { ms } => *ms,
            Action::LongPress { ms, .. } | Action::Swipe { ms, .. } => ms.unwrap_or(0),
            _ => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InputActionsParams {
    /// At most 100 actions, run in order.
    pub actions: Vec<Action>,
}

/// Where a batch stopped: the action's index, why, in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ActionFailure {
    pub index: u64,
    pub kind: ErrorKind,
    pub message: String,
}

/// What a batch did: `done` actions ran whole; `failed` says where it
/// stopped, when it did (and everything the batch pressed was released).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InputActionsResult {
    pub done: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<ActionFailure>,
}

impl InputActionsResult {
    /// A batch refused whole: nothing ran.
    pub fn refused(f: ActionFailure) -> Self {
        Self {
            done: 0,
            failed: Some(f),
        }
    }
}

/// What the computer can take, besides its groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Scrolls may count pixels (else only wheel clicks).
    pub pixel_scroll: bool,
}

fn fail(index: usize, kind: ErrorKind, message: String) -> ActionFailure {
    ActionFailure {
        index: index as u64,
        kind,
        message,
    }
}

/// [`check_actions`] over actions still in JSON (as they come off the
/// wire): each is first decoded, so a bad shape fails at its own index.
pub fn check_actions_json(
    actions: &[Value],
    groups: &[Group],
    options: CheckOptions,
) -> Result<Vec<Action>, ActionFailure> {
    check_count(actions.len())?;
    let mut out = Vec::with_capacity(actions.len());
    for (i, v) in actions.iter().enumerate() {
        if let Some(field) = not_whole(v) {
            return Err(fail(
                i,
                ErrorKind::Invalid,
                format!(
                    "actions[{i}].{field} is not a whole number; points, counts and times are whole"
                ),
            ));
        }
        // An internally tagged enum buffers its fields, so no path would
        // survive; serde's own words name an unknown or missing field.
        match Action::deserialize(v) {
            Ok(a) => out.push(a),
            Err(e) => {
                return Err(fail(
                    i,
                    ErrorKind::Invalid,
                    format!("actions[{i}] is not an action: {e}"),
                ));
            }
        }
    }
    check_actions(&out, groups, options)?;
    Ok(out)
}

/// The first field (but a pinch's scale) holding a number with a fraction.
fn not_whole(v: &Value) -> Option<String> {
    fn fraction(v: &Value) -> bool {
        match v {
            Value::Number(n) => !(n.is_i64() || n.is_u64()),
            Value::Array(a) => a.iter().any(fraction),
            _ => false,
        }
    }
    let o = v.as_object()?;
    o.iter()
        .find(|(k, v)| k.as_str() != "scale" && fraction(v))
        .map(|(k, _)| k.clone())
}

fn check_count(n: usize) -> Result<(), ActionFailure> {
    if n > limits::MAX_ACTIONS {
        return Err(fail(
            limits::MAX_ACTIONS,
            ErrorKind::Limit,
            format!(
                "actions holds {n} actions; at most {} go in one batch (send the rest in another)",
                limits::MAX_ACTIONS
            ),
        ));
    }
    Ok(())
}

/// The check a whole batch passes before any of it runs: at most
/// [`limits::MAX_ACTIONS`] actions, each action's group declared in
/// `groups`, every key in [`KEYS`], click counts 1-3, text with no control
/// character but newline and tab, a pixel scroll only where
/// `options.pixel_scroll`, the bounds of [`limits`], and waits plus holds
/// together at most [`limits::MAX_BATCH_WAIT_MS`]. The first failure is
/// returned, with its index; a batch that fails runs nothing.
pub fn check_actions(
    actions: &[Action],
    groups: &[Group],
    options: CheckOptions,
) -> Result<(), ActionFailure> {
    check_count(actions.len())?;
    let mut waited: u64 = 0;
    for (i, a) in actions.iter().enumerate() {
        let name = a.name();
        if let Some(g) = a.group()
            && !groups.contains(&g)
        {
            return Err(fail(
                i,
                ErrorKind::Unsupported,
                format!(
                    "actions[{i}] is a {name}, which needs the group {g}; this computer declares {}",
                    if groups.is_empty() {
                        "none".to_string()
                    } else {
                        groups
                            .iter()
                            .map(|g| g.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ));
        }
        check_one(i, a, options)?;
        waited = waited.saturating_add(a.waits_ms());
        if waited > limits::MAX_BATCH_WAIT_MS {
            return Err(fail(
                i,
                ErrorKind::Limit,
                format!(
                    "actions[{i}] brings the batch's waits and holds to {waited} ms; at most {} ms (300 s) go in one batch",
                    limits::MAX_BATCH_WAIT_MS
                ),
            ));
        }
    }
    Ok(())
}

fn check_keys(i: usize, field: &str, keys: &[String], empty_ok: bool) -> Result<(), ActionFailure> {
    if keys.is_empty() && !empty_ok {
        return Err(fail(
            i,
            ErrorKind::Invalid,
            format!("actions[{i}].{field} is empty; name at least one key"),
        ));
    }
    if keys.len() > limits::MAX_KEYS_AT_ONCE {
        return Err(fail(
            i,
            ErrorKind::Limit,
            format!(
                "actions[{i}].{field} holds {} keys; at most {} are held at once",
                keys.len(),
                limits::MAX_KEYS_AT_ONCE
            ),
        ));
    }
    for (k, key) in keys.iter().enumerate() {
        if !is_key(key) {
            return Err(fail(
                i,
                ErrorKind::Invalid,
                format!(
                    "actions[{i}].{field}[{k}] is {key:?}, not a key: a key is one printable ASCII character or one of {}",
                    KEYS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A drag's or a swipe's path (`what`): 2 to `most` points.
fn check_path_len(i: usize, n: usize, what: &str, most: usize) -> Result<(), ActionFailure> {
    if n < 2 {
        return Err(fail(
            i,
            ErrorKind::Invalid,
            format!("actions[{i}].path holds {n} points; a {what} needs at least 2"),
        ));
    }
    if n > most {
        return Err(fail(
            i,
            ErrorKind::Limit,
            format!("actions[{i}].path holds {n} points; at most {most} go in one {what}"),
        ));
    }
    Ok(())
}

/// A touch's `ms`: at most `most`, for a `what`.
fn check_touch_ms(i: usize, ms: Option<u64>, what: &str, most: u64) -> Result<(), ActionFailure> {
    match ms {
        Some(ms) if ms > most => Err(fail(
            i,
            ErrorKind::Limit,
            format!("actions[{i}].ms is {ms}; a {what} lasts 0 to {most} ms"),
        )),
        _ => Ok(()),
    }
}

fn check_one(i: usize, a: &Action, options: CheckOptions) -> Result<(), ActionFailure> {
    match a {
        Action::Click { count, keys, .. } => {
            if let Some(c) = count
                && !(1..=limits::MAX_CLICK_COUNT).contains(c)
            {
                return Err(fail(
                    i,
                    ErrorKind::Invalid,
                    format!(
                        "actions[{i}].count is {c}; a click counts 1 to {} (single, double, triple)",
                        limits::MAX_CLICK_COUNT
                    ),
                ));
            }
            check_keys(i, "keys", keys.as_deref().unwrap_or(&[]), true)
        }
        Action::Drag { path, keys, .. } => {
            check_path_len(i, path.len(), "drag", limits::MAX_DRAG_POINTS)?;
            check_keys(i, "keys", keys.as_deref().unwrap_or(&[]), true)
        }
        Action::Scroll {
            dx, dy, unit, keys, ..
        } => {
            if unit.unwrap_or_default() == ScrollUnit::Px {
                if !options.pixel_scroll {
                    return Err(fail(
                        i,
                        ErrorKind::Unsupported,
                        format!(
                            "actions[{i}].unit is px, but this computer's wheel turns in clicks; scroll with unit click"
                        ),
                    ));
                }
            } else {
                let clicks = dx.unsigned_abs().saturating_add(dy.unsigned_abs());
                if clicks > limits::MAX_SCROLL_CLICKS {
                    return Err(fail(
                        i,
                        ErrorKind::Limit,
                        format!(
                            "actions[{i}] scrolls {clicks} clicks; at most {} go in one scroll",
                            limits::MAX_SCROLL_CLICKS
                        ),
                    ));
                }
            }
            check_keys(i, "keys", keys.as_deref().unwrap_or(&[]), true)
        }
        Action::Key { keys, repeat } => {
            check_keys(i, "keys", keys, false)?;
            if let Some(r) = repeat
                && !(1..=limits::MAX_KEY_REPEAT).contains(r)
            {
                return Err(fail(
                    i,
                    if *r == 0 {
                        ErrorKind::Invalid
                    } else {
                        ErrorKind::Limit
                    },
                    format!(
                        "actions[{i}].repeat is {r}; a key repeats 1 to {} times",
                        limits::MAX_KEY_REPEAT
                    ),
                ));
            }
            Ok(())
        }
        Action::Hold { keys, .. } => check_keys(i, "keys", keys, false),
        Action::Type { text } => {
            let n = text.chars().count();
            if n > limits::MAX_TYPE_CHARS {
                return Err(fail(
                    i,
                    ErrorKind::Limit,
                    format!(
                        "actions[{i}].text holds {n} characters; at most {} go in one type (type it in parts)",
                        limits::MAX_TYPE_CHARS
                    ),
                ));
            }
            if let Some((at, c)) = text
                .chars()
                .enumerate()
                .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
            {
                return Err(fail(
                    i,
                    ErrorKind::Invalid,
                    format!(
                        "actions[{i}].text holds the control character U+{:04X} at character {at}; no key types it (only newline and tab are typed)",
                        u32::from(c)
                    ),
                ));
            }
            Ok(())
        }
        Action::Swipe { path, ms } => {
            check_path_len(i, path.len(), "swipe", limits::MAX_SWIPE_POINTS)?;
            check_touch_ms(i, *ms, "swipe", limits::MAX_SWIPE_MS)
        }
        Action::LongPress { ms, .. } => {
            check_touch_ms(i, *ms, "long press", limits::MAX_LONG_PRESS_MS)
        }
        Action::Pinch { scale, .. } => {
            if !(scale.is_finite() && *scale > 0.0 && *scale != 1.0) {
                return Err(fail(
                    i,
                    ErrorKind::Invalid,
                    format!(
                        "actions[{i}].scale is {scale}; above 1 pinches apart, between 0 and 1 together"
                    ),
                ));
            }
            Ok(())
        }
        Action::Move { .. }
        | Action::Down { .. }
        | Action::Up { .. }
        | Action::Wait { .. }
        | Action::Tap { .. }
        | Action::Button { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DESKTOP: &[Group] = &[Group::Screen, Group::InputPointer, Group::InputKeys];

    fn check(actions: Value) -> Result<Vec<Action>, ActionFailure> {
        let Value::Array(a) = actions else {
            panic!("not an array")
        };
        check_actions_json(&a, DESKTOP, CheckOptions::default())
    }

    fn refused(actions: Value) -> ActionFailure {
        check(actions).unwrap_err()
    }

    #[test]
    fn a_good_batch_passes_and_decodes() {
        let a = check(json!([
            {"type": "move", "point": [10, 20]},
            {"type": "click", "point": [10, 20], "count": 2, "keys": ["shift"]},
            {"type": "drag", "path": [[0, 0], [5, 5]]},
            {"type": "scroll", "dy": 3},
            {"type": "key", "keys": ["ctrl", "a"], "repeat": 2},
            {"type": "hold", "keys": ["shift"], "ms": 10},
            {"type": "type", "text": "Hello, agentrun! 123\n\té"},
            {"type": "wait", "ms": 5},
            {"type": "down"}, {"type": "up", "button": "left"}
        ]))
        .unwrap();
        assert_eq!(a.len(), 10);
        assert_eq!(
            a[1],
            Action::Click {
                point: Some([10, 20]),
                button: None,
                count: Some(2),
                keys: Some(vec!["shift".into()])
            }
        );
    }

    #[test]
    fn keys_are_the_table_or_one_printable_ascii_character() {
        for k in KEYS {
            assert!(is_key(k), "{k}");
        }
        for k in ["a", "Z", "!", "~", "1"] {
            assert!(is_key(k), "{k}");
        }
        for k in ["", " ", "é", "ab", "Return", "Hyper_Q", "\u{7f}", "F1"] {
            assert!(!is_key(k), "{k:?}");
        }
    }

    #[test]
    fn a_batch_of_101_actions_is_refused_as_limit() {
        let many: Vec<Value> = (0..101).map(|_| json!({"type": "wait", "ms": 0})).collect();
        let f = refused(Value::Array(many.clone()));
        assert_eq!(f.kind, ErrorKind::Limit);
        assert!(
            f.message.contains("101") && f.message.contains("100"),
            "{}",
            f.message
        );
        assert!(check(Value::Array(many[..100].to_vec())).is_ok());
    }

    #[test]
    fn an_unknown_key_fails_at_its_index() {
        let f = refused(json!([
            {"type": "key", "keys": ["a"]},
            {"type": "key", "keys": ["Hyper_Q"]}
        ]));
        assert_eq!((f.index, f.kind), (1, ErrorKind::Invalid));
        assert!(
            f.message.contains("Hyper_Q") && f.message.contains("keys[0]"),
            "{}",
            f.message
        );
        let f = refused(json!([{"type": "click", "keys": ["shift", "meta"]}]));
        assert!(f.message.contains("keys[1]"), "{}", f.message);
        let f = refused(json!([{"type": "key", "keys": []}]));
        assert!(f.message.contains("empty"), "{}", f.message);
        let seventeen: Vec<&str> = ["a"; 17].to_vec();
        let f = refused(json!([{"type": "hold", "keys": seventeen, "ms": 1}]));
        assert_eq!(f.kind, ErrorKind::Limit);
    }

    #[test]
    fn a_click_counts_one_to_three() {
        let f = refused(json!([{"type": "click", "count": 4}]));
        assert_eq!((f.index, f.kind), (0, ErrorKind::Invalid));
        assert!(
            f.message.contains("count is 4") && f.message.contains("1 to 3"),
            "{}",
            f.message
        );
        assert!(
            refused(json!([{"type": "click", "count": 0}]))
                .message
                .contains("count is 0")
        );
        // Not whole: refused by its shape, naming the field.
        let f = refused(json!([{"type": "click", "count": 1.5}]));
        assert!(f.message.contains("count"), "{}", f.message);
        let f = refused(json!([{"type": "move", "point": [1.5, 2]}]));
        assert!(f.message.contains("point"), "{}", f.message);
    }

    #[test]
    fn text_with_a_control_character_is_refused() {
        let f = refused(json!([{"type": "type", "text": "ok\u{1b}[2J"}]));
        assert_eq!(f.kind, ErrorKind::Invalid);
        assert!(f.message.contains("U+001B"), "{}", f.message);
        assert!(
            refused(json!([{"type": "type", "text": "a\rb"}]))
                .message
                .contains("U+000D")
        );
        let long = "a".repeat(limits::MAX_TYPE_CHARS + 1);
        assert_eq!(
            refused(json!([{"type": "type", "text": long}])).kind,
            ErrorKind::Limit
        );
    }

    #[test]
    fn waits_and_holds_are_300_s_a_batch() {
        let f = refused(json!([
            {"type": "wait", "ms": 200_000},
            {"type": "hold", "keys": ["a"], "ms": 100_001}
        ]));
        assert_eq!((f.index, f.kind), (1, ErrorKind::Limit));
        assert!(f.message.contains("300000"), "{}", f.message);
        assert_eq!(refused(json!([{"type": "wait", "ms": 300_001}])).index, 0);
        assert!(check(json!([{"type": "wait", "ms": 300_000}])).is_ok());
    }

    #[test]
    fn shapes_fields_and_bounds_are_checked() {
        let f = refused(json!([{"type": "move", "point": [1, 2], "speed": 3}]));
        assert!(f.message.contains("speed"), "{}", f.message);
        let f = refused(json!([{"type": "teleport"}]));
        assert!(f.message.contains("teleport"), "{}", f.message);
        let f = refused(json!([{"type": "drag", "path": [[1, 1]]}]));
        assert!(f.message.contains("at least 2"), "{}", f.message);
        let path: Vec<[i64; 2]> = (0..1001).map(|i| [i, i]).collect();
        assert_eq!(
            refused(json!([{"type": "drag", "path": path}])).kind,
            ErrorKind::Limit
        );
        assert_eq!(
            refused(json!([{"type": "scroll", "dy": 10_001}])).kind,
            ErrorKind::Limit
        );
        let f = refused(json!([{"type": "scroll", "dy": 30, "unit": "px"}]));
        assert_eq!(f.kind, ErrorKind::Unsupported);
        assert!(
            check_actions(
                &[Action::Scroll {
                    point: None,
                    dx: 0,
                    dy: 300,
                    unit: Some(ScrollUnit::Px),
                    keys: None
                }],
                DESKTOP,
                CheckOptions { pixel_scroll: true }
            )
            .is_ok()
        );
        let f = refused(json!([{"type": "key", "keys": ["a"], "repeat": 101}]));
        assert_eq!(f.kind, ErrorKind::Limit);
    }

    /// Action's own Deserialize (type moved out, the externally tagged twin
    /// read) refuses in the words serde's derive for the internally tagged
    /// enum used, and reads what it read.
    #[test]
    fn actions_decode_as_an_internally_tagged_enum_in_serdes_words() {
        let words = |v: Value| Action::deserialize(&v).unwrap_err().to_string();
        assert_eq!(words(json!({"type": "move"})), "missing field `point`");
        assert_eq!(
            words(json!({"type": "move", "point": [1, 2], "x": 1})),
            "unknown field `x`, expected `point`"
        );
        assert!(
            words(json!({"type": "teleport"}))
                .starts_with("unknown variant `teleport`, expected one of `move`, `down`, `up`,"),
        );
        assert_eq!(words(json!({"point": [1, 2]})), "missing field `type`");
        assert_eq!(
            words(json!({"type": 3})),
            "invalid type: integer `3`, expected variant identifier"
        );
        assert_eq!(
            words(json!("move")),
            "invalid type: string \"move\", expected internally tagged enum Action"
        );
        assert_eq!(
            words(json!({"type": "click", "button": "huge"})),
            "unknown variant `huge`, expected one of `left`, `middle`, `right`, `back`, `forward`"
        );
        let read = |v: Value| Action::deserialize(&v).unwrap();
        assert_eq!(
            read(json!({"type": "down", "button": "right"})),
            Action::Down {
                point: None,
                button: Some(Button::Right)
            }
        );
        assert_eq!(
            read(json!({"type": "pinch", "point": [1, 2], "scale": 1.5})),
            Action::Pinch {
                point: [1, 2],
                scale: 1.5
            }
        );
        let a = read(json!({"type": "long_press", "point": [3, 4]}));
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"type": "long_press", "point": [3, 4]})
        );
    }

    const PHONE: &[Group] = &[Group::Screen, Group::InputTouch, Group::InputKeys];

    fn on_phone(actions: Value) -> Result<Vec<Action>, ActionFailure> {
        let Value::Array(a) = actions else {
            panic!("not an array")
        };
        check_actions_json(&a, PHONE, CheckOptions::default())
    }

    #[test]
    fn a_swipe_is_a_path_of_two_to_100_points_in_at_most_1000_ms() {
        let a = on_phone(json!([
            {"type": "swipe", "path": [[10, 900], [10, 100]], "ms": 1000},
            {"type": "swipe", "path": [[0, 0], [5, 5], [9, 0]], "ms": 0},
            {"type": "swipe", "path": [[1, 1], [2, 2]]}
        ]))
        .unwrap();
        assert_eq!(
            a[0],
            Action::Swipe {
                path: vec![[10, 900], [10, 100]],
                ms: Some(1000)
            }
        );
        let f = on_phone(json!([
            {"type": "tap", "point": [1, 1]},
            {"type": "swipe", "path": [[0, 0], [0, 9]], "ms": 1001}
        ]))
        .unwrap_err();
        assert_eq!((f.index, f.kind), (1, ErrorKind::Limit));
        assert_eq!(
            f.message,
            "actions[1].ms is 1001; a swipe lasts 0 to 1000 ms"
        );
        let f = on_phone(json!([{"type": "swipe", "path": [[3, 3]]}])).unwrap_err();
        assert_eq!((f.index, f.kind), (0, ErrorKind::Invalid));
        assert_eq!(
            f.message,
            "actions[0].path holds 1 points; a swipe needs at least 2"
        );
        let path: Vec<[i64; 2]> = (0..101).map(|i| [i, i]).collect();
        let f = on_phone(json!([{"type": "swipe", "path": path}])).unwrap_err();
        assert_eq!(f.kind, ErrorKind::Limit);
        assert!(f.message.contains("at most 100"), "{}", f.message);
        // The old shape is refused by its shape, naming the field.
        let f = on_phone(json!([{"type": "swipe", "from": [0, 0], "to": [1, 1]}])).unwrap_err();
        assert!(f.message.contains("from"), "{}", f.message);
    }

    #[test]
    fn a_long_press_is_held_at_most_10_s() {
        assert!(
            on_phone(json!([
                {"type": "long_press", "point": [5, 5]},
                {"type": "long_press", "point": [5, 5], "ms": 10_000}
            ]))
            .is_ok()
        );
        let f =
            on_phone(json!([{"type": "long_press", "point": [5, 5], "ms": 10_001}])).unwrap_err();
        assert_eq!((f.index, f.kind), (0, ErrorKind::Limit));
        assert_eq!(
            f.message,
            "actions[0].ms is 10001; a long press lasts 0 to 10000 ms"
        );
    }

    #[test]
    fn an_action_needs_its_group() {
        let f = refused(json!([{"type": "wait", "ms": 1}, {"type": "tap", "point": [1, 1]}]));
        assert_eq!((f.index, f.kind), (1, ErrorKind::Unsupported));
        assert!(f.message.contains("input.touch"), "{}", f.message);
        let f = check_actions_json(
            &[json!({"type": "type", "text": "x"})],
            &[Group::Screen, Group::InputPointer],
            CheckOptions::default(),
        )
        .unwrap_err();
        assert!(f.message.contains("input.keys"), "{}", f.message);
        // The group is checked before the action's own bounds.
        let f = check_actions_json(
            &[json!({"type": "key", "keys": ["a"], "repeat": 1000})],
            &[],
            CheckOptions::default(),
        )
        .unwrap_err();
        assert_eq!(f.kind, ErrorKind::Unsupported);
    }
}
