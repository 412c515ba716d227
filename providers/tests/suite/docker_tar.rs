//! Trees in and out of a real Docker computer by tar through its daemon
//! connection (bytes frames over `docker exec`'s stdio), compared byte for
//! byte. Skips in words without Docker, and fails instead when
//! COMPUTER_MCP_REQUIRE names docker; the image and the static daemon come
//! from CMCP_TEST_DOCKER_IMAGE and CMCP_TEST_DOCKER_COMPUTERD as in
//! `docker.rs`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::{ComputerSpec, Provider, Release};
use computer_testkit::{docker_env, or_skip, tree_snapshot};
use computerd::client::ComputerExt;
use computerd::protocol::limits;
use tokio_util::sync::CancellationToken;

use super::support::{run, text};

/// The provider, or None (a skip) without Docker, the image or the daemon.
async fn provider(cache: &Path) -> Option<DockerProvider> {
    let e = docker_env().await?;
    let mut opts = DockerOptions::new(e.computerd, cache.join("cache"));
    opts.image = Some(ImageSource::Name(e.image));
    Some(DockerProvider::new(opts).unwrap())
}

/// Pseudo-random bytes (xorshift), so no two files are alike.
fn bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Files around the tar block and the frame sizes, a big one, an empty one,
/// nested directories, an executable and a symlink.
fn make_tree(root: &Path) {
    let sizes = [
        0,
        1,
        511,
        512,
        513,
        524_287,
        524_288,
        524_289,
        3 * 1024 * 1024 + 7,
    ];
    for (i, n) in sizes.iter().enumerate() {
        std::fs::write(root.join(format!("f{i}-{n}")), bytes(*n, i as u64 + 1)).unwrap();
    }
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::write(root.join("a/b/c/deep.bin"), bytes(700_001, 99)).unwrap();
    std::fs::write(root.join("a/run.sh"), b"#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(
        root.join("a/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("b/c/deep.bin", root.join("a/link")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_pushed_into_a_docker_computer_is_pulled_out_byte_for_byte() {
    let cache = tempfile::tempdir().unwrap();
    let p = or_skip!(provider(cache.path()).await);
    let cancel = CancellationToken::new();
    let made = p
        .create(&ComputerSpec::sandbox(600_000), &cancel)
        .await
        .unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    // The daemon offers bytes frames, so the tree goes by in them.
    assert_eq!(conn.hello.bytes_frames, Some(limits::MAX_FRAME_BYTES));

    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    b.append_dir_all(".", src.path()).unwrap();
    let archive = b.into_inner().unwrap();
    // Uneven chunks, so frames and entries split anywhere.
    let chunks: Vec<std::io::Result<Vec<u8>>> =
        archive.chunks(333_333).map(|c| Ok(c.to_vec())).collect();
    let entries = conn
        .client
        .push_tar("/work/tree", futures::stream::iter(chunks))
        .await
        .unwrap();
    assert_eq!(entries, 16, "the root, 9 files, 3 directories, 3 in a/");

    // What landed, read inside the computer and not through the pull.
    let sums = run(
        &conn.client,
        "cd /work/tree && find . -type f | sort | xargs sha256sum",
    )
    .await;
    assert_eq!(sums.exit_code, Some(0), "{sums:?}");
    let host_sums = std::process::Command::new("sh")
        .arg("-c")
        .arg("find . -type f | sort | xargs sha256sum")
        .current_dir(src.path())
        .output()
        .unwrap();
    assert_eq!(text(&sums), String::from_utf8_lossy(&host_sums.stdout));

    // Out again: the pulled archive unpacks to the very tree.
    let pulled = conn.client.pull_tar_bytes("/work/tree").await.unwrap();
    let out = tempfile::tempdir().unwrap();
    tar::Archive::new(pulled.as_slice())
        .unpack(out.path())
        .unwrap();
    assert_eq!(tree_snapshot(out.path()), tree_snapshot(src.path()));

    // One file alone, and the whole big file by files.read.
    let big = "/work/tree/f8-3145735";
    assert_eq!(
        conn.client.read_file(big).await.unwrap(),
        std::fs::read(src.path().join("f8-3145735")).unwrap()
    );
    conn.client.close();
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
}
