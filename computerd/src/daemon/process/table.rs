//! The table itself: its entries, the ring budget over all of them, and what
//! a list or a read of one entry says.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use crate::daemon::ring::Ring;
use crate::daemon::runner::Run;
use crate::protocol::{
    Bytes64, ProcessInfo, ProcessReadParams, ProcessReadResult, RpcError, Stream, limits,
};

use super::Input;
use super::log::{Log, read_log};

/// What the table's mutex guards.
#[derive(Default)]
pub(super) struct Inner {
    pub(super) entries: BTreeMap<u64, Entry>,
    pub(super) next_seq: u64,
    /// Bytes kept by every ring together.
    pub(super) kept: u64,
    /// Counts ends, so "the process that ended first" is well defined.
    pub(super) end_counter: u64,
}

/// One process, running or ended.
pub(super) struct Entry {
    pub(super) pid: i32,
    pub(super) argv: Vec<String>,
    pub(super) pty: bool,
    pub(super) started_at: i64,
    pub(super) ended: Option<Ended>,
    pub(super) keep_orphans: bool,
    /// stdout, or the terminal's one stream.
    pub(super) out: Ring,
    pub(super) err: Ring,
    pub(super) log: Option<Log>,
    /// Until the run has ended and its guard went back to the pool.
    pub(super) run: Option<Arc<Run>>,
    pub(super) input: Option<Arc<Input>>,
    pub(super) terminal: Option<Arc<AsyncFd<OwnedFd>>>,
    pub(super) changed: watch::Sender<u64>,
    /// stdout is held ([`crate::protocol::ProcessStartParams::hold`]):
    /// its pump waits while the bytes past `read_to` fill the ring.
    pub(super) hold: bool,
    /// The furthest offset a read of stdout has reached.
    pub(super) read_to: u64,
}

impl Entry {
    pub(super) fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Every output stream has reached its end (or, with kept orphans, the
    /// process has ended: what it left running may hold them open for good).
    /// Whether a held stdout has room for one more pipe read of `chunk`
    /// bytes without letting an unread byte go.
    pub(super) fn room_for(&self, chunk: usize) -> bool {
        !self.hold
            || self.out.is_released()
            || self.out.size() - self.read_to.min(self.out.size()) + chunk as u64
                <= self.out.cap() as u64
    }

    pub(super) fn output_done(&self) -> bool {
        (self.out.closed && self.err.closed) || (self.ended.is_some() && self.keep_orphans)
    }
}

#[derive(Clone)]
pub(super) struct Ended {
    pub(super) order: u64,
    pub(super) at: i64,
    pub(super) exit_code: Option<i32>,
    pub(super) signal: Option<String>,
}

/// Which of a process's two output rings.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Out,
    Err,
}

pub(super) fn seq_of(id: &str) -> Result<u64, RpcError> {
    id.strip_prefix('p')
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            RpcError::invalid_field("id", format!("id {id:?} is not a process id (p1, p2, ...)"))
        })
}

pub(super) fn unknown(id: &str) -> RpcError {
    RpcError::not_found(format!(
        "no process {id}: it never existed, or the table (256 entries) let it go"
    ))
    .with_field("id")
}

impl Inner {
    pub(super) fn remove(&mut self, seq: u64) {
        if let Some(e) = self.entries.remove(&seq) {
            self.kept -= e.out.kept() + e.err.kept();
            e.bump();
        }
    }

    /// Keep every ring together under the budget: first let go of the rings
    /// of the processes that ended first; then cap each running ring at an
    /// equal share (never under 64 KiB).
    pub(super) fn enforce_budget(&mut self) {
        if self.kept <= limits::RING_BUDGET_BYTES {
            return;
        }
        let mut ended: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.out.kept() + e.err.kept() > 0)
            .filter_map(|(s, e)| e.ended.as_ref().map(|x| (x.order, *s)))
            .collect();
        ended.sort_unstable();
        for (_, seq) in ended {
            if self.kept <= limits::RING_BUDGET_BYTES {
                return;
            }
            if let Some(e) = self.entries.get_mut(&seq) {
                let freed = e.out.release() + e.err.release();
                self.kept -= freed;
                e.bump();
            }
        }
        if self.kept <= limits::RING_BUDGET_BYTES {
            return;
        }
        let rings: u64 = self
            .entries
            .values()
            .filter(|e| e.ended.is_none())
            .map(|e| if e.pty { 1 } else { 2 })
            .sum();
        if rings == 0 {
            return;
        }
        let share = (limits::RING_BUDGET_BYTES / rings).max(limits::RING_MIN_SHARE_BYTES) as usize;
        let mut freed = 0;
        for e in self.entries.values_mut().filter(|e| e.ended.is_none()) {
            freed += e.out.shrink_to(share) + e.err.shrink_to(share);
        }
        self.kept -= freed;
    }

    pub(super) fn push(&mut self, seq: u64, which: Which, data: &[u8]) {
        let Some(e) = self.entries.get_mut(&seq) else {
            return;
        };
        let ring = match which {
            Which::Out => &mut e.out,
            Which::Err => &mut e.err,
        };
        let delta = ring.push(data);
        if let Some(log) = e.log.as_mut() {
            log.append(data);
        }
        e.bump();
        self.kept = (self.kept as i64 + delta) as u64;
        self.enforce_budget();
    }

    pub(super) fn close(&mut self, seq: u64, which: Which) {
        if let Some(e) = self.entries.get_mut(&seq) {
            match which {
                Which::Out => e.out.closed = true,
                Which::Err => e.err.closed = true,
            }
            e.bump();
        }
    }
}

pub(super) fn info_of(seq: u64, e: &Entry) -> ProcessInfo {
    let mut argv = Vec::new();
    let mut bytes = 2usize;
    let mut clipped = false;
    for a in &e.argv {
        let n = serde_json::to_string(a)
            .map(|s| s.len() + 1)
            .unwrap_or(usize::MAX);
        if bytes.saturating_add(n) > limits::MAX_LISTED_ARGV_BYTES {
            clipped = true;
            break;
        }
        bytes += n;
        argv.push(a.clone());
    }
    ProcessInfo {
        id: format!("p{seq}"),
        pid: e.pid,
        argv,
        argv_clipped: clipped,
        pty: e.pty,
        running: e.ended.is_none(),
        exit_code: e.ended.as_ref().and_then(|x| x.exit_code),
        signal: e.ended.as_ref().and_then(|x| x.signal.clone()),
        started_at: e.started_at,
        ended_at: e.ended.as_ref().map(|x| x.at),
    }
}

pub(super) fn read_entry(
    e: &Entry,
    p: &ProcessReadParams,
    max: usize,
) -> Result<ProcessReadResult, RpcError> {
    let no_stream = |why: &str| {
        RpcError::invalid_field(
            "stream",
            format!("{} has no {} stream: {why}", p.id, p.stream),
        )
    };
    let ring = match p.stream {
        Stream::Stdout if !e.pty => &e.out,
        Stream::Stderr if !e.pty => &e.err,
        Stream::Pty if e.pty => &e.out,
        Stream::Stdout | Stream::Stderr => {
            return Err(no_stream("it runs in a terminal; read stream pty"));
        }
        Stream::Pty => {
            return Err(no_stream(
                "it was started without pty; read stdout or stderr",
            ));
        }
        Stream::Log => return read_log(e, p, max),
    };
    let r = ring.read(p.offset, max, &p.stream.to_string())?;
    let stream_done = ring.closed || (e.ended.is_some() && e.keep_orphans) || ring.is_released();
    Ok(ProcessReadResult {
        exited: e.ended.is_some() && stream_done && r.next_offset == ring.size(),
        size: ring.size(),
        data: Bytes64(r.data),
        next_offset: r.next_offset,
        dropped: r.dropped,
        capped: None,
        log_error: None,
    })
}
