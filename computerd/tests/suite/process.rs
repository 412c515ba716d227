//! process.* end to end.

use std::time::{Duration, Instant};

use computerd::client::ComputerExt;
use computerd::protocol::*;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_outlives_its_call_and_its_output_is_read_by_offset() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init
        .start_script(&c, "echo one; sleep 0.3; echo two >&2; exit 4")
        .await;
    assert_eq!(p.id, "p1");
    assert!(p.pid > 0);
    assert_eq!(output_of(&c, &p.id, Stream::Stdout).await, b"one\n");
    assert_eq!(output_of(&c, &p.id, Stream::Stderr).await, b"two\n");
    let w = wait_end(&c, &p.id).await;
    assert_eq!(
        w,
        ProcessWaitResult {
            running: false,
            exit_code: Some(4),
            signal: None
        }
    );
    // A read from the middle, and one past the end.
    let r = c
        .call(&read_at(&p.id, Stream::Stdout, 2, None))
        .await
        .unwrap();
    assert_eq!(
        (r.data.0.as_slice(), r.next_offset, r.exited, r.size),
        (b"e\n".as_slice(), 4, true, 4)
    );
    let e = refused(
        &c,
        &read_at(&p.id, Stream::Stdout, 5, None),
        ErrorKind::Invalid,
    )
    .await;
    assert!(e.to_string().contains("past the end of stdout"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_with_wait_ms_waits_for_output_without_polling() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init.start_script(&c, "sleep 0.5; echo late").await;
    let t = Instant::now();
    let r = c
        .call(&read_at(&p.id, Stream::Stdout, 0, Some(5000)))
        .await
        .unwrap();
    let took = t.elapsed();
    assert_eq!(r.data.0, b"late\n");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    // Nothing comes: the wait ends at waitMs with no data.
    let q = init.start_script(&c, "sleep 30").await;
    let t = Instant::now();
    let r = c
        .call(&read_at(&q.id, Stream::Stdout, 0, Some(300)))
        .await
        .unwrap();
    assert!(r.data.is_empty() && !r.exited);
    assert!(t.elapsed() >= Duration::from_millis(280));
    refused(
        &c,
        &read_at(&q.id, Stream::Stdout, 0, Some(30_001)),
        ErrorKind::Limit,
    )
    .await;
    signal(&c, &q.id, Signal::Kill).await;
    assert_eq!(wait_end(&c, &q.id).await.signal.as_deref(), Some("KILL"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_mebibytes_read_from_offset_zero_report_what_the_ring_dropped() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init
        .start_script(&c, "head -c 20971520 /dev/zero | tr '\\0' x")
        .await;
    wait_end(&c, &p.id).await;
    let r = c
        .call(&read_at(&p.id, Stream::Stdout, 0, Some(1000)))
        .await
        .unwrap();
    let mib = 1u64 << 20;
    assert_eq!(r.size, 20 * mib);
    assert_eq!(r.dropped, 12 * mib);
    assert_eq!(r.data.len() as u64, limits::MAX_CHUNK_BYTES);
    assert_eq!(r.next_offset, 12 * mib + limits::MAX_CHUNK_BYTES);
    assert!(r.data.iter().all(|&b| b == b'x'));
    assert!(!r.exited);
    let rest = c
        .read_process_output(&p.id, Stream::Stdout, r.next_offset)
        .await
        .unwrap();
    assert_eq!(rest.dropped, 0);
    assert_eq!(r.data.len() + rest.data.len(), 8 << 20);
}

/// A held stdout lets no byte go: 20 MiB written at once, more than the
/// 8 MiB ring, are all read in order by a reader that starts late, while
/// the same program unheld loses 12 MiB of them (above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_stdout_keeps_every_byte_for_a_slow_reader() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut sp = start_sh(
        "head -c 20971520 /dev/urandom | od -An -tx1 -v | head -c 20971520",
        &init.marker,
    );
    sp.hold = Some(true);
    let p: ProcessStartResult = c.call(&sp).await.unwrap();
    // Late: the program has long filled the ring by now, were it let.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut offset = 0;
    let mut got = Vec::new();
    loop {
        let r = c
            .call(&read_at(&p.id, Stream::Stdout, offset, Some(5000)))
            .await
            .unwrap();
        assert_eq!(r.dropped, 0, "at {offset}");
        got.extend_from_slice(&r.data);
        offset = r.next_offset;
        if r.exited {
            break;
        }
    }
    assert_eq!(got.len(), 20 << 20);
    // od's lines, each whole: nothing was cut out of the middle.
    assert!(
        got.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .all(|l| l.len() == 48 || got.ends_with(l)),
        "a line was cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_writes_reach_the_program_and_close_ends_its_input() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init.start_with_stdin(&c, "cat; echo done").await;
    c.call(&write_in(&p.id, b"hello ", false)).await.unwrap();
    c.call(&write_in(&p.id, b"world\n", true)).await.unwrap();
    assert_eq!(
        output_of(&c, &p.id, Stream::Stdout).await,
        b"hello world\ndone\n"
    );
    // Without stdin: true there is nothing to write to.
    let q = init.start_script(&c, "sleep 5").await;
    let e = refused(&c, &write_in(&q.id, b"x", false), ErrorKind::Invalid).await;
    assert!(e.to_string().contains("has no stdin"), "{e}");
    signal(&c, &q.id, Signal::Term).await;
    assert_eq!(wait_end(&c, &q.id).await.signal.as_deref(), Some("TERM"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_program_that_closed_stdin_fails_at_once() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init
        .start_with_stdin(&c, "exec 0<&-; echo closed; sleep 30")
        .await;
    let mut follow = c.follow_process(&p.id, Stream::Stdout, 0);
    assert_eq!(follow.next().await.unwrap().unwrap().data, b"closed\n");
    let t = Instant::now();
    let e = refused(&c, &write_in(&p.id, b"x", false), ErrorKind::Invalid).await;
    assert!(e.to_string().contains("has closed its stdin"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(1));
    signal(&c, &p.id, Signal::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_nobody_reads_times_out_saying_how_much_went() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init.start_with_stdin(&c, "sleep 60").await;
    let t = Instant::now();
    let e = c
        .call(&write_in(&p.id, &[b'y'; 512 * 1024], false))
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(e.kind(), Some(ErrorKind::Timeout), "{e}");
    let ClientErrorData { written } = written_of(&e);
    assert!(written > 0 && written < 512 * 1024, "{written}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(13),
        "{took:?}"
    );
    signal(&c, &p.id, Signal::Kill).await;
}

struct ClientErrorData {
    written: u64,
}

fn written_of(e: &computerd::client::ClientError) -> ClientErrorData {
    match e {
        computerd::client::ClientError::Rpc(r) => ClientErrorData {
            written: r.data.as_ref().and_then(|d| d.written).unwrap(),
        },
        other => panic!("not an rpc error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_process_gets_a_pty_its_size_and_ctrl_c() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut sp = start_sh("stty size; tty; exec sh -i", &init.marker);
    sp.pty = Some(PtySize {
        cols: 120,
        rows: 40,
    });
    let p = c.call(&sp).await.unwrap();
    let mut follow = c.follow_process(&p.id, Stream::Pty, 0);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("/dev/pts/") {
        seen.extend(follow.next().await.unwrap().unwrap().data);
    }
    let text = String::from_utf8_lossy(&seen).to_string();
    assert!(text.contains("40 120"), "{text}");
    // A job in the foreground, then ^C: the job ends and the shell reads on.
    c.call(&write_in(&p.id, b"sleep 100; echo after-int\n", false))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = signal(&c, &p.id, Signal::Int).await;
    assert_eq!(r.note, None);
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&seen).contains("after-int") {
        assert!(
            Instant::now() < until,
            "the job was not interrupted: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend(follow.next().await.unwrap().unwrap().data);
    }
    c.call(&ProcessResizeParams {
        id: p.id.clone(),
        cols: 90,
        rows: 20,
    })
    .await
    .unwrap();
    c.call(&write_in(&p.id, b"stty size; exit 7\n", false))
        .await
        .unwrap();
    let rest = c
        .read_process_output(&p.id, Stream::Pty, follow.offset())
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&rest.data).contains("20 90"),
        "{}",
        String::from_utf8_lossy(&rest.data)
    );
    assert_eq!(wait_end(&c, &p.id).await.exit_code, Some(7));
    let e = c
        .call(&ProcessResizeParams {
            id: p.id.clone(),
            cols: 0,
            rows: 20,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("cols is 0"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_file_gets_the_output_and_refuses_links_and_existing_files() {
    let (init, c) = or_skip!(Init::with_client().await);
    let log = init.path("logs/deep/out.log");
    let mut sp = start_sh("echo to-log; echo err-too >&2", &init.marker);
    sp.log = Some(log.clone());
    let p = c.call(&sp).await.unwrap();
    wait_end(&c, &p.id).await;
    let out = c.read_process_output(&p.id, Stream::Log, 0).await.unwrap();
    let text = String::from_utf8(out.data).unwrap();
    assert!(
        text.contains("to-log\n") && text.contains("err-too\n"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), text);
    // A file already there is exists; a link on the way is denied; nothing starts.
    refused(&c, &sp, ErrorKind::Exists).await;
    std::os::unix::fs::symlink("/tmp", init.path("link")).unwrap();
    sp.log = Some(init.path(&format!("link/{}.log", init.marker)));
    refused(&c, &sp, ErrorKind::Denied).await;
    assert!(!exists(format!("/tmp/{}.log", init.marker)));
    // A start that fails after the log was made removes it.
    let mut bad = start_sh("true", &init.marker);
    bad.argv = vec!["/no/such/program".into()];
    bad.log = Some(init.path("logs/failed.log"));
    refused(&c, &bad, ErrorKind::NotFound).await;
    assert!(!exists(init.path("logs/failed.log")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_processes_in_start_order_with_their_state() {
    let (init, c) = or_skip!(Init::with_client().await);
    let a = init.start_script(&c, "exit 2").await;
    let b = init.start_script(&c, "sleep 30").await;
    wait_end(&c, &a.id).await;
    let l = c.call(&ProcessListParams { from: None }).await.unwrap();
    assert!(!l.truncated);
    let ids: Vec<&str> = l.processes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, vec![a.id.as_str(), b.id.as_str()]);
    let pa = &l.processes[0];
    assert_eq!(
        (pa.running, pa.exit_code, pa.pty, pa.argv_clipped),
        (false, Some(2), false, false)
    );
    assert!(pa.ended_at.unwrap() >= pa.started_at);
    assert!(l.processes[1].running);
    let l = c
        .call(&ProcessListParams {
            from: Some(b.id.clone()),
        })
        .await
        .unwrap();
    assert_eq!(l.processes.len(), 1);
    signal(&c, &b.id, Signal::Term).await;
    let w = wait_end(&c, &b.id).await;
    assert_eq!(w.signal.as_deref(), Some("TERM"));
    let r = signal(&c, &b.id, Signal::Term).await;
    assert!(r.note.unwrap().contains("has ended"));
    let e = wait_within(&c, "p99", 0).await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_end_takes_everything_it_started_unless_orphans_are_kept() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init.start_script(&c, "setsid sleep 300 & echo $!").await;
    wait_end(&c, &p.id).await;
    assert_eq!(marked_processes(&init.marker), Vec::<i32>::new());

    let mut sp = start_sh("setsid sleep 300 >/dev/null 2>&1 & echo $!", &init.marker);
    sp.orphans = Some(Orphans::Keep);
    let k = c.call(&sp).await.unwrap();
    let w = wait_end(&c, &k.id).await;
    assert_eq!(w.exit_code, Some(0));
    let out = c
        .read_process_output(&k.id, Stream::Stdout, 0)
        .await
        .unwrap();
    let orphan: i32 = String::from_utf8(out.data).unwrap().trim().parse().unwrap();
    // Polled: the orphan may still be between its two execs (setsid, then
    // sleep), when /proc/PID/environ reads empty.
    computer_testkit::wait_until("the kept orphan runs on", Duration::from_secs(5), || {
        marked_processes(&init.marker).contains(&orphan)
    });
    // It ends with the computer (the test's Drop stops init and checks).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_group_runs_until_the_group_is_done() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut sp = start_sh(
        "(sleep 0.6; echo child-done) & echo parent-done",
        &init.marker,
    );
    sp.wait_group = Some(true);
    let t = Instant::now();
    let p = c.call(&sp).await.unwrap();
    let w = wait_end(&c, &p.id).await;
    assert!(
        t.elapsed() >= Duration::from_millis(550),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(w.exit_code, Some(0));
    assert_eq!(
        output_of(&c, &p.id, Stream::Stdout).await,
        b"parent-done\nchild-done\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_kills_its_guard_reports_the_guards_end_and_is_swept() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = init
        .start_script(&c, "sleep 300 & sleep 0.2; kill -KILL $PPID; sleep 300")
        .await;
    let w = wait_end(&c, &p.id).await;
    assert_eq!(w.signal.as_deref(), Some("KILL"));
    // The orphans went to init, which sweeps them.
    assert_no_leftovers(&init.marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_keeps_256_and_lets_the_first_ended_go() {
    let (init, c) = or_skip!(Init::with_client().await);
    for _ in 0..limits::MAX_PROCESSES {
        c.call(&start_argv(&["true"], &init.marker)).await.unwrap();
    }
    wait_end(&c, "p256").await;
    for i in 1..=limits::MAX_PROCESSES {
        wait_end(&c, &format!("p{i}")).await;
    }
    let next = init.start_script(&c, "true").await;
    assert_eq!(next.id, "p257");
    let e = wait_within(&c, "p1", 0).await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound));
    let mut all = Vec::new();
    let mut from = None;
    loop {
        let l = c
            .call(&ProcessListParams { from: from.clone() })
            .await
            .unwrap();
        all.extend(l.processes);
        if !l.truncated {
            break;
        }
        from = l.next;
    }
    assert_eq!(all.len(), limits::MAX_PROCESSES);
    assert_eq!(all[0].id, "p2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_process_requests_name_the_field() {
    let (_init, c) = or_skip!(Init::with_client().await);
    let cases = [
        (
            "process.start",
            serde_json::json!({"argv": ["true"], "pty": {"cols": 0, "rows": 5}}),
            "cols is 0",
        ),
        (
            "process.start",
            serde_json::json!({"argv": ["true"], "log": "rel/path"}),
            "log must be an absolute path",
        ),
        (
            "process.start",
            serde_json::json!({"argv": ["true"], "orphans": "drop"}),
            "orphans: unknown variant",
        ),
        (
            "process.read",
            serde_json::json!({"id": "x1", "stream": "stdout", "offset": 0}),
            "not a process id",
        ),
        (
            "process.read",
            serde_json::json!({"id": "p1", "stream": "video", "offset": 0}),
            "stream: unknown variant",
        ),
        (
            "process.signal",
            serde_json::json!({"id": "p1", "signal": "STOP"}),
            "signal: unknown variant",
        ),
        (
            "process.wait",
            serde_json::json!({"id": "p1", "timeoutMs": 86400001u64}),
            "timeoutMs is 86400001",
        ),
    ];
    for (m, params, words) in cases {
        let e = c.call_value(m, params.clone()).await.unwrap_err();
        assert!(e.to_string().contains(words), "{m} {params}: {e}");
    }
}

/// With waitMs, a program that ends within it is answered with its end
/// and the first of its output in the start's own reply; one still running
/// is answered as a plain start and followed as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_with_wait_ms_brings_a_short_programs_end_and_output() {
    let (init, c) = or_skip!(Init::with_client().await);
    let p = c
        .call(&ProcessStartParams {
            wait_ms: Some(10_000),
            ..start_sh("echo one; echo two >&2; exit 3", &init.marker)
        })
        .await
        .unwrap();
    let ended = p.ended.expect("the end within waitMs");
    assert_eq!((ended.exit_code, ended.signal), (Some(3), None));
    let out = ended.stdout.expect("stdout");
    assert_eq!(out.data.0, b"one\n");
    assert!(out.exited, "{out:?}");
    assert_eq!(ended.stderr.expect("stderr").data.0, b"two\n");
    // The process is in the table like any other.
    let w = wait_end(&c, &p.id).await;
    assert_eq!(w.exit_code, Some(3));

    // Still running at waitMs: a plain start, and the process runs on.
    let p = c
        .call(&ProcessStartParams {
            wait_ms: Some(100),
            ..start_sh("sleep 0.6; echo late", &init.marker)
        })
        .await
        .unwrap();
    assert_eq!(p.ended, None);
    let w = wait_end(&c, &p.id).await;
    assert_eq!(w.exit_code, Some(0));
    assert_eq!(output_of(&c, &p.id, Stream::Stdout).await, b"late\n");

    // Past the bound: refused naming the field, nothing started.
    let e = c
        .call(&ProcessStartParams {
            wait_ms: Some(30_001),
            ..start_sh("echo never", &init.marker)
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("waitMs"), "{e}");
    let list = c.call(&ProcessListParams { from: None }).await.unwrap();
    assert_eq!(list.processes.len(), 2, "{list:?}");
}
