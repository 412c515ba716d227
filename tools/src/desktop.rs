//! The desktop family: a screen, a keyboard and a mouse, taken as the
//! models are trained to send them, plus every sandbox tool, and the page
//! tools of the browser family where the desktop declares cdp (its
//! visible Chromium).
//!
//! - `screenshot`: the screen as an MCP image, scaled to the budget
//!   (`--screenshot-max`, `max_width`), with its frame id.
//! - `computer`: Anthropic's `computer_20251124` input as sent, one action.
//! - `input`: OpenAI's computer `actions[]` as sent, a batch checked whole.
//! - [`map`]: the one table from both to protocol actions; [`image`]: the
//!   fit, the scaling and the PNG encode.
//!
//! Every point a model gives is in the pixels of the last screenshot it
//! got (the *frame*, remembered per computer in [`crate::ComputerState`]);
//! it is mapped to screen pixels here, refused before anything is sent
//! when it lies outside that screenshot, and every answer names the frame.

pub mod image;
pub mod map;

use std::sync::{Arc, Mutex};

use base64::Engine;
use computerd::client::{ClientError, ComputerClient, ComputerExt};
use computerd::protocol::{
    Action, Call, CheckOptions, Fit, Group, InputActionsParams, Region, ScreenReadParams,
    ScreenShotResult, SettingKind, check_actions, limits,
};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContext;
use crate::common;
use crate::define::{hints, listing, with_structured};
use crate::error::{Result, ToolError};
use crate::registry::{Family, Needs, ToolDef, ToolSet, handler};
use crate::{browser, sandbox};
use map::{ComputerArgs, OpenAiAction, Plan, Points, Step};

const SCREEN: Needs = Needs::Group(Group::Screen);
const POINTER: Needs = Needs::Group(Group::InputPointer);

/// Look at the screen: every kind with a screen lists it (a desktop, a
/// phone).
#[rustfmt::skip]
pub const SHOT_TOOLS: ToolSet = ToolSet {
    name: "screenshot",
    tools: &[
        ToolDef::new("screenshot", SCREEN,  screenshot_tool, handler!(screenshot)),
    ],
    aliases: &[],
};

/// Act on the screen with a mouse and keyboard.
#[rustfmt::skip]
pub const SCREEN_TOOLS: ToolSet = ToolSet {
    name: "screen",
    tools: &[
        ToolDef::new("computer",   POINTER, computer_tool,   handler!(computer)),
        ToolDef::new("input",      POINTER, input_tool,      handler!(input)),
    ],
    aliases: &[],
};

/// The desktop family: the screen tools, the sandbox's, the visible
/// browser's page tools (where the desktop declares cdp), the common ones.
pub const FAMILY: Family = Family {
    kind: SettingKind::Desktop,
    instructions: INSTRUCTIONS,
    skill: SKILL_TEXT,
    sets: &[
        SHOT_TOOLS,
        SCREEN_TOOLS,
        sandbox::TOOLS,
        crate::ports::TOOLS,
        browser::tool::PAGE_TOOLS,
        common::TOOLS,
    ],
    together: &[
        sandbox::PROCESS_TOGETHER,
        crate::ports::TOGETHER,
        browser::tool::PAGE_TOGETHER,
    ],
};

/// The desktop family's skill.
pub const SKILL_TEXT: &str = include_str!("../../skills/desktop/SKILL.md");

const INSTRUCTIONS: &str = "\
This server gives you a desktop: a Linux computer with a screen, a keyboard \
and a mouse, and a shell, files and processes too. It is made on your first \
tool call. Look with `screenshot`; act with `computer` (Anthropic computer-use \
actions) or `input` (OpenAI computer actions, a batch). Points are in the \
pixels of the last screenshot you got. Programs you start get DISPLAY.";

/// What a failed screen call adds.
const NO_SCREEN: &str = "the computer's display is not answering; if its X server ended, this computer has no screen any more: release it (computer_release) and the next call makes a new one";

/// The groups input needs; the tools are listed only where they are.
const INPUT_GROUPS: &[Group] = &[Group::InputPointer, Group::InputKeys];

// ------------------------------------------------------------ the frame

/// The last screenshot a model got of this computer: the space its points
/// are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// 1, 2, ...; 0 when no screenshot was taken yet (the space one would have).
    pub n: u64,
    pub width: u32,
    pub height: u32,
    pub screen_width: u32,
    pub screen_height: u32,
    digest: u64,
}

impl Frame {
    pub fn id(&self) -> String {
        if self.n == 0 {
            format!(
                "none yet (the {}x{} space a screenshot would have)",
                self.width, self.height
            )
        } else {
            format!("f{}", self.n)
        }
    }

    pub fn scale(&self) -> f64 {
        f64::from(self.width) / f64::from(self.screen_width.max(1))
    }

    /// A screen point in this frame's pixels.
    pub fn from_screen(&self, p: [i64; 2]) -> [i64; 2] {
        let f = |v: i64, img: u32, scr: u32| v * i64::from(img) / i64::from(scr.max(1));
        [
            f(p[0], self.width, self.screen_width),
            f(p[1], self.height, self.screen_height),
        ]
    }
}

impl Points for Frame {
    fn to_screen(&self, field: &str, p: [i64; 2]) -> Result<[i64; 2]> {
        let (w, h) = (i64::from(self.width), i64::from(self.height));
        if !(0..w).contains(&p[0]) || !(0..h).contains(&p[1]) {
            return Err(ToolError::Invalid(format!(
                "{field} [{}, {}] is outside the {}x{} screenshot (frame {}): x goes 0 to {} and y 0 to {}; nothing was sent",
                p[0],
                p[1],
                self.width,
                self.height,
                self.id(),
                w - 1,
                h - 1
            )));
        }
        // The centre of the screenshot's pixel, on the screen.
        let f = |v: i64, img: i64, scr: u32| ((2 * v + 1) * i64::from(scr)) / (2 * img);
        Ok([
            f(p[0], w, self.screen_width),
            f(p[1], h, self.screen_height),
        ])
    }
}

#[derive(Default)]
struct Memo {
    last: Option<Frame>,
    taken: u64,
}

fn memo(ctx: &ToolContext) -> Arc<Mutex<Memo>> {
    ctx.state.slot::<Mutex<Memo>>()
}

fn last_frame(ctx: &ToolContext) -> Option<Frame> {
    memo(ctx).lock().unwrap_or_else(|p| p.into_inner()).last
}

// --------------------------------------------------------- screen calls

/// A whole shot: the first reply and screen.read for the rest.
async fn fetch(
    ctx: &ToolContext,
    region: Option<Region>,
    fit: Option<Fit>,
) -> Result<(ScreenShotResult, Vec<u8>)> {
    fetch_from(&ctx.client, region, fit).await
}

/// The whole screen now, as the computer's PNG at its own size: what the
/// server's `computer://<handle>/screen` resource shows a person.
pub async fn screen_png(client: &Arc<dyn ComputerClient>) -> Result<(ScreenShotResult, Vec<u8>)> {
    fetch_from(client, None, None).await
}

async fn fetch_from(
    client: &Arc<dyn ComputerClient>,
    region: Option<Region>,
    fit: Option<Fit>,
) -> Result<(ScreenShotResult, Vec<u8>)> {
    let failed = |e| match ToolError::client("taking the screenshot", e) {
        ToolError::Daemon { doing, error, .. } => ToolError::Daemon {
            doing,
            error,
            hint: Some(NO_SCREEN.into()),
        },
        other => other,
    };
    client
        .screen_shot_within(region, fit)
        .await
        .map_err(|e| match e {
            // Bytes that ran out before the PNG's end: the tool's own words.
            ClientError::Decode { method, detail }
                if method == ScreenReadParams::METHOD.as_str()
                    && detail.starts_with("the screenshot stopped short") =>
            {
                ToolError::Broken("the computer's screenshot stopped short".into())
            }
            e => failed(e),
        })
}

/// The screen's size and the pointer, from a one-pixel shot.
async fn probe(ctx: &ToolContext) -> Result<ScreenShotResult> {
    let one = Region {
        x: 0,
        y: 0,
        width: 1,
        height: 1,
    };
    Ok(fetch(ctx, Some(one), None).await?.0)
}

/// The frame points are taken in: the last screenshot's, or the space a
/// screenshot would have now.
pub(crate) async fn frame_for_points(ctx: &ToolContext) -> Result<Frame> {
    if let Some(f) = last_frame(ctx) {
        return Ok(f);
    }
    let r = probe(ctx).await?;
    let (width, height) = image::fit(
        r.screen_width,
        r.screen_height,
        ctx.settings.screenshot_max,
        None,
        false,
    );
    Ok(Frame {
        n: 0,
        width,
        height,
        screen_width: r.screen_width,
        screen_height: r.screen_height,
        digest: 0,
    })
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Scale a PNG to `w` x `h` (off the runtime's threads); the PNG itself
/// when it is that size already.
async fn scaled(png: Vec<u8>, from: (u32, u32), to: (u32, u32)) -> Result<Vec<u8>> {
    if from == to {
        return Ok(png);
    }
    tokio::task::spawn_blocking(move || {
        let img = image::decode(&png)?;
        image::encode(&image::resize(&img, to.0, to.1))
    })
    .await
    .map_err(|e| ToolError::Broken(format!("scaling the screenshot failed: {e}")))?
}

/// What a screenshot (or a zoom) shows.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ShotOutput {
    /// The frame: points you give are in its pixels.
    pub frame: String,
    pub width: u32,
    pub height: u32,
    /// Image pixels per screen pixel.
    pub scale: f64,
    pub screen_width: u32,
    pub screen_height: u32,
    /// The screen is as in the frame named, and no image came.
    pub unchanged: bool,
    /// The pointer, in the image's pixels, when on the screen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<[i64; 2]>,
}

/// A screenshot: its content blocks and what it shows.
struct Taken {
    blocks: Vec<ContentBlock>,
    out: ShotOutput,
}

impl Taken {
    /// An image shown, then the words about it.
    fn image(png: &[u8], text: String, out: ShotOutput) -> Taken {
        Taken {
            blocks: vec![png_block(png), ContentBlock::text(text)],
            out,
        }
    }
}

fn png_block(png: &[u8]) -> ContentBlock {
    ContentBlock::image(
        base64::engine::general_purpose::STANDARD.encode(png),
        "image/png".to_string(),
    )
}

/// Take a screenshot and make it the frame. With `if_changed`, a screen
/// identical to the last frame's (at the same size) gets a note instead.
async fn take(ctx: &ToolContext, max_width: Option<u32>, if_changed: bool) -> Result<Taken> {
    // A phone scales before it encodes when told the budget; computerd
    // answers at full size and the shot is scaled here.
    let budget = image::budget(ctx.settings.screenshot_max, max_width);
    let (r, png) = fetch(ctx, None, Some(budget)).await?;
    let (w, h) = budget.size(r.width, r.height, false);
    let d = digest(&png);
    let last = last_frame(ctx);
    let same = last.filter(|f| f.digest == d && (f.width, f.height) == (w, h));
    // What the answer says of frame `f`, shown again or new.
    let output = |f: &Frame, unchanged: bool| ShotOutput {
        frame: f.id(),
        width: w,
        height: h,
        scale: f.scale(),
        screen_width: r.screen_width,
        screen_height: r.screen_height,
        unchanged,
        cursor: r.cursor.map(|c| f.from_screen(c)),
    };
    if let (true, Some(f)) = (if_changed, same) {
        let out = output(&f, true);
        let text = format!(
            "unchanged since frame {}: the screen is as in that screenshot (no new image); its points still apply",
            out.frame
        );
        return Ok(Taken {
            blocks: vec![ContentBlock::text(text)],
            out,
        });
    }
    let bytes = scaled(png, (r.width, r.height), (w, h)).await?;
    let frame = {
        let m = memo(ctx);
        let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
        m.taken += 1;
        let f = Frame {
            n: m.taken,
            width: w,
            height: h,
            screen_width: r.screen_width,
            screen_height: r.screen_height,
            digest: d,
        };
        m.last = Some(f);
        f
    };
    let out = output(&frame, false);
    let text = format!(
        "frame {}: {w}x{h} image of the {}x{} screen (scale {:.3}); give points in this image's pixels",
        out.frame, r.screen_width, r.screen_height, out.scale
    );
    Ok(Taken::image(&bytes, text, out))
}

/// A region of the frame at full resolution, grown to the budget. The
/// frame stays what it was.
async fn zoom(ctx: &ToolContext, region: [i64; 4]) -> Result<Taken> {
    let f = frame_for_points(ctx).await?;
    let [x0, y0, x1, y1] = region;
    let (w, h) = (i64::from(f.width), i64::from(f.height));
    if !(0 <= x0 && x0 < x1 && x1 <= w && 0 <= y0 && y0 < y1 && y1 <= h) {
        return Err(ToolError::Invalid(format!(
            "region [{x0}, {y0}, {x1}, {y1}] is not inside the {}x{} screenshot (frame {}): give [x0, y0, x1, y1] with 0 <= x0 < x1 <= {w} and 0 <= y0 < y1 <= {h}; nothing was sent",
            f.width,
            f.height,
            f.id()
        )));
    }
    // A frame coordinate `v` of `of` on the screen's `screen`, rounded down
    // at the region's start and up at its end.
    let on_screen = |v: i64, of: i64, screen: u32, up: bool| {
        let n = v * i64::from(screen);
        (if up { (n + of - 1) / of } else { n / of }).clamp(0, i64::from(screen)) as u32
    };
    let (sw, sh) = (f.screen_width, f.screen_height);
    let (rx0, ry0) = (on_screen(x0, w, sw, false), on_screen(y0, h, sh, false));
    let (rx1, ry1) = (on_screen(x1, w, sw, true), on_screen(y1, h, sh, true));
    let screen_region = Region {
        x: rx0,
        y: ry0,
        width: (rx1 - rx0).max(1),
        height: (ry1 - ry0).max(1),
    };
    let (r, png) = fetch(ctx, Some(screen_region), None).await?;
    let (zw, zh) = image::fit(r.width, r.height, ctx.settings.screenshot_max, None, true);
    let bytes = scaled(png, (r.width, r.height), (zw, zh)).await?;
    let out = ShotOutput {
        frame: f.id(),
        width: zw,
        height: zh,
        scale: f64::from(zw) / f64::from(r.width.max(1)),
        screen_width: r.screen_width,
        screen_height: r.screen_height,
        unchanged: false,
        cursor: None,
    };
    let text = format!(
        "zoom of [{x0}, {y0}, {x1}, {y1}] of frame {} (screen {}x{} at ({rx0}, {ry0})), shown {zw}x{zh}; points still refer to frame {}",
        out.frame, r.width, r.height, out.frame
    );
    Ok(Taken::image(&bytes, text, out))
}

// ------------------------------------------------------------- sending

/// What an action call did.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ActOutput {
    /// The frame the points were taken in.
    pub frame: String,
    /// Actions done, in order.
    pub done: u64,
    /// Where the batch stopped, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<Stopped>,
    /// The pointer, in the frame's pixels (cursor_position).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<[i64; 2]>,
    /// The screenshots taken, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<ShotOutput>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Stopped {
    /// The action that failed (an index of what was sent).
    pub index: u64,
    pub message: String,
}

/// Replace `actions[i]` (the protocol's index) with the model's index.
fn reindex(message: &str, at: &[usize]) -> String {
    let mut out = message.to_string();
    for (p, v) in at.iter().enumerate().rev() {
        if p != *v {
            out = out.replace(&format!("actions[{p}]"), &format!("actions[{v}]"));
        }
    }
    out
}

/// Check the whole batch as the daemon will, before anything is sent.
fn check(actions: &[Action], at: &[usize]) -> Result<()> {
    check_actions(actions, INPUT_GROUPS, CheckOptions::default())
        .map_err(|f| ToolError::Invalid(format!("{}; nothing was sent", reindex(&f.message, at))))
}

/// Send one batch; `at[i]` is the model's index of protocol action i.
async fn send(
    ctx: &ToolContext,
    actions: Vec<Action>,
    at: &[usize],
) -> Result<(u64, Option<Stopped>)> {
    if actions.is_empty() {
        return Ok((0, None));
    }
    let r = ctx
        .client
        .call_typed(&InputActionsParams { actions })
        .await
        .map_err(|e| ToolError::client("sending the input", e))?;
    let failed = r.failed.map(|f| {
        let i = at
            .get(f.index as usize)
            .copied()
            .unwrap_or(f.index as usize);
        Stopped {
            index: i as u64,
            message: reindex(&f.message, at),
        }
    });
    Ok((r.done, failed))
}

pub(crate) fn act_result(
    text: String,
    out: &ActOutput,
    images: Vec<ContentBlock>,
) -> CallToolResult {
    let mut blocks = images;
    blocks.push(ContentBlock::text(text));
    let r = if out.failed.is_some() {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    with_structured(r, out)
}

// ------------------------------------------------------------ screenshot

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotArgs {
    /// At most this many pixels wide (saves context).
    pub max_width: Option<u32>,
    /// true: if the screen is as in the last screenshot, answer a short note instead of the image.
    pub if_changed: Option<bool>,
}

/// The narrowest `max_width` taken.
pub const MIN_MAX_WIDTH: u32 = 64;

listing!(
    fn screenshot_tool(s): ScreenshotArgs => ShotOutput,
    format!(
        "See the screen: a PNG fit to {}x{} (about 1.15 MP), and its frame id. Points you give any tool are in the pixels of the last screenshot.",
        s.screenshot_max.0, s.screenshot_max.1
    ),
    hints("See the screen", true, false, false, false)
);

async fn screenshot(ctx: &ToolContext, a: ScreenshotArgs) -> Result<CallToolResult> {
    if let Some(w) = a.max_width
        && w < MIN_MAX_WIDTH
    {
        return Err(ToolError::Invalid(format!(
            "max_width is {w}; give at least {MIN_MAX_WIDTH} pixels"
        )));
    }
    let t = take(ctx, a.max_width, a.if_changed.unwrap_or(false)).await?;
    Ok(with_structured(CallToolResult::success(t.blocks), &t.out))
}

// -------------------------------------------------------------- computer

listing!(
    fn computer_tool(s): ComputerArgs => ActOutput,
    "One computer-use action, Anthropic computer_20251124 input as sent (key, hold_key, type, cursor_position, mouse_move, left_mouse_down/up, left_click, left_click_drag, right/middle/double/triple_click, scroll, wait, screenshot, zoom). Points are in the last screenshot's pixels; a click without coordinate acts at the pointer.",
    hints("Act on the screen (Anthropic computer use)", false, true, false, s.open_world)
);

/// The answer of an action that is one picture (a screenshot, a zoom).
fn one_shot(t: Taken) -> CallToolResult {
    let out = ActOutput {
        frame: t.out.frame.clone(),
        done: 1,
        failed: None,
        cursor: None,
        screenshots: vec![t.out],
    };
    with_structured(CallToolResult::success(t.blocks), &out)
}

async fn computer(ctx: &ToolContext, a: ComputerArgs) -> Result<CallToolResult> {
    let frame = frame_for_points(ctx).await?;
    match map::anthropic(&a, &frame)? {
        Plan::Screenshot => Ok(one_shot(take(ctx, None, false).await?)),
        Plan::Zoom(region) => Ok(one_shot(zoom(ctx, region).await?)),
        Plan::Cursor => {
            let r = probe(ctx).await?;
            let cursor = r.cursor.map(|c| frame.from_screen(c));
            let text = match cursor {
                Some([x, y]) => format!("the pointer is at [{x}, {y}] of frame {}", frame.id()),
                None => "the pointer is not on this screen".to_string(),
            };
            let out = ActOutput {
                frame: frame.id(),
                done: 1,
                failed: None,
                cursor,
                screenshots: Vec::new(),
            };
            Ok(act_result(text, &out, Vec::new()))
        }
        Plan::Act(actions) => {
            let at = vec![0; actions.len()];
            check(&actions, &at)?;
            let n = actions.len() as u64;
            let (done, failed) = send(ctx, actions, &at).await?;
            let name = serde_json::to_value(a.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let at_point = a
                .coordinate
                .map(|p| format!(" at [{}, {}]", p[0], p[1]))
                .unwrap_or_default();
            let text = match &failed {
                None => format!("{name}{at_point} done (frame {})", frame.id()),
                Some(f) => format!(
                    "{name}{at_point} stopped after {done} of {n} steps (frame {}): {}",
                    frame.id(),
                    f.message
                ),
            };
            let out = ActOutput {
                frame: frame.id(),
                done,
                failed,
                cursor: None,
                screenshots: Vec::new(),
            };
            Ok(act_result(text, &out, Vec::new()))
        }
    }
}

// ----------------------------------------------------------------- input

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputArgs {
    /// OpenAI computer actions, in order (at most 100).
    pub actions: Vec<OpenAiAction>,
}

listing!(
    fn input_tool(s): InputArgs => ActOutput,
    format!(
        "A batch of OpenAI computer actions as sent (click, double_click, drag, keypress, move, scroll, type, wait, screenshot), at most {}, checked whole before any is sent; stops at the first failure and says what was done. Points are in the last screenshot's pixels.",
        limits::MAX_ACTIONS
    ),
    hints(
        "Act on the screen (OpenAI computer actions)",
        false,
        true,
        false,
        s.open_world,
    )
);

async fn input(ctx: &ToolContext, a: InputArgs) -> Result<CallToolResult> {
    let n = a.actions.len();
    if n > limits::MAX_ACTIONS {
        return Err(ToolError::Invalid(format!(
            "actions holds {n} actions; at most {} go in one batch (send the rest in another); nothing was sent",
            limits::MAX_ACTIONS
        )));
    }
    if n == 0 {
        return Err(ToolError::Invalid(
            "actions is empty; give at least one action".into(),
        ));
    }
    let frame = frame_for_points(ctx).await?;
    let steps = map::openai(&a.actions, &frame)?;
    // Checked whole: every action of every segment, with the model's indexes.
    let (all, at): (Vec<Action>, Vec<usize>) = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Step::Act(x) => Some((x.clone(), i)),
            Step::Screenshot => None,
        })
        .unzip();
    check(&all, &at)?;
    // Sent in segments between screenshots, each taken where it stands.
    let mut out = ActOutput {
        frame: frame.id(),
        done: 0,
        failed: None,
        cursor: None,
        screenshots: Vec::new(),
    };
    let mut images = Vec::new();
    let mut segment: Vec<(Action, usize)> = Vec::new();
    let flush = |segment: &mut Vec<(Action, usize)>| std::mem::take(segment).into_iter().unzip();
    for (i, s) in steps.into_iter().enumerate() {
        match s {
            Step::Act(x) => segment.push((x, i)),
            Step::Screenshot => {
                let (acts, idx): (Vec<Action>, Vec<usize>) = flush(&mut segment);
                let (done, failed) = send(ctx, acts, &idx).await?;
                out.done += done;
                if failed.is_some() {
                    out.failed = failed;
                    break;
                }
                let t = take(ctx, None, false).await?;
                out.done += 1;
                images.extend(t.blocks.into_iter().filter(|b| b.as_text().is_none()));
                out.screenshots.push(t.out);
            }
        }
    }
    if out.failed.is_none() {
        let (acts, idx): (Vec<Action>, Vec<usize>) = flush(&mut segment);
        let (done, failed) = send(ctx, acts, &idx).await?;
        out.done += done;
        out.failed = failed;
    }
    let mut text = match &out.failed {
        None => format!("{n} actions done (points of frame {})", out.frame),
        Some(f) => format!(
            "stopped at actions[{}] after {} of {n} done (points of frame {}): {}",
            f.index, out.done, out.frame, f.message
        ),
    };
    for s in &out.screenshots {
        text.push_str(&format!(
            "; screenshot frame {}: {}x{} (scale {:.3}), later points go in it",
            s.frame, s.width, s.height, s.scale
        ));
    }
    Ok(act_result(text, &out, images))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(w: u32, h: u32, sw: u32, sh: u32) -> Frame {
        Frame {
            n: 3,
            width: w,
            height: h,
            screen_width: sw,
            screen_height: sh,
            digest: 0,
        }
    }

    #[test]
    fn a_point_of_the_screenshot_lands_on_the_screen_pixel_it_shows() {
        let f = frame(640, 400, 1280, 800);
        assert_eq!(f.to_screen("c", [0, 0]).unwrap(), [1, 1]);
        assert_eq!(f.to_screen("c", [75, 25]).unwrap(), [151, 51]);
        assert_eq!(f.to_screen("c", [639, 399]).unwrap(), [1279, 799]);
        assert_eq!(f.from_screen([151, 51]), [75, 25]);
        let same = frame(1280, 800, 1280, 800);
        assert_eq!(same.to_screen("c", [150, 50]).unwrap(), [150, 50]);
        let e = f
            .to_screen("coordinate", [640, 10])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "coordinate [640, 10] is outside the 640x400 screenshot (frame f3): x goes 0 to 639 and y 0 to 399; nothing was sent"
        );
        assert!(f.to_screen("c", [-1, 0]).is_err());
    }

    #[test]
    fn a_refusal_names_the_models_index() {
        assert_eq!(
            reindex("actions[1].text holds a control character", &[0, 2]),
            "actions[2].text holds a control character"
        );
    }
}
