//! Docker desktops: a Docker computer whose image has an X server. Init is
//! told its display (`--display :0`: screen and input reach it, programs
//! get DISPLAY); once init answers,
//! create starts `Xvfb :0 -screen 0 WxHx24 -nolisten tcp` through the
//! daemon's `process.start`, as the computer's user and as any program
//! (computerd stays PID 1 and starts nothing itself; the X server is one
//! process of its table and ends with the computer), then waits until
//! hello declares the screen.

use std::time::Duration;

use std::sync::Arc;

use computerd::client::{ComputerClient, ComputerExt};
use computerd::launch::Screen;
use computerd::protocol::{
    HelloParams, HelloResult, MachineKind, ProcessReadParams, ProcessStartParams, SettingKind,
    Stream,
};

use crate::types::{ErrorCode, ProviderError, Result};

/// The display every Docker desktop's X server takes.
pub const DISPLAY: &str = ":0";

pub use crate::daemon_backed::desktop::GROUPS;

/// How long the X server gets to come up.
pub const X_WAIT: Duration = Duration::from_secs(30);

/// The X server's command line for `screen`.
pub fn xvfb_argv(screen: Screen) -> Vec<String> {
    [
        "Xvfb",
        DISPLAY,
        "-screen",
        "0",
        &format!("{}x{}x24", screen.width, screen.height),
        "-nolisten",
        "tcp",
    ]
    .map(String::from)
    .to_vec()
}

/// True when a hello declares a desktop: kind desktop with the screen groups.
pub fn declares_desktop(hello: &HelloResult) -> bool {
    hello.kind == MachineKind::Desktop && GROUPS.iter().all(|g| hello.groups.contains(g))
}

/// The kind a Docker provider makes: sandboxes, or the desktops or
/// browsers it was made for (the server's `--kind`).
pub fn check_kind(kind: SettingKind, made: SettingKind) -> Result<()> {
    let image = if kind == SettingKind::Browser {
        "an image that has Chromium"
    } else {
        "an image that has Xvfb"
    };
    crate::daemon_backed::check_kind("the Docker provider", kind, made, Some(image))
}

/// Start the X server through the daemon and wait until hello declares
/// the screen. A server that ends first is refused with its last words; a
/// display not up within [`X_WAIT`] is a timeout.
pub async fn start_x(client: &Arc<dyn ComputerClient>, screen: Screen) -> Result<HelloResult> {
    let argv = xvfb_argv(screen);
    let started = client
        .call_typed(&ProcessStartParams {
            argv: argv.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| {
            ProviderError::refused(format!(
                "the desktop's X server ({}) could not be started: {e}; a desktop image needs the package xvfb (fixtures/images/build.sh makes computer-mcp-test/desktop:bookworm)",
                argv.join(" ")
            ))
        })?;
    let until = tokio::time::Instant::now() + X_WAIT;
    loop {
        let hello = client
            .call_typed(&HelloParams {
                client: Some(format!("computer-mcp {}", env!("CARGO_PKG_VERSION"))),
            })
            .await
            .map_err(|e| {
                ProviderError::new(
                    ErrorCode::Unreachable,
                    format!("the desktop's daemon stopped answering hello: {e}"),
                )
            })?;
        if declares_desktop(&hello) {
            return Ok(hello);
        }
        let err = client
            .call_typed(&ProcessReadParams {
                id: started.id.clone(),
                stream: Stream::Stderr,
                offset: 0,
                max_bytes: Some(4096),
                wait_ms: Some(0),
            })
            .await;
        if let Ok(read) = err
            && read.exited
        {
            let words = String::from_utf8_lossy(&read.data.0);
            let last: Vec<&str> = words.lines().rev().take(3).collect();
            let last: Vec<&str> = last.into_iter().rev().collect();
            return Err(ProviderError::refused(format!(
                "the desktop's X server ({}) ended before the display was up: {}",
                argv.join(" "),
                if last.is_empty() {
                    "it said nothing".to_string()
                } else {
                    last.join(" / ")
                }
            )));
        }
        if tokio::time::Instant::now() >= until {
            return Err(ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "the desktop's display {DISPLAY} was not up within {} s (hello says kind {})",
                    X_WAIT.as_secs(),
                    hello.kind
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_x_server_runs_on_display_zero_at_the_screen_asked() {
        assert_eq!(
            xvfb_argv("1920x1080".parse().unwrap()).join(" "),
            "Xvfb :0 -screen 0 1920x1080x24 -nolisten tcp"
        );
    }

    #[test]
    fn the_kind_asked_must_be_the_kind_made() {
        let e = check_kind(SettingKind::Browser, SettingKind::Sandbox).unwrap_err();
        assert!(e.message.contains("an image that has Chromium"), "{e}");
        let e = check_kind(SettingKind::Desktop, SettingKind::Sandbox).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("kind"));
        assert!(e.message.contains("--kind desktop"), "{}", e.message);
        assert!(check_kind(SettingKind::Sandbox, SettingKind::Desktop).is_err());
    }
}
