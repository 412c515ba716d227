//! What init makes true of itself before it serves, on every thread, and
//! proves by reading it back: no capability in any set, no_new_privs, the
//! seccomp filter of [`seccomp::POLICY`], optionally another user and a
//! network namespace of its own with only loopback up.
//!
//! All of it runs in plain `fn main`, before the async runtime exists, so
//! there is one thread to change; the read-back still walks every thread in
//! /proc/self/task. Any shortfall is a refusal in words: init fails closed.

pub mod seccomp;

use crate::daemon::setup::{SetupError, Step};
use std::os::fd::AsFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag};
use nix::sys::stat::Mode;

use super::{sys, walk};

/// What `computerd init` was asked to become.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// `--user uid:gid`: become this user (init must start as root).
    pub user: Option<(u32, u32)>,
    /// `--own-network`: a network namespace with only loopback.
    pub own_network: bool,
    /// The directories made the user's alone with `--user` (HOME, the socket's).
    pub user_dirs: Vec<std::path::PathBuf>,
}

/// What the isolation read back, for init's log.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub uid: u32,
    pub gid: u32,
    /// Interfaces other than lo that the kernel put in the new namespace
    /// (fallback tunnels), all down with no address.
    pub idle_interfaces: Vec<String>,
    pub threads: usize,
}

/// Check the flags against each other and who init is, before anything changes.
pub fn check(plan: &Plan) -> Result<(), SetupError> {
    let root = nix::unistd::geteuid().is_root();
    if plan.user.is_some() && !root {
        return Err(format!(
            "--user needs init to start as root (it runs as uid {}); a computer's user is given by the provider instead (docker run --user), without --user",
            nix::unistd::geteuid()
        ).into());
    }
    if plan.own_network {
        let uid = plan
            .user
            .map(|u| u.0)
            .unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        if uid == 0 {
            return Err("--own-network refuses uid 0 for its programs: root shares its uid with every root process of the vendor's, which could then be signalled or traced; give --user uid:gid with a uid other than 0".into());
        }
        for (cap, name) in [
            (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
            (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        ] {
            if !sys::has_effective_cap(cap) {
                return Err(format!(
                    "--own-network needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN to make its network namespace, and {name} is missing"
                ).into());
            }
        }
    }
    Ok(())
}

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Make the plan true, then prove it. Call with one thread only.
pub fn apply(plan: &Plan) -> Result<Outcome, SetupError> {
    check(plan)?;
    let netns_before = std::fs::read_link("/proc/thread-self/ns/net").ok();
    let mut idle = Vec::new();
    if plan.own_network {
        let uid = plan
            .user
            .map(|u| u.0)
            .unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        refuse_other_holders(uid)?;
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .flag_step("--own-network", "make a network namespace")?;
        sys::set_interface_up("lo").flag_step("--own-network", "bring lo up")?;
        idle = check_only_loopback("--own-network")?;
    }
    if let Some((uid, gid)) = plan.user {
        for dir in &plan.user_dirs {
            make_users_alone(dir, uid, gid)?;
        }
    }
    drop_privileges(plan.user)?;
    // A program of the same user could otherwise read init's memory or
    // trace it; this also makes init's /proc files root's.
    nix::sys::prctl::set_dumpable(false).step("make init non-dumpable")?;
    seccomp::install()?;
    let threads = read_back(plan)?;
    if plan.own_network {
        let now = std::fs::read_link("/proc/thread-self/ns/net").ok();
        if now.is_none() || now == netns_before {
            return Err(
                "--own-network: read back, init is still in the network namespace it started in"
                    .into(),
            );
        }
    }
    Ok(Outcome {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        idle_interfaces: idle,
        threads,
    })
}

/// The name of a capability by number ("CAP_SYS_ADMIN"), or its number.
pub fn cap_name(n: u32) -> String {
    caps::all()
        .into_iter()
        .find(|c| u32::from(c.index()) == n)
        .map(|c| c.to_string())
        .unwrap_or_else(|| format!("capability {n}"))
}

fn last_cap() -> Result<u32, SetupError> {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            SetupError::from(
                "could not read /proc/sys/kernel/cap_last_cap; init cannot prove its bounding set empty",
            )
        })
}

/// no_new_privs; the bounding set emptied up to the kernel's last
/// capability; the user switch; ambient cleared; effective, permitted and
/// inheritable cleared by capset (a uid of 0 keeps them through any uid change).
fn drop_privileges(user: Option<(u32, u32)>) -> Result<(), SetupError> {
    nix::sys::prctl::set_no_new_privs().step("set no_new_privs")?;
    for cap in 0..=last_cap()? {
        // A capability already gone is not dropped again, so a process
        // started with an empty bounding set needs no CAP_SETPCAP.
        if sys::bounding_has(cap) {
            sys::bounding_drop(cap).map_err(|e| {
                format!(
                    "init cannot drop {} from its bounding set ({e}): it holds a bounding set without CAP_SETPCAP. Drop every capability for its user (docker run --cap-drop ALL), or start it as root with CAP_SETPCAP so it drops them itself",
                    cap_name(cap)
                )
            })?;
        }
    }
    let pdeathsig = nix::sys::prctl::get_pdeathsig().ok().flatten();
    if let Some((uid, gid)) = user {
        nix::unistd::setgroups(&[]).flag_step("--user", "clear the supplementary groups")?;
        let g = nix::unistd::Gid::from_raw(gid);
        nix::unistd::setresgid(g, g, g).flag_step("--user", format!("become gid {gid}"))?;
        let u = nix::unistd::Uid::from_raw(uid);
        nix::unistd::setresuid(u, u, u).flag_step("--user", format!("become uid {uid}"))?;
        // The kernel clears the parent-death signal when the uid or gid
        // changes; `computerd sandbox` sets SIGKILL so that the computer ends
        // with its forwarder, so it is set again.
        if let Some(sig) = pdeathsig {
            nix::sys::prctl::set_pdeathsig(sig)
                .flag_step("--user", "keep the parent-death signal")?;
        }
    }
    sys::ambient_clear().step("clear the ambient capability set")?;
    for set in [
        caps::CapSet::Effective,
        caps::CapSet::Inheritable,
        caps::CapSet::Permitted,
    ] {
        caps::clear(None, set)
            .map_err(|e| format!("could not clear the {set:?} capability set ({e})"))?;
    }
    Ok(())
}

/// One thread's status lines that the read-back checks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ThreadStatus {
    pub cap_inh: u64,
    pub cap_prm: u64,
    pub cap_eff: u64,
    pub cap_bnd: u64,
    pub cap_amb: u64,
    pub no_new_privs: u32,
    pub seccomp: u32,
}

pub fn parse_status(text: &str) -> ThreadStatus {
    let mut st = ThreadStatus::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let hex = || u64::from_str_radix(v, 16).unwrap_or(u64::MAX);
        match k {
            "CapInh" => st.cap_inh = hex(),
            "CapPrm" => st.cap_prm = hex(),
            "CapEff" => st.cap_eff = hex(),
            "CapBnd" => st.cap_bnd = hex(),
            "CapAmb" => st.cap_amb = hex(),
            "NoNewPrivs" => st.no_new_privs = v.parse().unwrap_or(0),
            "Seccomp" => st.seccomp = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    st
}

fn first_cap(bits: u64) -> String {
    (0..64)
        .find(|b| bits & (1u64 << b) != 0)
        .map(cap_name)
        .unwrap_or_default()
}

/// Every thread: all five sets zero, NoNewPrivs 1, Seccomp 2 (filter), and
/// with --own-network the same network namespace as init's main thread.
fn read_back(plan: &Plan) -> Result<usize, SetupError> {
    let main_ns = std::fs::read_link("/proc/self/ns/net").ok();
    let tasks = std::fs::read_dir("/proc/self/task").step("read back /proc/self/task")?;
    let mut n = 0;
    for task in tasks.filter_map(|t| t.ok()) {
        n += 1;
        let tid = task.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(task.path().join("status"))
            .step(format!("read back thread {tid}'s status"))?;
        let st = parse_status(&text);
        for (name, bits) in [
            ("CapInh", st.cap_inh),
            ("CapPrm", st.cap_prm),
            ("CapEff", st.cap_eff),
            ("CapBnd", st.cap_bnd),
            ("CapAmb", st.cap_amb),
        ] {
            if bits != 0 {
                return Err(format!(
                    "read back, thread {tid} still holds {} in {name} ({bits:016x}); init refuses to start with a capability it cannot prove gone",
                    first_cap(bits)
                ).into());
            }
        }
        if st.no_new_privs != 1 {
            return Err(format!(
                "read back, thread {tid} has NoNewPrivs {}; init refuses to start",
                st.no_new_privs
            )
            .into());
        }
        if st.seccomp != 2 {
            return Err(format!(
                "read back, thread {tid} has Seccomp {} (2 is a filter); init refuses to start",
                st.seccomp
            )
            .into());
        }
        if plan.own_network {
            let ns = std::fs::read_link(task.path().join("ns/net")).ok();
            if ns.is_none() || ns != main_ns {
                return Err(format!(
                    "read back, thread {tid} stayed in another network namespace; init refuses to start"
                ).into());
            }
        }
    }
    Ok(n)
}

/// Refuse while any other process holds `uid` (real, effective, saved or
/// filesystem): it could be signalled, traced or written to by the
/// computer's programs, and a vendor's agent among them would be theirs.
fn refuse_other_holders(uid: u32) -> Result<(), SetupError> {
    let me = std::process::id();
    let mut holders = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Err(
            "--own-network: could not read /proc to check who holds the programs' uid".into(),
        );
    };
    for e in dir.filter_map(|e| e.ok()) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .map(str::trim)
            .unwrap_or("?");
        let holds = text
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .is_some_and(|ids| {
                ids.split_whitespace()
                    .any(|x| x.parse::<u32>().ok() == Some(uid))
            });
        if holds {
            holders.push(format!("pid {pid} ({name})"));
        }
    }
    if holders.is_empty() {
        return Ok(());
    }
    Err(format!(
        "--own-network refuses to start while other processes hold uid {uid}, which the computer's programs would share: {}",
        holders.join(", ")
    ).into())
}

/// In the new namespace: lo alone is up or addressed. A kernel with the
/// tunnel modules loaded adds its fallback tunnels to every namespace,
/// down and with no address; they stay so (no program can bring one up)
/// and are returned so init can say so. `flag` names what asked for
/// the namespace in a refusal (`--own-network`, `--network none`).
pub fn check_only_loopback(flag: &str) -> Result<Vec<String>, SetupError> {
    let names =
        sys::interface_names().map_err(|e| format!("{flag}: could not list interfaces ({e})"))?;
    let addressed = sys::addressed_interfaces()
        .map_err(|e| format!("{flag}: could not list addresses ({e})"))?;
    let mut idle = Vec::new();
    let mut lo_up = false;
    for name in names {
        let up = sys::interface_is_up(&name)
            .map_err(|e| format!("{flag}: could not read {name}'s flags ({e})"))?;
        if name == "lo" {
            lo_up = up;
            continue;
        }
        if up || addressed.contains(&name) {
            return Err(format!(
                "{flag}: read back, {name} is up or has an address in the new namespace; only lo may be"
            ).into());
        }
        idle.push(name);
    }
    if let Some(other) = addressed.iter().find(|n| n.as_str() != "lo") {
        return Err(format!("{flag}: read back, {other} has an address; only lo may").into());
    }
    if !lo_up {
        return Err(format!("{flag}: read back, lo is not up").into());
    }
    Ok(idle)
}

/// Make a directory the user's alone, 0700, reaching it from / one name at a
/// time without following a symbolic link; the last part is made if missing.
fn make_users_alone(path: &Path, uid: u32, gid: u32) -> Result<(), SetupError> {
    let shown = path.display();
    let text = path
        .to_str()
        .ok_or_else(|| format!("--user: {shown} is not UTF-8"))?;
    if !text.starts_with('/') || text == "/" {
        return Err(format!("--user: {shown} must be an absolute path other than /").into());
    }
    // "." steps nowhere; ".." would step up, which a walk below / never does.
    let mut parts = walk::names(text);
    parts.retain(|p| *p != ".");
    if parts.contains(&"..") {
        return Err(format!("--user: {shown} has a .. part; give the directory's own path").into());
    }
    let Some((last, dirs)) = parts.split_last() else {
        return Err(format!("--user: {shown} must be an absolute path other than /").into());
    };
    let link = |part: &str| {
        format!(
            "--user: a part of {shown} ({part}) is a symbolic link or not a directory; it is never followed"
        )
    };
    let root = walk::dir_at(AT_FDCWD, "/".as_ref(), OFlag::O_PATH).flag_step("--user", "open /")?;
    let parent = walk::open_dir_beneath(root.as_fd(), dirs, OFlag::O_PATH).map_err(|stuck| {
        let part = dirs.get(stuck.at).copied().unwrap_or("/");
        if stuck.is_link_or_file() {
            link(part)
        } else {
            format!("--user: could not open {shown} at {part} ({})", stuck.errno)
        }
    })?;
    let (dir, _) = walk::open_or_make_dir(parent.as_fd(), last.as_ref(), 0o700, OFlag::O_RDONLY)
        .map_err(|(e, making)| match e {
            _ if making => format!("--user: could not make {shown} ({e})"),
            Errno::ELOOP | Errno::ENOTDIR => link(last),
            e => format!("--user: could not open {shown} at {last} ({e})"),
        })?;
    nix::unistd::fchown(dir.as_fd(), Some(uid.into()), Some(gid.into()))
        .flag_step("--user", format!("give {shown} to {uid}:{gid}"))?;
    nix::sys::stat::fchmod(dir.as_fd(), Mode::from_bits_truncate(0o700))
        .flag_step("--user", format!("make {shown} 0700"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse() {
        let st = parse_status(
            "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000001\nCapEff:\t0\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n",
        );
        assert_eq!(st.cap_prm, 1);
        assert_eq!(st.cap_bnd, 0x1ff_ffff_ffff);
        assert_eq!((st.no_new_privs, st.seccomp), (1, 2));
        assert_eq!(first_cap(st.cap_prm), "CAP_CHOWN");
        assert_eq!(cap_name(21), "CAP_SYS_ADMIN");
    }

    #[test]
    fn a_users_dir_is_made_0700_and_never_reached_through_a_link() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let top = tempfile::tempdir().unwrap();
        let home = top.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let made = home.join("./me");
        make_users_alone(&made, uid, gid).unwrap();
        let mode = std::fs::metadata(home.join("me"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o700);

        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), top.path().join("link")).unwrap();
        let e = make_users_alone(&top.path().join("link/me"), uid, gid)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(link) is a symbolic link"), "{e}");
        let e = make_users_alone(&top.path().join("link"), uid, gid)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(link) is a symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        let e = make_users_alone(&home.join("../x"), uid, gid)
            .unwrap_err()
            .to_string();
        assert!(e.contains("has a .. part"), "{e}");
        let e = make_users_alone(&home.join("none/me"), uid, gid)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at none"), "{e}");
    }
}
