use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;

/// This machine as the sandbox: uploads land where they are asked to, and
/// commands run here. Only scripts that touch a temporary root are run.
struct Here {
    /// Bytes written in place of an upload's (a host that alters them).
    swap: Option<Bytes>,
}

#[async_trait::async_trait]
impl ChildHost for Here {
    fn vendor(&self) -> &str {
        "test"
    }
    async fn upload(&self, path: &str, bytes: Bytes) -> Result<()> {
        let bytes = self.swap.clone().unwrap_or(bytes);
        std::fs::write(path, &bytes).map_err(|e| ProviderError::failed(e.to_string()))
    }
    async fn run(&self, argv: &[String], _within: Duration) -> Result<Ran> {
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| ProviderError::failed(e.to_string()))?;
        Ok(Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
    async fn spawn(&self, _argv: &[String]) -> Result<()> {
        Err(ProviderError::unsupported("not here"))
    }
    async fn attach(&self, _argv: &[String]) -> Result<(BridgeReader, BridgeWriter)> {
        Err(ProviderError::unsupported("not here"))
    }
}

fn root_here() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: the install script sets owners, which needs root");
    false
}

/// The install tests read /tmp for uploads left behind: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn uploads_left() -> Vec<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("computer-mcp-computerd-"))
        .collect()
}

async fn install_in(root: &Path, host: &Here) -> Result<()> {
    install_under(
        host,
        Bytes::from_static(b"#!/bin/sh\necho daemon\n"),
        root.to_str().unwrap(),
    )
    .await
}

#[tokio::test]
async fn the_daemon_is_installed_roots_alone_and_its_sum_checked() {
    if !root_here() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let root = tempfile::tempdir().unwrap();
    // Something else was at the daemon's path: it is removed first.
    std::fs::create_dir_all(root.path().join("opt/computer-mcp/computerd/old")).unwrap();
    let before = uploads_left();
    install_in(root.path(), &Here { swap: None }).await.unwrap();
    let bin = root.path().join("opt/computer-mcp/computerd");
    let meta = std::fs::symlink_metadata(&bin).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        (meta.uid(), meta.gid(), meta.permissions().mode() & 0o7777),
        (0, 0, 0o755)
    );
    assert_eq!(std::fs::read(&bin).unwrap(), b"#!/bin/sh\necho daemon\n");
    for d in ["work", "run/computerd"] {
        assert!(root.path().join(d).is_dir(), "{d} was not made");
    }
    // Where the server copies shares in: the daemon's user's.
    let ws = std::fs::symlink_metadata(root.path().join("workspace")).unwrap();
    assert!(ws.is_dir());
    assert_eq!(
        (ws.uid(), ws.gid(), ws.permissions().mode() & 0o7777),
        (DAEMON_USER.uid, DAEMON_USER.gid, 0o755)
    );
    assert_eq!(uploads_left(), before, "the upload was left in /tmp");
}

#[tokio::test]
async fn a_path_anyone_but_root_could_change_is_refused_in_words_and_nothing_installed() {
    if !root_here() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    type Spoil = fn(&Path);
    let cases: [(&str, Spoil, &str); 3] = [
        (
            "opt writable by others",
            |r| {
                std::fs::create_dir(r.join("opt")).unwrap();
                std::fs::set_permissions(r.join("opt"), std::fs::Permissions::from_mode(0o777))
                    .unwrap();
            },
            "/opt is not root's alone",
        ),
        (
            "opt owned by another user",
            |r| {
                std::fs::create_dir(r.join("opt")).unwrap();
                std::os::unix::fs::chown(r.join("opt"), Some(1000), Some(1000)).unwrap();
            },
            "/opt is not root's alone",
        ),
        (
            "the daemon's directory a symbolic link",
            |r| {
                std::fs::create_dir_all(r.join("elsewhere")).unwrap();
                std::fs::create_dir(r.join("opt")).unwrap();
                std::os::unix::fs::symlink(r.join("elsewhere"), r.join("opt/computer-mcp"))
                    .unwrap();
            },
            "/opt/computer-mcp is a symbolic link",
        ),
    ];
    for (what, spoil, words) in cases {
        let root = tempfile::tempdir().unwrap();
        spoil(root.path());
        let before = uploads_left();
        let e = install_in(root.path(), &Here { swap: None })
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Refused, "{what}");
        assert!(
            e.message
                .starts_with("installing the daemon in the test sandbox was refused: ")
                && e.message.contains(words),
            "{what}: {}",
            e.message
        );
        for p in ["opt/computer-mcp/computerd", "elsewhere/computerd"] {
            assert!(!root.path().join(p).exists(), "{what}: {p} was installed");
        }
        assert_eq!(uploads_left(), before, "{what}: the upload was left");
    }
}

#[tokio::test]
async fn a_daemon_that_is_not_the_uploaded_one_is_refused() {
    if !root_here() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let root = tempfile::tempdir().unwrap();
    let e = install_in(
        root.path(),
        &Here {
            swap: Some(Bytes::from_static(b"other")),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Failed);
    assert!(
        e.message.starts_with(
            "the daemon installed in the test sandbox is not the one uploaded: its sha256 is "
        ),
        "{}",
        e.message
    );
}

#[test]
fn the_daemon_is_never_run_from_a_path_that_is_not_roots_alone() {
    if Path::new(DAEMON_DIR).exists() {
        eprintln!("skipped: {DAEMON_DIR} exists on this machine");
        return;
    }
    let argv = bridge_argv();
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "/opt/computer-mcp is not root's alone: the daemon is not run\n"
    );
}

#[test]
fn init_is_rendered_with_its_deadlines_user_socket_and_own_network_in_a_clean_environment() {
    let deadline = Time::from_unix_ms(1_800_000_000_000).unwrap();
    let max = Time::from_unix_ms(1_800_003_600_000).unwrap();
    let argv = init_argv(&init_args(deadline, max));
    assert_eq!(&argv[..2], ["/bin/sh", "-c"]);
    assert!(argv[2].contains(&format!(
        "exec /usr/bin/env -i {CLEAN_PATH} HOME={HOME} \"$@\""
    )));
    assert_eq!(
        argv[3..],
        [
            "sh",
            DAEMON,
            "init",
            "--deadline",
            &deadline.to_string(),
            "--max-deadline",
            &max.to_string(),
            "--socket",
            SOCKET,
            "--user",
            "2510:2510",
            "--own-network",
        ]
    );
    assert_eq!(
        bridge_argv()[3..],
        ["sh", DAEMON, "stdio", "--socket", SOCKET]
    );
}

#[test]
fn a_shell_line_gives_the_shell_each_word_as_it_is() {
    let words: Vec<String> = ["printf", "%s|", "it's", "$HOME", "a b", "\"q\"", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &shell_line(&words)])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "it's|$HOME|a b|\"q\"||"
    );
}
