//! `computer-mcp`: an MCP server that gives a model a computer.
//!
//! - [`config`]: flags, `COMPUTER_MCP_*` variables and a TOML file, each
//!   option defined once; a provider's own options come from its settings
//!   in the registry (`--<id>-<key>`, `[providers.<id>]`); `--kind` takes
//!   the tool registry's kinds.
//! - [`app`]: what the server's sessions share ([`app::App`]): the
//!   provider, the configuration, and the table of every computer the
//!   server holds (`app/`: an entry, a caller, a lazily made slot, the
//!   admission bounds, lookups, release and the idle reaper).
//! - [`session`]: MCP sessions (stdio and HTTP), each with its lazily
//!   made default computer.
//! - [`server`]: the MCP handler (tools from the registry by the groups a
//!   computer declares, progress, cancellation).
//! - [`resources`]: prompts and resources (skills, a computer's facts, its
//!   files in pages), chosen by the groups a computer declares.
//! - [`http`]: streamable HTTP with bearer auth and Host/Origin checks.
//! - [`stdio`], [`lines`]: the stdio transport's ends and its messages.
//! - [`logging`]: logs on stderr through a bounded queue, session ids
//!   redacted.
//! - [`doctor`], [`conformance`]: the `doctor` and `conformance`
//!   subcommands, each naming no provider (the registry finds it).
//! - [`memory`]: freed memory given back after a burst.
//! - [`cp`], [`shares`]: `computer-mcp cp`, and `--share` on a provider
//!   that copies shares (in at creation, back at release and on
//!   `cp --sync`) rather than binding them.
//!
//! On Linux the binary is also `computerd` when called through the word
//! (`computer-mcp computerd init …`) or as argv[0] `computerd`, so a build of
//! this crate alone can make local computers; a `computerd` beside it
//! (smaller, static) is preferred.

mod app;
mod config;
mod conformance;
mod cp;
mod doctor;
#[cfg(test)]
mod fake_tests;
mod http;
mod lines;
mod logging;
mod memory;
mod ports;
#[cfg(test)]
mod readme_tests;
mod receipts;
mod resources;
mod server;
mod session;
mod shares;
mod skills_ext;
mod stdio;
mod view;

use std::io::Write;
use std::sync::Arc;

use clap::ArgMatches;
use computer_providers::{Provider, Release, Sources, provider_for};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use config::{ArgsError, Command, Config, Parsed};

fn main() {
    if let Some(code) = computerd_mode() {
        std::process::exit(code);
    }
    forget_empty_variables();
    let parsed = match config::parse_from(std::env::args_os()) {
        Ok(p) => p,
        Err(ArgsError::Clap(e)) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
        Err(ArgsError::Words(w)) => {
            eprintln!("computer-mcp: {w}");
            std::process::exit(2);
        }
    };
    std::process::exit(run(parsed));
}

/// An empty `COMPUTER_MCP_*` variable is as if it were not set. A client
/// that fills a launch's variables from its settings passes "" for one left
/// empty (Claude Desktop's extension does, for the Docker image of a local
/// server), and an option of another provider is refused when it is given.
fn forget_empty_variables() {
    for (name, value) in std::env::vars_os() {
        if value.is_empty()
            && name
                .to_str()
                .is_some_and(|n| n.starts_with("COMPUTER_MCP_"))
        {
            // SAFETY: called first thing in main, before any thread starts
            // (no runtime, no logger yet), so no one reads the environment
            // while it changes.
            unsafe { std::env::remove_var(&name) };
        }
    }
}

/// Run as computerd when called as computerd: `computer-mcp computerd …`,
/// or with argv[0] `computerd` (how computerd starts its own guards and
/// how the sandbox starts init). The daemon is Linux's only.
#[cfg(target_os = "linux")]
fn computerd_mode() -> Option<i32> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    computerd::launch::daemon_args(&argv).map(computerd::daemon::cli::run)
}

#[cfg(not(target_os = "linux"))]
fn computerd_mode() -> Option<i32> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    computerd::launch::daemon_args(&argv).map(|_| {
        eprintln!(
            "computer-mcp: computerd runs inside Linux computers only; this platform runs the server"
        );
        1
    })
}

fn run(parsed: Parsed) -> i32 {
    let config = match Config::resolve(&parsed) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("computer-mcp: {e}");
            return 2;
        }
    };
    let logs = match logging::init(&config.log) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("computer-mcp: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("computer-mcp: could not start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async move {
        let conformance = matches!(parsed.cli.command, Some(Command::Conformance(_)));
        let provider = match make_provider(&config, &parsed.matches, !conformance) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("computer-mcp: {e}");
                return 2;
            }
        };
        let mut config = config;
        fit_default_lifetime(
            &mut config,
            &parsed.matches,
            provider.id(),
            provider.capabilities().max_lifetime_ms,
        );
        // What every computer will be made from is checked now (sizes,
        // shares, lifetime), so a bad option stops the server in words
        // instead of failing its first tool call. `sweep` makes none, and
        // `conformance` checks its own specs.
        if !matches!(
            parsed.cli.command,
            Some(
                Command::Sweep(_)
                    | Command::Computers(_)
                    | Command::Cp(_)
                    | Command::Receipts(_)
                    | Command::Ports(_)
                    | Command::Doctor
                    | Command::Conformance(_)
            )
        ) {
            let checked = config.spec().and_then(|spec| {
                let seen = shares::for_provider(
                    &spec,
                    provider.capabilities().shares,
                    config.server_state_dir().as_deref(),
                )?;
                provider.check(&seen).map_err(|e| e.message)
            });
            if let Err(e) = checked {
                eprintln!("computer-mcp: {e}");
                return 2;
            }
        }
        let result = match parsed.cli.command {
            None | Some(Command::Serve(_)) => {
                memory::trim_when_idle();
                serve(provider, config).await
            }
            Some(Command::Exec(args)) => exec(provider, &config, args).await,
            Some(Command::Sweep(a)) => sweep(provider, a).await,
            Some(Command::Computers(c)) => manage(provider, &config, c).await,
            Some(Command::Receipts(a)) => receipts_cmd(provider, &config, a).await,
            Some(Command::Cp(a)) => match cp::run(provider, a, &receipts::Book::new(&config)).await
            {
                Ok(words) => {
                    eprintln!("computer-mcp: {words}");
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("computer-mcp: {e}");
                    Ok(1)
                }
            },
            Some(Command::Ports(c)) => ports::cli(provider, c).await,
            Some(Command::Doctor) => {
                let (text, works) = doctor::run(provider, &config).await;
                print_out(&text);
                Ok(if works { 0 } else { 1 })
            }
            Some(Command::Conformance(mut args)) => {
                // `--kind` is the root's (every command takes it): given,
                // it names the kind whose cases run.
                if computer_providers::settings::given(&parsed.matches, "kind").is_some() {
                    args.kind = Some(config.kind.clone());
                }
                conformance::run(provider, &config, args).await
            }
        };
        match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("computer-mcp: {e:#}");
                1
            }
        }
    });
    // Dropping the runtime would wait for its blocking threads, and the
    // stdio transport's reader sits in a read of stdin that only the
    // client's EOF ends: on a signal the server must not wait for that.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    // Whatever was logged last reaches stderr if stderr takes it soon.
    logs.flush(std::time::Duration::from_millis(200));
    code
}

fn make_provider(
    config: &Config,
    matches: &ArgMatches,
    check_kind: bool,
) -> Result<Arc<dyn Provider>, String> {
    let sources = Sources {
        matches,
        tables: Some(&config.providers),
    };
    let mut host = config::host_defaults();
    host.kind = config.setting_kind();
    host.screen = config.screen;
    // The cloud vendors' and Kubernetes' snapshots, kept by this server.
    host.snapshot_dir = config.server_state_dir().map(|d| d.join("snapshots"));
    let provider: Arc<dyn Provider> = provider_for(&config.provider, &sources, &host)
        .map(Arc::from)
        .map_err(|e| e.message)?;
    // A kind the provider cannot make is refused before any client comes.
    if !check_kind {
        return Ok(provider);
    }
    let caps = provider.capabilities();
    let kind = config.setting_kind();
    let why = computerd::protocol::serving_refusals(kind, caps.kind, &caps.groups);
    if !why.is_empty() {
        return Err(format!(
            "--kind {}: the {} provider cannot make one here ({})",
            kind.as_str(),
            provider.id(),
            why.join("; ")
        ));
    }
    Ok(provider)
}

/// A lifetime left at its default (no flag, variable or file key) that is
/// over what the provider allows becomes the provider's most, said once:
/// a new user's `--provider e2b` works without knowing E2B's cap. A
/// lifetime the user gave is checked as given, and refused in words.
fn fit_default_lifetime(config: &mut Config, matches: &ArgMatches, provider: &str, most_ms: u64) {
    let default = config::DEFAULT_LIFETIME;
    if computer_providers::settings::given(matches, "lifetime").is_some()
        || config.lifetime != default
        || default.as_millis() as u64 <= most_ms
    {
        return;
    }
    config.lifetime = std::time::Duration::from_millis(most_ms);
    tracing::info!(
        "the default lifetime, {} h, is over what the {provider} provider allows: computers live {} here (set --lifetime to choose less)",
        default.as_secs() / 3600,
        computer_providers::types::human_ms(most_ms)
    );
}

/// Resolve on SIGTERM or SIGINT.
async fn stopped() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

async fn serve(provider: Arc<dyn Provider>, config: Config) -> anyhow::Result<i32> {
    let http = config.http.clone();
    let app = app::App::new(provider, config);
    let reaper = CancellationToken::new();
    app.start_reaper(reaper.clone());
    app.start_journal(reaper.clone());
    let _stop_reaper = reaper.drop_guard();
    match http {
        Some(http) => {
            let stop = CancellationToken::new();
            let stopper = stop.clone();
            tokio::spawn(async move {
                stopped().await;
                stopper.cancel();
            });
            http::serve(Arc::clone(&app), &http, stop).await?;
            app.release_all().await;
            Ok(0)
        }
        None => {
            let viewer_stop = CancellationToken::new();
            let _stop_viewer = viewer_stop.clone().drop_guard();
            if let Some(addr) = app.config.viewer {
                view::serve_alone(Arc::clone(&app), addr, viewer_stop).await?;
            }
            let session = app
                .new_session(&app.stdio_principal)
                .map_err(anyhow::Error::msg)?;
            let handler = server::ComputerMcp::stdio(Arc::clone(&session));
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                eprintln!(
                    "computer-mcp: waiting for an MCP client on stdin (this is a stdio MCP server: plug it into a client, as the README's \"Plug it in\" shows; Ctrl-D or Ctrl-C ends it)"
                );
            }
            let (transport, _restore) = stdio::transport();
            let running = match handler.serve(lines::Lines::new(transport)).await {
                Ok(r) => r,
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                    // Nobody spoke: not an error.
                    eprintln!(
                        "computer-mcp: stdin closed before any MCP message; nothing to serve"
                    );
                    app.release_all().await;
                    return Ok(0);
                }
                Err(e) => return Err(e.into()),
            };
            tokio::select! {
                r = running.waiting() => {
                    if let Err(e) = r {
                        tracing::warn!("the MCP session ended with an error: {e}");
                    }
                }
                _ = stopped() => {}
            }
            // Ends the session, waits for a creation still under way, and
            // releases every computer made.
            app.release_all().await;
            Ok(0)
        }
    }
}

async fn exec(
    provider: Arc<dyn Provider>,
    config: &Config,
    args: config::ExecArgs,
) -> anyhow::Result<i32> {
    let timeout = match &args.timeout {
        Some(t) => config::parse_duration("--timeout", t).map_err(anyhow::Error::msg)?,
        None => config.exec_timeout,
    };
    let spec = config.spec().map_err(anyhow::Error::msg)?;
    let cancel = CancellationToken::new();
    let created = provider
        .create(&spec, &cancel)
        .await
        .map_err(|e| anyhow::anyhow!("making a computer: {}", e.message))?;
    let outcome = async {
        let conn = provider
            .connect(&created.computer, &cancel)
            .await
            .map_err(|e| anyhow::anyhow!("connecting: {}", e.message))?;
        let params = ExecParams {
            argv: args.argv.clone(),
            timeout_ms: Some(timeout.as_millis() as u64),
            ..Default::default()
        };
        let r = tokio::select! {
            r = conn.client.call_typed(&params) => r.map_err(|e| anyhow::anyhow!("{e}"))?,
            _ = stopped() => anyhow::bail!("interrupted"),
        };
        conn.client.close();
        Ok::<_, anyhow::Error>(r)
    }
    .await;
    let released = provider
        .release(&created.computer, Release::Delete, &cancel)
        .await;
    let r = outcome?;
    std::io::stdout().write_all(&r.stdout)?;
    std::io::stdout().flush()?;
    std::io::stderr().write_all(&r.stderr)?;
    if let Err(e) = released {
        eprintln!("computer-mcp: releasing the computer failed: {}", e.message);
    }
    if r.timed_out {
        eprintln!("computer-mcp: timed out after {} s", timeout.as_secs());
    }
    if r.truncated {
        eprintln!("computer-mcp: the output was cut at 360 KiB a stream");
    }
    Ok(match (r.exit_code, r.signal.as_deref()) {
        (Some(code), _) => code,
        (None, Some(sig)) => {
            eprintln!("computer-mcp: the program was killed by SIG{sig}");
            128 + signal_number(sig)
        }
        (None, None) => 1,
    })
}

fn signal_number(name: &str) -> i32 {
    match name {
        "HUP" => 1,
        "INT" => 2,
        "KILL" => 9,
        "TERM" => 15,
        other => other.parse().unwrap_or(0),
    }
}

#[allow(clippy::print_stdout)] // `sweep` is a terminal command, not the stdio server
async fn sweep(provider: Arc<dyn Provider>, args: config::SweepArgs) -> anyhow::Result<i32> {
    let cancel = CancellationToken::new();
    if let (Some(run), Some(epoch)) = (&args.run, args.epoch) {
        let r = computer_providers::release_older(provider.as_ref(), run, epoch, &cancel)
            .await
            .map_err(|e| anyhow::anyhow!("run {run:?}: {}", e.message))?;
        for id in &r.released {
            println!("released {id} (run {run}, an epoch below {epoch})");
        }
        for (id, why) in &r.unproven {
            println!("released {id} (run {run}: {why})");
        }
        eprintln!(
            "computer-mcp: run {run:?}: {} released below epoch {epoch}, {} kept at it",
            r.released.len() + r.unproven.len(),
            r.kept.len()
        );
    }
    let released = provider
        .sweep(&cancel)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    for id in &released {
        println!("released {id}");
    }
    eprintln!(
        "computer-mcp: {} computer(s) past their deadline released",
        released.len()
    );
    Ok(0)
}

/// `computers list` and `computers release`: the provider's computers seen
/// from a terminal, by their labels.
#[allow(clippy::print_stdout)] // a terminal command, not the stdio server
async fn manage(
    provider: Arc<dyn Provider>,
    config: &Config,
    command: config::ComputersCommand,
) -> anyhow::Result<i32> {
    use computer_providers::{Labels, label};
    let cancel = CancellationToken::new();
    let all = provider
        .list(&Labels::new(), &cancel)
        .await
        .map_err(|e| anyhow::anyhow!("listing the computers: {}", e.message))?;
    let snapshots = provider
        .snapshots(&Labels::new(), &cancel)
        .await
        .map_err(|e| anyhow::anyhow!("listing the snapshots: {}", e.message))?;
    match command {
        config::ComputersCommand::List => {
            println!(
                "{:<34}  {:<18}  {:<10}  {:<8}  {:>8}  {:<24}  {:<4}  {:<7}  {}  ID",
                "HANDLE",
                "NAME",
                "PRINCIPAL",
                "KIND",
                "AGE",
                "DEADLINE",
                "KEPT",
                "RUNNING",
                receipts::cli::LIST_HEADER
            );
            let book = receipts::Book::new(config);
            let rows = receipts::cli::rows(&provider, &book, &all).await;
            for (r, row) in all.iter().zip(&rows) {
                let l = |k: &str| r.labels.get(k).cloned().unwrap_or_else(|| "-".into());
                let name = match (r.labels.get(label::NAME), r.labels.get(label::DEFAULT)) {
                    (Some(n), _) => n.clone(),
                    (None, Some(scope)) => format!("default/{scope}"),
                    (None, None) => "-".into(),
                };
                let principal: String = l(label::PRINCIPAL).chars().take(10).collect();
                println!(
                    "{:<34}  {:<18}  {:<10}  {:<8}  {:>8}  {:<24}  {:<4}  {:<7}  {}  {}",
                    l(label::HANDLE),
                    name,
                    principal,
                    l(label::KIND),
                    human_age(&r.created_at),
                    r.deadline,
                    if r.labels.contains_key(label::KEEP) {
                        "yes"
                    } else {
                        "no"
                    },
                    match (r.running, r.paused) {
                        (true, true) => "paused",
                        (true, false) => "yes",
                        (false, _) => "no",
                    },
                    receipts::cli::list_columns(row),
                    r.id
                );
            }
            eprintln!("computer-mcp: {} computer(s)", all.len());
            print_snapshots(&snapshots);
            Ok(0)
        }
        config::ComputersCommand::Release {
            which,
            discard_shares,
        } => {
            let mut code = 0;
            for w in &which {
                if let Some(done) = release_snapshot(provider.as_ref(), &snapshots, w).await {
                    code = code.max(done);
                    continue;
                }
                match cp::named(&all, w).as_slice() {
                    [] => {
                        eprintln!(
                            "computer-mcp: no computer {w:?} (not a handle, name or id of this provider's; see `computer-mcp computers list`)"
                        );
                        code = 1;
                    }
                    [one] => {
                        code = code.max(release_one(&provider, config, one, discard_shares).await);
                    }
                    many => {
                        let ids: Vec<&str> = many.iter().map(|r| r.id.as_str()).collect();
                        eprintln!(
                            "computer-mcp: {} computers are named {w:?} (of different callers): {}; release by handle or id",
                            many.len(),
                            ids.join(", ")
                        );
                        code = 1;
                    }
                }
            }
            Ok(code)
        }
    }
}

/// `computers release` of one computer: its read-write shares copied back
/// first unless `discard` (a refused copy-back keeps it, for `cp --sync`);
/// the exit code.
#[allow(clippy::print_stdout)] // a terminal command, not the stdio server
async fn release_one(
    provider: &Arc<dyn Provider>,
    config: &Config,
    one: &computer_providers::ComputerRef,
    discard: bool,
) -> i32 {
    let book = receipts::Book::new(config);
    let back = if discard {
        Ok(None)
    } else {
        cp::back_before_release(Arc::clone(provider), one, &book).await
    };
    let back = match back {
        Ok(back) => back,
        Err(why) => {
            eprintln!(
                "computer-mcp: {} was not released, so its work is not lost: its read-write shares were not copied back ({why}); copy them back with `computer-mcp cp --sync {}` (--max-bytes and --max-files raise the bounds), release it with --discard-shares, or let it end at its deadline ({})",
                one.id, one.id, one.deadline
            );
            return 1;
        }
    };
    match provider
        .release(one, Release::Delete, &CancellationToken::new())
        .await
    {
        Ok(()) => {
            match back {
                Some(words) => println!("released {} after its copy-back: {words}", one.id),
                None => println!("released {}", one.id),
            }
            0
        }
        Err(e) => {
            eprintln!("computer-mcp: releasing {} failed: {}", one.id, e.message);
            1
        }
    }
}

/// `computer-mcp receipts`: every computer's receipt and the totals.
async fn receipts_cmd(
    provider: Arc<dyn Provider>,
    config: &Config,
    args: config::ReceiptsArgs,
) -> anyhow::Result<i32> {
    use computer_providers::Labels;
    let all = provider
        .list(&Labels::new(), &CancellationToken::new())
        .await
        .map_err(|e| anyhow::anyhow!("listing the computers: {}", e.message))?;
    let rows = receipts::cli::rows(&provider, &receipts::Book::new(config), &all).await;
    print_out(&receipts::cli::render(&rows, args.json));
    Ok(0)
}

/// `computers list`'s second table: every snapshot, with its size.
#[allow(clippy::print_stdout)] // a terminal command, not the stdio server
fn print_snapshots(all: &[computer_providers::Snapshot]) {
    use computer_providers::label;
    if all.is_empty() {
        return;
    }
    println!(
        "\n{:<34}  {:<18}  {:<10}  {:<8}  {:>12}  {:>8}  DEADLINE",
        "SNAPSHOT", "NAME", "PRINCIPAL", "KIND", "BYTES", "AGE"
    );
    for s in all {
        let l = |k: &str| s.labels.get(k).cloned().unwrap_or_else(|| "-".into());
        let principal: String = l(label::PRINCIPAL).chars().take(10).collect();
        println!(
            "{:<34}  {:<18}  {:<10}  {:<8}  {:>12}  {:>8}  {}",
            s.id,
            l(label::NAME),
            principal,
            l(label::KIND),
            s.size().map_or_else(|| "-".to_string(), |b| b.to_string()),
            human_age(&s.created_at),
            s.deadline
        );
    }
    eprintln!("computer-mcp: {} snapshot(s)", all.len());
}

/// Release the snapshot `w` names (its handle, or a name one snapshot
/// has): None when `w` names none, else the exit code.
#[allow(clippy::print_stdout)] // a terminal command, not the stdio server
async fn release_snapshot(
    provider: &dyn Provider,
    all: &[computer_providers::Snapshot],
    w: &str,
) -> Option<i32> {
    let named: Vec<&computer_providers::Snapshot> = all
        .iter()
        .filter(|s| {
            s.id == w
                || s.labels
                    .get(computer_providers::label::NAME)
                    .map(String::as_str)
                    == Some(w)
        })
        .collect();
    match named.as_slice() {
        [] => None,
        [one] => match provider
            .release_snapshot(one, &CancellationToken::new())
            .await
        {
            Ok(()) => {
                println!("released snapshot {}", one.id);
                Some(0)
            }
            Err(e) => {
                eprintln!(
                    "computer-mcp: releasing snapshot {} failed: {}",
                    one.id, e.message
                );
                Some(1)
            }
        },
        many => {
            let ids: Vec<&str> = many.iter().map(|s| s.id.as_str()).collect();
            eprintln!(
                "computer-mcp: {} snapshots are named {w:?} (of different callers): {}; release by handle",
                many.len(),
                ids.join(", ")
            );
            Some(1)
        }
    }
}

#[allow(clippy::print_stdout)] // a terminal command's report
fn print_out(text: &str) {
    print!("{text}");
}

/// `3h12m` from an RFC 3339 time.
fn human_age(created_at: &str) -> String {
    let Ok(t) =
        time::OffsetDateTime::parse(created_at, &time::format_description::well_known::Rfc3339)
    else {
        return "?".into();
    };
    let s = (time::OffsetDateTime::now_utc() - t).whole_seconds().max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}
