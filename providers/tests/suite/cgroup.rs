//! Computer cgroups and uids on this machine, for real (root; whichever
//! cgroup version the host gives: cgroup v1 on these machines). Every
//! hostile program runs only inside a cgroup the test made, joined before
//! its first fork.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use computer_providers::local::cgroup::{Cgroups, ComputerCgroup, Limits, Version};
use computer_providers::local::uids::{self, UidAllocator};
use computer_testkit::{assert_no_leftovers, marker, need, or_skip, wait_until};

/// A group of the test's own, removed (with whatever is left in it) when
/// the test ends, pass or fail.
struct Group {
    name: String,
    cgs: Cgroups,
}

impl Drop for Group {
    fn drop(&mut self) {
        for id in self.cgs.list_existing() {
            if let Ok(cg) = self.cgs.open(&id) {
                let _ = cg.release();
            }
        }
        self.cgs.remove_group();
    }
}

fn group(tag: &str) -> Option<Group> {
    if !need(
        "root",
        nix::unistd::geteuid().is_root(),
        "making cgroups needs root here",
    ) {
        return None;
    }
    // The test's own bound, made by hand before any cgroup under test (which
    // nest below it), holds the fork bombs even if the code's limits fail.
    if !computer_testkit::need_own_bound() {
        return None;
    }
    let name = format!("computer-mcp-test-{}", marker(tag)).replace('_', "-");
    match Cgroups::detect(&name) {
        Ok(cgs) => Some(Group { name, cgs }),
        Err(e) => {
            need("cgroup", false, &e.message);
            None
        }
    }
}

/// The lines /proc/<pid>/cgroup must show for a process in computer `id`:
/// the server's own line of each hierarchy used, with `/<group>/<id>` added.
fn expected_lines(g: &Group, id: &str) -> Vec<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let used: &[&str] = match g.cgs.version() {
        Version::V1 => &["pids", "memory", "cpu", "freezer"],
        Version::V2 => &[""],
    };
    own.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let (hid, ctl, path) = (it.next()?, it.next()?, it.next()?);
            let ours = match g.cgs.version() {
                Version::V2 => hid == "0",
                Version::V1 => hid != "0" && ctl.split(',').any(|c| used.contains(&c)),
            };
            ours.then(|| {
                let base = path.trim_end_matches('/');
                format!("{hid}:{ctl}:{base}/{}/{id}", g.name)
            })
        })
        .collect()
}

fn spawn_marked(mark: &str, program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .env(mark, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn can_fork() -> bool {
    Command::new("true").status().is_ok_and(|s| s.success())
}

#[test]
fn a_process_in_a_computer_cgroup_is_bounded_read_back_and_killed_on_release() {
    let g = or_skip!(group("proc"));
    let mark = marker("cgroup_proc");
    let limits = Limits {
        cpus: 0.5,
        memory_mb: 128,
        pids: 32,
    };
    let cg = g.cgs.create("local-1", &limits).unwrap();
    assert_eq!(cg.read_back(), Ok(limits));
    let mut child = spawn_marked(&mark, "sleep", &["30"]);
    cg.join(child.id()).unwrap();

    let shown = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
    for line in expected_lines(&g, "local-1") {
        assert!(
            shown.lines().any(|l| l == line),
            "{line:?} is not in the child's /proc/<pid>/cgroup:\n{shown}"
        );
    }
    assert_eq!(cg.pids(), vec![child.id() as i32]);
    // Memory charged before the join stays where it was (v1 moves no
    // charge by default): the sandbox joins as its first act instead.
    assert_eq!(cg.usage().unwrap().pids, 1);
    assert_eq!(g.cgs.list_existing(), vec!["local-1".to_string()]);

    cg.release().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    for d in cg.dirs() {
        assert!(!d.exists(), "{} is left after release", d.display());
    }
    assert_eq!(g.cgs.list_existing(), Vec::<String>::new());
    assert_no_leftovers(&mark);
}

/// The shell fork bomb of the issue: each shell that fails to fork exits,
/// so under a bound it thins out and grows again.
const SH_BOMB: &str = "exec sh -c 'f(){ f | f & }; f'";
/// A bomb that never dies out: every process forks forever, a failed fork
/// only retried (perl is in every Debian base system).
const PERL_BOMB: &str = "exec perl -e 'while (1) { fork }'";

/// A fork bomb, joined to the computer's cgroup by its own shell before
/// that shell execs the bomb (giving up if a join fails), so it is bounded
/// from its first fork.
fn bomb(cg: &ComputerCgroup, mark: &str, bomb: &str) -> Child {
    let files: Vec<String> = cg
        .procs_files()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let script = format!(r#"set -e; for f in "$@"; do echo $$ > "$f"; done; {bomb}"#);
    let mut args = vec!["-c", script.as_str(), "sh"];
    args.extend(files.iter().map(String::as_str));
    spawn_marked(mark, "sh", &args)
}

fn fork_bomb_is_bounded_and_nothing_of_it_survives_release(
    cgs: &Cgroups,
    id: &str,
    pids: u64,
    which: &str,
) {
    let mark = marker("cgroup_bomb");
    let limits = Limits {
        cpus: 0.5,
        memory_mb: 1024,
        pids,
    };
    let cg = cgs.create(id, &limits).unwrap();
    let mut child = bomb(&cg, &mark, which);
    wait_until(
        "the bomb fills its pids limit",
        Duration::from_secs(20),
        || cg.usage().is_ok_and(|u| u.pids >= pids * 9 / 10),
    );
    // Let it race against its bound for a while.
    std::thread::sleep(Duration::from_millis(500));
    let usage = cg.usage().unwrap();
    assert!(
        usage.pids <= pids,
        "{} processes, over pids.max {pids}",
        usage.pids
    );
    assert!(usage.memory_bytes > 0, "the bomb's memory is not charged");
    assert!(can_fork(), "this test could not fork while the bomb ran");
    if which == PERL_BOMB {
        // Still racing its bound when the release starts.
        let now = cg.usage().unwrap().pids;
        assert!(now >= pids * 9 / 10, "the bomb thinned out to {now}");
    }

    let started = Instant::now();
    cg.release().unwrap();
    let took = started.elapsed();
    let _ = child.wait();
    assert_no_leftovers(&mark);
    for d in cg.dirs() {
        assert!(!d.exists(), "{} is left after release", d.display());
    }
    assert!(can_fork(), "this test could not fork after the release");
    assert!(took < Duration::from_secs(7), "release took {took:?}");
}

#[test]
fn a_fork_bomb_is_bounded_by_pids_and_killed_whole_on_release() {
    let g = or_skip!(group("bomb"));
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&g.cgs, "local-2", 64, SH_BOMB);
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&g.cgs, "local-2p", 64, PERL_BOMB);
}

#[test]
fn without_a_freezer_a_fork_bomb_is_killed_in_rounds_all_the_same() {
    let g = or_skip!(group("bomb-nf"));
    let cgs = g.cgs.clone().without_freezer();
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&cgs, "local-3", 64, SH_BOMB);
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&cgs, "local-3p", 64, PERL_BOMB);
}

#[test]
fn a_fork_bomb_at_the_default_pids_limit_is_killed_whole_with_and_without_a_freezer() {
    let g = or_skip!(group("bomb-big"));
    let pids = computer_providers::local::cgroup::DEFAULT_PIDS;
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&g.cgs, "local-4", pids, PERL_BOMB);
    let cgs = g.cgs.clone().without_freezer();
    fork_bomb_is_bounded_and_nothing_of_it_survives_release(&cgs, "local-5", pids, PERL_BOMB);
}

#[test]
fn leftover_cgroups_are_listed_and_released_by_id() {
    let g = or_skip!(group("left"));
    let mark = marker("cgroup_left");
    let limits = Limits {
        cpus: 0.25,
        memory_mb: 64,
        pids: 16,
    };
    let a = g.cgs.create("local-a", &limits).unwrap();
    let _b = g.cgs.create("local-b", &limits).unwrap();
    let mut child = spawn_marked(&mark, "sleep", &["30"]);
    a.join(child.id()).unwrap();
    assert_eq!(
        g.cgs.list_existing(),
        vec!["local-a".to_string(), "local-b".to_string()]
    );
    // As a sweep after a restart does: found again by id, then released.
    let again = g.cgs.open("local-a").unwrap();
    assert_eq!(again.dirs(), a.dirs());
    assert_eq!(again.read_back(), Ok(limits));
    again.release().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(g.cgs.list_existing(), vec!["local-b".to_string()]);
    assert_no_leftovers(&mark);
}

#[test]
fn a_uid_from_the_default_range_is_no_hosts_account_or_process() {
    let tmp = tempfile::tempdir().unwrap();
    let a = UidAllocator::new(tmp.path()).unwrap();
    let (one, two) = (
        a.allocate("local-x").unwrap(),
        a.allocate("local-y").unwrap(),
    );
    assert_ne!(one, two);
    for uid in [one, two] {
        assert!(uids::default_range().contains(&uid));
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
        assert!(
            !passwd
                .lines()
                .any(|l| l.split(':').nth(2) == Some(&uid.to_string())),
            "{uid} is in /etc/passwd"
        );
    }
    assert_eq!(
        a.held(),
        vec![(one, "local-x".to_string()), (two, "local-y".to_string())]
    );
    a.release(one).unwrap();
    a.release(two).unwrap();
    assert_eq!(a.held(), vec![]);
}
