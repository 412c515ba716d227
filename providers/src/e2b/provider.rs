//! [`Provider`] for [`E2bProvider`]: the checks before any request and
//! each call of the trait.

use super::*;

#[async_trait::async_trait]
impl Provider for E2bProvider {
    fn id(&self) -> &'static str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        child::capabilities(
            self.made.kind(),
            self.made.groups(),
            self.max_lifetime_ms,
            true,
            "microvm: an E2B sandbox (Firecracker); the daemon's programs as 2510:2510 in a network namespace of their own, cut off from envd",
            true,
        )
    }

    fn check(&self, spec: &ComputerSpec) -> Result<()> {
        crate::daemon_backed::check_kind(
            "the E2B provider",
            spec.kind,
            self.made.setting(),
            (spec.kind == SettingKind::Desktop)
                .then_some("an E2B template with X (--e2b-desktop-template)"),
        )?;
        check_lifetime(spec.lifetime_ms, &self.capabilities())?;
        if spec.max_lifetime_ms.unwrap_or(0) > self.max_lifetime_ms {
            return Err(ProviderError::invalid(
                "lifetime",
                format!(
                    "the server's lifetime bound {} is over E2B's most here, {} (--e2b-max-lifetime-ms, up to 24 h on Pro)",
                    human_ms(spec.max_lifetime_ms.unwrap_or(0)),
                    human_ms(self.max_lifetime_ms)
                ),
            ));
        }
        if spec.network != NetworkPolicy::None {
            return Err(ProviderError::unsupported(format!(
                "an E2B computer's network is none: {} waits for a proxy out of the daemon's own network",
                match spec.network {
                    NetworkPolicy::Open => "open",
                    _ => "an allowlist",
                }
            ))
            .with_field("network"));
        }
        refuse_host_parts(spec, "an E2B computer")?;
        check_labels(&spec.labels)?;
        for k in [
            CREATE_LABEL,
            MAX_LIFETIME_LABEL,
            label::COMPUTER,
            snapshots::FROM_LABEL,
        ] {
            if spec.labels.contains_key(k) {
                return Err(ProviderError::invalid(
                    "labels",
                    format!("the label {k} is the E2B provider's own"),
                ));
            }
        }
        if spec.image.as_deref().is_some_and(|i| i != self.template) {
            return Err(ProviderError::invalid(
                "image",
                format!(
                    "an E2B computer's image is the template {} (--e2b-{})",
                    self.template,
                    if self.made.screen.is_some() {
                        "desktop-template"
                    } else {
                        "template"
                    }
                ),
            ));
        }
        Ok(())
    }

    async fn create(&self, spec: &ComputerSpec, cancel: &CancellationToken) -> Result<Created> {
        self.check(spec)?;
        let mark = crate::random::random_hex(16)?;
        let max_ms = spec
            .max_lifetime_ms
            .unwrap_or(spec.lifetime_ms)
            .max(spec.lifetime_ms);
        let mut metadata = spec.labels.clone();
        metadata.insert(label::COMPUTER.into(), "1".into());
        metadata.insert(CREATE_LABEL.into(), mark.clone());
        metadata.insert(MAX_LIFETIME_LABEL.into(), max_ms.to_string());
        let forked = spec.from.as_ref().filter(|s| s.native.is_some());
        if let Some(s) = forked {
            metadata.insert(snapshots::FROM_LABEL.into(), s.id.clone());
        }
        let template = self.template_of(spec);
        let timeout_s = spec.lifetime_ms.div_ceil(1000);
        let ask = Ask {
            template,
            timeout_s,
            metadata: &metadata,
        };
        let made = match self.control.create(&ask, cancel).await {
            Ok(m) => m,
            Err(Failure::Refused(e)) => return Err(e),
            Err(Failure::Unknown(e)) => {
                return Err(crate::daemon_backed::labels::recover(self, &mark, e).await);
            }
        };
        self.lock().insert(
            made.id.clone(),
            Reach {
                domain: made.domain.clone(),
                token: made.token.clone(),
            },
        );
        match self
            .set_up(&made.id, &mark, max_ms, forked.is_some(), cancel)
            .await
        {
            Ok((s, conn, inside)) => {
                conn.client.close();
                let mut network = Self::network_of(&s)?;
                network.detail = format!("{}; {inside}", network.detail);
                Ok(Created {
                    computer: self.to_ref(&s),
                    network: Some(network),
                    notes: vec![format!(
                        "E2B template {template}; ends at {} (E2B's timer and init's deadline)",
                        s.end_at
                    )],
                })
            }
            Err(e) => {
                let killed = self
                    .kill_and_wait(&made.id, &CancellationToken::new())
                    .await;
                Err(set_up_failed(e, "killed", killed))
            }
        }
    }

    async fn attach(&self, by: &AttachBy, cancel: &CancellationToken) -> Result<ComputerRef> {
        match by {
            AttachBy::Id(id) => {
                let c = self
                    .ours(id, cancel)
                    .await?
                    .map(|s| self.to_ref(&s))
                    .ok_or_else(|| ProviderError::not_found(format!("no E2B sandbox {id}")))?;
                probe::at_attach(self, c, "E2B", cancel).await
            }
            AttachBy::Labels(labels) => {
                let found = self.list(labels, cancel).await?;
                let c = crate::daemon_backed::labels::the_one_of(found, "E2B")?;
                probe::at_attach(self, c, "E2B", cancel).await
            }
        }
    }

    async fn list(&self, labels: &Labels, cancel: &CancellationToken) -> Result<Vec<ComputerRef>> {
        let mut want = labels.clone();
        want.insert(label::COMPUTER.into(), "1".into());
        let found = self.control.list(&want, cancel).await?;
        Ok(found
            .iter()
            .filter(|s| {
                crate::daemon_backed::labels::carries(&want, |k| {
                    s.metadata.get(k).map(String::as_str)
                })
            })
            .map(|s| self.to_ref(s))
            .collect())
    }

    async fn network(
        &self,
        computer: &ComputerRef,
        policy: Option<&NetworkPolicy>,
        cancel: &CancellationToken,
    ) -> Result<NetworkReadBack> {
        crate::daemon_backed::network::refuse_other_than_none(policy, "an E2B computer")?;
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        Self::network_of(&s)
    }

    async fn connect(
        &self,
        computer: &ComputerRef,
        cancel: &CancellationToken,
    ) -> Result<Connection> {
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        if s.state == "paused" {
            return Err(ProviderError::refused(format!(
                "E2B sandbox {} is paused: resume it first (computer_resume)",
                s.id
            )));
        }
        if s.state != "running" {
            return Err(ProviderError::gone(format!(
                "E2B sandbox {} is {}, and connecting would resume it",
                s.id, s.state
            )));
        }
        let reach = self.reach_of(&s.id, cancel).await?;
        let host = self.host(&s.id, &reach)?;
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
            "an E2B computer is only deleted: E2B's pause would keep it",
            async {
                Ok(self
                    .ours(&computer.id, &CancellationToken::new())
                    .await?
                    .is_some())
            },
            || {
                self.lock().remove(&computer.id);
            },
            self.kill_and_wait(&computer.id, cancel),
        )
        .await
    }

    async fn extend(
        &self,
        computer: &ComputerRef,
        ttl_ms: u64,
        cancel: &CancellationToken,
    ) -> Result<String> {
        let _one = self.extending.lock().await;
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        let started = parse_time(&s.started_at).ok_or_else(|| {
            ProviderError::failed("E2B's read sandbox call answered with no startedAt")
        })?;
        let max_ms: u64 = s
            .metadata
            .get(MAX_LIFETIME_LABEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.max_lifetime_ms)
            .min(self.max_lifetime_ms);
        let cap = started + Duration::from_millis(max_ms);
        let now = OffsetDateTime::now_utc();
        let want = now + Duration::from_millis(ttl_ms);
        if want > cap {
            return Err(ProviderError::new(
                ErrorCode::Limit,
                format!(
                    "that is past the most this computer may live, {} from its start (until {})",
                    human_ms(max_ms),
                    rfc3339(cap)
                ),
            )
            .with_field("ttl"));
        }
        let end = parse_time(&s.end_at).unwrap_or(now);
        if want < end {
            return Err(ProviderError::invalid(
                "ttl",
                format!(
                    "that would end the computer before its end {}; an extend never shortens a life",
                    s.end_at
                ),
            ));
        }
        // Whole seconds, rounded down, so E2B's end never passes the cap.
        let secs = (want - now).whole_seconds().max(1) as u64;
        self.control.set_timeout(&s.id, secs, cancel).await?;
        let moved = self
            .ours(&s.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        let (end, _) = Self::deadlines(&moved, max_ms)?;
        let conn = self.connect(computer, cancel).await?;
        let at = rfc3339(end.get());
        let r = computerd::client::ComputerExt::call_typed(
            &conn.client,
            &computerd::protocol::DeadlineExtendParams { at },
        )
        .await;
        conn.client.close();
        r.map(|_| moved.end_at.clone()).map_err(|e| {
            ProviderError::refused(format!(
                "E2B's timer moved, but the daemon refused the new deadline (its programs end at the old one): {e}"
            ))
        })
    }

    fn can_pause(&self) -> bool {
        true
    }

    /// E2B's pause: the sandbox's files and memory kept, nothing running,
    /// its envd answering nothing until resumed.
    async fn pause(&self, computer: &ComputerRef, cancel: &CancellationToken) -> Result<()> {
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        if s.state == "paused" {
            return Ok(());
        }
        self.control.pause(&s.id, cancel).await
    }

    /// E2B's resume (its connect) with the timer at the computer's own
    /// deadline, which ran on while it was paused; one whose deadline
    /// passed meanwhile is ended instead, and reads as gone.
    async fn resume(&self, computer: &ComputerRef, cancel: &CancellationToken) -> Result<()> {
        let s = self
            .ours(&computer.id, cancel)
            .await?
            .ok_or_else(|| ProviderError::gone(format!("E2B sandbox {} is gone", computer.id)))?;
        if s.state != "paused" {
            return Ok(());
        }
        let now = OffsetDateTime::now_utc();
        let end = parse_time(&s.end_at).unwrap_or(now);
        let left = (end - now).whole_seconds();
        if left < 1 {
            let _ = self.kill_and_wait(&s.id, cancel).await;
            return Err(ProviderError::gone(format!(
                "E2B sandbox {} passed its deadline ({}) while paused, so it was ended, not resumed",
                s.id, s.end_at
            )));
        }
        // Whole seconds, rounded down: the timer never passes the deadline.
        self.control.connect(&s.id, left as u64, cancel).await
    }

    fn snapshot_store(&self) -> Option<&crate::snapshot::SnapshotStore> {
        self.snapshots.as_ref()
    }

    /// E2B's own snapshot, files and memory ([`snapshots`]).
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

    async fn sweep(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        // Both run, whatever the other met.
        let native = self.sweep_native(cancel).await;
        let rest = crate::daemon_backed::sweep::sweep(self, cancel).await;
        let mut gone = native?;
        gone.extend(rest?);
        Ok(gone)
    }

    async fn test_connection(&self, cancel: &CancellationToken) -> Option<Preflight> {
        let labels: Labels = [(label::COMPUTER.to_string(), "1".to_string())].into();
        let found = self.control.list(&labels, cancel).await.map(|l| {
            format!(
                "reached; {} of computer-mcp",
                crate::vendor::count(l.len(), "sandbox", "sandboxes")
            )
        });
        Some(crate::vendor::account_preflight("E2B", ID, found))
    }
}
