//! computer_info and computer_extend.

use std::sync::{Arc, Mutex};

use computer_tools::{ExtendFn, ToolContext};
use serde_json::{Value, json};

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn computer_info_shows_the_facts() {
    let s = or_skip!(Sandbox::start().await);
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
    let s = or_skip!(Sandbox::start().await);
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
    let (failed, t, out) = extend_by(&s, &ctx, 30).await;
    assert_eq!(
        (failed, t.as_str(), out),
        (
            Some(false),
            "the computer now ends at 2030-01-01T00:30:00Z",
            Some(json!({"deadline": "2030-01-01T00:30:00Z"}))
        )
    );
    let (failed, t, _) = extend_by(&s, &ctx, 90).await;
    let refused = "the deadline was not moved: the provider allows at most 60 minutes";
    assert_eq!((failed, t.as_str()), (Some(true), refused));
    assert_eq!(*asked.lock().unwrap(), vec![30 * 60_000, 90 * 60_000]);
    let (_, t, _) = extend_by(&s, &ctx, 0).await;
    assert_starts(&t, "ttl_minutes is 0; it is 1 to 1440");
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
    let (failed, t, _) = extend_by(&s, &cut_ctx, 600).await;
    let cut_words =
        "the computer now ends at 2030-01-01T00:29:59Z: that is as late as this server allows";
    assert_eq!((failed, t.as_str()), (Some(false), cut_words));
    // The info tool mentions extend when it is there.
    let r = s.call_with(&ctx, "computer_info", json!({})).await;
    assert_has(&text(&r), "computer_extend");
}

/// computer_extend to `ttl_minutes` in `ctx`: whether it failed, its text
/// and its structured content.
async fn extend_by(
    s: &Sandbox,
    ctx: &ToolContext,
    ttl_minutes: u64,
) -> (Option<bool>, String, Option<Value>) {
    let args = json!({ "ttl_minutes": ttl_minutes });
    let r = s.call_with(ctx, "computer_extend", args).await;
    (r.is_error, text(&r), r.structured_content)
}
