//! `computerd sandbox`: what a program inside sees and cannot do, read from
//! inside and from the host; the forwarder's signals; refusals.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use computerd::client::ComputerExt;
use computerd::daemon::runner::pool;
use computerd::protocol::*;

use super::support::*;

mod signals;

fn sandbox_as(uid: u32, network: Network) -> Option<Init> {
    Init::start_sandboxed(SandboxOptions {
        network,
        user: Some(uid),
        ..Default::default()
    })
}

/// A host directory anyone may write, removed when dropped.
struct HostDir(PathBuf);

impl HostDir {
    fn new(name: &str, mode: u32) -> HostDir {
        let p = PathBuf::from(format!("/var/tmp/{name}"));
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        HostDir(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TRY_WRITE: &str = r#"
import errno, os, sys
for d in sys.argv[1:]:
    p = os.path.join(d, 'computerd-probe')
    try:
        with open(p, 'w') as f:
            f.write('x')
        print(d, 'wrote')
    except OSError as e:
        print(d, errno.errorcode[e.errno])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_writes_only_work_tmp_and_shm_and_the_os_dirs_are_read_only() {
    if !need_root() {
        return;
    }
    // A host directory that the program's uid could write, but for the
    // allowlist: it is not there at all.
    let open = HostDir::new(&format!("computerd-open-{}", marker()), 0o777);
    let uid = fresh_uid();
    let init = or_skip!(sandbox_as(uid, Network::None));
    let host_dir = init.dir.path().to_str().unwrap().to_string();
    let dirs = [
        "/",
        "/etc",
        "/usr",
        "/run",
        "/var/tmp",
        open.path(),
        host_dir.as_str(),
        "/work",
        "/tmp",
        "/dev/shm",
    ];
    let script = format!(
        "import sys; sys.argv = [''] + {dirs:?}\n{TRY_WRITE}",
        dirs = dirs.to_vec()
    );
    let out = py_ok(&init, &script).await;
    let said: Vec<(&str, &str)> = out.lines().filter_map(|l| l.rsplit_once(' ')).collect();
    for (dir, what) in &said {
        if ["/work", "/tmp", "/dev/shm"].contains(dir) {
            assert_eq!(*what, "wrote", "{out}");
        } else if ["/var/tmp", open.path(), host_dir.as_str()].contains(dir) {
            // Not in the allowlist: the host's /var (and the test's own
            // directory) is not in the computer.
            assert_eq!(*what, "ENOENT", "{out}");
        } else {
            assert!(*what == "EROFS" || *what == "EACCES", "{out}");
        }
    }
    assert_eq!(said.len(), dirs.len(), "{out}");
    assert!(!open.0.join("computerd-probe").exists());
    // What the program wrote in HOME is in its own /work, the program's own.
    let (code, out, _) = sh(
        &init,
        "id -u; id -g; hostname; pwd; echo $HOME; stat -c '%u:%g' /work/computerd-probe",
    )
    .await;
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        format!("{uid}\n{uid}\ncomputer\n/work\n/work\n{uid}:{uid}\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_tmp_is_its_own_both_ways() {
    if !need_root() {
        return;
    }
    let host_only = std::env::temp_dir().join(format!("computerd-host-only-{}", marker()));
    std::fs::write(&host_only, "host").unwrap();
    let init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let inside_only = format!("/tmp/computerd-inside-only-{}", init.marker);
    let (code, out, err) = sh(
        &init,
        &format!(
            "test -e {h} && echo host file visible; echo inside > {inside_only} && cat {inside_only}; ls -A /tmp",
            h = host_only.display()
        ),
    )
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    // /tmp holds what the computer made, and nothing else: no mount point
    // of the host's (the test's directory lives in the host's /tmp).
    let name = Path::new(&inside_only)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    assert_eq!(out, format!("inside\n{name}\n"));
    assert!(!Path::new(&inside_only).exists());
    std::fs::remove_file(&host_only).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_sees_only_its_own_processes_and_init_is_pid_1() {
    let init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let out = py_ok(
        &init,
        r#"
import os
for p in sorted(int(d) for d in os.listdir('/proc') if d.isdigit()):
    try:
        argv = open(f'/proc/{p}/cmdline').read().split('\0')
    except FileNotFoundError:
        continue
    print(p, os.path.basename(argv[0]), argv[1])
"#,
    )
    .await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("1 computerd init"), "{out}");
    // init, the run's guard, the idle guards init keeps for the next runs
    // and the template they are forked from, and python: nothing of the host's.
    let guards = lines
        .iter()
        .filter(|l| l.ends_with(" computerd guard"))
        .count();
    let pythons = lines.iter().filter(|l| l.ends_with(" python3 -c")).count();
    assert_eq!(pythons, 1, "{out}");
    assert!((1..=2 + pool::DEFAULT_SIZE).contains(&guards), "{out}");
    assert_eq!(lines.len(), 1 + guards + pythons, "{out}");
    // From the host: init runs under the forwarder, as the user, with no
    // capability; the forwarder is the process the test started.
    let status = std::fs::read_to_string(format!("/proc/{}/status", init.init_pid())).unwrap();
    assert!(status.contains("CapBnd:\t0000000000000000"), "{status}");
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(
        nspid.ends_with("\t1"),
        "init is PID 1 of its namespace: {nspid}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_reaches_only_its_own_loopback() {
    let (init, out) = or_skip!(connect_from(Network::None).await);
    let ifaces = out.lines().find(|l| l.starts_with("interfaces")).unwrap();
    // lo, and the kernel's fallback tunnels if their modules are loaded
    // (down, with no address: init's read-back allows nothing else).
    let tunnels = [
        "tunl0", "gre0", "gretap0", "erspan0", "ip_vti0", "ip6_vti0", "sit0", "ip6tnl0", "ip6gre0",
    ];
    for name in ifaces.trim_start_matches("interfaces ").split(' ') {
        assert!(name == "lo" || tunnels.contains(&name), "{out}");
    }
    assert!(ifaces.contains(" lo"), "{out}");
    assert!(out.contains("host-tcp ConnectionRefusedError"), "{out}");
    assert!(out.contains("own loopback answers"), "{out}");
    // The provider reads the computer's network from the pid it started:
    // the forwarder shares the computer's network namespace.
    let forwarder = init.child.id();
    let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_eq!(ns(forwarder), ns(init.init_pid() as u32));
    assert_ne!(ns(forwarder), ns(std::process::id()));
    let routes = std::fs::read_to_string(format!("/proc/{forwarder}/net/route")).unwrap();
    assert_eq!(routes.lines().skip(1).count(), 0, "{routes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_host_shares_the_hosts_loopback() {
    let (_init, out) = or_skip!(connect_from(Network::Host).await);
    assert!(out.contains("host-tcp connected"), "{out}");
}

/// A sandbox on `network` that ran [`connect_script`] against a listener on
/// the host's loopback: the sandbox and what the script printed, or None
/// (the test skips) where no sandbox can start.
async fn connect_from(network: Network) -> Option<(Init, String)> {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let init = sandbox_as(fresh_uid(), network)?;
    let out = py_ok(&init, &connect_script(port)).await;
    drop(tcp);
    Some((init, out))
}

fn connect_script(port: u16) -> String {
    format!(
        r#"
import socket
names = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])
print('interfaces', ' '.join(names))
s = socket.socket()
s.settimeout(5)
try:
    s.connect(('127.0.0.1', {port}))
    print('host-tcp connected')
except OSError as e:
    print('host-tcp', type(e).__name__)
{OWN_LOOPBACK_PY}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_run_root_and_home_are_absent_and_only_the_socket_dir_shows_in_run() {
    if !need_root() {
        return;
    }
    let m = marker();
    // A unix socket under /run that answers: a read-only mount alone would
    // still let a program connect to it (as to /run/docker.sock).
    let canary = PathBuf::from(format!("/run/computerd-canary-{m}.sock"));
    let listener = std::os::unix::net::UnixListener::bind(&canary).unwrap();
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o777)).unwrap();
    let uid = fresh_uid();
    // The socket's directory is under the host's /run: inside, it is
    // /run/computerd and nothing else of the host's /run shows.
    let init = or_skip!(Init::start_sandboxed(SandboxOptions {
        user: Some(uid),
        base: Some("/run".into()),
        ..Default::default()
    }));
    let test_dir = init.dir.path().to_str().unwrap().to_string();
    let script = format!(
        r#"
for d in /root /home /var /run/user {test_dir}; do test -e $d && echo "$d shows"; done
echo "/run: $(ls -A /run | tr '\n' ' ')"
echo "/run/computerd: $(ls -A /run/computerd | tr '\n' ' ')"
touch /run/x 2>/dev/null || echo "run read-only"
echo home > $HOME/h && cat $HOME/h
python3 -c "
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('{canary}')
    print('canary connected')
except OSError as e:
    print('canary', type(e).__name__)
"
"#,
        canary = canary.display(),
    );
    let (code, out, err) = sh(&init, &script).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        "/run: computerd \n/run/computerd: computerd.sock \nrun read-only\nhome\ncanary FileNotFoundError\n"
    );
    drop(init);
    drop(listener);
    let _ = std::fs::remove_file(&canary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computerd_outside_the_os_dirs_runs_from_opt_computerd_and_its_dir_is_absent() {
    if !need_root() {
        return;
    }
    // As a computerd installed in the server's HOME (~/.cargo/bin): bound
    // alone at /opt/computerd/computerd, its directory not in the computer.
    let bin = HostDir::new(&format!("computerd-bin-{}", marker()), 0o755);
    std::fs::write(bin.0.join("secret"), "secret").unwrap();
    let exe = bin.0.join("computerd");
    std::fs::copy(COMPUTERD, &exe).unwrap();
    let init = or_skip!(Init::start_sandboxed(SandboxOptions {
        user: Some(fresh_uid()),
        exe: Some(exe.clone()),
        ..Default::default()
    }));
    // exec.run starts a guard from init's own binary, by its path inside.
    let (code, out, err) = sh(
        &init,
        &format!(
            "ls -A /opt /opt/computerd; test -e {} || echo absent; awk '$5 == \"/opt/computerd/computerd\" {{print $6}}' /proc/self/mountinfo",
            bin.path()
        ),
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (
            Some(0),
            "/opt:\ncomputerd\n\n/opt/computerd:\ncomputerd\nabsent\nro,nosuid,nodev,relatime\n"
        ),
        "{err}"
    );
    drop(init);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_holds_only_the_minimal_nodes_and_they_work() {
    let init = or_skip!(sandbox_as(fresh_uid(), Network::None));
    let (code, out, err) = sh(
        &init,
        "ls -A /dev | tr '\\n' ' '; echo; head -c 16 /dev/urandom | wc -c; echo x > /dev/null && echo null; \
         head -c 3 /dev/zero | wc -c; echo shm > /dev/shm/x && cat /dev/shm/x; touch /dev/x 2>/dev/null || echo dev read-only",
    )
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \n16\nnull\n3\nshm\ndev read-only\n"
    );
    // A terminal from the computer's own devpts.
    let c = init.client().await;
    let mut sp = start_sh("tty; ls -1 /dev/pts", &init.marker);
    sp.pty = Some(PtySize { cols: 80, rows: 24 });
    let p = c.call(&sp).await.unwrap();
    assert_eq!(wait_end(&c, &p.id).await.exit_code, Some(0));
    let out = c.read_process_output(&p.id, Stream::Pty, 0).await.unwrap();
    let text = String::from_utf8_lossy(&out.data).replace('\r', "");
    assert_eq!(text, "/dev/pts/0\n0\nptmx\n");
}

/// A directory a sandbox's user reaches (0755), with the socket's `run/`
/// (0700) in it.
fn socket_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    (dir, run)
}

/// Run the sandbox with `flags` (before `--`) and `init` (after, with
/// `--socket /run/computerd/s.sock` unless it names one), `{dir}` standing
/// for a fresh directory holding `home` and `run`: its exit code and stderr
/// (with the directory written `{dir}` again), after checking it left no
/// process and no socket.
fn sandbox_refusal(flags: &[&str], init: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let d = dir.path().to_str().unwrap();
    let sub = |s: &str| s.replace("{dir}", d);
    let socket = run.join("s.sock");
    let out = Command::new(COMPUTERD)
        .arg("sandbox")
        .args(flags.iter().map(|f| sub(f)))
        .arg("--")
        .args(init.iter().map(|f| sub(f)))
        .arg("--deadline")
        .arg(rfc3339_in(Duration::from_secs(60)))
        .args(if init.contains(&"--socket") {
            vec![]
        } else {
            vec!["--socket", "/run/computerd/s.sock"]
        })
        .output()
        .unwrap();
    assert!(!socket.exists(), "a refused sandbox must not listen");
    assert!(!run.join("computerd.sock").exists());
    assert_eq!(computer_testkit::processes_mentioning(d), Vec::<i32>::new());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).replace(d, "{dir}"),
    )
}

#[test]
fn refusals_are_said_in_words_and_nothing_starts() {
    if !need_root() {
        return;
    }
    let ok = ["--run", "{dir}/run"];
    let user = ["init", "--user", "40000:40000"];
    let with = |more: &[&'static str]| [&ok[..], more].concat();
    let cases: Vec<(Vec<&str>, Vec<&str>, &str)> = vec![
        (vec![], user.to_vec(), "--run <DIR>"),
        (
            vec!["--run", "{dir}/missing"],
            user.to_vec(),
            "--run {dir}/missing: cannot resolve it",
        ),
        (
            vec!["--run", "run"],
            user.to_vec(),
            "--run run is not an absolute path",
        ),
        (
            with(&["--network", "bridge"]),
            user.to_vec(),
            "--network is none (only the computer's own loopback) or host",
        ),
        // The flags of the masked view are gone.
        (
            with(&["--work", "{dir}/home"]),
            user.to_vec(),
            "--work is not one of its flags",
        ),
        (
            with(&["--hide", "{dir}/home"]),
            user.to_vec(),
            "--hide is not one of its flags",
        ),
        (
            with(&["--work-size-mib", "0"]),
            user.to_vec(),
            "--work-size-mib \"0\" is not a whole number from 1 to 1048576",
        ),
        (
            with(&["--bind", "{dir}/home"]),
            user.to_vec(),
            "is not HOST_DIR:INSIDE[:ro]",
        ),
        (
            with(&["--bind", "relative:/workspace/r"]),
            user.to_vec(),
            "--bind relative:/workspace/r: HOST_DIR relative is not an absolute path",
        ),
        (
            with(&["--bind", "{dir}/missing:/workspace/m"]),
            user.to_vec(),
            "--bind {dir}/missing:/workspace/m: HOST_DIR {dir}/missing: cannot resolve it",
        ),
        (
            with(&["--bind", "{dir}/run/../home:/work/h"]),
            user.to_vec(),
            "INSIDE must be /workspace or a path under it",
        ),
        (
            with(&["--cgroup", "relative"]),
            user.to_vec(),
            "--cgroup relative is not an absolute path",
        ),
        (
            with(&["--cgroup", "{dir}/no-such-cgroup"]),
            user.to_vec(),
            "--cgroup {dir}/no-such-cgroup: could not move the sandbox",
        ),
        (
            ok.to_vec(),
            vec![
                "init",
                "--user",
                "40000:40000",
                "--socket",
                "{dir}/run/s.sock",
            ],
            "init's --socket {dir}/run/s.sock must be a name in /run/computerd",
        ),
        (
            ok.to_vec(),
            vec!["init"],
            "as root, the sandbox runs init only with --user UID:GID",
        ),
        (
            ok.to_vec(),
            vec!["init", "--user", "0:0"],
            "a uid other than 0",
        ),
        (ok.to_vec(), vec!["stdio"], "runs `computerd init` only"),
    ];
    for (flags, init, said) in cases {
        let (code, stderr) = sandbox_refusal(&flags, &init);
        assert_eq!(code, 1, "{flags:?}: {stderr}");
        assert!(stderr.contains(said), "{flags:?}: {stderr}");
    }
}

/// Whether uid 65534 with no capability may make a user namespace here.
fn unprivileged_userns_works() -> bool {
    let mut cmd = Command::new("true");
    // SAFETY: the closure only makes prctl, set*id and unshare calls.
    unsafe {
        cmd.pre_exec(|| {
            become_nobody_with_no_capability()?;
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(std::io::Error::from)
        });
    }
    cmd.status().is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprivileged_user_gets_the_same_sandbox_through_a_user_namespace() {
    if !need_root() {
        return;
    }
    if !need(
        "userns",
        unprivileged_userns_works(),
        "this host does not let uid 65534 make a user namespace",
    ) {
        return;
    }
    let init = or_skip!(Init::start_sandboxed(SandboxOptions {
        unprivileged: Some((65534, become_nobody_with_no_capability)),
        ..Default::default()
    }));
    let (code, out, err) = sh(
        &init,
        "id -u; id -g; cat /proc/self/uid_map | tr -s ' '; hostname; echo f > $HOME/f; \
         touch /etc/x 2>&1 | grep -o 'Read-only file system'; ls /proc | grep -c '^[0-9]'; \
         grep -E '^(CapBnd|CapEff|NoNewPrivs)' /proc/self/status | tr -d '\\t'; \
         echo $HOME; stat -c '%u:%g' $HOME/f; stat -c '%u:%g %a' /work; \
         ls /sys/class/net 2>/dev/null | grep -cvE '^(lo|tunl0|gre0|gretap0|erspan0|ip_vti0|ip6_vti0|sit0|ip6tnl0|ip6gre0)$'; true",
    )
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "65534",
            "65534",
            " 65534 65534 1",
            "computer",
            "Read-only file system"
        ],
        "{out}"
    );
    // init, its guard, sh, and the pipeline's ls and grep (if started yet),
    // and the idle guards init keeps for the next runs with their template.
    let n: usize = lines[5].parse().unwrap();
    assert!((4..=7 + pool::DEFAULT_SIZE).contains(&n), "{out}");
    assert_eq!(
        lines[6..],
        [
            "CapEff:0000000000000000",
            "CapBnd:0000000000000000",
            "NoNewPrivs:1",
            "/work",
            "65534:65534",
            "65534:65534 700",
            // No host interface in /sys (a sysfs of its own network, or
            // no /sys where the kernel refuses one in a user namespace).
            "0"
        ],
        "{out}"
    );
    // From the host: init is uid 65534 with an empty bounding set.
    let status = std::fs::read_to_string(format!("/proc/{}/status", init.init_pid())).unwrap();
    assert!(status.contains("CapBnd:\t0000000000000000"), "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().skip(1).all(|u| u == "65534")),
        "{status}"
    );
}

/// Become uid 65534 with no capability inside a user namespace whose
/// `user.max_user_namespaces` is 0: a host that allows no more of them.
fn nobody_where_user_namespaces_are_forbidden() -> std::io::Result<()> {
    use std::io::Write;
    let write = |p: &str, text: &[u8]| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)?
            .write_all(text)
    };
    // As nobody, a user namespace of its own with only its own ids mapped
    // (the unprivileged way), and every capability in it for a moment.
    become_nobody_with_no_capability()?;
    // The uid change made this process non-dumpable, and so its /proc files
    // root's; an exec would undo that, but the maps are written before it.
    nix::sys::prctl::set_dumpable(true)?;
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?;
    write("/proc/self/setgroups", b"deny")?;
    write("/proc/self/uid_map", b"65534 65534 1\n")?;
    write("/proc/self/gid_map", b"65534 65534 1\n")?;
    write("/proc/sys/user/max_user_namespaces", b"0\n")?;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; failures past the last cap are fine.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
    Ok(())
}

#[test]
fn a_host_without_user_namespaces_is_refused_in_words() {
    if !need_root() {
        return;
    }
    let (_dir, run) = socket_dir();
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
    let init = InitArgs::new(
        Time::from_now(Duration::from_secs(60)),
        "/run/computerd/s.sock",
    );
    let mut cmd = Program::computerd(COMPUTERD).command(SandboxArgs::new(&run, init));
    // SAFETY: the function only opens and writes /proc files and makes
    // unshare, prctl and set*id calls before exec.
    unsafe {
        cmd.pre_exec(nobody_where_user_namespaces_are_forbidden);
    }
    let out = cmd.output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_eq!(
        said.trim_end(),
        "computerd sandbox: this host does not allow unprivileged user namespaces (user.max_user_namespaces is 0 or used up (ENOSPC); uid 65534); run as root, or pass --local-isolation none to the server, which runs computers unisolated and is unsafe"
    );
    assert!(!run.join("s.sock").exists());
}
