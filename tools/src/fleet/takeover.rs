//! `request_takeover`: the model asks a person to use the screen for it (a
//! login, a captcha, a payment, a judgment call) and waits until they give
//! control back. Offered only where the server serves a viewer and makes
//! computers with a screen ([`super::FleetPolicy::takeover`]).
//!
//! Each kind's listing is held to 20 KB, and a browser's had no room for
//! one more tool: the request is listed inside `computer_view` (its `ask`
//! and `timeout_s`), and answers to its own name too.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Fleet, Which};
use crate::define::{done, parse};
use crate::error::{Result, ToolError};

/// The tool's name.
pub const TAKEOVER_NAME: &str = "request_takeover";
/// How long the call waits when `timeout_s` is left out.
pub const DEFAULT_TIMEOUT_S: u64 = 300;
/// The most `timeout_s` may be.
pub const MAX_TIMEOUT_S: u64 = 1800;
/// How long one of the model's input calls waits, during a takeover it
/// asked for, for the person to give control back (then it is refused).
pub const INPUT_WAIT_S: u64 = 300;
/// The most characters of `reason`.
pub const MAX_REASON_CHARS: usize = 500;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestTakeoverArgs {
    /// What you need the person to do, shown to them above the screen.
    pub reason: String,
    /// Seconds to wait, 1 to 1800 (default 300).
    pub timeout_s: Option<u64>,
    /// Handle or name; default: yours.
    pub computer: Option<String>,
}

/// What a takeover request asks the server.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeoverAsk {
    pub which: Which,
    pub reason: String,
    pub timeout_s: u64,
}

/// How a takeover request ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TakeoverOutcome {
    /// The computer: `build (c-…)`.
    pub computer: String,
    /// `given_back`, `still_held` (the wait ended while the person has
    /// control), `not_taken`, `declined` or `cancelled`.
    pub outcome: String,
    /// The link the person was given (its token ends with it).
    pub url: String,
    /// When the person took control (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<String>,
    /// Seconds the person held control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_s: Option<u64>,
    /// Seconds the call waited in all.
    pub waited_s: u64,
    /// Inputs the person sent while they had control (clicks, keys, texts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<u64>,
    /// A browser's front tab when the request began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_before: Option<PageSeen>,
    /// A browser's front tab when the request ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_after: Option<PageSeen>,
    /// A desktop's or phone's screen: whether its pixels when the request
    /// ended differ from those when it began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen_changed: Option<bool>,
}

/// A browser tab as a person left it or found it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageSeen {
    pub url: String,
    pub title: String,
}

/// What the person changed, in words: the inputs they sent, where a
/// browser's page went, and whether a screen's pixels changed.
fn changed(o: &TakeoverOutcome) -> String {
    let mut w = match o.inputs {
        Some(1) => ", sending 1 input".to_string(),
        Some(n) => format!(", sending {n} inputs"),
        None => String::new(),
    };
    match (&o.page_before, &o.page_after) {
        (Some(b), Some(a)) if b == a => {
            w += &format!("; the page is still {:?} ({})", a.title, a.url);
        }
        (Some(b), Some(a)) => {
            w += &format!(
                "; the page went from {:?} ({}) to {:?} ({})",
                b.title, b.url, a.title, a.url
            );
        }
        (None, Some(a)) => w += &format!("; the page is now {:?} ({})", a.title, a.url),
        _ => {}
    }
    match o.screen_changed {
        Some(true) => w += "; the screen changed",
        Some(false) => w += "; the screen is as it was",
        None => {}
    }
    w
}

/// `a` checked: the first field at fault named, with its limit.
pub fn check(a: RequestTakeoverArgs) -> Result<TakeoverAsk> {
    let invalid = |s: String| ToolError::Invalid(format!("{TAKEOVER_NAME}: {s}"));
    let reason = a.reason.trim().to_string();
    if reason.is_empty() {
        return Err(invalid(
            "reason is empty; say what the person should do (1 to 500 characters)".into(),
        ));
    }
    let n = reason.chars().count();
    if n > MAX_REASON_CHARS {
        return Err(invalid(format!(
            "reason is {n} characters; the most is {MAX_REASON_CHARS}"
        )));
    }
    let timeout_s = match a.timeout_s {
        None => DEFAULT_TIMEOUT_S,
        Some(t) if (1..=MAX_TIMEOUT_S).contains(&t) => t,
        Some(t) => {
            return Err(invalid(format!(
                "timeout_s {t} is out of range; it is 1 to {MAX_TIMEOUT_S} seconds"
            )));
        }
    };
    let which = match &a.computer {
        None => Which::Default,
        Some(c) => Which::parse("computer", c).map_err(invalid)?,
    };
    Ok(TakeoverAsk {
        which,
        reason,
        timeout_s,
    })
}

/// The answer's words for `o`.
pub fn words(o: &TakeoverOutcome) -> String {
    let after = o
        .taken_at
        .as_ref()
        .map(|at| format!("the person took control at {at}"))
        .unwrap_or_default();
    let held = o.held_s.unwrap_or(0);
    let what = match o.outcome.as_str() {
        "given_back" => format!(
            "{after}, gave it back after {held} s{}: the person acted; look at the screen (screenshot) to see what changed",
            changed(o)
        ),
        "still_held" => format!(
            "{after} and still has it after {held} s; each of your input calls on {} waits up to {INPUT_WAIT_S} s for them to give it back, then is refused",
            o.computer
        ),
        "declined" => "the person declined the request; nobody took control".to_string(),
        "cancelled" => "the request was cancelled before anyone took control".to_string(),
        _ => format!("nobody took control within {} s", o.waited_s),
    };
    format!(
        "{what} (computer {}).\nThe link the person was given: {}",
        o.computer, o.url
    )
}

/// `request_takeover` called by its own name.
pub(super) async fn call(args: Value, fleet: &dyn Fleet) -> Result<CallToolResult> {
    let a: RequestTakeoverArgs = parse(TAKEOVER_NAME, args)?;
    let o = ask(a, fleet).await?;
    Ok(done(words(&o), &o))
}

/// Check `a`, then ask and wait.
pub(super) async fn ask(a: RequestTakeoverArgs, fleet: &dyn Fleet) -> Result<TakeoverOutcome> {
    let ask = check(a)?;
    fleet.takeover(ask).await.map_err(ToolError::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(reason: &str, timeout_s: Option<u64>) -> RequestTakeoverArgs {
        RequestTakeoverArgs {
            reason: reason.into(),
            timeout_s,
            computer: None,
        }
    }

    #[test]
    fn bad_input_names_the_field_and_its_limit() {
        let e = |a| check(a).unwrap_err().to_string();
        assert!(e(args("  ", None)).contains("reason is empty"));
        let long = "x".repeat(501);
        assert!(e(args(&long, None)).contains("reason is 501 characters; the most is 500"));
        assert!(
            e(args("log in", Some(0))).contains("timeout_s 0 is out of range; it is 1 to 1800")
        );
        assert!(e(args("log in", Some(1801))).contains("timeout_s 1801 is out of range"));
        let ok = check(args(" log in ", None)).unwrap();
        assert_eq!(
            (ok.reason.as_str(), ok.timeout_s, ok.which),
            ("log in", 300, Which::Default)
        );
    }

    #[test]
    fn the_words_say_what_happened() {
        let mut o = TakeoverOutcome {
            computer: "default (c-1)".into(),
            outcome: "given_back".into(),
            url: "http://127.0.0.1:1/view/c-1#t=x".into(),
            taken_at: Some("2026-01-01T00:00:00Z".into()),
            held_s: Some(7),
            waited_s: 9,
            inputs: Some(3),
            page_before: Some(PageSeen {
                url: "https://a.example/login".into(),
                title: "Log in".into(),
            }),
            page_after: Some(PageSeen {
                url: "https://a.example/home".into(),
                title: "Home".into(),
            }),
            screen_changed: None,
        };
        let w = words(&o);
        assert!(
            w.starts_with(
                "the person took control at 2026-01-01T00:00:00Z, gave it back after 7 s, sending 3 inputs; \
the page went from \"Log in\" (https://a.example/login) to \"Home\" (https://a.example/home): the person acted"
            ),
            "{w}"
        );
        o.page_before = o.page_after.clone();
        o.inputs = None;
        assert!(
            words(&o).contains(
                "gave it back after 7 s; the page is still \"Home\" (https://a.example/home): "
            ),
            "{}",
            words(&o)
        );
        assert!(w.contains(&o.url));
        // A desktop's: whether its screen's pixels changed.
        (o.page_before, o.page_after) = (None, None);
        for (changed, said) in [
            (true, "the screen changed"),
            (false, "the screen is as it was"),
        ] {
            o.screen_changed = Some(changed);
            let want = format!("gave it back after 7 s; {said}: the person acted");
            assert!(words(&o).contains(&want), "{}", words(&o));
        }
        o.outcome = "not_taken".into();
        o.taken_at = None;
        o.held_s = None;
        assert!(words(&o).starts_with("nobody took control within 9 s"));
    }
}
