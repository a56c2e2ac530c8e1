//! The one line each request is logged with, and the answer's metric.

use std::time::Instant;

use http::request::Parts;

use super::Relay;
use crate::notification::{Notification, Verified};
use crate::outcome::Outcome;

/// What the request's log line says about the notification, filled in as the path goes on.
#[derive(Debug, Default)]
pub(super) struct LogFields {
    pub(super) filtered: bool,
    /// Answered 202 `duplicate`: every routed destination had acknowledged.
    pub(super) duplicate: bool,
    /// The notification's identity, once it parsed, in one buffer.
    identity: Option<Identity>,
    pub(super) routes_version: Option<String>,
    pub(super) split: Option<String>,
    /// The request's trace id, when it carried a trace context.
    pub(super) trace_id: Option<String>,
}

/// The identity fields of the log line, in [`Field`]'s order, one after the other in one string
/// (one allocation a request, not six).
#[derive(Debug)]
struct Identity {
    text: String,
    /// Where each field ends in `text`; `None` for a field the notification does not have.
    ends: [Option<usize>; Field::COUNT],
}

/// The identity fields, in the order [`Identity`] keeps them.
#[derive(Clone, Copy)]
enum Field {
    Source,
    SubscriptionId,
    BundleUuid,
    DeliveryId,
    BundleVersion,
    EventType,
}

impl Field {
    const COUNT: usize = 6;
}

impl Identity {
    fn field(&self, field: Field) -> Option<&str> {
        let i = field as usize;
        let end = self.ends[i]?;
        let start = self.ends[..i]
            .iter()
            .rev()
            .find_map(|end| *end)
            .unwrap_or(0);
        Some(&self.text[start..end])
    }
}

impl LogFields {
    /// The notification's identity, once it parsed.
    pub(super) fn notification(&mut self, notification: &Notification<Verified>) {
        let fields: [Option<&str>; Field::COUNT] = [
            notification
                .has_configured_source()
                .then(|| notification.source()),
            notification.subscription_id(),
            notification.bundle_uuid(),
            notification.delivery_id(),
            notification.bundle_version(),
            notification.event_type(),
        ];
        let mut text = String::with_capacity(fields.iter().flatten().map(|f| f.len()).sum());
        let ends = fields.map(|field| {
            field.map(|field| {
                text.push_str(field);
                text.len()
            })
        });
        self.identity = Some(Identity { text, ends });
    }

    fn identity(&self, field: Field) -> Option<&str> {
        self.identity.as_ref()?.field(field)
    }
}

impl Relay {
    pub(super) fn log(
        &self,
        parts: &Parts,
        outcome: &Outcome,
        fields: &LogFields,
        started: Instant,
    ) {
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let status = outcome.status.as_u16();
        let code = outcome.code.unwrap_or(match status {
            _ if fields.filtered => "filtered",
            _ if fields.duplicate => "duplicate",
            200 => "ok",
            _ => "published",
        });
        self.metrics.answer(status, code, latency_ms);
        macro_rules! line {
            ($level:ident, $msg:literal) => {
                tracing::$level!(
                    method = %parts.method,
                    path = parts.uri.path(),
                    status,
                    code = outcome.code,
                    source = fields.identity(Field::Source),
                    subscription_id = fields.identity(Field::SubscriptionId),
                    bundle_uuid = fields.identity(Field::BundleUuid),
                    delivery_id = fields.identity(Field::DeliveryId),
                    bundle_version = fields.identity(Field::BundleVersion),
                    event_type = fields.identity(Field::EventType),
                    routes_version = fields.routes_version.as_deref(),
                    split = fields.split.as_deref(),
                    trace_id = fields.trace_id.as_deref(),
                    latency_ms,
                    $msg
                )
            };
        }
        match status {
            _ if fields.filtered => line!(info, "Notification filtered out: no route matched."),
            _ if fields.duplicate => line!(
                info,
                "Duplicate: every destination had acknowledged it; nothing published."
            ),
            200..=299 => line!(info, "Request answered."),
            502 => line!(error, "Notification not delivered."),
            _ => line!(warn, "Request refused."),
        }
    }
}
