//! Why a tool call failed, and the one place that turns it into what the
//! model reads: an `isError` result whose text says what happened and what
//! to do next.

use computerd::client::ClientError;
use computerd::protocol::{ErrorKind, RpcError};
use rmcp::model::{CallToolResult, ContentBlock};

/// A tool call that did not do its work.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolError {
    /// The arguments are wrong; the words name the field and what is allowed.
    #[error("{0}")]
    Invalid(String),
    /// The call was understood and refused (a binary file, an ambiguous
    /// edit...); the words say why and what to do instead.
    #[error("{0}")]
    Refused(String),
    /// The computer's daemon answered with an error. `doing` says what the
    /// tool was doing, `hint` what the model may do about it.
    #[error("{doing}: {}{}", tool_words(.doing, &.error.message), hint_suffix(.hint))]
    Daemon {
        doing: String,
        error: Box<RpcError>,
        hint: Option<String>,
    },
    /// The connection to the computer ended.
    #[error(
        "the computer is gone ({0}). The next tool call will make a new computer; the files and processes of this one are lost."
    )]
    Gone(String),
    /// The computer answered something the tool could not read.
    #[error("{0}")]
    Broken(String),
    /// The MCP client cancelled the call.
    #[error(
        "the call was cancelled; what it started in the computer was ended with its whole process group"
    )]
    Cancelled,
}

/// The daemon's methods as the tools a model calls are named, for the
/// daemon's words, which name its methods (a model has no `files.read`).
const METHOD_TOOLS: &[(&str, &str)] = &[
    ("files.read", "read_file"),
    ("files.write", "write_file"),
    ("files.list", "list_files"),
    ("files.stat", "list_files"),
    ("exec.run", "exec"),
    ("process.start", "process_start"),
    ("process.read", "process_read"),
    ("process.write", "process_write"),
    ("process.signal", "process_signal"),
    ("process.list", "process_list"),
    ("process.wait", "process_read"),
    ("deadline.extend", "computer_extend"),
];

/// The daemon's words as a model reads them. A daemon message may open
/// with its method and subject (`files.read /x: no such file`), which
/// `doing` already says (`reading /x`): that opening goes. Every method
/// the daemon names becomes the tool that calls it, and advice that only
/// a protocol client can take becomes the tool's.
fn tool_words(doing: &str, message: &str) -> String {
    let mut m = message;
    let subject = doing.split_once(' ').map(|(_, s)| s);
    if let Some((first, rest)) = m.split_once(' ')
        && METHOD_TOOLS.iter().any(|(method, _)| *method == first)
        && let Some(after) = subject
            .and_then(|s| rest.strip_prefix(s))
            .and_then(|r| r.strip_prefix(": "))
    {
        m = after;
    }
    let mut out = m
        .replace(
            "it is not a directory; files.stat describes a single file",
            "it is not a directory; read_file reads a file",
        )
        .to_string();
    for (method, tool) in METHOD_TOOLS {
        // Whole words only: `process.read` is not in `process.reading`.
        let mut from = 0;
        while let Some(i) = out[from..].find(method).map(|i| i + from) {
            let end = i + method.len();
            let before_ok =
                !out[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || "_.".contains(c));
            let rest = &out[end..];
            let after_ok = match rest.chars().next() {
                Some(c) if c.is_ascii_alphanumeric() || c == '_' => false,
                Some('.') => !rest[1..].starts_with(|c: char| c.is_ascii_alphanumeric()),
                _ => true,
            };
            if before_ok && after_ok {
                out.replace_range(i..end, tool);
                from = i + tool.len();
            } else {
                from = end;
            }
        }
    }
    out
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(". {h}"),
        None => String::new(),
    }
}

pub type Result<T, E = ToolError> = std::result::Result<T, E>;

impl ToolError {
    /// A daemon or connection failure, with what the tool was doing.
    pub(crate) fn client(doing: impl Into<String>, e: ClientError) -> Self {
        match e {
            ClientError::Rpc(error) => ToolError::Daemon {
                doing: doing.into(),
                error: Box::new(error),
                hint: None,
            },
            ClientError::Closed(reason) => ToolError::Gone(reason),
            ClientError::Decode { method, detail } => ToolError::Broken(format!(
                "{}: the computer's reply to {method} could not be read ({detail})",
                doing.into()
            )),
            ClientError::Source(s) => ToolError::Broken(format!("{}: {s}", doing.into())),
        }
    }

    /// The daemon's error kind, when the daemon refused.
    pub(crate) fn kind(&self) -> Option<ErrorKind> {
        match self {
            ToolError::Daemon { error, .. } => error.kind(),
            _ => None,
        }
    }

    /// The params field the daemon named, when it named one.
    pub(crate) fn field(&self) -> Option<&str> {
        match self {
            ToolError::Daemon { error, .. } => error.data.as_ref().and_then(|d| d.field.as_deref()),
            _ => None,
        }
    }

    /// Add a hint to a daemon error of `kind` (other errors are unchanged).
    pub(crate) fn hint_for(mut self, kind: ErrorKind, words: impl Into<String>) -> Self {
        if let ToolError::Daemon { error, hint, .. } = &mut self
            && error.kind() == Some(kind)
        {
            *hint = Some(words.into());
        }
        self
    }

    /// What the model reads.
    pub fn into_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.to_string())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_words_name_tools_not_the_daemons_methods() {
        let said =
            |doing: &str, e: RpcError| ToolError::client(doing, ClientError::Rpc(e)).to_string();
        assert_eq!(
            said(
                "reading /nope",
                RpcError::not_found("files.read /nope: no such file or directory")
            ),
            "reading /nope: no such file or directory"
        );
        assert_eq!(
            said(
                "reading /etc",
                RpcError::is_dir(
                    "files.read /etc: it is a directory; files.list shows what it holds"
                )
            ),
            "reading /etc: it is a directory; list_files shows what it holds"
        );
        assert_eq!(
            said(
                "listing /etc/hosts",
                RpcError::not_dir(
                    "files.list /etc/hosts: it is not a directory; files.stat describes a single file"
                )
            ),
            "listing /etc/hosts: it is not a directory; read_file reads a file"
        );
        assert_eq!(
            said(
                "writing to p1",
                RpcError::timeout(
                    "process.write to p1 gave up after 10 s: 0 of 6 bytes were written (the program is not reading)"
                )
            ),
            "writing to p1: process_write to p1 gave up after 10 s: 0 of 6 bytes were written (the program is not reading)"
        );
        assert_eq!(
            said(
                "exec",
                RpcError::aborted(
                    "exec.run was cancelled; its program and everything it started were ended"
                )
            ),
            "exec: exec was cancelled; its program and everything it started were ended"
        );
        // A word that only starts like a method is left alone.
        assert_eq!(
            said(
                "x",
                RpcError::invalid("files.reader and process.reads stay")
            ),
            "x: files.reader and process.reads stay"
        );
    }

    #[test]
    fn daemon_errors_quote_the_daemon_and_add_the_hint() {
        let e = ToolError::client(
            "reading /x",
            ClientError::Rpc(RpcError::is_dir("/x is a directory")),
        )
        .hint_for(ErrorKind::IsDir, "use list_files to see what is in it");
        assert_eq!(
            e.to_string(),
            "reading /x: /x is a directory. use list_files to see what is in it"
        );
        let gone = ToolError::client("exec", ClientError::Closed("eof".into()));
        assert!(gone.to_string().starts_with("the computer is gone (eof)."));
        assert!(
            gone.to_string()
                .contains("next tool call will make a new computer")
        );
    }
}
