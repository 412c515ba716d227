//! What the phone providers (`adb`, `phone-harness`) share: adb's errors
//! as provider errors, the adb server started from an environment that
//! holds none of this server's settings, and a phone client over one
//! device of that server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use computer_adb::{AdbError, Device, ensure_server};
use computer_phone::adb::AdbShell;
use computer_phone::client::{Launched, PhoneClient, groups};
use computer_phone::install::Folder;
use computerd::protocol::{MachineKind, SettingKind};
use tokio_util::sync::CancellationToken;

use crate::provider::{Connection, Preflight};
use crate::share::ShareArg;
use crate::types::{
    Capabilities, ComputerRef, ComputerSpec, DaemonMode, ErrorCode, LifetimeMode, NetworkKind,
    NetworkPolicy, NetworkReadBack, ProviderError, Release, Result, check_labels, check_lifetime,
};

/// What a phone provider offers: kind and os android, no daemon, the
/// groups of a phone client over adb (whose `sync:` writes the APKs
/// apps.install pushes), an open network not read back, release by
/// delete only, no extend.
pub fn capabilities(lifetime: LifetimeMode, max_lifetime_ms: u64, isolation: &str) -> Capabilities {
    Capabilities {
        kind: MachineKind::Android,
        os: "android".into(),
        daemon: DaemonMode::None,
        groups: groups(true),
        lifetime,
        release: vec![Release::Delete],
        max_lifetime_ms,
        networks: vec![NetworkKind::Open],
        network_read_back: false,
        isolation: isolation.into(),
        extend: false,
        shares: crate::types::ShareWay::Bind,
    }
}

/// The rules every phone's spec passes but its image: kind phone, a
/// lifetime within `caps`, network open, nothing of a host but shared
/// folders, labels. `what` names the phone in words ("a phone over
/// adb"). The shares are the phone's files (apps.install reads APKs
/// there, on this side): checked as every share is, and placed at
/// `/workspace` (or `/workspace/<name>` each); only this side reads them,
/// so none needs to be writable, and none may be `state_dir`.
pub fn check_phone(
    spec: &ComputerSpec,
    caps: &Capabilities,
    what: &str,
    state_dir: Option<&Path>,
) -> Result<Vec<Folder>> {
    if spec.kind != SettingKind::Phone {
        return Err(ProviderError::invalid(
            "kind",
            "this provider gives phones only; ask for kind phone",
        ));
    }
    check_lifetime(spec.lifetime_ms, caps)?;
    if spec.network != NetworkPolicy::Open {
        return Err(ProviderError::invalid(
            "network",
            format!("{what} reaches what the phone reaches; ask for network open (--network open)"),
        ));
    }
    let mut rest = spec.clone();
    rest.shares.clear();
    crate::types::refuse_host_parts(&rest, what)?;
    check_labels(&spec.labels)?;
    let read_only: Vec<ShareArg> = spec
        .shares
        .iter()
        .map(|s| ShareArg {
            source: s.source.clone(),
            read_only: true,
        })
        .collect();
    // Without a state directory there is none to keep out.
    let state = state_dir.unwrap_or(Path::new("/nonexistent/computer-mcp-state"));
    Ok(crate::share::plan(&read_only, state, (0, 0))?
        .into_iter()
        .map(|s| Folder {
            inside: s.target,
            host: s.source,
        })
        .collect())
}

/// A created phone's note on its files, where folders are shared.
pub fn files_note(folders: &[Folder]) -> Option<String> {
    let at: Vec<&str> = folders.iter().map(|f| f.inside.as_str()).collect();
    (!at.is_empty()).then(|| {
        format!(
            "its files are the shared folders {}: apps.install takes an APK there",
            at.join(", ")
        )
    })
}

/// The one phone of `found` (attach by labels), or why not.
pub fn only_one(mut found: Vec<ComputerRef>, none: &str) -> Result<ComputerRef> {
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ProviderError::not_found(none)),
        n => Err(ProviderError::invalid(
            "labels",
            format!("{n} phones match those labels; attach by id"),
        )),
    }
}

/// A phone's network as its provider reads it: open, `detail` saying
/// whose.
pub fn open_network(detail: &str) -> NetworkReadBack {
    NetworkReadBack {
        kind: NetworkKind::Open,
        detail: detail.into(),
    }
}

/// A phone's answer to a network policy: its network stays open, so any
/// other policy is refused in `keeps` words (how the phone keeps its
/// network), the computer named unchanged.
pub fn network(
    computer: &ComputerRef,
    policy: Option<&NetworkPolicy>,
    keeps: &str,
    detail: &str,
) -> Result<NetworkReadBack> {
    if let Some(p) = policy
        && *p != NetworkPolicy::Open
    {
        return Err(ProviderError::unsupported(format!(
            "{keeps}; {} is unchanged",
            computer.id
        )));
    }
    Ok(open_network(detail))
}

/// A phone is released by delete only: it cannot be stopped and kept.
/// `words` say so, and what becomes of it.
pub fn delete_only(how: Release, words: &str) -> Result<()> {
    if how == Release::Delete {
        Ok(())
    } else {
        Err(ProviderError::unsupported(words))
    }
}

/// A connection of a phone client.
pub fn connection(client: PhoneClient) -> Connection {
    let hello = client.hello();
    Connection {
        client: Arc::new(client),
        hello,
    }
}

/// doctor's line on the adb program: found (and the server's port), or
/// how to get one; `flag` is the provider's own setting for it.
pub fn adb_preflight(program: &Path, port: u16, flag: &str) -> Preflight {
    Preflight {
        name: "adb",
        found: match which(program) {
            Some(p) => Ok(format!(
                "{} (a server is started on port {port} when none answers)",
                p.display()
            )),
            None => Err((
                format!("no adb program at {}", program.display()),
                format!(
                    "install Android's platform tools (Debian: apt-get install adb), or give {flag}"
                ),
            )),
        },
    }
}

/// An adb failure in a provider's words (adb's words name no endpoint).
pub fn adb_error(e: AdbError) -> ProviderError {
    let code = match e {
        AdbError::Unreachable { .. } | AdbError::Start { .. } => ErrorCode::Unreachable,
        AdbError::DeviceGone { .. } => ErrorCode::Gone,
        AdbError::Timeout { .. } => ErrorCode::Timeout,
        _ => ErrorCode::Failed,
    };
    ProviderError::new(code, e.to_string())
}

/// This process's environment for a spawned adb: without this server's
/// own settings (`COMPUTER_MCP_*`: a vendor's key, a phone's endpoint),
/// which the adb server has no use for. `ensure_server` drops `ADB_*`,
/// `ANDROID_ADB_*` and `ANDROID_SERIAL` besides.
pub fn adb_environment() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| !k.to_string_lossy().starts_with("COMPUTER_MCP_"))
        .collect()
}

/// The adb server on `port`, started with `program` when none answers.
pub async fn start_adb(program: &Path, port: u16) -> Result<()> {
    ensure_server(program, port, adb_environment())
        .await
        .map(|_| ())
        .map_err(adb_error)
}

/// A phone client of `device`, adding the apps it launches to
/// `launched`; `id` names the computer in words.
pub async fn client_over(
    device: Device,
    launched: &Launched,
    id: &str,
    cancel: &CancellationToken,
) -> Result<PhoneClient> {
    let made = async {
        let shell = AdbShell::new(device).await?;
        PhoneClient::new(Arc::new(shell), Arc::clone(launched)).await
    };
    tokio::select! {
        c = made => c.map_err(|e| ProviderError::failed(format!("the phone of {id} did not answer: {e}"))),
        _ = cancel.cancelled() => Err(ProviderError::new(ErrorCode::Aborted, "connecting to the phone was cancelled")),
    }
}

/// `program` as PATH finds it, or as given when it names a file.
pub fn which(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_adb_gets_none_of_the_servers_settings() {
        // The test's own environment: whatever it holds, no setting of
        // ours passes.
        assert!(
            adb_environment()
                .iter()
                .all(|(k, _)| !k.to_string_lossy().starts_with("COMPUTER_MCP_"))
        );
    }
}
