//! `computer-mcp conformance --provider daytona` against the fake Daytona
//! (`computer_fakes::daytona`), whose sandboxes are bounded Docker
//! containers of the test image: Core passes, nothing is left, and the
//! canary key is in no word of the report or the log.

use std::process::Command;
use std::sync::Arc;

use super::support::SERVER;

#[test]
fn daytona_passes_core_through_the_command_against_its_fake() {
    let image = std::env::var("CMCP_TEST_DOCKER_IMAGE")
        .unwrap_or_else(|_| "computer-mcp-test/debian:bookworm".into());
    let up = Command::new("docker")
        .args(["image", "inspect", &image])
        .output()
        .is_ok_and(|o| o.status.success());
    if !computer_testkit::need(
        "docker",
        up,
        &format!("no Docker engine answers, or the test image {image} is not built"),
    ) {
        return;
    }
    let computerd = std::env::var_os("CMCP_TEST_DOCKER_COMPUTERD")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/x86_64-unknown-linux-gnu/daemon/computerd")
        });
    let drift = computerd.with_file_name("computerd-drift");
    if !computer_testkit::need(
        "docker",
        computerd.is_file() && drift.is_file(),
        "the static computerd and computerd-drift are not both built",
    ) {
        return;
    }
    let owner = computer_testkit::marker("daytona-conformance");
    let key = format!(
        "dtn_CANARY_{}",
        computer_providers::random::random_hex(8).unwrap()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let spec = computer_fakes::vendor_box::BoxSpec::new(&image, &owner);
    let machines = computer_fakes::daytona::BoxMachines::local(spec).unwrap();
    let fake = rt
        .block_on(computer_fakes::daytona::FakeDaytona::start(
            &key,
            Arc::new(machines),
        ))
        .unwrap();
    fake.list_lag(1);
    let url = fake.api_url();
    let out = Command::new(SERVER)
        .args([
            "conformance",
            "--provider",
            "daytona",
            "--daytona-api-url",
            &url,
            "--daytona-computerd",
            computerd.to_str().unwrap(),
            "--drifted-computerd",
            drift.to_str().unwrap(),
            "--json",
        ])
        .env("COMPUTER_MCP_DAYTONA_API_KEY", &key)
        .env_remove("COMPUTER_MCP_PROVIDER")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "no JSON report: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let failed: Vec<&serde_json::Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "fail")
        .collect();
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(text).contains(&key),
            "the key leaked"
        );
    }
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(report["core"]["verdict"], "pass", "{report:#}");
    assert_eq!(report["cleanup"]["left"], serde_json::json!([]));
    println!(
        "daytona: core {}/{}",
        report["core"]["passed"], report["core"]["total"]
    );
    let left = fake.names();
    rt.block_on(fake.shutdown());
    assert_eq!(left, Vec::<String>::new(), "sandboxes left");
}
