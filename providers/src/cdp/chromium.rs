//! Chromium: where it is on a Debian machine, the flags a computer's
//! browser runs with, and [`HostChromium`], a headless one on this machine
//! for the vendor fakes and the tests.
//!
//! Chromium's own sandbox needs new user namespaces, which a computer's
//! seccomp filter refuses; it runs with `--no-sandbox`, and the computer
//! (its namespaces, uid, limits and filter) is the boundary. `--test-type`
//! keeps the infobar that flag brings off a shown browser's pages.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::types::{ErrorCode, ProviderError, Result, SizesReadBack};

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

/// What a headless Chromium with a page open holds at once (its
/// processes and their threads, each counted by the computer's pids
/// bound), with room for the computer's own programs. Measured with
/// Debian's Chromium 156: 108 tasks at about:blank in a cgroup of its
/// own, 138 in a local computer with two pages open; it may fail to start
/// in 64 (pthread_create: Resource temporarily unavailable) and does in 32.
pub const NEEDS_PIDS: u64 = 160;

/// The memory (MiB) a headless Chromium with a page open takes, with
/// room: measured as [`NEEDS_PIDS`], 166 MiB at most (146 MiB resident)
/// at about:blank, 199 MiB at most in a local computer with two pages
/// open; in 128 MiB the kernel kills it as it starts.
pub const NEEDS_MEMORY_MB: u64 = 256;

/// What Chromium says when it cannot make a thread or a process: the
/// computer's pids bound is reached.
const NO_MORE_TASKS: &[&str] = &[
    "pthread_create",
    "Resource temporarily unavailable",
    "EAGAIN",
    "fork: ",
];

/// What it says (or how it ends) when its memory runs out.
const NO_MORE_MEMORY: &[&str] = &[
    "Out of memory",
    "out of memory",
    "Cannot allocate memory",
    "ENOMEM",
];

/// Our words for a browser that did not start (`said`: how it ended and
/// its last words) in a computer bounded by `b`, when a bound is below
/// what Chromium needs or Chromium's words say it was reached: the bound,
/// what Chromium needs, and the setting that raises it. None when neither
/// bound is in question.
pub fn bounds_too_low(b: &SizesReadBack, said: &str) -> Option<String> {
    bound_words(
        b,
        b.pids < NEEDS_PIDS || says(said, NO_MORE_TASKS),
        b.memory_mb < NEEDS_MEMORY_MB || says(said, NO_MORE_MEMORY),
    )
}

/// The same words for a browser that ran and ended, only where
/// Chromium's own words say it reached a bound.
pub fn bounds_reached(b: &SizesReadBack, said: &str) -> Option<String> {
    bound_words(b, says(said, NO_MORE_TASKS), says(said, NO_MORE_MEMORY))
}

fn says(said: &str, words: &[&str]) -> bool {
    words.iter().any(|w| said.contains(w))
}

fn bound_words(b: &SizesReadBack, pids: bool, memory: bool) -> Option<String> {
    let mut low = Vec::new();
    if pids {
        low.push(format!(
            "the computer's pids bound ({} processes and threads) is too low for Chromium, which needs about {NEEDS_PIDS} of them with a page open: raise it with the server's --pids or COMPUTER_MCP_PIDS (computer_new's pids asks for more, up to the server's)",
            b.pids
        ));
    }
    if memory {
        low.push(format!(
            "the computer's memory bound ({} MiB) is too low for Chromium, which needs about {NEEDS_MEMORY_MB} MiB with a page open: raise it with the server's --memory-mb or COMPUTER_MCP_MEMORY_MB (computer_new's memory_mb asks for more, up to the server's)",
            b.memory_mb
        ));
    }
    (!low.is_empty()).then(|| low.join("; "))
}

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
    crate::window_manager::find_program(client, CHROMIUM_PATHS).await
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
            // Without it a shown Chromium 156 puts an infobar "You are using
            // an unsupported command-line flag: --no-sandbox" over the top
            // 56 px of every page (--disable-infobars no longer hides it).
            "--test-type".into(),
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
            "--test-type",
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
    fn a_bound_below_chromium_or_reached_is_named_with_its_setting() {
        let roomy = SizesReadBack {
            cpus: 1.0,
            memory_mb: 4096,
            pids: 1024,
        };
        // Roomy bounds and words of another failure: none of ours.
        assert_eq!(
            bounds_too_low(&roomy, "the browser in the computer ended (exit code 1)"),
            None
        );
        let few = SizesReadBack { pids: 64, ..roomy };
        // A browser that ran and ended: a bound only on Chromium's words
        // (killed from inside, by pkill, is no bound's doing).
        assert_eq!(
            bounds_reached(&few, "the browser in the computer ended (killed by KILL)"),
            None
        );
        let w = bounds_reached(
            &few,
            "pthread_create: Resource temporarily unavailable (11)",
        )
        .unwrap();
        assert!(
            w.starts_with("the computer's pids bound (64 processes"),
            "{w}"
        );
        let w = bounds_too_low(&few, "the browser in the computer ended").unwrap();
        assert!(
            w.starts_with("the computer's pids bound (64 processes and threads) is too low for Chromium, which needs about 160 of them")
                && w.contains("--pids or COMPUTER_MCP_PIDS"),
            "{w}"
        );
        assert!(!w.contains("memory"), "{w}");
        // Chromium's own words that it could not make a thread name the
        // pids bound even where it looks roomy (other programs hold it).
        let w = bounds_too_low(
            &roomy,
            "its last words: [12:12:1201/223000.1:FATAL:platform_thread_posix.cc(155)] Check failed: ret == 0. pthread_create: Resource temporarily unavailable (11)",
        )
        .unwrap();
        assert!(w.contains("pids bound (1024 processes"), "{w}");
        let small = SizesReadBack {
            memory_mb: 64,
            ..roomy
        };
        let w =
            bounds_too_low(&small, "the browser in the computer ended (killed by KILL)").unwrap();
        assert!(
            w.starts_with("the computer's memory bound (64 MiB) is too low for Chromium")
                && w.contains("--memory-mb or COMPUTER_MCP_MEMORY_MB"),
            "{w}"
        );
    }

    #[test]
    fn no_chromium_is_refused_naming_the_package() {
        assert_eq!(find_in(&["/nonexistent/chromium"]), None);
    }
}
