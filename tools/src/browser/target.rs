//! Where an action lands: a ref, a point of the latest screenshot, or
//! Anthropic's `target` object (either), and the frame points are in.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolContext;
use crate::browser::current;
use crate::browser::dom::{describe_el, resolve};
use crate::browser::pointer::{point_of, viewport};
use crate::browser::{ShotFrame, Tab, with_memo};
use crate::desktop::image;
use crate::error::{Result, ToolError};

/// `target`: a ref as it is ("e12", as Playwright's MCP tools take it), or
/// Anthropic's browser tool's object (an element by ref, or a point).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Target {
    /// A ref from the latest snapshot.
    Plain(String),
    Typed(Typed),
}

/// Listed inline and flat: both forms in one object schema, so the five
/// tools that take a target do not each carry two definitions (about 700
/// bytes apiece of every `tools/list`). Deserializing stays exact: a typed
/// target with a field of the other form is refused.
impl JsonSchema for Target {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Target".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {
                        "type": {"enum": ["ref", "coordinate"]},
                        "ref": {"type": "string"},
                        "x": {"type": "integer"},
                        "y": {"type": "integer"}
                    },
                    "required": ["type"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

/// Anthropic's form of a target.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Typed {
    /// An element by its ref.
    Ref {
        #[serde(rename = "ref")]
        element: String,
    },
    /// A point in the latest screenshot's pixels.
    Coordinate { x: i64, y: i64 },
}

/// Declares a browser tool's argument struct, with the fields that say
/// where it acts written once here (so their words cannot drift apart
/// between tools) and the tool's own fields as they are. `#[serde(flatten)]`
/// would share them as a type, but serde refuses unknown fields through a
/// flatten only without naming what is expected; this keeps one plain
/// struct, so the refusal of an unknown field still lists every field.
///
/// In the body, in the order the fields are listed (and refusals name
/// them): `ref: "what the ref is for this tool",`, `element,`, `point,`
/// (x and y), `target,` (a ref or a point), `ref_target,` (a ref only),
/// `tab_id,`, and the tool's own `pub name: Type,` fields with their docs.
macro_rules! target_args {
    ($(#[$m:meta])* pub struct $name:ident { $($body:tt)* }) => {
        $crate::browser::target::target_args!(@field [$(#[$m])* pub struct $name] [] $($body)*);
        impl $crate::browser::target::InTab for $name {
            fn tab_id(&self) -> Option<&str> {
                self.tab_id.as_deref()
            }
        }
    };
    (@field $head:tt [$($acc:tt)*] ref: $doc:literal, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            #[doc = $doc]
            #[serde(rename = "ref")]
            pub reference: Option<String>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] element, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            /// A few words naming the element, for the record (the ref
            /// decides what is acted on). Taken as Playwright sends it,
            /// not listed: a model reads the listing's `ref`.
            #[schemars(skip)]
            pub element: Option<String>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] point, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            /// Instead of ref: a point in the latest browser_screenshot's pixels.
            pub x: Option<i64>,
            pub y: Option<i64>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] target, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            /// Instead of ref or x, y: "e12", {"type": "ref", "ref": "e12"}
            /// or {"type": "coordinate", "x": 10, "y": 20}. Taken as
            /// Playwright's and Anthropic's tools send it, not listed.
            #[schemars(skip)]
            pub target: Option<$crate::browser::target::Target>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] ref_target, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            /// Instead of ref: "e12" or {"type": "ref", "ref": "e12"}.
            /// Taken as Playwright sends it, not listed.
            #[schemars(skip)]
            pub target: Option<$crate::browser::target::Target>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] tab_id, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)*
            /// From browser_tabs; default: the current tab.
            pub tab_id: Option<String>,
        ] $($rest)*);
    };
    (@field $head:tt [$($acc:tt)*] $(#[$a:meta])* pub $f:ident: $t:ty, $($rest:tt)*) => {
        $crate::browser::target::target_args!(@field $head [$($acc)* $(#[$a])* pub $f: $t,] $($rest)*);
    };
    (@field [$($head:tt)*] [$($acc:tt)*]) => {
        #[derive(Debug, Default, ::serde::Deserialize, ::schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        $($head)* { $($acc)* }
    };
}
pub(crate) use target_args;

/// The ref of a tool that acts on an element only: `ref`, or `target` as
/// a ref ("e12" or Anthropic's ref object); none when neither is given.
pub(crate) fn ref_of(reference: Option<String>, target: Option<Target>) -> Result<Option<String>> {
    match (reference, target) {
        (Some(r), None)
        | (None, Some(Target::Plain(r)))
        | (None, Some(Target::Typed(Typed::Ref { element: r }))) => Ok(Some(r)),
        (None, Some(Target::Typed(Typed::Coordinate { .. }))) => Err(ToolError::Invalid(
            "target is a coordinate; this acts on an element: give its ref; nothing was done"
                .into(),
        )),
        (Some(_), Some(_)) => Err(ToolError::Invalid(
            "give ref or target, not both; nothing was done".into(),
        )),
        (None, None) => Ok(None),
    }
}

/// A page tool's args: the tab it acts in (`tab_id`, made the current tab
/// before the tool runs), or none for the current one.
pub(crate) trait InTab {
    fn tab_id(&self) -> Option<&str>;
}

/// Where an action lands: a ref, or a point of the latest screenshot.
pub(crate) enum Where {
    Ref(String),
    Point(i64, i64),
}

pub(crate) fn where_of(
    element: Option<String>,
    x: Option<i64>,
    y: Option<i64>,
    target: Option<Target>,
) -> Result<Where> {
    match (element, x, y, target) {
        (Some(r), None, None, None) => Ok(Where::Ref(r)),
        (None, Some(x), Some(y), None) => Ok(Where::Point(x, y)),
        (None, None, None, Some(Target::Plain(element)))
        | (None, None, None, Some(Target::Typed(Typed::Ref { element }))) => Ok(Where::Ref(element)),
        (None, None, None, Some(Target::Typed(Typed::Coordinate { x, y }))) => {
            Ok(Where::Point(x, y))
        }
        (None, Some(_), None, None) | (None, None, Some(_), None) => Err(ToolError::Invalid(
            "give both x and y (a point of the latest screenshot); nothing was done".into(),
        )),
        (None, None, None, None) => Err(ToolError::Invalid(
            "give ref (from browser_snapshot), or x and y (in the latest screenshot's pixels); nothing was done".into(),
        )),
        _ => Err(ToolError::Invalid(
            "give one of ref, x and y, or target; nothing was done".into(),
        )),
    }
}

/// Where a pointer action lands, with the tab and words naming it: a ref's
/// element ([`at_ref`]) or a point of the latest screenshot.
pub(crate) async fn landing(
    ctx: &ToolContext,
    field: &str,
    wh: Where,
    nothing: &str,
) -> Result<(Tab, (f64, f64), String)> {
    match wh {
        Where::Ref(raw) => at_ref(ctx, field, &raw, nothing).await,
        Where::Point(x, y) => {
            let tab = current(ctx).await?;
            let f = frame_for_points(ctx, &tab).await?;
            Ok((tab, f.to_viewport(x, y)?, format!("({x}, {y})")))
        }
    }
}

/// The element a ref names, scrolled into view and checked uncovered
/// (`nothing` says what was not done when it is not): its tab, the point
/// to act at and words naming it.
pub(crate) async fn at_ref(
    ctx: &ToolContext,
    field: &str,
    raw: &str,
    nothing: &str,
) -> Result<(Tab, (f64, f64), String)> {
    let (tab, el, n) = resolve(ctx, field, raw).await?;
    let p = point_of(ctx, &tab, &el, n, nothing).await?;
    Ok((tab, p, format!("e{n} ({})", describe_el(&el))))
}

/// The frame points are in: the latest screenshot of this tab, or the
/// space a screenshot would have now.
pub(crate) async fn frame_for_points(ctx: &ToolContext, tab: &Tab) -> Result<ShotFrame> {
    let last = with_memo(ctx, |m| m.frame.clone());
    if let Some((f, _)) = last.filter(|(_, t)| *t == tab.target) {
        return Ok(f);
    }
    let (w, h, _, _) = viewport(ctx, tab).await?;
    let (iw, ih) = image::fit(
        w.round() as u32,
        h.round() as u32,
        ctx.settings.screenshot_max,
        None,
        false,
    );
    Ok(ShotFrame {
        n: 0,
        width: iw,
        height: ih,
        css_width: w,
        css_height: h,
    })
}

#[cfg(test)]
mod tests {
    use crate::browser::tool::click::ClickArgs;
    use crate::browser::tool::upload::UploadArgs;

    /// The fields `target_args!` writes are plain fields of one struct, so
    /// an unknown field is refused by name with every expected field listed.
    #[test]
    fn an_unknown_field_is_refused_by_name_with_the_fields_expected() {
        let e = serde_json::from_value::<ClickArgs>(serde_json::json!({"ref": "e1", "bogus": 1}))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("unknown field `bogus`, expected one of `ref`, `element`, `x`, `y`, `target`, `button`, `click_count`, `modifiers`, `doubleClick`, `tab_id`"),
            "{e}"
        );
        let e = serde_json::from_value::<UploadArgs>(
            serde_json::json!({"ref": "e1", "paths": [], "x": 1}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("unknown field `x`, expected one of `ref`, `element`, `paths`, `tab_id`"),
            "{e}"
        );
    }
}
