//! Limits, parsing, and the cgroup v2 code against a fake cgroupfs tree: the
//! files the kernel would make are made by the test, and the files written
//! are read back whole.

use super::detect::{Membership, Mount, join_rel, on_disk};
use super::*;

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

/// A v2 cgroup directory as the kernel makes it (the files we use).
fn v2_cgroup(dir: &Path, controllers: &str) {
    for (f, t) in [
        ("cgroup.controllers", controllers),
        ("cgroup.subtree_control", ""),
        ("cgroup.procs", ""),
        ("cgroup.events", "populated 0\nfrozen 0\n"),
        ("cgroup.freeze", "0\n"),
        ("cgroup.kill", ""),
        ("cpu.max", "max 100000\n"),
        ("memory.max", "max\n"),
        ("memory.swap.max", "max\n"),
        ("memory.current", "4096\n"),
        ("pids.max", "max\n"),
        ("pids.current", "0\n"),
    ] {
        write(&dir.join(f), t);
    }
}

/// [`v2_cgroup`]s with the three controllers we use, at each of `rels`
/// under `top` (`""` for the top itself).
fn v2_cgroups(top: &Path, rels: &[&str]) {
    for rel in rels {
        v2_cgroup(&top.join(rel), "cpu memory pids\n");
    }
}

fn v2_sources(top: &Path, own: &str, root: bool) -> Sources {
    Sources {
        mountinfo: format!(
            "22 1 0:20 / / rw - ext4 /dev/vda rw\n30 22 0:26 / {} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
            top.display()
        ),
        self_cgroup: format!("0::{own}\n"),
        root,
    }
}

/// A v2 tree with the group `g` under the top and an empty cgroup `id`
/// in it, as a root server at the top finds it.
fn v2_group(top: &Path, id: &str) -> Cgroups {
    v2_cgroups(top, &["", "g", &format!("g/{id}")]);
    Cgroups::detect_from(&v2_sources(top, "/", true), "g").unwrap()
}

/// Computer `id`'s cgroup made with the default limits in [`v2_group`]'s
/// tree, with the tree and the cgroup's directory.
fn v2_made(id: &str) -> (tempfile::TempDir, Cgroups, ComputerCgroup, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let cgs = v2_group(tmp.path(), id);
    let cg = cgs.create(id, &Limits::default()).unwrap();
    let dir = tmp.path().join("g").join(id);
    (tmp, cgs, cg, dir)
}

#[test]
fn mountinfo_and_proc_cgroup_parse_as_the_kernel_writes_them() {
    let m = parse_mountinfo(
        "35 25 0:30 / /sys/fs/cgroup/cpu\\040x rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
         36 25 0:31 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
    );
    assert_eq!(
        m,
        vec![
            Mount {
                root: "/".into(),
                point: "/sys/fs/cgroup/cpu x".into(),
                fstype: "cgroup".into(),
                superopts: vec!["rw".into(), "cpu".into(), "cpuacct".into()],
            },
            Mount {
                root: "/docker/abc".into(),
                point: "/sys/fs/cgroup/memory".into(),
                fstype: "cgroup".into(),
                superopts: vec!["rw".into(), "memory".into()],
            },
        ]
    );
    assert_eq!(
        on_disk(&m[1], "/docker/abc/x"),
        Some("/sys/fs/cgroup/memory/x".into())
    );
    assert_eq!(on_disk(&m[1], "/docker/abcd"), None);
    assert_eq!(on_disk(&m[0], "/"), Some("/sys/fs/cgroup/cpu x".into()));
    assert_eq!(
        parse_self_cgroup("4:memory:/a/b\n2:cpu,cpuacct:/\n0::/user.slice\n"),
        vec![
            Membership {
                hid: 4,
                controllers: vec!["memory".into()],
                path: "/a/b".into()
            },
            Membership {
                hid: 2,
                controllers: vec!["cpu".into(), "cpuacct".into()],
                path: "/".into()
            },
            Membership {
                hid: 0,
                controllers: vec![],
                path: "/user.slice".into()
            },
        ]
    );
}

#[test]
fn v2_at_the_top_enables_controllers_writes_limits_and_reads_them_back() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    v2_cgroup(top, "cpuset cpu io memory hugetlb pids rdma misc\n");
    write(&top.join("cgroup.subtree_control"), "cpuset\n");
    v2_cgroups(top, &["computer-mcp", "computer-mcp/local-1"]);

    let cgs = Cgroups::detect_from(&v2_sources(top, "/", true), GROUP).unwrap();
    assert_eq!(cgs.version(), Version::V2);
    assert_eq!(
        cgs.layout(),
        format!(
            "cgroup v2, in {}/computer-mcp at the hierarchy's top",
            top.display()
        )
    );
    assert_eq!(
        read(&top.join("cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    assert_eq!(
        read(&top.join("computer-mcp/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );

    let limits = Limits {
        cpus: 1.5,
        memory_mb: 256,
        pids: 64,
    };
    let cg = cgs.create("local-1", &limits).unwrap();
    let dir = top.join("computer-mcp/local-1");
    assert_eq!(cg.dirs(), vec![dir.clone()]);
    assert_eq!(cg.procs_files(), vec![dir.join("cgroup.procs")]);
    assert_eq!(
        [
            read(&dir.join("cpu.max")),
            read(&dir.join("memory.max")),
            read(&dir.join("memory.swap.max")),
            read(&dir.join("pids.max")),
        ],
        ["150000 100000", "268435456", "0", "64"]
    );
    assert!(cg.swap_bounded());
    assert_eq!(cg.read_back(), Ok(limits));
    assert_eq!(
        cg.usage(),
        Ok(Usage {
            pids: 0,
            memory_bytes: 4096,
            peak_memory_bytes: None,
            cpu_ns: None,
        })
    );
    write(&dir.join("memory.peak"), "1048576\n");
    write(
        &dir.join("cpu.stat"),
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
    );
    let u = cg.usage().unwrap();
    assert_eq!(
        (u.peak_memory_bytes, u.cpu_ns),
        (Some(1_048_576), Some(2_500_000_000))
    );
    assert_eq!(cgs.list_existing(), vec!["local-1".to_string()]);

    cg.join(4321).unwrap();
    assert_eq!(read(&dir.join("cgroup.procs")), "4321");
    assert_eq!(cg.pids(), vec![4321]);
}

#[test]
fn v2_read_back_refuses_a_bound_that_reads_max() {
    let (_tmp, _, cg, dir) = v2_made("local-2");
    assert_eq!(read(&dir.join("cpu.max")), "200000 100000");
    write(&dir.join("memory.max"), "max\n");
    assert_eq!(
        cg.read_back().unwrap_err().message,
        format!(
            "{}/memory.max reads \"max\": that bound is not held",
            dir.display()
        )
    );
    write(&dir.join("memory.max"), "4294967296\n");
    write(&dir.join("memory.swap.max"), "1024\n");
    assert_eq!(
        cg.read_back().unwrap_err().message,
        format!(
            "{}/memory.swap.max reads \"1024\": that bound is not held",
            dir.display()
        )
    );
}

#[test]
fn v2_under_a_delegated_cgroup_moves_the_server_into_a_leaf() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    v2_cgroups(top, &[""]);
    let own = top.join("user.slice/svc");
    v2_cgroups(
        &own,
        &[
            "",
            "computer-mcp-server",
            "computer-mcp",
            "computer-mcp/local-3",
        ],
    );
    write(&own.join("cgroup.procs"), "4242\n");

    let cgs = Cgroups::detect_from(&v2_sources(top, "/user.slice/svc", false), GROUP).unwrap();
    assert_eq!(
        cgs.layout(),
        format!(
            "cgroup v2, under the server's own cgroup /user.slice/svc: computers in {0}/computer-mcp, the server's processes in {0}/computer-mcp-server (1 moved there; cgroup v2 lets a cgroup hand controllers to children only while it holds no process)",
            own.display()
        )
    );
    assert_eq!(read(&own.join("computer-mcp-server/cgroup.procs")), "4242");
    assert_eq!(
        read(&own.join("cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    assert_eq!(
        read(&own.join("computer-mcp/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    // The top is left alone.
    assert_eq!(read(&top.join("cgroup.subtree_control")), "");
    let cg = cgs
        .create(
            "local-3",
            &Limits {
                cpus: 0.25,
                memory_mb: 64,
                pids: 16,
            },
        )
        .unwrap();
    assert_eq!(cg.dirs(), vec![own.join("computer-mcp/local-3")]);
    assert_eq!(
        read(&own.join("computer-mcp/local-3/cpu.max")),
        "25000 100000"
    );
    // Membership as /proc/<pid>/cgroup shows it, relative to the hierarchy.
    let d = &cg.dirs[0];
    assert!(d.holds(Version::V2, "0::/user.slice/svc/computer-mcp/local-3\n"));
    assert!(!d.holds(Version::V2, "0::/user.slice/svc/computer-mcp/local-30\n"));
    assert!(!d.holds(Version::V2, "0::/user.slice/svc\n"));
}

#[test]
fn v2_where_the_own_cgroup_lacks_controllers_a_root_server_uses_the_top() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    v2_cgroups(top, &["", "computer-mcp"]);
    v2_cgroup(&top.join("system.slice/x.service"), "memory pids\n");
    let cgs =
        Cgroups::detect_from(&v2_sources(top, "/system.slice/x.service", true), GROUP).unwrap();
    assert_eq!(
        cgs.layout(),
        format!(
            "cgroup v2, in {}/computer-mcp at the hierarchy's top (the server's own cgroup /system.slice/x.service offers no cpu controller)",
            top.display()
        )
    );
    let e = Cgroups::detect_from(&v2_sources(top, "/system.slice/x.service", false), GROUP)
        .unwrap_err();
    assert_eq!(e.code, crate::types::ErrorCode::Unsupported);
    assert_eq!(
        e.message,
        "no cgroup can be made for computers: cgroup v2: the server's cgroup /system.slice/x.service offers no cpu controller to its children, and an unprivileged server may use no other cgroup; cgroup v1: no cgroup v1 hierarchy carries the pids controller"
    );
}

#[test]
fn v2_without_controllers_and_no_v1_says_why_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    v2_cgroup(tmp.path(), "");
    let e = Cgroups::detect_from(&v2_sources(tmp.path(), "/", true), GROUP).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "no cgroup can be made for computers: cgroup v2: the cgroup v2 hierarchy at {} offers no cpu, memory, pids controller (a host that mounts cgroup v1 too binds them there); cgroup v1: no cgroup v1 hierarchy carries the pids controller",
            tmp.path().display()
        )
    );
}

#[test]
fn v2_kill_writes_cgroup_kill_and_says_what_is_left_after_the_bound() {
    let (_tmp, _, cg, dir) = v2_made("local-4");
    // Nothing in it: nothing is written.
    cg.kill(Duration::from_millis(100)).unwrap();
    assert_eq!(read(&dir.join("cgroup.kill")), "");
    // A fake kernel never empties cgroup.procs.
    write(&dir.join("cgroup.procs"), "999999\n");
    let e = cg.kill(Duration::from_millis(100)).unwrap_err();
    assert_eq!(
        e.message,
        "computer local-4's cgroup still holds 1 processes 100 ms after it was killed"
    );
    assert_eq!(read(&dir.join("cgroup.kill")), "1");
}

#[test]
fn v2_without_cgroup_kill_freezes_and_never_signals_a_process_outside_it() {
    let (_tmp, _, cg, dir) = v2_made("local-5");
    fs::remove_file(dir.join("cgroup.kill")).unwrap();
    write(&dir.join("cgroup.events"), "populated 1\nfrozen 1\n");
    // A real process listed in the fake cgroup: its /proc/<pid>/cgroup puts
    // it elsewhere, so it must not be killed.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    write(&dir.join("cgroup.procs"), &format!("{}\n", child.id()));
    assert!(cg.kill(Duration::from_millis(200)).is_err());
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(alive, "a process outside the cgroup was signalled");
    // Thawed at the end of each round.
    assert_eq!(read(&dir.join("cgroup.freeze")), "0");
}

#[test]
fn remove_takes_the_directories_deepest_first() {
    let (_tmp, cgs, cg, dir) = v2_made("local-6");
    // The kernel's files go with the directory; a fake's must go by hand.
    fs::create_dir(dir.join("inner")).unwrap();
    for e in fs::read_dir(&dir).unwrap().flatten() {
        if e.path().is_file() {
            fs::remove_file(e.path()).unwrap();
        }
    }
    cg.remove(Duration::from_millis(100)).unwrap();
    assert!(!dir.exists());
    assert_eq!(cgs.list_existing(), Vec::<String>::new());
    assert_eq!(
        cgs.open("local-6").unwrap_err().message,
        "no cgroup for computer local-6"
    );
}

#[test]
fn create_refuses_a_bad_id_and_a_leftover_that_holds_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    let cgs = v2_group(top, "local-7");
    // Detection reads the group, not its cgroups: a leftover shows at create.
    write(&top.join("g/local-7/cgroup.procs"), "12\n");
    let e = cgs.create("../x", &Limits::default()).unwrap_err();
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (
            Some("id"),
            "id \"../x\" must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
        )
    );
    let e = cgs.create("local-7", &Limits::default()).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "a cgroup for computer local-7 already exists at {}/g/local-7 and holds processes",
            top.display()
        )
    );
    // A failed write leaves nothing made behind.
    let e = cgs.create("local-8", &Limits::default()).unwrap_err();
    assert!(
        e.message.starts_with("cannot write \"1024\" to "),
        "{}",
        e.message
    );
    assert!(!top.join("g/local-8").exists());
}

#[test]
fn v1_writes_each_hierarchys_files() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mountinfo = format!(
        "40 30 0:40 / {0}/pids rw - cgroup cgroup rw,pids\n\
         41 30 0:41 / {0}/memory rw - cgroup cgroup rw,memory\n\
         42 30 0:42 / {0}/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
         43 30 0:43 / {0}/unified rw - cgroup2 cgroup2 rw\n",
        t.display()
    );
    write(&t.join("unified/cgroup.controllers"), "");
    let self_cgroup = "8:pids:/\n4:memory:/api/x\n1:cpu,cpuacct:/\n0::/\n".to_string();
    for (d, files) in [
        ("pids", &[("pids.max", "max"), ("pids.current", "3")][..]),
        (
            "memory/api/x",
            &[
                ("memory.limit_in_bytes", "9223372036854771712"),
                ("memory.memsw.limit_in_bytes", "9223372036854771712"),
                ("memory.usage_in_bytes", "8192"),
            ][..],
        ),
        (
            "cpu,cpuacct",
            &[("cpu.cfs_quota_us", "-1"), ("cpu.cfs_period_us", "100000")][..],
        ),
    ] {
        for (f, text) in files {
            write(&t.join(d).join("g/local-9").join(f), text);
        }
        write(&t.join(d).join("g/local-9/cgroup.procs"), "");
    }
    let src = Sources {
        mountinfo,
        self_cgroup,
        root: true,
    };
    let cgs = Cgroups::detect_from(&src, "g").unwrap();
    assert_eq!(cgs.version(), Version::V1);
    assert!(!cgs.can_freeze());
    let limits = Limits {
        cpus: 0.5,
        memory_mb: 128,
        pids: 32,
    };
    let cg = cgs.create("local-9", &limits).unwrap();
    assert_eq!(
        cg.dirs(),
        vec![
            t.join("pids/g/local-9"),
            t.join("memory/api/x/g/local-9"),
            t.join("cpu,cpuacct/g/local-9"),
        ]
    );
    assert_eq!(
        [
            read(&t.join("pids/g/local-9/pids.max")),
            read(&t.join("memory/api/x/g/local-9/memory.limit_in_bytes")),
            read(&t.join("memory/api/x/g/local-9/memory.memsw.limit_in_bytes")),
            read(&t.join("cpu,cpuacct/g/local-9/cpu.cfs_quota_us")),
            read(&t.join("cpu,cpuacct/g/local-9/cpu.cfs_period_us")),
        ],
        ["32", "134217728", "134217728", "50000", "100000"]
    );
    assert_eq!(cg.read_back(), Ok(limits));
    write(
        &t.join("memory/api/x/g/local-9/memory.max_usage_in_bytes"),
        "65536",
    );
    write(&t.join("cpu,cpuacct/g/local-9/cpuacct.usage"), "1500000000");
    assert_eq!(
        cg.usage(),
        Ok(Usage {
            pids: 3,
            memory_bytes: 8192,
            peak_memory_bytes: Some(65536),
            cpu_ns: Some(1_500_000_000),
        })
    );
    let d = &cg.dirs[1];
    assert!(d.holds(Version::V1, "4:memory:/api/x/g/local-9\n"));
    assert!(!d.holds(Version::V1, "8:pids:/api/x/g/local-9\n"));
    write(
        &t.join("memory/api/x/g/local-9/memory.memsw.limit_in_bytes"),
        "9223372036854771712",
    );
    assert_eq!(
        cg.read_back().unwrap_err().message,
        format!(
            "{}/memory/api/x/g/local-9/memory.memsw.limit_in_bytes reads 9223372036854771712, not the memory limit 134217728: swap is not bounded",
            t.display()
        )
    );
}

/// A fork bomb that never dies out (each process forks forever, a failed
/// fork only retried), whose shell joins every `cgroup.procs` given before
/// it execs the bomb (and gives up if any join fails).
fn bomb(procs: &[PathBuf], mark: &str) -> std::process::Child {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"set -e; for f in "$@"; do echo $$ > "$f"; done; exec perl -e 'while (1) { fork }'"#)
        .arg("sh")
        .args(procs)
        .env(mark, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.spawn().unwrap()
}

/// This host mounts cgroup v2 without controllers beside cgroup v1; its
/// `cgroup.kill` and `cgroup.freeze` still work, so the v2 kill paths are
/// tried for real on a fork bomb that v1's pids controller bounds.
#[test]
fn v2_kill_and_freeze_end_a_real_fork_bomb_on_a_hybrid_host() {
    use computer_testkit::{assert_no_leftovers, marker, need, wait_until};
    if !need(
        "root",
        nix::unistd::geteuid().is_root(),
        "making cgroups needs root here",
    ) {
        return;
    }
    let src = Sources::read().unwrap();
    let group = format!("computer-mcp-unit-{}", marker("v2").replace('_', "-"));
    let bound = Cgroups::detect_from(&src, &group);
    let mounts = parse_mountinfo(&src.mountinfo);
    let own = parse_self_cgroup(&src.self_cgroup);
    let v2_dir = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .zip(own.iter().find(|m| m.hid == 0))
        .and_then(|(m, me)| Some((on_disk(m, &me.path)?, me.path.clone())));
    let (bound, (v2_parent, v2_rel)) = match (bound, v2_dir) {
        (Ok(b), Some(v2)) if b.version() == Version::V1 => (b, v2),
        _ => {
            // A pure v2 host runs the real tests on v2 itself.
            need(
                "cgroup",
                false,
                "no hybrid host here (cgroup v1 controllers beside a cgroup v2 mount)",
            );
            return;
        }
    };
    /// Whatever happens, nothing of the bombs outlives the test.
    struct Cleanup(Cgroups, Vec<PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for id in self.0.list_existing() {
                if let Ok(cg) = self.0.open(&id) {
                    let _ = cg.release();
                }
            }
            for d in &self.1 {
                let _ = fs::remove_dir(d);
            }
            self.0.remove_group();
        }
    }
    let mut cleanup = Cleanup(bound.clone(), Vec::new());
    for (n, use_kill_file) in [(0, true), (1, false)] {
        let id = format!("local-u{n}");
        let limits = Limits {
            cpus: 0.5,
            memory_mb: 256,
            pids: 64,
        };
        let v1 = bound.create(&id, &limits).unwrap();
        let dir = v2_parent.join(format!("{group}-{n}"));
        fs::create_dir(&dir).unwrap();
        cleanup.1.push(dir.clone());
        let v2 = ComputerCgroup {
            id: id.clone(),
            version: Version::V2,
            dirs: vec![Dir {
                path: dir.clone(),
                rel: join_rel(&v2_rel, &format!("{group}-{n}")),
                hid: 0,
                controllers: vec![],
            }],
        };
        let mark = marker("v2_bomb");
        let mut files = v1.procs_files();
        files.extend(v2.procs_files());
        let mut child = bomb(&files, &mark);
        wait_until(
            "the bomb fills its pids limit",
            Duration::from_secs(20),
            || v1.usage().is_ok_and(|u| u.pids >= 58),
        );
        // Still racing its bound when the kill starts.
        assert!(v1.usage().unwrap().pids >= 58);
        assert!(!v2.pids().is_empty());
        let kept = v2.kill_with(Duration::from_secs(5), use_kill_file);
        let _ = child.wait();
        kept.unwrap();
        assert_eq!(v1.pids(), Vec::<i32>::new());
        v1.release().unwrap();
        fs::remove_dir(&dir).unwrap();
        assert_no_leftovers(&mark);
        assert!(!dir.exists());
    }
}

#[test]
fn a_server_already_in_its_leaf_uses_the_leafs_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    v2_cgroups(top, &[""]);
    let own = top.join("svc");
    v2_cgroups(&own, &["", SERVER_LEAF, "g"]);
    write(&own.join("cgroup.subtree_control"), "cpu memory pids\n");
    let src = v2_sources(top, &format!("/svc/{SERVER_LEAF}"), false);
    let cgs = Cgroups::detect_from(&src, "g").unwrap();
    assert_eq!(cgs.hiers[0].base, own.join("g"));
    assert_eq!(cgs.hiers[0].rel, "/svc/g");
    // Nothing was moved, nothing enabled twice.
    assert_eq!(read(&own.join(SERVER_LEAF).join("cgroup.procs")), "");
    assert_eq!(
        read(&own.join("cgroup.subtree_control")),
        "cpu memory pids\n"
    );
    assert_eq!(
        read(&own.join("g/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
}

#[test]
fn each_state_directory_has_a_group_of_its_own() {
    assert_eq!(
        group_for(Path::new("/var/lib/computer-mcp")),
        "computer-mcp-5c27a529d8e2336c"
    );
    assert_ne!(group_for(Path::new("/a")), group_for(Path::new("/b")));
    assert!(check_name("group", &group_for(Path::new("/var/lib/x"))).is_ok());
}

#[test]
fn a_group_that_cannot_be_made_again_is_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mountinfo = format!(
        "40 30 0:40 / {0}/pids rw - cgroup cgroup rw,pids\n\
         41 30 0:41 / {0}/memory rw - cgroup cgroup rw,memory\n\
         42 30 0:42 / {0}/cpu rw - cgroup cgroup rw,cpu\n",
        t.display()
    );
    for d in ["pids", "memory/api/x", "cpu"] {
        fs::create_dir_all(t.join(d)).unwrap();
    }
    let src = Sources {
        mountinfo,
        self_cgroup: "8:pids:/\n4:memory:/api/x\n1:cpu:/\n".to_string(),
        root: true,
    };
    let cgs = Cgroups::detect_from(&src, "g").unwrap();
    let group = cgs.group_dirs();
    assert_eq!(
        group,
        vec![t.join("pids/g"), t.join("memory/api/x/g"), t.join("cpu/g")]
    );
    let limits = Limits {
        cpus: 0.5,
        memory_mb: 128,
        pids: 32,
    };
    cgs.remove_group();
    assert!(group.iter().all(|d| !d.exists()));
    // (Made again for real in tests/local.rs; here the server's own memory
    // cgroup is gone too, so the group cannot be, and the words say so.)
    fs::remove_dir_all(t.join("memory/api")).unwrap();
    let e = cgs.create("local-2", &limits).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "cannot make the cgroup {0}/pids/g/local-2: the group that holds this state directory's computers is gone and cannot be made again: cannot make {0}/memory/api/x/g: No such file or directory (os error 2)",
            t.display()
        )
    );
    assert!(!t.join("pids/g/local-2").exists());
}
