//! computer-mcp's tool families: for each kind of computer, the MCP tools a
//! model gets (name, input and output schema from types, a description
//! written for a model, annotations) and the handlers that turn a tool call
//! into protocol calls on a [`ComputerClient`] and the reply into MCP content.
//! No transport, no provider, no session: the server gives each call a
//! [`ToolContext`].
//!
//! - `registry`: [`registry()`], the table of families by setting kind;
//!   [`Family`] (`list`, `names`, `offers`, `call`), [`ToolDef`] (one tool:
//!   name, what it [`Needs`], schema builder, handler), [`Offer`] (what a
//!   computer offers), [`offered`] (the one group comparison).
//! - [`sandbox`]: the sandbox family (`exec`, files, background processes).
//! - [`desktop`]: the desktop family (`screenshot`, `computer`, `input`, and
//!   the sandbox's tools).
//! - [`browser`]: the browser family (page tools over CDP: navigate,
//!   snapshot with refs, act by ref, screenshot, tabs, text, console,
//!   network, eval; and the sandbox's tools where the computer has them).
//! - [`common`]: the tools every family lists (`computer_info`,
//!   `computer_extend`).
//! - [`fleet`]: computers a model names: the `computer` argument every
//!   family tool takes ([`fleet::Which`]), and `computer_new`,
//!   `computer_list` and `computer_release` over the server's [`fleet::Fleet`].
//! - [`skills`]: each family's `SKILL.md` (from `skills/`), embedded,
//!   parsed, and its example calls.
//! - `state`: [`ComputerState`], what the tools remember about one computer
//!   (one slot per family's memo), made by the server per computer.
//! - `define`: what a tool definition is made of: `make_tool` (schemas from
//!   types), argument parsing that names the field, annotations, results.
//! - `budget`: what keeps a result inside a model's context: the middle cut
//!   and the file in the computer that keeps the whole output.
//! - [`ports`]: preview ports (`port_open`, `port_list`, `port_close`,
//!   listed as one `port`) over the server's [`ports::PortHost`].
//! - [`Together`]: members of a family listed as one tool (`process`).
//! - `text`: line numbering by offset and limit, image and binary detection.
//! - `error`: [`ToolError`], and its one mapping to an `isError` result.

pub mod browser;
mod budget;
pub mod common;
mod define;
pub mod desktop;
mod error;
pub mod fleet;
pub mod phone;
pub mod ports;
mod registry;
pub mod sandbox;
pub mod skills;
mod state;
mod text;
mod together;

use std::sync::Arc;

use computerd::client::ComputerClient;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use error::{Result, ToolError};
pub use registry::{Family, Handler, Needs, Offer, Registry, ToolDef, ToolSet, offered, registry};
pub use state::ComputerState;
pub use together::{Members, Together};

/// What the server knows about the computer, from the provider and hello.
/// `computer_info` shows it as it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct ComputerFacts {
    /// The provider that made the computer (`local`, `docker`, ...).
    pub provider: String,
    /// The provider's id for the computer.
    pub id: String,
    /// The machine kind: `linux`.
    pub kind: String,
    /// The operating system: `linux`.
    pub os: String,
    /// `amd64` or `arm64`.
    pub arch: String,
    /// The user programs run as: `uid:gid` or a name.
    pub user: String,
    /// The work directory: HOME, an absolute path, the default cwd.
    pub work_dir: String,
    /// The network as read back, e.g. `none (only lo)`.
    pub network: String,
    /// When the computer and everything in it ends (RFC 3339), if it has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// How the computer is isolated from its host.
    pub isolation: String,
    /// Anything else the model should know.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What it has used so far (computer_info reads it at the call). Left
    /// out of the output schema, which allows more fields: the sandbox's
    /// whole listing is held to 12 KB, and the description names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub receipt: Option<Receipt>,
    /// The preview ports open now (computer_info reads them at the call).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub ports: Vec<ports::OpenPort>,
}

/// What a computer has used so far: the figures of its receipt.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct Receipt {
    /// Seconds since it was made.
    pub wall_seconds: u64,
    /// CPU seconds its programs have used, user and system, where the
    /// provider can read them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// The most memory it has held at once, in bytes, where the provider
    /// can read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// Tool calls on it through this server (this one included).
    pub tool_calls: u64,
    /// File and archive bytes written into it (write_file, upload,
    /// `computer-mcp cp`).
    pub bytes_pushed: u64,
    /// File and archive bytes read out of it.
    pub bytes_pulled: u64,
    /// For a vendor's computer: its wall time at the vendor's published
    /// price for its size, in US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
    /// What the estimate rests on: the price and where it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
}

/// Reads the computer's receipt now.
pub type ReceiptFn = Arc<dyn Fn() -> BoxFuture<'static, Receipt> + Send + Sync>;

/// Limits the server may configure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSettings {
    /// The most text one result carries (stdout and stderr together for exec).
    pub output_budget_bytes: usize,
    /// exec's `timeout_ms` when none is given.
    pub exec_default_timeout_ms: u64,
    /// exec's `timeout_ms` at most.
    pub exec_max_timeout_ms: u64,
    /// Programs may reach outside the computer (its network is not
    /// `none`): the `openWorldHint` of the tools that run programs.
    pub open_world: bool,
    /// A screenshot fits this (width, height), either way round
    /// (`--screenshot-max`).
    pub screenshot_max: (u32, u32),
    /// List each tool's output schema (`--output-schemas`). Off, a result
    /// still carries its structured content; the schema only lets a client
    /// check it, and costs every model context it does not read.
    pub output_schemas: bool,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            output_budget_bytes: 24 * 1024,
            exec_default_timeout_ms: 120_000,
            exec_max_timeout_ms: 600_000,
            open_world: false,
            screenshot_max: (1280, 800),
            output_schemas: false,
        }
    }
}

/// One progress report of a long call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Milliseconds since the call began.
    pub elapsed_ms: u64,
    /// `"12s: <last line of output>"`.
    pub message: String,
}

/// Called about once a second during a long exec, when the MCP client asked
/// for progress.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Moves the computer's deadline to `ttl` milliseconds from now; gives the
/// new deadline or the refusal in words.
pub type ExtendFn =
    Arc<dyn Fn(u64) -> BoxFuture<'static, std::result::Result<Extended, String>> + Send + Sync>;

/// A deadline moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extended {
    /// The deadline now, RFC 3339.
    pub deadline: String,
    /// Why it is earlier than asked (the server's lifetime bound), when it is.
    pub capped: Option<String>,
}

/// Everything a tool call gets from the server.
#[derive(Clone)]
pub struct ToolContext {
    /// The computer the call runs on, already made.
    pub client: Arc<dyn ComputerClient>,
    /// What computer_info shows; `work_dir` also names the work directory
    /// in refusals of relative paths.
    pub facts: ComputerFacts,
    /// The limits the tools apply.
    pub settings: ToolSettings,
    /// Some when the MCP client asked for progress.
    pub progress: Option<ProgressFn>,
    /// Some when the provider can extend the deadline.
    pub extend: Option<ExtendFn>,
    /// Some when the server keeps the computer's receipt.
    pub receipt: Option<ReceiptFn>,
    /// Some when the server gives this computer's ports URLs.
    pub ports: Option<Arc<dyn ports::PortHost>>,
    /// What the tools remember about this computer: one per computer, the
    /// same `Arc` for every call on it.
    pub state: Arc<ComputerState>,
    /// Fired when the MCP client cancels the call.
    pub cancel: CancellationToken,
    /// The base of this computer's MCP resources (`computer://<handle>`),
    /// when the server serves them: a saved output is then linked as
    /// `<base>/file<path>`, which `resources/read` reads in pages.
    pub resources: Option<String>,
    /// Who calls: the MCP session, or a stateless caller's principal.
    /// A browser's tabs are each one caller's ([`browser::Pages`]); empty
    /// for the one caller of a test.
    pub caller: String,
}

impl ToolContext {
    /// A context for calls on `client` with nothing else set: default facts
    /// and settings, no progress, no extend, a new state, never cancelled,
    /// no resources. The server sets what it knows; tests use it as it is.
    pub fn new(client: Arc<dyn ComputerClient>) -> ToolContext {
        ToolContext {
            client,
            facts: ComputerFacts::default(),
            settings: ToolSettings::default(),
            progress: None,
            extend: None,
            receipt: None,
            ports: None,
            state: ComputerState::new(),
            cancel: CancellationToken::new(),
            resources: None,
            caller: String::new(),
        }
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("facts", &self.facts)
            .field("settings", &self.settings)
            .field("progress", &self.progress.is_some())
            .field("extend", &self.extend.is_some())
            .finish_non_exhaustive()
    }
}
