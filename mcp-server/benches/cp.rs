//! `computer-mcp cp` against `docker cp`: a tree of 10,000 small files
//! (100 folders) copied into a computer and back out, each way timed, on
//! Docker, with the ratio ours / Docker's.
//!
//! Ours goes into a Docker computer (read-only root, its home a tmpfs) made
//! by a `serve` of the server under test, through computerd's `tar.*`
//! stream, and back out through the host-safe extraction. `docker cp` cannot
//! write into a read-only root or a tmpfs, so it runs against a plain
//! container of the same image with a writable root: the same engine, the
//! same tree, the engine's own archive path.
//!
//! Run on demand, as root, with the test image and the static daemon:
//!
//!     CMCP_TEST_DOCKER_IMAGE=computer-mcp-test/debian:bookworm \
//!     CMCP_TEST_DOCKER_COMPUTERD=/work/static/computerd \
//!     cargo bench -p computer-mcp --bench cp
//!
//! `CMCP_BENCH_SERVER` runs another computer-mcp (a release build) instead
//! of the one built beside the bench (as the tool_call bench does too); `CMCP_BENCH_RUNS` sets the runs each
//! way (default 3).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

#[path = "support.rs"]
mod support;
use support::{count_from_env, line, server};

const FILES: usize = 10_000;

/// The tree: `FILES` files of 0 to 48 bytes in 100 folders.
fn tree(root: &Path) {
    computer_testkit::small_files(root, FILES);
}

/// The provider's flags every command of the bench gives.
fn provider_args(image: &str, computerd: &str, state: &Path, instance: &str) -> Vec<String> {
    [
        "--provider",
        "docker",
        "--docker-image",
        image,
        "--docker-computerd",
        computerd,
        "--docker-cache-dir",
        &state.join("cache").display().to_string(),
        "--instance",
        instance,
        "--log",
        "error",
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

fn timed(program: &Path, args: &[&str], extra: &[String], state: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(program)
        .args(args)
        .args(extra)
        .env("COMPUTER_MCP_STATE_DIR", state)
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{program:?} {args:?}: {out:?}");
    took
}

fn call(name: &str, args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

fn ratio(name: &str, ours: Duration, theirs: Duration) {
    println!(
        "ratio {name:<46} {:.2}x",
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs = count_from_env("CMCP_BENCH_RUNS", 3);
    let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    let computerd = std::env::var("CMCP_TEST_DOCKER_COMPUTERD")
        .unwrap_or_else(|_| "/work/static/computerd".into());
    let here = tempfile::tempdir()?;
    let src = here.path().join("src");
    tree(&src);
    let src_s = src.display().to_string();
    let instance = format!("bench-cp-{}", std::process::id());
    let flags = provider_args(&image, &computerd, here.path(), &instance);
    let server = server();
    println!("server {}", server.display());

    // Ours: a Docker computer held by a serve of the same flags.
    // The receipts journal in the bench's own folder (a variable, which a
    // server from before --state-dir passes over).
    let state = here.path().join("server");
    let mut cmd = tokio::process::Command::new(&server);
    cmd.arg("serve")
        .args(&flags)
        .env("COMPUTER_MCP_STATE_DIR", &state);
    let client = ().serve(TokioChildProcess::new(cmd)?).await?;
    let r = client
        .call_tool(call("computer_new", serde_json::json!({"name": "bench"})))
        .await?;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let r = client
        .call_tool(call(
            "exec",
            serde_json::json!({"command": "printf %s \"$HOME\"", "computer": "bench"}),
        ))
        .await?;
    let home = r.structured_content.as_ref().unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut ours_in, mut ours_out) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let there = format!("bench:{home}/t{i}");
        let back = here.path().join(format!("ours{i}"));
        ours_in.push(timed(&server, &["cp", &src_s, &there], &flags, &state));
        ours_out.push(timed(
            &server,
            &["cp", &there, &back.display().to_string()],
            &flags,
            &state,
        ));
    }
    client.cancel().await?;

    // Docker's: a plain container of the same image.
    let out = Command::new("docker")
        .args([
            "run",
            "-d",
            "--rm",
            "--network",
            "none",
            &image,
            "sleep",
            "600",
        ])
        .output()?;
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let docker = PathBuf::from("docker");
    let (mut theirs_in, mut theirs_out) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let there = format!("{id}:/root/t{i}");
        let back = here.path().join(format!("theirs{i}"));
        theirs_in.push(timed(&docker, &["cp", &src_s, &there], &[], &state));
        theirs_out.push(timed(
            &docker,
            &["cp", &there, &back.display().to_string()],
            &[],
            &state,
        ));
    }
    let _ = Command::new("docker").args(["rm", "-f", &id]).output();

    println!("a tree of {FILES} files in 100 folders, {runs} runs each way");
    let a = line("computer-mcp cp into a Docker computer", &mut ours_in);
    let b = line("docker cp into a container", &mut theirs_in);
    let c = line("computer-mcp cp out of a Docker computer", &mut ours_out);
    let d = line("docker cp out of a container", &mut theirs_out);
    ratio("in: computer-mcp cp / docker cp", a, b);
    ratio("out: computer-mcp cp / docker cp", c, d);
    Ok(())
}
