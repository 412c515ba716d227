//! cdp.*: a browser answers CDP through its client, keeps its events, and
//! refuses bad commands in words while it goes on answering. Each case
//! works in a page of its own on the shared browser and closes it.

use std::time::Duration;

use computerd::client::ClientError;
use computerd::protocol::{CdpEventsParams, CdpSendParams, ErrorKind, PingParams};
use serde_json::{Value, json};

use crate::ctx::{Computer, Ctx, Outcome, ensure, fail};

/// A page the suite opens: a target and its flat session.
struct Page<'a> {
    t: &'a Ctx,
    c: &'a Computer,
    target: String,
    session: String,
}

async fn send(
    t: &Ctx,
    c: &Computer,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Result<Value, ClientError> {
    t.try_call(
        c,
        &CdpSendParams {
            method: method.into(),
            params: Some(params),
            session_id: session.map(str::to_string),
            timeout_ms: Some(30_000),
        },
    )
    .await
    .map(|r| r.result)
}

async fn must(
    t: &Ctx,
    c: &Computer,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Result<Value, Outcome> {
    send(t, c, method, params, session)
        .await
        .map_err(|e| Outcome::Fail(format!("cdp.send {method} failed: {e}")))
}

impl<'a> Page<'a> {
    async fn open(t: &'a Ctx, c: &'a Computer) -> Result<Page<'a>, Outcome> {
        let made = must(
            t,
            c,
            "Target.createTarget",
            json!({"url": "about:blank"}),
            None,
        )
        .await?;
        let Some(target) = made["targetId"].as_str().map(str::to_string) else {
            return fail(format!("Target.createTarget answered no targetId: {made}"));
        };
        let attached = must(
            t,
            c,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
            None,
        )
        .await?;
        let Some(session) = attached["sessionId"].as_str().map(str::to_string) else {
            return fail(format!(
                "Target.attachToTarget answered no sessionId: {attached}"
            ));
        };
        let page = Page {
            t,
            c,
            target,
            session,
        };
        if let Err(e) = must(t, c, "Page.enable", json!({}), Some(&page.session)).await {
            page.close().await;
            return Err(e);
        }
        Ok(page)
    }

    /// Navigate and wait (15 s) for the load event.
    async fn load(&self, url: &str) -> Result<(), Outcome> {
        let since = self.next_event().await?;
        let nav = must(
            self.t,
            self.c,
            "Page.navigate",
            json!({ "url": url }),
            Some(&self.session),
        )
        .await?;
        if let Some(e) = nav.get("errorText") {
            return fail(format!("Page.navigate to a data: page failed: {e}"));
        }
        let until = tokio::time::Instant::now() + Duration::from_secs(15);
        let mut from = since;
        loop {
            let got = self
                .t
                .call(
                    self.c,
                    &CdpEventsParams {
                        since: Some(from),
                        methods: Some(vec!["Page.loadEventFired".into()]),
                        session_id: Some(self.session.clone()),
                        wait_ms: Some(5_000),
                        max: None,
                    },
                )
                .await?;
            if !got.events.is_empty() {
                return Ok(());
            }
            from = got.next;
            if tokio::time::Instant::now() >= until {
                return fail("the page did not fire its load event within 15 s");
            }
        }
    }

    /// The sequence number the next event will have.
    async fn next_event(&self) -> Result<u64, Outcome> {
        let r = self
            .t
            .call(
                self.c,
                &CdpEventsParams {
                    since: Some(u64::MAX),
                    ..Default::default()
                },
            )
            .await?;
        Ok(r.next)
    }

    async fn eval(&self, expression: &str) -> Result<Value, Outcome> {
        let r = must(
            self.t,
            self.c,
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            Some(&self.session),
        )
        .await?;
        if let Some(e) = r.get("exceptionDetails") {
            return fail(format!("Runtime.evaluate threw: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    async fn close(&self) {
        let _ = send(
            self.t,
            self.c,
            "Target.closeTarget",
            json!({"targetId": self.target}),
            None,
        )
        .await;
    }
}

/// Run `body` on a page of its own, closed whatever it found.
async fn with_page<F>(t: &Ctx, body: F) -> Result<(), Outcome>
where
    F: for<'p> FnOnce(&'p Page<'p>) -> futures::future::BoxFuture<'p, Result<(), Outcome>>,
{
    let c = t.shared().await?;
    let page = Page::open(t, c).await?;
    let r = body(&page).await;
    page.close().await;
    r
}

pub async fn version(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let v = must(t, c, "Browser.getVersion", json!({}), None).await?;
    for field in ["product", "protocolVersion", "userAgent"] {
        ensure(v[field].as_str().is_some_and(|s| !s.is_empty()), || {
            format!("Browser.getVersion answered no {field}: {v}")
        })?;
    }
    Ok(())
}

/// The data: page the suite loads, and what its script computes.
const PAGE: &str = "data:text/html,<title>conformance</title><p id=p>six times seven</p><script>window.answer = 6 * 7; console.log('conformance page up')</script>";

pub async fn evaluate(t: &Ctx) -> Result<(), Outcome> {
    with_page(t, |p| {
        Box::pin(async move {
            p.load(PAGE).await?;
            let got = p
                .eval("document.title + '|' + document.getElementById('p').textContent + '|' + window.answer")
                .await?;
            ensure(got == "conformance|six times seven|42", || {
                format!("Runtime.evaluate on the data: page answered {got}, not \"conformance|six times seven|42\"")
            })
        })
    })
    .await
}

pub async fn events(t: &Ctx) -> Result<(), Outcome> {
    with_page(t, |p| {
        Box::pin(async move {
            must(p.t, p.c, "Runtime.enable", json!({}), Some(&p.session)).await?;
            let since = p.next_event().await?;
            p.load(PAGE).await?;
            let got =
                p.t.call(
                    p.c,
                    &CdpEventsParams {
                        since: Some(since),
                        methods: Some(vec!["Runtime.".into()]),
                        session_id: Some(p.session.clone()),
                        wait_ms: Some(5_000),
                        max: None,
                    },
                )
                .await?;
            ensure(
                got.events.iter().all(|e| {
                    e.method.starts_with("Runtime.")
                        && e.session_id.as_deref() == Some(p.session.as_str())
                        && e.seq >= since
                }),
                || {
                    format!(
                        "cdp.events gave events outside its filter: {:?}",
                        got.events
                    )
                },
            )?;
            ensure(
                got.events.iter().any(|e| {
                    e.method == "Runtime.consoleAPICalled"
                        && e.params["args"][0]["value"] == "conformance page up"
                }),
                || "the page's console.log was not among its Runtime events".into(),
            )?;
            let again =
                p.t.call(
                    p.c,
                    &CdpEventsParams {
                        since: Some(got.next),
                        methods: Some(vec!["Runtime.consoleAPICalled".into()]),
                        session_id: Some(p.session.clone()),
                        ..Default::default()
                    },
                )
                .await?;
            ensure(again.events.is_empty(), || {
                format!(
                    "a read from the last one's next gave old events again: {:?}",
                    again.events
                )
            })
        })
    })
    .await
}

pub async fn refuses_in_words(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    match send(t, c, "Conformance.noSuchMethod", json!({}), None).await {
        Ok(v) => return fail(format!("an unknown CDP method was answered: {v}")),
        Err(e) => {
            ensure(e.kind() == Some(ErrorKind::Invalid), || {
                format!(
                    "an unknown CDP method gave {e} (kind {:?}), not invalid",
                    e.kind()
                )
            })?;
            ensure(
                e.to_string().starts_with("Conformance.noSuchMethod: "),
                || format!("an unknown CDP method's words do not start with it: {e}"),
            )?;
        }
    }
    let r = t
        .try_call(
            c,
            &CdpSendParams {
                method: "Browser.getVersion".into(),
                timeout_ms: Some(0),
                ..Default::default()
            },
        )
        .await;
    match r {
        Ok(_) => return fail("cdp.send with timeoutMs 0 was answered"),
        Err(e) => ensure(
            e.kind() == Some(ErrorKind::Invalid) && e.to_string().contains("timeoutMs"),
            || format!("cdp.send with timeoutMs 0 gave {e}, not invalid naming timeoutMs"),
        )?,
    }
    let r = t
        .try_call(
            c,
            &CdpEventsParams {
                max: Some(0),
                ..Default::default()
            },
        )
        .await;
    match r {
        Ok(_) => return fail("cdp.events with max 0 was answered"),
        Err(e) => ensure(
            e.kind() == Some(ErrorKind::Invalid) && e.to_string().contains("max"),
            || format!("cdp.events with max 0 gave {e}, not invalid naming max"),
        )?,
    }
    // Still answering.
    t.call(c, &PingParams {}).await?;
    must(t, c, "Browser.getVersion", json!({}), None).await?;
    Ok(())
}

/// With network none the browser reaches nothing outside the computer.
pub async fn network_none(t: &Ctx) -> Result<(), Outcome> {
    with_page(t, |p| {
        Box::pin(async move {
            let nav = must(
                p.t,
                p.c,
                "Page.navigate",
                json!({"url": "http://1.1.1.1/"}),
                Some(&p.session),
            )
            .await?;
            match nav.get("errorText").and_then(Value::as_str) {
                Some(e) if e.starts_with("net::") => Ok(()),
                _ => fail(format!(
                    "with network none, a page on 1.1.1.1 was navigated to: {nav}"
                )),
            }
        })
    })
    .await
}

/// The live view (group stream): a URL a person opens, handed over by the
/// provider and never shown (the case's words hold no part of it).
pub async fn live_view(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let view = crate::ctx::bounded(
        "the live view",
        t.bounds.cleanup,
        t.provider.live_view(&c.computer, &t.cancel),
    )
    .await
    .map_err(|e| Outcome::Fail(format!("live_view failed: {}", e.message)))?;
    let url = view.expose();
    ensure(
        ["https://", "http://", "wss://", "ws://"]
            .iter()
            .any(|s| url.starts_with(s))
            && url.len() > 10,
        || "the live view is not an http(s) or ws(s) URL".into(),
    )?;
    ensure(!format!("{view:?}").contains(url), || {
        "the live view's Debug shows the URL".into()
    })
}
