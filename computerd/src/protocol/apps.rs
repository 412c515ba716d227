//! apps.*: a phone's apps (groups apps and apps.install) and what its
//! screen shows as a tree of UI nodes (group apps.ui_tree). computerd
//! answers none of them: a phone's provider does, in its own process.

use serde::{Deserialize, Serialize};

use super::envelope::RpcError;
use super::limits;
use super::screen::Region;

/// apps.list: the apps on the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsListParams {}

/// One installed app.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// The app's id: its package name on Android, its bundle id on iOS.
    pub id: String,
    /// The name a person sees under its icon, when the device tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AppsListResult {
    pub apps: Vec<App>,
    /// The id of the app in front, when one is (none on a home screen
    /// the device does not count as an app).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground: Option<String>,
}

/// apps.launch: bring an app to the front at its launcher's first screen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsLaunchParams {
    /// The app's id, as apps.list gives it.
    pub id: String,
}

/// apps.terminate: stop an app, all of its processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsTerminateParams {
    /// The app's id, as apps.list gives it.
    pub id: String,
}

/// apps.open_url: open a web address in the app that takes it (the
/// browser, or an app that claims the link).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsOpenUrlParams {
    /// An absolute http or https URL.
    pub url: String,
}

/// apps.install: install a package (an APK on Android) that is already a
/// file in the computer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsInstallParams {
    /// The package's absolute path in the computer's files.
    pub path: String,
}

/// What apps.install installed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AppsInstallResult {
    /// The installed app's id (its package name on Android), as apps.list
    /// and apps.launch take it.
    pub id: String,
}

/// apps.ui_tree: what the screen shows, as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppsUiTreeParams {}

/// The tree: at most 5000 nodes, at most 50 deep. A tree that had more
/// lost the nodes past either bound (in document order) and says so in
/// `truncated`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AppsUiTreeResult {
    pub root: UiNode,
    /// The nodes in `root`, itself included.
    pub nodes: u32,
    /// Nodes were left out to keep to the bounds.
    pub truncated: bool,
}

/// One node of the UI tree. The booleans but `enabled` are there only
/// where the platform says them (a plain label is neither checked nor not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(any(test, feature = "schemas"), derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UiNode {
    /// What the node is: on Android its class (`android.widget.Button`).
    pub role: String,
    /// Its id in the app (an Android resource id), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The text it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its accessibility label (Android's content description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Where it is, in the screenshot's pixels (the points input takes).
    pub bounds: Region,
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clickable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_clickable: Option<bool>,
    /// A field whose text is a secret: its `text` is never given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<UiNode>,
}

impl UiNode {
    /// A node of `role` over `bounds`, enabled, saying nothing else and
    /// with no children yet.
    pub fn new(role: impl Into<String>, bounds: Region) -> UiNode {
        UiNode {
            role: role.into(),
            id: None,
            text: None,
            label: None,
            bounds,
            enabled: true,
            checked: None,
            selected: None,
            focused: None,
            scrollable: None,
            clickable: None,
            long_clickable: None,
            password: None,
            children: Vec::new(),
        }
    }

    /// The nodes of this tree, itself included, and its depth (1 for a
    /// node with no children). Walked without recursion, so a tree that
    /// broke the bounds is measured without a deep stack.
    pub fn measure(&self) -> (usize, usize) {
        let mut count = 0;
        let mut deepest = 0;
        let mut stack = vec![(self, 1)];
        while let Some((node, depth)) = stack.pop() {
            count += 1;
            deepest = deepest.max(depth);
            stack.extend(node.children.iter().map(|c| (c, depth + 1)));
        }
        (count, deepest)
    }
}

impl AppsUiTreeResult {
    /// The check a client's tree passes before it is sent: within
    /// [`limits::MAX_UI_NODES`] and [`limits::MAX_UI_DEPTH`], and `nodes`
    /// the count of `root`.
    pub fn check(&self) -> Result<(), RpcError> {
        let (count, depth) = self.root.measure();
        if count > limits::MAX_UI_NODES {
            return Err(RpcError::limit(format!(
                "the UI tree holds {count} nodes; at most {} go in one apps.ui_tree answer",
                limits::MAX_UI_NODES
            )));
        }
        if depth > limits::MAX_UI_DEPTH {
            return Err(RpcError::limit(format!(
                "the UI tree is {depth} nodes deep; at most {} levels go in one apps.ui_tree answer",
                limits::MAX_UI_DEPTH
            )));
        }
        if count as u64 != u64::from(self.nodes) {
            return Err(RpcError::invalid_field(
                "nodes",
                format!("nodes is {}, but the tree holds {count}", self.nodes),
            ));
        }
        Ok(())
    }
}

/// Check an app's id as `field`: 1 to [`limits::MAX_APP_ID_CHARS`]
/// characters, a letter first, then letters, digits, `.`, `_` and `-`
/// (Android's package names and iOS's bundle ids both fit). A phone's
/// client puts the id in a shell command line, so nothing else may pass.
pub fn check_app_id(field: &str, id: &str) -> Result<(), RpcError> {
    if id.is_empty() {
        return Err(RpcError::invalid_field(
            field,
            format!("{field} is empty; give an app's id such as com.android.settings"),
        ));
    }
    if id.len() > limits::MAX_APP_ID_CHARS {
        return Err(RpcError::invalid_field(
            field,
            format!(
                "{field} is {} characters long; an app's id is at most {}",
                id.len(),
                limits::MAX_APP_ID_CHARS
            ),
        ));
    }
    let first_is_letter = id.as_bytes()[0].is_ascii_alphabetic();
    let bad = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
    if !first_is_letter || bad.is_some() {
        let why = match bad {
            Some(c) => format!("holds {c:?}"),
            None => "does not start with a letter".to_string(),
        };
        return Err(RpcError::invalid_field(
            field,
            format!(
                "{field} {why}; an app's id is letters, digits, '.', '_' and '-', a letter first (such as com.android.settings)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ErrorKind, decode_params};
    use serde_json::json;

    fn node(role: &str, children: Vec<UiNode>) -> UiNode {
        let bounds = Region {
            x: 0,
            y: 0,
            width: 10,
            height: 10,
        };
        UiNode {
            children,
            ..UiNode::new(role, bounds)
        }
    }

    #[test]
    fn a_node_travels_in_camel_case_without_what_it_does_not_say() {
        let mut button = node("android.widget.Button", vec![]);
        button.id = Some("com.example:id/go".into());
        button.text = Some("Go".into());
        button.long_clickable = Some(true);
        let tree = AppsUiTreeResult {
            root: node("android.widget.FrameLayout", vec![button]),
            nodes: 2,
            truncated: false,
        };
        let bounds = json!({"x": 0, "y": 0, "width": 10, "height": 10});
        let wire = json!({
            "root": {
                "role": "android.widget.FrameLayout", "bounds": bounds, "enabled": true,
                "children": [{
                    "role": "android.widget.Button", "id": "com.example:id/go", "text": "Go",
                    "bounds": bounds, "enabled": true, "longClickable": true
                }]
            },
            "nodes": 2,
            "truncated": false
        });
        assert_eq!(serde_json::to_value(&tree).unwrap(), wire);
        assert_eq!(
            serde_json::from_value::<AppsUiTreeResult>(wire).unwrap(),
            tree
        );
        assert!(tree.check().is_ok());
    }

    #[test]
    fn a_tree_past_its_bounds_or_miscounted_is_refused() {
        let wide = AppsUiTreeResult {
            root: node("root", vec![node("leaf", vec![]); limits::MAX_UI_NODES]),
            nodes: limits::MAX_UI_NODES as u32 + 1,
            truncated: false,
        };
        let e = wide.check().unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Limit));
        assert!(e.message.contains("5001 nodes"), "{}", e.message);
        assert!(e.message.contains("at most 5000"), "{}", e.message);

        let mut deep = node("leaf", vec![]);
        for _ in 1..=limits::MAX_UI_DEPTH {
            deep = node("level", vec![deep]);
        }
        let deep = AppsUiTreeResult {
            nodes: limits::MAX_UI_DEPTH as u32 + 1,
            root: deep,
            truncated: false,
        };
        let e = deep.check().unwrap_err();
        assert!(e.message.contains("51 nodes deep"), "{}", e.message);

        let miscounted = AppsUiTreeResult {
            root: node("root", vec![node("leaf", vec![])]),
            nodes: 1,
            truncated: false,
        };
        let e = miscounted.check().unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Invalid));
        assert!(e.message.contains("holds 2"), "{}", e.message);
    }

    #[test]
    fn the_deepest_tree_allowed_decodes_inside_an_envelope() {
        // serde_json refuses JSON nested past 128 levels, and each level of
        // the tree is two (a node and its children): the depth bound keeps
        // the deepest tree, with its envelope, below that.
        let mut deep = node("leaf", vec![]);
        for _ in 1..limits::MAX_UI_DEPTH {
            deep = node("level", vec![deep]);
        }
        let tree = AppsUiTreeResult {
            nodes: limits::MAX_UI_DEPTH as u32,
            root: deep,
            truncated: false,
        };
        assert!(tree.check().is_ok());
        let line = serde_json::to_string(&json!({
            "jsonrpc": "2.0", "id": 1, "result": tree
        }))
        .unwrap();
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        let back: AppsUiTreeResult = serde_json::from_value(back["result"].clone()).unwrap();
        assert_eq!(back.root.measure(), (50, 50));
    }

    #[test]
    fn app_ids_are_names_and_never_shell_words() {
        for ok in [
            "com.android.settings",
            "a",
            "com.apple.mobilesafari",
            "x_y-z.1",
        ] {
            assert!(check_app_id("id", ok).is_ok(), "{ok}");
        }
        for (bad, words) in [
            ("", "id is empty"),
            ("com.x; reboot", "holds ';'"),
            ("com.x y", "holds ' '"),
            ("-rf", "does not start with a letter"),
            ("1com", "does not start with a letter"),
            ("com.x$(id)", "holds '$'"),
        ] {
            let e = check_app_id("id", bad).unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::Invalid), "{bad}");
            assert!(e.message.contains(words), "{bad}: {}", e.message);
        }
        let long = "a".repeat(limits::MAX_APP_ID_CHARS + 1);
        assert!(
            check_app_id("id", &long)
                .unwrap_err()
                .message
                .contains("at most 255")
        );
    }

    #[test]
    fn params_refuse_unknown_fields() {
        let e = decode_params::<AppsLaunchParams>(Some(json!({"id": "a", "activity": "b"})))
            .unwrap_err();
        assert!(e.message.contains("activity"), "{}", e.message);
        let e = decode_params::<AppsUiTreeParams>(Some(json!({"depth": 3}))).unwrap_err();
        assert!(e.message.contains("depth"), "{}", e.message);
        let p: AppsInstallParams =
            decode_params(Some(json!({"path": "/workspace/app.apk"}))).unwrap();
        assert_eq!(p.path, "/workspace/app.apk");
    }
}
