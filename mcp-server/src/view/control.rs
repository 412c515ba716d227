//! Who controls each computer's screen: a person's control lease (held by
//! one view), and the model's takeover requests (`request_takeover`).
//!
//! - A person takes control from a view; it ends when they give it back or
//!   their view's socket closes.
//! - While a person holds control, the model's input tools are refused in
//!   words, except on a computer where the model asked for the takeover
//!   (the lease was taken, or held, while its request waited): there they
//!   wait until the person gives control back.
//! - While the model's input batch runs on a computer, a person's take
//!   waits for it to end (up to [`TAKE_WAIT`]) rather than interleave with
//!   it; the model's input waiting on a lease it asked for waits up to
//!   [`MODEL_INPUT_WAIT`], then is refused in words.
//! - Every change is announced on one watch channel, so a waiting call and
//!   a view's page (which shows the model's reason) see it at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::grants::rfc3339;

/// How long a person's take waits for the model's input batch in flight.
pub const TAKE_WAIT: Duration = Duration::from_secs(15);
/// How long the model's input waits for the person it asked to give
/// control back.
pub const MODEL_INPUT_WAIT: Duration = Duration::from_secs(computer_tools::fleet::INPUT_WAIT_S);

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

/// How the model's wait for a person's give-back ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Freed {
    Free,
    Cancelled,
    /// [`MODEL_INPUT_WAIT`] passed with the person still in control.
    TimedOut,
}

/// Every computer's control on one server.
pub struct Control {
    leases: Mutex<HashMap<String, Lease>>,
    asks: Mutex<HashMap<String, Ask>>,
    /// The model's input batches running on each computer.
    inputs: Mutex<HashMap<String, usize>>,
    /// The inputs people's views have sent to each computer, in all.
    sent: Mutex<HashMap<String, u64>>,
    changes: watch::Sender<u64>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            leases: Mutex::default(),
            asks: Mutex::default(),
            inputs: Mutex::default(),
            sent: Mutex::default(),
            changes: watch::Sender::new(0),
        }
    }
}

/// The model's input batch on a computer, counted while it runs: a
/// person's take waits until none runs.
pub struct ModelInput<'a> {
    control: &'a Control,
    handle: String,
}

impl Drop for ModelInput<'_> {
    fn drop(&mut self) {
        {
            let mut inputs = self.control.inputs();
            if let Some(n) = inputs.get_mut(&self.handle) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    inputs.remove(&self.handle);
                }
            }
        }
        self.control.changed();
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

    fn inputs(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.inputs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Told of every change of a lease or a request.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Begin the model's input batch on `handle`, unless a person holds
    /// its control (their lease is the error).
    pub fn begin_input(&self, handle: &str) -> Result<ModelInput<'_>, Lease> {
        let leases = self.leases();
        if let Some(l) = leases.get(handle) {
            return Err(*l);
        }
        *self.inputs().entry(handle.to_string()).or_default() += 1;
        Ok(ModelInput {
            control: self,
            handle: handle.to_string(),
        })
    }

    /// A person's view sent an input to `handle`.
    pub fn person_sent(&self, handle: &str) {
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        *sent.entry(handle.to_string()).or_default() += 1;
    }

    /// The inputs people's views have sent to `handle`, in all.
    pub fn sent(&self, handle: &str) -> u64 {
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        sent.get(handle).copied().unwrap_or(0)
    }

    /// The model's input batches running on `handle`.
    pub fn inputs_running(&self, handle: &str) -> usize {
        self.inputs().get(handle).copied().unwrap_or(0)
    }

    /// Take `handle`'s control for view `id` once no input batch of the
    /// model runs on it (waiting up to `bound`), unless another view holds
    /// it. Whether the model asked for it (its request waits).
    pub async fn take_when_free(
        &self,
        handle: &str,
        id: u64,
        bound: Duration,
    ) -> Result<bool, String> {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if let Some(taken) = self.take(handle, id) {
                return taken;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err("the server is stopping".into()) },
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!(
                        "the model's input is still running after {} s: control was not taken; try again in a moment",
                        bound.as_secs()
                    ));
                }
            }
        }
    }

    /// Take `handle`'s control for view `id` now: None while the model's
    /// input runs on it.
    fn take(&self, handle: &str, id: u64) -> Option<Result<bool, String>> {
        let mut asks = self.asks();
        let mut leases = self.leases();
        if !leases.contains_key(handle) && self.inputs_running(handle) > 0 {
            return None;
        }
        Some(match leases.get(handle) {
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
        })
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

    /// Wait until no person holds `handle`'s control, `cancel` fires or
    /// `bound` passes.
    pub async fn until_free(
        &self,
        handle: &str,
        cancel: &CancellationToken,
        bound: Duration,
    ) -> Freed {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if self.lease(handle).is_none() {
                return Freed::Free;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Freed::Cancelled },
                () = cancel.cancelled() => return Freed::Cancelled,
                () = tokio::time::sleep_until(deadline) => return Freed::TimedOut,
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
        assert!(c.take(A, 7).unwrap().unwrap(), "the lease is the asked one");
        assert!(c.take(A, 8).unwrap().is_err(), "one person at a time");
        c.give_back(A, 8);
        assert!(c.lease(A).is_some(), "only the holder gives back");
        c.give_back(A, 7);
        let w = waiter.await.unwrap().unwrap();
        assert!(matches!(w, Waited::GivenBack { .. }), "{w:?}");
        assert!(c.ask(A).is_none(), "the request is gone with its call");
        assert!(
            !c.take(A, 9).unwrap().unwrap(),
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

    #[tokio::test(start_paused = true)]
    async fn a_take_waits_for_the_models_input_in_flight_then_refuses_past_its_bound() {
        let c = std::sync::Arc::new(Control::default());
        let batch = c.begin_input(A).unwrap();
        assert_eq!(c.inputs_running(A), 1);
        let taker = {
            let c = std::sync::Arc::clone(&c);
            tokio::spawn(async move { c.take_when_free(A, 7, Duration::from_secs(15)).await })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(c.lease(A).is_none(), "no lease while the batch runs");
        assert!(!taker.is_finished());
        drop(batch);
        assert_eq!(taker.await.unwrap(), Ok(false), "taken once it ended");
        assert_eq!(c.lease(A).map(|l| l.view), Some(7));
        // With the lease held, the model's input does not begin.
        assert_eq!(c.begin_input(A).err().map(|l| l.view), Some(7));
        c.give_back(A, 7);

        let _long = c.begin_input(A).unwrap();
        let started = tokio::time::Instant::now();
        let why = c
            .take_when_free(A, 8, Duration::from_secs(15))
            .await
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_secs(15));
        assert_eq!(
            why,
            "the model's input is still running after 15 s: control was not taken; try again in a moment"
        );
        assert!(c.lease(A).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_models_input_waits_for_the_person_it_asked_for_a_bounded_time() {
        let c = std::sync::Arc::new(Control::default());
        let cancel = CancellationToken::new();
        assert_eq!(
            c.until_free(A, &cancel, Duration::from_secs(1)).await,
            Freed::Free
        );
        assert!(c.take(A, 7).unwrap().is_ok());
        let started = tokio::time::Instant::now();
        assert_eq!(
            c.until_free(A, &cancel, MODEL_INPUT_WAIT).await,
            Freed::TimedOut
        );
        assert!(started.elapsed() >= MODEL_INPUT_WAIT);
        let waiter = {
            let (c, cancel) = (std::sync::Arc::clone(&c), cancel.clone());
            tokio::spawn(async move { c.until_free(A, &cancel, MODEL_INPUT_WAIT).await })
        };
        tokio::time::sleep(Duration::from_secs(3)).await;
        c.give_back(A, 7);
        assert_eq!(waiter.await.unwrap(), Freed::Free);
        assert!(c.take(A, 8).unwrap().is_ok());
        cancel.cancel();
        assert_eq!(
            c.until_free(A, &cancel, MODEL_INPUT_WAIT).await,
            Freed::Cancelled
        );
    }
}
