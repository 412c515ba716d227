//! exec.run: argv as given, separate streams, exit codes, cwd, env,
//! timeouts, aborts, truncation, nothing outliving its run, and an
//! unprivileged user with a HOME of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use computerd::protocol::{ExecParams, FilesStatParams, limits};

use crate::ctx::{Computer, Ctx, Outcome, ensure, fail, fields, sh_argv};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub async fn argv(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let args = ["a b", "", "$HOME", "*", "'\"", "ünï"];
    let mut argv = vec!["printf".to_string(), "[%s]".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let r = t
        .call(
            c,
            &ExecParams {
                argv,
                ..Default::default()
            },
        )
        .await?;
    let want: String = args.iter().map(|a| format!("[{a}]")).collect();
    ensure(text(&r.stdout) == want, || {
        format!(
            "printf got its arguments changed: printed {:?}, want {want:?}",
            text(&r.stdout)
        )
    })
}

pub async fn streams(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let r = t.sh(c, "echo out; echo err >&2; echo out2").await?;
    ensure(
        text(&r.stdout) == "out\nout2\n" && text(&r.stderr) == "err\n",
        || {
            format!(
                "stdout {:?} and stderr {:?}, want \"out\\nout2\\n\" and \"err\\n\"",
                text(&r.stdout),
                text(&r.stderr)
            )
        },
    )
}

pub async fn exit_code(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let r = t.sh(c, "exit 7").await?;
    ensure(r.exit_code == Some(7) && r.signal.is_none(), || {
        format!(
            "exit 7 gave exit code {:?}, signal {:?}",
            r.exit_code, r.signal
        )
    })?;
    let r = t.sh(c, "kill -TERM $$").await?;
    ensure(
        r.exit_code.is_none() && r.signal.as_deref() == Some("TERM"),
        || {
            format!(
                "a program killed by TERM gave exit code {:?}, signal {:?}",
                r.exit_code, r.signal
            )
        },
    )
}

pub async fn cwd(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let dir = t.workdir(c).await?;
    let r = t
        .call(
            c,
            &ExecParams {
                argv: vec!["pwd".into()],
                cwd: Some(dir.clone()),
                ..Default::default()
            },
        )
        .await?;
    ensure(text(&r.stdout).trim_end() == dir, || {
        format!("pwd in {dir} printed {:?}", text(&r.stdout))
    })?;
    let e = t
        .try_call(
            c,
            &ExecParams {
                argv: vec!["pwd".into()],
                cwd: Some("relative/dir".into()),
                ..Default::default()
            },
        )
        .await;
    match e {
        Err(e) if e.kind() == Some(computerd::protocol::ErrorKind::Invalid) => Ok(()),
        other => fail(format!(
            "a relative cwd was not refused as invalid: {other:?}"
        )),
    }
}

pub async fn env(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let env = BTreeMap::from([("CONFORMANCE_VALUE".to_string(), "a b=c".to_string())]);
    let r = t
        .call(
            c,
            &ExecParams {
                argv: sh_argv("printf %s \"$CONFORMANCE_VALUE\""),
                env: Some(env),
                ..Default::default()
            },
        )
        .await?;
    ensure(text(&r.stdout) == "a b=c", || {
        format!(
            "the variable read back as {:?}, want \"a b=c\"",
            text(&r.stdout)
        )
    })
}

pub async fn timeout(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let started = std::time::Instant::now();
    let r = t
        .call(
            c,
            &ExecParams {
                argv: vec!["sleep".into(), "30".into()],
                timeout_ms: Some(500),
                ..Default::default()
            },
        )
        .await?;
    let took = started.elapsed();
    ensure(r.timed_out, || {
        format!("sleep 30 with a 500 ms timeout did not time out: {r:?}")
    })?;
    ensure(took < Duration::from_secs(10), || {
        format!(
            "a 500 ms timeout took {} ms to end the run",
            took.as_millis()
        )
    })
}

/// Whether a process whose command line holds `marker` still runs, seen
/// from inside (the marker is split in the script, so it does not find
/// itself).
async fn running_with(t: &Ctx, c: &Computer, marker: &str) -> Result<bool, Outcome> {
    let (a, b) = marker.split_at(marker.len() / 2);
    let script = format!(
        "m={a}; m=\"$m\"{b}; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q \"$m\" && echo $p; done; true"
    );
    let out = t.sh_ok(c, &script).await?;
    Ok(!out.trim().is_empty())
}

async fn gone_within(
    t: &Ctx,
    c: &Computer,
    marker: &str,
    within: Duration,
) -> Result<bool, Outcome> {
    let until = std::time::Instant::now() + within;
    loop {
        if !running_with(t, c, marker).await? {
            return Ok(true);
        }
        if std::time::Instant::now() >= until {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn abort(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let marker = t.marker();
    let params = ExecParams {
        argv: sh_argv(format!("sleep 60; : {marker}")),
        ..Default::default()
    };
    let call = t.try_call(c, &params);
    // Dropping the call's future cancels it.
    if let Ok(r) = tokio::time::timeout(Duration::from_millis(700), call).await {
        return fail(format!("sleep 60 answered before it was aborted: {r:?}"));
    }
    ensure(
        gone_within(t, c, &marker, Duration::from_secs(5)).await?,
        || "an aborted exec.run's program still runs 5 s after the abort".into(),
    )
}

pub async fn truncation(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let r = t.sh(c, "head -c 1000000 /dev/zero | tr '\\0' x").await?;
    ensure(
        r.truncated && r.stdout.len() as u64 <= limits::MAX_OUTPUT_BYTES,
        || {
            format!(
                "1 MB of output gave {} bytes, truncated {}; the most is {}",
                r.stdout.len(),
                r.truncated,
                limits::MAX_OUTPUT_BYTES
            )
        },
    )?;
    let r = t
        .call(
            c,
            &ExecParams {
                argv: sh_argv("head -c 5000 /dev/zero | tr '\\0' y"),
                max_output: Some(1000),
                ..Default::default()
            },
        )
        .await?;
    ensure(r.truncated && r.stdout.len() <= 1000, || {
        format!(
            "maxOutput 1000 gave {} bytes, truncated {}",
            r.stdout.len(),
            r.truncated
        )
    })
}

pub async fn setsid_escapee(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let marker = t.marker();
    let script =
        format!("setsid sh -c 'sleep 60; : {marker}' </dev/null >/dev/null 2>&1 & echo started");
    let out = t.sh_ok(c, &script).await?;
    ensure(out.trim() == "started", || {
        format!("the run printed {out:?}")
    })?;
    ensure(
        gone_within(t, c, &marker, Duration::from_secs(5)).await?,
        || {
            "a program that left its run's session with setsid still runs 5 s after the run ended"
                .into()
        },
    )
}

pub async fn unprivileged(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let status = t.sh_ok(c, "cat /proc/self/status").await?;
    let f = fields(&status, ':');
    let mut wrong = Vec::new();
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        match f.get(cap) {
            None => wrong.push(format!("{cap} is not reported")),
            Some(v) if v.trim_start_matches('0').is_empty() => {}
            Some(v) => wrong.push(format!("{cap} is {v}")),
        }
    }
    match f.get("NoNewPrivs").map(String::as_str) {
        Some("1") => {}
        Some(v) => wrong.push(format!("NoNewPrivs is {v}")),
        None => wrong.push("NoNewPrivs is not reported".into()),
    }
    match f.get("Uid") {
        Some(u) if u.split_whitespace().all(|x| x != "0") => {}
        Some(u) => wrong.push(format!("a uid is root: Uid {u}")),
        None => wrong.push("Uid is not reported".into()),
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn home_writable(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let out = t.sh_ok(c, "id -u; printf %s \"$HOME\"").await?;
    let mut lines = out.lines();
    let uid: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| Outcome::Fail(format!("id -u printed {out:?}")))?;
    let home = lines.next().unwrap_or("").to_string();
    ensure(home.starts_with('/'), || {
        format!("HOME is {home:?}, not an absolute path")
    })?;
    let st = t
        .call(
            c,
            &FilesStatParams {
                path: home.clone(),
                follow: Some(true),
            },
        )
        .await?;
    ensure(st.uid == uid, || {
        format!(
            "HOME {home} is owned by uid {}, the programs run as {uid}",
            st.uid
        )
    })?;
    let dir = t.workdir(c).await?;
    t.sh_ok(
        c,
        &format!("echo x > '{dir}/written' && cat '{dir}/written'"),
    )
    .await?;
    let r = t
        .sh(
            c,
            "f=/computer-mcp-conformance-$$; echo x > $f && rm -f $f && echo wrote",
        )
        .await?;
    ensure(r.exit_code != Some(0), || {
        format!(
            "the computer's user wrote to / ({})",
            text(&r.stdout).trim()
        )
    })
}

async fn as_user(t: &Ctx, user: &str) -> Result<(), Outcome> {
    let c = t.create(|s| s.user = Some(user.to_string())).await?;
    let status = t.sh_ok(&c, "id -u; id -g; cat /proc/self/status").await?;
    let mut lines = status.lines();
    let uid = lines.next().unwrap_or("").trim().to_string();
    let gid = lines.next().unwrap_or("").trim().to_string();
    let want = user
        .split_once(':')
        .map(|(u, g)| (u.to_string(), g.to_string()));
    ensure(want == Some((uid.clone(), gid.clone())), || {
        format!("the spec asked for {user}, the programs run as {uid}:{gid}")
    })?;
    let f = fields(&status, ':');
    let mut wrong = Vec::new();
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        match f.get(cap) {
            Some(v) if v.trim_start_matches('0').is_empty() => {}
            other => wrong.push(format!("{cap} is {other:?}")),
        }
    }
    if f.get("NoNewPrivs").map(String::as_str) != Some("1") {
        wrong.push(format!("NoNewPrivs is {:?}", f.get("NoNewPrivs")));
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

pub async fn user_uid(t: &Ctx) -> Result<(), Outcome> {
    as_user(t, "4242:4242").await
}

pub async fn user_root(t: &Ctx) -> Result<(), Outcome> {
    as_user(t, "0:0").await
}
