//! Where a notification leaves: every destination it still needs publishes its message
//! concurrently under one deadline, and the answer is 202 only when all of them acknowledged.

use std::time::Instant;

use futures_util::future::join_all;
use http::StatusCode;
use serde::Serialize;

use super::Relay;
use super::attempt::{Attempted, Unsent};
use crate::error::Error;
use crate::notification::{Notification, Origin, Verified};
use crate::outcome::Outcome;
use crate::sink::{Destination, Message, Receipt, SinkError};

/// What each destination did with its message.
pub(super) type Published<'t> = Vec<(&'t Destination, Result<Receipt, SinkError>)>;

impl Relay {
    /// Publishes to the destinations concurrently, each until `deadline`; counted as a request's
    /// publishes, or apart as a replay's when the notification came from the archive.
    pub(super) async fn publish<'t>(
        &self,
        messages: Vec<(&'t Destination, Unsent)>,
        deadline: Instant,
        origin: Origin,
    ) -> Published<'t> {
        join_all(
            messages
                .into_iter()
                .map(|(destination, message)| async move {
                    let started = Instant::now();
                    let result = match message {
                        Ok(message) => self.publish_one(destination, &message, deadline).await,
                        Err(unsent) => Err(unsent),
                    };
                    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                    self.metrics.publish(
                        origin,
                        &destination.name,
                        &destination.resource,
                        result.as_ref(),
                        latency_ms,
                    );
                    (destination, result)
                }),
        )
        .await
    }

    /// One destination's publish of `message`, until `deadline`.
    async fn publish_one(
        &self,
        destination: &Destination,
        message: &Message,
        deadline: Instant,
    ) -> Result<Receipt, SinkError> {
        let publish = destination.sink.publish(message);
        match tokio::time::timeout_at(deadline.into(), publish).await {
            Ok(result) => result,
            Err(_) => Err(SinkError::Retryable(
                "no acknowledgement before the deadline".into(),
            )),
        }
    }

    /// The answer to a live attempt: 202 `duplicate` when every destination had acknowledged
    /// before it; 202 when every one acknowledged, listing each destination's message id (those
    /// an earlier attempt made as well): `published`, or `filtered` when only the archive took
    /// it; else 502 if any failure is permanent (retrying cannot fix it), else 503.
    pub(super) fn delivered(
        &self,
        notification: &Notification<Verified>,
        attempted: &Attempted<'_>,
        answered: Answered<'_>,
    ) -> Result<Outcome, Error> {
        let Answered {
            routes_version,
            filtered,
            trace_id,
        } = answered;
        let deliveries = deliveries(notification, attempted)?;
        let status = match (attempted.is_duplicate(), filtered) {
            (true, _) => {
                self.metrics.duplicate();
                "duplicate"
            }
            (false, true) => {
                return Ok(self.filtered(notification, &deliveries, routes_version, trace_id));
            }
            (false, false) => "published",
        };
        Ok(Outcome::json(
            StatusCode::ACCEPTED,
            &Accepted {
                status,
                dedup_key: notification.dedup_key(),
                deliveries: Some(&deliveries),
                routes_version,
                trace_id,
            },
        ))
    }

    /// 202 `filtered`, with the archive's delivery when there is one.
    pub(super) fn filtered(
        &self,
        notification: &Notification<Verified>,
        deliveries: &[Delivery<'_>],
        routes_version: Option<&str>,
        trace_id: Option<&str>,
    ) -> Outcome {
        Outcome::json(
            StatusCode::ACCEPTED,
            &Filtered {
                status: "filtered",
                dedup_key: notification.dedup_key(),
                routes_version,
                deliveries: (!deliveries.is_empty()).then_some(deliveries),
                trace_id,
            },
        )
    }
}

/// The body of a 202 `published` or `duplicate` answer, written straight from the
/// notification's fields.
#[derive(Serialize)]
struct Accepted<'a> {
    status: &'static str,
    dedup_key: &'a str,
    deliveries: Option<&'a [Delivery<'a>]>,
    routes_version: Option<&'a str>,
    /// The request's trace id, when it carried a trace context.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
}

/// How a delivered notification is answered, beside its deliveries.
pub(super) struct Answered<'a> {
    pub(super) routes_version: Option<&'a str>,
    /// No route took it.
    pub(super) filtered: bool,
    /// The request's trace id, if it carried a trace context.
    pub(super) trace_id: Option<&'a str>,
}

/// The body of a 202 `filtered` answer (`deliveries` only when the archive took it).
#[derive(Serialize)]
struct Filtered<'a> {
    status: &'static str,
    dedup_key: &'a str,
    routes_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deliveries: Option<&'a [Delivery<'a>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
}

/// One destination's delivery in a 202 answer: its configured name, what it delivers to, and
/// `earlier` when an earlier attempt made it.
#[derive(Serialize)]
pub(super) struct Delivery<'a> {
    sink: &'a str,
    resource: &'a str,
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    earlier: bool,
}

/// Every destination's delivery (`earlier` for those an earlier attempt acknowledged), or the
/// answer's error: the first permanent failure (502), else the first retryable one (503).
fn deliveries<'a>(
    notification: &Notification<Verified>,
    attempted: &'a Attempted<'_>,
) -> Result<Vec<Delivery<'a>>, Error> {
    let mut deliveries: Vec<_> = attempted
        .earlier
        .iter()
        .map(|(destination, ack)| Delivery {
            sink: &destination.name,
            resource: &destination.resource,
            message_id: ack.message_id.as_deref(),
            earlier: true,
        })
        .collect();
    let mut failure: Option<Error> = None;
    for (destination, result) in &attempted.published {
        let (sink, resource) = (destination.name.as_str(), destination.resource.as_str());
        match result {
            Ok(receipt) => deliveries.push(Delivery {
                sink,
                resource,
                message_id: receipt.message_id.as_deref(),
                earlier: false,
            }),
            Err(e) => {
                let retryable = e.is_retryable();
                if retryable {
                    tracing::warn!(sink, resource, error = %e, dedup_key = notification.dedup_key(), "Sink failed; the sender will retry.");
                } else if let Some(reason) = e.as_transform() {
                    tracing::error!(sink, resource, error = %reason, code = reason.code(), dedup_key = notification.dedup_key(), "The destination's transform yielded no message; it was not published to.");
                } else {
                    tracing::error!(sink, resource, error = %e, dedup_key = notification.dedup_key(), "Sink rejected the notification; an operator must act.");
                }
                let sink = sink.to_owned();
                let permanent = match e.as_transform() {
                    Some(reason) => Some(Error::TransformFailed {
                        sink,
                        reason: reason.to_string(),
                    }),
                    None if !retryable => Some(Error::SinkFailed { sink }),
                    None => None,
                };
                failure = match (failure, permanent) {
                    (Some(f), _) if f.status() == StatusCode::BAD_GATEWAY => Some(f),
                    (_, Some(permanent)) => Some(permanent),
                    (Some(f), None) => Some(f),
                    (None, None) => Some(Error::SinkRetryable {
                        sink: destination.name.clone(),
                    }),
                };
            }
        }
    }
    match failure {
        Some(failure) => Err(failure),
        None => Ok(deliveries),
    }
}
