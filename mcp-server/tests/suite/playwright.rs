//! Playwright MCP's calls, as a model trained on `@playwright/mcp` sends
//! them, driving `computer-mcp serve --kind browser`: every core tool of
//! Playwright MCP 0.0.86 (names and argument shapes as its `tools/list`,
//! vendored in fixtures/playwright-mcp/0.0.86/tools.json, and its tests
//! tests/{click,form,dialogs,tabs,evaluate,console,network,files}.spec.ts
//! in microsoft/playwright-mcp call them), on a local page the computer
//! serves. Each works, and its answer shows the page's state.

use serde_json::{Value, json};

use super::browser::ref_of;
use super::support::*;

/// The page: a button that logs and shows text later, a form, a prompt,
/// a drag source and target, a file input, a link to a second page.
const PAGE: &str = r#"<!doctype html><html><head><title>Playwright page</title></head><body>
<h1>Shop</h1>
<button id=add onclick="console.log('added one'); setTimeout(() => { const p = document.createElement('p'); p.textContent = 'Loaded later'; document.body.append(p); document.getElementById('busy').remove(); }, 300)">Add</button>
<p id=busy>Working</p>
<form><label>Name <input id=name name=name></label>
<label><input type=checkbox id=agree> Agree</label>
<label>Plan <select id=plan><option>free</option><option>pro</option></select></label>
<label>Avatar <input type=file id=avatar></label></form>
<button id=ask onclick="document.getElementById('said').textContent = 'Hello ' + prompt('Your name?')">Ask</button>
<p id=said></p>
<div id=src draggable=true ondragstart="event.dataTransfer.setData('text/plain', 'x')" style="width:80px;height:40px;background:#ccc" role=button aria-label=Source>Drag me</div>
<div id=dst ondragover="event.preventDefault()" ondrop="event.preventDefault(); this.textContent = 'Dropped'" style="width:120px;height:60px;background:#eee" role=button aria-label=Target>Drop here</div>
<button onmouseover="document.getElementById('tip').textContent = 'Tip shown'">Hover me</button><p id=tip></p>
<a href="/second.html">Second page</a>
<div style="height:2000px"></div>
</body></html>"#;

const SECOND: &str = "<!doctype html><title>Second</title><p>second page";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_playwright_mcp_core_call_works_and_answers_with_the_pages_state() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    call_ok(
        &client,
        "write_file",
        json!({"path": "/work/site/second.html", "content": SECOND}),
    )
    .await;
    call_ok(
        &client,
        "write_file",
        json!({"path": "/tmp/avatar.txt", "content": "me"}),
    )
    .await;
    open_served(&client, "index.html", PAGE, 8127).await;
    let url = "http://127.0.0.1:8127/index.html";
    let seen: std::cell::RefCell<Vec<&str>> = Default::default();
    // A Playwright call that must work; its text, which must show the page.
    let pw = async |name: &'static str, args: Value, state: &str| -> String {
        let r = call(&client, name, args.clone()).await;
        let t = text(&r);
        assert!(!is_error(&r), "{name} {args}: {t}");
        assert!(t.contains(state), "{name} {args}: no {state:?} in:\n{t}");
        seen.borrow_mut().push(name);
        t
    };

    let page = format!("- Page URL: {url}\n- Page Title: Playwright page");
    pw("browser_navigate", json!({"url": url}), "Playwright page").await;
    let snap = pw("browser_snapshot", json!({}), url).await;
    let add = ref_of(&snap, &["button", "Add"]);
    let t = pw(
        "browser_click",
        json!({"element": "Add button", "target": add}),
        &page,
    )
    .await;
    assert!(
        t.contains("### New console messages\n- [log] added one"),
        "{t}"
    );
    pw(
        "browser_wait_for",
        json!({"text": "Loaded later"}),
        "shows in the page",
    )
    .await;
    pw(
        "browser_wait_for",
        json!({"textGone": "Working"}),
        "is gone",
    )
    .await;
    pw("browser_wait_for", json!({"time": 0.2}), "waited").await;

    let name = ref_of(&snap, &["textbox", "Name"]);
    pw(
        "browser_type",
        json!({"element": "Name textbox", "target": name, "text": "Ada", "slowly": true}),
        &page,
    )
    .await;
    let agree = ref_of(&snap, &["checkbox", "Agree"]);
    let plan = ref_of(&snap, &["combobox", "Plan"]);
    pw(
        "browser_fill_form",
        json!({"fields": [
            {"name": "Name", "type": "textbox", "target": name, "value": "Ada Lovelace"},
            {"name": "Agree", "type": "checkbox", "target": agree, "value": "true"},
            {"name": "Plan", "type": "combobox", "target": plan, "value": "pro"}
        ]}),
        "filled 3 fields",
    )
    .await;
    pw(
        "browser_select_option",
        json!({"element": "Plan", "target": plan, "values": ["free"]}),
        &page,
    )
    .await;
    let t = pw(
        "browser_evaluate",
        json!({"function": "() => [document.getElementById('name').value, document.getElementById('agree').checked, document.getElementById('plan').value].join(',')"}),
        &page,
    )
    .await;
    assert!(t.contains("Ada Lovelace,true,free"), "{t}");
    let t = pw(
        "browser_evaluate",
        json!({"element": "Name", "target": name, "function": "(element) => element.value.length"}),
        &page,
    )
    .await;
    assert!(t.contains("12"), "{t}");
    pw("browser_press_key", json!({"key": "Tab"}), &page).await;

    let hover = ref_of(&snap, &["button", "Hover me"]);
    pw(
        "browser_hover",
        json!({"element": "Hover me", "target": hover}),
        &page,
    )
    .await;
    let src = ref_of(&snap, &["Source"]);
    let dst = ref_of(&snap, &["Target"]);
    pw(
        "browser_drag",
        json!({"startElement": "Source", "startTarget": src, "endElement": "Target", "endTarget": dst}),
        &page,
    )
    .await;
    let t = pw("browser_evaluate", json!({"function": "() => document.getElementById('tip').textContent + '|' + document.getElementById('dst').textContent"}), &page).await;
    assert!(t.contains("Tip shown|Dropped"), "{t}");

    pw(
        "browser_file_upload",
        json!({"paths": ["/tmp/avatar.txt"]}),
        &page,
    )
    .await;
    let t = pw(
        "browser_evaluate",
        json!({"function": "() => document.getElementById('avatar').files[0].name"}),
        &page,
    )
    .await;
    assert!(t.contains("avatar.txt"), "{t}");

    // The model answers the prompt: asked before the click opens it.
    pw(
        "browser_handle_dialog",
        json!({"accept": true, "promptText": "Bob"}),
        "next one",
    )
    .await;
    let ask = ref_of(&snap, &["button", "Ask"]);
    pw(
        "browser_click",
        json!({"element": "Ask", "target": ask}),
        &page,
    )
    .await;
    let t = pw(
        "browser_evaluate",
        json!({"function": "() => document.getElementById('said').textContent"}),
        &page,
    )
    .await;
    assert!(t.contains("Hello Bob"), "{t}");

    let t = pw("browser_console_messages", json!({"level": "info"}), &page).await;
    assert!(t.contains("added one"), "{t}");
    let t = pw("browser_network_requests", json!({"static": false}), &page).await;
    assert!(t.contains(url), "{t}");

    let r = call(
        &client,
        "browser_take_screenshot",
        json!({"type": "png", "fullPage": true}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(r.content.iter().any(|c| c.as_image().is_some()), "no image");
    assert!(
        text(&r).contains("the whole page") && text(&r).contains(&page),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "browser_take_screenshot",
        json!({"element": "Add", "target": add}),
    )
    .await;
    assert!(
        text(&r).contains("image of e") && text(&r).contains(&page),
        "{}",
        text(&r)
    );
    seen.borrow_mut().push("browser_take_screenshot");

    // A headless browser's page gets its whole 1280x800 window (headless
    // Chromium left it 1280x657), and the screen it sees is that size.
    let t = pw(
        "browser_evaluate",
        json!({"function": "() => innerWidth + 'x' + innerHeight + ' on ' + screen.width + 'x' + screen.height"}),
        &page,
    )
    .await;
    assert!(t.contains("1280x800 on 1280x800"), "{t}");

    pw(
        "browser_resize",
        json!({"width": 800, "height": 600}),
        "800x600",
    )
    .await;
    let t = pw(
        "browser_evaluate",
        json!({"function": "() => innerWidth + 'x' + innerHeight"}),
        &page,
    )
    .await;
    assert!(t.contains("800x600"), "{t}");

    let second = "http://127.0.0.1:8127/second.html";
    pw("browser_navigate", json!({"url": second}), "Second").await;
    pw("browser_navigate_back", json!({}), &page).await;

    let t = pw(
        "browser_tabs",
        json!({"action": "new", "url": second}),
        second,
    )
    .await;
    assert!(t.contains("(current)"), "{t}");
    pw("browser_tabs", json!({"action": "list"}), url).await;
    let t = pw("browser_tabs", json!({"action": "select", "index": 0}), url).await;
    assert!(t.contains("[0] (current)"), "{t}");
    let t = pw("browser_tabs", json!({"action": "close", "index": 1}), url).await;
    assert!(!t.contains(second), "{t}");

    pw("browser_close", json!({}), "closed").await;
    pw("browser_snapshot", json!({}), "about:blank").await;

    // Every core tool was called.
    let vendored: Value = serde_json::from_str(include_str!(
        "../../../fixtures/playwright-mcp/0.0.86/tools.json"
    ))
    .unwrap();
    for t in vendored["tools"].as_array().unwrap() {
        let n = t["name"].as_str().unwrap();
        let core = ![
            "browser_drop",
            "browser_find",
            "browser_emulate_media",
            "browser_network_request",
            "browser_run_code_unsafe",
        ]
        .contains(&n);
        assert!(!core || seen.borrow().contains(&n), "{n} was not called");
    }
    client.cancel().await.unwrap();
}

/// What Playwright MCP takes that this server cannot honour is refused
/// with what it does instead; the page saved as PDF is a file in the
/// computer, linked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_honoured_is_refused_in_words_and_a_pdf_is_saved() {
    let (_server, client, _) = or_skip!(
        Server::local_stdio_needing(&[computer_testkit::need_chromium], &["--kind", "browser"])
            .await
    );
    open_served(&client, "index.html", SECOND, 8128).await;
    call_refused(
        &client,
        "browser_snapshot",
        json!({"depth": 2}),
        "depth is not taken here: a long snapshot is cut into pages",
    )
    .await;
    call_refused(
        &client,
        "browser_take_screenshot",
        json!({"type": "jpeg"}),
        "png only",
    )
    .await;
    call_refused(
        &client,
        "browser_wait_for",
        json!({"time": 31}),
        "give 0 to 30",
    )
    .await;
    let t = call_refused(
        &client,
        "browser_wait_for",
        json!({"text": "never there", "time": 0.5}),
        "did not show",
    )
    .await;
    assert!(t.contains("second page"), "{t}");
    let r = call_ok(&client, "browser_pdf", json!({"path": "/tmp/page.pdf"})).await;
    assert!(
        r.content.iter().any(|c| c.as_resource_link().is_some()),
        "{r:?}"
    );
    assert_eq!(stdout_of(&client, "head -c 4 /tmp/page.pdf").await, "%PDF");
    client.cancel().await.unwrap();
}
