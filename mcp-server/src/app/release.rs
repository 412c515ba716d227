//! Ending computers: a release in two steps (retired at once, so it counts
//! against no bound; then the provider's part), the idle reaper, the
//! lifetime bound on extend, and shutdown.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use computer_providers::{ComputerRef, Labels, Release, label};
use computer_tools::{Extended, Receipt};

use crate::receipts::journal::Line;
use tokio_util::sync::CancellationToken;

use super::App;
use super::Entry;
use crate::session::words;

/// How far short of the lifetime bound a cut extend stops, in ms.
const EXTEND_MARGIN_MS: i128 = 1000;

/// How long a receipt waits for the provider's figures.
const USED_WAIT: Duration = Duration::from_secs(5);

/// The most a copy-back of shares at release may take.
const COPY_BACK_WAIT: Duration = Duration::from_secs(300);
impl App {
    /// End an entry now: closed, out of the table, released at the provider
    /// (unless the server keeps computers and `keep_ok`), logged with `why`.
    pub async fn end_entry(&self, entry: &Arc<Entry>, why: &str) {
        self.end_entry_as(entry, why, false).await;
    }

    async fn end_entry_as(&self, entry: &Arc<Entry>, why: &str, keep: bool) {
        if self.retire(entry, why, keep) {
            self.release_retired(entry, why).await;
        }
    }

    /// The first step of a release, at once: the entry is marked released,
    /// out of the table, and (unless kept) in the set of computers being
    /// released, so from now on it counts against no bound even while the
    /// provider still lists it. True when the provider release is still to
    /// do ([`App::release_retired`]); false when it was retired already or
    /// is kept.
    pub(crate) fn retire(&self, entry: &Arc<Entry>, why: &str, keep: bool) -> bool {
        {
            let mut r = entry.released.lock().unwrap_or_else(|p| p.into_inner());
            if r.is_some() {
                return false;
            }
            *r = Some(why.to_string());
        }
        if !keep {
            self.releasing().insert(entry.handle.clone());
        }
        self.entries().remove(&entry.handle);
        self.released.lock().unwrap_or_else(|p| p.into_inner()).add(
            &entry.handle,
            &entry.principal,
            why,
        );
        entry.ports.shut();
        entry.client.close();
        if keep {
            tracing::info!(
                computer = entry.log_name(),
                reason = why,
                "computer kept until its deadline"
            );
        }
        !keep
    }

    fn releasing(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.releasing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the provider lists under `labels` that is a computer of its
    /// own: running, and neither being released here nor still being made
    /// (counted as pending, and not yet to be attached). The set being
    /// released is read before the listing as well as after: a release
    /// that ends while the provider answers leaves that set, yet the
    /// listing may still name its computer.
    pub(super) async fn listed(
        &self,
        labels: &Labels,
        what: &str,
    ) -> Result<Vec<ComputerRef>, String> {
        self.listed_as(labels, what, false).await
    }

    /// [`App::listed`]; `brief`: only what a count needs (the provider's
    /// [`computer_providers::Provider::list_brief`]: no sizes, network or
    /// pause read back per computer).
    pub(super) async fn listed_as(
        &self,
        labels: &Labels,
        what: &str,
        brief: bool,
    ) -> Result<Vec<ComputerRef>, String> {
        let before = self.releasing().clone();
        let cancel = CancellationToken::new();
        let listing = if brief {
            self.provider.list_brief(labels, &cancel).await
        } else {
            self.provider.list(labels, &cancel).await
        };
        let mut found = listing.map_err(|e| words(&e, what))?;
        let releasing = self.releasing();
        let pending = self.pending.lock().unwrap_or_else(|x| x.into_inner());
        found.retain(|r| {
            r.running
                && r.labels.get(label::HANDLE).is_none_or(|h| {
                    !before.contains(h) && !releasing.contains(h) && !pending.handles.contains(h)
                })
        });
        Ok(found)
    }

    /// The provider's part of a release of a retired entry (bounded in
    /// time); the computer leaves the set of those being released whatever
    /// the outcome, so one the provider failed to end counts again.
    pub(crate) async fn release_retired(&self, entry: &Arc<Entry>, why: &str) {
        let back = self.copy_back(entry).await;
        self.release_copied(entry, why, back).await;
    }

    /// [`App::release_retired`] once its shares' copy-back is done
    /// (`back`, as [`App::copy_back`] said): refused, the computer is
    /// kept until its deadline for `cp --sync`.
    pub(crate) async fn release_copied(
        &self,
        entry: &Arc<Entry>,
        why: &str,
        back: Result<Vec<String>, String>,
    ) {
        // Read while there is still something to read it from.
        let counted = self.counted(entry).await;
        self.book.write(&[self.journal_line(entry, &counted, true)]);
        let receipt = self.receipt(entry).await;
        tracing::info!(
            computer = entry.log_name(),
            wall_seconds = receipt.wall_seconds,
            cpu_seconds = receipt.cpu_seconds,
            peak_memory_bytes = receipt.peak_memory_bytes,
            tool_calls = receipt.tool_calls,
            "receipt: {}",
            computer_tools::common::render_receipt(&receipt)
        );
        if let Err(why) = back {
            // Released, the computer's half of the work would be lost:
            // kept until its deadline instead, for `cp --sync`.
            tracing::warn!(
                computer = entry.log_name(),
                "{why}; so the computer is not released: it is kept until its deadline ({}) for `computer-mcp cp --sync {}` (--max-bytes and --max-files raise the bounds), then ends",
                entry.facts().deadline.unwrap_or_default(),
                entry.handle
            );
            self.releasing().remove(&entry.handle);
            self.release_done.notify_waiters();
            return;
        }
        let r = tokio::time::timeout(
            super::RELEASE_WAIT,
            self.provider
                .release(&entry.computer, Release::Delete, &CancellationToken::new()),
        )
        .await;
        self.releasing().remove(&entry.handle);
        self.release_done.notify_waiters();
        match r {
            Ok(Ok(())) => tracing::info!(
                computer = entry.log_name(),
                reason = why,
                "computer released"
            ),
            Ok(Err(e)) => tracing::warn!(
                computer = entry.log_name(),
                reason = why,
                "releasing the computer failed: {e}"
            ),
            Err(_) => tracing::warn!(
                computer = entry.log_name(),
                reason = why,
                "releasing the computer took over {:?}",
                super::RELEASE_WAIT
            ),
        }
    }

    /// Whether `entry`'s computer holds a read-write share copied in (a
    /// provider that cannot bind one), to copy back at its release.
    pub(crate) fn copies_back(entry: &Entry) -> bool {
        crate::shares::recorded(&entry.computer.labels)
            .iter()
            .any(|s| !s.read_only)
    }

    /// Copy the read-write shares copied into `entry`'s computer back to
    /// their host folders, before it is released (bounded by
    /// [`COPY_BACK_WAIT`]): the words of each folder's outcome (logged),
    /// none where it has no such share. A computer that no longer answers
    /// has nothing to give back (said in the words); an error is a
    /// copy-back refused or failed, each folder as it was.
    pub(crate) async fn copy_back(&self, entry: &Entry) -> Result<Vec<String>, String> {
        if !Self::copies_back(entry) {
            return Ok(Vec::new());
        }
        let shares = crate::shares::recorded(&entry.computer.labels);
        let cancel = CancellationToken::new();
        let conn = match self.provider.connect(&entry.computer, &cancel).await {
            Ok(c) => c,
            Err(e) => {
                let w = format!(
                    "its read-write shares were not copied back: the computer does not answer ({})",
                    e.message
                );
                tracing::warn!(computer = entry.log_name(), "{w}");
                return Ok(vec![w]);
            }
        };
        let made = crate::shares::since(&entry.computer);
        // Its bytes are the receipt's bytes pulled.
        let client = crate::receipts::meter::Metered::wrap(conn.client, Arc::clone(&entry.meter));
        let done = tokio::time::timeout(
            COPY_BACK_WAIT,
            crate::shares::copy_back(&client, &shares, made, crate::cp::DEFAULT_BOUNDS),
        )
        .await;
        client.close();
        let words = done.map_err(|_| {
            format!(
                "copying its read-write shares back took over {} s and was given up, each folder as it was",
                COPY_BACK_WAIT.as_secs()
            )
        })??;
        for w in &words {
            tracing::info!(computer = entry.log_name(), "{w}");
        }
        Ok(words)
    }

    /// What `entry` has used so far: the provider's figures (none when it
    /// cannot read them within [`USED_WAIT`]; then an earlier server's, if
    /// the journal has them), the calls and bytes counted through servers,
    /// the bytes `computer-mcp cp` carried, and the estimated cost.
    pub async fn receipt(&self, entry: &Entry) -> Receipt {
        let mut r = self.counted(entry).await;
        if let Some(k) = self.book.kept(&entry.computer) {
            r.bytes_pushed += k.added_pushed;
            r.bytes_pulled += k.added_pulled;
        }
        self.book
            .priced(r, self.provider.id(), self.book.size_of(&entry.computer))
    }

    /// [`App::receipt`] as servers counted it (no `cp` bytes, no cost):
    /// what the journal keeps.
    async fn counted(&self, entry: &Entry) -> Receipt {
        let used = tokio::time::timeout(
            USED_WAIT,
            self.provider
                .used(&entry.computer, &CancellationToken::new()),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let earlier = entry.earlier.as_ref();
        let (pushed, pulled) = entry.meter.read();
        Receipt {
            wall_seconds: super::entry::age_seconds(&entry.computer.created_at),
            cpu_seconds: used
                .cpu_seconds
                .or_else(|| earlier.and_then(|l| l.cpu_seconds)),
            peak_memory_bytes: used
                .peak_memory_bytes
                .or_else(|| earlier.and_then(|l| l.peak_memory_bytes)),
            tool_calls: entry.calls.load(Ordering::SeqCst),
            bytes_pushed: pushed,
            bytes_pulled: pulled,
            estimated_cost_usd: None,
            price: None,
        }
    }

    /// The journal line of `entry`'s counted receipt `r`; its counts are
    /// marked journaled.
    pub(super) fn journal_line(&self, entry: &Entry, r: &Receipt, released: bool) -> Line {
        *entry.journaled.lock().unwrap_or_else(|p| p.into_inner()) = Some(entry.counts());
        crate::receipts::line_of(
            &entry.computer,
            r,
            self.book.size_of(&entry.computer),
            released,
        )
    }

    /// Journal the receipt of every computer held whose calls or bytes
    /// changed since its last line.
    pub async fn flush_receipts(&self) {
        let changed: Vec<Arc<Entry>> = self
            .entries()
            .values()
            .filter(|e| *e.journaled.lock().unwrap_or_else(|p| p.into_inner()) != Some(e.counts()))
            .cloned()
            .collect();
        let mut lines = Vec::with_capacity(changed.len());
        for e in &changed {
            let r = self.counted(e).await;
            lines.push(self.journal_line(e, &r, false));
        }
        self.book.write(&lines);
    }

    /// Journal the receipts of computers used lately, every
    /// [`crate::receipts::FLUSH_EVERY`], until `stop` fires.
    pub fn start_journal(self: &Arc<Self>, stop: CancellationToken) {
        let app = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(crate::receipts::FLUSH_EVERY) => {}
                }
                app.flush_receipts().await;
            }
        });
    }

    /// A session's default computer at the session's end: released, or
    /// kept with `--keep`.
    pub async fn end_session_entry(&self, entry: &Arc<Entry>) {
        self.end_entry_as(entry, "its session ended", self.config.keep)
            .await;
    }

    /// Let a lost computer's remains go, in the background.
    pub fn forget(self: &Arc<Self>, entry: &Arc<Entry>, why: &str) {
        let app = Arc::clone(self);
        let entry = Arc::clone(entry);
        let why = why.to_string();
        self.tasks
            .spawn(async move { app.end_entry(&entry, &why).await });
    }

    /// End an entry as the caller sees it at once: retired (it counts
    /// against no bound and is named released from now on), with the
    /// provider's part in the background, tracked so a stopping server
    /// waits for it. `keep` as in [`App::retire`].
    pub fn retire_now_release_later(self: &Arc<Self>, entry: &Arc<Entry>, why: &str, keep: bool) {
        if self.retire(entry, why, keep) {
            let app = Arc::clone(self);
            let entry = Arc::clone(entry);
            let why = why.to_string();
            self.tasks
                .spawn(async move { app.release_retired(&entry, &why).await });
        }
    }

    /// [`App::retire_now_release_later`] for `computer_release`, whose
    /// answer says what became of the computer's read-write shares: they
    /// are copied back before it answers (the provider's part runs on in
    /// the background). None where it has none to copy back, or it was
    /// retired already.
    pub async fn release_answering(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        why: &str,
    ) -> Option<Result<Vec<String>, String>> {
        if !Self::copies_back(entry) {
            self.retire_now_release_later(entry, why, false);
            return None;
        }
        if !self.retire(entry, why, false) {
            return None;
        }
        let back = self.copy_back(entry).await;
        let app = Arc::clone(self);
        let (entry, why, kept) = (Arc::clone(entry), why.to_string(), back.clone());
        self.tasks
            .spawn(async move { app.release_copied(&entry, &why, kept).await });
        Some(back)
    }

    /// Release in the background (a dropped session), tracked so shutdown
    /// waits for it.
    pub fn end_session_entry_later(self: &Arc<Self>, entry: Arc<Entry>) {
        let app = Arc::clone(self);
        self.tasks
            .spawn(async move { app.end_session_entry(&entry).await });
    }

    /// Pause (`on`) or resume an entry's computer at the provider; its
    /// calls are refused while it is paused. Pausing a paused one, or
    /// resuming a running one, is refused in words.
    pub async fn pause(&self, entry: &Arc<Entry>, on: bool) -> Result<(), String> {
        use std::sync::atomic::Ordering;
        if entry.paused.load(Ordering::SeqCst) == on {
            let now = if on { "paused already" } else { "not paused" };
            return Err(format!("the computer {} is {now}", entry.label()));
        }
        let cancel = CancellationToken::new();
        let done = if on {
            self.provider.pause(&entry.computer, &cancel).await
        } else {
            self.provider.resume(&entry.computer, &cancel).await
        };
        done.map_err(|e| {
            words(
                &e,
                if on {
                    "pausing the computer"
                } else {
                    "resuming the computer"
                },
            )
        })?;
        entry.paused.store(on, Ordering::SeqCst);
        tracing::info!(
            computer = entry.log_name(),
            "computer {}",
            if on { "paused" } else { "resumed" }
        );
        Ok(())
    }

    /// Move an entry's deadline to `ttl_ms` from now, never past the
    /// server's lifetime bound after the computer was made (the seed's
    /// rule: an extend reaches at most creation + the most a computer may
    /// live, which is also the most init was given at its start). A later
    /// ask is cut there and says so; one with no room left is refused.
    pub async fn extend(&self, entry: &Arc<Entry>, ttl_ms: u64) -> Result<Extended, String> {
        let (ttl_ms, capped) = self.capped_ttl(entry, ttl_ms)?;
        let r = self
            .provider
            .extend(&entry.computer, ttl_ms, &CancellationToken::new())
            .await
            .map_err(|e| words(&e, "extending the computer"))?;
        entry.set_deadline(r.clone());
        Ok(Extended {
            deadline: r,
            capped,
        })
    }

    /// `ttl_ms`, or less so that the deadline stays within `--lifetime` of
    /// the computer's creation, and the words for a cut.
    fn capped_ttl(&self, entry: &Entry, ttl_ms: u64) -> Result<(u64, Option<String>), String> {
        use time::format_description::well_known::Rfc3339;
        let lifetime = self.config.lifetime;
        let bound = format!(
            "--lifetime {}",
            computer_providers::human_ms(lifetime.as_millis() as u64)
        );
        let made =
            time::OffsetDateTime::parse(&entry.computer.created_at, &Rfc3339).map_err(|_| {
                format!("its creation time is not known, so an extend cannot be held to {bound}")
            })?;
        let cap = made + lifetime;
        let now = time::OffsetDateTime::now_utc();
        let asked = now + Duration::from_millis(ttl_ms);
        if asked <= cap {
            return Ok((ttl_ms, None));
        }
        let show = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
        // A second short of the cap, for the time between this reading of
        // the clock and the provider's (init refuses past the cap).
        let room = (cap - now).whole_milliseconds() - EXTEND_MARGIN_MS;
        let current = entry
            .facts()
            .deadline
            .and_then(|d| time::OffsetDateTime::parse(&d, &Rfc3339).ok());
        if room <= 0 || current.is_some_and(|d| d + Duration::from_millis(1000) >= cap) {
            return Err(format!(
                "this server keeps a computer at most {bound} after it was made ({}), and this one already ends then. Finish the work before it, or make a new computer with computer_new",
                show(made)
            ));
        }
        Ok((
            room as u64,
            Some(format!(
                "that is as late as this server allows ({bound} after the computer was made, {}), not the {} asked",
                show(made),
                show(asked)
            )),
        ))
    }

    /// Release every computer unused for longer than `--session-idle`.
    pub async fn reap_idle(&self) -> usize {
        let idle = self.config.fleet.idle;
        let stale: Vec<Arc<Entry>> = self
            .entries()
            .values()
            .filter(|e| e.idle_for().is_some_and(|d| d >= idle))
            .cloned()
            .collect();
        let why = format!(
            "unused for {} (--session-idle)",
            computer_providers::human_ms(idle.as_millis() as u64)
        );
        for e in &stale {
            self.end_entry(e, &why).await;
        }
        stale.len()
    }

    /// Run the idle reaper until `stop` fires.
    pub fn start_reaper(self: &Arc<Self>, stop: CancellationToken) {
        let app = Arc::clone(self);
        let tick =
            (self.config.fleet.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(tick) => {}
                }
                app.reap_idle().await;
            }
        });
    }

    /// At shutdown: every computer made here released (or kept with
    /// `--keep`); those attached from elsewhere only closed.
    pub async fn end_all_entries(&self) {
        // Kept computers and those attached from elsewhere go on: their
        // receipts as counted so far are what a later server goes on from.
        self.flush_receipts().await;
        let all: Vec<Arc<Entry>> = self.entries().values().cloned().collect();
        let keep = self.config.keep;
        futures::future::join_all(all.iter().map(|e| async move {
            if e.made_here {
                self.end_entry_as(e, "the server stopped", keep).await;
            } else {
                e.client.close();
                self.entries().remove(&e.handle);
            }
        }))
        .await;
    }
}
