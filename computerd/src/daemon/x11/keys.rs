//! Keys and characters as X keysyms, the keyboard map (which keycode types
//! which keysym, with or without shift), and the remap that binds a
//! character the map lacks to a free keycode.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::protocol::limits;

pub const XK_SHIFT_L: u32 = 0xffe1;
pub const XK_CAPS_LOCK: u32 = 0xffe5;
pub const XK_RETURN: u32 = 0xff0d;
pub const XK_TAB: u32 = 0xff09;

/// The keysym of a key name of KEYS, or of a printable ASCII character.
pub fn key_keysym(name: &str) -> Option<u32> {
    let named = match name {
        "enter" => XK_RETURN,
        "tab" => XK_TAB,
        "space" => 0x20,
        "backspace" => 0xff08,
        "delete" => 0xffff,
        "escape" => 0xff1b,
        "insert" => 0xff63,
        "up" => 0xff52,
        "down" => 0xff54,
        "left" => 0xff51,
        "right" => 0xff53,
        "home" => 0xff50,
        "end" => 0xff57,
        "pageup" => 0xff55,
        "pagedown" => 0xff56,
        "shift" => XK_SHIFT_L,
        "ctrl" => 0xffe3,
        "alt" => 0xffe9,
        "super" => 0xffeb,
        "capslock" => XK_CAPS_LOCK,
        f if f.len() >= 2 && f.starts_with('f') => {
            let n: u32 = f[1..].parse().ok().filter(|n| (1..=12).contains(n))?;
            0xffbe + n - 1
        }
        one => {
            let b = one.as_bytes();
            if b.len() == 1 && (0x21..=0x7e).contains(&b[0]) {
                u32::from(b[0])
            } else {
                return None;
            }
        }
    };
    Some(named)
}

/// The keysym that types `c`: Latin-1 by its code, newline and tab by
/// their keys, anything else as a Unicode keysym.
pub fn char_keysym(c: char) -> u32 {
    let cp = u32::from(c);
    match c {
        '\n' => XK_RETURN,
        '\t' => XK_TAB,
        _ if (0x20..=0x7e).contains(&cp) || (0xa0..=0xff).contains(&cp) => cp,
        _ => 0x0100_0000 | cp,
    }
}

/// The character a keysym types (the fixture's and the tests' reading).
pub fn keysym_char(ks: u32) -> Option<char> {
    match ks {
        XK_RETURN => Some('\n'),
        XK_TAB => Some('\t'),
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(ks),
        0x0100_0100..=0x0110_ffff => char::from_u32(ks & 0x00ff_ffff),
        _ => None,
    }
}

/// A lowercase Latin-1 letter's keysym and its uppercase, for a map that
/// lists only the lowercase (X's rule for a NoSymbol second column).
fn upper(ks: u32) -> Option<u32> {
    match ks {
        0x61..=0x7a => Some(ks - 0x20),
        0xe0..=0xfe if ks != 0xf7 => Some(ks - 0x20),
        _ => None,
    }
}

/// Whether Caps Lock changes what this keysym's key types.
pub fn is_cased(ks: u32) -> bool {
    upper(ks).is_some()
        || (0x41..=0x5a).contains(&ks)
        || ((0xc0..=0xde).contains(&ks) && ks != 0xd7)
}

/// How to type a keysym: a keycode, and whether shift must be held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stroke {
    pub keycode: u8,
    pub shift: bool,
}

/// The keyboard map as the server gave it, with the daemon's remaps.
pub struct Keymap {
    pub min: u8,
    pub per: u8,
    /// `per` keysyms for each keycode from `min`.
    pub syms: Vec<u32>,
    lookup: HashMap<u32, Stroke>,
    /// Keycodes this daemon bound to a character, and when each was last pressed.
    remapped: Vec<(u8, u32, Instant)>,
}

impl Keymap {
    pub fn new(min: u8, per: u8, syms: Vec<u32>) -> Self {
        let mut k = Self {
            min,
            per: per.max(1),
            syms,
            lookup: HashMap::new(),
            remapped: Vec::new(),
        };
        k.index();
        k
    }

    fn index(&mut self) {
        self.lookup.clear();
        let per = usize::from(self.per);
        for (i, row) in self.syms.chunks(per).enumerate() {
            let Ok(code) = u8::try_from(usize::from(self.min) + i) else {
                break;
            };
            let c0 = row.first().copied().unwrap_or(0);
            let c1 = row.get(1).copied().unwrap_or(0);
            let c1 = if c1 == 0 { upper(c0).unwrap_or(c0) } else { c1 };
            // The first keycode found wins; an unshifted stroke beats a shifted one.
            if c0 != 0 {
                self.lookup
                    .entry(c0)
                    .and_modify(|s| {
                        if s.shift {
                            *s = Stroke {
                                keycode: code,
                                shift: false,
                            }
                        }
                    })
                    .or_insert(Stroke {
                        keycode: code,
                        shift: false,
                    });
            }
            if c1 != 0 && c1 != c0 {
                self.lookup.entry(c1).or_insert(Stroke {
                    keycode: code,
                    shift: true,
                });
            }
        }
    }

    pub fn stroke(&self, ks: u32) -> Option<Stroke> {
        self.lookup.get(&ks).copied()
    }

    fn row(&self, code: u8) -> &[u32] {
        let per = usize::from(self.per);
        let at = usize::from(code.saturating_sub(self.min)) * per;
        self.syms.get(at..at + per).unwrap_or(&[])
    }

    /// Keycodes with no keysym at all: free for a remap.
    fn free(&self) -> Vec<u8> {
        let n = self.syms.len() / usize::from(self.per);
        (0..n)
            .filter_map(|i| u8::try_from(usize::from(self.min) + i).ok())
            .filter(|c| self.row(*c).iter().all(|s| *s == 0))
            .collect()
    }

    /// How many keycodes a remap can use: the free ones and its own.
    pub fn remap_room(&self) -> usize {
        self.free().len() + self.remapped.len()
    }

    /// Note that a remapped keycode was pressed now.
    pub fn touch(&mut self, code: u8) {
        if let Some(r) = self.remapped.iter_mut().find(|r| r.0 == code) {
            r.2 = Instant::now();
        }
    }

    /// A keycode to bind `ks` to: a free one, else the binding used longest
    /// ago, with how long to wait until it has settled. None when the map
    /// has no keycode to give.
    pub fn pick_for_remap(&self) -> Option<(u8, Duration)> {
        if let Some(c) = self.free().first() {
            return Some((*c, Duration::ZERO));
        }
        let settle = Duration::from_millis(limits::X11_REMAP_SETTLE_MS);
        self.remapped
            .iter()
            .min_by_key(|r| r.2)
            .map(|r| (r.0, settle.saturating_sub(r.2.elapsed())))
    }

    /// Record that `code` now types `ks` in every column.
    pub fn bound(&mut self, code: u8, ks: u32) {
        let per = usize::from(self.per);
        let at = usize::from(code.saturating_sub(self.min)) * per;
        if let Some(row) = self.syms.get_mut(at..at + per) {
            row.fill(ks);
        }
        self.remapped.retain(|r| r.0 != code);
        self.remapped.push((code, ks, Instant::now()));
        self.index();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_characters_have_their_keysyms() {
        assert_eq!(key_keysym("enter"), Some(0xff0d));
        assert_eq!(key_keysym("f12"), Some(0xffc9));
        assert_eq!(key_keysym("f13"), None);
        assert_eq!(key_keysym("A"), Some(0x41));
        for k in crate::protocol::KEYS {
            assert!(key_keysym(k).is_some(), "{k}");
        }
        assert_eq!(char_keysym('é'), 0xe9);
        assert_eq!(char_keysym('中'), 0x0100_4e2d);
        for c in ['a', 'é', 'ß', '中', '\n', '\t', '😀'] {
            assert_eq!(keysym_char(char_keysym(c)), Some(c));
        }
    }

    #[test]
    fn the_map_finds_strokes_and_lends_free_keycodes() {
        // keycode 8: a A; 9: 1 !; 10: free; 11: b (no second column).
        let mut m = Keymap::new(8, 2, vec![0x61, 0x41, 0x31, 0x21, 0, 0, 0x62, 0]);
        assert_eq!(
            m.stroke(0x41),
            Some(Stroke {
                keycode: 8,
                shift: true
            })
        );
        assert_eq!(
            m.stroke(0x21),
            Some(Stroke {
                keycode: 9,
                shift: true
            })
        );
        assert_eq!(
            m.stroke(0x42),
            Some(Stroke {
                keycode: 11,
                shift: true
            })
        );
        assert_eq!(m.stroke(0xe9), None);
        assert_eq!(m.remap_room(), 1);
        assert_eq!(m.pick_for_remap(), Some((10, Duration::ZERO)));
        m.bound(10, 0xe9);
        assert_eq!(
            m.stroke(0xe9),
            Some(Stroke {
                keycode: 10,
                shift: false
            })
        );
        // No free keycode left: the binding is reused once it has settled.
        let (code, wait) = m.pick_for_remap().unwrap();
        assert_eq!(code, 10);
        assert!(wait > Duration::from_millis(200), "{wait:?}");
        assert_eq!(m.remap_room(), 1);
    }
}
