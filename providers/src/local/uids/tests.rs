use std::sync::{Arc, Barrier};

use super::*;

/// Host files in a temporary directory (all empty but what `write` puts
/// there).
fn host(tmp: &Path) -> HostFiles {
    let h = HostFiles {
        passwd: tmp.join("passwd"),
        group: tmp.join("group"),
        subuid: tmp.join("subuid"),
        subgid: tmp.join("subgid"),
    };
    for p in [&h.passwd, &h.group, &h.subuid, &h.subgid] {
        fs::write(p, "").unwrap();
    }
    h
}

/// A base uid of this test process's own, so tests running at once do not
/// meet in the same uids.
fn base(n: u32) -> u32 {
    FIRST_UID + 0x8000 + (std::process::id() % 0x400) * 64 + n * 16
}

#[test]
fn the_default_range_is_systemds_unused_one_below_2_pow_31() {
    let r = default_range();
    assert_eq!((*r.start(), *r.end()), (1_879_048_192, 1_879_113_727));
    assert!(*r.end() < 1 << 31);
}

#[test]
fn two_allocations_at_once_get_different_uids_and_release_gives_them_back() {
    let tmp = tempfile::tempdir().unwrap();
    let h = host(tmp.path());
    let dir = tmp.path().join("uids");
    let b = base(0);
    // Two allocators on one directory: two servers sharing a state dir.
    let a1 = UidAllocator::with(dir.clone(), b..=b + 3, h.clone()).unwrap();
    let a2 = UidAllocator::with(dir.clone(), b..=b + 3, h).unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let a = if i % 2 == 0 { a1.clone() } else { a2.clone() };
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                a.allocate(&format!("local-{i}")).unwrap()
            })
        })
        .collect();
    let mut got: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![b, b + 1, b + 2, b + 3]);
    let mut owners: Vec<String> = a1.held().into_iter().map(|(_, o)| o).collect();
    owners.sort();
    assert_eq!(owners, ["local-0", "local-1", "local-2", "local-3"]);
    let e = a1.allocate("local-4").unwrap_err();
    assert_eq!(e.code, ErrorCode::Limit);
    assert_eq!(
        e.message,
        format!(
            "every uid of {b}..={} is taken by a host account, a running process or another computer; release a computer first",
            b + 3
        )
    );
    a1.release(b + 2).unwrap();
    a1.release(b + 2).unwrap();
    assert_eq!(a2.allocate("local-5").unwrap(), b + 2);
    assert_eq!(
        fs::read_to_string(dir.join((b + 2).to_string())).unwrap(),
        "local-5\n"
    );
}

#[test]
fn accounts_groups_and_subordinate_ranges_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let h = host(tmp.path());
    let b = base(1);
    fs::write(
        &h.passwd,
        format!("root:x:0:0::/root:/bin/sh\nsvc:x:{b}:7::/:/bin/false\n"),
    )
    .unwrap();
    fs::write(&h.group, format!("grp:x:{}:\n", b + 1)).unwrap();
    fs::write(&h.subuid, format!("alice:{}:1\n", b + 2)).unwrap();
    fs::write(&h.subgid, format!("bob:{}:2\n", b + 3)).unwrap();
    let a = UidAllocator::with(tmp.path().join("uids"), b..=b + 8, h).unwrap();
    assert_eq!(a.allocate("local-a").unwrap(), b + 5);
}

#[test]
fn a_uid_held_by_a_running_process_is_skipped() {
    if !computer_testkit::need(
        "root",
        nix::unistd::geteuid().is_root(),
        "starting a process as another uid needs root",
    ) {
        return;
    }
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let b = base(2);
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .uid(b)
        .gid(b + 5)
        .spawn()
        .unwrap();
    // The uid is in force once the child has exec'd sleep.
    computer_testkit::wait_until(
        "the child runs as its uid",
        std::time::Duration::from_secs(5),
        || {
            fs::read_to_string(format!("/proc/{}/status", child.id())).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.contains(&b.to_string()))
            }) && fs::read_to_string(format!("/proc/{}/comm", child.id()))
                .is_ok_and(|c| c.trim() == "sleep")
        },
    );
    let a = UidAllocator::with(tmp.path().join("uids"), b..=b + 1, host(tmp.path())).unwrap();
    let got = a.allocate("local-p");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got.unwrap(), b + 1);
    // The kernel is asked by real uid: a process that runs as b+6 with the
    // gid b+5 holds b+6 only (b+5 is no process's uid, and the range is the
    // server's own, so no host process runs with it as its group).
    let a = UidAllocator::with(tmp.path().join("uids2"), b + 5..=b + 6, host(tmp.path())).unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .uid(b + 6)
        .gid(b + 5)
        .spawn()
        .unwrap();
    computer_testkit::wait_until(
        "the child runs as its uid",
        std::time::Duration::from_secs(5),
        || {
            fs::read_to_string(format!("/proc/{}/comm", child.id()))
                .is_ok_and(|c| c.trim() == "sleep")
        },
    );
    let (first, second) = (a.allocate("local-q"), a.allocate("local-r"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(first.unwrap(), b + 5);
    assert_eq!(second.unwrap_err().code, ErrorCode::Limit);
}

#[test]
fn an_empty_or_zero_range_is_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    let e = UidAllocator::with(tmp.path().join("u"), 5..=4, host(tmp.path())).unwrap_err();
    assert_eq!(
        (e.field.as_deref(), e.message.as_str()),
        (
            Some("uids"),
            "the uid range 5..=4 must be non-empty and above 0"
        )
    );
    let e = UidAllocator::with(tmp.path().join("u"), 0..=4, host(tmp.path())).unwrap_err();
    assert_eq!(
        e.message,
        "the uid range 0..=4 must be non-empty and above 0"
    );
}

#[test]
fn the_holding_directory_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let a =
        UidAllocator::with(tmp.path().join("uids"), base(3)..=base(3), host(tmp.path())).unwrap();
    let mode = fs::metadata(tmp.path().join("uids"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let uid = a.allocate("local-x").unwrap();
    let mode = fs::metadata(tmp.path().join("uids").join(uid.to_string()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}
