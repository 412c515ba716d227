//! Docker computers of kind desktop and browser: the X server through the
//! daemon, an image without Xvfb, a browser bounded below Chromium's need.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};
use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::{AttachBy, Provider, Release};
use computer_testkit::{need, or_skip};
use computerd::client::ComputerExt;
use tokio_util::sync::CancellationToken;

use super::{Env, TEST_LABEL, env, run, text};

/// The desktop image (fixtures/images/build.sh), or None (a skip).
async fn desktop_image(e: &Env) -> Option<String> {
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    let have = e.docker.inspect_image(&image).await.is_ok();
    need(
        "docker",
        have,
        &format!("the desktop image {image} is not on this Docker host (fixtures/images/build.sh makes it)"),
    )
    .then_some(image)
}

fn desktop_provider(e: &Env, image: &str, screen: &str) -> DockerProvider {
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image.into()));
    opts.desktop = Some(screen.parse().unwrap());
    DockerProvider::new(opts).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_desktop_starts_its_x_server_through_the_daemon_and_declares_the_screen() {
    let e = or_skip!(env("desktop").await);
    let image = or_skip!(desktop_image(&e).await);
    let cancel = CancellationToken::new();
    let p = desktop_provider(&e, &image, "1024x768");
    let caps = p.capabilities();
    assert_eq!(caps.kind, computerd::protocol::MachineKind::Desktop);
    let mut spec = e.spec(600_000);
    // A desktop provider makes desktops only, and says so before any call.
    let e_kind = p.check(&spec).unwrap_err();
    assert_eq!(e_kind.field.as_deref(), Some("kind"), "{}", e_kind.message);
    spec.kind = computerd::protocol::SettingKind::Desktop;
    let made = p.create(&spec, &cancel).await.unwrap();
    let c = made.computer.clone();
    let conn = p.connect(&c, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, computerd::protocol::MachineKind::Desktop);
    for g in computer_providers::docker::desktop::GROUPS {
        assert!(conn.hello.groups.contains(g), "{:?}", conn.hello.groups);
    }
    // The screen is the size asked for, shot through the daemon's X11.
    let shot = conn
        .client
        .call_typed(&computerd::protocol::ScreenShotParams::default())
        .await
        .unwrap();
    assert_eq!((shot.screen_width, shot.screen_height), (1024, 768));
    assert_eq!(&shot.data.0[1..4], b"PNG");
    // The X server is one process of the daemon's table, the computer's user's.
    let r = run(
        &conn.client,
        "ps -o user=,args= -C Xvfb 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
    )
    .await;
    assert!(
        text(&r).contains("Xvfb :0 -screen 0 1024x768x24"),
        "{}",
        text(&r)
    );
    let listed = conn
        .client
        .call_typed(&computerd::protocol::ProcessListParams::default())
        .await
        .unwrap();
    let x = listed
        .processes
        .iter()
        .find(|p| p.argv.first().map(String::as_str) == Some("Xvfb") && p.running)
        .expect("Xvfb in the process table");
    // docker inspect holds the display in init's command, and a sandbox
    // provider refuses to attach a desktop, naming why.
    let i = e
        .docker
        .inspect_container(&c.id, None::<InspectContainerOptions>)
        .await
        .unwrap();
    let cmd = i.config.unwrap().cmd.unwrap();
    assert!(cmd.windows(2).any(|w| w == ["--display", ":0"]), "{cmd:?}");
    // Programs get DISPLAY, so a GUI program started from a shell finds it.
    let r = run(&conn.client, "printf %s \"$DISPLAY\"").await;
    assert_eq!(text(&r), ":0");
    let refused =
        e.p.attach(&AttachBy::Id(c.id.clone()), &cancel)
            .await
            .unwrap_err();
    assert!(
        refused.message.contains("it is a desktop (display :0)"),
        "{}",
        refused.message
    );
    // Its X server gone, the desktop is refused at connect in words.
    conn.client
        .call_value(
            "process.signal",
            serde_json::json!({"id": x.id, "signal": "KILL"}),
        )
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let gone = loop {
        match p.connect(&c, &cancel).await {
            Err(e) => break e,
            Ok(_) if Instant::now() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(_) => panic!("a desktop whose X server was killed still connects"),
        }
    };
    assert!(
        gone.message.contains("the desktop's X server has gone"),
        "{}",
        gone.message
    );
    p.release(&c, Release::Delete, &cancel).await.unwrap();
    assert!(!e.exists(&c.id).await);
    e.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_on_an_image_without_xvfb_is_refused_in_words_and_deleted() {
    let e = or_skip!(env("desktop-no-x").await);
    let cancel = CancellationToken::new();
    // The plain Debian image has no X server.
    let p = desktop_provider(&e, &e.image, "1280x800");
    let mut spec = e.spec(600_000);
    spec.kind = computerd::protocol::SettingKind::Desktop;
    let err = p.create(&spec, &cancel).await.unwrap_err();
    assert!(
        err.message
            .contains("Xvfb :0 -screen 0 1280x800x24 -nolisten tcp")
            && err.message.contains("xvfb"),
        "{}",
        err.message
    );
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&HashMap::from([(
            "label",
            vec![format!("{TEST_LABEL}=desktop-no-x")],
        )]))
        .build();
    let left = e.docker.list_containers(Some(opts)).await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_browser_bounded_below_what_chromium_needs_names_the_bound_and_the_setting() {
    let e = or_skip!(env("browser-pids").await);
    let image = or_skip!(desktop_image(&e).await);
    let cancel = CancellationToken::new();
    let mut opts = DockerOptions::new(e.computerd.clone(), e.cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image));
    opts.browser = true;
    let p = DockerProvider::new(opts).unwrap();
    let mut spec = e.spec(600_000);
    spec.kind = computerd::protocol::SettingKind::Browser;
    spec.sizes.pids = Some(32);
    let made = p.create(&spec, &cancel).await.unwrap();
    assert_eq!(made.computer.sizes.map(|s| s.pids), Some(32));
    // Connect starts the browser, which cannot run in 32 tasks.
    let err = match p.connect(&made.computer, &cancel).await {
        Ok(_) => panic!("a browser started within 32 pids"),
        Err(err) => err,
    };
    assert!(
        err.message.contains(&format!(
            "the computer's browser did not start: the computer's pids bound (32 processes and threads) is too low for Chromium, which needs about {} of them with a page open: raise it with the server's --pids or COMPUTER_MCP_PIDS",
            computer_providers::cdp::chromium::NEEDS_PIDS
        )),
        "{}",
        err.message
    );
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    e.clean().await;
}
