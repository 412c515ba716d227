//! Key names as models send them (`Enter`, `ctrl+a`, `Return`,
//! `shift+Tab`, a space-separated sequence) and the CDP key events each
//! press is (`Input.dispatchKeyEvent`'s key, code, virtual key code, text
//! and modifier bits): what the page tools press, and what a person's
//! keys in the live viewer are on a browser with no X display (the
//! providers' CDP cast). Failures are words naming the field.

use serde_json::{Value, json};

type Result<T> = std::result::Result<T, String>;

/// Presses in one `browser_press` at most.
pub const MAX_PRESSES: usize = 100;

/// One key press: a key with the modifiers held for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Press {
    /// DOM `key` ("Enter", "a", "A").
    pub key: String,
    /// DOM `code` ("Enter", "KeyA").
    pub code: String,
    pub key_code: u32,
    /// What the press types, if anything ("\r" for Enter, "a").
    pub text: Option<String>,
    /// CDP modifier bits: Alt 1, Ctrl 2, Meta 4, Shift 8.
    pub modifiers: u32,
}

impl Press {
    /// The keyDown and keyUp events of this press.
    pub fn events(&self) -> [Value; 2] {
        let mut down = json!({
            "type": if self.text.is_some() { "keyDown" } else { "rawKeyDown" },
            "key": self.key,
            "code": self.code,
            "windowsVirtualKeyCode": self.key_code,
            "nativeVirtualKeyCode": self.key_code,
            "modifiers": self.modifiers,
        });
        if let Some(t) = &self.text {
            down["text"] = json!(t);
            down["unmodifiedText"] = json!(t);
        }
        let up = json!({
            "type": "keyUp",
            "key": self.key,
            "code": self.code,
            "windowsVirtualKeyCode": self.key_code,
            "nativeVirtualKeyCode": self.key_code,
            "modifiers": self.modifiers,
        });
        [down, up]
    }
}

/// A named key: the names it goes by, its DOM key and code, its key code
/// and what it types.
type Named = (
    &'static [&'static str],
    &'static str,
    &'static str,
    u32,
    Option<&'static str>,
);

const NAMED: &[Named] = &[
    (&["enter", "return"], "Enter", "Enter", 13, Some("\r")),
    (&["tab"], "Tab", "Tab", 9, None),
    (&["escape", "esc"], "Escape", "Escape", 27, None),
    (&["backspace"], "Backspace", "Backspace", 8, None),
    (&["delete", "del"], "Delete", "Delete", 46, None),
    (&["space"], " ", "Space", 32, Some(" ")),
    (&["arrowup", "up"], "ArrowUp", "ArrowUp", 38, None),
    (&["arrowdown", "down"], "ArrowDown", "ArrowDown", 40, None),
    (&["arrowleft", "left"], "ArrowLeft", "ArrowLeft", 37, None),
    (
        &["arrowright", "right"],
        "ArrowRight",
        "ArrowRight",
        39,
        None,
    ),
    (&["home"], "Home", "Home", 36, None),
    (&["end"], "End", "End", 35, None),
    (
        &["pageup", "page_up", "prior"],
        "PageUp",
        "PageUp",
        33,
        None,
    ),
    (
        &["pagedown", "page_down", "next"],
        "PageDown",
        "PageDown",
        34,
        None,
    ),
    (&["insert"], "Insert", "Insert", 45, None),
];

/// Modifier names and bits.
const MODIFIERS: &[(&[&str], u32)] = &[
    (&["alt", "option"], 1),
    (&["ctrl", "control", "controlormeta"], 2),
    (&["meta", "cmd", "command", "super", "win"], 4),
    (&["shift"], 8),
];

/// Every press of `text`: presses separated by spaces, each a key with
/// `+`-joined modifiers before it ("ctrl+shift+p", "Backspace Backspace").
pub fn parse(field: &str, text: &str) -> Result<Vec<Press>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Err(format!(
            "{field} is empty; give a key such as Enter, Tab, ctrl+a or \"Backspace Backspace\""
        ));
    }
    if words.len() > MAX_PRESSES {
        return Err(format!(
            "{field} holds {} presses; at most {MAX_PRESSES} go in one call; nothing was sent",
            words.len()
        ));
    }
    words.iter().map(|w| chord(field, w)).collect()
}

/// The CDP modifier bits of `text`: modifier names joined by `+`
/// ("shift", "ctrl+shift", "cmd+alt").
pub fn modifier_bits(field: &str, text: &str) -> Result<u32> {
    let mut bits = 0;
    for m in text.split('+').map(str::trim).filter(|m| !m.is_empty()) {
        let lower = m.to_ascii_lowercase();
        let Some((_, b)) = MODIFIERS.iter().find(|(n, _)| n.contains(&lower.as_str())) else {
            return Err(format!(
                "{field}: {m:?} is not a modifier; the modifiers are ctrl, shift, alt and meta (cmd); nothing was done"
            ));
        };
        bits |= b;
    }
    Ok(bits)
}

fn chord(field: &str, word: &str) -> Result<Press> {
    // "ctrl++" is ctrl and the plus key.
    let (mods, key) = match word.strip_suffix("++") {
        Some(m) => (m, "+"),
        None => match word.rsplit_once('+') {
            Some((m, k)) if !k.is_empty() => (m, k),
            _ => ("", word),
        },
    };
    let mut bits = 0;
    if !mods.is_empty() {
        for m in mods.split('+') {
            let lower = m.to_ascii_lowercase();
            let Some((_, b)) = MODIFIERS.iter().find(|(n, _)| n.contains(&lower.as_str())) else {
                return Err(format!(
                    "{field}: {m:?} in {word:?} is not a modifier; the modifiers are ctrl, shift, alt and meta (cmd); nothing was sent"
                ));
            };
            bits |= b;
        }
    }
    let mut press = key_of(field, key)?;
    press.modifiers = bits;
    // A chord with ctrl, alt or meta types nothing (ctrl+a selects).
    if bits & 0b111 != 0 {
        press.text = None;
    } else if bits & 8 != 0
        && let Some(t) = &press.text
        && t.chars().count() == 1
        && t.chars().all(|c| c.is_ascii_lowercase())
    {
        let up = t.to_ascii_uppercase();
        press.key = up.clone();
        press.text = Some(up);
    }
    Ok(press)
}

fn key_of(field: &str, key: &str) -> Result<Press> {
    let lower = key.to_ascii_lowercase();
    if let Some((_, k, code, kc, text)) = NAMED.iter().find(|(n, ..)| n.contains(&lower.as_str())) {
        return Ok(Press {
            key: (*k).into(),
            code: (*code).into(),
            key_code: *kc,
            text: text.map(str::to_string),
            modifiers: 0,
        });
    }
    if let Some(n) = lower.strip_prefix('f')
        && let Ok(n) = n.parse::<u32>()
        && (1..=12).contains(&n)
    {
        let name = format!("F{n}");
        return Ok(Press {
            key: name.clone(),
            code: name,
            key_code: 111 + n,
            text: None,
            modifiers: 0,
        });
    }
    let mut chars = key.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && !c.is_control()
    {
        let (code, key_code) = if c.is_ascii_alphabetic() {
            (
                format!("Key{}", c.to_ascii_uppercase()),
                c.to_ascii_uppercase() as u32,
            )
        } else if c.is_ascii_digit() {
            (format!("Digit{c}"), c as u32)
        } else {
            (String::new(), 0)
        };
        return Ok(Press {
            key: c.to_string(),
            code,
            key_code,
            text: Some(c.to_string()),
            modifiers: 0,
        });
    }
    Err(format!(
        "{field}: {key:?} is not a key name; give one character or a name such as Enter, Tab, Escape, Backspace, Delete, ArrowUp, Home, PageDown, F5 (to type text, use browser_type); nothing was sent"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_chords_and_sequences_are_presses() {
        let p = parse("key", "Return").unwrap();
        assert_eq!(
            p,
            [Press {
                key: "Enter".into(),
                code: "Enter".into(),
                key_code: 13,
                text: Some("\r".into()),
                modifiers: 0
            }]
        );
        let p = parse("key", "ctrl+a").unwrap();
        assert_eq!(
            (p[0].key.as_str(), p[0].modifiers, p[0].text.clone()),
            ("a", 2, None)
        );
        let p = parse("key", "shift+a").unwrap();
        assert_eq!((p[0].key.as_str(), p[0].text.as_deref()), ("A", Some("A")));
        let p = parse("key", "cmd+shift+P Backspace Backspace").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].modifiers, p[0].code.as_str()), (12, "KeyP"));
        assert_eq!(p[2].key, "Backspace");
        assert_eq!(parse("key", "ctrl++").unwrap()[0].key, "+");
        assert_eq!(parse("key", "F5").unwrap()[0].key_code, 116);
        let [down, up] = parse("key", "Tab").unwrap()[0].events();
        assert_eq!(down["type"], "rawKeyDown");
        assert_eq!(up["type"], "keyUp");
    }

    #[test]
    fn an_unknown_key_or_modifier_is_named() {
        assert_eq!(
            parse("key", "hyper+x").unwrap_err(),
            "key: \"hyper\" in \"hyper+x\" is not a modifier; the modifiers are ctrl, shift, alt and meta (cmd); nothing was sent"
        );
        assert!(
            parse("key", "Foo")
                .unwrap_err()
                .contains("\"Foo\" is not a key name")
        );
        assert!(parse("key", " ").unwrap_err().contains("empty"));
        assert_eq!(modifier_bits("modifiers", "ctrl+Shift").unwrap(), 10);
        assert!(
            modifier_bits("modifiers", "caps")
                .unwrap_err()
                .starts_with("modifiers: \"caps\" is not a modifier")
        );
        let many = vec!["a"; MAX_PRESSES + 1].join(" ");
        assert!(parse("key", &many).unwrap_err().contains("at most 100"));
    }
}
