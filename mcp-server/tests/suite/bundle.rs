//! server.json (the MCP Registry's entry) and the Claude Desktop extension
//! (`mcpb/manifest.json`, packed by `mcpb/pack.sh`): each held to the rules
//! of its format and to the server's own `--help`, and the packed bundle's
//! binary started as its manifest says and answering `initialize`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::support::SERVER;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn json_file(rel: &str) -> Value {
    let text = std::fs::read_to_string(root().join(rel)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

/// The variables of the HTTP transport alone: server.json's package and
/// the bundle run the server over stdio, where these mean nothing.
const HTTP_ONLY: [&str; 4] = [
    "COMPUTER_MCP_HTTP",
    "COMPUTER_MCP_TOKEN",
    "COMPUTER_MCP_ALLOWED_ORIGINS",
    "COMPUTER_MCP_ALLOWED_HOSTS",
];

/// Every COMPUTER_MCP_* variable a stdio server reads, as its `--help` and
/// `serve --help` name them (serve's own options, the callers' bounds and
/// the idle time among them), less [`HTTP_ONLY`].
fn help_variables() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for args in [&["--help"][..], &["serve", "--help"]] {
        let out = Command::new(SERVER).args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        all.extend(
            text.split("[env: ")
                .skip(1)
                .filter_map(|rest| rest.split(['=', ']']).next())
                .filter(|v| !HTTP_ONLY.contains(v))
                .map(str::to_string),
        );
    }
    assert!(all.contains("COMPUTER_MCP_SESSION_IDLE"), "{all:?}");
    all
}

/// A version the registry takes: specific, never a range or `latest`.
fn specific_version(v: &str) -> bool {
    !v.is_empty()
        && v != "latest"
        && !v.starts_with(['^', '~', '>', '<', '='])
        && !v.contains(['*', ' '])
        && !v.split('.').any(|p| p == "x")
}

#[test]
fn server_json_is_a_registry_entry_in_step_with_the_help() {
    let doc = json_file("server.json");
    let name = doc["name"].as_str().unwrap();
    // Reverse DNS, exactly one slash: ^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$, 3 to 200.
    let (ns, n) = name.split_once('/').unwrap();
    assert!((3..=200).contains(&name.len()));
    assert!(
        !ns.is_empty()
            && ns
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".".contains(&b) || b == b'-')
    );
    assert!(
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    );
    let description = doc["description"].as_str().unwrap();
    assert!(
        (1..=100).contains(&description.len()),
        "{}",
        description.len()
    );
    let version = doc["version"].as_str().unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    assert!(specific_version(version));
    assert_eq!(doc["repository"]["source"], "github");
    assert!(
        doc["repository"]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    let allowed: BTreeSet<&str> = [
        "registryType",
        "registryBaseUrl",
        "identifier",
        "version",
        "fileSha256",
        "runtimeHint",
        "transport",
        "runtimeArguments",
        "packageArguments",
        "environmentVariables",
    ]
    .into();
    let packages = doc["packages"].as_array().unwrap();
    assert!(!packages.is_empty());
    for p in packages {
        for k in p.as_object().unwrap().keys() {
            assert!(
                allowed.contains(k.as_str()),
                "package field {k} is not the registry's"
            );
        }
        for k in ["registryType", "identifier", "version"] {
            assert!(p[k].as_str().is_some_and(|s| !s.is_empty()), "{k}");
        }
        assert!(specific_version(p["version"].as_str().unwrap()));
        assert_eq!(p["version"], version);
        assert_eq!(p["transport"], serde_json::json!({"type": "stdio"}));
        if let Some(sha) = p.get("fileSha256") {
            let sha = sha.as_str().unwrap();
            assert!(
                sha.len() == 64
                    && sha
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
        // Every variable named is the server's, and every one the server
        // reads is named: the help and the entry move together.
        let mut named = BTreeSet::new();
        for e in p["environmentVariables"].as_array().unwrap() {
            let n = e["name"].as_str().unwrap().to_string();
            assert!(
                e["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{n}"
            );
            let format = e.get("format").and_then(Value::as_str).unwrap_or("string");
            assert!(
                ["string", "number", "boolean", "filepath"].contains(&format),
                "{n}: {format}"
            );
            for k in ["isRequired", "isSecret"] {
                assert!(e.get(k).is_none_or(Value::is_boolean), "{n}: {k}");
            }
            assert!(
                e.get("default").is_none_or(Value::is_string),
                "{n}: default"
            );
            assert!(named.insert(n.clone()), "{n} twice");
        }
        assert_eq!(
            named,
            help_variables(),
            "server.json's variables against --help"
        );
    }
}

#[test]
fn the_extension_manifest_is_a_binary_bundle_of_the_servers_own_options() {
    let m = json_file("mcpb/manifest.json");
    for k in ["manifest_version", "name", "version", "description"] {
        assert!(m[k].as_str().is_some_and(|s| !s.is_empty()), "{k}");
    }
    assert_eq!(m["manifest_version"], "0.2");
    assert_eq!(m["version"], env!("CARGO_PKG_VERSION"));
    assert!(m["author"]["name"].as_str().is_some_and(|s| !s.is_empty()));
    let server = &m["server"];
    assert_eq!(server["type"], "binary");
    assert_eq!(server["entry_point"], "server/computer-mcp");
    assert_eq!(
        server["mcp_config"]["command"],
        "${__dirname}/server/computer-mcp"
    );
    assert_eq!(
        m["compatibility"]["platforms"],
        serde_json::json!(["linux"])
    );
    let config = m["user_config"].as_object().unwrap();
    for (k, c) in config {
        let t = c["type"].as_str().unwrap();
        assert!(
            ["string", "number", "boolean", "directory", "file"].contains(&t),
            "{k}: {t}"
        );
        assert!(
            c["title"].as_str().is_some() && c["description"].as_str().is_some(),
            "{k}"
        );
    }
    // What the launch passes is the server's variables, and every
    // ${user_config.K} names an option the manifest declares.
    let vars = help_variables();
    for (name, value) in server["mcp_config"]["env"].as_object().unwrap() {
        assert!(
            vars.contains(name),
            "{name} is not a variable of the server"
        );
        let v = value.as_str().unwrap();
        if let Some(k) = v
            .strip_prefix("${user_config.")
            .and_then(|r| r.strip_suffix('}'))
        {
            assert!(
                config.contains_key(k),
                "{name} names an undeclared option {k}"
            );
        }
    }
    for k in ["provider", "network", "lifetime", "shared_folder"] {
        assert!(config.contains_key(k), "the option {k}");
    }
}

/// The manifest's env for a launch: each option its default, "" when it
/// has none (an unset optional folder), `${__dirname}` the bundle.
fn launch_env(m: &Value, dir: &Path) -> Vec<(String, String)> {
    let config = &m["user_config"];
    m["server"]["mcp_config"]["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().unwrap();
            let v = match v
                .strip_prefix("${user_config.")
                .and_then(|r| r.strip_suffix('}'))
            {
                Some(opt) => config[opt]["default"].as_str().unwrap_or("").to_string(),
                None => v.replace("${__dirname}", dir.to_str().unwrap()),
            };
            (k.clone(), v)
        })
        .collect()
}

#[test]
fn the_packed_bundle_starts_its_server_as_the_manifest_says() {
    let computerd = root().join("target/x86_64-unknown-linux-gnu/daemon/computerd");
    if !computer_testkit::need(
        "docker",
        computerd.is_file(),
        &format!(
            "the static computerd {} is not built (RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile daemon --target x86_64-unknown-linux-gnu -p computerd)",
            computerd.display()
        ),
    ) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let packed = Command::new("bash")
        .arg(root().join("mcpb/pack.sh"))
        .arg(out.path())
        .env("SERVER", SERVER)
        .env("COMPUTERD", &computerd)
        .output()
        .unwrap();
    assert!(
        packed.status.success(),
        "pack.sh: {}",
        String::from_utf8_lossy(&packed.stderr)
    );
    let said = String::from_utf8(packed.stdout).unwrap();
    let mut lines = said.lines();
    let bundle = PathBuf::from(lines.next().unwrap());
    let release = PathBuf::from(lines.next().unwrap());
    assert!(
        bundle
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with(&format!("{}-linux-x86_64.mcpb", env!("CARGO_PKG_VERSION")))
    );
    // The release's server.json carries the bundle's own sha256.
    let sha = Command::new("sha256sum").arg(&bundle).output().unwrap();
    let sha = String::from_utf8(sha.stdout).unwrap();
    let sha = sha.split_whitespace().next().unwrap();
    let release: Value = serde_json::from_str(&std::fs::read_to_string(release).unwrap()).unwrap();
    assert_eq!(release["packages"][0]["fileSha256"], sha);
    // Files only, no entries for directories: the reference mcpb CLI's
    // unpack (2.1.2) opens every entry as a file and fails on a "server/".
    let listed = Command::new("unzip")
        .arg("-Z1")
        .arg(&bundle)
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["manifest.json", "server/computer-mcp", "server/computerd"],
        "the bundle's entries"
    );
    // Unpacked, the manifest is the one in the tree and its entry point
    // is inside.
    let dir = out.path().join("unpacked");
    let unzip = Command::new("unzip")
        .arg("-q")
        .arg(&bundle)
        .arg("-d")
        .arg(&dir)
        .status()
        .unwrap();
    assert!(unzip.success());
    let inside: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(inside, json_file("mcpb/manifest.json"));
    let entry = dir.join(inside["server"]["entry_point"].as_str().unwrap());
    assert!(entry.is_file());
    // Started as the manifest says, with every option at its default and
    // the unset folder "", it answers initialize over stdio (a Docker
    // computer's static computerd is the one beside it, as by default).
    assert!(dir.join("server/computerd").is_file());
    let state = tempfile::tempdir().unwrap();
    let replies = stdio_exchange(
        &entry,
        &launch_env(&inside, &dir),
        &[("COMPUTER_MCP_LOCAL_STATE_DIR", state.path())],
        &[],
    );
    assert_eq!(
        replies[0]["result"]["serverInfo"]["name"], "computer-mcp",
        "{replies:?}"
    );

    // With the docker provider and its image chosen, a tool call runs in a
    // Docker computer that binds the bundle's own static computerd.
    let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    if super::support::Server::docker_with_image(&image).is_none() {
        return;
    }
    let env: Vec<(String, String)> = launch_env(&inside, &dir)
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "COMPUTER_MCP_PROVIDER" => (k, "docker".to_string()),
            "COMPUTER_MCP_DOCKER_IMAGE" => (k, image.clone()),
            _ => (k, v),
        })
        .collect();
    let cache = tempfile::tempdir().unwrap();
    let replies = stdio_exchange(
        &entry,
        &env,
        &[("COMPUTER_MCP_DOCKER_CACHE_DIR", &cache.path().join("cache"))],
        &[
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "exec", "arguments": {"argv": ["cat", "/etc/debian_version"]}}}),
        ],
    );
    let result = &replies[1]["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
}

/// Start `entry` with `env`, initialize, send `calls` one at a time and
/// return every reply (initialize's first; notifications left out), then
/// close its stdin.
fn stdio_exchange(
    entry: &Path,
    env: &[(String, String)],
    more: &[(&str, &Path)],
    calls: &[Value],
) -> Vec<Value> {
    let mut child = Command::new(entry)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(more.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let mut read = || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bundle-test", "version": "0"}}}),
    );
    let mut replies = vec![read()];
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for c in calls {
        send(c.clone());
        // Notifications (a computer made changes the resource list) may
        // come before the reply: the reply is the line with the call's id.
        loop {
            let line = read();
            if line.get("id") == c.get("id") {
                replies.push(line);
                break;
            }
        }
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {replies:?}");
    replies
}
