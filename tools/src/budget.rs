//! Keeping a result inside a model's context.
//!
//! Past the budget, text is cut in the middle: the start (what ran) and the
//! end (how it ended, where errors usually are) are kept, each cut moved to
//! a line boundary when one is near, and the whole output is saved to a
//! file inside the computer whose path the result names, so nothing is lost
//! to the model: it can read or grep that file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use computerd::client::{ComputerClient, ComputerExt, WriteFileOptions};
use computerd::protocol::ErrorKind;

use crate::error::ToolError;

/// Where saved output and process logs go inside the computer.
pub(crate) const SAVE_DIR: &str = "/tmp/computer-mcp";

/// Text cut to a budget: `head`, then `cut` bytes left out, then `tail`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cut<'a> {
    pub head: &'a str,
    pub tail: &'a str,
    /// Bytes left out between head and tail; 0 when the text fits.
    pub cut: usize,
}

impl Cut<'_> {
    /// The text with a marker line where the middle was cut. `saved`
    /// names the file that holds everything, when there is one.
    /// `saved` is the file that keeps what the tool received; `all` says
    /// whether that is all the program wrote (else only its first bytes).
    #[cfg(test)]
    pub fn render(&self, saved: Option<&str>) -> String {
        self.render_kept(saved, true)
    }

    pub fn render_kept(&self, saved: Option<&str>, all: bool) -> String {
        if self.cut == 0 {
            return self.head.to_string();
        }
        let mut out = String::with_capacity(self.head.len() + self.tail.len() + 160);
        out.push_str(self.head);
        if !self.head.is_empty() && !self.head.ends_with('\n') {
            out.push('\n');
        }
        match saved {
            Some(path) if all => out.push_str(&format!(
                "[... {} bytes cut here to fit the output budget; the whole output is in {path} ...]\n",
                self.cut
            )),
            Some(path) => out.push_str(&format!(
                "[... {} bytes cut here to fit the output budget; {path} has the output up to where the tool stopped keeping it (the rest is lost: see the note below) ...]\n",
                self.cut
            )),
            None => out.push_str(&format!(
                "[... {} bytes cut here to fit the output budget ...]\n",
                self.cut
            )),
        }
        out.push_str(self.tail);
        out
    }
}

/// Cut `text` to at most `keep` bytes (plus the marker), keeping its start
/// and end. Cuts fall on character boundaries, and on line boundaries when
/// one is within the last (or first) quarter of the kept part.
pub(crate) fn middle_cut(text: &str, keep: usize) -> Cut<'_> {
    if text.len() <= keep {
        return Cut {
            head: text,
            tail: "",
            cut: 0,
        };
    }
    let head_want = keep / 2;
    let tail_want = keep - head_want;
    let mut head_end = floor_boundary(text, head_want);
    if let Some(nl) = text[..head_end].rfind('\n')
        && nl + 1 >= head_end - head_end / 4
    {
        head_end = nl + 1;
    }
    let mut tail_start = ceil_boundary(text, text.len() - tail_want);
    if let Some(nl) = text[tail_start..].find('\n') {
        let after = tail_start + nl + 1;
        if after - tail_start <= tail_want / 4 && after < text.len() {
            tail_start = after;
        }
    }
    Cut {
        head: &text[..head_end],
        tail: &text[tail_start..],
        cut: tail_start - head_end,
    }
}

/// A size for a description: `24 KiB`, or bytes when not whole KiB.
pub(crate) fn kib(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// Share a budget between two texts of `a` and `b` bytes: a text that fits
/// in half keeps all of it and the other gets the rest; else half each.
pub(crate) fn split_budget(a: usize, b: usize, budget: usize) -> (usize, usize) {
    if a + b <= budget {
        return (a, b);
    }
    let half = budget / 2;
    if a <= half {
        (a, budget - a)
    } else if b <= half {
        (budget - b, b)
    } else {
        (half, budget - half)
    }
}

/// The largest char boundary at or below `i`.
pub(crate) fn floor_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary at or above `i`.
pub(crate) fn ceil_boundary(s: &str, i: usize) -> usize {
    let mut i = i;
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// A file name stem no other call of this server uses: milliseconds and a
/// counter.
pub(crate) fn unique_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{prefix}-{ms}-{}", N.fetch_add(1, Ordering::Relaxed) + 1)
}

/// The directories saved files may go to, in order: /tmp/computer-mcp, and
/// `.computer-mcp` in the work directory for a computer whose /tmp cannot
/// be written.
pub(crate) fn save_dirs(work_dir: &str) -> Vec<String> {
    let mut dirs = vec![SAVE_DIR.to_string()];
    if work_dir.starts_with('/') {
        dirs.push(format!("{}/.computer-mcp", work_dir.trim_end_matches('/')));
    }
    dirs
}

/// Save `bytes` to a new file in the computer; its path, or why not in words.
pub(crate) async fn save_output<C: ComputerClient + Clone + 'static>(
    client: &C,
    work_dir: &str,
    name: &str,
    bytes: &[u8],
) -> Result<String, ToolError> {
    let mut why = String::new();
    for dir in save_dirs(work_dir) {
        let path = format!("{dir}/{name}");
        let opts = WriteFileOptions {
            mode: None,
            parents: true,
        };
        match client.write_file(&path, bytes, opts).await {
            Ok(_) => return Ok(path),
            Err(e) => {
                let e = ToolError::client(format!("saving the output to {path}"), e);
                if matches!(e, ToolError::Gone(_)) {
                    return Err(e);
                }
                if !why.is_empty() {
                    why.push_str("; ");
                }
                why.push_str(&e.to_string());
                // A full disk fails everywhere: do not try the next place.
                if e.kind() == Some(ErrorKind::Limit) {
                    break;
                }
            }
        }
    }
    Err(ToolError::Refused(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_within_the_budget_is_kept_whole() {
        let c = middle_cut("hello\nworld\n", 100);
        assert_eq!(
            c,
            Cut {
                head: "hello\nworld\n",
                tail: "",
                cut: 0
            }
        );
        assert_eq!(c.render(Some("/x")), "hello\nworld\n");
    }

    #[test]
    fn the_middle_is_cut_at_line_boundaries_and_head_and_tail_are_kept() {
        let text: String = (1..=1000).map(|i| format!("line {i:04}\n")).collect();
        let c = middle_cut(&text, 200);
        assert!(c.head.starts_with("line 0001\n"));
        assert!(c.head.ends_with('\n'));
        assert!(c.tail.ends_with("line 1000\n"));
        assert!(c.tail.starts_with("line "), "{:?}", c.tail);
        assert_eq!(c.head.len() + c.cut + c.tail.len(), text.len());
        assert!(c.head.len() + c.tail.len() <= 200);
        assert!(c.head.len() + c.tail.len() >= 150);
        let shown = c.render(Some("/tmp/computer-mcp/exec-1.stdout"));
        assert!(shown.contains(&format!(
            "[... {} bytes cut here to fit the output budget; the whole output is in /tmp/computer-mcp/exec-1.stdout ...]\n",
            c.cut
        )));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let text = "é".repeat(1000); // 2 bytes each
        let c = middle_cut(&text, 101);
        assert!(c.head.chars().all(|ch| ch == 'é'));
        assert!(c.tail.chars().all(|ch| ch == 'é'));
        assert_eq!(c.head.len() + c.cut + c.tail.len(), text.len());
        assert!(c.head.len() + c.tail.len() <= 101);
        // One long line: no newline to move to, the cut is where the budget says.
        let long = "x".repeat(10_000);
        let c = middle_cut(&long, 1000);
        assert_eq!((c.head.len(), c.tail.len(), c.cut), (500, 500, 9000));
    }

    #[test]
    fn the_budget_is_shared_between_two_streams() {
        assert_eq!(split_budget(10, 20, 100), (10, 20));
        assert_eq!(split_budget(10, 500, 100), (10, 90));
        assert_eq!(split_budget(500, 10, 100), (90, 10));
        assert_eq!(split_budget(500, 600, 100), (50, 50));
    }

    #[test]
    fn saved_files_go_to_tmp_then_the_work_dir() {
        assert_eq!(
            save_dirs("/home/u/"),
            vec![
                "/tmp/computer-mcp".to_string(),
                "/home/u/.computer-mcp".to_string()
            ]
        );
        let a = unique_name("exec");
        let b = unique_name("exec");
        assert_ne!(a, b);
        assert!(a.starts_with("exec-"));
    }
}
