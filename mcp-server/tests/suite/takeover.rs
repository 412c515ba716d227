//! Asking a person to take over, and the viewer as an MCP App, end to end:
//! `request_takeover` (listed as computer_view's `ask`) waiting while a
//! person in a real headless Chromium takes control, types and gives it
//! back; its elicitation to a client that takes one; and the app's
//! resource and `_meta` to a client that declares the MCP Apps extension.

use std::time::{Duration, Instant};

use computer_providers::cdp::chromium::HostChromium;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::desktop::{events, wait_for};
use super::support::*;
use super::view::{Page, said, send, socket_of, texts, viewing};

/// The model asks a person to take over (request_takeover, listed as
/// computer_view's `ask`): its call waits while the page shows the reason;
/// the person takes control, types into the fixture, and the model's own
/// input meanwhile waits rather than being refused; on give-back the call
/// returns saying the person acted. Without a request, a person's control
/// refuses the model's input in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_asks_a_person_to_take_over_and_waits_until_they_give_back() {
    if !need_root() || !computer_testkit::need_xvfb() || !computer_testkit::need_chromium() {
        return;
    }
    let server = Server::new();
    let v = or_skip!(viewing(&server).await);
    let client = &v.client;
    let (page_url, _) = v.url.split_once("#t=").unwrap();

    // Bad input names the field and its limit; nobody there: says so.
    call_refused(
        client,
        "request_takeover",
        json!({"reason": "log in", "timeout_s": 0}),
        "timeout_s 0 is out of range; it is 1 to 1800",
    )
    .await;
    call_refused(
        client,
        "computer_view",
        json!({"ask": " "}),
        "computer_view: ask is empty",
    )
    .await;
    call_refused(
        client,
        "computer_view",
        json!({"timeout_s": 5}),
        "timeout_s goes with ask",
    )
    .await;
    let r = call_ok(
        client,
        "request_takeover",
        json!({"reason": "nobody is there", "timeout_s": 1}),
    )
    .await;
    assert!(
        text(&r).starts_with("nobody took control within 1 s"),
        "{}",
        text(&r)
    );

    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let page = Page::drawing(&browser, &v.url).await;
    assert_eq!(page.eval("window.viewer.asked").await, Value::Null);

    let reason = "Please sign in for me: type your greeting into the window";
    let model = call(
        client,
        "computer_view",
        json!({"ask": reason, "timeout_s": 120}),
    );
    let person = async {
        page.until(
            "the reason shown",
            &format!("window.viewer.asked === {}", json!(reason)),
        )
        .await;
        assert_eq!(
            page.eval("[document.getElementById('reason').textContent, document.getElementById('asked').hidden]")
                .await,
            json!([reason, false])
        );
        page.eval("document.getElementById('take').click()").await;
        page.until("control taken", "window.viewer.control === true")
            .await;
        let n = events(client).await.len();
        let typed = "Hello, agentrun! 123";
        page.type_text(typed).await;
        let ev = wait_for(client, n, "the typed text", |e| {
            texts(e).len() >= typed.len()
        })
        .await;
        assert_eq!(texts(&ev), typed);
        // The model asked: its input waits for the give-back.
        input_waits_for(client, async {
            page.eval("document.getElementById('give').click()").await;
            page.until("control given back", "window.viewer.control === false")
                .await;
        })
        .await;
        page.until("the request's end shown", "window.viewer.asked === null")
            .await;
        assert_eq!(
            page.eval("document.getElementById('asked').hidden").await,
            json!(true)
        );
    };
    let (r, ()) = tokio::join!(model, person);
    let said = text(&r);
    assert!(!is_error(&r), "{said}");
    assert!(
        said.starts_with("the person took control at ") && said.contains(", gave it back after "),
        "{said}"
    );
    assert!(said.contains("the person acted"), "{said}");
    assert!(said.contains(page_url), "the link is in the answer: {said}");
    let outcome = &structured(&r)["takeover"];
    assert_eq!(outcome["outcome"], "given_back", "{outcome}");
    assert!(outcome["taken_at"].is_string(), "{outcome}");
    // Typed into the fixture, which draws nothing of it.
    assert_eq!(outcome["screen_changed"], false, "{outcome}");
    assert!(said.contains("; the screen is as it was: "), "{said}");

    // A person's middle press turns the fixture's colours: said changed.
    let model = call(
        client,
        "request_takeover",
        json!({"reason": "turn the colours", "timeout_s": 120}),
    );
    let person = async {
        page.until(
            "the reason shown",
            "window.viewer.asked === 'turn the colours'",
        )
        .await;
        page.eval("document.getElementById('take').click()").await;
        page.until("control taken", "window.viewer.control === true")
            .await;
        let (x, y) = page.at(149, 49).await;
        for kind in ["mousePressed", "mouseReleased"] {
            let e = json!({"type": kind, "x": x, "y": y, "button": "middle", "clickCount": 1});
            page.send("Input.dispatchMouseEvent", e).await;
        }
        page.until("the press answered", "inFlight === 0").await;
        page.eval("document.getElementById('give').click()").await;
    };
    let (r, ()) = tokio::join!(model, person);
    let outcome = &structured(&r);
    assert_eq!(outcome["screen_changed"], true, "{outcome}");
    assert!(text(&r).contains("; the screen changed: "), "{}", text(&r));

    // No request now: a person's control refuses the model's input.
    page.eval("document.getElementById('take').click()").await;
    page.until("control taken", "window.viewer.control === true")
        .await;
    call_refused(
        client,
        "input",
        json!({"actions": [{"type": "click", "x": 10, "y": 10}]}),
        "a person has control of this screen until they give it back",
    )
    .await;
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;
}

/// The viewer as an MCP App, to an rmcp client that declares the MCP Apps
/// extension (`io.modelcontextprotocol/ui`): `ui://computer-mcp/view` is
/// listed and reads as the viewer's page (`text/html;profile=mcp-app`, with
/// the viewer's address for the host's CSP), the screenshot tool's listing
/// names it in `_meta.ui.resourceUri`, and a screenshot's result carries
/// the app's link in its `_meta`, not in what the model reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_renders_apps_finds_the_viewer_app_and_the_screenshot_names_it() {
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ReadResourceRequestParams};
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let server = Server::new();
    let cmd = desktop_with_viewer(&server);
    let mut info = rmcp::model::ClientConfig::default();
    let mut caps = ClientCapabilities::default();
    caps.extensions = Some(std::collections::BTreeMap::from([(
        "io.modelcontextprotocol/ui".to_string(),
        serde_json::from_value(json!({"mimeTypes": ["text/html;profile=mcp-app"]})).unwrap(),
    )]));
    info.capabilities = caps;
    let client = info
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();

    let tools = client.list_all_tools().await.unwrap();
    let shot = tools.iter().find(|t| t.name == "screenshot").unwrap();
    let meta = serde_json::to_value(&shot.meta).unwrap();
    assert_eq!(
        meta["ui"]["resourceUri"], "ui://computer-mcp/view",
        "{meta}"
    );
    let named: Vec<&str> = tools
        .iter()
        .filter(|t| t.meta.as_ref().is_some_and(|m| m.0.contains_key("ui")))
        .map(|t| t.name.as_ref())
        .collect();
    assert_eq!(
        named,
        ["screenshot", "browser_screenshot"]
            .into_iter()
            .filter(|n| tools.iter().any(|t| t.name == *n))
            .collect::<Vec<_>>(),
        "only the screenshot tools name the app"
    );

    let listed = client.list_all_resources().await.unwrap();
    let app = listed
        .iter()
        .find(|r| r.uri == "ui://computer-mcp/view")
        .expect("the app is listed");
    assert_eq!(app.mime_type.as_deref(), Some("text/html;profile=mcp-app"));
    let read = client
        .read_resource(ReadResourceRequestParams::new("ui://computer-mcp/view"))
        .await
        .unwrap();
    let contents = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    let html = contents["text"].as_str().unwrap();
    assert!(html.contains("Take control") && html.contains("ui/notifications/tool-result"));
    let domains = &contents["_meta"]["ui"]["csp"]["connectDomains"];
    assert!(
        domains[0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
            && domains[1].as_str().unwrap().starts_with("ws://127.0.0.1:"),
        "{domains}"
    );

    let r = client
        .call_tool(CallToolRequestParams::new("screenshot"))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let meta = serde_json::to_value(&r.meta).unwrap();
    let link = meta["computer-mcp/view"]["url"].as_str().unwrap();
    assert!(link.contains("/view/c-") && link.contains("#t="), "{link}");
    let said = serde_json::to_string(&r.content).unwrap();
    assert!(
        !said.contains("#t="),
        "the link stays out of the model's text"
    );
    client.cancel().await.unwrap();
}

/// `computer-mcp serve` of a local desktop with the viewer on a loopback
/// port, for a client of the test's own.
fn desktop_with_viewer(server: &Server) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(SERVER);
    cmd.arg("serve")
        .args(server.args())
        .args(["--kind", "desktop", "--viewer", "127.0.0.1:0"]);
    cmd
}

/// A client that takes elicitations (URL ones too where `url`), answering
/// each as `answer`, and keeping what it was asked.
#[derive(Clone)]
struct Elicited {
    asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    answer: rmcp::model::ElicitationAction,
    url: bool,
}

impl rmcp::ClientHandler for Elicited {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{
            ElicitationCapability, FormElicitationCapability, UrlElicitationCapability,
        };
        let mut info = rmcp::model::ClientConfig::default();
        let mut caps = ElicitationCapability::new().with_form(FormElicitationCapability::default());
        if self.url {
            caps = caps.with_url(UrlElicitationCapability::new());
        }
        info.capabilities.elicitation = Some(caps);
        info
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(rmcp::model::ElicitResult::new(self.answer.clone()))
    }
}

/// Where the client takes elicitations, request_takeover is put to the
/// person as a URL elicitation with the viewer's link and the reason; a
/// person who declines ends the wait at once, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_request_is_an_elicitation_where_the_client_takes_one() {
    use rmcp::model::CallToolRequestParams;
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let server = Server::new();
    let cmd = desktop_with_viewer(&server);
    let handler = Elicited {
        asked: Default::default(),
        answer: rmcp::model::ElicitationAction::Decline,
        url: true,
    };
    let client = handler
        .clone()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    // The default computer is made by a first call.
    let first = CallToolRequestParams::new("screenshot");
    assert_ne!(client.call_tool(first).await.unwrap().is_error, Some(true));
    let reason = "Approve the payment of 12 EUR";
    let started = Instant::now();
    let r = client
        .call_tool(
            CallToolRequestParams::new("request_takeover")
                .with_arguments(args(json!({"reason": reason, "timeout_s": 60})).unwrap()),
        )
        .await
        .unwrap();
    let said = text(&r);
    assert!(
        said.starts_with("the person declined the request; nobody took control"),
        "{said}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "it waited on");
    let asked = handler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["mode"], "url");
    assert!(
        asked[0]["message"].as_str().unwrap().ends_with(reason),
        "{asked:?}"
    );
    let url = asked[0]["url"].as_str().unwrap();
    assert!(url.contains("/view/c-") && url.contains("#t="), "{url}");
    assert_eq!(structured(&r)["outcome"], "declined");
    client.cancel().await.unwrap();
}

/// Where the client takes form elicitations only, request_takeover's
/// elicitation is a form whose message carries the reason and the viewer's
/// link; the person accepting it is not yet the person acting, so the call
/// waits on and ends when its time does, nobody having taken control.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_taking_forms_only_gets_the_link_in_a_forms_message_and_accepting_it_waits_on() {
    use rmcp::model::CallToolRequestParams;
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let server = Server::new();
    let handler = Elicited {
        asked: Default::default(),
        answer: rmcp::model::ElicitationAction::Accept,
        url: false,
    };
    let client = handler
        .clone()
        .serve(TokioChildProcess::new(desktop_with_viewer(&server)).unwrap())
        .await
        .unwrap();
    let first = CallToolRequestParams::new("screenshot");
    assert_ne!(client.call_tool(first).await.unwrap().is_error, Some(true));
    let reason = "Solve the captcha on the sign-in page";
    let r = client
        .call_tool(
            CallToolRequestParams::new("request_takeover")
                .with_arguments(args(json!({"reason": reason, "timeout_s": 2})).unwrap()),
        )
        .await
        .unwrap();
    let said = text(&r);
    assert!(said.starts_with("nobody took control within 2 s"), "{said}");
    assert_eq!(structured(&r)["outcome"], "not_taken");
    let asked = handler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_ne!(asked[0]["mode"], "url", "{asked:?}");
    assert!(asked[0].get("url").is_none(), "{asked:?}");
    let message = asked[0]["message"].as_str().unwrap();
    let url = structured(&r)["url"].as_str().unwrap().to_string();
    assert!(url.contains("/view/c-") && url.contains("#t="), "{url}");
    assert_eq!(
        message,
        format!(
            "The model asks you to take control of {}'s screen: {reason}\nOpen {url} and press \"Take control\"; give it back when done.",
            structured(&r)["computer"].as_str().unwrap()
        )
    );
    client.cancel().await.unwrap();
}

/// A person's take while the model's input batch runs waits for it. A
/// person holding control when the model asks, who keeps it past the
/// request's time: the call returns saying the person still has control,
/// and the model's input then waits for their give-back (it asked), not
/// refused. Meanwhile the person's inputs out of range (a point off the
/// screen, a wheel of 1000 notches, a text past 65,536 characters) are
/// each refused in the viewer's words, and nothing reaches the fixture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_keeping_control_past_the_requests_time_is_said_and_the_models_input_waits() {
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let server = Server::new();
    let v = or_skip!(viewing(&server).await);
    let client = &v.client;
    let mut ws = socket_of(&v.url).await;
    let hello = said(&mut ws, "hello").await;
    assert_eq!(hello["kind"], "desktop", "{hello}");
    // The first frame (the screen's size with it) before any input.
    use futures::StreamExt;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a first frame within 20 s");
        match m {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Binary(_))) => break,
            Some(Ok(_)) => {}
            other => panic!("the socket ended before a frame: {other:?}"),
        }
    }
    // A take while the model's input batch runs waits for it to end: the
    // page is told so, and the batch finishes whole, not refused.
    let batch = call(
        client,
        "input",
        json!({"actions": [{"type": "wait"}, {"type": "wait"}, {"type": "move", "x": 3, "y": 3}]}),
    );
    tokio::pin!(batch);
    if let Ok(r) = tokio::time::timeout(Duration::from_millis(500), &mut batch).await {
        panic!("the batch ended at once: {}", text(&r));
    }
    send(&mut ws, json!({"type": "control", "on": true})).await;
    let waiting = said(&mut ws, "waiting").await;
    assert_eq!(
        waiting["message"],
        "the model's input is running: you get control when it ends (waiting up to 15 s)"
    );
    let on = said(&mut ws, "control").await;
    assert_eq!(on["on"], true, "{on}");
    let r = tokio::time::timeout(Duration::from_secs(5), batch)
        .await
        .expect("the batch answered");
    assert!(!is_error(&r), "{}", text(&r));

    let n = events(client).await.len();
    for (id, event, words) in [
        (
            1,
            json!({"type": "move", "x": 5000, "y": 10}),
            "the point (5000, 10) is off the screen, which is 1280x800 (0 to 1279, 0 to 799)",
        ),
        (
            2,
            json!({"type": "wheel", "x": 10, "y": 10, "dy": 120_000}),
            "a wheel turn of 1000 clicks is past the most, 20 an event",
        ),
        (
            3,
            json!({"type": "text", "text": "a".repeat(65_537)}),
            "the text is 65537 characters; at most 65536 are typed at a time",
        ),
    ] {
        send(&mut ws, json!({"type": "input", "id": id, "event": event})).await;
        let r = said(&mut ws, "input").await;
        assert_eq!(
            r,
            json!({"type": "input", "id": id, "ok": false, "message": words})
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = events(client).await;
    assert_eq!(after.len(), n, "sent anyway: {:?}", &after[n..]);

    let r = call_ok(
        client,
        "request_takeover",
        json!({"reason": "Finish the form", "timeout_s": 2}),
    )
    .await;
    let words = text(&r);
    assert!(
        words.starts_with("the person took control at ")
            && words.contains(" and still has it after ")
            && words.contains("waits up to 300 s for them to give it back, then is refused"),
        "{words}"
    );
    let outcome = structured(&r);
    assert_eq!(outcome["outcome"], "still_held", "{outcome}");
    assert!(outcome["taken_at"].is_string(), "{outcome}");

    // The model asked: its input waits for the person, then goes.
    input_waits_for(
        client,
        send(&mut ws, json!({"type": "control", "on": false})),
    )
    .await;
}

/// The model's input during a takeover it asked for: still waiting after
/// 800 ms, and sent once `give_back` (the person's) has run.
async fn input_waits_for(client: &Client, give_back: impl Future<Output = ()>) {
    let input = call(
        client,
        "input",
        json!({"actions": [{"type": "move", "x": 7, "y": 7}]}),
    );
    tokio::pin!(input);
    assert!(
        tokio::time::timeout(Duration::from_millis(800), &mut input)
            .await
            .is_err(),
        "the model's input did not wait for the person"
    );
    give_back.await;
    let r = input.await;
    assert!(!is_error(&r), "{}", text(&r));
}
