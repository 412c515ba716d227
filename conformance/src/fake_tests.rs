//! Each conformance case has been seen to fail: the fake breaks one
//! promise, and the suite reports exactly that case failed, in words that
//! name what it found; the same case passes on the fake that keeps it.

use std::sync::Arc;
use std::time::Duration;

use crate::{self as conformance, Bounds, Report, RunOptions, Status};
use computer_fakes::provider::*;
use computer_providers::{NetworkKind, ProviderError};

fn quick() -> RunOptions {
    RunOptions {
        bounds: Some(Bounds {
            case: Duration::from_secs(60),
            create: Duration::from_secs(5),
            cleanup: Duration::from_secs(5),
            deadline_grace: Duration::from_secs(1),
        }),
        ..Default::default()
    }
}

async fn run(p: &FakeProvider, id: &str, options: RunOptions) -> Report {
    conformance::run_cases(Arc::new(p.clone()), &[id], options)
        .await
        .unwrap()
}

/// `id` passes on the fake as made, and fails on the broken one with words
/// holding `found`.
async fn fails_only_when_broken(id: &str, broken: &FakeProvider, found: &str) {
    let report = run(&FakeProvider::new(), id, quick()).await;
    let r = report.result(id).unwrap();
    assert_eq!(r.status, Status::Pass, "{id} on the fake: {r:?}");
    let report = run(broken, id, quick()).await;
    let failed: Vec<&str> = report
        .results
        .iter()
        .filter(|r| r.status == Status::Fail)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(failed, [id], "{}", report.text());
    let words = report.result(id).unwrap().reason.clone().unwrap();
    assert!(words.contains(found), "{id}: {words}");
    assert_eq!(report.core.verdict, "fail");
    assert!(report.cleanup.clean(), "{:?}", report.cleanup);
}

#[tokio::test]
async fn a_process_left_behind_fails_setsid_escapee() {
    let p = FakeProvider::new();
    p.program(
        |a| script_has(a, "for p in /proc/[0-9]*"),
        |_| Ok(ok_stdout("/proc/42\n")),
    );
    fails_only_when_broken(
        "exec.setsid-escapee",
        &p,
        "a program that left its run's session with setsid still runs 5 s after the run ended",
    )
    .await;
}

#[tokio::test]
async fn a_capability_kept_fails_unprivileged() {
    let p = FakeProvider::new();
    p.program(
        |a| script_has(a, "cat /proc/self/status"),
        |_| Ok(ok_stdout(&proc_status("0000000000000400"))),
    );
    fails_only_when_broken("exec.unprivileged", &p, "CapEff is 0000000000000400").await;
}

#[tokio::test]
async fn a_wrong_network_fails_the_read_back() {
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        network_reads: Some(NetworkKind::Open),
        ..Default::default()
    });
    fails_only_when_broken(
        "provider.network-read-back",
        &p,
        "a computer made with network none reads back as open (the fake's word)",
    )
    .await;
}

#[tokio::test]
async fn a_forgotten_label_fails_create() {
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        forget_label: Some("computer-mcp.conformance-case".into()),
        ..Default::default()
    });
    fails_only_when_broken(
        "provider.create",
        &p,
        "its ref lost the label computer-mcp.conformance-case=provider-create",
    )
    .await;
}

#[tokio::test]
async fn another_image_read_back_fails_attach() {
    let with_image = || RunOptions {
        image: Some("computer-mcp-test/debian:bookworm".into()),
        ..quick()
    };
    // Kept: the image asked for reads back, and no note says otherwise.
    let report = run(&FakeProvider::new(), "provider.attach", with_image()).await;
    let r = report.result("provider.attach").unwrap();
    assert_eq!(r.status, Status::Pass, "{}", report.text());
    assert!(
        !report.notes.iter().any(|n| n.contains("image")),
        "{:?}",
        report.notes
    );
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        image_reads: Some("busybox:latest".into()),
        ..Default::default()
    });
    let report = run(&p, "provider.attach", with_image()).await;
    let r = report.result("provider.attach").unwrap();
    assert_eq!(r.status, Status::Fail, "{}", report.text());
    let words = r.reason.clone().unwrap();
    assert!(
        words.contains(
            "create asked for the image computer-mcp-test/debian:bookworm, and attach by id reads back the image busybox:latest"
        ),
        "{words}"
    );
    assert!(report.cleanup.clean(), "{:?}", report.cleanup);
}

#[tokio::test]
async fn no_image_asked_and_none_read_back_is_said_not_passed_silently() {
    let report = run(&FakeProvider::new(), "provider.attach", quick()).await;
    assert_eq!(
        report.result("provider.attach").unwrap().status,
        Status::Pass
    );
    assert!(
        report.notes.iter().any(|n| n
            == "provider.attach: no image was asked for and the fake provider reads none back (it runs no image), so attach's image read-back had nothing to hold"),
        "{:?}",
        report.notes
    );
    assert!(
        report
            .text()
            .contains("note: provider.attach: no image was asked for")
    );
}

#[tokio::test]
async fn a_computer_past_its_deadline_fails_the_lifetime_case() {
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        ignore_deadline: true,
        ..Default::default()
    });
    fails_only_when_broken("lifetime.deadline", &p, "runs past its deadline").await;
}

#[tokio::test]
async fn a_drifted_daemon_handed_out_fails_drift() {
    let drifted = FakeProvider::new();
    drifted.set_breaks(Breaks {
        version: Some("0.0.0-drift".into()),
        ..Default::default()
    });
    let report = run(
        &FakeProvider::new(),
        "drift.refused",
        RunOptions {
            drifted: Some(Arc::new(drifted.clone())),
            ..quick()
        },
    )
    .await;
    let r = report.result("drift.refused").unwrap();
    assert_eq!(r.status, Status::Fail);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .starts_with("a computer whose daemon reports version 0.0.0-drift"),
        "{r:?}"
    );
    // The computer it was handed is deleted when the case ends.
    assert!(drifted.computers().is_empty());
    // A drifted provider that refuses at create passes, and without one
    // the case skips, which is no pass.
    let refusing = FakeProvider::new();
    refusing.on(
        Op::Create,
        Script::Fail(ProviderError::refused("another daemon version")),
        None,
    );
    let report = run(
        &FakeProvider::new(),
        "drift.refused",
        RunOptions {
            drifted: Some(Arc::new(refusing)),
            ..quick()
        },
    )
    .await;
    assert_eq!(report.result("drift.refused").unwrap().status, Status::Pass);
    let report = run(&FakeProvider::new(), "drift.refused", quick()).await;
    let r = report.result("drift.refused").unwrap();
    assert_eq!((r.status, r.undeclared.as_deref()), (Status::Skip, None));
    assert_eq!(report.core.verdict, "fail");
}

#[tokio::test]
async fn a_hanging_create_is_bounded_and_named() {
    let p = FakeProvider::new();
    p.on(Op::Create, Script::Hang, None);
    let mut o = quick();
    o.bounds.as_mut().unwrap().create = Duration::from_millis(300);
    let report = run(&p, "health.ping", o).await;
    let r = report.result("health.ping").unwrap();
    assert_eq!(r.status, Status::Fail);
    assert_eq!(
        r.reason.as_deref(),
        Some(
            "the shared computer could not be made: create refused (Timeout): create did not answer within 300 ms"
        )
    );
    assert!(p.computers().is_empty());
}

#[tokio::test]
async fn a_late_computer_is_deleted_as_it_arrives_and_named() {
    let p = FakeProvider::new();
    p.on(
        Op::Create,
        Script::Delay(Duration::from_millis(800)),
        Some(1),
    );
    let mut o = quick();
    o.bounds.as_mut().unwrap().create = Duration::from_millis(200);
    let report = run(&p, "provider.create", o).await;
    assert_eq!(
        report.result("provider.create").unwrap().status,
        Status::Fail
    );
    assert_eq!(report.cleanup.late.len(), 1, "{:?}", report.cleanup);
    assert!(
        report.cleanup.late[0]
            .ends_with("made for provider.create, arrived after it ended: deleted"),
        "{:?}",
        report.cleanup
    );
    assert!(p.computers().is_empty());
}

#[tokio::test]
async fn a_computer_whose_answer_was_lost_is_found_by_the_label_and_fails_core() {
    let p = FakeProvider::new();
    p.on(Op::Create, Script::Lost, Some(1));
    let report = run(&p, "provider.create", quick()).await;
    assert_eq!(report.cleanup.left.len(), 1, "{:?}", report.cleanup);
    assert!(report.cleanup.left[0].ends_with("(deleted now)"));
    assert_eq!(report.core.verdict, "fail");
    assert!(report.text().contains("cleanup left behind: fake-"));
    assert!(p.computers().is_empty());
}

#[tokio::test]
async fn a_partial_run_never_reads_pass_and_json_parses() {
    let report = conformance::run(
        Arc::new(FakeProvider::new()),
        RunOptions {
            only: Some(vec![conformance::CaseGroup::Health]),
            ..quick()
        },
    )
    .await;
    assert_eq!(report.core.verdict, "partial", "{}", report.text());
    assert_eq!(report.exit_code(), 3);
    assert!(report.verdict_line().starts_with("core PARTIAL 4/4 · "));
    assert!(report.core_not_run.contains(&"exec.argv".to_string()));
    let text = report.text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("computer conformance · fake · linux, daemon pid1 · computerd "));
    let health: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        health,
        [
            "core",
            "health",
            "hello",
            "ping",
            "unknown-method",
            "kind-consistent",
            "✓",
            "4"
        ]
    );
    assert!(lines[2].starts_with("core not run: exec.argv "), "{text}");
    let json = serde_json::to_string(&report).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
}

#[tokio::test]
async fn an_undeclared_need_skips_and_a_required_one_fails() {
    // No processes group: Core's process cases fail (a linux computer
    // must have it); a Full case needing sizes skips, out of Core's count.
    let report = run(&FakeProvider::new(), "limits.pids", quick()).await;
    let r = report.result("limits.pids").unwrap();
    assert_eq!(r.status, Status::Skip);
    assert_eq!(r.undeclared.as_deref(), Some("sizes"));
    let report = run(&FakeProvider::new(), "exec.user-root", quick()).await;
    assert_eq!(
        report.result("exec.user-root").unwrap().reason.as_deref(),
        Some("the provider's check refuses a spec that asks for user:root")
    );
}

#[tokio::test]
async fn release_older_takes_over_by_label_and_fences_an_older_epoch() {
    let p = FakeProvider::new();
    let report = run(&p, "provider.release-older", quick()).await;
    let r = report.result("provider.release-older").unwrap();
    assert_eq!(r.status, Status::Pass, "{r:?}");
    assert!(report.cleanup.clean(), "{:?}", report.cleanup);
    assert!(p.computers().is_empty());
}

#[tokio::test]
async fn an_unknown_method_answered_fails_health() {
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        answer_unknown: true,
        ..Default::default()
    });
    fails_only_when_broken(
        "health.unknown-method",
        &p,
        "an unknown method was answered with {}",
    )
    .await;
}

#[tokio::test]
async fn a_file_that_reads_back_short_fails_files() {
    let p = FakeProvider::new();
    p.set_breaks(Breaks {
        keep_bytes: Some(1000),
        ..Default::default()
    });
    fails_only_when_broken(
        "files.write-read",
        &p,
        "1300000 bytes written read back as 1000 bytes",
    )
    .await;
}
