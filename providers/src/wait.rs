//! [`wait_until`]: the one bounded wait a provider uses when the vendor
//! reads a state back later than it acted (a computer ended by a release).

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::types::{ErrorCode, ProviderError, Result};

/// How [`wait_until`] paces its reads.
#[derive(Clone, Debug)]
pub struct Wait {
    /// Never past this, from the first read.
    pub bound: Duration,
    /// The first pause; each next one doubles, up to `max`.
    pub min: Duration,
    pub max: Duration,
    /// What is waited for, in words ("the computer to be removed").
    pub what: String,
}

impl Wait {
    /// Pauses from 250 ms to 5 s, within `bound`.
    pub fn new(what: impl Into<String>, bound: Duration) -> Self {
        Self {
            bound,
            min: Duration::from_millis(250),
            max: Duration::from_secs(5),
            what: what.into(),
        }
    }
}

/// Read at once, then after pauses that double from `min` to `max`, never
/// past `bound`, and return the first state `done` accepts. A read that
/// fails is not done; one still pending at the bound is not waited for.
/// Past the bound: a timeout naming what was waited for and the last state
/// read (`describe`); on `cancel`: aborted.
pub async fn wait_until<T, F, Fut>(
    wait: &Wait,
    cancel: &CancellationToken,
    mut read: F,
    done: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let until = tokio::time::Instant::now() + wait.bound;
    let mut pause = wait.min;
    let mut last: Option<String> = None;
    loop {
        let step = tokio::select! {
            r = tokio::time::timeout_at(until, read()) => r,
            _ = cancel.cancelled() => {
                return Err(ProviderError::new(
                    ErrorCode::Aborted,
                    format!("waiting for {} was cancelled", wait.what),
                ));
            }
        };
        match step {
            Ok(Ok(state)) if done(&state) => return Ok(state),
            Ok(Ok(state)) => last = Some(describe(&state)),
            Ok(Err(e)) => last = Some(e.message),
            Err(_) => {}
        }
        let now = tokio::time::Instant::now();
        if now >= until {
            return Err(ProviderError::new(
                ErrorCode::Timeout,
                format!(
                    "gave up waiting for {} after {} ms{}",
                    wait.what,
                    wait.bound.as_millis(),
                    last.map(|l| format!("; last read: {l}"))
                        .unwrap_or_default()
                ),
            ));
        }
        let sleep = pause.min(until - now);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = cancel.cancelled() => {
                return Err(ProviderError::new(
                    ErrorCode::Aborted,
                    format!("waiting for {} was cancelled", wait.what),
                ));
            }
        }
        pause = (pause * 2).min(wait.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn the_first_accepted_state_is_returned_after_doubling_pauses() {
        let n = Arc::new(AtomicU32::new(0));
        let t = tokio::time::Instant::now();
        let w = Wait::new("the computer to stop", Duration::from_secs(60));
        let got = wait_until(
            &w,
            &CancellationToken::new(),
            || {
                let n = Arc::clone(&n);
                async move { Ok(n.fetch_add(1, Ordering::SeqCst)) }
            },
            |v| *v == 3,
            |v| v.to_string(),
        )
        .await
        .unwrap();
        assert_eq!(got, 3);
        // 250 + 500 + 1000 ms of pauses.
        assert_eq!(t.elapsed(), Duration::from_millis(1750));
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_bound_it_names_what_and_the_last_state() {
        let w = Wait::new("the computer to stop", Duration::from_secs(2));
        let e = wait_until(
            &w,
            &CancellationToken::new(),
            || async { Ok("running") },
            |_| false,
            |s| s.to_string(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Timeout);
        assert_eq!(
            e.message,
            "gave up waiting for the computer to stop after 2000 ms; last read: running"
        );
        let cancel = CancellationToken::new();
        cancel.cancel();
        let e = wait_until(
            &w,
            &cancel,
            || async { Ok(1) },
            |_| false,
            |_| String::new(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Aborted);
    }
}
