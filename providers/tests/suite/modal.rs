//! The Modal provider against the fake Modal (computer-fakes' modal: two
//! gRPC servers on loopback, each sandbox a bounded Docker container): a
//! computer made, used, listed and terminated, and the faults Modal shows
//! (a lagging listing, a terminate that takes polls, a router JWT that
//! expires during a long exec, a lost create), with the canary token pair
//! and every JWT in no words or log line.

use std::time::Duration;

use computer_fakes::modal::FakeModal;
use computer_providers::modal::{ModalProvider, ModalSettings};
use computer_providers::provider::{Configure, Provider};
use computer_providers::settings::HostDefaults;
use computer_providers::types::{ErrorCode, Labels, Release};
use computer_providers::vendor::Secret;
use tokio_util::sync::CancellationToken;

use super::support::{Boxes, capture, labelled, lost_create, run, text, used_listed_attached};

const TOKEN_ID: &str = "ak-modal-canary-7c21";
const TOKEN_SECRET: &str = "as-modal-canary-9d04";

struct Rig {
    fake: FakeModal,
    provider: ModalProvider,
    boxes: Boxes,
}

fn settings(url: &str, id: &str, secret: &str, computerd: std::path::PathBuf) -> ModalSettings {
    ModalSettings {
        token_id: Some(Secret::new(id)),
        token_secret: Some(Secret::new(secret)),
        server_url: Some(url.into()),
        insecure_plaintext_for_tests: Some(true),
        computerd: Some(computerd),
        ..Default::default()
    }
}

async fn rig(name: &str) -> Option<Rig> {
    let env = computer_testkit::docker_env().await?;
    let owner = computer_testkit::marker(name);
    let fake = FakeModal::start(&env.docker, &env.image, TOKEN_ID, TOKEN_SECRET, &owner)
        .await
        .unwrap();
    let provider = ModalProvider::configure(
        settings(fake.url(), TOKEN_ID, TOKEN_SECRET, env.computerd.clone()),
        &HostDefaults::default(),
    )
    .unwrap();
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

impl Rig {
    async fn close(self) {
        self.fake.close().await;
        self.boxes.assert_none().await;
    }
    /// Nothing secret in `said`.
    fn assert_untold(&self, said: &str) {
        assert!(!said.contains(TOKEN_ID), "the token id was told");
        assert!(!said.contains(TOKEN_SECRET), "the token secret was told");
        for s in self.fake.secrets() {
            assert!(!said.contains(&s), "an auth token or a JWT was told");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modal_computer_is_made_used_listed_and_terminated_and_no_secret_is_told() {
    let (logs, _guard) = capture();
    let Some(r) = rig("modal-life").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // A listing that lags, and a terminate that takes two polls to read.
    r.fake.knobs(|k| {
        k.list_lag = 2;
        k.terminate_polls = 2;
        k.listed_after_end = 2;
    });
    let mut spec = labelled("life");
    spec.sizes.memory_mb = Some(2048);
    let made = r.provider.create(&spec, &cancel).await.unwrap();
    let c = &made.computer;
    assert_eq!(
        (
            c.provider.as_str(),
            c.home.as_deref(),
            c.user.as_deref(),
            c.running
        ),
        ("modal", Some("/work"), Some("2510:2510"), true)
    );
    // What Modal was asked for: the tags, the lifetime, network blocked.
    let def = r.fake.definition(&c.id).unwrap();
    assert_eq!(
        (
            def.timeout_secs,
            def.block_network,
            def.network_access.unwrap().network_access_type,
            def.resources.unwrap().memory_mb_max
        ),
        (600, true, 2, 2048)
    );
    let tags = r.fake.tags(&c.id).unwrap();
    assert!(
        tags.iter()
            .any(|t| t.tag_name == "computer-mcp.name" && t.tag_value == "life")
    );
    assert_eq!(tags.len(), 2, "{tags:?}");

    let (listed, by_id) = used_listed_attached(&r.provider, c, &cancel).await;
    // Network none was read from inside at create and at attach.
    let inside = "read from inside: none of 5 answered, lo alone";
    let read = format!("{:?} {:?}", made.network, by_id.network);
    assert_eq!(read.matches(inside).count(), 2, "{read}");
    let e = r
        .provider
        .release(c, Release::Stop, &cancel)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unsupported);
    r.provider
        .release(c, Release::Delete, &cancel)
        .await
        .unwrap();
    assert!(r.fake.running().is_empty());
    // Modal still lists it a while: the provider leaves it out.
    let after = r.provider.list(&Labels::new(), &cancel).await.unwrap();
    assert!(after.is_empty(), "{after:?}");
    let e = r.provider.connect(c, &cancel).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Gone);

    r.assert_untold(&format!(
        "{made:?} {by_id:?} {listed:?} {e:?} {}",
        logs.text()
    ));
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_jwt_expiring_during_a_long_exec_is_refreshed_and_the_output_resumed() {
    let (logs, _guard) = capture();
    let Some(r) = rig("modal-jwt").await else {
        return;
    };
    let cancel = CancellationToken::new();
    // Every JWT lives 3 s: the create, the bridge and the exec all cross
    // several expiries.
    r.fake.knobs(|k| k.jwt_ttl = Duration::from_secs(3));
    let made = r.provider.create(&labelled("jwt"), &cancel).await.unwrap();
    let before = r.fake.jwts();
    let conn = r.provider.connect(&made.computer, &cancel).await.unwrap();
    let out = run(
        &conn.client,
        "echo start; sleep 8; head -c 100000 /dev/zero | tr '\\0' y; echo; echo end",
    )
    .await;
    let t = text(&out);
    assert!(t.starts_with("start\n") && t.ends_with("\nend\n"), "{t}");
    assert_eq!(t.len(), "start\n".len() + 100_000 + "\nend\n".len());
    assert!(
        r.fake.jwts() >= before + 2,
        "the JWT was not refreshed during the exec ({} then {})",
        before,
        r.fake.jwts()
    );
    // The bridge is still whole after the refreshes.
    assert_eq!(text(&run(&conn.client, "echo again").await), "again\n");
    conn.client.close();
    r.provider
        .release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    r.assert_untold(&format!("{made:?} {}", logs.text()));
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_is_lost_is_found_by_its_tag_and_terminated() {
    let Some(r) = rig("modal-lost").await else {
        return;
    };
    r.fake.knobs(|k| {
        k.lose_create = true;
        k.list_lag = 2;
        k.terminate_polls = 1;
    });
    let e = lost_create(
        &r.provider,
        || r.fake.creates(),
        || r.fake.running().len(),
        "tag",
        "terminated",
    )
    .await;
    r.assert_untold(&e.message);
    r.close().await;
}

/// Throttled calls (RESOURCE_EXHAUSTED, as Modal answers a caller over
/// its rate) are asked again after the wait the answer gives: a create and
/// a listing through four throttled answers each succeed, with one
/// sandbox made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_calls_are_asked_again_after_the_wait_modal_gives() {
    let Some(r) = rig("modal-throttle").await else {
        return;
    };
    let cancel = CancellationToken::new();
    r.fake.knobs(|k| k.throttle = 4);
    let made = r
        .provider
        .create(&labelled("throttled"), &cancel)
        .await
        .unwrap();
    assert_eq!(r.fake.throttled(), 4);
    assert_eq!(r.fake.creates(), 1, "a throttled create was made twice");
    r.fake.knobs(|k| k.throttle = 4);
    let listed = r.provider.list(&Labels::new(), &cancel).await.unwrap();
    assert_eq!(r.fake.throttled(), 8);
    assert!(
        listed.iter().any(|c| c.id == made.computer.id),
        "{listed:?}"
    );
    r.provider
        .release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}

#[tokio::test]
async fn a_wrong_token_pair_is_one_line_naming_the_variables_and_makes_nothing() {
    let Some(r) = rig("modal-key").await else {
        return;
    };
    let wrong = ModalProvider::configure(
        settings(r.fake.url(), TOKEN_ID, "as-not-the-secret", "/x".into()),
        &HostDefaults::default(),
    )
    .unwrap();
    let (found, next) = wrong
        .test_connection(&CancellationToken::new())
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert!(found.starts_with("unauthorized: "), "{found}");
    assert!(next.contains("COMPUTER_MCP_MODAL_TOKEN_SECRET"), "{next}");
    assert!(!found.contains("as-not-the-secret") && !found.contains(TOKEN_ID));
    // Doctor's read makes no app and rents nothing.
    let ok = r
        .provider
        .test_connection(&CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        ok.found,
        Ok("reached; the app computer-mcp is not made yet (the first computer makes it)".into())
    );
    let e = wrong
        .create(&labelled("k"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(r.fake.creates(), 0);
    r.close().await;
}

/// The router's own rules, straight through the provider's router client:
/// a stdin write sent again is taken once, a gap is refused, and output
/// read from an offset resumes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_taken_once_by_offset_and_output_resumes_from_an_offset() {
    use computer_providers::modal::control::{Control, Tokens};
    use computer_providers::modal::proto::FD_STDOUT;
    use computer_providers::modal::router::{Exit, Router};
    use futures::StreamExt;
    use std::sync::Arc;

    let Some(r) = rig("modal-offsets").await else {
        return;
    };
    let cancel = CancellationToken::new();
    let made = r
        .provider
        .create(&labelled("offsets"), &cancel)
        .await
        .unwrap();
    let control = Arc::new(Control::new(
        r.fake.url().into(),
        true,
        Some(Tokens {
            id: Secret::new(TOKEN_ID),
            secret: Secret::new(TOKEN_SECRET),
        }),
    ));
    let task = control.task_id(&made.computer.id, 10.0).await.unwrap();
    let router = Arc::new(Router::open(Arc::clone(&control), &task).await.unwrap());
    let exec = router
        .start(
            &["cat".to_string()],
            Some(Duration::from_secs(30)),
            Default::default(),
        )
        .await
        .unwrap();
    router.write(&exec, 0, b"hello ", false).await.unwrap();
    // The same bytes again (a retry), then an overlap: each byte once.
    router.write(&exec, 0, b"hello ", false).await.unwrap();
    router.write(&exec, 3, b"lo world", false).await.unwrap();
    let e = router.write(&exec, 99, b"gap", false).await.unwrap_err();
    assert!(e.message.contains("FailedPrecondition"), "{}", e.message);
    router.write(&exec, 11, b"", true).await.unwrap();
    assert_eq!(
        router.wait(&exec, Duration::from_secs(30)).await.unwrap(),
        Exit::Code(0)
    );
    let all: Vec<u8> = router
        .output(&exec, FD_STDOUT)
        .map(|b| b.unwrap().to_vec())
        .concat()
        .await;
    assert_eq!(all, b"hello world");
    // A reader that had 6 bytes asks from there and gets the rest.
    let rest: Vec<u8> = router
        .output_from(&exec, FD_STDOUT, 6)
        .map(|b| b.unwrap().to_vec())
        .concat()
        .await;
    assert_eq!(rest, b"world");
    r.provider
        .release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    r.close().await;
}
