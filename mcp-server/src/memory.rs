//! Giving freed memory back to the system after a burst.
//!
//! glibc's allocator keeps what a burst of calls freed (each worker thread
//! has its own arena), so after 1000 calls in flight the server's RSS stays
//! near its peak although nothing uses it. Every few seconds the server
//! reads how much its heap holds free ([`libc::mallinfo2`]); past a bound,
//! `malloc_trim(0)` returns the free pages of every arena. The read is a
//! few microseconds and a trim happens only after a burst, so a steady
//! server never pays for it.

use std::time::Duration;

/// How often the free bytes are read.
const EVERY: Duration = Duration::from_secs(3);

/// Free bytes held in the heap past which a trim is worth its walk.
const FREE_BOUND: usize = 4 * 1024 * 1024;

/// The free bytes the allocator holds (kept in its arenas, not given back).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn held_free() -> usize {
    // SAFETY: mallinfo2 takes no argument and only reads the allocator's
    // counters; it returns its struct by value.
    let m = unsafe { libc::mallinfo2() };
    m.fordblks
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim(0) only returns free pages of the arenas to the
    // system; every live allocation stays where it is.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Start the trimming task on the current runtime (no-op off glibc).
///
/// A trim returns free pages but leaves them counted as free, so the free
/// bytes alone would ask for a trim on every tick: a trim is made when they
/// grew by [`FREE_BOUND`] over the least seen since the last one (a new
/// burst freed that much).
pub fn trim_when_idle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut low = held_free();
        loop {
            tick.tick().await;
            let free = held_free();
            low = low.min(free);
            if free >= low.saturating_add(FREE_BOUND) {
                // The walk over the arenas runs off the async workers.
                let _ = tokio::task::spawn_blocking(trim).await;
                low = held_free();
                tracing::debug!(free, "gave the heap's free pages back");
            }
        }
    });
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn a_trim_gives_back_what_a_burst_freed_in_the_middle_of_the_heap() {
        // 64 MiB of small blocks in a thread of its own (an arena of its
        // own, as a worker's), every 64th kept so that the free space is
        // holes the allocator cannot give back by itself.
        let kept = std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..65_536).map(|i| vec![i as u8; 1024]).collect();
            blocks
                .into_iter()
                .enumerate()
                .filter_map(|(i, b)| (i % 64 == 0).then_some(b))
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert!(held_free() > FREE_BOUND, "the freed blocks are held free");
        let before = rss_kib();
        trim();
        let after = rss_kib();
        assert!(
            after + 32 * 1024 < before,
            "RSS {before} KiB before the trim, {after} KiB after"
        );
        assert_eq!(kept.len(), 1024);
        assert!(kept.iter().all(|b| b.len() == 1024));
    }
}
