//! `computer-mcp cp` as a user runs it from a terminal beside a server:
//! a tree of 10,000 files into a computer and back, byte for byte with its
//! modes and inner links; a computer's archive that breaks a rule refused
//! with nothing left behind; a copy too big for its bound; a gone computer.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

use super::support::{HttpServer, SERVER, Server, TOKEN, or_skip};

fn cp(server: &Server, args: &[&str]) -> Output {
    Command::new(SERVER)
        .arg("cp")
        .args(args)
        .args(server.args())
        .output()
        .unwrap()
}

/// A tree of `n` files in 100 directories, one executable, one read-only,
/// and two links that stay inside it.
fn tree(root: &Path, n: usize) {
    computer_testkit::small_files(root, n);
    let run = root.join("d00/run.sh");
    std::fs::write(&run, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ro = root.join("d01/ro.txt");
    std::fs::write(&ro, "read only\n").unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::os::unix::fs::symlink("../d00/run.sh", root.join("d02/run-link")).unwrap();
    std::os::unix::fs::symlink("d03", root.join("to-d03")).unwrap();
}

/// Every path under `root` with its kind, mode and content (or target).
fn listing(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let what = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                todo.push(p.clone());
                format!("dir {:o}", m.permissions().mode() & 0o777)
            } else {
                format!(
                    "file {:o} {:?}",
                    m.permissions().mode() & 0o777,
                    std::fs::read(&p).unwrap()
                )
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

async fn round_trip(server: Server) {
    let s = HttpServer::start_on(server, &[], &[TOKEN]).await;
    let c = s.stateless(TOKEN);
    let h = c.computer_new("build").await;
    let home = c
        .call(
            "exec",
            json!({"command": "printf %s \"$HOME\"", "computer": h}),
        )
        .await;
    let home = home["structuredContent"]["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    let here = tempfile::tempdir().unwrap();
    let src = here.path().join("src");
    tree(&src, 10_000);

    let into = format!("build:{home}/tree");
    let out = cp(&s.server, &[src.to_str().unwrap(), &into]);
    assert!(out.status.success(), "{out:?}");
    // The computer's own view: the files are there and the script runs.
    let r = c
        .call(
            "exec",
            json!({"command": "find ~/tree -type f | wc -l; ~/tree/d02/run-link", "computer": h}),
        )
        .await;
    assert_eq!(r["structuredContent"]["stdout"], "10002\nran\n", "{r}");

    let back = here.path().join("back");
    let out = cp(&s.server, &[&into, back.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("10002 files"),
        "{out:?}"
    );
    assert_eq!(listing(&back), listing(&src));

    // A second copy onto the same path is refused: cp never overwrites.
    let out = cp(&s.server, &[&into, back.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is there already"),
        "{out:?}"
    );

    // One file each way, under a new name.
    let one = format!("build:{home}/one.txt");
    let out = cp(&s.server, &[src.join("d05/f5.txt").to_str().unwrap(), &one]);
    assert!(out.status.success(), "{out:?}");
    let got = here.path().join("one-back.txt");
    let out = cp(&s.server, &[&one, got.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(&got).unwrap(),
        std::fs::read(src.join("d05/f5.txt")).unwrap()
    );

    // The computer's archive breaks a rule: a link out of the copy, then
    // (in the tar) a file under it; or it is over the byte bound. Refused
    // in words, and nothing is left beside the destination.
    c.call(
        "exec",
        json!({"command": "mkdir -p ~/bad && ln -s /etc ~/bad/out && mkdir -p ~/big && head -c 5000 /dev/zero > ~/big/z", "computer": h}),
    )
    .await;
    let before = leftovers(here.path());
    let out = cp(
        &s.server,
        &[
            &format!("build:{home}/bad"),
            here.path().join("bad").to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the link out points outside the copy (/etc)"),
        "{out:?}"
    );
    let out = cp(
        &s.server,
        &[
            &format!("build:{home}/big"),
            here.path().join("big").to_str().unwrap(),
            "--max-bytes",
            "4096",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the copy is over 4096 bytes, the most allowed (--max-bytes)"),
        "{out:?}"
    );
    assert_eq!(leftovers(here.path()), before);

    // Bad input: a computer that is gone (either way), a relative path
    // in it, two paths here.
    let (server, _) = s.stop().await;
    let gone = |out: &Output| {
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(
                "no computer \"build\": it is gone (released, or past its deadline) or was never made; nothing was copied"
            ),
            "{out:?}"
        );
    };
    gone(&cp(
        &server,
        &[&into, here.path().join("gone").to_str().unwrap()],
    ));
    gone(&cp(
        &server,
        &[src.to_str().unwrap(), &format!("build:{home}/again")],
    ));
    gone(&cp(&server, &["--sync", "build"]));
    assert!(!here.path().join("gone").exists());
    let out = cp(&server, &["build:tree", "./x"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("must be absolute"),
        "{out:?}"
    );
    let out = cp(&server, &["./a", "./b"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("both paths are on this host"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_round_trips_a_tree_with_a_local_computer_and_refuses_a_hostile_archive() {
    round_trip(or_skip!(Server::local())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_round_trips_a_tree_with_a_docker_computer_and_refuses_a_hostile_archive() {
    let _shared = super::support::DOCKER_ENGINE.read().await;
    round_trip(or_skip!(Server::docker())).await;
}
