//! `fake-cloud`, as a user starts it to try a cloud provider without an
//! account: for each vendor it prints the variables and flags that point
//! computer-mcp at it, `computer-mcp exec` with exactly those runs a
//! command on one of its sandboxes, and on TERM it ends with no sandbox
//! left.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::support::SERVER;

/// The fake-cloud binary of this build, when it is built (a workspace
/// test builds it; alone: `cargo build -p computer-fakes --bin fake-cloud`).
fn fake_cloud() -> Option<PathBuf> {
    let bin = Path::new(SERVER).with_file_name("fake-cloud");
    computer_testkit::need(
        "fake-cloud",
        bin.is_file(),
        &format!(
            "{} is not built (cargo build -p computer-fakes --bin fake-cloud)",
            bin.display()
        ),
    )
    .then_some(bin)
}

/// What fake-cloud printed: the variables to export, the flags after
/// `computer-mcp serve`, and the Docker label its sandboxes carry.
struct Printed {
    vars: Vec<(String, String)>,
    flags: Vec<String>,
    label: String,
}

/// Read fake-cloud's words until it says it serves.
fn read_printed(child: &mut Child, vendor: &str) -> Printed {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let (mut vars, mut flags, mut label) = (None, None, None);
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("export ") {
            vars = Some(
                rest.split_whitespace()
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        (k.to_string(), v.to_string())
                    })
                    .collect(),
            );
        } else if let Some(rest) = t.strip_prefix("computer-mcp serve ") {
            flags = Some(rest.split_whitespace().map(str::to_string).collect());
        } else if let Some(rest) = t.strip_prefix("Its sandboxes carry the Docker label ") {
            label = rest.split(';').next().map(str::to_string);
        } else if t.starts_with("Serving until") {
            break;
        }
    }
    let (Some(vars), Some(flags), Some(label)) = (vars, flags, label) else {
        panic!("{vendor}: fake-cloud printed no variables, flags or label:\n{seen}");
    };
    assert!(
        seen.contains("FAKE"),
        "{vendor}: it does not say it is a fake"
    );
    Printed { vars, flags, label }
}

fn serves_a_command_with_the_flags_it_prints(vendor: &str, bin: &Path, env: &Env) {
    let mut child = Command::new(bin)
        .args([vendor, "--image", &env.docker.image, "--computerd"])
        .arg(&env.docker.computerd)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let printed = read_printed(&mut child, vendor);
    assert_eq!(
        printed.flags[..2],
        ["--provider".to_string(), vendor.to_string()]
    );
    // Exactly what it printed, in a shell without the user's settings.
    let out = Command::new(SERVER)
        .arg("exec")
        .args(&printed.flags)
        .args(["--", "sh", "-c", "echo made-on-$0; id -u", vendor])
        .env_remove("COMPUTER_MCP_PROVIDER")
        .envs(printed.vars.iter().cloned())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{vendor}: {said}{stderr}");
    assert_eq!(said, format!("made-on-{vendor}\n2510\n"), "{vendor}");
    for (_, secret) in &printed.vars {
        assert!(
            !stderr.contains(secret.as_str()),
            "{vendor}: a key was told"
        );
    }
    // TERM: it removes its sandboxes and ends well.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{vendor}: fake-cloud ended {status}");
    let left = env.rt.block_on(computer_testkit::labelled_containers(
        &env.docker.docker,
        &printed.label,
    ));
    assert!(left.is_empty(), "{vendor}: sandboxes left: {left:?}");
}

struct Env {
    rt: tokio::runtime::Runtime,
    docker: computer_testkit::DockerEnv,
}

#[test]
fn fake_cloud_prints_the_flags_with_which_computer_mcp_runs_a_command_and_leaves_nothing() {
    let Some(bin) = fake_cloud() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(docker) = rt.block_on(computer_testkit::docker_env()) else {
        return;
    };
    let env = Env { rt, docker };
    for vendor in ["e2b", "daytona", "modal"] {
        serves_a_command_with_the_flags_it_prints(vendor, &bin, &env);
    }
}
