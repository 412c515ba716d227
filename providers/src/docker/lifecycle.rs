//! A Docker computer made: its plan, an allowlist's proxy first, the
//! container, started until its daemon answers, checked for drift and read
//! back. A failure at any step removes what was made, and its words name
//! the step and what became of the container.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{CreateContainerOptionsBuilder, InspectContainerOptions};
use computerd::launch::Time;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::egress::EgressPlan;
use super::{
    DockerProvider, Host, MAKING, Plan, START_WAIT, cache, desktop, direct, drift, egress, removal,
    stream,
};
use crate::daemon_backed::{aborted, hello, last_words, share_note, up};
use crate::provider::Connection;
use crate::types::{
    ComputerSpec, Created, ErrorCode, NetworkRead, ProviderError, Result, human_ms,
};

/// A create step's failure: the step, and what went wrong.
type StepResult<T> = std::result::Result<T, (&'static str, ProviderError)>;

impl DockerProvider {
    /// Make a computer. On a failure nothing of it is left, and the words
    /// say the step that failed and what became of what was made.
    pub(super) async fn make(
        &self,
        spec: &ComputerSpec,
        cancel: &CancellationToken,
    ) -> Result<Created> {
        let (docker, host, plan) = self.plan_for(spec, cancel).await?;
        let name = plan.name.clone();
        if cancel.is_cancelled() {
            return Err(aborted("creating the computer"));
        }
        let egress_plan = match plan.egress {
            Some(_) => {
                let addresses = self.egress_addresses(&docker, &host).await?;
                self.egress_plan(&plan, addresses)
            }
            None => None,
        };
        // From the first thing made until create returns, a drop of this
        // future still removes what it made, at once.
        let mut unmade = removal::Unmade::arm(self.removal(&docker), &name);
        if plan.direct.is_some()
            && let Err(e) = direct::make(&self.opts.cache_dir, &name)
        {
            unmade.disarm();
            return Err(e);
        }
        // An allowlist's proxy first: the computer is never run without it.
        if let Some(ep) = egress_plan
            && let Err(e) = self.proxy_first(&docker, &ep, &plan, spec, cancel).await
        {
            unmade.disarm();
            return Err(e);
        }
        let made = match docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                plan.body(),
            )
            .await
            .map_err(self.err("making the container"))
        {
            Ok(_) => self.start(&docker, &plan, &host, cancel).await,
            // An engine that failed its answer may still have made it.
            Err(e) => Err((MAKING, e)),
        };
        let made = match made {
            Ok((created, conn)) if !cancel.is_cancelled() => {
                unmade.disarm();
                self.handover.leave(&name, conn);
                return Ok(created);
            }
            Ok((_, conn)) => {
                conn.client.close();
                Ok(())
            }
            Err(e) => Err(e),
        };
        // From here the container (and an allowlist's proxy and volume)
        // may exist: gone before the error returns.
        let removed = self.remove_with_parts(&docker, &name).await;
        unmade.disarm();
        if let Err(e) = &removed {
            tracing::warn!(computer = name, "removing a failed computer: {}", e.message);
        }
        if cancel.is_cancelled() {
            return Err(aborted("creating the computer"));
        }
        let Err((step, e)) = made else {
            return Err(aborted("creating the computer"));
        };
        Err(failed_at(&plan, step, e, removed))
    }

    /// The spec checked (again against the host), its image ready and the
    /// plan the container is made from.
    async fn plan_for(
        &self,
        spec: &ComputerSpec,
        cancel: &CancellationToken,
    ) -> Result<(Docker, Host, Plan)> {
        self.check_spec(spec, None)?;
        let host = self.host(cancel).await?;
        self.check_spec(spec, Some(&host))?;
        let docker = self.engine()?;
        // The image's read and the daemon copy's hash, at once.
        let (image, daemon) =
            tokio::try_join!(self.image_for(&docker, spec, cancel), self.daemon_copy())?;
        let user = self.user_for(spec)?;
        let limits = self.limits_for(spec, Some(&host))?;
        let shares = crate::share::plan(&spec.shares, &self.opts.cache_dir, user)?;
        let name = new_name()?;
        // The lifetime counts from here: a host that holds the start eats
        // into it.
        let deadline = Time::from_unix_ms(now_ms().saturating_add(spec.lifetime_ms as i64))
            .ok_or_else(|| ProviderError::invalid("lifetime", "the deadline is past any time"))?;
        let mut labels = spec.labels.clone();
        for (k, v) in Plan::own_labels(&deadline) {
            labels.insert(k.into(), v);
        }
        let allow = egress::list_of(&spec.network)?;
        if let Some(l) = &allow {
            labels.insert(egress::LIST_LABEL.into(), l.join(","));
        }
        let plan = Plan {
            name: name.clone(),
            image,
            user,
            network: spec.network.kind(),
            limits,
            deadline,
            labels,
            daemon,
            shares,
            display: self.opts.desktop.map(|_| desktop::DISPLAY.to_string()),
            egress: allow,
            direct: self
                .opts
                .direct
                .then(|| direct::dir_of(&self.opts.cache_dir, &name)),
        };
        Ok((docker, host, plan))
    }

    /// The spec's image, made ready (pulled or built once), refused when it
    /// declares a VOLUME.
    async fn image_for(
        &self,
        docker: &Docker,
        spec: &ComputerSpec,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let source = self.image_of(spec)?;
        let socket = self.shown_socket();
        // The inspect that found it ready says whether it declares VOLUME.
        let (image, inspected) = tokio::select! {
            r = self.images.ensure(docker, &socket, &source) => r?,
            _ = cancel.cancelled() => return Err(aborted("making the image ready")),
        };
        let volumes = inspected
            .config
            .as_ref()
            .and_then(|c| c.volumes.clone())
            .unwrap_or_default();
        if !volumes.is_empty() {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "the image {image} declares VOLUME {volumes:?}, a mount the computer was not asked for: use an image without VOLUME"
                ),
            ));
        }
        Ok(image)
    }

    /// An allowlist's proxy, started before the computer; on a failure (or
    /// a cancel) it is removed again.
    async fn proxy_first(
        &self,
        docker: &Docker,
        ep: &EgressPlan,
        plan: &Plan,
        spec: &ComputerSpec,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let began = Instant::now();
        let started = match self.start_egress(docker, ep, cancel).await {
            Err(e) if deadline_ms(&plan.deadline) <= now_ms() => Err(ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "its lifetime of {} ended before its egress proxy was ready (it took {:.1} s): {}",
                    human_ms(spec.lifetime_ms),
                    began.elapsed().as_secs_f64(),
                    e.message
                ),
            )),
            r => r,
        };
        if started.is_ok() && !cancel.is_cancelled() {
            return Ok(());
        }
        if let Err(e) = self.removal(docker).egress(&plan.name).await {
            tracing::warn!(
                computer = plan.name,
                "removing a failed egress proxy: {}",
                e.message
            );
        }
        started?;
        Err(aborted("creating the computer"))
    }

    /// The provider's copy of the static daemon, made if missing.
    pub(super) async fn daemon_copy(&self) -> Result<PathBuf> {
        cache::check_static(&self.opts.computerd)?;
        let (computerd, cache_dir) = (self.opts.computerd.clone(), self.opts.cache_dir.clone());
        let sums = self.daemon_sums.clone();
        tokio::task::spawn_blocking(move || cache::ensure_copy(&computerd, &cache_dir, &sums))
            .await
            .map_err(|e| ProviderError::failed(format!("copying the daemon failed: {e}")))?
    }

    /// The part of create after the container exists; its failure names
    /// the step that failed, and the caller removes the container.
    async fn start(
        &self,
        docker: &Docker,
        plan: &Plan,
        host: &Host,
        cancel: &CancellationToken,
    ) -> StepResult<(Created, Connection)> {
        let at = |step: &'static str| move |e: ProviderError| (step, e);
        let started = Instant::now();
        docker
            .start_container(
                &plan.name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(self.err("starting the computer"))
            .map_err(at("starting the container"))?;
        let hello_step = "waiting for its daemon's hello";
        // Its inspect, read while the daemon comes up: what the drift check
        // reads was fixed when the container was made and started.
        let (up, inspected) = tokio::join!(
            self.wait_until_up(docker, plan, cancel),
            self.find(docker, &plan.name)
        );
        let conn = match up {
            Ok(c) => c,
            Err(e) if deadline_ms(&plan.deadline) <= now_ms() => {
                return Err((
                    hello_step,
                    ProviderError::new(
                        ErrorCode::Timeout,
                        format!(
                            "its lifetime ended before the computer finished starting (it took {:.1} s): {}",
                            started.elapsed().as_secs_f64(),
                            e.message
                        ),
                    ),
                ));
            }
            Err(e) => return Err((hello_step, e)),
        };
        if self.runs_chromium() {
            self.find_chromium(&conn, plan, cancel).await?;
        }
        let (hello, window_manager) = match self.opts.desktop {
            Some(screen) => {
                let x = tokio::select! {
                    r = desktop::start_x(&conn.client, screen) => r,
                    _ = cancel.cancelled() => Err(aborted("starting the desktop's X server")),
                };
                let wm = match &x {
                    Ok(_) => Some(crate::window_manager::start(&conn.client).await),
                    Err(_) => None,
                };
                (x, wm)
            }
            None => (Ok(conn.hello.clone()), None),
        };
        // The connection goes to the caller's connect only with the rest.
        let checked = match hello {
            Ok(hello) => self
                .checked(docker, plan, host, inspected, hello, window_manager)
                .await
                .map(|(created, hello)| {
                    let client = std::sync::Arc::clone(&conn.client);
                    (created, Connection { client, hello })
                }),
            Err(e) => Err(at("starting the desktop's X server")(e)),
        };
        if checked.is_err() {
            conn.client.close();
        }
        checked
    }

    /// The new computer, read back (`inspected`) and held to its plan and
    /// the host; its network read back; the words of its notes. Returns
    /// the hello it was checked with.
    async fn checked(
        &self,
        docker: &Docker,
        plan: &Plan,
        host: &Host,
        inspected: Result<Value>,
        hello: computerd::protocol::HelloResult,
        window_manager: Option<String>,
    ) -> StepResult<(Created, computerd::protocol::HelloResult)> {
        let at = |step: &'static str| move |e: ProviderError| (step, e);
        let v = inspected.map_err(at("reading the new computer back"))?;
        let mut drift = drift::inspect_drift(plan, &v, host);
        drift.extend(drift::hello_drift(&hello, host, plan.display.is_some()));
        if !drift.is_empty() {
            return Err((
                "the drift check",
                ProviderError::refused(format!(
                    "the new computer is not what was declared: {}",
                    drift.join("; ")
                )),
            ));
        }
        let network = self
            .read_net(docker, &v)
            .await
            .map_err(at("reading its network back"))?;
        let notes = notes(plan, host, &v, window_manager);
        let mut computer = self.to_ref(&v);
        computer.network = Some(NetworkRead::Policy(network.clone()));
        let created = Created {
            computer,
            network: Some(network),
            notes,
        };
        Ok((created, hello))
    }

    /// The image's Chromium, which a browser (or a desktop told it has one)
    /// runs: refused, naming where it was looked for, when there is none.
    async fn find_chromium(
        &self,
        conn: &Connection,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> StepResult<()> {
        let step = "looking for the image's Chromium";
        let found = tokio::select! {
            r = tokio::time::timeout(hello::HELLO_WAIT, crate::cdp::chromium::find_in_computer(&conn.client)) => r,
            _ = cancel.cancelled() => {
                conn.client.close();
                return Err((step, aborted(step)));
            }
        };
        let found = found.map_err(|_| {
            conn.client.close();
            (
                step,
                ProviderError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the computer's daemon did not answer files.stat within {} s",
                        hello::HELLO_WAIT.as_secs()
                    ),
                ),
            )
        })?;
        if found.is_some() {
            return Ok(());
        }
        conn.client.close();
        Err((
            step,
            ProviderError::refused(format!(
                "the image {} has no Chromium (none at {}), and {} runs the image's own: use an image with Debian's package chromium (fixtures/images/build.sh makes computer-mcp-test/desktop:bookworm)",
                plan.image,
                crate::cdp::chromium::CHROMIUM_PATHS.join(", "),
                if self.opts.browser {
                    "a browser"
                } else {
                    "a desktop told it has one (--docker-desktop-browser)"
                }
            ))
            .with_field("image"),
        ))
    }

    /// Connect until init answers, within [`START_WAIT`].
    async fn wait_until_up(
        &self,
        docker: &Docker,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let mut starting = Starting {
            provider: self,
            docker,
            plan,
            tried: false,
        };
        up::wait_until_up(&mut starting, cancel).await
    }
}

/// What a new computer's notes say: its isolation, limits and scratch
/// places, its window manager, an allowlist's proxy, and its shares.
fn notes(plan: &Plan, host: &Host, v: &Value, window_manager: Option<String>) -> Vec<String> {
    let mut notes = vec![
        format!(
            "isolation: a Docker container (engine {}) as {} with no capability, no-new-privileges and Docker's seccomp profile; private IPC and cgroup namespaces; /work (HOME) is a {} MiB tmpfs",
            host.engine,
            plan.user_string(),
            plan.work_size_mib()
        ),
        format!("limits: {} (read back from docker inspect)", plan.limits),
        plan.disk_note(v["HostConfig"]["ShmSize"].as_i64()),
    ];
    notes.extend(window_manager);
    if plan.egress.is_some() {
        notes.push(format!(
            "egress: its one way out is the proxy container {} (Docker's default bridge, no published port, read-only root, no capability, 0.5 CPU, 256 MiB, 64 pids), its socket in the volume {} mounted read-only at {}",
            egress::name_of(&plan.name),
            egress::name_of(&plan.name),
            egress::MOUNT
        ));
    }
    notes.extend(plan.shares.iter().map(share_note));
    notes
}

/// A failed create's words: the step, what went wrong, and what became of
/// the container (and an allowlist's proxy and volume).
fn failed_at(plan: &Plan, step: &str, e: ProviderError, removed: Result<()>) -> ProviderError {
    let name = &plan.name;
    let proxy = plan.egress.is_some();
    let after = match removed {
        // It may never have been made: nothing by its name is left.
        Ok(()) if step == MAKING => format!(
            "no container {name} is left{}",
            if proxy {
                ", and its egress proxy and volume were deleted"
            } else {
                ""
            }
        ),
        Ok(()) => format!(
            "the container {name} was deleted{}",
            if proxy {
                " with its egress proxy and volume"
            } else {
                ""
            }
        ),
        Err(r) => format!(
            "the container {name} could not be deleted ({}); `computer-mcp sweep` deletes it after its deadline, or docker rm -f {name}",
            r.message
        ),
    };
    ProviderError {
        message: format!(
            "creating the Docker computer failed at {step}: {}; {after}",
            e.message
        ),
        ..e
    }
}

fn new_name() -> Result<String> {
    Ok(format!("computer-{}", &crate::random::random_hex(6)?))
}

pub(super) use computerd::now_ms;

pub(super) fn deadline_ms(t: &Time) -> i64 {
    (t.get().unix_timestamp_nanos() / 1_000_000) as i64
}

/// The last lines a container's daemon wrote (stdout and stderr).
async fn daemon_words(docker: &Docker, name: &str) -> String {
    use futures::StreamExt;
    let opts = bollard::query_parameters::LogsOptionsBuilder::new()
        .stdout(true)
        .stderr(true)
        .tail("3")
        .build();
    let chunks: Vec<String> = docker
        .logs(name, Some(opts))
        .take_while(|c| std::future::ready(c.is_ok()))
        .filter_map(|c| async move { c.ok() })
        .map(|c| String::from_utf8_lossy(&c.into_bytes()).into_owned())
        .collect()
        .await;
    last_words(&chunks, 3, "nothing")
}

/// A Docker computer being started: its container, reached as every
/// connection reaches it.
struct Starting<'a> {
    provider: &'a DockerProvider,
    docker: &'a Docker,
    plan: &'a Plan,
    /// Whether a first try was made (before it, ended is not asked).
    tried: bool,
}

#[async_trait::async_trait]
impl up::Starting for Starting<'_> {
    const WITHIN: Duration = START_WAIT;
    const EVERY: Duration = Duration::from_millis(20);

    async fn ended(&mut self) -> Result<Option<ProviderError>> {
        // The first try goes straight to the daemon: an exec into a
        // container that is not running fails at once (409), and the next
        // round reads why.
        if !std::mem::replace(&mut self.tried, true) {
            return Ok(None);
        }
        let name = self.plan.name.as_str();
        let state = self
            .docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
            .map_err(self.provider.err("inspecting the new computer"))?;
        let st = state.state.unwrap_or_default();
        if st.running == Some(true) {
            return Ok(None);
        }
        // Read now: the container and its logs go with the failed create.
        Ok(Some(ProviderError::refused(format!(
            "the computer stopped as it started (exit code {}); its daemon said: {}",
            st.exit_code.unwrap_or(-1),
            daemon_words(self.docker, name).await
        ))))
    }

    async fn attempt(&mut self) -> up::Try {
        let opened = stream::open(
            self.docker,
            &self.provider.shown_socket(),
            &self.plan.name,
            self.plan.direct.as_deref(),
        )
        .await;
        match opened {
            Ok((client, _)) => match hello::call(client).await {
                Ok(c) => up::Try::Up(c),
                Err(e) => up::Try::NotYet(e),
            },
            Err(e) => up::Try::NotYet(e),
        }
    }

    fn late(&self, last: ProviderError) -> ProviderError {
        ProviderError::new(
            ErrorCode::Timeout,
            format!(
                "the computer's daemon did not answer within {} s: {}",
                START_WAIT.as_secs(),
                last.message
            ),
        )
    }
}
