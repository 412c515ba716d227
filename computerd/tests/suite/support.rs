//! Starting a real `computerd init` (alone or under `computerd sandbox`),
//! clients for it, and the leftover checks.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use computer_testkit::{
    assert_no_leftovers, marked, marked_processes, need, need_root, or_skip, rfc3339_in,
};
use computerd::client::{ComputerExt, DaemonClient};
pub use computerd::launch::{
    InitArgs, Network, Program, SandboxArgs, Share, StdioArgs, Time, UserSpec,
};
use computerd::protocol::{Envelope, ExecResult, Id, ProcessStartResult, Stream};

/// A marker for one test of this crate.
pub fn marker() -> String {
    computer_testkit::marker("CMT")
}
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

pub const COMPUTERD: &str = env!("CARGO_BIN_EXE_computerd");

pub struct Init {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub marker: String,
    /// `child` is `computerd sandbox`'s forwarder, and init its child.
    pub sandboxed: bool,
}

pub struct InitOptions {
    pub deadline: Duration,
    pub max_deadline: Option<Duration>,
    /// `--own-network`.
    pub own_network: bool,
    /// `--user uid:uid`: init starts as root and becomes this user.
    pub user: Option<u32>,
    /// More of init's environment (DISPLAY, XAUTHORITY).
    pub env: Vec<(String, String)>,
    /// The computerd binary init runs from (default: the one built).
    pub exe: Option<std::path::PathBuf>,
    /// A pids cgroup (v1) init starts in, so it and all it starts are held
    /// by the group's bound.
    pub pids_group: Option<PathBuf>,
}

impl Default for InitOptions {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(600),
            max_deadline: Some(Duration::from_secs(3600)),
            own_network: false,
            user: None,
            env: Vec::new(),
            exe: None,
            pids_group: None,
        }
    }
}

impl Init {
    /// A running init, or None (the test then skips) when this process is
    /// not root: init refuses to start while it holds a bounding set it
    /// cannot empty, which is every unprivileged user's case.
    pub fn start() -> Option<Init> {
        Self::start_with(InitOptions::default())
    }

    /// process.start of `script` on `c` (see [`start_sh`]).
    pub async fn start_script(&self, c: &DaemonClient, script: &str) -> ProcessStartResult {
        c.call(&start_sh(script, &self.marker)).await.unwrap()
    }

    /// exec.run of `script` on `c` (see [`exec_sh`]).
    pub async fn run_script(&self, c: &DaemonClient, script: &str) -> ExecResult {
        c.call(&exec_sh(script, &self.marker)).await.unwrap()
    }

    /// process.start of `script` on `c` with its stdin open.
    pub async fn start_with_stdin(&self, c: &DaemonClient, script: &str) -> ProcessStartResult {
        let mut sp = start_sh(script, &self.marker);
        sp.stdin = Some(true);
        c.call(&sp).await.unwrap()
    }

    /// [`Init::start`] and a client connected to it.
    pub async fn with_client() -> Option<(Init, DaemonClient)> {
        let init = Self::start()?;
        let c = init.client().await;
        Some((init, c))
    }

    /// A running init whose programs run as a uid of their own (see
    /// [`fresh_uid`]), or None as [`Init::start`].
    pub fn as_fresh_user() -> Option<Init> {
        Self::as_user(fresh_uid())
    }

    /// A running init whose programs run as `uid`, or None as [`Init::start`].
    pub fn as_user(uid: u32) -> Option<Init> {
        Self::start_with(InitOptions {
            user: Some(uid),
            ..Default::default()
        })
    }

    pub fn start_with(o: InitOptions) -> Option<Init> {
        if !need_root() {
            return None;
        }
        let dirs = computer_testkit::InitDirs::new("computerd-test");
        if o.user.is_some() {
            // The user must reach its HOME and socket through the temp dir.
            std::fs::set_permissions(dirs.dir.path(), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let mut init = InitArgs::new(Time::from_now(o.deadline), &dirs.socket);
        init.max_deadline = o.max_deadline.map(Time::from_now);
        init.user = o.user.map(|uid| UserSpec { uid, gid: uid });
        init.own_network = o.own_network;
        let exe = o.exe.clone().unwrap_or_else(|| COMPUTERD.into());
        let mut cmd = Program::computerd(exe).command(init);
        dirs.daemon_env(&mut cmd).stdin(Stdio::null());
        cmd.envs(o.env.iter().map(|(k, v)| (k, v)));
        let procs = o.pids_group.as_ref().map(|g| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(g.join("cgroup.procs"))
                .unwrap()
        });
        if let Some(procs) = &procs {
            use std::os::fd::AsRawFd;
            let fd = procs.as_raw_fd();
            // SAFETY: one write(2) of a constant, async-signal-safe: the
            // child moves itself into the group before it execs init.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let child = cmd.spawn().unwrap();
        drop(procs);
        let computer_testkit::InitDirs { dir, socket, .. } = dirs;
        let init = Init {
            child,
            dir,
            socket,
            marker: marker(),
            sandboxed: false,
        };
        init.wait_for_socket();
        Some(init)
    }

    /// `computerd sandbox --run <dir>/run <flags> -- init … --socket
    /// /run/computerd/computerd.sock`: init as PID 1 of the sandbox, its
    /// socket reached from outside at `<dir>/run/computerd.sock`.
    pub fn start_sandboxed(o: SandboxOptions) -> Option<Init> {
        if !need_root() {
            return None;
        }
        let base = o.base.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("computerd-sbx")
            .tempdir_in(base)
            .unwrap();
        // The user (init's --user, or the unprivileged sandbox's) must reach
        // its HOME and socket through the test's directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = dir.path().join("home");
        let run = dir.path().join("run");
        std::fs::create_dir(&home).unwrap();
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        if let Some((uid, _)) = o.unprivileged {
            for d in [&home, &run] {
                std::os::unix::fs::chown(d, Some(uid), Some(uid)).unwrap();
            }
        }
        let socket = run.join("computerd.sock");
        let mut init = InitArgs::new(
            Time::from_now(Duration::from_secs(600)),
            "/run/computerd/computerd.sock",
        );
        init.max_deadline = Some(Time::from_now(Duration::from_secs(3600)));
        init.user = o.user.map(|uid| UserSpec { uid, gid: uid });
        let mut sandbox = SandboxArgs::new(&run, init);
        sandbox.network = o.network;
        if let Some(n) = o.work_size_mib {
            sandbox.work_size_mib = n;
        }
        sandbox.binds = o.binds.clone();
        sandbox.cgroups = o.cgroups.clone();
        let exe = o.exe.clone().unwrap_or_else(|| COMPUTERD.into());
        let mut cmd = Program::computerd(exe).command(sandbox);
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("COMPUTERD_LOG", "warn")
            .stdin(Stdio::null());
        if let Some((_, become_user)) = o.unprivileged {
            // SAFETY: the function only makes prctl/set*id calls before exec.
            unsafe {
                cmd.pre_exec(become_user);
            }
        }
        let child = cmd.spawn().unwrap();
        let init = Init {
            child,
            dir,
            socket,
            marker: marker(),
            sandboxed: true,
        };
        init.wait_for_socket();
        Some(init)
    }

    /// Init's pid as the host sees it: under a sandbox, the forwarder's child.
    pub fn init_pid(&self) -> i32 {
        let pid = self.child.id() as i32;
        if !self.sandboxed {
            return pid;
        }
        children_of(pid).first().copied().unwrap_or(pid)
    }

    fn wait_for_socket(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "computerd init did not listen on {} within 10 s",
            self.socket.display()
        );
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    pub async fn client(&self) -> DaemonClient {
        DaemonClient::new(UnixStream::connect(&self.socket).await.unwrap())
    }

    pub async fn raw(&self) -> Raw {
        let (r, w) = UnixStream::connect(&self.socket)
            .await
            .unwrap()
            .into_split();
        Raw {
            read: BufReader::new(r),
            write: w,
        }
    }

    /// SIGTERM, and wait for init to exit (bounded).
    pub fn stop(mut self) -> ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::SIGTERM,
        )
        .unwrap();
        self.wait_exit(Duration::from_secs(15))
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < until,
                "computerd init did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Init {
    fn drop(&mut self) {
        let running = self.child.try_wait().ok().flatten().is_none();
        if running && !std::thread::panicking() {
            assert_no_zombies_under(self.child.id() as i32);
            if self.sandboxed {
                assert_no_zombies_under(self.init_pid());
            }
        }
        if running {
            computer_testkit::stop_child(&mut self.child, Duration::from_secs(15));
        }
        // The test's own leftovers are checked whatever the test did.
        if !std::thread::panicking() {
            assert_no_leftovers(&self.marker);
        }
    }
}

/// Run between fork and exec to make the process another user.
pub type BecomeUser = fn() -> std::io::Result<()>;

/// How to start `computerd sandbox … -- init …` ([`Init::start_sandboxed`]).
#[derive(Default)]
pub struct SandboxOptions {
    /// The sandbox's `--network`.
    pub network: Network,
    /// The sandbox's `--work-size-mib` (its default when None).
    pub work_size_mib: Option<u64>,
    /// The sandbox's `--bind`s.
    pub binds: Vec<Share>,
    /// The sandbox's `--cgroup`s.
    pub cgroups: Vec<PathBuf>,
    /// init's `--user uid:uid` (required as root).
    pub user: Option<u32>,
    /// Where the test's directory (HOME and the socket's) is made; by
    /// default the temp dir, which the sandbox replaces by its own /tmp.
    pub base: Option<PathBuf>,
    /// Start the sandbox as this uid (gid alike), made so by the function
    /// run before exec; HOME and the socket's directory are given to it.
    pub unprivileged: Option<(u32, BecomeUser)>,
    /// Run this copy of computerd instead of the one cargo built.
    pub exe: Option<PathBuf>,
}

/// The pids of a process's children.
pub fn children_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Init holds no zombie: every child of its that ended was reaped (waiting
/// up to 2 s for the reaper to run).
pub fn assert_no_zombies_under(pid: i32) {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let zombies: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
                    return false;
                };
                let f: Vec<&str> = rest.split(' ').collect();
                f.len() > 2 && f[0] == "Z" && f[1] == pid.to_string()
            })
            .collect();
        if zombies.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "zombies are left under init {pid}: {zombies:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What process `id` wrote to `stream`, read whole once it has ended.
pub async fn output_of(c: &DaemonClient, id: &str, stream: Stream) -> Vec<u8> {
    c.read_process_output(id, stream, 0).await.unwrap().data
}

/// The end of a Python script (one that imported `socket`) that prints
/// `own loopback answers` where the computer's own loopback carries a
/// connection to a listener of its own.
pub const OWN_LOOPBACK_PY: &str = r#"srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen(1)
cli = socket.create_connection(srv.getsockname(), timeout=5)
conn, _ = srv.accept()
conn.sendall(b'own loopback answers')
print(cli.recv(100).decode())
"#;

/// A uid no other test of this run uses (--own-network refuses a uid that
/// any other process holds).
pub fn fresh_uid() -> u32 {
    static N: AtomicU64 = AtomicU64::new(0);
    40_000 + (std::process::id() % 400) * 50 + N.fetch_add(1, Ordering::Relaxed) as u32
}

/// A raw line connection, for what the typed client hides (cancel replies,
/// bad lines).
pub struct Raw {
    read: BufReader<OwnedReadHalf>,
    pub write: OwnedWriteHalf,
}

impl Raw {
    pub async fn send_line(&mut self, line: &[u8]) {
        self.write.write_all(line).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
    }

    pub async fn send(&mut self, v: Value) {
        self.send_line(v.to_string().as_bytes()).await;
    }

    pub async fn request(&mut self, id: i64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    pub async fn recv(&mut self) -> Envelope {
        let line = self.line("a reply").await;
        assert!(!line.is_empty(), "the connection ended");
        serde_json::from_str(&line).unwrap()
    }

    /// The next line (empty at the end), which must come within 20 s.
    async fn line(&mut self, what: &str) -> String {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), self.read.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("{what} within 20 s"))
            .unwrap();
        line
    }

    /// A line and the raw bytes of a bytes frame after it.
    pub async fn send_frame(&mut self, v: Value, bytes: &[u8]) {
        self.send(v).await;
        self.write.write_all(bytes).await.unwrap();
    }

    /// The raw bytes of the frame after a reply line.
    pub async fn recv_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        tokio::time::timeout(Duration::from_secs(20), self.read.read_exact(&mut buf))
            .await
            .expect("the frame's bytes within 20 s")
            .unwrap();
        buf
    }

    /// True when the daemon ends the connection (within 20 s) with nothing more to say.
    pub async fn ends(&mut self) -> bool {
        self.line("the end").await.is_empty()
    }

    /// Wait for the reply to `id`, keeping others aside.
    pub async fn reply_to(&mut self, id: i64) -> Envelope {
        loop {
            let env = self.recv().await;
            if env.id == Some(Id::Num(id)) {
                return env;
            }
        }
    }

    /// The replies to requests in flight together, in the order of `ids`:
    /// they may come in any order (each is answered when it is done), and
    /// a reply to one of them is never skipped while waiting for another.
    pub async fn replies_to(&mut self, ids: &[i64]) -> Vec<Envelope> {
        let mut got: Vec<Option<Envelope>> = vec![None; ids.len()];
        while got.iter().any(Option::is_none) {
            let env = self.recv().await;
            if let Some(at) = ids.iter().position(|&i| env.id == Some(Id::Num(i))) {
                got[at] = Some(env);
            }
        }
        got.into_iter().flatten().collect()
    }
}

pub fn kind_of(env: &Envelope) -> Option<String> {
    env.error
        .as_ref()
        .and_then(|e| e.kind())
        .map(|k| k.as_str().to_string())
}

pub fn exists(p: impl AsRef<Path>) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// For a pre_exec: drop the whole bounding set, then become 65534 with no
/// groups, as an unprivileged user with no capability starts.
pub fn become_nobody_with_no_capability() -> std::io::Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; failures past the last cap are fine.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
    // SAFETY: set*id calls with integer arguments.
    let failed = unsafe {
        libc::setgroups(0, std::ptr::null()) < 0
            || libc::setresgid(65534, 65534, 65534) < 0
            || libc::setresuid(65534, 65534, 65534) < 0
    };
    if failed {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// exec.run of a shell script, marked as the test's, within 20 s.
pub fn exec_sh(script: &str, marker: &str) -> computerd::protocol::ExecParams {
    computerd::protocol::ExecParams {
        timeout_ms: Some(20_000),
        ..exec_argv(&["sh", "-c", script], marker)
    }
}

/// exec.run of a Python script, marked as the test's, within 20 s.
pub fn py(script: &str, marker: &str) -> computerd::protocol::ExecParams {
    computerd::protocol::ExecParams {
        timeout_ms: Some(20_000),
        ..exec_argv(&["python3", "-c", script], marker)
    }
}

/// What a Python script run in the computer printed, once it exited 0
/// (else the test fails with its output).
pub async fn py_ok(init: &Init, script: &str) -> String {
    let r = init
        .client()
        .await
        .call(&py(script, &init.marker))
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout.0).into_owned();
    assert_eq!(
        r.exit_code,
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&r.stderr.0)
    );
    out
}

/// process.start of a shell script, marked as the test's.
pub fn start_sh(script: &str, marker: &str) -> computerd::protocol::ProcessStartParams {
    start_argv(&["sh", "-c", script], marker)
}

/// process.start of `argv`, marked as the test's.
pub fn start_argv(argv: &[&str], marker: &str) -> computerd::protocol::ProcessStartParams {
    computerd::protocol::ProcessStartParams {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Some(marked(marker)),
        ..Default::default()
    }
}

/// exec.run of `argv`, marked as the test's, with no timeout of its own.
pub fn exec_argv(argv: &[&str], marker: &str) -> computerd::protocol::ExecParams {
    computerd::protocol::ExecParams {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Some(marked(marker)),
        ..Default::default()
    }
}

/// process.read of `stream` from `offset`, waiting up to `wait_ms` for data.
pub fn read_at(
    id: &str,
    stream: Stream,
    offset: u64,
    wait_ms: Option<u64>,
) -> computerd::protocol::ProcessReadParams {
    computerd::protocol::ProcessReadParams {
        id: id.into(),
        stream,
        offset,
        max_bytes: None,
        wait_ms,
    }
}

/// process.write of `data` to process `id`'s stdin, closing it after when `close`.
pub fn write_in(id: &str, data: &[u8], close: bool) -> computerd::protocol::ProcessWriteParams {
    computerd::protocol::ProcessWriteParams {
        id: id.into(),
        data: Some(computerd::protocol::Bytes64(data.to_vec())),
        close: close.then_some(true),
    }
}

/// The refusal of a call, checked to be of `kind`.
pub async fn refused<P: computerd::protocol::Call>(
    c: &DaemonClient,
    params: &P,
    kind: computerd::protocol::ErrorKind,
) -> computerd::client::ClientError {
    let Err(e) = c.call(params).await else {
        panic!("{} was not refused", P::METHOD.as_str());
    };
    assert_eq!(e.kind(), Some(kind), "{e}");
    e
}

/// process.wait for process `id`'s end, within `timeout_ms`.
pub async fn wait_within(
    c: &DaemonClient,
    id: &str,
    timeout_ms: u64,
) -> Result<computerd::protocol::ProcessWaitResult, computerd::client::ClientError> {
    c.call(&computerd::protocol::ProcessWaitParams {
        id: id.into(),
        timeout_ms,
    })
    .await
}

/// process.wait for process `id`'s end, within 20 s.
pub async fn wait_end(c: &DaemonClient, id: &str) -> computerd::protocol::ProcessWaitResult {
    wait_within(c, id, 20_000).await.unwrap()
}

/// process.signal `signal` to process `id`.
pub async fn signal(
    c: &DaemonClient,
    id: &str,
    signal: computerd::protocol::Signal,
) -> computerd::protocol::ProcessSignalResult {
    c.call(&computerd::protocol::ProcessSignalParams {
        id: id.into(),
        signal,
    })
    .await
    .unwrap()
}

/// Run a shell script in the computer, marked as the test's: (exit code,
/// stdout, stderr).
pub async fn sh(init: &Init, script: &str) -> (Option<i32>, String, String) {
    let r = init.run_script(&init.client().await, script).await;
    (
        r.exit_code,
        String::from_utf8_lossy(&r.stdout.0).into_owned(),
        String::from_utf8_lossy(&r.stderr.0).into_owned(),
    )
}

/// A pids cgroup (v1) made for one test under this process's own, removed
/// when dropped.
pub struct PidsGroup(PathBuf);

/// The pids-hierarchy path in /proc/PID/cgroup (`self` for this process),
/// None without a v1 pids hierarchy.
pub fn pids_cgroup_of(pid: impl std::fmt::Display) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            controllers
                .split(',')
                .any(|c| c == "pids")
                .then(|| path.to_string())
        })
}

impl PidsGroup {
    /// A group of at most `max` processes and threads; None (the test
    /// then skips) where this host has no v1 pids hierarchy.
    pub fn new(name: &str, max: u64) -> Option<PidsGroup> {
        let root = Path::new("/sys/fs/cgroup/pids");
        let own = pids_cgroup_of("self");
        let ok = own.is_some() && root.join("cgroup.procs").exists();
        if !need("cgroup-v1", ok, "this host has no cgroup v1 pids hierarchy") {
            return None;
        }
        let dir = root
            .join(own.unwrap_or_default().trim_start_matches('/'))
            .join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("pids.max"), max.to_string()).unwrap();
        Some(PidsGroup(dir))
    }

    pub fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.0.join("cgroup.procs"))
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    /// The group's path as /proc/PID/cgroup names it.
    pub fn relative(&self) -> String {
        format!(
            "/{}",
            self.0
                .strip_prefix("/sys/fs/cgroup/pids")
                .unwrap()
                .display()
        )
    }
}

impl PidsGroup {
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// How often a fork in the group was refused at its bound (`pids.events`).
    pub fn refused(&self) -> u64 {
        std::fs::read_to_string(self.0.join("pids.events"))
            .unwrap_or_default()
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        // Its processes are gone a moment after the sandbox ends.
        let until = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
