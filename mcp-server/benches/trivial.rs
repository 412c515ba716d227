//! The floor a tool call is held to: a trivial MCP server on the same SDK
//! (rmcp over stdio) with one tool, `exec {argv}`, that spawns the program
//! on this machine for every call and answers its exit code and output. No
//! computer, no daemon, no limits, no checks beyond an empty argv: the least
//! any MCP server that runs a program must do. `tool_call` starts its own
//! binary with [`ENV`] set to run it.

use std::process::Stdio;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};

/// Set in the environment of the bench's own binary to make it this server.
pub const ENV: &str = "CMCP_BENCH_TRIVIAL_SERVER";

#[derive(serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct ExecArgs {
    /// The program and its arguments.
    argv: Vec<String>,
}

#[derive(Clone)]
struct Trivial {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Trivial {
    #[tool(description = "Run a program and return its exit code and output")]
    async fn exec(&self, Parameters(a): Parameters<ExecArgs>) -> Result<CallToolResult, ErrorData> {
        let Some((program, args)) = a.argv.split_first() else {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                "argv is empty",
            )]));
        };
        let out = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await;
        Ok(match out {
            Ok(out) => CallToolResult::success(vec![ContentBlock::text(format!(
                "exit code {}\n{}{}",
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("{program}: {e}"))]),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Trivial {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trivial-exec", "0"))
    }
}

/// Serve over stdio until the client closes it.
pub async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let server = Trivial {
        tool_router: Trivial::tool_router(),
    };
    server
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}
