//! A page's accessibility tree (`Accessibility.getFullAXTree`'s nodes) as
//! indented text a model reads, one ref per interactive element:
//!
//! ```text
//! - heading "Sign in" [level=1]
//! - textbox "Name" [ref=e1]: Ada
//! - textbox "Secret" [ref=e2]: (password, not shown)
//! - button "Submit" [ref=e3]
//! ```
//!
//! Pure: the tree comes in as JSON, the lines and the refs (each the
//! element's `backendDOMNodeId`, numbered by the caller, who keeps an
//! element's number for as long as it lives) go out, and [`pages`] cuts
//! the lines to a budget. Wrappers that say nothing (`generic`, `none`, label boxes) are
//! left out and their children shown in their place; the text inside a
//! field is its value, shown once on the field's line.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

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
    "PopUpButton",
];

/// Roles left out with their children: what a model reads past (the
/// bullet or number of each list item; the `listitem` line stays).
const SKIPPED: &[&str] = &["InlineTextBox", "ListMarker"];

/// Roles shown as their children alone.
const WRAPPERS: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "LabelText",
    "MenuListPopup",
    "Section",
    "div",
];

/// Roles whose children are their value (shown on their own line).
const FIELDS: &[&str] = &["textbox", "searchbox", "combobox", "spinbutton"];

/// A name or value longer than this is cut on its line.
pub const MAX_TEXT_CHARS: usize = 200;

/// Deeper than this the tree is not followed (a page can nest without end).
pub const MAX_DEPTH: usize = 100;

/// What a password field shows instead of its value.
pub const MASKED: &str = "(password, not shown)";

/// One element a ref names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Element {
    /// Its `backendDOMNodeId`, stable while the document lives.
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

struct Node<'a> {
    raw: &'a Value,
    role: &'a str,
    name: String,
    children: Vec<&'a str>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_str().unwrap_or("")
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

fn prop<'a>(node: &'a Value, name: &str) -> Option<&'a Value> {
    node["properties"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| &p["value"]["value"])
}

/// A value Chromium already masked (bullets), or a field the DOM says is
/// `type=password`.
fn is_password(node: &Value, backend: Option<u64>, passwords: &HashSet<u64>) -> bool {
    if backend.is_some_and(|b| passwords.contains(&b)) {
        return true;
    }
    let v = str_at(node, &["value", "value"]);
    !v.is_empty()
        && v.chars().all(|c| c == '•' || c == '●' || c == '*')
        && node["role"]["value"] == "textbox"
}

/// One tree of nodes: the main frame's, with the trees of its frames (each
/// with the backend id of the `<iframe>` that holds it) hung under their
/// `Iframe` nodes, node ids made unique per frame. A frame whose tree is not
/// given (another site's, in another process) stays an empty `Iframe`.
pub fn merge_frames(main: &[Value], frames: &[(u64, Vec<Value>)]) -> Vec<Value> {
    let mut out: Vec<Value> = main.to_vec();
    for (k, (owner, nodes)) in frames.iter().enumerate() {
        let prefix = format!("f{}:", k + 1);
        let Some(root) = nodes.iter().find(|n| n.get("parentId").is_none()) else {
            continue;
        };
        let root_id = format!("{prefix}{}", root["nodeId"].as_str().unwrap_or(""));
        let Some(holder) = out.iter_mut().find(|n| {
            n["role"]["value"] == "Iframe" && n["backendDOMNodeId"].as_u64() == Some(*owner)
        }) else {
            continue;
        };
        holder["childIds"] = Value::Array(vec![Value::String(root_id.clone())]);
        let holder_id = holder["nodeId"].clone();
        for n in nodes {
            let mut n = n.clone();
            let id = format!("{prefix}{}", n["nodeId"].as_str().unwrap_or(""));
            n["nodeId"] = Value::String(id.clone());
            if let Some(p) = n.get("parentId").and_then(Value::as_str) {
                n["parentId"] = Value::String(format!("{prefix}{p}"));
            } else {
                n["parentId"] = holder_id.clone();
            }
            if let Some(c) = n["childIds"].as_array() {
                let c: Vec<Value> = c
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|c| Value::String(format!("{prefix}{c}")))
                    .collect();
                n["childIds"] = Value::Array(c);
            }
            out.push(n);
        }
    }
    out
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

/// The snapshot of `nodes` (getFullAXTree's `nodes`), each element that
/// gets a ref numbered by `number` (given its backend id). `passwords` are
/// the backend ids of the page's password inputs; links on the origin of
/// `base` (the page's address) are shown relative to it.
pub fn build(
    nodes: &[Value],
    number: &mut dyn FnMut(u64) -> u64,
    passwords: &HashSet<u64>,
    base: &str,
) -> Built {
    let mut by_id: HashMap<&str, Node<'_>> = HashMap::new();
    let mut root = None;
    for n in nodes {
        let Some(id) = n["nodeId"].as_str() else {
            continue;
        };
        if root.is_none() && n.get("parentId").is_none() {
            root = Some(id);
        }
        let children = n["childIds"]
            .as_array()
            .map(|c| c.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        by_id.insert(
            id,
            Node {
                raw: n,
                role: n["role"]["value"].as_str().unwrap_or(""),
                name: one_line(str_at(n, &["name", "value"])),
                children,
            },
        );
    }
    let mut out = Built::default();
    let Some(root) = root else {
        return out;
    };
    let mut w = Walk {
        by_id: &by_id,
        passwords,
        base,
        number,
        out: &mut out,
        seen: HashSet::new(),
    };
    if let Some(r) = by_id.get(root) {
        let skip = w.skip_for(r, &[]);
        for c in r.children.clone() {
            w.node(c, 0, &skip, false);
        }
    }
    out
}

struct Walk<'a, 'b> {
    by_id: &'b HashMap<&'a str, Node<'a>>,
    passwords: &'b HashSet<u64>,
    base: &'b str,
    number: &'b mut dyn FnMut(u64) -> u64,
    out: &'b mut Built,
    seen: HashSet<&'a str>,
}

impl<'a> Walk<'a, '_> {
    /// The texts a child's StaticText would only repeat: what is shown
    /// above it, and the names of the fields and buttons beside it (a
    /// label's text is the name of the field it labels).
    fn skip_for(&self, n: &Node<'a>, above: &[String]) -> Vec<String> {
        let mut skip = above.to_vec();
        if !n.name.is_empty() {
            skip.push(n.name.clone());
        }
        for c in &n.children {
            if let Some(k) = self.by_id.get(c)
                && INTERACTIVE.contains(&k.role)
                && !k.name.is_empty()
            {
                skip.push(k.name.clone());
            }
        }
        skip
    }

    fn node(&mut self, id: &'a str, depth: usize, skip: &[String], in_select: bool) {
        if depth > MAX_DEPTH || !self.seen.insert(id) {
            return;
        }
        let Some(n) = self.by_id.get(id) else {
            return;
        };
        let ignored = n.raw["ignored"].as_bool().unwrap_or(false);
        if SKIPPED.contains(&n.role) {
            return;
        }
        // A frame's document shows as its content, under its Iframe line.
        if ignored || n.role == "RootWebArea" || (WRAPPERS.contains(&n.role) && n.name.is_empty()) {
            let skip = self.skip_for(n, skip);
            for c in n.children.clone() {
                self.node(c, depth, &skip, in_select);
            }
            return;
        }
        if n.role == "StaticText" {
            if !n.name.is_empty() && !skip.contains(&n.name) {
                self.line(depth, format!("- text: {}", n.name));
            }
            return;
        }
        let backend = n.raw["backendDOMNodeId"].as_u64();
        let mut line = format!("- {}", n.role);
        if !n.name.is_empty() {
            line.push_str(&format!(" {:?}", n.name));
        }
        for (p, shown) in [
            ("checked", "checked"),
            ("pressed", "pressed"),
            ("selected", "selected"),
            ("expanded", "expanded"),
            ("disabled", "disabled"),
            ("required", "required"),
            ("focused", "focused"),
            ("level", "level"),
        ] {
            match prop(n.raw, p) {
                Some(Value::Bool(true)) => line.push_str(&format!(" [{shown}]")),
                Some(Value::Bool(false)) if p == "checked" || p == "expanded" => {
                    line.push_str(&format!(" [{shown}=false]"))
                }
                Some(Value::String(s)) if p == "checked" || p == "pressed" => {
                    if s == "true" {
                        line.push_str(&format!(" [{shown}]"));
                    } else {
                        line.push_str(&format!(" [{shown}={s}]"));
                    }
                }
                Some(Value::Number(v)) if p == "level" => line.push_str(&format!(" [level={v}]")),
                _ => {}
            }
        }
        if n.role == "link"
            && let Some(Value::String(u)) = prop(n.raw, "url")
        {
            line.push_str(&format!(" [url={}]", one_line(&relative(u, self.base))));
        }
        // An option of a <select> is picked with browser_select, not by ref.
        let wants_ref = INTERACTIVE.contains(&n.role) && !(in_select && n.role == "option");
        let password = is_password(n.raw, backend, self.passwords);
        if wants_ref && let Some(b) = backend {
            let r = (self.number)(b);
            line.push_str(&format!(" [ref=e{r}]"));
            self.out.refs.push((
                r,
                Element {
                    backend: b,
                    role: n.role.to_string(),
                    name: n.name.clone(),
                    password,
                },
            ));
        }
        let value = one_line(str_at(n.raw, &["value", "value"]));
        if password && value.is_empty() {
            line.push_str(": (password, empty)");
        } else if password {
            line.push_str(&format!(": {MASKED}"));
        } else if !value.is_empty() && value != n.name {
            line.push_str(&format!(": {value}"));
        }
        self.line(depth, line);
        if FIELDS.contains(&n.role) && n.role != "combobox" {
            return;
        }
        let select = in_select || n.role == "combobox";
        let skip = self.skip_for(n, &[]);
        for c in n.children.clone() {
            self.node(c, depth + 1, &skip, select);
        }
    }

    fn line(&mut self, depth: usize, text: String) {
        self.out.lines.push(format!("{}{text}", "  ".repeat(depth)));
    }
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

    /// The address of the page the recorded trees are of.
    const BASE: &str = "http://h/form";

    /// Refs numbered on from `first`, as a page's first snapshot gets them.
    fn from(first: u64) -> impl FnMut(u64) -> u64 {
        let mut next = first;
        move |_| {
            next += 1;
            next - 1
        }
    }

    /// The tree Chromium 148 gives for a small form (recorded, cut to the
    /// fields the snapshot reads; the password's value was "s3cret").
    fn form_tree() -> Vec<Value> {
        let n = |id: &str, role: &str, name: &str, parent: Option<&str>, kids: &[&str], b: u64| {
            let mut v = json!({
                "nodeId": id, "ignored": false,
                "role": {"type": "role", "value": role},
                "name": {"type": "computedString", "value": name},
                "childIds": kids, "backendDOMNodeId": b,
            });
            if let Some(p) = parent {
                v["parentId"] = json!(p);
            }
            v
        };
        let mut nodes = vec![
            n("2", "RootWebArea", "Form", None, &["8"], 2),
            n("8", "none", "", Some("2"), &["6"], 8),
            n("6", "none", "", Some("8"), &["11", "3"], 6),
            n("11", "heading", "Sign in", Some("6"), &["33"], 11),
            n("33", "StaticText", "Sign in", Some("11"), &["-1"], 33),
            n("-1", "InlineTextBox", "Sign in", Some("33"), &[], 0),
            n(
                "3",
                "generic",
                "",
                Some("6"),
                &["12", "14", "16", "29", "31", "32"],
                3,
            ),
            n("12", "LabelText", "", Some("3"), &["34", "4"], 12),
            n("34", "StaticText", "Name ", Some("12"), &[], 34),
            n("4", "textbox", "Name ", Some("12"), &["13"], 4),
            n("13", "generic", "", Some("4"), &[], 13),
            n("14", "LabelText", "", Some("3"), &["35", "5"], 14),
            n("35", "StaticText", "Secret ", Some("14"), &[], 35),
            n("5", "textbox", "Secret ", Some("14"), &["15"], 5),
            n("15", "generic", "", Some("5"), &["36"], 15),
            n("36", "StaticText", "••••••", Some("15"), &[], 36),
            n("16", "combobox", "", Some("3"), &["19"], 16),
            n("19", "MenuListPopup", "", Some("16"), &["23", "26"], 19),
            n("23", "option", "Red", Some("19"), &[], 23),
            n("26", "option", "Green", Some("19"), &[], 26),
            n("29", "none", "", Some("3"), &["30"], 29),
            n("30", "checkbox", " Agree", Some("29"), &[], 30),
            n("31", "button", "Submit", Some("3"), &["38"], 31),
            n("38", "StaticText", "Submit", Some("31"), &[], 38),
            n("32", "link", "Other page", Some("3"), &["39"], 32),
            n("39", "StaticText", "Other page", Some("32"), &[], 39),
        ];
        nodes[1]["ignored"] = json!(true);
        nodes[2]["ignored"] = json!(true);
        nodes[3]["properties"] =
            json!([{"name": "level", "value": {"type": "integer", "value": 1}}]);
        nodes[9]["value"] = json!({"type": "string", "value": "Ada"});
        nodes[13]["value"] = json!({"type": "string", "value": "••••••"});
        nodes[16]["value"] = json!({"type": "string", "value": "Red"});
        nodes[16]["properties"] =
            json!([{"name": "expanded", "value": {"type": "booleanOrUndefined", "value": false}}]);
        nodes[18]["properties"] =
            json!([{"name": "selected", "value": {"type": "boolean", "value": true}}]);
        nodes[21]["properties"] =
            json!([{"name": "checked", "value": {"type": "tristate", "value": "false"}}]);
        nodes[24]["properties"] =
            json!([{"name": "url", "value": {"type": "string", "value": "http://h/other"}}]);
        nodes
    }

    #[test]
    fn a_form_reads_as_indented_lines_with_a_ref_per_interactive_element() {
        let b = build(&form_tree(), &mut from(7), &HashSet::new(), BASE);
        assert_eq!(
            b.lines,
            [
                "- heading \"Sign in\" [level=1]",
                "- textbox \"Name\" [ref=e7]: Ada",
                "- textbox \"Secret\" [ref=e8]: (password, not shown)",
                "- combobox [expanded=false] [ref=e9]: Red",
                "  - option \"Red\" [selected]",
                "  - option \"Green\"",
                "- checkbox \"Agree\" [checked=false] [ref=e10]",
                "- button \"Submit\" [ref=e11]",
                "- link \"Other page\" [url=/other] [ref=e12]",
            ]
        );
        let refs: Vec<(u64, u64, &str, bool)> = b
            .refs
            .iter()
            .map(|(r, e)| (*r, e.backend, e.role.as_str(), e.password))
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
        assert!(!b.lines.join("\n").contains('•'));
    }

    #[test]
    fn a_password_the_dom_names_is_masked_whatever_its_value() {
        let mut tree = form_tree();
        tree[9]["value"] = json!({"type": "string", "value": "plain-visible"});
        let b = build(&tree, &mut from(1), &HashSet::from([4]), BASE);
        assert_eq!(
            b.lines[1],
            "- textbox \"Name\" [ref=e1]: (password, not shown)"
        );
        assert!(b.refs[0].1.password);
        assert!(!b.lines.join("\n").contains("plain-visible"));
    }

    #[test]
    fn long_text_is_cut_and_pages_hold_the_budget() {
        let name = "word ".repeat(100);
        let tree = vec![
            json!({"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "button"}, "name": {"value": name}, "backendDOMNodeId": 9}),
        ];
        let b = build(&tree, &mut from(1), &HashSet::new(), BASE);
        assert!(b.lines[0].ends_with("…\" [ref=e1]"), "{}", b.lines[0]);
        let lines: Vec<String> = (0..10).map(|i| format!("line {i:04}")).collect();
        // 10 bytes a line with its newline: 3 a page in 35 bytes.
        assert_eq!(pages(&lines, 35), [0..3, 3..6, 6..9, 9..10]);
        assert_eq!(pages(&[], 35), vec![(0..0)]);
        assert_eq!(pages(&lines[..1], 2), vec![(0..1)]);
    }

    #[test]
    fn a_frames_tree_is_shown_under_its_iframe() {
        let main = vec![
            json!({"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2", "3"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "button"}, "name": {"value": "Top"}, "backendDOMNodeId": 9}),
            json!({"nodeId": "3", "parentId": "1", "role": {"value": "Iframe"}, "childIds": [], "backendDOMNodeId": 5}),
        ];
        // Its own node ids, which collide with the main frame's.
        let inner = vec![
            json!({"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "Inner doc"}, "childIds": ["2"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "button"}, "name": {"value": "Inner"}, "backendDOMNodeId": 14}),
        ];
        let merged = merge_frames(&main, &[(5, inner), (77, vec![])]);
        let b = build(&merged, &mut from(1), &HashSet::new(), BASE);
        assert_eq!(
            b.lines,
            [
                "- button \"Top\" [ref=e1]",
                "- Iframe",
                "  - button \"Inner\" [ref=e2]",
            ]
        );
        assert_eq!(b.refs[1].1.backend, 14);
    }

    #[test]
    fn an_empty_or_cyclic_tree_ends() {
        assert_eq!(
            build(&[], &mut from(1), &HashSet::new(), BASE),
            Built::default()
        );
        let tree = vec![
            json!({"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "group"}, "name": {"value": "g"}, "childIds": ["2"]}),
        ];
        assert_eq!(
            build(&tree, &mut from(1), &HashSet::new(), BASE).lines,
            ["- group \"g\""]
        );
    }

    #[test]
    fn list_markers_are_left_out_and_links_on_the_page_origin_are_short() {
        let tree = vec![
            json!({"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2"]}),
            json!({"nodeId": "2", "parentId": "1", "role": {"value": "list"}, "childIds": ["3"]}),
            json!({"nodeId": "3", "parentId": "2", "role": {"value": "listitem"}, "childIds": ["4", "6"]}),
            json!({"nodeId": "4", "parentId": "3", "role": {"value": "ListMarker"}, "name": {"value": "•"}, "childIds": ["5"]}),
            json!({"nodeId": "5", "parentId": "4", "role": {"value": "StaticText"}, "name": {"value": "• "}}),
            json!({"nodeId": "6", "parentId": "3", "role": {"value": "link"}, "name": {"value": "Top"}, "backendDOMNodeId": 9,
                "properties": [{"name": "url", "value": {"type": "string", "value": "http://h/form#top"}}]}),
        ];
        let b = build(&tree, &mut from(1), &HashSet::new(), BASE);
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
