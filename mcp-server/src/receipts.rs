//! Receipts: what each computer used (wall time, CPU seconds, peak memory,
//! tool calls, bytes pushed and pulled, and for a vendor's computer an
//! estimated cost), kept past the server in a journal.
//!
//! Modules: [`meter`] (the bytes, counted at the connection), [`journal`]
//! (the file in the state directory), [`price`] (the vendors' published
//! prices and the estimate), [`cli`] (`computer-mcp receipts` and the
//! columns of `computers list`).

pub mod cli;
pub mod journal;
pub mod meter;
pub mod price;

use std::time::Duration;

use computer_providers::{ComputerRef, label};
use computer_tools::Receipt;

use crate::config::Config;
use journal::{Journal, Kept, Line};
use meter::Meter;

/// How often a server writes the receipts of computers used since its
/// last write (the release writes the last one at once).
pub const FLUSH_EVERY: Duration = Duration::from_secs(30);

/// Where receipts are kept, and the prices they are estimated with.
#[derive(Clone, Debug)]
pub struct Book {
    journal: Option<Journal>,
    pub prices: price::Prices,
    /// The size computers are asked for (`--cpus`, `--memory-mb`), where a
    /// computer does not say its own.
    cpus: Option<f64>,
    memory_mb: Option<u64>,
}

impl Book {
    pub fn new(config: &Config) -> Book {
        Book {
            journal: config.server_state_dir().map(|d| Journal::in_dir(&d)),
            prices: config.prices.clone(),
            cpus: config.cpus,
            memory_mb: config.memory_mb,
        }
    }

    /// Everything the journal holds (nothing, with a warning, when it
    /// cannot be read).
    pub fn all(&self) -> std::collections::HashMap<journal::Key, Kept> {
        let Some(j) = &self.journal else {
            return Default::default();
        };
        j.read().unwrap_or_else(|e| {
            tracing::warn!("{e}");
            Default::default()
        })
    }

    /// What the journal holds of `computer`.
    pub fn kept(&self, computer: &ComputerRef) -> Option<Kept> {
        self.all()
            .remove(&(computer.provider.clone(), computer.id.clone()))
    }

    /// Append `lines`; a failure is logged, never the caller's.
    pub fn write(&self, lines: &[Line]) {
        if let Some(j) = &self.journal
            && let Err(e) = j.append(lines)
        {
            tracing::warn!("{e}");
        }
    }

    /// A `cp`'s bytes, added to `computer`'s receipt.
    pub fn add_bytes(&self, computer: &ComputerRef, meter: &Meter) {
        let (pushed, pulled) = meter.read();
        if pushed + pulled == 0 {
            return;
        }
        self.write(&[Line {
            provider: computer.provider.clone(),
            id: computer.id.clone(),
            handle: computer
                .labels
                .get(label::HANDLE)
                .cloned()
                .unwrap_or_default(),
            at: now(),
            bytes_pushed: pushed,
            bytes_pulled: pulled,
            added: true,
            ..Line::default()
        }]);
    }

    /// `computer`'s size: its own as read back, or what it was asked for.
    pub fn size_of(&self, computer: &ComputerRef) -> (Option<f64>, Option<u64>) {
        match &computer.sizes {
            Some(s) => (Some(s.cpus), Some(s.memory_mb)),
            None => (self.cpus, self.memory_mb),
        }
    }

    /// `r` with its estimated cost, where `provider` has a price.
    pub fn priced(
        &self,
        mut r: Receipt,
        provider: &str,
        size: (Option<f64>, Option<u64>),
    ) -> Receipt {
        match self
            .prices
            .estimate(provider, r.wall_seconds, size.0, size.1)
        {
            Some(e) => {
                r.estimated_cost_usd = Some(e.usd);
                r.price = Some(e.basis);
            }
            None => {
                r.estimated_cost_usd = None;
                r.price = None;
            }
        }
        r
    }
}

/// Now, in RFC 3339.
pub fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The journal line of `computer`'s receipt `r` (the bytes this server
/// counted), `released` when it is the last.
pub fn line_of(
    computer: &ComputerRef,
    r: &Receipt,
    size: (Option<f64>, Option<u64>),
    released: bool,
) -> Line {
    let l = |k: &str| computer.labels.get(k).cloned();
    Line {
        provider: computer.provider.clone(),
        id: computer.id.clone(),
        handle: l(label::HANDLE).unwrap_or_default(),
        name: l(label::NAME),
        kind: l(label::KIND).unwrap_or_default(),
        image: computer.image.clone(),
        created_at: computer.created_at.clone(),
        at: now(),
        released_at: released.then(now),
        cpu_seconds: r.cpu_seconds,
        peak_memory_bytes: r.peak_memory_bytes,
        vcpus: size.0,
        memory_mb: size.1,
        tool_calls: r.tool_calls,
        bytes_pushed: r.bytes_pushed,
        bytes_pulled: r.bytes_pulled,
        added: false,
    }
}
