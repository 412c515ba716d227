//! The page tools, one module per tool (its args, result, listing and
//! handler), and what several of them share: the answer of an action and
//! the text budget of a page of output.

pub mod click;
pub mod console;
pub mod drag;
pub mod eval;
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

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;

use crate::ToolSettings;
use crate::define::with_structured;

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
