//! A desktop's window manager, shared by the local and Docker providers.
//! Without one a window opens at (0, 0) with no frame, wherever its program
//! asked, and nothing gives it the focus. Where the computer has
//! matchbox-window-manager (small, made for one screen: each window gets a
//! title bar and the screen), it is started through the computer's daemon
//! once the display is up, as the computer's user, as one process of the
//! computer's table that ends with the computer. Where it has none the
//! desktop still works, and its create notes say so.

use std::sync::Arc;
use std::time::Duration;

use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::{FileType, FilesStatParams, ProcessStartParams};

/// Where one is looked for, in the computer (a local computer sees this
/// machine's /usr; a Docker computer its image's).
pub const PATHS: &[&str] = &[
    "/usr/bin/matchbox-window-manager",
    "/usr/local/bin/matchbox-window-manager",
];

/// The package that installs it, named in the note where there is none.
pub const PACKAGE: &str = "matchbox-window-manager";

/// How long a start waits to see it end at once (another window manager
/// holds the display, the display is gone): its words then go in the note.
const SETTLE: Duration = Duration::from_millis(200);

/// The first of `paths` that is an executable file in the computer.
pub async fn find_program(client: &Arc<dyn ComputerClient>, paths: &[&str]) -> Option<String> {
    for path in paths {
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

/// Start the desktop's window manager where the computer has one; the
/// create note saying what happened. Never fails the desktop: a desktop
/// without one works, its windows unplaced.
pub async fn start(client: &Arc<dyn ComputerClient>) -> String {
    let Some(program) = find_program(client, PATHS).await else {
        return format!(
            "window manager: none (no {PACKAGE} at {}), so windows open at 0,0 without a frame: install the package {PACKAGE}",
            PATHS.join(", ")
        );
    };
    let started = client
        .call_typed(&ProcessStartParams {
            argv: vec![program.clone()],
            wait_ms: Some(SETTLE.as_millis() as u64),
            ..Default::default()
        })
        .await;
    match started {
        Ok(s) if s.ended.is_none() => format!(
            "window manager: {program} (process {}), so each window gets a title bar and the screen",
            s.id
        ),
        Ok(s) => {
            let said = s
                .ended
                .and_then(|e| e.stderr)
                .map(|r| String::from_utf8_lossy(&r.data.0).trim().to_string())
                .filter(|w| !w.is_empty())
                .unwrap_or_else(|| "it said nothing".into());
            format!(
                "window manager: {program} ended as it started ({said}), so windows open at 0,0 without a frame"
            )
        }
        Err(e) => format!(
            "window manager: {program} could not be started ({e}), so windows open at 0,0 without a frame"
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use computerd::client::{ClientError, Result as ClientResult};
    use serde_json::{Value, json};

    /// A computer that has `have` (an executable file) and answers a start
    /// with `started`.
    struct Computer {
        have: Option<&'static str>,
        started: Value,
    }

    impl ComputerClient for Computer {
        fn call_value<'a>(
            &'a self,
            method: &'a str,
            params: Value,
        ) -> futures::future::BoxFuture<'a, ClientResult<Value>> {
            Box::pin(async move {
                match method {
                    "files.stat" if Some(params["path"].as_str().unwrap()) == self.have => Ok(
                        json!({"type": "file", "size": 1, "mode": 0o755, "mtimeMs": 0, "uid": 0, "gid": 0}),
                    ),
                    "files.stat" => Err(ClientError::Closed("no such file".into())),
                    "process.start" => {
                        assert_eq!(params["argv"], json!([self.have.unwrap()]));
                        Ok(self.started.clone())
                    }
                    m => panic!("unexpected {m}"),
                }
            })
        }

        fn close(&self) {}
    }

    async fn note(have: Option<&'static str>, started: Value) -> String {
        let c: Arc<dyn ComputerClient> = Arc::new(Computer { have, started });
        start(&c).await
    }

    #[tokio::test]
    async fn the_note_says_which_window_manager_runs_or_why_none() {
        assert_eq!(
            note(None, Value::Null).await,
            "window manager: none (no matchbox-window-manager at /usr/bin/matchbox-window-manager, /usr/local/bin/matchbox-window-manager), so windows open at 0,0 without a frame: install the package matchbox-window-manager"
        );
        assert_eq!(
            note(
                Some("/usr/local/bin/matchbox-window-manager"),
                json!({"id": "p2", "pid": 40})
            )
            .await,
            "window manager: /usr/local/bin/matchbox-window-manager (process p2), so each window gets a title bar and the screen"
        );
        assert_eq!(
            note(
                Some("/usr/bin/matchbox-window-manager"),
                json!({"id": "p2", "pid": 40, "ended": {"exitCode": 1, "signal": null}})
            )
            .await,
            "window manager: /usr/bin/matchbox-window-manager ended as it started (it said nothing), so windows open at 0,0 without a frame"
        );
    }
}
