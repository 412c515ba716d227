//! `browser_screenshot`: the page as an image, whose pixels are the frame
//! later points are in.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::ToolContext;
use crate::browser::pointer::viewport;
use crate::browser::target::target_args;
use crate::browser::{ShotFrame, current, send_to, with_memo};
use crate::define::with_structured;
use crate::desktop::image;
use crate::error::{Result, ToolError};

target_args! {
    pub struct ScreenshotArgs {
        /// At most this many pixels wide (saves context).
        pub max_width: Option<u32>,
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
    let tab = current(ctx).await?;
    let (vw, vh, px, py) = viewport(ctx, &tab).await?;
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
    let r = send_to(ctx, &tab, "Page.captureScreenshot", params).await?;
    let data = r["data"].as_str().unwrap_or("");
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| {
            ToolError::Broken(format!("the browser's screenshot could not be read: {e}"))
        })?;
    let (iw, ih) = png_size(&png)
        .ok_or_else(|| ToolError::Broken("the browser's screenshot is no PNG".into()))?;
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
