//! What the page tools remember of one browser, per caller: each caller's
//! own memo, and whose each tab is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::BrowserMemo;
use crate::ToolContext;

/// The page tools' memory of one browser: each caller's own memo (its
/// current tab, refs, snapshots), and whose each tab is. A caller sees and
/// acts on its own tabs only: two agents on one browser work side by side.
#[derive(Debug, Default)]
pub struct Pages {
    pub(super) memos: HashMap<String, BrowserMemo>,
    /// Each page tab's caller, by target id: the caller that opened it,
    /// the opener's caller for a tab a page opened, else the first caller
    /// that saw it.
    pub(super) owners: HashMap<String, String>,
}

fn pages(ctx: &ToolContext) -> Arc<Mutex<Pages>> {
    ctx.state.slot::<Mutex<Pages>>()
}

/// Read or change every caller's pages at once (never held across an
/// await).
pub(super) fn with_pages<T>(ctx: &ToolContext, f: impl FnOnce(&mut Pages) -> T) -> T {
    let p = pages(ctx);
    let mut g = p.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

/// Read or change the calling caller's memo (never held across an await).
pub(crate) fn with_memo<T>(ctx: &ToolContext, f: impl FnOnce(&mut BrowserMemo) -> T) -> T {
    with_pages(ctx, |p| {
        let m = p.memos.entry(ctx.caller.clone()).or_default();
        if m.next_ref == 0 {
            m.next_ref = 1;
        }
        f(m)
    })
}
