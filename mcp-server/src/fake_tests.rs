//! The server's session logic against the scriptable fake provider: no
//! root, no namespaces, no Docker, so these run on any machine. Lazy,
//! single-flight creation; release at the session's end; a dead computer
//! answered in words, then replaced; a caller cancelled while its computer
//! is made; a hanging creation that shutdown does not wait on forever;
//! bounds refused in words.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use computer_fakes::{FakeProvider, Op, Script};
use computer_providers::{Provider, ProviderError, label};
use tokio_util::sync::CancellationToken;

use crate::app::{App, Ask, ForCall, Principal};
use crate::config::{self, Config};
use crate::session::Session;

fn config(argv: &[&str]) -> Config {
    let mut all = vec!["computer-mcp"];
    all.extend_from_slice(argv);
    let parsed = match config::parse_from(all) {
        Ok(p) => p,
        Err(_) => panic!("the test's command line {argv:?} did not parse"),
    };
    Config::resolve(&parsed).unwrap()
}

fn app_with(fake: &FakeProvider, argv: &[&str]) -> Arc<App> {
    App::new(Arc::new(fake.clone()), config(argv))
}

fn me() -> Principal {
    Principal::of_token("a-token-for-the-fake-tests")
}

/// The computer `session`'s next call runs on, asked by a caller that
/// never cancels.
async fn computer_of(app: &Arc<App>, session: &Session) -> Result<ForCall, String> {
    session.slot.computer(app, &CancellationToken::new()).await
}

/// A fake provider whose creations go as `create` says (else at once), a
/// server on it from `argv`, and a session of [`me`] there.
fn session_on_fake(
    create: Option<Script>,
    argv: &[&str],
) -> (FakeProvider, Arc<App>, Arc<Session>) {
    let fake = FakeProvider::new();
    if let Some(script) = create {
        fake.on(Op::Create, script, None);
    }
    let app = app_with(&fake, argv);
    let session = app.new_session(&me()).unwrap();
    (fake, app, session)
}

#[tokio::test]
async fn concurrent_first_calls_share_one_creation() {
    let (fake, app, session) =
        session_on_fake(Some(Script::Delay(Duration::from_millis(200))), &[]);
    let cancel = CancellationToken::new();
    let calls = (0..5).map(|_| session.slot.computer(&app, &cancel));
    let got = futures::future::join_all(calls).await;
    let handles: Vec<String> = got
        .into_iter()
        .map(|r| r.unwrap().entry.handle.clone())
        .collect();
    assert!(handles.iter().all(|h| h == &handles[0]), "{handles:?}");
    assert_eq!(fake.count(Op::Create), 1);
    assert_eq!(fake.count(Op::Connect), 1);
    // Nothing was made before the first call asked.
    let lazy = app.new_session(&me()).unwrap();
    assert_eq!(fake.count(Op::Create), 1);
    lazy.end().await;
    assert_eq!(fake.count(Op::Create), 1);
}

#[tokio::test]
async fn a_sessions_computer_is_released_when_it_ends() {
    let (fake, app, session) = session_on_fake(None, &[]);
    let c = computer_of(&app, &session).await.unwrap();
    let id = c.entry.computer.id.clone();
    assert_eq!(
        c.entry.computer.labels.get(label::SESSION),
        Some(&session.id)
    );
    session.end().await;
    assert_eq!(fake.count(Op::Release), 1);
    assert!(fake.computers().is_empty(), "{:?}", fake.computers());
    assert!(
        fake.calls()
            .iter()
            .any(|x| x.op == Op::Release && x.on.as_deref() == Some(id.as_str()))
    );
    // A call after the end makes nothing.
    let e = computer_of(&app, &session).await.err().unwrap();
    assert_eq!(e, "this session has ended");
    assert_eq!(fake.count(Op::Create), 1);
}

#[tokio::test]
async fn a_dead_computer_is_answered_in_words_then_replaced() {
    let (fake, app, session) = session_on_fake(None, &[]);
    let cancel = CancellationToken::new();
    let first = session.slot.computer(&app, &cancel).await.unwrap();
    fake.kill(&first.entry.computer.id);
    let e = session.slot.computer(&app, &cancel).await.err().unwrap();
    assert!(
        e.ends_with("stopped answering (ended from outside, or crashed): its files and processes are gone. The next tool call makes a new computer."),
        "{e}"
    );
    let second = session.slot.computer(&app, &cancel).await.unwrap();
    assert_ne!(second.entry.handle, first.entry.handle);
    let note = second.note.unwrap();
    assert!(note.starts_with("Note: the computer default (c-"), "{note}");
    assert!(note.contains("so a new computer (default (c-"), "{note}");
    assert_eq!(fake.count(Op::Create), 2);
    session.end().await;
    app.release_all().await;
    assert!(fake.computers().is_empty(), "{:?}", fake.computers());
}

#[tokio::test]
async fn a_caller_cancelled_during_create_stops_waiting_and_the_creation_serves_the_next() {
    let (fake, app, session) =
        session_on_fake(Some(Script::Delay(Duration::from_millis(400))), &[]);
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let e = session.slot.computer(&app, &cancel).await.err().unwrap();
    assert_eq!(
        e,
        "the tool call was cancelled while its computer was being made (the making goes on, for the next call)"
    );
    let next = computer_of(&app, &session).await.unwrap();
    assert!(next.note.is_none());
    assert_eq!(fake.count(Op::Create), 1);
    session.end().await;
    assert!(fake.computers().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_hanging_creation_holds_neither_the_caller_nor_shutdown_forever() {
    let (fake, app, session) = session_on_fake(Some(Script::Hang), &[]);
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        canceller.cancel();
    });
    let e = session.slot.computer(&app, &cancel).await.err().unwrap();
    assert!(e.starts_with("the tool call was cancelled"), "{e}");
    // Shutdown waits for the creation at most RELEASE_WAIT, then goes on.
    let started = tokio::time::Instant::now();
    app.release_all().await;
    let waited = started.elapsed();
    assert!(
        waited >= crate::app::RELEASE_WAIT && waited < crate::app::RELEASE_WAIT * 2,
        "{waited:?}"
    );
    assert!(fake.computers().is_empty());
}

#[tokio::test]
async fn a_failed_create_is_said_in_words_and_the_next_call_tries_again() {
    let fake = FakeProvider::new();
    fake.on(
        Op::Create,
        Script::Fail(ProviderError::refused("the vendor is out of computers")),
        Some(1),
    );
    let app = app_with(&fake, &[]);
    let session = app.new_session(&me()).unwrap();
    let cancel = CancellationToken::new();
    let e = session.slot.computer(&app, &cancel).await.err().unwrap();
    assert_eq!(
        e,
        "making a computer failed (Refused): the vendor is out of computers"
    );
    assert!(session.slot.computer(&app, &cancel).await.is_ok());
    assert_eq!(fake.count(Op::Create), 2);
    session.end().await;
}

#[tokio::test]
async fn bounds_are_refused_in_words_naming_the_limit() {
    let (fake, app, session) = session_on_fake(None, &["serve", "--max-computers", "1"]);
    computer_of(&app, &session).await.unwrap();
    let e = app
        .make(Ask {
            principal: me(),
            name: Some("build".into()),
            default: None,
            session: None,
            spec: app.config.spec().unwrap(),
        })
        .await
        .err()
        .unwrap();
    assert!(
        e.starts_with("you hold 1 computers, the most one caller may (--max-computers 1); release one with computer_release first: c-"),
        "{e}"
    );
    assert_eq!(fake.count(Op::Create), 1);
    session.end().await;
    assert!(fake.computers().is_empty());
}

/// A release that ends while the provider answers a listing: the listing
/// still names the computer, yet it counts against its caller no more
/// (the set being released is read from before the listing too). CI once
/// refused a caller at its bound for exactly this.
#[tokio::test]
async fn a_release_that_ends_during_a_listing_does_not_count() {
    let (fake, app, session) = session_on_fake(None, &["serve", "--max-computers", "1"]);
    let first = computer_of(&app, &session).await.unwrap().entry;
    fake.on(
        Op::Release,
        Script::Delay(Duration::from_millis(50)),
        Some(1),
    );
    fake.on(Op::List, Script::Stale(Duration::from_millis(300)), Some(1));
    assert!(app.retire(&first, "the test ended it", false));
    let app2 = Arc::clone(&app);
    let release =
        tokio::spawn(async move { app2.release_retired(&first, "the test ended it").await });
    let mine = app.principal_computers(&me()).await.unwrap();
    release.await.unwrap();
    let handles: Vec<&str> = mine.iter().map(|c| c.handle.as_str()).collect();
    assert!(handles.is_empty(), "still counted: {handles:?}");
    assert!(fake.computers().is_empty());
}

/// A provider that cannot pause says so in words naming itself, and the
/// computer runs on, its calls answered.
#[tokio::test]
async fn a_pause_where_the_provider_has_none_is_refused_naming_it() {
    let (fake, app, session) = session_on_fake(None, &[]);
    let entry = computer_of(&app, &session).await.unwrap().entry;
    let e = app.pause(&entry, true).await.unwrap_err();
    assert!(
        e.contains(&format!(
            "the {} provider cannot pause a computer",
            fake.id()
        )),
        "{e}"
    );
    assert!(!entry.is_paused());
    assert!(crate::server::fleet_policy(&app).pause == fake.can_pause());
    session.end().await;
}

/// A provider that cannot snapshot says so in words naming itself; the
/// tool is not listed there, and a fork finds no snapshot.
#[tokio::test]
async fn a_snapshot_where_the_provider_has_none_is_refused_naming_it() {
    let (fake, app, session) = session_on_fake(None, &[]);
    let entry = computer_of(&app, &session).await.unwrap().entry;
    let principal = entry.principal.clone();
    let e = app.snapshot(&principal, &entry, "s1").await.unwrap_err();
    assert!(
        e.contains(&format!(
            "the {} provider cannot snapshot computers",
            fake.id()
        )),
        "{e}"
    );
    assert!(!crate::server::fleet_policy(&app).snapshot);
    let e = app.own_snapshot(&principal, "s1").await.unwrap_err();
    assert!(e.contains("you have no snapshot \"s1\""), "{e}");
    session.end().await;
}

#[tokio::test(start_paused = true)]
async fn a_creation_that_never_answers_is_given_up_in_words() {
    let (fake, app, session) = session_on_fake(Some(Script::Hang), &[]);
    let started = tokio::time::Instant::now();
    let e = computer_of(&app, &session).await.err().unwrap();
    assert!(e.contains("took over 180 s and was given up"), "{e}");
    assert!(started.elapsed() >= crate::app::CREATE_WAIT);
    // One create was asked, and given up.
    assert_eq!(fake.count(Op::Create), 1);
}

/// One token, one provider state, servers of two kinds: each makes its own
/// default computer (a browser server never adopts a sandbox's), a server
/// of the same kind finds its kind's again, and each lists as resources
/// only the computers of its kind.
#[tokio::test]
async fn servers_of_two_kinds_on_one_token_make_their_own_defaults() {
    use computerd::protocol::SettingKind;
    let fake = FakeProvider::new();
    let sandbox = app_with(&fake, &[]);
    let browser = app_with(&fake, &["serve", "--kind", "browser"]);
    let cancel = CancellationToken::new();
    let p = me();
    let a = sandbox
        .principal_slot(&p)
        .computer(&sandbox, &cancel)
        .await
        .unwrap();
    let b = browser
        .principal_slot(&p)
        .computer(&browser, &cancel)
        .await
        .unwrap();
    assert_ne!(a.entry.computer.id, b.entry.computer.id);
    assert_eq!(fake.count(Op::Create), 2);
    assert_eq!(a.entry.kind, SettingKind::Sandbox);
    assert_eq!(b.entry.kind, SettingKind::Browser);
    // Another sandbox server (a restart, a replica) finds the sandbox's.
    let again = app_with(&fake, &[]);
    let c = again
        .principal_slot(&p)
        .computer(&again, &cancel)
        .await
        .unwrap();
    assert_eq!(c.entry.computer.id, a.entry.computer.id);
    assert_eq!(fake.count(Op::Create), 2);
    // The other kind's handle is not one this server serves.
    let which = computer_tools::fleet::Which::Handle(a.entry.handle.clone());
    assert!(browser.find(&p, &which).await.is_err());
    let caller = crate::app::Caller {
        principal: p.clone(),
        session: None,
    };
    let listed = |resources: Vec<rmcp::model::Resource>| -> Vec<String> {
        resources
            .into_iter()
            .map(|r| r.uri)
            .filter(|u| u.starts_with("computer://"))
            .collect()
    };
    assert_eq!(
        listed(crate::resources::list(&browser, &caller).await),
        vec![format!("computer://{}/info", b.entry.handle)]
    );
    assert_eq!(
        listed(crate::resources::list(&sandbox, &caller).await),
        vec![format!("computer://{}/info", a.entry.handle)]
    );
    for app in [sandbox, browser, again] {
        app.release_all().await;
    }
}

/// computer_release answers once the computer counts against its caller
/// no more, before the provider's release (init's orderly shutdown) is
/// done; the server's bound still counts it until it is gone, so the next
/// creation at that bound waits for it rather than run one computer over.
#[tokio::test]
async fn a_release_answers_before_the_provider_is_done_and_the_server_bound_holds() {
    use computer_tools::fleet::{Fleet, Which};
    let fake = FakeProvider::new();
    let app = app_with(
        &fake,
        &[
            "serve",
            "--max-computers",
            "1",
            "--max-server-computers",
            "1",
        ],
    );
    let ask = || Ask {
        principal: me(),
        name: Some("build".into()),
        default: None,
        session: None,
        spec: app.config.spec().unwrap(),
    };
    app.make(ask()).await.unwrap();
    fake.on(
        Op::Release,
        Script::Delay(Duration::from_millis(300)),
        Some(1),
    );
    let fleet = crate::app::CallerFleet {
        app: Arc::clone(&app),
        caller: crate::app::Caller {
            principal: me(),
            session: None,
        },
        peer: None,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let gone = fleet.release(Which::Name("build".into())).await.unwrap();
    assert_eq!(gone.computer.name.as_deref(), Some("build"));
    // Answered while the provider still has it, and the caller holds none.
    assert_eq!(
        fake.computers().len(),
        1,
        "the release waited for the provider"
    );
    assert!(app.principal_computers(&me()).await.unwrap().is_empty());
    // The next one is made once the first is gone: never two at once.
    app.make(ask()).await.unwrap();
    assert_eq!(fake.count(Op::Release), 1);
    assert_eq!(fake.computers().len(), 1, "one over the server's bound");
    app.release_all().await;
    assert!(fake.computers().is_empty());
}
