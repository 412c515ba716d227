//! `exec` end to end: the one-call path, the followed path with progress,
//! the budget, timeouts and cancellation.

use std::time::{Duration, Instant};

use computerd::client::ComputerExt;
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_uname_and_reports_a_failing_command() {
    let s = or_skip!(Sandbox::start().await);
    let (t, v) = s.ok("exec", json!({"command": "uname -a"})).await;
    assert_starts(&t, "exit code: 0\n--- stdout ---\nLinux ");
    assert_eq!(v["exit_code"], 0);
    assert!(v["stdout"].as_str().unwrap().starts_with("Linux "));
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["truncated"], false);

    let (t, v) = s
        .ok(
            "exec",
            json!({"command": "echo out; echo oops >&2; exit 3"}),
        )
        .await;
    assert_eq!(
        t,
        "exit code: 3\n--- stdout ---\nout\n--- stderr ---\noops\n"
    );
    assert_eq!(
        (
            v["exit_code"].as_i64(),
            v["stdout"].as_str(),
            v["stderr"].as_str()
        ),
        (Some(3), Some("out\n"), Some("oops\n"))
    );

    // argv runs without a shell: the space stays inside one argument.
    let (_, v) = s
        .ok("exec", json!({"argv": ["printf", "[%s]", "a b", "$HOME"]}))
        .await;
    assert_eq!(v["stdout"], "[a b][$HOME]");

    let (t, v) = s.ok("exec", json!({"command": "true"})).await;
    assert_eq!(t, "exit code: 0\n(no output)\n");
    assert_eq!(v["stdout_bytes"], 0);

    // A program that does not exist is the daemon's refusal, in its words.
    let t = s.err("exec", json!({"argv": ["no-such-program-x"]})).await;
    assert_starts(&t, "exec failed: no-such-program-x: no such program");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_output_comes_with_a_note_saying_how_to_see_its_bytes() {
    let s = or_skip!(Sandbox::start().await);
    let (t, v) = s
        .ok("exec", json!({"command": "printf 'ok\\377\\376\\n'"}))
        .await;
    assert_eq!(v["stdout"], "ok\u{FFFD}\u{FFFD}\n");
    assert_eq!(
        t,
        "exit code: 0\n--- stdout ---\nok\u{FFFD}\u{FFFD}\n[stdout is binary, not text (bytes that are not UTF-8 text are shown as \u{FFFD}); to see its exact bytes, pipe it through base64 or od -c, or write it to a file and copy that]\n"
    );
    // NUL bytes are UTF-8, but no text.
    let (t, _) = s.ok("exec", json!({"command": "printf 'a\\0b' >&2"})).await;
    assert!(
        t.ends_with("[stderr is binary, not text (it holds NUL bytes); to see its exact bytes, pipe it through base64 or od -c, or write it to a file and copy that]\n"),
        "{t}"
    );
    // Text has no note.
    let (t, _) = s.ok("exec", json!({"command": "echo é"})).await;
    assert_eq!(t, "exit code: 0\n--- stdout ---\né\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_env_and_cwd_reach_the_program() {
    let s = or_skip!(Sandbox::start().await);
    let args = json!({
        "command": "cat; echo \"$FOO\"; pwd",
        "stdin": "fed\n",
        "env": {"FOO": "bar baz"},
        "cwd": "/tmp",
    });
    let (_, v) = s.ok("exec", args.clone()).await;
    assert_eq!(v["stdout"], "fed\nbar baz\n/tmp\n");
    // The work directory is the default cwd.
    let (_, v) = s.ok("exec", json!({"command": "pwd"})).await;
    assert_eq!(v["stdout"], format!("{}\n", s.home()));
    // The followed path (with progress) gives the same.
    let (ctx, _) = s.with_progress();
    let r = s.call_with(&ctx, "exec", args).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        r.structured_content.unwrap()["stdout"],
        "fed\nbar baz\n/tmp\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_over_the_budget_is_cut_in_the_middle_and_saved_whole() {
    let s = or_skip!(Sandbox::start().await);
    let whole: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    let (t, v) = s
        .ok("exec", json!({"command": "seq 1 20000; echo done >&2"}))
        .await;
    assert_eq!(v["truncated"], true);
    assert_eq!(v["overflowed"], false);
    assert_eq!(v["stdout_bytes"], whole.len());
    let shown = v["stdout"].as_str().unwrap();
    assert!(shown.starts_with("1\n2\n3\n"), "{}", &shown[..40]);
    assert!(shown.ends_with("19999\n20000\n"));
    assert!(shown.len() < 24 * 1024 + 200, "{} bytes shown", shown.len());
    let file = v["stdout_file"].as_str().unwrap().to_string();
    assert!(file.starts_with("/tmp/computer-mcp/exec-") && file.ends_with(".stdout"));
    assert_has(shown, &format!("the whole output is in {file}"));
    assert!(t.contains("bytes cut here to fit the output budget"));
    // stderr fitted: shown whole, not saved.
    assert_eq!(v["stderr"], "done\n");
    assert!(v.get("stderr_file").is_none());
    // The file holds the whole output.
    let saved = s.client.read_file(&file).await.unwrap();
    assert_eq!(String::from_utf8(saved).unwrap(), whole);
    std::fs::remove_file(&file).unwrap();

    // The same through the followed path.
    let (ctx, _) = s.with_progress();
    let r = s
        .call_with(&ctx, "exec", json!({"command": "seq 1 20000"}))
        .await;
    let v = r.structured_content.unwrap();
    assert_eq!(v["truncated"], true);
    let file = v["stdout_file"].as_str().unwrap().to_string();
    let saved = s.client.read_file(&file).await.unwrap();
    assert_eq!(String::from_utf8(saved).unwrap(), whole);
    std::fs::remove_file(&file).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_name_the_last_line_of_output() {
    let s = or_skip!(Sandbox::start().await);
    let (ctx, seen) = s.with_progress();
    let r = s
        .call_with(
            &ctx,
            "exec",
            json!({"command": "for i in 1 2 3; do echo line$i; sleep 1; done", "env": s.env()}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let v = r.structured_content.unwrap();
    assert_eq!(v["stdout"], "line1\nline2\nline3\n");
    assert_eq!(v["exit_code"], 0);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter()
            .any(|p| p.message.contains(": line") && p.elapsed_ms >= 1000),
        "{seen:?}"
    );
    assert!(seen[0].message.starts_with("1s: "), "{seen:?}");
    // Nothing is left of the followed run.
    assert_no_leftovers(&s.marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_ends_the_program_and_says_so() {
    let s = or_skip!(Sandbox::start().await);
    let args = json!({"command": "echo begun; sleep 30", "timeout_ms": 500, "env": s.env()});
    let t0 = Instant::now();
    let (t, v) = s.ok("exec", args.clone()).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(
        t.starts_with("timed out after 500 ms; the program was ended by signal TERM"),
        "{t}"
    );
    assert_eq!(
        (v["timed_out"].as_bool(), v["stdout"].as_str()),
        (Some(true), Some("begun\n"))
    );
    assert_no_leftovers(&s.marker);

    // The followed path enforces the timeout itself: TERM, then KILL.
    let (ctx, _) = s.with_progress();
    let t0 = Instant::now();
    let r = s.call_with(&ctx, "exec", args).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    let v = r.structured_content.unwrap();
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["signal"], "TERM");
    assert_eq!(v["stdout"], "begun\n");
    // A program that ignores TERM is killed 2 s later.
    let (ctx, _) = s.with_progress();
    let r = s
        .call_with(
            &ctx,
            "exec",
            json!({"command": "trap '' TERM; echo stubborn; sleep 30", "timeout_ms": 300, "env": s.env()}),
        )
        .await;
    let v = r.structured_content.unwrap();
    assert_eq!(
        (v["timed_out"].as_bool(), v["signal"].as_str()),
        (Some(true), Some("KILL"))
    );
    assert_no_leftovers(&s.marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_exec_leaves_no_process() {
    let s = or_skip!(Sandbox::start().await);
    for with_progress in [false, true] {
        // Cancelled by the token.
        let mut ctx = if with_progress {
            s.with_progress().0
        } else {
            s.ctx.clone()
        };
        ctx.cancel = tokio_util::sync::CancellationToken::new();
        let token = ctx.cancel.clone();
        let call = s.call_with(&ctx, "exec", json!({"command": "sleep 30", "env": s.env()}));
        let cancel = async {
            s.wait_for_marked().await;
            token.cancel();
        };
        let t0 = Instant::now();
        let (r, ()) = tokio::join!(call, cancel);
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("cancelled"), "{}", text(&r));
        assert_no_leftovers_after(&s.marker, &format!("a cancel (progress: {with_progress})"));

        // The call's future dropped.
        let ctx = if with_progress {
            s.with_progress().0
        } else {
            s.ctx.clone()
        };
        let call = s.call_with(&ctx, "exec", json!({"command": "sleep 30", "env": s.env()}));
        tokio::select! {
            _ = call => panic!("sleep 30 ended early"),
            _ = s.wait_for_marked() => {}
        }
        assert_no_leftovers_after(&s.marker, &format!("a drop (progress: {with_progress})"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computer_that_died_says_so() {
    let mut s = or_skip!(Sandbox::start().await);
    s.ok("exec", json!({"command": "true"})).await;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let t = s.err("exec", json!({"command": "true"})).await;
    assert_starts(&t, "the computer is gone (");
    assert_has(&t, "The next tool call will make a new computer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_what_the_tool_keeps_says_exactly_what_was_kept() {
    let s = or_skip!(Sandbox::start().await);
    // 600 KiB: past the 360 KiB the tool keeps of a stream.
    let (t, v) = s
        .ok(
            "exec",
            json!({"command": "head -c 614400 /dev/zero | tr '\\0' x"}),
        )
        .await;
    assert_eq!(v["truncated"], true);
    assert_eq!(v["overflowed"], true);
    let file = v["stdout_file"].as_str().unwrap().to_string();
    let shown = v["stdout"].as_str().unwrap();
    assert!(!shown.contains("the whole output is in"), "{shown}");
    assert_has(
        shown,
        &format!("{file} has the output up to where the tool stopped keeping it"),
    );
    assert!(t.contains("[stdout: "), "the note says what was lost: {t}");
    // The file holds what the tool kept, and says no more than that.
    let (_, w) = s
        .ok("exec", json!({"argv": ["stat", "-c", "%s", file]}))
        .await;
    let kept: u64 = w["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert_eq!(kept, v["stdout_bytes"].as_u64().unwrap());
    assert!(kept <= 360 * 1024, "{kept}");
}

/// `command` runs `bash -c` with the login profile's environment, read
/// once per computer: a command sees what `bash -lc` would show it, and the
/// call's own variables (PATH too) win over the profile's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_sees_the_login_environment_and_its_own_variables_win() {
    let s = or_skip!(Sandbox::start().await);
    // Drop what belongs to one shell, not to the environment.
    let strip = "env | grep -v -E '^(_|SHLVL|PWD|OLDPWD)=' | sort";
    let (_, by_command) = s.ok("exec", json!({"command": strip})).await;
    let (_, by_login) = s
        .ok("exec", json!({"argv": ["/bin/bash", "-lc", strip]}))
        .await;
    assert_eq!(by_command["stdout"], by_login["stdout"]);
    assert!(
        by_command["stdout"].as_str().unwrap().contains("PATH="),
        "{by_command}"
    );
    let (_, v) = s
        .ok(
            "exec",
            json!({"command": "printf '%s %s' \"$PATH\" \"$FOO\"", "env": {"PATH": "/only/here:/usr/bin:/bin", "FOO": "1"}}),
        )
        .await;
    assert_eq!(v["stdout"], "/only/here:/usr/bin:/bin 1");
    // A background process started by command gets it too.
    let (_, p) = s
        .ok(
            "process_start",
            json!({"command": "printf %s \"$HOME\"", "env": {"X": "y"}}),
        )
        .await;
    let id = p["id"].as_str().unwrap().to_string();
    let (_, r) = s
        .ok("process_read", json!({"id": id, "wait_ms": 5000}))
        .await;
    assert!(r.to_string().contains(&s.home()), "{r}");
}
