//! One archived notification, as one JSON document:
//!
//! ```json
//! {"format": "dss-relay-archive/1", "received_at": "2026-12-02T07:15:00.123Z",
//!  "dedup_key": "…", "attributes": {"relay.dedup_key": "…", "dss.bundle_uuid": "…"},
//!  "request": {"path": "/", "query": {}, "headers": {"content-type": ["application/json"]}},
//!  "payload": "{\"transaction_id\": …}"}
//! ```
//!
//! `payload` is the payload text as a JSON string, so `jq -j .payload` gives back the bytes the
//! sender sent; a payload that is not UTF-8 is kept as `payload_base64` instead.
//!
//! A request that verified and was then refused is recorded too ([`Record::refused`]): its
//! whole body as `payload`, under the key `refused-<SHA-256 of the body>`, with
//! `"refused": {"status": 400, "code": "missing_payload_field", "message": "…"}`.

use std::collections::BTreeSet;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::ArchiveKey;
use crate::json;
use crate::sink::{Attributes, Message};

/// The `format` of every record this relay writes.
pub(crate) const FORMAT: &str = "dss-relay-archive/1";

/// The request headers a record keeps, besides those a route names: what describes a request
/// without granting anything (the DSS's, each sender's event and delivery headers, the trace
/// context). Every other header is dropped, and named in `dropped_headers`.
pub const KEPT_HEADERS: &[&str] = &[
    "accept",
    "accept-encoding",
    "content-digest",
    "content-encoding",
    "content-length",
    "content-type",
    "date",
    "digest",
    "host",
    "traceparent",
    "tracestate",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "x-amzn-trace-id",
    "x-cloud-trace-context",
    "x-github-delivery",
    "x-github-event",
    "x-github-hook-id",
    "x-github-hook-installation-target-id",
    "x-github-hook-installation-target-type",
    "x-shopify-api-version",
    "x-shopify-event-id",
    "x-shopify-shop-domain",
    "x-shopify-topic",
    "x-shopify-triggered-at",
    "x-shopify-webhook-id",
    "x-slack-request-timestamp",
    "x-slack-retry-num",
    "x-slack-retry-reason",
];

/// True for a header that may carry a credential or a signature: never kept, even when a
/// route names it.
pub fn is_secret_header(name: &str) -> bool {
    const WORDS: [&str; 9] = [
        "auth",
        "cookie",
        "sig",
        "hmac",
        "token",
        "secret",
        "key",
        "password",
        "credential",
    ];
    match name.bytes().any(|b| b.is_ascii_uppercase()) {
        true => is_secret_header(&name.to_ascii_lowercase()),
        false => WORDS.iter().any(|word| name.contains(word)),
    }
}

/// Keeps the headers of [`KEPT_HEADERS`] and those routes name (`named`) in `request`, never one
/// that may carry a credential or a signature ([`is_secret_header`]); the names of those
/// dropped, in order.
fn keep_headers(request: &mut Value, named: &BTreeSet<String>) -> Vec<String> {
    let mut dropped = Vec::new();
    if let Some(headers) = request.get_mut("headers").and_then(Value::as_object_mut) {
        headers.retain(|name, _| {
            let kept = (KEPT_HEADERS.contains(&name.as_str()) || named.contains(name))
                && !is_secret_header(name);
            if !kept {
                dropped.push(name.clone());
            }
            kept
        });
    }
    dropped
}

/// One verified notification, as archived.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// When the relay received it.
    pub received_at: SystemTime,
    /// Its dedup key.
    pub dedup_key: String,
    /// The relay's attributes, in order.
    pub attributes: Vec<(String, String)>,
    /// The request's path, query and kept headers, as routes see `$request`.
    pub request: Value,
    /// The names of the request headers not kept, in order.
    pub dropped_headers: Vec<String>,
    /// The payload bytes exactly as received (of a refused request, its whole body).
    pub payload: Bytes,
    /// Set when the request verified and was then refused: what it was answered.
    pub refused: Option<Refused>,
}

/// What a verified request was answered when it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The status: 400 or 415.
    pub status: u16,
    /// The error code.
    pub code: String,
    /// The error message.
    pub message: String,
}

/// The prefix of a refused request's dedup key (and object name): `refused-<SHA-256 of the
/// body>`, so that the sender's retries of it find one record.
pub const REFUSED_PREFIX: &str = "refused-";

/// Why an object is not a record.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, or not the record's fields.
    #[error("not an archive record: {0}")]
    Malformed(String),
    /// Written by a relay of a format this one does not read.
    #[error("archive record format {0:?}, expected {FORMAT:?}")]
    Format(String),
    /// Not sealed: written by an earlier release, or not by a relay.
    #[error(
        "not sealed with the archive's key (RELAY_ARCHIVE_KEY): written by an earlier release, or not by a relay"
    )]
    Unsealed,
    /// Sealed, but not by this key, or changed since.
    #[error(
        "its seal does not match: sealed with another RELAY_ARCHIVE_KEY, or changed since it was written"
    )]
    Forged,
}

/// A record as read back.
#[derive(Deserialize)]
struct Document {
    format: String,
    received_at: String,
    dedup_key: String,
    #[serde(default)]
    attributes: Map<String, Value>,
    #[serde(default)]
    request: Value,
    #[serde(default)]
    dropped_headers: Vec<String>,
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    payload_base64: Option<String>,
    #[serde(default)]
    refused: Option<Refused>,
}

impl Record {
    /// The record of `message` (unshaped: every relay attribute) and its request document,
    /// keeping only the headers of [`KEPT_HEADERS`] and those routes name (`named`), and never
    /// one that may carry a credential or a signature ([`is_secret_header`]): whoever reads the
    /// archive cannot send the signed request again (the keyId stays, as the attribute
    /// `relay.key_id`).
    pub fn of(message: &Message, mut request: Value, named: &BTreeSet<String>) -> Self {
        let dropped_headers = keep_headers(&mut request, named);
        Self {
            received_at: message.received_at,
            dedup_key: message.dedup_key.clone(),
            attributes: message
                .attributes
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect(),
            request,
            dropped_headers,
            payload: message.payload.clone(),
            refused: None,
        }
    }

    /// The record of a request that verified and was then `refused`: its whole `body`, the
    /// `attributes` its signature proved, and its request document with the headers kept as
    /// [`of`](Self::of) keeps them (`Content-Type` among them: a multipart body's boundary).
    pub fn refused(
        received_at: SystemTime,
        body: Bytes,
        attributes: Vec<(String, String)>,
        mut request: Value,
        named: &BTreeSet<String>,
        refused: Refused,
    ) -> Self {
        let dropped_headers = keep_headers(&mut request, named);
        Self {
            received_at,
            dedup_key: format!("{REFUSED_PREFIX}{}", hex::encode(Sha256::digest(&body))),
            attributes,
            request,
            dropped_headers,
            payload: body,
            refused: Some(refused),
        }
    }

    /// The record as the archive's destination takes it: a message whose payload is the
    /// record's bytes, with the notification's dedup key and receipt time (its object key).
    pub fn message(&self) -> Message {
        Message {
            payload: Bytes::from(self.to_bytes()),
            attributes: Attributes::default(),
            dedup_key: self.dedup_key.clone(),
            group_id: None,
            dedup_id: None,
            ordering_key: None,
            received_at: self.received_at,
            trace: None,
        }
    }

    /// The record's JSON document, written from the record's own fields without copying them.
    pub fn to_bytes(&self) -> Vec<u8> {
        /// The attributes as one JSON object, in their order.
        struct InOrder<'a>(&'a [(String, String)]);
        impl Serialize for InOrder<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
            }
        }
        #[derive(Serialize)]
        struct Written<'a> {
            format: &'static str,
            received_at: String,
            dedup_key: &'a str,
            attributes: InOrder<'a>,
            request: &'a Value,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            dropped_headers: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            refused: Option<&'a Refused>,
            #[serde(skip_serializing_if = "Option::is_none")]
            payload_base64: Option<String>,
        }
        let text = std::str::from_utf8(&self.payload).ok();
        let document = Written {
            format: FORMAT,
            received_at: humantime::format_rfc3339_millis(self.received_at).to_string(),
            dedup_key: &self.dedup_key,
            attributes: InOrder(&self.attributes),
            request: &self.request,
            dropped_headers: &self.dropped_headers,
            refused: self.refused.as_ref(),
            payload_base64: text.is_none().then(|| BASE64.encode(&self.payload)),
        };
        let mut out = Vec::with_capacity(self.payload.len() + 1024);
        serde_json::to_writer(&mut out, &document).expect("a record always serializes");
        // A UTF-8 payload is the document's last member, copied in place rather than escaped a
        // byte at a time.
        if let Some(text) = text {
            out.pop();
            out.extend_from_slice(b",\"payload\":");
            json::utf8(&mut out, text.as_bytes());
            out.push(b'}');
        }
        out
    }

    /// A record read back from its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RecordError> {
        let malformed = |e: &dyn std::fmt::Display| RecordError::Malformed(e.to_string());
        let document: Document = serde_json::from_slice(bytes).map_err(|e| malformed(&e))?;
        if document.format != FORMAT {
            return Err(RecordError::Format(document.format));
        }
        let received_at =
            humantime::parse_rfc3339(&document.received_at).map_err(|e| malformed(&e))?;
        let payload = match (document.payload, document.payload_base64) {
            (Some(text), None) => Bytes::from(text),
            (None, Some(encoded)) => {
                Bytes::from(BASE64.decode(encoded).map_err(|e| malformed(&e))?)
            }
            _ => return Err(malformed(&"expected one of payload and payload_base64")),
        };
        let attributes = document
            .attributes
            .into_iter()
            .map(|(name, value)| match value {
                Value::String(value) => Ok((name, value)),
                other => Err(malformed(&format!(
                    "attribute {name}: {other} is not a string"
                ))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            received_at,
            dedup_key: document.dedup_key,
            attributes,
            request: document.request,
            dropped_headers: document.dropped_headers,
            payload,
            refused: document.refused,
        })
    }

    /// The record sealed in `sealed`, when `key` sealed it ([`ArchiveKey::open`]).
    pub fn open(key: &ArchiveKey, sealed: &[u8]) -> Result<Self, RecordError> {
        Self::from_bytes(&key.open(sealed)?)
    }

    /// True when `other` is a record of the same notification: its dedup key and payload.
    pub(crate) fn same_notification(&self, other: &Self) -> bool {
        self.dedup_key == other.dedup_key && self.payload == other.payload
    }

    /// The value of the attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn record(payload: &'static [u8]) -> Record {
        Record {
            received_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_658_800_123),
            dedup_key: "k".into(),
            attributes: vec![
                ("relay.dedup_key".into(), "k".into()),
                ("dss.bundle_uuid".into(), "b".into()),
            ],
            request: serde_json::json!({"path": "/", "query": {}, "headers": {}}),
            dropped_headers: Vec::new(),
            payload: Bytes::from_static(payload),
            refused: None,
        }
    }

    #[test]
    fn a_record_reads_back_byte_for_byte() {
        for payload in [
            &b"{\"a\": NaN, \"s\": \"\\udc00\"}\r\n"[..],
            &b"{\"caf\xc3\xa9\": 1}"[..],
            &b"\xff\xfe not utf-8"[..],
        ] {
            let record = record(payload);
            let back = Record::from_bytes(&record.to_bytes()).unwrap();
            assert_eq!(back, record);
            assert_eq!(&back.payload[..], payload);
        }
        let refused = Record {
            refused: Some(Refused {
                status: 400,
                code: "missing_payload_field".into(),
                message: "no \"match\"".into(),
            }),
            ..record(b"{\"q\": \"\\\"\"}")
        };
        assert_eq!(Record::from_bytes(&refused.to_bytes()).unwrap(), refused);
        let text: Value = serde_json::from_slice(&record(b"{}").to_bytes()).unwrap();
        assert_eq!(text["payload"], "{}");
        assert_eq!(text["received_at"], "2025-12-02T07:00:00.123Z");
        assert_eq!(record(b"{}").attribute("dss.bundle_uuid"), Some("b"));
    }

    #[test]
    fn what_is_not_a_record_is_refused() {
        assert!(matches!(
            Record::from_bytes(b"{}"),
            Err(RecordError::Malformed(_))
        ));
        let other = br#"{"format":"x/2","received_at":"2025-12-02T07:00:00Z","dedup_key":"k","payload":"{}"}"#;
        assert!(matches!(Record::from_bytes(other), Err(RecordError::Format(f)) if f == "x/2"));
        let both = br#"{"format":"dss-relay-archive/1","received_at":"2025-12-02T07:00:00Z","dedup_key":"k","payload":"{}","payload_base64":"e30="}"#;
        assert!(Record::from_bytes(both).is_err());
    }

    /// What every sender signs with, and every header that carries a credential, is never
    /// kept, even when a route names it; descriptive headers and those routes name are.
    #[test]
    fn records_keep_no_signature_and_no_credential() {
        let secrets = [
            "authorization",
            "proxy-authorization",
            "cookie",
            "x-api-key",
            "x-amz-security-token",
            "x-hub-signature",
            "x-hub-signature-256",
            "x-shopify-hmac-sha256",
            "stripe-signature",
            "x-slack-signature",
            "webhook-signature",
            "signature",
            "signature-input",
            "x-sig",
        ];
        let mut headers = serde_json::Map::new();
        for name in secrets.iter().chain(&[
            "content-type",
            "x-github-event",
            "x-forwarded-for",
            "x-tenant",
        ]) {
            headers.insert((*name).to_owned(), serde_json::json!(["v"]));
        }
        let request = serde_json::json!({"path": "/", "query": {}, "headers": headers});
        let message = Message {
            payload: Bytes::from_static(b"{}"),
            attributes: Attributes::default(),
            dedup_key: "k".into(),
            group_id: None,
            dedup_id: None,
            ordering_key: None,
            received_at: SystemTime::UNIX_EPOCH,
            trace: None,
        };
        // A route names x-tenant, and (wrongly) x-api-key.
        let named: BTreeSet<String> = ["x-tenant".to_owned(), "x-api-key".to_owned()].into();
        assert!(is_secret_header("X-Hub-Signature-256") && !is_secret_header("Content-Type"));
        let record = Record::of(&message, request, &named);
        let kept: Vec<&String> = record.request["headers"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(kept, ["content-type", "x-github-event", "x-tenant"]);
        let mut dropped = record.dropped_headers.clone();
        dropped.sort();
        let mut expected: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
        expected.push("x-forwarded-for".into());
        expected.sort();
        assert_eq!(dropped, expected);
        let back = Record::from_bytes(&record.to_bytes()).unwrap();
        assert_eq!(back.dropped_headers, record.dropped_headers);
        let text = String::from_utf8(record.to_bytes()).unwrap();
        for secret in secrets {
            assert!(
                !text.contains(&format!("\"{secret}\":[")),
                "{secret} kept: {text}"
            );
        }
        assert!(KEPT_HEADERS.iter().all(|h| !is_secret_header(h)));
    }
}
