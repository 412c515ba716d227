//! Tool-call latency through the whole stack: an rmcp client → stdio →
//! computer-mcp → computerd (in a local computer) → the program, and back.
//! Beside it, the floor (the same client against a trivial rmcp server that
//! spawns the program per call, with no computer: trivial.rs), the
//! daemon-only figure (exec.run straight to the same computer's socket), a
//! cold session's first call (computer creation included), and
//! spawn-to-initialized of the server.
//!
//! Run on demand (never part of `cargo test`), as root like the tests:
//!
//!     cargo bench -p computer-mcp --bench tool_call
//!
//! The warm calls: `argv: [true]`, `command: "true"` (a bash builtin
//! whose twin computerd runs in its place), `uname -s` as argv and as a
//! command (a plain command, which computerd starts without bash), and
//! `command: "cd /"`, a line only bash can run (so what bash's own start
//! costs).
//!
//! rmcp's client puts a progress token on every request, and the exec
//! tool follows a program it was given a token for (process.start, its
//! reads and its wait: progress once a second). The Python and TypeScript
//! SDKs send a token only with a progress callback, and a call without
//! one is a single exec.run: a bare line client measures that way too,
//! against both servers in turn.
//!
//! `CMCP_BENCH_CALLS` sets the warm calls (default 500); `COMPUTERD_BIN`
//! the daemon (default: the one beside the server, else the server itself).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use computerd::client::DaemonClient;
use computerd::protocol::ExecParams;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

#[path = "support.rs"]
mod support;
#[path = "trivial.rs"]
mod trivial;
use support::{computerd, count_from_env, line, ms, server_cmd};

fn exec(args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new("exec").with_arguments(args.as_object().unwrap().clone())
}

fn exec_true() -> CallToolRequestParams {
    exec(serde_json::json!({"argv": ["true"]}))
}

/// The warm calls, each measured in turn: (name, call).
fn warm_calls() -> [(&'static str, CallToolRequestParams); 5] {
    [
        (
            "warm exec {argv: [true]} through the whole stack",
            exec_true(),
        ),
        (
            "warm exec {command: \"true\"} (run as /usr/bin/true)",
            exec(serde_json::json!({"command": "true"})),
        ),
        (
            "warm exec {argv: [uname, -s]}",
            exec(serde_json::json!({"argv": ["uname", "-s"]})),
        ),
        (
            "warm exec {command: \"uname -s\"} (a plain command)",
            exec(serde_json::json!({"command": "uname -s"})),
        ),
        (
            "warm exec {command: \"cd /\"} (bash itself runs)",
            exec(serde_json::json!({"command": "cd /"})),
        ),
    ]
}

/// A bare MCP client on a server's stdio, one JSON-RPC line a message,
/// whose calls carry no progress token (as the Python and TypeScript SDKs
/// send them without a progress callback).
struct Bare {
    _child: tokio::process::Child,
    to: tokio::process::ChildStdin,
    from: tokio::io::BufReader<tokio::process::ChildStdout>,
    id: u64,
    line: String,
}

impl Bare {
    async fn start(mut cmd: tokio::process::Command) -> Result<Bare, Box<dyn std::error::Error>> {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let to = child.stdin.take().expect("stdin");
        let from = tokio::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut b = Bare {
            _child: child,
            to,
            from,
            id: 0,
            line: String::new(),
        };
        b.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bare", "version": "0"}
            }),
        )
        .await?;
        b.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(b)
    }

    async fn send(&mut self, msg: serde_json::Value) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let mut bytes = serde_json::to_vec(&msg)?;
        bytes.push(b'\n');
        self.to.write_all(&bytes).await
    }

    /// Send a request and read up to its answer.
    async fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
        use tokio::io::AsyncBufReadExt;
        self.id += 1;
        let id = self.id;
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await?;
        loop {
            self.line.clear();
            if self.from.read_line(&mut self.line).await? == 0 {
                return Err("the server closed its stdout".into());
            }
            let v: serde_json::Value = serde_json::from_str(&self.line)?;
            if v["id"] == id {
                return match v.get("result") {
                    Some(r) if r["isError"] != true => Ok(r.clone()),
                    _ => Err(format!("{method} failed: {v}").into()),
                };
            }
        }
    }

    /// One exec call's time.
    async fn call(
        &mut self,
        args: &serde_json::Value,
    ) -> Result<Duration, Box<dyn std::error::Error>> {
        let t = Instant::now();
        self.request(
            "tools/call",
            serde_json::json!({"name": "exec", "arguments": args}),
        )
        .await?;
        Ok(t.elapsed())
    }
}

fn call(name: &str, args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

/// computer_new → the first exec on it, and computer_release as the caller
/// sees it (the provider's release runs on after the answer), in one
/// session, with their ratio.
async fn release_against_create(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (mut made, mut gone) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let name = format!("bench-{i}");
        let t = Instant::now();
        let r = client
            .call_tool(call("computer_new", serde_json::json!({"name": name})))
            .await?;
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let r = client
            .call_tool(exec(
                serde_json::json!({"argv": ["true"], "computer": name}),
            ))
            .await?;
        made.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let t = Instant::now();
        let r = client
            .call_tool(call(
                "computer_release",
                serde_json::json!({"computer": name}),
            ))
            .await?;
        gone.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let made_med = line("computer_new → first exec on it", &mut made);
    let gone_med = line("computer_release, as the caller sees it", &mut gone);
    println!(
        "ratio computer_release / computer_new → first exec   {:.2}x   (target: at most 1x)",
        gone_med.as_secs_f64() / made_med.as_secs_f64()
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls = count_from_env("CMCP_BENCH_CALLS", 500);
    if std::env::var_os(trivial::ENV).is_some() {
        return trivial::serve().await;
    }
    let state = tempfile::tempdir()?;
    println!(
        "computer-mcp tool-call bench (computerd: {})",
        computerd().display()
    );

    // Spawn to initialized: process start, MCP initialize and initialized.
    let mut spawn = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let client = ().serve(TokioChildProcess::new(server_cmd(state.path(), &[]))?).await?;
        spawn.push(t.elapsed());
        client.cancel().await?;
    }
    let spawn_med = line("spawn to initialized", &mut spawn);

    // A cold session: the first exec makes the computer.
    let mut cold = Vec::new();
    for _ in 0..10 {
        let client = ().serve(TokioChildProcess::new(server_cmd(state.path(), &[]))?).await?;
        let t = Instant::now();
        let r = client.call_tool(exec_true()).await?;
        cold.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
        client.cancel().await?;
    }
    let cold_med = line("cold session: first exec `true` (computer made)", &mut cold);

    // Spawn → first result, ours (a sandbox made on the first call) and
    // the trivial server's, in turn.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let mut floor_cmd = tokio::process::Command::new(std::env::current_exe()?);
        floor_cmd.env(trivial::ENV, "1");
        for (cmd, times) in [
            (server_cmd(state.path(), &[]), &mut ours),
            (floor_cmd, &mut theirs),
        ] {
            let t = Instant::now();
            let client = ().serve(TokioChildProcess::new(cmd)?).await?;
            let r = client.call_tool(exec_true()).await?;
            times.push(t.elapsed());
            assert_ne!(r.is_error, Some(true), "{r:?}");
            client.cancel().await?;
        }
    }
    let theirs_med = line("spawn → first result: the trivial server", &mut theirs);
    let ours_med = line("spawn → first result: a fresh sandbox", &mut ours);
    println!(
        "ratio spawn → first result / trivial server's        {:.2}x   (target: at most 1.2x)",
        ours_med.as_secs_f64() / theirs_med.as_secs_f64()
    );

    // Warm: one session, many calls, each beside the same call to the
    // trivial server (the floor), in turn, so both see the same machine.
    let client = ().serve(TokioChildProcess::new(server_cmd(state.path(), &[]))?).await?;
    let mut floor_cmd = tokio::process::Command::new(std::env::current_exe()?);
    floor_cmd.env(trivial::ENV, "1");
    let floor = ().serve(TokioChildProcess::new(floor_cmd)?).await?;
    let calls_in_turn = warm_calls();
    for _ in 0..20 {
        for (_, call) in &calls_in_turn {
            client.call_tool(call.clone()).await?;
        }
        floor.call_tool(exec_true()).await?;
    }
    let mut warm: Vec<Vec<Duration>> = vec![Vec::with_capacity(calls); calls_in_turn.len()];
    let mut trivial = Vec::with_capacity(calls);
    for _ in 0..calls {
        for ((_, call), times) in calls_in_turn.iter().zip(warm.iter_mut()) {
            let t = Instant::now();
            let r = client.call_tool(call.clone()).await?;
            times.push(t.elapsed());
            assert_ne!(r.is_error, Some(true), "{r:?}");
        }
        let t = Instant::now();
        let r = floor.call_tool(exec_true()).await?;
        trivial.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    floor.cancel().await?;
    let trivial_med = line(
        "floor: a trivial rmcp server spawning `true` per call",
        &mut trivial,
    );
    let meds: Vec<Duration> = calls_in_turn
        .iter()
        .zip(warm.iter_mut())
        .map(|((name, _), times)| line(name, times))
        .collect();
    let (warm_med, builtin_med, uname_med, plain_med, bash_med) =
        (meds[0], meds[1], meds[2], meds[3], meds[4]);
    println!(
        "ratio exec {{argv}} / trivial server (median)         {:.2}x   (target: at most 1.2x)",
        warm_med.as_secs_f64() / trivial_med.as_secs_f64()
    );
    println!(
        "ratio exec {{command}} / exec {{argv}}, uname (median)  {:.2}x   (target: at most 1.2x)",
        plain_med.as_secs_f64() / uname_med.as_secs_f64()
    );
    println!(
        "ratio exec {{command: true}} / exec {{argv: [true]}}     {:.2}x   (target: at most 1.2x)",
        builtin_med.as_secs_f64() / warm_med.as_secs_f64()
    );
    println!(
        "ratio exec {{command: \"cd /\"}} / exec {{argv: [true]}}   {:.2}x   (bash's own start)",
        bash_med.as_secs_f64() / warm_med.as_secs_f64()
    );
    // The warm session's computer, found before release_against_create
    // makes others: a released one keeps its socket while it shuts down,
    // and a daemon-only call there is refused ("the computer is shutting
    // down").
    let sock = std::fs::read_dir(state.path().join("computers"))?
        .flatten()
        .map(|e| e.path().join("run/computerd.sock"))
        .find(|p| p.exists())
        .expect("the warm session's computer");
    release_against_create(&client).await?;

    // The daemon alone, on the same computer's socket, as the server
    // connects (read-only registration, see computerd::quiet).
    let daemon = DaemonClient::new(computerd::quiet::QuietStream::connect(&sock).await?);
    let params = ExecParams {
        argv: vec!["true".into()],
        ..Default::default()
    };
    for _ in 0..20 {
        daemon.call(&params).await?;
    }
    let mut direct = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        daemon.call(&params).await?;
        direct.push(t.elapsed());
    }
    let direct_med = line(
        "daemon only: exec.run `true` on the same socket",
        &mut direct,
    );
    daemon.close();
    client.cancel().await?;

    // Without a progress token, in turn with the trivial server.
    let mut ours = Bare::start(server_cmd(state.path(), &[])).await?;
    let mut floor_cmd = tokio::process::Command::new(std::env::current_exe()?);
    floor_cmd.env(trivial::ENV, "1");
    let mut bare_floor = Bare::start(floor_cmd).await?;
    let argv_true = serde_json::json!({"argv": ["true"]});
    for _ in 0..20 {
        ours.call(&argv_true).await?;
        bare_floor.call(&argv_true).await?;
    }
    let (mut a, mut b) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for _ in 0..calls {
        a.push(ours.call(&argv_true).await?);
        b.push(bare_floor.call(&argv_true).await?);
    }
    let bare_floor_med = line("no progress token: the trivial server", &mut b);
    let bare_med = line("no progress token: warm exec {argv: [true]}", &mut a);
    println!(
        "ratio exec {{argv}} / trivial server, no token       {:.2}x   (target: at most 1.2x)",
        bare_med.as_secs_f64() / bare_floor_med.as_secs_f64()
    );

    println!(
        "MCP stack overhead over the daemon (median)          {:>8.3} ms",
        ms(warm_med.saturating_sub(direct_med))
    );
    println!(
        "targets: warm exec < 3 ms ({}), cold first call < 100 ms ({}), spawn-to-initialized < 50 ms ({})",
        if warm_med < Duration::from_millis(3) {
            "met"
        } else {
            "missed"
        },
        if cold_med < Duration::from_millis(100) {
            "met"
        } else {
            "missed"
        },
        if spawn_med < Duration::from_millis(50) {
            "met"
        } else {
            "missed"
        },
    );
    Ok(())
}
