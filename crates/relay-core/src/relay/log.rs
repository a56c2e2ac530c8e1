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
    source: Option<String>,
    subscription_id: Option<String>,
    bundle_uuid: Option<String>,
    delivery_id: Option<String>,
    bundle_version: Option<String>,
    event_type: Option<String>,
    pub(super) routes_version: Option<String>,
    pub(super) split: Option<String>,
}

impl LogFields {
    /// The notification's identity, once it parsed.
    pub(super) fn notification(&mut self, notification: &Notification<Verified>) {
        let text = |field: Option<&str>| field.map(str::to_owned);
        self.source = notification
            .has_configured_source()
            .then(|| notification.source().to_owned());
        self.subscription_id = text(notification.subscription_id());
        self.bundle_uuid = text(notification.bundle_uuid());
        self.bundle_version = text(notification.bundle_version());
        self.delivery_id = text(notification.delivery_id());
        self.event_type = notification.event_type().map(str::to_owned);
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
                    source = fields.source.as_deref(),
                    subscription_id = fields.subscription_id.as_deref(),
                    bundle_uuid = fields.bundle_uuid.as_deref(),
                    delivery_id = fields.delivery_id.as_deref(),
                    bundle_version = fields.bundle_version.as_deref(),
                    event_type = fields.event_type.as_deref(),
                    routes_version = fields.routes_version.as_deref(),
                    split = fields.split.as_deref(),
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
