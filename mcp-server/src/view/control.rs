//! Who controls each computer's screen: a person's control lease (held by
//! one view), and the model's takeover requests (`request_takeover`).
//!
//! - A person takes control from a view; it ends when they give it back or
//!   their view's socket closes.
//! - While a person holds control, the model's input tools are refused in
//!   words, except on a computer where the model asked for the takeover
//!   (the lease was taken, or held, while its request waited): there they
//!   wait until the person gives control back.
//! - Every change is announced on one watch channel, so a waiting call and
//!   a view's page (which shows the model's reason) see it at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::grants::rfc3339;

/// A person's hold on a computer's control.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lease {
    /// The view holding it.
    pub view: u64,
    pub since: SystemTime,
    /// Taken (or held) while the model's takeover request waited.
    pub asked: bool,
}

/// The model's takeover request waiting on a computer.
#[derive(Clone, Debug, PartialEq)]
pub struct Ask {
    pub reason: String,
    pub since: SystemTime,
    /// The view that took control for it, and when.
    taken: Option<(u64, SystemTime)>,
    /// When that view gave control back (or closed).
    given_back: Option<SystemTime>,
}

/// How a takeover request's wait ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Waited {
    /// The person took control at `taken` and gave it back `held` later.
    GivenBack { taken: SystemTime, held: Duration },
    /// The time ran out while the person still holds control.
    StillHeld { taken: SystemTime, held: Duration },
    /// Nobody took control in time.
    NotTaken,
    /// The person turned the request down (an elicitation's answer).
    Declined,
    /// The call was cancelled.
    Cancelled,
}

/// Every computer's control on one server.
pub struct Control {
    leases: Mutex<HashMap<String, Lease>>,
    asks: Mutex<HashMap<String, Ask>>,
    changes: watch::Sender<u64>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            leases: Mutex::default(),
            asks: Mutex::default(),
            changes: watch::Sender::new(0),
        }
    }
}

/// Takes the request off its computer when its call ends, however it ends.
struct AskGuard<'a> {
    control: &'a Control,
    handle: &'a str,
}

impl Drop for AskGuard<'_> {
    fn drop(&mut self) {
        self.control.asks().remove(self.handle);
        self.control.changed();
    }
}

impl Control {
    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn asks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ask>> {
        self.asks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Told of every change of a lease or a request.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Take `handle`'s control for view `id`, unless another view holds
    /// it. Whether the model asked for it (its request waits).
    pub fn take(&self, handle: &str, id: u64) -> Result<bool, String> {
        let mut asks = self.asks();
        let mut leases = self.leases();
        match leases.get(handle) {
            Some(l) if l.view != id => {
                Err("another person has control of this screen until they give it back".into())
            }
            Some(l) => Ok(l.asked),
            None => {
                let since = SystemTime::now();
                let ask = asks.get_mut(handle).filter(|a| a.taken.is_none());
                let asked = ask.is_some();
                if let Some(a) = ask {
                    a.taken = Some((id, since));
                }
                leases.insert(
                    handle.to_string(),
                    Lease {
                        view: id,
                        since,
                        asked,
                    },
                );
                drop((asks, leases));
                self.changed();
                Ok(asked)
            }
        }
    }

    /// Let go of `handle`'s control, if view `id` holds it.
    pub fn give_back(&self, handle: &str, id: u64) {
        let mut asks = self.asks();
        let mut leases = self.leases();
        if leases.get(handle).is_some_and(|l| l.view == id) {
            leases.remove(handle);
            if let Some(a) = asks.get_mut(handle)
                && a.taken.is_some_and(|(v, _)| v == id)
            {
                a.given_back = Some(SystemTime::now());
            }
            drop((asks, leases));
            self.changed();
        }
    }

    /// A person's lease on `handle`, if one holds it.
    pub fn lease(&self, handle: &str) -> Option<Lease> {
        self.leases().get(handle).copied()
    }

    /// The model's request waiting on `handle`, if any.
    pub fn ask(&self, handle: &str) -> Option<Ask> {
        self.asks().get(handle).cloned()
    }

    /// Wait until no person holds `handle`'s control; false when
    /// `cancel` fired first.
    pub async fn until_free(&self, handle: &str, cancel: &CancellationToken) -> bool {
        let mut rx = self.subscribe();
        loop {
            if self.lease(handle).is_none() {
                return true;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return false },
                () = cancel.cancelled() => return false,
            }
        }
    }

    /// The model asks a person to take `handle`'s control for `reason`:
    /// waits until the person who took it gives it back (or their view
    /// closes), `timeout` passes, `declined` resolves before anyone took
    /// control, or `cancel` fires.
    pub async fn request(
        &self,
        handle: &str,
        reason: &str,
        timeout: Duration,
        cancel: &CancellationToken,
        declined: impl Future<Output = ()>,
    ) -> Result<Waited, String> {
        {
            let mut asks = self.asks();
            if let Some(a) = asks.get(handle) {
                return Err(format!(
                    "a takeover request on this computer already waits (since {}); one at a time",
                    rfc3339(a.since)
                ));
            }
            // A person holding control already is the one asked.
            let mut leases = self.leases();
            let held = leases.get_mut(handle).map(|l| {
                l.asked = true;
                (l.view, l.since)
            });
            asks.insert(
                handle.to_string(),
                Ask {
                    reason: reason.to_string(),
                    since: SystemTime::now(),
                    taken: held,
                    given_back: None,
                },
            );
        }
        let _guard = AskGuard {
            control: self,
            handle,
        };
        self.changed();
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        tokio::pin!(declined);
        loop {
            let (taken, given_back) = match self.asks().get(handle) {
                Some(a) => (a.taken.map(|(_, at)| at), a.given_back),
                None => (None, None),
            };
            if let (Some(taken), Some(back)) = (taken, given_back) {
                let held = back.duration_since(taken).unwrap_or_default();
                return Ok(Waited::GivenBack { taken, held });
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Ok(Waited::Cancelled) },
                () = tokio::time::sleep_until(deadline) => {
                    return Ok(match taken {
                        Some(taken) => Waited::StillHeld { taken, held: held(taken) },
                        None => Waited::NotTaken,
                    });
                }
                () = cancel.cancelled() => return Ok(Waited::Cancelled),
                () = &mut declined, if taken.is_none() => return Ok(Waited::Declined),
            }
        }
    }
}

fn held(since: SystemTime) -> Duration {
    SystemTime::now().duration_since(since).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "c-0123456789abcdef0123456789abcdef";

    #[tokio::test]
    async fn a_request_waits_for_the_person_to_take_and_give_back() {
        let c = std::sync::Arc::new(Control::default());
        let cancel = CancellationToken::new();
        let waiter = {
            let c = std::sync::Arc::clone(&c);
            let cancel = cancel.clone();
            tokio::spawn(async move {
                c.request(
                    A,
                    "log in",
                    Duration::from_secs(30),
                    &cancel,
                    std::future::pending(),
                )
                .await
            })
        };
        while c.ask(A).is_none() {
            tokio::task::yield_now().await;
        }
        assert_eq!(c.ask(A).unwrap().reason, "log in");
        let again = c
            .request(
                A,
                "twice",
                Duration::from_secs(1),
                &cancel,
                std::future::pending(),
            )
            .await
            .unwrap_err();
        assert!(again.contains("already waits"), "{again}");
        assert!(c.take(A, 7).unwrap(), "the lease is the asked one");
        assert!(c.take(A, 8).is_err(), "one person at a time");
        c.give_back(A, 8);
        assert!(c.lease(A).is_some(), "only the holder gives back");
        c.give_back(A, 7);
        let w = waiter.await.unwrap().unwrap();
        assert!(matches!(w, Waited::GivenBack { .. }), "{w:?}");
        assert!(c.ask(A).is_none(), "the request is gone with its call");
        assert!(
            !c.take(A, 9).unwrap(),
            "a lease with no request is not asked"
        );
    }

    #[tokio::test]
    async fn a_request_ends_untaken_declined_or_cancelled() {
        let c = Control::default();
        let cancel = CancellationToken::new();
        let none = c
            .request(
                A,
                "r",
                Duration::from_millis(20),
                &cancel,
                std::future::pending(),
            )
            .await;
        assert_eq!(none, Ok(Waited::NotTaken));
        let no = c
            .request(A, "r", Duration::from_secs(30), &cancel, async {})
            .await;
        assert_eq!(no, Ok(Waited::Declined));
        cancel.cancel();
        let gone = c
            .request(
                A,
                "r",
                Duration::from_secs(30),
                &cancel,
                std::future::pending(),
            )
            .await;
        assert_eq!(gone, Ok(Waited::Cancelled));
        assert!(c.ask(A).is_none());
    }
}
