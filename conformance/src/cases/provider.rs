//! The provider's own promises: check, create, attach, list, network,
//! release and stop; network none read from inside; the deadline; drift.

use std::time::Duration;

use computer_providers::types::{
    AttachBy, DaemonMode, ErrorCode, Labels, LifetimeMode, NetworkKind, NetworkPolicy,
    NetworkReadBack, ProviderError, Release,
};
use computerd::client::ComputerExt;
use computerd::launch::ProbeArgs;
use computerd::protocol::{ExecParams, PingParams, ProbeReport, ProcessStartParams};

use crate::RUN_LABEL;
use crate::ctx::{Computer, Ctx, Outcome, bounded, ensure, fail};

/// The computer's network read back (changed first to `policy`), bounded.
async fn network(
    t: &Ctx,
    c: &Computer,
    policy: Option<&NetworkPolicy>,
) -> Result<NetworkReadBack, ProviderError> {
    bounded(
        "network",
        t.bounds.cleanup,
        t.provider.network(&c.computer, policy, &t.cancel),
    )
    .await
}

/// The computer's network read back, or the case fails in words.
async fn read_back(t: &Ctx, c: &Computer) -> Result<NetworkReadBack, Outcome> {
    network(t, c, None)
        .await
        .map_err(|e| Outcome::Fail(format!("network read-back failed: {}", e.message)))
}

/// Labels that find one computer of this case alone.
pub(super) fn case_labels(t: &Ctx) -> Labels {
    let mut l = t.run_labels();
    l.insert(
        "computer-mcp.conformance-case".into(),
        t.case_id.replace('.', "-"),
    );
    l
}

fn parse_time(s: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

pub async fn check_refuses(t: &Ctx) -> Result<(), Outcome> {
    let mut wrong = Vec::new();
    let mut spec = t.spec();
    spec.lifetime_ms = t.caps.max_lifetime_ms.saturating_add(1);
    match t.provider.check(&spec) {
        Ok(()) => wrong.push(format!(
            "check took a lifetime of maxLifetimeMs + 1 ({} ms)",
            spec.lifetime_ms
        )),
        Err(e) if e.field.as_deref() != Some("lifetime") => wrong.push(format!(
            "check refused maxLifetimeMs + 1 naming the field {:?}, not lifetime: {}",
            e.field, e.message
        )),
        Err(_) => {}
    }
    let mut spec = t.spec();
    spec.lifetime_ms = 0;
    if t.provider.check(&spec).is_ok() {
        wrong.push("check took a lifetime of 0".into());
    }
    if let Err(e) = t.provider.check(&t.spec()) {
        wrong.push(format!("check refused the run's own spec: {}", e.message));
    }
    let left = t
        .list(&t.run_labels())
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    // The shared computer may exist; check makes nothing else.
    let made: Vec<&str> = left
        .iter()
        .filter(|r| r.labels.contains_key("computer-mcp.conformance-case"))
        .map(|r| r.id.as_str())
        .collect();
    if !made.is_empty() {
        wrong.push(format!("computers appeared after check alone: {made:?}"));
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn create(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let before = time::OffsetDateTime::now_utc();
    let c = t.create(|s| s.labels = labels.clone()).await?;
    let r = &c.computer;
    let mut wrong = Vec::new();
    if !r.running {
        wrong.push("the new computer's ref says it is not running".to_string());
    }
    if r.provider != t.provider.id() {
        wrong.push(format!("its ref names the provider {:?}", r.provider));
    }
    for (k, v) in &labels {
        if r.labels.get(k) != Some(v) {
            wrong.push(format!(
                "its ref lost the label {k}={v} (has {:?})",
                r.labels.get(k)
            ));
        }
    }
    match parse_time(&r.deadline) {
        Some(d) => {
            let want = before + time::Duration::milliseconds(t.spec().lifetime_ms as i64);
            if (d - want).whole_seconds().abs() > 120 {
                wrong.push(format!(
                    "its deadline {} is not its lifetime from now ({want})",
                    r.deadline
                ));
            }
        }
        None => wrong.push(format!(
            "its deadline {:?} is not an RFC 3339 time",
            r.deadline
        )),
    }
    if t.caps.network_read_back {
        match c.created.as_ref().and_then(|i| i.network.as_ref()) {
            Some(n) if n.kind == NetworkKind::None => {}
            other => wrong.push(format!(
                "create read the network back as {other:?}, not none (the provider declares a read-back)"
            )),
        }
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn attach(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let c = t.create(|s| s.labels = labels.clone()).await?;
    let asked_image = t.spec().image;
    if asked_image.is_none() && c.computer.image.is_none() {
        t.note(format!(
            "no image was asked for and the {} provider reads none back (it runs no image), so attach's image read-back had nothing to hold",
            t.provider.id()
        ));
    }
    let mut wrong: Vec<String> = image_wrong(
        asked_image.as_deref(),
        c.computer.image.as_deref(),
        "create's ref",
        c.computer.image.as_deref(),
    )
    .into_iter()
    .collect();
    let by_id = bounded(
        "attach",
        t.bounds.cleanup,
        t.provider
            .attach(&AttachBy::Id(c.computer.id.clone()), &t.cancel),
    )
    .await;
    let by_labels = bounded(
        "attach",
        t.bounds.cleanup,
        t.provider
            .attach(&AttachBy::Labels(labels.clone()), &t.cancel),
    )
    .await;
    for (how, r) in [("by id", by_id), ("by labels", by_labels)] {
        match r {
            Err(e) => wrong.push(format!("attach {how} failed: {}", e.message)),
            Ok(a) => {
                if a.id != c.computer.id {
                    wrong.push(format!(
                        "attach {how} found {}, not {}",
                        a.id, c.computer.id
                    ));
                }
                for (k, v) in &labels {
                    if a.labels.get(k) != Some(v) {
                        wrong.push(format!(
                            "attach {how} read the label {k} back as {:?}",
                            a.labels.get(k)
                        ));
                    }
                }
                if a.deadline != c.computer.deadline {
                    wrong.push(format!(
                        "attach {how} read the deadline back as {}, create said {}",
                        a.deadline, c.computer.deadline
                    ));
                }
                if let Some(w) = image_wrong(
                    asked_image.as_deref(),
                    c.computer.image.as_deref(),
                    &format!("attach {how}"),
                    a.image.as_deref(),
                ) {
                    wrong.push(w);
                }
                // A vendor's browser runs no program of ours: no user.
                match a.user.as_deref().and_then(|u| u.split_once(':')) {
                    _ if t.caps.daemon == DaemonMode::None => {}
                    Some((u, g)) if u.parse::<u32>().is_ok() && g.parse::<u32>().is_ok() => {
                        if u == "0" {
                            wrong.push(format!(
                                "attach {how} reads the user back as root ({u}:{g})"
                            ));
                        }
                    }
                    _ => wrong.push(format!(
                        "attach {how} reads the user back as {:?}, not uid:gid",
                        a.user
                    )),
                }
            }
        }
    }
    let net = network(t, &c, None).await;
    let asked = t.spec().network.kind();
    match net {
        Ok(n) if n.kind == asked => {}
        Ok(n) => wrong.push(format!(
            "the attached computer's network reads back as {n}, create asked for {asked}"
        )),
        Err(e) => wrong.push(format!(
            "reading the attached computer's network failed: {}",
            e.message
        )),
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

/// What is wrong with the image `who` reads back (`read`): it must be the
/// image create asked for, or with none asked (`asked` None) the one
/// create's ref read back (`created`), the provider's own.
fn image_wrong(
    asked: Option<&str>,
    created: Option<&str>,
    who: &str,
    read: Option<&str>,
) -> Option<String> {
    let shown = |i: Option<&str>| match i {
        Some(i) => format!("the image {i}"),
        None => "no image".to_string(),
    };
    match asked {
        Some(want) if read != Some(want) => Some(format!(
            "create asked for the image {want}, and {who} reads back {}",
            shown(read)
        )),
        None if read != created => Some(format!(
            "create asked for no image and its ref reads back {}, but {who} reads back {}",
            shown(created),
            shown(read)
        )),
        _ => None,
    }
}

pub async fn list(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let c = t.create(|s| s.labels = labels.clone()).await?;
    let found = t
        .list(&labels)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    ensure(ids == [c.computer.id.as_str()], || {
        format!(
            "list by the case's labels found {ids:?}, want [{}]",
            c.computer.id
        )
    })?;
    ensure(found[0].running, || {
        "list shows the new computer not running".into()
    })?;
    let mut other = labels.clone();
    other.insert(RUN_LABEL.into(), format!("{}-other", t.run_id));
    let none = t
        .list(&other)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    ensure(none.is_empty(), || {
        format!(
            "list by another run's label found {:?}",
            none.iter().map(|r| &r.id).collect::<Vec<_>>()
        )
    })
}

pub async fn network_read_back(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let n = read_back(t, c).await?;
    ensure(n.kind == NetworkKind::None, || {
        format!("a computer made with network none reads back as {n}")
    })
}

pub async fn release(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let c = t.create(|s| s.labels = labels.clone()).await?;
    c.conn.client.close();
    t.release(&c.computer, Release::Delete)
        .await
        .map_err(|e| Outcome::Fail(format!("release failed: {}", e.message)))?;
    let mut wrong = Vec::new();
    let found = t
        .list(&labels)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    if !found.is_empty() {
        wrong.push(format!(
            "a deleted computer is still listed: {:?}",
            found.iter().map(|r| (&r.id, r.running)).collect::<Vec<_>>()
        ));
    }
    match t
        .provider
        .attach(&AttachBy::Id(c.computer.id.clone()), &t.cancel)
        .await
    {
        Ok(a) => wrong.push(format!(
            "a deleted computer is still attached by id ({}, running {})",
            a.id, a.running
        )),
        Err(e) if matches!(e.code, ErrorCode::NotFound | ErrorCode::Gone) => {}
        Err(e) => wrong.push(format!(
            "attach to a deleted computer gave {:?}, not not_found: {}",
            e.code, e.message
        )),
    }
    if let Ok(Ok(_)) = tokio::time::timeout(
        Duration::from_secs(30),
        t.provider.connect(&c.computer, &t.cancel),
    )
    .await
    {
        wrong.push("a deleted computer still takes connections".into());
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn stop(t: &Ctx) -> Result<(), Outcome> {
    let labels = case_labels(t);
    let c = t.create(|s| s.labels = labels.clone()).await?;
    c.conn.client.close();
    let declared = t.caps.release.contains(&Release::Stop);
    let r = t.release(&c.computer, Release::Stop).await;
    let found = t
        .list(&labels)
        .await
        .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
    match (declared, r) {
        (true, Err(e)) => fail(format!(
            "the provider declares stop, and stop failed: {}",
            e.message
        )),
        (true, Ok(())) => ensure(found.len() == 1 && !found[0].running, || {
            format!(
                "after stop the computer is listed as {:?}, want it listed and not running until deleted",
                found.iter().map(|r| (&r.id, r.running)).collect::<Vec<_>>()
            )
        }),
        (false, Ok(())) => fail("the provider does not declare stop, and stop did not refuse"),
        (false, Err(e)) => {
            ensure(e.code == ErrorCode::Unsupported, || {
                format!(
                    "stop was refused as {:?}, not unsupported: {}",
                    e.code, e.message
                )
            })?;
            ensure(found.len() == 1 && found[0].running, || {
                "after a refused stop the computer is not listed running".into()
            })
        }
    }
}

pub async fn network_change_refused(t: &Ctx) -> Result<(), Outcome> {
    let policy = if !t.caps.networks.contains(&NetworkKind::Allow) {
        NetworkPolicy::Allow(vec!["example.com:443".into()])
    } else if !t.caps.networks.contains(&NetworkKind::Open) {
        NetworkPolicy::Open
    } else {
        return Err(Outcome::Undeclared {
            need: "an undeclared network".into(),
            why: "the provider declares every network, so there is none to refuse".into(),
        });
    };
    let c = t.shared().await?;
    let r = network(t, c, Some(&policy)).await;
    if let Ok(n) = r {
        return fail(format!(
            "a change to network {}, which the provider does not declare, was taken: it reads {n}",
            policy.kind()
        ));
    }
    let n = read_back(t, c).await?;
    ensure(n.kind == NetworkKind::None, || {
        format!("after a refused change the network reads {n}, not none")
    })
}

/// Targets outside: an address literal over IPv4 and IPv6, and a name.
const OUTSIDE: &[&str] = &[
    "1.1.1.1:443",
    "[2606:4700:4700::1111]:443",
    "example.com:443",
    "1.1.1.1:53/udp",
];

pub async fn network_none(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let probe = ProbeArgs {
        connect: OUTSIDE.iter().map(|s| s.to_string()).collect(),
        diagnose: false,
    };
    let mut argv = vec![t.daemon_path.clone()];
    argv.extend(
        probe
            .to_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned()),
    );
    let r = t
        .call(
            c,
            &ExecParams {
                argv,
                timeout_ms: Some(computerd::protocol::PROBE_TOTAL_MS + 10_000),
                ..Default::default()
            },
        )
        .await?;
    let out = String::from_utf8_lossy(&r.stdout);
    let report: ProbeReport = serde_json::from_str(out.trim()).map_err(|e| {
        Outcome::Fail(format!(
            "{} probe printed no report ({e}): exit {:?}, {}",
            t.daemon_path,
            r.exit_code,
            String::from_utf8_lossy(&r.stderr).trim()
        ))
    })?;
    let mut wrong = Vec::new();
    if !report.reached.is_empty() {
        wrong.push(format!(
            "a computer with network none reached {:?}",
            report.reached
        ));
    }
    if !report.accepted.is_empty() {
        wrong.push(format!(
            "connections to {:?} were accepted (nothing came back)",
            report.accepted
        ));
    }
    if report.interfaces != ["lo"] {
        wrong.push(format!(
            "its interfaces are {:?}, not [\"lo\"] alone",
            report.interfaces
        ));
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn deadline(t: &Ctx) -> Result<(), Outcome> {
    let lifetime_ms = 6_000u64.min(t.caps.max_lifetime_ms);
    let labels = case_labels(t);
    let c = t
        .create(|s| {
            s.lifetime_ms = lifetime_ms;
            s.labels = labels.clone();
        })
        .await?;
    t.call(
        &c,
        &ProcessStartParams {
            argv: vec!["sleep".into(), "600".into()],
            ..Default::default()
        },
    )
    .await?;
    let deadline = parse_time(&c.computer.deadline).ok_or_else(|| {
        Outcome::Fail(format!(
            "the deadline {:?} is not a time",
            c.computer.deadline
        ))
    })?;
    // TERM at the deadline, KILL 2 s later, and some slack for a noisy host.
    let until = deadline + time::Duration::milliseconds(t.bounds.deadline_grace.as_millis() as i64);
    loop {
        if t.caps.lifetime == LifetimeMode::Janitor && time::OffsetDateTime::now_utc() > deadline {
            let _ = bounded("sweep", t.bounds.cleanup, t.provider.sweep(&t.cancel)).await;
        }
        let listed = t
            .list(&labels)
            .await
            .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
        let ended = listed.iter().all(|r| !r.running);
        let answers = matches!(
            tokio::time::timeout(
                Duration::from_secs(5),
                c.conn.client.call_typed(&PingParams {})
            )
            .await,
            Ok(Ok(_))
        );
        if ended && !answers {
            return Ok(());
        }
        if time::OffsetDateTime::now_utc() > until {
            return fail(format!(
                "the computer runs past its deadline {} (listed running: {}, answers ping: {answers})",
                c.computer.deadline, !ended
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn drift(t: &Ctx) -> Result<(), Outcome> {
    let Some(drifted) = t.drifted.clone() else {
        return Err(Outcome::Skip("no drifted provider was given".into()));
    };
    // A refusal counts only from a provider that makes computers at all:
    // the run's own must, or the drifted one's refusal proves nothing.
    t.shared().await?;
    let labels = case_labels(t);
    let mut spec = t.spec();
    spec.labels = labels.clone();
    match t.attempt(&drifted, &spec).await {
        Err(_) => {
            // Refused at create: it must have deleted what it made.
            let left = t
                .list(&labels)
                .await
                .map_err(|e| Outcome::Fail(format!("list failed: {}", e.message)))?;
            ensure(left.is_empty(), || {
                format!(
                    "create refused the drifted daemon but left its computer: {:?}",
                    left.iter().map(|r| &r.id).collect::<Vec<_>>()
                )
            })
        }
        Ok(made) => match bounded(
            "connect",
            t.bounds.create,
            drifted.connect(&made.computer, &t.cancel),
        )
        .await
        {
            Err(_) => Ok(()),
            Ok(conn) => {
                let version = conn.hello.version.clone();
                conn.client.close();
                fail(format!(
                    "a computer whose daemon reports version {version} (this suite's is {}) was handed out: create and connect both took it",
                    computerd::VERSION
                ))
            }
        },
    }
}
