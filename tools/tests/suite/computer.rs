//! computer_info and computer_extend.

use std::sync::{Arc, Mutex};

use computer_tools::ExtendFn;
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computer_info_shows_the_facts() {
    let s = or_skip!(Sandbox::start());
    let (t, v) = s.ok("computer_info", json!({})).await;
    assert_starts(&t, "provider: test (id t1)\nkind: linux (linux amd64)\n");
    assert_has(
        &t,
        &format!("work directory: {} (HOME and the default cwd)\n", s.home()),
    );
    assert_has(&t, "note: a test computer\n");
    assert_eq!(v, serde_json::to_value(&s.ctx.facts).unwrap());
    // No arguments are taken.
    let t = s.err("computer_info", json!({"verbose": true})).await;
    assert_starts(&t, "computer_info: unknown field `verbose`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computer_extend_asks_the_provider() {
    let s = or_skip!(Sandbox::start());
    // Without an extend function the tool says the provider cannot.
    s.err_has(
        "computer_extend",
        json!({"ttl_minutes": 30}),
        "cannot move its deadline",
    )
    .await;

    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let extend: ExtendFn = Arc::new(move |ttl_ms: u64| {
        log.lock().unwrap().push(ttl_ms);
        Box::pin(async move {
            if ttl_ms > 60 * 60_000 {
                Err("the provider allows at most 60 minutes".to_string())
            } else {
                Ok(computer_tools::Extended {
                    deadline: "2030-01-01T00:30:00Z".to_string(),
                    capped: None,
                })
            }
        })
    });
    let mut ctx = s.ctx.clone();
    ctx.extend = Some(extend);
    let r = s
        .call_with(&ctx, "computer_extend", json!({"ttl_minutes": 30}))
        .await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(text(&r), "the computer now ends at 2030-01-01T00:30:00Z");
    assert_eq!(
        r.structured_content.unwrap(),
        json!({"deadline": "2030-01-01T00:30:00Z"})
    );
    let r = s
        .call_with(&ctx, "computer_extend", json!({"ttl_minutes": 90}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        text(&r),
        "the deadline was not moved: the provider allows at most 60 minutes"
    );
    assert_eq!(*asked.lock().unwrap(), vec![30 * 60_000, 90 * 60_000]);
    let r = s
        .call_with(&ctx, "computer_extend", json!({"ttl_minutes": 0}))
        .await;
    assert!(
        text(&r).starts_with("ttl_minutes is 0; it is 1 to 1440"),
        "{}",
        text(&r)
    );
    // A cut (the server's lifetime bound) is said in the answer.
    let cut: ExtendFn = Arc::new(|_ttl_ms: u64| {
        Box::pin(async {
            Ok(computer_tools::Extended {
                deadline: "2030-01-01T00:29:59Z".to_string(),
                capped: Some("that is as late as this server allows".to_string()),
            })
        })
    });
    let mut cut_ctx = ctx.clone();
    cut_ctx.extend = Some(cut);
    let r = s
        .call_with(&cut_ctx, "computer_extend", json!({"ttl_minutes": 600}))
        .await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        text(&r),
        "the computer now ends at 2030-01-01T00:29:59Z: that is as late as this server allows"
    );
    // The info tool mentions extend when it is there.
    let r = s.call_with(&ctx, "computer_info", json!({})).await;
    assert!(text(&r).contains("computer_extend"), "{}", text(&r));
}
