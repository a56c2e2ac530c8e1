//! Where a notification leaves: every sink it still needs publishes its message concurrently
//! under one deadline, and the answer is 202 only when all of them acknowledged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use http::StatusCode;
use serde::Serialize;

use super::Relay;
use crate::error::Error;
use crate::ledger::Ack;
use crate::notification::{Notification, Verified};
use crate::outcome::Outcome;
use crate::sink::{Message, Receipt, Sink, SinkError};

/// Whose publish it is, for the metrics: a live notification's, or a replay's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Traffic {
    /// A request's.
    Live,
    /// `relay replay`'s, counted apart.
    Replay,
}

/// What each sink did with its message, by sink name.
pub(super) type Published<'a> = Vec<(&'a str, Result<Receipt, SinkError>)>;

impl Relay {
    /// Publishes to the sinks concurrently, each until `deadline`.
    pub(super) async fn publish<'a>(
        &self,
        messages: Vec<(&'a Arc<dyn Sink>, Message)>,
        deadline: Instant,
        traffic: Traffic,
    ) -> Published<'a> {
        join_all(messages.into_iter().map(|(sink, message)| async move {
            let started = Instant::now();
            let publish = sink.publish(std::slice::from_ref(&message));
            let result = match tokio::time::timeout_at(deadline.into(), publish).await {
                Ok(results) => results.into_iter().next().unwrap_or_else(|| {
                    Err(SinkError::Permanent(
                        "the sink answered for no message".into(),
                    ))
                }),
                Err(_) => Err(SinkError::Retryable(
                    "no acknowledgement before the deadline".into(),
                )),
            };
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            match traffic {
                Traffic::Live => self
                    .metrics
                    .publish(sink.name(), result.as_ref(), latency_ms),
                Traffic::Replay => self
                    .metrics
                    .replay(sink.name(), result.as_ref(), latency_ms),
            }
            (sink.name(), result)
        }))
        .await
    }

    /// 202 when every sink acknowledged, listing each destination's message id (those `acked`
    /// by an earlier attempt as well): `published`, or `filtered` when only the archive took it;
    /// else 502 if any failure is permanent (retrying cannot fix it), else 503.
    pub(super) fn delivered(
        &self,
        notification: &Notification<Verified>,
        published: &Published<'_>,
        acked: &BTreeMap<String, Ack>,
        routes_version: Option<&str>,
        filtered: bool,
    ) -> Result<Outcome, Error> {
        let deliveries = deliveries(notification, published, acked)?;
        if filtered {
            return Ok(self.filtered(notification, &deliveries, routes_version));
        }
        Ok(Outcome::json(
            StatusCode::ACCEPTED,
            &Accepted {
                status: "published",
                dedup_key: notification.dedup_key(),
                deliveries: Some(&deliveries),
                routes_version,
            },
        ))
    }

    /// 202 `filtered`, with the archive's delivery when there is one.
    pub(super) fn filtered(
        &self,
        notification: &Notification<Verified>,
        deliveries: &[Delivery<'_>],
        routes_version: Option<&str>,
    ) -> Outcome {
        Outcome::json(
            StatusCode::ACCEPTED,
            &Filtered {
                status: "filtered",
                dedup_key: notification.dedup_key(),
                routes_version,
                deliveries: (!deliveries.is_empty()).then_some(deliveries),
            },
        )
    }
}

/// The body of a 202 `published` answer, written straight from the notification's fields.
#[derive(Serialize)]
struct Accepted<'a> {
    status: &'static str,
    dedup_key: &'a str,
    deliveries: Option<&'a [Delivery<'a>]>,
    routes_version: Option<&'a str>,
}

/// The body of a 202 `filtered` answer (`deliveries` only when the archive took it).
#[derive(Serialize)]
struct Filtered<'a> {
    status: &'static str,
    dedup_key: &'a str,
    routes_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deliveries: Option<&'a [Delivery<'a>]>,
}

/// One destination's delivery in a 202 answer; `earlier` when an earlier attempt made it.
#[derive(Serialize)]
pub(super) struct Delivery<'a> {
    sink: &'a str,
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    earlier: bool,
}

/// Every destination's delivery (`earlier` for those an earlier attempt acknowledged), or the
/// answer's error: the first permanent failure (502), else the first retryable one (503).
fn deliveries<'a>(
    notification: &Notification<Verified>,
    published: &'a Published<'_>,
    acked: &'a BTreeMap<String, Ack>,
) -> Result<Vec<Delivery<'a>>, Error> {
    let mut deliveries: Vec<_> = acked
        .iter()
        .map(|(sink, ack)| Delivery {
            sink,
            message_id: ack.message_id.as_deref(),
            earlier: true,
        })
        .collect();
    let mut failure: Option<Error> = None;
    for (sink, result) in published {
        match result {
            Ok(receipt) => deliveries.push(Delivery {
                sink,
                message_id: receipt.message_id.as_deref(),
                earlier: false,
            }),
            Err(e) => {
                let retryable = e.is_retryable();
                if retryable {
                    tracing::warn!(sink, error = %e, dedup_key = notification.dedup_key(), "Sink failed; the sender will retry.");
                } else {
                    tracing::error!(sink, error = %e, dedup_key = notification.dedup_key(), "Sink rejected the notification; an operator must act.");
                }
                let sink = (*sink).to_owned();
                failure = match failure {
                    Some(f @ Error::SinkFailed { .. }) => Some(f),
                    _ if !retryable => Some(Error::SinkFailed { sink }),
                    Some(f) => Some(f),
                    None => Some(Error::SinkRetryable { sink }),
                };
            }
        }
    }
    match failure {
        Some(failure) => Err(failure),
        None => Ok(deliveries),
    }
}
