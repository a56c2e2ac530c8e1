//! One attempt to deliver a notification, the one pipeline of live delivery, `relay replay`
//! and its backfill: the destinations it was routed to, each with its shaped message, are
//! claimed in the ledger; those no attempt acknowledged are published; what they did is
//! settled. The live path and a replay differ only in what they pass in: a deadline, and for a
//! replay its run; a replay's publishes are counted apart, by its notification's origin.
//!
//! A destination is known by its resource ([`Destination::resource`]). An acknowledgement an
//! earlier release recorded under the destination's old name (its sink's `name()`, such as
//! `sqs:<queue>`) counts as the destination's own where that name stands for it alone in the
//! routes in effect: it is carried over to the resource in the settlement, and nothing is
//! published. Where the name stands for several destinations, none of them can be said to have
//! acknowledged: each is published to, and the log and `LegacyAcknowledgements` say so.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime};

use super::Relay;
use super::ledger::Routing;
use super::publish::Published;
use crate::error::Error;
use crate::ledger::{Ack, Delivery};
use crate::live::RoutingTable;
use crate::notification::{Notification, Verified};
use crate::sink::{Destination, Message, SinkError, Unshaped};
use http::request::Parts;

/// A destination's message to publish, or why it has none.
pub(super) type Unsent = Result<Message, SinkError>;

/// What one attempt is asked to deliver.
pub(super) struct Attempt<'a, 't> {
    /// The notification, verified.
    pub(super) notification: &'a Notification<Verified>,
    /// The routing in effect, whose destinations `planned` names.
    pub(super) table: &'t RoutingTable,
    /// Each destination it was routed to (the archive last, when there is one), with its
    /// message shaped and size-checked. Empty when no route took it.
    pub(super) planned: Vec<(&'t Destination, Planned<'a>)>,
    /// The routes' version, the split, and a replay run's id.
    pub(super) routing: Routing<'a>,
    /// When it arrived (for a replay: now).
    pub(super) received_at: SystemTime,
    /// When every sink must have answered.
    pub(super) deadline: Instant,
    /// Whether the ledger records it (when there is one): not a filtered notification when
    /// `RELAY_LEDGER_RECORD_FILTERED` is off, nor `relay replay --again` without a ledger.
    pub(super) record: bool,
}

/// A destination's message: shaped and checked already, its transform's failure, or the
/// archive's record, written out only when the archive still needs it (a duplicate's never is).
pub(super) enum Planned<'a> {
    /// A routed destination's message.
    Shaped(Message),
    /// A routed destination whose transform yielded no body: that destination fails, alone.
    Untransformed(crate::transform::RunError),
    /// The archive's record, made from its parts only when it is written.
    Record(PendingRecord<'a>),
}

impl Planned<'_> {
    /// The message to publish, or the destination's failure without one.
    fn into_message(self) -> Result<Message, SinkError> {
        match self {
            Self::Shaped(message) => Ok(message),
            Self::Untransformed(error) => Err(SinkError::transform(error)),
            Self::Record(pending) => Ok(pending.record().message()),
        }
    }
}

/// What the archive's record of a live notification is made of: its request document, headers
/// kept, and the relay's message.
pub(super) struct PendingRecord<'a> {
    /// The notification's message before any shape.
    pub(super) base: &'a Message,
    /// The request it came in.
    pub(super) parts: &'a Parts,
    /// The request document, when routing already made it.
    pub(super) request: Option<serde_json::Value>,
    /// The headers routes name, which the record keeps too.
    pub(super) named: &'a BTreeSet<String>,
}

impl PendingRecord<'_> {
    fn record(self) -> crate::archive::Record {
        let request = self.request.unwrap_or_else(|| request_of(self.parts));
        crate::archive::Record::of(self.base, request, self.named)
    }
}

/// The request document of `parts` ([`request_document`](crate::route::request_document)).
pub(super) fn request_of(parts: &Parts) -> serde_json::Value {
    crate::route::request_document(parts.uri.path(), parts.uri.query(), &parts.headers)
}

/// The messages of `planned`, made.
fn messages<'t>(planned: Vec<(&'t Destination, Planned<'_>)>) -> Vec<(&'t Destination, Unsent)> {
    planned
        .into_iter()
        .map(|(destination, planned)| (destination, planned.into_message()))
        .collect()
}

/// What an attempt did.
#[derive(Debug)]
pub(super) struct Attempted<'t> {
    /// The destinations an earlier attempt (or an earlier release) had acknowledged: not
    /// published again.
    pub(super) earlier: Vec<(&'t Destination, Ack)>,
    /// What each destination still to do did with its message.
    pub(super) published: Published<'t>,
}

impl Attempted<'_> {
    /// True when there was something to deliver and every destination had acknowledged before.
    pub(super) fn is_duplicate(&self) -> bool {
        self.published.is_empty() && !self.earlier.is_empty()
    }
}

/// An acknowledgement found for a destination before publishing.
pub(super) struct Found {
    ack: Ack,
    /// The earlier release's name it was recorded under, when it was.
    carried_from: Option<String>,
}

/// `destination`'s message for `notification`: its shape applied, its size checked (502 when a
/// template cannot be filled, 413 over the destination's limit). A transform that yields no
/// body within `transform_timeout` and the destination's limit (its attributes counted) fails
/// that destination alone.
pub(super) fn shape(
    destination: &Destination,
    base: &Message,
    notification: &Notification<Verified>,
    transform_timeout: std::time::Duration,
) -> Result<Planned<'static>, Error> {
    let sink = destination.sink.name();
    let limits = crate::transform::Limits {
        timeout: transform_timeout,
        max_output: destination.max_message_bytes.unwrap_or(FILE_MESSAGE_BYTES),
    };
    let message = match destination.shape.apply(base, notification, limits) {
        Ok(message) => message,
        Err(Unshaped::Transform(error)) => return Ok(Planned::Untransformed(error)),
        Err(Unshaped::Template(e)) => {
            tracing::error!(sink, error = %e, "A template cannot be filled; an operator must act.");
            return Err(Error::SinkFailed {
                sink: sink.to_owned(),
            });
        }
    };
    if let Some(limit) = destination
        .max_message_bytes
        .filter(|&max| message.encoded_size() > max)
    {
        // A transformed body with its attributes over the limit is the transform's failure.
        if destination.shape.transforms() {
            let too_large = crate::transform::Unwritable::TooLarge { limit };
            return Ok(Planned::Untransformed(too_large.into()));
        }
        return Err(Error::MessageTooLarge {
            sink: sink.to_owned(),
            limit,
        });
    }
    Ok(Planned::Shaped(message))
}

/// The largest body a transform may yield for a destination without a message size limit (a
/// file).
const FILE_MESSAGE_BYTES: usize = 1 << 20;

impl Relay {
    /// Each routed destination with its message shaped and size-checked before any sink is
    /// called (a notification one of them cannot take is refused before anything leaves), then
    /// the archive with what its record is made of: the routing is done with the request
    /// document, so the record takes it. A duplicate's record is never made.
    pub(super) fn plan<'t>(
        &'t self,
        table: &'t RoutingTable,
        routed: &[usize],
        notification: &Notification<Verified>,
        base: &'t Message,
        parts: &'t Parts,
        request: Option<serde_json::Value>,
    ) -> Result<Vec<(&'t Destination, Planned<'t>)>, Error> {
        let mut planned = Vec::with_capacity(routed.len() + 1);
        for &i in routed {
            let destination = &table.destinations[i];
            let timeout = self.config.transform_timeout;
            let message = shape(destination, base, notification, timeout)?;
            planned.push((destination, message));
        }
        if let Some(archive) = &self.archive {
            let record = PendingRecord {
                base,
                parts,
                request,
                named: table.request_headers(),
            };
            planned.push((archive, Planned::Record(record)));
        }
        Ok(planned)
    }

    /// Claims, publishes what is missing and settles. Refused before anything is published
    /// while another attempt holds a destination (503 `in_progress`) or when the ledger does
    /// not answer (503 `ledger_unavailable`).
    pub(super) async fn attempt<'t>(
        &self,
        attempt: Attempt<'_, 't>,
    ) -> Result<Attempted<'t>, Error> {
        let origin = attempt.notification.origin();
        let resources: Vec<&str> = attempt
            .planned
            .iter()
            .map(|(d, _)| d.resource.as_str())
            .collect();
        let holding = match attempt.record {
            true => {
                let routing = Routing {
                    destinations: &resources,
                    ..attempt.routing
                };
                let (received_at, deadline) = (attempt.received_at, attempt.deadline);
                self.claim(attempt.notification, routing, received_at, deadline)
                    .await?
            }
            false => None,
        };
        let Some(holding) = holding else {
            let published = self
                .publish(messages(attempt.planned), attempt.deadline, origin)
                .await;
            return Ok(Attempted {
                earlier: Vec::new(),
                published,
            });
        };
        let mut earlier = Vec::new();
        let mut carried = BTreeMap::new();
        let mut todo = Vec::with_capacity(attempt.planned.len());
        for (destination, message) in attempt.planned {
            match self.acknowledged(attempt.table, destination, &holding.acks) {
                Some(found) => {
                    if let Some(from) = found.carried_from {
                        let delivery = Delivery::Acknowledged {
                            message_id: found.ack.message_id.clone(),
                            carried_from: Some(from),
                        };
                        carried.insert(destination.resource.clone(), delivery);
                    }
                    earlier.push((destination, found.ack));
                }
                None => todo.push((destination, message)),
            }
        }
        let published = match todo.is_empty() {
            true => Vec::new(),
            false => {
                let todo = messages(todo);
                self.publish(todo, attempt.deadline, origin).await
            }
        };
        if !(published.is_empty() && carried.is_empty()) {
            self.settle(&holding, &published, carried).await;
        }
        Ok(Attempted { earlier, published })
    }

    /// `destination`'s acknowledgement among an entry's `acks`: under its resource, else under
    /// an earlier release's name for it (its sink's name) when that name stands for no other
    /// destination in effect.
    pub(super) fn acknowledged(
        &self,
        table: &RoutingTable,
        destination: &Destination,
        acks: &BTreeMap<String, Ack>,
    ) -> Option<Found> {
        if let Some(ack) = acks.get(&destination.resource) {
            return Some(Found {
                ack: ack.clone(),
                carried_from: None,
            });
        }
        let legacy = destination.sink.name();
        let ack = acks.get(legacy)?;
        let named = table
            .destinations
            .iter()
            .chain(self.archive.as_ref())
            .filter(|d| d.sink.name() == legacy)
            .count();
        if named > 1 {
            self.metrics.legacy("ambiguous");
            tracing::warn!(sink = %destination.name, resource = %destination.resource, legacy, destinations = named, "An earlier release recorded an acknowledgement under a name several destinations share; this one is published to again.");
            return None;
        }
        self.metrics.legacy("carried");
        tracing::info!(sink = %destination.name, resource = %destination.resource, legacy, "An earlier release's acknowledgement now counts under the destination's resource.");
        Some(Found {
            ack: ack.clone(),
            carried_from: Some(legacy.to_owned()),
        })
    }

    /// The destinations an attempt would still publish to, and those done, for a dry run:
    /// `acks` are the notification's acknowledgements as the ledger holds them (an earlier
    /// release's names counted as [`attempt`](Self::attempt) counts them).
    pub(super) fn still_to_do<'t>(
        &self,
        table: &'t RoutingTable,
        destinations: &[&'t Destination],
        acks: &BTreeMap<String, Ack>,
    ) -> (Vec<&'t Destination>, Vec<&'t Destination>) {
        destinations
            .iter()
            .partition(|d| self.acknowledged(table, d, acks).is_none())
    }
}

/// The settlement's results: what each destination published to did, and the acknowledgements
/// carried over from an earlier release's names.
pub(super) fn results(
    published: &Published<'_>,
    carried: BTreeMap<String, Delivery>,
) -> BTreeMap<String, Delivery> {
    let mut results = carried;
    for (destination, result) in published {
        let delivery = match result {
            Ok(receipt) => Delivery::Acknowledged {
                message_id: receipt.message_id.clone(),
                carried_from: None,
            },
            Err(e) => Delivery::Failed {
                retryable: e.is_retryable(),
                error: error_text(e),
            },
        };
        results.insert(destination.resource.clone(), delivery);
    }
    results
}

/// The most of a failure's text an attempt's outcome keeps: enough to say what went wrong, not
/// an SDK's whole answer (which runs to kilobytes, on every failed attempt).
const MAX_ERROR_CHARS: usize = 300;

/// `e`'s text for the ledger, cut at [`MAX_ERROR_CHARS`] characters.
fn error_text(e: &crate::sink::SinkError) -> String {
    let text = e.to_string();
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The holding's acknowledgements, as the relay reads them: the routed ones and the entry's
/// others, in one map.
pub(super) fn all_acks(
    acked: BTreeMap<String, Ack>,
    others: BTreeMap<String, Ack>,
) -> BTreeMap<String, Ack> {
    let mut all = others;
    all.extend(acked);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::SinkError;

    #[test]
    fn a_failure_is_kept_in_a_few_hundred_characters() {
        let short = SinkError::Retryable("throttled".into());
        assert_eq!(error_text(&short), "temporarily unavailable: throttled");
        let long = SinkError::Permanent("é".repeat(5_000).into());
        let kept = error_text(&long);
        assert_eq!(kept.chars().count(), MAX_ERROR_CHARS + 1);
        assert!(
            kept.starts_with("failed: éé") && kept.ends_with('…'),
            "{kept}"
        );
    }
}
