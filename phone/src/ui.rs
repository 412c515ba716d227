//! apps.ui_tree on Android: `uiautomator dump`'s XML read into the
//! protocol's [`UiNode`] tree, within the protocol's bounds on nodes and
//! depth. The dump's format is AOSP's AccessibilityNodeInfoDumper: a
//! `<hierarchy rotation="…">` of `<node>` elements whose attributes are
//! text, resource-id, class, package, content-desc, the state booleans and
//! `bounds="[left,top][right,bottom]"` in the screen's pixels.

use computerd::protocol::limits::{MAX_UI_DEPTH, MAX_UI_NODES};
use computerd::protocol::{AppsUiTreeResult, Region, UiNode};

/// The most bytes of a dump read; a screen's tree is tens of KiB.
pub const MAX_DUMP_BYTES: usize = 8 << 20;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UiError {
    #[error("uiautomator gave no UI tree: {0}")]
    NoTree(String),
    #[error("uiautomator's UI tree is not XML a reader takes: {0}")]
    Xml(String),
    #[error("uiautomator's UI tree is {0} bytes, past the {MAX_DUMP_BYTES} read")]
    TooLarge(usize),
}

/// The XML in what `uiautomator dump /dev/tty` printed (it adds a line
/// after, "UI hierchary dumped to: /dev/tty", misspelt as AOSP has it).
fn xml_of(out: &str) -> Result<&str, UiError> {
    let start = out.find("<?xml").or_else(|| out.find("<hierarchy"));
    let end = out.rfind("</hierarchy>").map(|e| e + "</hierarchy>".len());
    match (start, end) {
        (Some(s), Some(e)) if s < e => Ok(&out[s..e]),
        _ => Err(UiError::NoTree(
            out.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("it printed nothing")
                .chars()
                .take(200)
                .collect(),
        )),
    }
}

/// `[left,top][right,bottom]` as a region inside a `width` x `height`
/// screen (a node partly off the screen is cut to it; one wholly off has
/// an empty region at the nearest edge).
fn bounds(raw: &str, width: u32, height: u32) -> Region {
    let nums: Vec<i64> = raw
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|n| n.parse().ok())
        .collect();
    let [l, t, r, b] = nums[..] else {
        return Region {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        };
    };
    let clamp = |v: i64, most: u32| v.clamp(0, i64::from(most)) as u32;
    let (l, r) = (clamp(l, width), clamp(r, width));
    let (t, b) = (clamp(t, height), clamp(b, height));
    Region {
        x: l,
        y: t,
        width: r.saturating_sub(l),
        height: b.saturating_sub(t),
    }
}

fn node_of(n: roxmltree::Node<'_, '_>, width: u32, height: u32) -> UiNode {
    let attr = |name: &str| n.attribute(name).filter(|v| !v.is_empty());
    let yes = |name: &str| n.attribute(name) == Some("true");
    // Only what the platform says of this node: checked for what can be
    // checked, focused for what can take focus, the rest when true.
    let when = |cond: bool, value: bool| cond.then_some(value);
    let password = yes("password");
    UiNode {
        role: attr("class").unwrap_or("node").to_string(),
        id: attr("resource-id").map(str::to_string),
        text: if password {
            None
        } else {
            attr("text").map(str::to_string)
        },
        label: attr("content-desc").map(str::to_string),
        bounds: bounds(n.attribute("bounds").unwrap_or(""), width, height),
        enabled: n.attribute("enabled") != Some("false"),
        checked: when(yes("checkable"), yes("checked")),
        selected: when(yes("selected"), true),
        focused: when(yes("focusable"), yes("focused")),
        scrollable: when(yes("scrollable"), true),
        clickable: when(yes("clickable"), true),
        long_clickable: when(yes("long-clickable"), true),
        password: when(password, true),
        children: Vec::new(),
    }
}

/// The tree of a dump, on a `width` x `height` screen. Its root stands for
/// the whole screen and holds the dump's windows. Nodes past the bounds
/// are left out in document order, and `truncated` says so.
pub fn tree(out: &str, width: u32, height: u32) -> Result<AppsUiTreeResult, UiError> {
    if out.len() > MAX_DUMP_BYTES {
        return Err(UiError::TooLarge(out.len()));
    }
    let xml = xml_of(out)?;
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: u32::try_from(MAX_UI_NODES * 4).unwrap_or(u32::MAX),
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts)
        .map_err(|e| UiError::Xml(e.to_string()))?;
    let bounds = Region {
        x: 0,
        y: 0,
        width,
        height,
    };
    let mut root = UiNode::new("screen", bounds);
    let mut count = 1;
    let mut truncated = false;
    // Depth-first, in document order, with the path of open nodes as
    // indices, so no recursion follows a hostile depth.
    let mut stack: Vec<(roxmltree::Node<'_, '_>, Vec<usize>)> = doc
        .root_element()
        .children()
        .filter(|c| c.has_tag_name("node"))
        .rev()
        .map(|c| (c, Vec::new()))
        .collect();
    while let Some((n, parent)) = stack.pop() {
        if count >= MAX_UI_NODES || parent.len() + 2 > MAX_UI_DEPTH {
            truncated = true;
            continue;
        }
        let mut at = &mut root;
        for &i in &parent {
            at = &mut at.children[i];
        }
        at.children.push(node_of(n, width, height));
        count += 1;
        let mut path = parent;
        path.push(at.children.len() - 1);
        for c in n.children().filter(|c| c.has_tag_name("node")).rev() {
            stack.push((c, path.clone()));
        }
    }
    Ok(AppsUiTreeResult {
        root,
        nodes: count as u32,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = r#"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0"><node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="ai.agentrun.fixture" content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,0][1080,2400]"><node index="0" text="agentrun fixture" resource-id="ai.agentrun.fixture:id/button" class="android.widget.Button" package="ai.agentrun.fixture" content-desc="" checkable="false" checked="false" clickable="true" enabled="true" focusable="true" focused="false" scrollable="false" long-clickable="false" password="false" selected="false" bounds="[90,2000][990,2160]" /><node index="1" text="hunter2" resource-id="ai.agentrun.fixture:id/secret" class="android.widget.EditText" package="ai.agentrun.fixture" content-desc="Password" checkable="false" checked="false" clickable="true" enabled="false" focusable="true" focused="true" scrollable="false" long-clickable="true" password="true" selected="false" bounds="[-20,100][1200,260]" /></node></hierarchy>
UI hierchary dumped to: /dev/tty
"#;

    #[test]
    fn a_dump_reads_as_nodes_with_their_bounds_and_states() {
        let t = tree(DUMP, 1080, 2400).unwrap();
        assert_eq!((t.nodes, t.truncated), (4, false));
        let frame = &t.root.children[0];
        assert_eq!(frame.role, "android.widget.FrameLayout");
        assert_eq!(frame.id, None);
        let button = &frame.children[0];
        assert_eq!(button.id.as_deref(), Some("ai.agentrun.fixture:id/button"));
        assert_eq!(button.text.as_deref(), Some("agentrun fixture"));
        assert_eq!(
            button.bounds,
            Region {
                x: 90,
                y: 2000,
                width: 900,
                height: 160
            }
        );
        assert_eq!(
            (button.clickable, button.checked, button.focused),
            (Some(true), None, Some(false))
        );
        t.check().unwrap();
    }

    #[test]
    fn a_password_fields_text_is_never_given_and_bounds_are_cut_to_the_screen() {
        let t = tree(DUMP, 1080, 2400).unwrap();
        let secret = &t.root.children[0].children[1];
        assert_eq!(secret.text, None);
        assert_eq!(secret.password, Some(true));
        assert_eq!(secret.label.as_deref(), Some("Password"));
        assert!(!secret.enabled);
        assert_eq!((secret.bounds.x, secret.bounds.width), (0, 1080));
        assert!(!serde_json::to_string(&t).unwrap().contains("hunter2"));
    }

    #[test]
    fn a_tree_past_the_bounds_is_cut_in_document_order_and_says_so() {
        let wide: String = (0..MAX_UI_NODES + 10)
            .map(|i| format!(r#"<node class="r" text="{i}" bounds="[0,0][1,1]"/>"#))
            .collect();
        let t = tree(&format!("<hierarchy>{wide}</hierarchy>"), 10, 10).unwrap();
        assert!(t.truncated);
        assert_eq!(t.nodes as usize, MAX_UI_NODES);
        assert_eq!(t.root.children[0].text.as_deref(), Some("0"));
        t.check().unwrap();
        let deep = format!(
            "<hierarchy>{}{}</hierarchy>",
            r#"<node class="d" bounds="[0,0][1,1]">"#.repeat(80),
            "</node>".repeat(80)
        );
        let t = tree(&deep, 10, 10).unwrap();
        assert!(t.truncated);
        assert_eq!(t.root.measure().1, MAX_UI_DEPTH);
        t.check().unwrap();
    }

    #[test]
    fn what_is_not_a_tree_is_said_in_words() {
        let e = tree(
            "ERROR: null root node returned by UiTestAutomationBridge.\n",
            1,
            1,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "uiautomator gave no UI tree: ERROR: null root node returned by UiTestAutomationBridge."
        );
        assert!(matches!(
            tree("<hierarchy><node></hierarchy>", 1, 1),
            Err(UiError::Xml(_))
        ));
    }
}
