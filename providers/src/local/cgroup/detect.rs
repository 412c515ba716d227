//! What the host gives, found once: the mount table and the server's own
//! cgroups parsed, then cgroup v2 (under the server's own cgroup, or the
//! hierarchy's top), cgroup v1, or none with the reason in words.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::computer::{read_pids, remove_dirs, write_file};
use super::{Hier, SERVER_LEAF, V1_CONTROLLERS, V2_CONTROLLERS};

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Mount {
    /// The path of the filesystem mounted there (a cgroup when the mount
    /// shows a subtree).
    pub(super) root: String,
    pub(super) point: PathBuf,
    pub(super) fstype: String,
    pub(super) superopts: Vec<String>,
}

/// /proc/self/mountinfo: `id parent dev root point opts [optional...] -
/// fstype source superopts`.
pub(super) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        if f.len() < 5 || f.len() < sep + 4 {
            continue;
        }
        out.push(Mount {
            root: unescape(f[3]),
            point: PathBuf::from(unescape(f[4])),
            fstype: f[sep + 1].to_string(),
            superopts: f[sep + 3].split(',').map(str::to_string).collect(),
        });
    }
    out
}

/// Mount paths escape space, tab, newline and backslash as `\ooo`.
pub(super) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Membership {
    pub(super) hid: u32,
    pub(super) controllers: Vec<String>,
    pub(super) path: String,
}

/// /proc/<pid>/cgroup: `hid:controllers:path` (v2: `0::path`).
pub(super) fn parse_self_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let hid = it.next()?.parse().ok()?;
            let ctl = it.next()?;
            let path = it.next()?.to_string();
            Some(Membership {
                hid,
                controllers: ctl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// `own` (a cgroup path) on disk under `m`, or None where it is outside it.
pub(super) fn on_disk(m: &Mount, own: &str) -> Option<PathBuf> {
    let rest = if m.root == "/" {
        own
    } else {
        let r = own.strip_prefix(m.root.as_str())?;
        if !(r.is_empty() || r.starts_with('/')) {
            return None;
        }
        r
    };
    let rest = rest.trim_start_matches('/');
    if rest.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rest.is_empty() {
        m.point.clone()
    } else {
        m.point.join(rest)
    })
}

pub(super) fn join_rel(a: &str, b: &str) -> String {
    if a == "/" || a.is_empty() {
        format!("/{b}")
    } else {
        format!("{}/{b}", a.trim_end_matches('/'))
    }
}

pub(super) fn words(list: &[&str]) -> String {
    list.join(", ")
}

pub(super) fn mkdir_ok(p: &Path) -> std::result::Result<(), String> {
    match fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make {}: {e}", p.display())),
    }
}

pub(super) fn controllers_of(dir: &Path) -> std::result::Result<Vec<String>, String> {
    let p = dir.join("cgroup.controllers");
    fs::read_to_string(&p)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .map_err(|e| format!("cannot read {}: {e}", p.display()))
}

pub(super) fn missing_of(have: &[String]) -> Vec<&'static str> {
    V2_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !have.iter().any(|h| h == c))
        .collect()
}

/// Enable our controllers for `dir`'s children (those not yet enabled).
pub(super) fn enable(dir: &Path) -> std::result::Result<(), String> {
    let p = dir.join("cgroup.subtree_control");
    let on: Vec<String> = fs::read_to_string(&p)
        .map_err(|e| format!("cannot read {}: {e}", p.display()))?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let add: Vec<String> = missing_of(&on).iter().map(|c| format!("+{c}")).collect();
    if add.is_empty() {
        return Ok(());
    }
    write_file(&p, &add.join(" ")).map_err(|e| e.message)
}

/// Move every process of cgroup `own` into its child `leaf`, so that `own`
/// may hand controllers to children. Processes forked meanwhile are caught
/// by the next round; a few rounds are enough for a server at start.
pub(super) fn move_into_leaf(own: &Path, leaf: &Path) -> std::result::Result<usize, String> {
    mkdir_ok(leaf)?;
    let mut moved = BTreeSet::new();
    for _ in 0..20 {
        let pids = read_pids(&own.join("cgroup.procs"));
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            match write_file(&leaf.join("cgroup.procs"), &pid.to_string()) {
                Ok(()) => {
                    moved.insert(pid);
                }
                // A process that ended meanwhile.
                Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => {}
                Err(e) => return Err(e.message),
            }
        }
    }
    Ok(moved.len())
}

pub(super) fn detect_v2(
    mounts: &[Mount],
    own: &[Membership],
    root: bool,
    group: &str,
) -> std::result::Result<(Hier, String), String> {
    let m = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .ok_or("no cgroup v2 hierarchy is mounted")?;
    let me = own
        .iter()
        .find(|x| x.hid == 0 && x.controllers.is_empty())
        .ok_or("this process is in no cgroup v2 group")?;
    // A server moved into the leaf by an earlier detection (in this process
    // or another in the same cgroup) is already where it should be: its
    // parent is the cgroup to use.
    let own_path = match me.path.strip_suffix(&format!("/{SERVER_LEAF}")) {
        Some("") => "/".to_string(),
        Some(parent) => parent.to_string(),
        None => me.path.clone(),
    };
    let me = &Membership {
        hid: 0,
        controllers: Vec::new(),
        path: own_path,
    };
    let own_dir = on_disk(m, &me.path).ok_or_else(|| {
        format!(
            "the server's cgroup {} is outside the cgroup v2 mount at {}",
            me.path,
            m.point.display()
        )
    })?;
    let top = m.point.clone();
    let mut why_not_own = String::new();
    if own_dir != top {
        let have = controllers_of(&own_dir)?;
        let missing = missing_of(&have);
        if missing.is_empty() {
            let leaf = own_dir.join(SERVER_LEAF);
            let base = own_dir.join(group);
            let done = move_into_leaf(&own_dir, &leaf)
                .and_then(|n| enable(&own_dir).map(|()| n))
                .and_then(|n| mkdir_ok(&base).map(|()| n))
                .and_then(|n| enable(&base).map(|()| n));
            match done {
                Ok(n) => {
                    let layout = format!(
                        "cgroup v2, under the server's own cgroup {}: computers in {}, the server's processes in {} ({}; cgroup v2 lets a cgroup hand controllers to children only while it holds no process)",
                        me.path,
                        base.display(),
                        leaf.display(),
                        if n == 0 {
                            "already there".to_string()
                        } else {
                            format!("{n} moved there")
                        }
                    );
                    return Ok((
                        Hier {
                            controllers: V2_CONTROLLERS.to_vec(),
                            hid: 0,
                            base,
                            rel: join_rel(&me.path, group),
                        },
                        layout,
                    ));
                }
                Err(e) if root => why_not_own = format!(" (the server's own cgroup: {e})"),
                Err(e) => return Err(e),
            }
        } else if !root {
            return Err(format!(
                "the server's cgroup {} offers no {} controller to its children, and an unprivileged server may use no other cgroup",
                me.path,
                words(&missing)
            ));
        } else {
            why_not_own = format!(
                " (the server's own cgroup {} offers no {} controller)",
                me.path,
                words(&missing)
            );
        }
    }
    let have = controllers_of(&top)?;
    let missing = missing_of(&have);
    if !missing.is_empty() {
        return Err(format!(
            "the cgroup v2 hierarchy at {} offers no {} controller (a host that mounts cgroup v1 too binds them there)",
            top.display(),
            words(&missing)
        ));
    }
    let base = top.join(group);
    enable(&top)?;
    mkdir_ok(&base)?;
    enable(&base)?;
    let layout = format!(
        "cgroup v2, in {} at the hierarchy's top{why_not_own}",
        base.display()
    );
    Ok((
        Hier {
            controllers: V2_CONTROLLERS.to_vec(),
            hid: 0,
            base,
            rel: join_rel(&m.root, group),
        },
        layout,
    ))
}

/// The v1 controllers used where mounted, and done without elsewhere: the
/// freezer (a kill without rounds, and pause) and cpuacct (a receipt's CPU
/// seconds).
const V1_OPTIONAL: [&str; 2] = ["freezer", "cpuacct"];

pub(super) fn detect_v1(
    mounts: &[Mount],
    own: &[Membership],
    group: &str,
) -> std::result::Result<Vec<Hier>, String> {
    let mut hiers: Vec<(PathBuf, Hier)> = Vec::new();
    for c in V1_CONTROLLERS.iter().copied().chain(V1_OPTIONAL) {
        let required = !V1_OPTIONAL.contains(&c);
        let Some(m) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.superopts.iter().any(|o| o == c))
        else {
            if required {
                return Err(format!("no cgroup v1 hierarchy carries the {c} controller"));
            }
            continue;
        };
        if let Some((_, h)) = hiers.iter_mut().find(|(p, _)| *p == m.point) {
            h.controllers.push(c);
            continue;
        }
        let Some(me) = own
            .iter()
            .find(|x| x.hid != 0 && x.controllers.iter().any(|x| x == c))
        else {
            if required {
                return Err(format!("this process is in no cgroup v1 {c} group"));
            }
            continue;
        };
        let Some(dir) = on_disk(m, &me.path) else {
            if required {
                return Err(format!(
                    "the server's {c} cgroup {} is outside the mount at {}",
                    me.path,
                    m.point.display()
                ));
            }
            continue;
        };
        hiers.push((
            m.point.clone(),
            Hier {
                controllers: vec![c],
                hid: me.hid,
                base: dir.join(group),
                rel: join_rel(&me.path, group),
            },
        ));
    }
    let mut made = Vec::new();
    let mut usable = Vec::new();
    for (_, h) in hiers {
        let existed = h.base.is_dir();
        match mkdir_ok(&h.base) {
            Ok(()) => {
                if !existed {
                    made.push(h.base.clone());
                }
                usable.push(h);
            }
            // The freezer only helps a kill (without it a kill goes in
            // rounds) and pauses; cpuacct only counts CPU time.
            Err(_) if h.controllers.iter().all(|c| V1_OPTIONAL.contains(c)) => {}
            Err(e) => {
                remove_dirs(&made);
                return Err(e);
            }
        }
    }
    Ok(usable)
}
