//! The agent-loop examples (`examples/`), each run as a user runs it with
//! the model replaced by its recorded transcript: the loop forwards every
//! tool call to a real desktop server and the task's file is on the host
//! afterwards (written through `--share`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::*;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A Python with the examples' SDKs (`anthropic`, `openai`, `mcp`):
/// `CMCP_EXAMPLES_PYTHON`, as `.ci/run` makes it.
fn python() -> Option<PathBuf> {
    let found = std::env::var_os("CMCP_EXAMPLES_PYTHON").map(PathBuf::from);
    let works = found.as_ref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", "import anthropic, openai, mcp"])
            .status()
            .is_ok_and(|s| s.success())
    });
    computer_testkit::need(
        "examples",
        works,
        "no Python with anthropic, openai and mcp in CMCP_EXAMPLES_PYTHON (.ci/run makes one)",
    )
    .then_some(found?)
}

/// A desktop server's command line over `server`'s state, sharing `share`.
fn desktop(server: &Server, share: &Path) -> Vec<String> {
    let mut cmd = vec![SERVER.to_string(), "--kind".into(), "desktop".into()];
    cmd.extend(server.args());
    cmd.extend(["--share".into(), share.display().to_string()]);
    cmd
}

/// Run `program args… -- server…` and give the file the task writes.
fn run(program: &Path, args: &[&str], server: &Server) -> String {
    let share = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        share.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = Command::new(program)
        .args(args)
        .args(desktop(server, share.path()))
        .current_dir(root())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{program:?}: {said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("Done: /workspace/agent-loop.txt"), "{said}");
    assert!(!said.contains("-> error"), "{said}");
    std::fs::read_to_string(share.path().join("agent-loop.txt")).unwrap_or_default()
}

fn ready() -> Option<Server> {
    if !computer_testkit::need_xvfb() {
        return None;
    }
    Server::local()
}

/// A Python example with its vendor's transcript: the file it writes.
fn python_example(vendor: &str) -> Option<String> {
    let python = python()?;
    let server = ready()?;
    let script = format!("examples/{vendor}_computer_use.py");
    let transcript = format!("examples/transcripts/{vendor}.json");
    let task = "Write a line to /workspace/agent-loop.txt";
    let args = [
        script.as_str(),
        "--replay",
        &transcript,
        "--task",
        task,
        "--",
    ];
    Some(run(&python, &args, &server))
}

#[test]
fn the_anthropic_loop_forwards_claudes_calls_and_the_file_is_written() {
    let file = or_skip!(python_example("anthropic"));
    assert_eq!(file, "written by a Claude transcript\n");
}

#[test]
fn the_openai_loop_forwards_its_actions_and_commands_and_the_file_is_written() {
    let file = or_skip!(python_example("openai"));
    assert_eq!(file, "written by an OpenAI transcript\n");
}

#[test]
fn the_rust_loop_on_rmcps_client_forwards_the_calls_and_the_file_is_written() {
    // Built with the tests (cargo test builds a package's examples).
    let program = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/agent_loop");
    assert!(program.is_file(), "{program:?} was not built");
    let server = or_skip!(ready());
    let file = run(&program, &["examples/transcripts/anthropic.json"], &server);
    assert_eq!(file, "written by a Claude transcript\n");
}
