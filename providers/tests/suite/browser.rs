//! Browsers over CDP: a headless Chromium on this machine through its
//! WebSocket, and a local computer of kind browser whose Chromium runs
//! inside it on its debugging pipe (needs root and Debian's chromium).

use std::sync::Arc;

use computer_providers::cdp::HostChromium;
use computer_providers::local::{LocalOptions, LocalProvider};
use computer_providers::{ComputerSpec, Provider, Release};
use computer_testkit::{computerd_bin, need, need_chromium, need_root, or_skip};
use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    CdpEventsParams, ErrorKind, Group, MachineKind, ProcessListParams, ProcessReadParams,
    ProcessStartParams, SettingKind, Stream,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{eval, load_events, navigate, navigate_loaded, page, run, send, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_chromium_answers_cdp_and_keeps_its_events() {
    if !need_chromium() {
        return;
    }
    let chromium = HostChromium::start().await.unwrap();
    assert!(chromium.ws_url().starts_with("ws://127.0.0.1:"));
    let c: Arc<dyn ComputerClient> = Arc::new(chromium.client().await.unwrap());
    let hello: computerd::protocol::HelloResult =
        serde_json::from_value(c.call_value("hello", json!({})).await.unwrap()).unwrap();
    assert_eq!(hello.kind, MachineKind::Browser);
    // cdp is the provider's to declare: hello lists no group of its own.
    assert!(hello.groups.is_empty(), "{:?}", hello.groups);
    assert!(hello.version.contains("Chrome"), "{}", hello.version);
    c.call_value("ping", json!({})).await.unwrap();

    let session = page(&c).await;
    navigate(
        &c,
        &session,
        "data:text/html,<title>t1</title><script>console.log('hi from the page')</script>",
    )
    .await;
    let load = load_events(&c, &session, 10_000).await;
    assert_eq!(load.events.len(), 1, "{load:?}");
    assert_eq!(eval(&c, &session, "document.title").await, "t1");
    let console = c
        .call_typed(&CdpEventsParams {
            methods: Some(vec!["Runtime.consoleAPICalled".into()]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        console
            .events
            .iter()
            .any(|e| e.params["args"][0]["value"] == "hi from the page"),
        "{console:?}"
    );

    // A CDP error names the method; bad params name the field.
    let e = send(&c, "Page.navigate", json!({"url": 5}), Some(&session))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Invalid), "{e}");
    assert!(e.to_string().starts_with("Page.navigate: "), "{e}");
    let e = c
        .call_value(
            "cdp.send",
            json!({"method": "Browser.getVersion", "timeoutMs": 600_000}),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("timeoutMs: 600000 is outside 1 to 60000"),
        "{e}"
    );
    let e = c
        .call_value("exec.run", json!({"argv": ["true"]}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{e}");
    assert!(
        e.to_string()
            .contains("a browser answers hello, ping, cdp.send, cdp.events"),
        "{e}"
    );
    let e = c.call_value("no.such.method", json!({})).await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{e}");

    // The browser ending ends the connection, in words.
    drop(chromium);
    let e = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            match c.call_value("ping", json!({})).await {
                Err(e) => return e,
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .unwrap();
    assert!(matches!(e, ClientError::Closed(_)), "{e:?}");
    assert!(c.is_closed());
}

fn local_browsers(state: &std::path::Path) -> Option<LocalProvider> {
    if !need_root() || !need_chromium() {
        return None;
    }
    let bin = computerd_bin();
    if !need("root", bin.is_some(), "the computerd binary is not built") {
        return None;
    }
    let opts = LocalOptions {
        browser: true,
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.to_path_buf(), bin.unwrap())
    };
    Some(LocalProvider::new(opts).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_browser_runs_chromium_inside_the_computer_on_its_pipe() {
    let state = tempfile::tempdir().unwrap();
    let p = or_skip!(local_browsers(state.path()));
    let cancel = CancellationToken::new();
    let caps = p.capabilities();
    assert_eq!(caps.kind, MachineKind::Browser);
    assert!(caps.groups.contains(&Group::Cdp), "{:?}", caps.groups);
    let e = p.check(&ComputerSpec::sandbox(600_000)).unwrap_err();
    assert!(
        e.message.contains("makes browsers here, not a sandbox"),
        "{e}"
    );

    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Browser;
    let made = p.create(&spec, &cancel).await.unwrap();
    assert!(
        made.notes
            .iter()
            .any(|n| n.starts_with("browser: ") && n.contains("no port opened")),
        "{:?}",
        made.notes
    );
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    assert_eq!(conn.hello.kind, MachineKind::Browser);
    assert_eq!(
        conn.hello.groups,
        vec![Group::Exec, Group::Files, Group::Processes]
    );
    let c = conn.client.clone();

    // A page the computer serves itself loads with network none; the
    // browser runs as the computer's user, with no port of its own.
    c.call_typed(&ProcessStartParams {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "mkdir -p /work/site && echo '<title>inside</title><p id=p>served in the computer</p>' > /work/site/index.html && cd /work/site && exec python3 -m http.server 8123 --bind 127.0.0.1".into(),
        ],
        ..Default::default()
    })
    .await
    .unwrap();
    run(&c, "for i in $(seq 100); do grep -q ':1FBB 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.05; done; exit 1").await;
    let session = page(&c).await;
    navigate_loaded(&c, &session, "http://127.0.0.1:8123/").await;
    assert_eq!(eval(&c, &session, "document.title").await, "inside");
    assert_eq!(
        eval(&c, &session, "document.getElementById('p').textContent").await,
        "served in the computer"
    );
    // Nothing outside loads: network none.
    let r = navigate(&c, &session, "http://1.1.1.1/").await;
    assert!(r.get("errorText").is_some(), "{r}");

    let ps = run(&c, "ps -o user=,args= -C chromium | head -1; cat /proc/net/tcp /proc/net/tcp6 | awk 'NR>1 && $4==\"0A\"' | wc -l").await;
    let out = text(&ps);
    assert!(out.contains("--remote-debugging-pipe"), "{out}");
    assert!(!out.starts_with("root"), "{out}");
    // One listener: the test's own http.server.
    assert_eq!(out.lines().last(), Some("1"), "{out}");

    // A browser that ends is started again by the next cdp call.
    run(&c, "pkill -KILL -x chromium; sleep 0.3").await;
    let again = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            match send(&c, "Browser.getVersion", json!({}), None).await {
                Ok(v) => return v,
                Err(ClientError::Closed(_)) => {
                    panic!("the computer's connection closed with its browser")
                }
                // A call that finds it ending says so; the next starts one.
                Err(e) if e.kind() == Some(ErrorKind::Aborted) => {
                    assert!(
                        e.to_string().contains("the next call starts it again"),
                        "{e}"
                    );
                }
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .unwrap();
    assert!(again["product"].as_str().is_some(), "{again}");
    assert!(!c.is_closed());

    // A second connection ends the first one's browser and starts its own.
    let again = p.connect(&made.computer, &cancel).await.unwrap();
    let s2 = page(&again.client).await;
    assert_eq!(eval(&again.client, &s2, "1 + 1").await, 2);

    // The browsers are the server's: their pipes carry every caller's
    // pages, so the model's process tools see only its own programs.
    let list = again
        .client
        .call_typed(&ProcessListParams::default())
        .await
        .unwrap();
    let shown: Vec<&str> = list.processes.iter().map(|p| p.id.as_str()).collect();
    assert!(
        list.processes
            .iter()
            .all(|p| p.argv.iter().all(|a| !a.contains("remote-debugging"))),
        "{:?}",
        list.processes
    );
    let hidden: Vec<&str> = ["p2", "p3", "p4"]
        .into_iter()
        .filter(|id| !shown.contains(id))
        .collect();
    assert!(!hidden.is_empty(), "{shown:?}");
    for id in hidden {
        let read = again
            .client
            .call_typed(&ProcessReadParams {
                id: id.into(),
                stream: Stream::Stdout,
                offset: 0,
                max_bytes: Some(100),
                wait_ms: None,
            })
            .await
            .unwrap_err();
        assert!(
            read.to_string().contains(&format!("no process {id}")),
            "{read}"
        );
    }
    drop(conn);
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

/// A browser computer bounded below what Chromium needs: connect (which
/// starts the browser) fails in our words, naming the bound, what Chromium
/// needs and the setting that raises it; Chromium's own words follow.
async fn too_small(p: &LocalProvider, tune: impl FnOnce(&mut ComputerSpec)) -> String {
    let cancel = CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Browser;
    tune(&mut spec);
    let made = p.create(&spec, &cancel).await.unwrap();
    let err = match p.connect(&made.computer, &cancel).await {
        Ok(_) => panic!("a browser started under {:?}", spec.sizes),
        Err(e) => e,
    };
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    err.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_bounded_below_what_chromium_needs_names_the_bound_and_the_setting() {
    let state = tempfile::tempdir().unwrap();
    let p = or_skip!(local_browsers(state.path()));
    let words = too_small(&p, |s| s.sizes.pids = Some(32)).await;
    assert!(
        words.contains(&format!(
            "the computer's browser did not start: the computer's pids bound (32 processes and threads) is too low for Chromium, which needs about {} of them with a page open: raise it with the server's --pids or COMPUTER_MCP_PIDS",
            computer_providers::cdp::chromium::NEEDS_PIDS
        )),
        "{words}"
    );
    assert!(!words.contains("memory bound"), "{words}");
    // Chromium's own words stay, after ours.
    assert!(
        words.contains("the browser in the computer ended"),
        "{words}"
    );

    let words = too_small(&p, |s| s.sizes.memory_mb = Some(64)).await;
    assert!(
        words.contains(&format!(
            "the computer's memory bound (64 MiB) is too low for Chromium, which needs about {} MiB with a page open: raise it with the server's --memory-mb or COMPUTER_MCP_MEMORY_MB",
            computer_providers::cdp::chromium::NEEDS_MEMORY_MB
        )),
        "{words}"
    );
}

/// The whole screen as RGB rows, saved at `save` to be looked at.
async fn screen_rgb(c: &Arc<dyn ComputerClient>, save: &std::path::Path) -> (u32, u32, Vec<u8>) {
    let (_, png) = c.screen_shot(None).await.unwrap();
    std::fs::write(save, &png).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb, "{info:?}");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Issue 34: a desktop's windows get a window manager's frame and place,
/// and the browser it shows has no infobar over its pages ("You are using
/// an unsupported command-line flag: --no-sandbox" took 56 px of each).
/// `p` makes desktops whose computer has Chromium, matchbox and xprop.
async fn a_desktop_frames_its_windows_and_shows_pages_whole(p: &dyn Provider, tag: &str) {
    let cancel = CancellationToken::new();
    let mut spec = ComputerSpec::sandbox(600_000);
    spec.kind = SettingKind::Desktop;
    let made = p.create(&spec, &cancel).await.unwrap();
    assert!(
        made.notes.iter().any(|n| n
            .starts_with("window manager: /usr/bin/matchbox-window-manager (process p")
            && n.ends_with("), so each window gets a title bar and the screen")),
        "{:?}",
        made.notes
    );
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    let c = conn.client.clone();
    // Started with the desktop, it takes the display a moment later (on
    // a loaded machine, seconds): asked again for up to 20 s.
    let mut check = String::new();
    for _ in 0..40 {
        check = text(&run(&c, "xprop -root _NET_SUPPORTING_WM_CHECK").await);
        if check.starts_with("_NET_SUPPORTING_WM_CHECK(WINDOW)") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        check.starts_with("_NET_SUPPORTING_WM_CHECK(WINDOW): window id # 0x"),
        "no window manager holds the display: {check:?}"
    );

    // The browser's first tab, as the page tools use it (the infobar is
    // a tab's: one made later never had it).
    let targets = send(&c, "Target.getTargets", json!({}), None)
        .await
        .unwrap();
    let first = targets["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "page")
        .unwrap_or_else(|| panic!("no page tab: {targets}"))["targetId"]
        .clone();
    let s = send(
        &c,
        "Target.attachToTarget",
        json!({"targetId": first, "flatten": true}),
        None,
    )
    .await
    .unwrap();
    let session = s["sessionId"].as_str().unwrap().to_string();
    for m in ["Page.enable", "Runtime.enable"] {
        send(&c, m, json!({}), Some(&session)).await.unwrap();
    }
    navigate_loaded(
        &c,
        &session,
        "data:text/html,<title>whole</title><body style='margin:0;background:rgb(255,0,0)'>",
    )
    .await;
    // The infobar comes a moment after the window: watched for 3 s. The
    // window's top (tab strip and toolbar) is 87 px on Chromium 156; the
    // infobar made it 143.
    let mut chrome = 0;
    for _ in 0..15 {
        let v = eval(&c, &session, "[outerHeight - innerHeight, innerHeight]").await;
        chrome = chrome.max(v[0].as_i64().unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let inner = eval(&c, &session, "innerHeight").await.as_i64().unwrap();
    let save = std::env::temp_dir().join(format!("cmcp-desktop-{tag}.png"));
    let (w, h, rgb) = screen_rgb(&c, &save).await;
    eprintln!("{tag}: the shot is at {}", save.display());
    assert!(chrome < 100, "{chrome} px of the window are not the page's");

    // The browser's window is the window manager's: framed (a child of
    // its frame, where an unmanaged one is the root's, xwininfo's first
    // level), and so placed below the frame's title bar.
    let tree = text(&run(&c, "xwininfo -root -tree").await);
    let line = tree
        .lines()
        .find(|l| l.contains("\"whole - Chromium\""))
        .unwrap_or_else(|| panic!("no browser window: {tree}"));
    let depth = line.len() - line.trim_start().len();
    assert!(depth > 5, "the browser's window is unframed: {line:?}");

    // What a model sees: the page's red runs from right under the toolbar
    // to the window's bottom, nothing over it.
    let x = w / 2;
    let red: Vec<u32> = (0..h)
        .filter(|y| {
            let i = ((y * w + x) * 3) as usize;
            rgb[i..i + 3] == [255, 0, 0]
        })
        .collect();
    assert_eq!(red.len() as i64, inner, "{} red rows of {h}", red.len());
    let top = red[0];
    assert!(
        top > 87 && top < 20 + 100,
        "the page starts at y {top} (title bar, then the toolbar, then the page)"
    );
    assert_eq!(
        red.last().unwrap() - top + 1,
        red.len() as u32,
        "not one run"
    );
    conn.client.close();
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_desktop_frames_its_windows_and_shows_pages_whole() {
    let state = tempfile::tempdir().unwrap();
    if !need_root() || !need_chromium() || !computer_testkit::need_xvfb() {
        return;
    }
    let wm = std::path::Path::new("/usr/bin/matchbox-window-manager").is_file()
        && std::path::Path::new("/usr/bin/xprop").is_file();
    if !need(
        "xvfb",
        wm,
        "a desktop's window manager needs the packages matchbox-window-manager and x11-utils",
    ) {
        return;
    }
    let opts = LocalOptions {
        desktop: Some("1280x800".parse().unwrap()),
        max_lifetime_ms: 3_600_000,
        ..LocalOptions::new(state.path().to_path_buf(), computerd_bin().unwrap())
    };
    let p = LocalProvider::new(opts).unwrap();
    a_desktop_frames_its_windows_and_shows_pages_whole(&p, "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_desktop_frames_its_windows_and_shows_pages_whole() {
    use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
    let env = or_skip!(computer_testkit::docker_env().await);
    let image = std::env::var("CMCP_TEST_DOCKER_DESKTOP")
        .unwrap_or_else(|_| "computer-mcp-test/desktop:bookworm".into());
    if !need(
        "docker",
        env.docker.inspect_image(&image).await.is_ok(),
        &format!(
            "the desktop image {image} is not on this Docker host (fixtures/images/build.sh makes it)"
        ),
    ) {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let mut opts = DockerOptions::new(env.computerd.clone(), cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image));
    opts.desktop = Some("1280x800".parse().unwrap());
    opts.desktop_browser = true;
    let p = DockerProvider::new(opts).unwrap();
    a_desktop_frames_its_windows_and_shows_pages_whole(&p, "docker").await;
}
