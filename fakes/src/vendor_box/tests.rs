use super::*;

async fn a_box(owner: &str) -> Option<(VendorBox, Docker)> {
    let env = computer_testkit::docker_env().await?;
    let b = VendorBox::start(&env.docker, &BoxSpec::new(&env.image, owner))
        .await
        .unwrap();
    Some((b, env.docker))
}

#[tokio::test]
async fn a_box_is_bounded_and_runs_what_it_is_given_as_root() {
    let owner = computer_testkit::marker("box-runs");
    let Some((b, docker)) = a_box(&owner).await else {
        return;
    };
    let i = docker
        .inspect_container(
            b.id(),
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .unwrap();
    let hc = i.host_config.unwrap();
    assert_eq!(
        (
            hc.pids_limit,
            hc.memory,
            hc.memory_swap,
            hc.network_mode.as_deref()
        ),
        (Some(512), Some(1 << 30), Some(1 << 30), Some("none"))
    );
    assert_eq!(
        hc.cap_add,
        Some(vec!["SYS_ADMIN".to_string(), "NET_ADMIN".to_string()])
    );

    b.upload("/opt/x/y/file", b"some\nbytes\x00\xff")
        .await
        .unwrap();
    let ran = b
        .run(
            &Cmd::new(&["sh", "-c", "id -u; cat /opt/x/y/file; echo err >&2; exit 7"]),
            None,
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(
        ran,
        Ran {
            code: 7,
            stdout: b"0\nsome\nbytes\x00\xff".to_vec(),
            stderr: b"err\n".to_vec()
        }
    );
    let mut cmd = Cmd::new(&["sh", "-c", "echo \"$A $(pwd)\"; cat"]);
    cmd.env = vec![("A".into(), "b".into())];
    cmd.cwd = Some("/tmp".into());
    let ran = b
        .run(&cmd, Some(b"from stdin"), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        (ran.code, String::from_utf8_lossy(&ran.stdout).into_owned()),
        (0, "b /tmp\nfrom stdin".to_string())
    );
    b.remove().await.unwrap();
    assert!(
        computer_testkit::labelled_containers(&docker, &format!("{LABEL}={owner}"))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_command_streams_takes_input_and_ends_on_a_signal() {
    let owner = computer_testkit::marker("box-streams");
    let Some((b, docker)) = a_box(&owner).await else {
        return;
    };
    let mut a = b
        .attach(&Cmd::new(&["sh", "-c", "echo up; exec cat"]), true)
        .await
        .unwrap();
    assert!(a.pid > 1);
    let mut input = a.input.take().unwrap();
    input.write_all(b"ping\n").await.unwrap();
    input.flush().await.unwrap();
    let mut got = Vec::new();
    while got != b"up\nping\n" {
        match tokio::time::timeout(Duration::from_secs(20), a.output.next()).await {
            Ok(Some(Chunk::Stdout(c))) => got.extend_from_slice(&c),
            other => panic!("no echo: {other:?} after {got:?}"),
        }
    }
    b.signal(a.pid, "KILL").await.unwrap();
    while a.output.next().await.is_some() {}
    assert_eq!(b.exit_code(&a.exec).await.unwrap(), 137);
    assert!(b.signal(a.pid, "KILL").await.is_err());

    // A command in the background keeps running after the call.
    let pid = b.detach(&Cmd::new(&["sleep", "300"])).await.unwrap();
    let alive = b
        .run(
            &Cmd::new(&["sh", "-c", "kill -0 \"$1\"", "sh", &pid.to_string()]),
            None,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(alive.code, 0);
    // Dropped without remove: the box still goes.
    drop(b);
    assert!(
        computer_testkit::labelled_containers(&docker, &format!("{LABEL}={owner}"))
            .await
            .is_empty()
    );
}
