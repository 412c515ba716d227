//! The conformance suite through the command on the cloud providers: each
//! against its test fake, and live when its key is given.

use super::*;

/// A vendor's browser, through the command, against our fake of its API
/// (a real headless Chromium behind the CDP URL it hands out).
fn vendor_passes(kind: computer_fakes::vendor::Kind, id: &str) {
    if !computer_testkit::need_chromium() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = rt
        .block_on(computer_fakes::vendor::FakeVendor::start(kind))
        .unwrap();
    let url_flag = format!("--{id}-api-url");
    let key_flag = format!("--{id}-api-key");
    let out = conformance(
        None,
        &[
            "--kind",
            "browser",
            "--provider",
            id,
            &url_flag,
            fake.api_url(),
            &key_flag,
            fake.key(),
            "--json",
        ],
    );
    assert_kind_passes(&out, id, &vendor_cases());
    // The signed CDP URL's secret is in no word of the report or the log.
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(
            !text.contains(fake.canary()),
            "{id}: the canary leaked: {text}"
        );
        assert!(!text.contains(fake.key()), "{id}: the key leaked: {text}");
    }
    // Everything the run made was released.
    assert_eq!(fake.live(), Vec::<String>::new(), "{id}: browsers left");
}

/// The cases a vendor's browser runs: it reaches the open network only,
/// and has a live view.
fn vendor_cases() -> Vec<&'static str> {
    let mut ids: Vec<&str> = BROWSER_CASES
        .iter()
        .copied()
        .filter(|c| *c != "browser.network-none")
        .collect();
    ids.push("browser.live-view");
    ids
}

/// Vendor `id`'s API key (`COMPUTER_MCP_<ID>_API_KEY`) for a run against
/// the real service, or None (skipped in words, or failed where
/// `COMPUTER_MCP_REQUIRE` names `<id>-live`) where it is not set.
pub(in crate::suite) fn live_key(id: &str) -> Option<String> {
    let var = format!("COMPUTER_MCP_{}_API_KEY", id.to_uppercase());
    let key = std::env::var(&var).unwrap_or_default();
    computer_testkit::need(
        &format!("{id}-live"),
        !key.is_empty(),
        &format!("{var} is not set, so no live {id} run"),
    )
    .then_some(key)
}

/// A vendor's real service, when its key is in the environment
/// (`COMPUTER_MCP_<VENDOR>_API_KEY`, with the provider's other variables
/// as the user sets them): the same cases as against the fake, and no
/// word of the key in the report. Without a key this skips, unless
/// `COMPUTER_MCP_REQUIRE` names `<vendor>-live`.
fn vendor_live_passes(id: &str) {
    let Some(key) = live_key(id) else {
        return;
    };
    // The key comes from the environment, never from the command line.
    let out = conformance(None, &["--kind", "browser", "--provider", id, "--json"]);
    assert_kind_passes(&out, &format!("live {id}"), &vendor_cases());
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(!text.contains(&key), "live {id}: the key leaked");
    }
}

#[test]
fn a_live_browserbase_passes_the_browser_kind_when_its_key_is_given() {
    vendor_live_passes("browserbase");
}

#[test]
fn a_live_kernel_passes_the_browser_kind_when_its_key_is_given() {
    vendor_live_passes("kernel");
}

#[test]
fn browserbase_passes_the_browser_kind_against_its_fake() {
    vendor_passes(computer_fakes::vendor::Kind::Browserbase, "browserbase");
}

#[test]
fn kernel_passes_the_browser_kind_against_its_fake() {
    vendor_passes(computer_fakes::vendor::Kind::Kernel, "kernel");
}

/// E2B against its fake, whose sandboxes are bounded containers of the
/// test image (the desktop template's of the desktop image): the run of
/// `args`, with the static computerd pushed in and started as a child of
/// the fake's envd, and neither the key nor any sandbox's envd token in
/// the report or the log, and no box left. None: skipped in words.
fn e2b_on_fake(what: &str, args: &[&str], desktop: bool) -> Option<std::process::Output> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (computerd, drift, env) = boxed_daemons(&rt)?;
    let desktop = match desktop {
        true => Some(desktop_image()?),
        false => None,
    };
    let key = "e2b_conformance_canary_3c1d";
    let owner = computer_testkit::marker("e2b-conformance");
    let fake = rt
        .block_on(computer_fakes::e2b::FakeE2b::start(
            &env.docker,
            &env.image,
            key,
            &owner,
        ))
        .unwrap();
    if let Some(image) = &desktop {
        fake.template("desktop", image);
    }
    fake.knobs(|k| {
        k.list_lag = 1;
        k.delete_polls = 1;
    });
    let started = std::time::Instant::now();
    let out = run_json(
        None,
        &[
            "--provider",
            "e2b",
            "--e2b-api-url",
            fake.url(),
            "--e2b-envd-url",
            fake.url(),
            "--e2b-api-key",
            key,
            "--e2b-computerd",
            computerd.to_str().unwrap(),
        ],
        &drift,
        args,
    );
    println!("{what}: the run took {} ms", started.elapsed().as_millis());
    let tokens = fake.tokens();
    rt.block_on(fake.close());
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(!text.contains(key), "{what}: the key leaked");
        for t in &tokens {
            assert!(!text.contains(t.as_str()), "{what}: an envd token leaked");
        }
    }
    let left = rt.block_on(computer_testkit::labelled_containers(
        &env.docker,
        &format!("{}={owner}", computer_fakes::vendor_box::LABEL),
    ));
    assert!(left.is_empty(), "{what}: boxes left");
    Some(out)
}

#[test]
fn e2b_passes_core_against_its_fake() {
    let Some(out) = e2b_on_fake("e2b", &[], false) else {
        return;
    };
    let report = passing_report(&out, "e2b");
    println!(
        "e2b: core {}/{}",
        report["core"]["passed"], report["core"]["total"]
    );
}

/// `--kind desktop` against the fake's desktop template: Core and every
/// screen and input case pass, the fixture's window read off the shots.
#[test]
fn e2b_passes_the_desktop_kind_against_its_fakes_desktop_template() {
    let Some(fixture) = boxed_fixture() else {
        return;
    };
    let args = ["--kind", "desktop", "--fixture", fixture.to_str().unwrap()];
    let Some(out) = e2b_on_fake("e2b desktop", &args, true) else {
        return;
    };
    assert_desktop_passes(&out, "e2b desktop");
}

/// Modal against its fake (two gRPC servers on loopback, the router's
/// JWTs short-lived so the run crosses refreshes), whose sandboxes are
/// bounded containers of the test image: Core passes, with the static
/// computerd pushed in through the command router, and neither the token
/// pair nor any auth token or JWT is in the report or the log.
#[test]
fn modal_passes_core_against_its_fake() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some((computerd, drift, env)) = boxed_daemons(&rt) else {
        return;
    };
    let (id, secret) = ("ak-conformance-canary-51e0", "as-conformance-canary-a7f3");
    let owner = computer_testkit::marker("modal-conformance");
    let fake = rt
        .block_on(computer_fakes::modal::FakeModal::start(
            &env.docker,
            &env.image,
            id,
            secret,
            &owner,
        ))
        .unwrap();
    fake.knobs(|k| {
        k.list_lag = 1;
        k.terminate_polls = 1;
        k.listed_after_end = 1;
        k.jwt_ttl = std::time::Duration::from_secs(20);
    });
    let started = std::time::Instant::now();
    let out = run_json(
        None,
        &[
            "--provider",
            "modal",
            "--modal-server-url",
            fake.url(),
            "--modal-insecure-plaintext-for-tests",
            "true",
            "--modal-token-id",
            id,
            "--modal-token-secret",
            secret,
            "--modal-computerd",
            computerd.to_str().unwrap(),
        ],
        &drift,
        &[],
    );
    let took = started.elapsed();
    let secrets = fake.secrets();
    rt.block_on(fake.close());
    let report = passing_report(&out, "modal");
    println!(
        "modal: core {}/{} in {} ms",
        report["core"]["passed"],
        report["core"]["total"],
        took.as_millis()
    );
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(
            !text.contains(id) && !text.contains(secret),
            "modal: the token pair leaked"
        );
        for t in &secrets {
            assert!(!text.contains(t.as_str()), "modal: a JWT leaked");
        }
    }
    assert_no_boxes(&rt, &env, &owner, "modal");
}

/// The static computerd, its drift build and the Docker set-up a fake
/// vendor's boxes need, or None (skipped in words, or failed where
/// required) where one is missing.
fn boxed_daemons(
    rt: &tokio::runtime::Runtime,
) -> Option<(
    std::path::PathBuf,
    std::path::PathBuf,
    computer_testkit::DockerEnv,
)> {
    let (computerd, drift) = docker_daemons();
    let env = rt.block_on(computer_testkit::docker_env())?;
    computer_testkit::need(
        "drift",
        drift.is_file(),
        &format!("the static drift build {} is not built", drift.display()),
    )
    .then_some((computerd, drift, env))
}

/// No box of `owner`'s is left after `what`'s run.
fn assert_no_boxes(
    rt: &tokio::runtime::Runtime,
    env: &computer_testkit::DockerEnv,
    owner: &str,
    what: &str,
) {
    let left = rt.block_on(computer_testkit::labelled_containers(
        &env.docker,
        &format!("{}={owner}", computer_fakes::vendor_box::LABEL),
    ));
    assert!(left.is_empty(), "{what}: boxes left");
}

/// The Kubernetes provider against the fake Kubernetes API, whose pods are
/// boxes of the test image carrying the static computerd (and, for the
/// drift case, the drift build at its own path): Core passes, no pod,
/// policy or box is left, and the bearer token is in no word of the run.
#[test]
fn kubernetes_passes_core_against_its_fake() {
    let Some(out) = kubernetes_on_fake("kubernetes", None, &[], false) else {
        return;
    };
    passing_report(&out, "kubernetes");
}

/// `--kubernetes-api sandbox` against the fake with agent-sandbox
/// installed and an operator keeping one warm pod for every template:
/// the first computer of a template is a Sandbox, the next ones claims on
/// its pool; Core passes, and nothing is left once the pools go.
#[test]
fn kubernetes_passes_core_through_agent_sandbox_against_its_fake() {
    let Some(out) = kubernetes_on_fake("kubernetes sandbox", None, &[], true) else {
        return;
    };
    passing_report(&out, "kubernetes sandbox");
}

/// `--kind desktop` on Kubernetes: pods of the desktop image, whose init
/// starts the image's Xvfb; Core and every screen and input case pass,
/// the fixture's window read off the shots.
#[test]
fn kubernetes_passes_the_desktop_kind_against_its_fake() {
    let Some(fixture) = boxed_fixture() else {
        return;
    };
    let Some(image) = desktop_image() else {
        return;
    };
    let args = ["--kind", "desktop", "--fixture", fixture.to_str().unwrap()];
    let Some(out) = kubernetes_on_fake("kubernetes desktop", Some(&image), &args, false) else {
        return;
    };
    assert_desktop_passes(&out, "kubernetes desktop");
}

/// A conformance run of `args` on the Kubernetes provider against its
/// fake, its pods made of `image` (the test image when None), through
/// agent-sandbox when `sandbox` (its pools removed after the run); the
/// token is in no word of it and nothing is left after it.
fn kubernetes_on_fake(
    what: &str,
    image: Option<&str>,
    args: &[&str],
    sandbox: bool,
) -> Option<std::process::Output> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (computerd, drift, env) = boxed_daemons(&rt)?;
    let token = "k8s-conformance-canary-3b9d";
    let owner = computer_testkit::marker("k8s-conformance");
    let fake = rt
        .block_on(computer_fakes::kubernetes::FakeKubernetes::start(
            &env.docker,
            &env.image,
            token,
            &owner,
        ))
        .unwrap();
    fake.carry("/opt/computerd/computerd", computerd.clone());
    // The drifted provider names the drift build's own path in the image.
    let drift_in_image = std::path::absolute(&drift).unwrap();
    fake.carry(drift_in_image.to_str().unwrap(), drift.clone());
    if sandbox {
        fake.install_agent_sandbox();
        fake.knobs(|k| k.auto_pool = Some(1));
    }
    let api = if sandbox { "sandbox" } else { "pods" };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig("conformance")).unwrap();
    let started = std::time::Instant::now();
    let out = run_json(
        None,
        &[
            "--provider",
            "kubernetes",
            "--kubernetes-kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--kubernetes-image",
            image.unwrap_or(&env.image),
            "--kubernetes-api",
            api,
        ],
        &drift,
        args,
    );
    println!("{what}: the run took {} ms", started.elapsed().as_millis());
    if sandbox {
        assert!(
            !fake.objects("sandboxtemplates").is_empty(),
            "{what}: no SandboxTemplate was made"
        );
        let claimed = fake.verbs().contains(&(
            "extensions.agents.x-k8s.io".to_string(),
            "sandboxclaims".to_string(),
            "create".to_string(),
        ));
        assert!(claimed, "{what}: no computer was claimed from a warm pool");
        rt.block_on(fake.remove_pools());
        for plural in ["sandboxes", "sandboxclaims"] {
            assert_eq!(
                fake.objects(plural),
                Vec::<String>::new(),
                "{what}: {plural} left"
            );
        }
    }
    let (pods, policies) = (fake.pods(), fake.policies());
    rt.block_on(fake.close());
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(text).contains(token),
            "{what}: the token leaked"
        );
    }
    assert_eq!((pods, policies), (vec![], vec![]), "{what}: objects left");
    assert_no_boxes(&rt, &env, &owner, what);
    Some(out)
}

/// A live cluster, the one `KUBECONFIG` names, when
/// `COMPUTER_MCP_KUBERNETES_LIVE=1` or `COMPUTER_MCP_REQUIRE` names
/// `kubernetes-live`: Core passes. The image is
/// `COMPUTER_MCP_KUBERNETES_IMAGE` (carrying the static computerd at
/// /opt/computerd/computerd and the drift build at
/// `COMPUTER_MCP_KUBERNETES_LIVE_DRIFTED`, default
/// /opt/computerd/computerd-drift); the README says how on kind or k3s.
#[test]
fn a_live_cluster_passes_core_when_asked() {
    let asked = std::env::var("COMPUTER_MCP_KUBERNETES_LIVE").as_deref() == Ok("1")
        || std::env::var("COMPUTER_MCP_REQUIRE")
            .unwrap_or_default()
            .split(',')
            .any(|w| w.trim() == "kubernetes-live");
    if !computer_testkit::need(
        "kubernetes-live",
        asked,
        "COMPUTER_MCP_KUBERNETES_LIVE is not 1, so no live Kubernetes run",
    ) {
        return;
    }
    let kubeconfig = std::env::var("KUBECONFIG").unwrap_or_default();
    let image = std::env::var("COMPUTER_MCP_KUBERNETES_IMAGE").unwrap_or_default();
    assert!(
        !kubeconfig.is_empty() && !image.is_empty(),
        "a live Kubernetes run needs KUBECONFIG and COMPUTER_MCP_KUBERNETES_IMAGE"
    );
    let drifted = std::env::var("COMPUTER_MCP_KUBERNETES_LIVE_DRIFTED")
        .unwrap_or_else(|_| "/opt/computerd/computerd-drift".into());
    let out = run_json(
        None,
        &[
            "--provider",
            "kubernetes",
            "--kubernetes-kubeconfig",
            &kubeconfig,
            "--kubernetes-image",
            &image,
        ],
        std::path::Path::new(&drifted),
        &[],
    );
    passing_report(&out, "live kubernetes");
}

/// Modal itself, when its token pair is in the environment
/// (`COMPUTER_MCP_MODAL_TOKEN_ID` and `COMPUTER_MCP_MODAL_TOKEN_SECRET`,
/// with the provider's other variables as the user sets them): Core
/// passes, nothing is left, and no word of the pair is in the report.
/// Without the pair this skips, unless `COMPUTER_MCP_REQUIRE` names
/// `modal-live`.
#[test]
fn a_live_modal_passes_core_when_its_token_pair_is_given() {
    let id = std::env::var("COMPUTER_MCP_MODAL_TOKEN_ID").unwrap_or_default();
    let secret = std::env::var("COMPUTER_MCP_MODAL_TOKEN_SECRET").unwrap_or_default();
    if !computer_testkit::need(
        "modal-live",
        !id.is_empty() && !secret.is_empty(),
        "COMPUTER_MCP_MODAL_TOKEN_ID and COMPUTER_MCP_MODAL_TOKEN_SECRET are not set, so no live Modal run",
    ) {
        return;
    }
    let (computerd, drift) = docker_daemons();
    // The pair comes from the environment, never from the command line.
    let out = run_json(
        None,
        &[
            "--provider",
            "modal",
            "--modal-computerd",
            computerd.to_str().unwrap(),
        ],
        &drift,
        &[],
    );
    passing_report(&out, "live modal");
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        assert!(
            !text.contains(&id) && !text.contains(&secret),
            "live modal: the token pair leaked"
        );
    }
}

/// `--provider daytona` against the fake Daytona, whose sandboxes are
/// bounded Docker containers of the test image: Core passes, nothing is
/// left, and the canary key is in no word of the report or the log.
#[test]
fn daytona_passes_core_through_the_command_against_its_fake() {
    let Some(image) = docker_image(
        "CMCP_TEST_DOCKER_IMAGE",
        "computer-mcp-test/debian:bookworm",
        "the test image",
    ) else {
        return;
    };
    let Some((computerd, drift)) = built_daemons() else {
        return;
    };
    let owner = computer_testkit::marker("daytona-conformance");
    let key = format!(
        "dtn_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let spec = computer_fakes::vendor_box::BoxSpec::new(&image, &owner);
    let machines = computer_fakes::daytona::BoxMachines::local(spec).unwrap();
    let fake = rt
        .block_on(computer_fakes::daytona::FakeDaytona::start(
            &key,
            std::sync::Arc::new(machines),
        ))
        .unwrap();
    fake.list_lag(1);
    let url = fake.api_url();
    let out = Command::new(SERVER)
        .args([
            "conformance",
            "--provider",
            "daytona",
            "--daytona-api-url",
            &url,
            "--daytona-computerd",
            computerd.to_str().unwrap(),
            "--drifted-computerd",
            drift.to_str().unwrap(),
            "--json",
        ])
        .env("COMPUTER_MCP_DAYTONA_API_KEY", &key)
        .env_remove("COMPUTER_MCP_PROVIDER")
        .output()
        .unwrap();
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(text).contains(&key),
            "the key leaked"
        );
    }
    let report = passing_report(&out, "daytona");
    println!(
        "daytona: core {}/{}",
        report["core"]["passed"], report["core"]["total"]
    );
    let left = fake.names();
    rt.block_on(fake.shutdown());
    assert_eq!(left, Vec::<String>::new(), "sandboxes left");
}
