use super::*;

fn provider(max: Option<u64>) -> E2bProvider {
    E2bProvider::configure(
        E2bSettings {
            api_key: Some(Secret::new("e2b_canary_key")),
            api_url: Some("http://127.0.0.1:9".into()),
            computerd: Some("/nonexistent/computerd".into()),
            max_lifetime_ms: max,
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap()
}

#[test]
fn a_spec_e2b_cannot_honour_is_refused_in_words_before_any_request() {
    let p = provider(None);
    let refused = crate::daemon_backed::network::none_only_refusals(
        &p,
        DEFAULT_MAX_LIFETIME_MS,
        "1 h",
        "an E2B computer",
    );
    let e = refused(&|s| s.network = NetworkPolicy::Allow(vec!["example.com".into()]));
    assert!(e.message.contains("an allowlist waits"), "{}", e.message);
    let e = refused(&|s| {
        for i in 0..33 {
            s.labels.insert(format!("k{i}"), "v".into());
        }
    });
    assert_eq!(e.message, "33 labels; the most is 32");
    let e = refused(&|s| {
        s.labels.insert(CREATE_LABEL.into(), "x".into());
    });
    assert_eq!(e.field.as_deref(), Some("labels"));
    let e = refused(&|s| s.sizes.memory_mb = Some(512));
    assert_eq!(e.field.as_deref(), Some("sizes"));
    let e = refused(&|s| s.image = Some("desktop".into()));
    assert_eq!(e.field.as_deref(), Some("image"));
    // Pro's 24 h when the account has it.
    let pro = provider(Some(PRO_MAX_LIFETIME_MS));
    pro.check(&ComputerSpec::sandbox(PRO_MAX_LIFETIME_MS))
        .unwrap();
    let e = pro
        .check(&ComputerSpec::sandbox(PRO_MAX_LIFETIME_MS + 1))
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("lifetime"));
}

#[test]
fn a_cap_past_e2bs_most_is_refused_and_the_key_is_in_no_debug() {
    let e = E2bProvider::configure(
        E2bSettings {
            max_lifetime_ms: Some(PRO_MAX_LIFETIME_MS + 1),
            computerd: Some("/x".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("max_lifetime_ms"));
    let p = provider(None);
    assert!(!format!("{p:?}").contains("canary"));
}

#[tokio::test]
async fn no_key_is_one_line_naming_the_variable() {
    let p = E2bProvider::configure(
        E2bSettings {
            api_url: Some("http://127.0.0.1:9".into()),
            computerd: Some("/x".into()),
            ..Default::default()
        },
        &HostDefaults::default(),
    )
    .unwrap();
    let found = p
        .test_connection(&CancellationToken::new())
        .await
        .unwrap()
        .found
        .unwrap_err();
    assert_eq!(
        found,
        (
            "unauthorized: E2B has no API key: give --e2b-api-key (COMPUTER_MCP_E2B_API_KEY)"
                .into(),
            "give a valid key: --e2b-api-key (COMPUTER_MCP_E2B_API_KEY)".into()
        )
    );
}

#[test]
fn a_desktop_server_makes_desktops_of_the_desktop_template() {
    let host = HostDefaults {
        kind: SettingKind::Desktop,
        ..Default::default()
    };
    let settings = E2bSettings {
        api_key: Some(Secret::new("k")),
        computerd: Some("/x".into()),
        ..Default::default()
    };
    let p = E2bProvider::configure(settings.clone(), &host).unwrap();
    assert_eq!(p.template, "desktop");
    let caps = p.capabilities();
    assert_eq!(caps.kind, computerd::protocol::MachineKind::Desktop);
    assert!(caps.groups.contains(&computerd::protocol::Group::Screen));
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Desktop;
    p.check(&spec).unwrap();
    spec.image = Some("base".into());
    let e = p.check(&spec).unwrap_err();
    assert!(
        e.message.contains("--e2b-desktop-template"),
        "{}",
        e.message
    );
    // A sandbox server refuses a desktop, naming what it needs.
    let e = provider(None)
        .check(&ComputerSpec {
            kind: SettingKind::Desktop,
            ..ComputerSpec::sandbox(600_000)
        })
        .unwrap_err();
    assert!(
        e.message
            .contains("--kind desktop and an E2B template with X"),
        "{}",
        e.message
    );
    let e = E2bProvider::configure(
        E2bSettings {
            desktop_template: Some(String::new()),
            ..settings
        },
        &host,
    )
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("desktop_template"));
}
