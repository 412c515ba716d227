//! The Docker provider against the docker CLI, on a real engine:
//!
//! - `exec` of `true` through a computer's one daemon connection versus
//!   `docker exec <container> true`, 200 calls each in the same run
//!   (target: at least 20x faster);
//! - create → connect → the first `exec.run` result versus
//!   `docker run --rm --network none <image> true`, the two in turn
//!   (target: at most 1.0x);
//! - a 100 MB tree (100 files of 1 MiB) pushed in by tar through the
//!   connection versus `docker cp` in (target: not slower), and pulled out
//!   by tar versus `docker cp` out (target: not slower). Each side reads
//!   the files and writes them, as docker cp does: the push tars the host's
//!   tree as it goes, the pull unpacks into a host directory as it comes.
//!
//! Run on demand, as root, with dockerd up and the test image built
//! (fixtures/images/build.sh):
//!
//!     cargo bench -p computer-providers --bench docker
//!
//! `CMCP_TEST_DOCKER_IMAGE` names the image (default
//! computer-mcp-test/debian:bookworm), `CMCP_TEST_DOCKER_COMPUTERD`
//! the static daemon (default the workspace's static release build),
//! `CMCP_BENCH_EXECS`, `CMCP_BENCH_CREATES` and `CMCP_BENCH_TREE_ROUNDS`
//! the counts (200, 10, 5; the tree rounds alternate the two sides and
//! compare medians). `CMCP_BENCH_EXECS=0` leaves out the exec and tree
//! parts, `CMCP_BENCH_CREATES=0` the creates. `CMCP_BENCH_DIRECT=0` makes the computers without a
//! direct directory, so every byte goes through the exec's streams (as
//! through an engine in a VM).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use computer_providers::docker::{DockerOptions, DockerProvider, ImageSource};
use computer_providers::{ComputerSpec, Provider, Release};
use computerd::client::ComputerExt;
use computerd::protocol::ExecParams;
use support::{count, exec_true, median, ms};
use tokio_util::sync::CancellationToken;

mod support;

fn docker_cli(args: &[&str]) {
    let st = Command::new("docker").args(args).status().unwrap();
    assert!(st.success(), "docker {args:?}: {st}");
}

/// The tree as a tar stream, made on a thread as it is read, in chunks of
/// 512 KiB (each goes as one write, without a copy).
fn tar_stream(
    dir: PathBuf,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    const CHUNK: usize = computerd::protocol::limits::MAX_WRITE_BYTES as usize;
    struct Chunks(tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>, Vec<u8>);
    impl std::io::Write for Chunks {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            // Never past a chunk: write_all hands the rest to the next call.
            let n = b.len().min(CHUNK - self.1.len());
            self.1.extend_from_slice(&b[..n]);
            if self.1.len() == CHUNK {
                self.flush()?;
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            if !self.1.is_empty() {
                let chunk = std::mem::replace(&mut self.1, Vec::with_capacity(CHUNK));
                self.0
                    .blocking_send(Ok(chunk))
                    .map_err(|_| std::io::Error::other("the push stopped"))?;
            }
            Ok(())
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    std::thread::spawn(move || {
        let mut archive = tar::Builder::new(Chunks(tx.clone(), Vec::with_capacity(CHUNK)));
        let made = archive
            .append_dir_all(".", &dir)
            .and_then(|()| archive.into_inner())
            .and_then(|mut w| std::io::Write::flush(&mut w));
        if let Err(e) = made {
            let _ = tx.blocking_send(Err(e));
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
}

/// Unpack a tar stream into `dir` on a thread, as it comes.
async fn untar_stream<S>(stream: S, dir: PathBuf)
where
    S: futures::Stream<Item = computerd::client::Result<Vec<u8>>>,
{
    use futures::StreamExt;
    struct Chunks(tokio::sync::mpsc::Receiver<Vec<u8>>, Vec<u8>, usize);
    impl std::io::Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            while self.2 == self.1.len() {
                match self.0.blocking_recv() {
                    Some(next) => (self.1, self.2) = (next, 0),
                    None => return Ok(0),
                }
            }
            let n = buf.len().min(self.1.len() - self.2);
            buf[..n].copy_from_slice(&self.1[self.2..self.2 + n]);
            self.2 += n;
            Ok(n)
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let unpack = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir).unwrap();
        tar::Archive::new(Chunks(rx, Vec::new(), 0))
            .unpack(&dir)
            .unwrap();
    });
    let mut stream = std::pin::pin!(stream);
    while let Some(chunk) = stream.next().await {
        tx.send(chunk.unwrap()).await.unwrap();
    }
    drop(tx);
    unpack.await.unwrap();
}

#[tokio::main]
async fn main() {
    if !std::path::Path::new("/var/run/docker.sock").exists() {
        println!("skipped: no Docker engine at /var/run/docker.sock");
        return;
    }
    let (image, computerd) = support::docker_image_and_daemon();
    let (execs, creates) = (
        count("CMCP_BENCH_EXECS", 200),
        count("CMCP_BENCH_CREATES", 10),
    );
    let cache = tempfile::tempdir().unwrap();
    let mut opts = DockerOptions::new(computerd, cache.path().join("cache"));
    opts.image = Some(ImageSource::Name(image.clone()));
    opts.direct = std::env::var("CMCP_BENCH_DIRECT").as_deref() != Ok("0");
    println!(
        "connections: {}",
        if opts.direct {
            "direct (the provider's socket, bound into the computer)"
        } else {
            "over the exec's streams (CMCP_BENCH_DIRECT=0)"
        }
    );
    let p = DockerProvider::new(opts).unwrap();
    if execs > 0 {
        exec_and_tree(&p, execs).await;
    }
    if creates > 0 {
        create_vs_run(&p, &image, creates).await;
    }
}

/// `exec` through the connection vs `docker exec`, then a tree in and out
/// by tar vs `docker cp`, on one computer.
async fn exec_and_tree(p: &DockerProvider, execs: usize) {
    let cancel = CancellationToken::new();
    let spec = ComputerSpec::sandbox(600_000);

    // exec through the connection vs docker exec, on one computer.
    let made = p.create(&spec, &cancel).await.unwrap();
    let conn = p.connect(&made.computer, &cancel).await.unwrap();
    exec_true(&conn).await;
    let mut ours = Vec::with_capacity(execs);
    for _ in 0..execs {
        let t = Instant::now();
        exec_true(&conn).await;
        ours.push(t.elapsed());
    }
    let mut cli = Vec::with_capacity(execs);
    for _ in 0..execs {
        let t = Instant::now();
        docker_cli(&["exec", &made.computer.id, "true"]);
        cli.push(t.elapsed());
    }
    // A 100 MB tree: pushed by tar through the connection, then docker cp.
    let tree = tempfile::tempdir().unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..100 {
        let mut bytes = vec![0u8; 1 << 20];
        for b in bytes.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b.copy_from_slice(&seed.to_le_bytes()[..b.len()]);
        }
        std::fs::write(tree.path().join(format!("f{i:03}")), bytes).unwrap();
    }
    // Each side in turn, `rounds` times, so a busy moment of the machine
    // falls on both; the medians are compared.
    let rounds = count("CMCP_BENCH_TREE_ROUNDS", 5).max(1);
    let (mut pushed, mut copied, mut pulled, mut drained, mut copied_out) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (ours, theirs) = (format!("/work/tree{round}"), format!("/tmp/tree{round}"));
        let t = Instant::now();
        let entries = conn
            .client
            .push_tar(&ours, tar_stream(tree.path().to_path_buf()))
            .await
            .unwrap();
        pushed.push(t.elapsed());
        assert!(entries >= 100, "{entries}");
        let t = Instant::now();
        docker_cli(&[
            "cp",
            &format!("{}/.", tree.path().display()),
            &format!("{}:{theirs}", made.computer.id),
        ]);
        copied.push(t.elapsed());
        // Out again: pulled by tar and unpacked, then docker cp out; and
        // pulled with its bytes dropped (the connection's share alone).
        let out = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let pull = conn.client.pull_tar(&ours).await.unwrap();
        untar_stream(pull.into_stream(), out.path().join("pulled")).await;
        pulled.push(t.elapsed());
        assert_eq!(
            std::fs::read_dir(out.path().join("pulled"))
                .unwrap()
                .count(),
            100
        );
        let t = Instant::now();
        docker_cli(&[
            "cp",
            &format!("{}:{theirs}", made.computer.id),
            &out.path().join("copied").display().to_string(),
        ]);
        copied_out.push(t.elapsed());
        let t = Instant::now();
        let mut pull = conn.client.pull_tar(&ours).await.unwrap();
        let mut bytes = 0usize;
        while let Some(chunk) = pull.next().await.unwrap() {
            bytes += chunk.len();
        }
        drained.push(t.elapsed());
        assert!(bytes > 100 << 20, "{bytes}");
        // Room for the next round: /work is a tmpfs of bounded size.
        conn.client
            .call_typed(&ExecParams {
                argv: vec!["rm".into(), "-rf".into(), ours, theirs],
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let (pushed, copied) = (median(&mut pushed), median(&mut copied));
    println!(
        "100 MB tree in ({rounds} rounds, medians): pushed by tar through the connection {:.0} ms, docker cp {:.0} ms: {:.2}x (target at most 1x)",
        ms(pushed),
        ms(copied),
        pushed.as_secs_f64() / copied.as_secs_f64()
    );
    let (pulled, copied_out, drained) = (
        median(&mut pulled),
        median(&mut copied_out),
        median(&mut drained),
    );
    println!(
        "100 MB tree out ({rounds} rounds, medians): pulled by tar through the connection {:.0} ms, docker cp {:.0} ms: {:.2}x (target at most 1x); the pull alone, bytes dropped: {:.0} ms",
        ms(pulled),
        ms(copied_out),
        pulled.as_secs_f64() / copied_out.as_secs_f64(),
        ms(drained)
    );
    conn.client.close();
    p.release(&made.computer, Release::Delete, &cancel)
        .await
        .unwrap();
    let (a, b) = (median(&mut ours), median(&mut cli));
    println!(
        "exec true: daemon connection median {:.2} ms, docker exec median {:.2} ms ({execs} each): {:.1}x faster (target at least 20x)",
        ms(a),
        ms(b),
        b.as_secs_f64() / a.as_secs_f64()
    );
}

/// create → first result vs `docker run --rm --network none <image> true`,
/// the two sides in turn so a busy moment of the machine falls on both,
/// after one of each unmeasured (the provider reads the host and copies
/// its daemon once; the engine warms its image).
async fn create_vs_run(p: &DockerProvider, image: &str, creates: usize) {
    let (spec, cancel) = (ComputerSpec::sandbox(600_000), CancellationToken::new());
    let mut steps: [Vec<std::time::Duration>; 3] = Default::default();
    let (mut first, mut run) = (Vec::with_capacity(creates), Vec::with_capacity(creates));
    for i in 0..=creates {
        let t = Instant::now();
        let made = p.create(&spec, &cancel).await.unwrap();
        let created = t.elapsed();
        let conn = p.connect(&made.computer, &cancel).await.unwrap();
        let connected = t.elapsed();
        exec_true(&conn).await;
        let took = t.elapsed();
        conn.client.close();
        p.release(&made.computer, Release::Delete, &cancel)
            .await
            .unwrap();
        let t = Instant::now();
        docker_cli(&["run", "--rm", "--network", "none", image, "true"]);
        if i > 0 {
            first.push(took);
            run.push(t.elapsed());
            steps[0].push(created);
            steps[1].push(connected - created);
            steps[2].push(took - connected);
        }
    }
    let (a, b) = (median(&mut first), median(&mut run));
    println!(
        "create → first exec result median {:.1} ms, docker run --rm --network none median {:.1} ms ({creates} each, in turn): {:.2}x (target at most 1.0x)",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
    let [c, k, e] = steps.each_mut().map(|v| ms(median(v)));
    println!("  its steps (medians): create {c:.1} ms, connect {k:.1} ms, the exec {e:.1} ms");
}
