//! The pointer: clicks at screenshot coordinates and covered refs, the
//! wheel, drags.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_at_screenshot_coordinates_lands_and_a_covered_ref_is_not_clicked() {
    let (b, base) = or_skip!(Browser::at("/clicks").await);
    // A scaled screenshot: its pixels are not the viewport's.
    let r = b
        .call("browser_screenshot", json!({"max_width": 400}))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let img = r.content[0].as_image().expect("an image first");
    assert_eq!(img.mime_type, "image/png");
    let out = r.structured_content.clone().unwrap();
    assert_eq!(out["frame"], "b1");
    let (w, vw, vh) = (
        out["width"].as_f64().unwrap(),
        out["viewport_width"].as_f64().unwrap(),
        out["viewport_height"].as_f64().unwrap(),
    );
    assert_eq!(w, 400.0, "{out}");
    let scale = out["scale"].as_f64().unwrap();
    // The pad is at 300..420 x 200..280 in the viewport: its middle, in image pixels.
    let (x, y) = ((360.0 * scale) as i64, (240.0 * scale) as i64);
    let (t, _) = b.ok("browser_click", json!({"x": x, "y": y})).await;
    assert_has(&t, "frame b1");
    assert_has(&t, "id=pad");
    let clicks = b.js("JSON.stringify(window.clicks)").await;
    let clicks: Value =
        serde_json::from_str(&serde_json::from_str::<String>(&clicks).unwrap()).unwrap();
    assert_eq!(clicks.as_array().unwrap().len(), 1, "{clicks}");
    assert_eq!(clicks[0][2], "pad", "{clicks}");
    let (cx, cy) = (
        clicks[0][0].as_f64().unwrap(),
        clicks[0][1].as_f64().unwrap(),
    );
    assert!(
        (cx - 360.0).abs() <= 2.0 / scale && (cy - 240.0).abs() <= 2.0 / scale,
        "{clicks}"
    );
    // Outside the frame: refused, nothing clicked.
    b.err_has(
        "browser_click",
        json!({"x": 400, "y": 10}),
        "is outside the 400x",
    )
    .await;
    assert!(vw > 0.0 && vh > 0.0);

    // A covered button: what was confirmed, and that nothing was clicked.
    b.go(&format!("{base}/covered")).await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let go = Browser::ref_of(&snap, "button \"Go\"");
    let e = b.err("browser_click", json!({"ref": go})).await;
    assert!(
        e.starts_with(&format!(
            "scrolled {go} (button \"Go\") into view; the point"
        )),
        "{e}"
    );
    assert_has(&e, "covered by <div class=overlay>");
    assert_has(&e, "nothing was clicked");
    let hit = b.js("window.hit === undefined").await;
    assert_eq!(hit, "true");

    // A click that opens an alert: the alert is dismissed, and said so.
    b.go(&format!("{base}/dialog")).await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let alert = Browser::ref_of(&snap, "button \"Alert me\"");
    b.ok_has(
        "browser_click",
        json!({"ref": alert}),
        "the page opened an alert dialog saying \"hello there\", which was dismissed",
    )
    .await;
    let after = b.js("window.after").await;
    assert_eq!(after, "1");
    b.go(&format!("{base}/covered")).await;

    // A button inside a same-site iframe: shown under it, clicked by ref.
    b.go(&format!("{base}/framed")).await;
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert_has(&snap, "- Iframe\n  - button \"Inside\" [ref=");
    let inside = Browser::ref_of(&snap, "button \"Inside\"");
    b.ok("browser_click", json!({"ref": inside})).await;
    let n = b.js("window.inner").await;
    assert_eq!(n, "1");
    b.go(&format!("{base}/covered")).await;

    // Anthropic's typed target.
    let (t, _) = b
        .ok(
            "browser_hover",
            json!({"target": {"type": "coordinate", "x": 5, "y": 5}}),
        )
        .await;
    assert_starts(&t, "the pointer is over (5, 5)");

    // Keys, hover, text, console, network, tabs.
    b.ok("browser_press", json!({"key": "Tab"})).await;
    b.ok_has("browser_get_text", json!({}), "Go").await;
    b.ok(
        "browser_eval",
        json!({"expression": "console.warn('careful', 3)"}),
    )
    .await;
    b.ok_has("browser_console", json!({}), "warning: careful 3")
        .await;
    b.ok_has("browser_network", json!({}), "/covered -> 200 text/html")
        .await;
    let (t, out) = b
        .ok(
            "browser_tabs",
            json!({"action": "new", "url": format!("{base}/other")}),
        )
        .await;
    assert_eq!(out["tabs"].as_array().unwrap().len(), 2, "{t}");
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    assert_has(&snap, "The other page.");
    let tabs = out["tabs"].as_array().unwrap().clone();
    let at = |end: &str| {
        tabs.iter()
            .find(|t| t["url"].as_str().unwrap().ends_with(end))
            .unwrap_or_else(|| panic!("no tab at {end}: {tabs:?}"))["index"]
            .clone()
    };
    let (covered, other) = (at("/covered"), at("/other"));
    // Anthropic's tab_id: the call acts in that tab, which becomes current.
    let covered_id = tabs[covered.as_u64().unwrap() as usize]["tab_id"].clone();
    let (t, _) = b
        .ok("browser_get_text", json!({"tab_id": covered_id}))
        .await;
    assert_has(&t, "Go");
    let e = b.err("browser_get_text", json!({"tab_id": "NOPE"})).await;
    assert_starts(&e, "tab_id \"NOPE\" is no open tab");
    b.ok("browser_tabs", json!({"action": "switch", "index": other}))
        .await;
    let (_, out) = b
        .ok(
            "browser_tabs",
            json!({"action": "switch", "index": covered}),
        )
        .await;
    let i = covered.as_u64().unwrap() as usize;
    assert_eq!(out["tabs"][i]["current"], true, "{out}");
    // The other tab's snapshot refs are refused here.
    let nothing = Browser::ref_of(&snap, "button \"Nothing\"");
    b.err_has("browser_click", json!({"ref": nothing}), "another tab")
        .await;
    let (_, out) = b
        .ok("browser_tabs", json!({"action": "close", "index": other}))
        .await;
    assert_eq!(out["tabs"].as_array().unwrap().len(), 1);
    // A tab the page closes itself: one call says so, the next acts in
    // another tab.
    b.ok(
        "browser_eval",
        json!({"expression": "window.open('/other') !== null"}),
    )
    .await;
    let mut popup = None;
    for _ in 0..50 {
        let (_, out) = b.ok("browser_tabs", json!({"action": "list"})).await;
        popup = out["tabs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["url"].as_str().unwrap().ends_with("/other"))
            .map(|t| t["index"].clone());
        if popup.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.ok(
        "browser_tabs",
        json!({"action": "switch", "index": popup.expect("the popup")}),
    )
    .await;
    let _ = b
        .call("browser_eval", json!({"expression": "window.close()"}))
        .await;
    let (mut said, mut words) = (false, String::new());
    for _ in 0..50 {
        let r = b
            .call("browser_eval", json!({"expression": "location.pathname"}))
            .await;
        words = text(&r);
        said |= r.is_error == Some(true) && words.contains("the tab is gone");
        if words == "\"/covered\"" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(said, "no call said the tab is gone; the last: {words}");
    assert_eq!(words, "\"/covered\"");
    b.answers().await;
}

/// The wheel scrolls the area under it and says where it stands; at an
/// end it says nothing moved; a ref alone is scrolled into view, and refs
/// stay valid across scrolls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wheel_scrolls_the_area_under_it_and_says_where_it_stands() {
    let (b, _) = or_skip!(Browser::at("/scroll").await);
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [item1, bottom] = Browser::refs_of(&snap, ["button \"Item 1\"", "button \"Bottom\""]);

    // The viewport's middle is below the list: the page scrolls.
    let (t, out) = b
        .ok(
            "browser_scroll",
            json!({"direction": "down", "amount": 500}),
        )
        .await;
    assert_has(&t, "the page scrolled to y 500 of");
    assert_eq!(out["navigated"], false);
    assert_eq!(b.js("window.scrollY").await, "500");
    b.ok_has(
        "browser_scroll",
        json!({"direction": "up", "amount": 100000}),
        "the page scrolled to y 0 of",
    )
    .await;
    let (t, _) = b.ok("browser_scroll", json!({"direction": "up"})).await;
    assert_has(&t, "nothing moved: the page stands at y 0 of");
    assert_has(&t, "cannot scroll up");

    // Over the list: the list scrolls, the page does not.
    let (t, _) = b
        .ok(
            "browser_scroll",
            json!({"ref": item1, "direction": "down", "amount": 120}),
        )
        .await;
    assert_has(&t, "the area <div id=list> scrolled to y 120 of");
    assert!(!t.contains("the page scrolled"), "{t}");
    assert_eq!(
        b.js("document.getElementById('list').scrollTop").await,
        "120"
    );
    assert_eq!(b.js("window.scrollY").await, "0");

    // A ref alone: into view; the same snapshot's refs still act.
    let (t, _) = b.ok("browser_scroll", json!({"ref": bottom})).await;
    assert_starts(
        &t,
        &format!("scrolled {bottom} (button \"Bottom\") into view"),
    );
    assert_ne!(b.js("window.scrollY").await, "0");
    b.ok("browser_click", json!({"ref": bottom})).await;
    assert_eq!(b.js("window.bottom").await, "1");

    // Bad input, named; nothing scrolled.
    let y = b.js("window.scrollY").await;
    let e = b
        .err("browser_scroll", json!({"direction": "down", "amount": 0}))
        .await;
    assert!(e.contains("amount is 0; give 1 to 100000"), "{e}");
    for (args, words) in [
        (json!({}), "give direction (up, down, left or right)"),
        (json!({"direction": "sideways"}), "direction"),
        (
            json!({"ref": bottom, "amount": 10}),
            "amount needs a direction",
        ),
    ] {
        b.err_has("browser_scroll", args, words).await;
    }
    assert_eq!(b.js("window.scrollY").await, y);
    b.answers().await;
}

/// A drag by refs: an HTML drag and drop carries its data to the drop
/// target; a knob of plain mouse events follows the pointer; the mouse is
/// free after; an end out of view is refused with nothing done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drag_drops_by_refs_and_moves_a_knob_and_an_end_out_of_view_is_refused() {
    let (b, _) = or_skip!(Browser::at("/drag").await);
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [item, zone, knob, after, far] = Browser::refs_of(
        &snap,
        [
            "\"Item\"",
            "\"Zone\"",
            "\"Knob\"",
            "button \"After\"",
            "button \"Far\"",
        ],
    );

    let (t, out) = b
        .ok("browser_drag", json!({"start_ref": item, "end_ref": zone}))
        .await;
    assert_has(&t, "the page took it as a drag and drop");
    assert_eq!(out["at"][0], 375.0, "{out}");
    assert_eq!(b.js("window.dropped").await, "\"payload-7\"");

    b.ok_has(
        "browser_drag",
        json!({"start_ref": knob, "end_ref": after}),
        "the page started no drag and drop",
    )
    .await;
    let k = b.js("JSON.stringify(window.knob)").await;
    let k: Value = serde_json::from_str(&serde_json::from_str::<String>(&k).unwrap()).unwrap();
    assert_eq!(k[0], 35, "the press was at the knob's middle: {k}");
    assert!(k[1].as_f64().unwrap() > 400.0, "released at After: {k}");

    // The mouse is not left pressed: a click lands as a click.
    b.ok("browser_click", json!({"ref": after})).await;
    assert_eq!(b.js("window.afterClicks").await, "1");

    // An end out of view: refused, nothing dragged.
    let e = b
        .err("browser_drag", json!({"start_ref": item, "end_ref": far}))
        .await;
    assert_has(
        &e,
        "was left where it is, but it has no box inside the viewport",
    );
    assert_has(&e, "nothing was dragged");
    for (args, words) in [
        (
            json!({"start_ref": item}),
            "give end_ref (from browser_snapshot), or end_x and end_y",
        ),
        (
            json!({"start_ref": item, "end_ref": zone, "end_x": 3, "end_y": 4}),
            "give end_ref or end_x and end_y, not both",
        ),
    ] {
        b.err_has("browser_drag", args, words).await;
    }
    assert_eq!(b.js("window.afterClicks").await, "1");
    b.answers().await;
}
