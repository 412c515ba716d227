//! The live viewer on a local computer of kind browser: its headless
//! Chromium lives on the model's daemon connection, so the view is cast
//! on the model's own client; the page outlives the view, and the frames
//! the viewer gets keep the tab's size.

use std::time::Duration;

use computer_providers::cdp::BrowserClient;
use computer_providers::cdp::chromium::HostChromium;
use serde_json::json;

use super::desktop::image_of;
use super::support::*;
use super::view::{Page, serving_the_viewer};
use super::view_vendor::{eval, viewed};

/// A stdio server of kind browser serving its viewer, and a host
/// Chromium to open the viewer's links in (each kept while the test runs).
struct Rig {
    client: Client,
    browser: BrowserClient,
    _chromium: HostChromium,
    _log: tempfile::NamedTempFile,
    _server: Server,
}

/// The rig, or None where root or Chromium is missing (skipped in words).
async fn rig() -> Option<Rig> {
    if !need_root() || !computer_testkit::need_chromium() {
        return None;
    }
    let server = Server::new();
    let mut args = server.args_logging("debug");
    args.extend(["--kind".into(), "browser".into()]);
    let (client, log) = serving_the_viewer(&args).await;
    let chromium = HostChromium::start().await.unwrap();
    let browser = chromium.client().await.unwrap();
    Some(Rig {
        client,
        browser,
        _chromium: chromium,
        _log: log,
        _server: server,
    })
}

/// A local browser (headless, run by its computer's daemon, living on
/// the model's connection) is viewed on the model's own client: the
/// canvas shows its tab as `browser_screenshot` does, a person's click
/// reaches the page, and once the view closes the model's page is the
/// same page and its tools still work; a second view casts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_headless_browser_is_viewed_on_the_models_own_page_and_outlives_the_view() {
    // Every field bound, so the server's state, its log and Chromium live
    // to the test's end.
    let Some(Rig {
        client,
        browser,
        _chromium,
        _log,
        _server,
    }) = rig().await
    else {
        return;
    };
    let tools = client.list_all_tools().await.unwrap();
    let shot = tools.iter().find(|t| t.name == "browser_screenshot");
    let meta = serde_json::to_value(shot.map(|t| &t.meta)).unwrap();
    assert_eq!(meta["ui"]["resourceUri"], "ui://computer-mcp/view");

    let (url, page, ..) = viewed(&client, &browser).await;
    eval(&client, "document.title = 'kept'").await;
    page.eval("document.getElementById('take').click()").await;
    page.until("control taken", "window.viewer.control === true")
        .await;
    let at = page.at(150, 125).await;
    page.mouse("mousePressed", at).await;
    page.mouse("mouseReleased", at).await;
    page.until("the click answered", "inFlight === 0").await;
    page.eval("document.getElementById('give').click()").await;
    page.until("control given back", "window.viewer.control === false")
        .await;
    let seen = eval(&client, "JSON.stringify(window.log)").await;
    assert!(seen.as_str().unwrap().contains("click 150,125"), "{seen}");

    // The view leaves: the model's page is the one it had, and answers.
    page.send("Page.navigate", json!({"url": "about:blank"}))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(eval(&client, "document.title").await, "kept");
    let seen = eval(&client, "JSON.stringify(window.log)").await;
    assert!(seen.as_str().unwrap().contains("click 150,125"), "{seen}");
    call_ok(&client, "browser_click", json!({"x": 150, "y": 125})).await;
    let seen = eval(
        &client,
        "window.log.filter(e => e.startsWith('click')).length",
    )
    .await;
    assert_eq!(seen, 2, "the model's own click after the view closed");
    let shot = call_ok(&client, "browser_screenshot", json!({})).await;
    assert!(image_of(&shot).0 > 0);

    // A second view is cast again.
    let again = Page::drawing(&browser, &url).await;
    assert!(again.eval("window.viewer.frames").await.as_u64() >= Some(1));
    client.cancel().await.unwrap();
}

/// A `browser_screenshot` of the whole page or a part of it (a clip with
/// its own scale, beyond the viewport) while a view is open: every frame
/// the viewer gets is still the tab's own size (the person's clicks map
/// by it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clipped_or_whole_page_screenshot_pushes_no_odd_sized_frame_to_the_view() {
    // Every field bound, so the server's state, its log and Chromium live
    // to the test's end.
    let Some(Rig {
        client,
        browser,
        _chromium,
        _log,
        _server,
    }) = rig().await
    else {
        return;
    };
    let (_, page, w, h) = viewed(&client, &browser).await;
    eval(&client, "document.body.style.height = '3000px'; 1").await;
    // Every size the page is given, as it is given.
    page.eval("(() => { window.sizes = []; for (const k of ['width', 'height']) { let x = viewer[k]; Object.defineProperty(viewer, k, { get: () => x, set: y => { x = y; sizes.push(k + ' ' + y); }, configurable: true }); } return 1; })()")
        .await;
    let frames = page.eval("window.viewer.frames").await.as_u64().unwrap();
    for shot in [json!({"full_page": true}), json!({"max_width": 300})] {
        call_ok(&client, "browser_screenshot", shot).await;
    }
    eval(
        &client,
        "document.querySelector('div').style.background = 'rgb(1,2,3)'; 1",
    )
    .await;
    page.until(
        "a frame after the screenshot",
        &format!("window.viewer.frames > {frames}"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sizes = page.eval("JSON.stringify(window.sizes)").await;
    let sizes: Vec<String> = serde_json::from_str(sizes.as_str().unwrap()).unwrap();
    assert!(!sizes.is_empty(), "no frame was drawn after the screenshot");
    let odd: Vec<&String> = sizes
        .iter()
        .filter(|s| **s != format!("width {w}") && **s != format!("height {h}"))
        .collect();
    assert!(
        odd.is_empty(),
        "frames of another size: {odd:?} (of {sizes:?})"
    );
    client.cancel().await.unwrap();
}
