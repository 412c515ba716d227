//! [`Provider`] for [`ModalProvider`]: the checks before any request and
//! each call of the trait.

use super::*;

impl ModalProvider {
    /// The spec's network as Modal's, refused in words where Modal or
    /// this provider cannot honour it.
    fn network_access(network: &NetworkPolicy) -> Result<NetworkAccess> {
        match network {
            NetworkPolicy::None => Ok(NetworkAccess {
                network_access_type: NetworkAccessType::Blocked as i32,
                allowed_cidrs: Vec::new(),
                allowed_domains: Vec::new(),
            }),
            NetworkPolicy::Open => Err(ProviderError::unsupported(
                "a Modal computer's network is none: open waits for a proxy out of the daemon's own network",
            )
            .with_field("network")),
            _ => Err(ProviderError::unsupported(
                "a Modal computer's network is none: Modal's allowlist (CIDRs, or domains by TLS SNI) cannot be read back, and the daemon's programs have a network of their own",
            )
            .with_field("network")),
        }
    }
}

#[async_trait::async_trait]
impl Provider for ModalProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        child::capabilities(
            MachineKind::Linux,
            GROUPS.to_vec(),
            self.max_lifetime_ms,
            true,
            "container: a Modal sandbox (gVisor or Modal's VM runtime); the daemon's programs as 2510:2510 in a network namespace of their own, cut off from Modal's agent",
            false,
        )
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        crate::daemon_backed::check_kind(
            "the Modal provider",
            spec.kind,
            SettingKind::Sandbox,
            None,
        )?;
        check_lifetime(spec.lifetime_ms, &self.capabilities())?;
        Self::network_access(&spec.network)?;
        let mut hostless = spec.clone();
        hostless.sizes = Sizes::default();
        refuse_host_parts(&hostless, "a Modal computer")?;
        resources(&spec.sizes)?;
        check_labels(&spec.labels)?;
        if spec.labels.len() >= MAX_TAGS {
            return Err(ProviderError::invalid(
                "labels",
                format!(
                    "{} labels; Modal takes at most {MAX_TAGS} tags a sandbox and the provider keeps one, so at most {}",
                    spec.labels.len(),
                    MAX_TAGS - 1
                ),
            ));
        }
        for k in [label::COMPUTER, CREATE_LABEL] {
            if spec.labels.contains_key(k) {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the Modal provider's own"),
                ));
            }
        }
        if let Some(i) = &spec.image {
            check_image(i, "image")?;
        }
        Ok(())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        let image = spec.image.clone().unwrap_or_else(|| self.image.clone());
        let app = self.app_id().await?;
        let image_id = self.image_of(&app, spec).await?;
        let forked = spec.from.as_ref().is_some_and(|s| s.native.is_some());
        let mark = crate::random::random_hex(16)?;
        let mut tags = spec.labels.clone();
        tags.insert(label::COMPUTER.into(), mark.clone());
        let timeout_secs = spec.lifetime_ms.div_ceil(1000);
        // Init's deadline is never past Modal's end: taken before the ask.
        let deadline = OffsetDateTime::now_utc() + Duration::from_millis(spec.lifetime_ms);
        let ask = proto::SandboxCreateRequest {
            app_id: app,
            definition: Some(proto::Sandbox {
                entrypoint_args: ENTRYPOINT.iter().map(|s| s.to_string()).collect(),
                image_id,
                resources: resources(&spec.sizes)?,
                timeout_secs: timeout_secs.min(u64::from(u32::MAX)) as u32,
                workdir: None,
                block_network: true,
                network_access: Some(Self::network_access(&spec.network)?),
                runtime: None,
            }),
            tags: tags_of(&tags),
        };
        let id = match self.control.create(ask).await {
            Ok(id) => id,
            Err(Failure::Refused(e)) => return Err(e),
            Err(Failure::Unknown(e)) => {
                return Err(crate::daemon_backed::labels::recover(self, &mark, e).await);
            }
        };
        match self
            .set_up(&id, &mark, Time::new(deadline), forked, cancel)
            .await
        {
            Ok((s, conn, inside)) => {
                conn.client.close();
                Ok(Created {
                    computer: self.to_ref(&s),
                    network: Some(Self::none_read_back(Some(&inside))),
                    notes: vec![format!(
                        "Modal image {image} in app {}; ends at {} (Modal's timeout and init's deadline)",
                        self.app,
                        rfc3339_s(s.created_at + f64::from(s.timeout_secs))
                    )],
                })
            }
            Err(e) => {
                let ended = self
                    .terminate_and_wait(&id, &CancellationToken::new())
                    .await;
                Err(set_up_failed(e, "terminated", ended))
            }
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                let c = self
                    .find(id)
                    .await?
                    .map(|s| self.to_ref(&s))
                    .ok_or_else(|| {
                        ProviderError::not_found(format!(
                            "no running Modal sandbox {id} of computer-mcp"
                        ))
                    })?;
                probe::at_attach(self, c, "Modal", cancel).await
            }
            AttachBy::Labels(labels) => {
                let found = self.list(labels, cancel).await?;
                let c = crate::daemon_backed::labels::the_one_of(found, "Modal")?;
                probe::at_attach(self, c, "Modal", cancel).await
            }
        }
    }

    async fn list(&self, labels: &Labels, _cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let found = self.running(labels).await?;
        Ok(found
            .iter()
            .filter(|s| crate::daemon_backed::labels::carries(labels, |k| tag(s, k)))
            .map(|s| self.to_ref(s))
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        _cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        crate::daemon_backed::network::refuse_other_than_none(policy, "a Modal computer")?;
        self.find(&computer.id).await?.ok_or_else(|| {
            ProviderError::gone(format!("Modal sandbox {} has ended", computer.id))
        })?;
        Ok(Self::none_read_back(None))
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        _cancel: &CancellationToken,
    ) -> Result<Connection> {
        self.find(&computer.id).await?.ok_or_else(|| {
            ProviderError::gone(format!("Modal sandbox {} has ended", computer.id))
        })?;
        let host = ModalHost {
            router: self.router(&computer.id).await?,
        };
        self.checked(child::connect(&host).await?)
    }

    async fn release(
        &self,
        computer: &ComputerRef,
        how: Release,
        cancel: &CancellationToken,
    ) -> Result<()> {
        crate::daemon_backed::release_deleted(
            how,
            "a Modal computer is only deleted: Modal has no stopped sandbox",
            async { Ok(self.find(&computer.id).await?.is_some()) },
            || {
                self.routers().remove(&computer.id);
            },
            self.terminate_and_wait(&computer.id, cancel),
        )
        .await
    }

    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        self.snapshots.as_ref()
    }

    /// Modal's filesystem snapshot, an image ([`snapshots`]).
    async fn snapshot(
        &self,
        computer: &ComputerRef,
        labels: &Labels,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<crate::snapshot::Snapshot> {
        crate::daemon_backed::native::take(self, computer, labels, ttl_ms, cancel).await
    }

    async fn restore(
        &self,
        snapshot: &crate::snapshot::Snapshot,
        into: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<()> {
        crate::daemon_backed::native::restore(self, snapshot, into, cancel).await
    }

    async fn release_snapshot(
        &self,
        snapshot: &crate::snapshot::Snapshot,
        cancel: &CancellationToken,
    ) -> Result<()> {
        crate::daemon_backed::native::release(self, snapshot, cancel).await
    }

    /// Modal ends a sandbox at its own timeout, so only the snapshots
    /// past their deadline are left to delete: Modal's images, then the
    /// archives kept here.
    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let native = self.sweep_native(cancel).await;
        let rest = crate::snapshot::sweep_of(self);
        let mut gone = native?;
        gone.extend(rest?);
        Ok(gone)
    }

    async fn test_connection(&self, _cancel: &CancellationToken) -> Option<Preflight> {
        let found = async {
            let Some(app) = self.control.app_lookup(&self.app).await? else {
                return Ok(format!(
                    "reached; the app {} is not made yet (the first computer makes it)",
                    self.app
                ));
            };
            let n = self
                .control
                .list(&app, &[])
                .await?
                .iter()
                .filter(|s| tag(s, label::COMPUTER).is_some())
                .count();
            Ok::<_, ProviderError>(format!(
                "reached; {} in the app {}",
                crate::vendor::count(n, "sandbox of computer-mcp", "sandboxes of computer-mcp"),
                self.app
            ))
        }
        .await;
        Some(crate::vendor::preflight(
            "Modal",
            found,
            "give a valid token pair: --modal-token-id and --modal-token-secret (COMPUTER_MCP_MODAL_TOKEN_ID, COMPUTER_MCP_MODAL_TOKEN_SECRET)",
            "--modal-server-url",
        ))
    }
}
