//! Clicks in Chromium, as a model sends them: `computer`'s double_click
//! and triple_click and an `input` batch of clicks on three elements, on
//! a desktop whose visible Chromium shows a page that logs every mouse
//! event it gets with its target. Chromium counts a click as a double
//! only when the presses carry different X timestamps close enough in
//! time and place, and hit-tests where the last motion it saw put the
//! pointer: what the X fixture alone does not check.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::desktop::{centre_of, image_of};
use super::support::*;

/// The page: three boxes for the batch, one for the double click, a
/// paragraph for the triple click; every mouse event is logged as
/// `type:target:detail`.
const PAGE: &str = r#"<!doctype html><title>Clicks</title>
<style>
body { margin: 0; background: #fff; font: 24px sans-serif }
div.box { position: absolute; width: 120px; height: 120px; top: 40px }
#a { left: 40px; background: #ff0000 } #b { left: 240px; background: #00ff00 }
#c { left: 440px; background: #0000ff } #d { left: 640px; background: #ffff00 }
#p { position: absolute; top: 240px; left: 40px; margin: 0; padding: 8px; color: #000; background: #ff00ff }
</style>
<div class="box" id="a"></div><div class="box" id="b"></div>
<div class="box" id="c"></div><div class="box" id="d"></div>
<p id="p">alpha bravo charlie delta echo</p>
<script>
window.log = [];
for (const t of ["mousedown", "mouseup", "click", "dblclick"])
  document.addEventListener(t, e => window.log.push(t + ":" + (e.target.id || e.target.nodeName) + ":" + e.detail), true);
document.title = "Ready";
</script>"#;

/// The paragraph's words: what a triple click selects whole.
const PARAGRAPH: &str = "alpha bravo charlie delta echo";

async fn eval(client: &Client, expression: &str) -> Value {
    let r = call_ok(client, "browser_eval", json!({ "expression": expression })).await;
    structured(&r)["value"].clone()
}

/// The page's log since the last call, emptied.
async fn take_log(client: &Client) -> Vec<String> {
    let v = eval(client, "JSON.stringify(window.log.splice(0))").await;
    serde_json::from_str(v.as_str().unwrap_or("[]")).unwrap()
}

/// The page's log once `done` holds of it (events reach the page after
/// the tool answers), within 10 s; then emptied.
async fn log_when(client: &Client, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let got = eval(client, "JSON.stringify(window.log)").await;
        seen = serde_json::from_str(got.as_str().unwrap_or("[]")).unwrap_or(seen);
        if done(&seen) || Instant::now() >= until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    take_log(client).await;
    assert!(done(&seen), "{what}: the page logged {seen:?}");
    seen
}

fn of_type<'a>(log: &'a [String], t: &str) -> Vec<&'a str> {
    log.iter()
        .map(String::as_str)
        .filter(|e| e.starts_with(&format!("{t}:")))
        .collect()
}

/// The whole check on a desktop server `server` started with `extra`.
async fn clicks_count_and_land_in_order(server: &Server, extra: &[&str]) {
    let mut flags = vec!["--kind", "desktop"];
    flags.extend_from_slice(extra);
    let (client, _) = server.stdio(&flags).await;
    let nav = open_served(&client, "clicks.html", PAGE, 8131).await;
    assert!(text(&nav).contains("Ready"), "{}", text(&nav));

    // Where the boxes are, as a model finds them: in a screenshot.
    let until = Instant::now() + Duration::from_secs(15);
    let (w, rgb) = loop {
        let shot = call_ok(&client, "screenshot", json!({})).await;
        let (w, _, rgb) = image_of(&shot);
        let shows = |c: [u8; 3]| rgb.chunks(3).any(|p| p == c);
        if [
            [255, 0, 0],
            [0, 255, 0],
            [0, 0, 255],
            [255, 255, 0],
            [255, 0, 255],
        ]
        .into_iter()
        .all(shows)
        {
            break (w, rgb);
        }
        assert!(
            Instant::now() < until,
            "the page's boxes are not on the screen within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let a = centre_of(w, &rgb, [255, 0, 0]);
    let b = centre_of(w, &rgb, [0, 255, 0]);
    let c = centre_of(w, &rgb, [0, 0, 255]);
    let d = centre_of(w, &rgb, [255, 255, 0]);
    let p = centre_of(w, &rgb, [255, 0, 255]);
    take_log(&client).await;

    // A double click is one dblclick, after two clicks counting 1 and 2.
    let r = call_ok(
        &client,
        "computer",
        json!({"action": "double_click", "coordinate": d}),
    )
    .await;
    assert!(text(&r).contains("double_click"), "{}", text(&r));
    let log = log_when(&client, "one dblclick on d", |l| {
        !of_type(l, "dblclick").is_empty()
    })
    .await;
    assert_eq!(
        log,
        [
            "mousedown:d:1",
            "mouseup:d:1",
            "click:d:1",
            "mousedown:d:2",
            "mouseup:d:2",
            "click:d:2",
            "dblclick:d:2"
        ],
        "the double click's events"
    );

    // A triple click selects the paragraph, its third press counting 3.
    call_ok(
        &client,
        "computer",
        json!({"action": "triple_click", "coordinate": p}),
    )
    .await;
    let log = log_when(&client, "a third click on the paragraph", |l| {
        l.iter().any(|e| e == "click:p:3")
    })
    .await;
    assert_eq!(
        of_type(&log, "mousedown"),
        ["mousedown:p:1", "mousedown:p:2", "mousedown:p:3"],
        "{log:?}"
    );
    let selected = eval(&client, "window.getSelection().toString()").await;
    assert_eq!(
        selected.as_str().map(str::trim),
        Some(PARAGRAPH),
        "the triple click selects the paragraph"
    );

    // A batch of clicks on three elements, four times: each lands on its
    // own, in order, a single click each (they are far apart, so none is a
    // double; unpaced, 3 rounds in 8 counted some as doubles or triples).
    let point = |p: [i64; 2]| json!({"type": "click", "x": p[0], "y": p[1]});
    let mut want = Vec::new();
    for t in ["a", "b", "c", "a", "c", "b"] {
        for e in ["mousedown", "mouseup", "click"] {
            want.push(format!("{e}:{t}:1"));
        }
    }
    for round in 0..4 {
        let r = call_ok(
            &client,
            "input",
            json!({"actions": [point(a), point(b), point(c), point(a), point(c), point(b)]}),
        )
        .await;
        assert_eq!(structured(&r)["done"], 6, "{}", text(&r));
        let log = log_when(&client, "six clicks", |l| of_type(l, "click").len() >= 6).await;
        assert_eq!(log, want, "round {round}: the batch's clicks, in order");
    }

    // A drag from a box to another: down on the first, up on the second.
    let r = call_ok(
        &client,
        "input",
        json!({"actions": [{"type": "drag", "path": [{"x": a[0], "y": a[1]}, {"x": b[0], "y": b[1]}, {"x": c[0], "y": c[1]}]}]}),
    )
    .await;
    assert_eq!(structured(&r)["done"], 1, "{}", text(&r));
    let log = log_when(&client, "the drag's mouseup", |l| {
        !of_type(l, "mouseup").is_empty()
    })
    .await;
    assert_eq!(
        (of_type(&log, "mousedown"), of_type(&log, "mouseup")),
        (vec!["mousedown:a:1"], vec!["mouseup:c:1"]),
        "{log:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_and_triple_clicks_count_and_a_batch_lands_in_order_in_chromium_on_a_local_desktop()
{
    if !need_root() || !computer_testkit::need_xvfb() || !computer_testkit::need_chromium() {
        return;
    }
    clicks_count_and_land_in_order(&Server::new(), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_and_triple_clicks_count_and_a_batch_lands_in_order_in_chromium_on_a_docker_desktop()
{
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    let _shared = super::support::DOCKER_ENGINE.read().await;
    let server = or_skip!(Server::docker_with_image(&image));
    clicks_count_and_land_in_order(&server, &["--docker-desktop-browser", "true"]).await;
}
