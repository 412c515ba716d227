//! A page as indented text a model reads, one ref per interactive element:
//!
//! ```text
//! - heading "Sign in" [level=1]
//! - textbox "Name" [ref=e1]: Ada
//! - textbox "Secret" [ref=e2]: (password, not shown)
//! - button "Submit" [ref=e3]
//! ```
//!
//! The page is read in one call inside it ([`WALK`], run in the tools' own
//! isolated world): each element shown, with its role, name, states, value
//! and depth, wrappers that say nothing left out and their children shown
//! in their place, text a name already says not repeated, and text alone
//! under an element said on its line. An element that gets a ref carries a
//! number of that world, kept for as long as it lives.
//!
//! Pure here: the walk's entries come in as JSON, the lines and the refs
//! (each numbered by the caller, who keeps an element's number for as long
//! as it lives) go out, and [`pages`] cuts the lines to a budget.

use serde_json::Value;

/// The in-page walk: a function of (max depth, max text chars, the roles
/// that get a ref) giving the entries [`build`] reads.
pub const WALK: &str = include_str!("walk.js");

/// Roles that get a ref: what a model clicks, types into or picks.
pub const INTERACTIVE: &[&str] = &[
    "link",
    "button",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
];

/// A name or value longer than this is cut on its line.
pub const MAX_TEXT_CHARS: usize = 200;

/// Deeper than this the tree is not followed (a page can nest without end).
pub const MAX_DEPTH: usize = 100;

/// What a password field shows instead of its value.
pub const MASKED: &str = "(password, not shown)";

/// One element a ref names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Element {
    /// Its number in the isolated world the walk ran in.
    pub node: u64,
    /// Its `backendNodeId`: 0 in a snapshot, known once its ref is resolved
    /// (the node is found alive in its world).
    pub backend: u64,
    pub role: String,
    pub name: String,
    /// A password field: its value is never shown.
    pub password: bool,
}

/// A snapshot's text and the refs in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Built {
    pub lines: Vec<String>,
    /// (ref number, element), in the order they appear.
    pub refs: Vec<(u64, Element)>,
}

/// The text of `v`: trimmed, one line, at most [`MAX_TEXT_CHARS`].
fn one_line(v: &str) -> String {
    let flat: String = v.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > MAX_TEXT_CHARS {
        let cut: String = flat.chars().take(MAX_TEXT_CHARS).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// A word the walk made (a role, a state): letters, digits and `=`, `-`;
/// anything else is not shown.
fn word(v: &Value) -> Option<&str> {
    v.as_str().filter(|w| {
        !w.is_empty()
            && w.len() <= 40
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'=' || b == b'-')
    })
}

/// A link's address as the model needs it beside the page's `base`: the
/// fragment alone on the same document (`#top`), the path on the same
/// origin (`/docs/a?b`), else as it is. The snapshot's header names the
/// page's address, so each form is clear.
pub fn relative(url: &str, base: &str) -> String {
    let (Ok(u), Ok(b)) = (url::Url::parse(url), url::Url::parse(base)) else {
        return url.to_string();
    };
    if u.cannot_be_a_base() || u.origin() != b.origin() || !u.origin().is_tuple() {
        return url.to_string();
    }
    match u.fragment() {
        Some(f) if u.path() == b.path() && u.query() == b.query() => format!("#{f}"),
        _ => u[url::Position::BeforePath..].to_string(),
    }
}

/// The snapshot of `entries` (the walk's answer: `[depth, role, name,
/// value, states, url, number, password]` each), each element that gets a
/// ref numbered by `number` (given its number in the walk's world); links
/// on the origin of `base` (the page's address) are shown relative to it.
pub fn build(entries: &[Value], number: &mut dyn FnMut(u64) -> u64, base: &str) -> Built {
    let mut out = Built::default();
    for e in entries {
        let Some(a) = e.as_array().filter(|a| a.len() >= 8) else {
            continue;
        };
        let Some(depth) = a[0]
            .as_u64()
            .map(|d| d as usize)
            .filter(|d| *d <= MAX_DEPTH)
        else {
            continue;
        };
        let text = |i: usize| one_line(a[i].as_str().unwrap_or(""));
        let (role, name, value) = (word(&a[1]).unwrap_or("generic"), text(2), text(3));
        let indent = "  ".repeat(depth);
        if role == "text" {
            if !name.is_empty() {
                out.lines.push(format!("{indent}- text: {name}"));
            }
            continue;
        }
        let mut line = format!("{indent}- {role}");
        if !name.is_empty() {
            line.push_str(&format!(" {name:?}"));
        }
        for s in a[4].as_array().into_iter().flatten().filter_map(word) {
            line.push_str(&format!(" [{s}]"));
        }
        if let Some(u) = a[5].as_str().filter(|u| !u.is_empty() && role == "link") {
            line.push_str(&format!(" [url={}]", one_line(&relative(u, base))));
        }
        let password = a[7].as_u64() == Some(1);
        if let Some(node) = a[6].as_u64().filter(|n| *n > 0) {
            let r = number(node);
            line.push_str(&format!(" [ref=e{r}]"));
            out.refs.push((
                r,
                Element {
                    node,
                    backend: 0,
                    role: role.to_string(),
                    name: name.clone(),
                    password,
                },
            ));
        }
        if password && value.is_empty() {
            line.push_str(": (password, empty)");
        } else if password {
            line.push_str(&format!(": {MASKED}"));
        } else if !value.is_empty() && value != name {
            line.push_str(&format!(": {value}"));
        }
        out.lines.push(line);
    }
    out
}

/// The lines cut into pages of at most `budget` bytes each (a line longer
/// than the budget is a page alone): the line ranges, at least one.
pub fn pages(lines: &[String], budget: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, l) in lines.iter().enumerate() {
        let n = l.len() + 1;
        if i > start && size + n > budget {
            out.push(start..i);
            start = i;
            size = 0;
        }
        size += n;
    }
    out.push(start..lines.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The address of the page the entries are of.
    const BASE: &str = "http://h/form";

    /// Refs numbered on from `first`, as a page's first snapshot gets them.
    fn from(first: u64) -> impl FnMut(u64) -> u64 {
        let mut next = first;
        move |_| {
            next += 1;
            next - 1
        }
    }

    /// What the walk gives for a small form (its password's value was
    /// "s3cret": the walk says only that it is not empty).
    fn form() -> Vec<Value> {
        vec![
            json!([0, "heading", "Sign in", "", ["level=1"], "", 0, 0]),
            json!([0, "textbox", "Name ", "Ada", [], "", 4, 0]),
            json!([0, "textbox", "Secret", "*", [], "", 5, 1]),
            json!([0, "combobox", "", "Red", [], "", 16, 0]),
            json!([1, "option", "Red", "", ["selected"], "", 0, 0]),
            json!([1, "option", "Green", "", [], "", 0, 0]),
            json!([0, "checkbox", " Agree", "", ["checked=false"], "", 30, 0]),
            json!([0, "button", "Submit", "", [], "", 31, 0]),
            json!([0, "link", "Other page", "", [], "http://h/other", 32, 0]),
            json!([0, "paragraph", "", "Count: 0", [], "", 0, 0]),
            json!([0, "text", "Done", "", [], "", 0, 0]),
        ]
    }

    #[test]
    fn a_form_reads_as_indented_lines_with_a_ref_per_interactive_element() {
        let b = build(&form(), &mut from(7), BASE);
        assert_eq!(
            b.lines,
            [
                "- heading \"Sign in\" [level=1]",
                "- textbox \"Name\" [ref=e7]: Ada",
                "- textbox \"Secret\" [ref=e8]: (password, not shown)",
                "- combobox [ref=e9]: Red",
                "  - option \"Red\" [selected]",
                "  - option \"Green\"",
                "- checkbox \"Agree\" [checked=false] [ref=e10]",
                "- button \"Submit\" [ref=e11]",
                "- link \"Other page\" [url=/other] [ref=e12]",
                "- paragraph: Count: 0",
                "- text: Done",
            ]
        );
        let refs: Vec<(u64, u64, &str, bool)> = b
            .refs
            .iter()
            .map(|(r, e)| (*r, e.node, e.role.as_str(), e.password))
            .collect();
        assert_eq!(
            refs,
            [
                (7, 4, "textbox", false),
                (8, 5, "textbox", true),
                (9, 16, "combobox", false),
                (10, 30, "checkbox", false),
                (11, 31, "button", false),
                (12, 32, "link", false),
            ]
        );
        assert!(b.refs.iter().all(|(_, e)| e.backend == 0));
    }

    #[test]
    fn an_empty_password_says_so_and_a_filled_one_is_masked() {
        let tree = vec![
            json!([0, "textbox", "Pin", "", [], "", 1, 1]),
            json!([0, "textbox", "Pin 2", "plain-visible", [], "", 2, 1]),
        ];
        let b = build(&tree, &mut from(1), BASE);
        assert_eq!(
            b.lines,
            [
                "- textbox \"Pin\" [ref=e1]: (password, empty)",
                "- textbox \"Pin 2\" [ref=e2]: (password, not shown)",
            ]
        );
        assert!(!b.lines.join("\n").contains("plain-visible"));
    }

    #[test]
    fn words_the_walk_did_not_make_are_not_shown_and_bad_entries_are_skipped() {
        let tree = vec![
            json!([
                0,
                "button [ref=e99]",
                "Go",
                "",
                ["x] [ref=e98", "disabled"],
                "",
                3,
                0
            ]),
            json!([MAX_DEPTH + 1, "button", "Deep", "", [], "", 4, 0]),
            json!("not an entry"),
            json!([0, "button"]),
            json!([0, "button", "Ok \"quoted\"", "", [], "", 0, 0]),
        ];
        let b = build(&tree, &mut from(1), BASE);
        assert_eq!(
            b.lines,
            [
                "- generic \"Go\" [disabled] [ref=e1]",
                "- button \"Ok \\\"quoted\\\"\"",
            ]
        );
        assert_eq!(build(&[], &mut from(1), BASE), Built::default());
    }

    #[test]
    fn long_text_is_cut_and_pages_hold_the_budget() {
        let name = "word ".repeat(100);
        let tree = vec![json!([0, "button", name, "", [], "", 9, 0])];
        let b = build(&tree, &mut from(1), BASE);
        assert!(b.lines[0].ends_with("…\" [ref=e1]"), "{}", b.lines[0]);
        let lines: Vec<String> = (0..10).map(|i| format!("line {i:04}")).collect();
        // 10 bytes a line with its newline: 3 a page in 35 bytes.
        assert_eq!(pages(&lines, 35), [0..3, 3..6, 6..9, 9..10]);
        assert_eq!(pages(&[], 35), vec![(0..0)]);
        assert_eq!(pages(&lines[..1], 2), vec![(0..1)]);
    }

    #[test]
    fn links_on_the_page_origin_are_short() {
        let tree = vec![
            json!([0, "list", "", "", [], "", 0, 0]),
            json!([1, "listitem", "", "", [], "", 0, 0]),
            json!([2, "link", "Top", "", [], "http://h/form#top", 9, 0]),
        ];
        let b = build(&tree, &mut from(1), BASE);
        assert_eq!(
            b.lines,
            [
                "- list",
                "  - listitem",
                "    - link \"Top\" [url=#top] [ref=e1]"
            ]
        );
        for (url, shown) in [
            ("http://h/form#a", "#a"),
            ("http://h/form?q=1#a", "/form?q=1#a"),
            ("http://h/docs/x?y=2", "/docs/x?y=2"),
            ("http://h/form", "/form"),
            ("https://h/form", "https://h/form"),
            ("http://h:81/x", "http://h:81/x"),
            ("http://other/x", "http://other/x"),
            ("mailto:a@h", "mailto:a@h"),
            ("javascript:void(0)", "javascript:void(0)"),
        ] {
            assert_eq!(relative(url, BASE), shown, "{url}");
        }
        // A page whose own address has no origin keeps every address whole.
        assert_eq!(relative("http://h/x", "about:blank"), "http://h/x");
        assert_eq!(relative("file:///a/b", "file:///a/c"), "file:///a/b");
    }
}
