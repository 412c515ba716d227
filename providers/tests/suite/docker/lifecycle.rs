//! A Docker computer's life: its deadline, the sweep, attach and the
//! janitor's fence, bad input refused in words, shares, a computer
//! removed from outside.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::InspectContainerOptions;
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::{
    AttachBy, ErrorCode, Labels, NetworkPolicy, Provider, Release, label, release_older, run_labels,
};
use computer_testkit::{need, or_skip};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use tokio_util::sync::CancellationToken;

use super::{TEST_LABEL, env, run, text};
use crate::suite::support::{SWEEPS, remove_by_force};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_its_deadline_the_computer_stops_by_itself() {
    let e = or_skip!(env("deadline").await);
    let _turn = SWEEPS.lock().await;
    let cancel = CancellationToken::new();
    let c = e.p.create(&e.spec(4_000), &cancel).await.unwrap().computer;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let i = e
            .docker
            .inspect_container(&c.id, None::<InspectContainerOptions>)
            .await
            .unwrap();
        let st = i.state.unwrap();
        if st.running != Some(true) {
            assert_eq!(st.exit_code, Some(0), "init ends in order at its deadline");
            break;
        }
        assert!(
            Instant::now() < until,
            "still running 16 s past its deadline"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Gone, "{err:?}");
    // A stopped computer is checked by its inspect alone, and attaches.
    let found =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap();
    assert!(!found.running);
    // The janitor deletes it; a live computer is kept.
    let live = e.sandbox(&cancel).await;
    let swept = e.p.sweep(&cancel).await.unwrap();
    assert!(swept.contains(&c.id), "{swept:?}");
    assert!(!swept.contains(&live.id), "{swept:?}");
    assert!(!e.exists(&c.id).await && e.exists(&live.id).await);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refuses_a_container_with_our_labels_made_wider_naming_the_field() {
    let e = or_skip!(env("drift").await);
    let cancel = CancellationToken::new();
    type Widen = fn(&mut bollard::models::HostConfig);
    let cases: [(&str, Widen, &str); 3] = [
        (
            "computer-00000000d001",
            |h| h.privileged = Some(true),
            "HostConfig.Privileged is true",
        ),
        (
            "computer-00000000d002",
            |h| h.cap_add = Some(vec!["NET_ADMIN".into()]),
            "HostConfig.CapAdd is [\"NET_ADMIN\"]",
        ),
        (
            "computer-00000000d003",
            |h| h.network_mode = Some("host".into()),
            "HostConfig.NetworkMode is \"host\"",
        ),
    ];
    for (name, widen, words) in cases {
        let plan = e.plan(name, 600_000, &Labels::new());
        let mut body = plan.body();
        widen(body.host_config.as_mut().unwrap());
        e.make(body, name, true).await;
        let err =
            e.p.attach(&AttachBy::Id(name.into()), &cancel)
                .await
                .unwrap_err();
        assert_eq!(err.code, ErrorCode::Refused, "{err:?}");
        assert!(err.message.contains(words), "{name}: {}", err.message);
        // attach did not make it, so it does not delete it.
        assert!(e.exists(name).await);
    }
    // The same container as planned attaches.
    let name = "computer-00000000d004";
    e.make(e.plan(name, 600_000, &Labels::new()).body(), name, true)
        .await;
    let r = e.p.attach(&AttachBy::Id(name.into()), &cancel).await;
    assert_eq!(r.unwrap().id, name);
    // A container that is not ours is not found.
    let err =
        e.p.attach(&AttachBy::Id("computer-nothex".into()), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_older_deletes_lower_epochs_keeps_its_own_and_another_runs_and_is_fenced() {
    let e = or_skip!(env("epochs").await);
    let cancel = CancellationToken::new();
    // Containers made (not started) with our labels: list sees them.
    let made = [
        ("computer-0000000e0001", "r1", "1"),
        ("computer-0000000e0002", "r1", "2"),
        ("computer-0000000e0003", "r1", "3"),
        ("computer-0000000e0004", "r2", "1"),
        ("computer-0000000e0005", "r1", "x"),
    ];
    for (name, run, epoch) in made {
        let labels = Labels::from([
            (label::RUN.to_string(), run.to_string()),
            (label::EPOCH.to_string(), epoch.to_string()),
        ]);
        e.make(e.plan(name, 600_000, &labels).body(), name, false)
            .await;
    }
    let r = release_older(&e.p, "r1", 3, &cancel).await.unwrap();
    assert_eq!(
        r.released,
        ["computer-0000000e0001", "computer-0000000e0002"]
    );
    assert_eq!(r.kept, ["computer-0000000e0003"]);
    assert_eq!(r.unproven.len(), 1);
    assert_eq!(r.unproven[0].0, "computer-0000000e0005");
    assert!(e.exists("computer-0000000e0003").await && e.exists("computer-0000000e0004").await);
    assert!(!e.exists("computer-0000000e0001").await);
    // A later claim holds the run: nothing is released.
    let err = release_older(&e.p, "r1", 2, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Refused);
    assert!(
        err.message.starts_with(
            "fenced: run \"r1\" has computer-0000000e0003 at epoch 3, above this claim's epoch 2"
        ),
        "{}",
        err.message
    );
    assert!(e.exists("computer-0000000e0003").await);
    assert_eq!(run_labels("r1", 4).unwrap().len(), 2);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_in_words_with_nothing_left_behind() {
    let e = or_skip!(env("bad").await);
    let _turn = SWEEPS.lock().await;
    let cancel = CancellationToken::new();
    let mut spec = e.spec(600_000);
    spec.image = Some("computer-mcp-test/none:missing".into());
    let err = e.p.create(&spec, &cancel).await.unwrap_err();
    assert_eq!(
        (err.code, err.field.as_deref()),
        (ErrorCode::NotFound, Some("image"))
    );
    assert!(
        err.message
            .starts_with("the image computer-mcp-test/none:missing is not on this Docker host"),
        "{}",
        err.message
    );
    let err =
        e.p.create(&e.spec(31 * 24 * 3_600_000), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("lifetime"));
    // A list the egress proxy does not take (allowlists themselves are
    // tests/docker_egress.rs's).
    let mut spec = e.spec(600_000);
    spec.network = NetworkPolicy::Allow(vec!["pypi.org".into(), "10.0.0.0/8".into()]);
    assert_eq!(
        e.p.create(&spec, &cancel)
            .await
            .unwrap_err()
            .field
            .as_deref(),
        Some("network")
    );
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
    for (share, words) in [
        ("rel/dir".to_string(), "is a relative path"),
        (format!("{}/link", dir.path().display()), "is a symlink"),
        (
            format!("{}/missing", dir.path().display()),
            "does not exist",
        ),
        (
            real.display().to_string(),
            "is not writable by the computer's user 1879048191:1879048191",
        ),
    ] {
        let mut spec = e.spec(600_000);
        spec.shares = vec![share.parse().unwrap()];
        let err = e.p.create(&spec, &cancel).await.unwrap_err();
        assert_eq!(err.field.as_deref(), Some("share"), "{share}");
        assert!(err.message.contains(words), "{share}: {}", err.message);
    }
    // An image with a VOLUME (a mount the computer was not asked for).
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Recipe(format!(
        "FROM {}\nVOLUME /data\n",
        e.image
    )));
    let with_volume = DockerProvider::new(opts).unwrap();
    let err = with_volume
        .create(&e.spec(600_000), &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("image"));
    assert!(
        err.message.contains("declares VOLUME [\"/data\"]"),
        "{}",
        err.message
    );
    assert_eq!(e.ours().await.len(), 0);
    // A container with a computer's name but not our label is not ours:
    // attach does not find it, release and sweep never touch it.
    let name = "computer-00000000aa01";
    let mut body = e.plan(name, -60_000, &Labels::new()).body();
    body.labels = Some(HashMap::from([(TEST_LABEL.to_string(), e.test.clone())]));
    e.make(body, name, false).await;
    let err =
        e.p.attach(&AttachBy::Id(name.into()), &cancel)
            .await
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound, "{err:?}");
    assert!(
        !e.p.sweep(&cancel)
            .await
            .unwrap()
            .contains(&name.to_string())
    );
    assert!(e.exists(name).await);
    e.clean().await;
    // An engine that is not there.
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("c2"));
    opts.socket = "/nonexistent/docker.sock".into();
    opts.image = Some(ImageSource::Name(e.image.clone()));
    let p = DockerProvider::new(opts).unwrap();
    let err = p.create(&e.spec(600_000), &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unreachable);
    assert_eq!(
        err.message,
        "the Docker engine at unix:///nonexistent/docker.sock did not answer: is dockerd running, and may this user reach its socket?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_is_bound_at_workspace_and_a_busybox_image_works() {
    let e = or_skip!(env("share").await);
    let cancel = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("ws");
    std::fs::create_dir(&shared).unwrap();
    nix::unistd::chown(&shared, Some(1879048191.into()), Some(1879048191.into())).unwrap();
    let mut spec = e.spec(600_000);
    spec.shares = vec![shared.display().to_string().parse().unwrap()];
    let busybox = std::env::var("CMCP_TEST_DOCKER_BUSYBOX")
        .unwrap_or_else(|_| "computer-mcp-test/busybox:latest".into());
    let have_busybox = e.docker.inspect_image(&busybox).await.is_ok();
    if need(
        "docker",
        have_busybox,
        &format!("the busybox image {busybox} is not built"),
    ) {
        spec.image = Some(busybox);
    }
    let made = e.p.create(&spec, &cancel).await.unwrap();
    assert!(
        made.notes.iter().any(|n| n.starts_with("share: ")),
        "{:?}",
        made.notes
    );
    let c = made.computer;
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    let r = run(&conn.client, "echo hi > /workspace/from-inside && id -u").await;
    assert_eq!(text(&r), "1879048191\n");
    assert_eq!(
        std::fs::read_to_string(shared.join("from-inside")).unwrap(),
        "hi\n"
    );
    conn.client.close();
    // attach reads the share back and holds the computer to it.
    assert_eq!(
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap()
            .id,
        c.id
    );
    e.p.release(&c, Release::Delete, &cancel).await.unwrap();
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_removed_from_outside_is_gone_on_the_next_call_within_5_s() {
    let e = or_skip!(env("killed").await);
    let cancel = CancellationToken::new();
    let c = e.sandbox(&cancel).await;
    let conn = e.p.connect(&c, &cancel).await.unwrap();
    assert_eq!(text(&run(&conn.client, "echo up").await), "up\n");
    remove_by_force(&e.docker, &c.id).await;
    let t = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        conn.client.call_typed(&ExecParams {
            argv: vec!["true".into()],
            ..Default::default()
        }),
    )
    .await
    .expect("the next call answers within 5 s");
    assert!(r.is_err(), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let err = e.p.connect(&c, &cancel).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Gone, "{err:?}");
    e.clean().await;
}
