//! `read_file`, `write_file`, `edit_file` and `list_files`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use computerd::client::{ComputerExt, WriteFileOptions};
use computerd::protocol::{
    ErrorKind, FileType, FilesListParams, FilesReadParams, FilesStatParams, clean_path, limits,
};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::absolute;
use crate::ToolContext;
use crate::budget::kib;
use crate::define::{done, hints, listing, with_structured};
use crate::error::{Result, ToolError};
use crate::text::{LineWindow, Stop, human_bytes, image_mime, image_size, not_text};

/// read_file's `limit` when none is given.
pub const DEFAULT_READ_LINES: u64 = 2000;
/// The largest image read_file shows (its base64 stays under 4 MiB).
pub const MAX_IMAGE_BYTES: u64 = 3 * 1024 * 1024;
/// The largest file edit_file rewrites.
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// list_files' `depth` when none is given, and at most.
pub const DEFAULT_LIST_DEPTH: u32 = 2;
pub const MAX_LIST_DEPTH: u32 = 5;

// ---------------------------------------------------------------- read_file

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Absolute path.
    pub path: String,
    /// First line, 1-based. Default 1.
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Lines to show. Default 2000.
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadFileOutput {
    /// The file read.
    pub path: String,
    /// `text` or `image`.
    pub kind: String,
    /// The file's size in bytes.
    pub size: u64,
    /// The numbered lines (text only), `cat -n` style: the line number, a tab, the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The first line shown (text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_line: Option<u64>,
    /// The last line shown (text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_line: Option<u64>,
    /// The file's line count, when the read reached its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<u64>,
    /// More lines follow: pass this as `offset` to read on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The image's type (image only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The image's width in pixels, when its header says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// The image's height in pixels, when its header says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

listing!(
    pub(crate) fn read_tool(s): ReadFileArgs => ReadFileOutput,
    format!(
        "Read a text file as numbered lines, or see an image (PNG, JPEG, GIF, WebP; up to 3 MiB). \
A reply holds about {}, lines over 2000 characters cut; when the file goes on it names the next `offset`.",
        kib(s.output_budget_bytes)
    ),
    hints("Read a file", true, false, true, false)
);

/// `1000 bytes`, or `2097152 bytes, 2.0 MiB`.
fn size_words(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else {
        format!("{n} bytes, {}", human_bytes(n))
    }
}

fn reading(path: &str) -> String {
    format!("reading {path}")
}

pub(crate) async fn read(ctx: &ToolContext, a: ReadFileArgs) -> Result<CallToolResult> {
    absolute("path", &a.path, &ctx.facts.work_dir)?;
    let offset = match a.offset {
        Some(0) => {
            return Err(ToolError::Invalid(
                "offset is 0; lines are numbered from 1".into(),
            ));
        }
        o => o.unwrap_or(1),
    };
    let limit = match a.limit {
        Some(0) => {
            return Err(ToolError::Invalid(
                "limit is 0; give how many lines to show (default 2000)".into(),
            ));
        }
        l => l.unwrap_or(DEFAULT_READ_LINES),
    };
    let path = a.path;
    let first = read_chunk(ctx, &path, 0).await?;
    let size = first.size;
    if let Some(mime) = image_mime(&first.data) {
        return read_image(ctx, &path, mime, first).await;
    }
    if let Some(why) = not_text(&first.data) {
        return Err(ToolError::Refused(format!(
            "{path} is a binary file ({}): {why}, so it is not shown. Inspect it with exec, e.g. `file {path}` or `xxd {path} | head -50`.",
            size_words(size)
        )));
    }
    let mut window = LineWindow::new(offset, limit, ctx.settings.output_budget_bytes);
    let mut at = first.data.len() as u64;
    let mut eof = first.eof || first.data.is_empty();
    let mut full = window.feed(&first.data);
    while !full && !eof {
        let next = read_chunk(ctx, &path, at).await?;
        at += next.data.len() as u64;
        eof = next.eof || next.data.is_empty();
        full = window.feed(&next.data);
    }
    if !full {
        window.finish(true);
    }
    let mut text = String::new();
    let header = match (window.first, window.last) {
        (Some(f), Some(l)) if window.complete => {
            format!("{path}: lines {f}-{l} of {}\n", window.lines)
        }
        (Some(f), Some(l)) => format!(
            "{path}: lines {f}-{l} (the file is {} in all)\n",
            human_bytes(size)
        ),
        _ if window.complete && window.lines == 0 => format!("{path}: empty file\n"),
        _ => format!(
            "{path}: offset {offset} is past the end; the file has {} lines\n",
            window.lines
        ),
    };
    text.push_str(&header);
    text.push_str(&window.out);
    if let Some(next) = window.next_offset() {
        let why = match window.stop {
            Some(Stop::Budget) => format!(
                "the output budget ({}) is reached",
                kib(ctx.settings.output_budget_bytes)
            ),
            _ => format!("{limit} lines shown"),
        };
        text.push_str(&format!(
            "[{why}; the file goes on: read_file with offset {next} to continue]\n"
        ));
    }
    if window.long_lines > 0 {
        text.push_str(&format!(
            "[{} long lines were cut at 2000 characters; see them whole with exec, e.g. `cut -c 2001-4000`]\n",
            window.long_lines
        ));
    }
    let out = ReadFileOutput {
        path,
        kind: "text".into(),
        size,
        first_line: window.first,
        last_line: window.last,
        total_lines: window.complete.then_some(window.lines),
        next_offset: window.next_offset(),
        content: Some(window.out),
        ..Default::default()
    };
    Ok(done(text, &out))
}

async fn read_chunk(
    ctx: &ToolContext,
    path: &str,
    offset: u64,
) -> Result<computerd::protocol::FilesReadResult> {
    ctx.client
        .call_typed(&FilesReadParams {
            path: path.to_string(),
            offset: (offset > 0).then_some(offset),
            length: Some(limits::MAX_CHUNK_BYTES),
        })
        .await
        .map_err(|e| {
            ToolError::client(reading(path), e)
                .hint_for(
                    ErrorKind::IsDir,
                    "It is a directory: use list_files to see what is in it.",
                )
                .hint_for(
                    ErrorKind::NotFound,
                    "Check the path with list_files on its directory.",
                )
        })
}

async fn read_image(
    ctx: &ToolContext,
    path: &str,
    mime: &str,
    first: computerd::protocol::FilesReadResult,
) -> Result<CallToolResult> {
    let size = first.size;
    if size > MAX_IMAGE_BYTES {
        return Err(ToolError::Refused(format!(
            "{path} is a {mime} image of {size} bytes ({}); the most read_file shows is {} ({MAX_IMAGE_BYTES} bytes). Make a smaller copy with exec (e.g. `convert {path} -resize 50% /tmp/small.png`, where ImageMagick is installed) and read that.",
            human_bytes(size),
            human_bytes(MAX_IMAGE_BYTES)
        )));
    }
    let mut bytes = first.data.into_inner();
    let mut eof = first.eof;
    while !eof && (bytes.len() as u64) <= MAX_IMAGE_BYTES {
        let next = read_chunk(ctx, path, bytes.len() as u64).await?;
        eof = next.eof || next.data.is_empty();
        bytes.extend_from_slice(&next.data);
    }
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ToolError::Refused(format!(
            "{path} grew past {} while it was read; read it again when it is written",
            human_bytes(MAX_IMAGE_BYTES)
        )));
    }
    let dims = image_size(mime, &bytes);
    let mut text = match dims {
        Some((w, h)) => format!(
            "{path}: {mime} image, {w}x{h} pixels, {} bytes",
            bytes.len()
        ),
        None => format!("{path}: {mime} image, {} bytes", bytes.len()),
    };
    let size = bytes.len() as u64;
    let (bytes, shown_mime) = match crate::desktop::image::fit_for_result(&bytes, mime, dims)? {
        None => (bytes, mime.to_string()),
        Some(s) => {
            text.push_str(&format!(
                "; shown scaled to {}x{} as {} ({} bytes), within what a model is shown ({} px a side, {} KiB); the file is unchanged",
                s.width,
                s.height,
                s.mime,
                s.bytes.len(),
                crate::desktop::image::MAX_SIDE,
                crate::desktop::image::MAX_RESULT_IMAGE_BYTES / 1024
            ));
            (s.bytes, s.mime.to_string())
        }
    };
    let out = ReadFileOutput {
        path: path.to_string(),
        kind: "image".into(),
        size,
        mime_type: Some(mime.to_string()),
        width: dims.map(|d| d.0),
        height: dims.map(|d| d.1),
        ..Default::default()
    };
    let r = CallToolResult::success(vec![
        ContentBlock::text(text),
        ContentBlock::image(STANDARD.encode(&bytes), shown_mime),
    ]);
    Ok(with_structured(r, &out))
}

// --------------------------------------------------------------- write_file

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Absolute path.
    pub path: String,
    /// The whole new text.
    pub content: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteFileOutput {
    /// The file written.
    pub path: String,
    /// Bytes written: the file's size now.
    pub bytes_written: u64,
}

listing!(
    pub(crate) fn write_tool(_): WriteFileArgs => WriteFileOutput,
    "Create or replace a whole file with the given text; parent directories are made. \
To change part of a file, use edit_file.",
    hints("Write a file", false, true, true, false)
);

pub(crate) async fn write(ctx: &ToolContext, a: WriteFileArgs) -> Result<CallToolResult> {
    absolute("path", &a.path, &ctx.facts.work_dir)?;
    let opts = WriteFileOptions {
        mode: None,
        parents: true,
    };
    let size = ctx
        .client
        .write_file(&a.path, a.content.as_bytes(), opts)
        .await
        .map_err(|e| {
            ToolError::client(format!("writing {}", a.path), e).hint_for(
                ErrorKind::IsDir,
                "It is a directory: give the path of a file in it.",
            )
        })?;
    let text = format!("wrote {size} bytes to {}", a.path);
    Ok(done(
        text,
        &WriteFileOutput {
            path: a.path,
            bytes_written: size,
        },
    ))
}

// ---------------------------------------------------------------- edit_file

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Absolute path.
    pub path: String,
    /// Exact text, whitespace included, without read_file's line numbers.
    pub old_string: String,
    /// Replacement; empty deletes.
    pub new_string: String,
    /// Replace every occurrence, not exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditFileOutput {
    /// The file edited.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: u64,
    /// The file's size after the edit, in bytes.
    pub size: u64,
    /// The line where the first replacement begins.
    pub first_line: u64,
    /// The edited lines with a few lines around them, numbered like read_file.
    pub snippet: String,
}

listing!(
    pub(crate) fn edit_tool(_): EditFileArgs => EditFileOutput,
    "Replace exact text in a file. Refused, file unchanged, on no match or several without `replace_all`: \
add lines around `old_string` to make it unique. Returns the edited lines.",
    hints("Edit a file", false, true, false, false)
);

/// An edit that cannot be made, with the count of matches.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EditRefusal {
    Same,
    EmptyOld,
    NotFound,
    Ambiguous(usize),
}

/// The edited text, the count of replacements, and where the first begins.
pub(crate) fn apply_edit(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> std::result::Result<(String, usize, usize), EditRefusal> {
    if old.is_empty() {
        return Err(EditRefusal::EmptyOld);
    }
    if old == new {
        return Err(EditRefusal::Same);
    }
    let count = content.matches(old).count();
    let first = content.find(old).ok_or(EditRefusal::NotFound)?;
    if count > 1 && !replace_all {
        return Err(EditRefusal::Ambiguous(count));
    }
    Ok((content.replace(old, new), count, first))
}

/// Lines `from..=to` (1-based) of `text`, numbered like read_file, with
/// `around` lines of context, at most `max_lines` in all.
pub(crate) fn snippet(
    text: &str,
    from: usize,
    to: usize,
    around: usize,
    max_lines: usize,
) -> String {
    let start = from.saturating_sub(around).max(1);
    let end = (to + around).min(start + max_lines - 1);
    let mut out = String::new();
    for (i, line) in text.lines().enumerate().skip(start - 1) {
        let no = i + 1;
        if no > end {
            break;
        }
        let shown: String = line.chars().take(crate::text::MAX_LINE_CHARS).collect();
        out.push_str(&format!("{no:>6}\t{shown}\n"));
    }
    out
}

pub(crate) async fn edit(ctx: &ToolContext, a: EditFileArgs) -> Result<CallToolResult> {
    absolute("path", &a.path, &ctx.facts.work_dir)?;
    let path = a.path;
    let doing = format!("editing {path}");
    let st = ctx
        .client
        .call_typed(&FilesStatParams {
            path: path.clone(),
            follow: Some(true),
        })
        .await
        .map_err(|e| {
            ToolError::client(&doing, e)
                .hint_for(ErrorKind::NotFound, "To make a new file use write_file.")
        })?;
    match st.file_type {
        FileType::File => {}
        FileType::Dir => {
            return Err(ToolError::Refused(format!(
                "{path} is a directory; edit_file edits a file"
            )));
        }
        _ => {
            return Err(ToolError::Refused(format!(
                "{path} is not a regular file; edit_file edits a regular file"
            )));
        }
    }
    if st.size > MAX_EDIT_BYTES {
        return Err(ToolError::Refused(format!(
            "{path} is {} ({} bytes); edit_file rewrites files up to {}. Use exec (e.g. sed -i) for this one.",
            human_bytes(st.size),
            st.size,
            human_bytes(MAX_EDIT_BYTES)
        )));
    }
    let bytes = ctx
        .client
        .read_file(&path)
        .await
        .map_err(|e| ToolError::client(&doing, e))?;
    if bytes.contains(&0) {
        return Err(ToolError::Refused(format!(
            "{path} is a binary file (it holds NUL bytes); edit_file edits text"
        )));
    }
    let content = String::from_utf8(bytes).map_err(|e| {
        ToolError::Refused(format!(
            "{path} is not UTF-8 text (invalid bytes at byte {}); edit_file edits UTF-8 text only. Use exec (e.g. sed) for it.",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let (edited, count, first) = apply_edit(&content, &a.old_string, &a.new_string, a.replace_all)
        .map_err(|r| match r {
            EditRefusal::EmptyOld => ToolError::Invalid(
                "old_string is empty; give the exact text to replace (to write a whole file use write_file)".into(),
            ),
            EditRefusal::Same => ToolError::Invalid(
                "old_string and new_string are the same; nothing would change".into(),
            ),
            EditRefusal::NotFound => ToolError::Refused(format!(
                "old_string was not found in {path}; it must match exactly, whitespace, indentation and line ends included. Read the file with read_file and copy the text without the line-number prefix. The file is unchanged."
            )),
            EditRefusal::Ambiguous(n) => ToolError::Refused(format!(
                "old_string occurs {n} times in {path}; include more surrounding lines to make it unique, or set replace_all to replace all {n}. The file is unchanged."
            )),
        })?;
    let opts = WriteFileOptions {
        mode: None,
        parents: false,
    };
    let size = ctx
        .client
        .write_file(&path, edited.as_bytes(), opts)
        .await
        .map_err(|e| ToolError::client(&doing, e))?;
    let first_line = content[..first].matches('\n').count() + 1;
    let new_lines = a.new_string.matches('\n').count();
    let shown = snippet(&edited, first_line, first_line + new_lines, 3, 40);
    let text = format!(
        "replaced {count} occurrence{} in {path} (first at line {first_line}); the file is now {size} bytes:\n{shown}",
        if count == 1 { "" } else { "s" }
    );
    let out = EditFileOutput {
        path,
        replacements: count as u64,
        size,
        first_line: first_line as u64,
        snippet: shown,
    };
    Ok(done(text, &out))
}

// --------------------------------------------------------------- list_files

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// Absolute path.
    pub path: String,
    /// Levels (1: its own entries). Default 2, at most 5.
    #[schemars(range(min = 1, max = 5))]
    pub depth: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct ListedEntry {
    /// The path relative to the listed directory.
    pub path: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Bytes.
    pub size: u64,
    /// A symlink's target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListFilesOutput {
    /// The directory listed.
    pub path: String,
    /// How many levels down it was listed.
    pub depth: u32,
    /// In walk order: each directory before its contents, names sorted.
    pub entries: Vec<ListedEntry>,
    /// The listing stopped at the output budget; more entries exist.
    pub truncated: bool,
}

listing!(
    pub(crate) fn list_tool(s): ListFilesArgs => ListFilesOutput,
    format!(
        "List a directory tree: per entry its type (d, f, l symlink, o other), bytes and relative path; symlinks are not followed. \
Over about {} it stops with a note: list less.",
        kib(s.output_budget_bytes)
    ),
    hints("List files", true, false, true, false)
);

fn type_letter(t: FileType) -> (&'static str, &'static str) {
    match t {
        FileType::File => ("f", "file"),
        FileType::Dir => ("d", "dir"),
        FileType::Symlink => ("l", "symlink"),
        FileType::Other => ("o", "other"),
    }
}

pub(crate) async fn list(ctx: &ToolContext, a: ListFilesArgs) -> Result<CallToolResult> {
    absolute("path", &a.path, &ctx.facts.work_dir)?;
    let depth = match a.depth {
        None => DEFAULT_LIST_DEPTH,
        Some(0) => {
            return Err(ToolError::Invalid(
                "depth is 0; it is 1 (the directory's own entries) to 5".into(),
            ));
        }
        Some(d) if d > MAX_LIST_DEPTH => {
            return Err(ToolError::Invalid(format!(
                "depth is {d}; the most is {MAX_LIST_DEPTH}. For a deeper search use exec with find."
            )));
        }
        Some(d) => d,
    };
    let root = clean_path("path", &a.path).map_err(|e| ToolError::Invalid(e.message))?;
    let prefix = if root == "/" {
        "/".to_string()
    } else {
        format!("{root}/")
    };
    let budget = ctx.settings.output_budget_bytes;
    let mut lines = String::new();
    let mut entries = Vec::new();
    let mut offset = 0u64;
    let mut truncated = false;
    'pages: loop {
        let page = ctx
            .client
            .call_typed(&FilesListParams {
                path: a.path.clone(),
                depth: Some(depth),
                offset: (offset > 0).then_some(offset),
            })
            .await
            .map_err(|e| {
                ToolError::client(format!("listing {}", a.path), e)
                    .hint_for(ErrorKind::NotDir, "It is a file: read it with read_file.")
            })?;
        offset += page.entries.len() as u64;
        for e in page.entries {
            let rel = e.path.strip_prefix(&prefix).unwrap_or(&e.path).to_string();
            let (letter, kind) = type_letter(e.stat.file_type);
            let line = match (&e.stat.file_type, &e.stat.target) {
                (FileType::Dir, _) => format!("{letter} {:>10}  {rel}/\n", "-"),
                (FileType::Symlink, Some(t)) => {
                    format!("{letter} {:>10}  {rel} -> {t}\n", e.stat.size)
                }
                _ => format!("{letter} {:>10}  {rel}\n", e.stat.size),
            };
            if lines.len() + line.len() > budget {
                truncated = true;
                break 'pages;
            }
            lines.push_str(&line);
            entries.push(ListedEntry {
                path: rel,
                kind: kind.to_string(),
                size: e.stat.size,
                target: e.stat.target,
            });
        }
        if !page.truncated {
            break;
        }
    }
    let mut text = format!(
        "{} (depth {depth}): {} entr{}{}\n",
        a.path,
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        if truncated { " shown" } else { "" }
    );
    if entries.is_empty() {
        text.push_str("(empty directory)\n");
    }
    text.push_str(&lines);
    if truncated {
        text.push_str(&format!(
            "[the listing stopped at the output budget ({}); list a subdirectory or a smaller depth to see the rest, or use exec with find]\n",
            kib(budget)
        ));
    }
    let out = ListFilesOutput {
        path: a.path,
        depth,
        entries,
        truncated,
    };
    Ok(done(text, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_replaces_exactly_one_match_or_says_how_many() {
        assert_eq!(
            apply_edit("a b a", "b", "c", false),
            Ok(("a c a".to_string(), 1, 2))
        );
        assert_eq!(
            apply_edit("a b a", "a", "x", false),
            Err(EditRefusal::Ambiguous(2))
        );
        assert_eq!(
            apply_edit("a b a", "a", "x", true),
            Ok(("x b x".to_string(), 2, 0))
        );
        assert_eq!(
            apply_edit("abc", "zz", "y", true),
            Err(EditRefusal::NotFound)
        );
        assert_eq!(apply_edit("abc", "b", "b", false), Err(EditRefusal::Same));
        assert_eq!(
            apply_edit("abc", "", "y", false),
            Err(EditRefusal::EmptyOld)
        );
        // Matches do not overlap: "aaaa" holds "aa" twice.
        assert_eq!(
            apply_edit("aaaa", "aa", "b", true),
            Ok(("bb".to_string(), 2, 0))
        );
        // Exact: whitespace counts.
        assert_eq!(
            apply_edit("fn x() {\n    y\n}", "  y", "  z", false),
            Ok(("fn x() {\n    z\n}".to_string(), 1, 11))
        );
    }

    #[test]
    fn a_snippet_shows_the_edited_lines_with_context() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let s = snippet(&text, 10, 10, 2, 40);
        assert_eq!(
            s,
            "     8\tline 8\n     9\tline 9\n    10\tline 10\n    11\tline 11\n    12\tline 12\n"
        );
        let s = snippet(&text, 1, 1, 3, 40);
        assert!(s.starts_with("     1\tline 1\n"));
        assert_eq!(s.lines().count(), 4);
        let s = snippet(&text, 1, 20, 3, 5);
        assert_eq!(s.lines().count(), 5);
    }
}
