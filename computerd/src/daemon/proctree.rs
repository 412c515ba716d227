//! Reading the process tree from /proc: who is under whom, and ending a subtree.

use std::collections::{HashMap, HashSet};

/// One line of /proc/<pid>/stat, the fields we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// R, S, D, Z, T...
    pub state: u8,
}

impl ProcStat {
    pub fn is_zombie(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

/// Parse /proc/<pid>/stat. The command name is in parentheses and may hold
/// spaces or parentheses itself, so the fields are read after the last ')'.
pub fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.bytes().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let session = f.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        ppid,
        pgrp,
        session,
        state,
    })
}

pub fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// Every process this /proc shows.
pub fn all() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Every live (not zombie) process under `root`, root excluded, parents
/// before their children.
pub fn descendants(root: i32) -> Vec<ProcStat> {
    let procs = all();
    let mut by_parent: HashMap<i32, Vec<ProcStat>> = HashMap::new();
    for p in procs {
        by_parent.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        if let Some(children) = by_parent.get(&pid) {
            for c in children {
                if seen.insert(c.pid) {
                    queue.push(c.pid);
                    if !c.is_zombie() {
                        out.push(*c);
                    }
                }
            }
        }
    }
    out
}

/// The direct children of `pid`, from /proc/<pid>/task/*/children (cheap),
/// or from a whole scan where the kernel has no such file.
pub fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.filter_map(|t| t.ok()) {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(list) => out.extend(
                list.split_ascii_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return all()
                    .into_iter()
                    .filter(|p| p.ppid == pid)
                    .map(|p| p.pid)
                    .collect();
            }
            Err(_) => {}
        }
    }
    out
}

/// Whether `pid` is `root` or a process under it, by its parents up to
/// the top of this PID namespace (a parent outside it reads as 0). A
/// process that cannot be read (it ended) counts as under: who it was is
/// not known, and the callers refuse what is under.
pub fn is_under(mut pid: i32, root: i32) -> bool {
    for _ in 0..4096 {
        if pid == root {
            return true;
        }
        if pid <= 0 {
            return false;
        }
        match read_stat(pid) {
            Some(p) => pid = p.ppid,
            None => return true,
        }
    }
    true
}

/// Send `sig` to `pid` and every live process under it.
pub fn signal_tree(pid: i32, sig: i32) {
    super::sys::kill(pid, sig);
    for p in descendants(pid) {
        super::sys::kill(p.pid, sig);
    }
}

/// Whether any live process is in process group `pgrp` (or session `sid`).
pub fn group_alive(pgrp: Option<i32>, session: Option<i32>) -> bool {
    all().iter().any(|p| {
        !p.is_zombie()
            && (pgrp.is_some_and(|g| p.pgrp == g) || session.is_some_and(|s| p.session == s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parentheses_in_the_name_parses() {
        let s = "42 (a) (b) c) S 7 42 40 0 -1 4194560 0 0";
        assert_eq!(
            parse_stat(42, s),
            Some(ProcStat {
                pid: 42,
                ppid: 7,
                pgrp: 42,
                session: 40,
                state: b'S'
            })
        );
    }

    #[test]
    fn a_process_is_under_its_parent_and_not_under_its_child() {
        let me = std::process::id() as i32;
        let parent = read_stat(me).unwrap().ppid;
        assert!(is_under(me, parent));
        assert!(is_under(me, me));
        assert!(!is_under(parent, me));
        assert!(!is_under(0, me));
    }

    #[test]
    fn own_process_is_found_under_its_parent() {
        let me = std::process::id() as i32;
        let parent = read_stat(me).unwrap().ppid;
        assert!(descendants(parent).iter().any(|p| p.pid == me));
    }
}
