//! hello, ping, an unknown method, and a kind that agrees with itself.

use computerd::protocol::{ErrorKind, Group, HelloParams, PingParams};

use crate::ctx::{Ctx, Outcome, ensure, fail};
use crate::{Need, core_needs, kind_refusals};

/// The groups only a provider declares (a daemon's hello never lists them).
const PROVIDER_GROUPS: &[Group] = &[Group::Cdp, Group::Stream, Group::Downloads];

pub async fn hello(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let h = t
        .call(
            c,
            &HelloParams {
                client: Some("computer-mcp conformance".into()),
            },
        )
        .await?;
    ensure(!h.version.is_empty(), || "hello's version is empty".into())?;
    ensure(!h.os.is_empty(), || "hello's os is empty".into())?;
    ensure(!h.arch.is_empty(), || "hello's arch is empty".into())?;
    ensure(h == c.conn.hello, || {
        format!(
            "hello answered {h:?} now, but {:?} when the connection was made",
            c.conn.hello
        )
    })
}

pub async fn ping(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    for _ in 0..3 {
        t.call(c, &PingParams {}).await?;
    }
    Ok(())
}

pub async fn unknown_method(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let r = c
        .conn
        .client
        .call_value("conformance.no-such-method", serde_json::json!({}))
        .await;
    match r {
        Ok(v) => fail(format!("an unknown method was answered with {v}")),
        Err(e) if e.kind() == Some(ErrorKind::NotFound) => {
            // The connection still serves.
            t.call(c, &PingParams {}).await?;
            Ok(())
        }
        Err(e) => fail(format!(
            "an unknown method gave {e} (kind {:?}), not kind not_found",
            e.kind()
        )),
    }
}

pub async fn kind_consistent(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let h = &c.conn.hello;
    let caps = &t.caps;
    let mut wrong = kind_refusals(caps.kind, &caps.os, caps.daemon);
    if h.kind != caps.kind {
        wrong.push(format!(
            "hello says kind {}, the provider declares {}",
            h.kind, caps.kind
        ));
    }
    if h.os != caps.os {
        wrong.push(format!(
            "hello says os {}, the provider declares {}",
            h.os, caps.os
        ));
    }
    let mut declared: Vec<Group> = caps
        .groups
        .iter()
        .copied()
        .filter(|g| !PROVIDER_GROUPS.contains(g))
        .collect();
    let mut said = h.groups.clone();
    declared.sort();
    said.sort();
    if declared != said {
        let names = |v: &[Group]| v.iter().map(|g| g.as_str()).collect::<Vec<_>>().join(", ");
        wrong.push(format!(
            "hello declares the groups [{}], the provider [{}]",
            names(&said),
            names(&declared)
        ));
    }
    for need in core_needs(caps.kind, caps.daemon) {
        if let Need::Group(g) = need
            && !caps.groups.contains(&g)
        {
            wrong.push(format!(
                "a {} computer must declare {g}, and the provider does not",
                caps.kind
            ));
        }
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}
