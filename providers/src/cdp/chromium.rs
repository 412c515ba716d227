//! Chromium: where it is on a Debian machine, the flags a computer's
//! browser runs with, and [`HostChromium`], a headless one on this machine
//! for the vendor fakes and the tests.
//!
//! Chromium's own sandbox needs new user namespaces, which a computer's
//! seccomp filter refuses; it runs with `--no-sandbox`, and the computer
//! (its namespaces, uid, limits and filter) is the boundary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::types::{ErrorCode, ProviderError, Result};

/// Where Chromium is looked for: Debian's program first (its
/// `/usr/bin/chromium` is a shell wrapper around it), then the usual
/// names elsewhere.
pub const CHROMIUM_PATHS: &[&str] = &[
    "/usr/lib/chromium/chromium",
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
];

/// The package that installs it, named in the refusal.
pub const PACKAGE: &str = "chromium";

/// Where a computer's browser keeps its profile: in the computer's own
/// HOME (a tmpfs of its own, local and Docker alike).
pub const PROFILE: &str = "/work/.browser";

/// The window a headless browser lays pages out in.
pub const WINDOW: (u32, u32) = (1280, 800);

/// The first of `paths` that is an executable regular file.
pub fn find_in(paths: &[&str]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    paths
        .iter()
        .map(Path::new)
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(Path::to_path_buf)
}

/// This machine's Chromium, or words naming the package to install.
pub fn find() -> Result<PathBuf> {
    find_in(CHROMIUM_PATHS).ok_or_else(|| {
        ProviderError::unsupported(format!(
            "a browser needs Chromium on this machine, and there is none at {}: install the package {PACKAGE} (apt-get install {PACKAGE})",
            CHROMIUM_PATHS.join(", ")
        ))
        .with_field("kind")
    })
}

/// The first of [`CHROMIUM_PATHS`] that is an executable file in the
/// computer behind `client` (read with files.stat), or none.
pub async fn find_in_computer(
    client: &std::sync::Arc<dyn computerd::client::ComputerClient>,
) -> Option<String> {
    use computerd::client::ComputerExt;
    use computerd::protocol::{FileType, FilesStatParams};
    for path in CHROMIUM_PATHS {
        let st = client
            .call_typed(&FilesStatParams {
                path: (*path).to_string(),
                follow: Some(true),
            })
            .await;
        if let Ok(st) = st
            && st.file_type == FileType::File
            && st.mode & 0o111 != 0
        {
            return Some((*path).to_string());
        }
    }
    None
}

/// How a browser is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    /// Its profile: a directory of its own.
    pub profile: String,
    /// Headless, or shown on the computer's display.
    pub headless: bool,
    /// An HTTP proxy every request goes through (a computer's egress).
    pub proxy: Option<String>,
    /// `--remote-debugging-pipe`, or a port on 127.0.0.1 (0: its choice).
    pub debugging: Debugging,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Debugging {
    Pipe,
    Port(u16),
}

impl Launch {
    /// The argv: the program, then its flags, then the first page.
    pub fn argv(&self) -> Vec<String> {
        let mut a = vec![
            self.program.display().to_string(),
            format!("--user-data-dir={}", self.profile),
            "--no-sandbox".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            "--disable-default-apps".into(),
            "--disable-breakpad".into(),
            "--disable-crash-reporter".into(),
            "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider"
                .into(),
            "--password-store=basic".into(),
            "--use-mock-keychain".into(),
            "--mute-audio".into(),
            "--log-level=2".into(),
            format!("--window-size={},{}", WINDOW.0, WINDOW.1),
        ];
        if self.headless {
            a.push("--headless=new".into());
            a.push("--hide-scrollbars".into());
        }
        if let Some(p) = &self.proxy {
            a.push(format!("--proxy-server={p}"));
            a.push("--proxy-bypass-list=<-loopback>".into());
        }
        match self.debugging {
            Debugging::Pipe => a.push("--remote-debugging-pipe".into()),
            Debugging::Port(p) => {
                a.push("--remote-debugging-address=127.0.0.1".into());
                a.push(format!("--remote-debugging-port={p}"));
            }
        }
        a.push("about:blank".into());
        a
    }
}

/// How long a host browser gets to say its endpoint.
const START_WAIT: Duration = Duration::from_secs(30);

/// A headless Chromium on this machine, its DevTools on a port of
/// 127.0.0.1: what the vendor fakes hand out and the tests drive. Killed,
/// and its profile removed, when dropped.
pub struct HostChromium {
    child: tokio::process::Child,
    ws_url: String,
    profile: PathBuf,
}

impl HostChromium {
    /// Start one and wait (bounded) until it says its endpoint.
    pub async fn start() -> Result<HostChromium> {
        let program = find()?;
        let profile = std::env::temp_dir().join(format!(
            "computer-mcp-chromium-{}",
            crate::random::random_hex(8)?
        ));
        std::fs::create_dir_all(&profile).map_err(|e| {
            ProviderError::new(
                ErrorCode::Failed,
                format!("making the browser's profile {}: {e}", profile.display()),
            )
        })?;
        let launch = Launch {
            program,
            profile: profile.display().to_string(),
            headless: true,
            proxy: None,
            debugging: Debugging::Port(0),
        };
        let argv = launch.argv();
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                ProviderError::new(
                    ErrorCode::Unsupported,
                    format!("could not start Chromium ({}): {e}", argv[0]),
                )
            })?;
        let Some(stderr) = child.stderr.take() else {
            return Err(ProviderError::new(
                ErrorCode::Failed,
                "Chromium's stderr was not a pipe",
            ));
        };
        let mut lines = BufReader::new(stderr).lines();
        let found = tokio::time::timeout(START_WAIT, async {
            let mut said = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return Ok(url.trim().to_string());
                }
                if said.len() < 5 {
                    said.push(line);
                }
            }
            Err(said.join(" | "))
        })
        .await;
        let ws_url = match found {
            Ok(Ok(url)) => url,
            Ok(Err(said)) => {
                let _ = std::fs::remove_dir_all(&profile);
                return Err(ProviderError::new(
                    ErrorCode::Unsupported,
                    format!("Chromium ended before it said its DevTools endpoint: {said}"),
                ));
            }
            Err(_) => {
                let _ = std::fs::remove_dir_all(&profile);
                return Err(ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "Chromium did not say its DevTools endpoint within {} s",
                        START_WAIT.as_secs()
                    ),
                ));
            }
        };
        // Keep reading its stderr, so a full pipe never stalls it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(HostChromium {
            child,
            ws_url,
            profile,
        })
    }

    /// Its browser endpoint: `ws://127.0.0.1:PORT/devtools/browser/ID`.
    pub fn ws_url(&self) -> &str {
        &self.ws_url
    }

    /// A client of kind browser on it.
    pub async fn client(&self) -> Result<super::BrowserClient> {
        super::BrowserClient::websocket(self.ws_url(), Vec::new()).await
    }
}

impl Drop for HostChromium {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computer_browser_runs_headless_on_its_pipe_with_its_proxy() {
        let argv = Launch {
            program: "/usr/lib/chromium/chromium".into(),
            profile: "/work/.browser".into(),
            headless: true,
            proxy: Some("http://127.0.0.1:3128".into()),
            debugging: Debugging::Pipe,
        }
        .argv();
        assert_eq!(argv[0], "/usr/lib/chromium/chromium");
        assert_eq!(argv[1], "--user-data-dir=/work/.browser");
        for flag in [
            "--no-sandbox",
            "--headless=new",
            "--remote-debugging-pipe",
            "--proxy-server=http://127.0.0.1:3128",
        ] {
            assert!(argv.iter().any(|a| a == flag), "{flag} in {argv:?}");
        }
        assert_eq!(argv.last().map(String::as_str), Some("about:blank"));
        assert!(
            !argv
                .iter()
                .any(|a| a.starts_with("--remote-debugging-port"))
        );
    }

    #[test]
    fn no_chromium_is_refused_naming_the_package() {
        assert_eq!(find_in(&["/nonexistent/chromium"]), None);
    }
}
