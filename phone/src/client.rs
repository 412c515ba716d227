//! The phone's client: the computer protocol answered in this process
//! (daemon mode none). Every method becomes the phone's own tools over a
//! [`Shell`]; what a phone over adb cannot do is refused in words.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use computerd::client::{ClientError, ComputerClient};
use computerd::protocol::limits::MAX_CHUNK_BYTES;
use computerd::protocol::{
    ActionFailure, App, AppsInstallParams, AppsInstallResult, AppsLaunchParams, AppsListResult,
    AppsOpenUrlParams, AppsTerminateParams, Bytes64, CheckOptions, ErrorKind, Fit, Group,
    HelloResult, ImageFormat, InputActionsParams, InputActionsResult, MachineKind, Region,
    RpcError, ScreenOrientationParams, ScreenOrientationResult, ScreenReadParams, ScreenReadResult,
    ScreenShotParams, ScreenShotResult, check_actions_json, decode_params,
};
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::install::{self, Folder, InstallError};
use crate::screen::Screencap;
use crate::{facts, input, intent, ui};

/// What a phone client needs of its transport: a shell command's output
/// and its exit, and a command's raw bytes. adb's `shell,v2:` and `exec:`
/// services give them; a test gives a fake.
pub trait Shell: Send + Sync {
    /// Run `command` in the phone's shell: its stdout and exit code.
    fn run<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Ran, ShellError>>;
    /// Run `command` and give its stdout's bytes as they are (no pty, no
    /// line ending rewritten): for `screencap`.
    fn bytes<'a>(&'a self, command: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ShellError>>;
    /// Whether [`Shell::push`] writes files (adb's `sync:` does): a
    /// client declares apps.install only then.
    fn can_push(&self) -> bool {
        false
    }
    /// Write `data` to the phone's file `remote` (mode 0644). A transport
    /// that cannot says so, and writes nothing.
    fn push<'a>(
        &'a self,
        data: &'a [u8],
        remote: &'a str,
    ) -> BoxFuture<'a, Result<(), ShellError>> {
        let _ = data;
        Box::pin(async move {
            Err(ShellError(format!(
                "this phone's transport writes no files, so {remote} was not written"
            )))
        })
    }
}

/// A command's outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    pub stdout: String,
    pub exit: u8,
}

/// The transport failed: the phone is gone or did not answer. Its words
/// name no endpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShellError(pub String);

/// The groups a phone over adb answers.
pub const GROUPS: &[Group] = &[
    Group::Screen,
    Group::InputTouch,
    Group::InputKeys,
    Group::Apps,
    Group::AppsUiTree,
];

/// The groups a phone answers over a transport that does, or does not,
/// write files (apps.install pushes the APK).
pub fn groups(can_push: bool) -> Vec<Group> {
    let mut g = GROUPS.to_vec();
    if can_push {
        g.push(Group::AppsInstall);
    }
    g
}

/// The apps a computer's sessions launched, shared by its connections, so
/// release can end them.
pub type Launched = Arc<Mutex<BTreeSet<String>>>;

/// What the phone is, read once when the client is made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct About {
    pub model: String,
    pub android: String,
    pub sdk: String,
    /// The CPU as hello names one (`arm64`, `amd64`), from the phone's ABI.
    pub arch: String,
    pub width: u32,
    pub height: u32,
    pub density: u32,
}

struct Shot {
    id: String,
    png: Vec<u8>,
}

/// The largest screencap whose shot is kept for the next one to match.
const MADE_MAX_BYTES: usize = 16 << 20;

/// A shot as made: the screencap it came from, what was asked of it, and
/// the PNG. The next shot whose screencap is the same bytes, asked the
/// same way, is this PNG again (decoding, scaling and encoding are
/// functions of those): a screen that has not changed (a model waiting
/// for a page, or checking its last tap) is not decoded again.
#[derive(Clone)]
struct Made {
    screencap: Arc<[u8]>,
    region: Option<Region>,
    fit: Option<Fit>,
    png: Arc<[u8]>,
    width: u32,
    height: u32,
    screen_width: u32,
    screen_height: u32,
}

impl Made {
    fn answers(&self, screencap: &[u8], p: &ScreenShotParams) -> bool {
        (self.region, self.fit) == (p.region, p.fit) && *self.screencap == *screencap
    }
}

/// A phone as a [`ComputerClient`].
pub struct PhoneClient {
    shell: Arc<dyn Shell>,
    about: About,
    shot: Mutex<Option<Shot>>,
    shots: std::sync::atomic::AtomicU64,
    /// The last shot's inflated PNG, its memory reused by the next shot
    /// (a phone's 1080x2400 is 10 MB, which a fresh buffer pays for in
    /// page faults each time).
    inflated: Mutex<Vec<u8>>,
    /// The last shot as made, for the next shot of the same screen.
    made: Mutex<Option<Made>>,
    launched: Launched,
    closed: std::sync::atomic::AtomicBool,
    /// The computer's files: the host folders shared with it.
    folders: Vec<Folder>,
    /// The live view's last frame (screen.watch).
    watched: Mutex<watch::Watched>,
}

fn gone(e: ShellError) -> ClientError {
    ClientError::Closed(format!("the phone did not answer: {e}"))
}

fn rpc(e: RpcError) -> ClientError {
    ClientError::Rpc(e)
}

fn to_value<T: Serialize>(v: &T) -> computerd::client::Result<Value> {
    serde_json::to_value(v).map_err(|e| ClientError::Decode {
        method: "phone".into(),
        detail: e.to_string(),
    })
}

impl PhoneClient {
    /// Read what the phone is (`getprop`, `wm size`, `wm density`) and make
    /// its client, which adds each app it launches to `launched`.
    pub async fn new(shell: Arc<dyn Shell>, launched: Launched) -> Result<PhoneClient, ShellError> {
        let props = facts::props(&shell.run("getprop").await?.stdout);
        let prop = |k: &str| {
            props
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let size = shell.run("wm size").await?.stdout;
        let (width, height) = facts::screen_size(&size)
            .ok_or_else(|| ShellError(format!("wm size gave no screen size: {size:?}")))?;
        let density = facts::density(&shell.run("wm density").await?.stdout).unwrap_or(160);
        Ok(PhoneClient {
            shell,
            about: About {
                model: prop("ro.product.model"),
                android: prop("ro.build.version.release"),
                sdk: prop("ro.build.version.sdk"),
                arch: facts::arch(&prop("ro.product.cpu.abi")),
                width,
                height,
                density,
            },
            shot: Mutex::new(None),
            shots: Default::default(),
            inflated: Mutex::new(Vec::new()),
            made: Mutex::new(None),
            launched,
            closed: Default::default(),
            folders: Vec::new(),
            watched: Mutex::default(),
        })
    }

    /// The client with the computer's files: host folders shared with it,
    /// where apps.install finds APKs.
    pub fn with_folders(mut self, folders: Vec<Folder>) -> PhoneClient {
        self.folders = folders;
        self
    }

    pub fn about(&self) -> &About {
        &self.about
    }

    /// What hello says of a phone over adb.
    pub fn hello(&self) -> HelloResult {
        HelloResult {
            version: env!("CARGO_PKG_VERSION").to_string(),
            os: "android".into(),
            kind: MachineKind::Android,
            arch: self.about.arch.clone(),
            groups: groups(self.shell.can_push()),
            bytes_frames: None,
        }
    }

    /// The apps this client launched, which release terminates.
    pub fn launched(&self) -> Vec<String> {
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    async fn screen_shot(&self, params: Value) -> computerd::client::Result<Value> {
        let p: ScreenShotParams = decode_params(Some(params)).map_err(rpc)?;
        // The PNG, decoded here: through the adb server the raw frame's
        // 4 bytes a pixel cost more than the phone's encoding and this
        // decoding together (the bench's figures are in the note).
        let bytes = self.shell.bytes("screencap -p").await.map_err(gone)?;
        let made = {
            let mut last = self.made.lock().unwrap_or_else(|p| p.into_inner());
            match last.as_ref().filter(|m| m.answers(&bytes, &p)) {
                Some(m) => m.clone(),
                None => {
                    let m = self.make(bytes, &p)?;
                    *last = (m.screencap.len() <= MADE_MAX_BYTES).then(|| m.clone());
                    m
                }
            }
        };
        let n = self
            .shots
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let id = format!("shot-{n}");
        let (data, size, eof) = self.hold(&id, &made.png);
        let result = ScreenShotResult {
            id,
            format: ImageFormat::Png,
            data,
            size,
            eof,
            width: made.width,
            height: made.height,
            screen_width: made.screen_width,
            screen_height: made.screen_height,
            // Image pixels per screen pixel: below 1 only when scaled to a fit.
            scale: if p.region.is_some() {
                1.0
            } else {
                f64::from(made.width) / f64::from(made.screen_width)
            },
            cursor: None,
        };
        to_value(&result)
    }

    /// An image's first chunk for an answer (its bytes, size and whether
    /// that is all), the whole held as `id` for screen.read.
    fn hold(&self, id: &str, png: &[u8]) -> (Bytes64, u64, bool) {
        let first = png.len().min(MAX_CHUNK_BYTES as usize);
        *self.shot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Shot {
            id: id.to_string(),
            png: png.to_vec(),
        });
        (
            Bytes64(png[..first].to_vec()),
            png.len() as u64,
            first == png.len(),
        )
    }

    /// What `p` asks of the screencap `bytes`: decoded, cut or scaled, and
    /// encoded.
    fn make(&self, bytes: Vec<u8>, p: &ScreenShotParams) -> computerd::client::Result<Made> {
        let unread = |e: crate::screen::ScreenError| rpc(RpcError::invalid(e.to_string()));
        let (frame, screen_width, screen_height) = {
            let mut inflated = self.inflated.lock().unwrap_or_else(|p| p.into_inner());
            // A region needs the rows down to its last one only.
            let rows = p.region.map(|r| r.y.saturating_add(r.height));
            let shot = Screencap::read_rows(&bytes, &mut inflated, rows).map_err(unread)?;
            let (screen_width, screen_height) = (shot.width(), shot.height());
            let frame = match (p.region, p.fit) {
                (Some(r), _) => {
                    r.check_inside(screen_width, screen_height).map_err(rpc)?;
                    shot.crop(r)
                }
                (None, Some(fit)) => {
                    let (w, h) = fit.size(screen_width, screen_height, false);
                    shot.scaled(w, h)
                }
                (None, None) => shot.frame(),
            }
            .map_err(unread)?;
            (frame, screen_width, screen_height)
        };
        Ok(Made {
            png: frame.png().map_err(rpc)?.into(),
            screencap: bytes.into(),
            region: p.region,
            fit: p.fit,
            width: frame.width,
            height: frame.height,
            screen_width,
            screen_height,
        })
    }

    fn screen_read(&self, params: Value) -> computerd::client::Result<Value> {
        let p: ScreenReadParams = decode_params(Some(params)).map_err(rpc)?;
        let mut held = self.shot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(shot) = held.as_ref().filter(|s| s.id == p.id) else {
            return Err(rpc(RpcError::not_found(format!(
                "no shot {:?} on this connection: only the latest shot is held, until it is read whole",
                p.id
            ))));
        };
        let most = p.max_bytes.unwrap_or(MAX_CHUNK_BYTES).min(MAX_CHUNK_BYTES) as usize;
        let start = (p.offset as usize).min(shot.png.len());
        let end = (start + most).min(shot.png.len());
        let result = ScreenReadResult {
            data: Bytes64(shot.png[start..end].to_vec()),
            eof: end == shot.png.len(),
        };
        if result.eof {
            *held = None;
        }
        to_value(&result)
    }

    async fn input_actions(&self, params: Value) -> computerd::client::Result<Value> {
        let raw = params
            .get("actions")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| {
                rpc(RpcError::invalid_field(
                    "actions",
                    "actions must be a list of actions",
                ))
            })?;
        // The whole params still decode as the protocol's (no stray fields).
        let _: InputActionsParams = decode_params(Some(params)).map_err(rpc)?;
        let refused = |f: ActionFailure| to_value(&InputActionsResult::refused(f));
        let actions = match check_actions_json(&raw, GROUPS, CheckOptions::default()) {
            Ok(a) => a,
            Err(f) => return refused(f),
        };
        for (i, a) in actions.iter().enumerate() {
            if let Some(f) = self.outside(i, a) {
                return refused(f);
            }
        }
        let scripts = match input::scripts(&actions) {
            Ok(s) => s,
            Err(f) => return refused(f),
        };
        let mut done = 0usize;
        for script in scripts {
            match self.shell.run(&script).await {
                Ok(ran) => {
                    done += input::done_in(&ran.stdout);
                    if ran.exit != 0 {
                        return to_value(&InputActionsResult {
                            done: done as u64,
                            failed: Some(ActionFailure {
                                index: done as u64,
                                kind: ErrorKind::Invalid,
                                message: format!(
                                    "actions[{done}] failed on the phone (its input command exited {}); the actions before it ran",
                                    ran.exit
                                ),
                            }),
                        });
                    }
                }
                Err(e) => {
                    return to_value(&InputActionsResult {
                        done: done as u64,
                        failed: Some(ActionFailure {
                            index: done as u64,
                            kind: ErrorKind::Aborted,
                            message: format!(
                                "the phone went away at actions[{done}] ({e}); {done} actions ran before"
                            ),
                        }),
                    });
                }
            }
        }
        to_value(&InputActionsResult {
            done: done as u64,
            failed: None,
        })
    }

    /// A touch outside the screen, refused naming the action and the size.
    fn outside(&self, i: usize, a: &computerd::protocol::Action) -> Option<ActionFailure> {
        use computerd::protocol::Action;
        let points: Vec<[i64; 2]> = match a {
            Action::Tap { point } | Action::LongPress { point, .. } => vec![*point],
            Action::Swipe { path, .. } => path.clone(),
            _ => Vec::new(),
        };
        let (w, h) = (i64::from(self.about.width), i64::from(self.about.height));
        points
            .iter()
            .find(|[x, y]| !(0..w).contains(x) || !(0..h).contains(y))
            .map(|[x, y]| ActionFailure {
                index: i as u64,
                kind: ErrorKind::Invalid,
                message: format!(
                    "actions[{i}] touches ({x}, {y}), outside the {w}x{h} screen; nothing was done"
                ),
            })
    }

    async fn installed(&self) -> computerd::client::Result<Vec<String>> {
        let ran = self.shell.run("pm list packages").await.map_err(gone)?;
        Ok(facts::packages(&ran.stdout))
    }

    /// The id of an app this phone has, or the refusal naming the field.
    async fn app_id(&self, id: &str) -> computerd::client::Result<()> {
        if !facts::is_package(id) {
            return Err(rpc(RpcError::invalid_field(
                "id",
                format!("id {id:?} is not an Android package name (like com.android.settings)"),
            )));
        }
        if !self.installed().await?.iter().any(|p| p == id) {
            return Err(rpc(RpcError::not_found(format!(
                "no app {id} on this phone; apps.list names the ones it has"
            ))
            .with_field("id")));
        }
        Ok(())
    }

    async fn apps_list(&self) -> computerd::client::Result<Value> {
        let apps = self.installed().await?;
        let front = self
            .shell
            .run("dumpsys activity activities")
            .await
            .map_err(gone)?;
        to_value(&AppsListResult {
            apps: apps.into_iter().map(|id| App { id, label: None }).collect(),
            foreground: facts::foreground(&front.stdout),
        })
    }

    async fn apps_launch(&self, params: Value) -> computerd::client::Result<Value> {
        let p: AppsLaunchParams = decode_params(Some(params)).map_err(rpc)?;
        self.app_id(&p.id).await?;
        let resolved = self
            .shell
            .run(&format!("cmd package resolve-activity --brief {}", p.id))
            .await
            .map_err(gone)?;
        let Some(activity) = facts::launcher_activity(&resolved.stdout) else {
            return Err(rpc(RpcError::unsupported(format!(
                "{} has no launcher activity to start",
                p.id
            ))));
        };
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p.id.clone());
        let started = self
            .shell
            .run(&format!("am start -W --activity-clear-task -n {activity}"))
            .await
            .map_err(gone)?;
        if let Some(e) = facts::start_error(&started.stdout) {
            return Err(rpc(RpcError::invalid(format!(
                "{} did not start: {e}",
                p.id
            ))));
        }
        Ok(serde_json::json!({}))
    }

    async fn apps_terminate(&self, params: Value) -> computerd::client::Result<Value> {
        let p: AppsTerminateParams = decode_params(Some(params)).map_err(rpc)?;
        self.app_id(&p.id).await?;
        self.shell
            .run(&format!("am force-stop {}", p.id))
            .await
            .map_err(gone)?;
        Ok(serde_json::json!({}))
    }

    async fn apps_install(&self, params: Value) -> computerd::client::Result<Value> {
        let p: AppsInstallParams = decode_params(Some(params)).map_err(rpc)?;
        if !self.shell.can_push() {
            return Err(rpc(RpcError::unsupported(
                "this phone's transport writes no files, so it installs no APK",
            )));
        }
        match install::install(self.shell.as_ref(), &self.folders, &p.path).await {
            Ok(id) => to_value(&AppsInstallResult { id }),
            Err(InstallError::Refused(e)) => Err(rpc(e)),
            Err(InstallError::Gone(e)) => Err(gone(e)),
            Err(InstallError::Failed(words)) => Err(rpc(RpcError::invalid(words))),
        }
    }

    async fn ui_tree(&self) -> computerd::client::Result<Value> {
        let mut last = None;
        // uiautomator fails now and then while the screen changes ("null
        // root node"); a second dump is what a person would do.
        for _ in 0..2 {
            let ran = self
                .shell
                .run("uiautomator dump /dev/tty")
                .await
                .map_err(gone)?;
            match ui::tree(&ran.stdout, self.about.width, self.about.height) {
                Ok(t) => return to_value(&t),
                Err(e) => last = Some(e),
            }
        }
        let e = last.map(|e| e.to_string()).unwrap_or_default();
        Err(rpc(RpcError::unsupported(e)))
    }

    async fn open_url(&self, params: Value) -> computerd::client::Result<Value> {
        let p: AppsOpenUrlParams = decode_params(Some(params)).map_err(rpc)?;
        let url = intent::check_url(&p.url).map_err(rpc)?;
        let ran = self
            .shell
            .run(&intent::open_url_command(&url))
            .await
            .map_err(gone)?;
        if let Some(e) = intent::open_error(&ran.stdout) {
            return Err(rpc(RpcError::invalid(format!(
                "the phone did not open {url}: {e}"
            ))
            .with_field("url")));
        }
        Ok(serde_json::json!({}))
    }

    async fn orientation(&self, params: Value) -> computerd::client::Result<Value> {
        let p: ScreenOrientationParams = decode_params(Some(params)).map_err(rpc)?;
        if let Some(o) = p.set {
            let ran = self
                .shell
                .run(&intent::set_rotation_command(o))
                .await
                .map_err(gone)?;
            if ran.exit != 0 {
                return Err(rpc(RpcError::invalid(format!(
                    "the phone refused the rotation setting (settings exited {}): {}",
                    ran.exit,
                    ran.stdout.trim()
                ))));
            }
        }
        let ran = self.shell.run(intent::READ_ROTATION).await.map_err(gone)?;
        let (orientation, auto_rotate) =
            intent::rotation(&ran.stdout).map_err(|e| rpc(RpcError::invalid(e)))?;
        to_value(&ScreenOrientationResult {
            orientation,
            auto_rotate,
        })
    }

    /// Terminate what this computer's sessions launched.
    pub async fn terminate_launched(&self) -> Result<(), ShellError> {
        end_launched(self.shell.as_ref(), &self.launched).await
    }
}

/// Terminate each app in `launched` (release leaves the phone as it was
/// but for those), forgetting each once it is stopped.
pub async fn end_launched(shell: &dyn Shell, launched: &Launched) -> Result<(), ShellError> {
    let ids: Vec<String> = launched
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect();
    for id in ids {
        shell.run(&format!("am force-stop {id}")).await?;
        launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
    Ok(())
}

/// The methods a phone answers, for refusals.
const ANSWERS: &str = "hello, ping, screen.shot, screen.read, screen.watch, screen.orientation, input.actions, apps.list, apps.launch, apps.terminate, apps.install, apps.open_url and apps.ui_tree";

impl ComputerClient for PhoneClient {
    fn call_value<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, computerd::client::Result<Value>> {
        Box::pin(async move {
            if self.is_closed() {
                return Err(ClientError::Closed("the connection was closed".into()));
            }
            match method {
                "hello" => to_value(&self.hello()),
                "ping" => {
                    self.shell.run("true").await.map_err(gone)?;
                    Ok(serde_json::json!({}))
                }
                "screen.shot" => self.screen_shot(params).await,
                "screen.read" => self.screen_read(params),
                "screen.watch" => self.screen_watch(params).await,
                "input.actions" => self.input_actions(params).await,
                "apps.list" => self.apps_list().await,
                "apps.launch" => self.apps_launch(params).await,
                "apps.terminate" => self.apps_terminate(params).await,
                "apps.ui_tree" => self.ui_tree().await,
                "apps.install" => self.apps_install(params).await,
                "apps.open_url" => self.open_url(params).await,
                "screen.orientation" => self.orientation(params).await,
                other if computerd::protocol::Method::from_name(other).is_none() => {
                    Err(rpc(RpcError::not_found(format!(
                        "unknown method {other:?}; a phone answers {ANSWERS}"
                    ))
                    .with_code(computerd::protocol::METHOD_NOT_FOUND)))
                }
                other => Err(rpc(RpcError::unsupported(format!(
                    "{other}: a phone over adb has no shell, files or processes in the computer protocol, and no deadline of its own; it answers {ANSWERS}"
                )))),
            }
        })
    }

    fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

mod watch;

#[cfg(test)]
#[path = "client/tests.rs"]
mod tests;
