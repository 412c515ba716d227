//! The phone family: the desktop's `screenshot` (a phone declares no
//! pointer, so the mouse tools are not listed), touch tools a model names
//! as a person would (`tap`, `swipe`, `type`, `press_button`), the screen's
//! elements as a short list to tap by ref, and the phone's apps.
//!
//! Points are in the pixels of the last screenshot, as on a desktop (the
//! same frame, mapped to the phone's pixels here and refused before
//! anything is sent when outside it). `list_elements` gives each element a
//! ref (`e3`) and its centre in those pixels; a ref stands for its centre
//! on the phone until the next `list_elements`.

use std::sync::{Arc, Mutex};

use computerd::client::ComputerExt;
use computerd::protocol::{
    Action, AppsInstallParams, AppsLaunchParams, AppsListParams, AppsOpenUrlParams,
    AppsTerminateParams, AppsUiTreeParams, Group, InputActionsParams, Orientation, PhoneButton,
    ScreenOrientationParams, SettingKind, UiNode,
};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContext;
use crate::common;
use crate::define::{hints, listing, with_structured};
use crate::desktop::map::Points;
use crate::desktop::{self, ActOutput, Frame, Stopped};
use crate::error::{Result, ToolError};
use crate::registry::{Family, Needs, ToolDef, ToolSet, handler};

const TOUCH: Needs = Needs::Group(Group::InputTouch);
const KEYS: Needs = Needs::Group(Group::InputKeys);
const APPS: Needs = Needs::Group(Group::Apps);
const TREE: Needs = Needs::Group(Group::AppsUiTree);
const INSTALL: Needs = Needs::Group(Group::AppsInstall);
const SCREEN: Needs = Needs::Group(Group::Screen);

/// The phone's own tools.
#[rustfmt::skip]
pub const PHONE_TOOLS: ToolSet = ToolSet {
    name: "phone",
    tools: &[
        ToolDef::new("list_elements", TREE,  elements_tool,  handler!(list_elements)),
        ToolDef::new("tap",           TOUCH, tap_tool,       handler!(tap)),
        ToolDef::new("double_tap",    TOUCH, double_tool,    handler!(double_tap)),
        ToolDef::new("long_press",    TOUCH, long_tool,      handler!(long_press)),
        ToolDef::new("swipe",         TOUCH, swipe_tool,     handler!(swipe)),
        ToolDef::new("type",          KEYS,  type_tool,      handler!(type_text)),
        ToolDef::new("press_button",  TOUCH, button_tool,    handler!(press_button)),
        ToolDef::new("apps_list",     APPS,  apps_tool,      handler!(apps_list)),
        ToolDef::new("app_launch",    APPS,  launch_tool,    handler!(app_launch)),
        ToolDef::new("app_terminate", APPS,  terminate_tool, handler!(app_terminate)),
        ToolDef::new("app_install",   INSTALL, install_tool, handler!(app_install)),
        ToolDef::new("open_url",      APPS,  url_tool,       handler!(open_url)),
        ToolDef::new("orientation",   SCREEN, turn_tool,     handler!(orientation)),
    ],
    aliases: &[],
};

/// The phone family.
pub const FAMILY: Family = Family {
    kind: SettingKind::Phone,
    instructions: INSTRUCTIONS,
    skill: SKILL_TEXT,
    sets: &[desktop::SHOT_TOOLS, PHONE_TOOLS, common::TOOLS],
    together: &[],
};

/// The phone family's skill.
pub const SKILL_TEXT: &str = include_str!("../../skills/phone/SKILL.md");

const INSTRUCTIONS: &str = "\
This server gives you a phone (Android): a screen you touch, its buttons, \
and its apps. Look with `screenshot` or, cheaper, `list_elements` (each \
element with a ref and its centre); act with `tap`, `swipe`, `type` and \
`press_button`, by ref or by a point in the pixels of your last screenshot. \
Start apps with `app_launch`.";

// ------------------------------------------------------------- elements

/// An element of the last `list_elements`: its ref's number and centre on
/// the phone's screen.
#[derive(Default)]
struct Memo {
    centres: Vec<[i64; 2]>,
}

fn memo(ctx: &ToolContext) -> Arc<Mutex<Memo>> {
    ctx.state.slot::<Mutex<Memo>>()
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElementsArgs {}

/// One element a model can act on.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Element {
    #[serde(rename = "ref")]
    pub reference: String,
    /// Its kind, short: Button, TextView, EditText...
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its id in the app, without the package.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its centre, in the last screenshot's pixels.
    pub at: [i64; 2],
    /// false when it takes no input now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ElementsOutput {
    /// The frame the points are in.
    pub frame: String,
    pub elements: Vec<Element>,
    /// The tree was cut at the protocol's bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

listing!(
    fn elements_tool(_): ElementsArgs => ElementsOutput,
    "List what is on the phone's screen that a person could read or touch, one line each: ref (e1, e2...), kind, \"text\", label, #id, and its centre x,y in the last screenshot's pixels. Tap, long_press and type take the ref. Cheaper than a screenshot; take a new list after the screen changes.",
    hints("List the screen's elements", true, false, true, false)
);

/// Whether a node is worth a model's attention: it says something, or it
/// can be touched.
fn worth(n: &UiNode) -> bool {
    n.bounds.width > 0
        && n.bounds.height > 0
        && (n.text.is_some()
            || n.label.is_some()
            || n.clickable == Some(true)
            || n.scrollable == Some(true))
}

fn short_role(role: &str) -> String {
    role.rsplit('.').next().unwrap_or(role).to_string()
}

fn short_id(id: &str) -> String {
    id.rsplit_once(":id/").map_or(id, |(_, i)| i).to_string()
}

/// The tree's worthy nodes, in document order.
fn flatten(root: &UiNode) -> Vec<&UiNode> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if worth(n) {
            out.push(n);
        }
        stack.extend(n.children.iter().rev());
    }
    out
}

async fn list_elements(ctx: &ToolContext, _a: ElementsArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let tree = ctx
        .client
        .call_typed(&AppsUiTreeParams {})
        .await
        .map_err(|e| ToolError::client("reading the screen's elements", e))?;
    let nodes = flatten(&tree.root);
    let mut centres = Vec::with_capacity(nodes.len());
    let mut elements = Vec::with_capacity(nodes.len());
    let mut lines = Vec::with_capacity(nodes.len() + 1);
    for (i, n) in nodes.iter().enumerate() {
        let b = n.bounds;
        let centre = [
            i64::from(b.x) + i64::from(b.width) / 2,
            i64::from(b.y) + i64::from(b.height) / 2,
        ];
        centres.push(centre);
        let e = Element {
            reference: format!("e{}", i + 1),
            role: short_role(&n.role),
            text: n.text.clone(),
            label: n.label.clone(),
            id: n.id.as_deref().map(short_id),
            at: frame.from_screen(centre),
            disabled: !n.enabled,
        };
        lines.push(element_line(&e));
        elements.push(e);
    }
    memo(ctx).lock().unwrap_or_else(|p| p.into_inner()).centres = centres;
    lines.push(format!(
        "{} elements; x,y in frame {}{}",
        elements.len(),
        frame.id(),
        if tree.truncated {
            "; the screen's tree was cut at its bound"
        } else {
            ""
        }
    ));
    let out = ElementsOutput {
        frame: frame.id(),
        elements,
        truncated: tree.truncated,
    };
    Ok(with_structured(
        CallToolResult::success(vec![ContentBlock::text(lines.join("\n"))]),
        &out,
    ))
}

/// `e3 Button "agentrun fixture" #button 270,1092`: the ref, the kind,
/// the text, the label (when other than the text), `#` and the id, the
/// centre, and `disabled` when it takes no input. A model reads every
/// byte of the list on every screen, so nothing in it repeats a default.
fn element_line(e: &Element) -> String {
    let mut s = format!("{} {}", e.reference, e.role);
    if let Some(t) = &e.text {
        s.push_str(&format!(" {t:?}"));
    }
    if let Some(l) = e.label.as_ref().filter(|l| Some(*l) != e.text.as_ref()) {
        s.push_str(&format!(" label {l:?}"));
    }
    if let Some(i) = &e.id {
        s.push_str(&format!(" #{i}"));
    }
    s.push_str(&format!(" {},{}", e.at[0], e.at[1]));
    if e.disabled {
        s.push_str(" disabled");
    }
    s
}

// ----------------------------------------------------------------- where

/// Where a touch lands: an element's ref from the last `list_elements`,
/// or a point in the last screenshot's pixels.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhereArgs {
    /// An element's ref from the last list_elements (e3).
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// A point's x, in the last screenshot's pixels.
    pub x: Option<i64>,
    /// A point's y, in the last screenshot's pixels.
    pub y: Option<i64>,
}

/// The phone point of `w`, and how to name it in words.
fn point_of(ctx: &ToolContext, frame: &Frame, w: &WhereArgs) -> Result<([i64; 2], String)> {
    match (&w.reference, w.x, w.y) {
        (Some(r), None, None) => {
            let n = r
                .strip_prefix('e')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| ToolError::Invalid(format!("ref {r:?} is not a ref: refs are e1, e2... from list_elements; nothing was sent")))?;
            let centres = memo(ctx).lock().unwrap_or_else(|p| p.into_inner()).centres.clone();
            let at = centres.get(n - 1).copied().ok_or_else(|| {
                ToolError::Invalid(format!(
                    "ref {r} is not in the last list_elements ({} elements); list them again; nothing was sent",
                    centres.len()
                ))
            })?;
            Ok((at, r.clone()))
        }
        (None, Some(x), Some(y)) => Ok((
            frame.to_screen("x, y", [x, y])?,
            format!("[{x}, {y}]"),
        )),
        _ => Err(ToolError::Invalid(
            "give ref (from list_elements), or x and y (in the last screenshot's pixels), not both; nothing was sent".into(),
        )),
    }
}

/// Send `actions`, answering in words what was done.
async fn act(
    ctx: &ToolContext,
    frame: &Frame,
    what: String,
    actions: Vec<Action>,
) -> Result<CallToolResult> {
    let n = actions.len() as u64;
    let r = ctx
        .client
        .call_typed(&InputActionsParams { actions })
        .await
        .map_err(|e| ToolError::client("touching the phone", e))?;
    let failed = r.failed.map(|f| Stopped {
        index: f.index,
        message: f.message,
    });
    let text = match &failed {
        None => format!("{what}: done (frame {})", frame.id()),
        Some(f) if r.done == 0 => format!("{what}: nothing was done: {}", f.message),
        Some(f) => format!(
            "{what}: stopped after {} of {n} steps: {}",
            r.done, f.message
        ),
    };
    let out = ActOutput {
        frame: frame.id(),
        done: r.done,
        failed,
        cursor: None,
        screenshots: Vec::new(),
    };
    Ok(desktop::act_result(text, &out, Vec::new()))
}

// ------------------------------------------------------------------ taps

listing!(
    fn tap_tool(_): WhereArgs => ActOutput,
    "Tap an element by its ref from list_elements, or a point (x, y) in the last screenshot's pixels.",
    hints("Tap", false, true, false, false)
);

async fn tap(ctx: &ToolContext, a: WhereArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let (point, what) = point_of(ctx, &frame, &a)?;
    act(
        ctx,
        &frame,
        format!("tap at {what}"),
        vec![Action::Tap { point }],
    )
    .await
}

listing!(
    fn double_tool(_): WhereArgs => ActOutput,
    "Tap twice quickly (zooms maps and pictures, selects a word), by ref or at x, y in the last screenshot's pixels.",
    hints("Double tap", false, true, false, false)
);

async fn double_tap(ctx: &ToolContext, a: WhereArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let (point, what) = point_of(ctx, &frame, &a)?;
    let taps = vec![Action::Tap { point }, Action::Tap { point }];
    act(ctx, &frame, format!("double tap at {what}"), taps).await
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LongPressArgs {
    /// An element's ref from the last list_elements (e3).
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// A point's x, in the last screenshot's pixels.
    pub x: Option<i64>,
    /// A point's y, in the last screenshot's pixels.
    pub y: Option<i64>,
    /// How long to hold, in ms (default 800, at most 10000).
    pub ms: Option<u64>,
}

listing!(
    fn long_tool(_): LongPressArgs => ActOutput,
    "Press and hold (opens a context menu, starts a drag), by ref or at x, y in the last screenshot's pixels.",
    hints("Long press", false, true, false, false)
);

async fn long_press(ctx: &ToolContext, a: LongPressArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let at = WhereArgs {
        reference: a.reference,
        x: a.x,
        y: a.y,
    };
    let (point, what) = point_of(ctx, &frame, &at)?;
    let press = Action::LongPress { point, ms: a.ms };
    act(ctx, &frame, format!("long press at {what}"), vec![press]).await
}

// ----------------------------------------------------------------- swipe

/// Which way the content moves under the finger's start: `up` moves a
/// list up (shows what is below).
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwipeArgs {
    /// up, down, left or right: a swipe across the middle of the screen
    /// (up moves the content up, showing what is below).
    pub direction: Option<Direction>,
    /// Or from a point [x, y] in the last screenshot's pixels...
    pub from: Option<[i64; 2]>,
    /// ...to another.
    pub to: Option<[i64; 2]>,
    /// How long the swipe takes, in ms (default 300, at most 1000; slower
    /// moves less far in a list).
    pub ms: Option<u64>,
}

listing!(
    fn swipe_tool(_): SwipeArgs => ActOutput,
    "Swipe: a direction (up shows what is below in a list, left the next page), or from one point to another in the last screenshot's pixels.",
    hints("Swipe", false, true, false, false)
);

/// A direction's swipe across the middle of a `w` x `h` screen: from 70%
/// to 30% of it (up and left), or back.
fn across(d: Direction, w: i64, h: i64) -> ([i64; 2], [i64; 2]) {
    let (x, y) = (w / 2, h / 2);
    let near = |n: i64| n * 3 / 10;
    let far = |n: i64| n * 7 / 10;
    match d {
        Direction::Up => ([x, far(h)], [x, near(h)]),
        Direction::Down => ([x, near(h)], [x, far(h)]),
        Direction::Left => ([far(w), y], [near(w), y]),
        Direction::Right => ([near(w), y], [far(w), y]),
    }
}

async fn swipe(ctx: &ToolContext, a: SwipeArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let (from, to, what) = match (a.direction, a.from, a.to) {
        (Some(d), None, None) => {
            let (w, h) = (
                i64::from(frame.screen_width),
                i64::from(frame.screen_height),
            );
            let (f, t) = across(d, w, h);
            (f, t, format!("swipe {}", format!("{d:?}").to_lowercase()))
        }
        (None, Some(f), Some(t)) => (
            frame.to_screen("from", f)?,
            frame.to_screen("to", t)?,
            format!("swipe from [{}, {}] to [{}, {}]", f[0], f[1], t[0], t[1]),
        ),
        (None, Some(_), None) | (None, None, Some(_)) => {
            let given = if a.from.is_some() { "from" } else { "to" };
            return Err(ToolError::Invalid(format!(
                "a swipe is 2 points, from and to (in the last screenshot's pixels), or a direction; only {given} was given, so nothing was sent"
            )));
        }
        _ => {
            return Err(ToolError::Invalid(
                "give direction, or from and to (points in the last screenshot's pixels), not both; nothing was sent".into(),
            ));
        }
    };
    let path = vec![from, to];
    act(ctx, &frame, what, vec![Action::Swipe { path, ms: a.ms }]).await
}

// ------------------------------------------------------------ type, keys

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeArgs {
    /// The text, as it is: printable ASCII, spaces and line breaks (what
    /// Android's input can type).
    pub text: String,
    /// A field's ref from list_elements, tapped first to focus it; none
    /// types where the focus is.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// Press Enter after (submits a search or a form).
    pub submit: Option<bool>,
}

listing!(
    fn type_tool(_): TypeArgs => ActOutput,
    "Type text into the focused field, or into a field by its ref from list_elements (tapped first). submit presses Enter after.",
    hints("Type", false, true, false, false)
);

async fn type_text(ctx: &ToolContext, a: TypeArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let mut actions = Vec::new();
    let mut what = format!("typing {} characters", a.text.chars().count());
    if let Some(r) = &a.reference {
        let at = WhereArgs {
            reference: Some(r.clone()),
            x: None,
            y: None,
        };
        let (point, _) = point_of(ctx, &frame, &at)?;
        actions.push(Action::Tap { point });
        what.push_str(&format!(" into {r}"));
    }
    actions.push(Action::Type { text: a.text });
    if a.submit == Some(true) {
        actions.push(Action::Key {
            keys: vec!["enter".into()],
            repeat: None,
        });
        what.push_str(", then Enter");
    }
    act(ctx, &frame, what, actions).await
}

/// A phone's buttons, and Enter.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ButtonName {
    Back,
    Home,
    AppSwitch,
    Enter,
    VolumeUp,
    VolumeDown,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ButtonArgs {
    /// back, home, app_switch (the recent apps), enter, volume_up or
    /// volume_down.
    pub button: ButtonName,
}

listing!(
    fn button_tool(_): ButtonArgs => ActOutput,
    "Press a phone button: back, home, app_switch (recent apps), enter, volume_up or volume_down.",
    hints("Press a button", false, true, false, false)
);

async fn press_button(ctx: &ToolContext, a: ButtonArgs) -> Result<CallToolResult> {
    let frame = desktop::frame_for_points(ctx).await?;
    let action = match a.button {
        ButtonName::Back => Action::Button {
            button: PhoneButton::Back,
        },
        ButtonName::Home => Action::Button {
            button: PhoneButton::Home,
        },
        ButtonName::AppSwitch => Action::Button {
            button: PhoneButton::AppSwitch,
        },
        ButtonName::Enter => Action::Key {
            keys: vec!["enter".into()],
            repeat: None,
        },
        ButtonName::VolumeUp => Action::Button {
            button: PhoneButton::VolumeUp,
        },
        ButtonName::VolumeDown => Action::Button {
            button: PhoneButton::VolumeDown,
        },
    };
    let name = serde_json::to_value(a.button)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    act(ctx, &frame, format!("the {name} button"), vec![action]).await
}

// ------------------------------------------------------------------ apps

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppsArgs {}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct AppsOutput {
    /// The apps' ids (Android package names), sorted.
    pub apps: Vec<String>,
    /// The app in front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreground: Option<String>,
}

listing!(
    fn apps_tool(_): AppsArgs => AppsOutput,
    "List the phone's apps by id (Android package names such as com.android.settings), and which is in front.",
    hints("List the apps", true, false, true, false)
);

async fn apps_list(ctx: &ToolContext, _a: AppsArgs) -> Result<CallToolResult> {
    let r = ctx
        .client
        .call_typed(&AppsListParams {})
        .await
        .map_err(|e| ToolError::client("listing the apps", e))?;
    let out = AppsOutput {
        apps: r.apps.into_iter().map(|a| a.id).collect(),
        foreground: r.foreground,
    };
    let text = format!(
        "{} apps; in front: {}\n{}",
        out.apps.len(),
        out.foreground.as_deref().unwrap_or("none"),
        out.apps.join("\n")
    );
    Ok(with_structured(
        CallToolResult::success(vec![ContentBlock::text(text)]),
        &out,
    ))
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct AppOutput {
    pub app: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppArgs {
    /// The app's id, as apps_list gives it (com.android.settings).
    pub app: String,
}

listing!(
    fn launch_tool(_): AppArgs => AppOutput,
    "Open an app by its id, at its first screen, in front.",
    hints("Open an app", false, true, true, false)
);

async fn app_launch(ctx: &ToolContext, a: AppArgs) -> Result<CallToolResult> {
    ctx.client
        .call_typed(&AppsLaunchParams { id: a.app.clone() })
        .await
        .map_err(|e| ToolError::client(format!("launching {}", a.app), e))?;
    let text = format!("{} is in front", a.app);
    Ok(crate::define::done(text, &AppOutput { app: a.app }))
}

listing!(
    fn terminate_tool(_): AppArgs => AppOutput,
    "Stop an app by its id, all of it (its next launch starts it afresh).",
    hints("Stop an app", false, true, true, false)
);

async fn app_terminate(ctx: &ToolContext, a: AppArgs) -> Result<CallToolResult> {
    ctx.client
        .call_typed(&AppsTerminateParams { id: a.app.clone() })
        .await
        .map_err(|e| ToolError::client(format!("stopping {}", a.app), e))?;
    let text = format!("{} was stopped", a.app);
    Ok(crate::define::done(text, &AppOutput { app: a.app }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallArgs {
    /// The APK's path in the computer's files: a phone's files are the
    /// host folders shared with the server, at /workspace (such as
    /// /workspace/app.apk).
    pub path: String,
}

listing!(
    fn install_tool(_): InstallArgs => AppOutput,
    "Install (or update) an app from an APK in the computer's files (/workspace/<name>.apk, a folder shared with the server); answers the app's id, to launch it.",
    hints("Install an app", false, true, true, false)
);

async fn app_install(ctx: &ToolContext, a: InstallArgs) -> Result<CallToolResult> {
    let r = ctx
        .client
        .call_typed(&AppsInstallParams {
            path: a.path.clone(),
        })
        .await
        .map_err(|e| ToolError::client(format!("installing {}", a.path), e))?;
    let text = format!("{} installed {}; app_launch opens it", a.path, r.id);
    Ok(crate::define::done(text, &AppOutput { app: r.id }))
}

// ------------------------------------------------------- links, turning

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UrlArgs {
    /// An http or https URL (https://example.com/page).
    pub url: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct UrlOutput {
    pub url: String,
}

listing!(
    fn url_tool(_): UrlArgs => UrlOutput,
    "Open a web address (http or https) on the phone, in the app that takes it: the browser, or an app that claims the link.",
    hints("Open a URL", false, true, false, true)
);

async fn open_url(ctx: &ToolContext, a: UrlArgs) -> Result<CallToolResult> {
    ctx.client
        .call_typed(&AppsOpenUrlParams { url: a.url.clone() })
        .await
        .map_err(|e| ToolError::client("opening the URL", e))?;
    let text = format!(
        "opened {}; take a screenshot or list_elements to see it",
        a.url
    );
    Ok(crate::define::done(text, &UrlOutput { url: a.url }))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnArgs {
    /// portrait or landscape: lock the screen that way (auto-rotate
    /// off). Leave out to read how it is.
    pub set: Option<Turn>,
}

/// How the screen stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Turn {
    Portrait,
    Landscape,
}

impl Turn {
    fn wire(self) -> Orientation {
        match self {
            Turn::Portrait => Orientation::Portrait,
            Turn::Landscape => Orientation::Landscape,
        }
    }

    fn of(o: Orientation) -> Turn {
        match o {
            Orientation::Portrait => Turn::Portrait,
            Orientation::Landscape => Turn::Landscape,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Turn::Portrait => "portrait",
            Turn::Landscape => "landscape",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TurnOutput {
    pub orientation: Turn,
    /// The screen turns as the phone is held.
    pub auto_rotate: bool,
}

listing!(
    fn turn_tool(_): TurnArgs => TurnOutput,
    "Read the screen's orientation, or set it: portrait or landscape (locks it; auto-rotate goes off). Take a new screenshot after a turn: the screenshot's size and points change with it.",
    hints("Screen orientation", false, false, true, false)
);

async fn orientation(ctx: &ToolContext, a: TurnArgs) -> Result<CallToolResult> {
    let r = ctx
        .client
        .call_typed(&ScreenOrientationParams {
            set: a.set.map(Turn::wire),
        })
        .await
        .map_err(|e| ToolError::client("turning the screen", e))?;
    let turn = Turn::of(r.orientation);
    let mut text = match a.set {
        Some(want) if want != turn => format!(
            "rotation locked to {}, but the screen shows {}: the app in front fixes its own orientation",
            want.name(),
            turn.name()
        ),
        Some(_) => format!("the screen is locked in {}", turn.name()),
        None => format!("the screen is in {}", turn.name()),
    };
    text.push_str(if r.auto_rotate {
        " (auto-rotate on: it turns as the phone is held)"
    } else {
        " (auto-rotate off)"
    });
    if a.set.is_some() {
        text.push_str("; take a new screenshot: its size and points follow the screen");
    }
    let out = TurnOutput {
        orientation: turn,
        auto_rotate: r.auto_rotate,
    };
    Ok(crate::define::done(text, &out))
}
