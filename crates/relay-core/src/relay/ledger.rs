//! Where a notification is recorded: before any sink is called, the attempt claims the routed
//! destinations in the ledger; after they answered, it settles what they did. Without a
//! ledger (`RELAY_LEDGER_URL` unset) both steps do nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::Relay;
use super::publish::Published;
use crate::config::LedgerConfig;
use crate::error::Error;
use crate::ledger::{
    self, Ack, Attempt, Claim, Claimed, Delivery, Grant, HeldAttempt, Identity, LEASE_MARGIN_MS,
    Ledger, Settlement, epoch_ms,
};
use crate::notification::{Notification, Verified};

/// The ledger a relay records in, with its settings.
#[derive(Debug)]
pub(super) struct Recorder {
    pub(super) store: Arc<dyn Ledger>,
    pub(super) config: LedgerConfig,
}

/// An attempt's claim, granted: what it must settle.
#[derive(Debug)]
pub(super) struct Holding {
    /// The entry and the attempt, as the settlement names them.
    held: HeldAttempt,
    /// The entry's acknowledgements, by resource (or an earlier release's name): the routed
    /// destinations among them are not published again.
    pub(super) acks: BTreeMap<String, Ack>,
    /// When the notification's first attempt arrived.
    since_ms: i64,
}

impl Holding {
    /// The claim of attempt `holder` (its entry's bundle, its id) on the entry `key`, granted.
    fn granted(key: String, (bundle, holder): (String, String), grant: Grant) -> Self {
        Self {
            held: HeldAttempt {
                key,
                bundle,
                holder,
                attempt: grant.attempt,
                folded: grant.folded,
            },
            acks: super::attempt::all_acks(grant.acked, grant.others),
            since_ms: grant.since_ms,
        }
    }
}

/// A notification first received longer ago than this, with a destination still without an
/// acknowledgement after an attempt, counts as `Undelivered`.
pub(crate) const UNDELIVERED_AFTER_MS: i64 = 3_600_000;

/// Where the attempt was routed, for the ledger.
#[derive(Debug, Clone, Copy)]
pub(super) struct Routing<'a> {
    pub(super) destinations: &'a [&'a str],
    pub(super) routes_version: Option<&'a str>,
    pub(super) split: Option<&'a str>,
    /// A replay run's id: its deliveries are recorded under their own key
    /// (`replay:<run>:<ledger key>`), apart from the live ones; `None` for live attempts and
    /// for replays of the undelivered, which complete the live entry.
    pub(super) run: Option<&'a str>,
}

impl Relay {
    /// Claims `routing`'s destinations for this attempt (nothing when the relay keeps no
    /// ledger, or the notification is filtered and filtered ones are not recorded). Refused
    /// while another attempt holds one of them (503 `in_progress`); a ledger that does not
    /// answer by `deadline` is 503 `ledger_unavailable`, and nothing is published.
    pub(super) async fn claim(
        &self,
        notification: &Notification<Verified>,
        routing: Routing<'_>,
        received_at: SystemTime,
        deadline: Instant,
    ) -> Result<Option<Holding>, Error> {
        let Some(recorder) = &self.ledger else {
            return Ok(None);
        };
        if routing.destinations.is_empty() && !recorder.config.record_filtered {
            return Ok(None);
        }
        let identity = identity(notification);
        let key = key(recorder, &identity, notification.is_dss(), routing.run);
        let now_ms = epoch_ms(self.clock.now());
        let attempt = Attempt {
            id: ledger::attempt_id(),
            at_ms: epoch_ms(received_at),
            routes_version: routing.routes_version.map(str::to_owned),
            split: routing.split.map(str::to_owned),
            routed: routing
                .destinations
                .iter()
                .map(|d| (*d).to_owned())
                .collect(),
            outcome: None,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let claim = Claim {
            key: &key,
            identity: &identity,
            attempt: &attempt,
            lease_until_ms: now_ms
                .saturating_add(i64::try_from(left.as_millis()).unwrap_or(i64::MAX))
                .saturating_add(LEASE_MARGIN_MS),
            expires_at: expiry(now_ms, recorder),
        };
        let started = Instant::now();
        let answer =
            tokio::time::timeout_at(deadline.into(), recorder.store.claim(&claim, now_ms)).await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        match answer {
            Ok(Ok(Claimed::Granted(grant))) => {
                self.metrics.ledger("claim", "ok", latency_ms);
                let holder = (identity.bundle_uuid, attempt.id);
                Ok(Some(Holding::granted(key, holder, grant)))
            }
            Ok(Ok(Claimed::Busy { until_ms })) => {
                self.metrics.ledger("claim", "busy", latency_ms);
                let wait_ms = until_ms.saturating_sub(now_ms).max(0);
                let retry_after_secs = wait_ms.unsigned_abs().div_ceil(1000).max(1);
                tracing::info!(ledger_key = %key, retry_after_secs, "Another attempt of this notification is being delivered.");
                Err(Error::InProgress { retry_after_secs })
            }
            Ok(Err(e)) => {
                self.metrics.ledger("claim", "error", latency_ms);
                tracing::warn!(ledger_key = %key, error = %e, "The ledger did not take the claim; nothing is published.");
                Err(Error::LedgerUnavailable)
            }
            Err(_) => {
                self.metrics.ledger("claim", "error", latency_ms);
                tracing::warn!(ledger_key = %key, "The ledger did not answer the claim in time; nothing is published.");
                Err(Error::LedgerUnavailable)
            }
        }
    }

    /// The key `notification`'s attempts claim under (`run`: a replay run's); empty without a
    /// ledger.
    pub(super) fn ledger_key(
        &self,
        notification: &Notification<Verified>,
        run: Option<&str>,
    ) -> String {
        self.ledger
            .as_ref()
            .map(|recorder| {
                let identity = identity(notification);
                key(recorder, &identity, notification.is_dss(), run)
            })
            .unwrap_or_default()
    }

    /// Records what the sinks did and frees the attempt's leases. A settlement that fails is
    /// logged and leaves the answer as the sinks made it: what they acknowledged is delivered,
    /// and only a retry after the leases expire may publish it once more.
    pub(super) async fn settle(
        &self,
        holding: &Holding,
        published: &Published<'_>,
        carried: BTreeMap<String, Delivery>,
    ) {
        let Some(recorder) = &self.ledger else { return };
        let results = super::attempt::results(published, carried);
        let now_ms = epoch_ms(self.clock.now());
        let failed = results
            .values()
            .any(|d| matches!(d, Delivery::Failed { .. }));
        let waited_ms = now_ms.saturating_sub(holding.since_ms);
        if failed && waited_ms > UNDELIVERED_AFTER_MS {
            self.metrics.undelivered();
            tracing::warn!(ledger_key = %holding.held.key, waited_minutes = waited_ms / 60_000, "A notification first received over an hour ago still has a destination that has not acknowledged it; see relay trace, then relay replay --undelivered.");
        }
        let settlement = Settlement {
            held: &holding.held,
            results: &results,
            now_ms,
            expires_at: expiry(now_ms, recorder),
        };
        let started = Instant::now();
        let margin = std::time::Duration::from_millis(LEASE_MARGIN_MS.unsigned_abs());
        let answer = tokio::time::timeout(margin, recorder.store.settle(&settlement)).await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let error = match answer {
            Ok(Ok(())) => {
                self.metrics.ledger("settle", "ok", latency_ms);
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer in time".to_owned(),
        };
        self.metrics.ledger("settle", "error", latency_ms);
        tracing::error!(ledger_key = %holding.held.key, error, "The ledger did not record the deliveries; a retry after the leases expire publishes again.");
    }
}

/// Which notification an entry is about. Another source's event is recorded under its
/// source's name (as `subscription_id`) and its event id (as `bundle_uuid`, so that
/// `relay trace --bundle` finds it by its delivery id), with no version.
fn identity(notification: &Notification<Verified>) -> Identity {
    let (subscription_id, bundle_version) = match notification.is_dss() {
        true => (
            notification.subscription_id(),
            notification.bundle_version(),
        ),
        false => (Some(notification.source()), None),
    };
    let text = |field: Option<&str>| field.unwrap_or_default().to_owned();
    Identity {
        dedup_key: notification.dedup_key().to_owned(),
        subscription_id: text(subscription_id),
        bundle_uuid: bundle_of(notification).to_owned(),
        bundle_version: text(bundle_version),
        event_type: notification.event_type().map(str::to_owned),
    }
}

/// The entry's `bundle_uuid`: the bundle, or another source's event id (empty without one).
pub(super) fn bundle_of(notification: &Notification<Verified>) -> &str {
    match notification.is_dss() {
        true => notification.bundle_uuid(),
        false => notification.event_id(),
    }
    .unwrap_or_default()
}

/// The entry's key: the notification's ledger key (`RELAY_LEDGER_KEY` chooses it among a DSS
/// notification's fields; another source's event has only its dedup key), under a replay run's
/// prefix for its run.
fn key(recorder: &Recorder, identity: &Identity, dss: bool, run: Option<&str>) -> String {
    let key = match dss {
        true => recorder.config.key.of(identity),
        false => identity.dedup_key.clone(),
    };
    match run {
        Some(run) => format!("replay:{run}:{key}"),
        None => key,
    }
}

/// The entry's expiry after a write at `now_ms`: the retention later, in seconds.
fn expiry(now_ms: i64, recorder: &Recorder) -> i64 {
    let retention = i64::try_from(recorder.config.retention.as_secs()).unwrap_or(i64::MAX);
    now_ms.div_euclid(1000).saturating_add(retention)
}
