//! The flags checked and turned into a plan before anything changes: the
//! host's OS directories to show, the shares, the cgroups to join, where
//! computerd is exec'd from, init's argv and environment, and which of the
//! two paths (root, or a user namespace).

use crate::daemon::setup::SetupError;
use std::ffi::{CString, OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use super::cstring;
use crate::daemon::sys;
use crate::launch::SandboxArgs;

/// `--network` and `--bind`, as the launch contract has them.
pub use crate::launch::{Network, Share};

/// The host's top-level directories the computer sees (read-only), those
/// the host has: the OS a program needs, and nothing else of the host.
pub const OS_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// HOME and init's working directory inside: a tmpfs of its own.
pub const WORK: &str = "/work";
/// Where `--run` is bound inside; init's socket must be in it.
pub const RUN: &str = "/run/computerd";
/// Where `--egress` (the egress proxy's socket directory) is shown,
/// read-only.
pub const EGRESS: &str = "/run/egress";
/// Every `--bind` goes here or under it.
pub const WORKSPACE: &str = "/workspace";

/// One of [`OS_DIRS`] as the host has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OsEntry {
    /// A directory, bound read-only at the same path.
    Dir(PathBuf),
    /// A symbolic link (`/bin -> usr/bin`), made again inside with the same
    /// target rather than bound.
    Link { path: PathBuf, target: PathBuf },
}

impl OsEntry {
    pub fn path(&self) -> &Path {
        match self {
            OsEntry::Dir(p) | OsEntry::Link { path: p, .. } => p,
        }
    }
}

/// Everything the sandbox will do, decided before it does any of it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `--run`, canonical, on the host; bound at [`RUN`].
    pub run: PathBuf,
    /// This binary, canonical, on the host.
    pub exe: PathBuf,
    /// The path it is exec'd by inside: its own path when an OS directory
    /// shows it, else [`crate::DAEMON_PATH`], where it is bound read-only.
    pub exe_inside: PathBuf,
    pub network: Network,
    pub tmp_size_mib: u64,
    pub work_size_mib: u64,
    /// The host's OS directories and links, in [`OS_DIRS`] order.
    pub os: Vec<OsEntry>,
    /// Canonical sources, normal insides, sorted by inside.
    pub shares: Vec<Share>,
    /// `--cgroup`: directories whose `cgroup.procs` this process joins.
    pub cgroups: Vec<PathBuf>,
    /// `--max-procs`: RLIMIT_NPROC set just before init starts.
    pub max_procs: Option<u64>,
    /// `--egress`, canonical, on the host; bound read-only at [`EGRESS`].
    pub egress: Option<PathBuf>,
    /// The uid and gid that own `/work`: init's `--user`, or in a user
    /// namespace this process's own.
    pub owner: (u32, u32),
    /// `Some((uid, gid))`: no CAP_SYS_ADMIN, so a user namespace mapping
    /// these ids to themselves.
    pub userns: Option<(u32, u32)>,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    /// /proc/sys/kernel/cap_last_cap.
    pub last_cap: u32,
}

impl Plan {
    /// Whether computerd is bound at [`crate::DAEMON_PATH`] (no OS
    /// directory shows it).
    pub fn binds_exe(&self) -> bool {
        self.exe_inside != self.exe
    }
}

/// PATH when the sandbox was given none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const CAP_SYS_ADMIN: u32 = 21;

impl Plan {
    pub fn new(opts: &SandboxArgs) -> Result<Plan, SetupError> {
        let run = existing_dir("--run", &opts.run)?;
        if run == Path::new("/") || under_kernel(&run) {
            return Err(format!(
                "--run {} cannot be / or under /proc, /sys or /dev",
                opts.run.display()
            )
            .into());
        }
        let exe = std::fs::read_link("/proc/self/exe")
            .and_then(std::fs::canonicalize)
            .map_err(|e| format!("cannot find its own binary through /proc/self/exe ({e})"))?;
        let os = os_entries(Path::new("/"));
        let exe_inside = exe_inside(&exe, &os);
        let shares = check_shares(&opts.binds)?;
        let egress = opts
            .egress
            .as_ref()
            .map(|e| existing_dir("--egress", e))
            .transpose()?;
        for c in &opts.cgroups {
            if !c.is_absolute() {
                return Err(format!("--cgroup {} is not an absolute path", c.display()).into());
            }
        }

        let init_user = opts.init.user.map(|u| (u.uid, u.gid));
        check_socket(&opts.init.socket)?;
        let root = nix::unistd::geteuid().is_root() && sys::has_effective_cap(CAP_SYS_ADMIN);
        let (userns, owner) = if root {
            let Some(user) = init_user.filter(|(uid, _)| *uid != 0) else {
                return Err("as root, the sandbox runs init only with --user UID:GID and a uid other than 0, so that no program in the computer is root".into());
            };
            (None, user)
        } else {
            if init_user.is_some() {
                return Err(format!(
                    "without CAP_SYS_ADMIN, init cannot take --user: the computer runs as the user who starts the sandbox (uid {})",
                    nix::unistd::geteuid()
                ).into());
            }
            if nix::unistd::geteuid().is_root() {
                return Err("uid 0 without CAP_SYS_ADMIN: the computer's programs would be uid 0; run with CAP_SYS_ADMIN (and init's --user), or as another user".into());
            }
            let me = (
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            );
            (Some(me), me)
        };

        // argv[0] `computerd` makes a multi-call binary (the server) run as
        // computerd too; the binary itself is exec'd by its path inside
        // (`exe_inside`).
        let mut argv = vec![cstring(OsStr::new(crate::launch::WORD))?];
        for a in &opts.init.to_args() {
            argv.push(cstring(a)?);
        }
        let mut env = Vec::new();
        let mut var = |k: &str, v: &OsStr| -> Result<(), SetupError> {
            let mut kv = OsString::from(format!("{k}="));
            kv.push(v);
            env.push(cstring(&kv)?);
            Ok(())
        };
        var("HOME", OsStr::new(WORK))?;
        let path = std::env::var_os("PATH")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_PATH.into());
        var("PATH", &path)?;
        if let Some(log) = std::env::var_os("COMPUTERD_LOG") {
            var("COMPUTERD_LOG", &log)?;
        }
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or("could not read /proc/sys/kernel/cap_last_cap")?;
        Ok(Plan {
            run,
            exe,
            exe_inside,
            network: opts.network,
            tmp_size_mib: opts.tmp_size_mib,
            work_size_mib: opts.work_size_mib,
            os,
            shares,
            cgroups: opts.cgroups.clone(),
            max_procs: opts.max_procs,
            egress,
            owner,
            userns,
            argv,
            env,
            last_cap,
        })
    }
}

/// An absolute path to an existing directory, canonical (every mount is
/// made at the canonical path, which has no symbolic link to follow).
fn existing_dir(flag: &str, p: &Path) -> Result<PathBuf, SetupError> {
    if !p.is_absolute() {
        return Err(format!("{flag} {} is not an absolute path", p.display()).into());
    }
    let c = std::fs::canonicalize(p).map_err(|e| {
        format!(
            "{flag} {}: cannot resolve it ({e}); it must be an existing directory",
            p.display()
        )
    })?;
    if !c.is_dir() {
        return Err(format!("{flag} {} is not a directory", p.display()).into());
    }
    Ok(c)
}

/// Under the host's /proc, /sys or /dev: never shown to a computer.
fn under_kernel(p: &Path) -> bool {
    ["/proc", "/sys", "/dev"].iter().any(|k| p.starts_with(k))
}

/// [`OS_DIRS`] as the host under `root` has them (those it has at all).
pub fn os_entries(root: &Path) -> Vec<OsEntry> {
    let mut out = Vec::new();
    for d in OS_DIRS {
        let at = root.join(d.trim_start_matches('/'));
        let Ok(m) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        if m.file_type().is_symlink() {
            if let Ok(target) = std::fs::read_link(&at) {
                out.push(OsEntry::Link {
                    path: d.into(),
                    target,
                });
            }
        } else if m.is_dir() {
            out.push(OsEntry::Dir(d.into()));
        }
    }
    out
}

/// Where computerd (canonical `exe`) is exec'd from inside: its own path
/// if an OS directory bound as a directory holds it (a canonical path has
/// no link on its way), else [`crate::DAEMON_PATH`].
pub fn exe_inside(exe: &Path, os: &[OsEntry]) -> PathBuf {
    let shown = os
        .iter()
        .any(|e| matches!(e, OsEntry::Dir(d) if exe.starts_with(d)));
    if shown {
        exe.to_path_buf()
    } else {
        PathBuf::from(crate::DAEMON_PATH)
    }
}

/// An absolute path with no `.`, `..` or empty part, written plainly.
fn normal_inside(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut comps = p.components();
    if comps.next() != Some(Component::RootDir) {
        return None;
    }
    for c in comps {
        match c {
            Component::Normal(n) => out.push(n),
            _ => return None,
        }
    }
    Some(out)
}

/// The `--bind`s checked: each source an absolute existing directory
/// (made canonical) that is not `/` nor under /proc, /sys or /dev; each
/// inside `/workspace` or under it, none at or under another.
pub fn check_shares(binds: &[Share]) -> Result<Vec<Share>, SetupError> {
    let mut out: Vec<Share> = Vec::new();
    for b in binds {
        let source = existing_dir(&format!("--bind {b}: HOST_DIR"), &b.source)?;
        if source == Path::new("/") || under_kernel(&source) {
            return Err(
                format!("--bind {b}: HOST_DIR cannot be / or under /proc, /sys or /dev").into(),
            );
        }
        let inside = normal_inside(&b.inside)
            .filter(|i| i.starts_with(WORKSPACE))
            .ok_or_else(|| {
                format!(
                    "--bind {b}: INSIDE must be {WORKSPACE} or a path under it, absolute, with no . or .. part"
                )
            })?;
        if let Some(other) = out
            .iter()
            .find(|o| o.inside.starts_with(&inside) || inside.starts_with(&o.inside))
        {
            return Err(format!(
                "--bind {b}: INSIDE {} meets {} of --bind {other}; shares may not be one inside another",
                inside.display(),
                other.inside.display()
            ).into());
        }
        out.push(Share {
            source,
            inside,
            read_only: b.read_only,
        });
    }
    out.sort_by(|a, b| a.inside.cmp(&b.inside));
    Ok(out)
}

/// Init's socket must be in [`RUN`], the one directory the host reaches
/// (init's default, [`crate::DEFAULT_SOCKET`], is).
fn check_socket(p: &Path) -> Result<(), SetupError> {
    let name_ok = p
        .file_name()
        .is_some_and(|n| p.parent() == Some(Path::new(RUN)) && n != "." && n != "..");
    if name_ok {
        Ok(())
    } else {
        Err(format!(
            "init's --socket {} must be a name in {RUN}, where --run is bound (the host reaches it at <run>/<name>)",
            p.display()
        ).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn os_entries_are_the_allowlisted_dirs_the_host_has_with_links_kept() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["usr/bin", "usr/lib", "etc", "lib32", "srv", "opt", "home"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
        std::os::unix::fs::symlink("/usr/lib", r.join("lib")).unwrap();
        // A file where a directory is expected is not shown.
        std::fs::write(r.join("libx32"), "").unwrap();
        assert_eq!(
            os_entries(r),
            vec![
                OsEntry::Dir(p("/usr")),
                OsEntry::Link {
                    path: p("/bin"),
                    target: p("usr/bin")
                },
                OsEntry::Link {
                    path: p("/lib"),
                    target: p("/usr/lib")
                },
                OsEntry::Dir(p("/lib32")),
                OsEntry::Dir(p("/etc")),
            ]
        );
    }

    #[test]
    fn computerd_runs_from_its_own_path_only_where_an_os_dir_shows_it() {
        let os = vec![
            OsEntry::Dir(p("/usr")),
            OsEntry::Link {
                path: p("/bin"),
                target: p("usr/bin"),
            },
        ];
        assert_eq!(
            exe_inside(&p("/usr/bin/computerd"), &os),
            p("/usr/bin/computerd")
        );
        for outside in [
            "/work/t/target/debug/computerd",
            "/bin/computerd",
            "/usr2/computerd",
            "/home/u/.cargo/bin/computerd",
        ] {
            assert_eq!(
                exe_inside(&p(outside), &os),
                p(crate::DAEMON_PATH),
                "{outside}"
            );
        }
    }

    #[test]
    fn shares_parse_and_print_back() {
        for (text, read_only) in [("/a:/workspace/a", false), ("/a:/workspace:ro", true)] {
            let s: Share = text.parse().unwrap();
            assert_eq!(s.read_only, read_only);
            assert_eq!(s.to_string(), text);
        }
        let rw: Share = "/a:/workspace/b:rw".parse().unwrap();
        assert_eq!(
            rw,
            Share {
                source: p("/a"),
                inside: p("/workspace/b"),
                read_only: false
            }
        );
        for (bad, said) in [
            ("/a", "is not HOST_DIR:INSIDE[:ro]"),
            ("/a:/b:/c:ro", "a path holding ':'"),
            ("/a:/workspace:rx", "ro or rw, not \"rx\""),
            (":/workspace", "a path is empty"),
        ] {
            let e = bad.parse::<Share>().unwrap_err();
            assert!(e.contains(said), "{bad}: {e}");
        }
    }

    #[test]
    fn shares_are_checked_made_canonical_and_sorted() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(d.path().join("f"), "").unwrap();
        let share = |src: &Path, inside: &str, ro: bool| Share {
            source: src.to_path_buf(),
            inside: inside.into(),
            read_only: ro,
        };
        let via_dots = d.path().join("b/../a");
        let got = check_shares(&[
            share(&b, "/workspace/z", false),
            share(&via_dots, "/workspace//a/", true),
        ])
        .unwrap();
        let canon = |x: &Path| std::fs::canonicalize(x).unwrap();
        assert_eq!(
            got,
            vec![
                share(&canon(&a), "/workspace/a", true),
                share(&canon(&b), "/workspace/z", false),
            ]
        );
        let cases: Vec<(Vec<Share>, &str)> = vec![
            (
                vec![share(Path::new("rel"), "/workspace/r", false)],
                "HOST_DIR rel is not an absolute path",
            ),
            (
                vec![share(&d.path().join("missing"), "/workspace/m", false)],
                "cannot resolve it",
            ),
            (
                vec![share(&d.path().join("f"), "/workspace/f", false)],
                "is not a directory",
            ),
            (
                vec![share(Path::new("/"), "/workspace/root", false)],
                "HOST_DIR cannot be /",
            ),
            (
                vec![share(Path::new("/proc/1"), "/workspace/p", false)],
                "under /proc",
            ),
            (
                vec![share(&a, "/work/a", false)],
                "INSIDE must be /workspace or a path under it",
            ),
            (
                vec![share(&a, "/workspace/../etc", false)],
                "no . or .. part",
            ),
            (
                vec![share(&a, "workspace/a", false)],
                "INSIDE must be /workspace",
            ),
            (
                vec![
                    share(&a, "/workspace/a", false),
                    share(&b, "/workspace/a/b", false),
                ],
                "shares may not be one inside another",
            ),
            (
                vec![
                    share(&a, "/workspace", false),
                    share(&b, "/workspace/b", false),
                ],
                "shares may not be one inside another",
            ),
        ];
        for (binds, said) in cases {
            let e = check_shares(&binds).unwrap_err().to_string();
            assert!(e.contains(said), "{binds:?}: {e}");
        }
    }

    #[test]
    fn inits_socket_must_be_in_the_run_directory() {
        assert!(check_socket(Path::new("/run/computerd/computerd.sock")).is_ok());
        for bad in [
            "/srv/c1/run/computerd.sock",
            "/run/computerd",
            "/run/computerd/x/s.sock",
            "s.sock",
        ] {
            let e = check_socket(Path::new(bad)).unwrap_err().to_string();
            assert!(e.contains("must be a name in /run/computerd"), "{bad}: {e}");
        }
    }

    #[test]
    fn network_values_parse_or_are_refused() {
        assert_eq!("none".parse::<Network>(), Ok(Network::None));
        assert_eq!("host".parse::<Network>(), Ok(Network::Host));
        let e = "bridge".parse::<Network>().unwrap_err();
        assert!(e.contains("none") && e.contains("\"bridge\""), "{e}");
    }
}
