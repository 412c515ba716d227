//! The golden of what Playwright MCP's tools get here: each tool of the
//! vendored `tools/list` (`fixtures/playwright-mcp/<version>/tools.json`)
//! called through the browser family with its required arguments, then
//! with each of its arguments in turn, on a computer whose connection has
//! ended; an argument is taken when the call gets past reading its
//! arguments (to the computer), and otherwise the refusal's words are
//! held. A new tool, argument or refusal is a change to
//! `fixtures/playwright-mcp/<version>/acceptance.json`
//! (`COMPUTER_MCP_ACCEPT_SCHEMAS=1` accepts it).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::ToolContext;
use crate::browser::FAMILY;
use crate::registry::Dead;

/// The Playwright MCP version vendored.
const VERSION: &str = "0.0.86";

/// The core tools: every one is answered here.
const CORE: &[&str] = &[
    "browser_take_screenshot",
    "browser_navigate_back",
    "browser_press_key",
    "browser_select_option",
    "browser_file_upload",
    "browser_console_messages",
    "browser_network_requests",
    "browser_evaluate",
    "browser_wait_for",
    "browser_handle_dialog",
    "browser_fill_form",
    "browser_resize",
    "browser_close",
    "browser_tabs",
    "browser_type",
    "browser_click",
    "browser_hover",
    "browser_drag",
    "browser_snapshot",
    "browser_navigate",
];

/// A value of `schema` for the argument `name`, as a model would send it.
fn sample(name: &str, schema: &Value) -> Value {
    if let Some(e) = schema["enum"].as_array().and_then(|e| e.first()) {
        return e.clone();
    }
    if let Some(alts) = schema["anyOf"].as_array() {
        return sample(name, &alts[0]);
    }
    match schema["type"].as_str().unwrap_or("string") {
        "boolean" => json!(true),
        "number" | "integer" => match name {
            "time" | "index" | "depth" | "maxResults" => json!(1),
            _ => json!(500),
        },
        "array" => json!([sample(name, &schema["items"])]),
        "object" if schema.get("properties").is_some() => {
            let mut o = Map::new();
            for (k, v) in schema["properties"].as_object().unwrap() {
                o.insert(k.clone(), sample(k, v));
            }
            Value::Object(o)
        }
        "object" => json!({"text/plain": "hi"}),
        _ => json!(match name {
            "url" => "http://127.0.0.1:8000/",
            "paths" => "/tmp/a.txt",
            "function" => "() => document.title",
            "code" => "async (page) => page.title()",
            "key" => "Enter",
            "target" | "startTarget" | "endTarget" => "e1",
            "filename" => "out.txt",
            "regex" => "/a/i",
            "name" => "Name",
            _ => "hi",
        }),
    }
}

/// What a call's answer says of its arguments: taken (read, and the tool
/// went on: to the computer, which is gone, or to a ref no snapshot gave)
/// or the words refusing them (which name the tool first, as a refusal of
/// arguments does).
async fn outcome(ctx: &ToolContext, tool: &str, args: Map<String, Value>) -> String {
    let r = match FAMILY.call(tool, Some(args), ctx).await {
        Ok(r) => r,
        Err(e) => return format!("no such tool: {}", e.message),
    };
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join(" ");
    if r.is_error != Some(true) || !text.starts_with(&format!("{tool}: ")) {
        "taken".into()
    } else {
        format!("refused: {text}")
    }
}

#[tokio::test]
async fn playwright_mcps_tools_are_taken_as_the_golden_says() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../fixtures/playwright-mcp/{VERSION}"));
    let text = std::fs::read_to_string(dir.join("tools.json")).unwrap();
    let vendored: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(vendored["version"], VERSION);
    let ctx = ToolContext::new(Arc::new(Dead));
    let mut golden = Map::new();
    for t in vendored["tools"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let schema = &t["inputSchema"];
        let props = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let resolved = match (FAMILY.tool(name), FAMILY.alias(name)) {
            (Some(_), _) => "listed".to_string(),
            (None, Some(a)) => format!("answered, with {}", a.of),
            (None, None) => {
                assert!(
                    !CORE.contains(&name),
                    "{name} is a core tool and is not answered"
                );
                golden.insert(name.into(), json!({"resolved": "not offered"}));
                continue;
            }
        };
        let base: Map<String, Value> = required
            .iter()
            .map(|r| (r.to_string(), sample(r, &props[*r])))
            .collect();
        let mut args = Map::new();
        args.insert(
            "(required only)".into(),
            json!(outcome(&ctx, name, base.clone()).await),
        );
        for (p, s) in &props {
            let mut a = base.clone();
            a.insert(p.clone(), sample(p, s));
            args.insert(p.clone(), json!(outcome(&ctx, name, a).await));
        }
        golden.insert(
            name.into(),
            json!({"resolved": resolved, "arguments": args}),
        );
    }
    for c in CORE {
        assert!(
            golden.contains_key(*c),
            "{c} is no longer in Playwright MCP's tools/list"
        );
    }
    let mut text = serde_json::to_string_pretty(&golden).unwrap();
    text.push('\n');
    computer_testkit::assert_golden(&format!("../playwright-mcp/{VERSION}/acceptance"), &text);
}
