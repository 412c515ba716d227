//! `computerd sandbox`: what of the host a computer sees (an allowlist),
//! its own bounded home, its shares and its cgroups, read from inside and
//! from the host.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::support::*;

/// The host's OS directories the computer is given, those the host has.
const OS_DIRS: [&str; 8] = [
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
];

/// What the sandbox makes of its own at `/` (with `--network none`).
const OWN: [&str; 6] = ["dev", "proc", "run", "sys", "tmp", "work"];

/// The kernel's fallback tunnels, in a new network namespace when their
/// modules are loaded (down, with no address).
const TUNNELS: [&str; 9] = [
    "tunl0", "gre0", "gretap0", "erspan0", "ip_vti0", "ip6_vti0", "sit0", "ip6tnl0", "ip6gre0",
];

/// A sandbox of `o`'s flags around an init of `--user uid:uid`.
fn start(uid: u32, o: SandboxOptions) -> Option<Init> {
    Init::start_sandboxed(SandboxOptions {
        user: Some(uid),
        ..o
    })
}

/// Names in a directory of the host.
fn host_names(dir: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn lines(out: &str) -> BTreeSet<String> {
    out.lines().map(str::to_string).collect()
}

/// Whether no OS directory shows the test's computerd, so the sandbox binds
/// it at /opt/computerd/computerd.
fn computerd_is_bound_at_opt() -> bool {
    let exe = std::fs::canonicalize(COMPUTERD).unwrap();
    !OS_DIRS.iter().any(|d| {
        let top = Path::new("/").join(d);
        let is_dir = std::fs::symlink_metadata(&top).is_ok_and(|m| m.is_dir());
        is_dir && exe.starts_with(&top)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_holds_only_the_allowlisted_host_dirs_and_nothing_at_old_root() {
    if !need_root() {
        return;
    }
    let init = or_skip!(start(fresh_uid(), SandboxOptions::default()));
    let (code, out, err) = sh(&init, "ls -A /").await;
    assert_eq!(code, Some(0), "{err}");
    let inside = lines(&out);
    let host = host_names("/");
    let mut want: BTreeSet<String> = OS_DIRS
        .iter()
        .filter(|d| host.contains(**d))
        .chain(OWN.iter())
        .map(|s| s.to_string())
        .collect();
    if computerd_is_bound_at_opt() {
        want.insert("opt".into());
    }
    assert_eq!(inside, want, "host's / holds {host:?}");
    // The host's other top-level directories (/old_root, /srv, /mnt, /root,
    // /home… whatever this host has) are not there; a name the computer
    // has of its own (/work, /opt, /run, /tmp) holds its own, not the host's.
    let not_shown: Vec<&String> = host.difference(&want).collect();
    assert!(
        not_shown.iter().all(|n| !inside.contains(*n)),
        "{not_shown:?}"
    );
    let (code, out, err) = sh(
        &init,
        "for d in /old_root /oldroot /newroot /srv /mnt /media /root /home /var /boot; do test -e $d && echo $d; done; \
         echo work: $(ls -A /work); echo run: $(ls -A /run); echo tmp: $(ls -A /tmp); \
         test -d /opt && echo opt: $(ls -A /opt); \
         touch /x 2>&1 | grep -o 'Read-only file system'; \
         test /bin -ef /usr/bin && echo bin is usr/bin; \
         awk '$5 == \"/usr\" || $5 == \"/etc\" {print $5, $6}' /proc/self/mountinfo",
    )
    .await;
    let mut want = "work:\nrun: computerd\ntmp:\n".to_string();
    if computerd_is_bound_at_opt() {
        want.push_str("opt: computerd\n");
    }
    want.push_str("Read-only file system\n");
    if std::fs::read_link("/bin").is_ok_and(|t| t == Path::new("usr/bin")) {
        want.push_str("bin is usr/bin\n");
    }
    for d in ["/usr", "/etc"] {
        if Path::new(d).is_dir() {
            want.push_str(&format!("{d} ro,nosuid,nodev,relatime\n"));
        }
    }
    assert_eq!((code, out.as_str()), (Some(0), want.as_str()), "{err}");
    // The host's own /work (this checkout's parent on these machines) has
    // files; the computer's /work is empty.
    if Path::new("/work").is_dir() {
        assert!(!host_names("/work").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sys_is_a_sysfs_of_its_own_network_and_absent_with_network_host() {
    if !need_root() {
        return;
    }
    let init = or_skip!(start(fresh_uid(), SandboxOptions::default()));
    let (code, out, err) = sh(
        &init,
        "ls /sys/class/net; awk '$5 == \"/sys\" {print $5, $6, $9}' /proc/self/mountinfo; \
         touch /sys/x 2>&1 | grep -o 'Read-only file system'",
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let (ifaces, rest): (Vec<&str>, Vec<&str>) = out
        .lines()
        .partition(|l| !l.starts_with('/') && !l.starts_with("Read-only"));
    let own: Vec<&str> = ifaces
        .into_iter()
        .filter(|i| !TUNNELS.contains(i))
        .collect();
    assert_eq!(own, ["lo"], "{out}");
    assert_eq!(
        rest,
        [
            "/sys ro,nosuid,nodev,noexec,relatime sysfs",
            "Read-only file system"
        ],
        "{out}"
    );
    drop(init);
    let init = or_skip!(start(
        fresh_uid(),
        SandboxOptions {
            network: Network::Host,
            ..Default::default()
        },
    ));
    let (code, out, err) = sh(&init, "test -e /sys || echo no sys").await;
    assert_eq!((code, out.as_str()), (Some(0), "no sys\n"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_is_work_a_tmpfs_of_the_given_size_that_is_the_users_alone() {
    if !need_root() {
        return;
    }
    let uid = fresh_uid();
    let init = or_skip!(start(
        uid,
        SandboxOptions {
            work_size_mib: Some(8),
            ..Default::default()
        },
    ));
    let (code, out, err) = sh(
        &init,
        "echo $HOME; pwd; stat -c '%u:%g %a' /work; stat -f -c '%T %b %S' /work; \
         awk '$5 == \"/work\" {print $6, $9}' /proc/self/mountinfo",
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    // 8 MiB in blocks of the page size.
    let page = 4096;
    assert_eq!(
        out,
        format!(
            "/work\n/work\n{uid}:{uid} 700\ntmpfs {} {page}\nrw,nosuid,nodev,relatime tmpfs\n",
            8 * 1024 * 1024 / page
        )
    );
}

/// Free bytes of the host's filesystem holding `path`.
fn host_free(path: &str) -> u64 {
    let s = nix::sys::statvfs::statvfs(path).unwrap();
    s.blocks_available() as u64 * s.fragment_size() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_work_fails_with_enospc_and_the_hosts_disk_does_not_move() {
    if !need_root() {
        return;
    }
    let init = or_skip!(start(
        fresh_uid(),
        SandboxOptions {
            work_size_mib: Some(8),
            ..Default::default()
        },
    ));
    // The host's disk holds the test's directory (and the socket's).
    let disk = init.dir.path().to_str().unwrap().to_string();
    let before = host_free(&disk);
    // 256 MiB asked, 8 MiB fit.
    let (code, out, err) = sh(
        &init,
        "head -c 268435456 /dev/zero > /work/big; echo $?; stat -c %s /work/big; rm /work/big; echo x > /work/after && cat /work/after",
    )
    .await;
    let after = host_free(&disk);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let l: Vec<&str> = out.lines().collect();
    assert_ne!(l[0], "0", "{out}");
    let written: u64 = l[1].parse().unwrap();
    assert!(written <= 8 * 1024 * 1024, "{out}");
    assert_eq!(l[2..], ["x"], "once freed, /work takes writes again");
    // Other work on this host moves its free space too; 256 MiB on the
    // host's disk would show far beyond this.
    let moved = before.abs_diff(after);
    assert!(
        moved < 32 * 1024 * 1024,
        "the host's free space moved by {moved} bytes"
    );
}

/// A host directory, removed when dropped (with any mount on it).
struct HostDir(PathBuf);

impl HostDir {
    fn new(name: &str) -> HostDir {
        let p = PathBuf::from(format!("/var/tmp/{name}"));
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        HostDir(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let sub = self.0.join("sub");
        let _ = nix::mount::umount2(&sub, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_share_is_writable_and_an_ro_one_is_read_only_with_its_submounts() {
    if !need_root() {
        return;
    }
    let m = marker();
    let uid = fresh_uid();
    let rw = HostDir::new(&format!("computerd-share-rw-{m}"));
    std::os::unix::fs::chown(&rw.0, Some(uid), Some(uid)).unwrap();
    let ro = HostDir::new(&format!("computerd-share-ro-{m}"));
    std::fs::write(ro.0.join("f"), "shared\n").unwrap();
    // A mount under the read-only share, writable on the host: read-only
    // inside too (the bind and its restriction are recursive).
    let sub = ro.0.join("sub");
    std::fs::create_dir(&sub).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &sub,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("mode=0777,size=1m"),
    )
    .unwrap();
    let binds = vec![
        Share {
            source: rw.path().into(),
            inside: "/workspace/rw".into(),
            read_only: false,
        },
        Share {
            source: ro.path().into(),
            inside: "/workspace/ro".into(),
            read_only: true,
        },
    ];
    let init = or_skip!(start(
        uid,
        SandboxOptions {
            binds,
            ..Default::default()
        },
    ));
    let (code, out, err) = sh(
        &init,
        "ls -A /workspace; echo made > /workspace/rw/x && echo rw wrote; cat /workspace/ro/f; \
         touch /workspace/ro/y 2>&1 | grep -o 'Read-only file system'; \
         touch /workspace/ro/sub/y 2>&1 | grep -o 'Read-only file system'; \
         awk '$5 ~ \"^/workspace/\" {print $5, $6}' /proc/self/mountinfo | sort",
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "ro\nrw\nrw wrote\nshared\nRead-only file system\nRead-only file system\n\
         /workspace/ro ro,nosuid,nodev,relatime\n/workspace/ro/sub ro,nosuid,nodev,relatime\n\
         /workspace/rw rw,nosuid,nodev,relatime\n"
    );
    // On the host: the program's file, the program's own; nothing in ro.
    let made = rw.0.join("x");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "made\n");
    let meta = std::fs::metadata(&made).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (uid, uid));
    assert!(!ro.0.join("y").exists() && !sub.join("y").exists());
    drop(init);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_holds_the_sandbox_init_and_every_program_from_the_start() {
    if !need_root() {
        return;
    }
    let group = or_skip!(PidsGroup::new(&format!("computerd-test-{}", marker()), 64));
    let init = or_skip!(start(
        fresh_uid(),
        SandboxOptions {
            cgroups: vec![group.path().to_path_buf()],
            ..Default::default()
        },
    ));
    let forwarder = init.child.id() as i32;
    let init_pid = init.init_pid();
    assert_ne!(forwarder, init_pid);
    for pid in [forwarder, init_pid] {
        assert_eq!(pids_cgroup_of(pid).unwrap(), group.relative(), "pid {pid}");
    }
    // A program: the group's, seen from inside, and bounded by its pids.max.
    let (code, out, err) = sh(
        &init,
        "grep -E '^[0-9]+:pids:' /proc/self/cgroup | cut -d: -f3",
    )
    .await;
    assert_eq!(
        (code, out.trim_end()),
        (Some(0), group.relative().as_str()),
        "{err}"
    );
    let mut procs = group.procs();
    procs.sort();
    assert!(
        procs.contains(&forwarder) && procs.contains(&init_pid),
        "{procs:?}"
    );
    let status = init.stop();
    assert_eq!(status.code(), Some(0));
    let until = Instant::now() + Duration::from_secs(5);
    while !group.procs().is_empty() {
        assert!(Instant::now() < until, "{:?} left", group.procs());
        std::thread::sleep(Duration::from_millis(20));
    }
}
