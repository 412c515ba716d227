//! A plain agent loop in Rust on rmcp's client, beside computer-mcp: each
//! tool call the model makes goes to the server unchanged, and the
//! server's answer goes back as the tool result.
//!
//! The model here speaks the Anthropic Messages API's shape (turns whose
//! content has `tool_use` blocks: `computer` with Anthropic's computer-use
//! actions, `bash` with a command). [`Model`] is where a model client goes;
//! [`Replay`] answers with a recorded transcript (CI runs it so):
//!
//!     cargo run -p computer-mcp --example agent_loop -- \
//!         examples/transcripts/anthropic.json computer-mcp --kind desktop
//!
//! To drive a live model, implement [`Model`] over your HTTP client (POST
//! the messages to `/v1/messages` with the tools, return its content).

#![allow(clippy::print_stdout)]

use std::collections::VecDeque;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// Whatever answers the conversation so far with the model's next turn
/// (its content blocks).
trait Model {
    fn next(&mut self, messages: &[Value]) -> Result<Vec<Value>, String>;
}

/// A recorded transcript: its turns' content, in order.
struct Replay(VecDeque<Vec<Value>>);

impl Replay {
    fn open(path: &str) -> Result<Replay, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        let turns = v["turns"]
            .as_array()
            .ok_or_else(|| format!("{path}: no turns"))?;
        Ok(Replay(
            turns
                .iter()
                .map(|t| t["content"].as_array().cloned().unwrap_or_default())
                .collect(),
        ))
    }
}

impl Model for Replay {
    fn next(&mut self, _messages: &[Value]) -> Result<Vec<Value>, String> {
        self.0
            .pop_front()
            .ok_or_else(|| "the transcript has no more turns".into())
    }
}

/// One tool call of the model's as the server's tool and arguments.
fn forwarded(name: &str, input: &Value) -> Result<(&'static str, Value), String> {
    match name {
        "computer" => Ok(("computer", input.clone())),
        "bash" => Ok(("exec", json!({"command": input["command"]}))),
        other => Err(format!("no such tool: {other}")),
    }
}

/// An MCP tool result as the content of a tool_result block.
fn blocks(r: &CallToolResult) -> Vec<Value> {
    r.content
        .iter()
        .filter_map(|c| {
            if let Some(t) = c.as_text() {
                return Some(json!({"type": "text", "text": t.text}));
            }
            let i = c.as_image()?;
            Some(json!({"type": "image", "source": {
                "type": "base64", "media_type": i.mime_type, "data": i.data}}))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [transcript, server, server_args @ ..] = args.as_slice() else {
        return Err("usage: agent_loop TRANSCRIPT SERVER [SERVER ARGS...]".into());
    };
    let mut model = Replay::open(transcript)?;
    let mut cmd = tokio::process::Command::new(server);
    cmd.args(server_args);
    let mcp = ().serve(TokioChildProcess::new(cmd)?).await?;
    let mut messages = vec![json!({"role": "user", "content": "Do the task."})];
    for _ in 0..30 {
        let content = model.next(&messages)?;
        messages.push(json!({"role": "assistant", "content": content}));
        let uses: Vec<&Value> = content.iter().filter(|b| b["type"] == "tool_use").collect();
        if uses.is_empty() {
            for b in content.iter().filter(|b| b["type"] == "text") {
                println!("{}", b["text"].as_str().unwrap_or_default());
            }
            mcp.cancel().await?;
            return Ok(());
        }
        let mut results = Vec::new();
        for u in uses {
            let name = u["name"].as_str().unwrap_or_default();
            let (tool, arguments) = forwarded(name, &u["input"])?;
            let mut call = CallToolRequestParams::new(tool);
            if let Value::Object(a) = arguments {
                call = call.with_arguments(a);
            }
            let r = mcp.call_tool(call).await?;
            let failed = r.is_error == Some(true);
            println!(
                "{name} {} -> {}",
                u["input"],
                if failed { "error" } else { "ok" }
            );
            results.push(json!({"type": "tool_result", "tool_use_id": u["id"],
                "content": blocks(&r), "is_error": failed}));
        }
        messages.push(json!({"role": "user", "content": results}));
    }
    Err("no answer in 30 turns".into())
}
