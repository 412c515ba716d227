//! What the tests of every crate share.
//!
//! - [`need`], [`or_skip!`]: a test that needs root, Docker, X, adb or user namespaces skips in
//!   words where it cannot run, and fails instead when `COMPUTER_MCP_REQUIRE`
//!   (a comma list, as CI sets it) names the need.
//! - [`marker`], [`marked_processes`], [`assert_no_leftovers`]: a test sets a
//!   unique variable on every program it starts, and afterwards finds in
//!   /proc whatever it left behind.
//! - [`computerd_bin`]: the daemon the workspace build put beside the tests;
//!   [`InitDirs`]: the directories and environment a test's init runs in.
//! - [`assert_golden`]: a text (a schema listing) held to a golden file
//!   under `fixtures/schemas/`.
//! - [`docker_env`] (feature `docker`): the engine, the test image and the
//!   static daemon the Docker tests share, or a skip in words.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `let init = or_skip!(Init::start());`, or with an `.await` inside: what
/// a test's setup gave, or the test ends here, skipped (the setup said why,
/// or failed where it must run, as codex's `skip_if_no_network!` does).
#[macro_export]
macro_rules! or_skip {
    ($setup:expr) => {
        match $setup {
            Some(made) => made,
            None => return,
        }
    };
}

/// Whether a test that needs `what` can run here. When it cannot, it skips
/// saying why, unless `COMPUTER_MCP_REQUIRE` names `what`: then it fails.
pub fn need(what: &str, available: bool, why: &str) -> bool {
    if available {
        return true;
    }
    let required = std::env::var("COMPUTER_MCP_REQUIRE").unwrap_or_default();
    if required.split(',').any(|r| r.trim() == what) {
        panic!("COMPUTER_MCP_REQUIRE names {what}, but {why}");
    }
    eprintln!("skipped: {why} (set COMPUTER_MCP_REQUIRE={what} to make this a failure)");
    false
}

/// `need("root", ...)`, with the reason every computer shares: init refuses
/// to start while it holds a bounding set it cannot empty, which is every
/// unprivileged user's case.
pub fn need_root() -> bool {
    need(
        "root",
        nix::unistd::geteuid().is_root(),
        "computerd init needs root here: it refuses to start while it holds a bounding set it cannot empty, as an unprivileged user does",
    )
}

/// The program `name` as PATH finds it, when it does.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|f| f.is_file())
}

/// `need("xvfb", ...)`: the desktop tests start their own `Xvfb` (Debian's
/// package `xvfb`), which must be on PATH.
pub fn need_xvfb() -> bool {
    need(
        "xvfb",
        on_path("Xvfb").is_some(),
        "Xvfb is not on PATH (apt-get install xvfb)",
    )
}

/// `need("chromium", ...)`: the browser tests drive Debian's Chromium
/// (package `chromium`).
pub fn need_chromium() -> bool {
    let found = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .iter()
        .any(|p| std::path::Path::new(p).is_file());
    need(
        "chromium",
        found,
        "Chromium is not installed (apt-get install chromium)",
    )
}

/// `need("adb", ...)`: the phone tests speak to Debian's adb server
/// (package `adb`), each on a port of its own. The program, when found.
pub fn need_adb() -> Option<PathBuf> {
    let found = on_path("adb");
    need(
        "adb",
        found.is_some(),
        "adb is not on PATH (apt-get install adb)",
    )
    .then_some(found)
    .flatten()
}

/// A word unique to one test: set `<marker>=1` on every program it starts.
pub fn marker(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The environment map that marks a test's programs.
pub fn marked(marker: &str) -> std::collections::BTreeMap<String, String> {
    [(marker.to_string(), "1".to_string())]
        .into_iter()
        .collect()
}

/// Processes whose environment carries `marker=1`. A process in the middle
/// of an exec reads as having no environment, so a check that a process is
/// there polls (see [`wait_until`]); a check that none is left is safe.
pub fn marked_processes(marker: &str) -> Vec<i32> {
    let needle = format!("{marker}=1");
    pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

/// The pid of every process /proc shows now.
pub fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Processes whose command line holds `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// A process's command line, for a failure message.
pub fn describe(pid: i32) -> String {
    let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    format!("{pid}: {}", cmd.replace('\0', " ").trim())
}

/// No process of the test is left (waiting up to 3 s for them to go).
pub fn assert_no_leftovers(marker: &str) {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let left = marked_processes(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= until {
            let described: Vec<String> = left.iter().map(|&p| describe(p)).collect();
            panic!("processes of the test are left behind: {described:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (polling) until `ok`, failing after `within`.
pub fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < until,
            "{what} did not happen within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The computerd binary: `COMPUTERD_BIN`, else `target/<profile>/computerd`
/// beside the running test (`target/<profile>/deps/<test>`).
pub fn computerd_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("COMPUTERD_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("computerd");
    p.is_file().then_some(p)
}

/// An Xvfb on `display` (`:N`, or `-displayfd` and a descriptor) with the
/// screen every desktop test and bench draws on: 1280x800 at 24 bits, no
/// TCP, kept between clients; nothing in, its output nowhere.
pub fn xvfb(display: &[&str]) -> std::process::Command {
    use std::process::Stdio;
    let mut cmd = std::process::Command::new("Xvfb");
    cmd.args(display)
        .args([
            "-screen",
            "0",
            "1280x800x24",
            "-nolisten",
            "tcp",
            "-noreset",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Where a test's computerd init lives: a fresh directory named after its
/// crate's tests, holding `run/` (0700: the socket's) and `home/`.
pub struct InitDirs {
    pub dir: tempfile::TempDir,
    /// `run/computerd.sock`, where the init listens.
    pub socket: PathBuf,
    pub home: PathBuf,
}

impl InitDirs {
    pub fn new(prefix: &str) -> InitDirs {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        let sockdir = dir.path().join("run");
        std::fs::create_dir(&sockdir).unwrap();
        std::fs::set_permissions(&sockdir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let socket = sockdir.join("computerd.sock");
        InitDirs { dir, socket, home }
    }

    /// `cmd` with none of the test's environment: a plain PATH, HOME here
    /// and a log that speaks only of trouble.
    pub fn daemon_env<'a>(
        &self,
        cmd: &'a mut std::process::Command,
    ) -> &'a mut std::process::Command {
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("HOME", &self.home)
            .env("COMPUTERD_LOG", "warn")
    }
}

/// What every Docker test needs: an engine that answers, the test image
/// on it and the static computerd a container binds.
#[cfg(feature = "docker")]
pub struct DockerEnv {
    pub docker: bollard::Docker,
    /// `CMCP_TEST_DOCKER_IMAGE`, else `computer-mcp-test/debian:bookworm`
    /// (made by `fixtures/images/build.sh`).
    pub image: String,
    /// `CMCP_TEST_DOCKER_COMPUTERD`, else the workspace's
    /// `target/x86_64-unknown-linux-gnu/daemon/computerd`.
    pub computerd: PathBuf,
}

/// The engine's socket the Docker tests reach.
#[cfg(feature = "docker")]
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// The Docker tests' set-up: the engine at [`DOCKER_SOCKET`] answers a
/// ping, the test image is on it and the static daemon is built. Where one
/// is missing the test skips (None) saying which and how to get it, or
/// fails instead when `COMPUTER_MCP_REQUIRE` names docker (see [`need`]).
#[cfg(feature = "docker")]
pub async fn docker_env() -> Option<DockerEnv> {
    let docker =
        bollard::Docker::connect_with_unix(DOCKER_SOCKET, 30, bollard::API_DEFAULT_VERSION).ok();
    let up = match &docker {
        Some(d) => d.ping().await.is_ok(),
        None => false,
    };
    if !need(
        "docker",
        up,
        &format!("no Docker engine answers at {DOCKER_SOCKET}"),
    ) {
        return None;
    }
    let docker = docker.unwrap();
    let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    if !need(
        "docker",
        docker.inspect_image(&image).await.is_ok(),
        &format!(
            "the test image {image} is not on this Docker host (fixtures/images/build.sh makes it)"
        ),
    ) {
        return None;
    }
    let computerd = std::env::var_os("CMCP_TEST_DOCKER_COMPUTERD")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .join("target/x86_64-unknown-linux-gnu/daemon/computerd")
        });
    if !need(
        "docker",
        computerd.exists(),
        &format!(
            "the static computerd {} is not built (RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile daemon --target x86_64-unknown-linux-gnu -p computerd)",
            computerd.display()
        ),
    ) {
        return None;
    }
    Some(DockerEnv {
        docker,
        image,
        computerd,
    })
}

/// Every container labelled `label` (`key=value`), running or not.
#[cfg(feature = "docker")]
pub async fn labelled_containers(
    docker: &bollard::Docker,
    label: &str,
) -> Vec<bollard::models::ContainerSummary> {
    let filter = std::collections::HashMap::from([("label", vec![label.to_string()])]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filter)
        .build();
    docker.list_containers(Some(opts)).await.unwrap()
}

/// Remove, forced, every container and then every volume labelled
/// `label` (a test's own clean-up; errors are ignored).
#[cfg(feature = "docker")]
pub async fn remove_labelled(docker: &bollard::Docker, label: &str) {
    for c in labelled_containers(docker, label).await {
        if let Some(id) = c.id.as_deref() {
            let _ = docker
                .remove_container(
                    id,
                    Some(
                        bollard::query_parameters::RemoveContainerOptionsBuilder::new()
                            .force(true)
                            .build(),
                    ),
                )
                .await;
        }
    }
    for v in labelled_volumes(docker, label).await {
        let _ = docker
            .remove_volume(
                &v,
                Some(
                    bollard::query_parameters::RemoveVolumeOptionsBuilder::new()
                        .force(true)
                        .build(),
                ),
            )
            .await;
    }
}

/// The names of the volumes labelled `label` (`key=value`), sorted.
#[cfg(feature = "docker")]
pub async fn labelled_volumes(docker: &bollard::Docker, label: &str) -> Vec<String> {
    let filter = std::collections::HashMap::from([("label", vec![label.to_string()])]);
    let opts = bollard::query_parameters::ListVolumesOptionsBuilder::new()
        .filters(&filter)
        .build();
    let mut v: Vec<String> = docker
        .list_volumes(Some(opts))
        .await
        .unwrap()
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    v.sort();
    v
}

/// End a child with SIGTERM (init shuts down in order), then SIGKILL what
/// is still there after `grace`, and reap it.
pub fn stop_child(child: &mut std::process::Child, grace: Duration) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    );
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Hold `text` to the golden file `fixtures/schemas/<name>.json`, so a
/// change to what clients or models see is a reviewed change. On a mismatch
/// the new text is written beside it as `<name>.current.json` and the test
/// fails; `COMPUTER_MCP_ACCEPT_SCHEMAS=1` accepts it (writes the golden file).
pub fn assert_golden(name: &str, text: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/schemas");
    let golden = dir.join(format!("{name}.json"));
    let current = dir.join(format!("{name}.current.json"));
    if std::env::var("COMPUTER_MCP_ACCEPT_SCHEMAS").as_deref() == Ok("1") {
        std::fs::write(&golden, text).unwrap();
        let _ = std::fs::remove_file(&current);
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    if want != text {
        std::fs::write(&current, text).unwrap();
        panic!(
            "{name} changed: compare {} with {}, and run with COMPUTER_MCP_ACCEPT_SCHEMAS=1 to accept",
            current.display(),
            golden.display()
        );
    }
}

/// The hostile tests' own bound around this test process (4096 pids,
/// 6 GiB; see [`bound_this_process`]): true once it holds, false (skipped
/// in words, or failed where `COMPUTER_MCP_REQUIRE` names cgroup-v1) where
/// none can be made, and the hostile test must not run.
pub fn need_own_bound() -> bool {
    let bound = bound_this_process(4096, 6144);
    need(
        "cgroup-v1",
        bound.is_ok(),
        &format!("a hostile test needs a cgroup bound of its own: {bound:?}"),
    )
}

/// Put this whole test process into cgroup v1 `pids` and `memory` groups
/// made here, by hand, with `pids` processes and `memory_mb` MiB at most,
/// once per process: the test's own bound around hostile programs (fork
/// bombs, allocations) and around every cgroup the code under test makes,
/// which nest below it. Written with plain file writes, independent of the
/// code under test, so it holds even if that code's limits fail. Groups of
/// earlier runs whose process is gone are removed first. False, with the
/// reason, when the host has no cgroup v1 `pids` and `memory` hierarchies
/// (a hostile test must then not run: `need("cgroup-v1", ...)`).
pub fn bound_this_process(pids: u64, memory_mb: u64) -> Result<(), String> {
    use std::sync::OnceLock;
    static BOUND: OnceLock<Result<(), String>> = OnceLock::new();
    BOUND
        .get_or_init(|| {
            let own = std::fs::read_to_string("/proc/self/cgroup")
                .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
            let me = std::process::id();
            for (controller, limit_file, limit) in [
                ("pids", "pids.max", pids.to_string()),
                (
                    "memory",
                    "memory.limit_in_bytes",
                    (memory_mb << 20).to_string(),
                ),
            ] {
                let path = own
                    .lines()
                    .find_map(|l| {
                        let mut f = l.splitn(3, ':');
                        let (_, cs, p) = (f.next()?, f.next()?, f.next()?);
                        cs.split(',')
                            .any(|c| c == controller)
                            .then(|| p.to_string())
                    })
                    .ok_or_else(|| format!("this host has no cgroup v1 {controller} hierarchy"))?;
                let parent = PathBuf::from("/sys/fs/cgroup")
                    .join(controller)
                    .join(path.trim_start_matches('/'))
                    .join("computer-mcp-test-bound");
                std::fs::create_dir_all(&parent)
                    .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
                if let Ok(old) = std::fs::read_dir(&parent) {
                    for e in old.flatten() {
                        let pid = e.file_name().to_string_lossy().parse::<u32>().ok();
                        if pid.is_some_and(|p| !PathBuf::from(format!("/proc/{p}")).exists()) {
                            remove_cgroup_tree(&e.path());
                        }
                    }
                }
                let dir = parent.join(me.to_string());
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                std::fs::write(dir.join(limit_file), &limit)
                    .map_err(|e| format!("cannot write {}/{limit_file}: {e}", dir.display()))?;
                let read = std::fs::read_to_string(dir.join(limit_file)).unwrap_or_default();
                if read.trim() != limit {
                    return Err(format!(
                        "{}/{limit_file} reads {read:?}, not {limit}",
                        dir.display()
                    ));
                }
                std::fs::write(dir.join("cgroup.procs"), me.to_string())
                    .map_err(|e| format!("cannot join {}: {e}", dir.display()))?;
            }
            Ok(())
        })
        .clone()
}

/// Remove an empty cgroup directory and the empty groups under it, deepest
/// first (a cgroup's control files go with its rmdir).
fn remove_cgroup_tree(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The last argument of every call `call` (e.g. `"Check::no("`) in `code`
/// that is a string literal (its text, `\"` unescaped), or a name of a
/// `const NAME: &str = "…";` in `code` (that string): the words a piece of
/// code gives, for a test that holds a document to them.
pub fn last_literal_args(code: &str, call: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(call) {
        rest = &rest[i + call.len()..];
        let Some(last) = call_args(rest).into_iter().rev().find(|a| !a.is_empty()) else {
            continue;
        };
        if let Some(lit) = last.strip_prefix('"').and_then(|l| l.strip_suffix('"')) {
            out.push(lit.replace("\\\"", "\""));
        } else if last.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            let decl = format!("const {last}: &str = \"");
            if let Some(at) = code.find(&decl).map(|a| a + decl.len())
                && let Some(len) = code[at..].find("\";")
            {
                out.push(code[at..at + len].to_string());
            }
        }
    }
    out
}

/// The arguments of a call whose text starts at `rest` (just past its
/// opening parenthesis), split at top-level commas, trimmed; strings are
/// kept whole.
fn call_args(rest: &str) -> Vec<String> {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    let mut args = vec![String::new()];
    for c in rest.chars() {
        let Some(arg) = args.last_mut() else { break };
        if in_str {
            arg.push(c);
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                args.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(arg) = args.last_mut() {
            arg.push(c);
        }
    }
    args.into_iter().map(|a| a.trim().to_string()).collect()
}

/// The section of a Markdown `doc` under `heading` (a whole line such as
/// `## Troubleshooting`), up to the next heading of that level; empty when
/// there is none.
pub fn markdown_section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let Some(start) = doc.find(heading) else {
        return "";
    };
    let body = &doc[start..];
    let level = format!("\n{} ", heading.split(' ').next().unwrap_or("##"));
    &body[..body[1..].find(&level).map_or(body.len(), |e| e + 1)]
}

/// Every path below `root`, in name order, with its type, permission bits
/// and content or link target: two trees are alike when their snapshots are.
pub fn tree_snapshot(root: &Path) -> Vec<(String, String, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String, u32, Vec<u8>)>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .as_bytes()
                    .to_vec();
                out.push((rel, "link".into(), 0, t));
            } else if meta.is_dir() {
                out.push((rel, "dir".into(), mode, vec![]));
                walk(root, &p, out);
            } else if meta.is_file() {
                out.push((rel, "file".into(), mode, std::fs::read(&p).unwrap()));
            } else {
                out.push((rel, "other".into(), mode, vec![]));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// The time `d` from now in RFC 3339, as deadlines are written.
pub fn rfc3339_in(d: Duration) -> String {
    let t = time::OffsetDateTime::now_utc() + d;
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// `n` small files (0 to 48 bytes, `file <i>` repeated) under `root`, in
/// 100 folders `d00`..`d99`: the tree the copy tests and benches carry.
pub fn small_files(root: &Path, n: usize) {
    for i in 0..n {
        let d = root.join(format!("d{:02}", i % 100));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(i % 7),
        )
        .unwrap();
    }
}
