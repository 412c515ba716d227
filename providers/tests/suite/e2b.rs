//! The E2B provider against the fake E2B (computer-fakes' e2b), whose
//! sandboxes are bounded Docker containers: a computer made, used,
//! listed, extended and released, and the faults E2B shows (a lagging
//! listing, a slow delete, a cut stream, a lost create, a 429), with the
//! canary key and envd's token in no words or log line.

use computer_fakes::e2b::FakeE2b;
use computer_fakes::vendor_box::LABEL;
use computer_providers::e2b::{E2bProvider, E2bSettings};
use computer_providers::provider::{Configure, Provider};
use computer_providers::settings::HostDefaults;
use computer_providers::types::{ComputerSpec, ErrorCode, Labels, Release};
use computer_providers::vendor::Secret;
use computerd::client::{ComputerExt, WriteFileOptions};
use computerd::protocol::{Group, MachineKind, ProcessStartParams, ScreenShotParams, SettingKind};
use tokio_util::sync::CancellationToken;

use super::support::{Boxes, capture, lost_create, run, text, used_listed_attached};

const KEY: &str = "e2b_canary_key_0f9e8d";

struct Rig {
    fake: FakeE2b,
    provider: E2bProvider,
    boxes: Boxes,
}

async fn rig(name: &str) -> Option<Rig> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let fake = FakeE2b::start(&env.docker, &env.image, KEY, &owner)
        .await
        .unwrap();
    let provider = provider_of(
        &fake,
        &env,
        E2bSettings::default(),
        &HostDefaults::default(),
    );
    let boxes = Boxes {
        docker: env.docker,
        owner,
    };
    Some(Rig {
        fake,
        provider,
        boxes,
    })
}

/// A provider of `fake` with `settings` beside the fake's URLs and key.
fn provider_of(
    fake: &FakeE2b,
    env: &computer_testkit::DockerEnv,
    settings: E2bSettings,
    host: &HostDefaults,
) -> E2bProvider {
    E2bProvider::configure(
        E2bSettings {
            api_key: Some(Secret::new(KEY)),
            api_url: Some(fake.url().into()),
            envd_url: Some(fake.url().into()),
            computerd: Some(env.computerd.clone()),
            ..settings
        },
        host,
    )
    .unwrap()
}

impl Rig {
    async fn close(self) {
        self.fake.close().await;
        self.boxes.assert_none().await;
    }
}

fn labelled(v: &str) -> ComputerSpec {
    let mut s = super::support::labelled(v);
    s.max_lifetime_ms = Some(1_200_000);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_e2b_computer_is_made_used_extended_and_released_and_no_secret_is_told() {
    let (logs, _guard) = capture();
    let Some(r) = rig("e2b-life").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // A listing that lags, a delete that reads back twice, a 429 once.
    r.fake.knobs(|k| {
        k.list_lag = 2;
        k.delete_polls = 2;
        k.rate_limit = Some(1);
    });
    let made = r.provider.create(&labelled("life"), &cancel).await.unwrap();
    let c = &made.computer;
    assert_eq!(
        (
            c.provider.as_str(),
            c.home.as_deref(),
            c.user.as_deref(),
            c.running
        ),
        ("e2b", Some("/work"), Some("2510:2510"), true)
    );
    assert_eq!(made.network.as_ref().unwrap().kind.to_string(), "none");

    let (listed, by_id) = used_listed_attached(&r.provider, c, &cancel).await;

    let moved = r.provider.extend(c, 900_000, &cancel).await.unwrap();
    assert!(moved > c.deadline, "{moved} is not past {}", c.deadline);
    let e = r.provider.extend(c, 1_300_000, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        (ErrorCode::Limit, Some("ttl"))
    );

    r.provider
        .release(c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(r.fake.sandboxes().is_empty());
    let e = r.provider.connect(c, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone);

    // Network none was read from inside at create and at attach.
    let inside = "read from inside: none of 5 answered, lo alone";
    let read = format!("{:?} {:?}", made.network, by_id.network);
    assert_eq!(read.matches(inside).count(), 2, "{read}");
    let logged = logs.text();
    let said = format!("{made:?} {by_id:?} {listed:?} {e:?} {logged}");
    assert!(!said.contains(KEY), "the key was told");
    let tokens = r.fake.tokens();
    assert!(!tokens.is_empty());
    for t in &tokens {
        assert!(!said.contains(t.as_str()), "an envd token was told");
    }
    r.close().await;
}

/// E2B's pause keeps a computer: paused, it lists as paused and is
/// refused a connection in words; resumed (E2B's connect), the file
/// written before the pause is there, a counter started before it goes on
/// (its process was kept, not restarted), and the deadline is the one it
/// had. (The fake does not freeze programs while paused: E2B's snapshot
/// does.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_e2b_computer_keeps_its_files_and_goes_on_when_resumed() {
    let Some(r) = rig("e2b-pause").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r
        .provider
        .create(&labelled("pause"), &cancel)
        .await
        .unwrap();
    let c = &made.computer;
    assert!(r.provider.can_pause());
    let conn = r.provider.connect(c, &cancel).await.unwrap();
    let wrote = run(
        &conn.client,
        "printf 'kept across the pause\\n' > /work/kept.txt && echo 0 > /work/n",
    )
    .await;
    assert_eq!(wrote.exit_code, Some(0), "{}", text(&wrote));
    // A process outlives its connection: a counter, each count written
    // aside and renamed into place.
    conn.client
        .call_typed(&ProcessStartParams {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "i=0; while :; do i=$((i+1)); echo $i > /work/n.tmp && mv /work/n.tmp /work/n; sleep 0.1; done".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    conn.client.close();
    let count = |client| async move {
        let r = run(client, "cat /work/n").await;
        text(&r).trim().parse::<u64>().unwrap()
    };

    r.provider.pause(c, &cancel).await.unwrap();
    let listed = r.provider.list(&c.labels, &cancel).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|l| (l.running, l.paused))
            .collect::<Vec<_>>(),
        vec![(true, true)]
    );
    let e = r.provider.connect(c, &cancel).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.clone()),
        (
            ErrorCode::Refused,
            format!(
                "E2B sandbox {} is paused: resume it first (computer_resume)",
                c.id
            )
        )
    );
    r.provider.resume(c, &cancel).await.unwrap();
    let conn = r.provider.connect(c, &cancel).await.unwrap();
    let after = count(&conn.client).await;
    assert!(after > 0, "the counter never ran");
    let kept = run(&conn.client, "cat /work/kept.txt").await;
    assert_eq!(text(&kept), "kept across the pause\n");
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert!(
        count(&conn.client).await > after,
        "the counter did not go on"
    );
    conn.client.close();
    let back = r.provider.list(&c.labels, &cancel).await.unwrap();
    assert!(!back[0].paused && back[0].running);
    assert!(
        back[0].deadline <= c.deadline,
        "{} is past the deadline it had, {}",
        back[0].deadline,
        c.deadline
    );
    r.provider
        .release(c, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_is_lost_is_found_by_its_label_and_killed() {
    let Some(r) = rig("e2b-lost").await else {
        return;
    };
    r.fake.knobs(|k| {
        k.lose_create = true;
        k.list_lag = 1;
    });
    let e = lost_create(
        &r.provider,
        || r.fake.creates(),
        || r.fake.sandboxes().len(),
        "create label",
        "killed",
    )
    .await;
    assert!(!e.message.contains(KEY));
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_cut_mid_envelope_fails_the_connection_in_words_and_the_next_one_works() {
    let Some(r) = rig("e2b-cut").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r.provider.create(&labelled("cut"), &cancel).await.unwrap();
    r.fake.knobs(|k| k.cut_stream = Some(9));
    let e = r
        .provider
        .connect(&made.computer, &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unreachable, "{}", e.message);
    let conn = r.provider.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn.client, "echo ok").await), "ok\n");
    conn.client.close();
    r.provider
        .release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}

#[tokio::test]
async fn a_wrong_key_is_one_line_naming_the_variable_and_makes_nothing() {
    let Some(r) = rig("e2b-key").await else {
        return;
    };
    let wrong = E2bProvider::configure(
        E2bSettings {
            api_key: Some(Secret::new("not_the_key")),
            api_url: Some(r.fake.url().into()),
            computerd: Some("/x".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let found = wrong
        .test_connection(&CancellationToken::new())
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert!(found.1.contains("COMPUTER_MCP_E2B_API_KEY"), "{found:?}");
    assert!(!found.0.contains("not_the_key"));
    let ok = r
        .provider
        .test_connection(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(ok.found, Ok("reached; 0 sandboxes of computer-mcp".into()));
    let e = wrong
        .create(&labelled("k"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(r.fake.sandboxes().is_empty());
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_listing_a_slow_delete_and_a_429_are_waited_out_and_the_sweep_keeps_the_living() {
    let Some(r) = rig("e2b-lag").await else {
        return;
    };
    let cancel = CancellationToken::new();
    r.fake.knobs(|k| {
        k.list_lag = 3;
        k.delete_polls = 3;
    });
    let made = r.provider.create(&labelled("lag"), &cancel).await.unwrap();
    let c = &made.computer;
    // Create returned once the listing showed it steadily: a list right
    // after finds it, though the listing left it out three times.
    let listed = r.provider.list(&Labels::new(), &cancel).await.unwrap();
    assert_eq!(
        listed.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        [c.id.as_str()]
    );
    // A 429 is waited out by the Retry-After E2B asks for (1 s here).
    r.fake.knobs(|k| k.rate_limit = Some(1));
    let t = std::time::Instant::now();
    assert_eq!(
        r.provider
            .list(&Labels::new(), &cancel)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(1),
        "the 429 was asked again after {:?}",
        t.elapsed()
    );
    // The sweep deletes only computers past their deadline.
    assert_eq!(
        r.provider.sweep(&cancel).await.unwrap(),
        Vec::<String>::new()
    );
    // A release returns only once E2B reads the sandbox gone, though it
    // reads back three times after the kill.
    r.provider
        .release(c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(r.fake.sandboxes().is_empty(), "release returned early");
    assert!(
        r.provider
            .list(&Labels::new(), &cancel)
            .await
            .unwrap()
            .is_empty()
    );
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_and_the_bridge_carry_no_connect_timeout_which_would_kill_them() {
    use computer_providers::e2b::envd::{Envd, Event};
    let Some(r) = rig("e2b-timeout").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r.provider.create(&labelled("t"), &cancel).await.unwrap();
    let conn = r.provider.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn.client, "echo ok").await), "ok\n");
    let starts = r.fake.starts();
    // Init, each bridge (create's hello and this connection) none; the
    // bounded runs (install, checks) their own bound.
    assert!(
        starts.iter().filter(|s| s.is_none()).count() >= 3,
        "{starts:?}"
    );
    assert_eq!(starts.last(), Some(&None), "the bridge sent a timeout");
    assert!(starts.iter().any(Option::is_some), "{starts:?}");

    // envd kills a process whose stream carried one, at that bound.
    let tokens = r.fake.tokens();
    let envd = Envd {
        http: computer_providers::vendor::http_client("E2B", false).unwrap(),
        base: r.fake.url().into(),
        sandbox: made.computer.id.clone(),
        token: Some(Secret::new(tokens.last().unwrap().clone())),
    };
    let t = std::time::Instant::now();
    let (_pid, mut stream) = envd
        .start(
            &["sleep".into(), "30".into()],
            false,
            Some(std::time::Duration::from_millis(500)),
        )
        .await
        .unwrap();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        loop {
            match stream.next().await {
                Ok(Some(Event::End { exit_code, .. })) => return Some(exit_code),
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return None,
            }
        }
    })
    .await
    .expect("a process with a Connect-Timeout-Ms outlived it");
    assert!(t.elapsed() < std::time::Duration::from_secs(15));
    assert_ne!(ended, Some(0), "the sleep was not killed");
    // The bridge, older than that bound, still answers.
    assert_eq!(text(&run(&conn.client, "echo still").await), "still\n");
    conn.client.close();
    r.provider
        .release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}

/// A desktop of the fake's desktop template (the desktop test image): its
/// init starts the X server, hello declares the screen, a shot is the
/// screen's size and shows what a program draws; a template without X is
/// refused in words and its sandbox killed. `CMCP_KEEP_SHOTS=DIR` keeps
/// the shots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_e2b_desktop_of_the_desktop_template_shows_its_screen_and_a_template_without_x_is_refused()
 {
    let Some(env) = computer_testkit::docker_env().await else {
        return;
    };
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    let fixture = env.computerd.with_file_name("computerd-x11-fixture");
    if !computer_testkit::need(
        "docker",
        env.docker.inspect_image(&image).await.is_ok() && fixture.is_file(),
        &format!(
            "the desktop image {image} or the static {} is not here",
            fixture.display()
        ),
    ) {
        return;
    }
    let owner = computer_testkit::marker("e2b-desktop");
    let fake = FakeE2b::start(&env.docker, &env.image, KEY, &owner)
        .await
        .unwrap();
    fake.template("desktop", &image);
    let host = HostDefaults {
        kind: SettingKind::Desktop,
        screen: "1024x768".parse().unwrap(),
        ..Default::default()
    };
    let p = provider_of(&fake, &env, E2bSettings::default(), &host);
    let cancel = CancellationToken::new();
    let mut spec = labelled("desk");
    spec.kind = SettingKind::Desktop;
    let made = p.create(&spec, &cancel).await.unwrap();
    assert_eq!(made.computer.image.as_deref(), Some("desktop"));
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, MachineKind::Desktop);
    assert!(
        conn.hello.groups.contains(&Group::Screen),
        "{:?}",
        conn.hello.groups
    );
    let shot = || async {
        let s = conn
            .client
            .call_typed(&ScreenShotParams::default())
            .await
            .unwrap();
        assert_eq!((s.screen_width, s.screen_height), (1024, 768));
        assert_eq!(&s.data.0[1..4], b"PNG");
        s.data.0
    };
    let bare = shot().await;
    // The fixture paints four quadrants at (0, 0): the next shot differs.
    conn.client
        .write_file(
            "/work/fixture",
            &std::fs::read(&fixture).unwrap(),
            WriteFileOptions {
                mode: Some(0o755),
                parents: false,
            },
        )
        .await
        .unwrap();
    conn.client
        .call_typed(&ProcessStartParams {
            argv: vec![
                "/work/fixture".into(),
                "--log".into(),
                "/work/fixture.log".into(),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let drawn = loop {
        let now = shot().await;
        if now != bare || std::time::Instant::now() > until {
            break now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    if let Ok(keep) = std::env::var("CMCP_KEEP_SHOTS") {
        let _ = std::fs::write(std::path::Path::new(&keep).join("e2b-desktop.png"), &drawn);
    }
    assert_ne!(drawn, bare, "the fixture's window never showed");
    conn.client.close();
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();

    // The sandbox template has no X: refused in words, nothing left.
    let bare_template = provider_of(
        &fake,
        &env,
        E2bSettings {
            desktop_template: Some("base".into()),
            ..Default::default()
        },
        &host,
    );
    let e = bare_template.create(&spec, &cancel).await.unwrap_err();
    assert!(
        e.message
            .contains("the E2B template base has no X server (/usr/bin/Xvfb)")
            && e.message.contains("was killed"),
        "{}",
        e.message
    );
    assert!(fake.sandboxes().is_empty());
    fake.close().await;
    let left =
        computer_testkit::labelled_containers(&env.docker, &format!("{LABEL}={owner}")).await;
    assert!(left.is_empty(), "a box was left");
}
