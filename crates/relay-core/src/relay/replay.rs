//! Where an archived notification is sent again (`relay replay`): read back from the archive,
//! routed by the routes in effect now (or sent to one named destination), shaped like a live
//! one with the attribute `relay.replayed = true`, and published through the ledger, so that a
//! replay run twice publishes nothing the second time.
//!
//! Two ways to record: [`ReplayRecord::Undelivered`] completes the live entry (only the
//! destinations no attempt acknowledged are published, and a live retry of the DSS at the same
//! moment is held off by the leases); [`ReplayRecord::Run`] records under the run's own key,
//! so a destination that had acknowledged (a consumer that lost the message since) gets it
//! again, once per run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use super::Relay;
use super::attempt::{Attempt, Attempted, Planned};
use super::ledger::Routing;
use crate::archive::Record;
use crate::error::Error;
use crate::live::RoutingTable;
use crate::notification::{Notification, Origin, PayloadError, Verified};
use crate::route::{Input, Pattern};
use crate::schemes::Proof;
use crate::sink::{Attributes, Destination, Message};

/// The attribute every replayed message carries, with the value `true`.
pub const REPLAYED: &str = "relay.replayed";

/// Which archived notifications a replay takes, beyond its time window.
#[derive(Debug, Clone, Default)]
pub struct ReplaySelection {
    /// Only this bundle's.
    pub bundle_uuid: Option<String>,
    /// Only this subscription's.
    pub subscription_id: Option<String>,
    /// Only this event type's (`CREATE`, `TOMBSTONE`, `DELETE`).
    pub event_type: Option<String>,
    /// Only those this routes pattern matches.
    pub pattern: Option<Pattern>,
}

impl ReplaySelection {
    /// Whether the selection takes `record`, by its attributes and, with a pattern, its payload.
    pub fn takes(&self, record: &Record) -> bool {
        let equal = |want: &Option<String>, name: &str| {
            want.as_deref()
                .is_none_or(|want| record.attribute(name) == Some(want))
        };
        if !(equal(&self.bundle_uuid, "dss.bundle_uuid")
            && equal(&self.subscription_id, "dss.subscription_id")
            && (equal(&self.event_type, "dss.event_type")
                || equal(&self.event_type, "relay.event_type")))
        {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let source = record
            .attribute("relay.source")
            .unwrap_or(crate::notification::DEFAULT_SOURCE);
        serde_json::from_slice::<Value>(&record.payload).is_ok_and(|document| {
            pattern.matches(&Input::new(&document, &record.request).from(source))
        })
    }
}

/// Where a replay sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayTo {
    /// Where the routes and splits in effect now send each notification.
    Routes,
    /// One destination, by name (a configured or stored sink, or `split:<name>`), for every
    /// selected notification.
    Destination(String),
}

/// How a replay records what it published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayRecord {
    /// In the live entry: only the destinations no attempt acknowledged are published.
    Undelivered,
    /// Under the run's own key: once per run, whatever the live attempts did.
    Run(String),
    /// Not at all (`--again` without a ledger): every selected notification is published.
    Unrecorded,
}

/// One replay's plan, the same for every notification it sends.
#[derive(Debug, Clone)]
pub struct ReplayPlan {
    /// Where to.
    pub to: ReplayTo,
    /// How it is recorded.
    pub record: ReplayRecord,
    /// Say what would be sent, and send nothing.
    pub dry_run: bool,
}

/// What became of one archived notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    /// No route takes it now.
    Filtered,
    /// Every destination had acknowledged it already (in this run, or live for
    /// [`ReplayRecord::Undelivered`]): nothing was sent.
    Done {
        /// The destinations.
        destinations: Vec<String>,
    },
    /// A dry run: where it would go.
    WouldSend {
        /// The destinations it would be published to.
        to: Vec<String>,
        /// Those skipped, having acknowledged.
        done: Vec<String>,
    },
    /// Published: every destination still to do acknowledged.
    Sent {
        /// The destinations published to, with their message ids.
        to: Vec<(String, Option<String>)>,
        /// Those skipped, having acknowledged.
        done: Vec<String>,
    },
    /// Another attempt (a live retry, another replay) holds a destination for this long.
    Busy {
        /// When to try again.
        retry_after: Duration,
    },
    /// A destination did not take it.
    Failed {
        /// The first destination that failed.
        sink: String,
        /// Whether trying again later may work.
        retryable: bool,
    },
}

/// Why a replay cannot send a notification at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// `--to` names no destination of the routes in effect.
    #[error("no destination {0:?} in the routes in effect (see relay check)")]
    UnknownDestination(String),
    /// The archived payload is not a notification the relay takes any more.
    #[error("the archived payload is refused: {0}")]
    Payload(#[from] PayloadError),
    /// The plan records in the ledger, and the relay has none.
    #[error(
        "RELAY_LEDGER_URL is not set: a replay records in the ledger (or use --again to publish without it)"
    )]
    NoLedger,
    /// The ledger did not answer.
    #[error("the ledger did not answer: {0}")]
    Ledger(String),
    /// A destination's message could not be made (a template, the size limit).
    #[error("{0}")]
    Shape(Error),
    /// A refused request's record is refused again by the configuration in effect.
    #[error("still refused ({code}): {0}", code = .0.code())]
    Refused(Error),
    /// A refused request's record does not make a request.
    #[error("the archived request is malformed: {0}")]
    Malformed(String),
}

impl Relay {
    /// The key the archive's records are sealed with, when the relay has an archive: what
    /// opens a record before it is replayed ([`Record::open`](crate::archive::Record::open)).
    pub fn archive_key(&self) -> Option<&crate::archive::ArchiveKey> {
        self.archive_key.as_ref()
    }

    /// The names of the destinations in effect: the sinks, then `split:<name>` per split.
    pub fn destination_names(&self) -> Vec<String> {
        let table = self.table.load();
        table.destinations.iter().map(|d| d.name.clone()).collect()
    }

    /// Sends `record` again as `plan` says, within the sink timeout.
    pub async fn replay(
        &self,
        record: &Record,
        plan: &ReplayPlan,
    ) -> Result<Replayed, ReplayError> {
        let routed = self.route_record(record, &plan.to).await?;
        if routed.indexes.is_empty() {
            return Ok(Replayed::Filtered);
        }
        let table = &routed.table;
        let mut planned = Vec::with_capacity(routed.indexes.len());
        for &i in &routed.indexes {
            let destination = &table.destinations[i];
            let timeout = self.config.transform_timeout;
            let (base, notification) = (&routed.base, &routed.notification);
            let mut shaped = super::attempt::shape(destination, base, notification, timeout)
                .map_err(ReplayError::Shape)?;
            if let Planned::Shaped(message) = &mut shaped {
                destination.shape.mark(message, REPLAYED, "true");
            }
            planned.push((destination, shaped));
        }
        let run = match &plan.record {
            ReplayRecord::Run(run) => Some(run.as_str()),
            ReplayRecord::Undelivered | ReplayRecord::Unrecorded => None,
        };
        let record = plan.record != ReplayRecord::Unrecorded;
        if record && self.ledger.is_none() {
            return Err(ReplayError::NoLedger);
        }
        if plan.dry_run {
            return self
                .would_send(&routed.notification, table, &planned, run, record)
                .await;
        }
        let now = self.clock.now();
        let attempted = self
            .attempt(Attempt {
                notification: &routed.notification,
                table,
                planned,
                routing: Routing {
                    destinations: &[],
                    routes_version: table.version.as_ref().map(|v| v.0.as_str()),
                    split: routed.split.as_deref(),
                    run,
                },
                received_at: now,
                deadline: Instant::now() + self.config.sink_timeout,
                record,
            })
            .await;
        match attempted {
            Ok(attempted) => Ok(outcome(&attempted)),
            Err(Error::InProgress { retry_after_secs }) => Ok(Replayed::Busy {
                retry_after: Duration::from_secs(retry_after_secs),
            }),
            Err(e) => Err(ReplayError::Ledger(e.to_string())),
        }
    }

    /// `record` opened again (a refused request through the configuration in effect) and
    /// routed by the routes in effect now, or to the one destination `to` names.
    pub(super) async fn route_record(
        &self,
        record: &Record,
        to: &ReplayTo,
    ) -> Result<Routed, ReplayError> {
        let (notification, base) = match record.refused {
            Some(_) => self.reopen_refused(record).await?,
            None => {
                let notification = reopen(record)?;
                let base = message_of(record, &notification);
                (notification, base)
            }
        };
        let table = self.table.load_full();
        let (indexes, split) = match to {
            ReplayTo::Routes => {
                let input = Input::new(notification.document(), &record.request)
                    .from(notification.source());
                let decision = table.decide(&input, self.clock.now());
                (decision.destinations, decision.split)
            }
            ReplayTo::Destination(name) => {
                let wanted = |n: &str| table.destinations.iter().position(|d| d.name == n);
                let index = wanted(name)
                    .or_else(|| wanted(&format!("split:{name}")))
                    .ok_or_else(|| ReplayError::UnknownDestination(name.clone()))?;
                (vec![index], None)
            }
        };
        Ok(Routed {
            notification,
            base,
            table,
            indexes,
            split,
        })
    }

    /// A dry run: where each destination stands in the ledger (its live entries, unexpired),
    /// as an attempt would find it.
    async fn would_send(
        &self,
        notification: &Notification<Verified>,
        table: &RoutingTable,
        planned: &[(&Destination, Planned<'_>)],
        run: Option<&str>,
        record: bool,
    ) -> Result<Replayed, ReplayError> {
        let destinations: Vec<&Destination> = planned.iter().map(|(d, _)| *d).collect();
        let names = |list: Vec<&Destination>| list.into_iter().map(|d| d.name.clone()).collect();
        let Some(recorder) = self.ledger.as_ref().filter(|_| record) else {
            return Ok(Replayed::WouldSend {
                to: names(destinations),
                done: Vec::new(),
            });
        };
        let acks = self
            .live_entries(recorder, notification, run)
            .await?
            .into_iter()
            .flat_map(|e| e.acks)
            .collect();
        let (to, done) = self.still_to_do(table, &destinations, &acks);
        Ok(Replayed::WouldSend {
            to: names(to),
            done: names(done),
        })
    }
}

/// An archived notification opened again and routed: the destinations it goes to, by their
/// index in the routing table they were decided by.
pub(super) struct Routed {
    pub(super) notification: Notification<Verified>,
    base: Message,
    pub(super) table: Arc<RoutingTable>,
    pub(super) indexes: Vec<usize>,
    split: Option<String>,
}

/// The unshaped message of an archived notification: its bytes and the attributes it was
/// archived with, under its dedup key and receipt time.
fn message_of(record: &Record, notification: &Notification<Verified>) -> Message {
    let mut attributes = Attributes::default();
    for (name, value) in &record.attributes {
        attributes.push(name, value);
    }
    Message {
        payload: Bytes::clone(&record.payload),
        attributes,
        dedup_key: notification.dedup_key().to_owned(),
        group_id: None,
        dedup_id: None,
        ordering_key: None,
        received_at: record.received_at,
        // A replay starts a trace of its own, if any: the sender's has long ended.
        trace: None,
    }
}

/// What became of a replayed notification's attempt: every destination done already, or sent
/// (where the first that failed says so).
fn outcome(attempted: &Attempted<'_>) -> Replayed {
    let done: Vec<String> = attempted
        .earlier
        .iter()
        .map(|(d, _)| d.name.clone())
        .collect();
    if attempted.published.is_empty() {
        return Replayed::Done { destinations: done };
    }
    let mut to = Vec::with_capacity(attempted.published.len());
    for (destination, result) in &attempted.published {
        match result {
            Ok(receipt) => to.push((destination.name.clone(), receipt.message_id.clone())),
            Err(e) => {
                tracing::warn!(sink = %destination.name, resource = %destination.resource, error = %e, "A replayed notification was not taken.");
                return Replayed::Failed {
                    sink: destination.name.clone(),
                    retryable: e.is_retryable(),
                };
            }
        }
    }
    Replayed::Sent { to, done }
}

/// The notification an archived record holds, as it was verified on arrival: a DSS
/// notification parsed again (through its source, when the record names one), another source's
/// event from its recorded attributes, its request's `Content-Type` and its dedup key.
fn reopen(record: &Record) -> Result<Notification<Verified>, ReplayError> {
    let proof = Proof {
        key_id: record.attribute("relay.key_id").map(str::to_owned),
        ..Proof::default()
    };
    let proof = Verified::new(&proof, Origin::Archive);
    let source = record.attribute("relay.source");
    if record.attribute("dss.subscription_id").is_some() || source.is_none() {
        let notification = Notification::parse(record.payload.clone())?;
        let notification = match source {
            Some(source) => notification.through(source.into()),
            None => notification,
        };
        return Ok(notification.into_verified(proof));
    }
    let mut headers = http::HeaderMap::new();
    let content_type = record.request["headers"]["content-type"][0].as_str();
    if let Some(value) = content_type.and_then(|t| http::HeaderValue::from_str(t).ok()) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    let document = crate::source::document(&headers, &record.payload)?;
    Ok(Notification::archived_event(
        crate::notification::Event {
            payload: record.payload.clone(),
            document,
            source: source.unwrap_or_default().into(),
            event_type: record.attribute("relay.event_type").map(str::to_owned),
            delivery_id: record.attribute("relay.delivery_id").map(str::to_owned),
            event_id: record
                .attribute("relay.delivery_id")
                .unwrap_or(&record.dedup_key)
                .to_owned(),
        },
        &record.dedup_key,
        proof,
    ))
}
