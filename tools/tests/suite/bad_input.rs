//! Every bad input the issue lists gets an isError result whose text names
//! the field and what is allowed, and the session goes on.

use computer_tools::registry;
use computerd::protocol::SettingKind;
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field_and_the_session_goes_on() {
    let s = or_skip!(Sandbox::start().await);
    let home = s.home();
    let cases = [
        // Unknown and mistyped fields.
        ("exec", json!({"command": "ls", "shell": "zsh"}), "exec: unknown field `shell`, expected one of `command`, `argv`, `cwd`, `env`, `stdin`, `timeout_ms`".to_string()),
        ("exec", json!({"command": "ls", "timeout_ms": "5"}), "exec: timeout_ms: invalid type: string \"5\", expected a whole number, 0 or more".to_string()),
        ("exec", json!({"argv": "ls -la"}), "exec: argv: invalid type: string \"ls -la\", expected a list".to_string()),
        ("read_file", json!({}), "read_file: missing field `path`".to_string()),
        ("process_signal", json!({"id": "p1", "signal": "STOP"}), "process_signal: signal: \"STOP\" is not a signal this tool sends: give TERM (15, ask to stop), INT (2, Ctrl-C), HUP (1) or KILL (9, at once)".to_string()),
        ("list_files", json!({"path": home, "depth": -1}), "list_files: depth: invalid value: integer `-1`, expected a whole number, 0 or more".to_string()),
        // command and argv: exactly one.
        ("exec", json!({}), "give command (a shell command line".to_string()),
        ("exec", json!({"command": "ls", "argv": ["ls"]}), "give either command (a shell command line) or argv (a program and its arguments), not both".to_string()),
        ("process_start", json!({"cwd": "/tmp"}), "give command (a shell command line".to_string()),
        ("exec", json!({"argv": []}), "argv must start with the program to run".to_string()),
        // Relative paths.
        ("read_file", json!({"path": "notes.txt"}), format!("path must be an absolute path (starting with /), got \"notes.txt\"; the work directory is {home}, so you may mean \"{home}/notes.txt\"")),
        ("write_file", json!({"path": "a/b.txt", "content": "x"}), "path must be an absolute path".to_string()),
        ("edit_file", json!({"path": "b.txt", "old_string": "x", "new_string": "y"}), "path must be an absolute path".to_string()),
        ("list_files", json!({"path": "."}), format!("you may mean \"{home}\"")),
        ("exec", json!({"command": "ls", "cwd": "src"}), "cwd must be an absolute path".to_string()),
        ("process_start", json!({"command": "ls", "cwd": "~/src"}), format!("you may mean \"{home}/src\"")),
        // Limits.
        ("exec", json!({"command": "ls", "timeout_ms": 600_001}), "timeout_ms is 600001; the most is 600000 (10 min)".to_string()),
        ("exec", json!({"command": "ls", "timeout_ms": 0}), "timeout_ms must be at least 1".to_string()),
        ("process_read", json!({"id": "p1", "wait_ms": 30_001}), "wait_ms is 30001; the most is 30000".to_string()),
        ("list_files", json!({"path": home, "depth": 6}), "depth is 6; the most is 5".to_string()),
        ("read_file", json!({"path": "/etc/hostname", "offset": 0}), "offset is 0; lines are numbered from 1".to_string()),
        ("process_start", json!({"argv": ["sh"], "pty": {"cols": 0}}), "pty.cols is 0; it is 1 to 4096".to_string()),
        ("process_start", json!({"argv": ["sh"], "pty": "yes"}), "pty is \"yes\"; it is true, false, or a size such as {\"cols\": 120, \"rows\": 40}".to_string()),
        ("process_start", json!({"argv": ["sh"], "pty": {"width": 3}}), "unknown field `width`, expected `cols` or `rows`".to_string()),
        ("read_file", json!({"path": "/etc/hostname", "limit": "ten"}), "read_file: limit: invalid type: string \"ten\", expected a whole number, 0 or more".to_string()),
        ("computer_extend", json!({"ttl_minutes": 5000}), "ttl_minutes is 5000; it is 1 to 1440".to_string()),
        // Process ids that do not exist.
        ("process_read", json!({"id": "p999"}), "reading the output of p999: no process p999".to_string()),
        ("process_write", json!({"id": "p999", "input": "x"}), "writing to p999: no process p999".to_string()),
        ("process_signal", json!({"id": "p999", "signal": "KILL"}), "signalling p999: no process p999".to_string()),
        ("process_write", json!({"id": "p1"}), "give input (the text to send) or close: true".to_string()),
        // Edits that cannot be made.
        ("edit_file", json!({"path": "/etc/hostname", "old_string": "", "new_string": "y"}), "old_string is empty".to_string()),
    ];
    for (tool, args, want) in cases {
        let t = s.err(tool, args.clone()).await;
        assert!(
            t.contains(&want),
            "{tool} {args}:\n  got  {t:?}\n  want {want:?}"
        );
        if want.contains("no process p999") {
            assert_has(&t, "process_list");
        }
    }
    // An unknown tool is a protocol error, not a result.
    let sandbox = registry().family(SettingKind::Sandbox).unwrap();
    let e = sandbox.call("format_disk", None, &s.ctx).await.unwrap_err();
    assert!(
        e.message.contains("tool \"format_disk\" not found"),
        "{}",
        e.message
    );
    // No arguments at all read as {}.
    let r = sandbox.call("read_file", None, &s.ctx).await.unwrap();
    assert_eq!(text(&r), "read_file: missing field `path`");
    // The session goes on.
    let (_, v) = s.ok("exec", json!({"command": "echo still here"})).await;
    assert_eq!(v["stdout"], "still here\n");
}
