//! `request_takeover`'s server side: a link to the computer's viewer, the
//! request marked on the computer (its reason shown on every open view),
//! an elicitation to the client where it takes one, and the wait for the
//! person to take control and give it back.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use computer_tools::fleet::{PageSeen, TakeoverAsk, TakeoverOutcome};
use computerd::client::{ComputerClient, ComputerExt};
use computerd::protocol::SettingKind;
use sha2::{Digest, Sha256};

use super::Views;
use super::control::Waited;
use super::grants::rfc3339;
use crate::app::Entry;

/// How long the client has to answer an elicitation.
const ELICIT_WAIT: Duration = Duration::from_secs(1800);

/// A browser's front tab, as the person finds or leaves it; None where
/// it cannot be read.
async fn front_page(client: &dyn ComputerClient) -> Option<PageSeen> {
    let t = computer_providers::cdp::front::front(client).await.ok()?;
    Some(PageSeen {
        url: t.url,
        title: t.title,
    })
}

/// A desktop's or phone's screen as a hash of its pixels (a whole
/// screenshot's PNG: the pointer is not drawn in it); None where it
/// cannot be read.
async fn screen_hash(client: &Arc<dyn ComputerClient>) -> Option<[u8; 32]> {
    let (_, png) = client.screen_shot(None).await.ok()?;
    Some(Sha256::digest(&png).into())
}

/// Ask a person to take `entry`'s control, as `ask` says. What the person
/// changed is read on the model's own client (a second connection to a
/// computer's own browser would end it): a browser's front tab before and
/// after, or a desktop's or phone's screen hashed before and after.
pub async fn run(
    views: &Views,
    entry: &Entry,
    ask: &TakeoverAsk,
    peer: Option<Peer<RoleServer>>,
    cancel: &CancellationToken,
) -> Result<TakeoverOutcome, String> {
    let link = views.link(entry, false)?;
    let url = link.url.unwrap_or_default();
    let sent_before = views.control.sent(&entry.handle);
    let browser = (entry.kind == SettingKind::Browser).then(|| entry.client.as_ref());
    let screen = matches!(entry.kind, SettingKind::Desktop | SettingKind::Phone);
    let page_before = match browser {
        Some(b) => front_page(b).await,
        None => None,
    };
    let screen_before = match screen {
        true => screen_hash(&entry.client).await,
        false => None,
    };
    // The wait is counted from here (the reads above are not the person's).
    let started = SystemTime::now();
    let computer = entry.label();
    let declined = elicit(peer, &ask.reason, &url, &computer);
    let waited = views
        .control
        .request(
            &entry.handle,
            &ask.reason,
            Duration::from_secs(ask.timeout_s),
            cancel,
            declined,
        )
        .await?;
    let waited_s = SystemTime::now()
        .duration_since(started)
        .unwrap_or_default()
        .as_secs();
    let (outcome, taken, held) = match waited {
        Waited::GivenBack { taken, held } => ("given_back", Some(taken), Some(held)),
        Waited::StillHeld { taken, held } => ("still_held", Some(taken), Some(held)),
        Waited::NotTaken => ("not_taken", None, None),
        Waited::Declined => ("declined", None, None),
        Waited::Cancelled => ("cancelled", None, None),
    };
    let page_after = match (browser, taken) {
        (Some(b), Some(_)) => front_page(b).await,
        _ => None,
    };
    let screen_changed = match (screen_before, taken) {
        (Some(b), Some(_)) => screen_hash(&entry.client).await.map(|a| a != b),
        _ => None,
    };
    Ok(TakeoverOutcome {
        computer: entry.label(),
        outcome: outcome.to_string(),
        url,
        taken_at: taken.map(rfc3339),
        held_s: held.map(|h| h.as_secs()),
        waited_s,
        inputs: taken.map(|_| views.control.sent(&entry.handle) - sent_before),
        page_before: page_before.filter(|_| taken.is_some()),
        page_after,
        screen_changed,
    })
}

/// Send the request to the client as an elicitation where it takes one (a
/// URL elicitation where it takes those, else a form whose message holds
/// the link). Resolves only if the person turns it down; never otherwise.
async fn elicit(peer: Option<Peer<RoleServer>>, reason: &str, url: &str, computer: &str) {
    let Some(peer) = peer else {
        return std::future::pending().await;
    };
    let Some(caps) = peer
        .peer_info()
        .and_then(|i| i.capabilities.elicitation.clone())
    else {
        return std::future::pending().await;
    };
    let message = format!("The model asks you to take control of {computer}'s screen: {reason}");
    let params = if caps.url.is_some() {
        ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message,
            url: url.to_string(),
            elicitation_id: computer_providers::random::random_hex(16).unwrap_or_default(),
        }
    } else {
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "{message}\nOpen {url} and press \"Take control\"; give it back when done."
            ),
            requested_schema: ElicitationSchema::builder().build_unchecked(),
        }
    };
    match peer
        .create_elicitation_with_timeout(params, Some(ELICIT_WAIT))
        .await
    {
        Ok(r)
            if matches!(
                r.action,
                ElicitationAction::Decline | ElicitationAction::Cancel
            ) => {}
        Ok(_) => std::future::pending().await,
        Err(e) => {
            tracing::debug!("request_takeover's elicitation was not answered: {e}");
            std::future::pending().await
        }
    }
}
