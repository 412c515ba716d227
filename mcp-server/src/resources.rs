//! Prompts and resources: each tool family's skill (a prompt, and
//! `skill://<name>/SKILL.md`), a computer's facts
//! (`computer://<computer>/info`), and any file in a computer read in pages
//! (`computer://<computer>/file/<path>?page=N`, what a cut exec links to).
//! `<computer>` is a handle, a name or `default`, the caller's own as for
//! tools; reading never makes a computer.

use std::sync::Arc;

use base64::Engine as _;
use computer_tools::fleet::Which;
use computer_tools::skills::{self, Skill};
use computer_tools::{offered, registry};
use computerd::client::ComputerExt;
use computerd::protocol::{FilesReadParams, Group, SettingKind};
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, Prompt, PromptMessage, ReadResourceResult, Resource, ResourceContents,
    ResourceTemplate, Role,
};

use crate::app::{App, Caller, Entry};

/// A page of a file read as a resource.
pub const PAGE_BYTES: u64 = 64 * 1024;

/// The skills a session of `kind` is offered: its family's, then those of
/// the families whose tools it lists too ((the registry's `skilled_for`)),
/// parsed (a skill that does not parse is left out; a test holds every one
/// to parsing).
pub fn skills(kind: SettingKind) -> Vec<Skill> {
    registry()
        .skilled_for(kind)
        .iter()
        .filter_map(|f| skills::parse(f.skill).ok())
        .collect()
}

pub fn prompts(kind: SettingKind) -> Vec<Prompt> {
    skills(kind)
        .iter()
        .map(|s| Prompt::new(s.name, Some(s.description), None))
        .collect()
}

pub fn get_prompt(kind: SettingKind, name: &str) -> Result<GetPromptResult, ErrorData> {
    let all = skills(kind);
    let Some(skill) = all.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = all.iter().map(|s| s.name).collect();
        return Err(ErrorData::invalid_params(
            format!("no prompt {name:?}; the prompts are: {}", names.join(", ")),
            None,
        ));
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, skill.body)])
            .with_description(skill.description),
    )
}

/// The resources a caller can list: the skills, and each of its computers'
/// info.
pub async fn list(app: &Arc<App>, caller: &Caller) -> Vec<Resource> {
    let mut out: Vec<Resource> = skills(app.kind())
        .iter()
        .map(|s| {
            // Named by its front matter (the Skills extension's rule).
            Resource::new(s.uri(), s.name)
                .with_title(format!("{} skill", s.name))
                .with_description(s.description)
                .with_mime_type("text/markdown")
        })
        .collect();
    let mine = app
        .principal_computers(&caller.principal)
        .await
        .unwrap_or_default();
    // Only what this server can serve: its own kind.
    let kind = app.kind();
    // Each computer's resources: its part of the URI, what it is, its type.
    let mut parts = vec![(
        "info",
        "what the server knows about this computer",
        "application/json",
    )];
    if has_screen(app) {
        parts.push((
            "screen",
            "the desktop's screen now, a PNG at its own size",
            "image/png",
        ));
    }
    if app.views.served() && viewable(app) {
        out.push(crate::view::app::resource());
    }
    for c in mine.into_iter().filter(|c| c.kind == kind.as_str()) {
        for (part, description, mime) in &parts {
            out.push(
                Resource::new(
                    format!("computer://{}/{part}", c.handle),
                    format!("{} {part}", c.label()),
                )
                .with_description(*description)
                .with_mime_type(*mime),
            );
        }
    }
    out
}

/// Whether this server's computers have a screen to read: the group their
/// provider declares (every computer of a server is of its one kind and
/// provider), as a tool that needs it is listed.
fn has_screen(app: &App) -> bool {
    offered(Group::Screen, &app.capabilities().groups)
}

/// Whether this server's computers can be watched in the viewer: those
/// with a screen, and every browser (one with no X display is cast over
/// CDP; see `computer_providers::cdp::casts`).
pub fn viewable(app: &App) -> bool {
    has_screen(app) || app.kind() == SettingKind::Browser
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("computer://{computer}/info", "computer info")
            .with_description(
                "A computer's facts (provider, user, work directory, network, deadline); {computer} is a handle, a name or default",
            )
            .with_mime_type("application/json"),
        ResourceTemplate::new("computer://{computer}/receipt", "what a computer has used")
            .with_description(
                "What a computer has used so far (seconds since made, CPU seconds, peak memory, tool calls through this server), read now; {computer} is a handle, a name or default",
            )
            .with_mime_type("application/json"),
        ResourceTemplate::new("computer://{computer}/screen", "a desktop's screen")
            .with_description(
                "A desktop's screen now, as a PNG at the screen's own size; {computer} is a handle, a name or default",
            )
            .with_mime_type("image/png"),
        ResourceTemplate::new("computer://{computer}/file/{+path}{?page}", "a file in a computer")
            .with_description(format!(
                "A file in a computer, in pages of {} KiB from page 1 (a cut exec output links here)",
                PAGE_BYTES / 1024
            )),
    ]
}

/// What a resource URI names.
#[derive(Debug, PartialEq, Eq)]
enum Uri {
    Skill(String),
    Info(Which),
    Receipt(Which),
    Screen(Which),
    File {
        which: Which,
        path: String,
        page: u64,
    },
}

fn not_found(uri: &str, why: impl std::fmt::Display) -> ErrorData {
    ErrorData::resource_not_found(format!("{uri}: {why}"), None)
}

fn parse(uri: &str) -> Result<Uri, ErrorData> {
    if let Some(rest) = uri.strip_prefix("skill://") {
        let name = rest
            .strip_suffix("/SKILL.md")
            .ok_or_else(|| not_found(uri, "a skill is skill://<name>/SKILL.md"))?;
        return Ok(Uri::Skill(name.to_string()));
    }
    let rest = uri.strip_prefix("computer://").ok_or_else(|| {
        not_found(uri, "the resources are skill://<name>/SKILL.md and computer://<computer>/info, /receipt, /screen or /file/<path>")
    })?;
    let (host, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let which = Which::parse("computer", host).map_err(|e| not_found(uri, e))?;
    match tail {
        "info" => return Ok(Uri::Info(which)),
        "receipt" => return Ok(Uri::Receipt(which)),
        "screen" => return Ok(Uri::Screen(which)),
        _ => {}
    }
    let Some(file) = tail.strip_prefix("file/") else {
        return Err(not_found(
            uri,
            "a computer has /info, /receipt, /screen (a desktop) and /file/<path>",
        ));
    };
    let (path, query) = file.split_once('?').unwrap_or((file, ""));
    let mut page = 1;
    for kv in query.split('&').filter(|q| !q.is_empty()) {
        match kv.split_once('=') {
            Some(("page", n)) => {
                page = n.parse::<u64>().ok().filter(|p| *p >= 1).ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!(
                            "{uri}: page {n:?} is not a page number; pages are numbered from 1"
                        ),
                        None,
                    )
                })?;
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("{uri}: {kv:?} is not a parameter of a file; it takes page=N"),
                    None,
                ));
            }
        }
    }
    Ok(Uri::File {
        which,
        path: format!("/{path}"),
        page,
    })
}

/// The caller's computer a resource names, never making one.
async fn computer(
    app: &Arc<App>,
    caller: &Caller,
    uri: &str,
    which: &Which,
) -> Result<Option<Arc<Entry>>, ErrorData> {
    match which {
        Which::Default => Ok(caller.default_slot(app).current().await),
        _ => app
            .find(&caller.principal, which)
            .await
            .map(Some)
            .map_err(|e| not_found(uri, e)),
    }
}

pub async fn read(
    app: &Arc<App>,
    caller: &Caller,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    if uri == crate::view::app::APP_URI && app.views.served() && viewable(app) {
        return Ok(ReadResourceResult::new(vec![crate::view::app::contents(
            &app.views,
        )]));
    }
    match parse(uri)? {
        Uri::Skill(name) => {
            let all = skills(app.kind());
            let skill = all.iter().find(|s| s.name == name).ok_or_else(|| {
                let names: Vec<String> = all.iter().map(Skill::uri).collect();
                not_found(
                    uri,
                    format!("no such skill; the skills are: {}", names.join(", ")),
                )
            })?;
            Ok(ReadResourceResult::new(vec![text_contents(
                uri,
                skill.text.to_string(),
                "text/markdown",
            )]))
        }
        Uri::Info(which) => {
            let Some(entry) = computer(app, caller, uri, &which).await? else {
                return Ok(ReadResourceResult::new(vec![text_contents(
                    uri,
                    "{\"computer\": null, \"note\": \"no default computer yet: it is made on your first tool call\"}".into(),
                    "application/json",
                )]));
            };
            let mut v = serde_json::to_value(entry.facts()).unwrap_or_default();
            v["handle"] = serde_json::json!(entry.handle);
            v["name"] = serde_json::json!(entry.shown_name());
            Ok(ReadResourceResult::new(vec![text_contents(
                uri,
                serde_json::to_string_pretty(&v).unwrap_or_default(),
                "application/json",
            )]))
        }
        Uri::Receipt(which) => {
            let entry = computer(app, caller, uri, &which).await?.ok_or_else(|| {
                not_found(
                    uri,
                    "no default computer yet: it is made on your first tool call",
                )
            })?;
            let receipt = app.receipt(&entry).await;
            let mut v = serde_json::to_value(receipt).unwrap_or_default();
            v["handle"] = serde_json::json!(entry.handle);
            Ok(ReadResourceResult::new(vec![text_contents(
                uri,
                serde_json::to_string_pretty(&v).unwrap_or_default(),
                "application/json",
            )]))
        }
        Uri::Screen(which) => {
            let entry = computer(app, caller, uri, &which).await?.ok_or_else(|| {
                not_found(
                    uri,
                    "you have no default computer yet (it is made on your first tool call)",
                )
            })?;
            if !has_screen(app) {
                return Err(not_found(
                    uri,
                    format!(
                        "{} is a {}, which has no screen; only a desktop has one",
                        entry.label(),
                        entry.kind.as_str()
                    ),
                ));
            }
            let (shot, png) = computer_tools::desktop::screen_png(&entry.client)
                .await
                .map_err(|e| not_found(uri, e))?;
            let mut result =
                ReadResourceResult::new(vec![ResourceContents::BlobResourceContents {
                    uri: uri.to_string(),
                    mime_type: Some("image/png".into()),
                    blob: base64::engine::general_purpose::STANDARD.encode(png),
                    meta: None,
                }]);
            let mut meta = rmcp::model::MetaObject::default();
            meta.0.insert(
                "computer-mcp/screen".into(),
                serde_json::json!({"width": shot.width, "height": shot.height}),
            );
            result.meta = Some(meta);
            Ok(result)
        }
        Uri::File { which, path, page } => {
            let entry = computer(app, caller, uri, &which).await?.ok_or_else(|| {
                not_found(
                    uri,
                    "you have no default computer yet (it is made on your first tool call)",
                )
            })?;
            let offset = (page - 1) * PAGE_BYTES;
            let r = entry
                .client
                .call_typed(&FilesReadParams {
                    path: path.clone(),
                    offset: (offset > 0).then_some(offset),
                    length: Some(PAGE_BYTES),
                })
                .await
                .map_err(|e| not_found(uri, e))?;
            let pages = r.size.div_ceil(PAGE_BYTES).max(1);
            if page > pages {
                return Err(ErrorData::invalid_params(
                    format!(
                        "{uri}: page {page} is past the end: {path} has {} bytes, pages 1 to {pages} of {PAGE_BYTES} bytes",
                        r.size
                    ),
                    None,
                ));
            }
            let data = r.data.0;
            let contents = match String::from_utf8(data) {
                Ok(text) => text_contents(uri, text, "text/plain"),
                Err(e) => ResourceContents::BlobResourceContents {
                    uri: uri.to_string(),
                    mime_type: Some("application/octet-stream".into()),
                    blob: base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                    meta: None,
                },
            };
            let mut result = ReadResourceResult::new(vec![contents]);
            let mut meta = rmcp::model::MetaObject::default();
            meta.0.insert(
                "computer-mcp/page".into(),
                serde_json::json!({"page": page, "pages": pages, "size": r.size, "pageBytes": PAGE_BYTES}),
            );
            result.meta = Some(meta);
            Ok(result)
        }
    }
}

fn text_contents(uri: &str, text: String, mime: &str) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some(mime.into()),
        text,
        meta: None,
    }
}

/// The words the instructions add about the skills.
pub fn instructions(kind: SettingKind) -> String {
    let all = skills(kind);
    if all.is_empty() {
        return String::new();
    }
    let names: Vec<String> = all
        .iter()
        .map(|s| format!("the prompt `{}` (also the resource {})", s.name, s.uri()))
        .collect();
    format!(" How to use these tools well: {}.", names.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_read_as_what_they_name() {
        assert_eq!(
            parse("skill://sandbox/SKILL.md").unwrap(),
            Uri::Skill("sandbox".into())
        );
        assert_eq!(
            parse("computer://default/info").unwrap(),
            Uri::Info(Which::Default)
        );
        assert_eq!(
            parse("computer://default/receipt").unwrap(),
            Uri::Receipt(Which::Default)
        );
        assert_eq!(
            parse("computer://default/screen").unwrap(),
            Uri::Screen(Which::Default)
        );
        assert_eq!(
            parse("computer://build/file/tmp/x.stdout?page=3").unwrap(),
            Uri::File {
                which: Which::Name("build".into()),
                path: "/tmp/x.stdout".into(),
                page: 3
            }
        );
        let e = parse("computer://build/file/tmp/x?page=0").unwrap_err();
        assert!(
            e.message.contains("pages are numbered from 1"),
            "{}",
            e.message
        );
        let e = parse("computer://build/file/tmp/x?offset=9").unwrap_err();
        assert!(e.message.contains("it takes page=N"), "{}", e.message);
        let e = parse("computer://Bad!/info").unwrap_err();
        assert!(e.message.contains("a-z, 0-9"), "{}", e.message);
        assert!(parse("http://x/info").is_err());
        assert!(parse("computer://build/other").is_err());
    }

    #[test]
    fn a_prompt_per_skill_of_the_kind_and_an_unknown_one_named() {
        let names =
            |kind| -> Vec<String> { prompts(kind).iter().map(|p| p.name.to_string()).collect() };
        assert_eq!(names(SettingKind::Sandbox), ["sandbox"]);
        assert_eq!(names(SettingKind::Browser), ["browser", "sandbox"]);
        assert_eq!(
            names(SettingKind::Desktop),
            ["desktop", "sandbox", "browser"]
        );
        let got = get_prompt(SettingKind::Sandbox, "sandbox").unwrap();
        assert_eq!(got.messages.len(), 1);
        let e = get_prompt(SettingKind::Sandbox, "desktop").unwrap_err();
        assert_eq!(e.message, "no prompt \"desktop\"; the prompts are: sandbox");
        let sandbox = instructions(SettingKind::Sandbox);
        assert!(sandbox.contains("skill://sandbox/SKILL.md"), "{sandbox}");
        assert!(
            !sandbox.contains("desktop") && !sandbox.contains("browser"),
            "{sandbox}"
        );
        assert!(instructions(SettingKind::Desktop).contains("skill://browser/SKILL.md"));
    }
}
