//! A computer's egress parts over their life: the proxy's plan, making
//! and starting it, stopping it with its computer, removing it and its
//! volume, and sweeping those whose computer is gone or past its deadline.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use bollard::query_parameters::{
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, StopContainerOptionsBuilder,
};
use computerd::launch::Time;

use super::{EgressPlan, LABEL, LEFTOVER_AFTER, LIST_LABEL, READY_LINE, READY_WAIT, name_of};
use crate::types::{Labels, ProviderError, Result, label};

impl crate::docker::DockerProvider {
    /// The proxy a computer's plan asks for.
    pub(in crate::docker) fn egress_plan(
        &self,
        computer: &crate::docker::Plan,
        host_addresses: Vec<IpAddr>,
    ) -> Option<EgressPlan> {
        let allow = computer.egress.clone()?;
        let spec: Labels = computer
            .labels
            .iter()
            .filter(|(k, _)| {
                ![label::COMPUTER, label::DEADLINE, LIST_LABEL, LABEL].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(EgressPlan {
            computer: computer.name.clone(),
            image: computer.image.clone(),
            gid: computer.user.1,
            allow,
            deadline: computer.deadline,
            host_addresses,
            resolvers: self.opts.egress_resolvers.clone(),
            daemon: computer.daemon.clone(),
            labels: EgressPlan::labels_for(&computer.name, &computer.deadline, &spec),
        })
    }

    /// Make the socket volume and the proxy, and wait for its ready line;
    /// the caller removes the parts on an error.
    pub(in crate::docker) async fn start_egress(
        &self,
        docker: &bollard::Docker,
        plan: &EgressPlan,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<()> {
        use bollard::query_parameters::{CreateContainerOptionsBuilder, StartContainerOptions};
        let name = plan.name();
        docker
            .create_volume(plan.volume())
            .await
            .map_err(self.err("making the egress proxy's socket volume"))?;
        docker
            .create_container(
                Some(CreateContainerOptionsBuilder::new().name(&name).build()),
                plan.body(),
            )
            .await
            .map_err(self.err("making the egress proxy's container"))?;
        docker
            .start_container(&name, None::<StartContainerOptions>)
            .await
            .map_err(self.err("starting the egress proxy"))?;
        let until = tokio::time::Instant::now() + READY_WAIT;
        loop {
            if cancel.is_cancelled() {
                return Err(crate::docker::aborted("starting the egress proxy"));
            }
            let said = self.proxy_log(docker, &name).await;
            if said.contains(READY_LINE) {
                return Ok(());
            }
            let state = docker
                .inspect_container(
                    &name,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .map_err(self.err("inspecting the egress proxy"))?
                .state
                .unwrap_or_default();
            if state.running != Some(true) {
                return Err(ProviderError::refused(format!(
                    "the egress proxy stopped as it started (exit code {}): {}",
                    state.exit_code.unwrap_or(-1),
                    last_words(&said)
                )));
            }
            if tokio::time::Instant::now() >= until {
                return Err(ProviderError::new(
                    crate::types::ErrorCode::Timeout,
                    format!(
                        "the egress proxy did not say it was ready within {} s: {}",
                        READY_WAIT.as_secs(),
                        last_words(&said)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the proxy has logged (its decisions hold no path or header).
    async fn proxy_log(&self, docker: &bollard::Docker, name: &str) -> String {
        use futures::StreamExt;
        let opts = bollard::query_parameters::LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .tail("50")
            .build();
        let mut out = String::new();
        let mut logs = docker.logs(name, Some(opts));
        while let Some(Ok(chunk)) = logs.next().await {
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        out
    }

    /// Stop a computer's proxy (a stopped computer keeps its parts until
    /// it is deleted).
    pub(in crate::docker) async fn stop_egress(
        &self,
        docker: &bollard::Docker,
        computer: &str,
    ) -> Result<()> {
        let (containers, _) = self.removal(docker).parts(computer).await?;
        for c in containers {
            let opts = StopContainerOptionsBuilder::new().t(2).build();
            match gone_is_fine(docker.stop_container(&c, Some(opts)).await) {
                // 304: stopped already.
                Ok(())
                | Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304, ..
                }) => {}
                Err(e) => return Err(self.err("stopping the egress proxy")(e)),
            }
        }
        Ok(())
    }

    /// Parts with no computer of their own, or past their deadline: a
    /// proxy or volume whose deadline label has passed (or is none a
    /// computer carries), or whose computer is gone and that is older than
    /// a create could take. Returns what it removed.
    pub(in crate::docker) async fn sweep_egress(
        &self,
        now_ms: i64,
        limit_ms: i64,
    ) -> Result<Vec<String>> {
        let docker = self.engine()?;
        let removal = self.removal(&docker);
        let (containers, volumes) = removal.labelled(LABEL.to_string()).await?;
        let mut parts: Vec<(String, Labels, i64)> = Vec::new();
        for c in containers {
            let labels: Labels = c.labels.unwrap_or_default().into_iter().collect();
            parts.push((
                c.id.unwrap_or_default(),
                labels,
                c.created.unwrap_or(0) * 1000,
            ));
        }
        for v in volumes {
            let created = v
                .created_at
                .as_deref()
                .and_then(|t| {
                    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
                .unwrap_or(0);
            parts.push((v.name, v.labels.into_iter().collect(), created));
        }
        let mut computers: Vec<String> = Vec::new();
        let mut removed = Vec::new();
        for (_, labels, created) in &parts {
            let Some(computer) = labels.get(LABEL) else {
                continue;
            };
            if computers.contains(computer) {
                continue;
            }
            let deadline = labels
                .get(label::DEADLINE)
                .and_then(|d| d.parse::<Time>().ok())
                .map(|t| crate::docker::deadline_ms(&t));
            let expired = deadline.is_none_or(|d| d <= now_ms || d > limit_ms);
            let orphan = now_ms.saturating_sub(*created) > LEFTOVER_AFTER.as_millis() as i64
                && crate::docker::plan::is_computer_name(computer)
                && match docker
                    .inspect_container(
                        computer,
                        None::<bollard::query_parameters::InspectContainerOptions>,
                    )
                    .await
                {
                    Err(e) => crate::docker::host::is_not_found(&e),
                    Ok(_) => false,
                };
            if orphan || expired {
                computers.push(computer.clone());
                removal.egress(computer).await?;
                removed.push(name_of(computer));
            }
        }
        Ok(removed)
    }
}

impl crate::docker::removal::Removal {
    /// The proxy containers and volumes carrying `label` (`k` or `k=v`),
    /// stopped ones included.
    pub(in crate::docker) async fn labelled(
        &self,
        label: String,
    ) -> Result<(
        Vec<bollard::models::ContainerSummary>,
        Vec<bollard::models::Volume>,
    )> {
        let docker = &self.docker;
        let filter = HashMap::from([("label", vec![label])]);
        let containers = docker
            .list_containers(Some(
                bollard::query_parameters::ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&filter)
                    .build(),
            ))
            .await
            .map_err(self.err("listing egress proxies"))?;
        let volumes = docker
            .list_volumes(Some(
                bollard::query_parameters::ListVolumesOptionsBuilder::new()
                    .filters(&filter)
                    .build(),
            ))
            .await
            .map_err(self.err("listing egress volumes"))?
            .volumes
            .unwrap_or_default();
        Ok((containers, volumes))
    }

    /// The ids of `computer`'s proxy containers and the names of its
    /// volumes, found by [`LABEL`], never by name alone.
    pub(in crate::docker) async fn parts(
        &self,
        computer: &str,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let (containers, volumes) = self.labelled(format!("{LABEL}={computer}")).await?;
        Ok((
            containers.into_iter().filter_map(|c| c.id).collect(),
            volumes.into_iter().map(|v| v.name).collect(),
        ))
    }

    /// Remove a computer's proxy and its volume (after the computer). Gone
    /// is fine.
    pub(in crate::docker) async fn egress(&self, computer: &str) -> Result<()> {
        let docker = &self.docker;
        let (containers, volumes) = self.parts(computer).await?;
        for c in containers {
            let opts = RemoveContainerOptionsBuilder::new()
                .force(true)
                .v(true)
                .build();
            gone_is_fine(docker.remove_container(&c, Some(opts)).await)
                .map_err(self.err("removing the egress proxy"))?;
        }
        for v in volumes {
            let opts = RemoveVolumeOptionsBuilder::new().force(true).build();
            gone_is_fine(docker.remove_volume(&v, Some(opts)).await)
                .map_err(self.err("removing the egress proxy's volume"))?;
        }
        Ok(())
    }
}

/// An engine call on a part, where the part being gone already is fine.
fn gone_is_fine(
    r: std::result::Result<(), bollard::errors::Error>,
) -> std::result::Result<(), bollard::errors::Error> {
    match r {
        Err(e) if crate::docker::host::is_not_found(&e) => Ok(()),
        r => r,
    }
}

fn last_words(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    crate::daemon_backed::last_words(&lines, 3, "it said nothing")
}
