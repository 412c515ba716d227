//! A desktop's own X server: `computerd init --xvfb PATH --screen WxH`
//! starts Xvfb as init's user (after the privilege drop, under the same
//! seccomp filter), before the socket answers, on a display the X server
//! picks itself (`-displayfd`), so two desktops that share a /tmp never
//! race for a number. Inside a sandbox /tmp is the computer's own, so the
//! display's socket (/tmp/.X11-unix/XN) is too.
//!
//! Init holds the X server as one of its guards ([`super::init::Reaper::adopt`]):
//! the sweep spares it and shutdown ends it with everything else.

use crate::daemon::setup::SetupError;
use std::io::Read;
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::launch::Screen;

/// How long Xvfb gets to say its display.
const START_WAIT: Duration = Duration::from_secs(15);

/// A started Xvfb.
pub struct Xvfb {
    pub pid: i32,
    /// `:N`, for DISPLAY.
    pub display: String,
    /// The pipe it said its display on, held open for its life (a write
    /// to a closed pipe would end it).
    _displayfd: ChildStdout,
}

/// The arguments Xvfb is started with: the display it picks written to
/// its stdout, one screen of 24-bit colour, no TCP, and no reset when the
/// last client leaves (which would drop what the screen shows).
pub fn xvfb_args(screen: Screen) -> Vec<String> {
    vec![
        "-displayfd".into(),
        "1".into(),
        "-screen".into(),
        "0".into(),
        format!("{}x{}x24", screen.width, screen.height),
        "-nolisten".into(),
        "tcp".into(),
        "-noreset".into(),
    ]
}

/// Read the display number Xvfb writes on `-displayfd`: digits and a
/// newline, at most 16 bytes.
pub fn parse_display(said: &[u8]) -> Result<String, SetupError> {
    let text = std::str::from_utf8(said).unwrap_or("").trim();
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "Xvfb said {:?} where a display number was expected",
            String::from_utf8_lossy(said)
        )
        .into());
    }
    Ok(format!(":{text}"))
}

/// What Xvfb writes on `-displayfd`, up to its newline (at most 16
/// bytes), waiting at most [`START_WAIT`] in all. A poll, not a thread:
/// init has one thread here, and the daemon stays small.
fn read_display(out: &mut ChildStdout) -> Result<Vec<u8>, SetupError> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let until = std::time::Instant::now() + START_WAIT;
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while said.len() < 16 {
        let left = until.saturating_duration_since(std::time::Instant::now());
        let timeout = PollTimeout::try_from(left.as_millis() as i32).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(out.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                return Err(format!(
                    "Xvfb did not say its display within {} s",
                    START_WAIT.as_secs()
                )
                .into());
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("waiting for Xvfb's display failed: {e}").into()),
        }
        match out.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => said.push(byte[0]),
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading Xvfb's display failed: {e}").into()),
        }
    }
    Ok(said)
}

/// Start Xvfb at `path` with `screen` and wait (bounded) until it says its
/// display, which it does once it listens.
pub fn start(path: &Path, screen: Screen) -> Result<Xvfb, SetupError> {
    if !path.is_absolute() {
        return Err(format!("--xvfb {} is not an absolute path", path.display()).into());
    }
    let mut child = Command::new(path)
        .args(xvfb_args(screen))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "could not start Xvfb ({}): {e}; install the package xvfb",
                path.display()
            )
        })?;
    let Some(mut out) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("Xvfb's stdout was not a pipe".into());
    };
    let fail = |child: &mut std::process::Child, why: SetupError| {
        let _ = child.kill();
        let _ = child.wait();
        why
    };
    let said = match read_display(&mut out) {
        Ok(said) => said,
        Err(why) => return Err(fail(&mut child, why)),
    };
    let name = match parse_display(&said) {
        Ok(d) => d,
        Err(e) => {
            let status = child.try_wait().ok().flatten();
            let ended = status
                .map(|s| format!(" (it ended: {s})"))
                .unwrap_or_default();
            return Err(fail(
                &mut child,
                format!("{e}{ended}; its words are above").into(),
            ));
        }
    };
    tracing::info!("Xvfb is up on {name}, screen {screen}");
    Ok(Xvfb {
        pid: child.id() as i32,
        display: name,
        _displayfd: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_display_is_read_from_what_xvfb_says() {
        assert_eq!(parse_display(b"0").unwrap(), ":0");
        assert_eq!(parse_display(b"12").unwrap(), ":12");
        for bad in [&b""[..], b"x", b"1 2", b"-1", b"99999999999"] {
            let e = parse_display(bad).unwrap_err().to_string();
            assert!(e.contains("display number"), "{e}");
        }
    }

    #[test]
    fn xvfb_gets_the_screen_and_no_tcp() {
        let a = xvfb_args(Screen {
            width: 1920,
            height: 1080,
        });
        assert_eq!(
            a,
            [
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1920x1080x24",
                "-nolisten",
                "tcp",
                "-noreset"
            ]
        );
    }
}
