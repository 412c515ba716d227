//! screen.* and input.*: what a desktop shows and what its input does,
//! read from the fixture's own log (no model). The fixture (the run's
//! `fixture`, the static `computerd-x11-fixture`) is written into the
//! computer with files.write and started with process.start: a 200x200
//! window at (0, 0) in four colours (red, green, blue, yellow, clockwise
//! from top left) that logs each event it gets as a JSON line. It is
//! stopped when its case ends, whatever the case found.

use std::time::Duration;

use computerd::client::{ComputerExt, WriteFileOptions};
use computerd::protocol::{
    ErrorKind, InputActionsResult, ProcessSignalParams, ProcessStartParams, Region,
    ScreenReadParams, ScreenShotParams, ScreenWatchParams, Signal,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::ctx::{Computer, Ctx, Outcome, ensure, fail};

/// The most pixels a side of a PNG the suite reads may have.
const MAX_SIDE: u32 = 16_384;
/// The most pixels a PNG the suite reads may have.
const MAX_PIXELS: u64 = 1 << 25;

/// The fixture's colours at the centre of each quadrant.
const QUADRANTS: [(&str, u32, u32, [u8; 3]); 4] = [
    ("red", 50, 50, [255, 0, 0]),
    ("green", 150, 50, [0, 255, 0]),
    ("blue", 150, 150, [0, 0, 255]),
    ("yellow", 50, 150, [255, 255, 0]),
];

/// The fixture, running in a computer.
struct Fixture<'a> {
    t: &'a Ctx,
    c: &'a Computer,
    id: String,
    log: String,
}

impl<'a> Fixture<'a> {
    /// Write the fixture in, start it, and wait for its `ready`.
    async fn start(t: &'a Ctx, c: &'a Computer) -> Result<Fixture<'a>, Outcome> {
        let Some(path) = &t.fixture else {
            return Err(Outcome::Skip(
                "no fixture was given (--fixture PATH, the static computerd-x11-fixture): the input cases read what it logs".into(),
            ));
        };
        let bytes = std::fs::read(path).map_err(|e| {
            Outcome::Fail(format!(
                "the fixture {} cannot be read: {e}",
                path.display()
            ))
        })?;
        let dir = t.workdir(c).await?;
        let exe = format!("{dir}/computerd-x11-fixture");
        let log = format!("{dir}/fixture.log");
        c.conn
            .client
            .write_file(
                &exe,
                &bytes,
                WriteFileOptions {
                    mode: Some(0o755),
                    parents: true,
                },
            )
            .await
            .map_err(|e| Outcome::Fail(format!("writing the fixture in failed: {e}")))?;
        let started = t
            .call(
                c,
                &ProcessStartParams {
                    argv: vec![exe, "--log".into(), log.clone()],
                    ..Default::default()
                },
            )
            .await?;
        let f = Fixture {
            t,
            c,
            id: started.id,
            log,
        };
        if let Err(e) = f
            .wait_for("its ready line", |ev| {
                ev.iter().any(|e| e["event"] == "ready")
            })
            .await
        {
            f.stop().await;
            return Err(e);
        }
        Ok(f)
    }

    /// Every event it logged so far.
    async fn events(&self) -> Vec<Value> {
        let bytes = self
            .c
            .conn
            .client
            .read_file(&self.log)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Its events, once `done` holds of them (within 10 s).
    async fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>, Outcome> {
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let ev = self.events().await;
            if done(&ev) {
                return Ok(ev);
            }
            if tokio::time::Instant::now() >= until {
                return fail(format!(
                    "the fixture did not log {what} within 10 s; it logged {}",
                    show(&ev)
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(&self) {
        let _ = self
            .t
            .try_call(
                self.c,
                &ProcessSignalParams {
                    id: self.id.clone(),
                    signal: Signal::Kill,
                },
            )
            .await;
    }
}

/// A case's body, given the fixture up on the shared computer.
type Body = for<'a> fn(&'a Fixture<'a>) -> BoxFuture<'a, Result<(), Outcome>>;

/// Start the fixture on the shared computer, run `body`, and stop the
/// fixture whatever the body found.
async fn with_fixture(t: &Ctx, body: Body) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let f = Fixture::start(t, c).await?;
    let outcome = body(&f).await;
    f.stop().await;
    outcome
}

fn show(ev: &[Value]) -> String {
    let lines: Vec<String> = ev.iter().map(Value::to_string).collect();
    if lines.is_empty() {
        "nothing".into()
    } else {
        lines.join(", ")
    }
}

pub(super) async fn actions(c: &Computer, a: Value) -> Result<InputActionsResult, Outcome> {
    let v = tokio::time::timeout(
        Duration::from_secs(60),
        c.conn
            .client
            .call_value("input.actions", json!({ "actions": a })),
    )
    .await
    .map_err(|_| Outcome::Fail("input.actions did not answer within 60 s".into()))?
    .map_err(|e| Outcome::Fail(format!("input.actions failed: {e}")))?;
    serde_json::from_value(v)
        .map_err(|e| Outcome::Fail(format!("input.actions answered what is not a result: {e}")))
}

/// A whole shot: its first chunk and screen.read for the rest.
async fn shot(
    t: &Ctx,
    c: &Computer,
    region: Option<Region>,
) -> Result<(computerd::protocol::ScreenShotResult, Vec<u8>), Outcome> {
    let r = t.call(c, &ScreenShotParams { region, fit: None }).await?;
    let mut png = r.data.0.clone();
    let mut eof = r.eof;
    while !eof {
        if png.len() as u64 > r.size {
            return fail(format!(
                "screen.read gave {} bytes of a {}-byte shot",
                png.len(),
                r.size
            ));
        }
        let more = t
            .call(
                c,
                &ScreenReadParams {
                    id: r.id.clone(),
                    offset: png.len() as u64,
                    max_bytes: None,
                },
            )
            .await?;
        if more.data.0.is_empty() && !more.eof {
            return fail("screen.read gave no bytes before the end of the shot");
        }
        png.extend_from_slice(&more.data.0);
        eof = more.eof;
    }
    ensure(png.len() as u64 == r.size, || {
        format!("the shot is {} bytes, where it said {}", png.len(), r.size)
    })?;
    Ok((r, png))
}

/// Decode an 8-bit, non-interlaced PNG of at most [`MAX_SIDE`] a side and
/// [`MAX_PIXELS`], inflating no more than its header gives: its size and
/// RGB pixels.
fn decode(bytes: &[u8]) -> Result<(u32, u32, Vec<u8>), Outcome> {
    let bad = |w: String| Outcome::Fail(format!("the shot is not a PNG the suite reads: {w}"));
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    d.set_transformations(png::Transformations::EXPAND);
    let mut r = d.read_info().map_err(|e| bad(e.to_string()))?;
    let info = r.info();
    let (w, h) = (info.width, info.height);
    if info.bit_depth != png::BitDepth::Eight || info.interlaced {
        return Err(bad(format!(
            "bit depth {:?}, interlaced {}",
            info.bit_depth, info.interlaced
        )));
    }
    if w > MAX_SIDE || h > MAX_SIDE || u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(bad(format!("{w}x{h} is over the suite's bounds")));
    }
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => return Err(bad(format!("colour type {other:?}"))),
    };
    let size = r
        .output_buffer_size()
        .ok_or_else(|| bad("its size overflows".into()))?;
    let mut buf = vec![0; size];
    let frame = r.next_frame(&mut buf).map_err(|e| bad(e.to_string()))?;
    buf.truncate(frame.buffer_size());
    let rgb: Vec<u8> = if channels == 4 {
        buf.chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect()
    } else {
        buf
    };
    if rgb.len() as u64 != u64::from(w) * u64::from(h) * 3 {
        return Err(bad(format!("{} bytes of pixels for {w}x{h}", rgb.len())));
    }
    Ok((w, h, rgb))
}

fn pixel(rgb: &[u8], w: u32, x: u32, y: u32) -> [u8; 3] {
    let at = ((y * w + x) * 3) as usize;
    [rgb[at], rgb[at + 1], rgb[at + 2]]
}

/// A whole screen decodes to its size; a region has the region's size;
/// the fixture's four colours are where it paints them.
pub async fn screenshot_size(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let (r, png) = shot(t, c, None).await?;
    let (w, h, _) = decode(&png)?;
    ensure(
        (w, h) == (r.width, r.height) && (w, h) == (r.screen_width, r.screen_height),
        || {
            format!(
                "a whole-screen shot is {w}x{h}, where it says {}x{} of a {}x{} screen",
                r.width, r.height, r.screen_width, r.screen_height
            )
        },
    )?;
    ensure(r.scale > 0.0, || format!("the shot's scale is {}", r.scale))?;
    let region = Region {
        x: 10,
        y: 20,
        width: 64,
        height: 48,
    };
    let (rr, png) = shot(t, c, Some(region)).await?;
    let (rw, rh, _) = decode(&png)?;
    ensure(
        (rw, rh) == (64, 48) && (rr.width, rr.height) == (64, 48),
        || {
            format!(
                "a 64x48 region shot is {rw}x{rh} (it says {}x{})",
                rr.width, rr.height
            )
        },
    )?;
    with_fixture(t, |f| {
        Box::pin(async move {
        let (_, png) = shot(f.t, f.c, Some(Region { x: 0, y: 0, width: 200, height: 200 })).await?;
        let (w, _, rgb) = decode(&png)?;
        for (name, x, y, want) in QUADRANTS {
            let got = pixel(&rgb, w, x, y);
            ensure(got == want, || {
                format!("the fixture's {name} quadrant shows {got:?} at ({x}, {y}), where it paints {want:?}")
            })?;
        }
        Ok(())
        })
    })
    .await
}

/// A single and a double click each show in the fixture's log at their
/// point, with their count.
pub async fn click_lands(t: &Ctx) -> Result<(), Outcome> {
    with_fixture(t, |f| {
        Box::pin(async move {
        let n = f.events().await.len();
        let r = actions(f.c,
            json!([
                {"type": "click", "point": [150, 50]},
                {"type": "wait", "ms": 450},
                {"type": "click", "point": [50, 150], "count": 2}
            ]),
        )
        .await?;
        ensure(r.done == 3 && r.failed.is_none(), || {
            format!("the clicks answered {r:?}")
        })?;
        let ev = f
            .wait_for("three presses", |ev| {
                ev[n.min(ev.len())..].iter().filter(|e| e["event"] == "down").count() >= 3
            })
            .await?;
        let downs: Vec<(i64, i64, i64, i64)> = ev[n..]
            .iter()
            .filter(|e| e["event"] == "down")
            .map(|e| {
                let g = |k: &str| e[k].as_i64().unwrap_or(-1);
                (g("button"), g("x"), g("y"), g("count"))
            })
            .collect();
        ensure(
            downs == [(1, 150, 50, 1), (1, 50, 150, 1), (1, 50, 150, 2)],
            || {
                format!(
                    "the presses were {downs:?} (button, x, y, count), want a click at (150, 50) then a double click at (50, 150): {}",
                    show(&ev[n..])
                )
            },
        )
        })
    })
    .await
}

/// `Hello, agentrun! 123` typed arrives exactly.
pub async fn type_text(t: &Ctx) -> Result<(), Outcome> {
    const TEXT: &str = "Hello, agentrun! 123";
    with_fixture(t, |f| {
        Box::pin(async move {
            let n = f.events().await.len();
            let r = actions(f.c, json!([{"type": "type", "text": TEXT}])).await?;
            ensure(r.done == 1 && r.failed.is_none(), || {
                format!("type answered {r:?}")
            })?;
            let typed = |ev: &[Value]| -> String {
                ev[n.min(ev.len())..]
                    .iter()
                    .filter(|e| e["event"] == "text")
                    .filter_map(|e| e["text"].as_str())
                    .collect()
            };
            let ev = f
                .wait_for("the typed text", |ev| typed(ev).len() >= TEXT.len())
                .await?;
            let got = typed(&ev);
            ensure(got == TEXT, || {
                format!("typing {TEXT:?} arrived as {got:?}")
            })
        })
    })
    .await
}

/// A batch whose second action names an unknown key is refused whole:
/// done 0, failed.index 1, kind invalid, and nothing runs.
pub async fn key_table_refuses_unknown(t: &Ctx) -> Result<(), Outcome> {
    with_fixture(t, |f| {
        Box::pin(async move {
        let n = f.events().await.len();
        let r = actions(f.c,
            json!([{"type": "click", "point": [20, 20]}, {"type": "key", "keys": ["Hyper_Q"]}]),
        )
        .await?;
        let got = r.failed.as_ref().map(|x| (r.done, x.index, x.kind));
        ensure(got == Some((0, 1, ErrorKind::Invalid)), || {
            format!("a batch with the key Hyper_Q answered {r:?}, want done 0, failed index 1, kind invalid")
        })?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ev = f.events().await;
        ensure(ev.len() == n, || {
            format!("the refused batch still ran: the fixture logged {}", show(&ev[n..]))
        })
        })
    })
    .await
}

/// move, press, a move off the screen, click: done 2, the press released
/// where it was, no click; a later click lands (nothing was left held).
pub async fn actions_stop_at_first_failure(t: &Ctx) -> Result<(), Outcome> {
    with_fixture(t, |f| {
        Box::pin(async move {
            let (s, _) = shot(
                f.t,
                f.c,
                Some(Region {
                    x: 0,
                    y: 0,
                    width: 1,
                    height: 1,
                }),
            )
            .await?;
            let off = s.screen_width + 10;
            let n = f.events().await.len();
            let r = actions(
                f.c,
                json!([
                    {"type": "move", "point": [20, 20]},
                    {"type": "down"},
                    {"type": "move", "point": [off, 5]},
                    {"type": "click", "point": [60, 60]}
                ]),
            )
            .await?;
            let got = r.failed.as_ref().map(|x| (r.done, x.index));
            ensure(got == Some((2, 2)), || {
                format!("a move off the screen answered {r:?}, want done 2 and failed index 2")
            })?;
            let ev = f
                .wait_for("the press's release", |ev| {
                    ev[n.min(ev.len())..].iter().any(|e| e["event"] == "up")
                })
                .await?;
            let seen: Vec<(&str, i64)> = ev[n..]
                .iter()
                .filter_map(|e| Some((e["event"].as_str()?, e["x"].as_i64()?)))
                .collect();
            ensure(seen == [("down", 20), ("up", 20)], || {
                format!(
                    "want one press at x 20 and its release there, no click: {}",
                    show(&ev[n..])
                )
            })?;
            let n = ev.len();
            let r = actions(
                f.c,
                json!([{"type": "wait", "ms": 450}, {"type": "click", "point": [150, 150]}]),
            )
            .await?;
            ensure(r.failed.is_none(), || {
                format!("the later click answered {r:?}")
            })?;
            let ev = f
                .wait_for("the later click", |ev| {
                    ev[n.min(ev.len())..].iter().any(|e| e["event"] == "up")
                })
                .await?;
            let lands = ev[n..]
                .iter()
                .any(|e| e["event"] == "down" && e["x"] == 150 && e["y"] == 150 && e["count"] == 1);
            ensure(lands, || {
                format!(
                    "a later click at (150, 150) did not land as one click: {}",
                    show(&ev[n..])
                )
            })
        })
    })
    .await
}

/// screen.watch gives a first frame at once, and a new frame after the
/// pointer moves.
pub async fn watch(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let params = |after: u64| ScreenWatchParams {
        after,
        wait_ms: Some(5000),
        max_width: Some(320),
        quality: None,
        regions: false,
    };
    let first = t.call(c, &params(0)).await?;
    let frame = first.frame.as_ref();
    ensure(first.changed && frame.is_some(), || {
        format!(
            "the first screen.watch answered changed {} with no frame",
            first.changed
        )
    })?;
    let (w, h) = frame.map(|f| (f.width, f.height)).unwrap_or_default();
    ensure(
        frame.is_some_and(|f| f.frame_width <= 320 && f.data.0.starts_with(&[0xff, 0xd8])),
        || "the first frame is not a JPEG at most 320 wide".to_string(),
    )?;
    let target = [(w / 2 + 17) as i64, (h / 2 + 11) as i64];
    let r = actions(c, json!([{"type": "move", "point": target}])).await?;
    ensure(r.failed.is_none(), || format!("the move answered {r:?}"))?;
    let next = t.call(c, &params(first.seq)).await?;
    ensure(
        next.changed && next.seq > first.seq && next.frame.is_some(),
        || {
            format!(
                "after a pointer move screen.watch answered seq {} changed {} (the first was seq {})",
                next.seq, next.changed, first.seq
            )
        },
    )
}
