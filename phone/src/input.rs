//! input.actions on a phone: each action becomes lines of Android's `input`
//! command, and a batch runs as few shell sessions as its size allows
//! (one `input` process per action still, since that is what the phone
//! offers; but one adb stream and one `sh` for the lot). After each action
//! the script echoes a marker, so a phone that goes away mid-batch still
//! says how many actions it did.

use computerd::protocol::{Action, ActionFailure, ErrorKind, PhoneButton};

/// A swipe and a long press take this long when the action names no `ms`.
pub const DEFAULT_SWIPE_MS: u64 = 300;
pub const DEFAULT_LONG_PRESS_MS: u64 = 800;

/// The most text one `input text` call carries (its argv, through adb's
/// service string, stays well inside the smallest payload a phone takes).
const TEXT_CHUNK: usize = 512;

/// A batch's script is cut into sessions of at most this many bytes.
pub const MAX_SCRIPT_BYTES: usize = 3_500;

/// The marker echoed after action `i` has run.
pub fn marker(i: usize) -> String {
    format!("@@done {i}")
}

/// The Android key code of a named key ([`computerd::protocol::KEYS`]) or
/// of one printable character that has a key of its own; None for the
/// rest, which are typed as text.
fn keycode(name: &str) -> Option<u32> {
    let named = match name {
        "enter" => 66,
        "tab" => 61,
        "space" => 62,
        "backspace" => 67,
        "delete" => 112,
        "escape" => 111,
        "insert" => 124,
        "up" => 19,
        "down" => 20,
        "left" => 21,
        "right" => 22,
        "home" => 122,
        "end" => 123,
        "pageup" => 92,
        "pagedown" => 93,
        "shift" => 59,
        "ctrl" => 113,
        "alt" => 57,
        "super" => 117,
        "capslock" => 115,
        f if f.len() > 1 && f.starts_with('f') => {
            let n: u32 = f[1..].parse().ok()?;
            return (1..=12).contains(&n).then_some(130 + n);
        }
        _ => {
            let b = name.as_bytes();
            return match b {
                [c @ b'a'..=b'z'] => Some(29 + u32::from(c - b'a')),
                [c @ b'0'..=b'9'] => Some(7 + u32::from(c - b'0')),
                _ => None,
            };
        }
    };
    Some(named)
}

fn button_code(b: PhoneButton) -> u32 {
    match b {
        PhoneButton::Back => 4,
        PhoneButton::Home => 3,
        PhoneButton::AppSwitch => 187,
        PhoneButton::VolumeUp => 24,
        PhoneButton::VolumeDown => 25,
    }
}

fn refuse(i: usize, kind: ErrorKind, message: String) -> ActionFailure {
    ActionFailure {
        index: i as u64,
        kind,
        message,
    }
}

/// `s` quoted for the phone's `sh`: nothing inside single quotes is
/// special but the quote itself.
pub fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The `input text` calls that type `text` exactly. `input text` reads
/// `%s` as a space, so spaces go as `%s`, and a literal `%s` is split
/// between two calls; a line break and a tab are their keys. Anything else
/// outside printable ASCII cannot go through `input text`: refused, naming
/// the first such character and where it is.
pub fn type_lines(i: usize, text: &str) -> Result<Vec<String>, ActionFailure> {
    if let Some((at, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_graphic() || matches!(c, ' ' | '\n' | '\t')))
    {
        return Err(refuse(
            i,
            ErrorKind::Invalid,
            format!(
                "actions[{i}].text holds {c:?} (U+{:04X}) at character {at}, which Android's input text cannot type; a phone types printable ASCII, spaces, tabs and line breaks",
                u32::from(c)
            ),
        ));
    }
    let mut lines = Vec::new();
    let mut chunk = String::new();
    let flush = |chunk: &mut String, lines: &mut Vec<String>| {
        if !chunk.is_empty() {
            lines.push(format!("input text {}", quoted(chunk)));
            chunk.clear();
        }
    };
    let mut prev = None;
    for c in text.chars() {
        match c {
            '\n' | '\t' => {
                flush(&mut chunk, &mut lines);
                lines.push(format!(
                    "input keyevent {}",
                    if c == '\n' { 66 } else { 61 }
                ));
            }
            // A literal "%s": the "s" starts the next call.
            's' if prev == Some('%') => {
                flush(&mut chunk, &mut lines);
                chunk.push('s');
            }
            ' ' => chunk.push_str("%s"),
            c => chunk.push(c),
        }
        if chunk.len() >= TEXT_CHUNK && !chunk.ends_with('%') {
            flush(&mut chunk, &mut lines);
        }
        prev = Some(c);
    }
    flush(&mut chunk, &mut lines);
    Ok(lines)
}

/// `sleep` for `ms`, as the phone's toybox takes it.
fn sleep_line(ms: u64) -> String {
    format!("sleep {}.{:03}", ms / 1000, ms % 1000)
}

/// A swipe along `path` in `ms`: `input swipe` for two points; for more,
/// `input motionevent` down, through each point, up, with the time shared
/// between the moves by each segment's length (so it lasts `ms` at least:
/// each `input` also takes its own start).
fn swipe_lines(path: &[[i64; 2]], ms: u64) -> Vec<String> {
    if let [[x1, y1], [x2, y2]] = path {
        return vec![format!("input swipe {x1} {y1} {x2} {y2} {ms}")];
    }
    let lengths: Vec<f64> = path
        .windows(2)
        .map(|w| ((w[1][0] - w[0][0]) as f64).hypot((w[1][1] - w[0][1]) as f64))
        .collect();
    let total: f64 = lengths.iter().sum();
    let mut lines = Vec::with_capacity(path.len() * 2 + 1);
    let [x, y] = path[0];
    lines.push(format!("input motionevent DOWN {x} {y}"));
    for (n, [x, y]) in path.iter().enumerate().skip(1) {
        let share = if total > 0.0 {
            lengths[n - 1] / total
        } else {
            1.0 / lengths.len() as f64
        };
        let wait = (ms as f64 * share).round() as u64;
        if wait > 0 {
            lines.push(sleep_line(wait));
        }
        lines.push(format!("input motionevent MOVE {x} {y}"));
    }
    let [x, y] = path[path.len() - 1];
    lines.push(format!("input motionevent UP {x} {y}"));
    lines
}

fn unsupported(i: usize, what: &str) -> ActionFailure {
    refuse(
        i,
        ErrorKind::Unsupported,
        format!(
            "actions[{i}] is {what}, which a phone over adb cannot do (its input command has one finger and presses one key at a time); nothing was done"
        ),
    )
}

/// The shell lines of one action (already checked by `check_actions`).
pub fn lines_of(i: usize, a: &Action) -> Result<Vec<String>, ActionFailure> {
    Ok(match a {
        Action::Tap { point: [x, y] } => vec![format!("input tap {x} {y}")],
        Action::LongPress { point: [x, y], ms } => {
            let ms = ms.unwrap_or(DEFAULT_LONG_PRESS_MS);
            vec![format!("input swipe {x} {y} {x} {y} {ms}")]
        }
        Action::Swipe { path, ms } => swipe_lines(path, ms.unwrap_or(DEFAULT_SWIPE_MS)),
        Action::Button { button } => vec![format!("input keyevent {}", button_code(*button))],
        Action::Type { text } => type_lines(i, text)?,
        Action::Key { keys, repeat } => {
            let [key] = keys.as_slice() else {
                return Err(unsupported(i, "a combination of keys"));
            };
            let once = match keycode(key) {
                Some(code) => vec![format!("input keyevent {code}")],
                None => type_lines(i, key)?,
            };
            let n = repeat.unwrap_or(1).max(1) as usize;
            once.iter().cycle().take(once.len() * n).cloned().collect()
        }
        Action::Wait { ms } => vec![sleep_line(*ms)],
        Action::Pinch { .. } => return Err(unsupported(i, "a pinch")),
        Action::Hold { .. } => return Err(unsupported(i, "a hold of keys")),
        other => {
            return Err(unsupported(
                i,
                &format!("a {} (a pointer action)", other.name()),
            ));
        }
    })
}

/// A batch as shell scripts, each at most [`MAX_SCRIPT_BYTES`] (an action
/// longer than that goes alone). Each action's lines are followed by its
/// marker, and a failing line ends the script before the marker. Refused
/// whole, naming the action, when one action cannot be done: nothing runs.
pub fn scripts(actions: &[Action]) -> Result<Vec<String>, ActionFailure> {
    let mut out = Vec::new();
    let mut script = String::new();
    for (i, a) in actions.iter().enumerate() {
        let mut step = String::new();
        for line in lines_of(i, a)? {
            step.push_str(&line);
            step.push_str(" || exit 1\n");
        }
        step.push_str(&format!("echo '{}'\n", marker(i)));
        if !script.is_empty() && script.len() + step.len() > MAX_SCRIPT_BYTES {
            out.push(std::mem::take(&mut script));
        }
        script.push_str(&step);
    }
    if !script.is_empty() {
        out.push(script);
    }
    Ok(out)
}

/// How many actions a script's output says were done.
pub fn done_in(output: &str) -> usize {
    output
        .lines()
        .filter(|l| l.trim_end().starts_with("@@done "))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> Vec<String> {
        type_lines(0, text).unwrap()
    }

    #[test]
    fn text_goes_as_input_text_with_spaces_and_percent_s_kept_apart() {
        assert_eq!(
            typed("Hello, agentrun! 123"),
            ["input text 'Hello,%sagentrun!%s123'"]
        );
        // A literal %s must not become a space: its s starts the next call.
        assert_eq!(typed("a%sb"), ["input text 'a%'", "input text 'sb'"]);
        // A % before a space stays a %: "%%s" reads "% ".
        assert_eq!(typed("5% off"), ["input text '5%%soff'"]);
        assert_eq!(typed("it's"), [r"input text 'it'\''s'"]);
        assert_eq!(
            typed("a\nb\tc"),
            [
                "input text 'a'",
                "input keyevent 66",
                "input text 'b'",
                "input keyevent 61",
                "input text 'c'"
            ]
        );
    }

    #[test]
    fn text_input_text_cannot_carry_is_refused_naming_the_character() {
        let e = type_lines(3, "café").unwrap_err();
        assert_eq!((e.index, e.kind), (3, ErrorKind::Invalid));
        assert!(
            e.message.contains("'é' (U+00E9) at character 3"),
            "{}",
            e.message
        );
        assert!(e.message.starts_with("actions[3].text"), "{}", e.message);
    }

    #[test]
    fn long_text_is_cut_into_calls_that_type_it_whole() {
        let text = "x".repeat(1300);
        let lines = typed(&text);
        assert_eq!(lines.len(), 3);
        let back: String = lines
            .iter()
            .map(|l| l.trim_start_matches("input text '").trim_end_matches('\''))
            .collect();
        assert_eq!(back, text);
    }

    #[test]
    fn touch_buttons_and_keys_become_input_lines() {
        let line = |a: Action| lines_of(0, &a).unwrap();
        assert_eq!(line(Action::Tap { point: [10, 20] }), ["input tap 10 20"]);
        assert_eq!(
            line(Action::Swipe {
                path: vec![[1, 2], [3, 4]],
                ms: None
            }),
            ["input swipe 1 2 3 4 300"]
        );
        // Three points: the 900 ms go 1/3 to the first segment, 2/3 to the second.
        assert_eq!(
            line(Action::Swipe {
                path: vec![[0, 0], [0, 100], [0, 300]],
                ms: Some(900)
            }),
            [
                "input motionevent DOWN 0 0",
                "sleep 0.300",
                "input motionevent MOVE 0 100",
                "sleep 0.600",
                "input motionevent MOVE 0 300",
                "input motionevent UP 0 300"
            ]
        );
        assert_eq!(
            line(Action::LongPress {
                point: [5, 6],
                ms: Some(1000)
            }),
            ["input swipe 5 6 5 6 1000"]
        );
        assert_eq!(
            line(Action::Button {
                button: PhoneButton::AppSwitch
            }),
            ["input keyevent 187"]
        );
        assert_eq!(
            line(Action::Key {
                keys: vec!["enter".into()],
                repeat: Some(2)
            }),
            ["input keyevent 66", "input keyevent 66"]
        );
        assert_eq!(
            line(Action::Key {
                keys: vec!["f12".into()],
                repeat: None
            }),
            ["input keyevent 142"]
        );
        assert_eq!(
            line(Action::Key {
                keys: vec!["q".into()],
                repeat: None
            }),
            ["input keyevent 45"]
        );
        assert_eq!(
            line(Action::Key {
                keys: vec!["?".into()],
                repeat: None
            }),
            ["input text '?'"]
        );
        assert_eq!(line(Action::Wait { ms: 1250 }), ["sleep 1.250"]);
    }

    #[test]
    fn what_one_finger_cannot_do_is_refused_before_anything_runs() {
        let batch = [
            Action::Tap { point: [1, 1] },
            Action::Key {
                keys: vec!["ctrl".into(), "a".into()],
                repeat: None,
            },
        ];
        let e = scripts(&batch).unwrap_err();
        assert_eq!((e.index, e.kind), (1, ErrorKind::Unsupported));
        assert!(e.message.contains("combination of keys"), "{}", e.message);
        let e = scripts(&[Action::Pinch {
            point: [1, 1],
            scale: 2.0,
        }])
        .unwrap_err();
        assert!(e.message.contains("a pinch"), "{}", e.message);
    }

    #[test]
    fn a_batch_is_cut_into_scripts_whose_markers_count_every_action() {
        let batch: Vec<Action> = (0..400).map(|n| Action::Tap { point: [n, n] }).collect();
        let scripts = scripts(&batch).unwrap();
        assert!(scripts.len() > 1);
        assert!(scripts.iter().all(|s| s.len() <= MAX_SCRIPT_BYTES));
        let all: String = scripts.concat();
        let echoed: String = all
            .lines()
            .filter_map(|l| {
                l.strip_prefix("echo '")
                    .map(|m| format!("{}\n", m.trim_end_matches('\'')))
            })
            .collect();
        assert_eq!(done_in(&echoed), 400);
        assert!(all.starts_with("input tap 0 0 || exit 1\necho '@@done 0'\n"));
    }
}
