//! A browser with no X display answers screen.watch, screen.read and
//! input.actions by casting its front tab over CDP: a real headless
//! Chromium through its WebSocket, as a vendor's browser is reached.

use std::sync::Arc;

use computer_providers::cdp::{HostChromium, casts};
use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::{
    Action, ErrorKind, HelloResult, ImageFormat, InputActionsParams, ScreenReadParams,
    ScreenWatchParams, ScreenWatchResult,
};
use serde_json::json;

use super::support::{eval, send};

/// A page that logs its clicks and keys, a button at (100, 100) to (200, 150)
/// and a field below it.
const PAGE: &str = "data:text/html,<body style='margin:0;background:rgb(0,160,0)'>\
<button id=b style='position:absolute;left:100px;top:100px;width:100px;height:50px'>Go</button>\
<input id=f style='position:absolute;left:100px;top:200px;width:200px;height:30px'>\
<script>window.log=[];\
addEventListener('mousedown',e=>log.push('down '+e.clientX+','+e.clientY+' '+e.button));\
addEventListener('mouseup',e=>log.push('up '+e.clientX+','+e.clientY));\
b.onclick=e=>log.push('click '+e.clientX+','+e.clientY);\
addEventListener('keydown',e=>log.push('key '+e.key+(e.ctrlKey?' ctrl':'')));\
</script>";

async fn watch(c: &Arc<dyn ComputerClient>, after: u64, wait_ms: u64) -> ScreenWatchResult {
    c.call_typed(&ScreenWatchParams {
        after,
        wait_ms: Some(wait_ms),
        max_width: Some(400),
        quality: None,
        regions: false,
    })
    .await
    .unwrap()
}

async fn act(c: &Arc<dyn ComputerClient>, actions: Vec<Action>) {
    let r = c.call_typed(&InputActionsParams { actions }).await.unwrap();
    assert_eq!(r.failed, None, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browsers_front_tab_is_cast_paced_by_acks_and_takes_input() {
    if !computer_testkit::need_chromium() {
        return;
    }
    let chromium = HostChromium::start().await.unwrap();
    let c: Arc<dyn ComputerClient> = Arc::new(chromium.client().await.unwrap());
    let hello: HelloResult =
        serde_json::from_value(c.call_value("hello", json!({})).await.unwrap()).unwrap();
    assert!(casts(&hello), "{hello:?}");

    let t = send(&c, "Target.createTarget", json!({"url": PAGE}), None)
        .await
        .unwrap();
    let target = t["targetId"].as_str().unwrap().to_string();
    send(
        &c,
        "Target.activateTarget",
        json!({"targetId": target}),
        None,
    )
    .await
    .unwrap();
    let s = send(
        &c,
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
        None,
    )
    .await
    .unwrap();
    let session = s["sessionId"].as_str().unwrap().to_string();
    send(
        &c,
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 800, "height": 600, "deviceScaleFactor": 1, "mobile": false}),
        Some(&session),
    )
    .await
    .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while eval(&c, &session, "typeof window.log").await != "object" {
        assert!(std::time::Instant::now() < until, "the page did not load");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The first frame: a JPEG at most 400 wide of the 800x600 tab.
    let first = watch(&c, 0, 10_000).await;
    assert!(first.changed, "{first:?}");
    let f = first.frame.clone().unwrap();
    assert_eq!(f.format, ImageFormat::Jpeg);
    assert_eq!((f.width, f.height), (800, 600));
    assert_eq!((f.frame_width, f.frame_height), (400, 300));
    assert_eq!(&f.data.0[..2], &[0xFF, 0xD8]);
    assert!(f.eof && f.size == f.data.0.len() as u64, "{f:?}");
    // A caller behind the newest frame gets it again at once.
    assert_eq!(watch(&c, 0, 10_000).await.seq, first.seq);

    // Nothing changes on the page: no frame comes.
    let idle = watch(&c, first.seq, 1_500).await;
    assert!(!idle.changed && idle.frame.is_none(), "{idle:?}");
    assert_eq!(idle.seq, first.seq);

    // The page changes: the next frame comes.
    eval(
        &c,
        &session,
        "document.body.style.background = 'rgb(200,0,200)'",
    )
    .await;
    let next = watch(&c, first.seq, 10_000).await;
    assert!(next.changed && next.seq > first.seq, "{next:?}");
    let id = next.frame.as_ref().unwrap().id.clone();
    let r = c
        .call_typed(&ScreenReadParams {
            id,
            offset: 2,
            max_bytes: Some(10),
        })
        .await
        .unwrap();
    assert_eq!(r.data.0, next.frame.as_ref().unwrap().data.0[2..12]);
    let e = c
        .call_typed(&ScreenReadParams {
            id: "frame-999".into(),
            offset: 0,
            max_bytes: None,
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{e}");
    let e = c
        .call_typed(&ScreenWatchParams {
            after: next.seq + 5,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("past the newest frame's seq"), "{e}");

    // A click on the button and text typed into the field reach the page.
    act(
        &c,
        vec![Action::Click {
            point: Some([150, 125]),
            button: None,
            count: None,
            keys: None,
        }],
    )
    .await;
    act(
        &c,
        vec![
            Action::Click {
                point: Some([200, 215]),
                button: None,
                count: None,
                keys: None,
            },
            Action::Type {
                text: "Hello, agentrun! 123".into(),
            },
            Action::Key {
                keys: vec!["enter".into()],
                repeat: None,
            },
            Action::Key {
                keys: vec!["ctrl".into(), "a".into()],
                repeat: None,
            },
        ],
    )
    .await;
    let log = eval(&c, &session, "JSON.stringify(window.log)").await;
    let log: Vec<String> = serde_json::from_str(log.as_str().unwrap()).unwrap();
    assert!(log.contains(&"click 150,125".to_string()), "{log:?}");
    assert!(log.contains(&"down 200,215 0".to_string()), "{log:?}");
    assert!(log.contains(&"key Enter".to_string()), "{log:?}");
    assert!(log.contains(&"key a ctrl".to_string()), "{log:?}");
    assert_eq!(
        eval(&c, &session, "document.getElementById('f').value").await,
        "Hello, agentrun! 123"
    );

    // A press left down is let go by its up; a touch action is refused.
    act(
        &c,
        vec![Action::Down {
            point: Some([10, 500]),
            button: None,
        }],
    )
    .await;
    act(
        &c,
        vec![Action::Up {
            point: Some([12, 500]),
            button: None,
        }],
    )
    .await;
    let log = eval(&c, &session, "window.log.slice(-2).join('|')").await;
    assert_eq!(log, "down 10,500 0|up 12,500", "{log}");
    let r = c
        .call_typed(&InputActionsParams {
            actions: vec![Action::Tap { point: [1, 1] }],
        })
        .await
        .unwrap();
    assert_eq!(r.done, 0);
    assert_eq!(r.failed.unwrap().kind, ErrorKind::Unsupported);
}
