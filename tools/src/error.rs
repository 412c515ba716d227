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
    #[error("{doing}: {}{}", .error.message, hint_suffix(.hint))]
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
