//! files.* and tar.* end to end, through the client's helpers.

use std::time::{Duration, Instant};

use computerd::client::{ComputerExt, WriteFileOptions};
use computerd::protocol::*;

use super::support::*;

fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// A raw entry whose name the tar crate would refuse to write (`..`, absolute).
fn raw_entry(name: &str, data: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn chunks(
    bytes: Vec<u8>,
    n: usize,
) -> impl futures::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures::stream::iter(bytes.chunks(n).map(|c| Ok(c.to_vec())).collect::<Vec<_>>())
}

fn names_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_at_once_and_never_hangs_a_read() {
    let (init, c) = or_skip!(Init::with_client().await);
    let fifo = init.path("fifo");
    nix::unistd::mkfifo(
        fifo.as_str(),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let t = Instant::now();
    refused(
        &c,
        &FilesReadParams {
            path: fifo.clone(),
            offset: None,
            length: None,
        },
        ErrorKind::Invalid,
    )
    .await;
    refused(
        &c,
        &FilesWriteParams {
            path: fifo.clone(),
            data: Bytes64(b"x".to_vec()),
            ..Default::default()
        },
        ErrorKind::Invalid,
    )
    .await;
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_read_only_file_is_written_and_read_back_whole() {
    let (init, c) = or_skip!(Init::with_client().await);
    let path = init.path("big/dir/file.bin");
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    let size = c
        .write_file(
            &path,
            &data,
            WriteFileOptions {
                mode: Some(0o444),
                parents: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(size, data.len() as u64);
    assert_eq!(c.read_file(&path).await.unwrap(), data);
    let st = c
        .call(&FilesStatParams {
            path: path.clone(),
            follow: None,
        })
        .await
        .unwrap();
    assert_eq!(
        (st.file_type, st.size, st.mode),
        (FileType::File, data.len() as u64, 0o444)
    );
    refused(
        &c,
        &FilesReadParams {
            path,
            offset: None,
            length: Some(512 * 1024 + 1),
        },
        ErrorKind::Limit,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_file_methods_work_as_a_user_expects() {
    let (init, c) = or_skip!(Init::with_client().await);
    let d = init.path("tree");
    c.call(&FilesMkdirParams {
        path: format!("{d}/a/b"),
        parents: Some(true),
        mode: None,
    })
    .await
    .unwrap();
    c.write_file(
        &format!("{d}/a/b/f.txt"),
        b"hi",
        WriteFileOptions::default(),
    )
    .await
    .unwrap();
    c.write_file(&format!("{d}/g.txt"), b"g", WriteFileOptions::default())
        .await
        .unwrap();
    let l = c
        .call(&FilesListParams {
            path: d.clone(),
            depth: Some(3),
            offset: None,
        })
        .await
        .unwrap();
    let paths: Vec<String> = l
        .entries
        .iter()
        .map(|e| e.path.trim_start_matches(&d).to_string())
        .collect();
    assert_eq!(paths, vec!["/a", "/a/b", "/a/b/f.txt", "/g.txt"]);
    refused(
        &c,
        &FilesMoveParams {
            from: format!("{d}/g.txt"),
            to: format!("{d}/a/b/f.txt"),
            overwrite: None,
        },
        ErrorKind::Exists,
    )
    .await;
    assert_eq!(c.read_file(&format!("{d}/a/b/f.txt")).await.unwrap(), b"hi");
    c.call(&FilesMoveParams {
        from: format!("{d}/g.txt"),
        to: format!("{d}/h.txt"),
        overwrite: None,
    })
    .await
    .unwrap();
    refused(
        &c,
        &FilesRemoveParams {
            path: format!("{d}/a"),
            recursive: None,
        },
        ErrorKind::IsDir,
    )
    .await;
    c.call(&FilesRemoveParams {
        path: format!("{d}/a"),
        recursive: Some(true),
    })
    .await
    .unwrap();
    assert_eq!(names_in(&d), vec!["h.txt"]);
    refused(
        &c,
        &FilesRemoveParams {
            path: "/".into(),
            recursive: Some(true),
        },
        ErrorKind::Denied,
    )
    .await;
    let e = c
        .call(&FilesStatParams {
            path: "relative/x".into(),
            follow: None,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("absolute"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_copied_by_pull_and_push_on_one_connection_is_the_same() {
    let (init, c) = or_skip!(Init::with_client().await);
    let src = init.path("src");
    std::fs::create_dir_all(format!("{src}/sub/deeper")).unwrap();
    std::fs::write(
        format!("{src}/sub/deeper/{}", "n".repeat(120)),
        vec![7u8; 700_000],
    )
    .unwrap();
    std::fs::write(format!("{src}/top.txt"), b"top").unwrap();
    std::os::unix::fs::symlink("top.txt", format!("{src}/link")).unwrap();
    let dst = init.path("dst");
    let pull = c.pull_tar(&src).await.unwrap();
    let entries = c.push_tar(&dst, pull.into_stream()).await.unwrap();
    assert_eq!(entries, 5);
    assert_eq!(
        std::fs::read(format!("{dst}/sub/deeper/{}", "n".repeat(120))).unwrap(),
        vec![7u8; 700_000]
    );
    assert_eq!(
        std::fs::read_link(format!("{dst}/link")).unwrap().to_str(),
        Some("top.txt")
    );
    assert_eq!(std::fs::read(format!("{dst}/top.txt")).unwrap(), b"top");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_refuses_dotdot_absolute_and_symlinked_entries_and_leaves_no_half_file() {
    let (init, c) = or_skip!(Init::with_client().await);
    let outside = init.path("outside");
    std::fs::create_dir(&outside).unwrap();

    for (bad, what) in [
        (raw_entry("../x", b"evil"), "../x"),
        (raw_entry("/abs", b"evil"), "/abs"),
    ] {
        let dst = init.path(&format!("dst-{}", what.len()));
        let mut ar = tar_of(&[("ok.txt", b"fine")]);
        ar.truncate(ar.len() - 1024);
        ar.extend(bad);
        ar.extend(tar_of(&[("after.txt", b"never")]));
        let e = c.push_tar(&dst, chunks(ar, 700)).await.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::Denied), "{what}: {e}");
        assert_eq!(names_in(&dst), vec!["ok.txt"], "{what}");
        assert!(!exists(init.path("x")) && !exists("/abs"), "{what} escaped");
    }

    // A symlink to a directory outside, then a file under it.
    let dst = init.path("dst-link");
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    b.append_link(&mut h, "l", &outside).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_size(5 * 1024 * 1024);
    h.set_mode(0o644);
    b.append_data(
        &mut h,
        "l/f",
        std::io::Read::take(std::io::repeat(1), 5 * 1024 * 1024),
    )
    .unwrap();
    let ar = b.into_inner().unwrap();
    let e = c.push_tar(&dst, chunks(ar, 64 * 1024)).await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Denied), "{e}");
    assert!(
        names_in(&outside).is_empty(),
        "the push wrote outside: {:?}",
        names_in(&outside)
    );
    assert_eq!(names_in(&dst), vec!["l"], "no temporary file is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_holds_at_most_eight_pulls() {
    let (init, c) = or_skip!(Init::with_client().await);
    let mut pulls = Vec::new();
    for _ in 0..limits::MAX_PULLS_PER_CONNECTION {
        pulls.push(
            c.call(&TarPullBeginParams {
                path: init.home().to_str().unwrap().into(),
            })
            .await
            .unwrap(),
        );
    }
    refused(
        &c,
        &TarPullBeginParams {
            path: init.home().to_str().unwrap().into(),
        },
        ErrorKind::Limit,
    )
    .await;
    c.call(&TarPullEndParams {
        id: pulls[0].id.clone(),
    })
    .await
    .unwrap();
    c.call(&TarPullEndParams {
        id: pulls[0].id.clone(),
    })
    .await
    .unwrap();
    c.call(&TarPullBeginParams {
        path: init.home().to_str().unwrap().into(),
    })
    .await
    .unwrap();
}

/// Pipelined tar.push.write: a write that arrives ahead of its offset waits
/// for the bytes before it, so the archive is extracted in order; a write
/// at bytes already received, or too far ahead, is refused naming `offset`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_push_writes_are_extracted_in_offset_order() {
    let (init, c) = or_skip!(Init::with_client().await);
    let body: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    let ar = tar_of(&[("big.bin", &body), ("small.txt", b"small")]);
    let dst = init.path("dst");
    let id = c
        .call_value("tar.push.begin", serde_json::json!({"path": dst}))
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b64 = |b: &[u8]| serde_json::to_value(Bytes64(b.to_vec())).unwrap();
    let cut = 400_000;
    let (head, tail) = ar.split_at(cut);
    // The tail is sent first; it waits for the head, sent 200 ms later.
    let late = c.call_value(
        "tar.push.write",
        serde_json::json!({"id": id, "data": b64(tail), "offset": cut}),
    );
    let early = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.call_value(
            "tar.push.write",
            serde_json::json!({"id": id, "data": b64(head), "offset": 0}),
        )
        .await
    };
    let (l, e) = tokio::join!(late, early);
    l.unwrap();
    e.unwrap();
    for (offset, words) in [
        (0u64, "would repeat some"),
        (
            ar.len() as u64 + 17 * 1024 * 1024,
            "over the 16777216 a write may wait ahead",
        ),
    ] {
        let err = c
            .call_value(
                "tar.push.write",
                serde_json::json!({"id": id, "data": b64(b"x"), "offset": offset}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(words) && err.contains("offset"), "{err}");
    }
    let end = c
        .call_value("tar.push.end", serde_json::json!({"id": id}))
        .await
        .unwrap();
    assert_eq!(end["entries"], 2, "{end}");
    assert_eq!(std::fs::read(format!("{dst}/big.bin")).unwrap(), body);
    assert_eq!(std::fs::read(format!("{dst}/small.txt")).unwrap(), b"small");
}

/// The first task a model tries, in a computer as the local provider makes
/// it: write calc.py with a bug, run its tests (Python caches its
/// bytecode), fix it with a rewrite of the same size, as edit_file does,
/// and run them again: they pass. Python takes a cached .pyc for current
/// when the source's mtime (whole seconds) and size match, so the fix must
/// move the mtime's second. The story starts at the top of a second, as a
/// quick client's would fall within one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bug_fixed_by_a_same_size_rewrite_is_what_python_runs_next() {
    let init = or_skip!(Init::start_sandboxed(SandboxOptions {
        user: Some(fresh_uid()),
        ..Default::default()
    }));
    let c = init.client().await;
    let tests = |want: &'static str| {
        let c = &c;
        let marker = init.marker.clone();
        async move {
            let r = c
                .call(&ExecParams {
                    argv: vec![
                        "python3".into(),
                        "-m".into(),
                        "unittest".into(),
                        "-q".into(),
                        "test_calc".into(),
                    ],
                    cwd: Some("/work/calc".into()),
                    env: Some(marked(&marker)),
                    timeout_ms: Some(60_000),
                    ..Default::default()
                })
                .await
                .unwrap();
            let err = String::from_utf8_lossy(&r.stderr).into_owned();
            assert!(err.contains(want), "wanted {want:?}: {err}");
            r.exit_code
        }
    };
    let opts = || WriteFileOptions {
        parents: true,
        ..Default::default()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    tokio::time::sleep(Duration::from_nanos(
        1_000_000_000 - u64::from(now.subsec_nanos()),
    ))
    .await;
    c.write_file(
        "/work/calc/calc.py",
        b"def add(a, b):\n    return a - b\n",
        opts(),
    )
    .await
    .unwrap();
    c.write_file(
        "/work/calc/test_calc.py",
        b"import unittest\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
        opts(),
    )
    .await
    .unwrap();
    assert_eq!(tests("FAILED (failures=1)").await, Some(1));
    let fixed = String::from_utf8(c.read_file("/work/calc/calc.py").await.unwrap())
        .unwrap()
        .replace("a - b", "a + b");
    c.write_file("/work/calc/calc.py", fixed.as_bytes(), opts())
        .await
        .unwrap();
    assert_eq!(tests("OK").await, Some(0));
}
