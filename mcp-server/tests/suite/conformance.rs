//! `computer-mcp conformance` as a user runs it: the whole suite on the
//! local provider through the real binary, and its usage errors.

use std::path::Path;
use std::process::Command;

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

/// The static computerd and its drift build, or None (skipped in words,
/// or failed where Docker is required) where either is not built.
fn built_daemons() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (computerd, drift) = docker_daemons();
    computer_testkit::need(
        "docker",
        computerd.is_file() && drift.is_file(),
        "the static computerd and computerd-drift are not both built",
    )
    .then_some((computerd, drift))
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
/// The desktop test image (`CMCP_TEST_DOCKER_DESKTOP`), or None where
/// it is not built (skipped in words, or failed where Docker is required).
fn desktop_image() -> Option<String> {
    docker_image(
        "CMCP_TEST_DOCKER_DESKTOP",
        "computer-mcp-test/desktop:bookworm",
        "the desktop image",
    )
}

/// The static X11 fixture beside the static computerd a box carries, or
/// None where it is not built.
fn boxed_fixture() -> Option<std::path::PathBuf> {
    let fixture = docker_daemons().0.with_file_name("computerd-x11-fixture");
    computer_testkit::need(
        "docker",
        fixture.is_file(),
        &format!("the static {} is not built", fixture.display()),
    )
    .then_some(fixture)
}

fn static_fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-gnu/daemon/computerd-x11-fixture")
}

#[test]
fn a_docker_desktop_passes_the_desktop_kind_through_the_command() {
    let Some(image) = desktop_image() else {
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
    let Some((computerd, drift)) = built_daemons() else {
        return;
    };
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

mod phone;
mod vendors;
pub(super) use vendors::live_key;
