//! What init makes true of itself and its programs, read back from outside
//! and from inside: no capability, no_new_privs, seccomp, --user, --own-network.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use computerd::protocol::*;

use super::support::*;

/// The five capability sets, NoNewPrivs and Seccomp of one status file.
fn assert_locked_down(who: &str, status: &str) {
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{who}: no {key}"));
        assert_eq!(
            line.split_whitespace().nth(1),
            Some("0000000000000000"),
            "{who}: {line}"
        );
    }
    let field = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(String::from)
    };
    assert_eq!(field("NoNewPrivs:").as_deref(), Some("1"), "{who}");
    assert_eq!(field("Seccomp:").as_deref(), Some("2"), "{who}");
}

const THREADS_STATUS: &str = r#"
import threading, glob, time
ev = threading.Event()
ts = [threading.Thread(target=ev.wait) for _ in range(3)]
[t.start() for t in ts]
time.sleep(0.1)
for p in sorted(glob.glob('/proc/self/task/*/status')):
    print('=== ' + p)
    print(open(p).read())
ev.set()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_and_its_programs_hold_no_capability_on_any_thread() {
    let init = or_skip!(Init::start());
    // A program's every thread, read from inside.
    let c = init.client().await;
    let r = c.call(&py(THREADS_STATUS, &init.marker)).await.unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    let threads: Vec<&str> = out.split("=== ").filter(|s| !s.is_empty()).collect();
    assert!(threads.len() >= 4, "{out}");
    for t in threads {
        assert_locked_down("a program's thread", t);
    } // Init's every thread, read from outside.
    // The runtime's own thread and at least one of its blocking pool (the
    // idle guards are forked from there, from init's start on).
    let read = || -> Vec<_> {
        std::fs::read_dir(format!("/proc/{}/task", init.child.id()))
            .unwrap()
            .flatten()
            .collect()
    };
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let mut tasks = read();
    while tasks.len() < 2 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        tasks = read();
    }
    assert!(
        tasks.len() >= 2,
        "the blocking pool's threads are there too: {}",
        tasks.len()
    );
    for t in tasks {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap();
        assert_locked_down(&format!("init thread {:?}", t.file_name()), &status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsock_io_uring_user_namespaces_and_32_bit_calls_are_refused() {
    let init = or_skip!(Init::as_fresh_user());
    let script = r#"
import ctypes, errno, mmap, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def err(rc):
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if rc < 0 else 'ok'
try:
    socket.socket(40, socket.SOCK_STREAM)   # AF_VSOCK
    print('vsock ok')
except OSError as e:
    print('vsock', errno.errorcode[e.errno])
params = ctypes.create_string_buffer(120)
print('io_uring_setup', err(libc.syscall(425, 8, params)))
print('unshare_user', err(libc.unshare(0x10000000)))
# mov eax, 20 (getpid in the 32-bit table); int 0x80; ret
code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
print('int80', ctypes.CFUNCTYPE(ctypes.c_int)(addr)(), 'pid', os.getpid())
"#;
    let out = py_ok(&init, script).await;
    assert!(out.contains("vsock EPERM\n"), "{out}");
    assert!(out.contains("io_uring_setup EPERM\n"), "{out}");
    assert!(out.contains("unshare_user EPERM\n"), "{out}");
    assert!(
        out.contains("int80 -38 pid"),
        "a 32-bit call must get ENOSYS, never run: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setuid_root_copy_of_id_runs_without_euid_0() {
    let uid = fresh_uid();
    let init = or_skip!(Init::as_user(uid));
    let sudo_like = init.path("id-suid");
    std::fs::copy("/usr/bin/id", &sudo_like).unwrap();
    std::fs::set_permissions(&sudo_like, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let c = init.client().await;
    let r = c
        .call(&ExecParams {
            argv: vec![sudo_like.clone()],
            env: Some(marked(&init.marker)),
            ..Default::default()
        })
        .await
        .unwrap();
    let out = String::from_utf8(r.stdout.0).unwrap();
    assert!(out.starts_with(&format!("uid={uid}")), "{out}");
    assert!(
        !out.contains("euid=0"),
        "no_new_privs must keep the setuid bit from working: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_runs_programs_as_that_user_with_no_groups_and_only_stdio() {
    let uid = fresh_uid();
    let init = or_skip!(Init::as_user(uid));
    let c = init.client().await;
    let r = init
        .run_script(&c, "id -u; id -g; id -G; ls /proc/$$/fd")
        .await;
    assert_eq!(
        String::from_utf8(r.stdout.0).unwrap(),
        format!("{uid}\n{uid}\n{uid}\n0\n1\n2\n")
    );
    // HOME and the socket's directory are the user's alone.
    for dir in [init.home(), init.socket.parent().unwrap().to_path_buf()] {
        let m = std::fs::metadata(&dir).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o777),
            (uid, uid, 0o700),
            "{}",
            dir.display()
        );
    }
    // A process.start's program sees only its stdio too.
    let p = c
        .call(&ProcessStartParams {
            argv: vec!["sh".into(), "-c".into(), "ls /proc/$$/fd".into()],
            env: Some(marked(&init.marker)),
            stdin: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(output_of(&c, &p.id, Stream::Stdout).await, b"0\n1\n2\n");
    // The daemon is not dumpable, so its user's programs cannot read or trace it.
    let r = init
        .run_script(&c, &format!("cat /proc/{}/environ", init.child.id()))
        .await;
    assert_ne!(r.exit_code, Some(0));
    assert!(
        String::from_utf8_lossy(&r.stderr.0).contains("Permission denied"),
        "{:?}",
        r
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_network_reaches_only_its_own_loopback() {
    if !need_root() {
        return;
    }
    // Outside: a TCP listener on the host's loopback and an abstract unix
    // socket canary, both answering whoever reaches them.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let canary = format!("computerd-canary-{}", std::process::id());
    let abstract_addr =
        std::os::unix::net::SocketAddr::from_abstract_name(canary.as_bytes()).unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&abstract_addr).unwrap();
    let uid = fresh_uid();
    let init = or_skip!(Init::start_with(InitOptions {
        user: Some(uid),
        own_network: true,
        ..Default::default()
    }));
    let c = init.client().await;
    let script = format!(
        r#"
import socket
print('interfaces', sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))
for name, fam, addr in [('host-tcp', socket.AF_INET, ('127.0.0.1', {port})), ('canary', socket.AF_UNIX, '\0{canary}')]:
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr)
        print(name, 'connected')
    except OSError as e:
        print(name, type(e).__name__)
{OWN_LOOPBACK_PY}"#
    );
    let out = py_ok(&init, &script).await;
    let ifaces = out.lines().find(|l| l.starts_with("interfaces")).unwrap();
    assert!(ifaces.contains("'lo'"), "{out}");
    assert!(
        out.contains("host-tcp ConnectionRefusedError") || out.contains("host-tcp OSError"),
        "{out}"
    );
    assert!(out.contains("canary ConnectionRefusedError"), "{out}");
    assert!(out.contains("own loopback answers"), "{out}");

    // computerd probe, as a provider runs it: interfaces ["lo"], the host's
    // listener refused, and a listener of the computer's own answers.
    let server = c
        .call(&ProcessStartParams {
            argv: vec![
                "python3".into(),
                "-m".into(),
                "http.server".into(),
                "--bind".into(),
                "127.0.0.1".into(),
                "18765".into(),
            ],
            env: Some(marked(&init.marker)),
            cwd: Some("/".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut report = None;
    for _ in 0..50 {
        let r = c
            .call(&ExecParams {
                argv: vec![
                    COMPUTERD.into(),
                    "probe".into(),
                    "--connect".into(),
                    format!("127.0.0.1:{port}"),
                    "--connect".into(),
                    "127.0.0.1:18765".into(),
                ],
                env: Some(marked(&init.marker)),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            r.exit_code,
            Some(0),
            "{}",
            String::from_utf8_lossy(&r.stderr.0)
        );
        let rep: ProbeReport = serde_json::from_slice(&r.stdout.0).unwrap();
        if rep.results[1].outcome == ProbeOutcome::Answered {
            report = Some(rep);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = report.expect("the computer's own listener never answered the probe");
    assert_eq!(report.interfaces, vec!["lo".to_string()]);
    assert_eq!(report.uid, uid);
    assert_eq!(
        report.results[0].outcome,
        ProbeOutcome::Refused,
        "{:?}",
        report.results[0]
    );
    assert_eq!(report.reached, vec!["127.0.0.1:18765".to_string()]);
    signal(&c, &server.id, Signal::Kill).await;
    drop((tcp, unix));
}

fn init_refusal(args: &[&str], pre: Option<fn() -> std::io::Result<()>>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = Command::new(COMPUTERD);
    cmd.arg("init")
        .arg("--socket")
        .arg(run.join("s.sock"))
        .arg("--deadline")
        .arg(rfc3339_in(Duration::from_secs(60)))
        .args(args)
        .env("HOME", dir.path().join("home"));
    if let Some(f) = pre {
        // SAFETY: the closure only makes prctl/set*id calls before exec.
        unsafe {
            cmd.pre_exec(f);
        }
    }
    let out = cmd.output().unwrap();
    assert!(
        !run.join("s.sock").exists(),
        "a refused init must not listen"
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn drop_setpcap_from_bounding() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, 8, 0, 0, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[test]
fn refusals_are_said_in_words_and_nothing_starts() {
    if !need_root() {
        return;
    }
    let (code, said) = init_refusal(&["--own-network", "--user", "0:0"], None);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("--own-network refuses uid 0"), "{said}");

    let (code, said) = init_refusal(&[], Some(drop_setpcap_from_bounding));
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("cannot drop CAP_CHOWN from its bounding set")
            && said.contains("CAP_SETPCAP"),
        "{said}"
    );

    let (code, said) = init_refusal(
        &["--user", "1000:1000"],
        Some(become_nobody_with_no_capability),
    );
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("--user needs init to start as root"),
        "{said}"
    );

    for bad in ["1000", "x:y", "-1:1"] {
        let (code, said) = init_refusal(&[&format!("--user={bad}")], None);
        assert_eq!(code, 1, "{said}");
        assert!(said.contains("is not uid:gid"), "{said}");
    }

    // Another process holding the programs' uid.
    let uid = fresh_uid();
    let mut holder = Command::new("sleep")
        .arg("30")
        .uid(uid)
        .gid(uid)
        .spawn()
        .unwrap();
    let (code, said) = init_refusal(&["--own-network", "--user", &format!("{uid}:{uid}")], None);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains(&format!("other processes hold uid {uid}"))
            && said.contains(&format!("pid {} (sleep)", holder.id())),
        "{said}"
    );
}
