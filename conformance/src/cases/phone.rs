//! A phone's touch, keys and apps cases. A phone has no files or
//! processes in the protocol, so each case acts through input.actions and
//! apps.* and reads the effect back through apps.ui_tree, on the fixture
//! app `ai.agentrun.fixture` (fixtures/phone/README.md): a status text
//! that says what the last touch did, a search field that takes text, a
//! list of rows, and a button `ai.agentrun.fixture:id/button`. A phone
//! without that app skips them in words.

use std::time::Duration;

use computerd::protocol::{
    AppsInstallParams, AppsLaunchParams, AppsListParams, AppsTerminateParams, AppsUiTreeParams,
    ErrorKind, Region, UiNode,
};
use serde_json::json;

use super::desktop::actions;
use crate::ctx::{Computer, Ctx, Outcome, ensure, fail};

/// The fixture app and its views' ids.
pub const FIXTURE_APP: &str = "ai.agentrun.fixture";
const BUTTON: &str = "ai.agentrun.fixture:id/button";
const STATUS: &str = "ai.agentrun.fixture:id/status";
const SEARCH: &str = "ai.agentrun.fixture:id/search";
const LIST: &str = "ai.agentrun.fixture:id/list";
const ROW: &str = "ai.agentrun.fixture:id/row";
/// What input.type-text types, as on a desktop.
const TYPED: &str = "Hello, agentrun! 123";

/// Every node of a tree, in document order.
fn nodes(root: &UiNode) -> Vec<&UiNode> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        out.push(n);
        stack.extend(n.children.iter().rev());
    }
    out
}

fn by_id<'a>(root: &'a UiNode, id: &str) -> Option<&'a UiNode> {
    nodes(root)
        .into_iter()
        .find(|n| n.id.as_deref() == Some(id))
}

fn centre(r: &Region) -> [i64; 2] {
    [
        i64::from(r.x) + i64::from(r.width) / 2,
        i64::from(r.y) + i64::from(r.height) / 2,
    ]
}

async fn tree(t: &Ctx, c: &Computer) -> Result<UiNode, Outcome> {
    Ok(t.call(c, &AppsUiTreeParams {}).await?.root)
}

async fn front(t: &Ctx, c: &Computer) -> Result<Option<String>, Outcome> {
    Ok(t.call(c, &AppsListParams {}).await?.foreground)
}

/// The shared phone with the fixture app launched in front, and its tree.
async fn fixture(t: &Ctx) -> Result<(&Computer, UiNode), Outcome> {
    let c = t.shared().await?;
    let apps = t.call(c, &AppsListParams {}).await?;
    if !apps.apps.iter().any(|a| a.id == FIXTURE_APP) {
        return Err(Outcome::Skip(format!(
            "the phone has no fixture app {FIXTURE_APP}, so no way to observe a touch: install it first"
        )));
    }
    t.call(
        c,
        &AppsLaunchParams {
            id: FIXTURE_APP.into(),
        },
    )
    .await?;
    let root = tree(t, c).await?;
    ensure(by_id(&root, BUTTON).is_some(), || {
        format!("{FIXTURE_APP} is launched but its tree has no {BUTTON}")
    })?;
    Ok((c, root))
}

fn text_of(root: &UiNode, id: &str) -> Result<String, Outcome> {
    match by_id(root, id) {
        Some(n) => Ok(n.text.clone().unwrap_or_default()),
        None => fail(format!("the fixture's tree has no {id}")),
    }
}

/// A tap on the fixture's button shows in its status as a tap there.
pub async fn tap(t: &Ctx) -> Result<(), Outcome> {
    let (c, root) = fixture(t).await?;
    let Some(button) = by_id(&root, BUTTON).map(|n| n.bounds) else {
        return fail(format!("the fixture's tree has no {BUTTON}"));
    };
    let [x, y] = centre(&button);
    let r = actions(c, json!([{"type": "tap", "point": [x, y]}])).await?;
    ensure(r.done == 1 && r.failed.is_none(), || {
        format!("a tap at ({x}, {y}) answered {r:?}")
    })?;
    let status = text_of(&tree(t, c).await?, STATUS)?;
    ensure(status.starts_with("Tapped button"), || {
        format!(
            "after a tap on the button at ({x}, {y}) the status reads {status:?}, want \"Tapped button at …\""
        )
    })
}

/// A swipe up inside the list moves its rows up.
pub async fn swipe(t: &Ctx) -> Result<(), Outcome> {
    let (c, root) = fixture(t).await?;
    let Some(list) = by_id(&root, LIST).map(|n| n.bounds) else {
        return fail(format!("the fixture's tree has no {LIST}"));
    };
    let rows = |root: &UiNode| -> Vec<(String, i64)> {
        nodes(root)
            .into_iter()
            .filter(|n| n.id.as_deref() == Some(ROW))
            .map(|n| (n.text.clone().unwrap_or_default(), i64::from(n.bounds.y)))
            .collect()
    };
    let before = rows(&root);
    let Some((name, top)) = before.last().cloned() else {
        return fail("the fixture's list shows no rows");
    };
    let [x, _] = centre(&list);
    let (y0, y1) = (
        i64::from(list.y) + i64::from(list.height) * 4 / 5,
        i64::from(list.y) + i64::from(list.height) / 5,
    );
    let r = actions(
        c,
        json!([{"type": "swipe", "path": [[x, y0], [x, y1]], "ms": 300}]),
    )
    .await?;
    ensure(r.done == 1 && r.failed.is_none(), || {
        format!("a swipe answered {r:?}")
    })?;
    let after = rows(&tree(t, c).await?);
    let moved = after.iter().find(|(n, _)| *n == name).map(|(_, y)| *y);
    ensure(moved.is_some_and(|y| y < top), || {
        format!(
            "after a swipe from ({x}, {y0}) to ({x}, {y1}) {name:?} is at {moved:?}, was at y {top}: the list did not move up"
        )
    })
}

/// A pinch: a phone over adb has one finger, and refuses it in words.
pub async fn pinch(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let r = actions(
        c,
        json!([{"type": "pinch", "point": [100, 100], "scale": 2.0}]),
    )
    .await?;
    match r.failed {
        Some(f) if r.done == 0 => Err(Outcome::Skip(format!(
            "the phone refuses a pinch: {}",
            f.message
        ))),
        Some(f) => fail(format!("a pinch ran {} actions and then failed: {}", r.done, f.message)),
        None => Err(Outcome::Skip(
            "the phone took a pinch, and the suite has no witness of two fingers on a phone without files".into(),
        )),
    }
}

/// Text typed into the focused search field reads back exactly.
pub async fn type_text(t: &Ctx) -> Result<(), Outcome> {
    let (c, root) = fixture(t).await?;
    let Some(field) = by_id(&root, SEARCH).map(|n| n.bounds) else {
        return fail(format!("the fixture's tree has no {SEARCH}"));
    };
    let r = actions(
        c,
        json!([{"type": "tap", "point": centre(&field)}, {"type": "type", "text": TYPED}]),
    )
    .await?;
    ensure(r.done == 2 && r.failed.is_none(), || {
        format!("a tap and typing answered {r:?}")
    })?;
    let got = text_of(&tree(t, c).await?, SEARCH)?;
    ensure(got.ends_with(TYPED), || {
        format!("after typing {TYPED:?} the search field reads {got:?}")
    })
}

/// A batch whose second action names an unknown key runs nothing.
pub async fn key_table_refuses_unknown(t: &Ctx) -> Result<(), Outcome> {
    let (c, root) = fixture(t).await?;
    let before = text_of(&root, SEARCH)?;
    let r = actions(
        c,
        json!([{"type": "type", "text": "x"}, {"type": "key", "keys": ["Hyper_Q"]}]),
    )
    .await?;
    let got = r.failed.as_ref().map(|f| (r.done, f.index, f.kind));
    ensure(got == Some((0, 1, ErrorKind::Invalid)), || {
        format!(
            "a batch with the key Hyper_Q answered {r:?}, want done 0, failed index 1, kind invalid"
        )
    })?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = text_of(&tree(t, c).await?, SEARCH)?;
    ensure(after == before, || {
        format!("the refused batch still typed: the search field went from {before:?} to {after:?}")
    })
}

/// An app launched is in front, and once terminated is not.
pub async fn launch_terminate(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let apps = t.call(c, &AppsListParams {}).await?;
    // The fixture app where it is, else Settings, which every phone has.
    let Some(id) = [FIXTURE_APP, "com.android.settings"]
        .into_iter()
        .find(|id| apps.apps.iter().any(|a| a.id == *id))
    else {
        return fail("apps.list names neither the fixture app nor com.android.settings");
    };
    launched_then_ended(t, c, id).await
}

async fn launched_then_ended(t: &Ctx, c: &Computer, id: &str) -> Result<(), Outcome> {
    t.call(c, &AppsLaunchParams { id: id.into() }).await?;
    let now = front(t, c).await?;
    ensure(now.as_deref() == Some(id), || {
        format!("after apps.launch of {id} apps.list has {now:?} in front")
    })?;
    t.call(c, &AppsTerminateParams { id: id.into() }).await?;
    let now = front(t, c).await?;
    ensure(now.as_deref() != Some(id), || {
        format!("after apps.terminate of {id} it is still in front")
    })
}

/// The tree is typed as the protocol says, inside the screen, and has the
/// fixture's button by its id and text.
pub async fn ui_tree_shape(t: &Ctx) -> Result<(), Outcome> {
    let (c, _) = fixture(t).await?;
    let r = t.call(c, &AppsUiTreeParams {}).await?;
    let all = nodes(&r.root);
    ensure(all.len() as u64 == u64::from(r.nodes), || {
        format!("nodes says {} but the tree holds {}", r.nodes, all.len())
    })?;
    let shot = t
        .call(
            c,
            &computerd::protocol::ScreenShotParams {
                region: None,
                fit: None,
            },
        )
        .await?;
    let (w, h) = (u64::from(shot.width), u64::from(shot.height));
    for n in &all {
        let b = n.bounds;
        ensure(!n.role.is_empty(), || format!("a node has no role: {n:?}"))?;
        ensure(
            u64::from(b.x) + u64::from(b.width) <= w && u64::from(b.y) + u64::from(b.height) <= h,
            || format!("{} {:?} is outside the {w}x{h} screenshot", n.role, b),
        )?;
    }
    let button = by_id(&r.root, BUTTON);
    ensure(
        button.is_some_and(|b| b.text.as_deref() == Some("agentrun fixture") && b.enabled),
        || {
            format!(
                "the button {BUTTON} reads {button:?}, want the text \"agentrun fixture\", enabled"
            )
        },
    )
}

/// The fixture APK (given to the run) installed from the phone's files,
/// listed, in front when launched and not once terminated.
pub async fn install_launch(t: &Ctx) -> Result<(), Outcome> {
    let Some(apk) = t
        .fixture
        .as_ref()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("apk")))
    else {
        return Err(Outcome::Skip(
            "no fixture APK was given (--fixture <app>.apk), so there is nothing to install".into(),
        ));
    };
    let Some(files) = &t.phone_files else {
        return Err(Outcome::Skip(
            "the phone has no files from the run (no run folder, or the provider refuses a shared folder), so no APK can reach it".into(),
        ));
    };
    let name = format!("{}.apk", t.marker());
    std::fs::copy(apk, files.join(&name)).map_err(|e| {
        Outcome::Fail(format!(
            "copying {} into the run's folder: {e}",
            apk.display()
        ))
    })?;
    let c = t.shared().await?;
    let got = t
        .call(
            c,
            &AppsInstallParams {
                path: format!("/workspace/{name}"),
            },
        )
        .await?;
    let apps = t.call(c, &AppsListParams {}).await?;
    ensure(apps.apps.iter().any(|a| a.id == got.id), || {
        format!("apps.install named {} but apps.list does not", got.id)
    })?;
    launched_then_ended(t, c, &got.id).await
}
