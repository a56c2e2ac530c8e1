//! The notification model: what a DSS payload must hold, the event another source sent, the
//! stable deduplication key of each, next to the untouched payload bytes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

use crate::schemes::Proof;

/// Marker: the notification arrived without a checked signature (for `relay explain` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unverified;

/// Proof that a request passed its source's signature check: the key id that signed, and where
/// the proof came from. `Verified::new` is its one maker, called where a scheme's proof is
/// taken: a request verified now, or an archived record the relay verified when it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    key_id: Option<String>,
    origin: Origin,
}

/// Where a [`Verified`] proof came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The request's signature was checked now.
    Request,
    /// An archived record, which holds only what passed its check on arrival (and which the
    /// relay may only add to), sent again by `relay replay`.
    Archive,
}

impl Verified {
    /// The proof `proof` gave, from `origin`.
    pub(crate) fn new(proof: &Proof, origin: Origin) -> Self {
        Self {
            key_id: proof.key_id.clone(),
            origin,
        }
    }

    /// The key id that signed the request; `None` for an unsigned request the policy accepts.
    pub fn key_id(&self) -> Option<&str> {
        self.key_id.as_deref()
    }

    /// Where the proof came from.
    pub(crate) fn origin(&self) -> Origin {
        self.origin
    }

    /// A request's proof with this key id, for unit tests of what comes after the check.
    #[cfg(test)]
    pub(crate) fn for_tests(key_id: Option<&str>) -> Self {
        let proof = Proof {
            key_id: key_id.map(str::to_owned),
            ..Proof::default()
        };
        Self::new(&proof, Origin::Request)
    }
}

/// Which DSS subscription generation produced a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Elasticsearch subscriptions (`es_query`, no `event_type`).
    V1,
    /// JMESPath subscriptions (`event_type`, `dss_api`, `bundle_url`, …).
    V2,
}

impl Kind {
    /// `v1` or `v2`, as carried in the `dss.kind` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
        }
    }
}

/// Why a payload is not a DSS notification. Every variant answers 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The payload is empty.
    #[error("the notification payload is empty")]
    Empty,
    /// The payload is not JSON (or not UTF-8).
    #[error("the notification payload is not valid JSON: {0}")]
    InvalidJson(String),
    /// The payload is JSON but not an object.
    #[error("the notification payload must be a JSON object")]
    NotAnObject,
    /// A required field is absent.
    #[error("the field {0} is required")]
    MissingField(&'static str),
    /// A field has the wrong type or an empty value.
    #[error("the field {field} must be {expected}")]
    InvalidField {
        /// The dotted path of the field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// What identifies the event across the sender's retries (the source's `dedup_key`) is
    /// absent from the request.
    #[error("the request has no {0}, which identifies its event across retries")]
    MissingDedupKey(String),
}

impl PayloadError {
    /// The stable error code returned in the response body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty_payload",
            Self::InvalidJson(_) => "invalid_json",
            Self::NotAnObject => "not_an_object",
            Self::MissingField(_) => "missing_field",
            Self::InvalidField { .. } => "invalid_field",
            Self::MissingDedupKey(_) => "missing_dedup_key",
        }
    }
}

/// A parsed notification: a DSS notification's required fields, or another source's event. The
/// payload bytes are kept exactly as received; the parsed document is only read, never
/// re-serialized.
#[derive(Debug, Clone)]
pub struct Notification<S = Verified> {
    payload: Bytes,
    /// A DSS notification's is always a JSON object; another source's is its JSON body, its
    /// form fields as an object, or an empty object.
    document: Value,
    /// The configured source it came through; `None` for the DSS when no `[sources]` are
    /// configured.
    source: Option<Arc<str>>,
    /// The DSS fields; `None` for another source's event.
    dss: Option<DssFields>,
    event_type: Option<String>,
    /// Another source's delivery id, where its scheme sends one.
    delivery_id: Option<String>,
    /// What identifies another source's event across its retries, as text.
    event_id: Option<String>,
    dedup_key: String,
    state: S,
}

/// What every DSS notification carries.
#[derive(Debug, Clone)]
struct DssFields {
    subscription_id: String,
    bundle_uuid: String,
    bundle_version: String,
    transaction_id: Option<String>,
    kind: Kind,
}

/// The source the DSS is when no `[sources]` are configured, as routes see it under `$source`.
pub(crate) const DEFAULT_SOURCE: &str = "dss";

impl Notification<Unverified> {
    /// Parses payload bytes. The result can be inspected but not published: only a verified
    /// request yields a `Notification<Verified>`.
    pub fn parse(payload: Bytes) -> Result<Self, PayloadError> {
        if payload.iter().all(u8::is_ascii_whitespace) {
            return Err(PayloadError::Empty);
        }
        // What Python's json module writes but strict JSON refuses is read from a copy; the
        // payload itself is forwarded as it came.
        let (value, copy): (Value, _) = match serde_json::from_slice(&payload) {
            Ok(value) => (value, None),
            Err(strict) => {
                let copy = crate::lenient::readable_copy(&payload);
                let value = copy
                    .as_ref()
                    .and_then(|copy| serde_json::from_slice(&copy.text).ok())
                    .ok_or_else(|| PayloadError::InvalidJson(strict.to_string()))?;
                (value, copy)
            }
        };
        let Value::Object(ref document) = value else {
            return Err(PayloadError::NotAnObject);
        };
        let subscription_id = required(document.get("subscription_id"), "subscription_id")?;
        let matched = match document.get("match") {
            None => return Err(PayloadError::MissingField("match")),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(PayloadError::InvalidField {
                    field: "match",
                    expected: "an object",
                });
            }
        };
        let bundle_uuid = required(matched.get("bundle_uuid"), "match.bundle_uuid")?;
        let bundle_version = required(matched.get("bundle_version"), "match.bundle_version")?;
        let event_type = optional(document.get("event_type"), "event_type")?;
        let transaction_id = optional(document.get("transaction_id"), "transaction_id")?;
        let kind = if event_type.is_some() || document.contains_key("dss_api") {
            Kind::V2
        } else {
            Kind::V1
        };
        let fields = [
            subscription_id.as_str(),
            bundle_uuid.as_str(),
            bundle_version.as_str(),
            event_type.as_deref().unwrap_or(""),
        ];
        let dedup_key = match copy.filter(|copy| !copy.surrogates.is_empty()) {
            None => hash_fields(fields.map(str::as_bytes)),
            Some(copy) => surrogate_dedup_key(&copy, fields),
        };
        Ok(Self {
            payload,
            document: value,
            source: None,
            dss: Some(DssFields {
                subscription_id,
                bundle_uuid,
                bundle_version,
                transaction_id,
                kind,
            }),
            event_type,
            delivery_id: None,
            event_id: None,
            dedup_key,
            state: Unverified,
        })
    }

    /// The same notification, as having come through the configured source `source`. A DSS
    /// notification's dedup key stays the DSS's, whatever its source is named.
    pub(crate) fn through(mut self, source: Arc<str>) -> Self {
        self.source = Some(source);
        self
    }

    pub(crate) fn into_verified(self, proof: Verified) -> Notification<Verified> {
        Notification {
            payload: self.payload,
            document: self.document,
            source: self.source,
            dss: self.dss,
            event_type: self.event_type,
            delivery_id: self.delivery_id,
            event_id: self.event_id,
            dedup_key: self.dedup_key,
            state: proof,
        }
    }
}

/// Another source's event, as its scheme verified it.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// The body as received, forwarded byte for byte.
    pub(crate) payload: Bytes,
    /// What routes read: the JSON body, the form fields, or an empty object.
    pub(crate) document: Value,
    /// The configured source's name.
    pub(crate) source: Arc<str>,
    /// The event type, from the scheme's header or the configured field.
    pub(crate) event_type: Option<String>,
    /// The sender's delivery id, where the scheme has one.
    pub(crate) delivery_id: Option<String>,
    /// What identifies the event across the sender's retries, as the source's `dedup_key`
    /// rule read it.
    pub(crate) event_id: String,
}

impl Notification<Verified> {
    /// Another source's verified event. Its dedup key is [`source_dedup_key`] of the source
    /// and the event's id, so two sources never share one.
    pub(crate) fn event(event: Event, proof: Verified) -> Self {
        Notification {
            dedup_key: source_dedup_key(&event.source, &event.event_id),
            payload: event.payload,
            document: event.document,
            source: Some(event.source),
            dss: None,
            event_type: event.event_type,
            delivery_id: event.delivery_id,
            event_id: Some(event.event_id),
            state: proof,
        }
    }

    /// Another source's event read back from the archive, with the dedup key it was recorded
    /// under.
    pub(crate) fn archived_event(event: Event, dedup_key: &str, proof: Verified) -> Self {
        Self {
            dedup_key: dedup_key.to_owned(),
            ..Self::event(event, proof)
        }
    }

    /// The key that signed the request, if it was signed.
    pub fn key_id(&self) -> Option<&str> {
        self.state.key_id()
    }

    /// Where its proof came from: a request checked now, or the archive (a replay).
    pub(crate) fn origin(&self) -> Origin {
        self.state.origin()
    }
}

impl<S> Notification<S> {
    /// The exact payload bytes received; this is what every sink forwards.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The parsed payload (a JSON object), for reading fields: routing, templates. Never
    /// forward it.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// The source it came through, as routes see it under `$source`: a configured source's
    /// name, or `dss`.
    pub fn source(&self) -> &str {
        self.source.as_deref().unwrap_or(DEFAULT_SOURCE)
    }

    /// True when it came through a configured source (`[sources]`), which its attributes name.
    pub(crate) fn has_configured_source(&self) -> bool {
        self.source.is_some()
    }

    /// True for a DSS notification, which has the DSS fields.
    pub(crate) fn is_dss(&self) -> bool {
        self.dss.is_some()
    }

    /// `subscription_id`; `None` for another source's event.
    pub fn subscription_id(&self) -> Option<&str> {
        self.dss.as_ref().map(|d| d.subscription_id.as_str())
    }

    /// `match.bundle_uuid`; `None` for another source's event.
    pub fn bundle_uuid(&self) -> Option<&str> {
        self.dss.as_ref().map(|d| d.bundle_uuid.as_str())
    }

    /// `match.bundle_version`; `None` for another source's event.
    pub fn bundle_version(&self) -> Option<&str> {
        self.dss.as_ref().map(|d| d.bundle_version.as_str())
    }

    /// The event type: the DSS's `event_type` (`CREATE`, `TOMBSTONE`, `DELETE`; absent for
    /// v1), or another source's, where it names one.
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    /// `transaction_id`: one delivery attempt, never a deduplication key; DSS only.
    pub fn transaction_id(&self) -> Option<&str> {
        self.dss.as_ref().and_then(|d| d.transaction_id.as_deref())
    }

    /// The subscription generation; `None` for another source's event.
    pub fn kind(&self) -> Option<Kind> {
        self.dss.as_ref().map(|d| d.kind)
    }

    /// Another source's delivery id, where its scheme sends one.
    pub fn delivery_id(&self) -> Option<&str> {
        self.delivery_id.as_deref()
    }

    /// What identifies another source's event across its retries (its delivery id, the
    /// configured field's or header's value, or the body's SHA-256); `None` for the DSS, whose
    /// fields do.
    pub(crate) fn event_id(&self) -> Option<&str> {
        self.event_id.as_deref()
    }

    /// The stable deduplication key, equal across every DSS retry of the same event.
    pub fn dedup_key(&self) -> &str {
        &self.dedup_key
    }
}

fn required(value: Option<&Value>, field: &'static str) -> Result<String, PayloadError> {
    match value {
        None | Some(Value::Null) => Err(PayloadError::MissingField(field)),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(PayloadError::InvalidField {
            field,
            expected: "a non-empty string",
        }),
    }
}

fn optional(value: Option<&Value>, field: &'static str) -> Result<Option<String>, PayloadError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(_) => required(value, field).map(Some),
    }
}

/// The stable deduplication key: the lowercase hex SHA-256 of the four fields that stay the same
/// across DSS retries, each written as a netstring (`<byte length>:<value>,`) so that no two
/// different tuples hash the same input. `event_type` is the empty string for v1.
///
/// `transaction_id` and `event_timestamp` change on every attempt and are deliberately left out.
///
/// A parsed notification's key is this one, except that a field whose string in the payload
/// holds a lone surrogate escape (which reads as U+FFFD) enters as its code points in WTF-8, so
/// that such strings keep apart (docs/destinations.md).
pub fn dedup_key(
    subscription_id: &str,
    bundle_uuid: &str,
    bundle_version: &str,
    event_type: Option<&str>,
) -> String {
    hash_fields(
        [
            subscription_id,
            bundle_uuid,
            bundle_version,
            event_type.unwrap_or(""),
        ]
        .map(str::as_bytes),
    )
}

/// The dedup key of another source's event: the hash of [`dedup_key`] over the source's name,
/// an empty field and the event's id. A DSS key never has an empty second field (its
/// `bundle_uuid` is required), so the two never meet, and two sources never share a key.
pub fn source_dedup_key(source: &str, event_id: &str) -> String {
    hash_fields([source.as_bytes(), b"", event_id.as_bytes(), b""])
}

/// The hex SHA-256 of the fields' bytes, each as a netstring.
fn hash_fields(fields: [&[u8]; 4]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update(field.len().to_string());
        hasher.update(b":");
        hasher.update(field);
        hasher.update(b",");
    }
    hex::encode(hasher.finalize())
}

/// The dedup key of a payload read through a copy in which lone surrogate escapes became
/// U+FFFD (`fields` as read from it): a field whose string held one enters the hash as its code
/// points in WTF-8, the lone surrogate as its three UTF-8-style bytes, so `"\ud800"` and
/// `"\udbff"` keep apart. Every other field enters as its text, as in [`dedup_key`].
fn surrogate_dedup_key(copy: &crate::lenient::ReadableCopy, fields: [&str; 4]) -> String {
    let places = field_places(&copy.text);
    let mut bytes = fields.map(str::as_bytes);
    for (field, place) in bytes.iter_mut().zip(places) {
        if let Some((_, wtf8)) = place.and_then(|p| copy.surrogates.iter().find(|(s, _)| *s == p)) {
            *field = wtf8;
        }
    }
    hash_fields(bytes)
}

/// Where the dedup key's fields (the last of each name, as the parsed document has them) are
/// in `text`: `subscription_id`, `match.bundle_uuid`, `match.bundle_version`, `event_type`.
fn field_places(text: &[u8]) -> [Option<Range<usize>>; 4] {
    type Fields<'a> = BTreeMap<String, &'a RawValue>;
    let place = |raw: &RawValue| {
        let start = raw.get().as_ptr().addr() - text.as_ptr().addr();
        start..start + raw.get().len()
    };
    let Ok(top) = serde_json::from_slice::<Fields<'_>>(text) else {
        return Default::default();
    };
    let matched = top
        .get("match")
        .and_then(|m| serde_json::from_str::<Fields<'_>>(m.get()).ok());
    let inner = |name: &str| matched.as_ref().and_then(|m| m.get(name)).map(|r| place(r));
    [
        top.get("subscription_id").map(|r| place(r)),
        inner("bundle_uuid"),
        inner("bundle_version"),
        top.get("event_type").map(|r| place(r)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = r#"{"bundle_url": "https://dss.data.humancellatlas.org/v1/bundles/c86309f6-e5b7-4698-abb6-b81644573bff?version=2019-11-15T202303.689105Z", "dss_api": "https://dss.data.humancellatlas.org", "subscription_id": "8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11", "event_timestamp": "2019-11-15T202411.123456Z", "event_type": "CREATE", "match": {"bundle_uuid": "c86309f6-e5b7-4698-abb6-b81644573bff", "bundle_version": "2019-11-15T202303.689105Z"}, "transaction_id": "4b1b6f1e-86a4-4b9e-9d4c-3f4f8d2a9c10", "labels": {"x": 1}}"#;
    const V1: &str = r#"{"transaction_id": "9d0eb75c", "subscription_id": "222", "es_query": {"query": {}}, "match": {"bundle_uuid": "u", "bundle_version": "v"}, "attachments": {"_errors": "Attachments too large (131083 > 131072)"}}"#;

    #[test]
    fn parses_both_generations() {
        let v2 = Notification::parse(Bytes::from_static(V2.as_bytes())).unwrap();
        assert_eq!(v2.kind(), Some(Kind::V2));
        assert_eq!(v2.event_type(), Some("CREATE"));
        assert_eq!(
            v2.bundle_uuid(),
            Some("c86309f6-e5b7-4698-abb6-b81644573bff")
        );
        assert_eq!(v2.payload().as_ref(), V2.as_bytes());
        let v1 = Notification::parse(Bytes::from_static(V1.as_bytes())).unwrap();
        assert_eq!((v1.kind(), v1.event_type()), (Some(Kind::V1), None));
        assert_eq!(v1.subscription_id(), Some("222"));
    }

    #[test]
    fn dedup_key_ignores_the_transaction_and_timestamp() {
        let retry = V2
            .replace(
                "4b1b6f1e-86a4-4b9e-9d4c-3f4f8d2a9c10",
                "0d6e4f0c-8c8e-4bb0-9f57-2b0a8b1d6c42",
            )
            .replace("2019-11-15T202411.123456Z", "2019-11-15T203911.000001Z");
        let a = Notification::parse(Bytes::from_static(V2.as_bytes())).unwrap();
        let b = Notification::parse(Bytes::from(retry)).unwrap();
        assert_eq!(a.dedup_key(), b.dedup_key());
        let tombstone = V2.replace("CREATE", "TOMBSTONE");
        let c = Notification::parse(Bytes::from(tombstone)).unwrap();
        assert_ne!(a.dedup_key(), c.dedup_key());
    }

    #[test]
    fn dedup_key_is_the_documented_hash() {
        // sha256("1:s,1:u,1:v,0:,") computed independently with coreutils sha256sum.
        assert_eq!(
            dedup_key("s", "u", "v", None),
            "dd841814f85bebc3e74af20ffde439f8b6e4e67556449d1e9b8ef67f7f1181a5"
        );
        // Field boundaries matter: ("ab","c") and ("a","bc") differ.
        assert_ne!(
            dedup_key("ab", "c", "v", None),
            dedup_key("a", "bc", "v", None)
        );
    }

    #[test]
    fn names_the_offending_field() {
        let cases: [(&str, PayloadError); 7] = [
            ("", PayloadError::Empty),
            ("[1]", PayloadError::NotAnObject),
            (
                r#"{"match": {}}"#,
                PayloadError::MissingField("subscription_id"),
            ),
            (
                r#"{"subscription_id": 5, "match": {}}"#,
                PayloadError::InvalidField {
                    field: "subscription_id",
                    expected: "a non-empty string",
                },
            ),
            (
                r#"{"subscription_id": "s"}"#,
                PayloadError::MissingField("match"),
            ),
            (
                r#"{"subscription_id": "s", "match": {"bundle_uuid": "u"}}"#,
                PayloadError::MissingField("match.bundle_version"),
            ),
            (
                r#"{"subscription_id": "s", "match": {"bundle_uuid": "u", "bundle_version": "v"}, "event_type": 1}"#,
                PayloadError::InvalidField {
                    field: "event_type",
                    expected: "a non-empty string",
                },
            ),
        ];
        for (body, want) in cases {
            let got = Notification::parse(Bytes::from(body)).unwrap_err();
            assert_eq!(got, want, "{body}");
        }
    }

    #[test]
    fn lone_surrogates_keep_apart_in_the_dedup_key() {
        let key = |uuid: &str, extra: &str| {
            let body = format!(
                r#"{{"subscription_id": "s", "event_type": "CREATE", "match": {{"bundle_uuid": "{uuid}", "bundle_version": "v"}}{extra}}}"#
            );
            let notification = Notification::parse(Bytes::from(body)).unwrap();
            notification.dedup_key().to_owned()
        };
        let (high, other) = (key(r"bundle-\ud800", ""), key(r"bundle-\udbff", ""));
        assert_ne!(high, other);
        // Both read as U+FFFD, yet neither is the key of that text.
        let read = |uuid: &str| {
            let body = format!(
                r#"{{"subscription_id": "s", "match": {{"bundle_uuid": "{uuid}", "bundle_version": "v"}}}}"#
            );
            Notification::parse(Bytes::from(body))
                .unwrap()
                .bundle_uuid()
                .map(str::to_owned)
        };
        assert_eq!(read(r"bundle-\ud800"), read(r"bundle-\udbff"));
        assert_ne!(high, key("bundle-\u{fffd}", ""));
        assert_ne!(high, key(r"bundle-\ufffd", ""));
        // The documented rule, as Python computes it over json.loads and
        // str.encode("utf-8", "surrogatepass").
        assert_eq!(
            high,
            "5c3d95e4d071a7df216bba534047ec457d70ddfe3249cfda32c29fb86b2c71cf"
        );
        assert_eq!(
            other,
            "45a9a1c41a307cd0893912f34a35dacde3ac12f3b92fb3fbde52f01be7560806"
        );
        // A lone surrogate or NaN elsewhere leaves the key of the fields' text as it is.
        let plain = dedup_key("s", "bundle-x", "v", Some("CREATE"));
        assert_eq!(key("bundle-x", r#", "x": "\udc00", "y": NaN"#), plain);
        // Duplicate keys: the last one counts, as it does for routing.
        assert_eq!(
            key(
                r"bundle-\ud800",
                r#", "match": {"bundle_uuid": "bundle-x", "bundle_version": "v"}"#
            ),
            plain
        );
        // A pair is one character and no lone surrogate.
        assert_eq!(
            key(r"\ud83d\ude00\ud800\n", ""),
            hash_fields([b"s", b"\xf0\x9f\x98\x80\xed\xa0\x80\n", b"v", b"CREATE"])
        );
    }
}
