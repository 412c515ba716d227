//! Forms by refs: filled, submitted, a password never shown back; refs
//! that stay with their elements, a removed element's and one from before
//! a navigation refused, bad input named.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_by_refs_and_submitted_and_the_password_never_shows() {
    let b = or_skip!(Browser::start().await);
    let (base, seen) = serve().await;
    let (t, out) = b
        .ok("browser_navigate", json!({"url": format!("{base}/")}))
        .await;
    assert_eq!(out["title"], "Sign up", "{t}");
    assert_has(&t, "browser_snapshot");

    let (snap, out) = b.ok("browser_snapshot", json!({})).await;
    assert_eq!(out["snapshot"], 1, "{snap}");
    let [name, pw, colour, agree, send] = Browser::refs_of(
        &snap,
        [
            "textbox \"Name\"",
            "textbox \"Password\"",
            "combobox",
            "checkbox \"I agree\"",
            "button \"Send\"",
        ],
    );
    assert_has(&snap, "- heading \"Sign up\" [level=1]");
    assert_has(&snap, "link \"Other page\"");
    assert_has(
        &snap,
        &format!("- textbox \"Password\" [ref={pw}]: (password, empty)"),
    );

    for (tool, args, words) in [
        (
            "browser_type",
            json!({"ref": name, "text": "Ada"}),
            "it now holds \"Ada\"",
        ),
        (
            "browser_type",
            json!({"ref": pw, "text": SECRET}),
            "password field",
        ),
        (
            "browser_select",
            json!({"target": colour, "values": ["Green"]}),
            "\"Green\" selected",
        ),
    ] {
        b.ok_has(tool, args, words).await;
    }
    // `element` (a description, as Playwright's MCP tools take it) rides along.
    let (t, _) = b
        .ok(
            "browser_click",
            json!({"ref": agree, "element": "the agree box"}),
        )
        .await;
    assert_starts(&t, &format!("clicked {agree} (checkbox"));

    // The snapshot after filling shows the values, the password masked.
    let (snap2, _) = b.ok("browser_snapshot", json!({})).await;
    assert_has(&snap2, "(password, not shown)");
    assert_has(&snap2, ": Ada");
    assert_has(&snap2, "[checked]");
    // Each element keeps its ref across snapshots.
    assert_eq!(
        Browser::refs_of(&snap2, ["textbox \"Name\"", "combobox", "button \"Send\""]),
        [name.clone(), colour.clone(), send.clone()],
        "{snap2}"
    );
    let (t, out) = b.ok("browser_click", json!({"ref": send})).await;
    // Seen when it starts within the click's short look (a loaded machine
    // may be slower; the refusal below holds either way).
    if out["navigated"] == true {
        assert_has(&t, "/submit");
    }
    b.wait_title("Thanks").await;
    let posted = seen.body_of("POST /submit").expect("the form was posted");
    assert_eq!(posted, format!("name=Ada&pw={SECRET}&color=g&agree=on"));

    // A ref from before the navigation is refused with the next step.
    b.err_has(
        "browser_type",
        json!({"ref": name, "text": "x"}),
        "take a new snapshot",
    )
    .await;
    let (only, _) = b
        .ok(
            "browser_snapshot",
            json!({"page": 1, "filter": "interactive"}),
        )
        .await;
    assert!(!only.contains("heading"), "{only}");
    b.ok_has("browser_snapshot", json!({}), "Thanks").await;

    let all = b.results.lock().unwrap().join("\n");
    assert!(!all.contains(SECRET), "the password showed in a result");
    assert!(!all.contains('•'), "a masked value's bullets showed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_from_before_a_navigation_is_refused_and_bad_input_is_named() {
    let (b, base) = or_skip!(Browser::at("/").await);
    let (only, _) = b
        .ok("browser_snapshot", json!({"filter": "interactive"}))
        .await;
    assert!(!only.contains("heading"), "{only}");
    assert_has(&only, "\n- textbox \"Name\" [ref=e1]");
    let (snap, _) = b.ok("browser_snapshot", json!({})).await;
    let [link, name] = Browser::refs_of(&snap, ["link \"Other page\"", "textbox \"Name\""]);
    // A select refuses an option it lacks, naming those it has; a field
    // that is no select says what to use.
    let colour = Browser::ref_of(&snap, "combobox");
    let e = b
        .err(
            "browser_select",
            json!({"ref": colour, "values": ["Purple"]}),
        )
        .await;
    assert!(
        e.ends_with("has no option \"Purple\"; its options are: Red (value r); Green (value g); Blue (value b); nothing was changed"),
        "{e}"
    );
    b.err_has(
        "browser_select",
        json!({"ref": name, "values": ["x"]}),
        "is a <input>, not a <select>: type into it with browser_type",
    )
    .await;
    let (t, out) = b.ok("browser_click", json!({"ref": link})).await;
    if out["navigated"] == true {
        assert_has(&t, "/other");
    }
    b.wait_title("Other").await;
    let e = b.err("browser_click", json!({"ref": name})).await;
    assert_has(&e, "taken before the page navigated");
    assert_has(&e, "take a new snapshot");
    assert_ends(&e, "nothing was done");

    // Back and forward.
    let (t, out) = b.ok("browser_navigate", json!({"action": "back"})).await;
    assert_eq!(out["title"], "Sign up", "{t}");
    let (_, out) = b.ok("browser_navigate", json!({"url": "forward"})).await;
    assert_eq!(out["title"], "Other");

    // Bad schemes are refused naming url, and nothing is sent.
    for bad in [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "chrome://version",
        "data:text/html,x",
    ] {
        let e = b.err("browser_navigate", json!({"url": bad})).await;
        assert_starts(&e, "url has the scheme ");
    }
    // An unknown ref, a ref that is no ref.
    for (args, words) in [
        (json!({"ref": "e999"}), "is no ref of any snapshot"),
        (json!({"ref": "submit-button"}), "is not a ref"),
    ] {
        b.err_has("browser_click", args, words).await;
    }
    // An expression past its bound.
    let big = "1;".repeat(40 * 1024);
    let e = b.err("browser_eval", json!({"expression": big})).await;
    assert!(
        e.starts_with("expression is 81920 bytes; at most 64 KiB"),
        "{e}"
    );
    // An expression that throws says so.
    b.err_has(
        "browser_eval",
        json!({"expression": "throw new Error('boom')"}),
        "boom",
    )
    .await;

    // A server that is not there: the browser's words, and it answers.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let e = b.err("browser_navigate", json!({"url": gone})).await;
    assert_starts(
        &e,
        &format!("{gone} did not open: net::ERR_CONNECTION_REFUSED"),
    );
    b.answers().await;
    // A timeout past its bound is named.
    let e = b
        .err(
            "browser_navigate",
            json!({"url": base, "timeout_ms": 90_000}),
        )
        .await;
    assert!(
        e.starts_with("timeout_ms is 90000; give 1000 to 60000"),
        "{e}"
    );

    // A page that never loads ends within its bound, the browser answering.
    let e = b
        .err(
            "browser_navigate",
            json!({"url": format!("{base}/hang"), "timeout_ms": 2000}),
        )
        .await;
    assert_starts(&e, "the page did not finish loading within 2 s");
    assert_has(&e, "the browser still answers");
    b.answers().await;
}

/// A ref names one element for as long as it lives: the same in a second
/// snapshot and under the interactive filter; a removed element's ref is
/// refused as removed, and its number is never given to another element;
/// after a back navigation a ref works exactly when the element it names
/// is there again (a page restored from the back-forward cache).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_stay_with_their_elements_and_a_removed_ones_ref_is_refused() {
    let (b, _base) = or_skip!(Browser::at("/").await);
    let (first, _) = b.ok("browser_snapshot", json!({})).await;
    let (again, _) = b.ok("browser_snapshot", json!({})).await;
    let (only, _) = b
        .ok("browser_snapshot", json!({"filter": "interactive"}))
        .await;
    let wanted = [
        "textbox \"Name\"",
        "combobox",
        "button \"Send\"",
        "link \"Other page\"",
    ];
    let refs = Browser::refs_of(&first, wanted);
    assert_eq!(Browser::refs_of(&again, wanted), refs, "{again}");
    assert_eq!(Browser::refs_of(&only, wanted), refs, "{only}");
    let [name, colour, send, link] = refs;

    // The Send button removed, another put in its place: the old ref is
    // refused by name, never retargeted to the new button.
    b.ok(
        "browser_eval",
        json!({"expression": "(() => { const s = [...document.querySelectorAll('button')].find(x => x.textContent.includes('Send')); const n = document.createElement('button'); n.textContent = 'Send'; s.replaceWith(n); return true; })()"}),
    )
    .await;
    let e = b.err("browser_click", json!({"ref": send})).await;
    assert_has(
        &e,
        &format!("ref {send} (button \"Send\") was removed from the page"),
    );
    assert_ends(&e, "nothing was done");
    let (after, _) = b.ok("browser_snapshot", json!({})).await;
    let [send2, name2] = Browser::refs_of(&after, ["button \"Send\"", "textbox \"Name\""]);
    assert_ne!(
        send2, send,
        "a removed element's number was given again: {after}"
    );
    assert_eq!(name2, name, "{after}");
    b.ok_has(
        "browser_type",
        json!({"ref": name, "text": "Ada"}),
        "it now holds \"Ada\"",
    )
    .await;

    // Away and back.
    b.ok("browser_click", json!({"ref": link})).await;
    b.wait_title("Other").await;
    let e = b
        .err(
            "browser_select",
            json!({"ref": colour, "values": ["Green"]}),
        )
        .await;
    assert_has(&e, "taken before the page navigated");
    b.ok("browser_navigate", json!({"action": "back"})).await;
    b.wait_title("Sign up").await;
    let (back, _) = b.ok("browser_snapshot", json!({})).await;
    let colour_back = Browser::ref_of(&back, "combobox");
    let r = b
        .call(
            "browser_select",
            json!({"ref": colour, "values": ["Green"]}),
        )
        .await;
    let refused = r.is_error == Some(true);
    if colour_back == colour {
        // Restored from the back-forward cache: the same element, the same ref.
        assert!(
            !refused,
            "the restored element's ref was refused: {}",
            text(&r)
        );
    } else {
        assert!(
            refused,
            "a ref of the page before was taken on a new document: {}",
            text(&r)
        );
        assert_has(&text(&r), "taken before the page navigated");
    }
}
