//! The browser as a whole, in Playwright MCP's names and arguments:
//! `browser_resize` (the viewport), `browser_close` (every tab),
//! `browser_handle_dialog` (the model answers a dialog instead of the
//! automatic dismissal) and `browser_pdf` (the page printed to a file in
//! the computer, linked).

use std::time::Duration;

use base64::Engine as _;
use computerd::client::{ComputerExt, WriteFileOptions};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ToolContext;
use crate::browser::target::target_args;
use crate::browser::{
    DialogAnswer, Tab, current, events, new_blank_tab, page_targets, send, send_to, with_memo,
};
use crate::define::done;
use crate::error::{Result, ToolError};
use crate::sandbox::absolute;

/// The viewport's bounds, in CSS pixels.
pub const MIN_SIDE: f64 = 100.0;
pub const MAX_WIDTH: f64 = 7680.0;
pub const MAX_HEIGHT: f64 = 4320.0;

target_args! {
    pub struct ResizeArgs {
        /// The viewport's width in CSS pixels (100 to 7680).
        pub width: f64,
        /// The viewport's height in CSS pixels (100 to 4320).
        pub height: f64,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Done {
    /// What was done, in words.
    pub done: String,
}

fn said(text: String) -> CallToolResult {
    done(text.clone(), &Done { done: text })
}

pub(crate) async fn resize(ctx: &ToolContext, a: ResizeArgs) -> Result<CallToolResult> {
    for (field, v, max) in [
        ("width", a.width, MAX_WIDTH),
        ("height", a.height, MAX_HEIGHT),
    ] {
        if !(MIN_SIDE..=max).contains(&v) {
            return Err(ToolError::Invalid(format!(
                "{field} is {v}; give {MIN_SIDE} to {max} CSS pixels; nothing was changed"
            )));
        }
    }
    let (w, h) = (a.width.round(), a.height.round());
    let tab = current(ctx).await?;
    send_to(
        ctx,
        &tab,
        "Emulation.setDeviceMetricsOverride",
        json!({"width": w, "height": h, "deviceScaleFactor": 0, "mobile": false}),
    )
    .await?;
    // Points of an earlier screenshot are of the old size.
    with_memo(ctx, |m| m.frame = None);
    Ok(said(format!(
        "### Result\nthe viewport of the current tab is {w}x{h} CSS pixels; take a new screenshot before acting by point"
    )))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseArgs {}

/// It closes every tab, so it acts in none in particular.
impl crate::browser::target::InTab for CloseArgs {
    fn tab_id(&self) -> Option<&str> {
        None
    }
}

/// Every tab is closed and one blank tab left (the browser is the
/// computer's: it goes on for the next call).
pub(crate) async fn close(ctx: &ToolContext, _: CloseArgs) -> Result<CallToolResult> {
    let tabs = page_targets(ctx).await?;
    let blank = new_blank_tab(ctx).await?;
    for t in &tabs {
        send(
            ctx,
            None,
            "Target.closeTarget",
            json!({"targetId": t.id}),
            None,
        )
        .await?;
    }
    with_memo(ctx, |m| {
        m.tab = None;
        m.frame = None;
        m.dialog = None;
        m.sessions.retain(|target, _| *target == blank);
        m.worlds.retain(|target, _| *target == blank);
    });
    for _ in 0..100 {
        let left = page_targets(ctx).await?;
        if !left.iter().any(|l| tabs.iter().any(|t| t.id == l.id)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(said(format!(
        "### Result\nclosed {} tabs; one blank tab is left, where the next page tool acts (refs of earlier snapshots no longer apply)",
        tabs.len()
    )))
}

target_args! {
    pub struct DialogArgs {
        /// true accepts the dialog (OK), false dismisses it (Cancel).
        pub accept: bool,
        /// The text to answer a prompt() with.
        #[serde(rename = "promptText")]
        pub prompt_text: Option<String>,
        tab_id,
    }
}

/// The dialog the tab shows now, if one is open.
async fn open_dialog(ctx: &ToolContext, tab: &Tab) -> Result<Option<serde_json::Value>> {
    let (evs, _) = events(
        ctx,
        &tab.session,
        0,
        &[
            "Page.javascriptDialogOpening",
            "Page.javascriptDialogClosed",
        ],
        Duration::ZERO,
    )
    .await?;
    Ok(evs
        .into_iter()
        .last()
        .and_then(|e| (e.method == "Page.javascriptDialogOpening").then_some(e.params)))
}

pub(crate) async fn handle_dialog(ctx: &ToolContext, a: DialogArgs) -> Result<CallToolResult> {
    if let Some(t) = &a.prompt_text {
        crate::browser::check::bounded("promptText", t, crate::browser::check::MAX_TYPE_BYTES)?;
    }
    let how = if a.accept { "accepted" } else { "dismissed" };
    let tab = current(ctx).await?;
    if let Some(d) = open_dialog(ctx, &tab).await? {
        let message =
            crate::browser::dialog::answer(ctx, &tab, &d, a.accept, a.prompt_text.as_deref())
                .await?;
        let kind = d["type"].as_str().unwrap_or("alert");
        return Ok(said(format!(
            "### Result\nthe {kind} dialog saying {message:?} was {how}"
        )));
    }
    with_memo(ctx, |m| {
        m.dialog = Some(DialogAnswer {
            accept: a.accept,
            prompt_text: a.prompt_text.clone(),
        })
    });
    Ok(said(format!(
        "### Result\nno dialog is open; the next one the page opens will be {how}{} instead of dismissed",
        match &a.prompt_text {
            Some(t) => format!(
                " with {:?} as the prompt's answer",
                crate::browser::tool::chars_cut(t, 100)
            ),
            None => String::new(),
        }
    )))
}

target_args! {
    pub struct PdfArgs {
        /// Where to save it in the computer: an absolute path (default /tmp/page-<n>.pdf).
        pub path: Option<String>,
        tab_id,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PdfOutput {
    /// The file in the computer.
    pub path: String,
    pub bytes: u64,
}

/// The most bytes a PDF may have.
pub const MAX_PDF_BYTES: usize = 64 * 1024 * 1024;

pub(crate) async fn pdf(ctx: &ToolContext, a: PdfArgs) -> Result<CallToolResult> {
    let path = match a.path {
        Some(p) => p,
        None => format!(
            "/tmp/page-{}.pdf",
            with_memo(ctx, |m| {
                m.shots += 1;
                m.shots
            })
        ),
    };
    absolute("path", &path, &ctx.facts.work_dir)?;
    let tab = current(ctx).await?;
    let r = send_to(
        ctx,
        &tab,
        "Page.printToPDF",
        json!({"printBackground": true}),
    )
    .await?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(r["data"].as_str().unwrap_or(""))
        .map_err(|e| ToolError::Broken(format!("the browser's PDF could not be read: {e}")))?;
    if data.len() > MAX_PDF_BYTES {
        return Err(ToolError::Refused(format!(
            "the page's PDF is {} bytes, over the {MAX_PDF_BYTES} a PDF may have; nothing was saved",
            data.len()
        )));
    }
    let opts = WriteFileOptions {
        mode: None,
        parents: true,
    };
    let bytes = ctx
        .client
        .write_file(&path, &data, opts)
        .await
        .map_err(|e| ToolError::client(format!("writing {path}"), e))?;
    let mut r = done(
        format!("### Result\nthe page is printed to {path} ({bytes} bytes of PDF) in the computer"),
        &PdfOutput {
            path: path.clone(),
            bytes,
        },
    );
    if let Some(base) = &ctx.resources {
        let name = path.rsplit('/').next().unwrap_or(&path);
        r.content.push(ContentBlock::resource_link(
            rmcp::model::Resource::new(format!("{base}/file{path}"), name)
                .with_description("the page as PDF, saved in the computer")
                .with_mime_type("application/pdf")
                .with_size(bytes),
        ));
    }
    Ok(r)
}
