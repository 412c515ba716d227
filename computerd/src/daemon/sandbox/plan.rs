//! The flags checked and turned into a plan before anything changes: the
//! canonical paths, the mounts in the order they are made, init's argv and
//! environment, and which of the two paths (root, or a user namespace).

use std::ffi::{CString, OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{Options, cstring};
use crate::daemon::{isolate, sys};

/// `--network`, as the launch contract has it.
pub use crate::launch::Network;

/// One mount over the read-only view of the host's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The private `/tmp`: a tmpfs, mode 1777.
    Tmp,
    /// An empty read-only directory over a host directory.
    MaskDir,
    /// An empty read-only file over a host file (or socket, or device).
    MaskFile,
    /// The host's path bound at the same path.
    Bind { writable: bool, dir: bool },
}

impl Kind {
    /// Whether this mount is a fresh filesystem that mount points for the
    /// binds under it must be made in.
    pub fn is_overlay(&self) -> bool {
        matches!(self, Kind::Tmp | Kind::MaskDir)
    }

    /// At one path, a bind goes over a mask: never both (see [`layout`]).
    fn rank(&self) -> u8 {
        match self {
            Kind::Tmp => 0,
            Kind::MaskDir | Kind::MaskFile => 1,
            Kind::Bind { .. } => 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// A canonical host path, the same inside.
    pub path: PathBuf,
    pub kind: Kind,
}

/// Everything the sandbox will do, decided before it does any of it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `--work`, canonical: HOME, and init's working directory.
    pub work: PathBuf,
    /// `--run`, canonical.
    pub run: PathBuf,
    /// This binary, canonical, exec'd by this path inside.
    pub exe: PathBuf,
    pub network: Network,
    pub tmp_size_mib: u64,
    /// The mounts over the read-only view, parents before children.
    pub steps: Vec<Step>,
    /// `Some((uid, gid))`: no CAP_SYS_ADMIN, so a user namespace mapping
    /// these ids to themselves.
    pub userns: Option<(u32, u32)>,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    /// /proc/sys/kernel/cap_last_cap.
    pub last_cap: u32,
}

/// PATH when the sandbox was given none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Paths masked whenever they are directories: a unix socket under /run on
/// a read-only mount can still be connected to (/run/docker.sock), and
/// /root and /home hold other users' files. /var/run is usually a link to
/// /run, and then the same mask.
pub const ALWAYS_MASKED: [&str; 4] = ["/run", "/var/run", "/root", "/home"];

const CAP_SYS_ADMIN: u32 = 21;

impl Plan {
    pub fn new(opts: &Options) -> Result<Plan, String> {
        let work = existing_dir("--work", &opts.work)?;
        let run = existing_dir("--run", &opts.run)?;
        let exe = std::fs::read_link("/proc/self/exe")
            .and_then(std::fs::canonicalize)
            .map_err(|e| format!("cannot find its own binary through /proc/self/exe ({e})"))?;
        let tmp = std::fs::canonicalize("/tmp")
            .ok()
            .filter(|t| t.is_dir())
            .ok_or("the host has no /tmp directory to put the private /tmp on")?;
        let mut masks = Vec::new();
        for m in ALWAYS_MASKED {
            if let Ok(c) = std::fs::canonicalize(m)
                && c.is_dir()
            {
                masks.push((c, true));
            }
        }
        for h in &opts.hide {
            if !h.is_absolute() {
                return Err(format!("--hide {} is not an absolute path", h.display()));
            }
            // A path missing now could appear later through the read-only
            // view (it shows the live host filesystem), unmasked: refused.
            let c = std::fs::canonicalize(h).map_err(|e| {
                format!(
                    "--hide {}: cannot resolve it ({e}); only a path that exists can be hidden",
                    h.display()
                )
            })?;
            let dir = c.is_dir();
            masks.push((c, dir));
        }
        let steps = layout(&work, &run, &exe, &tmp, &masks)?;

        let Some((first, init_args)) = opts.command.split_first() else {
            return Err("give init's command after --, e.g. -- init --deadline … --socket <RUN>/computerd.sock".into());
        };
        if first != "init" {
            return Err(format!(
                "the sandbox runs `computerd init` only, as its PID 1; after -- came {first:?}"
            ));
        }
        let init_user = init_user_flag(init_args)?;
        let root = nix::unistd::geteuid().is_root() && sys::has_effective_cap(CAP_SYS_ADMIN);
        let userns = if root {
            if init_user.is_none_or(|(uid, _)| uid == 0) {
                return Err("as root, the sandbox runs init only with --user UID:GID and a uid other than 0, so that no program in the computer is root, which could read root's files through the read-only view".into());
            }
            None
        } else {
            if init_user.is_some() {
                return Err(format!(
                    "without CAP_SYS_ADMIN, init cannot take --user: the computer runs as the user who starts the sandbox (uid {})",
                    nix::unistd::geteuid()
                ));
            }
            if nix::unistd::geteuid().is_root() {
                return Err("uid 0 without CAP_SYS_ADMIN: the computer's programs would be uid 0 and could read root's files through the read-only view; run with CAP_SYS_ADMIN (and init's --user), or as another user".into());
            }
            Some((
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            ))
        };

        // argv[0] `computerd` makes a multi-call binary (the server) run as
        // computerd too; the binary itself is exec'd by its path.
        let mut argv = vec![cstring(OsStr::new(crate::launch::WORD))?];
        for a in &opts.command {
            argv.push(cstring(a)?);
        }
        let mut env = Vec::new();
        let mut var = |k: &str, v: &OsStr| -> Result<(), String> {
            let mut kv = OsString::from(format!("{k}="));
            kv.push(v);
            env.push(cstring(&kv)?);
            Ok(())
        };
        var("HOME", work.as_os_str())?;
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
            work,
            run,
            exe,
            network: opts.network,
            tmp_size_mib: opts.tmp_size_mib,
            steps,
            userns,
            argv,
            env,
            last_cap,
        })
    }
}

/// An absolute path to an existing directory, canonical (every mount is
/// made at the canonical path, which has no symbolic link to follow).
fn existing_dir(flag: &str, p: &Path) -> Result<PathBuf, String> {
    if !p.is_absolute() {
        return Err(format!("{flag} {} is not an absolute path", p.display()));
    }
    let c = std::fs::canonicalize(p).map_err(|e| {
        format!(
            "{flag} {}: cannot resolve it ({e}); the provider makes it before it starts the sandbox",
            p.display()
        )
    })?;
    if !c.is_dir() {
        return Err(format!("{flag} {} is not a directory", p.display()));
    }
    Ok(c)
}

/// init's `--user`, if it was given one.
fn init_user_flag(args: &[OsString]) -> Result<Option<(u32, u32)>, String> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = if a == "--user" {
            it.next().cloned().unwrap_or_default()
        } else if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--user=")) {
            v.into()
        } else {
            continue;
        };
        let text = value.to_string_lossy();
        found = Some(isolate::parse_user(&text)?);
    }
    Ok(found)
}

/// The mounts over the read-only view, in the order they are made: sorted
/// by path so a parent comes before anything under it (a mount point for a
/// bind under an overlay is made in that overlay before it goes
/// read-only). `masks` are canonical host paths, `true` for a directory.
pub fn layout(
    work: &Path,
    run: &Path,
    exe: &Path,
    tmp: &Path,
    masks: &[(PathBuf, bool)],
) -> Result<Vec<Step>, String> {
    // The sandbox makes these itself; nothing of the host's is put there.
    let own = [Path::new("/proc"), Path::new("/dev")];
    let under_own = |p: &Path| own.iter().any(|o| p.starts_with(o));
    for (flag, p) in [("--work", work), ("--run", run)] {
        if p == Path::new("/") || p == tmp || under_own(p) {
            return Err(format!(
                "{flag} {} cannot be /, /tmp, or under /proc or /dev, which the sandbox makes its own",
                p.display()
            ));
        }
    }
    if under_own(exe) {
        return Err(format!(
            "computerd runs from {}, under /proc or /dev, which the sandbox replaces",
            exe.display()
        ));
    }
    let mut steps = vec![Step {
        path: tmp.to_path_buf(),
        kind: Kind::Tmp,
    }];
    for (m, dir) in masks {
        if m == Path::new("/") || under_own(m) {
            return Err(format!(
                "--hide {} cannot be / or under /proc or /dev",
                m.display()
            ));
        }
        if m.starts_with(tmp) {
            // The private /tmp shows nothing of the host's already.
            continue;
        }
        if m == work || m == run {
            return Err(format!(
                "{} is both hidden and bound as --work or --run; hide a directory above it instead",
                m.display()
            ));
        }
        if m == exe {
            return Err(format!(
                "--hide {} is computerd itself, which init runs from",
                m.display()
            ));
        }
        steps.push(Step {
            path: m.clone(),
            kind: if *dir { Kind::MaskDir } else { Kind::MaskFile },
        });
    }
    for p in [work, run] {
        steps.push(Step {
            path: p.to_path_buf(),
            kind: Kind::Bind {
                writable: true,
                dir: true,
            },
        });
    }
    // The binary is exec'd by its own path inside, and init starts its
    // guards from it: where an overlay would hide it, it is bound read-only.
    let hidden = steps
        .iter()
        .any(|s| s.kind.is_overlay() && exe.starts_with(&s.path));
    if hidden {
        steps.push(Step {
            path: exe.to_path_buf(),
            kind: Kind::Bind {
                writable: false,
                dir: false,
            },
        });
    }
    // Path order is component by component, so /a comes before /a/b and
    // /a/b before /a-b.
    steps.sort_by(|a, b| a.path.cmp(&b.path).then(a.kind.rank().cmp(&b.kind.rank())));
    steps.dedup();
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn step(path: &str, kind: Kind) -> Step {
        Step {
            path: p(path),
            kind,
        }
    }

    const RW: Kind = Kind::Bind {
        writable: true,
        dir: true,
    };
    const EXE: Kind = Kind::Bind {
        writable: false,
        dir: false,
    };

    #[test]
    fn mounts_go_parents_first_with_binds_inside_masks() {
        let steps = layout(
            &p("/home/u/.local/state/cm/c1/work"),
            &p("/run/user/1000/cm/c1"),
            &p("/home/u/.cargo/bin/computerd"),
            &p("/tmp"),
            &[
                (p("/run"), true),
                (p("/root"), true),
                (p("/home"), true),
                (p("/home/u"), true),
                (p("/home/u/.local/state/cm"), true),
                (p("/tmp/x"), true),
                (p("/etc/secret.key"), false),
                (p("/home"), true),
            ],
        )
        .unwrap();
        assert_eq!(
            steps,
            vec![
                step("/etc/secret.key", Kind::MaskFile),
                step("/home", Kind::MaskDir),
                step("/home/u", Kind::MaskDir),
                step("/home/u/.cargo/bin/computerd", EXE),
                step("/home/u/.local/state/cm", Kind::MaskDir),
                step("/home/u/.local/state/cm/c1/work", RW),
                step("/root", Kind::MaskDir),
                step("/run", Kind::MaskDir),
                step("/run/user/1000/cm/c1", RW),
                step("/tmp", Kind::Tmp),
            ]
        );
    }

    #[test]
    fn a_visible_binary_is_not_bound_and_work_under_tmp_is() {
        let steps = layout(
            &p("/tmp/t/home"),
            &p("/tmp/t/home"),
            &p("/usr/bin/computerd"),
            &p("/tmp"),
            &[],
        )
        .unwrap();
        assert_eq!(
            steps,
            vec![step("/tmp", Kind::Tmp), step("/tmp/t/home", RW)]
        );
    }

    #[test]
    fn impossible_layouts_are_refused_in_words() {
        let tmp = p("/tmp");
        let exe = p("/usr/bin/computerd");
        type Case<'a> = (&'a str, &'a str, &'a [(PathBuf, bool)], &'a str);
        let cases: [Case; 7] = [
            ("/", "/r", &[], "--work / cannot be"),
            ("/w", "/proc/1", &[], "--run /proc/1 cannot be"),
            ("/tmp", "/r", &[], "--work /tmp cannot be"),
            ("/w", "/dev/shm/r", &[], "--run /dev/shm/r cannot be"),
            ("/w", "/r", &[(p("/"), true)], "--hide / cannot be"),
            (
                "/w",
                "/r",
                &[(p("/w"), true)],
                "/w is both hidden and bound",
            ),
            (
                "/w",
                "/r",
                &[(p("/usr/bin/computerd"), false)],
                "is computerd itself",
            ),
        ];
        for (work, run, masks, said) in cases {
            let e = layout(&p(work), &p(run), &exe, &tmp, masks).unwrap_err();
            assert!(e.contains(said), "{work} {run} {masks:?}: {e}");
        }
    }

    #[test]
    fn network_values_parse_or_are_refused() {
        assert_eq!("none".parse::<Network>(), Ok(Network::None));
        assert_eq!("host".parse::<Network>(), Ok(Network::Host));
        let e = "bridge".parse::<Network>().unwrap_err();
        assert!(e.contains("none") && e.contains("\"bridge\""), "{e}");
    }

    #[test]
    fn inits_user_flag_is_found_in_both_spellings() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(init_user_flag(&args(&["--deadline", "x"])), Ok(None));
        assert_eq!(
            init_user_flag(&args(&["--user", "5:6", "--socket", "s"])),
            Ok(Some((5, 6)))
        );
        assert_eq!(init_user_flag(&args(&["--user=7:8"])), Ok(Some((7, 8))));
        assert!(init_user_flag(&args(&["--user", "x"])).is_err());
    }
}
