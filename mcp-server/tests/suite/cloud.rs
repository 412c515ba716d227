//! The cloud providers (E2B, Daytona, Modal) through the real binary against
//! their fakes, whose sandboxes are bounded Docker containers: bad input is
//! one line in words and rents nothing; a session's every word, the
//! server's log, `computer_info`, the sweep's and the listing's output hold
//! neither the canary key (Modal's token pair) nor an envd token or a Modal
//! JWT; and, when a key is given, the
//! live vendor passes Core.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use computer_fakes::daytona::{BoxMachines, FakeDaytona};
use computer_fakes::e2b::FakeE2b;
use computer_fakes::modal::FakeModal;
use computer_fakes::vendor_box::{BoxSpec, LABEL};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use super::support::{Recorder, SERVER, call, text};

/// A vendor's fake and what the binary needs to reach it.
enum Fake {
    E2b(FakeE2b),
    Daytona(FakeDaytona),
    Modal(FakeModal),
}

struct Rig {
    id: &'static str,
    fake: Fake,
    key: String,
    env: computer_testkit::DockerEnv,
    owner: String,
}

impl Rig {
    async fn start(id: &'static str) -> Option<Rig> {
        let env = computer_testkit::docker_env().await?;
        let owner = computer_testkit::marker(&format!("{id}-cloud"));
        let key = format!(
            "{id}_CANARY_{}",
            computer_providers::random::random_hex(8).unwrap()
        );
        let fake = match id {
            "e2b" => Fake::E2b(
                FakeE2b::start(&env.docker, &env.image, &key, &owner)
                    .await
                    .unwrap(),
            ),
            "modal" => {
                let (id, secret) = modal_pair(&key);
                let f = FakeModal::start(&env.docker, &env.image, &id, &secret, &owner)
                    .await
                    .unwrap();
                f.knobs(|k| k.list_lag = 1);
                Fake::Modal(f)
            }
            _ => {
                let machines =
                    BoxMachines::new(env.docker.clone(), BoxSpec::new(&env.image, &owner));
                let f = FakeDaytona::start(&key, Arc::new(machines)).await.unwrap();
                f.list_lag(1);
                Fake::Daytona(f)
            }
        };
        Some(Rig {
            id,
            fake,
            key,
            env,
            owner,
        })
    }

    /// The variables the key is read from, each with its value (Modal's
    /// token pair is two).
    fn key_vars(&self) -> Vec<(String, String)> {
        if let Fake::Modal(_) = self.fake {
            let (id, secret) = modal_pair(&self.key);
            return vec![
                ("COMPUTER_MCP_MODAL_TOKEN_ID".into(), id),
                ("COMPUTER_MCP_MODAL_TOKEN_SECRET".into(), secret),
            ];
        }
        let var = format!("COMPUTER_MCP_{}_API_KEY", self.id.to_uppercase());
        vec![(var, self.key.clone())]
    }

    /// `--provider <id>` and the flags that point it at the fake.
    fn flags(&self) -> Vec<String> {
        let id = self.id;
        let mut f = vec!["--provider".to_string(), id.to_string()];
        let url = match &self.fake {
            Fake::E2b(e) => {
                f.extend(["--e2b-envd-url".into(), e.url().to_string()]);
                e.url().to_string()
            }
            Fake::Daytona(d) => d.api_url(),
            Fake::Modal(m) => {
                f.extend(["--modal-insecure-plaintext-for-tests".into(), "true".into()]);
                m.url().to_string()
            }
        };
        let url_flag = match self.fake {
            Fake::Modal(_) => "--modal-server-url".to_string(),
            _ => format!("--{id}-api-url"),
        };
        f.extend([
            url_flag,
            url,
            format!("--{id}-computerd"),
            self.env.computerd.to_str().unwrap().to_string(),
        ]);
        f
    }

    /// The binary with `args` after the provider's flags, the key in its
    /// variable when `keyed`.
    fn command(&self, sub: &str, keyed: bool, args: &[&str]) -> Command {
        let mut cmd = Command::new(SERVER);
        cmd.arg(sub)
            .args(self.flags())
            .args(args)
            .env_remove("COMPUTER_MCP_PROVIDER");
        for (var, value) in self.key_vars() {
            cmd.env_remove(&var);
            if keyed {
                cmd.env(var, value);
            }
        }
        cmd
    }

    /// How many creates the fake was sent.
    fn creates(&self) -> usize {
        match &self.fake {
            Fake::E2b(e) => e.creates() as usize,
            Fake::Daytona(d) => d.calls().iter().filter(|c| *c == "POST /sandbox").count(),
            Fake::Modal(m) => m.creates() as usize,
        }
    }

    /// The key (Modal's pair) and every envd token, Modal auth token and
    /// JWT the fake handed out.
    fn secrets(&self) -> Vec<String> {
        let mut s: Vec<String> = self.key_vars().into_iter().map(|(_, v)| v).collect();
        match &self.fake {
            Fake::E2b(e) => s.extend(e.tokens()),
            Fake::Modal(m) => s.extend(m.secrets()),
            Fake::Daytona(_) => {}
        }
        s
    }

    /// Close the fake; no box of the rig is left.
    async fn close(self) {
        match &self.fake {
            Fake::E2b(e) => e.close().await,
            Fake::Modal(m) => m.close().await,
            Fake::Daytona(d) => {
                let left = d.names();
                d.shutdown().await;
                assert_eq!(left, Vec::<String>::new(), "{}: sandboxes left", self.id);
            }
        }
        let label = format!("{LABEL}={}", self.owner);
        for _ in 0..50 {
            if computer_testkit::labelled_containers(&self.env.docker, &label)
                .await
                .is_empty()
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("{}: a box was left", self.id);
    }
}

/// Modal's canary token pair, made of the rig's canary `key`.
fn modal_pair(key: &str) -> (String, String) {
    (format!("ak-{key}"), format!("as-{key}"))
}

/// stderr's lines that are not the log's (a log line starts with its time).
fn said(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

async fn bad_input_is_one_line_and_rents_nothing(
    id: &'static str,
    cases: &[(bool, &[&str], &str)],
) {
    let Some(rig) = Rig::start(id).await else {
        return;
    };
    for (keyed, args, words) in cases {
        let mut cmd = rig.command("exec", *keyed, args);
        cmd.args(["--", "true"]);
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        let lines = said(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{id} {args:?}");
        assert_eq!(lines.len(), 1, "{id} {args:?}: {lines:?}");
        assert!(lines[0].contains(words), "{id} {args:?}: {lines:?}");
        assert!(out.stdout.is_empty(), "{id} {args:?}");
        let all = String::from_utf8_lossy(&out.stderr);
        assert!(!all.contains(&rig.key), "{id}: the key was told");
    }
    assert_eq!(rig.creates(), 0, "{id}: a refusal rented a computer");
    rig.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_bad_input_through_the_binary_is_one_line_in_words_and_rents_nothing() {
    bad_input_is_one_line_and_rents_nothing(
        "e2b",
        &[
            (
                false,
                &["--lifetime", "30m"],
                "give --e2b-api-key (COMPUTER_MCP_E2B_API_KEY)",
            ),
            (
                true,
                &["--lifetime", "2h"],
                "lifetime 2 h is over this provider's most, 1 h",
            ),
            (
                true,
                &["--network", "open"],
                "an E2B computer's network is none",
            ),
            (
                true,
                &["--network", "allow:example.com"],
                "an E2B computer's network is none",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_bad_input_through_the_binary_is_one_line_in_words_and_rents_nothing() {
    bad_input_is_one_line_and_rents_nothing(
        "daytona",
        &[
            (
                false,
                &[],
                "give --daytona-api-key (COMPUTER_MCP_DAYTONA_API_KEY)",
            ),
            (
                true,
                &["--lifetime", "40d"],
                "lifetime 40 d is over this provider's most, 30 d",
            ),
            (true, &["--network", "open"], "network"),
            (true, &["--network", "allow:example.com"], "network"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modal_bad_input_through_the_binary_is_one_line_in_words_and_rents_nothing() {
    bad_input_is_one_line_and_rents_nothing(
        "modal",
        &[
            (
                false,
                &[],
                "give --modal-token-id and --modal-token-secret (COMPUTER_MCP_MODAL_TOKEN_ID, COMPUTER_MCP_MODAL_TOKEN_SECRET)",
            ),
            (
                true,
                &["--lifetime", "25h"],
                "lifetime 25 h is over this provider's most, 1 d",
            ),
            (
                true,
                &["--network", "open"],
                "a Modal computer's network is none",
            ),
            (
                true,
                &["--network", "allow:example.com"],
                "Modal's allowlist",
            ),
        ],
    )
    .await;
}

/// A session on the vendor through MCP, its log at debug in `log`: every
/// result's words.
async fn session_words(rig: &Rig, log: &Path) -> String {
    let mut cmd = tokio::process::Command::new(SERVER);
    cmd.arg("serve")
        .args(rig.flags())
        .args(["--lifetime", "20m", "--log", "debug"])
        .env_remove("COMPUTER_MCP_PROVIDER")
        .envs(rig.key_vars());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();
    let mut words = String::new();
    for (tool, args) in [
        ("computer_info", json!({})),
        ("exec", json!({"command": "echo hi; env"})),
        ("read_file", json!({"path": "/nonexistent/x"})),
        ("exec", json!({"command": "cat /proc/self/environ"})),
        ("computer_info", json!({})),
    ] {
        let r = call(&client, tool, args).await;
        words.push_str(&text(&r));
        words.push('\n');
    }
    assert!(words.contains("hi\n"), "{}: {words}", rig.id);
    client.cancel().await.unwrap();
    words
}

async fn no_secret_is_told(id: &'static str) {
    let Some(rig) = Rig::start(id).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut words = session_words(&rig, &log).await;
    // The server releases its computer as it goes; the sweep and the
    // listing are asked too.
    for sub in [&["sweep"][..], &["computers", "list"][..]] {
        let mut cmd = rig.command(sub[0], true, &[]);
        cmd.args(&sub[1..]).stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{id} {sub:?}: {out:?}");
        words.push_str(&String::from_utf8_lossy(&out.stdout));
        words.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG"), "{id}: the log is not at debug");
    let secrets = rig.secrets();
    assert!(
        id == "daytona" || secrets.len() > rig.key_vars().len(),
        "{id}: no token handed out"
    );
    for s in &secrets {
        assert!(
            !words.contains(s.as_str()),
            "{id}: a secret in a result or report"
        );
        assert!(!logged.contains(s.as_str()), "{id}: a secret in the log");
    }
    rig.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_e2b_session_tells_neither_the_key_nor_an_envd_token() {
    no_secret_is_told("e2b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daytona_session_tells_no_key() {
    no_secret_is_told("daytona").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modal_session_tells_neither_the_token_pair_nor_an_auth_token_or_jwt() {
    no_secret_is_told("modal").await;
}

/// The real vendor, when its key is in the environment: Core passes
/// through `computer-mcp conformance`, nothing is left, the key is in no
/// word, and a sweep after the run releases whatever it left. Without a
/// key this skips, unless `COMPUTER_MCP_REQUIRE` names `<id>-live`.
fn live_core_passes(id: &str) {
    let Some(key) = super::conformance::live_key(id) else {
        return;
    };
    let computerd = std::env::var("CMCP_TEST_DOCKER_COMPUTERD")
        .unwrap_or_else(|_| "/work/static/computerd".into());
    let run = |sub: &[&str]| {
        Command::new(SERVER)
            .args(sub)
            .args(["--provider", id])
            .arg(format!("--{id}-computerd"))
            .arg(&computerd)
            .env_remove("COMPUTER_MCP_PROVIDER")
            .output()
            .unwrap()
    };
    let out = run(&["conformance", "--json"]);
    let swept = run(&["sweep"]);
    for text in [&out.stdout, &out.stderr, &swept.stdout, &swept.stderr] {
        assert!(
            !String::from_utf8_lossy(text).contains(&key),
            "live {id}: the key leaked"
        );
    }
    super::conformance::passing_report(&out, &format!("live {id}"));
    assert_eq!(swept.status.code(), Some(0), "live {id}: {swept:?}");
}

#[test]
fn a_live_e2b_passes_core_when_its_key_is_given() {
    live_core_passes("e2b");
}

#[test]
fn a_live_daytona_passes_core_when_its_key_is_given() {
    live_core_passes("daytona");
}
