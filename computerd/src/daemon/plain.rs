//! A `bash -c` line that is one plain command, started without the shell.
//!
//! `bash -c 'ls -la /tmp'` parses its line, finds `ls` on PATH, and (the
//! line being one simple command) execs it in its own process: the program
//! ends up with bash's pid, bash's descriptors and bash's environment plus
//! the three variables bash adds (`PWD`, `SHLVL`, `_`). Bash's start is
//! most of what such a call costs (about one more fork+exec), so the guard
//! does that step itself when it can be sure of the outcome:
//!
//! - the argv is exactly `/bin/bash -c LINE` and `/bin/bash` can be run;
//! - LINE is words separated by spaces and tabs, each made of characters
//!   of `[A-Za-z0-9_./,:+@%=-]`, `'…'` (anything but `'`) and `"…"`
//!   (anything but `$`, `` ` `` and `\`): nothing that bash expands,
//!   redirects or splits on (no unquoted `$`, glob, `~`, brace, `#`, `;`,
//!   `|`, `&`, `<`, `>`, backslash or newline);
//! - the first word (its quotes removed) names a program: it holds no
//!   `=`, is no builtin or keyword, and starts with neither `-` nor `%`;
//!   or it is one of the few builtins whose program does exactly what the
//!   builtin does with these words (see [`twin`]), and that program is in
//!   `/usr/bin` or `/bin` (a builtin is never looked up on PATH, so
//!   neither is its twin);
//! - nothing in the environment changes what bash would do before the exec
//!   (`BASH_ENV` is read by a non-interactive shell, exported functions may
//!   shadow the program, `SHELLOPTS`/`BASHOPTS`/`POSIXLY_CORRECT` set
//!   options, `EXECIGNORE` changes the search, `SSH_CLIENT` may make bash
//!   read `~/.bashrc`), and no variable bash sets, resets or drops itself
//!   is given (`PWD`, `SHLVL`, `_`, `IFS`, `PPID`, `BASH*`, `PS*`…);
//! - every PATH entry is absolute (an empty or relative one would search
//!   the working directory) and the program is found: a regular file this
//!   user may execute.
//!
//! Anything else, and any failure to start what was found, runs bash as
//! asked, so its own words (`command not found`, exit 127; `Permission
//! denied`, 126; a script without `#!` run as a shell script) stay exactly
//! bash's.

use std::path::PathBuf;

/// The shell whose `-c` lines this understands.
pub const BASH: &str = "/bin/bash";

/// Bash's builtins and reserved words (`compgen -b`, `compgen -k` of bash
/// 5.2) that a first word of the allowed characters can spell.
const SHELL_OWN_WORDS: &[&str] = &[
    ".",
    ":",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "case",
    "esac",
    "for",
    "select",
    "while",
    "until",
    "do",
    "done",
    "in",
    "function",
    "time",
    "coproc",
];

/// Variables that change what bash does before it execs the program, or
/// that bash itself sets, resets or drops on the way (bash 5.2 passes e.g.
/// `IFS`, `LINENO`, `OPTIND`, `PS4` on with its own values and drops
/// `PPID`, `RANDOM`, `PS1`); with any of them given, bash runs.
const SHELL_STEERING: &[&str] = &[
    "SHELLOPTS",
    "POSIXLY_CORRECT",
    "EXECIGNORE",
    "SSH_CLIENT",
    "SSH2_CLIENT",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "IFS",
    "LINENO",
    "OPTERR",
    "OPTIND",
    "PPID",
    "RANDOM",
    "SRANDOM",
    "GLOBIGNORE",
    "ENV",
    "CHILD_MAX",
    "FUNCNEST",
];

/// Prefixes of bash's own variable families (`BASH`, `BASH_ENV`,
/// `BASHOPTS`, `BASH_FUNC_*`, `BASH_VERSION`, `EPOCHSECONDS`, `HISTCMD`,
/// `COMP_WORDBREAKS`…), newer bashes' included.
const SHELL_FAMILIES: &[&str] = &["BASH", "COMP_", "EPOCH", "HIST", "READLINE_"];

/// Whether bash would treat this environment variable itself (`PS0` to
/// `PS4` among them).
fn steers_bash(name: &str) -> bool {
    let prompt = name.len() == 3 && name.starts_with("PS") && name.as_bytes()[2].is_ascii_digit();
    prompt || SHELL_STEERING.contains(&name) || SHELL_FAMILIES.iter().any(|f| name.starts_with(f))
}

/// What to start instead of bash.
#[derive(Debug, PartialEq, Eq)]
pub struct Plain {
    /// The file found, as bash would exec it.
    pub program: PathBuf,
    /// The line's words: argv[0] as written.
    pub argv: Vec<String>,
    /// The environment bash would pass: the given one, then `PWD`, `SHLVL`, `_`.
    pub env: Vec<(String, String)>,
}

/// The line's words, quotes removed, when it is one simple command of
/// plain words naming a program (not yet looked up); None otherwise.
pub fn words(line: &str) -> Option<Vec<String>> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./,:+@%=-".contains(c);
    let mut words = Vec::new();
    // The word being read (an empty quoted word is still a word).
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                words.extend(word.take());
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' => return None,
                        c => w.push(c),
                    }
                }
            }
            c if plain(c) => {
                word.get_or_insert_with(String::new).push(c);
            }
            _ => return None,
        }
    }
    words.extend(word);
    let first = words.first()?;
    let program_like = !first.is_empty()
        && !first.contains('=')
        && !first.starts_with('-')
        && !first.starts_with('%')
        && !SHELL_OWN_WORDS.contains(&first.as_str());
    (program_like || twin(&words)).then_some(words)
}

/// Whether these words are a builtin whose program of the same name
/// gives exactly what the builtin gives: `true` and `false` read no
/// argument (their programs read only a lone `--help` or `--version`, so
/// no word may start with `-`); `echo` of words with no `-` at the start
/// (no option) and no backslash (no escape, whatever `xpg_echo` says)
/// prints them joined by spaces and a newline, builtin or program. Bash
/// starting costs as much as the program it would have run, and these are
/// the commonest lines a model sends that are not a program.
fn twin(words: &[String]) -> bool {
    let no_option = || words[1..].iter().all(|w| !w.starts_with('-'));
    match words[0].as_str() {
        "true" | "false" => no_option(),
        "echo" => no_option() && words[1..].iter().all(|w| !w.contains('\\')),
        _ => false,
    }
}

/// Where a builtin's twin is looked for, in this order.
const TWIN_DIRS: &[&str] = &["/usr/bin", "/bin"];

/// The program bash would run for `name` with this PATH: a name with a
/// slash as it is; else the first PATH entry holding a regular file this
/// user may execute. None when bash would have more to say (not found, a
/// relative or empty PATH entry, no PATH).
fn find(name: &str, path: Option<&str>, executable: &dyn Fn(&str) -> bool) -> Option<String> {
    if name.contains('/') {
        return executable(name).then(|| name.to_string());
    }
    let path = path?;
    let mut found = None;
    for dir in path.split(':') {
        if !dir.starts_with('/') {
            return None;
        }
        if found.is_none() {
            let candidate = if dir.ends_with('/') {
                format!("{dir}{name}")
            } else {
                format!("{dir}/{name}")
            };
            if executable(&candidate) {
                found = Some(candidate);
            }
        }
    }
    found
}

/// A regular file (after symlinks) this process may execute.
fn is_executable_file(path: &str) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// What bash would exec for `argv` in the current directory with `env`,
/// when that can be known without running it (see the module's words).
pub fn command(argv: &[String], env: &[(String, String)]) -> Option<Plain> {
    command_with(argv, env, &is_executable_file, &|| {
        std::env::current_dir()
            .ok()
            .and_then(|d| d.into_os_string().into_string().ok())
    })
}

fn command_with(
    argv: &[String],
    env: &[(String, String)],
    executable: &dyn Fn(&str) -> bool,
    cwd: &dyn Fn() -> Option<String>,
) -> Option<Plain> {
    let [shell, dash_c, line] = argv else {
        return None;
    };
    if shell != BASH || dash_c != "-c" {
        return None;
    }
    let words = words(line)?;
    if env.iter().any(|(k, _)| steers_bash(k)) {
        return None;
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let program = if SHELL_OWN_WORDS.contains(&words[0].as_str()) {
        // A builtin's twin (words lets no other builtin through).
        TWIN_DIRS
            .iter()
            .map(|d| format!("{d}/{}", words[0]))
            .find(|p| executable(p))?
    } else {
        find(&words[0], path, executable)?
    };
    if !executable(BASH) {
        return None;
    }
    let pwd = cwd()?;
    let mut all = env.to_vec();
    all.push(("PWD".into(), pwd));
    // Bash raises SHLVL to 1 and lowers it again when it execs its last
    // command; with none given, the program sees 0.
    all.push(("SHLVL".into(), "0".into()));
    all.push(("_".into(), program.clone()));
    Some(Plain {
        program: program.into(),
        argv: words,
        env: all,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        vec![BASH.into(), "-c".into(), line.into()]
    }

    fn env(path: &str) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), "/home/u".into()),
            ("PATH".into(), path.into()),
        ]
    }

    /// /usr/bin/ls, /bin/ls, /opt/x/tool, the twins of three builtins and
    /// bash exist and run; /usr/bin/data does not run.
    fn exec(p: &str) -> bool {
        [
            "/usr/bin/ls",
            "/bin/ls",
            "/opt/x/tool",
            "./build/run",
            "/usr/bin/true",
            "/bin/false",
            "/usr/bin/echo",
            "/opt/x/echo",
            "/opt/x/cd",
            BASH,
        ]
        .contains(&p)
    }

    fn plain(line: &str, env: &[(String, String)]) -> Option<Plain> {
        command_with(&argv(line), env, &exec, &|| Some("/work".into()))
    }

    #[test]
    fn a_plain_command_runs_the_program_found_with_bashs_variables() {
        let p = plain("  ls\t-la  /tmp ", &env("/usr/local/bin:/usr/bin:/bin")).unwrap();
        assert_eq!(p.program, PathBuf::from("/usr/bin/ls"));
        assert_eq!(p.argv, ["ls", "-la", "/tmp"]);
        let tail: Vec<_> = p.env[2..].iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(tail, ["PWD=/work", "SHLVL=0", "_=/usr/bin/ls"]);
        assert_eq!(p.env[..2], env("/usr/local/bin:/usr/bin:/bin")[..]);
        // A trailing slash is not doubled; a slash word is taken as written.
        assert_eq!(plain("ls", &env("/bin/")).unwrap().env[4].1, "/bin/ls");
        let rel = plain("./build/run a=b x,y:z +1 @h %d", &env("/bin")).unwrap();
        assert_eq!(rel.program, PathBuf::from("./build/run"));
        assert_eq!(rel.env[4].1, "./build/run");
    }

    #[test]
    fn quotes_are_taken_off_as_bash_would() {
        let e = env("/usr/bin");
        let p = plain("ls -n 'a b*' \"c|d\"e'f'g '' \"\" x''y", &e).unwrap();
        assert_eq!(p.argv, ["ls", "-n", "a b*", "c|defg", "", "", "xy"]);
        assert_eq!(
            plain("\"ls\" -l", &e).unwrap().program,
            PathBuf::from("/usr/bin/ls")
        );
        let p = plain("ls 'it''s \"here\"' \"it's\" 'new\nline' \"!x\"", &e).unwrap();
        assert_eq!(p.argv, ["ls", "its \"here\"", "it's", "new\nline", "!x"]);
    }

    #[test]
    fn anything_the_shell_would_treat_itself_goes_to_bash() {
        let e = env("/usr/bin:/bin");
        for line in [
            "ls | head",
            "ls; ls",
            "ls && ls",
            "ls > out",
            "ls $HOME",
            "ls *.rs",
            "ls ~",
            "ls {a,b}",
            "ls # note",
            "ls\nls",
            "ls &",
            "ls \\x",
            "ls \"$HOME\"",
            "ls \"`id`\"",
            "ls \"a\\\"b\"",
            "ls 'open",
            "ls \"open",
            "'FOO=1' ls",
            "''",
            "(ls)",
            "FOO=1 ls",
            "echo -n hi",
            "echo -e hi",
            "echo hi -n",
            "echo 'a\\tb'",
            "true --help",
            "false --version",
            ": x",
            "cd /tmp",
            "cd",
            "pwd",
            ". ./env",
            "time ls",
            "exec ls",
            "-ls",
            "%1",
            "",
            "   ",
            "missing",
            "/usr/bin/data",
        ] {
            assert_eq!(plain(line, &e), None, "{line:?}");
        }
    }

    #[test]
    fn true_false_and_an_echo_of_plain_words_run_their_twin_from_the_system_dirs() {
        // /opt/x holds an echo and a cd first on PATH: bash's builtins win
        // there, so the twin is the system's, and cd has none.
        let e = env("/opt/x:/usr/bin:/bin");
        let p = plain("true", &e).unwrap();
        assert_eq!(p.program, PathBuf::from("/usr/bin/true"));
        assert_eq!(p.argv, ["true"]);
        assert_eq!(p.env.last().unwrap().1, "/usr/bin/true");
        let p = plain("false x", &e).unwrap();
        assert_eq!(p.program, PathBuf::from("/bin/false"));
        assert_eq!(p.argv, ["false", "x"]);
        let p = plain("'echo' hi  \"a  b\" '' x-y", &e).unwrap();
        assert_eq!(p.program, PathBuf::from("/usr/bin/echo"));
        assert_eq!(p.argv, ["echo", "hi", "a  b", "", "x-y"]);
        assert_eq!(plain("echo", &e).unwrap().argv, ["echo"]);
        assert_eq!(plain("cd /tmp", &e), None);
        // A builtin is not looked up on PATH, so neither is its twin; with
        // no twin where it is looked for, bash runs the line.
        assert!(plain("true", &env("rel:")).is_some());
        let no_twins =
            |p: &str| !p.starts_with("/usr/bin/") && !p.starts_with("/bin/") || p == "/usr/bin/ls";
        let run = |line: &str| {
            command_with(&argv(line), &e, &|p| no_twins(p) && exec(p), &|| {
                Some("/".into())
            })
        };
        assert!(run("true").is_none() && run("echo hi").is_none());
        // What steers bash steers its builtins too.
        let mut steered = env("/usr/bin");
        steered.push(("BASH_FUNC_echo%%".into(), "() { :; }".into()));
        assert_eq!(plain("echo hi", &steered), None);
    }

    #[test]
    fn an_environment_that_steers_bash_or_a_path_that_searches_the_cwd_goes_to_bash() {
        for (k, v) in [
            ("BASH_ENV", "/etc/rc"),
            ("BASH_FUNC_ls%%", "() { :; }"),
            ("SHELLOPTS", "xtrace"),
            ("BASHOPTS", "execfail"),
            ("EXECIGNORE", "*"),
            ("PWD", "/work"),
            ("SHLVL", "2"),
            ("_", "/x"),
            ("OLDPWD", "/"),
            ("SSH_CLIENT", "1 2 3"),
            ("IFS", ":"),
            ("PPID", "1"),
            ("RANDOM", "4"),
            ("LINENO", "9"),
            ("OPTIND", "3"),
            ("PS4", "> "),
            ("BASH_VERSION", "9"),
            ("BASH", "/x"),
            ("EPOCHSECONDS", "1"),
            ("HISTCMD", "1"),
            ("COMP_WORDBREAKS", "x"),
        ] {
            let mut e = env("/usr/bin");
            e.push((k.into(), v.into()));
            assert_eq!(plain("ls", &e), None, "{k}");
        }
        for path in ["/usr/bin::/bin", "bin:/usr/bin", "/usr/bin:.", ""] {
            assert_eq!(plain("ls", &env(path)), None, "{path:?}");
        }
        assert_eq!(plain("ls", &[]), None, "no PATH");
        // A user's own variables keep the fast start.
        let mut e = env("/usr/bin");
        for k in [
            "PSQL_HOST",
            "PS",
            "HOME",
            "TERM",
            "LANG",
            "LC_ALL",
            "a-b",
            "ENVIRONMENT",
        ] {
            e.push((k.into(), "x".into()));
        }
        assert!(plain("ls", &e).is_some());
        // Any relative entry sends the line to bash, even one after the program's.
        assert_eq!(plain("tool", &env("/opt/x:rel")), None);
    }

    #[test]
    fn only_bash_dash_c_and_one_line() {
        let e = env("/usr/bin");
        let run = |a: &[&str]| {
            let a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            command_with(&a, &e, &exec, &|| Some("/".into()))
        };
        assert!(run(&[BASH, "-c", "ls"]).is_some());
        assert!(run(&["bash", "-c", "ls"]).is_none());
        assert!(run(&[BASH, "-lc", "ls"]).is_none());
        assert!(run(&[BASH, "-c", "ls", "name"]).is_none());
        assert!(run(&["/bin/sh", "-c", "ls"]).is_none());
        let no_bash = |p: &str| p != BASH && exec(p);
        assert!(command_with(&argv("ls"), &e, &no_bash, &|| Some("/".into())).is_none());
        assert!(command_with(&argv("ls"), &e, &exec, &|| None).is_none());
    }
}
