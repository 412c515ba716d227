//! The conformance suite on the local provider, end to end: real
//! computers (root here, as CI runs), the whole table, Core must pass.
//! The drift case needs `computerd-drift` beside computerd (`cargo build
//! -p computerd --bin computerd-drift`); without
//! it the test skips, and fails with `COMPUTER_MCP_REQUIRE=drift`.

use std::sync::Arc;

use computer_conformance::{self as conformance, CaseGroup, RunOptions, Status};
use computer_providers::Provider;
use computer_providers::local::{LocalOptions, LocalProvider};
use computer_testkit::{computerd_bin, need, need_root};

fn local(state: &std::path::Path, computerd: std::path::PathBuf) -> Arc<dyn Provider> {
    let opts = LocalOptions {
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.to_path_buf(), computerd)
    };
    Arc::new(LocalProvider::new(opts).unwrap())
}

/// The drift build of computerd beside the normal one (built with
/// `cargo build -p computerd --bin computerd-drift`).
fn drift_bin() -> Option<std::path::PathBuf> {
    let p = computerd_bin()?.with_file_name("computerd-drift");
    p.is_file().then_some(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_provider_passes_core() {
    if !need_root() {
        return;
    }
    let Some(bin) = computerd_bin() else {
        need("root", false, "the computerd binary is not built");
        return;
    };
    // The limits cases run hostile programs: inside each computer's own
    // bounds, and here inside the test's own bound too.
    if !computer_testkit::need_own_bound() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let drifted = drift_bin();
    if !need(
        "drift",
        drifted.is_some(),
        "the drift build of computerd is not built (cargo build -p computerd --bin computerd-drift)",
    ) {
        return;
    }
    let folders = tempfile::tempdir().unwrap();
    let provider = local(state.path(), bin);
    let drifted = local(state.path(), drifted.unwrap());
    let only = std::env::var("CONFORMANCE_ONLY").ok().map(|o| {
        o.split(',')
            .map(|g| g.parse::<CaseGroup>().unwrap())
            .collect::<Vec<_>>()
    });
    let report = conformance::run(
        provider,
        RunOptions {
            drifted: Some(drifted),
            run_folders: Some(folders.path().canonicalize().unwrap()),
            only: only.clone(),
            ..Default::default()
        },
    )
    .await;
    println!("{}", report.text());
    let failed: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.status == Status::Fail)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    if only.is_none() {
        assert_eq!(report.core.verdict, "pass", "{}", report.verdict_line());
        assert_eq!(report.exit_code(), 0);
    }
    assert!(report.cleanup.clean(), "{:?}", report.cleanup);
}
