//! CloudEvents 1.0 (`format = "cloudevents"` on a sink): on Pub/Sub in binary mode, the event's
//! attributes as `ce-` message attributes and the payload as the data, byte for byte (the
//! Pub/Sub protocol binding); on SQS and SNS in structured mode, a JSON envelope as the body,
//! the payload its `data` (its text, when it is strict JSON) or `data_base64`.
//!
//! The event: `id` the dedup key (the same across the sender's retries), `source`
//! `/dss/subscriptions/<subscription_id>` (another sender's: `/sources/<name>`), `type`
//! `org.humancellatlas.dss.bundle.<event, lowercase>` (`…bundle.match` for a v1 notification,
//! which has no event; another sender's: its event type, else `<name>.event`), `time` when the
//! relay received it (RFC 3339), `datacontenttype` `application/json` when the payload is JSON.

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::Attributes;
use crate::notification::{Notification, Verified};

/// A sink's `format`: what its messages are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The payload byte for byte, with the relay's attributes (the default).
    #[default]
    Raw,
    /// A CloudEvent: binary mode on Pub/Sub, structured mode on SQS and SNS.
    Cloudevents,
}

impl Format {
    /// The default, which a sink table leaves out.
    pub(crate) fn is_raw(&self) -> bool {
        *self == Self::Raw
    }
}

/// How a destination carries a CloudEvent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `ce-` attributes beside the payload (Pub/Sub).
    Binary,
    /// A JSON envelope in place of the payload (SQS, SNS).
    Structured,
}

/// The CloudEvents spec version.
const SPEC_VERSION: &str = "1.0";

/// One notification's event attributes.
#[derive(Debug, Serialize)]
pub(super) struct CloudEvent<'a> {
    specversion: &'static str,
    id: &'a str,
    source: String,
    #[serde(rename = "type")]
    kind: String,
    time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    datacontenttype: Option<&'static str>,
    /// The payload as JSON text, when it is strict JSON (parsed once, here).
    #[serde(skip)]
    json: Option<&'a RawValue>,
}

impl<'a> CloudEvent<'a> {
    /// The event of `notification`, received at `received_at`, whose payload is `payload`.
    pub(super) fn of(
        notification: &'a Notification<Verified>,
        payload: &'a [u8],
        received_at: std::time::SystemTime,
    ) -> Self {
        let json = std::str::from_utf8(payload)
            .ok()
            .and_then(|text| serde_json::from_str::<&RawValue>(text).ok());
        let (source, kind) = match notification.is_dss() {
            true => {
                let subscription = notification.subscription_id().unwrap_or_default();
                let event = notification.event_type().unwrap_or("match");
                (
                    format!("/dss/subscriptions/{subscription}"),
                    format!("org.humancellatlas.dss.bundle.{}", event.to_lowercase()),
                )
            }
            false => {
                let name = notification.source();
                let kind = notification
                    .event_type()
                    .map_or_else(|| format!("{name}.event"), str::to_owned);
                (format!("/sources/{name}"), kind)
            }
        };
        Self {
            specversion: SPEC_VERSION,
            id: notification.dedup_key(),
            source,
            kind,
            time: humantime::format_rfc3339_millis(received_at).to_string(),
            datacontenttype: json.is_some().then_some("application/json"),
            json,
        }
    }

    /// Binary mode: the attributes, each `ce-<name>`.
    pub(super) fn attributes(&self, attributes: &mut Attributes) {
        attributes.push("ce-specversion", self.specversion);
        attributes.push("ce-id", self.id);
        attributes.push("ce-source", &self.source);
        attributes.push("ce-type", &self.kind);
        attributes.push("ce-time", &self.time);
        if let Some(content_type) = self.datacontenttype {
            attributes.push("ce-datacontenttype", content_type);
        }
    }

    /// Structured mode: the envelope, the payload its `data` when it is JSON, else its
    /// `data_base64`.
    pub(super) fn envelope(&self, payload: &[u8]) -> Bytes {
        #[derive(Serialize)]
        struct Envelope<'e> {
            #[serde(flatten)]
            event: &'e CloudEvent<'e>,
            #[serde(skip_serializing_if = "Option::is_none")]
            data: Option<&'e RawValue>,
            #[serde(skip_serializing_if = "Option::is_none")]
            data_base64: Option<String>,
        }
        let data = self.json;
        let data_base64 = data
            .is_none()
            .then(|| base64::engine::general_purpose::STANDARD.encode(payload));
        let envelope = Envelope {
            event: self,
            data,
            data_base64,
        };
        Bytes::from(serde_json::to_vec(&envelope).expect("an envelope always serializes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(text: &'static str) -> Notification<Verified> {
        Notification::parse(Bytes::from_static(text.as_bytes()))
            .unwrap()
            .into_verified(Verified::for_tests(Some("hca-dss:x")))
    }

    const V2: &str = r#"{"subscription_id": "s-1", "event_type": "TOMBSTONE", "match": {"bundle_uuid": "u", "bundle_version": "v"}, "dss_api": "https://dss.example"}"#;

    /// CloudEvents 1.0's required attributes, each a non-empty string.
    fn assert_required(event: &serde_json::Value) {
        for required in ["specversion", "id", "source", "type"] {
            let value = event[required].as_str().unwrap_or_default();
            assert!(!value.is_empty(), "{required} in {event}");
        }
        assert_eq!(event["specversion"], "1.0");
    }

    #[test]
    fn structured_mode_wraps_the_payload_as_data() {
        let notification = v2(V2);
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_796_428_800_123);
        let event = CloudEvent::of(&notification, V2.as_bytes(), at);
        let envelope: serde_json::Value =
            serde_json::from_slice(&event.envelope(V2.as_bytes())).unwrap();
        assert_required(&envelope);
        assert_eq!(envelope["id"], notification.dedup_key());
        assert_eq!(envelope["source"], "/dss/subscriptions/s-1");
        assert_eq!(envelope["type"], "org.humancellatlas.dss.bundle.tombstone");
        assert_eq!(envelope["time"], "2026-12-05T00:00:00.123Z");
        assert_eq!(envelope["datacontenttype"], "application/json");
        let data: serde_json::Value = serde_json::from_str(V2).unwrap();
        assert_eq!(envelope["data"], data);
        assert!(envelope.get("data_base64").is_none());
        // The payload's own text, unchanged, inside the envelope.
        let text = String::from_utf8(event.envelope(V2.as_bytes()).to_vec()).unwrap();
        assert!(text.contains(V2), "{text}");
    }

    #[test]
    fn a_payload_that_is_not_strict_json_goes_as_base64() {
        const NAN: &str = r#"{"subscription_id": "s-1", "match": {"bundle_uuid": "u", "bundle_version": "v"}, "score": NaN}"#;
        let notification = v2(NAN);
        let event = CloudEvent::of(&notification, NAN.as_bytes(), std::time::UNIX_EPOCH);
        let envelope: serde_json::Value =
            serde_json::from_slice(&event.envelope(NAN.as_bytes())).unwrap();
        assert_required(&envelope);
        // A v1 notification (no event type) is a match.
        assert_eq!(envelope["type"], "org.humancellatlas.dss.bundle.match");
        assert!(envelope.get("data").is_none() && envelope.get("datacontenttype").is_none());
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(envelope["data_base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(decoded, NAN.as_bytes());
    }

    #[test]
    fn binary_mode_is_the_attributes_alone() {
        let notification = v2(V2);
        let event = CloudEvent::of(&notification, V2.as_bytes(), std::time::UNIX_EPOCH);
        let mut attributes = Attributes::default();
        event.attributes(&mut attributes);
        let names: Vec<&str> = attributes.iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "ce-specversion",
                "ce-id",
                "ce-source",
                "ce-type",
                "ce-time",
                "ce-datacontenttype"
            ]
        );
        assert_eq!(attributes.get("ce-time"), Some("1970-01-01T00:00:00.000Z"));
    }
}
