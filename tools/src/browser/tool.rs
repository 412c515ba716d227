//! The page tools, one module per tool (its args, result and handler),
//! listed together in [`PAGE_TOOLS`], and what several of them share: the
//! answer of an action and the text budget of a page of output.

pub mod click;
pub mod console;
pub mod drag;
pub mod eval;
pub mod form;
pub mod get_text;
pub mod hover;
pub mod navigate;
pub mod network;
pub mod press;
pub mod screenshot;
pub mod scroll;
pub mod select;
pub mod snapshot;
pub mod tabs;
pub mod type_text;
pub mod upload;
pub mod wait;
pub mod window;

use computerd::protocol::Group;
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;

use console::{DEFAULT_ENTRIES, MAX_ENTRIES, MAX_ENTRY_CHARS};
use navigate::{NAVIGATE_DEFAULT_MS, NAVIGATE_MAX_MS};

use crate::ToolSettings;
use crate::browser::{check, keys};
use crate::define::{hints, listing, with_structured};
use crate::registry::{Needs, ToolDef, ToolSet};
use crate::together::{Members, Together};

const CDP: Needs = Needs::Group(Group::Cdp);
const CDP_FILES: Needs = Needs::All(&[Group::Cdp, Group::Files]);

/// A page tool's handler (as `handler!`): the tab its args name is made
/// the current one first, and its answer first says so when the browser
/// was started again since a call it was ended under.
macro_rules! page_handler {
    ($f:path) => {
        |ctx, name, args| {
            Box::pin(async move {
                let a = $crate::define::parse(name, args)?;
                let r =
                    match $crate::browser::use_tab(ctx, $crate::browser::target::InTab::tab_id(&a))
                        .await
                    {
                        Ok(()) => $f(ctx, a).await,
                        Err(e) => Err(e),
                    };
                $crate::browser::say_started_again(ctx, r)
            })
        }
    };
}

/// A page tool that acts (`page_handler!`), answering after what it did
/// with the page's state as Playwright MCP does: URL, title, and the
/// console messages the act produced.
macro_rules! act_handler {
    ($f:path) => {
        |ctx, name, args| {
            Box::pin(async move {
                let a = $crate::define::parse(name, args)?;
                let tab = $crate::browser::target::InTab::tab_id(&a);
                let r = match $crate::browser::use_tab(ctx, tab).await {
                    Ok(()) => {
                        let mark = $crate::browser::playwright::mark(ctx).await;
                        let r = $f(ctx, a).await;
                        $crate::browser::playwright::with_page_state(ctx, mark, r).await
                    }
                    Err(e) => Err(e),
                };
                $crate::browser::say_started_again(ctx, r)
            })
        }
    };
}

/// The page tools, a set another family can list too (a desktop whose
/// computer declares `cdp` drives its visible browser with them): each
/// one's listing (args and result types, description, annotations) and
/// handler.
#[rustfmt::skip]
pub const PAGE_TOOLS: ToolSet = ToolSet {
    name: "page",
    tools: &[
        ToolDef::new("browser_navigate", CDP, listing!(|_| navigate::NavigateArgs => navigate::NavigateOutput,
            format!(
                "Open a URL (http://, https:// or about:blank) in the current tab, or go back, forward or reload (action). Waits for the load (timeout_ms: default {} s, at most {} s); answers the URL and title.",
                NAVIGATE_DEFAULT_MS / 1000,
                NAVIGATE_MAX_MS / 1000
            ),
            hints("Navigate", false, false, false, true)
        ), page_handler!(navigate::navigate)),
        ToolDef::new("browser_snapshot", CDP, listing!(|s| snapshot::SnapshotArgs => snapshot::SnapshotOutput,
            format!(
                "Read the page as its accessibility tree: lines such as `- button \"Submit\" [ref=e12]`, a ref on what you can act on. A ref holds while its element is in the page; a removed one's, or one from before a navigation, is refused. Passwords are never shown. At most {} KiB a page.",
                budget(s) / 1024
            ),
            hints("Page snapshot", true, false, false, false)
        ), page_handler!(snapshot::snapshot)),
        ToolDef::new("browser_click", CDP, listing!(|_| click::ClickArgs => ActOutput,
            "Click an element by its ref from browser_snapshot (scrolled into view, checked uncovered, clicked at its middle), or at x, y in the latest browser_screenshot's pixels. Waits briefly for a navigation it starts.",
            hints("Click", false, true, false, false)
        ), act_handler!(click::click)),
        ToolDef::new("browser_type", CDP, listing!(|_| type_text::TypeArgs => ActOutput,
            "Type text into a field by its ref from the latest snapshot (it is scrolled into view and focused first; clear empties it first; submit presses Enter after), or where the focus is when no ref is given. What is typed into a password field is never shown back.",
            hints("Type", false, true, false, false)
        ), act_handler!(type_text::type_text)),
        ToolDef::new("browser_select", CDP, listing!(|_| select::SelectArgs => ActOutput,
            "Pick options of a <select> by its ref (values: the options' values or texts, several for a multiple select), or set a form field's value directly (value: true/false checks a checkbox or radio, text sets a text field). Fires input and change as a user's choice would.",
            hints("Select", false, true, true, false)
        ), act_handler!(select::select)),
        ToolDef::new("browser_hover", CDP, listing!(|_| hover::HoverArgs => ActOutput,
            "Move the pointer over an element by ref (scrolled into view, checked uncovered) or to x, y of the latest screenshot, without clicking: opens hover menus and tooltips. Take a snapshot after to see what appeared.",
            hints("Hover", false, false, true, false)
        ), act_handler!(hover::hover)),
        ToolDef::new("browser_scroll", CDP, listing!(|_| scroll::ScrollArgs => ActOutput,
            "Scroll with the mouse wheel: direction up, down, left or right, by amount CSS pixels (default most of a viewport), at ref, at x, y of the latest screenshot, or at the middle of the viewport; the area under that point scrolls. Says what moved and where it stands now (or that it was already at its end). With ref and no direction, scrolls that element into view. Refs stay valid after a scroll.",
            hints("Scroll", false, false, false, false)
        ), page_handler!(scroll::scroll)),
        ToolDef::new("browser_drag", CDP, listing!(|_| drag::DragArgs => ActOutput,
            "Drag from start_ref (or start_x, start_y of the latest screenshot) to end_ref (or end_x, end_y) with the left button held: moves a slider, reorders a list, drops an item on a target (HTML drag and drop included). The start is scrolled into view; the end must be in view with it, or the drag is refused and nothing is done. Says whether the page took it as a drag and drop or as mouse moves; take a snapshot after to see the result.",
            hints("Drag", false, true, false, false)
        ), act_handler!(drag::drag)),
        ToolDef::new("browser_upload", CDP_FILES, listing!(|_| upload::UploadArgs => ActOutput,
            "Choose files of the computer in a page's file input: ref is the input, or the button that opens its file chooser (it is clicked, and the chooser is answered with paths). paths are absolute paths of regular files in the computer (write them first with write_file or exec); an input without `multiple` takes one. Says what the input holds after (names and sizes). Submit the form after with browser_click.",
            hints("Upload files", false, true, true, false)
        ), page_handler!(upload::upload)),
        ToolDef::new("browser_press", CDP, listing!(|_| press::PressArgs => ActOutput,
            format!(
                "Press keys in the page: a key name or chord (Enter, Tab, Escape, ArrowDown, PageDown, ctrl+a, shift+Tab), several separated by spaces, at most {} presses; ref focuses that element first, else they go where the focus is. To type text use browser_type.",
                keys::MAX_PRESSES
            ),
            hints("Press keys", false, true, false, false)
        ), act_handler!(press::press)),
        ToolDef::new("browser_screenshot", CDP, listing!(|s| screenshot::ScreenshotArgs => screenshot::ShotOutput,
            format!(
                "See the current tab's viewport: a PNG fit to {}x{}, and its frame id. x, y given to browser_click and browser_hover are in this image's pixels. Prefer browser_snapshot to read a page; take a screenshot for what only pixels show.",
                s.screenshot_max.0, s.screenshot_max.1
            ),
            hints("Browser screenshot", true, false, false, false)
        ), page_handler!(screenshot::screenshot)),
        ToolDef::new("browser_tabs", CDP, listing!(|_| tabs::TabsArgs => tabs::TabsOutput,
            "The browser's tabs: list them, open a new one (it becomes current, url optional), switch to one, or close one (index or tab_id from list). The page tools act on the current tab; refs and screenshots are of the tab they were taken in.",
            hints("Tabs", false, true, false, false)
        ), page_handler!(tabs::tabs)),
        ToolDef::new("browser_get_text", CDP, listing!(|s| get_text::GetTextArgs => get_text::GetTextOutput,
            format!(
                "The visible text of the page (or of one element by ref), as the page renders it (innerText), at most {} KiB per call; offset reads on. For reading articles and tables; use browser_snapshot to find what to act on.",
                budget(s) / 1024
            ),
            hints("Page text", true, false, true, false)
        ), page_handler!(get_text::get_text)),
        ToolDef::new("browser_console", CDP, listing!(|_| console::RecentArgs => console::ConsoleOutput,
            format!(
                "The current tab's recent console messages and uncaught exceptions, newest last (at most max, default {DEFAULT_ENTRIES}, up to {MAX_ENTRIES}; each cut at {MAX_ENTRY_CHARS} characters). since (a previous answer's next) gives only newer ones."
            ),
            hints("Console", true, false, true, false)
        ), page_handler!(console::console)),
        ToolDef::new("browser_network", CDP, listing!(|_| console::RecentArgs => network::NetworkOutput,
            format!(
                "The current tab's recent requests, newest last: method, URL, status and type, or why one failed (at most max, default {DEFAULT_ENTRIES}, up to {MAX_ENTRIES}). since (a previous answer's next) gives only newer ones."
            ),
            hints("Network", true, false, true, false)
        ), page_handler!(network::network)),
        ToolDef::new("browser_eval", CDP, listing!(|s| eval::EvalArgs => eval::EvalOutput,
            format!(
                "Run JavaScript in the current page (expression, at most {} KiB) and answer its value as JSON (a promise is awaited; at most {} KiB of it). Write an expression, not a return. For what snapshots cannot show; act with the ref tools where you can.",
                check::MAX_EXPRESSION_BYTES / 1024,
                budget(s) / 1024
            ),
            hints("Run JavaScript", false, true, false, true)
        ), page_handler!(eval::eval)),
        ToolDef::new("browser_wait_for", CDP, listing!(|_| wait::WaitArgs => wait::WaitOutput,
            "Wait for text to show in the page, or textGone to go, or for time seconds (at most 30; with text, the bound, default 10). A wait that reaches its bound ends with what the page showed.",
            hints("Wait for", true, false, true, false)
        ), act_handler!(wait::wait_for)),
        ToolDef::new("browser_fill_form", CDP, listing!(|_| form::FillFormArgs => form::FillFormOutput,
            "Fill several fields by ref (target) in one call: a textbox's value is typed (emptied first), a checkbox's or radio's is \"true\" or \"false\", a combobox's is an option's text.",
            hints("Fill form", false, true, true, false)
        ), act_handler!(form::fill_form)),
    ],
    aliases: crate::browser::playwright::ALIASES,
};

/// A desktop's page tools, listed as one tool (`browser`, action
/// `navigate`, `snapshot`…): the screen tools come first there, and one by
/// one the page tools would not fit a desktop's listing budget.
pub const PAGE_TOGETHER: Together = Together {
    name: "browser",
    title: "Browser pages",
    lead: "The visible Chromium's pages, read and acted on by their accessibility tree: navigate, then snapshot for refs (e12), then act on an element by its ref.",
    members: Members::Set(&PAGE_TOOLS),
};

/// A browser's less frequent page acts, listed as one tool (`browser`,
/// action `hover`, `drag`…) so the kind's listing fits its budget.
pub const RARE_PAGE_TOGETHER: Together = Together {
    name: "browser",
    title: "More page acts",
    lead: "More page acts, on an element by its ref from browser_snapshot where they take one; each takes tab_id too.",
    members: Members::Named(&[
        "browser_wait_for",
        "browser_select",
        "browser_scroll",
        "browser_eval",
        "browser_tabs",
        "browser_hover",
        "browser_drag",
        "browser_upload",
        "browser_get_text",
        "browser_console",
        "browser_network",
    ]),
};

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ActOutput {
    /// What was done, in words.
    pub done: String,
    /// The viewport point acted at, in CSS pixels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<[f64; 2]>,
    /// The page navigated because of the action.
    pub navigated: bool,
}

pub(crate) fn act_done(text: String, out: &ActOutput) -> CallToolResult {
    with_structured(CallToolResult::success(vec![ContentBlock::text(text)]), out)
}

pub(crate) fn chars_cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n).collect();
    out.push('…');
    out
}

pub(crate) fn budget(s: &ToolSettings) -> usize {
    s.output_budget_bytes.saturating_sub(512).max(1024)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::browser::target::{Target, Typed, Where, where_of};
    use computerd::protocol::CdpEvent;
    use console::*;
    use eval::*;
    use navigate::navigate_timeout;
    use network::*;
    use press::*;
    use screenshot::png_size;
    use scroll::*;
    use snapshot::*;
    use std::time::Duration;

    /// The members of Anthropic's browser toolset that name a field
    /// another way decode to ours: `text` for press and eval,
    /// `scroll_direction` for scroll; a misspelt field is still refused.
    #[test]
    fn the_browser_toolsets_field_names_are_taken() {
        let press: PressArgs =
            serde_json::from_value(json!({"text": "ctrl+a", "tab_id": "t1"})).unwrap();
        assert_eq!((press.key, press.text.as_deref()), (None, Some("ctrl+a")));
        let eval: EvalArgs = serde_json::from_value(json!({"text": "document.title"})).unwrap();
        assert_eq!(eval.text.as_deref(), Some("document.title"));
        let scroll: ScrollArgs =
            serde_json::from_value(json!({"scroll_direction": "down", "amount": 300})).unwrap();
        assert_eq!(scroll.direction, Some(Direction::Down));
        assert_eq!(scroll.amount, Some(300));
        let wrong =
            serde_json::from_value::<ScrollArgs>(json!({"scroll_dir": "down"})).unwrap_err();
        assert!(wrong.to_string().contains("scroll_dir"), "{wrong}");
    }

    /// The flat listed schema takes both forms; decoding stays exact.
    #[test]
    fn a_target_is_a_ref_or_one_typed_form_and_nothing_mixed() {
        let t = |v: Value| serde_json::from_value::<Target>(v);
        assert!(matches!(t(json!("e12")), Ok(Target::Plain(r)) if r == "e12"));
        assert!(matches!(
            t(json!({"type": "ref", "ref": "e3"})),
            Ok(Target::Typed(Typed::Ref { element })) if element == "e3"
        ));
        assert!(matches!(
            t(json!({"type": "coordinate", "x": 4, "y": 5})),
            Ok(Target::Typed(Typed::Coordinate { x: 4, y: 5 }))
        ));
        for bad in [
            json!({"type": "ref", "ref": "e3", "x": 1}),
            json!({"type": "coordinate", "x": 4}),
            json!({"type": "point", "x": 4, "y": 5}),
            json!({"ref": "e3"}),
            json!(7),
        ] {
            assert!(t(bad.clone()).is_err(), "{bad} was taken as a target");
        }
        let schema = serde_json::to_value(schemars::schema_for!(Target)).unwrap();
        assert!(schema.get("$defs").is_none(), "{schema}");
    }

    #[test]
    fn a_png_header_gives_its_size() {
        let mut h = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        h.extend_from_slice(&640u32.to_be_bytes());
        h.extend_from_slice(&360u32.to_be_bytes());
        assert_eq!(png_size(&h), Some((640, 360)));
        assert_eq!(png_size(b"GIF89a"), None);
    }

    #[test]
    fn one_place_to_act_is_taken() {
        assert!(matches!(
            where_of(Some("e1".into()), None, None, None),
            Ok(Where::Ref(_))
        ));
        assert!(matches!(
            where_of(None, None, None, Some(Target::Plain("e7".into()))),
            Ok(Where::Ref(r)) if r == "e7"
        ));
        assert!(matches!(
            where_of(None, Some(1), Some(2), None),
            Ok(Where::Point(1, 2))
        ));
        assert!(matches!(
            where_of(
                None,
                None,
                None,
                Some(Target::Typed(Typed::Coordinate { x: 3, y: 4 }))
            ),
            Ok(Where::Point(3, 4))
        ));
        let e = |r: crate::Result<Where>| match r {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        assert!(e(where_of(None, Some(1), None, None)).starts_with("give both x and y"));
        assert!(e(where_of(None, None, None, None)).starts_with("give ref"));
        assert!(e(where_of(Some("e1".into()), Some(1), Some(1), None)).starts_with("give one of"));
    }

    fn ev(seq: u64, method: &str, params: Value) -> CdpEvent {
        CdpEvent {
            seq,
            method: method.into(),
            params,
            session_id: None,
        }
    }

    #[test]
    fn console_events_read_as_entries() {
        let e = ev(
            4,
            "Runtime.consoleAPICalled",
            json!({"type": "warning", "args": [{"type": "string", "value": "low"}, {"type": "number", "value": 3}, {"type": "object", "description": "Object"}]}),
        );
        assert_eq!(
            console_entry(&e),
            Some(ConsoleEntry {
                seq: 4,
                level: "warning".into(),
                text: "low 3 Object".into()
            })
        );
        let x = ev(
            5,
            "Runtime.exceptionThrown",
            json!({"exceptionDetails": {"text": "Uncaught", "exception": {"description": "Error: boom"}}}),
        );
        assert_eq!(console_entry(&x).unwrap().text, "Error: boom");
        let long = ev(
            6,
            "Runtime.consoleAPICalled",
            json!({"type": "log", "args": [{"type": "string", "value": "x".repeat(900)}]}),
        );
        assert_eq!(
            console_entry(&long).unwrap().text.chars().count(),
            MAX_ENTRY_CHARS + 1
        );
    }

    #[test]
    fn network_events_join_by_request() {
        let evs = [
            ev(
                1,
                "Network.requestWillBeSent",
                json!({"requestId": "a", "request": {"method": "GET", "url": "http://h/"}}),
            ),
            ev(
                2,
                "Network.requestWillBeSent",
                json!({"requestId": "b", "request": {"method": "POST", "url": "http://h/x"}}),
            ),
            ev(
                3,
                "Network.responseReceived",
                json!({"requestId": "a", "response": {"status": 200, "mimeType": "text/html"}}),
            ),
            ev(
                4,
                "Network.loadingFailed",
                json!({"requestId": "b", "errorText": "net::ERR_FAILED"}),
            ),
        ];
        let r = network_entries(&evs);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].status, r[0].mime.as_deref()),
            (Some(200), Some("text/html"))
        );
        assert_eq!(
            (r[1].method.as_str(), r[1].failed.as_deref()),
            ("POST", Some("net::ERR_FAILED"))
        );
    }

    #[test]
    fn the_interactive_filter_keeps_the_lines_with_refs() {
        let lines: Vec<String> = ["- heading \"H\"", "- group", "  - button \"B\" [ref=e4]"]
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(
            shown(&lines, Filter::Interactive),
            ["- button \"B\" [ref=e4]"]
        );
        assert_eq!(shown(&lines, Filter::All), lines);
    }

    #[test]
    fn bounds_are_named() {
        assert!(
            navigate_timeout(Some(999))
                .unwrap_err()
                .to_string()
                .starts_with("timeout_ms is 999; give 1000 to 60000")
        );
        assert_eq!(navigate_timeout(None).unwrap(), Duration::from_secs(30));
        assert_eq!(
            entries_max(Some(0)).unwrap_err().to_string(),
            "max is 0; give 1 to 200"
        );
    }
}
