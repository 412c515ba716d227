//! Waiting until a new computer's daemon answers hello: tried again and
//! again within a bound, given up at once when the computer ended (with
//! what it said last) or the call was cancelled.

use std::time::Duration;

use crate::provider::Connection;
use crate::types::{ProviderError, Result};

/// One try at reaching a computer that is starting.
pub enum Try {
    /// It answered hello.
    Up(Connection),
    /// Not yet (what the try said, for the words of a wait given up).
    NotYet(ProviderError),
    /// It answered, and the answer refuses it: trying again would not help.
    Failed(ProviderError),
}

/// A computer being started, as its provider reaches it.
#[async_trait::async_trait]
pub trait Starting: Send {
    /// How long it gets to answer.
    const WITHIN: Duration;
    /// How long between two tries.
    const EVERY: Duration;

    /// Some refusal, with its last words, when it ended while starting.
    async fn ended(&mut self) -> Result<Option<ProviderError>>;

    /// Try once to reach it and say hello.
    async fn attempt(&mut self) -> Try;

    /// The words for a computer that did not answer within [`Self::WITHIN`];
    /// `last` is what the last try said.
    fn late(&self, last: ProviderError) -> ProviderError;
}

/// Try `computer` until it answers, within [`Starting::WITHIN`].
pub async fn wait_until_up<S: Starting>(
    computer: &mut S,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Connection> {
    let until = tokio::time::Instant::now() + S::WITHIN;
    loop {
        if cancel.is_cancelled() {
            return Err(super::aborted("creating the computer"));
        }
        if let Some(died) = computer.ended().await? {
            return Err(died);
        }
        let last = match computer.attempt().await {
            Try::Up(c) => return Ok(c),
            Try::Failed(e) => return Err(e),
            Try::NotYet(e) => e,
        };
        if tokio::time::Instant::now() >= until {
            return Err(computer.late(last));
        }
        tokio::time::sleep(S::EVERY).await;
    }
}
