//! The X display named by DISPLAY when init started, driven in pure Rust
//! (x11rb's own connection, no libxcb): screen.shot by GetImage on the
//! root window, input.actions by XTEST, no program started for either.
//!
//! - [`addr`]: only a display in this computer (its unix socket, or TCP to
//!   loopback); any other DISPLAY is refused before anything is sent.
//! - [`auth`]: the Xauthority cookie, read only from a regular file of at
//!   most 64 KiB.
//! - [`wire`]: the stream under the connection, which bounds the setup and
//!   every reply by what its request can get back.
//! - [`session`]: one connection, checked (scanline pads, keycodes, XTEST),
//!   and its pixels (through [`shm`] where the server can share memory)
//!   and input primitives; [`keys`] the keyboard map and the
//!   remap; [`input`] a batch of actions.
//!
//! The display is reached when first asked for and again after it goes, so
//! an X server may start after init does; hello declares the desktop groups
//! only while it answers with XTEST.

pub mod addr;
pub mod auth;
pub mod input;
pub mod keys;
pub mod png;
pub mod scale;
pub mod session;
pub mod shm;
pub mod watch;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::protocol::{
    CheckOptions, Fit, Group, InputActionsResult, Region, RpcError, check_actions_json,
};
use session::Session;

/// The groups a display that answers with XTEST gives.
pub const GROUPS: &[Group] = &[Group::Screen, Group::InputPointer, Group::InputKeys];

/// The display of this computer, if DISPLAY names one.
pub struct Display {
    name: Option<String>,
    cookie_file: Option<PathBuf>,
    session: Arc<Mutex<Option<Session>>>,
    /// Whether the display answered the last call: hello's answer while a
    /// batch has the display.
    up: Arc<AtomicBool>,
}

/// The whole screen's pixels, as the X server's BGRX, and the pointer.
pub struct Grab {
    pub bgrx: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub cursor: Option<[i64; 2]>,
}

/// A shot's PNG and what it shows.
pub struct Shot {
    pub png: Vec<u8>,
    /// The image's size (within the fit asked for).
    pub width: u32,
    pub height: u32,
    pub screen_width: u32,
    pub screen_height: u32,
    /// Image pixels per screen pixel.
    pub scale: f64,
    pub cursor: Option<[i64; 2]>,
}

impl Display {
    /// DISPLAY, XAUTHORITY and HOME as init was started with them.
    pub fn from_env(home: &str) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let home = var("HOME").unwrap_or_else(|| home.to_string());
        Self::new(
            var("DISPLAY"),
            auth::file(var("XAUTHORITY").as_deref(), Some(&home)),
        )
    }

    pub fn new(name: Option<String>, cookie_file: Option<PathBuf>) -> Self {
        Self {
            name,
            cookie_file,
            session: Arc::new(Mutex::new(None)),
            up: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Run `f` on the session, reaching the display first when there is
    /// none. The wait for another call's turn ends with `cancel`. After a
    /// failure the display is asked once more whether it answers, and let
    /// go when it does not, so the next call reaches it again.
    async fn with<T, F>(&self, cancel: &CancellationToken, f: F) -> Result<T, RpcError>
    where
        F: FnOnce(&mut Session) -> Result<T, RpcError> + Send + 'static,
        T: Send + 'static,
    {
        let Some(name) = self.name.clone() else {
            return Err(RpcError::unsupported(
                "this computer has no display: DISPLAY was not set when computerd init started",
            ));
        };
        let target = addr::parse(&name)?;
        let mut guard = tokio::select! {
            g = Arc::clone(&self.session).lock_owned() => g,
            () = cancel.cancelled() => {
                return Err(RpcError::aborted("cancelled while another call had the display"));
            }
        };
        let cookie = self.cookie_file.clone();
        let up = Arc::clone(&self.up);
        tokio::task::spawn_blocking(move || {
            if guard.is_none() {
                match Session::connect(&name, &target, cookie.as_deref()) {
                    Ok(s) => *guard = Some(s),
                    Err(e) => {
                        up.store(false, Ordering::SeqCst);
                        return Err(e);
                    }
                }
            }
            let Some(s) = guard.as_mut() else {
                return Err(RpcError::unsupported("the display went"));
            };
            let r = f(s);
            if r.is_err() && s.sync().is_err() {
                *guard = None;
            }
            up.store(guard.is_some(), Ordering::SeqCst);
            r
        })
        .await
        .unwrap_or_else(|e| {
            Err(RpcError::invalid(format!(
                "the display call failed inside the daemon: {e}"
            )))
        })
    }

    /// Whether the display answers with XTEST now (reaching it if need be).
    /// While another call has it, the answer is how its last call went.
    pub async fn answers(&self) -> bool {
        if self.name.is_none() {
            return false;
        }
        if Arc::clone(&self.session).try_lock_owned().is_err() {
            return self.up.load(Ordering::SeqCst);
        }
        self.with(&CancellationToken::new(), |s| s.sync())
            .await
            .is_ok()
    }

    /// The groups hello declares for the display: [`GROUPS`] while it answers.
    pub async fn groups(&self) -> Vec<Group> {
        if self.answers().await {
            GROUPS.to_vec()
        } else {
            Vec::new()
        }
    }

    /// The screen (or `region` of it) as PNG; the whole screen scaled down
    /// to `fit` when it is larger, since scaling before encoding costs less
    /// than the encoding it saves.
    pub async fn shot(
        &self,
        region: Option<Region>,
        fit: Option<Fit>,
        cancel: &CancellationToken,
    ) -> Result<Shot, RpcError> {
        self.with(cancel, move |s| {
            let (sw, sh) = (u32::from(s.width), u32::from(s.height));
            let r = region.unwrap_or(Region {
                x: 0,
                y: 0,
                width: sw,
                height: sh,
            });
            r.check_inside(sw, sh)?;
            // Inside the screen, whose sides fit u16.
            let bgrx = s.pixels(r.x as u16, r.y as u16, r.width as u16, r.height as u16)?;
            let (x, y, same, _) = s.pointer()?;
            // A region is shown at its own size, as a phone's client does.
            let (bgrx, width, height) = match fit.filter(|_| region.is_none()) {
                Some(f) => {
                    let to = f.size(r.width, r.height, false);
                    scale::down(&bgrx, r.width, r.height, to)
                }
                None => (bgrx, r.width, r.height),
            };
            let (png, _) = png::encode_bgrx(&bgrx, width, height)?;
            Ok(Shot {
                png,
                width,
                height,
                screen_width: sw,
                screen_height: sh,
                scale: f64::from(width) / f64::from(r.width),
                cursor: same.then_some([x, y]),
            })
        })
        .await
    }

    /// The whole screen, for screen.watch.
    pub async fn grab(&self, cancel: &CancellationToken) -> Result<Grab, RpcError> {
        self.with(cancel, |s| {
            let bgrx = s.pixels(0, 0, s.width, s.height)?;
            let (x, y, same, _) = s.pointer()?;
            Ok(Grab {
                bgrx,
                width: u32::from(s.width),
                height: u32::from(s.height),
                cursor: same.then_some([x, y]),
            })
        })
        .await
    }

    /// input.actions: the batch is checked whole (as [`check_actions_json`]
    /// does, then what X11 adds), then run.
    pub async fn actions(
        &self,
        actions: Vec<Value>,
        cancel: CancellationToken,
    ) -> Result<InputActionsResult, RpcError> {
        let checked = match check_actions_json(&actions, GROUPS, CheckOptions::default()) {
            Ok(a) => a,
            Err(f) => return Ok(InputActionsResult::refused(f)),
        };
        let c = cancel.clone();
        self.with(&cancel, move |s| {
            if let Err(f) = input::precheck(s, &checked) {
                return Ok(InputActionsResult::refused(f));
            }
            Ok(input::run(s, &checked, &c))
        })
        .await
    }
}
