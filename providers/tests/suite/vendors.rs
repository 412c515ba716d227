//! The Browserbase and Kernel providers against fakes of ours (the
//! `computer_fakes::vendor`) whose browsers are a real headless
//! Chromium: create, CDP, list and attach, release read back; a create
//! whose answer is lost leaves nothing; 401/429/500 in words; and the
//! fake's canary CDP URL in no error, ref, list, Debug or log line.
//! Needs Debian's chromium (skips without it unless
//! COMPUTER_MCP_REQUIRE has `chromium`).

use std::sync::Arc;

use computer_fakes::vendor::{FakeVendor, Kind, Lose, Route};
use computer_providers::browserbase::{BrowserbaseProvider, BrowserbaseSettings};
use computer_providers::kernel::{KernelProvider, KernelSettings};
use computer_providers::vendor::{CREATE_LABEL, Secret};
use computer_providers::{
    AttachBy, ComputerRef, ComputerSpec, Configure, ErrorCode, HostDefaults, Labels, NetworkPolicy,
    Provider, ProviderError, Release, Sources, provider_for, with_provider_flags,
};
use computer_testkit::need_chromium;
use computerd::client::ComputerClient;
use computerd::protocol::{Group, MachineKind, SettingKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::support::{self, capture};

/// One test per vendor, each running `body` against that vendor's fake.
macro_rules! per_vendor {
    ($body:ident: $browserbase:ident, $kernel:ident) => {
        #[tokio::test]
        async fn $browserbase() {
            $body(Kind::Browserbase).await;
        }

        #[tokio::test]
        async fn $kernel() {
            $body(Kind::Kernel).await;
        }
    };
}

fn id_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Browserbase => "browserbase",
        Kind::Kernel => "kernel",
    }
}

/// The provider as the registry makes it from flags.
fn from_registry(kind: Kind, url: &str, key: &str) -> Box<dyn Provider> {
    let id = id_of(kind);
    let m = with_provider_flags(clap::Command::new("t").no_binary_name(true))
        .try_get_matches_from([
            format!("--{id}-api-url"),
            url.to_string(),
            format!("--{id}-api-key"),
            key.to_string(),
        ])
        .unwrap();
    provider_for(
        id,
        &Sources {
            matches: &m,
            tables: None,
        },
        &HostDefaults::default(),
    )
    .unwrap()
}

fn spec(labels: &[(&str, &str)]) -> ComputerSpec {
    let mut s = ComputerSpec::sandbox(10 * 60_000);
    s.kind = SettingKind::Browser;
    s.network = NetworkPolicy::Open;
    s.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s
}

/// No canary, key or vendor words in `text`.
fn clean(fake: &FakeVendor, what: &str, text: &str) {
    assert!(
        !text.contains(fake.canary()),
        "{what} holds the canary: {text}"
    );
    assert!(!text.contains(fake.key()), "{what} holds the key: {text}");
    assert!(
        !text.contains("vendor-words"),
        "{what} holds the vendor's words: {text}"
    );
}

fn clean_error(fake: &FakeVendor, e: &ProviderError) {
    clean(fake, "an error", &e.message);
    clean(fake, "an error's JSON", &serde_json::to_string(e).unwrap());
    clean(fake, "an error's Debug", &format!("{e:?}"));
    assert!(
        !e.message.contains("127.0.0.1"),
        "an error holds the URL: {e}"
    );
}

/// A CDP call that must answer.
async fn send(
    c: &Arc<dyn ComputerClient>,
    method: &str,
    params: Value,
    session: Option<&str>,
) -> Value {
    support::send(c, method, params, session).await.unwrap()
}

async fn made_used_listed_attached_and_released(kind: Kind) {
    if !need_chromium() {
        return;
    }
    let (log, _guard) = capture();
    let fake = FakeVendor::start(kind).await.unwrap();
    // Status lags: a new browser reads PENDING twice, a released one
    // reads running twice more.
    fake.pending_reads(2);
    fake.release_reads(2);
    let p = from_registry(kind, fake.api_url(), fake.key());
    let cancel = CancellationToken::new();
    let caps = p.capabilities();
    assert_eq!(caps.kind, MachineKind::Browser);
    assert_eq!(caps.groups, vec![Group::Cdp, Group::Stream]);
    assert_eq!(caps.release, vec![Release::Delete]);
    assert!(!caps.extend);

    let marker = format!("t{}", std::process::id());
    let s = spec(&[
        ("computer-mcp.session", &marker),
        ("computer-mcp.kind", "browser"),
    ]);
    let made = p.create(&s, &cancel).await.unwrap();
    let r = made.computer.clone();
    assert_eq!(r.provider, id_of(kind));
    assert_eq!(r.labels, s.labels, "the create label is hidden");
    assert!(!r.labels.contains_key(CREATE_LABEL));
    clean(&fake, "the ref", &serde_json::to_string(&r).unwrap());
    clean(&fake, "the ref's Debug", &format!("{r:?}"));
    assert_eq!(fake.live(), vec![r.id.clone()]);

    // CDP through the vendor's URL: the version, and a data: page.
    let conn = p.connect(&r, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, MachineKind::Browser);
    // cdp and stream are the provider's to declare; hello lists neither.
    assert!(conn.hello.groups.is_empty(), "{:?}", conn.hello.groups);
    assert_eq!(p.capabilities().groups, vec![Group::Cdp, Group::Stream]);
    clean(&fake, "the connection's Debug", &format!("{conn:?}"));
    let c = conn.client.clone();
    c.call_value("ping", json!({})).await.unwrap();
    let v = send(&c, "Browser.getVersion", json!({}), None).await;
    assert!(v["product"].as_str().unwrap().contains("Chrome"), "{v}");
    let t = send(
        &c,
        "Target.createTarget",
        json!({"url": "data:text/html,<title>vendor</title><p id=p>from the page</p>"}),
        None,
    )
    .await;
    let a = send(
        &c,
        "Target.attachToTarget",
        json!({"targetId": t["targetId"], "flatten": true}),
        None,
    )
    .await;
    let session = a["sessionId"].as_str().unwrap().to_string();
    let mut text = Value::Null;
    for _ in 0..50 {
        let r = send(
            &c,
            "Runtime.evaluate",
            json!({"expression": "document.getElementById('p') && document.getElementById('p').textContent", "returnByValue": true}),
            Some(&session),
        )
        .await;
        text = r["result"]["value"].clone();
        if text == "from the page" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(text, "from the page");

    // List and attach, by labels and by id; the create label is hidden
    // and never a way to find.
    let mut by = Labels::new();
    by.insert("computer-mcp.session".into(), marker.clone());
    let listed = p.list(&by, &cancel).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, r.id);
    assert_eq!(listed[0].labels, r.labels);
    clean(&fake, "the list", &serde_json::to_string(&listed).unwrap());
    let mut two = by.clone();
    two.insert("computer-mcp.kind".into(), "desktop".into());
    assert!(p.list(&two, &cancel).await.unwrap().is_empty());
    let e = p.list(&Labels::new(), &cancel).await.unwrap_err();
    assert_eq!(e.field.as_deref(), Some("labels"), "{e}");
    let a = p
        .attach(&AttachBy::Labels(by.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(a.id, r.id);
    let a = p
        .attach(&AttachBy::Id(r.id.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!((a.id.as_str(), &a.labels), (r.id.as_str(), &r.labels));
    let mut own = Labels::new();
    own.insert(CREATE_LABEL.into(), "x".into());
    assert!(p.list(&own, &cancel).await.is_err());

    // Release reads back until ended; a second release is a no-op.
    c.close();
    p.release(&r, Release::Delete, &cancel).await.unwrap();
    assert!(fake.live().is_empty(), "{:?}", fake.live());
    p.release(&r, Release::Delete, &cancel).await.unwrap();
    assert!(p.list(&by, &cancel).await.unwrap().is_empty());
    let e = p.connect(&r, &cancel).await.err().unwrap();
    assert_eq!(e.code, ErrorCode::Gone, "{e}");
    clean_error(&fake, &e);
    assert_eq!(fake.creates(), 1);

    let logged = log.text();
    assert!(
        logged.contains("made a browser"),
        "the capture works: {logged}"
    );
    clean(&fake, "the log", &logged);
}

per_vendor!(
    made_used_listed_attached_and_released:
    browserbase_makes_uses_lists_attaches_and_releases_a_browser,
    kernel_makes_uses_lists_attaches_and_releases_a_browser
);

async fn lost_create_leaves_nothing(kind: Kind) {
    if !need_chromium() {
        return;
    }
    let (log, _guard) = capture();
    let fake = FakeVendor::start(kind).await.unwrap();
    let p = from_registry(kind, fake.api_url(), fake.key());
    let cancel = CancellationToken::new();
    for how in [Lose::Status500, Lose::Cut, Lose::Empty] {
        fake.lose_next_create(how);
        let before = fake.creates();
        let e = p
            .create(&spec(&[("computer-mcp.session", "lost")]), &cancel)
            .await
            .err()
            .unwrap();
        assert!(
            e.message
                .contains("no second create was sent; 1 browser carrying its create label was found and released"),
            "{how:?}: {e}"
        );
        assert_eq!(fake.creates(), before + 1, "{how:?}: one create only");
        assert!(fake.live().is_empty(), "{how:?}: {:?}", fake.live());
        clean_error(&fake, &e);
    }
    // A 500 that made nothing: looked for, none found.
    fake.fail(Route::Create, 500);
    let e = p
        .create(&spec(&[("computer-mcp.session", "lost")]), &cancel)
        .await
        .err()
        .unwrap();
    assert!(e.message.contains("answered HTTP 500"), "{e}");
    assert!(
        e.message
            .contains("no browser carrying its create label was found, so none was left"),
        "{e}"
    );
    clean_error(&fake, &e);
    // A cancelled create is an unknown outcome too.
    let stopped = CancellationToken::new();
    stopped.cancel();
    let e = p
        .create(&spec(&[("computer-mcp.session", "lost")]), &stopped)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, ErrorCode::Aborted, "{e}");
    assert!(e.message.contains("no second create was sent"), "{e}");
    assert!(fake.live().is_empty());
    clean(&fake, "the log", &log.text());
}

per_vendor!(
    lost_create_leaves_nothing:
    browserbase_a_create_whose_answer_is_lost_leaves_nothing_and_says_so,
    kernel_a_create_whose_answer_is_lost_leaves_nothing_and_says_so
);

async fn failures_in_words(kind: Kind) {
    if !need_chromium() {
        return;
    }
    let fake = FakeVendor::start(kind).await.unwrap();
    let id = id_of(kind);
    let (create, list) = match kind {
        Kind::Browserbase => (
            "Browserbase's create session call (POST /v1/sessions)",
            "Browserbase's list sessions call (GET /v1/sessions)",
        ),
        Kind::Kernel => (
            "Kernel's create browser call (POST /browsers)",
            "Kernel's list browsers call (GET /browsers)",
        ),
    };
    let cancel = CancellationToken::new();
    let mut by = Labels::new();
    by.insert("computer-mcp.session".into(), "x".into());

    // 401: a refused key makes nothing and names the setting.
    let wrong = from_registry(kind, fake.api_url(), "not-the-key");
    let e = wrong.create(&spec(&[]), &cancel).await.err().unwrap();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.message,
        format!(
            "{create} answered HTTP 401: the API key was refused; check --{id}-api-key (COMPUTER_MCP_{}_API_KEY)",
            id.to_uppercase()
        )
    );
    clean_error(&fake, &e);
    assert!(!e.message.contains("not-the-key"));
    assert_eq!(fake.creates(), 1);
    assert!(fake.live().is_empty());

    let p = from_registry(kind, fake.api_url(), fake.key());
    // 429 on create: made nothing, so nothing is looked for.
    let calls = fake.calls().len();
    fake.fail(Route::Create, 429);
    let e = p.create(&spec(&[]), &cancel).await.err().unwrap();
    assert_eq!(e.code, ErrorCode::Limit);
    assert!(
        e.message
            .starts_with(&format!("{create} answered HTTP 429: ")),
        "{e}"
    );
    assert!(e.message.ends_with("try again later"), "{e}");
    assert_eq!(fake.calls().len(), calls + 1, "no listing after a 4xx");
    clean_error(&fake, &e);

    // 429 and 500 on a list.
    for (status, code) in [(429, ErrorCode::Limit), (500, ErrorCode::Unreachable)] {
        fake.fail(Route::List, status);
        let e = p.list(&by, &cancel).await.unwrap_err();
        assert_eq!(e.code, code, "{e}");
        assert!(
            e.message
                .starts_with(&format!("{list} answered HTTP {status}: ")),
            "{e}"
        );
        assert!(e.message.ends_with("try again later"), "{e}");
        clean_error(&fake, &e);
    }
    // 500 on the read of a connect: the browser still answers after.
    let r = p
        .create(&spec(&[("computer-mcp.session", "x")]), &cancel)
        .await
        .unwrap()
        .computer;
    fake.fail(Route::Get, 500);
    let e = p.connect(&r, &cancel).await.err().unwrap();
    assert!(e.message.contains("answered HTTP 500"), "{e}");
    clean_error(&fake, &e);
    let conn = p.connect(&r, &cancel).await.unwrap();
    conn.client.call_value("ping", json!({})).await.unwrap();
    conn.client.close();
    // A browser the vendor forgot is gone.
    fake.forget(&r.id);
    let e = p.connect(&r, &cancel).await.err().unwrap();
    assert_eq!(e.code, ErrorCode::Gone, "{e}");
    p.release(&r, Release::Delete, &cancel).await.unwrap();
}

per_vendor!(
    failures_in_words:
    browserbase_401_429_500_name_the_call_the_status_and_the_next_step,
    kernel_401_429_500_name_the_call_the_status_and_the_next_step
);

#[tokio::test]
async fn check_refuses_what_a_vendor_browser_cannot_be_before_any_call() {
    if !need_chromium() {
        return;
    }
    for kind in [Kind::Browserbase, Kind::Kernel] {
        let fake = FakeVendor::start(kind).await.unwrap();
        let p = from_registry(kind, fake.api_url(), fake.key());
        let cancel = CancellationToken::new();
        let mut cases: Vec<(&str, ComputerSpec)> = Vec::new();
        let mut s = spec(&[]);
        s.image = Some("firefox".into());
        cases.push(("image", s));
        let mut s = spec(&[]);
        s.lifetime_ms = p.capabilities().max_lifetime_ms + 1;
        cases.push(("lifetime", s));
        let mut s = spec(&[]);
        s.lifetime_ms = 1000;
        cases.push(("lifetime", s));
        let mut s = spec(&[]);
        s.network = NetworkPolicy::None;
        cases.push(("network", s));
        let mut s = spec(&[]);
        s.sizes.memory_mb = Some(512);
        cases.push(("sizes", s));
        let mut s = spec(&[]);
        s.user = Some("1000:1000".into());
        cases.push(("user", s));
        let mut s = spec(&[]);
        s.kind = SettingKind::Sandbox;
        cases.push(("kind", s));
        cases.push(("labels", spec(&[(CREATE_LABEL, "mine")])));
        for (field, s) in cases {
            let e = p.check(&s).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{kind:?}: {e}");
            let e = p.create(&s, &cancel).await.err().unwrap();
            assert_eq!(e.field.as_deref(), Some(field), "{kind:?}: {e}");
        }
        let mut s = spec(&[]);
        s.image = Some("chromium".into());
        p.check(&s).unwrap();
        assert!(fake.calls().is_empty(), "{kind:?}: {:?}", fake.calls());
    }
    // Browserbase keeps '_' for a dot, and 512 characters of metadata.
    let fake = FakeVendor::start(Kind::Browserbase).await.unwrap();
    let p = from_registry(Kind::Browserbase, fake.api_url(), fake.key());
    let e = p.check(&spec(&[("a_b", "x")])).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("labels"), "{e}");
    let long = "v".repeat(250);
    let e = p.check(&spec(&[("a", &long), ("b", &long)])).unwrap_err();
    assert!(e.message.contains("the most is 512"), "{e}");
}

/// A browser made, its live view (which must hold the fake's canary), and
/// the browser released.
async fn live_view_then_release(
    fake: &FakeVendor,
    p: &dyn Provider,
    cancel: &CancellationToken,
) -> (ComputerRef, Secret) {
    let r = p
        .create(&spec(&[("computer-mcp.session", "live")]), cancel)
        .await
        .unwrap()
        .computer;
    let live = p.live_view(&r, cancel).await.unwrap();
    assert!(live.expose().contains(fake.canary()));
    p.release(&r, Release::Delete, cancel).await.unwrap();
    (r, live)
}

#[tokio::test]
async fn settings_and_live_views_keep_their_secrets() {
    if !need_chromium() {
        return;
    }
    let (log, _guard) = capture();
    let fake = FakeVendor::start(Kind::Browserbase).await.unwrap();
    let settings = BrowserbaseSettings {
        api_key: Some(fake.key().into()),
        project_id: None,
        api_url: Some(fake.api_url().into()),
    };
    clean(&fake, "the settings' Debug", &format!("{settings:?}"));
    let p = BrowserbaseProvider::configure(settings, &HostDefaults::default()).unwrap();
    clean(&fake, "the provider's Debug", &format!("{p:?}"));
    let cancel = CancellationToken::new();
    let (r, live) = live_view_then_release(&fake, &p, &cancel).await;
    clean(&fake, "the live view's Debug", &format!("{live:?}"));
    let e = p.live_view(&r, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone, "{e}");

    let fake = FakeVendor::start(Kind::Kernel).await.unwrap();
    let settings = KernelSettings {
        api_key: Some(fake.key().into()),
        api_url: Some(fake.api_url().into()),
    };
    clean(&fake, "the settings' Debug", &format!("{settings:?}"));
    let p = KernelProvider::configure(settings, &HostDefaults::default()).unwrap();
    live_view_then_release(&fake, &p, &cancel).await;
    clean(&fake, "the log", &log.text());
}

#[tokio::test]
async fn a_provider_without_a_key_says_which_setting_to_give() {
    let p = from_registry(Kind::Kernel, "http://127.0.0.1:9", "");
    let cancel = CancellationToken::new();
    let e = p
        .create(&spec(&[("computer-mcp.session", "k")]), &cancel)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.message,
        "Kernel has no API key: give --kernel-api-key (COMPUTER_MCP_KERNEL_API_KEY)"
    );
}

#[tokio::test]
async fn an_unreachable_vendor_is_named_with_the_setting_to_check_and_no_url() {
    for url in ["http://127.0.0.1:9", "https://127.0.0.1:9"] {
        let p = from_registry(Kind::Browserbase, url, "some-key");
        let cancel = CancellationToken::new();
        let e = p
            .create(&spec(&[("computer-mcp.session", "u")]), &cancel)
            .await
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::Unreachable, "{url}: {e}");
        assert_eq!(
            e.message,
            "Browserbase's create session call (POST /v1/sessions) could not connect to Browserbase: check --browserbase-api-url and the network",
            "{url}"
        );
    }
    // https to a server that speaks no TLS: the handshake fails, in words.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = plain.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = plain.accept().await {
            use tokio::io::AsyncWriteExt;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let p = from_registry(Kind::Kernel, &format!("https://127.0.0.1:{port}"), "k");
    let e = p
        .list(
            &[("computer-mcp.session".to_string(), "u".to_string())].into(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "Kernel's list browsers call (GET /browsers) could not connect to Kernel: check --kernel-api-url and the network"
    );
    let e = match BrowserbaseProvider::configure(
        BrowserbaseSettings {
            api_url: Some("ftp://x".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    ) {
        Err(e) => e,
        Ok(_) => panic!("an ftp API URL was taken"),
    };
    assert_eq!(e.field.as_deref(), Some("api_url"), "{e}");
}
