//! The live viewer on a vendor's browser (Browserbase, Kernel), end to end
//! against their fakes (a real headless Chromium behind the CDP URL each
//! hands out): a stdio server with `--viewer` over `--kind browser`, the
//! viewer's page in another headless Chromium drawing the vendor page's
//! front tab cast over CDP, control taken, a click on the page's button
//! and text typed into its field (read back with the page tools), and a
//! button held at give-back let go.

use computer_fakes::vendor::{FakeVendor, Kind};
use computer_providers::cdp::BrowserClient;
use computer_providers::cdp::chromium::HostChromium;
use serde_json::{Value, json};

use super::desktop::image_of;
use super::support::*;
use super::view::{Page, said_within, serving_the_viewer, socket_of};

/// The vendor's page: four quarters of colour, a button and a field, and
/// a log of what the page saw (`window.log`).
const BUILD: &str = r#"(() => {
  document.body.style.margin = '0';
  const colours = ['rgb(0,200,0)', 'rgb(200,0,0)', 'rgb(0,0,200)', 'rgb(220,220,0)'];
  colours.forEach((c, i) => {
    const d = document.createElement('div');
    d.style.cssText = `position:fixed;left:${i % 2 * 50}vw;top:${Math.floor(i / 2) * 50}vh;width:50vw;height:50vh;background:${c}`;
    document.body.appendChild(d);
  });
  const b = document.createElement('button');
  b.id = 'b'; b.textContent = 'Go';
  b.style.cssText = 'position:fixed;left:100px;top:100px;width:100px;height:50px';
  const f = document.createElement('input');
  f.id = 'f';
  f.style.cssText = 'position:fixed;left:100px;top:200px;width:200px;height:30px';
  document.body.append(b, f);
  window.log = [];
  b.onclick = e => log.push('click ' + e.clientX + ',' + e.clientY);
  addEventListener('mousedown', e => log.push('down ' + e.clientX + ',' + e.clientY));
  addEventListener('mouseup', e => log.push('up ' + e.clientX + ',' + e.clientY));
  return [innerWidth, innerHeight];
})()"#;

pub(super) async fn eval(client: &Client, expression: &str) -> Value {
    let r = call_ok(client, "browser_eval", json!({ "expression": expression })).await;
    structured(&r)["value"].clone()
}

/// A stdio server of the vendor `id` (against `fake`) serving the viewer
/// on a loopback port, with `more` arguments, its stderr and state.
async fn serve(
    fake: &FakeVendor,
    id: &str,
    more: &[&str],
) -> (Client, tempfile::NamedTempFile, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["--kind", "browser", "--network", "open", "--provider", id]
        .iter()
        .map(|a| a.to_string())
        .collect();
    args.extend([
        format!("--{id}-api-url"),
        fake.api_url().to_string(),
        format!("--{id}-api-key"),
        fake.key().to_string(),
        "--state-dir".into(),
        state.path().display().to_string(),
        "--log".into(),
        "debug".into(),
    ]);
    args.extend(more.iter().map(|a| a.to_string()));
    let (client, log) = serving_the_viewer(&args).await;
    (client, log, state)
}

/// The page built in the model's tab, viewed in `browser` through
/// `computer_view`'s link, and the canvas checked against a
/// `browser_screenshot` of the same tab: the link, the viewer's page and
/// the tab's size.
pub(super) async fn viewed<'a>(
    client: &Client,
    browser: &'a BrowserClient,
) -> (String, Page<'a>, u32, u32) {
    call_ok(client, "browser_navigate", json!({"url": "about:blank"})).await;
    let size = eval(client, BUILD).await;
    let (w, h) = (size[0].as_u64().unwrap(), size[1].as_u64().unwrap());

    let r = call_ok(client, "computer_view", json!({})).await;
    let url = structured(&r)["url"].as_str().unwrap().to_string();
    let page = Page::drawing(browser, &url).await;
    let facts = page
        .eval("document.getElementById('facts').textContent")
        .await;
    assert!(
        facts.as_str().unwrap().starts_with("browser · ends "),
        "{facts}"
    );
    assert_eq!(
        page.eval("[window.viewer.width, window.viewer.height]")
            .await,
        json!([w, h]),
        "the canvas is the tab's CSS pixels"
    );

    // The canvas shows what a screenshot of the same tab shows: each
    // quarter's colour (a JPEG at quality 60 against a PNG).
    let shot = call_ok(client, "browser_screenshot", json!({})).await;
    let (sw, _, rgb) = image_of(&shot);
    assert_eq!(u64::from(sw), w);
    let (w, h) = (w as u32, h as u32);
    let points: Vec<[u32; 2]> = [[1, 1], [3, 1], [1, 3], [3, 3]]
        .iter()
        .map(|[i, j]| [w * i / 4, h * j / 4])
        .collect();
    let drawn = page.pixels(&points).await;
    for (p, d) in points.iter().zip(&drawn) {
        let at = ((p[1] * w + p[0]) * 3) as usize;
        let shot = &rgb[at..at + 3];
        for c in 0..3 {
            assert!(
                shot[c].abs_diff(d[c]) < 40,
                "at {p:?} the canvas has {d:?}, the screenshot {shot:?}"
            );
        }
    }
    assert!(
        drawn[0][1] > 150 && drawn[0][0] < 60,
        "green: {:?}",
        drawn[0]
    );

    (url, page, w, h)
}

async fn views_and_takes_control(kind: Kind, id: &str) {
    if !computer_testkit::need_chromium() {
        return;
    }
    let fake = FakeVendor::start(kind).await.unwrap();
    let (client, log, _state) = serve(&fake, id, &[]).await;

    // The page's screenshot names the viewer's app, which is listed.
    let tools = client.list_all_tools().await.unwrap();
    let shot = tools
        .iter()
        .find(|t| t.name == "browser_screenshot")
        .unwrap();
    let meta = serde_json::to_value(&shot.meta).unwrap();
    assert_eq!(
        meta["ui"]["resourceUri"], "ui://computer-mcp/view",
        "{meta}"
    );
    let listed = client.list_all_resources().await.unwrap();
    assert!(
        listed.iter().any(|r| r.uri == "ui://computer-mcp/view"),
        "{listed:?}"
    );

    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let (url, page, _, h) = viewed(&client, &browser).await;

    // Take control; a click on the button lands on it.
    page.eval("document.getElementById('take').click()").await;
    page.until("control taken", "window.viewer.control === true")
        .await;
    let at = page.at(150, 125).await;
    page.mouse("mouseMoved", at).await;
    page.mouse("mousePressed", at).await;
    page.mouse("mouseReleased", at).await;
    // Into the field, then typed.
    let at = page.at(200, 215).await;
    page.mouse("mousePressed", at).await;
    page.mouse("mouseReleased", at).await;
    let typed = "Hello, agentrun! 123";
    page.type_text(typed).await;
    page.until("every input answered", "inFlight === 0").await;

    // The model's page tools are refused while the person has control.
    call_refused(
        &client,
        "browser_click",
        json!({"x": 10, "y": 10}),
        "a person has control of this screen until they give it back",
    )
    .await;

    // A button held at give-back is let go.
    page.mouse("mousePressed", page.at(400, h - 20).await).await;
    page.until("the press answered", "inFlight === 0").await;
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;

    let seen = eval(&client, "JSON.stringify(window.log)").await;
    let seen: Vec<String> = serde_json::from_str(seen.as_str().unwrap()).unwrap();
    assert!(seen.contains(&"click 150,125".to_string()), "{seen:?}");
    assert_eq!(
        eval(&client, "document.getElementById('f').value").await,
        typed
    );
    let held = format!("down 400,{}", h - 20);
    let pressed = seen.iter().position(|e| *e == held);
    assert!(pressed.is_some(), "{seen:?}");
    assert!(
        seen[pressed.unwrap()..]
            .iter()
            .any(|e| e.starts_with("up ")),
        "the held button was not let go: {seen:?}"
    );

    // The model asks for a person: the answer says what they changed.
    eval(
        &client,
        "b.onclick = () => { document.title = 'Pressed'; }; 1",
    )
    .await;
    let model = call(
        &client,
        "request_takeover",
        json!({"reason": "press Go", "timeout_s": 60}),
    );
    let person = async {
        page.until("the reason shown", "window.viewer.asked === 'press Go'")
            .await;
        page.eval("document.getElementById('take').click()").await;
        page.until("control taken", "window.viewer.control === true")
            .await;
        let at = page.at(150, 125).await;
        page.mouse("mousePressed", at).await;
        page.mouse("mouseReleased", at).await;
        page.until("the click answered", "inFlight === 0").await;
        page.eval("document.getElementById('give').click()").await;
    };
    let (r, ()) = tokio::join!(model, person);
    let said = text(&r);
    assert!(!is_error(&r), "{said}");
    let outcome = &structured(&r);
    assert_eq!(outcome["outcome"], "given_back", "{outcome}");
    assert_eq!(outcome["inputs"], 2, "a press and a release: {outcome}");
    assert_eq!(outcome["page_after"]["title"], "Pressed", "{outcome}");
    assert!(
        said.contains(", sending 2 inputs; the page went from ")
            && said.contains(" to \"Pressed\" (about:blank)"),
        "{said}"
    );

    client.cancel().await.unwrap();
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(!logged.contains(fake.canary()), "the CDP URL is in the log");
    let token = url.split_once("#t=").unwrap().1;
    assert!(!logged.contains(token), "the token is in the server's log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_browserbase_browser_and_takes_control() {
    views_and_takes_control(Kind::Browserbase, "browserbase").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_kernel_browser_and_takes_control() {
    views_and_takes_control(Kind::Kernel, "kernel").await;
}

/// A link past its end (`--viewer-link-ttl 10s`): the open view ends in
/// words, and the same link opened again is refused in words, on the
/// socket and on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_link_is_refused_in_words_on_the_socket_and_the_page() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    if !computer_testkit::need_chromium() {
        return;
    }
    let fake = FakeVendor::start(Kind::Kernel).await.unwrap();
    let (client, log, _state) = serve(&fake, "kernel", &["--viewer-link-ttl", "10s"]).await;
    call_ok(&client, "browser_navigate", json!({"url": "about:blank"})).await;
    let r = call_ok(&client, "computer_view", json!({})).await;
    let link = structured(&r);
    let url = link["url"].as_str().unwrap().to_string();
    let expires = link["expires"].as_str().unwrap().to_string();
    assert!(
        text(&r).contains(&format!("until {expires}")),
        "{}",
        text(&r)
    );
    let (_, token) = url.split_once("#t=").unwrap();

    // Opened in time: the view runs, then ends at the link's end, in words.
    let mut ws = socket_of(&url).await;
    let within = std::time::Duration::from_secs(30);
    let hello = said_within(&mut ws, "hello", within, true).await;
    assert_eq!(hello["expires"], json!(expires), "{hello}");
    let ended = said_within(&mut ws, "ended", within, true).await;
    let ended = ended["message"].as_str().unwrap();
    assert_eq!(
        ended,
        format!("this link ended at {expires}: ask for a new one (computer_view)")
    );

    // Opened again: refused in words on the socket.
    let mut ws = socket_of(&url).await;
    let Some(Ok(Message::Text(t))) = ws.next().await else {
        panic!("no refusal");
    };
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["type"], "refused", "{v}");
    assert_eq!(
        v["message"],
        json!(format!(
            "this link ended at {expires}. Ask for a new one (computer_view)"
        ))
    );

    // And on the page a person opens, never a blank one.
    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    let page = Page::open(&browser, &url).await;
    page.until(
        "the refusal",
        "window.viewer && window.viewer.ended !== null",
    )
    .await;
    let status = page
        .eval("document.getElementById('status').textContent")
        .await;
    assert!(
        status.as_str().unwrap().starts_with("this link ended at "),
        "{status}"
    );
    client.cancel().await.unwrap();
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(!logged.contains(token), "the token is in the server's log");
}
