//! A fake vendor's sandbox: a Docker container of the test image, which
//! the fake vendors (E2B's envd, Daytona's toolbox) run their commands in,
//! as root inside, as the real vendors do.
//!
//! The box is the bound the hostile-test rule asks for, and it holds
//! whatever the code under test does: a pids limit and a memory limit
//! (swap the same: none) on the container, no network, and capabilities
//! beyond Docker's default only SYS_ADMIN and NET_ADMIN, which `computerd
//! init --own-network` needs to make its namespace. Root inside is root of
//! the container's user namespace setup, never a process of this machine
//! outside the container. Docker's own init (`--init`) is the box's first
//! process, so an orphan of a command is reaped as a vendor's agent would.
//!
//! Every box carries [`LABEL`] (its value says which fake made it), so a
//! sweep finds leftovers of a test that died; a box is removed by
//! [`VendorBox::remove`] or, failing that, when it is dropped.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// The label every box carries; its value names the fake that made it.
pub const LABEL: &str = "computer-mcp.test.vendor-box";
/// What a vendor's snapshot keeps of a box in the fakes ([`VendorBox::pack`]):
/// the computer's HOME and the daemon's install and state, so a fork sees
/// the captured daemon's pid file and socket as on the vendor.
pub const KEPT: [&str; 4] = [
    "/work",
    "/opt/computer-mcp",
    "/run/computerd",
    "/run/computer-mcp-init.pid",
];
/// The most of a run's stdout or stderr [`VendorBox::run`] keeps.
pub const RUN_MAX_BYTES: usize = 64 * 1024;

/// A box's failure, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoxError(pub String);

impl std::fmt::Display for BoxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BoxError {}

pub type Result<T> = std::result::Result<T, BoxError>;

fn docker_err(doing: &str) -> impl Fn(bollard::errors::Error) -> BoxError + '_ {
    move |e| BoxError(format!("{doing}: {e}"))
}

/// What a box is made of.
#[derive(Clone, Debug)]
pub struct BoxSpec {
    /// The image (the test image, `CMCP_TEST_DOCKER_IMAGE`).
    pub image: String,
    /// [`LABEL`]'s value.
    pub owner: String,
    pub memory_mb: u64,
    pub pids: i64,
    /// A container runtime's hardening, as a pod's securityContext asks
    /// it: every capability dropped (none added) and no-new-privileges.
    pub hardened: bool,
    /// Any user of the box may bind a port below 1024
    /// (`net.ipv4.ip_unprivileged_port_start=0`): a box without
    /// capabilities can then serve on 443.
    pub low_ports: bool,
    /// The Docker networks the box is on, the first its network mode and
    /// the rest connected before it starts; none when empty (the default).
    pub networks: Vec<String>,
    /// DNS servers of its resolv.conf (Docker's `--dns`), when on a network.
    pub dns: Vec<String>,
}

impl BoxSpec {
    /// A box of `image` for `owner`, 1 GiB and 512 processes.
    pub fn new(image: impl Into<String>, owner: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            owner: owner.into(),
            memory_mb: 1024,
            pids: 512,
            hardened: false,
            low_ports: false,
            networks: Vec::new(),
            dns: Vec::new(),
        }
    }
}

/// One command to start in a box.
#[derive(Clone, Debug, Default)]
pub struct Cmd {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    /// A user the image knows, or uid[:gid]; root when `None`.
    pub user: Option<String>,
}

impl Cmd {
    /// `argv` as root, with nothing else set.
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Self {
        Self {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            ..Default::default()
        }
    }
}

/// A piece of a command's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk {
    Stdout(Bytes),
    Stderr(Bytes),
}

/// A command started with its output streamed.
pub struct Attached {
    /// Its pid inside the box (for [`VendorBox::signal`]).
    pub pid: u32,
    /// Its stdout and stderr, in the order Docker delivers them; ends when
    /// the command's output closes.
    pub output: Pin<Box<dyn Stream<Item = Chunk> + Send>>,
    /// Its stdin, when asked for (else the command reads an empty stdin).
    pub input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// The exec's id, for [`VendorBox::exit_code`].
    pub exec: String,
}

/// A command run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    pub code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// One running box; removed on [`VendorBox::remove`] or drop.
pub struct VendorBox {
    docker: Docker,
    id: String,
    removed: AtomicBool,
}

impl std::fmt::Debug for VendorBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorBox").field("id", &self.id).finish()
    }
}

impl VendorBox {
    /// Make and start a box.
    pub async fn start(docker: &Docker, spec: &BoxSpec) -> Result<Self> {
        let memory = (spec.memory_mb * 1024 * 1024) as i64;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            user: Some("0:0".into()),
            // The vendor's agent stands in: it only waits, and Docker's
            // init before it reaps orphans.
            entrypoint: Some(vec!["sleep".into()]),
            cmd: Some(vec!["infinity".into()]),
            labels: Some(HashMap::from([(LABEL.to_string(), spec.owner.clone())])),
            host_config: Some(HostConfig {
                init: Some(true),
                memory: Some(memory),
                memory_swap: Some(memory),
                pids_limit: Some(spec.pids),
                cap_add: (!spec.hardened).then(|| vec!["SYS_ADMIN".into(), "NET_ADMIN".into()]),
                cap_drop: spec.hardened.then(|| vec!["ALL".into()]),
                // Docker's AppArmor profile refuses the mounts init makes
                // for its own namespace; its seccomp profile stays.
                security_opt: Some(if spec.hardened {
                    vec!["no-new-privileges".into()]
                } else {
                    vec!["apparmor=unconfined".into()]
                }),
                network_mode: Some(
                    spec.networks
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "none".into()),
                ),
                dns: (!spec.dns.is_empty()).then(|| spec.dns.clone()),
                sysctls: spec.low_ports.then(|| {
                    HashMap::from([(
                        "net.ipv4.ip_unprivileged_port_start".to_string(),
                        "0".to_string(),
                    )])
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let name = format!("computer-mcp-vendor-box-{}", random_hex());
        docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                body,
            )
            .await
            .map_err(docker_err("making the vendor box"))?;
        let made = Self {
            docker: docker.clone(),
            id: name,
            removed: AtomicBool::new(false),
        };
        for n in spec.networks.iter().skip(1) {
            made.docker
                .connect_network(
                    n,
                    bollard::models::NetworkConnectRequest {
                        container: made.id.clone(),
                        ..Default::default()
                    },
                )
                .await
                .map_err(docker_err("connecting the vendor box to a network"))?;
        }
        made.docker
            .start_container(
                &made.id,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(docker_err("starting the vendor box"))?;
        Ok(made)
    }

    /// The container's name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Start `cmd` with its output streamed and, with `stdin`, its input.
    pub async fn attach(&self, cmd: &Cmd, stdin: bool) -> Result<Attached> {
        if cmd.argv.is_empty() {
            return Err(BoxError("a command needs a program".into()));
        }
        // The shell says its pid, then becomes the command, keeping it.
        let mut argv: Vec<String> = ["/bin/sh", "-c", "echo $$; exec \"$@\"", "sh"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        argv.extend(cmd.argv.iter().cloned());
        let exec = self
            .docker
            .create_exec(
                &self.id,
                CreateExecOptions {
                    cmd: Some(argv),
                    env: Some(cmd.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                    working_dir: cmd.cwd.clone(),
                    user: Some(cmd.user.clone().unwrap_or_else(|| "0:0".into())),
                    attach_stdin: Some(stdin),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(false),
                    ..Default::default()
                },
            )
            .await
            .map_err(docker_err("starting a command in the vendor box"))?;
        let started = self
            .docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(docker_err("attaching to a command in the vendor box"))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(BoxError("Docker started the command detached".into()));
        };
        let mut output = Box::pin(output.filter_map(|item| async move {
            match item {
                Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                    Some(Chunk::Stdout(message))
                }
                Ok(LogOutput::StdErr { message }) => Some(Chunk::Stderr(message)),
                _ => None,
            }
        }));
        let (pid, rest) = read_pid(&mut output).await?;
        let output: Pin<Box<dyn Stream<Item = Chunk> + Send>> = match rest {
            Some(rest) => Box::pin(futures::stream::iter(rest).chain(output)),
            None => output,
        };
        Ok(Attached {
            pid,
            output,
            input: stdin.then_some(input),
            exec: exec.id,
        })
    }

    /// Start `cmd` in the background; its output is read and dropped for
    /// as long as this process lives. Its pid inside the box.
    pub async fn detach(&self, cmd: &Cmd) -> Result<u32> {
        let mut a = self.attach(cmd, false).await?;
        tokio::spawn(async move { while a.output.next().await.is_some() {} });
        Ok(a.pid)
    }

    /// Run `cmd` to its end within `within`, keeping up to
    /// [`RUN_MAX_BYTES`] of each output; past `within` it is killed.
    pub async fn run(&self, cmd: &Cmd, stdin: Option<&[u8]>, within: Duration) -> Result<Ran> {
        let mut a = self.attach(cmd, stdin.is_some()).await?;
        if let (Some(bytes), Some(mut input)) = (stdin, a.input.take()) {
            let wrote = async {
                input.write_all(bytes).await?;
                input.shutdown().await
            };
            wrote
                .await
                .map_err(|e| BoxError(format!("writing a command's stdin: {e}")))?;
        }
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let read = async {
            while let Some(c) = a.output.next().await {
                let (to, b) = match c {
                    Chunk::Stdout(b) => (&mut stdout, b),
                    Chunk::Stderr(b) => (&mut stderr, b),
                };
                let room = RUN_MAX_BYTES.saturating_sub(to.len());
                to.extend_from_slice(&b[..b.len().min(room)]);
            }
        };
        if tokio::time::timeout(within, read).await.is_err() {
            let _ = self.signal(a.pid, "KILL").await;
            return Err(BoxError(format!(
                "the command did not end within {} s and was killed",
                within.as_secs()
            )));
        }
        let code = self.exit_code(&a.exec).await?;
        Ok(Ran {
            code,
            stdout,
            stderr,
        })
    }

    /// Write `bytes` to `path` in the box as root, making its parents.
    pub async fn upload(&self, path: &str, bytes: &[u8]) -> Result<()> {
        let cmd = Cmd::new(&[
            "/bin/sh",
            "-c",
            "mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"",
            "sh",
            path,
        ]);
        let ran = self
            .run(&cmd, Some(bytes), Duration::from_secs(120))
            .await?;
        if ran.code != 0 {
            return Err(BoxError(format!(
                "writing {path} in the vendor box failed: {}",
                String::from_utf8_lossy(&ran.stderr).trim()
            )));
        }
        Ok(())
    }

    /// The exit code of a command whose output has ended (Docker marks
    /// the exec ended a moment after).
    pub async fn exit_code(&self, exec: &str) -> Result<i64> {
        for _ in 0..100 {
            let i = self
                .docker
                .inspect_exec(exec)
                .await
                .map_err(docker_err("reading a command's end"))?;
            if i.running != Some(true)
                && let Some(code) = i.exit_code
            {
                return Ok(code);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(BoxError("a command's output ended but it did not".into()))
    }

    /// Send `signal` (a name: TERM, KILL, INT) to the process `pid`.
    pub async fn signal(&self, pid: u32, signal: &str) -> Result<()> {
        // The shell's own kill: the image may have no kill binary.
        let cmd = Cmd::new(&[
            "/bin/sh",
            "-c",
            "kill -s \"$1\" \"$2\"",
            "sh",
            signal,
            &pid.to_string(),
        ]);
        let a = self.attach(&cmd, false).await?;
        let mut output = a.output;
        while output.next().await.is_some() {}
        match self.exit_code(&a.exec).await? {
            0 => Ok(()),
            _ => Err(BoxError(format!("no process {pid} to signal"))),
        }
    }

    /// The box's address on the Docker network `network`, if it is on it.
    pub async fn address_on(&self, network: &str) -> Result<Option<String>> {
        let i = self
            .docker
            .inspect_container(
                &self.id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(docker_err("inspecting the vendor box"))?;
        Ok(i.network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|e| e.ip_address)
            .filter(|a| !a.is_empty()))
    }

    /// Each of `paths` that exists in the box, as its parent directory
    /// and a tar of it (Docker's archive call): what a vendor's snapshot
    /// keeps of the box, in the fakes.
    pub async fn pack(&self, paths: &[&str]) -> Result<Vec<(String, Bytes)>> {
        let mut out = Vec::new();
        for path in paths {
            let opts = bollard::query_parameters::DownloadFromContainerOptionsBuilder::new()
                .path(path)
                .build();
            let mut stream = self.docker.download_from_container(&self.id, Some(opts));
            let mut tar = Vec::new();
            let mut missing = false;
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(b) => tar.extend_from_slice(&b),
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    }) => {
                        missing = true;
                        break;
                    }
                    Err(e) => return Err(BoxError(format!("reading {path}: {e}"))),
                }
            }
            if !missing {
                let parent = std::path::Path::new(path)
                    .parent()
                    .map_or("/".to_string(), |p| p.display().to_string());
                out.push((parent, Bytes::from(tar)));
            }
        }
        Ok(out)
    }

    /// Unpack what [`Self::pack`] read into this box.
    pub async fn unpack(&self, files: &[(String, Bytes)]) -> Result<()> {
        for (parent, tar) in files {
            let opts = bollard::query_parameters::UploadToContainerOptionsBuilder::new()
                .path(parent)
                .build();
            self.docker
                .upload_to_container(&self.id, Some(opts), bollard::body_full(tar.clone()))
                .await
                .map_err(|e| BoxError(format!("unpacking a snapshot into {parent}: {e}")))?;
        }
        Ok(())
    }

    /// Remove the box and everything in it.
    pub async fn remove(&self) -> Result<()> {
        self.removed.store(true, Ordering::SeqCst);
        remove(&self.docker, &self.id).await
    }
}

/// Remove the container `id`, returning once it is gone: when another
/// removal of it is already under way (Docker answers 409 "removal of
/// container … is already in progress"), wait for that one (up to 30 s),
/// so a caller that counts boxes next never sees one on its way out.
async fn remove(docker: &Docker, id: &str) -> Result<()> {
    match docker
        .remove_container(
            id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
    {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => {
            for _ in 0..300 {
                let gone = matches!(
                    docker
                        .inspect_container(
                            id,
                            None::<bollard::query_parameters::InspectContainerOptions>
                        )
                        .await,
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    })
                );
                if gone {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(BoxError(format!(
                "removing the vendor box: {id} was still there 30 s after its removal began"
            )))
        }
        Err(e) => Err(BoxError(format!("removing the vendor box: {e}"))),
    }
}

impl Drop for VendorBox {
    fn drop(&mut self) {
        if self.removed.swap(true, Ordering::SeqCst) {
            return;
        }
        // A drop cannot await, and the runtime may be ending: remove it on
        // a thread of its own and wait, so a failed test leaves no box.
        let (docker, id) = (self.docker.clone(), self.id.clone());
        let removing = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = rt.block_on(remove(&docker, &id));
            }
        });
        let _ = removing.join();
    }
}

/// The first stdout line (the wrapper's pid), and what came after it.
async fn read_pid<S: Stream<Item = Chunk> + Unpin>(
    output: &mut S,
) -> Result<(u32, Option<Vec<Chunk>>)> {
    let mut line = Vec::new();
    let mut early = Vec::new();
    while let Some(c) = output.next().await {
        match c {
            Chunk::Stdout(b) => match b.iter().position(|&x| x == b'\n') {
                Some(n) => {
                    line.extend_from_slice(&b[..n]);
                    let pid = std::str::from_utf8(&line)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .ok_or_else(|| BoxError("the command's wrapper said no pid".into()))?;
                    let rest = b.slice(n + 1..);
                    if !rest.is_empty() {
                        early.push(Chunk::Stdout(rest));
                    }
                    return Ok((pid, Some(early)));
                }
                None => line.extend_from_slice(&b),
            },
            other => early.push(other),
        }
    }
    Err(BoxError(
        "the command ended before it started (is /bin/sh in the image?)".into(),
    ))
}

fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

#[cfg(test)]
#[path = "vendor_box/tests.rs"]
mod tests;
