//! process.*: output and exit, stdin, signals and the list.

use computerd::client::ComputerExt;
use computerd::protocol::{
    Bytes64, ProcessListParams, ProcessSignalParams, ProcessStartParams, ProcessWaitParams,
    ProcessWaitResult, ProcessWriteParams, Signal, Stream,
};

use crate::ctx::{Computer, Ctx, Outcome, ensure, sh_argv};

/// The process `id` waited for, up to 10 s.
async fn wait(t: &Ctx, c: &Computer, id: &str) -> Result<ProcessWaitResult, Outcome> {
    t.call(
        c,
        &ProcessWaitParams {
            id: id.to_string(),
            timeout_ms: 10_000,
        },
    )
    .await
}

async fn start(t: &Ctx, c: &Computer, script: &str, stdin: bool) -> Result<String, Outcome> {
    let r = t
        .call(
            c,
            &ProcessStartParams {
                argv: sh_argv(script),
                stdin: stdin.then_some(true),
                ..Default::default()
            },
        )
        .await?;
    Ok(r.id)
}

async fn output(c: &Computer, id: &str, stream: Stream) -> Result<String, Outcome> {
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        c.conn.client.read_process_output(id, stream, 0),
    )
    .await
    .map_err(|_| Outcome::Fail(format!("{id}'s {stream} did not end within 30 s")))?
    .map_err(|e| Outcome::Fail(format!("reading {id}'s {stream} failed: {e}")))?;
    Ok(String::from_utf8_lossy(&out.data).into_owned())
}

pub async fn output_exit(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let id = start(t, c, "echo hi; echo err >&2; exit 3", false).await?;
    let out = output(c, &id, Stream::Stdout).await?;
    let err = output(c, &id, Stream::Stderr).await?;
    ensure(out == "hi\n" && err == "err\n", || {
        format!("stdout {out:?} and stderr {err:?}, want \"hi\\n\" and \"err\\n\"")
    })?;
    let w = wait(t, c, &id).await?;
    ensure(!w.running && w.exit_code == Some(3), || {
        format!("exit 3 waited as {w:?}")
    })
}

pub async fn stdin(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let id = start(t, c, "cat; echo done", true).await?;
    t.call(
        c,
        &ProcessWriteParams {
            id: id.clone(),
            data: Some(Bytes64(b"through stdin\n".to_vec())),
            close: Some(true),
        },
    )
    .await?;
    let out = output(c, &id, Stream::Stdout).await?;
    ensure(out == "through stdin\ndone\n", || {
        format!("cat gave {out:?} for what was written to its stdin")
    })
}

pub async fn signal(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let id = start(t, c, "exec sleep 60", false).await?;
    t.call(
        c,
        &ProcessSignalParams {
            id: id.clone(),
            signal: Signal::Term,
        },
    )
    .await?;
    let w = wait(t, c, &id).await?;
    ensure(!w.running && w.signal.as_deref() == Some("TERM"), || {
        format!("after TERM the process waited as {w:?}")
    })
}

pub async fn list(t: &Ctx) -> Result<(), Outcome> {
    let c = t.shared().await?;
    let marker = t.marker();
    let id = start(t, c, &format!("sleep 60; : {marker}"), false).await?;
    let l = t.call(c, &ProcessListParams { from: None }).await?;
    let found = l.processes.iter().find(|p| p.id == id);
    let ok = found.is_some_and(|p| p.running && p.argv.iter().any(|a| a.contains(&marker)));
    let r = ensure(ok, || {
        format!("the started process {id} is listed as {found:?}")
    });
    t.call(
        c,
        &ProcessSignalParams {
            id: id.clone(),
            signal: Signal::Kill,
        },
    )
    .await?;
    r?;
    let w = wait(t, c, &id).await?;
    let l = t.call(c, &ProcessListParams { from: None }).await?;
    let after = l.processes.iter().find(|p| p.id == id);
    ensure(after.is_none_or(|p| !p.running) && !w.running, || {
        format!("after KILL the process is listed as {after:?}")
    })
}
