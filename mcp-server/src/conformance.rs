//! `computer-mcp conformance`: the conformance suite against the chosen
//! provider, resolved through the registry like every command, so a new
//! provider needs nothing here.
//!
//! The drift case needs the same provider with a daemon that reports
//! another version: it is built through the registry again, with the
//! provider's `--<id>-computerd` option pointing at `computerd-drift`
//! (`--drifted-computerd`, or beside this binary). A provider without that
//! option, or no such binary, skips the drift case in words, so Core
//! cannot pass.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use computer_conformance::{self as conformance, CaseGroup, RunOptions};
use computer_providers::{Provider, Sources, provider_for};
use computerd::protocol::SettingKind;
use tokio_util::sync::CancellationToken;

use crate::config::{self, Config, ConformanceArgs};

/// The exit code of a usage error.
const USAGE: i32 = 2;

/// Check the arguments in words: the groups of `--only`, the kind, and
/// `--only` with `--kind`.
pub fn options(args: &ConformanceArgs) -> Result<RunOptions, String> {
    let only = if args.only.is_empty() {
        None
    } else {
        Some(
            args.only
                .iter()
                .map(|g| {
                    g.trim()
                        .parse::<CaseGroup>()
                        .map_err(|e| format!("--only: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let kind = match args.kind.as_deref() {
        None => None,
        Some("none") => {
            return Err(
                "--kind none is no computer (the run's folder only): there is nothing to test; give sandbox, desktop, phone or browser"
                    .into(),
            );
        }
        Some(k) => Some(
            serde_json::from_value::<SettingKind>(serde_json::Value::String(k.to_string()))
                .map_err(|_| {
                    format!("--kind {k:?} is not a setting kind: give sandbox, desktop, phone or browser")
                })?,
        ),
    };
    if kind.is_some() && only.is_some() {
        return Err("--kind runs a kind's own cases: leave --only out".into());
    }
    Ok(RunOptions {
        image: args.image.clone(),
        only,
        kind,
        ..Default::default()
    })
}

/// The command line with the provider's daemon option set to `path`
/// (any value of it given before is dropped).
fn with_daemon(argv: Vec<OsString>, id: &str, path: &Path) -> Vec<OsString> {
    let flag = format!("--{id}-computerd");
    let mut out = Vec::with_capacity(argv.len() + 1);
    let mut skip = false;
    for a in argv {
        if skip {
            skip = false;
            continue;
        }
        if a == flag.as_str() {
            skip = true;
            continue;
        }
        if a.to_str()
            .is_some_and(|s| s.starts_with(&format!("{flag}=")))
        {
            continue;
        }
        out.push(a);
    }
    out.push(format!("{flag}={}", path.display()).into());
    out
}

/// The drifted provider, or why there is none.
fn drifted(config: &Config, args: &ConformanceArgs) -> Result<Arc<dyn Provider>, String> {
    let path = match &args.drifted_computerd {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this binary: {e}"))?
            .with_file_name("computerd-drift"),
    };
    if !path.is_file() {
        return Err(format!(
            "no drift build of computerd at {} (build it with cargo build -p computerd --bin computerd-drift, or give --drifted-computerd)",
            path.display()
        ));
    }
    let path = std::path::absolute(&path).unwrap_or(path);
    let id = config.provider.as_str();
    let argv = with_daemon(std::env::args_os().collect(), id, &path);
    let parsed = match config::parse_from(argv) {
        Ok(p) => p,
        Err(_) => {
            return Err(format!(
                "the {id} provider has no --{id}-computerd option, so no drifted provider can be made"
            ));
        }
    };
    let sources = Sources {
        matches: &parsed.matches,
        tables: Some(&config.providers),
    };
    provider_for(id, &sources, &config::host_defaults())
        .map(Arc::from)
        .map_err(|e| format!("the drifted {id} provider could not be made: {}", e.message))
}

/// Run the suite and print its report; the exit code follows it.
#[allow(clippy::print_stdout)] // a terminal command, not the stdio server
pub async fn run(
    provider: Arc<dyn Provider>,
    config: &Config,
    args: ConformanceArgs,
) -> anyhow::Result<i32> {
    let mut options = match options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("computer-mcp: {e}");
            return Ok(USAGE);
        }
    };
    // An image (or any part of the run's spec) the provider cannot take
    // is a usage error, before anything is made.
    let caps = provider.capabilities();
    let spec = conformance::run_spec(&caps, options.kind, options.image.clone());
    if let Err(e) = provider.check(&spec) {
        eprintln!("computer-mcp: the run's spec is refused: {}", e.message);
        return Ok(USAGE);
    }
    let mut notes = Vec::new();
    // The desktop fixture: given, or beside this binary; none is a note
    // (the screen and input cases skip, so a desktop's Core cannot pass).
    // A phone's fixture is an APK, given only with --fixture.
    let fixture = match &args.fixture {
        Some(p) => Some(p.clone()),
        None if spec.kind == SettingKind::Phone => None,
        None => std::env::current_exe()
            .ok()
            .map(|e| e.with_file_name("computerd-x11-fixture"))
            .filter(|p| p.is_file()),
    };
    match fixture {
        Some(p) if p.is_file() => options.fixture = Some(std::path::absolute(&p).unwrap_or(p)),
        Some(p) => {
            eprintln!("computer-mcp: --fixture {} is not a file", p.display());
            return Ok(USAGE);
        }
        None if spec.kind == SettingKind::Desktop => notes.push(
            "no desktop fixture (computerd-x11-fixture beside this binary, or --fixture): the screen and input cases that read it skip".into(),
        ),
        None => {}
    }
    // A provider with no daemon (a vendor's browser) has none to drift.
    if caps.daemon != computer_providers::DaemonMode::None {
        match drifted(config, &args) {
            Ok(d) => options.drifted = Some(d),
            Err(why) => notes.push(why),
        }
    }
    // A daemon pushed in as a vendor agent's child lives where the child
    // layer installs it, not where a container binds it.
    if caps.daemon == computer_providers::DaemonMode::Child {
        options.daemon_path = Some(computer_providers::daemon_backed::child::DAEMON.to_string());
    }
    // Where the mount cases make their folders: a fresh directory under
    // the temp directory, removed when the run ends.
    let folders = std::env::temp_dir().join(format!(
        "computer-mcp-conformance-{}",
        &config::random_token().map_err(anyhow::Error::msg)?[..12]
    ));
    match std::fs::create_dir(&folders).and_then(|()| std::fs::canonicalize(&folders)) {
        Ok(dir) => options.run_folders = Some(dir),
        Err(e) => notes.push(format!(
            "no run folder ({}: {e}): the mount cases skip",
            folders.display()
        )),
    }
    let cancel = CancellationToken::new();
    options.cancel = Some(cancel.clone());
    let stopper = cancel.clone();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stopper.cancel();
        }
    });
    let mut report = conformance::run(provider, options).await;
    interrupt.abort();
    let _ = std::fs::remove_dir_all(&folders);
    report.notes.extend(notes);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(report.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(only: &[&str], kind: Option<&str>) -> ConformanceArgs {
        ConformanceArgs {
            only: only.iter().map(|s| s.to_string()).collect(),
            kind: kind.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn usage_errors_are_words() {
        assert_eq!(
            options(&args(&["exec", "bogus"], None)).err().unwrap(),
            "--only: \"bogus\" is not a conformance group; the groups are: health, exec, files, tar, process, provider, drift, isolation, lifetime, mount, limits, screen, input, touch, apps, browser"
        );
        assert!(
            options(&args(&[], Some("none")))
                .err()
                .unwrap()
                .starts_with("--kind none is no computer")
        );
        assert!(
            options(&args(&[], Some("toaster")))
                .err()
                .unwrap()
                .contains("not a setting kind")
        );
        assert!(options(&args(&["exec"], Some("sandbox"))).is_err());
        let o = options(&args(&["exec", "files"], None)).unwrap();
        assert_eq!(o.only, Some(vec![CaseGroup::Exec, CaseGroup::Files]));
        let o = options(&args(&[], Some("sandbox"))).unwrap();
        assert_eq!(o.kind, Some(SettingKind::Sandbox));
    }

    #[test]
    fn the_drifted_daemon_replaces_any_given_before() {
        let argv: Vec<OsString> = [
            "computer-mcp",
            "conformance",
            "--local-computerd",
            "/a",
            "--json",
            "--local-computerd=/b",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let out = with_daemon(argv, "local", Path::new("/d"));
        let want: Vec<OsString> = [
            "computer-mcp",
            "conformance",
            "--json",
            "--local-computerd=/d",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(out, want);
    }
}
