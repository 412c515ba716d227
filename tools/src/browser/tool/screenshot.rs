//! `browser_screenshot`: the page as an image, whose pixels are the frame
//! later points are in.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::ToolContext;
use crate::browser::dom::{call_on, describe_el, object, release, resolve, scroll_into_view};
use crate::browser::pointer::viewport;
use crate::browser::target::target_args;
use crate::browser::{ShotFrame, Tab, current, send_to, with_memo};
use crate::define::with_structured;
use crate::desktop::image;
use crate::error::{Result, ToolError};

target_args! {
    pub struct ScreenshotArgs {
        /// At most this many pixels wide (saves context).
        pub max_width: Option<u32>,
        ref: "Only this element (a ref from the latest snapshot), scrolled into view.",
        /// The whole scrollable page instead of the viewport.
        pub full_page: Option<bool>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ShotOutput {
    /// The frame: x, y you give browser_click and browser_hover are in its pixels.
    pub frame: String,
    pub width: u32,
    pub height: u32,
    /// Image pixels per CSS pixel of the viewport.
    pub scale: f64,
    pub viewport_width: f64,
    pub viewport_height: f64,
}

/// A PNG's size, from its header.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[..8] != b"\x89PNG\r\n\x1a\n" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

pub(crate) async fn screenshot(ctx: &ToolContext, a: ScreenshotArgs) -> Result<CallToolResult> {
    if let Some(w) = a.max_width
        && w < crate::desktop::MIN_MAX_WIDTH
    {
        return Err(ToolError::Invalid(format!(
            "max_width is {w}; give at least {} pixels",
            crate::desktop::MIN_MAX_WIDTH
        )));
    }
    if a.full_page == Some(true) && a.reference.is_some() {
        return Err(ToolError::Invalid(
            "give ref or full_page, not both: an element's image is of its box; nothing was taken"
                .into(),
        ));
    }
    let tab = current(ctx).await?;
    let (vw, vh, px, py) = viewport(ctx, &tab).await?;
    // What is shown, in CSS pixels of the page, when not the viewport.
    let region = match (&a.reference, a.full_page) {
        (Some(raw), _) => Some(element_box(ctx, raw).await?),
        (None, Some(true)) => {
            let m = send_to(ctx, &tab, "Page.getLayoutMetrics", json!({})).await?;
            let size = &m["cssContentSize"];
            let w = size["width"].as_f64().unwrap_or(vw).max(1.0);
            let h = size["height"].as_f64().unwrap_or(vh).max(1.0);
            Some(("the whole page".to_string(), [0.0, 0.0, w, h]))
        }
        _ => None,
    };
    if let Some((what, [x, y, w, h])) = region {
        return region_shot(ctx, &tab, a.max_width, &what, [x, y, w, h]).await;
    }
    let (w, _) = image::fit(
        vw.round().max(1.0) as u32,
        vh.round().max(1.0) as u32,
        ctx.settings.screenshot_max,
        a.max_width,
        false,
    );
    let scale = f64::from(w) / vw.max(1.0);
    let mut params = json!({"format": "png"});
    if (w as f64) < vw.round() {
        // The browser scales the viewport's region itself.
        params["clip"] = json!({"x": px, "y": py, "width": vw, "height": vh, "scale": scale});
    }
    let (data, iw, ih) = capture(ctx, &tab, params).await?;
    let frame = with_memo(ctx, |m| {
        m.shots += 1;
        let f = ShotFrame {
            n: m.shots,
            width: iw,
            height: ih,
            css_width: vw,
            css_height: vh,
        };
        m.frame = Some((f, tab.target.clone()));
        f
    });
    let out = ShotOutput {
        frame: frame.id(),
        width: iw,
        height: ih,
        scale: f64::from(iw) / vw.max(1.0),
        viewport_width: vw,
        viewport_height: vh,
    };
    let text = format!(
        "frame {}: {iw}x{ih} image of the {vw:.0}x{vh:.0} viewport (scale {:.3}); give browser_click x, y in this image's pixels",
        out.frame, out.scale
    );
    let blocks = vec![
        ContentBlock::image(data.to_string(), "image/png".to_string()),
        ContentBlock::text(text),
    ];
    Ok(with_structured(CallToolResult::success(blocks), &out))
}

/// The browser's PNG for `params` (indexed when that is smaller): its
/// base64 data and size.
async fn capture(ctx: &ToolContext, tab: &Tab, params: Value) -> Result<(String, u32, u32)> {
    let r = send_to(ctx, tab, "Page.captureScreenshot", params).await?;
    let data = r["data"].as_str().unwrap_or("").to_string();
    let png = base64::engine::general_purpose::STANDARD
        .decode(&data)
        .map_err(|e| {
            ToolError::Broken(format!("the browser's screenshot could not be read: {e}"))
        })?;
    let (iw, ih) = png_size(&png)
        .ok_or_else(|| ToolError::Broken("the browser's screenshot is no PNG".into()))?;
    // The same pixels in fewer bytes where the page has few colours.
    match image::palette::fewer_colours(&png) {
        Some(small) => Ok((
            base64::engine::general_purpose::STANDARD.encode(small),
            iw,
            ih,
        )),
        None => Ok((data, iw, ih)),
    }
}

/// An element's box in CSS pixels of the page, scrolled into view first,
/// with words naming it.
async fn element_box(ctx: &ToolContext, raw: &str) -> Result<(String, [f64; 4])> {
    let (tab, el, n) = resolve(ctx, "ref", raw).await?;
    scroll_into_view(ctx, &tab, &el, n).await?;
    let obj = object(ctx, &tab, el.backend, &format!("e{n}")).await?;
    let b = call_on(ctx, &tab, &obj, BOX, vec![]).await;
    release(ctx, &tab).await;
    let b = b?;
    let at = |i: usize| b[i].as_f64().unwrap_or(0.0);
    if at(2) < 1.0 || at(3) < 1.0 {
        return Err(ToolError::Refused(format!(
            "e{n} ({}) has no size on the page (it is hidden): there is nothing to show; nothing was taken",
            describe_el(&el)
        )));
    }
    Ok((
        format!("e{n} ({})", describe_el(&el)),
        [at(0), at(1), at(2), at(3)],
    ))
}

/// An element's box in page coordinates.
const BOX: &str = "function(){ const r = this.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; }";

/// A screenshot of a region of the page (an element, the whole page): fit
/// to the screenshot size like the viewport's, but no frame for points
/// (x, y of browser_click are of a viewport screenshot).
async fn region_shot(
    ctx: &ToolContext,
    tab: &Tab,
    max_width: Option<u32>,
    what: &str,
    [x, y, w, h]: [f64; 4],
) -> Result<CallToolResult> {
    let (fw, _) = image::fit(
        w.round().max(1.0) as u32,
        h.round().max(1.0) as u32,
        ctx.settings.screenshot_max,
        max_width,
        false,
    );
    let scale = (f64::from(fw) / w).min(1.0);
    let params = json!({
        "format": "png",
        "captureBeyondViewport": true,
        "clip": {"x": x, "y": y, "width": w, "height": h, "scale": scale},
    });
    let (data, iw, ih) = capture(ctx, tab, params).await?;
    let (vw, vh) = (w, h);
    let out = ShotOutput {
        frame: "none".into(),
        width: iw,
        height: ih,
        scale,
        viewport_width: vw,
        viewport_height: vh,
    };
    let text = format!(
        "{iw}x{ih} image of {what}, {w:.0}x{h:.0} CSS pixels (scale {scale:.3}); it is no frame for x, y: take browser_screenshot of the viewport to click by point"
    );
    let blocks = vec![
        ContentBlock::image(data, "image/png".to_string()),
        ContentBlock::text(text),
    ];
    Ok(with_structured(CallToolResult::success(blocks), &out))
}
