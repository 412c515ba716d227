//! The MCP face: tools listed and called through the registry's family for
//! the server's kind (never named here) and the fleet tools; each call's
//! computer found from its `computer` argument and its caller; progress and
//! cancellation wired to the call.
//!
//! One handler serves a stdio session, an HTTP session (2025-11-25 and
//! before: rmcp makes one per session), or one stateless request
//! (2026-07-28: rmcp makes one per request). A request that carries an
//! `Mcp-Session-Id` belongs to a session, whose default computer its calls
//! share; one without is stateless, and its calls that name no computer
//! share the principal's default computer.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

use computer_tools::fleet::{self, FleetPolicy, NetworkChoice};
use computer_tools::{
    ExtendFn, Family, Offer, Progress, ProgressFn, ReceiptFn, ToolContext, ToolSettings, registry,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetSkillRequestParams, GetSkillResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::app::{App, Caller, CallerFleet, Entry, Principal};
use crate::config::NetworkArg;
use crate::session::Session;
use crate::view;

/// Where a handler's calls come from.
#[derive(Clone)]
enum Mode {
    /// A stdio client: one session, the server's own principal.
    Stdio(Arc<Session>),
    /// HTTP: the principal from each request's token; the session made on
    /// the first call that carries a session id.
    Http(Arc<OnceLock<Arc<Session>>>),
}

#[derive(Clone)]
pub struct ComputerMcp {
    app: Arc<App>,
    mode: Mode,
}

impl ComputerMcp {
    /// The handler of a stdio session.
    pub fn stdio(session: Arc<Session>) -> Self {
        Self {
            app: Arc::clone(session.app()),
            mode: Mode::Stdio(session),
        }
    }

    /// A handler for HTTP: one session's, or one stateless request's.
    pub fn http(app: Arc<App>) -> Self {
        Self {
            app,
            mode: Mode::Http(Arc::new(OnceLock::new())),
        }
    }

    fn settings(&self) -> ToolSettings {
        let c = &self.app.config;
        ToolSettings {
            output_budget_bytes: c.output_budget,
            exec_default_timeout_ms: c.exec_timeout.as_millis() as u64,
            exec_max_timeout_ms: c.exec_max_timeout.as_millis() as u64,
            open_world: c.network != NetworkArg::None,
            screenshot_max: (c.screenshot_max.width, c.screenshot_max.height),
            output_schemas: c.output_schemas,
        }
    }

    /// The tool family of the server's kind; None when this crate's
    /// registry has none for it (then only the fleet tools are offered).
    fn family(&self) -> Option<&'static Family> {
        registry().family(self.app.kind())
    }

    /// Who is calling: over HTTP the request's principal (set by the auth
    /// layer) and its session when it has one.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, String> {
        match &self.mode {
            Mode::Stdio(session) => Ok(Caller {
                principal: self.app.stdio_principal.clone(),
                session: Some(Arc::clone(session)),
            }),
            Mode::Http(cell) => {
                let parts = context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .ok_or("the request's HTTP parts are missing")?;
                let principal = parts
                    .extensions
                    .get::<Principal>()
                    .cloned()
                    .ok_or("the request carries no principal (no bearer token was checked)")?;
                let session = match parts.headers.get(crate::http::SESSION_HEADER) {
                    None => None,
                    Some(_) if cell.get().is_some() => cell.get().cloned(),
                    Some(id) => {
                        // The HTTP layer let only the session's owner in.
                        let id = id.to_str().map_err(|_| "the session id is not text")?;
                        let s = self.app.http_session(id, &principal)?;
                        Some(Arc::clone(cell.get_or_init(|| s)))
                    }
                };
                Ok(Caller { principal, session })
            }
        }
    }
}

/// What computer_new may ask of this server.
pub fn fleet_policy(app: &App) -> FleetPolicy {
    let c = &app.config;
    let sizes = app.provider.default_sizes();
    FleetPolicy {
        kinds: vec![app.kind()],
        max_lifetime_ms: c.lifetime.as_millis() as u64,
        networks: match c.network {
            NetworkArg::None => vec![NetworkChoice::None],
            NetworkArg::Open => vec![NetworkChoice::None, NetworkChoice::Open],
            NetworkArg::Public => vec![NetworkChoice::None, NetworkChoice::Public],
            NetworkArg::Allow(_) => vec![NetworkChoice::None, NetworkChoice::Allow],
        },
        max_cpus: c.cpus.unwrap_or(sizes.cpus),
        max_memory_mb: c.memory_mb.unwrap_or(sizes.memory_mb),
        max_pids: c.pids.unwrap_or(sizes.pids),
        idle_ms: c.fleet.idle.as_millis() as u64,
        max_computers: c.fleet.max_computers,
        pause: app.provider.can_pause(),
        view: app.views.served(),
        // Listed on a sandbox server only: each kind's listing stays
        // within 20 KB.
        snapshot: app.provider.can_snapshot()
            && app.kind() == computerd::protocol::SettingKind::Sandbox,
    }
}

/// Whether tool `name` of `family` sends input (needs a pointer, keys or
/// touch, or is a page tool that is not read-only: a browser's screen is
/// its front tab): refused while a person holds the computer's control.
fn sends_input(family: &computer_tools::Family, name: &str, settings: &ToolSettings) -> bool {
    use computer_tools::Needs;
    use computerd::protocol::Group;
    let input = |g: &Group| {
        matches!(
            g,
            Group::InputPointer | Group::InputKeys | Group::InputTouch
        )
    };
    let Some(def) = family.tool(name) else {
        return false;
    };
    let (inputs, page) = match def.needs {
        Needs::Group(g) => (input(&g), g == Group::Cdp),
        Needs::All(gs) => (gs.iter().any(input), gs.contains(&Group::Cdp)),
        _ => (false, false),
    };
    inputs
        || (page
            && def
                .tool(settings)
                .annotations
                .and_then(|a| a.read_only_hint)
                != Some(true))
}

fn tool_error(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

/// The `_meta` key naming the computer a result came from.
pub const META_COMPUTER: &str = "computer-mcp/computer";

impl ServerHandler for ComputerMcp {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_skills()
                .build(),
        )
        .with_server_info(Implementation::new(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
        ));
        let idle = computer_providers::human_ms(self.app.config.fleet.idle.as_millis() as u64);
        let fleet_words = format!(
            " Calls that name no `computer` run on your default computer. To keep work apart, \
make more with computer_new and pass the handle or name it gives as `computer`; \
computer_list shows yours. A computer unused for {idle} is released, and a session's \
default computer when its session ends."
        );
        match self.family() {
            Some(f) => config.with_instructions(format!(
                "{}{fleet_words}{}",
                f.instructions,
                crate::resources::instructions(self.app.kind())
            )),
            None => config,
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(
            crate::resources::prompts(self.app.kind()),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        crate::resources::get_prompt(self.app.kind(), &request.name).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self
            .caller(&context)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        Ok(ListResourcesResult::with_all_items(
            crate::resources::list(&self.app, &caller).await,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            crate::resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self
            .caller(&context)
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        crate::resources::read(&self.app, &caller, &request.uri)
            .await
            .map(Into::into)
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(crate::skills_ext::list(self.app.kind()))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        crate::skills_ext::get(self.app.kind(), &request.uri)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Listed from what the provider declares, so listing makes no computer.
        let caps = self.app.capabilities();
        let offer = Offer {
            groups: &caps.groups,
            extend: caps.extend,
        };
        let mut tools = match self.family() {
            Some(f) => f.list(&offer, &self.settings()),
            None => Vec::new(),
        };
        tools.extend(
            fleet::tools(&fleet_policy(&self.app))
                .into_iter()
                .map(|mut t| {
                    if !self.app.config.output_schemas {
                        t.output_schema = None;
                    }
                    t
                }),
        );
        if self.app.views.served() && crate::view::viewable(&self.app) {
            tools.iter_mut().for_each(view::app::tie);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = match self.caller(&context) {
            Ok(c) => c,
            Err(why) => {
                return Ok(tool_error(format!("{} could not run: {why}", request.name)));
            }
        };
        // A call that makes or releases a computer changes the caller's
        // `computer://<handle>/info` resources: a client that initialized a
        // session is told (a stateless request, over HTTP or stdio, has no
        // session to tell it in).
        let before = self.app.held_handles(&caller.principal);
        let principal = caller.principal.clone();
        let session_bound = caller.session.is_some() && context.peer.peer_info().is_some();
        let r = self.call_tool_as(request, &context, caller).await;
        if session_bound && self.app.held_handles(&principal) != before {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_resource_list_changed().await;
            });
        }
        r
    }
}

impl ComputerMcp {
    /// Begin the model's input tool `name` on computer `handle`: refused
    /// in words while a person holds its control, except where the model
    /// asked for the takeover: there it waits (up to
    /// [`MODEL_INPUT_WAIT`]) for the person to give control back.
    async fn model_input(
        &self,
        name: &str,
        handle: &str,
        cancel: &CancellationToken,
    ) -> Result<view::control::ModelInput<'_>, String> {
        use view::control::{Freed, MODEL_INPUT_WAIT};
        let control = &self.app.views.control;
        loop {
            let lease = match control.begin_input(handle) {
                Ok(held) => return Ok(held),
                Err(lease) => lease,
            };
            if !lease.asked {
                return Err(format!(
                    "{name}: a person has control of this screen until they give it back; nothing was sent (screenshot still reads the screen)"
                ));
            }
            match control.until_free(handle, cancel, MODEL_INPUT_WAIT).await {
                Freed::Free => {}
                Freed::Cancelled => {
                    return Err(format!(
                        "{name}: cancelled while the person you asked had control; nothing was sent"
                    ));
                }
                Freed::TimedOut => {
                    return Err(format!(
                        "{name}: the person you asked still has control after {} s, the most an input waits for them; nothing was sent. Look at the screen (screenshot) and try again later",
                        MODEL_INPUT_WAIT.as_secs()
                    ));
                }
            }
        }
    }

    async fn call_tool_as(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        caller: Caller,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if fleet::is_fleet_tool(&name) {
            let fleet = CallerFleet {
                app: Arc::clone(&self.app),
                caller,
                peer: Some(context.peer.clone()),
                cancel: context.ct.clone(),
            };
            let policy = fleet_policy(&self.app);
            let r = fleet::call(&name, request.arguments, &policy, &fleet).await;
            return Ok(r
                .unwrap_or_else(|| CallToolResult::error(vec![ContentBlock::text("no such tool")]))
                .into());
        }
        let caps = self.app.capabilities();
        let offer = Offer {
            groups: &caps.groups,
            extend: caps.extend,
        };
        // Checked before a computer is made, against what is listed (and
        // without building any schema).
        let family = self.family().filter(|f| f.offers(&name, &offer));
        let Some(family) = family else {
            return Err(self.no_such_tool(&name, &offer));
        };
        // A tool listed inside another (`process` {action: "start"}) is
        // called as itself (`process_start`) from here on.
        let (name, mut arguments) = match family.unfold(&name, request.arguments, &offer) {
            Ok(unfolded) => unfolded,
            Err(why) => return Ok(tool_error(format!("{name}: {why}"))),
        };
        let which = match fleet::take_computer_arg(&mut arguments) {
            Ok(w) => w,
            Err(why) => return Ok(tool_error(format!("{name}: {why}"))),
        };
        let cancel = context.ct.clone();
        // A browser's tabs are each one caller's: a session's, or a
        // stateless caller's principal's.
        let caller_id = match &caller.session {
            Some(s) => s.id.clone(),
            None => caller.principal.0.clone(),
        };
        let for_call = match self.app.resolve(&caller, &which, &cancel).await {
            Ok(c) => c,
            Err(why) => return Ok(tool_error(format!("{name} could not run: {why}"))),
        };
        let entry = for_call.entry;
        // The model's input batch is counted while it runs, so a person's
        // take waits for it rather than interleave with it.
        let _input = if sends_input(family, &name, &self.settings()) {
            match self.model_input(&name, &entry.handle, &cancel).await {
                Ok(held) => Some(held),
                Err(why) => return Ok(tool_error(why)),
            }
        } else {
            None
        };
        let _in_use = entry.begin_use();
        entry.count_call();
        let ctx = self.tool_context(&entry, caps.extend, context, caller_id);
        let result = family.call(&name, arguments, &ctx).await;
        if entry.default.is_some() {
            caller
                .default_slot(&self.app)
                .check_lost(&self.app, &entry)
                .await;
        }
        let mut result = result?;
        self.annotate(&mut result, &entry, for_call.note, &name, context);
        Ok(result.into())
    }

    /// A call of a tool no family of this server lists: refused naming
    /// every tool it does list.
    fn no_such_tool(&self, name: &str, offer: &Offer<'_>) -> ErrorData {
        let mut names = self.family().map(|f| f.names(offer)).unwrap_or_default();
        names.extend(fleet::NAMES);
        if self.app.provider.can_pause() {
            names.extend(fleet::PAUSE_NAMES);
        }
        if fleet_policy(&self.app).snapshot {
            names.push(fleet::SNAPSHOT_NAME);
        }
        if self.app.views.served() {
            names.push(fleet::VIEW_NAME);
        }
        ErrorData::invalid_params(
            format!("no tool {name:?}; the tools are: {}", names.join(", ")),
            None,
        )
    }

    /// What a tool of `entry`'s sees of its call: the computer, the
    /// server's settings, progress to the client (when it asked), the
    /// computer's lifetime (where the provider `extends`), its receipt and
    /// ports, and `caller`'s own tabs.
    fn tool_context(
        &self,
        entry: &Arc<Entry>,
        extends: bool,
        context: &RequestContext<RoleServer>,
        caller: String,
    ) -> ToolContext {
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
        let extend: Option<ExtendFn> = extends.then(|| {
            let app = Arc::clone(&self.app);
            let entry = Arc::clone(entry);
            let f: ExtendFn = Arc::new(move |ttl_ms: u64| {
                let app = Arc::clone(&app);
                let entry = Arc::clone(&entry);
                Box::pin(async move { app.extend(&entry, ttl_ms).await })
            });
            f
        });
        let receipt: ReceiptFn = {
            let app = Arc::clone(&self.app);
            let entry = Arc::clone(entry);
            Arc::new(move || {
                let app = Arc::clone(&app);
                let entry = Arc::clone(&entry);
                Box::pin(async move { app.receipt(&entry).await })
            })
        };
        ToolContext {
            facts: entry.facts(),
            settings: self.settings(),
            progress,
            extend,
            receipt: Some(receipt),
            ports: Some(Arc::clone(&entry.ports) as Arc<dyn computer_tools::ports::PortHost>),
            state: Arc::clone(&entry.state),
            cancel: context.ct.clone(),
            resources: Some(format!("computer://{}", entry.handle)),
            caller,
            ..ToolContext::new(Arc::clone(&entry.client))
        }
    }

    /// A tool's result, told which computer it ran on (in words and in
    /// `_meta`), that it stopped answering, and (for a host that renders
    /// apps) the live view's link beside a screenshot.
    fn annotate(
        &self,
        result: &mut CallToolResult,
        entry: &Entry,
        note: Option<String>,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) {
        if let Some(note) = note {
            result.content.insert(0, ContentBlock::text(note));
        }
        if entry.client.is_closed() {
            let next = if entry.default.is_some() {
                "the next tool call will make a new one"
            } else {
                "make another with computer_new"
            };
            result.content.push(ContentBlock::text(format!(
                "The computer {} stopped answering; {next}.",
                entry.label()
            )));
        }
        result.content.push(ContentBlock::text(format!(
            "(on computer {})",
            entry.label()
        )));
        let mut meta = result.meta.take().unwrap_or_default();
        meta.0.insert(
            META_COMPUTER.into(),
            serde_json::json!({"handle": entry.handle, "name": entry.shown_name()}),
        );
        // A host that renders apps shows the live screen with a
        // screenshot: the app reads its link here, out of the model's view.
        if self.app.views.served()
            && view::app::SHOWN_BY.contains(&name)
            && crate::view::viewable(&self.app)
            && view::app::client_renders_apps(&context.peer)
            && let Ok(link) = self.app.views.link(entry, false)
        {
            meta.0.insert(
                view::app::META_LINK.into(),
                serde_json::json!({"url": link.url, "expires": link.expires}),
            );
        }
        result.meta = Some(meta);
    }
}
