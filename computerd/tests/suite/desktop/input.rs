//! Input: clicks, drags, scrolls and typed text as the fixture logs them,
//! a batch that stops at its first failure, and the keyboard remap.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_drags_and_scrolls_land_where_aimed() {
    let (d, c) = or_skip!(Desktop::with_client().await);
    let f = &d.fixture;
    let n = f.events().len();
    let r = actions(
        &c,
        json!([
            {"type": "click", "point": [150, 50]},
            {"type": "wait", "ms": 450},
            {"type": "click", "point": [50, 150], "count": 2},
            {"type": "wait", "ms": 450},
            {"type": "click", "point": [150, 150], "button": "right"},
            {"type": "click", "point": [150, 150], "count": 3},
            {"type": "drag", "path": [[10, 10], [60, 60], [120, 120]]},
            {"type": "scroll", "point": [30, 30], "dy": 2, "dx": -1}
        ]),
    )
    .await;
    assert_eq!(
        r,
        InputActionsResult {
            done: 8,
            failed: None
        }
    );
    let ev = f.wait_for("the wheel", |e| {
        e[n..].iter().filter(|e| e["event"] == "wheel").count() == 3
    });
    let ev: Vec<&Value> = ev[n..].iter().filter(|e| e["event"] != "key").collect();
    let downs: Vec<(i64, i64, i64, i64)> = ev
        .iter()
        .filter(|e| e["event"] == "down")
        .map(|e| {
            (
                e["button"].as_i64().unwrap(),
                e["x"].as_i64().unwrap(),
                e["y"].as_i64().unwrap(),
                e["count"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        downs,
        vec![
            (1, 150, 50, 1),
            (1, 50, 150, 1),
            (1, 50, 150, 2),
            (3, 150, 150, 1),
            (1, 150, 150, 1),
            (1, 150, 150, 2),
            (1, 150, 150, 3),
            (1, 10, 10, 1)
        ]
    );
    // The fixture counts as Chromium does, by the X server's stamps: every
    // press and release stamped after the one before it.
    let stamps: Vec<i64> = ev
        .iter()
        .filter(|e| e["event"] == "down" || e["event"] == "up")
        .map(|e| e["time"].as_i64().unwrap())
        .collect();
    assert_eq!(stamps.len(), 16, "{ev:?}");
    assert!(
        stamps.windows(2).all(|w| w[0] < w[1]),
        "the presses and releases share stamps: {stamps:?}"
    );
    let last_up = ev.iter().rev().find(|e| e["event"] == "up").unwrap();
    assert_eq!(
        (last_up["x"].as_i64(), last_up["y"].as_i64()),
        (Some(120), Some(120))
    );
    let wheel: Vec<(i64, i64)> = ev
        .iter()
        .filter(|e| e["event"] == "wheel")
        .map(|e| (e["dx"].as_i64().unwrap(), e["dy"].as_i64().unwrap()))
        .collect();
    assert_eq!(wheel, vec![(0, 1), (0, 1), (-1, 0)], "vertical first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_text_arrives_exactly_through_shift_caps_lock_and_the_remap() {
    let (d, c) = or_skip!(Desktop::with_client().await);
    let f = &d.fixture;

    let n = f.events().len();
    let text = "Hello, agentrun! 123";
    let r = actions(&c, json!([{"type": "type", "text": text}])).await;
    assert_eq!(r.failed, None);
    f.wait_for("the typed text", |_| f.text_since(n) == text);

    // Characters the US map lacks come through the keysym remap.
    for text in ["é", "ß", "中", "naïve café 日本 ß"] {
        let n = f.events().len();
        let r = actions(&c, json!([{"type": "type", "text": text}])).await;
        assert_eq!(r.failed, None, "{text}");
        f.wait_for(&format!("{text:?} typed"), |_| f.text_since(n) == text);
    }

    // Caps Lock on: type still gives exactly its text, and Caps Lock stays on.
    let r = actions(&c, json!([{"type": "key", "keys": ["capslock"]}])).await;
    assert_eq!(r.failed, None);
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "type", "text": "Mixed Case, ok?\tyes"}]),
    )
    .await;
    assert_eq!(r.failed, None);
    f.wait_for("text under Caps Lock", |_| {
        f.text_since(n) == "Mixed Case, ok?\tyes"
    });
    // A key action is a keyboard's: Caps Lock applies to it.
    let n = f.events().len();
    actions(&c, json!([{"type": "key", "keys": ["q"]}, {"type": "key", "keys": ["capslock"]}, {"type": "key", "keys": ["q"]}])).await;
    f.wait_for("keys under Caps Lock", |_| f.text_since(n) == "Qq");

    // A combo: pressed in order, released in reverse, with its modifier held.
    let n = f.events().len();
    actions(&c, json!([{"type": "key", "keys": ["ctrl", "a"]}])).await;
    let ev = f.wait_for("ctrl+a", |e| {
        e[n..].iter().filter(|e| e["event"] == "key").count() >= 4
    });
    let keys: Vec<&Value> = ev[n..].iter().filter(|e| e["event"] == "key").collect();
    assert_eq!(keys[0]["keysym"], 0xffe3, "{keys:?}");
    assert_eq!(keys[1]["keysym"], 0x61);
    assert_eq!(
        keys[1]["state"].as_u64().unwrap() & 4,
        4,
        "ctrl held for the a"
    );
    assert_eq!(
        (keys[2]["up"].as_bool(), keys[3]["up"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(keys[3]["keysym"], 0xffe3, "released in reverse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stops_at_its_first_failure_and_lets_go_of_what_it_pressed() {
    let (d, c) = or_skip!(Desktop::with_client().await);
    let f = &d.fixture;

    // Refused whole: nothing runs.
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "click", "point": [20, 20]}, {"type": "key", "keys": ["Hyper_Q"]}]),
    )
    .await;
    let failed = r.failed.clone().unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (0, 1, ErrorKind::Invalid)
    );
    assert!(failed.message.contains("Hyper_Q"), "{}", failed.message);
    let many: Vec<Value> = (0..101).map(|_| json!({"type": "click"})).collect();
    let r = actions(&c, Value::Array(many)).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Limit);
    let r = actions(&c, json!([{"type": "tap", "point": [1, 1]}])).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Unsupported);
    let r = actions(&c, json!([{"type": "scroll", "dy": 3, "unit": "px"}])).await;
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Unsupported);

    // Stopped at the point off the display, with the press released.
    let r = actions(
        &c,
        json!([
            {"type": "move", "point": [20, 20]},
            {"type": "down"},
            {"type": "move", "point": [5000, 5]},
            {"type": "click", "point": [60, 60]}
        ]),
    )
    .await;
    let failed = r.failed.clone().unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (2, 2, ErrorKind::Invalid)
    );
    assert!(failed.message.contains("1280x800"), "{}", failed.message);
    let ev = f.wait_for("the release", |e| e[n..].iter().any(|e| e["event"] == "up"));
    let ev: Vec<&Value> = ev[n..].iter().collect();
    assert_eq!(ev.len(), 2, "one press and its release, no click: {ev:?}");
    assert_eq!(
        (ev[0]["event"].as_str(), ev[0]["x"].as_i64()),
        (Some("down"), Some(20))
    );
    assert_eq!(
        (ev[1]["event"].as_str(), ev[1]["x"].as_i64()),
        (Some("up"), Some(20))
    );

    // Nothing was left held: a later click lands as a click.
    let n = f.events().len();
    let r = actions(
        &c,
        json!([{"type": "wait", "ms": 450}, {"type": "click", "point": [150, 150]}]),
    )
    .await;
    assert_eq!(r.failed, None);
    let ev = f.wait_for("the later click", |e| {
        e[n..].iter().any(|e| e["event"] == "up")
    });
    assert_eq!(ev[n]["event"], "down");
    assert_eq!(
        (ev[n]["x"].as_i64(), ev[n]["count"].as_i64()),
        (Some(150), Some(1))
    );
    assert_eq!(
        ev[n]["state"].as_u64().unwrap() & 0x100,
        0,
        "button 1 was not still down"
    );

    // A down with no up stays down into the next batch.
    let n = f.events().len();
    let r = actions(&c, json!([{"type": "down", "point": [40, 40]}])).await;
    assert_eq!(r.failed, None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!f.since(n).iter().any(|e| e["event"] == "up"), "still down");
    actions(&c, json!([{"type": "up"}])).await;
    f.wait_for("the next batch's up", |e| {
        e[n..].iter().any(|e| e["event"] == "up")
    });

    // A cancel stops a long wait at once, answers aborted with what was
    // done, and lets go of what the batch pressed; hello answers meanwhile.
    let n = f.events().len();
    let mut raw = d.init.raw().await;
    raw.request(
        7,
        "input.actions",
        json!({"actions": [{"type": "down", "point": [60, 60]}, {"type": "wait", "ms": 60_000}]}),
    )
    .await;
    f.wait_for("the press", |e| e[n..].iter().any(|e| e["event"] == "down"));
    let t = Instant::now();
    let hello: HelloResult = c.call(&HelloParams::default()).await.unwrap();
    assert_eq!(hello.kind, MachineKind::Desktop);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "hello waited for the batch"
    );
    raw.send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}))
        .await;
    let reply = raw.reply_to(7).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    let r: InputActionsResult = serde_json::from_value(reply.result.unwrap()).unwrap();
    let failed = r.failed.unwrap();
    assert_eq!(
        (r.done, failed.index, failed.kind),
        (1, 1, ErrorKind::Aborted)
    );
    f.wait_for("the release after the cancel", |e| {
        e[n..].iter().any(|e| e["event"] == "up" && e["x"] == 60)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remap_reuses_keycodes_once_settled_and_refuses_what_cannot_fit() {
    let (d, c) = or_skip!(Desktop::with_client().await);
    let f = &d.fixture;
    let cjk =
        |from: u32, n: u32| -> String { (from..from + n).filter_map(char::from_u32).collect() };
    // More distinct characters than the map can lend at once: refused
    // before any key, saying how many it can.
    let n = f.events().len();
    let r = actions(&c, json!([{"type": "type", "text": cjk(0x4e00, 300)}])).await;
    let failed = r.failed.unwrap();
    assert_eq!((r.done, failed.kind), (0, ErrorKind::Limit));
    assert!(
        failed.message.contains("type it in parts"),
        "{}",
        failed.message
    );
    let room: u32 = failed
        .message
        .split("can lend ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(room >= 2, "{}", failed.message);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        f.since(n).iter().all(|e| e["event"] != "key"),
        "no key was sent"
    );

    // As many as it can lend, then as many others: the second batch moves
    // every binding, each once it has settled, and both arrive exactly.
    for from in [0x4e00, 0x4e00 + room] {
        let text = cjk(from, room);
        let n = f.events().len();
        let r = actions(&c, json!([{"type": "type", "text": text}])).await;
        assert_eq!(r.failed, None);
        f.wait_for("the CJK text", |_| f.text_since(n) == text);
    }
}
