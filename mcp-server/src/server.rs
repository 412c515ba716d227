//! The MCP face: one handler per session, tools from the family its
//! computer's kind offers, progress and cancellation wired to the call.

use std::sync::Arc;

use computer_tools::{ExtendFn, Progress, ProgressFn, ToolContext, ToolSettings};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::session::Session;

const INSTRUCTIONS: &str = "\
This server gives you a computer: a Linux sandbox with a shell, files and \
background processes. It is made on your first tool call and gone when the \
session ends. Use `exec` for commands that finish, `process_start` and \
`process_read` for servers and long or interactive programs, and the file \
tools for reading and editing. Paths are absolute; your home directory is \
the writable work directory (`computer_info` says where), and /tmp is \
yours too. Unless told otherwise the computer has no network.";

#[derive(Clone)]
pub struct ComputerMcp {
    session: Arc<Session>,
}

impl ComputerMcp {
    pub fn new(session: Arc<Session>) -> Self {
        Self { session }
    }

    fn settings(&self) -> ToolSettings {
        let c = &self.session.app().config;
        ToolSettings {
            output_budget_bytes: c.output_budget,
            exec_default_timeout_ms: c.exec_timeout.as_millis() as u64,
            exec_max_timeout_ms: c.exec_max_timeout.as_millis() as u64,
        }
    }
}

fn tool_error(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

impl ServerHandler for ComputerMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Listed from what the provider declares, so listing makes no computer.
        let caps = self.session.app().capabilities();
        Ok(ListToolsResult::with_all_items(
            computer_tools::sandbox_tools_with(&caps.groups, caps.extend, &self.settings()),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let caps = self.session.app().capabilities();
        // The name is checked without building the list (and its schemas):
        // that is only needed to say what the tools are.
        let offered =
            computer_tools::is_sandbox_tool(&name) && (name != "computer_extend" || caps.extend);
        if !offered {
            let listed =
                computer_tools::sandbox_tools_with(&caps.groups, caps.extend, &self.settings());
            let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
            return Err(ErrorData::invalid_params(
                format!("no tool {name:?}; the tools are: {}", names.join(", ")),
                None,
            ));
        }
        let cancel = context.ct.clone();
        let for_call = match self.session.computer(&cancel).await {
            Ok(c) => c,
            Err(why) => return Ok(tool_error(format!("{name} could not run: {why}"))),
        };
        let progress: Option<ProgressFn> = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            let f: ProgressFn = Arc::new(move |p: Progress| {
                let peer = peer.clone();
                let param =
                    ProgressNotificationParam::new(token.clone(), p.elapsed_ms as f64 / 1000.0)
                        .with_message(p.message);
                tokio::spawn(async move {
                    let _ = peer.notify_progress(param).await;
                });
            });
            f
        });
        let extend: Option<ExtendFn> = caps.extend.then(|| {
            let session = Arc::clone(&self.session);
            let f: ExtendFn = Arc::new(move |ttl_ms: u64| {
                let session = Arc::clone(&session);
                Box::pin(async move { session.extend(ttl_ms).await })
            });
            f
        });
        let live = for_call.live;
        let ctx = ToolContext {
            client: Arc::clone(&live.client),
            facts: live.facts.clone(),
            settings: self.settings(),
            progress,
            extend,
            cancel: cancel.clone(),
        };
        let result = computer_tools::call_sandbox_tool(&name, request.arguments, &ctx).await;
        self.session.check_lost(&live).await;
        let mut result = match result {
            Ok(r) => r,
            Err(e) => return Err(e),
        };
        if let Some(note) = for_call.note {
            result.content.insert(0, ContentBlock::text(note));
        }
        if live.client.is_closed() {
            result.content.push(ContentBlock::text(format!(
                "The computer {} stopped answering; the next tool call will make a new one.",
                live.computer.id
            )));
        }
        Ok(result.into())
    }
}
