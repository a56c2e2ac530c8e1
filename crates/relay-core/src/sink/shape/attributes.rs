//! The relay's message attributes, in their fixed priority order, and the one unsigned header
//! the relay forwards: `X-DSS-Notify-Attempt`.

use std::sync::Arc;

use crate::notification::{Notification, Verified};

/// An attribute's name or value: a static string (the relay's own names) or a part of a shared
/// one (a notification's values, all in one buffer). Cloning one never copies text.
#[derive(Debug, Clone)]
enum Text {
    Static(&'static str),
    Part(Arc<str>, usize, usize),
}

impl Text {
    /// `text` in a buffer of its own.
    fn owned(text: &str) -> Self {
        Self::Part(Arc::from(text), 0, text.len())
    }

    fn as_str(&self) -> &str {
        match self {
            Self::Static(text) => text,
            Self::Part(buffer, start, end) => &buffer[*start..*end],
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

/// Message attributes in their fixed priority order. Sinks with an attribute cap (SQS allows
/// ten) keep the first ones.
///
/// Cloning is cheap: the list is shared until a destination's shape changes it, the relay's
/// names are static and a notification's values share one buffer, so the message of every
/// destination (and every batch entry) carries the same text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes(Arc<Vec<(Text, Text)>>);

impl Attributes {
    /// A DSS notification's attribute names in priority order. Names absent for a notification
    /// are skipped.
    pub(crate) const ORDER: [&'static str; 9] = [
        "relay.dedup_key",
        "dss.subscription_id",
        "dss.bundle_uuid",
        "dss.bundle_version",
        "dss.event_type",
        "dss.kind",
        "dss.transaction_id",
        "dss.notify_attempt",
        "relay.key_id",
    ];

    /// The names another source's event carries, in priority order; a DSS notification that
    /// came through a configured source carries `relay.source` too, after its own.
    pub(crate) const SOURCE_ORDER: [&'static str; 5] = [
        "relay.dedup_key",
        "relay.source",
        "relay.event_type",
        "relay.delivery_id",
        "relay.key_id",
    ];

    /// The most attributes one message carries before a destination's selection: a DSS
    /// notification's nine (a configured source's name is the first to go where a destination
    /// keeps fewer).
    pub(crate) const MOST: usize = Self::ORDER.len();

    /// Every attribute name the relay sets, DSS ones first.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::ORDER.into_iter().chain(
            Self::SOURCE_ORDER
                .into_iter()
                .filter(|n| !Self::ORDER.contains(n)),
        )
    }

    /// Derives the attributes of a verified notification; `notify_attempt` is the DSS v1
    /// `X-dss-notify-attempt` header when present.
    pub fn derive(n: &Notification<Verified>, notify_attempt: Option<&str>) -> Self {
        let source = n.has_configured_source().then(|| n.source());
        if !n.is_dss() {
            let values = [
                Some(n.dedup_key()),
                source,
                n.event_type(),
                n.delivery_id(),
                n.key_id(),
            ];
            return Self::of(Self::SOURCE_ORDER.into_iter().zip(values));
        }
        let kind = n.kind().map(crate::notification::Kind::as_str);
        let values = [
            Some(n.dedup_key()),
            n.subscription_id(),
            n.bundle_uuid(),
            n.bundle_version(),
            n.event_type(),
            kind,
            n.transaction_id(),
            notify_attempt.filter(|a| !a.is_empty()),
            n.key_id(),
        ];
        Self::of(
            Self::ORDER
                .into_iter()
                .zip(values)
                .chain([("relay.source", source)]),
        )
    }

    /// The attributes named, those with a value, their values in one buffer: one allocation,
    /// however many destinations.
    fn of<'a>(pairs: impl Iterator<Item = (&'static str, Option<&'a str>)> + Clone) -> Self {
        let length = pairs.clone().filter_map(|(_, v)| v).map(str::len).sum();
        let mut buffer = String::with_capacity(length);
        let mut ranges = Vec::with_capacity(Self::MOST + 1);
        for (name, value) in pairs {
            if let Some(value) = value {
                let start = buffer.len();
                buffer.push_str(value);
                ranges.push((name, start, buffer.len()));
            }
        }
        let buffer: Arc<str> = buffer.into();
        Self(Arc::new(
            ranges
                .into_iter()
                .map(|(name, start, end)| {
                    (
                        Text::Static(name),
                        Text::Part(Arc::clone(&buffer), start, end),
                    )
                })
                .collect(),
        ))
    }

    /// Keeps the attributes whose name passes `keep` (the list is copied only when one goes;
    /// `keep` may be asked twice about a name).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if self.0.iter().all(|(name, _)| keep(name.as_str())) {
            return;
        }
        Arc::make_mut(&mut self.0).retain(|(name, _)| keep(name.as_str()));
    }

    /// Keeps the first `n` attributes.
    pub(crate) fn truncate(&mut self, n: usize) {
        if self.0.len() > n {
            Arc::make_mut(&mut self.0).truncate(n);
        }
    }

    /// Appends an attribute.
    pub fn push(&mut self, name: &str, value: &str) {
        Arc::make_mut(&mut self.0).push((Text::owned(name), Text::owned(value)));
    }

    /// Appends every attribute of `other`, sharing its text.
    pub(crate) fn append(&mut self, other: &Attributes) {
        if !other.is_empty() {
            Arc::make_mut(&mut self.0).extend(other.0.iter().cloned());
        }
    }

    /// Inserts every attribute of `other` before the attribute `name`, or after the last one
    /// when there is none of that name, sharing its text.
    pub(crate) fn insert_before(&mut self, name: &str, other: &Attributes) {
        if other.is_empty() {
            return;
        }
        let list = Arc::make_mut(&mut self.0);
        let at = list
            .iter()
            .position(|(n, _)| n.as_str() == name)
            .unwrap_or(list.len());
        list.splice(at..at, other.0.iter().cloned());
    }

    /// Adds an attribute before every other, replacing one of the same name.
    pub(crate) fn put_first(&mut self, name: &str, value: &str) {
        let list = Arc::make_mut(&mut self.0);
        list.retain(|(n, _)| n.as_str() != name);
        list.insert(0, (Text::owned(name), Text::owned(value)));
    }

    /// The value of one attribute.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// All attributes, in priority order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// How many attributes there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The DSS v1 retry-queue index header; forwarded as the `dss.notify_attempt` attribute.
pub(crate) const NOTIFY_ATTEMPT: &str = "x-dss-notify-attempt";

/// The `X-DSS-Notify-Attempt` value, kept only when it is a small decimal number: the header is
/// not signed, so anything else is dropped (and logged by length, never by value).
pub(crate) fn notify_attempt(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(NOTIFY_ATTEMPT)?;
    let text = value
        .to_str()
        .ok()
        .filter(|t| (1..=4).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit()));
    if text.is_none() {
        tracing::warn!(
            length = value.len(),
            "X-DSS-Notify-Attempt is not a small number; dropped."
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::notification::Verified;

    const V2: &str = r#"{"subscription_id": "s", "event_type": "CREATE", "match": {"bundle_uuid": "u", "bundle_version": "v"}, "transaction_id": "t", "bundle_url": "https://dss.example/v1/bundles/u?version=v", "dss_api": "https://dss.example", "event_timestamp": "2019-11-15T202411.123456Z"}"#;
    const V1: &str = r#"{"transaction_id": "t", "subscription_id": "s", "es_query": {"query": {}}, "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#;

    fn verified(json: &'static str, key_id: Option<&str>) -> Notification<Verified> {
        Notification::parse(Bytes::from_static(json.as_bytes()))
            .unwrap()
            .into_verified(Verified::for_tests(key_id))
    }

    #[test]
    fn attributes_follow_the_priority_order() {
        let attrs = Attributes::derive(&verified(V2, Some("hca-dss:x")), Some("0"));
        let names: Vec<&str> = attrs.iter().map(|(k, _)| k).collect();
        assert_eq!(names, Attributes::ORDER.to_vec());
        assert_eq!(attrs.get("dss.kind"), Some("v2"));
        let attrs = Attributes::derive(&verified(V1, None), None);
        assert_eq!(attrs.get("dss.event_type"), None);
        assert_eq!(attrs.get("relay.key_id"), None);
        assert_eq!(attrs.len(), 6);
    }

    #[test]
    fn the_attempt_header_is_kept_only_as_a_small_number() {
        let mut headers = http::HeaderMap::new();
        for (value, kept) in [("3", Some("3")), ("12345", None), ("x", None), ("", None)] {
            headers.insert(NOTIFY_ATTEMPT, http::HeaderValue::from_static(value));
            assert_eq!(notify_attempt(&headers), kept, "{value:?}");
        }
    }
}
