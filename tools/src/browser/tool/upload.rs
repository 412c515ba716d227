//! `browser_upload`: files of the computer chosen in a page's file input.
//!
//! The browser runs in the computer, so the files are the computer's: each
//! path is checked there first (a regular file), then set on the input
//! with `DOM.setFileInputFiles`. A ref that is not a file input itself (a
//! styled "Choose file" button) is clicked with the file chooser caught,
//! and the files go to the input that opened it. Listed only where the
//! computer has files (a vendor's browser has none of ours).

use std::time::Duration;

use computerd::client::ComputerExt;
use computerd::protocol::{ErrorKind, FileType, FilesStatParams};
use rmcp::model::CallToolResult;
use serde_json::json;

use crate::ToolContext;
use crate::browser::dom::{
    INPUT_FACTS, INPUT_FILES, call_on, describe_el, object, release, resolve,
};
use crate::browser::pointer::{Button, dialog_words, mouse_click, point_of};
use crate::browser::target::target_args;
use crate::browser::tool::{ActOutput, act_done};
use crate::browser::{Tab, cursor, events, send, send_to};
use crate::error::{Result, ToolError};
use crate::sandbox::absolute;

/// The most files one upload chooses.
pub const MAX_UPLOAD_FILES: usize = 100;

/// How long a click may take to open a file chooser.
const CHOOSER_WAIT: Duration = Duration::from_secs(3);

target_args! {
    pub struct UploadArgs {
        /// The ref of the file input, or of the button that opens its file chooser, from the latest snapshot.
        #[serde(rename = "ref")]
        pub reference: String,
        element,
        /// Absolute paths of files in the computer (at most 100); [] clears the input's choice.
        pub paths: Vec<String>,
        tab_id,
    }
}

/// The ref of the page's one file input, for a call that names none
/// (Playwright's `browser_file_upload` answers the chooser a click opened):
/// refused when the page has none or several, or when no snapshot showed it.
pub(crate) async fn only_file_input(ctx: &ToolContext, tab: &Tab) -> Result<String> {
    let loader = crate::browser::main_frame(ctx, tab).await?.loader;
    // Its number is asked in the tools' world of this document, if there
    // is one (the page's own globals are never read as a number).
    let world = crate::browser::with_memo(ctx, |m| {
        m.worlds
            .get(&tab.target)
            .filter(|w| w.loader == loader)
            .map(|w| w.context)
    });
    let mut params = json!({"expression": "(() => { const a = document.querySelectorAll('input[type=file]'); const w = globalThis.__computerMcpWorld; return [a.length, (a.length === 1 && w && w.ids.get(a[0])) || 0]; })()", "returnByValue": true});
    if let Some(c) = world {
        params["contextId"] = json!(c);
    }
    let r = send_to(ctx, tab, "Runtime.evaluate", params).await?;
    let (count, id) = (
        r["result"]["value"][0].as_u64().unwrap_or(0),
        r["result"]["value"][1].as_u64().unwrap_or(0),
    );
    if count != 1 {
        return Err(ToolError::Refused(format!(
            "paths: the page has {count} file inputs, and no file chooser is open here (a click opens none); give the input's ref with browser_upload {{ref, paths}}; nothing was chosen"
        )));
    }
    let found = world.filter(|_| id > 0).and_then(|c| {
        let key = (tab.target.clone(), loader, c, id);
        crate::browser::with_memo(ctx, |m| m.numbers.get(&key).copied())
    });
    match found {
        Some(n) => Ok(format!("e{n}")),
        None => Err(ToolError::Refused(
            "paths: the page's file input is in no snapshot yet; take browser_snapshot, then upload again (or give its ref with browser_upload); nothing was chosen".into(),
        )),
    }
}

pub(crate) async fn upload(ctx: &ToolContext, a: UploadArgs) -> Result<CallToolResult> {
    if a.paths.len() > MAX_UPLOAD_FILES {
        return Err(ToolError::Invalid(format!(
            "paths has {} entries; one upload takes at most {MAX_UPLOAD_FILES}; nothing was chosen",
            a.paths.len()
        )));
    }
    for (i, p) in a.paths.iter().enumerate() {
        let field = format!("paths[{i}]");
        absolute(&field, p, &ctx.facts.work_dir)?;
        check_file(ctx, &field, p).await?;
    }
    let (tab, el, n) = resolve(ctx, "ref", &a.reference).await?;
    let who = format!("e{n} ({})", describe_el(&el));
    let obj = object(ctx, &tab, el.backend, &format!("e{n}")).await?;
    let facts = call_on(ctx, &tab, &obj, INPUT_FACTS, vec![]).await;
    release(ctx, &tab).await;
    let facts = facts?;
    if facts["disabled"] == true {
        return Err(ToolError::Refused(format!(
            "{who} is disabled: it takes no files; nothing was chosen"
        )));
    }
    let (backend, multiple, via) = if facts["file"] == true {
        (el.backend, facts["multiple"] == true, String::new())
    } else {
        let (backend, multiple, dialog) = chooser_of(ctx, &tab, &el, n, &who).await?;
        (
            backend,
            multiple,
            format!(
                " (clicked it and answered the file chooser it opened{})",
                dialog_words(&dialog)
            ),
        )
    };
    if !multiple && a.paths.len() > 1 {
        return Err(ToolError::Refused(format!(
            "{who} takes one file (it has no `multiple`), and paths has {}; give one path; nothing was chosen",
            a.paths.len()
        )));
    }
    send_to(
        ctx,
        &tab,
        "DOM.setFileInputFiles",
        json!({"files": a.paths, "backendNodeId": backend}),
    )
    .await?;
    let held = holds(ctx, &tab, backend).await?;
    let accept = facts["accept"].as_str().unwrap_or("");
    let rule = if accept.is_empty() {
        String::new()
    } else {
        format!("; the input asks for {accept:?}")
    };
    let text = format!("{who}{via} now holds {held}{rule}");
    let out = ActOutput {
        done: text.clone(),
        at: None,
        navigated: false,
    };
    Ok(act_done(text, &out))
}

/// The path is a regular file in the computer, or the words saying why not.
async fn check_file(ctx: &ToolContext, field: &str, path: &str) -> Result<()> {
    let st = ctx
        .client
        .call_typed(&FilesStatParams {
            path: path.to_string(),
            follow: Some(true),
        })
        .await
        .map_err(|e| {
            ToolError::client(format!("{field} {path}"), e).hint_for(
                ErrorKind::NotFound,
                "Nothing was chosen: write the file first (write_file or exec), or check the path with list_files.",
            )
        })?;
    match st.file_type {
        FileType::File => Ok(()),
        FileType::Dir => Err(ToolError::Refused(format!(
            "{field} {path} is a directory; give files (list_files shows what is in it); nothing was chosen"
        ))),
        _ => Err(ToolError::Refused(format!(
            "{field} {path} is not a regular file; nothing was chosen"
        ))),
    }
}

/// Click `el` with file choosers caught: the input whose chooser opened,
/// and whether it takes several files.
async fn chooser_of(
    ctx: &ToolContext,
    tab: &Tab,
    el: &crate::browser::snapshot::Element,
    n: u64,
    who: &str,
) -> Result<(u64, bool, Option<String>)> {
    let session = Some(tab.session.as_str());
    let point = point_of(ctx, tab, el, n, "nothing was chosen").await?;
    send(
        ctx,
        session,
        "Page.setInterceptFileChooserDialog",
        json!({"enabled": true}),
        None,
    )
    .await?;
    let r = async {
        let since = cursor(ctx, &tab.session).await?;
        let dialog = mouse_click(ctx, tab, point, Button::Left, 1, 0, since).await?;
        let (evs, _) = events(
            ctx,
            &tab.session,
            since,
            &["Page.fileChooserOpened"],
            CHOOSER_WAIT,
        )
        .await?;
        Ok::<_, ToolError>((evs, dialog))
    }
    .await;
    let _ = send(
        ctx,
        session,
        "Page.setInterceptFileChooserDialog",
        json!({"enabled": false}),
        None,
    )
    .await;
    let (evs, dialog) = r?;
    let Some(e) = evs.into_iter().next() else {
        return Err(ToolError::Refused(format!(
            "{who} is not a file input, and clicking it opened no file chooser within {} s{}; nothing was chosen (it was clicked): take a new snapshot and give the ref of the file input or of its button",
            CHOOSER_WAIT.as_secs(),
            dialog_words(&dialog)
        )));
    };
    let backend = e.params["backendNodeId"]
        .as_u64()
        .ok_or_else(|| ToolError::Broken("the browser's file chooser named no input".into()))?;
    let multiple = e.params["mode"] == "selectMultiple";
    Ok((backend, multiple, dialog))
}

/// "a.txt (12 bytes), b.png (3400 bytes)" for what the input holds.
async fn holds(ctx: &ToolContext, tab: &Tab, backend: u64) -> Result<String> {
    let obj = object(ctx, tab, backend, "the file input").await?;
    let v = call_on(ctx, tab, &obj, INPUT_FILES, vec![]).await;
    release(ctx, tab).await;
    let files: Vec<String> = v?
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|f| {
            let name = f[0].as_str().unwrap_or("");
            let size = f[1].as_u64().unwrap_or(0);
            format!("{name} ({size} bytes)")
        })
        .collect();
    Ok(if files.is_empty() {
        "no file".to_string()
    } else {
        files.join(", ")
    })
}
