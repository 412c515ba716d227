//! Room under the computer's process bound: a start that finds every pid
//! in use waits its turn in a queue, when its caller asked to wait.
//!
//! The computer's `pids` bound (a cgroup's `pids.max`, which init usually
//! cannot see from inside) is met when a fork or a `posix_spawn` fails with
//! `EAGAIN`: the guard's own fork (from the template, or by exec) or the
//! guard's start of the program. Such a start is not an error of the
//! program's, so a caller that gave `queueMs` has its start queued instead
//! of refused. Starts are served in the order they came: only the first in
//! the queue tries again, when a run or any other child of init has ended
//! (each frees pids) or every [`RETRY`] (something else in the computer may
//! have ended), and when it has started the next in line tries at once.
//! A start that finds others queued joins behind them without trying, so
//! no newcomer takes the room the first in line was waiting for.
//!
//! What a start refused here is told: how many are queued ahead of it, and
//! with the queue full, its bound [`MAX_QUEUED`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::protocol::RpcError;

/// Starts that may wait at once; one past it is refused at once.
pub const MAX_QUEUED: usize = 4096;

/// How often the first in line tries again with nothing heard to have ended.
pub const RETRY: Duration = Duration::from_millis(100);

/// The least time between two tries of the first in line.
pub const MIN_GAP: Duration = Duration::from_millis(5);

/// Whether a start failed for want of a pid (the computer's process bound).
pub fn is_full(errno: i32) -> bool {
    errno == libc::EAGAIN
}

struct Waiter {
    id: u64,
    wake: Arc<Notify>,
}

/// The queue of starts waiting for room.
pub struct Room {
    queue: Mutex<VecDeque<Waiter>>,
    next: AtomicU64,
    bound: usize,
}

impl Default for Room {
    fn default() -> Self {
        Self::new(MAX_QUEUED)
    }
}

/// A start's place in the queue; dropping it leaves the queue (and lets the
/// next in line try, when it was first).
pub struct Ticket<'a> {
    room: &'a Room,
    id: u64,
    wake: Arc<Notify>,
}

impl Room {
    pub fn new(bound: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            next: AtomicU64::new(1),
            bound,
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Waiter>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many starts are waiting.
    pub fn queued(&self) -> usize {
        self.lock().len()
    }

    /// Something that held pids has ended: the first in line tries again.
    pub fn freed(&self) {
        if let Some(first) = self.lock().front() {
            first.wake.notify_one();
        }
    }

    /// Join the back of the queue; refused, naming the bound, when it is full.
    /// `what` names the start in the words (`exec.run`, `process.start`).
    pub fn join(&self, what: &str) -> Result<Ticket<'_>, RpcError> {
        let mut q = self.lock();
        if q.len() >= self.bound {
            return Err(RpcError::limit(format!(
                "{what} found every process this computer's pids bound allows in use, and {} starts are already queued for room, the most that may wait; it was not queued: try again once some runs have ended",
                q.len()
            )));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        q.push_back(Waiter {
            id,
            wake: Arc::clone(&wake),
        });
        Ok(Ticket {
            room: self,
            id,
            wake,
        })
    }

    fn position(&self, id: u64) -> Option<usize> {
        self.lock().iter().position(|w| w.id == id)
    }
}

impl Ticket<'_> {
    /// How many starts are queued ahead of this one.
    pub fn ahead(&self) -> usize {
        self.room.position(self.id).unwrap_or(0)
    }

    /// Wait until this start may try again: it is first in line and
    /// something has ended since its last try (or [`RETRY`] has passed), or
    /// it has just become first. After a try that `failed`, not sooner than
    /// [`MIN_GAP`]: the failed try's own guard ending is heard as something
    /// ended. False when `until` comes first.
    pub async fn turn(&self, until: Instant, failed: bool) -> bool {
        let earliest = Instant::now() + if failed { MIN_GAP } else { Duration::ZERO };
        loop {
            let first = self.ahead() == 0;
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(RETRY), if first => {}
                _ = tokio::time::sleep_until(until) => return false,
            }
            if self.ahead() == 0 {
                if earliest > until {
                    tokio::time::sleep_until(until).await;
                    return false;
                }
                tokio::time::sleep_until(earliest).await;
                return true;
            }
        }
    }

    /// The words for a start that waited until `until` and found no room.
    pub fn gave_up(&self, what: &str, waited: Duration) -> RpcError {
        RpcError::limit(format!(
            "{what} waited {} ms for room under this computer's pids bound (every process it allows was in use) and none came free; {} starts were still queued ahead of it. Wait longer (queueMs), or end some processes",
            waited.as_millis(),
            self.ahead()
        ))
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut q = self.room.lock();
        let Some(at) = q.iter().position(|w| w.id == self.id) else {
            return;
        };
        q.remove(at);
        // The next in line tries at once: the room this one found (or the
        // room it gave up on) may hold more than one start.
        if at == 0
            && let Some(next) = q.front()
        {
            next.wake.notify_one();
        }
    }
}

/// The words for a start refused at once for want of a pid (its caller did
/// not ask to wait).
pub fn refused(what: &str, queued: usize) -> RpcError {
    let behind = if queued == 0 {
        String::new()
    } else {
        format!(", and {queued} starts are queued for room ahead of it")
    };
    RpcError::limit(format!(
        "{what} found every process this computer's pids bound allows in use{behind}; ask to wait for room (queueMs), wait for some runs to end, or end some processes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_first_in_line_tries_when_something_ends_and_the_next_when_it_has_gone() {
        // 'static, for the spawned waiter.
        let room: &'static Room = Box::leak(Box::new(Room::new(3)));
        let a = room.join("exec.run").unwrap();
        let b = room.join("exec.run").unwrap();
        assert_eq!((a.ahead(), b.ahead(), room.queued()), (0, 1, 2));
        let far = Instant::now() + Duration::from_secs(60);
        // Nothing has ended: the first tries again after RETRY, no sooner.
        let t0 = Instant::now();
        assert!(a.turn(far, true).await);
        assert_eq!(t0.elapsed(), RETRY);
        // Something ended: at once, or MIN_GAP after a failed try.
        room.freed();
        let t0 = Instant::now();
        assert!(a.turn(far, false).await);
        assert_eq!(t0.elapsed(), Duration::ZERO);
        room.freed();
        assert!(a.turn(far, true).await);
        assert_eq!(t0.elapsed(), MIN_GAP);
        // The second waits for the first to go, however long that is, and
        // then tries at once.
        let waiting = tokio::spawn(async move {
            let t0 = Instant::now();
            let ok = b
                .turn(Instant::now() + Duration::from_secs(60), false)
                .await;
            (ok, t0.elapsed(), b.ahead())
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        room.freed();
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(a);
        let (ok, waited, ahead) = waiting.await.unwrap();
        assert!(ok);
        assert_eq!(waited, Duration::from_secs(10));
        assert_eq!(ahead, 0);
        assert_eq!(room.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_refuses_naming_its_bound_and_a_wait_ends_at_its_time() {
        let room = Room::new(2);
        let a = room.join("exec.run").unwrap();
        let b = room.join("exec.run").unwrap();
        let e = room.join("process.start").map(|_| ()).unwrap_err();
        assert_eq!(
            e.data.map(|d| d.kind),
            Some(crate::protocol::ErrorKind::Limit)
        );
        assert!(
            e.message.contains("2 starts are already queued")
                && e.message.contains("process.start"),
            "{}",
            e.message
        );
        // A later one that leaves from the middle does not move the first.
        let t0 = Instant::now();
        assert!(!b.turn(t0 + Duration::from_millis(250), false).await);
        assert_eq!(t0.elapsed(), Duration::from_millis(250));
        let words = b.gave_up("exec.run", t0.elapsed()).message;
        assert!(
            words.contains("waited 250 ms") && words.contains("1 starts were still queued ahead"),
            "{words}"
        );
        drop(b);
        assert_eq!((a.ahead(), room.queued()), (0, 1));
        assert!(room.join("exec.run").is_ok());
        let words = refused("exec.run", 3).message;
        assert!(
            words.contains("3 starts are queued") && words.contains("queueMs"),
            "{words}"
        );
        assert!(
            !refused("exec.run", 0)
                .message
                .contains("queued for room ahead")
        );
    }
}
