use super::*;

fn provider() -> ModalProvider {
    ModalProvider::configure(
        ModalSettings {
            token_id: Some(Secret::new("ak-canary-id")),
            token_secret: Some(Secret::new("as-canary-secret")),
            server_url: Some("http://127.0.0.1:9".into()),
            insecure_plaintext_for_tests: Some(true),
            computerd: Some("/nonexistent/computerd".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap()
}

#[test]
fn a_spec_modal_cannot_honour_is_refused_in_words_before_any_request() {
    let p = provider();
    let refused = crate::daemon_backed::network::none_only_refusals(
        &p,
        MAX_LIFETIME_MS,
        "1 d",
        "a Modal computer",
    );
    let e = refused(&|s| s.network = NetworkPolicy::Allow(vec!["example.com".into()]));
    assert!(e.message.contains("Modal's allowlist"), "{}", e.message);
    let e = refused(&|s| {
        for i in 0..10 {
            s.labels.insert(format!("k{i}"), "v".into());
        }
    });
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (
            Some("labels"),
            "10 labels; Modal takes at most 10 tags a sandbox and the provider keeps one, so at most 9"
        )
    );
    let e = refused(&|s| {
        s.labels.insert(label::COMPUTER.into(), "x".into());
    });
    assert_eq!(e.field.as_deref(), Some("labels"));
    let e = refused(&|s| s.sizes.pids = Some(100));
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (
            Some("sizes"),
            "Modal has no limit on processes: give no pids"
        )
    );
    let e = refused(&|s| s.image = Some("debian\nRUN curl x".into()));
    assert_eq!(e.field.as_deref(), Some("image"));
    let e = refused(&|s| s.user = Some("0:0".into()));
    assert_eq!(e.field.as_deref(), Some("user"));
    // Sizes Modal takes become its limits, with its default request.
    let mut sized = ComputerSpec::sandbox(600_000);
    sized.sizes.cpus = Some(2.0);
    sized.sizes.memory_mb = Some(1024);
    p.check(&sized).unwrap();
    assert_eq!(
        resources(&sized.sizes).unwrap(),
        Some(Resources {
            memory_mb: 128,
            milli_cpu: 125,
            memory_mb_max: 1024,
            milli_cpu_max: 1000,
        })
    );
}

#[test]
fn settings_are_refused_in_words_and_no_token_is_in_any_debug() {
    let bad = |s: ModalSettings| ModalProvider::configure(s, &HostDefaults::default()).unwrap_err();
    let e = bad(ModalSettings {
        server_url: Some("http://127.0.0.1:9".into()),
        computerd: Some("/x".into()),
        ..Default::default()
    });
    assert_eq!(e.field.as_deref(), Some("server_url"));
    let e = bad(ModalSettings {
        max_lifetime_ms: Some(MAX_LIFETIME_MS + 1),
        computerd: Some("/x".into()),
        ..Default::default()
    });
    assert_eq!(e.field.as_deref(), Some("max_lifetime_ms"));
    let e = bad(ModalSettings {
        token_id: Some(Secret::new("only-the-id")),
        computerd: Some("/x".into()),
        ..Default::default()
    });
    assert_eq!(e.field.as_deref(), Some("token_secret"));
    assert!(!e.message.contains("only-the-id"));
    let p = provider();
    assert!(!format!("{p:?}").contains("canary"));
}

#[tokio::test]
async fn no_token_is_one_line_naming_the_variables_and_rents_nothing() {
    let p = ModalProvider::configure(
        ModalSettings {
            server_url: Some("http://127.0.0.1:9".into()),
            insecure_plaintext_for_tests: Some(true),
            computerd: Some("/x".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let (found, next) = p
        .test_connection(&CancellationToken::new())
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert_eq!(
        found,
        "unauthorized: Modal has no token: give --modal-token-id and --modal-token-secret (COMPUTER_MCP_MODAL_TOKEN_ID, COMPUTER_MCP_MODAL_TOKEN_SECRET)"
    );
    assert!(next.contains("COMPUTER_MCP_MODAL_TOKEN_SECRET"), "{next}");
}
