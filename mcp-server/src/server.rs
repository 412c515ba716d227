//! The MCP face: one handler per session, tools listed and called through
//! the registry's family for the session's kind (never named here),
//! progress and cancellation wired to the call.

use std::sync::Arc;

use computer_tools::{
    ExtendFn, Family, Offer, Progress, ProgressFn, ToolContext, ToolSettings, registry,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::session::Session;

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

    /// The tool family of the session's kind; None when this crate's
    /// registry has none for it (then no tool is offered).
    fn family(&self) -> Option<&'static Family> {
        registry().family(self.session.app().kind())
    }
}

fn tool_error(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

impl ServerHandler for ComputerMcp {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ));
        match self.family() {
            Some(f) => config.with_instructions(f.instructions),
            None => config,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Listed from what the provider declares, so listing makes no computer.
        let caps = self.session.app().capabilities();
        let offer = Offer {
            groups: &caps.groups,
            extend: caps.extend,
        };
        let tools = match self.family() {
            Some(f) => f.list(&offer, &self.settings()),
            None => Vec::new(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let caps = self.session.app().capabilities();
        let offer = Offer {
            groups: &caps.groups,
            extend: caps.extend,
        };
        // Checked before a computer is made, against what is listed (and
        // without building any schema).
        let family = self.family().filter(|f| f.offers(&name, &offer));
        let Some(family) = family else {
            let names = self.family().map(|f| f.names(&offer)).unwrap_or_default();
            return Err(ErrorData::invalid_params(
                format!("no tool {name:?}; the tools are: {}", names.join(", ")),
                None,
            ));
        };
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
            state: Arc::clone(&live.state),
            cancel: cancel.clone(),
        };
        let result = family.call(&name, request.arguments, &ctx).await;
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
