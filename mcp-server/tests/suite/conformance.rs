//! `computer-mcp conformance` as a user runs it: the whole suite on the
//! local provider through the real binary, and its usage errors.

use std::path::Path;
use std::process::Command;

use computer_phone_fixture::rig::Rig;

use super::support::{SERVER, computerd, need_root, or_skip};

/// The command, with the local provider's state under `state` when given
/// (another provider refuses the local provider's options).
fn conformance(state: Option<&Path>, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(SERVER);
    cmd.arg("conformance");
    if let Some(state) = state {
        cmd.args(["--local-state-dir", state.to_str().unwrap()]);
    }
    cmd.args(args)
        .env_remove("COMPUTER_MCP_PROVIDER")
        .output()
        .unwrap()
}

/// A run on the provider `provider` names and sets up, against the drifted
/// build `drift`; `args` name the kind and what it needs.
fn run_json(
    state: Option<&Path>,
    provider: &[&str],
    drift: &Path,
    args: &[&str],
) -> std::process::Output {
    let mut all = provider.to_vec();
    all.extend(["--drifted-computerd", drift.to_str().unwrap()]);
    all.extend_from_slice(args);
    all.push("--json");
    conformance(state, &all)
}

/// A run on the local provider with the test's computerd, in a fresh
/// state directory.
fn on_local(drift: &Path, args: &[&str]) -> std::process::Output {
    let state = tempfile::tempdir().unwrap();
    let computerd = computerd();
    let provider = [
        "--provider",
        "local",
        "--local-computerd",
        computerd.to_str().unwrap(),
    ];
    run_json(Some(state.path()), &provider, drift, args)
}

/// A run on the Docker provider in `image` with the static `computerd`.
fn on_docker(image: &str, computerd: &Path, drift: &Path, args: &[&str]) -> std::process::Output {
    let provider = [
        "--provider",
        "docker",
        "--image",
        image,
        "--docker-computerd",
        computerd.to_str().unwrap(),
    ];
    run_json(None, &provider, drift, args)
}

#[test]
fn the_local_provider_passes_core_through_the_command() {
    if !need_root() {
        return;
    }
    let drift = or_skip!(local_drift());
    let started = std::time::Instant::now();
    let out = on_local(&drift, &[]);
    let took = started.elapsed();
    let report = passing_report(&out, "local");
    println!(
        "core {}/{} in {} ms",
        report["core"]["passed"],
        report["core"]["total"],
        took.as_millis()
    );
}

/// Whether `docker` answers and has `image`.
fn docker_with(image: &str) -> bool {
    let ok = |args: &[&str]| {
        Command::new("docker")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ok(&["info", "--format", "{{.ServerVersion}}"]) && ok(&["image", "inspect", image])
}

/// The image `var` names (else `default`) where Docker answers and has it,
/// or None: the test skips, saying `what` is not built.
fn docker_image(var: &str, default: &str, what: &str) -> Option<String> {
    let image = std::env::var(var).unwrap_or_else(|_| default.into());
    computer_testkit::need(
        "docker",
        docker_with(&image),
        &format!("no Docker engine answers, or {what} {image} is not built"),
    )
    .then_some(image)
}

#[test]
fn the_docker_provider_passes_core_through_the_command() {
    let Some(image) = docker_image(
        "CMCP_TEST_DOCKER_IMAGE",
        "computer-mcp-test/debian:bookworm",
        "the test image",
    ) else {
        return;
    };
    let (computerd, drift) = docker_daemons();
    if !computer_testkit::need(
        "docker",
        computerd.is_file(),
        &format!("the static computerd {} is not built", computerd.display()),
    ) || !computer_testkit::need(
        "drift",
        drift.is_file(),
        &format!(
            "the static drift build {} is not built (RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile daemon --target x86_64-unknown-linux-gnu -p computerd --bin computerd-drift)",
            drift.display()
        ),
    ) {
        return;
    }
    let started = std::time::Instant::now();
    let out = on_docker(&image, &computerd, &drift, &[]);
    let took = started.elapsed();
    let report = passing_report(&out, "docker");
    println!(
        "docker: core {}/{} in {} ms",
        report["core"]["passed"],
        report["core"]["total"],
        took.as_millis()
    );
}

/// The JSON report of a run that passed: no case failed, Core passed,
/// nothing was left behind, exit 0 (asserted whole, so a failure prints
/// what each case found).
pub(super) fn passing_report(out: &std::process::Output, what: &str) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: the report is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let failed: Vec<&serde_json::Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "fail")
        .collect();
    assert!(failed.is_empty(), "{what}: {failed:#?}");
    assert_eq!(report["core"]["verdict"], "pass", "{what}: {report:#}");
    assert_eq!(report["cleanup"]["left"], serde_json::json!([]), "{what}");
    assert_eq!(out.status.code(), Some(0), "{what}");
    report
}

/// A desktop run that passed, with every screen and input case run and
/// passed (none skipped).
fn assert_desktop_passes(out: &std::process::Output, what: &str) {
    assert_kind_passes(
        out,
        what,
        &[
            "screen.screenshot-size",
            "screen.watch",
            "input.click-lands",
            "input.type-text",
            "input.key-table-refuses-unknown",
            "input.actions-stops-at-first-failure",
        ],
    );
}

/// A run of a kind that passed, its verdict pass and each of `ids` run
/// and passed (none skipped).
fn assert_kind_passes(out: &std::process::Output, what: &str, ids: &[&str]) {
    let report = passing_report(out, what);
    assert_eq!(
        report["kindVerdict"]["verdict"], "pass",
        "{what}: {:#}",
        report["kindVerdict"]
    );
    let results = report["results"].as_array().unwrap();
    for id in ids.iter().copied() {
        let r = results.iter().find(|r| r["id"] == id);
        assert_eq!(
            r.map(|r| r["status"].clone()),
            Some("pass".into()),
            "{what}: {id}: {r:?}"
        );
    }
    println!(
        "{what}: core {}/{}",
        report["core"]["passed"], report["core"]["total"]
    );
}

/// The static computerd Docker computers bind (CMCP_TEST_DOCKER_COMPUTERD,
/// as .ci/run sets it) and the drifted one beside it.
fn docker_daemons() -> (std::path::PathBuf, std::path::PathBuf) {
    let computerd = std::env::var_os("CMCP_TEST_DOCKER_COMPUTERD")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/x86_64-unknown-linux-gnu/daemon/computerd")
        });
    let drift = computerd.with_file_name("computerd-drift");
    (computerd, drift)
}

/// The drift build of computerd beside the server, or None (skipped in
/// words, or failed where `drift` is required) where it is not built.
fn local_drift() -> Option<std::path::PathBuf> {
    let drift = Path::new(SERVER).with_file_name("computerd-drift");
    computer_testkit::need(
        "drift",
        drift.is_file(),
        "the drift build of computerd is not built (cargo build -p computerd --bin computerd-drift)",
    )
    .then_some(drift)
}

/// The static desktop fixture, built with the static computerd.
fn static_fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-gnu/daemon/computerd-x11-fixture")
}

#[test]
fn a_docker_desktop_passes_the_desktop_kind_through_the_command() {
    let Some(image) = docker_image(
        "CMCP_TEST_DOCKER_DESKTOP",
        "computer-mcp-test/desktop:bookworm",
        "the desktop image",
    ) else {
        return;
    };
    let (computerd, drift) = docker_daemons();
    let fixture = static_fixture();
    if !computer_testkit::need(
        "docker",
        computerd.is_file() && drift.is_file() && fixture.is_file(),
        "the static computerd, computerd-drift and computerd-x11-fixture are not all built",
    ) {
        return;
    }
    let out = on_docker(
        &image,
        &computerd,
        &drift,
        &[
            "--kind",
            "desktop",
            "--fixture",
            fixture.to_str().unwrap(),
            // The test image has Chromium: the browser cases run on the
            // desktop's visible browser too.
            "--docker-desktop-browser",
            "true",
        ],
    );
    assert_desktop_passes(&out, "docker desktop");
    assert_kind_passes(
        &out,
        "docker desktop's browser",
        &["browser.version", "browser.evaluate", "browser.events"],
    );
}

#[test]
fn a_docker_browser_passes_the_browser_kind_through_the_command() {
    // The desktop test image has Chromium.
    let Some(image) = docker_image(
        "CMCP_TEST_DOCKER_DESKTOP",
        "computer-mcp-test/desktop:bookworm",
        "the image",
    ) else {
        return;
    };
    let (computerd, drift) = docker_daemons();
    if !computer_testkit::need(
        "docker",
        computerd.is_file() && drift.is_file(),
        "the static computerd and computerd-drift are not both built",
    ) {
        return;
    }
    let out = on_docker(&image, &computerd, &drift, &["--kind", "browser"]);
    assert_kind_passes(&out, "docker browser", BROWSER_CASES);
}

#[test]
fn a_local_desktop_passes_the_desktop_kind_through_the_command() {
    if !need_root() || !computer_testkit::need_xvfb() {
        return;
    }
    let drift = Path::new(SERVER).with_file_name("computerd-drift");
    let fixture = Path::new(SERVER).with_file_name("computerd-x11-fixture");
    let fixture = if fixture.is_file() {
        fixture
    } else {
        static_fixture()
    };
    if !computer_testkit::need(
        "drift",
        drift.is_file() && fixture.is_file(),
        "computerd-drift and computerd-x11-fixture are not built (cargo build -p computerd --bins)",
    ) {
        return;
    }
    let out = on_local(
        &drift,
        &["--kind", "desktop", "--fixture", fixture.to_str().unwrap()],
    );
    assert_desktop_passes(&out, "local desktop");
    // Where Chromium is, a local desktop drives its visible browser too.
    if computer_testkit::need_chromium() {
        assert_kind_passes(&out, "local desktop's browser", BROWSER_CASES);
    }
}

/// The browser cases, each run and passed where a computer declares cdp.
const BROWSER_CASES: &[&str] = &[
    "browser.version",
    "browser.evaluate",
    "browser.events",
    "browser.refuses-in-words",
    "browser.network-none",
];

#[test]
fn a_local_browser_passes_the_browser_kind_through_the_command() {
    if !need_root() || !computer_testkit::need_chromium() {
        return;
    }
    let drift = or_skip!(local_drift());
    let out = on_local(&drift, &["--kind", "browser"]);
    assert_kind_passes(&out, "local browser", BROWSER_CASES);
}

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

/// A vendor's real service, when its key is in the environment
/// (`COMPUTER_MCP_<VENDOR>_API_KEY`, with the provider's other variables
/// as the user sets them): the same cases as against the fake, and no
/// word of the key in the report. Without a key this skips, unless
/// `COMPUTER_MCP_REQUIRE` names `<vendor>-live`.
fn vendor_live_passes(id: &str) {
    let var = format!("COMPUTER_MCP_{}_API_KEY", id.to_uppercase());
    let key = std::env::var(&var).unwrap_or_default();
    if !computer_testkit::need(
        &format!("{id}-live"),
        !key.is_empty(),
        &format!("{var} is not set, so no live {id} run"),
    ) {
        return;
    }
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
    let (computerd, drift) = docker_daemons();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let env = rt.block_on(computer_testkit::docker_env())?;
    if !computer_testkit::need(
        "drift",
        drift.is_file(),
        &format!("the static drift build {} is not built", drift.display()),
    ) {
        return None;
    }
    let desktop = match desktop {
        true => Some(docker_image(
            "CMCP_TEST_DOCKER_DESKTOP",
            "computer-mcp-test/desktop:bookworm",
            "the desktop image",
        )?),
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
    let fixture = docker_daemons().0.with_file_name("computerd-x11-fixture");
    if !computer_testkit::need(
        "docker",
        fixture.is_file(),
        &format!("the static {} is not built", fixture.display()),
    ) {
        return;
    }
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
    let (computerd, drift) = docker_daemons();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(env) = rt.block_on(computer_testkit::docker_env()) else {
        return;
    };
    if !computer_testkit::need(
        "drift",
        drift.is_file(),
        &format!("the static drift build {} is not built", drift.display()),
    ) {
        return;
    }
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
    let left = rt.block_on(computer_testkit::labelled_containers(
        &env.docker,
        &format!("{}={owner}", computer_fakes::vendor_box::LABEL),
    ));
    assert!(left.is_empty(), "modal: boxes left");
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

#[test]
fn usage_errors_exit_2_in_words() {
    let state = tempfile::tempdir().unwrap();
    for (args, words) in [
        (
            &["--provider", "fly"][..],
            "no provider \"fly\"; the providers are: local, docker",
        ),
        (
            &["--only", "exec,bogus"][..],
            "--only: \"bogus\" is not a conformance group; the groups are: health,",
        ),
        (&["--kind", "none"][..], "--kind none is no computer"),
        (
            &["--image", "debian:nope"][..],
            "the run's spec is refused: the local provider runs this machine's own system and takes no image",
        ),
    ] {
        let out = conformance(Some(state.path()), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// The cases a phone over adb passes on the fixture phone.
const PHONE_CASES: &[&str] = &[
    "health.hello",
    "health.kind-consistent",
    "touch.tap",
    "touch.swipe",
    "input.phone-type-text",
    "input.phone-key-table-refuses-unknown",
    "apps.launch-terminate",
    "apps.ui-tree-shape",
    "apps.install-launch",
];

/// The fixture phone's test APK (fixtures/phone/README.md), written in `dir`.
fn notes_apk(dir: &Path) -> std::path::PathBuf {
    let apk = dir.join("notes.apk");
    std::fs::write(
        &apk,
        "fixture-apk package=ai.agentrun.conformance.notes activity=.Notes label=Notes\n",
    )
    .unwrap();
    apk
}

/// `--provider adb --kind phone` on the fixture phone, through Debian's
/// adb server on a port of the test's own: every touch, keys and apps
/// case passes, the fixture APK is installed from the run's shared
/// folder, and a pinch is skipped in the phone's own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adb_passes_the_phone_kind_on_the_fixture_phone() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        return;
    };
    let apk = notes_apk(dir.path());
    let args: Vec<String> = [
        "--provider",
        "adb",
        "--kind",
        "phone",
        "--adb-port",
        &rig.adb.port().to_string(),
        "--adb-serial",
        &rig.serial,
        "--fixture",
        apk.to_str().unwrap(),
        "--json",
    ]
    .map(String::from)
    .to_vec();
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        conformance(None, &args)
    })
    .await
    .unwrap();
    assert_kind_passes(&out, "adb phone", PHONE_CASES);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pinch = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "touch.pinch")
        .cloned()
        .unwrap();
    assert_eq!(pinch["status"], "skip", "{pinch}");
    assert!(
        pinch["reason"]
            .as_str()
            .unwrap()
            .starts_with("the phone refuses a pinch: "),
        "{pinch}"
    );
    // The installed app was launched on the phone, and the run's serial
    // (an endpoint) is in no word of the report.
    assert!(
        rig.phone
            .state()
            .apps
            .packages
            .contains_key("ai.agentrun.conformance.notes"),
        "the fixture APK was not installed"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&rig.serial));
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
    let (computerd, drift) = docker_daemons();
    if !computer_testkit::need(
        "docker",
        computerd.is_file() && drift.is_file(),
        "the static computerd and computerd-drift are not both built",
    ) {
        return;
    }
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

/// `--provider phone-harness --kind phone` against the fake phone harness,
/// whose sessions' adb links reach the fixture phone (locked, as a cloud
/// phone is, until the session's code unlocks it) through Debian's adb
/// server on a port of the test's own: every touch, keys and apps case
/// passes (the fixture APK installed from the run's shared folder, pushed
/// over the session's link), every phone the run rented is ended, and
/// neither the key, the unlock code, a watch URL nor the phone's endpoint
/// is in a word of the report or the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_harness_passes_the_phone_kind_against_its_fake() {
    let dir = tempfile::tempdir().unwrap();
    let code = "CANARY4471";
    let Some(rig) = Rig::of_test(dir.path(), Some(code)).await else {
        return;
    };
    let adb = computer_testkit::need_adb().unwrap();
    let key = format!(
        "phk_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    );
    let fake = computer_fakes::phone_harness::FakePhoneHarness::start(&key)
        .await
        .unwrap();
    fake.point_adb("127.0.0.1", rig.phone_port, code);
    let apk = notes_apk(dir.path());
    let args: Vec<String> = [
        "--provider",
        "phone-harness",
        "--kind",
        "phone",
        "--phone-harness-api-url",
        fake.api_url(),
        "--phone-harness-api-key",
        &key,
        "--phone-harness-adb-port",
        &rig.adb.port().to_string(),
        "--phone-harness-adb-program",
        adb.to_str().unwrap(),
        "--phone-harness-ledger",
        dir.path().join("ledger.json").to_str().unwrap(),
        "--fixture",
        apk.to_str().unwrap(),
        "--json",
    ]
    .map(String::from)
    .to_vec();
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        conformance(None, &args)
    })
    .await
    .unwrap();
    assert_kind_passes(&out, "phone harness", PHONE_CASES);
    assert!(
        rig.phone
            .state()
            .apps
            .packages
            .contains_key("ai.agentrun.conformance.notes"),
        "the fixture APK was not installed"
    );
    assert_eq!(fake.session_ids(), Vec::<String>::new(), "phones left");
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        for secret in [key.as_str(), code, fake.canary(), &rig.serial] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
}
