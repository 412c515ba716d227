//! `fake-cloud`: one of the test fakes of E2B, Daytona or Modal served on
//! 127.0.0.1, standalone, so computer-mcp's cloud providers can be tried
//! with no vendor account or key:
//!
//! ```text
//! cargo run -p computer-fakes --bin fake-cloud -- e2b
//! ```
//!
//! prints the variables and flags that point `computer-mcp --provider e2b`
//! at it and serves until interrupted, then removes its sandboxes. Each
//! sandbox is a bounded Docker container, so it needs a Docker engine and
//! an image with `sleep` (any Debian image).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use bollard::Docker;
use clap::{Parser, ValueEnum};
use computer_fakes::daytona::{BoxMachines, FakeDaytona};
use computer_fakes::e2b::FakeE2b;
use computer_fakes::modal::FakeModal;
use computer_fakes::vendor_box::BoxSpec;

/// Serve a FAKE E2B, Daytona or Modal on 127.0.0.1, for trying and testing
/// computer-mcp only.
///
/// This is not the vendor and reaches no vendor: it is the fake that
/// computer-mcp's own tests run against, with a throwaway key that works
/// nowhere else. Its sandboxes are Docker containers on this machine.
/// It prints the variables and flags to give computer-mcp, serves until
/// Ctrl-C or TERM, then removes every sandbox it made.
#[derive(Parser)]
#[command(name = "fake-cloud", version)]
struct Args {
    /// Which vendor's fake to serve.
    vendor: Vendor,
    /// The Docker image each fake sandbox is a container of (it needs
    /// `sleep`; the server pushes its own static computerd in).
    #[arg(long, default_value = "debian:bookworm-slim")]
    image: String,
    /// The static computerd computer-mcp should push into each sandbox,
    /// printed as its `--<vendor>-computerd` flag (without it, computer-mcp
    /// looks for one as it does for Docker computers).
    #[arg(long, value_name = "PATH")]
    computerd: Option<std::path::PathBuf>,
    /// E2B only: the Docker image of the `desktop` template's sandboxes,
    /// for `--kind desktop` (it needs Xvfb, as E2B's desktop template has
    /// X). Without it the desktop template is `--image`, which has no X.
    #[arg(long, value_name = "IMAGE")]
    desktop_image: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Vendor {
    E2b,
    Daytona,
    Modal,
}

/// The fake being served.
enum Fake {
    E2b(FakeE2b),
    Daytona(FakeDaytona),
    Modal(FakeModal),
}

impl Fake {
    async fn close(&self) {
        match self {
            Fake::E2b(f) => f.close().await,
            Fake::Daytona(f) => f.shutdown().await,
            Fake::Modal(f) => f.close().await,
        }
    }
}

/// E2B's desktop template's name (computer-mcp's `--e2b-desktop-template`
/// default).
const DESKTOP_TEMPLATE: &str = "desktop";

/// A throwaway credential, marked as the fake's in its own words.
fn throwaway(prefix: &str) -> Result<String, String> {
    let hex = computer_providers::random::random_hex(8).map_err(|e| e.message)?;
    Ok(format!("{prefix}-fake-cloud-{hex}"))
}

/// Start the fake; the variables to export and the flags to give.
async fn start(
    vendor: Vendor,
    docker: &Docker,
    args: &Args,
    owner: &str,
) -> Result<(Fake, Vec<(String, String)>, Vec<String>), String> {
    let image = args.image.as_str();
    let flags = |pairs: &[(&str, &str)]| -> Vec<String> {
        pairs
            .iter()
            .flat_map(|(k, v)| [k.to_string(), v.to_string()])
            .collect()
    };
    Ok(match vendor {
        Vendor::E2b => {
            let key = throwaway("e2b")?;
            let f = FakeE2b::start(docker, image, &key, owner)
                .await
                .map_err(|e| e.message)?;
            if let Some(desktop) = &args.desktop_image {
                f.template(DESKTOP_TEMPLATE, desktop);
            }
            let url = f.url().to_string();
            (
                Fake::E2b(f),
                vec![("COMPUTER_MCP_E2B_API_KEY".into(), key)],
                flags(&[("--e2b-api-url", &url), ("--e2b-envd-url", &url)]),
            )
        }
        Vendor::Daytona => {
            let key = throwaway("dtn")?;
            let machines = BoxMachines::new(docker.clone(), BoxSpec::new(image, owner));
            let f = FakeDaytona::start(&key, Arc::new(machines))
                .await
                .map_err(|e| e.message)?;
            let url = f.api_url();
            (
                Fake::Daytona(f),
                vec![("COMPUTER_MCP_DAYTONA_API_KEY".into(), key)],
                flags(&[("--daytona-api-url", &url)]),
            )
        }
        Vendor::Modal => {
            let (id, secret) = (throwaway("ak")?, throwaway("as")?);
            let f = FakeModal::start(docker, image, &id, &secret, owner)
                .await
                .map_err(|e| e.message)?;
            let url = f.url().to_string();
            (
                Fake::Modal(f),
                vec![
                    ("COMPUTER_MCP_MODAL_TOKEN_ID".into(), id),
                    ("COMPUTER_MCP_MODAL_TOKEN_SECRET".into(), secret),
                ],
                flags(&[
                    ("--modal-server-url", &url),
                    ("--modal-insecure-plaintext-for-tests", "true"),
                ]),
            )
        }
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match serve(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let (id, name) = match args.vendor {
        Vendor::E2b => ("e2b", "E2B"),
        Vendor::Daytona => ("daytona", "Daytona"),
        Vendor::Modal => ("modal", "Modal"),
    };
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| format!("fake-cloud: no Docker engine: {e}"))?;
    docker
        .ping()
        .await
        .map_err(|e| format!("fake-cloud: the Docker engine does not answer: {e}"))?;
    if args.desktop_image.is_some() && !matches!(args.vendor, Vendor::E2b) {
        return Err("fake-cloud: --desktop-image is for e2b only (E2B's desktop template)".into());
    }
    for (image, flag) in [
        (Some(&args.image), "--image"),
        (args.desktop_image.as_ref(), "--desktop-image"),
    ] {
        let Some(image) = image else { continue };
        if docker.inspect_image(image).await.is_err() {
            return Err(format!(
                "fake-cloud: the image {image} is not on this Docker host: `docker pull {image}`, or give {flag}"
            ));
        }
    }
    let owner = throwaway("owner")?;
    let (fake, vars, mut flags) = start(args.vendor, &docker, &args, &owner).await?;
    if let Some(p) = &args.computerd {
        let p = std::path::absolute(p).map_err(|e| format!("fake-cloud: --computerd: {e}"))?;
        flags.extend([format!("--{id}-computerd"), p.display().to_string()]);
    }
    let exports: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "fake-cloud: a FAKE {name} on 127.0.0.1, for trying and testing computer-mcp only.\n\
         It is not {name} and reaches no vendor: the key below is a throwaway that works\n\
         nowhere else, and each sandbox is a Docker container of {} on this machine.\n\
         \n\
         Point computer-mcp at it (in another shell, or in your MCP client's config):\n\
         \n  export {}\n  computer-mcp serve --provider {id} {}\n",
        args.image,
        exports.join(" "),
        flags.join(" ")
    );
    if let Some(desktop) = &args.desktop_image {
        println!(
            "A desktop of its `{DESKTOP_TEMPLATE}` template (a container of {desktop}):\n\n  \
             computer-mcp serve --provider {id} {} --kind desktop\n",
            flags.join(" ")
        );
    }
    if matches!(args.vendor, Vendor::Modal) {
        println!("(--provider modal needs a computer-mcp built with `--features modal`.)\n");
    }
    println!(
        "Its sandboxes carry the Docker label {}={owner}; if it is killed before it\n\
         removes them: docker rm -f $(docker ps -aq --filter label={}={owner})\n",
        computer_fakes::vendor_box::LABEL,
        computer_fakes::vendor_box::LABEL
    );
    println!("Serving until Ctrl-C; then its sandboxes are removed.");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| e.to_string())?,
        _ = term.recv() => {}
    }
    fake.close().await;
    Ok(())
}
