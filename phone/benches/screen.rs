//! Where a phone screenshot's time goes, stage by stage, on the fixture
//! phone through Debian's adb server on a port of its own: `screencap -p`
//! and raw `screencap` fetched through the same server, the PNG decoded,
//! the frame fitted as the `screenshot` tool asks (about 1.15 MP) and
//! encoded, and the client's whole `screen.shot`.
//!
//!     cargo bench -p computer-phone --bench screen
//!
//! `CMCP_BENCH_CALLS` sets the runs of each figure (default 30).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use computer_phone::adb::AdbShell;
use computer_phone::client::PhoneClient;
use computer_phone::screen::{Png, Raw, Screencap};
use computer_phone_fixture::rig::Rig;
use computerd::client::ComputerClient;
use computerd::protocol::Fit;
use serde_json::json;

fn median(label: &str, mut v: Vec<Duration>) -> Duration {
    v.sort();
    let m = v[v.len() / 2];
    println!(
        "{label:<44} median {:>7.2} ms  (min {:.2}, max {:.2})",
        m.as_secs_f64() * 1e3,
        v[0].as_secs_f64() * 1e3,
        v[v.len() - 1].as_secs_f64() * 1e3
    );
    m
}

async fn runs<T, F: std::future::Future<Output = T>>(
    label: &str,
    n: usize,
    mut f: impl FnMut() -> F,
) -> T {
    let mut v = Vec::with_capacity(n);
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        last = Some(f().await);
        v.push(t.elapsed());
    }
    median(label, v);
    last.unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("CMCP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let Some(rig) = Rig::of_test(dir.path(), None).await else {
        println!("skipped: adb is not on PATH (apt-get install adb)");
        return;
    };
    let device = rig.adb.device(rig.transport_id);
    let png = runs("exec screencap -p (fetch)", n, || {
        device.exec("screencap -p")
    })
    .await
    .unwrap();
    let raw = runs("exec screencap (raw, fetch)", n, || {
        device.exec("screencap")
    })
    .await
    .unwrap();
    println!("  PNG {} bytes, raw {} bytes", png.len(), raw.len());
    if let Ok(p) = std::env::var("CMCP_DUMP") {
        std::fs::write(p, &png).unwrap();
    }
    // The screenshot tool's budget (tools' screenshot_max 1280x800, about
    // 1.15 MP).
    let fit = Fit {
        long: 1280,
        short: 800,
        pixels: 1_150_000,
        max_width: None,
    };
    let whole = runs("decode the whole PNG (RGB)", n, || async {
        Png::read(&png).unwrap().frame().unwrap()
    })
    .await;
    let (w, h) = fit.size(whole.width, whole.height, false);
    println!("  fit {}x{} -> {w}x{h}", whole.width, whole.height);
    let frame = runs(
        "png crate: decode scaling row by row to the fit",
        n,
        || async { Png::read(&png).unwrap().scaled(w, h).unwrap() },
    )
    .await;
    let mut v = Vec::with_capacity(n);
    let mut buf = Vec::new();
    let mut again = None;
    for _ in 0..n {
        let t = Instant::now();
        again = Some(
            Screencap::read(&png, &mut buf)
                .unwrap()
                .scaled(w, h)
                .unwrap(),
        );
        v.push(t.elapsed());
    }
    median("Screencap: inflate (buffer reused), scale runs", v);
    assert_eq!(again.unwrap(), frame, "the two decoders differ");
    runs("read + scale the raw frame to the fit", n, || async {
        Raw::read(&raw).unwrap().scaled(w, h).unwrap()
    })
    .await;
    let out = runs("encode the fitted frame (PNG)", n, || async {
        frame.png().unwrap()
    })
    .await;
    println!("  fitted PNG {} bytes", out.len());
    let shell = AdbShell::new(device.clone()).await.unwrap();
    let client = PhoneClient::new(Arc::new(shell), Default::default())
        .await
        .unwrap();
    let fitted = json!({"fit": fit});
    runs("client screen.shot, fitted (first chunk)", n, || {
        client.call_value("screen.shot", fitted.clone())
    })
    .await
    .unwrap();
    // The same screen asked two ways in turn (576 and 575 px wide): every
    // shot is decoded, scaled and encoded, as after the screen changed
    // (the line above is the same screen again: its first shot's PNG).
    let other = json!({"fit": Fit { max_width: Some(w - 1), ..fit }});
    let mut turn = 0;
    runs("client screen.shot, fitted, each decoded", n, || {
        turn += 1;
        let p = if turn % 2 == 0 { &fitted } else { &other };
        client.call_value("screen.shot", p.clone())
    })
    .await
    .unwrap();
    let probe = json!({"region": {"x": 0, "y": 0, "width": 1, "height": 1}});
    runs("client screen.shot, a 1x1 probe", n, || {
        client.call_value("screen.shot", probe.clone())
    })
    .await
    .unwrap();
}
